package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"gostream/internal/bufpool"
	"gostream/record"
	"gostream/transport"
)

// pending is a record waiting for its outcome.
type pending struct {
	seq      uint64 // order of arrival in its partition
	rec      record.Record
	size     int
	cb       func(Ack, error)
	direct   bool      // cb is quick and runs on the partition goroutine (Send)
	deadline time.Time // no attempt of its batch begins after it
}

// outcome classifies the answer to one attempt to produce a batch.
type outcome int

const (
	appended    outcome = iota // acknowledged
	notAppended                // provably not appended, and worth retrying after a refresh
	rejected                   // provably not appended, and retrying will not help
	unknown                    // may or may not be appended
	outOfOrder                 // an idempotent producer's batch refused out of sequence: not appended
)

func classify(err error) outcome {
	switch {
	case err == nil:
		return appended
	case errors.Is(err, ErrClosed), errors.Is(err, ErrTopicRecreated):
		return rejected
	case errors.Is(err, transport.ErrNotSent),
		errors.Is(err, transport.ErrBusy),     // refused before it was carried out
		errors.Is(err, transport.ErrNotReady), // refused before the append
		errors.Is(err, transport.ErrNotLeader),
		errors.Is(err, transport.ErrUnknownTopic),
		errors.Is(err, transport.ErrUnknownTopicID),
		errors.Is(err, transport.ErrUnknownPartition):
		return notAppended
	case errors.Is(err, transport.ErrTopicSealed),
		errors.Is(err, transport.ErrMessageTooLarge),
		errors.Is(err, transport.ErrInvalidBatch),
		errors.Is(err, transport.ErrInvalidRequest),
		errors.Is(err, transport.ErrUnsupportedVersion),
		// Refused before the node looked at the batch.
		errors.Is(err, transport.ErrUnauthorized),
		errors.Is(err, transport.ErrUnauthenticated),
		errors.Is(err, transport.ErrTLSMismatch):
		return rejected
	default:
		return unknown
	}
}

// batch is a sealed batch of one partition.
type batch struct {
	records []pending
	// data is the encoded batch, made when it is first sent: an
	// idempotent producer's by encode, with producer and its sequence,
	// and never changed after; a plain producer's by encodePlain, in a
	// pooled buffer given back when the batch finishes: every send of it
	// has been written by then (SendNotify returns once it is).
	data     []byte
	pooled   bool
	size     int // a plain batch's encoded size, header included
	producer producerID
	attempts int
	first    time.Time // when it was first sent
	deadline time.Time // its records' earliest deadline: no attempt begins after it
	gaveUp   string    // why a batch not appended was not sent again, for its error
	final    bool      // the outcome below is final; the batch waits in the queue only to finish in order
	// maybeAppended: an attempt's outcome was unknown (idempotent
	// producers, which send such a batch again).
	maybeAppended bool

	// The latest attempt, once answered.
	done    bool
	resp    transport.ProduceResponse
	err     error
	outcome outcome
}

// attempt is one request for a batch, in flight. It is handed to the run
// goroutine, once, when its answer is there or its deadline passed.
type attempt struct {
	b      *batch
	call   *transport.Pending // set by send before run can receive the attempt
	ctx    context.Context    // the attempt's deadline
	cancel context.CancelFunc
	stop   func() bool // unregisters the hand-over at the deadline
	fired  atomic.Bool // the attempt was handed over
}

type flushWaiter struct {
	target uint64 // done when every record with a lower seq is finished
	done   chan struct{}
}

