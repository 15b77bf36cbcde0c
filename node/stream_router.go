package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"gostream/controller"
	"gostream/durable"
	"gostream/metadata"
	"gostream/transport"
)

// dsRouter is the node's durable.Backend: it finds each stream's topic in
// the metadata and has the operation done by the stream's leader, here
// or, over the transport, on the broker that leads it; it creates and
// deletes streams through the controller.
type dsRouter struct {
	n      *Node
	leader *dsLeader
	// rf is the replication factor of new streams (0: min(3, brokers)).
	rf int
	// forwardTimeout bounds a forwarded operation, besides its wait.
	forwardTimeout time.Duration
}

var _ durable.Backend = (*dsRouter)(nil)

// dsOpResult is the JSON of a forwarded operation's answer.
type dsOpResult struct {
	Refusal *durable.Refusal `json:"refusal,omitempty"`
	Result  json.RawMessage  `json:"result,omitempty"`
}

// topic finds a stream's topic; a stream deleted while forks of it remain
// is Gone. A stream this broker does not know may be one created through
// another node that this broker has not heard of yet: it asks the
// controller before it answers 404.
func (r *dsRouter) topic(ctx context.Context, path string) (*metadata.Topic, error) {
	name, err := durable.TopicFor(path)
	if err != nil {
		return nil, durable.Refuse(http.StatusBadRequest, "%v", err)
	}
	meta := r.n.broker.Metadata()
	if meta == nil {
		return nil, fmt.Errorf("%w: broker %d has no metadata yet", transport.ErrNotReady, r.n.cfg.ID)
	}
	t := meta.Topic(name)
	if t == nil {
		if err := r.n.refreshMetadata(ctx); err != nil {
			r.n.logger.Debug("cannot refresh metadata", "err", err)
		}
		t = r.n.broker.Metadata().Topic(name)
	}
	if t == nil || t.Stream == nil {
		return nil, durable.NotFound(path)
	}
	if t.Stream.Path != path {
		// Two paths with one hash: the second is refused, never merged.
		return nil, durable.Refuse(http.StatusConflict, "stream path %q collides with the stream %q", path, t.Stream.Path)
	}
	if t.Stream.Deleted {
		return nil, durable.Gone(path)
	}
	return t, nil
}

// retryable reports an error after which the operation was provably not
// done, so it may be sent again: no leader yet, the metadata moving, a
// new leader not ready.
func retryable(err error) bool {
	return errors.Is(err, transport.ErrNotLeader) || errors.Is(err, transport.ErrNotReady) ||
		errors.Is(err, transport.ErrUnknownTopicID) || errors.Is(err, transport.ErrNotSent)
}

// call has op done by the leader of t's stream, again for a few seconds
// while it fails in a way that shows it was not done.
func (r *dsRouter) call(ctx context.Context, t *metadata.Topic, op string, args any, payload []byte, wait time.Duration, out any) ([][]byte, error) {
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(3 * time.Second)
	for attempt := 0; ; attempt++ {
		items, err := r.callOnce(ctx, t, op, raw, payload, wait, out)
		if err == nil || !retryable(err) || ctx.Err() != nil {
			return items, err
		}
		if errors.Is(err, transport.ErrUnknownTopicID) {
			// The leader does not know this incarnation of the topic: it
			// is behind, or the topic went and this broker missed it.
			if err := r.n.refreshMetadata(ctx); err != nil {
				r.n.logger.Debug("cannot refresh metadata", "err", err)
			}
			if nt := r.n.broker.Metadata().Topic(t.Name); nt == nil || nt.ID != t.ID {
				return nil, durable.NotFound(t.Stream.Path)
			}
		}
		if time.Now().After(deadline) {
			return items, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(time.Duration(20*(attempt+1)) * time.Millisecond):
		}
		if nt := r.n.broker.Metadata().Topic(t.Name); nt != nil && nt.ID == t.ID {
			t = nt
		}
	}
}

