package node

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"gostream/broker"
	"net/http"
	"sync"
	"time"

	"gostream/durable"
	"gostream/metadata"
	"gostream/record"
	"gostream/transport"
)

// The leader's side of Durable Streams (docs/durable-streams.md): a
// stream is the one partition of its topic, and its leader keeps, per
// stream, what the protocol checks an append against (tail, closed,
// producers, Stream-Seq), rebuilt from its own log each time it becomes
// leader. Every append is one batch, so it is in the log whole or not at
// all; reads return only what lies below the high watermark.
//
// Records: the key's one byte says what the record is, the first record
// of every batch carries the batch's metadata in headers.
const (
	dsData   = 'd' // stream data: one append's body (JSON mode: its values, joined by commas)
	dsInit   = 'i' // the stream is ready: its creation (and a fork's copy) is complete
	dsClose  = 'c' // the stream is closed
	dsFiller = 'f' // holds an offset and nothing else (a fork's copy of a source's control record)
)

// Header keys of a batch's first record.
const (
	dsHeaderPos       = "p"   // bytes of stream data before the batch (8 bytes, big endian)
	dsHeaderProducer  = "pid" // idempotent producer id
	dsHeaderEpoch     = "pep" // its epoch (8 bytes)
	dsHeaderSeq       = "psq" // its sequence (8 bytes)
	dsHeaderStreamSeq = "sq"  // the Stream-Seq of the append
)

// dsRecord is one record of a stream's log.
type dsRecord struct {
	Offset int64  `json:"offset"`
	Kind   byte   `json:"kind"`
	Data   []byte `json:"-"`
}

// dsBatch is one batch of a stream's log.
type dsBatch struct {
	pos       int64 // bytes of data before it
	producer  *durable.Producer
	streamSeq *string
	records   []dsRecord
	next      int64 // offset after it (decoded batches)
}

