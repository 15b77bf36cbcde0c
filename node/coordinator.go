package node

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"gostream/groups"
	"gostream/metadata"
	"gostream/record"
	"gostream/replication"
	"gostream/transport"
)

// coordinatorTick is how often a node looks for the offsets partitions it
// has come to lead (or stopped leading), and expires the members whose
// sessions ran out.
const coordinatorTick = 100 * time.Millisecond

// groupWait bounds how long a group request waits for its records to be
// acknowledged.
const groupWait = 15 * time.Second

// coordinators holds a groups.Coordinator for every partition of
// __consumer_offsets this broker leads. A coordinator is made when the
// broker becomes the partition's leader at an epoch (a restart, a failover,
// elect-leaders), rebuilt from the replica's log, and dropped when the
// broker stops leading: its successor rebuilds from its own log, which
// holds every acknowledged record.
type coordinators struct {
	n  *Node
	mu sync.Mutex
	// slots by partition of the offsets topic.
	slots map[int32]*coordSlot
	hw    hwCache
}

type coordSlot struct {
	rep    *replica
	epoch  int32
	coord  *groups.Coordinator
	ready  chan struct{} // closed once loaded (or failed: err)
	err    error
	cancel context.CancelFunc
}

func newCoordinators(n *Node) *coordinators {
	return &coordinators{n: n, slots: map[int32]*coordSlot{}, hw: hwCache{n: n, known: map[topicPartition]int64{}, at: map[topicPartition]time.Time{}}}
}

// run keeps the coordinators in step with leadership and expires sessions
// until ctx ends.
func (cs *coordinators) run(ctx context.Context) error {
	t := time.NewTicker(coordinatorTick)
	defer t.Stop()
	go cs.refreshLagHWs(ctx)
	for {
		select {
		case <-ctx.Done():
			cs.mu.Lock()
			for p, s := range cs.slots {
				s.cancel()
				delete(cs.slots, p)
			}
			cs.mu.Unlock()
			return nil
		case <-t.C:
		}
		for _, s := range cs.sync(ctx) {
			ectx, cancel := context.WithTimeout(ctx, groupWait)
			if err := s.coord.Expire(ectx); err != nil && ctx.Err() == nil {
				cs.n.logger.Warn("expire group members", "partition", s.rep.part.Index, "err", err)
			}
			cancel()
		}
	}
}

// lagRefresh is how often the high watermarks of committed partitions
// led elsewhere are asked again, for the lag metrics.
const lagRefresh = 10 * time.Second

// refreshLagHWs keeps the high watermarks the lag metrics use fresh: every
// lagRefresh it asks the leaders of the committed partitions this broker
// does not lead (at most maxLagSeries of them), until ctx ends.
func (cs *coordinators) refreshLagHWs(ctx context.Context) {
	t := time.NewTicker(lagRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		seen := map[groups.TopicPartition]bool{}
		for _, s := range cs.readySlots() {
			for _, g := range s.coord.Stats() {
				for tp := range g.Offsets {
					seen[tp] = true
				}
			}
		}
		n := 0
		for tp := range seen {
			if n++; n > maxLagSeries || ctx.Err() != nil {
				break
			}
			// Asking for more than any HW makes it ask the leader.
			_, _ = cs.hw.HighWatermark(ctx, tp.Topic, tp.Partition, math.MaxInt64)
		}
	}
}

// readySlots returns the coordinators that are loaded and serving.
func (cs *coordinators) readySlots() []*coordSlot {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	var out []*coordSlot
	for _, s := range cs.slots {
		select {
		case <-s.ready:
			if s.err == nil {
				out = append(out, s)
			}
		default:
		}
	}
	return out
}

