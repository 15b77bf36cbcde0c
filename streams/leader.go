package streams

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"gostream/controller"
	"gostream/durable"
	"gostream/metadata"
	"gostream/record"
	"gostream/replication"
	"gostream/transport"
)

// appendWait bounds how long an append waits for its replication, and a
// duplicate for the acknowledgement of the append it repeats.
const appendWait = 15 * time.Second

// stateAttempts bounds the times an operation takes a stream's state
// again after the one it had was dropped before it appended
// (replication.ErrStateDropped: nothing was appended).
const stateAttempts = 3

// stream is the leader's state of one stream for one leadership (its
// replica at one leader epoch), built from the replica's log by
// replication.LeaderStates and dropped with the leadership.
type stream struct {
	lead *replication.Leadership

	mu sync.Mutex
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
	producers  map[string]*producerState
	// pending holds the tails of appends not yet known to be below the
	// HW; acked and ackedClosed are what readers are told.
	pending     []pendingTail
	acked       durable.Offset
	ackedClosed bool
}

type producerState struct {
	epoch, seq int64
	end        int64 // log end after its last append
}

type pendingTail struct {
	end    int64
	tail   durable.Offset
	closed bool
	ready  bool
}

func (s *stream) part() *replication.Partition { return s.lead.Partition() }

// logEnd is the end of the leader's log: stable under s.mu, since only
// the stream's leader appends to it, under s.mu.
func (s *stream) logEnd() int64 {
	_, _, end := s.part().Offsets()
	return end
}

// view moves the acknowledged tail up to the HW. Called with s.mu held.
func (s *stream) view() {
	hw := s.part().HighWatermark()
	i := 0
	for ; i < len(s.pending) && s.pending[i].end <= hw; i++ {
		s.acked, s.ackedClosed, s.ackedReady = s.pending[i].tail, s.pending[i].closed, s.pending[i].ready
	}
	s.pending = s.pending[i:]
}

// apply adds one batch of the log to the state.
func (s *stream) apply(b *logBatch) {
	pos := b.pos
	for _, r := range b.records {
		switch r.Kind {
		case kindData:
			pos += int64(len(r.Data))
			s.tail = durable.Offset{Record: r.Offset + 1, Byte: pos}
		case kindInit:
			s.ready = true
		case kindClose:
			s.closed, s.closedEnd, s.closedBy = true, b.next, b.producer
		}
	}
	if p := b.producer; p != nil {
		s.producers[p.ID] = &producerState{epoch: p.Epoch, seq: p.Seq, end: b.next}
	}
	if b.streamSeq != nil {
		s.streamSeq = b.streamSeq
	}
	s.pending = append(s.pending, pendingTail{end: b.next, tail: s.tail, closed: s.closed, ready: s.ready})
}

