package replication

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"gostream/record"
	"gostream/transport"
)

// tailCheck is how many of a follower's last batches catch-up compares, by
// content, with the leader's before copying anything.
const tailCheck = 8

// catchUpRetry is how often a lagging follower is retried with no writes
// to push it.
const catchUpRetry = time.Second

// gatherWait bounds how long a sender waits, before a round, for the
// batches it expects (see gatherer).
const gatherWait = time.Millisecond

// gatherer decides how many queued batches a follower's sender waits for
// before its next round.
//
// A sender works in rounds, and a round that starts at once when the one
// before ends takes only what is queued by then. When producers keep a
// partition busy, the producers of the batches a round just acknowledged
// are about to send again (a synchronous producer sends its next batch
// when it has its answer), a wake-up and a round trip later; a round
// that started at once would leave them to the one after it, and the
// producers would fall into cohorts that take turns, each round carrying
// a fraction of them and each costing a Replicate request, a follower's
// write and fsync and a reply (16 synchronous producers on three nodes:
// 6.5 batches a round; waiting for them, 11 to 15). So after an in-sync round
// of n batches with q more queued meanwhile, the next round waits until
// n+q batches are queued, or maxReplicateBytes of them, or gatherWait has
// passed.
//
// It waits only while the partition is busy, from a round that ends with
// batches queued behind it (rounds running back to back), and only while
// waiting pays: a wait that ends without its batches (the producers did
// not come back in time: they pause between writes, are held to a rate,
// or some stopped) ends the busy spell, and the sender does not wait
// again for the next 1, 2, 4, ... up to maxGatherBackoff rounds, the
// count doubling with each miss in a row and starting again from 1 after
// a wait that got its batches. So producers that would not come back
// cost a wait of at most gatherWait every maxGatherBackoff rounds; a lone
// synchronous producer never waits.
type gatherer struct {
	busy    bool
	want    int
	backoff int // rounds not to wait for after the last miss (0: none missed)
	skip    int // of those, the rounds left
}

// maxGatherBackoff bounds the rounds a sender goes without waiting after
// misses in a row.
const maxGatherBackoff = 64

// ended notes the end of a round of n batches, q batches queued behind
// it; ok says it was an in-sync round that succeeded.
func (g *gatherer) ended(n, q int, ok bool) {
	g.want = 0
	if !ok || n == 0 {
		g.busy = false
		return
	}
	if g.skip > 0 {
		g.skip--
		return
	}
	g.busy = g.busy || q > 0
	if g.busy && n+q > 1 {
		g.want = n + q
	}
}

// got notes that a wait ended with the batches it waited for.
func (g *gatherer) got() { g.backoff = 0 }

// missed notes that a wait ended without the batches it waited for.
func (g *gatherer) missed() {
	g.busy, g.want = false, 0
	g.backoff = min(max(2*g.backoff, 1), maxGatherBackoff)
	g.skip = g.backoff
}

// item is one batch queued for a follower, and where its outcome goes.
type item struct {
	batch   []byte // nil for an operator's catch-up request
	next    int64
	done    chan error  // buffered: the sender never blocks on it
	settled bool        // done was sent to; only the sender goroutine touches it
	release func()      // called once the sender is done with batch; nil if nothing to release
	taken   atomic.Bool // the sender has taken it from the queue
}

// drop tells the batch's owner the sender is done with it.
func (it *item) drop() {
	it.batch = nil
	if it.release != nil {
		it.release()
		it.release = nil
	}
}

// follower is a leader's sender to one active follower. It owns one
// goroutine that replicates queued batches in log order. After any failure
// it is lagging: before it sends anything else it checks, by content, that
// the follower's log is a prefix of the leader's and copies what is missing
// from the log (catch-up). A follower whose log is not a prefix is
// diverged, and stays so: nothing is written to it.
type follower struct {
	id    int32
	p     *Partition
	epoch int32

	started time.Time // when start ran
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{}
	kick    chan struct{} // buffered 1

	mu struct {
		sync.Mutex
		queue    []*item
		ackedEnd int64 // the follower's durable log end, as last acknowledged
		known    bool  // ackedEnd is current: the follower is in sync
		// reached says the follower has answered this sender once: until
		// it has, a failure to reach it means the leader has not seen it
		// since it began to lead (a restart of all the nodes at once).
		reached  bool
		diverged error
		lastErr  error
	}
}