// sync starts a coordinator for every offsets partition this broker now
// leads at an epoch it has none for, drops those of partitions it no longer
// leads, and returns the coordinators that are ready.
func (cs *coordinators) sync(ctx context.Context) []*coordSlot {
	meta := cs.n.broker.metadata()
	var t *metadata.Topic
	if meta != nil {
		t = meta.Topic(transport.OffsetsTopic)
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	var ready []*coordSlot
	leading := map[int32]bool{}
	if t != nil {
		for p := range t.Partitions {
			_, rep, err := cs.n.broker.lookup(t.Name, t.ID, int32(p))
			if err != nil || rep == nil {
				continue
			}
			st := rep.part.State()
			if st.Leader != cs.n.cfg.ID {
				continue
			}
			leading[int32(p)] = true
			s := cs.slots[int32(p)]
			if s == nil || s.rep != rep || s.epoch != st.LeaderEpoch {
				if s != nil {
					s.cancel()
				}
				s = cs.start(ctx, rep, st.LeaderEpoch)
				cs.slots[int32(p)] = s
			}
			select {
			case <-s.ready:
				if s.err == nil {
					ready = append(ready, s)
				}
			default:
			}
		}
	}
	for p, s := range cs.slots {
		if !leading[p] {
			s.cancel()
			delete(cs.slots, p)
		}
	}
	return ready
}

// start rebuilds a coordinator from rep's log in the background.
func (cs *coordinators) start(ctx context.Context, rep *replica, epoch int32) *coordSlot {
	ctx, cancel := context.WithCancel(ctx)
	s := &coordSlot{rep: rep, epoch: epoch, ready: make(chan struct{}), cancel: cancel}
	s.coord = groups.NewCoordinator(groups.CoordinatorConfig{
		Log:           &offsetsLog{rep: rep, maxBatch: cs.n.cfg.MaxBatchBytes},
		Topics:        &cs.hw,
		OnRebalance:   cs.n.metrics.rebalances.Inc,
		MaxBatchBytes: cs.n.cfg.MaxBatchBytes,
		SnapshotEvery: cs.n.cfg.GroupSnapshotEvery,
		OnSnapshot: func(start int64, records int) {
			cs.n.logger.Debug("group snapshot appended", "partition", rep.part.Index, "start", start, "records", records)
		},
	})
	go func() {
		defer close(s.ready)
		start := time.Now()
		n, err := loadCoordinator(ctx, rep, s.coord)
		s.err = err
		if err != nil {
			if ctx.Err() == nil {
				cs.n.logger.Error("cannot rebuild the groups of an offsets partition; it serves no group until it is recovered",
					"partition", rep.part.Index, "epoch", epoch, "err", err)
			}
			return
		}
		cs.reachFollowers(ctx, rep)
		cs.n.metrics.groupRebuild.Observe(time.Since(start).Seconds())
		cs.n.logger.Info("group coordinator ready", "partition", rep.part.Index, "epoch", epoch, "records", n,
			"groups", len(s.coord.State().Groups()), "took", time.Since(start).Round(time.Millisecond))
	}()
	return s
}

// followerWait bounds how long a new coordinator waits for its
// partition's active followers before it serves.
const followerWait = 5 * time.Second

// reachFollowers brings every active follower of the offsets partition up
// to the leader's log end before the coordinator serves, trying each
// again while it fails, for at most followerWait in all. A partition just
// created may have followers that have not made their replica yet: a
// group request written before they have would fail to replicate. One
// that cannot be reached in time is left to the operator, as for any
// partition.
func (cs *coordinators) reachFollowers(ctx context.Context, rep *replica) {
	ctx, cancel := context.WithTimeout(ctx, followerWait)
	defer cancel()
	for _, id := range rep.part.State().Active {
		if id == cs.n.cfg.ID {
			continue
		}
		for {
			_, _, err := rep.part.CatchUp(ctx, id)
			if err == nil {
				break
			}
			t := time.NewTimer(50 * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				cs.n.logger.Warn("group coordinator serving before a follower of its partition answered", "partition", rep.part.Index, "follower", id, "err", err)
				return
			case <-t.C:
			}
		}
	}
}

// loadCoordinator applies every record of the replica's log, from its start
// to its end, to coord. A record that does not decode stops it: the
// partition's groups are not served from a log that is not what the
// coordinators wrote.
func loadCoordinator(ctx context.Context, rep *replica, coord *groups.Coordinator) (int, error) {
	off, end := rep.log.LogStartOffset(), rep.log.LogEndOffset()
	n := 0
	for off < end {
		buf, err := rep.log.Read(ctx, off, 1<<20, end, nil)
		if err != nil {
			return n, fmt.Errorf("read %s/%d at offset %d: %w", rep.part.Topic, rep.part.Index, off, err)
		}
		if len(buf) == 0 {
			return n, fmt.Errorf("read %s/%d at offset %d: nothing below the log end %d", rep.part.Topic, rep.part.Index, off, end)
		}
		var derr error
		err = record.Batches(buf, func(b record.Batch) bool {
			derr = b.Records(func(r *record.Record) bool {
				if r.Offset < off {
					return true
				}
				rec, err := groups.Decode(r.Key, r.Value)
				if err != nil {
					derr = fmt.Errorf("record at offset %d of %s/%d: %w", r.Offset, rep.part.Topic, rep.part.Index, err)
					return false
				}
				coord.Load(rec, r.Offset)
				n++
				off = r.Offset + 1
				return true
			})
			if derr == nil && b.NextOffset() > off {
				off = b.NextOffset()
			}
			return derr == nil
		})
		if err == nil {
			err = derr
		}
		if err != nil {
			return n, err
		}
	}
	coord.Start(end)
	return n, nil
}

// forGroup returns the coordinator of group when this broker is it:
// NotCoordinator when it does not lead the group's partition,
// CoordinatorLoading while it rebuilds.
func (cs *coordinators) forGroup(group string) (*groups.Coordinator, error) {
	meta := cs.n.broker.metadata()
	var t *metadata.Topic
	if meta != nil {
		t = meta.Topic(transport.OffsetsTopic)
	}
	if t == nil {
		return nil, fmt.Errorf("%w: there is no %s topic yet (FindCoordinator creates it)", transport.ErrNotCoordinator, transport.OffsetsTopic)
	}
	p := int32(metadata.KeyPartition([]byte(group), len(t.Partitions)))
	return cs.forPartition(t, p, group)
}

func (cs *coordinators) forPartition(t *metadata.Topic, p int32, group string) (*groups.Coordinator, error) {
	if p < 0 || int(p) >= len(t.Partitions) {
		return nil, fmt.Errorf("%w: %s has partitions 0 to %d", transport.ErrUnknownPartition, t.Name, len(t.Partitions)-1)
	}
	cs.mu.Lock()
	s := cs.slots[p]
	cs.mu.Unlock()
	what := fmt.Sprintf("partition %d of %s", p, t.Name)
	if group != "" {
		what = fmt.Sprintf("group %q (%s)", group, what)
	}
	if s == nil {
		if err := cs.n.broker.offlineErr(t.Name, p); err != nil && t.Partitions[p].Leader == cs.n.cfg.ID {
			// Its replica here is damaged: its groups are not served from
			// it, and the operator fails the partition over.
			return nil, fmt.Errorf("broker %d cannot coordinate %s: its replica is offline: %w", cs.n.cfg.ID, what, err)
		}
		return nil, fmt.Errorf("%w: broker %d does not coordinate %s; broker %d leads it", transport.ErrNotCoordinator, cs.n.cfg.ID, what, t.Partitions[p].Leader)
	}
	if st := s.rep.part.State(); st.Leader != cs.n.cfg.ID || st.LeaderEpoch != s.epoch {
		return nil, fmt.Errorf("%w: broker %d no longer coordinates %s", transport.ErrNotCoordinator, cs.n.cfg.ID, what)
	}
	select {
	case <-s.ready:
	default:
		return nil, fmt.Errorf("%w: broker %d is rebuilding %s from its log", transport.ErrCoordinatorLoading, cs.n.cfg.ID, what)
	}
	if s.err != nil {
		return nil, fmt.Errorf("%w: broker %d cannot serve %s: %v", transport.ErrStorageFailed, cs.n.cfg.ID, what, s.err)
	}
	return s.coord, nil
}

// offsetsLog is a coordinator's view of its replica.
type offsetsLog struct {
	rep      *replica
	maxBatch int
}

// Append implements groups.Log.
func (l *offsetsLog) Append(recs []groups.Record) (int64, func(context.Context) error, error) {
	rs := make([]record.Record, len(recs))
	for i, r := range recs {
		k, v, err := r.Encode()
		if err != nil {
			return 0, nil, fmt.Errorf("%w: %v", groups.ErrInvalidRequest, err)
		}
		rs[i] = record.Record{Key: k, Value: v}
	}
	batch, err := record.AppendBatch(nil, rs)
	if err != nil {
		return 0, nil, err
	}
	if len(batch) > l.maxBatch {
		return 0, nil, fmt.Errorf("%w: the group records of one request take %d bytes, more than a batch may (%d)", groups.ErrInvalidRequest, len(batch), l.maxBatch)
	}
	wait, err := l.rep.part.Produce(batch)
	if err != nil {
		return 0, nil, err
	}
	// Only the coordinator appends to this log, one append at a time.
	end := l.rep.log.LogEndOffset()
	return end, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, groupWait)
		defer cancel()
		_, err := wait(ctx)
		return err
	}, nil
}

