package groups

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/hashicorp/go-hclog"

	"gostream/metadata"
	"gostream/record"
	"gostream/replication"
	"gostream/transport"
)

// Sentinel errors of a Host.
var (
	// ErrNotCoordinator means this broker does not coordinate the group:
	// it does not lead the group's partition of __consumer_offsets (or no
	// longer does, or a newer leader exists). Retriable: the client finds
	// the coordinator again.
	ErrNotCoordinator = errors.New("groups: not the coordinator")
	// ErrCoordinatorLoading means the coordinator is rebuilding the groups
	// of its partition from the log. Retriable.
	ErrCoordinatorLoading = errors.New("groups: coordinator loading")
	// ErrCoordinatorFailed means the coordinator could not rebuild the
	// groups of its partition from the log: it serves none of them until
	// the partition is failed over (or its leadership changes).
	ErrCoordinatorFailed = errors.New("groups: coordinator cannot rebuild its groups")
)

const (
	// coordinatorTick is how often a host looks for the offsets
	// partitions its broker has come to lead (or stopped leading), and
	// expires the members whose sessions ran out.
	coordinatorTick = 100 * time.Millisecond
	// groupWait bounds how long a group request waits for its records to
	// be acknowledged.
	groupWait = 15 * time.Second
	// followerWait bounds how long a new coordinator waits for its
	// partition's active followers before it serves.
	followerWait = 5 * time.Second
	// lagRefresh is how often the high watermarks of committed partitions
	// led elsewhere are asked again, for the lag metrics.
	lagRefresh = 10 * time.Second
)

// HostConfig is what a Host needs of the broker it runs on.
type HostConfig struct {
	// Broker is the broker's id.
	Broker int32
	// Metadata returns the broker's metadata, nil before it has any.
	Metadata func() *metadata.Cluster
	// Lookup returns a topic's metadata and the broker's replica of one of
	// its partitions, nil when it hosts none. A topic id (id != "") other
	// than the topic's is an error, and so is a replica that is offline
	// here (its error says why).
	Lookup func(topic, id string, partition int32) (*metadata.Topic, *replication.Partition, error)
	// ListOffsets asks the broker at addr for a partition's high
	// watermark and log end.
	ListOffsets func(ctx context.Context, addr string, req *transport.ListOffsetsRequest) (*transport.ListOffsetsResponse, error)
	// MaxBatchBytes bounds the records of one append.
	MaxBatchBytes int
	// SnapshotEvery is CoordinatorConfig.SnapshotEvery.
	SnapshotEvery int
	// InitialDelay and MaxMemberBytes are CoordinatorConfig's
	// InitialRebalanceDelay and MaxMemberBytes.
	InitialDelay   time.Duration
	MaxMemberBytes int
	// ConsumerSession is CoordinatorConfig's.
	ConsumerSession time.Duration
	// LagPartitions bounds how many committed partitions led elsewhere
	// the host keeps the high watermarks of, for lags.
	LagPartitions int
	// OnRebalance, when set, is called for every new target assignment a
	// coordinator writes.
	OnRebalance func()
	// OnRebuilt, when set, is called with how long each coordinator took
	// to rebuild, once it serves.
	OnRebuilt func(took time.Duration)
	Logger    hclog.Logger
}

// Host hosts a Coordinator for every partition of __consumer_offsets its
// broker leads. A coordinator is built when the broker becomes the
// partition's leader at an epoch (a restart, a failover, elect-leaders),
// rebuilt from the replica's log, and serves only once every active
// follower has been brought up to the log's end (or followerWait passed);
// it is dropped when the broker stops leading, and its successor rebuilds
// from its own log, which holds every acknowledged record (see
// replication.LeaderStates). Every method is for any goroutine.
type Host struct {
	cfg    HostConfig
	log    hclog.Logger
	coords *replication.LeaderStates[int32, *Coordinator]
	hw     *hwCache
}

