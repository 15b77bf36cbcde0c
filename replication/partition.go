package replication

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"gostream/record"
	"gostream/storage"
	"gostream/transport"
)

// Sentinel errors of package replication.
var (
	// ErrNotLeader means this replica does not lead the partition.
	ErrNotLeader = errors.New("replication: not the leader")
	// ErrStaleEpoch means a request for a leader epoch older than the
	// replica has seen.
	ErrStaleEpoch = errors.New("replication: stale leader epoch")
	// ErrOffsetOutOfRange means a fetch offset outside the log.
	ErrOffsetOutOfRange = errors.New("replication: offset out of range")
	// ErrReplicationFailed means an active follower did not store a batch.
	// The error names the brokers; the leader's copy stays.
	ErrReplicationFailed = errors.New("replication: replication failed")
	// ErrReplicaDivergence means a follower's log is not a prefix of the
	// leader's. It is left as it is for the operator to recover.
	ErrReplicaDivergence = errors.New("replication: replica diverged")
	// ErrNotReady means a leader that has not yet reached an active
	// follower since it began to lead (every node restarted at once): the
	// write was refused before it was appended. It is retriable.
	ErrNotReady = errors.New("replication: leader not ready")
	// ErrReplicaUnhealthy means a replica that cannot be trusted to lead:
	// its log is damaged (a checksum failed on read), or an active
	// follower holds more than it. It takes no writes; the operator fails
	// the partition over (which this state allows while the node runs)
	// and recovers the replica.
	ErrReplicaUnhealthy = errors.New("replication: replica unhealthy")
)

// Log is what a Partition needs of its replica's log.
type Log interface {
	Write(batch record.Batch, epoch int32) (storage.AppendResult, storage.Durable, error)
	WriteExact(batch record.Batch) (storage.AppendResult, storage.Durable, error)
	Read(ctx context.Context, offset int64, maxBytes int, limit int64, buf []byte) ([]byte, error)
	ReadRange(offset int64, maxBytes int, limit int64, minBytes int) (*storage.Range, error)
	Wait(ctx context.Context, offset int64) error
	LastBatches(n int) ([]storage.BatchInfo, error)
	BatchesBefore(before int64, n int) ([]storage.BatchInfo, error)
	BatchAt(offset int64) (storage.BatchInfo, bool, error)
	Digest(ctx context.Context, from, to int64) ([32]byte, int, error)
	TruncateTo(ctx context.Context, offset int64) error
	LogStartOffset() int64
	LogEndOffset() int64
	DurableEndOffset() int64
	LastEpoch() int32
	// Failed is why the log refuses appends (a failed write or fsync), nil
	// when it takes them.
	Failed() error
}

// State is the leadership state of a partition as the controller assigned it.
type State struct {
	Leader      int32
	LeaderEpoch int32
	Active      []int32
	// Replicas are the partition's assigned replicas, when known: a
	// replica recovered here that is no longer one of them (a move was
	// cancelled) is no longer counted. Nil: not known, nothing follows.
	Replicas []int32
}

// Options configure a Partition beyond its log.
type Options struct {
	// Peers reaches the other brokers; needed to lead with followers.
	Peers Peers
	// EpochFile persists the highest leader epoch the replica has seen.
	// Empty keeps it in memory only (tests).
	EpochFile string
	// ReplicationTimeout bounds one round of replication to a follower
	// (default 10s); a producer's own deadline still applies first.
	ReplicationTimeout time.Duration
	// OnStaleEpoch is called for every request refused for its old epoch.
	OnStaleEpoch func()
	// TopicID is the topic's id (see Partition.TopicID).
	TopicID string
	// HighWatermark is the replica's checkpointed high watermark, from
	// before a restart (0: none). The replica starts with it, clamped to
	// its durable log, so a restarted leader serves the records below it
	// at once, before it has heard from its followers.
	HighWatermark int64
	// JoinHold is how long a replica recovered here is counted in every
	// acknowledgement before the metadata lists it active (default
	// transport.RecoveredReplicaHold; see RecoverFollower).
	JoinHold time.Duration
	Logger   hclog.Logger
}