func be64(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

func (b *dsBatch) encode() (record.Batch, error) {
	rs := make([]record.Record, len(b.records))
	for i, r := range b.records {
		rs[i] = record.Record{Key: []byte{r.Kind}, Value: r.Data}
	}
	h := []record.Header{{Key: dsHeaderPos, Value: be64(b.pos)}}
	if p := b.producer; p != nil {
		h = append(h, record.Header{Key: dsHeaderProducer, Value: []byte(p.ID)},
			record.Header{Key: dsHeaderEpoch, Value: be64(p.Epoch)}, record.Header{Key: dsHeaderSeq, Value: be64(p.Seq)})
	}
	if b.streamSeq != nil {
		h = append(h, record.Header{Key: dsHeaderStreamSeq, Value: []byte(*b.streamSeq)})
	}
	rs[0].Headers = h
	return record.AppendBatch(nil, rs)
}

// eachDSBatch decodes the batches of buf in order and calls fn with each
// until it returns false; a batch that is not a stream's is an error.
func eachDSBatch(buf []byte, fn func(*dsBatch) bool) error {
	var derr error
	err := record.Batches(buf, func(rb record.Batch) bool {
		b, err := decodeDSBatch(rb)
		if err != nil {
			derr = err
			return false
		}
		return fn(b)
	})
	if err == nil {
		err = derr
	}
	return err
}

// errDSRecord is a record that is not what a stream's leader writes.
var errDSRecord = errors.New("not a record of a Durable Streams log")

func decodeDSBatch(b record.Batch) (*dsBatch, error) {
	out := &dsBatch{next: b.NextOffset()}
	first := true
	var derr error
	err := b.Records(func(r *record.Record) bool {
		if len(r.Key) != 1 {
			derr = fmt.Errorf("%w: record %d has a key of %d bytes", errDSRecord, r.Offset, len(r.Key))
			return false
		}
		switch r.Key[0] {
		case dsData, dsInit, dsClose, dsFiller:
		default:
			derr = fmt.Errorf("%w: record %d is of kind %q", errDSRecord, r.Offset, r.Key[0])
			return false
		}
		if first {
			first = false
			var p durable.Producer
			var hasP bool
			for _, h := range r.Headers {
				switch h.Key {
				case dsHeaderPos, dsHeaderEpoch, dsHeaderSeq:
					if len(h.Value) != 8 {
						derr = fmt.Errorf("%w: header %s of record %d has %d bytes", errDSRecord, h.Key, r.Offset, len(h.Value))
						return false
					}
					v := int64(binary.BigEndian.Uint64(h.Value))
					switch h.Key {
					case dsHeaderPos:
						out.pos = v
					case dsHeaderEpoch:
						p.Epoch = v
					default:
						p.Seq = v
					}
				case dsHeaderProducer:
					p.ID, hasP = string(h.Value), true
				case dsHeaderStreamSeq:
					s := string(h.Value)
					out.streamSeq = &s
				}
			}
			if hasP {
				out.producer = &p
			}
		}
		out.records = append(out.records, dsRecord{Offset: r.Offset, Kind: r.Key[0], Data: r.Value})
		return true
	})
	if err == nil {
		err = derr
	}
	return out, err
}

// dsStream is the leader's state of one stream, valid for one leadership
// (replica and leader epoch).
type dsStream struct {
	mu     sync.Mutex
	rep    *broker.Replica
	epoch  int32
	loaded bool
	err    error // the log could not be read

	// ready is set once the record that makes the stream ready is in the
	// leader's log, ackedReady once it is below the HW: a creator is told
	// the stream exists only then.
	ready      bool
	ackedReady bool
	tail       durable.Offset // after the last data record in the log
	closed     bool
	closedEnd  int64 // log end after the close record
	closedBy   *durable.Producer
	streamSeq  *string
	producers  map[string]*dsProducer
	// pending holds the tails of appends not yet known to be below the
	// HW; acked and ackedClosed are what readers are told.
	pending     []dsPending
	acked       durable.Offset
	ackedClosed bool
}

type dsProducer struct {
	epoch, seq int64
	end        int64 // log end after its last append
}

type dsPending struct {
	end    int64
	tail   durable.Offset
	closed bool
	ready  bool
}

// view moves the acknowledged tail up to the HW. Called with s.mu held.
func (s *dsStream) view() {
	hw := s.rep.Part.HighWatermark()
	i := 0
	for ; i < len(s.pending) && s.pending[i].end <= hw; i++ {
		s.acked, s.ackedClosed, s.ackedReady = s.pending[i].tail, s.pending[i].closed, s.pending[i].ready
	}
	s.pending = s.pending[i:]
}

// apply adds one batch of the log to the state.
func (s *dsStream) apply(b *dsBatch) {
	pos := b.pos
	for _, r := range b.records {
		switch r.Kind {
		case dsData:
			pos += int64(len(r.Data))
			s.tail = durable.Offset{Record: r.Offset + 1, Byte: pos}
		case dsInit:
			s.ready = true
		case dsClose:
			s.closed, s.closedEnd, s.closedBy = true, b.next, b.producer
		}
	}
	if p := b.producer; p != nil {
		s.producers[p.ID] = &dsProducer{epoch: p.Epoch, seq: p.Seq, end: b.next}
	}
	if b.streamSeq != nil {
		s.streamSeq = b.streamSeq
	}
	s.pending = append(s.pending, dsPending{end: b.next, tail: s.tail, closed: s.closed, ready: s.ready})
}

// load rebuilds the state from the replica's whole log. Called with s.mu
// held.
func (s *dsStream) load(ctx context.Context) error {
	s.ready, s.ackedReady, s.tail, s.closed, s.closedEnd, s.closedBy, s.streamSeq = false, false, durable.Offset{}, false, 0, nil, nil
	s.producers, s.pending, s.acked, s.ackedClosed = map[string]*dsProducer{}, nil, durable.Offset{}, false
	log := s.rep.Log
	off, end := log.LogStartOffset(), log.LogEndOffset()
	for off < end {
		buf, err := log.Read(ctx, off, 1<<20, end, nil)
		if err != nil {
			return fmt.Errorf("read %s at offset %d: %w", s.rep.Part.Topic, off, err)
		}
		if len(buf) == 0 {
			return fmt.Errorf("read %s at offset %d: nothing below the log end %d", s.rep.Part.Topic, off, end)
		}
		err = eachDSBatch(buf, func(b *dsBatch) bool {
			s.apply(b)
			off = b.next
			s.view()
			return true
		})
		if err != nil {
			return fmt.Errorf("stream log %s at offset %d: %w", s.rep.Part.Topic, off, err)
		}
	}
	s.view()
	s.loaded = true
	return nil
}

// dsAppendWait bounds how long an append waits for its replication.
const dsAppendWait = 15 * time.Second

// produce appends b and returns the log end after it and the wait for its
// acknowledgement. Called with s.mu held; the state is changed only once
// the batch is in the leader's log.
func (s *dsStream) produce(b *dsBatch) (int64, func(context.Context) error, error) {
	batch, err := b.encode()
	if err != nil {
		return 0, nil, err
	}
	wait, err := s.rep.Part.Produce(batch)
	if err != nil {
		return 0, nil, err
	}
	// Only the stream's leader appends to its log, under s.mu.
	end := s.rep.Log.LogEndOffset()
	first := end - int64(len(b.records))
	for i := range b.records {
		b.records[i].Offset = first + int64(i)
	}
	b.next = end
	s.apply(b)
	return end, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, dsAppendWait)
		defer cancel()
		if _, err := wait(ctx); err != nil {
			// What the log holds is no longer known to be what the state
			// says: the next request rebuilds it.
			s.mu.Lock()
			s.loaded = false
			s.mu.Unlock()
			return err
		}
		return nil
	}, nil
}

