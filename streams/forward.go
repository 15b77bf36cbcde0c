package streams

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"gostream/durable"
	"gostream/metadata"
	"gostream/transport"
)

// Forwarding: a broker that does not lead a stream sends each operation
// to the one that does as a typed transport request (transport/stream.go);
// Handle serves them on the leader. A *durable.Refusal travels in the
// response (transport.StreamRefusal); any other error is the frame's.

func refusalToWire(r *durable.Refusal) *transport.StreamRefusal {
	return &transport.StreamRefusal{Status: uint16(r.Status), Message: r.Message, Closed: r.Closed, Tail: r.Tail,
		ProducerEpoch: r.ProducerEpoch, ExpectedSeq: r.ExpectedSeq, ReceivedSeq: r.ReceivedSeq}
}

func refusalFromWire(r *transport.StreamRefusal) *durable.Refusal {
	return &durable.Refusal{Status: int(r.Status), Message: r.Message, Closed: r.Closed, Tail: r.Tail,
		ProducerEpoch: r.ProducerEpoch, ExpectedSeq: r.ExpectedSeq, ReceivedSeq: r.ReceivedSeq}
}

// refused splits a leader's error into the refusal that travels in the
// response and the error that is the frame's.
func refused(err error) (*transport.StreamRefusal, error) {
	var ref *durable.Refusal
	if errors.As(err, &ref) {
		return refusalToWire(ref), nil
	}
	return nil, err
}

func infoToWire(i *durable.Info) transport.StreamStatus {
	return transport.StreamStatus{ContentType: i.ContentType, TTL: i.TTL, ExpiresAt: i.ExpiresAt, Tail: i.Tail, Closed: i.Closed}
}

func infoFromWire(s *transport.StreamStatus) durable.Info {
	return durable.Info{ContentType: s.ContentType, TTL: s.TTL, ExpiresAt: s.ExpiresAt, Tail: s.Tail, Closed: s.Closed}
}

func recordsToWire(recs []logRecord) []transport.StreamRecord {
	if recs == nil {
		return nil
	}
	out := make([]transport.StreamRecord, len(recs))
	for i, r := range recs {
		out[i] = transport.StreamRecord{Offset: r.Offset, Kind: r.Kind, Data: r.Data}
	}
	return out
}

func recordsFromWire(recs []transport.StreamRecord) []logRecord {
	if recs == nil {
		return nil
	}
	out := make([]logRecord, len(recs))
	for i, r := range recs {
		out[i] = logRecord{Offset: r.Offset, Kind: r.Kind, Data: r.Data}
	}
	return out
}

func clampInt32(v int) int32 { return int32(max(min(v, math.MaxInt32), math.MinInt32)) }

// waitMs is a read's wait on the wire.
func waitMs(d time.Duration) int32 {
	return int32(min(max(d, 0), maxReadWait) / time.Millisecond)
}

func headFromWire(resp *transport.StreamHeadResponse) (*headResult, error) {
	if resp.Refusal != nil {
		return nil, refusalFromWire(resp.Refusal)
	}
	return &headResult{Info: infoFromWire(&resp.Status), Ready: resp.Ready, LogEnd: resp.LogEnd, Pos: resp.Pos}, nil
}

func headToWire(h *headResult, err error) (transport.Message, error) {
	if err != nil {
		ref, err := refused(err)
		if err != nil {
			return nil, err
		}
		return &transport.StreamHeadResponse{Refusal: ref}, nil
	}
	return &transport.StreamHeadResponse{Status: infoToWire(&h.Info), Ready: h.Ready, LogEnd: h.LogEnd, Pos: h.Pos}, nil
}

func (s *Server) forwardHead(ctx context.Context, addr string, t *metadata.Topic) (*headResult, error) {
	var resp transport.StreamHeadResponse
	if err := s.cfg.Call(ctx, addr, transport.APIStreamHead, &transport.StreamHeadRequest{Topic: t.Name, TopicID: t.ID}, &resp); err != nil {
		return nil, err
	}
	return headFromWire(&resp)
}