// partitionProducer batches and sends the records of one partition. Its
// state has one owner, the run goroutine; records and flush requests reach
// it through mu.
type partitionProducer struct {
	p       *Producer
	tp      topicPartition
	log     hclog.Logger
	wake    chan struct{}  // cap 1: something arrived in mu
	results chan *attempt  // cap MaxInFlightPerPartition, so handing over never blocks
	waiters sync.WaitGroup // attempts not handed over yet

	mu struct {
		sync.Mutex
		incoming []pending
		flushes  []flushWaiter
		nextSeq  uint64
		closing  bool // Close began: take no more records
		stopped  bool // run returned
	}

	// Owned by run.
	building      []pending
	spare         []pending       // the records pull took last, cleared: incoming's next slice
	recs          []record.Record // seal's scratch, empty between seals
	buildingBytes int             // encoded size of building, batch header included
	linger        *time.Timer
	lingerC       <-chan time.Time
	queue         []*batch // to send, oldest first
	inflight      []*batch // sent, in send order, not yet finished
	draining      bool     // a batch will be sent again: send nothing new
	retryTimer    *time.Timer
	retryC        <-chan time.Time
	refresh       bool            // refresh metadata before the next send
	conn          *transport.Conn // the connection of the batches in flight
	flushWaiters  []flushWaiter
	pulledSeq     uint64 // every record with a lower seq has been pulled
	topicID       string // the incarnation of the topic this producer writes to (see pinTopic)

	// An idempotent producer's (owned by run): the producer id of the
	// batches built next, the sequence of their first record, and whether
	// a new producer id must be asked for first (a batch given up left a
	// gap in the sequence).
	pid      producerID
	sequence int32
	newPID   bool
}

func newPartitionProducer(p *Producer, tp topicPartition) *partitionProducer {
	return &partitionProducer{
		p:       p,
		tp:      tp,
		log:     p.log.With("topic", tp.topic, "partition", tp.partition),
		wake:    make(chan struct{}, 1),
		results: make(chan *attempt, p.cfg.MaxInFlightPerPartition),
		pid:     p.pid,
	}
}

func (pp *partitionProducer) signal() {
	select {
	case pp.wake <- struct{}{}:
	default:
	}
}

// add hands a record to the partition. It returns false once Close began.
func (pp *partitionProducer) add(r pending) bool {
	pp.mu.Lock()
	if pp.mu.closing {
		pp.mu.Unlock()
		return false
	}
	r.seq = pp.mu.nextSeq
	pp.mu.nextSeq++
	pp.mu.incoming = append(pp.mu.incoming, r)
	pp.mu.Unlock()
	pp.signal()
	return true
}

// flush returns a channel closed once every record added before it is
// finished and its callback has run.
func (pp *partitionProducer) flush() <-chan struct{} {
	done := make(chan struct{})
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if pp.mu.stopped {
		close(done)
		return done
	}
	pp.mu.flushes = append(pp.mu.flushes, flushWaiter{target: pp.mu.nextSeq, done: done})
	pp.signal()
	return done
}

// close makes add refuse records.
func (pp *partitionProducer) close() {
	pp.mu.Lock()
	pp.mu.closing = true
	pp.mu.Unlock()
}

func (pp *partitionProducer) run(stop <-chan struct{}) {
	defer pp.shutdown()
	for {
		pp.sendReady()
		pp.checkFlushes()
		select {
		case <-pp.wake:
			pp.pull()
		case <-pp.lingerC:
			pp.linger, pp.lingerC = nil, nil
			pp.seal()
		case a := <-pp.results:
			resp, err := a.collect()
			pp.answered(a.b, resp, err)
		case <-pp.retryC:
			pp.retryTimer, pp.retryC = nil, nil
			pp.draining = false
		case <-stop:
			return
		}
	}
}

// pull takes the records and flush requests that arrived and batches the
// records.
func (pp *partitionProducer) pull() {
	pp.mu.Lock()
	in, fl := pp.mu.incoming, pp.mu.flushes
	// The slice pulled last time takes the records that come next, so that
	// a busy partition does not grow a new one (zeroed, then collected)
	// at every pull.
	pp.mu.incoming, pp.mu.flushes = pp.spare, nil
	pp.spare = nil
	pp.pulledSeq = pp.mu.nextSeq
	pp.mu.Unlock()
	defer func() {
		clear(in) // keeps no record or callback alive
		pp.spare = in[:0]
	}()
	maxBatch, _ := pp.p.batchLimit()
	limit := min(pp.p.cfg.BatchBytes, maxBatch)
	for _, r := range in {
		if len(pp.building) > 0 && pp.buildingBytes+r.size > limit {
			pp.seal()
		}
		if len(pp.building) == 0 {
			pp.buildingBytes = pp.p.batchOverhead()
			if pp.building == nil {
				pp.building = getPendings()
			}
		}
		pp.building = append(pp.building, r)
		pp.buildingBytes += r.size
		if pp.buildingBytes >= limit {
			pp.seal()
		}
	}
	switch {
	case len(fl) > 0 || pp.p.cfg.Linger < 0:
		pp.seal()
	case len(pp.building) > 0 && pp.linger == nil:
		pp.linger = time.NewTimer(pp.p.cfg.Linger)
		pp.lingerC = pp.linger.C
	}
	pp.flushWaiters = append(pp.flushWaiters, fl...)
}