// Partition is one partition replica on this broker, leader or follower.
type Partition struct {
	Topic string
	// TopicID is the id of the topic's incarnation (metadata.Topic.ID),
	// carried by every request to another replica so that it never reaches
	// a later topic of the same name.
	TopicID  string
	Index    int32
	brokerID int32
	log      Log
	logger   hclog.Logger
	opts     Options

	// produceMu orders a leader's log writes with the queues of its
	// followers, so every follower receives batches in log order.
	produceMu sync.Mutex
	// settling are the produces whose callers gave up, seen through to
	// their batches' durability here (see Produce); Close waits for them.
	settling sync.WaitGroup
	// epochMu serializes persisting the fenced epoch.
	epochMu sync.Mutex

	// Lock order: mu before any follower's mu.
	mu struct {
		sync.Mutex
		state     State
		fenced    int32 // highest leader epoch seen, persisted
		steppedDn bool  // a follower knows a newer epoch: stop leading
		hw        int64
		hwKnown   bool
		hwChanged chan struct{}
		followers map[int32]*follower
		// joining are the replicas recovered here that the metadata does
		// not list active yet, each with its sender (also in followers):
		// every acknowledgement waits for them too (see RecoverFollower).
		joining map[int32]joiner
		// damaged is set, for good, when a read of the log finds a batch
		// that fails its checksum; behind, when an active follower holds
		// more than this replica while it leads (cleared by a new epoch).
		damaged error
		behind  error
		// noSpace is the error of the last append, the leader's own or a
		// follower's of its leader's batches, when it failed for want of
		// space (a full disk), until an append succeeds again.
		noSpace error
		// leading is closed when this replica stops leading at the epoch
		// of state (a new epoch, another leader, Close); nil while it
		// does not lead. See Leadership.
		leading chan struct{}
		closed  bool
		// recovering are the brokers a recovery here is under way for;
		// copies, the progress of the last paced copy to each broker
		// (RecoverFollowerPaced).
		recovering map[int32]bool
		copies     map[int32]*copyTrack
	}
}

// NewPartition wraps the log of a replica on broker brokerID. Until SetState
// is called it leads nothing. The fenced epoch is loaded from
// opts.EpochFile.
func NewPartition(topic string, index, brokerID int32, log Log, logger hclog.Logger, opts ...Options) *Partition {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	p := &Partition{Topic: topic, Index: index, brokerID: brokerID, log: log,
		logger: logger.With("topic", topic, "partition", index)}
	if len(opts) > 0 {
		p.opts = opts[0]
	}
	p.TopicID = p.opts.TopicID
	if p.opts.ReplicationTimeout <= 0 {
		p.opts.ReplicationTimeout = 10 * time.Second
	}
	if p.opts.JoinHold <= 0 {
		p.opts.JoinHold = transport.RecoveredReplicaHold
	}
	if p.opts.OnStaleEpoch == nil {
		p.opts.OnStaleEpoch = func() {}
	}
	p.mu.hwChanged = make(chan struct{})
	p.mu.hw = max(log.LogStartOffset(), min(p.opts.HighWatermark, log.DurableEndOffset()))
	p.mu.state.Leader = -1
	p.mu.fenced = max(log.LastEpoch(), 0)
	if p.opts.EpochFile != "" {
		if data, err := os.ReadFile(p.opts.EpochFile); err == nil {
			if e, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 32); err == nil && int32(e) > p.mu.fenced {
				p.mu.fenced = int32(e)
			}
		}
	}
	return p
}

// fenceTo records epoch as the highest seen, durably, before the replica
// acts on it. An older epoch is refused with ErrStaleEpoch.
func (p *Partition) fenceTo(epoch int32) error {
	p.epochMu.Lock()
	defer p.epochMu.Unlock()
	p.mu.Lock()
	fenced := p.mu.fenced
	p.mu.Unlock()
	switch {
	case epoch < fenced:
		p.opts.OnStaleEpoch()
		return fmt.Errorf("%w: partition %s/%d has seen epoch %d, request carries %d", ErrStaleEpoch, p.Topic, p.Index, fenced, epoch)
	case epoch == fenced:
		return nil
	}
	if p.opts.EpochFile != "" {
		if err := storage.WriteFileAtomic(p.opts.EpochFile, []byte(strconv.Itoa(int(epoch))+"\n")); err != nil {
			return fmt.Errorf("persist leader epoch: %w", err)
		}
	}
	// Under produceMu, so that no produce of the older epoch is written
	// once the new epoch is known.
	p.produceMu.Lock()
	p.mu.Lock()
	p.mu.fenced = max(p.mu.fenced, epoch)
	p.mu.Unlock()
	p.produceMu.Unlock()
	return nil
}

// Problem says why this replica cannot be trusted to lead: its log is
// damaged, or (as leader) an active follower holds more than it; nil when
// healthy. A replica with a problem takes no writes.
//
// A replica whose last append failed for want of space has a problem too,
// from that one failed append until an append succeeds, while it leads or
// is an active follower: every write to the partition waits for it. It
// still takes every write (a leader tries its own, a follower stores what
// its leader sends), to find the space back. A replica outside the active
// set is sent nothing, so its full disk is no problem of the partition's:
// recovery finds it out by its own appends.
func (p *Partition) Problem() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.problemLocked(); err != nil {
		return err
	}
	st := p.mu.state
	switch {
	case p.mu.noSpace == nil:
	case st.Leader == p.brokerID:
		return fmt.Errorf("%w: %s: %w; free space on it and writes go on by themselves", ErrReplicaUnhealthy, diskFull(p.brokerID), p.mu.noSpace)
	case slices.Contains(st.Active, p.brokerID):
		return fmt.Errorf("%w: %s: %w; it cannot store what its leader, broker %d, sends, and writes to %s/%d fail until "+
			"space is freed on it (then it resumes by itself) or it is dropped: gostream-ctl failover --topic %s --partition %d --broker %d",
			ErrReplicaUnhealthy, diskFull(p.brokerID), p.mu.noSpace, st.Leader, p.Topic, p.Index, p.Topic, p.Index, p.brokerID)
	}
	return nil
}