func (r *dsRouter) callOnce(ctx context.Context, t *metadata.Topic, op string, raw, payload []byte, wait time.Duration, out any) ([][]byte, error) {
	leader := t.Partitions[0].Leader
	req := &transport.StreamRequest{Op: op, Topic: t.Name, TopicID: t.ID, Args: raw, Payload: payload}
	var resp *transport.StreamResponse
	if leader == r.n.cfg.ID {
		var err error
		if resp, err = r.serve(ctx, req); err != nil {
			return nil, err
		}
	} else {
		b, ok := r.n.broker.Metadata().Broker(leader)
		if !ok || b.Addr == "" {
			return nil, fmt.Errorf("%w: the stream's leader %d has no address", transport.ErrBrokerNotAvailable, leader)
		}
		cctx, cancel := context.WithTimeout(ctx, r.forwardTimeout+wait)
		defer cancel()
		resp = &transport.StreamResponse{}
		if err := r.n.pool.Call(cctx, b.Addr, transport.APIStream, req, resp); err != nil {
			return nil, fmt.Errorf("the stream's leader, broker %d: %w", leader, err)
		}
	}
	var res dsOpResult
	if err := json.Unmarshal(resp.Args, &res); err != nil {
		return nil, fmt.Errorf("%w: answer of %s: %v", transport.ErrMalformed, op, err)
	}
	if res.Refusal != nil {
		return nil, res.Refusal
	}
	if out != nil {
		if err := json.Unmarshal(res.Result, out); err != nil {
			return nil, fmt.Errorf("%w: answer of %s: %v", transport.ErrMalformed, op, err)
		}
	}
	return resp.Items, nil
}