// seal closes the batch being built and queues it.
func (pp *partitionProducer) seal() {
	if pp.linger != nil {
		pp.linger.Stop()
		pp.linger, pp.lingerC = nil, nil
	}
	if len(pp.building) == 0 {
		return
	}
	deadline := pp.building[0].deadline
	for _, r := range pp.building[1:] {
		if r.deadline.Before(deadline) {
			deadline = r.deadline
		}
	}
	pp.queue = append(pp.queue, &batch{records: pp.building, size: pp.buildingBytes, deadline: deadline})
	pp.building, pp.buildingBytes = nil, 0
}

// encodePlain builds a plain producer's batch when it is first sent, into
// a pooled buffer that is given back when the batch finishes: the
// producer holds encoded copies only of the batches in flight, whose
// buffers are reused while still in the processor's caches and the
// process's memory, not one of every batch waiting in the queue (up to
// BufferBytes, fresh memory for every batch).
func (pp *partitionProducer) encodePlain(b *batch) {
	recs := pp.recs[:0]
	for i := range b.records {
		recs = append(recs, b.records[i].rec)
	}
	data, err := record.AppendBatch(bufpool.Get(b.size)[:0], recs)
	if err != nil {
		// enqueue bounds every record, and a batch is never empty.
		panic(fmt.Sprintf("client: encode batch of %d records, %d bytes: %v", len(recs), b.size, err))
	}
	clear(recs) // the scratch keeps no record alive
	pp.recs = recs[:0]
	b.data, b.pooled = data, true
}

// sendReady sends queued batches while the in-flight window has room and
// no retry is pending. The batches in flight all share one connection: when
// the leader (or the connection to it) changes, the next batch waits until
// those on the old connection are answered, so the leader's per-connection
// order is the only order that matters.
func (pp *partitionProducer) sendReady() {
	for !pp.draining && len(pp.queue) > 0 && len(pp.inflight) < pp.p.cfg.MaxInFlightPerPartition {
		b := pp.queue[0]
		if b.final {
			// Its outcome is known; it waited only to finish in order.
			pp.queue = pp.queue[1:]
			pp.inflight = append(pp.inflight, b)
			pp.settle()
			continue
		}
		if b.data == nil && pp.newPID && len(pp.inflight) > 0 {
			// A new producer id begins once every batch of the old one
			// in flight is answered: a batch of the new id is taken at
			// any sequence, so it must not pass one of the old.
			return
		}
		if pp.refresh {
			pp.refresh = false
			pp.refreshMetadata()
		}
		ctx, cancel := context.WithTimeout(context.Background(), pp.p.cfg.RequestTimeout)
		conn, err := pp.connect(ctx)
		if err == nil && len(pp.inflight) > 0 && conn != pp.conn {
			cancel()
			return
		}
		pp.queue = pp.queue[1:]
		pp.inflight = append(pp.inflight, b)
		b.attempts++
		if b.attempts == 1 {
			b.first = time.Now()
		}
		b.done = false
		if err == nil && b.data == nil {
			if pp.p.cfg.Idempotent {
				err = pp.encode(ctx, b)
			} else {
				pp.encodePlain(b)
			}
		}
		if err != nil {
			cancel()
			pp.answered(b, transport.ProduceResponse{}, err)
			continue
		}
		pp.conn = conn
		pp.send(ctx, cancel, conn, b)
	}
}

func (pp *partitionProducer) refreshMetadata() {
	ctx, cancel := context.WithTimeout(context.Background(), pp.p.cfg.RequestTimeout)
	defer cancel()
	if err := pp.p.c.RefreshMetadata(ctx, pp.tp.topic); err != nil {
		pp.log.Debug("metadata refresh failed", "err", err)
	}
}