// waitAcked waits until the HW reaches end.
func (s *dsStream) waitAcked(ctx context.Context, end int64) error {
	ctx, cancel := context.WithTimeout(ctx, dsAppendWait)
	defer cancel()
	for {
		hw := s.rep.Part.HighWatermark()
		if hw >= end {
			return nil
		}
		if _, err := s.rep.Part.Fetch(ctx, hw, 1, time.Second); err != nil {
			return err
		}
	}
}

// dsLeader is the node's leader side: the state of the streams it leads,
// and when each was last read or written (for TTLs).
type dsLeader struct {
	n       *Node
	mu      sync.Mutex
	streams map[string]*dsStream // by topic id
	touched map[string]time.Time // by topic id
}

func newDSLeader(n *Node) *dsLeader {
	return &dsLeader{n: n, streams: map[string]*dsStream{}, touched: map[string]time.Time{}}
}

// stream returns the state of a stream this broker leads, loaded and
// locked, with its topic.
func (l *dsLeader) stream(ctx context.Context, topic, id string) (*dsStream, *metadata.Topic, error) {
	t, rep, err := l.n.broker.Lookup(topic, id, 0)
	if err != nil {
		return nil, nil, err
	}
	if t.Stream == nil {
		return nil, nil, fmt.Errorf("%w: %s is not a stream's topic", transport.ErrInvalidRequest, topic)
	}
	if rep == nil {
		return nil, nil, notLeader(t, 0)
	}
	st := rep.Part.State()
	if st.Leader != l.n.cfg.ID {
		return nil, nil, notLeader(t, 0)
	}
	l.mu.Lock()
	s := l.streams[t.ID]
	if s == nil || s.rep != rep || s.epoch != st.LeaderEpoch {
		s = &dsStream{rep: rep, epoch: st.LeaderEpoch}
		l.streams[t.ID] = s
	}
	if _, ok := l.touched[t.ID]; !ok {
		l.touched[t.ID] = time.Now()
	}
	l.mu.Unlock()
	s.mu.Lock()
	if !s.loaded {
		if err := s.load(ctx); err != nil {
			s.mu.Unlock()
			l.n.logger.Error("cannot rebuild a stream from its log", "stream", t.Stream.Path, "topic", topic, "err", err)
			return nil, nil, fmt.Errorf("%w: %v", transport.ErrStorageFailed, err)
		}
	}
	s.view()
	return s, t, nil
}

func (l *dsLeader) touch(id string) {
	l.mu.Lock()
	l.touched[id] = time.Now()
	l.mu.Unlock()
}