// WaitAcked implements groups.Log.
func (l *offsetsLog) WaitAcked(ctx context.Context, end int64) error {
	if l.rep.part.HighWatermark() >= end || end <= 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, groupWait)
	defer cancel()
	for l.rep.part.HighWatermark() < end {
		// A fetch of the last record returns as soon as the HW passes it.
		if _, err := l.rep.part.Fetch(ctx, end-1, 1, time.Second); err != nil {
			return err
		}
	}
	return nil
}

// Confirm implements groups.Log.
func (l *offsetsLog) Confirm(ctx context.Context) error {
	err := l.rep.part.ConfirmLeader(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, replication.ErrNotLeader):
		return fmt.Errorf("%w: %v", transport.ErrNotCoordinator, err)
	}
	// A follower that does not answer: nothing can be confirmed, and
	// commits fail as well until the operator drops it.
	return fmt.Errorf("%w: cannot confirm this coordinator still leads %s/%d: %v", transport.ErrNotCoordinator, l.rep.part.Topic, l.rep.part.Index, err)
}

// hwCache answers a coordinator's questions about the topics its groups
// consume: their ids and partition counts from the metadata, and their
// high watermarks from their leaders, cached (a commit at or below the HW
// known needs no question).
type hwCache struct {
	n     *Node
	mu    sync.Mutex
	known map[topicPartition]int64
	at    map[topicPartition]time.Time // when known was last learned
}