// connect returns the connection to the partition's leader. Nothing was
// sent when it fails: its errors match transport.ErrNotSent, or are
// ErrClosed once the Client is closed.
func (pp *partitionProducer) connect(ctx context.Context) (*transport.Conn, error) {
	r, err := pp.p.c.leader(ctx, pp.tp.topic, pp.tp.partition)
	if err == nil {
		if err := pinTopic(&pp.topicID, pp.tp.topic, r); err != nil {
			return nil, err // not wrapped in ErrNotSent: it is final
		}
		var conn *transport.Conn
		if conn, err = pp.p.c.pipes.Get(ctx, r.addr); err == nil {
			return conn, nil
		}
		if pp.p.c.closed() {
			return nil, ErrClosed // so is the pool: retrying cannot help
		}
	}
	return nil, fmt.Errorf("%w: %w", transport.ErrNotSent, err)
}

// send makes one attempt to produce b on conn. The request is written
// before send returns, so batches go on the wire in the order send is
// called; the answer comes back on results. cancel ends ctx, the attempt's
// deadline.
func (pp *partitionProducer) send(ctx context.Context, cancel context.CancelFunc, conn *transport.Conn, b *batch) {
	// The broker gets most of the time for replication, so that its own
	// Timeout answer usually arrives before our deadline.
	brokerTimeout := max(pp.p.cfg.RequestTimeout*8/10, time.Millisecond)
	req := &transport.ProduceRequest{
		Topic:     pp.tp.topic,
		TopicID:   pp.topicID,
		Partition: pp.tp.partition,
		TimeoutMs: int32(min(brokerTimeout.Milliseconds(), math.MaxInt32)),
		Batch:     b.data,
	}
	// The answer is handed to run by the connection's reader, or by the
	// deadline, whichever comes first: no goroutine waits per attempt.
	a := &attempt{b: b, ctx: ctx, cancel: cancel}
	handOver := func() {
		if a.fired.CompareAndSwap(false, true) {
			pp.results <- a
			pp.waiters.Done()
		}
	}
	pp.waiters.Add(1)
	call, err := conn.SendNotify(ctx, transport.APIProduce, req, handOver)
	if err != nil {
		pp.waiters.Done() // SendNotify does not notify a call it failed to send
		cancel()
		pp.answered(b, transport.ProduceResponse{}, err)
		return
	}
	a.call = call
	a.stop = context.AfterFunc(ctx, handOver)
}

// collect reads the answer of an attempt that was handed over, and ends
// the attempt's context.
func (a *attempt) collect() (transport.ProduceResponse, error) {
	var resp transport.ProduceResponse
	err := a.call.Wait(a.ctx, &resp) // does not block: the answer is there or the deadline passed
	a.stop()
	a.cancel()
	return resp, err
}

// answered records the answer to b's latest attempt.
func (pp *partitionProducer) answered(b *batch, resp transport.ProduceResponse, err error) {
	b.done, b.resp, b.err, b.outcome = true, resp, err, pp.classify(err)
	idempotent := pp.p.cfg.Idempotent
	switch b.outcome {
	case notAppended:
		pp.refresh = true
		pp.retryOrGiveUp(b)
	case unknown:
		pp.refresh = true
		if idempotent {
			// The leader answers the batch sent again as the original.
			b.maybeAppended = true
			pp.retryOrGiveUp(b)
		}
	case outOfOrder:
		pp.retryOrGiveUp(b) // settleIdempotent decides
	}
	pp.settle()
}

// retryOrGiveUp stops sending new batches when b may be sent again, or
// notes why it will not be.
func (pp *partitionProducer) retryOrGiveUp(b *batch) {
	if pp.mayRetry(b) {
		pp.draining = true
	} else {
		pp.noteGaveUp(b)
	}
}