// NewHost returns a host that coordinates nothing until Run.
func NewHost(cfg HostConfig) *Host {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	h := &Host{cfg: cfg, log: cfg.Logger, hw: newHWCache(cfg)}
	h.coords = replication.NewLeaderStates(replication.LeaderStatesConfig[int32, *Coordinator]{
		Load:    h.load,
		AckWait: groupWait,
		// A coordinator's state is what the leader's log holds: a batch
		// whose replication failed stays in it, and in the state.
		KeepOnFailedAck: true,
	})
	return h
}

// Run keeps the coordinators in step with the broker's leadership of the
// offsets partitions, and expires the members whose sessions ran out,
// until ctx ends. It returns nil then.
func (h *Host) Run(ctx context.Context) error {
	lagDone := make(chan struct{})
	go func() {
		defer close(lagDone)
		h.refreshLagHWs(ctx)
	}()
	defer func() {
		h.coords.Close()
		<-lagDone
	}()
	t := time.NewTicker(coordinatorTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		h.sync(ctx)
		for p, c := range h.coords.Ready() {
			ectx, cancel := context.WithTimeout(ctx, groupWait)
			if err := c.Expire(ectx); err != nil && ctx.Err() == nil {
				h.log.Warn("expire group members", "partition", p, "err", err)
			}
			cancel()
		}
	}
}

// sync begins a coordinator for every offsets partition the broker now
// leads at an epoch it has none for, and drops those of partitions it no
// longer leads.
func (h *Host) sync(ctx context.Context) {
	var t *metadata.Topic
	if meta := h.cfg.Metadata(); meta != nil {
		t = meta.Topic(transport.OffsetsTopic)
	}
	leading := map[int32]bool{}
	if t != nil {
		for i := range t.Partitions {
			p := int32(i)
			_, part, err := h.cfg.Lookup(t.Name, t.ID, p)
			if err != nil || part == nil || part.State().Leader != h.cfg.Broker {
				continue
			}
			if err := h.coords.Begin(ctx, p, part); err == nil {
				leading[p] = true
			}
		}
	}
	h.coords.Retain(func(p int32) bool { return leading[p] })
}

// load rebuilds the coordinator of offsets partition p from its log, and
// brings its followers up to the log's end before it serves.
func (h *Host) load(ctx context.Context, p int32, lead *replication.Leadership) (*Coordinator, error) {
	start := time.Now()
	c := NewCoordinator(CoordinatorConfig{
		Log:                   &leaderLog{lead: lead, maxBatch: h.cfg.MaxBatchBytes},
		Topics:                h.hw,
		OnRebalance:           h.cfg.OnRebalance,
		MaxBatchBytes:         h.cfg.MaxBatchBytes,
		SnapshotEvery:         h.cfg.SnapshotEvery,
		InitialRebalanceDelay: h.cfg.InitialDelay,
		MaxMemberBytes:        h.cfg.MaxMemberBytes,
		ConsumerSession:       h.cfg.ConsumerSession,
		OnSnapshot: func(start int64, records int) {
			h.log.Debug("group snapshot appended", "partition", p, "start", start, "records", records)
		},
	})
	n, err := c.Rebuild(ctx, lead)
	if err != nil {
		if ctx.Err() == nil {
			h.log.Error("cannot rebuild the groups of an offsets partition; it serves no group until it is recovered",
				"partition", p, "epoch", lead.Epoch(), "err", err)
		}
		return nil, err
	}
	h.reachFollowers(ctx, lead.Partition())
	took := time.Since(start)
	if h.cfg.OnRebuilt != nil {
		h.cfg.OnRebuilt(took)
	}
	h.log.Info("group coordinator ready", "partition", p, "epoch", lead.Epoch(), "records", n,
		"groups", len(c.State().Groups()), "took", took.Round(time.Millisecond))
	return c, nil
}