// notYetReached returns why the follower has never been reached by this
// sender (its attempts could not reach it at all), or nil: it has
// answered once, or has not been tried yet, or failed in another way.
func (f *follower) notYetReached() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mu.reached || f.mu.lastErr == nil {
		return nil
	}
	if errors.Is(f.mu.lastErr, transport.ErrNotSent) || errors.Is(f.mu.lastErr, transport.ErrBrokerNotAvailable) {
		return f.mu.lastErr
	}
	return nil
}

func newFollower(p *Partition, id, epoch int32) *follower {
	f := &follower{id: id, p: p, epoch: epoch, done: make(chan struct{}), kick: make(chan struct{}, 1)}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	return f
}

func (f *follower) start() {
	f.started = time.Now()
	go f.run()
}

// learnRetry is how soon a sender tries again a follower that does not
// know of the partition yet, and learnGrace how long after the sender
// started it waits so for the follower to learn of it (a metadata push
// or poll) before such an answer fails the batches like any other.
const (
	learnRetry = 20 * time.Millisecond
	learnGrace = 10 * time.Second
)

// learning says whether err is a follower's answer that it does not know
// of the partition (or of this incarnation of its topic), from a
// follower this sender has never reached, within learnGrace of the
// sender's start: one whose metadata is behind the leader's.
func (f *follower) learning(err error) bool {
	if !errors.Is(err, transport.ErrUnknownPartition) && !errors.Is(err, transport.ErrUnknownTopicID) && !errors.Is(err, transport.ErrUnknownTopic) {
		return false
	}
	f.mu.Lock()
	reached := f.mu.reached
	f.mu.Unlock()
	return !reached && time.Since(f.started) < learnGrace && f.ctx.Err() == nil
}

// stop ends the sender and fails what is still queued. It waits for the
// goroutine to return.
func (f *follower) stop() {
	f.cancel()
	<-f.done
	f.mu.Lock()
	q := f.mu.queue
	f.mu.queue = nil
	f.mu.Unlock()
	for _, it := range q {
		it.drop()
		it.done <- fmt.Errorf("%w: leadership of %s/%d changed", ErrNotLeader, f.p.Topic, f.p.Index)
	}
}

func (f *follower) enqueue(batch []byte, next int64, release func()) *item {
	it := &item{batch: batch, next: next, done: make(chan error, 1), release: release}
	f.mu.Lock()
	f.mu.queue = append(f.mu.queue, it)
	f.mu.Unlock()
	select {
	case f.kick <- struct{}{}:
	default:
	}
	return it
}

func (f *follower) acked() (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.ackedEnd, f.mu.known
}

func (f *follower) status() transport.FollowerStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := transport.FollowerStatus{Broker: f.id, LogEndOffset: -1, State: transport.FollowerLagging}
	switch {
	case f.mu.diverged != nil:
		s.State, s.Error = transport.FollowerDiverged, f.mu.diverged.Error()
	case f.mu.known:
		s.State, s.LogEndOffset = transport.FollowerInSync, f.mu.ackedEnd
	case f.mu.lastErr != nil:
		s.Error = f.mu.lastErr.Error()
	}
	return s
}

func (f *follower) run() {
	defer close(f.done)
	log := f.p.logger.With("peer", f.id)
	retry := time.NewTimer(0) // a new leader learns its followers at once
	defer retry.Stop()
	var g gatherer
	for {
		select {
		case <-f.ctx.Done():
			return
		case <-f.kick:
		case <-retry.C:
		}
		if g.want > 1 {
			if f.gather(g.want) {
				g.got()
			} else {
				g.missed()
			}
		}
		f.mu.Lock()
		items := f.mu.queue
		f.mu.queue = nil
		inSync, diverged := f.mu.known, f.mu.diverged
		f.mu.Unlock()
		for _, it := range items {
			it.taken.Store(true)
		}

		control := false
		for _, it := range items {
			control = control || it.batch == nil
		}
		var err error
		switch {
		case diverged != nil:
			err = diverged
		case inSync && len(items) > 0 && !control:
			err = f.replicate(items)
		case !inSync || control:
			target := f.p.log.LogEndOffset()
			if len(items) > 0 {
				target = max(target, items[len(items)-1].next)
			}
			_, _, err = f.catchUp(target)
		}
		if err != nil && diverged == nil && f.learning(err) {
			// The follower does not know of the partition yet: it was
			// just created or added, and the metadata reached this leader
			// first. The follower is fetching the metadata now, and
			// nothing was written there, so its batches stay queued and
			// are sent again shortly, rather than fail as a replication
			// failure whose outcome the producer cannot know.
			var keep []*item
			for _, it := range items {
				if !it.settled {
					keep = append(keep, it)
				}
			}
			f.mu.Lock()
			f.mu.queue = append(keep, f.mu.queue...)
			f.mu.known, f.mu.lastErr = false, err
			f.mu.Unlock()
			retry.Reset(learnRetry)
			continue
		}
		for _, it := range items {
			it.drop()
			if !it.settled {
				it.done <- err
			}
		}
		f.mu.Lock()
		g.ended(len(items), len(f.mu.queue), err == nil && inSync && !control)
		f.mu.Unlock()
		if err != nil {
			f.mu.Lock()
			f.mu.known = false
			f.mu.lastErr = err
			f.mu.Unlock()
			if f.ctx.Err() == nil && diverged == nil {
				log.Debug("follower lags", "err", err)
			}
			retry.Reset(catchUpRetry)
		}
		f.p.recomputeHW()
	}
}