// settle finishes the in-flight batches whose outcome is final, in send
// order. While a retry is pending it waits for every in-flight batch, then
// decides which to send again: see the package documentation.
func (pp *partitionProducer) settle() {
	if !pp.draining {
		for len(pp.inflight) > 0 && pp.inflight[0].done {
			b := pp.inflight[0]
			pp.inflight = pp.inflight[1:]
			pp.finish(b, b.gaveUp)
		}
		return
	}
	if pp.retryC != nil {
		return
	}
	for _, b := range pp.inflight {
		if !b.done {
			return
		}
	}
	if pp.p.cfg.Idempotent {
		pp.settleIdempotent()
		return
	}
	// The longest run at the end in which nothing was appended.
	tail := len(pp.inflight)
	for tail > 0 && (pp.inflight[tail-1].outcome == notAppended || pp.inflight[tail-1].outcome == rejected) {
		tail--
	}
	first := -1 // the first batch to send again
	for i := tail; i < len(pp.inflight); i++ {
		b := pp.inflight[i]
		if b.outcome == notAppended && pp.mayRetry(b) {
			if first < 0 {
				first = i
			}
		} else {
			b.final = true
			pp.noteGaveUp(b)
		}
	}
	end := len(pp.inflight)
	if first >= 0 {
		end = first
	}
	for i, b := range pp.inflight[:end] {
		reason := b.gaveUp
		if i < tail && b.outcome == notAppended {
			reason = " (not sent again: a batch sent after it was or may have been appended)"
		}
		pp.finish(b, reason)
	}
	if first < 0 {
		pp.inflight = nil
		pp.draining = false
		return
	}
	pp.sendAgain(first)
}

// sendAgain queues the in-flight batches from first on before anything
// newer, those not final to be sent again after a backoff, and empties the
// in-flight list; every batch before first is finished.
func (pp *partitionProducer) sendAgain(first int) {
	again := pp.inflight[first:]
	pp.inflight = nil
	pp.queue = append(slices.Clone(again), pp.queue...)
	resend := 0
	for _, b := range again {
		if !b.final {
			resend++
		}
	}
	pp.log.Warn("sending batches again", "batches", resend, "attempt", again[0].attempts+1, "err", again[0].err)
	pp.retryTimer = time.NewTimer(pp.backoff(again[0]))
	pp.retryC = pp.retryTimer.C
}

// retryPolicy paces a partition's retries: the producer's first backoff,
// the client's cap.
func (pp *partitionProducer) retryPolicy() retryPolicy {
	cfg := &pp.p.c.cfg
	return retryPolicy{backoff: pp.p.cfg.RetryBackoff, backoffMax: max(cfg.RetryBackoffMax, pp.p.cfg.RetryBackoff), retries: pp.p.cfg.Retries}
}

// backoff is the wait before b is sent again.
func (pp *partitionProducer) backoff(b *batch) time.Duration {
	return pp.retryPolicy().wait(b.attempts)
}

// mayRetry reports whether b, whose last attempt provably did not append
// it, may be sent again: Retries allow it, and the longest it would wait
// first ends before its deadline with the first backoff's time to spare
// for the attempt.
func (pp *partitionProducer) mayRetry(b *batch) bool {
	pol := pp.retryPolicy()
	switch {
	case pol.retries < 0, pol.retries > 0 && b.attempts > pol.retries:
		return false
	}
	return time.Now().Add(pol.ceiling(b.attempts) + pol.backoff).Before(b.deadline)
}

// noteGaveUp records, for its error, why a batch that was not appended is
// not sent again.
func (pp *partitionProducer) noteGaveUp(b *batch) {
	resendable := b.outcome == notAppended || pp.p.cfg.Idempotent && (b.outcome == unknown || b.outcome == outOfOrder)
	if !resendable || b.gaveUp != "" {
		return
	}
	why := "its deadline leaves no time for another attempt"
	if r := pp.p.cfg.Retries; r < 0 || r > 0 && b.attempts > r {
		why = "ProducerConfig.Retries are used up"
	}
	if b.maybeAppended && b.outcome != unknown {
		why += "; an earlier attempt's outcome is unknown"
	}
	b.gaveUp = fmt.Sprintf(" (%s in %s; not sent again: %s)", plural(b.attempts, "attempt"), time.Since(b.first).Round(time.Millisecond), why)
}