// expired reports whether the stream's time is up: its expiry time passed,
// or its TTL since it was last read or written here.
func (l *dsLeader) expired(t *metadata.Topic) bool {
	now := time.Now()
	if at := t.Stream.ExpiresAt; at != "" {
		if e, err := time.Parse(time.RFC3339Nano, at); err == nil && !now.Before(e) {
			return true
		}
	}
	if ttl := t.Stream.TTL; ttl != nil {
		l.mu.Lock()
		last, ok := l.touched[t.ID]
		l.mu.Unlock()
		if ok && !now.Before(last.Add(time.Duration(*ttl)*time.Second)) {
			return true
		}
	}
	return false
}

// live checks that a stream may be served: it is ready and its time is
// not up (an expired stream is deleted, through the controller).
func (l *dsLeader) live(ctx context.Context, s *dsStream, t *metadata.Topic) error {
	if t.Stream.Deleted {
		return durable.Gone(t.Stream.Path)
	}
	if l.expired(t) {
		s.mu.Unlock()
		res, err := l.n.ds.deleteTopic(ctx, t.Name, t.ID)
		s.mu.Lock()
		if err != nil {
			return err
		}
		if res.Outcome == "soft-deleted" || res.Outcome == "gone" {
			return durable.Gone(t.Stream.Path)
		}
		return durable.NotFound(t.Stream.Path)
	}
	if !s.ackedReady {
		return durable.NotFound(t.Stream.Path)
	}
	return nil
}

func (s *dsStream) info(t *metadata.Topic) *durable.Info {
	return &durable.Info{ContentType: t.Stream.ContentType, TTL: t.Stream.TTL, ExpiresAt: t.Stream.ExpiresAt,
		Tail: s.acked.Token(), Closed: s.ackedClosed}
}

// head answers HEAD, which does not count as a read for the TTL.
func (l *dsLeader) head(ctx context.Context, topic, id string) (*dsHeadResult, error) {
	s, t, err := l.stream(ctx, topic, id)
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if t.Stream.Deleted {
		return nil, durable.Gone(t.Stream.Path)
	}
	if s.ackedReady {
		if err := l.live(ctx, s, t); err != nil {
			return nil, err
		}
	}
	return &dsHeadResult{Info: *s.info(t), Ready: s.ackedReady, LogEnd: s.rep.Log.LogEndOffset(), Pos: s.tail.Byte}, nil
}

// dsHeadResult is HEAD's answer, with what a creator needs to finish a
// creation: whether it is complete, and where the log ends.
type dsHeadResult struct {
	Info   durable.Info `json:"info"`
	Ready  bool         `json:"ready"`
	LogEnd int64        `json:"log_end"`
	Pos    int64        `json:"pos"`
}