// diskFull is what a replica's Problem says of a full disk on broker. A
// problem crosses the wire as text, and recovery looks for this in it: a
// full disk leaves a replica's log whole (an append that finds no space
// does not happen), so the replica is recovered as usual, not rebuilt as
// a damaged one is.
func diskFull(broker int32) string { return fmt.Sprintf("the disk of broker %d is full", broker) }

// noteAppend records the outcome of an append for Problem: one that failed
// for want of space is the replica's problem until one succeeds. Other
// failures change nothing here.
func (p *Partition) noteAppend(err error) {
	noSpace := errors.Is(err, storage.ErrNoSpace)
	if err != nil && !noSpace {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.noSpace = nil
	if noSpace {
		p.mu.noSpace = err
	}
}

// problemLocked is a problem that keeps the replica from taking writes.
func (p *Partition) problemLocked() error {
	switch {
	case p.mu.damaged != nil:
		return p.mu.damaged
	case p.mu.behind != nil:
		return p.mu.behind
	}
	if err := p.log.Failed(); err != nil {
		return fmt.Errorf("%w: the storage of %s/%d on broker %d failed (%w); it resumes by itself once the cause is gone (a full disk freed)", ErrReplicaUnhealthy, p.Topic, p.Index, p.brokerID, err)
	}
	return nil
}

// noteLogErr marks the replica damaged when err says its log is corrupt,
// and returns err.
func (p *Partition) noteLogErr(err error) error {
	if err == nil || !errors.Is(err, storage.ErrCorrupt) {
		return err
	}
	p.mu.Lock()
	if p.mu.damaged == nil {
		p.mu.damaged = fmt.Errorf("%w: the log of %s/%d on broker %d is damaged: %v", ErrReplicaUnhealthy, p.Topic, p.Index, p.brokerID, err)
		p.logger.Error("replica is damaged; it takes no writes: fail the partition over if it leads, then recover this replica", "err", err)
	}
	p.mu.Unlock()
	return err
}

// markBehind records that an active follower holds more than this
// leader's log: this leader lost records (a disk that lost writes, a file
// put back), and must not lead.
func (p *Partition) markBehind(err error) {
	p.mu.Lock()
	if p.mu.behind == nil {
		p.mu.behind = fmt.Errorf("%w: %v", ErrReplicaUnhealthy, err)
		p.logger.Error("this leader is behind an active follower; it takes no writes: fail the partition over (the follower has more), then recover this replica", "err", err)
	}
	p.mu.Unlock()
}

// FencedEpoch is the highest leader epoch this replica has seen.
func (p *Partition) FencedEpoch() int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.fenced
}

// SetState applies the controller's leadership state. A state with an
// older epoch than the replica has seen is refused with ErrStaleEpoch. As
// leader it starts a sender per active follower; as follower it stops them.
func (p *Partition) SetState(s State) error {
	if err := p.fenceTo(s.LeaderEpoch); err != nil {
		return err
	}
	// fenceTo refused anything below the highest epoch seen, which is at
	// least the epoch of the state held.
	p.mu.Lock()
	prev := p.mu.state
	p.mu.state = State{Leader: s.Leader, LeaderEpoch: s.LeaderEpoch, Active: slices.Clone(s.Active)}
	leading := s.Leader == p.brokerID
	if p.mu.leading != nil && (!leading || s.LeaderEpoch != prev.LeaderEpoch) {
		close(p.mu.leading)
		p.mu.leading = nil
	}
	if leading && p.mu.leading == nil && !p.mu.closed {
		p.mu.leading = make(chan struct{})
	}
	if s.LeaderEpoch > prev.LeaderEpoch {
		p.mu.steppedDn = false
		p.mu.behind = nil // a new epoch, a new leader: it compares anew
	}
	var stop []*follower
	var start []*follower
	want := map[int32]bool{}
	if leading {
		for _, id := range s.Active {
			if id != p.brokerID {
				want[id] = true
			}
		}
	}
	// A replica recovered here stays counted until the metadata lists it
	// active (then it is a follower like the others), or the leadership
	// moves on (the recovery's commit fails then: it is made for this
	// leader and epoch), or it is no replica any more (a move added it and
	// was cancelled: it is deleted).
	for id, j := range p.mu.joining {
		switch {
		case !leading || s.LeaderEpoch != j.epoch || want[id] || s.Replicas != nil && !slices.Contains(s.Replicas, id):
			delete(p.mu.joining, id)
		default:
			want[id] = true
		}
	}
	epochChanged := s.LeaderEpoch != prev.LeaderEpoch
	for id, f := range p.mu.followers {
		if !want[id] || epochChanged {
			stop = append(stop, f)
			delete(p.mu.followers, id)
		}
	}
	if leading {
		if p.mu.followers == nil {
			p.mu.followers = map[int32]*follower{}
		}
		for id := range want {
			if _, ok := p.mu.followers[id]; !ok {
				f := newFollower(p, id, s.LeaderEpoch)
				p.mu.followers[id] = f
				start = append(start, f)
			}
		}
	}
	p.mu.Unlock()
	for _, f := range stop {
		f.stop()
	}
	for _, f := range start {
		f.start()
	}
	p.recomputeHW()
	return nil
}