// gather waits until n batches are queued, or maxReplicateBytes of them
// (true), or gatherWait has passed or the sender is stopped (false); see
// gatherer.
func (f *follower) gather(n int) bool {
	var deadline <-chan time.Time
	for {
		f.mu.Lock()
		q, size := len(f.mu.queue), 0
		for _, it := range f.mu.queue {
			size += len(it.batch)
		}
		f.mu.Unlock()
		if q >= n || size >= maxReplicateBytes {
			return true
		}
		if deadline == nil {
			t := time.NewTimer(gatherWait)
			defer t.Stop()
			deadline = t.C
		}
		select {
		case <-f.kick:
		case <-deadline:
			return false
		case <-f.ctx.Done():
			return false
		}
	}
}

// peer resolves the follower's address now: it may change between rounds.
func (f *follower) peer() (Peer, error) {
	if f.p.opts.Peers == nil {
		return nil, errors.New("no way to reach other brokers")
	}
	return f.p.opts.Peers(f.id)
}

func (f *follower) request(batch []byte) *transport.ReplicateRequest {
	return &transport.ReplicateRequest{
		Topic: f.p.Topic, TopicID: f.p.TopicID, Partition: f.p.Index, LeaderEpoch: f.epoch, LeaderID: f.p.brokerID,
		HighWatermark: f.p.HighWatermark(), Batch: batch,
	}
}

// maxReplicateBytes bounds the batches one Replicate request carries.
const maxReplicateBytes = 1 << 20

// replicate sends items in order, pipelined on one connection, several
// batches to a request, and waits for each acknowledgement in order. Items
// are marked done as they are acknowledged; on the first failure the rest
// fail with it.
func (f *follower) replicate(items []*item) error {
	// A catch-up copies the leader's log up to its end, which can include
	// batches whose items were queued after the catch-up took its items:
	// those are on the follower already, durably, and sending them again
	// would be refused (their base offset is below its log end).
	f.mu.Lock()
	acked := f.mu.ackedEnd
	f.mu.Unlock()
	for len(items) > 0 && items[0].next <= acked {
		items[0].done <- nil
		items[0].settled = true
		items = items[1:]
	}
	if len(items) == 0 {
		return nil
	}
	peer, err := f.peer()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(f.ctx, f.p.opts.ReplicationTimeout)
	defer cancel()
	type chunk struct {
		items []*item
		wait  func(context.Context) (int64, error)
	}
	var chunks []chunk
	for i := 0; i < len(items); {
		j, size := i, 0
		for j < len(items) && (j == i || size+len(items[j].batch) <= maxReplicateBytes) {
			size += len(items[j].batch)
			j++
		}
		// The batches go out back to back, copied once, into the frame.
		req := f.request(nil)
		req.Batches = make([][]byte, 0, j-i)
		for _, it := range items[i:j] {
			req.Batches = append(req.Batches, it.batch)
		}
		w, err := peer.SendReplicate(ctx, req)
		if err != nil {
			break
		}
		chunks = append(chunks, chunk{items[i:j], w})
		i = j
	}
	sent := 0
	for ci, c := range chunks {
		end, err := c.wait(ctx)
		if err != nil {
			for _, rest := range chunks[ci+1:] {
				rest.wait(ctx) // drain, so the connection's calls end; outcomes are moot
			}
			return f.classify(err)
		}
		want := c.items[len(c.items)-1].next
		if end != want {
			return fmt.Errorf("broker %d acknowledged log end %d for batches ending at %d", f.id, end, want)
		}
		f.mu.Lock()
		f.mu.ackedEnd, f.mu.known, f.mu.reached = end, true, true
		f.mu.Unlock()
		for _, it := range c.items {
			it.done <- nil
			it.settled = true
		}
		sent += len(c.items)
	}
	if sent < len(items) {
		return fmt.Errorf("send to broker %d failed", f.id)
	}
	return nil
}