func (l *dsLeader) append(ctx context.Context, topic, id string, req *durable.AppendRequest) (*durable.AppendResult, error) {
	s, t, err := l.stream(ctx, topic, id)
	if err != nil {
		return nil, err
	}
	locked := true
	defer func() {
		if locked {
			s.mu.Unlock()
		}
	}()
	if err := l.live(ctx, s, t); err != nil {
		return nil, err
	}
	l.touch(t.ID)
	p := req.Producer
	dup := func(end int64, seq int64) (*durable.AppendResult, error) {
		closed := s.closed
		s.mu.Unlock()
		locked = false
		if err := s.waitAcked(ctx, end); err != nil {
			return nil, err
		}
		s.mu.Lock()
		tail := s.acked.Token()
		s.mu.Unlock()
		return &durable.AppendResult{Tail: tail, Closed: closed, Duplicate: true, ProducerSeq: seq}, nil
	}
	if s.closed {
		if p != nil && s.closedBy != nil && *s.closedBy == *p {
			return dup(s.closedEnd, p.Seq)
		}
		if p == nil && len(req.Body) == 0 && req.Close {
			return dup(s.closedEnd, 0)
		}
		return nil, &durable.Refusal{Status: http.StatusConflict, Message: "the stream is closed: it takes no more appends", Closed: true, Tail: s.tail.Token()}
	}
	if len(req.Body) > 0 && !durable.SameContentType(req.ContentType, t.Stream.ContentType) {
		return nil, durable.Refuse(http.StatusConflict, "content type %q does not match the stream's %q", req.ContentType, t.Stream.ContentType)
	}
	if p != nil {
		cur := s.producers[p.ID]
		switch {
		case cur == nil && p.Seq != 0:
			exp, got := int64(0), p.Seq
			return nil, &durable.Refusal{Status: http.StatusConflict, Message: "producer sequence gap: a new producer starts at 0", ExpectedSeq: &exp, ReceivedSeq: &got}
		case cur == nil:
		case p.Epoch < cur.epoch:
			e := cur.epoch
			return nil, &durable.Refusal{Status: http.StatusForbidden, Message: fmt.Sprintf("stale producer epoch %d: the producer is at epoch %d", p.Epoch, cur.epoch), ProducerEpoch: &e}
		case p.Epoch > cur.epoch:
			if p.Seq != 0 {
				return nil, durable.Refuse(http.StatusBadRequest, "a new producer epoch starts at sequence 0, not %d", p.Seq)
			}
		case p.Seq <= cur.seq:
			return dup(cur.end, cur.seq)
		case p.Seq != cur.seq+1:
			exp, got := cur.seq+1, p.Seq
			return nil, &durable.Refusal{Status: http.StatusConflict, Message: "producer sequence gap", ExpectedSeq: &exp, ReceivedSeq: &got}
		}
	}
	if req.HasSeq && s.streamSeq != nil && req.Seq <= *s.streamSeq {
		return nil, durable.Refuse(http.StatusConflict, "Stream-Seq %q is not above the last one, %q", req.Seq, *s.streamSeq)
	}
	b := &dsBatch{pos: s.tail.Byte, producer: p}
	if req.HasSeq {
		seq := req.Seq
		b.streamSeq = &seq
	}
	if len(req.Body) > 0 {
		data, err := streamData(t.Stream.ContentType, req.Body, false)
		if err != nil {
			return nil, err
		}
		b.records = append(b.records, dsRecord{Kind: dsData, Data: data})
	}
	if req.Close {
		b.records = append(b.records, dsRecord{Kind: dsClose})
	}
	end, wait, err := s.produce(b)
	if err != nil {
		return nil, err
	}
	tail, closed := s.tail, s.closed
	s.mu.Unlock()
	locked = false
	if err := wait(ctx); err != nil {
		return nil, err
	}
	_ = end
	res := &durable.AppendResult{Tail: tail.Token(), Closed: closed}
	if p != nil {
		res.ProducerSeq = p.Seq
	}
	return res, nil
}

// streamData is what an append's body is stored as: the body, or in JSON
// mode its values (an array flattened one level) joined by commas. An
// empty array is refused, but at creation, where it creates nothing.
func streamData(ct string, body []byte, creating bool) ([]byte, error) {
	if !durable.IsJSON(ct) {
		return body, nil
	}
	if creating && (len(body) == 0 || isEmptyArray(body)) {
		return nil, nil
	}
	vals, err := durable.SplitJSON(body)
	if err != nil {
		return nil, durable.Refuse(http.StatusBadRequest, "%v", err)
	}
	return bytes.Join(vals, []byte{','}), nil
}

func isEmptyArray(b []byte) bool {
	b = bytes.TrimSpace(b)
	if len(b) < 2 || b[0] != '[' || b[len(b)-1] != ']' {
		return false
	}
	return len(bytes.TrimSpace(b[1:len(b)-1])) == 0
}