// State returns the partition's leadership state.
func (p *Partition) State() State {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.mu.state
	s.Active = slices.Clone(s.Active)
	return s
}

// Close stops the partition's follower senders.
func (p *Partition) Close() {
	p.mu.Lock()
	fs := p.mu.followers
	p.mu.followers = nil
	p.mu.joining = nil
	p.mu.closed = true
	if p.mu.leading != nil {
		close(p.mu.leading)
		p.mu.leading = nil
	}
	p.mu.Unlock()
	for _, f := range fs {
		f.stop()
	}
	p.settling.Wait()
}

func (p *Partition) advanceHWLocked(hw int64) {
	if hw > p.mu.hw {
		p.mu.hw = hw
		close(p.mu.hwChanged)
		p.mu.hwChanged = make(chan struct{})
	}
}

// recomputeHW sets the HW, as leader, to what every active replica holds
// durably, once every follower's position is known.
func (p *Partition) recomputeHW() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.state.Leader != p.brokerID {
		p.mu.hwKnown = false
		return
	}
	hw := p.log.DurableEndOffset()
	for _, f := range p.mu.followers {
		acked, ok := f.acked()
		if !ok {
			return
		}
		hw = min(hw, acked)
	}
	p.mu.hwKnown = true
	p.advanceHWLocked(hw)
}

// HighWatermark is the offset below which every active replica holds the
// records.
func (p *Partition) HighWatermark() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.hw
}

// passedLocked reports whether a leadership of this replica at epoch has
// been passed, whatever the metadata says yet: the replica stepped down (a
// follower knows a newer epoch) or has itself recorded a newer epoch (a
// newer leader asked its state or sent it batches). The caller holds p.mu.
func (p *Partition) passedLocked(epoch int32) bool {
	return p.mu.steppedDn || p.mu.fenced > epoch
}

// stepDown makes a leader that learned of a newer epoch stop leading until
// new metadata says otherwise.
func (p *Partition) stepDown(epoch int32) {
	p.fenceTo(epoch)
	p.mu.Lock()
	if !p.mu.steppedDn {
		p.logger.Warn("a follower knows a newer leader epoch; no longer leading", "epoch", p.mu.state.LeaderEpoch, "newer", epoch)
	}
	p.mu.steppedDn = true
	p.mu.Unlock()
}

// Ack is the acknowledgement of a produced batch.
type Ack struct {
	BaseOffset  int64
	NextOffset  int64
	LeaderEpoch int32
	AppendTime  int64
	Replicas    []int32 // the replicas that hold the batch durably
}

// ReplicationError names the followers that did not store a batch.
type ReplicationError struct {
	Failures map[int32]error
}

func (e *ReplicationError) Error() string {
	ids := make([]int32, 0, len(e.Failures))
	for id := range e.Failures {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprintf("broker %d: %v", id, e.Failures[id])
	}
	return "replication failed on " + strings.Join(parts, "; ") + " (the leader keeps the batch; the follower lags until caught up)"
}

// Is makes a ReplicationError match ErrReplicationFailed, and
// ErrReplicaDivergence when a follower diverged.
func (e *ReplicationError) Is(target error) bool {
	if target == ErrReplicationFailed {
		return true
	}
	if target == ErrReplicaDivergence {
		for _, err := range e.Failures {
			if errors.Is(err, ErrReplicaDivergence) {
				return true
			}
		}
	}
	return false
}