// serve does one operation as the stream's leader: for this node's own
// router, and for the APIStream requests of the others.
func (r *dsRouter) serve(ctx context.Context, req *transport.StreamRequest) (*transport.StreamResponse, error) {
	var (
		result any
		items  [][]byte
		err    error
	)
	l := r.leader
	switch req.Op {
	case "append":
		var a durable.AppendRequest
		if err = json.Unmarshal(req.Args, &a); err == nil {
			a.Body = req.Payload
			result, err = l.append(ctx, req.Topic, req.TopicID, &a)
		}
	case "read":
		var a durable.ReadRequest
		if err = json.Unmarshal(req.Args, &a); err == nil {
			a.Wait = min(a.Wait, 10*time.Minute)
			var res *durable.ReadResult
			if res, err = l.read(ctx, req.Topic, req.TopicID, &a); err == nil {
				result = res
				for _, m := range res.Messages {
					items = append(items, m.Data)
				}
			}
		}
	case "head":
		result, err = l.head(ctx, req.Topic, req.TopicID)
	case "init":
		var a dsInitRequest
		if err = json.Unmarshal(req.Args, &a); err == nil {
			if err = dsDecodeData(&a, req); err == nil {
				result, err = l.init(ctx, req.Topic, req.TopicID, &a)
			}
		}
	case "log":
		var a dsLogRequest
		if err = json.Unmarshal(req.Args, &a); err == nil {
			var res *dsLogResult
			if res, err = l.log(ctx, req.Topic, req.TopicID, &a); err == nil {
				result = res
				for _, rec := range res.Records {
					items = append(items, rec.Data)
				}
			}
		}
	default:
		err = fmt.Errorf("%w: stream operation %q", transport.ErrInvalidRequest, req.Op)
	}
	var out dsOpResult
	var ref *durable.Refusal
	switch {
	case errors.As(err, &ref):
		out.Refusal = ref
	case err != nil:
		var se *json.SyntaxError
		if errors.As(err, &se) {
			err = fmt.Errorf("%w: %v", transport.ErrInvalidRequest, err)
		}
		return nil, err
	default:
		if out.Result, err = json.Marshal(result); err != nil {
			return nil, err
		}
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	return &transport.StreamResponse{Args: raw, Items: items}, nil
}

// dsDecodeData gives an init request's records their data, which travel
// as the request's items in the payload: each record's data length-
// prefixed, in order.
func dsDecodeData(a *dsInitRequest, req *transport.StreamRequest) error {
	d := transport.NewDecoder(req.Payload)
	for i := range a.Records {
		a.Records[i].Data = d.Bytes32()
	}
	return d.Finish()
}

func dsEncodeData(recs []dsRecord) []byte {
	e := transport.NewEncoder(nil)
	for _, r := range recs {
		e.Bytes32(r.Data)
	}
	return e.Bytes()
}

// createTopic asks the controller for the topic of a stream: created, or
// the one there.
func (r *dsRouter) createTopic(ctx context.Context, topic string, s *metadata.Stream) (*controller.StreamResult, error) {
	if c := r.n.activeController(); c != nil {
		return c.CreateStream(ctx, topic, r.rf, s)
	}
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	return r.admin(ctx, &transport.StreamAdminRequest{Op: "create", Topic: topic, ReplicationFactor: int32(r.rf), Stream: raw})
}

// deleteTopic asks the controller to delete a stream's topic: the
// incarnation id, or with id "" whichever is there.
func (r *dsRouter) deleteTopic(ctx context.Context, topic, id string) (*controller.StreamResult, error) {
	if c := r.n.activeController(); c != nil {
		return c.DeleteStream(ctx, topic, id)
	}
	return r.admin(ctx, &transport.StreamAdminRequest{Op: "delete", Topic: topic, TopicID: id})
}

// admin sends a stream's topic change to the controller.
func (r *dsRouter) admin(ctx context.Context, req *transport.StreamAdminRequest) (*controller.StreamResult, error) {
	var resp transport.StreamAdminResponse
	cctx, cancel := context.WithTimeout(ctx, r.forwardTimeout+10*time.Second)
	defer cancel()
	if ctrl, err := r.n.callController(cctx, transport.APIStreamAdmin, req, &resp); err != nil {
		return nil, fmt.Errorf("ask the controller %s: %w", ctrl, err)
	}
	var res controller.StreamResult
	if err := json.Unmarshal(resp.Result, &res); err != nil {
		return nil, fmt.Errorf("%w: the controller's answer: %v", transport.ErrMalformed, err)
	}
	return &res, nil
}

// Head implements durable.Backend.
func (r *dsRouter) Head(ctx context.Context, path string) (*durable.Info, error) {
	h, err := r.head(ctx, path)
	if err != nil {
		return nil, err
	}
	if !h.Ready {
		return nil, durable.NotFound(path)
	}
	return &h.Info, nil
}

func (r *dsRouter) head(ctx context.Context, path string) (*dsHeadResult, error) {
	t, err := r.topic(ctx, path)
	if err != nil {
		return nil, err
	}
	var h dsHeadResult
	if _, err := r.call(ctx, t, "head", struct{}{}, nil, 0, &h); err != nil {
		return nil, err
	}
	return &h, nil
}

// Append implements durable.Backend.
func (r *dsRouter) Append(ctx context.Context, req *durable.AppendRequest) (*durable.AppendResult, error) {
	t, err := r.topic(ctx, req.Path)
	if err != nil {
		return nil, err
	}
	var res durable.AppendResult
	if _, err := r.call(ctx, t, "append", req, req.Body, 0, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Read implements durable.Backend.
func (r *dsRouter) Read(ctx context.Context, req *durable.ReadRequest) (*durable.ReadResult, error) {
	t, err := r.topic(ctx, req.Path)
	if err != nil {
		return nil, err
	}
	var res durable.ReadResult
	items, err := r.call(ctx, t, "read", req, nil, req.Wait, &res)
	if err != nil {
		return nil, err
	}
	// The data comes beside the JSON, one item per message.
	if len(items) != len(res.Messages) {
		return nil, fmt.Errorf("%w: a read answered %d messages and %d data items", transport.ErrMalformed, len(res.Messages), len(items))
	}
	for i := range res.Messages {
		res.Messages[i].Data = items[i]
	}
	return &res, nil
}

// Delete implements durable.Backend.
func (r *dsRouter) Delete(ctx context.Context, path string) error {
	t, err := r.topic(ctx, path)
	if err != nil {
		return err
	}
	res, err := r.deleteTopic(ctx, t.Name, "")
	if err != nil {
		return err
	}
	switch res.Outcome {
	case controller.StreamNotFound:
		return durable.NotFound(path)
	case controller.StreamGone:
		return durable.Gone(path)
	}
	return nil
}