// classify turns a follower's StaleEpoch answer into a step-down.
func (f *follower) classify(err error) error {
	if errors.Is(err, transport.ErrStaleEpoch) {
		f.p.stepDown(f.epoch + 1)
		return fmt.Errorf("%w: broker %d knows a newer leader epoch than %d: %v", ErrNotLeader, f.id, f.epoch, err)
	}
	return err
}

// confirm asks the follower whether it has seen a leader epoch newer than
// epoch, without fencing it: the leader steps down when it has.
func (f *follower) confirm(ctx context.Context, epoch int32) error {
	peer, err := f.peer()
	if err != nil {
		return err
	}
	st, err := peer.ReplicaState(ctx, &transport.ReplicaStateRequest{Topic: f.p.Topic, TopicID: f.p.TopicID, Partition: f.p.Index})
	if err != nil {
		return fmt.Errorf("confirm leadership with broker %d: %w", f.id, f.classify(err))
	}
	if st.FencedEpoch > epoch {
		f.p.stepDown(st.FencedEpoch)
		return fmt.Errorf("%w: broker %d has seen leader epoch %d, above this leader's %d", ErrNotLeader, f.id, st.FencedEpoch, epoch)
	}
	return nil
}

// catchUpNow runs catch-up on behalf of an operator, outside the sender's
// loop: it kicks the sender and waits for it to report in sync.
func (f *follower) catchUpNow(ctx context.Context) (from, to int64, err error) {
	before, _ := f.acked()
	it := f.enqueue(nil, f.p.log.LogEndOffset(), nil)
	select {
	case err = <-it.done:
	case <-ctx.Done():
		return before, before, ctx.Err()
	}
	after, _ := f.acked()
	return before, after, err
}

// catchUp checks that the follower's log is a prefix of the leader's, by
// content, and copies the leader's batches from the follower's log end up
// to target. A follower that is not a prefix is marked diverged and left
// untouched.
func (f *follower) catchUp(target int64) (from, to int64, err error) {
	peer, err := f.peer()
	if err != nil {
		return 0, 0, err
	}
	ctx, cancel := context.WithTimeout(f.ctx, f.p.opts.ReplicationTimeout)
	defer cancel()
	st, err := peer.ReplicaState(ctx, &transport.ReplicaStateRequest{
		Topic: f.p.Topic, TopicID: f.p.TopicID, Partition: f.p.Index, LeaderEpoch: f.epoch, TailBatches: tailCheck,
	})
	if err != nil {
		return 0, 0, f.classify(err)
	}
	if st.FencedEpoch > f.epoch {
		f.p.stepDown(st.FencedEpoch)
		return 0, 0, fmt.Errorf("%w: broker %d has seen epoch %d", ErrNotLeader, f.id, st.FencedEpoch)
	}
	if st.LogEndOffset > f.p.log.LogEndOffset() && st.LastEpoch >= f.p.log.LastEpoch() {
		// The follower holds more than this leader, of no older an epoch:
		// nothing acknowledged by this leader explains it, so this
		// leader's log lost records. It must not lead; the follower is not
		// the one at fault.
		err := fmt.Errorf("this leader is behind: active follower %d holds offsets up to %d (last epoch %d), this leader only up to %d (last epoch %d)",
			f.id, st.LogEndOffset, st.LastEpoch, f.p.log.LogEndOffset(), f.p.log.LastEpoch())
		f.p.markBehind(err)
		return 0, 0, fmt.Errorf("%w: %v", ErrReplicaUnhealthy, err)
	}
	if err := f.checkPrefix(st); err != nil {
		f.mu.Lock()
		f.mu.diverged = err
		f.mu.Unlock()
		f.p.logger.Error("follower diverged from the leader; recover it", "peer", f.id, "err", err)
		return 0, 0, err
	}
	from = st.LogEndOffset
	off, err := copyBatches(ctx, f.p, peer, f.epoch, from, target, nil)
	if err != nil {
		return from, off, f.classify(err)
	}
	f.mu.Lock()
	f.mu.ackedEnd, f.mu.known, f.mu.reached, f.mu.lastErr = off, true, true, nil
	f.mu.Unlock()
	if off > from {
		f.p.logger.Info("caught up follower", "peer", f.id, "from", from, "to", off)
	}
	return from, off, nil
}