// Brokers returns the failed brokers, ascending.
func (e *ReplicationError) Brokers() []int32 {
	ids := make([]int32, 0, len(e.Failures))
	for id := range e.Failures {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Produce appends batch as leader, in the order Produce is called, hands
// the same bytes to every active follower, and returns a function that
// waits until every active replica holds it durably. The batch's header is
// restamped in place. It returns ErrNotLeader when this replica does not
// lead, and the log's errors; the wait returns a *ReplicationError naming
// the followers that failed.
func (p *Partition) Produce(batch record.Batch) (func(ctx context.Context) (Ack, error), error) {
	return p.ProduceHeld(batch, nil)
}

// ProduceHeld is Produce for a batch whose memory its caller reuses: hold,
// when not nil, is called once for each follower the batch is queued to,
// and each release it returns is called once that follower's sender is
// done with the batch, which may be after the wait has returned (a wait
// that timed out). A release that is never called (a sender stopped as the
// batch was queued) only leaves the memory to the garbage collector.
func (p *Partition) ProduceHeld(batch record.Batch, hold func() (release func())) (func(ctx context.Context) (Ack, error), error) {
	_, wait, err := p.produce(batch, nil, hold)
	return wait, err
}

// produce is Produce, for the holder of a leadership (as) when as is not
// nil: it appends only while as is current and its state is not dropped,
// both checked under produceMu, so that nothing is appended for a state
// once it is dropped or its epoch ended. It returns where the batch landed.
func (p *Partition) produce(batch record.Batch, as *Leadership, hold func() (release func())) (storage.AppendResult, func(ctx context.Context) (Ack, error), error) {
	p.produceMu.Lock()
	p.mu.Lock()
	// A replica that has recorded a newer epoch than the one it leads (a
	// new leader reached it before the controller's metadata did) no longer
	// leads.
	st, stepped := p.mu.state, p.passedLocked(p.mu.state.LeaderEpoch)
	problem := p.problemLocked()
	followers := make([]*follower, 0, len(p.mu.followers))
	for _, f := range p.mu.followers {
		followers = append(followers, f)
	}
	p.mu.Unlock()
	if st.Leader != p.brokerID {
		p.produceMu.Unlock()
		return storage.AppendResult{}, nil, fmt.Errorf("%w: partition %s/%d is led by broker %d", ErrNotLeader, p.Topic, p.Index, st.Leader)
	}
	if stepped {
		p.produceMu.Unlock()
		return storage.AppendResult{}, nil, fmt.Errorf("%w: broker %d no longer leads %s/%d: a newer leader epoch than %d exists; waiting for the controller's metadata", ErrNotLeader, p.brokerID, p.Topic, p.Index, st.LeaderEpoch)
	}
	if as != nil && as.dropped {
		p.produceMu.Unlock()
		return storage.AppendResult{}, nil, fmt.Errorf("%w: %s/%d: nothing was appended", ErrStateDropped, p.Topic, p.Index)
	}
	if as != nil && st.LeaderEpoch != as.epoch {
		p.produceMu.Unlock()
		return storage.AppendResult{}, nil, fmt.Errorf("%w: broker %d leads %s/%d at epoch %d now, no longer at %d", ErrNotLeader, p.brokerID, p.Topic, p.Index, st.LeaderEpoch, as.epoch)
	}
	if problem != nil {
		p.produceMu.Unlock()
		return storage.AppendResult{}, nil, fmt.Errorf("%w; it takes no writes: gostream-ctl failover --topic %s --partition %d", problem, p.Topic, p.Index)
	}
	// A leader that has not yet reached an active follower since it began
	// to lead (every node restarted at once, and this one came back
	// first) refuses before it appends: the write would fail anyway, and
	// failing after the append would leave its outcome unknown. Refused
	// like this it provably was not appended, and a client retries it.
	for _, f := range followers {
		if err := f.notYetReached(); err != nil {
			p.produceMu.Unlock()
			return storage.AppendResult{}, nil, fmt.Errorf("%w: %s/%d: broker %d leads it, and its active follower %d has not answered since (%v); nothing was appended. "+
				"If broker %d is gone for good: gostream-ctl failover --broker %d", ErrNotReady, p.Topic, p.Index, p.brokerID, f.id, err, f.id, f.id)
		}
	}
	res, durable, err := p.log.Write(batch, st.LeaderEpoch)
	p.noteAppend(err)
	if err != nil {
		p.produceMu.Unlock()
		return storage.AppendResult{}, nil, err
	}
	items := make([]*item, len(followers))
	for i, f := range followers {
		var release func()
		if hold != nil {
			release = hold()
		}
		items[i] = f.enqueue(batch, res.NextOffset, release)
	}
	p.produceMu.Unlock()

	return res, func(ctx context.Context) (Ack, error) {
		// The HW is what every active replica holds durably. The
		// followers' rounds recompute it as they end, but a round that
		// ended before this copy was durable could not pass it: so it is
		// recomputed once it is, whether or not this caller waits on for
		// the followers (a caller that gave up would otherwise leave the
		// HW below a batch every replica holds, until the next write).
		//
		// Before it blocks in the leader's own fsync, this goroutine lets
		// the follower senders it has just woken run, when they wait for
		// its processor (yielding at most a few times: a sender another
		// processor took sends from there), so that the copies leave now
		// and not once another thread has woken up or the runtime has
		// taken the processor back from the fsync. A synchronous
		// producer's wait is the slowest follower's round trip, which
		// starts here.
		for range maxYields {
			if allTaken(items) {
				break
			}
			runtime.Gosched()
		}
		derr := durable(ctx)
		switch {
		case derr == nil:
			p.recomputeHW()
		case ctx.Err() != nil:
			p.settling.Add(1)
			go func() {
				defer p.settling.Done()
				if durable(context.WithoutCancel(ctx)) == nil {
					p.recomputeHW()
				}
			}()
		}
		var rerr *ReplicationError
		for i, it := range items {
			var err error
			select {
			case err = <-it.done:
			default:
				// A follower has not answered yet: its answer may take a
				// while (a slow or silent follower), which the connection
				// this produce came on must not wait for.
				transport.WaitingOnOthers(ctx)
				select {
				case err = <-it.done:
				case <-ctx.Done():
					err = fmt.Errorf("no acknowledgement before the deadline (%v)", ctx.Err())
				}
			}
			if err != nil {
				if rerr == nil {
					rerr = &ReplicationError{Failures: map[int32]error{}}
				}
				rerr.Failures[followers[i].id] = err
			}
		}
		if derr != nil {
			return Ack{}, derr
		}
		if rerr != nil {
			return Ack{}, rerr
		}
		p.mu.Lock()
		p.advanceHWLocked(res.NextOffset)
		p.mu.Unlock()
		replicas := []int32{p.brokerID}
		for _, f := range followers {
			replicas = append(replicas, f.id)
		}
		slices.Sort(replicas)
		return Ack{BaseOffset: res.BaseOffset, NextOffset: res.NextOffset, LeaderEpoch: res.LeaderEpoch,
			AppendTime: res.AppendTime, Replicas: replicas}, nil
	}, nil
}

// maxYields bounds how many times a produce yields its processor to the
// follower senders before its own fsync.
const maxYields = 3

// allTaken says whether every item is in its sender's hands.
func allTaken(items []*item) bool {
	for _, it := range items {
		if !it.taken.Load() {
			return false
		}
	}
	return true
}

// FetchResult is what a fetch returns.
type FetchResult struct {
	HighWatermark  int64
	LogStartOffset int64
	Batches        []byte
	// Range, when FetchInto was asked for one, holds the batches in place
	// of Batches: where they lie in a segment's file, lent until the
	// caller releases it (storage.Log.ReadRange).
	Range *storage.Range
}

// Fetch reads whole batches from offset below the HW, up to about maxBytes.
// With maxWait > 0 it waits until there is something to return or the wait
// is over. A leader that has not heard from its followers yet serves
// below the HW it had (see LeaderOffsets). It returns ErrNotLeader when
// this replica does not lead, and ErrOffsetOutOfRange for an offset below the log start. An offset at
// or past the HW, even past the log end, is answered with no batches
// (after the wait).
func (p *Partition) Fetch(ctx context.Context, offset int64, maxBytes int, maxWait time.Duration) (FetchResult, error) {
	return p.FetchInto(ctx, offset, maxBytes, maxWait, 0, nil)
}

// FetchInto is Fetch reading into the buffer that buf returns, when it is
// large enough, so a server can reuse its read buffers; the result's
// Batches may alias it. buf is called once there is something to read,
// not while a long poll waits, so a server that must reserve memory for
// the read does it in buf; an error from buf ends the fetch with it. A
// nil buf reads into a new buffer. With rangeMin > 0 the batches come,
// when the log can lend them so and they are at least rangeMin bytes, as
// a Range of a segment's file rather than read (and buf is not called):
// for a server that sends them from the file.
//
// A long poll waits on its own partition's high watermark alone: it wakes
// when that moves (once per group commit, or per replication round with
// followers), never for writes to other partitions, and a fetch that
// finds records at once sets no timer.
func (p *Partition) FetchInto(ctx context.Context, offset int64, maxBytes int, maxWait time.Duration, rangeMin int, buf func() ([]byte, error)) (FetchResult, error) {
	var (
		deadline time.Time
		timer    *time.Timer // made when the fetch first waits
		expired  = maxWait <= 0
	)
	if !expired {
		deadline = time.Now().Add(maxWait)
	}
	var into []byte // from buf
	asked := false
	for {
		p.mu.Lock()
		st, hw, changed := p.mu.state, p.mu.hw, p.mu.hwChanged
		p.mu.Unlock()
		if st.Leader != p.brokerID {
			return FetchResult{}, fmt.Errorf("%w: partition %s/%d is led by broker %d", ErrNotLeader, p.Topic, p.Index, st.Leader)
		}
		// A leader that has not heard from its followers yet (just
		// started, or just made leader) serves what lies below the HW it
		// had, checkpointed: every active replica held those records. What
		// lies above waits for the followers' answers.
		// An offset past the log end is a position a consumer may seek
		// to: it waits, as at the HW, until records reach it.
		start := p.log.LogStartOffset()
		if offset < start {
			return FetchResult{}, fmt.Errorf("%w: offset %d, partition %s/%d starts at %d", ErrOffsetOutOfRange, offset, p.Topic, p.Index, start)
		}
		if offset < hw {
			if rangeMin > 0 && !asked {
				r, err := p.log.ReadRange(offset, maxBytes, hw, rangeMin)
				p.noteLogErr(err)
				if errors.Is(err, storage.ErrOffsetOutOfRange) {
					return FetchResult{}, fmt.Errorf("%w: %w", ErrOffsetOutOfRange, err)
				}
				if err != nil {
					return FetchResult{}, err
				}
				if r != nil {
					return FetchResult{HighWatermark: hw, LogStartOffset: start, Range: r}, nil
				}
			}
			if buf != nil && !asked {
				asked = true
				var err error
				if into, err = buf(); err != nil {
					return FetchResult{}, err
				}
				continue // buf may have waited: look at the leadership and the HW again
			}
			b, err := p.log.Read(ctx, offset, maxBytes, hw, into)
			p.noteLogErr(err)
			if errors.Is(err, storage.ErrOffsetOutOfRange) {
				return FetchResult{}, fmt.Errorf("%w: %w", ErrOffsetOutOfRange, err)
			}
			if err != nil {
				return FetchResult{}, err
			}
			return FetchResult{HighWatermark: hw, LogStartOffset: start, Batches: b}, nil
		}
		if expired {
			return FetchResult{HighWatermark: hw, LogStartOffset: start}, nil
		}
		if timer == nil {
			timer = time.NewTimer(time.Until(deadline))
			defer timer.Stop()
		}
		select {
		case <-changed:
			if fetchWakeHook != nil {
				fetchWakeHook(p)
			}
		case <-timer.C:
			expired = true
		case <-ctx.Done():
			return FetchResult{}, ctx.Err()
		}
	}
}

// fetchWakeHook, when set by a test, is called with the partition each
// time a long poll wakes because its high watermark moved.
var fetchWakeHook func(*Partition)

// Offsets returns the log start, the HW and the log end.
func (p *Partition) Offsets() (start, hw, end int64) {
	return p.log.LogStartOffset(), p.HighWatermark(), p.log.LogEndOffset()
}

// LeaderOffsets is Offsets for a leader answering a client: ErrNotLeader
// when it does not lead. A leader that has not heard from its followers
// yet answers with the HW it had (checkpointed before a restart, or known
// as a follower): every active replica holds the records below it, though
// records acknowledged just before a restart may lie above it until the
// followers answer. So the HW a client is told can be lower than one it
// was told before the restart; the Go client's consumers keep the highest.
func (p *Partition) LeaderOffsets() (start, hw, end int64, err error) {
	p.mu.Lock()
	st, stepped := p.mu.state, p.mu.steppedDn
	hw = p.mu.hw
	p.mu.Unlock()
	if st.Leader != p.brokerID || stepped {
		return 0, 0, 0, fmt.Errorf("%w: partition %s/%d is led by broker %d", ErrNotLeader, p.Topic, p.Index, st.Leader)
	}
	return p.log.LogStartOffset(), hw, p.log.LogEndOffset(), nil
}

// Followers reports the leader's view of its followers, by broker id: each
// in sync, lagging or diverged (transport.FollowerState), the log end it
// acknowledged when in sync, and why it diverged or the last error
// replicating to it.
func (p *Partition) Followers() []transport.FollowerStatus {
	p.mu.Lock()
	fs := make([]*follower, 0, len(p.mu.followers))
	for _, f := range p.mu.followers {
		fs = append(fs, f)
	}
	p.mu.Unlock()
	out := make([]transport.FollowerStatus, 0, len(fs))
	for _, f := range fs {
		out = append(out, f.status())
	}
	slices.SortFunc(out, func(a, b transport.FollowerStatus) int { return int(a.Broker - b.Broker) })
	return out
}

// confirmTimeout bounds ConfirmLeader's round trips: a follower that does
// not answer within it cannot confirm (the reader retries), rather than
// being waited for as a write's replication is.
const confirmTimeout = 2 * time.Second

// ConfirmLeader returns nil only if this replica still leads: it leads
// in its own view, and no active follower has seen a newer leader epoch,
// asked now, all at once. A leader cut off while the controller failed
// the partition over does not know it (the controller fences the
// followers, not it); its followers do, and every replica a failover can
// promote is one of them. A leader that learns of a newer epoch here
// steps down. It returns an error matching ErrNotLeader then, or the
// error of a follower that could not be asked (nothing is confirmed).
// For reads of state kept on the leader, beside its log, that a new
// leader may have passed: what its log serves is bounded by the high
// watermark already.
func (p *Partition) ConfirmLeader(ctx context.Context) error {
	p.mu.Lock()
	st, stepped := p.mu.state, p.mu.steppedDn
	followers := make([]*follower, 0, len(p.mu.followers))
	for _, f := range p.mu.followers {
		followers = append(followers, f)
	}
	p.mu.Unlock()
	if st.Leader != p.brokerID || stepped {
		return fmt.Errorf("%w: partition %s/%d is led by broker %d", ErrNotLeader, p.Topic, p.Index, st.Leader)
	}
	ctx, cancel := context.WithTimeout(ctx, min(p.opts.ReplicationTimeout, confirmTimeout))
	defer cancel()
	errs := make([]error, len(followers))
	var wg sync.WaitGroup
	for i, f := range followers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f.confirm(ctx, st.LeaderEpoch)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if errors.Is(err, ErrNotLeader) {
			return err
		}
	}
	return errors.Join(errs...)
}

// CatchUp brings one active follower up to the leader's log end now. It
// returns the follower's log end before and after.
func (p *Partition) CatchUp(ctx context.Context, broker int32) (from, to int64, err error) {
	p.mu.Lock()
	f := p.mu.followers[broker]
	st := p.mu.state
	p.mu.Unlock()
	if st.Leader != p.brokerID {
		return 0, 0, fmt.Errorf("%w: partition %s/%d is led by broker %d", ErrNotLeader, p.Topic, p.Index, st.Leader)
	}
	if f == nil {
		return 0, 0, fmt.Errorf("%w: broker %d is not an active follower of %s/%d (active %v)", ErrNotLeader, broker, p.Topic, p.Index, st.Active)
	}
	return f.catchUpNow(ctx)
}

// Replicate is the follower side of replication, called in the order the
// leader's requests arrive: it checks the epoch, appends the leader's bytes
// exactly, and returns a function that waits for them to be durable and
// gives the log end.
func (p *Partition) Replicate(req *transport.ReplicateRequest) (func(ctx context.Context) (int64, error), error) {
	if err := p.fenceTo(req.LeaderEpoch); err != nil {
		return nil, err
	}
	p.mu.Lock()
	st := p.mu.state
	p.mu.Unlock()
	if st.Leader == p.brokerID && st.LeaderEpoch == req.LeaderEpoch {
		return nil, fmt.Errorf("%w: broker %d leads %s/%d in epoch %d; broker %d claims to", ErrStaleEpoch, p.brokerID, p.Topic, p.Index, st.LeaderEpoch, req.LeaderID)
	}
	// The request may carry several batches back to back: each is
	// appended exactly, in order, and the answer waits for the last.
	// WriteExact validates each batch, checksum and all, before it writes
	// it, so they are split here without checking their CRC first.
	var last storage.AppendResult
	var durable storage.Durable
	var werr error
	err := record.Split(req.Batch, func(b record.Batch) bool {
		last, durable, werr = p.log.WriteExact(b)
		p.noteAppend(werr)
		return werr == nil
	})
	if err == nil {
		err = werr
	}
	if err == nil && durable == nil {
		err = fmt.Errorf("%w: a Replicate request with no batch", storage.ErrInvalidBatch)
	}
	if err != nil {
		if errors.Is(err, record.ErrInvalid) || errors.Is(err, record.ErrShort) {
			err = fmt.Errorf("%w: %w", storage.ErrInvalidBatch, err)
		}
		return nil, err
	}
	return func(ctx context.Context) (int64, error) {
		if err := durable(ctx); err != nil {
			return 0, err
		}
		// The leader's HW, as far as this replica holds it: what a
		// checkpoint keeps, and what this replica starts from if it is
		// made leader.
		p.mu.Lock()
		p.advanceHWLocked(min(req.HighWatermark, last.NextOffset))
		p.mu.Unlock()
		return last.NextOffset, nil
	}, nil
}

// ReplicaState reports this replica's position; a request with an epoch
// fences the replica at it first.
func (p *Partition) ReplicaState(req *transport.ReplicaStateRequest) (*transport.ReplicaStateResponse, error) {
	if req.LeaderEpoch > 0 {
		if err := p.fenceTo(req.LeaderEpoch); err != nil {
			return nil, err
		}
	}
	resp := &transport.ReplicaStateResponse{
		LogStartOffset: p.log.LogStartOffset(), LogEndOffset: p.log.LogEndOffset(),
		HighWatermark: p.HighWatermark(), LastEpoch: p.log.LastEpoch(), FencedEpoch: p.FencedEpoch(),
	}
	if err := p.Problem(); err != nil {
		resp.Problem = err.Error()
	}
	if req.TailBatches > 0 {
		tail, err := p.log.LastBatches(int(min(req.TailBatches, 64)))
		if err != nil {
			return nil, err
		}
		for _, b := range tail {
			resp.Tail = append(resp.Tail, transport.BatchID{BaseOffset: b.BaseOffset, NextOffset: b.NextOffset, LeaderEpoch: b.LeaderEpoch, CRC: b.CRC})
		}
	}
	return resp, nil
}