// Rebuild loads the coordinator from its partition's log, replayed through
// lead from its start to its end, and starts it (Load, then Start). A
// record that does not decode stops it with an error matching
// ErrMalformed: the partition's groups are not served from a log that is
// not what the coordinators wrote. It returns how many records it loaded.
func (c *Coordinator) Rebuild(ctx context.Context, lead *replication.Leadership) (int, error) {
	part := lead.Partition()
	n := 0
	end, err := lead.Replay(ctx, func(b record.Batch) error {
		var derr error
		err := b.Records(func(r *record.Record) bool {
			rec, err := Decode(r.Key, r.Value)
			if err != nil {
				derr = fmt.Errorf("record at offset %d of %s/%d: %w", r.Offset, part.Topic, part.Index, err)
				return false
			}
			c.Load(rec, r.Offset)
			n++
			return true
		})
		if err != nil {
			return fmt.Errorf("batch at offset %d of %s/%d: %w", b.BaseOffset(), part.Topic, part.Index, err)
		}
		return derr
	})
	if err != nil {
		return n, err
	}
	c.Start(end)
	return n, nil
}

// reachFollowers brings every active follower of the offsets partition up
// to the leader's log end before the coordinator serves, trying each
// again while it fails, for at most followerWait in all. A partition just
// created may have followers that have not made their replica yet: a
// group request written before they have would fail to replicate. One
// that cannot be reached in time is left to the operator, as for any
// partition.
func (h *Host) reachFollowers(ctx context.Context, part *replication.Partition) {
	ctx, cancel := context.WithTimeout(ctx, followerWait)
	defer cancel()
	for _, id := range part.State().Active {
		if id == h.cfg.Broker {
			continue
		}
		for {
			_, _, err := part.CatchUp(ctx, id)
			if err == nil {
				break
			}
			t := time.NewTimer(50 * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				h.log.Warn("group coordinator serving before a follower of its partition answered", "partition", part.Index, "follower", id, "err", err)
				return
			case <-t.C:
			}
		}
	}
}

// ForGroup returns the coordinator of group when this broker is it. It
// returns an error matching ErrNotCoordinator when the broker does not
// lead the group's partition of __consumer_offsets (or there is none
// yet), ErrCoordinatorLoading while it rebuilds the partition's groups,
// ErrCoordinatorFailed when it could not, and the replica's error when
// the broker leads the partition on a replica that is offline here.
func (h *Host) ForGroup(group string) (*Coordinator, error) {
	var t *metadata.Topic
	if meta := h.cfg.Metadata(); meta != nil {
		t = meta.Topic(transport.OffsetsTopic)
	}
	if t == nil {
		return nil, fmt.Errorf("%w: there is no %s topic yet (FindCoordinator creates it)", ErrNotCoordinator, transport.OffsetsTopic)
	}
	p := int32(metadata.KeyPartition([]byte(group), len(t.Partitions)))
	return h.forPartition(t, p, group)
}

// ForPartition returns the coordinator of partition p of
// __consumer_offsets when this broker is it, to list its groups: an error
// matching ErrUnknownTopic when no group has been used (there is no such
// topic), ErrUnknownPartition, and ForGroup's errors.
func (h *Host) ForPartition(p int32) (*Coordinator, error) {
	var t *metadata.Topic
	if meta := h.cfg.Metadata(); meta != nil {
		t = meta.Topic(transport.OffsetsTopic)
	}
	if t == nil {
		return nil, fmt.Errorf("%w: no group has been used: there is no %s topic", ErrUnknownTopic, transport.OffsetsTopic)
	}
	return h.forPartition(t, p, "")
}

func (h *Host) forPartition(t *metadata.Topic, p int32, group string) (*Coordinator, error) {
	if p < 0 || int(p) >= len(t.Partitions) {
		return nil, fmt.Errorf("%w: %s has partitions 0 to %d", ErrUnknownPartition, t.Name, len(t.Partitions)-1)
	}
	what := fmt.Sprintf("partition %d of %s", p, t.Name)
	if group != "" {
		what = fmt.Sprintf("group %q (%s)", group, what)
	}
	c, _, err := h.coords.Peek(p)
	switch {
	case err == nil:
		return c, nil
	case errors.Is(err, replication.ErrLoading):
		return nil, fmt.Errorf("%w: broker %d is rebuilding %s from its log", ErrCoordinatorLoading, h.cfg.Broker, what)
	case errors.Is(err, replication.ErrLoadFailed):
		return nil, fmt.Errorf("%w: broker %d cannot serve %s: %v", ErrCoordinatorFailed, h.cfg.Broker, what, err)
	}
	leader := t.Partitions[p].Leader
	if _, _, err := h.cfg.Lookup(t.Name, t.ID, p); err != nil && leader == h.cfg.Broker {
		// Its replica here is damaged: its groups are not served from
		// it, and the operator fails the partition over.
		return nil, fmt.Errorf("broker %d cannot coordinate %s: its replica is offline: %w", h.cfg.Broker, what, err)
	}
	return nil, fmt.Errorf("%w: broker %d does not coordinate %s; broker %d leads it", ErrNotCoordinator, h.cfg.Broker, what, leader)
}