func (s *Server) forwardAppend(ctx context.Context, addr string, t *metadata.Topic, req *durable.AppendRequest) (*durable.AppendResult, error) {
	w := &transport.StreamAppendRequest{Topic: t.Name, TopicID: t.ID, ContentType: req.ContentType,
		HasSeq: req.HasSeq, Close: req.Close, Body: req.Body}
	if req.HasSeq {
		w.Seq = req.Seq
	}
	if p := req.Producer; p != nil {
		w.Producer = &transport.StreamProducer{ID: p.ID, Epoch: p.Epoch, Seq: p.Seq}
	}
	var resp transport.StreamAppendResponse
	if err := s.cfg.Call(ctx, addr, transport.APIStreamAppend, w, &resp); err != nil {
		return nil, err
	}
	if resp.Refusal != nil {
		return nil, refusalFromWire(resp.Refusal)
	}
	return &durable.AppendResult{Tail: resp.Tail, Closed: resp.Closed, Duplicate: resp.Duplicate, ProducerSeq: resp.ProducerSeq}, nil
}

func (s *Server) forwardRead(ctx context.Context, addr string, t *metadata.Topic, req *durable.ReadRequest) (*durable.ReadResult, error) {
	w := &transport.StreamReadRequest{Topic: t.Name, TopicID: t.ID, Offset: req.Offset, MaxBytes: clampInt32(req.MaxBytes), WaitMs: waitMs(req.Wait)}
	var resp transport.StreamReadResponse
	if err := s.cfg.Call(ctx, addr, transport.APIStreamRead, w, &resp); err != nil {
		return nil, err
	}
	if resp.Refusal != nil {
		return nil, refusalFromWire(resp.Refusal)
	}
	res := &durable.ReadResult{Info: infoFromWire(&resp.Status), Start: resp.Start, Next: resp.Next,
		UpToDate: resp.UpToDate, Closed: resp.Closed, TimedOut: resp.TimedOut}
	if len(resp.Messages) > 0 {
		res.Messages = make([]durable.Message, len(resp.Messages))
		for i, m := range resp.Messages {
			res.Messages[i] = durable.Message{Data: m.Data, Next: m.Next}
		}
	}
	return res, nil
}

func (s *Server) forwardInit(ctx context.Context, addr string, t *metadata.Topic, req *initRequest) (*headResult, error) {
	w := &transport.StreamInitRequest{Topic: t.Name, TopicID: t.ID, ExpectEnd: req.ExpectEnd, Records: recordsToWire(req.Records)}
	var resp transport.StreamHeadResponse
	if err := s.cfg.Call(ctx, addr, transport.APIStreamInit, w, &resp); err != nil {
		return nil, err
	}
	return headFromWire(&resp)
}

func (s *Server) forwardLog(ctx context.Context, addr string, t *metadata.Topic, req *logRequest) (*logResult, error) {
	w := &transport.StreamLogRequest{Topic: t.Name, TopicID: t.ID, From: req.From, To: req.To, MaxBytes: clampInt32(req.MaxBytes)}
	var resp transport.StreamLogResponse
	if err := s.cfg.Call(ctx, addr, transport.APIStreamLog, w, &resp); err != nil {
		return nil, err
	}
	if resp.Refusal != nil {
		return nil, refusalFromWire(resp.Refusal)
	}
	return &logResult{Records: recordsFromWire(resp.Records), Pos: resp.Pos}, nil
}

// APIs are the APIs Handle serves.
var APIs = []transport.API{transport.APIStreamAppend, transport.APIStreamRead, transport.APIStreamHead, transport.APIStreamInit, transport.APIStreamLog}