// loadStream builds a stream's state from its replica's whole log.
func loadStream(ctx context.Context, lead *replication.Leadership) (*stream, error) {
	s := &stream{lead: lead, producers: map[string]*producerState{}}
	_, err := lead.Replay(ctx, func(rb record.Batch) error {
		b, err := decodeBatch(rb)
		if err != nil {
			return fmt.Errorf("stream log %s at offset %d: %w", s.part().Topic, rb.BaseOffset(), err)
		}
		s.apply(b)
		s.view()
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.view()
	return s, nil
}

// produce appends b and applies it; it returns the wait for its
// acknowledgement (after which a failure drops the state: see
// replication.LeaderStates). Called with s.mu held; the state changes
// only once the batch is in the leader's log.
func (s *stream) produce(b *logBatch) (func(context.Context) error, error) {
	batch, err := b.encode()
	if err != nil {
		return nil, err
	}
	end, wait, err := s.lead.Append(batch)
	if err != nil {
		return nil, err
	}
	first := end - int64(len(b.records))
	for i := range b.records {
		b.records[i].Offset = first + int64(i)
	}
	b.next = end
	s.apply(b)
	return wait, nil
}

func (s *stream) info(t *metadata.Topic) *durable.Info {
	return &durable.Info{ContentType: t.Stream.ContentType, TTL: t.Stream.TTL, ExpiresAt: t.Stream.ExpiresAt,
		Tail: s.acked.Token(), Closed: s.ackedClosed}
}

// headResult is HEAD's answer, with what a creator needs to finish a
// creation: whether it is complete, and where the log ends.
type headResult struct {
	Info   durable.Info
	Ready  bool
	LogEnd int64
	Pos    int64
}

func (s *stream) head(t *metadata.Topic) *headResult {
	return &headResult{Info: *s.info(t), Ready: s.ackedReady, LogEnd: s.logEnd(), Pos: s.tail.Byte}
}

// initRequest is one step of a creation: records appended only where
// the log ends at ExpectEnd, so that a creation run again (after a failure
// part way) skips what is done. The step whose records hold kindInit
// makes the stream ready.
type initRequest struct {
	ExpectEnd int64
	Records   []logRecord
}

// logRequest asks for the records of [From, To) of a stream's log below
// its HW, up to about MaxBytes: what a fork copies.
type logRequest struct {
	From     int64
	To       int64
	MaxBytes int
}

type logResult struct {
	Records []logRecord
	// Pos is the position of the first record.
	Pos int64
}

// leader is the broker's leader side: the state of the streams it leads,
// and when each was last read or written (for TTLs).
type leader struct {
	broker int32
	lookup func(topic, id string) (*metadata.Topic, *replication.Partition, error)
	// deleteTopic deletes an expired stream, through the controller.
	deleteTopic func(ctx context.Context, topic, id string) (*controller.StreamResult, error)
	log         hclog.Logger
	states      *replication.LeaderStates[string, *stream] // by topic id

	mu      sync.Mutex
	touched map[string]time.Time // by topic id
}

func newLeader(cfg *Config, deleteTopic func(ctx context.Context, topic, id string) (*controller.StreamResult, error)) *leader {
	l := &leader{broker: cfg.Broker, lookup: cfg.Lookup, deleteTopic: deleteTopic, log: cfg.Logger, touched: map[string]time.Time{}}
	l.states = replication.NewLeaderStates(replication.LeaderStatesConfig[string, *stream]{
		Load:    l.load,
		AckWait: appendWait,
		// A failed acknowledgement leaves the log holding what the state
		// no longer knows to be acknowledged: the next request rebuilds.
	})
	return l
}

func (l *leader) load(ctx context.Context, _ string, lead *replication.Leadership) (*stream, error) {
	s, err := loadStream(ctx, lead)
	if err != nil && ctx.Err() == nil {
		l.log.Error("cannot rebuild a stream from its log", "topic", lead.Partition().Topic, "epoch", lead.Epoch(), "err", err)
	}
	return s, err
}

func notLeader(t *metadata.Topic) error {
	return fmt.Errorf("%w: partition %s/0 is led by broker %d", transport.ErrNotLeader, t.Name, t.Partitions[0].Leader)
}

// stream returns the state of a stream this broker leads, built and
// locked, with its topic.
func (l *leader) stream(ctx context.Context, topic, id string) (*stream, *metadata.Topic, error) {
	t, part, err := l.lookup(topic, id)
	if err != nil {
		return nil, nil, err
	}
	if t.Stream == nil {
		return nil, nil, fmt.Errorf("%w: %s is not a stream's topic", transport.ErrInvalidRequest, topic)
	}
	if part == nil || part.State().Leader != l.broker {
		return nil, nil, notLeader(t)
	}
	s, _, err := l.states.Get(ctx, t.ID, part)
	switch {
	case errors.Is(err, replication.ErrNotLeader):
		return nil, nil, fmt.Errorf("%w: %v", transport.ErrNotLeader, err)
	case errors.Is(err, replication.ErrLoadFailed):
		return nil, nil, fmt.Errorf("%w: %v", transport.ErrStorageFailed, err)
	case err != nil:
		return nil, nil, err
	}
	l.mu.Lock()
	if _, ok := l.touched[t.ID]; !ok {
		l.touched[t.ID] = time.Now()
	}
	l.mu.Unlock()
	s.mu.Lock()
	s.view()
	return s, t, nil
}

func (l *leader) touch(id string) {
	l.mu.Lock()
	l.touched[id] = time.Now()
	l.mu.Unlock()
}

// expired reports whether the stream's time is up: its expiry time passed,
// or its TTL since it was last read or written here.
func (l *leader) expired(t *metadata.Topic) bool {
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
// not up (an expired stream is deleted, through the controller). Called
// with s.mu held, which it releases while it deletes.
func (l *leader) live(ctx context.Context, s *stream, t *metadata.Topic) error {
	if t.Stream.Deleted {
		return durable.Gone(t.Stream.Path)
	}
	if l.expired(t) {
		s.mu.Unlock()
		res, err := l.deleteTopic(ctx, t.Name, t.ID)
		s.mu.Lock()
		if err != nil {
			return err
		}
		if res.Outcome == controller.StreamSoftDeleted || res.Outcome == controller.StreamGone {
			return durable.Gone(t.Stream.Path)
		}
		return durable.NotFound(t.Stream.Path)
	}
	if !s.ackedReady {
		return durable.NotFound(t.Stream.Path)
	}
	return nil
}

// head answers HEAD, which does not count as a read for the TTL.
func (l *leader) head(ctx context.Context, topic, id string) (*headResult, error) {
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
	return s.head(t), nil
}

// append answers a POST.
func (l *leader) append(ctx context.Context, topic, id string, req *durable.AppendRequest) (*durable.AppendResult, error) {
	for attempt := 1; ; attempt++ {
		res, err := l.appendOnce(ctx, topic, id, req)
		if !errors.Is(err, replication.ErrStateDropped) || attempt == stateAttempts {
			return res, err
		}
	}
}

func (l *leader) appendOnce(ctx context.Context, topic, id string, req *durable.AppendRequest) (*durable.AppendResult, error) {
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
		if err := s.lead.WaitAcked(ctx, end); err != nil {
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
	b := &logBatch{pos: s.tail.Byte, producer: p}
	if req.HasSeq {
		seq := req.Seq
		b.streamSeq = &seq
	}
	if len(req.Body) > 0 {
		data, err := streamData(t.Stream.ContentType, req.Body, false)
		if err != nil {
			return nil, err
		}
		b.records = append(b.records, logRecord{Kind: kindData, Data: data})
	}
	if req.Close {
		b.records = append(b.records, logRecord{Kind: kindClose})
	}
	wait, err := s.produce(b)
	if err != nil {
		return nil, err
	}
	tail, closed := s.tail, s.closed
	s.mu.Unlock()
	locked = false
	if err := wait(ctx); err != nil {
		return nil, err
	}
	res := &durable.AppendResult{Tail: tail.Token(), Closed: closed}
	if p != nil {
		res.ProducerSeq = p.Seq
	}
	return res, nil
}

// maxReadWait bounds the wait of a read.
const maxReadWait = 10 * time.Minute

// read answers a read: the messages from the offset below the HW, up to
// about MaxBytes; with Wait, it waits for some when there are none at the
// acknowledged tail.
func (l *leader) read(ctx context.Context, topic, id string, req *durable.ReadRequest) (*durable.ReadResult, error) {
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
	part := s.part()
	maxBytes := max(req.MaxBytes, 1)
	var deadline time.Time
	if req.Wait > 0 {
		deadline = time.Now().Add(min(req.Wait, maxReadWait))
	}
	for {
		hw := part.HighWatermark()
		msgs, next, err := readStream(ctx, part, off, maxBytes)
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
		if _, err := part.Fetch(ctx, hw, 1, left); err != nil {
			return nil, err
		}
		l.touch(t.ID)
	}
}

// readStream reads the data records from off below the HW.
func readStream(ctx context.Context, part *replication.Partition, off durable.Offset, maxBytes int) ([]durable.Message, durable.Offset, error) {
	res, err := part.Fetch(ctx, off.Record, maxBytes, 0)
	if err != nil {
		return nil, off, err
	}
	var msgs []durable.Message
	next, size := off, 0
	var refused error
	err = eachBatch(res.Batches, func(b *logBatch) bool {
		pos := b.pos
		for _, r := range b.records {
			if r.Offset == off.Record && pos != off.Byte {
				refused = durable.Refuse(http.StatusBadRequest, "offset %s is not a position of this stream", off.Token())
				return false
			}
			if r.Kind != kindData {
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
		return nil, off, fmt.Errorf("%w: stream log %s: %v", transport.ErrStorageFailed, part.Topic, err)
	}
	return msgs, next, nil
}

// init appends one step of a creation.
func (l *leader) init(ctx context.Context, topic, id string, req *initRequest) (*headResult, error) {
	for attempt := 1; ; attempt++ {
		res, err := l.initOnce(ctx, topic, id, req)
		if !errors.Is(err, replication.ErrStateDropped) || attempt == stateAttempts {
			return res, err
		}
	}
}

func (l *leader) initOnce(ctx context.Context, topic, id string, req *initRequest) (*headResult, error) {
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
	if s.ready && !s.ackedReady {
		// The creation is in the log and not yet on every active replica
		// (its replication failed, or is on its way): the stream is not
		// there until it is, and appending it again would not make it so.
		return nil, durable.Refuse(http.StatusServiceUnavailable, "stream %q is created on its leader and not yet on every replica; retry", t.Stream.Path)
	}
	if s.ready || s.logEnd() != req.ExpectEnd || len(req.Records) == 0 {
		// Done before (or by another creator): say where the log is.
		return s.head(t), nil
	}
	for _, r := range req.Records {
		if !validKind(r.Kind) {
			return nil, fmt.Errorf("%w: record kind %q", transport.ErrInvalidRequest, r.Kind)
		}
	}
	// The records are the caller's: the batch gets its own, whose
	// offsets produce sets.
	b := &logBatch{pos: s.tail.Byte, records: append([]logRecord(nil), req.Records...)}
	wait, err := s.produce(b)
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
	res := s.head(t)
	s.mu.Unlock()
	l.touch(t.ID)
	return res, nil
}

// readLog answers a logRequest.
func (l *leader) readLog(ctx context.Context, topic, id string, req *logRequest) (*logResult, error) {
	s, t, err := l.stream(ctx, topic, id)
	if err != nil {
		return nil, err
	}
	if err := l.live(ctx, s, t); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	s.mu.Unlock()
	res, err := s.part().Fetch(ctx, req.From, max(req.MaxBytes, 1), 0)
	if err != nil {
		return nil, err
	}
	out := &logResult{}
	found := false
	err = eachBatch(res.Batches, func(b *logBatch) bool {
		pos := b.pos
		for _, r := range b.records {
			if r.Offset >= req.From && r.Offset < req.To {
				if !found {
					found, out.Pos = true, pos
				}
				out.Records = append(out.Records, r)
			}
			if r.Kind == kindData {
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
// state of streams it no longer leads, every second until ctx ends; then
// it drops every state.
func (l *leader) sweep(ctx context.Context, meta func() *metadata.Cluster) {
	defer l.states.Close()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m := meta()
		if m == nil {
			continue
		}
		ids := map[string]bool{}
		var expired []*metadata.Topic
		for i := range m.Topics {
			tp := &m.Topics[i]
			if tp.Stream == nil || tp.Partitions[0].Leader != l.broker {
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
		l.states.Retain(func(id string) bool { return ids[id] })
		l.mu.Lock()
		for id := range l.touched {
			if !ids[id] {
				delete(l.touched, id)
			}
		}
		l.mu.Unlock()
		for _, tp := range expired {
			if _, err := l.deleteTopic(ctx, tp.Name, tp.ID); err != nil && ctx.Err() == nil {
				l.log.Warn("cannot delete an expired stream", "topic", tp.Name, "err", err)
			}
		}
	}
}