// read answers a read: the messages from the offset below the HW, up to
// about MaxBytes; with Wait, it waits for some when there are none at the
// acknowledged tail.
func (l *dsLeader) read(ctx context.Context, topic, id string, req *durable.ReadRequest) (*durable.ReadResult, error) {
	s, t, err := l.stream(ctx, topic, id)
	if err != nil {
		return nil, err
	}
	if err := l.live(ctx, s, t); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	l.touch(t.ID)
	off, kind, err := durable.ParseOffset(req.Offset)
	if err != nil {
		s.mu.Unlock()
		return nil, durable.Refuse(http.StatusBadRequest, "%v", err)
	}
	switch kind {
	case durable.AtStart:
		off = durable.Offset{}
	case durable.AtNow:
		off = s.acked
	default:
		switch {
		case off.Record > s.tail.Record:
			s.mu.Unlock()
			return nil, durable.Refuse(http.StatusBadRequest, "offset %s is past the stream's tail %s", req.Offset, s.tail.Token())
		case off.Record == s.tail.Record && off.Byte != s.tail.Byte, off.Record == s.acked.Record && off.Byte != s.acked.Byte:
			s.mu.Unlock()
			return nil, durable.Refuse(http.StatusBadRequest, "offset %s is not a position of this stream", req.Offset)
		}
	}
	s.mu.Unlock()
	maxBytes := max(req.MaxBytes, 1)
	var deadline time.Time
	if req.Wait > 0 {
		deadline = time.Now().Add(req.Wait)
	}
	for {
		hw := s.rep.Part.HighWatermark()
		msgs, next, err := readStream(ctx, s, off, maxBytes)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.view()
		acked, closed := s.acked, s.ackedClosed
		res := &durable.ReadResult{Info: *s.info(t), Messages: msgs, Start: off.Token(), Next: next.Token(),
			UpToDate: next == acked, Closed: closed && next == acked}
		s.mu.Unlock()
		if len(msgs) > 0 || res.Closed || !res.UpToDate || deadline.IsZero() {
			return res, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			res.TimedOut = true
			return res, nil
		}
		// Wait for the HW to pass what it was.
		if _, err := s.rep.Part.Fetch(ctx, hw, 1, left); err != nil {
			return nil, err
		}
		l.touch(t.ID)
	}
}

// readStream reads the data records from off below the HW.
func readStream(ctx context.Context, s *dsStream, off durable.Offset, maxBytes int) ([]durable.Message, durable.Offset, error) {
	res, err := s.rep.Part.Fetch(ctx, off.Record, maxBytes, 0)
	if err != nil {
		return nil, off, err
	}
	var msgs []durable.Message
	next, size := off, 0
	var refused error
	err = eachDSBatch(res.Batches, func(b *dsBatch) bool {
		pos := b.pos
		for _, r := range b.records {
			if r.Offset == off.Record && pos != off.Byte {
				refused = durable.Refuse(http.StatusBadRequest, "offset %s is not a position of this stream", off.Token())
				return false
			}
			if r.Kind != dsData {
				continue
			}
			pos += int64(len(r.Data))
			if r.Offset < off.Record {
				continue
			}
			if len(msgs) > 0 && size+len(r.Data) > maxBytes {
				return false
			}
			next = durable.Offset{Record: r.Offset + 1, Byte: pos}
			msgs = append(msgs, durable.Message{Data: r.Data, Next: next.Token()})
			size += len(r.Data)
		}
		return true
	})
	if refused != nil {
		return nil, off, refused
	}
	if err != nil {
		return nil, off, fmt.Errorf("%w: stream log %s: %v", transport.ErrStorageFailed, s.rep.Part.Topic, err)
	}
	return msgs, next, nil
}

// dsInitRequest is one step of a creation: records appended only where
// the log ends at ExpectEnd, so that a creation run again (after a failure
// part way) skips what is done. The step whose records hold dsInit makes
// the stream ready.
type dsInitRequest struct {
	ExpectEnd int64      `json:"expect_end"`
	Records   []dsRecord `json:"records"`
}