// checkPrefix compares the follower's last batches with the leader's: the
// same base offset, end, epoch and CRC, which covers every byte of a batch.
func (f *follower) checkPrefix(st *transport.ReplicaStateResponse) error {
	leaderEnd := f.p.log.LogEndOffset()
	if st.LogEndOffset > leaderEnd {
		return fmt.Errorf("%w: broker %d holds up to offset %d, the leader only %d", ErrReplicaDivergence, f.id, st.LogEndOffset, leaderEnd)
	}
	if st.LogEndOffset < f.p.log.LogStartOffset() {
		return fmt.Errorf("broker %d ends at %d, before the leader's log start %d: recover it", f.id, st.LogEndOffset, f.p.log.LogStartOffset())
	}
	for _, b := range st.Tail {
		if b.NextOffset <= f.p.log.LogStartOffset() {
			continue
		}
		mine, ok, err := f.p.log.BatchAt(b.BaseOffset)
		if err != nil {
			return err
		}
		if !ok || mine.NextOffset != b.NextOffset || mine.LeaderEpoch != b.LeaderEpoch || mine.CRC != b.CRC {
			return fmt.Errorf("%w: broker %d's batch at offset %d (epoch %d, crc %08x) differs from the leader's", ErrReplicaDivergence, f.id, b.BaseOffset, b.LeaderEpoch, b.CRC)
		}
	}
	if len(st.Tail) == 0 && st.LogEndOffset > f.p.log.LogStartOffset() {
		return fmt.Errorf("%w: broker %d reported no batches for a non-empty log", ErrReplicaDivergence, f.id)
	}
	return nil
}

// copyBatches sends the leader's batches from offset from (a batch boundary
// that the follower's log ends at) up to target, in order, each request at
// most a megabyte (or pace's chunk), and returns the follower's log end.
// copyDepth requests are in flight at once: the next is read and sent
// while the follower writes and fsyncs the one before, so that a copy's
// rate is not one request's round trip (the follower handles a peer's
// requests in the order sent). With pace, each request first waits for
// its slot, and is counted once the follower acknowledged it.
func copyBatches(ctx context.Context, p *Partition, peer Peer, epoch int32, from, target int64, pace *copyPace) (int64, error) {
	type sent struct {
		wait func(context.Context) (int64, error)
		end  int64
		n    int
	}
	var flight []sent
	// One read buffer serves every request: SendReplicate copies a
	// request into its frame before it returns.
	var buf []byte
	off, next := from, from
	for off < target {
		for len(flight) < copyDepth && next < target {
			if err := p.log.Wait(ctx, next); err != nil {
				return off, err
			}
			data, err := p.log.Read(ctx, next, pace.readMax(), target, buf)
			if err != nil {
				return off, p.noteLogErr(err)
			}
			if cap(data) > cap(buf) {
				buf = data[:0]
			}
			// Whole batches, so the read can go out as one request. The
			// target validates each batch, checksum and all, before it
			// writes it: they are only framed here.
			var end int64
			if err := record.Split(data, func(b record.Batch) bool { end = b.NextOffset(); return true }); err != nil {
				return off, err
			}
			if len(data) == 0 {
				return off, fmt.Errorf("nothing to copy at offset %d", next)
			}
			if err := pace.before(ctx, len(data)); err != nil {
				return off, err
			}
			req := &transport.ReplicateRequest{Topic: p.Topic, TopicID: p.TopicID, Partition: p.Index, LeaderEpoch: epoch, LeaderID: p.brokerID,
				HighWatermark: p.HighWatermark(), Batch: data}
			w, err := peer.SendReplicate(ctx, req)
			if err != nil {
				return off, err
			}
			flight = append(flight, sent{wait: w, end: end, n: len(data)})
			next = end
		}
		head := flight[0]
		flight = flight[1:]
		got, err := head.wait(ctx)
		if err != nil {
			return off, err
		}
		if got != head.end {
			return off, fmt.Errorf("follower acknowledged log end %d, want %d", got, head.end)
		}
		pace.sent(head.n)
		off = got
	}
	return off, nil
}

// copyDepth is how many requests of a copy are in flight at once: 4 MiB
// at most, what 50 MB/s carries in 80 ms, a round trip on a busy machine.
const copyDepth = 4