// Coordinators returns the coordinators that serve now, for metrics.
func (h *Host) Coordinators() []*Coordinator {
	ready := h.coords.Ready()
	out := make([]*Coordinator, 0, len(ready))
	for _, c := range ready {
		out = append(out, c)
	}
	return out
}

// RecentHighWatermark returns a partition's high watermark for a lag: its
// own when this broker leads it, else the one last learned from its
// leader if that is no older than fresh; false when neither is known.
func (h *Host) RecentHighWatermark(topic string, partition int32, fresh time.Duration) (int64, bool) {
	return h.hw.recent(topic, partition, fresh)
}

// refreshLagHWs keeps the high watermarks the lag metrics use fresh: every
// lagRefresh it asks the leaders of the committed partitions this broker
// does not lead (at most LagPartitions of them), until ctx ends.
func (h *Host) refreshLagHWs(ctx context.Context) {
	t := time.NewTicker(lagRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		seen := map[TopicPartition]bool{}
		for _, c := range h.Coordinators() {
			for _, g := range c.Stats() {
				for tp := range g.Offsets {
					seen[tp] = true
				}
			}
		}
		n := 0
		for tp := range seen {
			if n++; n > h.cfg.LagPartitions || ctx.Err() != nil {
				break
			}
			// Asking for more than any HW makes it ask the leader.
			_, _ = h.hw.HighWatermark(ctx, tp.Topic, tp.Partition, math.MaxInt64)
		}
	}
}

// leaderLog is a coordinator's Log: its partition's log, through the
// leadership it was rebuilt for.
type leaderLog struct {
	lead     *replication.Leadership
	maxBatch int
}

// Append implements Log.
func (l *leaderLog) Append(recs []Record) (int64, func(context.Context) error, error) {
	rs := make([]record.Record, len(recs))
	for i, r := range recs {
		k, v, err := r.Encode()
		if err != nil {
			return 0, nil, fmt.Errorf("%w: %v", ErrInvalidRequest, err)
		}
		rs[i] = record.Record{Key: k, Value: v}
	}
	batch, err := record.AppendBatch(nil, rs)
	if err != nil {
		return 0, nil, err
	}
	if len(batch) > l.maxBatch {
		return 0, nil, fmt.Errorf("%w: the group records of one request take %d bytes, more than a batch may (%d)", ErrInvalidRequest, len(batch), l.maxBatch)
	}
	end, wait, err := l.lead.Append(batch)
	if errors.Is(err, replication.ErrStateDropped) {
		// The host let the coordinator go (the broker stops leading it,
		// or shuts down).
		return 0, nil, fmt.Errorf("%w: %v", ErrNotCoordinator, err)
	}
	return end, wait, err
}

// WaitAcked implements Log.
func (l *leaderLog) Done() <-chan struct{} { return l.lead.Done() }

func (l *leaderLog) WaitAcked(ctx context.Context, end int64) error {
	return l.lead.WaitAcked(ctx, end)
}

// Confirm implements Log.
func (l *leaderLog) Confirm(ctx context.Context) error {
	err := l.lead.Confirm(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, replication.ErrNotLeader):
		return fmt.Errorf("%w: %v", ErrNotCoordinator, err)
	}
	// A follower that does not answer: nothing can be confirmed, and
	// commits fail as well until the operator drops it.
	p := l.lead.Partition()
	return fmt.Errorf("%w: cannot confirm this coordinator still leads %s/%d: %v", ErrNotCoordinator, p.Topic, p.Index, err)
}