func (l *dsLeader) init(ctx context.Context, topic, id string, req *dsInitRequest) (*dsHeadResult, error) {
	s, t, err := l.stream(ctx, topic, id)
	if err != nil {
		return nil, err
	}
	locked := true
	defer func() {
		if locked {
			s.mu.Unlock()
		}
	}()
	end := s.rep.Log.LogEndOffset()
	if s.ready && !s.ackedReady {
		// The creation is in the log and not yet on every active replica
		// (its replication failed, or is on its way): the stream is not
		// there until it is, and appending it again would not make it so.
		return nil, durable.Refuse(http.StatusServiceUnavailable, "stream %q is created on its leader and not yet on every replica; retry", t.Stream.Path)
	}
	if s.ready || end != req.ExpectEnd || len(req.Records) == 0 {
		// Done before (or by another creator): say where the log is.
		return &dsHeadResult{Info: *s.info(t), Ready: s.ackedReady, LogEnd: end, Pos: s.tail.Byte}, nil
	}
	for _, r := range req.Records {
		if r.Kind != dsData && r.Kind != dsInit && r.Kind != dsClose && r.Kind != dsFiller {
			return nil, fmt.Errorf("%w: record kind %q", transport.ErrInvalidRequest, r.Kind)
		}
	}
	b := &dsBatch{pos: s.tail.Byte, records: req.Records}
	_, wait, err := s.produce(b)
	if err != nil {
		return nil, err
	}
	s.mu.Unlock()
	locked = false
	if err := wait(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.view()
	res := &dsHeadResult{Info: *s.info(t), Ready: s.ackedReady, LogEnd: s.rep.Log.LogEndOffset(), Pos: s.tail.Byte}
	s.mu.Unlock()
	l.touch(t.ID)
	return res, nil
}

// dsLogRequest asks for the records of [From, To) of a stream's log
// below its HW, up to about MaxBytes: what a fork copies.
type dsLogRequest struct {
	From     int64 `json:"from"`
	To       int64 `json:"to"`
	MaxBytes int   `json:"max_bytes"`
}

type dsLogResult struct {
	Records []dsRecord `json:"records"`
	// Pos is the position of the first record.
	Pos int64 `json:"pos"`
}

func (l *dsLeader) log(ctx context.Context, topic, id string, req *dsLogRequest) (*dsLogResult, error) {
	s, t, err := l.stream(ctx, topic, id)
	if err != nil {
		return nil, err
	}
	if err := l.live(ctx, s, t); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	s.mu.Unlock()
	res, err := s.rep.Part.Fetch(ctx, req.From, max(req.MaxBytes, 1), 0)
	if err != nil {
		return nil, err
	}
	out := &dsLogResult{}
	found := false
	err = eachDSBatch(res.Batches, func(b *dsBatch) bool {
		pos := b.pos
		for _, r := range b.records {
			if r.Offset >= req.From && r.Offset < req.To {
				if !found {
					found, out.Pos = true, pos
				}
				out.Records = append(out.Records, r)
			}
			if r.Kind == dsData {
				pos += int64(len(r.Data))
			}
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("%w: stream log %s: %v", transport.ErrStorageFailed, topic, err)
	}
	return out, nil
}

// sweep deletes the expired streams this broker leads and forgets the
// state of streams it no longer leads, every second until ctx ends.
func (l *dsLeader) sweep(ctx context.Context) error {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		meta := l.n.broker.Metadata()
		if meta == nil {
			continue
		}
		ids := map[string]bool{}
		var expired []*metadata.Topic
		for i := range meta.Topics {
			tp := &meta.Topics[i]
			if tp.Stream == nil || tp.Partitions[0].Leader != l.n.cfg.ID {
				continue
			}
			ids[tp.ID] = true
			if tp.Stream.Deleted || tp.Stream.TTL == nil && tp.Stream.ExpiresAt == "" {
				continue
			}
			l.mu.Lock()
			if _, ok := l.touched[tp.ID]; !ok {
				l.touched[tp.ID] = time.Now()
			}
			l.mu.Unlock()
			if l.expired(tp) {
				expired = append(expired, tp)
			}
		}
		l.mu.Lock()
		for id := range l.streams {
			if !ids[id] {
				delete(l.streams, id)
			}
		}
		for id := range l.touched {
			if !ids[id] {
				delete(l.touched, id)
			}
		}
		l.mu.Unlock()
		for _, tp := range expired {
			if _, err := l.n.ds.deleteTopic(ctx, tp.Name, tp.ID); err != nil && ctx.Err() == nil {
				l.n.logger.Warn("cannot delete an expired stream", "topic", tp.Name, "err", err)
			}
		}
	}
}