// finish gives every record of b its outcome and returns its buffer room.
// An idempotent producer's batch that was sent and is not appended leaves
// a gap in its producer id's sequence: the next batch takes a new one.
func (pp *partitionProducer) finish(b *batch, reason string) {
	size := 0
	for i := range b.records {
		size += b.records[i].size
	}
	pp.p.budget.release(size)
	if b.outcome != appended && b.data != nil && pp.p.cfg.Idempotent && b.producer == pp.pid {
		pp.newPID = true
	}
	if b.pooled {
		bufpool.Put(b.data)
		b.data, b.pooled = nil, false
	}
	var err error
	switch {
	case b.outcome == unknown, b.maybeAppended && b.outcome != appended:
		err = fmt.Errorf("produce to %s/%d%s: %w: %w", pp.tp.topic, pp.tp.partition, reason, ErrUnknownOutcome, b.err)
	case b.outcome == notAppended, b.outcome == rejected, b.outcome == outOfOrder:
		err = fmt.Errorf("produce to %s/%d%s: %w: %w", pp.tp.topic, pp.tp.partition, reason, ErrNotAppended, b.err)
	}
	tp, resp := pp.tp, b.resp
	ack := func(i int) Ack {
		if err != nil {
			return Ack{Topic: tp.topic, Partition: tp.partition, Offset: -1}
		}
		return Ack{Topic: tp.topic, Partition: tp.partition, Offset: resp.BaseOffset + int64(i),
			LeaderID: resp.LeaderID, LeaderEpoch: resp.LeaderEpoch, Timestamp: resp.AppendTime}
	}
	queued := false
	for i := range b.records {
		if r := &b.records[i]; r.direct {
			r.cb(ack(i), err)
		} else {
			queued = true
		}
	}
	records := b.records
	b.records = nil
	if !queued {
		putPendings(records)
		return
	}
	pp.p.callbacks.push(func() {
		for i := range records {
			if !records[i].direct {
				records[i].cb(ack(i), err)
			}
		}
		putPendings(records)
	})
}

// pendingSlices keeps the record slices of finished batches for the
// batches built next: a slice of a few thousand records grown anew for
// every batch was most of what a pipelined producer zeroed and collected.
var pendingSlices sync.Pool

// getPendings returns an empty slice of records to build a batch in.
func getPendings() []pending {
	if p, ok := pendingSlices.Get().(*[]pending); ok {
		return (*p)[:0]
	}
	return nil
}

// putPendings gives back a finished batch's records once nothing reads
// them: cleared, so that they keep no record or callback alive.
func putPendings(recs []pending) {
	if cap(recs) == 0 {
		return
	}
	clear(recs)
	recs = recs[:0]
	pendingSlices.Put(&recs)
}

// checkFlushes releases the flush requests whose records are all finished.
func (pp *partitionProducer) checkFlushes() {
	if len(pp.flushWaiters) == 0 {
		return
	}
	low := pp.pulledSeq // the oldest record not finished
	switch {
	case len(pp.inflight) > 0:
		low = pp.inflight[0].records[0].seq
	case len(pp.queue) > 0:
		low = pp.queue[0].records[0].seq
	case len(pp.building) > 0:
		low = pp.building[0].seq
	}
	keep := pp.flushWaiters[:0]
	for _, w := range pp.flushWaiters {
		if w.target <= low {
			done := w.done
			pp.p.callbacks.push(func() { close(done) }) // after the callbacks before it
		} else {
			keep = append(keep, w)
		}
	}
	pp.flushWaiters = keep
}

// shutdown fails whatever is left (nothing, after Close's flush, unless
// the Producer is being closed while a batch is stuck) and releases the
// flush requests.
func (pp *partitionProducer) shutdown() {
	pp.mu.Lock()
	pp.mu.stopped, pp.mu.closing = true, true
	pp.mu.Unlock()
	pp.pull()
	pp.seal()
	pp.waiters.Wait()
	for drained := false; !drained; {
		select {
		case a := <-pp.results:
			resp, err := a.collect()
			a.b.done, a.b.resp, a.b.err, a.b.outcome = true, resp, err, pp.classify(err)
			if a.b.outcome == unknown && pp.p.cfg.Idempotent {
				a.b.maybeAppended = true
			}
		default:
			drained = true
		}
	}
	for _, t := range []*time.Timer{pp.linger, pp.retryTimer} {
		if t != nil {
			t.Stop()
		}
	}
	// Every attempt is answered now. What is left either was never sent
	// or has a final outcome already.
	for _, b := range append(pp.inflight, pp.queue...) {
		if !b.done {
			b.outcome, b.err = rejected, ErrClosed
		}
		pp.finish(b, "")
	}
	pp.inflight, pp.queue = nil, nil
	for _, w := range pp.flushWaiters {
		done := w.done
		pp.p.callbacks.push(func() { close(done) })
	}
	pp.flushWaiters = nil
}