// Handle serves an operation another broker forwarded to this one, the
// stream's leader: it decodes the request (an error matching
// transport.ErrInvalidRequest when it does not), and the Reply does the
// operation and encodes its answer. A read that waits is marked so
// (transport.Request.Waits): it holds no in-flight slot of its
// connection. Errors are the leader's (its sentinels and those of
// transport and replication), for the caller to map to wire codes.
func (s *Server) Handle(req *transport.Request) transport.Reply {
	api := transport.API(req.API)
	decode := func(m transport.Message) error {
		if err := transport.Unmarshal(req.Body, m); err != nil {
			return fmt.Errorf("%w: %s: %v", transport.ErrInvalidRequest, api, err)
		}
		return nil
	}
	l := s.leader
	switch api {
	case transport.APIStreamAppend:
		var r transport.StreamAppendRequest
		if err := decode(&r); err != nil {
			return transport.Immediate(nil, err)
		}
		a := &durable.AppendRequest{ContentType: r.ContentType, Seq: r.Seq, HasSeq: r.HasSeq, Close: r.Close, Body: r.Body}
		if p := r.Producer; p != nil {
			a.Producer = &durable.Producer{ID: p.ID, Epoch: p.Epoch, Seq: p.Seq}
		}
		return func(ctx context.Context) (transport.Message, error) {
			res, err := l.append(ctx, r.Topic, r.TopicID, a)
			if err != nil {
				ref, err := refused(err)
				if err != nil {
					return nil, err
				}
				return &transport.StreamAppendResponse{Refusal: ref}, nil
			}
			return &transport.StreamAppendResponse{Tail: res.Tail, Closed: res.Closed, Duplicate: res.Duplicate, ProducerSeq: res.ProducerSeq}, nil
		}
	case transport.APIStreamRead:
		var r transport.StreamReadRequest
		if err := decode(&r); err != nil {
			return transport.Immediate(nil, err)
		}
		rr := &durable.ReadRequest{Offset: r.Offset, MaxBytes: int(r.MaxBytes), Wait: time.Duration(max(r.WaitMs, 0)) * time.Millisecond}
		req.Waits = rr.Wait > 0
		return func(ctx context.Context) (transport.Message, error) {
			res, err := l.read(ctx, r.Topic, r.TopicID, rr)
			if err != nil {
				ref, err := refused(err)
				if err != nil {
					return nil, err
				}
				return &transport.StreamReadResponse{Refusal: ref}, nil
			}
			out := &transport.StreamReadResponse{Status: infoToWire(&res.Info), Start: res.Start, Next: res.Next,
				UpToDate: res.UpToDate, Closed: res.Closed, TimedOut: res.TimedOut}
			if len(res.Messages) > 0 {
				out.Messages = make([]transport.StreamMessage, len(res.Messages))
				for i, m := range res.Messages {
					out.Messages[i] = transport.StreamMessage{Data: m.Data, Next: m.Next}
				}
			}
			return out, nil
		}
	case transport.APIStreamHead:
		var r transport.StreamHeadRequest
		if err := decode(&r); err != nil {
			return transport.Immediate(nil, err)
		}
		return func(ctx context.Context) (transport.Message, error) {
			return headToWire(l.head(ctx, r.Topic, r.TopicID))
		}
	case transport.APIStreamInit:
		var r transport.StreamInitRequest
		if err := decode(&r); err != nil {
			return transport.Immediate(nil, err)
		}
		return func(ctx context.Context) (transport.Message, error) {
			return headToWire(l.init(ctx, r.Topic, r.TopicID, &initRequest{ExpectEnd: r.ExpectEnd, Records: recordsFromWire(r.Records)}))
		}
	case transport.APIStreamLog:
		var r transport.StreamLogRequest
		if err := decode(&r); err != nil {
			return transport.Immediate(nil, err)
		}
		return func(ctx context.Context) (transport.Message, error) {
			res, err := l.readLog(ctx, r.Topic, r.TopicID, &logRequest{From: r.From, To: r.To, MaxBytes: int(r.MaxBytes)})
			if err != nil {
				ref, err := refused(err)
				if err != nil {
					return nil, err
				}
				return &transport.StreamLogResponse{Refusal: ref}, nil
			}
			return &transport.StreamLogResponse{Records: recordsToWire(res.Records), Pos: res.Pos}, nil
		}
	}
	return transport.Immediate(nil, fmt.Errorf("%w: API %s is not a stream operation", transport.ErrInvalidRequest, api))
}