// recent returns the partition's high watermark for a lag: its own when
// this broker leads it, else the one last learned from its leader if that
// is no older than fresh.
func (h *hwCache) recent(topic string, partition int32, fresh time.Duration) (int64, bool) {
	t, rep, err := h.n.broker.lookup(topic, "", partition)
	if err != nil {
		return 0, false
	}
	if rep != nil && t.Partitions[partition].Leader == h.n.cfg.ID {
		if _, hw, _, err := rep.part.LeaderOffsets(); err == nil {
			return hw, true
		}
	}
	key := topicPartition{t.ID, partition}
	h.mu.Lock()
	defer h.mu.Unlock()
	hw, ok := h.known[key]
	return hw, ok && time.Since(h.at[key]) <= fresh
}

// Topic implements groups.Topics.
func (h *hwCache) Topic(name string) (string, int32, bool) {
	meta := h.n.broker.metadata()
	if meta == nil {
		return "", 0, false
	}
	t := meta.Topic(name)
	if t == nil {
		return "", 0, false
	}
	return t.ID, int32(len(t.Partitions)), true
}

// HighWatermark implements groups.Topics.
func (h *hwCache) HighWatermark(ctx context.Context, topic string, partition int32, atLeast int64) (int64, error) {
	t, rep, err := h.n.broker.lookup(topic, "", partition)
	if err != nil {
		return 0, err
	}
	// By topic id: a topic created again under the name starts anew.
	key := topicPartition{t.ID, partition}
	h.mu.Lock()
	hw, ok := h.known[key]
	h.mu.Unlock()
	if ok && hw >= atLeast {
		return hw, nil
	}
	var end int64
	if rep != nil && t.Partitions[partition].Leader == h.n.cfg.ID {
		_, hw, end, err = rep.part.LeaderOffsets()
	} else {
		hw, end, err = h.ask(ctx, t, partition)
	}
	if err != nil {
		return 0, err
	}
	h.mu.Lock()
	if hw > h.known[key] {
		h.known[key] = hw
	}
	h.at[key] = time.Now()
	hw = h.known[key]
	h.mu.Unlock()
	if hw < atLeast && atLeast <= end {
		// The records are in the leader's log but not known to be on
		// every active replica: a leader that has just restarted or taken
		// over says the HW it checkpointed until its followers answer.
		// The commit may be valid in a moment; one above the log end is
		// not, and the coordinator refuses it.
		return 0, fmt.Errorf("%w: %s/%d: high watermark %d, below %d, which its log holds: not acknowledged yet", transport.ErrNotReady, topic, partition, hw, atLeast)
	}
	return hw, nil
}

// ask asks the partition's leader for its high watermark and log end.
func (h *hwCache) ask(ctx context.Context, t *metadata.Topic, partition int32) (hw, end int64, err error) {
	leader := t.Partitions[partition].Leader
	b, ok := h.n.broker.metadata().Broker(leader)
	if !ok || b.Addr == "" {
		return 0, 0, fmt.Errorf("%w: %s/%d has no leader with an address (leader %d)", transport.ErrBrokerNotAvailable, t.Name, partition, leader)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var resp transport.ListOffsetsResponse
	if err := h.n.pool.Call(ctx, b.Addr, transport.APIListOffsets, &transport.ListOffsetsRequest{Topic: t.Name, TopicID: t.ID, Partition: partition}, &resp); err != nil {
		return 0, 0, fmt.Errorf("ask broker %d: %w", leader, err)
	}
	return resp.HighWatermark, resp.LogEndOffset, nil
}
