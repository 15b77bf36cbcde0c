package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"gostream/record"
	"gostream/transport"
)

// TopicPartition names one partition of a topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s/%d", tp.Topic, tp.Partition) }

// PartitionRecords is what one Poll returns of one partition: records in
// offset order.
type PartitionRecords struct {
	Topic     string
	Partition int32
	Records   []record.Record
}

// GroupConfig configures a GroupConsumer. Zero values take the defaults
// named.
type GroupConfig struct {
	// Group is the group to join. Required; it follows the topic-name
	// rules.
	Group string
	// Topics is the subscription: the group's coordinator assigns this
	// member partitions of these topics (range, per topic). Required.
	Topics []string
	// InstanceID, when set, makes the member static: a member that
	// restarts with the same InstanceID within its session timeout gets
	// its place and its partitions back with no rebalance, and a second
	// live member with the same InstanceID is refused
	// (transport.ErrFencedInstanceID).
	InstanceID string
	// SessionTimeout is how long the coordinator keeps the member without
	// a heartbeat; from 1s to 5m, default 10s.
	SessionTimeout time.Duration
	// Reset says where a partition with no committed offset starts:
	// ResetEarliest (default) or ResetLatest.
	Reset string
	// MaxBytes is about how many bytes one fetch of one partition
	// returns; default 1 MiB.
	MaxBytes int
	// AutoCommitInterval, when positive, commits what Poll has returned
	// at most this often (from Poll, in the background), before a
	// partition is revoked, and at Close. Default 0: nothing is committed
	// unless Commit, CommitSync or CommitOffsets is called.
	AutoCommitInterval time.Duration
	// Host is the member's name for itself in group describe; default
	// the host name.
	Host string
	// OnAssigned, if set, is called from Poll with partitions newly
	// assigned, before any of their records are returned.
	OnAssigned func(ctx context.Context, parts []TopicPartition)
	// OnRevoked, if set, is called from Poll (or Close) with partitions
	// about to move to another member, after the last of their records
	// Poll returned and before they are released: commit their progress
	// here (CommitSync) and the next owner starts where this one ended.
	// They are released once it returns.
	OnRevoked func(ctx context.Context, parts []TopicPartition)
	// OnLost, if set, is called from Poll with partitions taken from the
	// member without a chance to commit: its membership ended (its
	// session expired, it was fenced), or it kept a revoked partition
	// past its session timeout without calling Poll. Their records since
	// the last commit go to the next owner again.
	OnLost func(parts []TopicPartition)
	// Paused starts the member paused (see Pause): it joins, and is
	// assigned and gives up partitions as Poll is called, but fetches
	// nothing until Resume.
	Paused bool
}

// GroupConsumer is a member of a consumer group: it joins the group, is
// assigned partitions of its subscription by the group's coordinator,
// fetches them, and commits its progress in them. Poll, Commit,
// CommitSync, CommitOffsets and Close are for one goroutine at a time
// (the callbacks run on it); Assignment, MemberID and MemberEpoch may be
// called from any. It runs a goroutine that heartbeats and one per
// partition it owns that fetches ahead of Poll.
//
// A partition's position starts at the group's committed offset, else
// where Reset says, and moves as Poll returns records; committing
// commits the position (the next record to process), so records Poll
// returned and the caller had not finished when the member crashed are
// delivered again: at least once (see the package documentation).
type GroupConsumer struct {
	c    *Client
	cfg  GroupConfig
	log  hclog.Logger
	stop context.CancelFunc // ends the heartbeat loop
	ctx  context.Context    // the fetchers'; ended by Close
	end  context.CancelFunc
	loop chan struct{} // closed when the heartbeat loop has ended

	// events wakes Poll when callbacks wait; wake wakes the heartbeat
	// loop when partitions were released.
	events  chan struct{}
	wake    chan struct{}
	results chan fetchResult

	// commitMu is held by every commit, so that a partition is released
	// only with no commit of it in flight.
	commitMu sync.Mutex

	mu struct {
		sync.Mutex
		memberID    string
		epoch       int32
		parts       map[TopicPartition]*ownedPartition
		assigned    []TopicPartition // OnAssigned to run
		revoked     []*ownedPartition
		lost        []TopicPartition
		fatal       error
		closed      bool
		lastCommit  time.Time
		asyncCommit bool // an auto-commit is running
		// resumed is nil while fetching goes on; while paused, a channel
		// Resume closes.
		resumed chan struct{}
	}
}

// ownedPartition is a partition the member owns, from its assignment to
// its release. Its fields but tp and cons are guarded by the consumer's mu.
type ownedPartition struct {
	tp        TopicPartition
	cons      *Consumer
	cancel    context.CancelFunc
	done      chan struct{} // closed when the fetcher has ended
	delivered int64         // the position: after the last record Poll returned; -1 until known
	committed int64         // what this member last committed, or the committed offset found; -1 for none
	revoking  bool
	since     time.Time // when the revocation began
}

type fetchResult struct {
	op   *ownedPartition
	recs []record.Record
	err  error
}

// NewGroupConsumer checks cfg and starts the member: it joins in the
// background (Poll returns records once partitions are assigned). It
// returns ErrInvalidConfig for a bad config.
func NewGroupConsumer(c *Client, cfg GroupConfig) (*GroupConsumer, error) {
	switch {
	case cfg.Group == "":
		return nil, fmt.Errorf("%w: no group", ErrInvalidConfig)
	case len(cfg.Topics) == 0:
		return nil, fmt.Errorf("%w: no topic to subscribe to", ErrInvalidConfig)
	case cfg.SessionTimeout != 0 && (cfg.SessionTimeout < time.Second || cfg.SessionTimeout > 5*time.Minute):
		return nil, fmt.Errorf("%w: session timeout %v outside [1s, 5m]", ErrInvalidConfig, cfg.SessionTimeout)
	case cfg.Reset != "" && cfg.Reset != ResetEarliest && cfg.Reset != ResetLatest:
		return nil, fmt.Errorf("%w: reset %q: want %q or %q", ErrInvalidConfig, cfg.Reset, ResetEarliest, ResetLatest)
	case cfg.AutoCommitInterval < 0:
		return nil, fmt.Errorf("%w: auto-commit interval %v", ErrInvalidConfig, cfg.AutoCommitInterval)
	}
	if cfg.SessionTimeout == 0 {
		cfg.SessionTimeout = 10 * time.Second
	}
	if cfg.Reset == "" {
		cfg.Reset = ResetEarliest
	}
	if cfg.Host == "" {
		cfg.Host, _ = os.Hostname()
	}
	cfg.Topics = slices.Clone(cfg.Topics)
	g := &GroupConsumer{
		c:       c,
		cfg:     cfg,
		log:     c.log.Named("group").With("group", cfg.Group),
		loop:    make(chan struct{}),
		events:  make(chan struct{}, 1),
		wake:    make(chan struct{}, 1),
		results: make(chan fetchResult),
	}
	g.mu.parts = map[TopicPartition]*ownedPartition{}
	g.mu.lastCommit = time.Now()
	if cfg.Paused {
		g.mu.resumed = make(chan struct{})
	}
	g.ctx, g.end = context.WithCancel(context.Background())
	loopCtx, stop := context.WithCancel(g.ctx)
	g.stop = stop
	go g.heartbeatLoop(loopCtx)
	return g, nil
}

// Pause stops fetching: the member stays in its group, heartbeats, and
// is assigned and gives up partitions as Poll is called, but Poll
// returns no records and no fetch of its partitions starts until Resume
// (one under way holds what it got until then). A consumer that cannot
// keep up pauses as Kafka clients do, without leaving its group.
func (g *GroupConsumer) Pause() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mu.resumed == nil {
		g.mu.resumed = make(chan struct{})
	}
}

// Resume starts fetching again after Pause (or GroupConfig.Paused).
func (g *GroupConsumer) Resume() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mu.resumed != nil {
		close(g.mu.resumed)
		g.mu.resumed = nil
	}
}

// waitResumed returns once the member is not paused (true), or when ctx
// ends (false).
func (g *GroupConsumer) waitResumed(ctx context.Context) bool {
	g.mu.Lock()
	ch := g.mu.resumed
	g.mu.Unlock()
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}

// MemberID is the id the coordinator gave the member; empty before it
// has joined.
func (g *GroupConsumer) MemberID() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mu.memberID
}

// MemberEpoch is the member's epoch (its generation), which fences
// requests of an earlier incarnation; 0 before it has joined.
func (g *GroupConsumer) MemberEpoch() int32 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mu.epoch
}

// Assignment returns the partitions the member owns now (revoked ones
// not yet released included), sorted.
func (g *GroupConsumer) Assignment() []TopicPartition {
	g.mu.Lock()
	defer g.mu.Unlock()
	return sortedParts(slices.Collect(maps.Keys(g.mu.parts)))
}

// CaughtUp reports whether the member owns partitions and Poll has
// returned every record of each below the high watermark its last fetch
// saw: a reader that wants what is there now, and no more, can stop.
func (g *GroupConsumer) CaughtUp() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.mu.parts) == 0 {
		return false
	}
	for _, op := range g.mu.parts {
		if op.revoking {
			continue
		}
		hw := op.cons.HighWatermark()
		if op.delivered < 0 || hw < 0 || op.delivered < hw {
			return false
		}
	}
	return true
}

func sortedParts(tps []TopicPartition) []TopicPartition {
	slices.SortFunc(tps, func(a, b TopicPartition) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	return tps
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// heartbeatLoop joins, heartbeats and applies each answer's assignment
// until ctx ends.
func (g *GroupConsumer) heartbeatLoop(ctx context.Context) {
	defer close(g.loop)
	interval := min(g.cfg.SessionTimeout/10, time.Second)
	lastContact := time.Now()
	var fencedSince time.Time
	for {
		g.mu.Lock()
		req := &transport.GroupHeartbeatRequest{
			Group: g.cfg.Group, MemberID: g.mu.memberID, InstanceID: g.cfg.InstanceID, MemberEpoch: g.mu.epoch,
			Topics: g.cfg.Topics, SessionTimeoutMs: int32(g.cfg.SessionTimeout.Milliseconds()), Host: g.cfg.Host,
			Owned: ownedToWire(g.mu.parts),
		}
		g.mu.Unlock()
		hctx, cancel := context.WithTimeout(ctx, max(g.cfg.SessionTimeout/3, time.Second))
		var resp transport.GroupHeartbeatResponse
		err := g.c.coordinatorCall(hctx, g.cfg.Group, transport.APIGroupHeartbeat, req, &resp)
		cancel()
		now := time.Now()
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			lastContact, fencedSince = now, time.Time{}
			if resp.HeartbeatIntervalMs > 0 {
				interval = time.Duration(resp.HeartbeatIntervalMs) * time.Millisecond
			}
			g.apply(ctx, &resp)
		case errors.Is(err, transport.ErrUnknownMember) || errors.Is(err, transport.ErrFencedMember):
			g.log.Warn("membership ended; joining again", "member", req.MemberID, "epoch", req.MemberEpoch, "err", err)
			g.lose(true)
			lastContact = now
			continue // join at once
		case errors.Is(err, transport.ErrFencedInstanceID) && req.MemberEpoch == transport.JoinEpoch:
			// The instance's previous process may have just died: its
			// last heartbeat keeps the place for two intervals.
			if fencedSince.IsZero() {
				fencedSince = now
			}
			if now.Sub(fencedSince) > 3*interval+time.Second {
				g.fail(err)
				return
			}
			g.log.Debug("instance id in use; waiting for its old member's heartbeats to stop", "err", err)
		case errors.Is(err, transport.ErrInvalidRequest) || errors.Is(err, transport.ErrInvalidGroupName) || errors.Is(err, ErrClosed),
			errors.Is(err, transport.ErrUnauthorized) || errors.Is(err, transport.ErrUnauthenticated) || errors.Is(err, transport.ErrTLSMismatch):
			// What was asked cannot be served, now or later (for this
			// principal: an ACL added later needs a new member).
			g.fail(err)
			return
		default:
			// Anything else may pass (a coordinator moving or loading, a
			// write whose replication failed, a broker down): try again.
			if retriable(err) || isContextErr(err) {
				g.log.Debug("heartbeat failed; retrying", "err", err)
			} else {
				g.log.Warn("heartbeat failed; retrying", "err", err)
			}
			if now.Sub(lastContact) > g.cfg.SessionTimeout {
				// The coordinator has expired the member by now, or will:
				// another member may own its partitions, so stop.
				g.log.Warn("no heartbeat answered for the session timeout; giving up the partitions", "err", err)
				g.lose(false)
				lastContact = now
			}
		}
		t := time.NewTimer(interval)
		select {
		case <-t.C:
		case <-g.wake:
		case <-ctx.Done():
		}
		t.Stop()
		g.releaseOverdue(now)
	}
}

func ownedToWire(parts map[TopicPartition]*ownedPartition) []transport.TopicPartitions {
	byTopic := map[string][]int32{}
	for tp := range parts {
		byTopic[tp.Topic] = append(byTopic[tp.Topic], tp.Partition)
	}
	out := make([]transport.TopicPartitions, 0, len(byTopic))
	for _, t := range slices.Sorted(maps.Keys(byTopic)) {
		ps := byTopic[t]
		slices.Sort(ps)
		out = append(out, transport.TopicPartitions{Topic: t, Partitions: ps})
	}
	return out
}

// apply takes a heartbeat's answer: partitions assigned that the member
// does not own start fetching; partitions it owns and is no longer
// assigned stop, and wait for Poll to run OnRevoked and release them.
func (g *GroupConsumer) apply(ctx context.Context, resp *transport.GroupHeartbeatResponse) {
	assigned := map[TopicPartition]bool{}
	for _, t := range resp.Assigned {
		for _, p := range t.Partitions {
			assigned[TopicPartition{t.Topic, p}] = true
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mu.closed {
		return
	}
	if g.mu.memberID != resp.MemberID || g.mu.epoch != resp.MemberEpoch {
		g.log.Debug("joined", "member", resp.MemberID, "epoch", resp.MemberEpoch, "group_epoch", resp.GroupEpoch)
	}
	g.mu.memberID, g.mu.epoch = resp.MemberID, resp.MemberEpoch
	changed := false
	for tp, op := range g.mu.parts {
		if !assigned[tp] && !op.revoking {
			op.revoking, op.since = true, time.Now()
			op.cancel()
			g.mu.revoked = append(g.mu.revoked, op)
			changed = true
		}
	}
	for _, tp := range sortedParts(slices.Collect(maps.Keys(assigned))) {
		if g.mu.parts[tp] != nil {
			continue
		}
		cons, err := NewConsumer(g.c, tp.Topic, tp.Partition, ConsumerConfig{MaxBytes: g.cfg.MaxBytes, Group: g.cfg.Group})
		if err != nil {
			g.log.Error("cannot consume an assigned partition", "partition", tp, "err", err)
			continue
		}
		fctx, cancel := context.WithCancel(g.ctx)
		op := &ownedPartition{tp: tp, cons: cons, cancel: cancel, done: make(chan struct{}), delivered: -1, committed: -1}
		g.mu.parts[tp] = op
		g.mu.assigned = append(g.mu.assigned, tp)
		go g.fetch(fctx, op)
		changed = true
	}
	if changed {
		signal(g.events)
	}
}

// lose drops every partition at once, with no chance to commit (the
// membership ended, or the coordinator cannot be reached); forget also
// forgets the membership, so that the next heartbeat joins.
func (g *GroupConsumer) lose(forget bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for tp, op := range g.mu.parts {
		op.cancel()
		delete(g.mu.parts, tp)
		g.mu.lost = append(g.mu.lost, tp)
	}
	g.mu.revoked = nil
	g.mu.assigned = nil
	if forget {
		g.mu.memberID, g.mu.epoch = "", transport.JoinEpoch
	}
	signal(g.events)
}

// releaseOverdue releases, as lost, partitions revoked more than a session
// timeout ago that Poll has not released: a caller that does not poll
// must not keep them from their next owner for ever.
func (g *GroupConsumer) releaseOverdue(now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	keep := g.mu.revoked[:0]
	for _, op := range g.mu.revoked {
		if now.Sub(op.since) > g.cfg.SessionTimeout {
			g.log.Warn("a revoked partition was not released by Poll within the session timeout; releasing it", "partition", op.tp)
			delete(g.mu.parts, op.tp)
			g.mu.lost = append(g.mu.lost, op.tp)
			continue
		}
		keep = append(keep, op)
	}
	g.mu.revoked = keep
}

func (g *GroupConsumer) fail(err error) {
	g.log.Error("the group consumer stopped", "err", err)
	g.mu.Lock()
	if g.mu.fatal == nil {
		g.mu.fatal = fmt.Errorf("%w: group %q: %w", ErrMemberStopped, g.cfg.Group, err)
	}
	g.mu.Unlock()
	g.lose(true)
}

// fetch reads one owned partition ahead of Poll until ctx ends: from the
// group's committed offset, else where Reset says.
func (g *GroupConsumer) fetch(ctx context.Context, op *ownedPartition) {
	defer close(op.done)
	send := func(r fetchResult) bool {
		select {
		case g.results <- r:
			return true
		case <-ctx.Done():
			return false
		}
	}
	pause := func() bool {
		t := time.NewTimer(time.Second)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for ctx.Err() == nil {
		start, committed, err := g.startOf(ctx, op.tp)
		if err == nil {
			g.mu.Lock()
			op.delivered, op.committed = start, committed
			g.mu.Unlock()
			op.cons.SeekTo(start)
			break
		}
		if ctx.Err() != nil || !send(fetchResult{op: op, err: err}) || !pause() {
			return
		}
	}
	for ctx.Err() == nil {
		if !g.waitResumed(ctx) {
			return
		}
		recs, err := op.cons.Poll(ctx, time.Second)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, transport.ErrOffsetOutOfRange):
			// Retention removed what the position pointed at.
			if err := g.resetTo(ctx, op.cons); err != nil && !send(fetchResult{op: op, err: err}) {
				return
			}
			g.log.Warn("position below the log start; moved by the reset policy", "partition", op.tp, "reset", g.cfg.Reset, "position", op.cons.Position())
		case err != nil:
			if !send(fetchResult{op: op, err: err}) || !pause() {
				return
			}
		case len(recs) > 0:
			// A fetch that was under way when the member paused holds its
			// records until it resumes.
			if !g.waitResumed(ctx) || !send(fetchResult{op: op, recs: recs}) {
				return
			}
		}
	}
}

// startOf returns where a newly assigned partition starts, and its
// committed offset (-1 when never committed).
func (g *GroupConsumer) startOf(ctx context.Context, tp TopicPartition) (start, committed int64, err error) {
	o, ok, err := g.c.Committed(ctx, g.cfg.Group, tp.Topic, tp.Partition)
	if err != nil {
		return 0, 0, err
	}
	if ok {
		return o.Offset, o.Offset, nil
	}
	offs, err := g.c.ListOffsets(ctx, tp.Topic, tp.Partition)
	if err != nil {
		return 0, 0, err
	}
	if g.cfg.Reset == ResetLatest {
		return offs.HighWatermark, -1, nil
	}
	return offs.LogStartOffset, -1, nil
}

func (g *GroupConsumer) resetTo(ctx context.Context, cons *Consumer) error {
	if g.cfg.Reset == ResetLatest {
		return cons.SeekToEnd(ctx)
	}
	return cons.SeekToBeginning(ctx)
}

// Poll returns records of the partitions the member owns, waiting up to
// maxWait for some (nil and no error when the wait ends empty), and moves
// their positions past them. Before it looks for records it runs the
// callbacks that wait (OnLost, OnRevoked, OnAssigned, in that order),
// releases the revoked partitions, and commits in the background when
// auto-commit is due. It returns ErrClosed after Close, and the error
// that stopped the member (matching ErrMemberStopped: a request the
// coordinator refuses as invalid, such as a bad subscription or group
// name, or an instance id another live member holds) once it has
// stopped; every other error of a heartbeat is retried. An error fetching one partition is returned once, with the
// partition named, and passes: the partition is fetched again after a
// pause.
func (g *GroupConsumer) Poll(ctx context.Context, maxWait time.Duration) ([]PartitionRecords, error) {
	if err := g.callbacks(ctx); err != nil {
		return nil, err
	}
	g.maybeAutoCommit()
	var out []PartitionRecords
	timer := time.NewTimer(max(maxWait, 0))
	defer timer.Stop()
	for {
		var r fetchResult
		if len(out) == 0 {
			select {
			case r = <-g.results:
			case <-g.events:
				if err := g.callbacks(ctx); err != nil {
					return nil, err
				}
				continue
			case <-timer.C:
				return nil, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		} else {
			// Take what else is ready, without waiting.
			select {
			case r = <-g.results:
			default:
				return out, nil
			}
		}
		g.mu.Lock()
		current := g.mu.parts[r.op.tp] == r.op && !r.op.revoking
		if current && r.err == nil && len(r.recs) > 0 {
			r.op.delivered = r.recs[len(r.recs)-1].Offset + 1
		}
		g.mu.Unlock()
		switch {
		case !current:
			continue // fetched for a partition since revoked or lost
		case r.err != nil:
			if len(out) > 0 {
				return out, nil // the fetcher will fail again; it is told next time
			}
			return nil, fmt.Errorf("group %q, partition %s: %w", g.cfg.Group, r.op.tp, r.err)
		}
		out = append(out, PartitionRecords{Topic: r.op.tp.Topic, Partition: r.op.tp.Partition, Records: r.recs})
	}
}

// callbacks runs what waits: OnLost, then OnRevoked and the release of the
// revoked partitions, then OnAssigned.
func (g *GroupConsumer) callbacks(ctx context.Context) error {
	g.mu.Lock()
	if g.mu.closed {
		g.mu.Unlock()
		return ErrClosed
	}
	lost, revoked, assigned, fatal := g.mu.lost, g.mu.revoked, g.mu.assigned, g.mu.fatal
	g.mu.lost, g.mu.revoked, g.mu.assigned = nil, nil, nil
	g.mu.Unlock()
	if len(lost) > 0 {
		g.log.Info("partitions lost", "partitions", fmt.Sprint(sortedParts(lost)))
		if g.cfg.OnLost != nil {
			g.cfg.OnLost(sortedParts(lost))
		}
	}
	if len(revoked) > 0 {
		g.revoke(ctx, revoked)
	}
	// Partitions assigned and then lost or revoked before Poll came are
	// not announced.
	g.mu.Lock()
	assigned = slices.DeleteFunc(assigned, func(tp TopicPartition) bool {
		op := g.mu.parts[tp]
		return op == nil || op.revoking
	})
	g.mu.Unlock()
	if len(assigned) > 0 {
		g.log.Info("partitions assigned", "partitions", fmt.Sprint(sortedParts(assigned)))
		if g.cfg.OnAssigned != nil {
			g.cfg.OnAssigned(ctx, sortedParts(assigned))
		}
	}
	return fatal
}

// revoke runs OnRevoked for ops, commits them when auto-commit is on,
// waits for their fetchers, and releases them: the next heartbeat says
// the member no longer owns them.
func (g *GroupConsumer) revoke(ctx context.Context, ops []*ownedPartition) {
	tps := make([]TopicPartition, len(ops))
	for i, op := range ops {
		tps[i] = op.tp
	}
	tps = sortedParts(tps)
	g.log.Info("partitions revoked", "partitions", fmt.Sprint(tps))
	if g.cfg.OnRevoked != nil {
		g.cfg.OnRevoked(ctx, tps)
	}
	if g.cfg.AutoCommitInterval > 0 {
		if err := g.commitParts(ctx, func(op *ownedPartition) bool { return slices.Contains(ops, op) }); err != nil {
			g.log.Warn("commit before a revocation failed", "partitions", fmt.Sprint(tps), "err", err)
		}
	}
	// No commit of them may be in flight once they are released.
	g.commitMu.Lock()
	g.mu.Lock()
	for _, op := range ops {
		if g.mu.parts[op.tp] == op {
			delete(g.mu.parts, op.tp)
		}
	}
	g.mu.Unlock()
	g.commitMu.Unlock()
	for _, op := range ops {
		<-op.done
	}
	signal(g.wake)
}

// CommitSync commits the position of every partition the member owns
// whose position moved since its last commit, and returns once the
// commit is acknowledged (every replica of the group's partition of
// __consumer_offsets holds it). A partition the member no longer owns is
// refused (transport.ErrIllegalGeneration, ErrUnknownMember,
// ErrFencedMember), and then nothing of that commit is written.
func (g *GroupConsumer) CommitSync(ctx context.Context) error {
	return g.commitParts(ctx, func(*ownedPartition) bool { return true })
}

// Commit is CommitSync in the background: it returns at once, and done,
// if not nil, is called with the result. Commits run one at a time, in
// order.
func (g *GroupConsumer) Commit(done func(error)) {
	go func() {
		err := g.CommitSync(g.ctx)
		if err != nil {
			g.log.Warn("commit failed", "err", err)
		}
		if done != nil {
			done(err)
		}
	}()
}

// CommitOffsets commits offsets the caller chose (each the next record to
// process of its partition) as this member, all or none.
func (g *GroupConsumer) CommitOffsets(ctx context.Context, offsets ...CommitOffset) error {
	g.commitMu.Lock()
	defer g.commitMu.Unlock()
	g.mu.Lock()
	req := &transport.OffsetCommitRequest{Group: g.cfg.Group, MemberID: g.mu.memberID, MemberEpoch: g.mu.epoch, Offsets: wireOffsets(offsets)}
	g.mu.Unlock()
	if req.MemberID == "" {
		return fmt.Errorf("commit offsets of group %q: %w: not a member yet", g.cfg.Group, transport.ErrUnknownMember)
	}
	if err := g.c.commit(ctx, req); err != nil {
		return err
	}
	g.mu.Lock()
	for _, o := range offsets {
		if op := g.mu.parts[TopicPartition{o.Topic, o.Partition}]; op != nil {
			op.committed = max(op.committed, o.Offset)
		}
	}
	g.mu.Unlock()
	return nil
}

func (g *GroupConsumer) commitParts(ctx context.Context, which func(*ownedPartition) bool) error {
	g.commitMu.Lock()
	defer g.commitMu.Unlock()
	g.mu.Lock()
	req := &transport.OffsetCommitRequest{Group: g.cfg.Group, MemberID: g.mu.memberID, MemberEpoch: g.mu.epoch}
	var ops []*ownedPartition
	var pos []int64
	for _, tp := range sortedParts(slices.Collect(maps.Keys(g.mu.parts))) {
		op := g.mu.parts[tp]
		if op.delivered < 0 || op.delivered == op.committed || !which(op) {
			continue
		}
		req.Offsets = append(req.Offsets, transport.CommitOffset{Topic: tp.Topic, Partition: tp.Partition, Offset: op.delivered})
		ops, pos = append(ops, op), append(pos, op.delivered)
	}
	g.mu.lastCommit = time.Now()
	g.mu.Unlock()
	if len(req.Offsets) == 0 {
		return nil
	}
	if err := g.c.commit(ctx, req); err != nil {
		return err
	}
	g.mu.Lock()
	for i, op := range ops {
		op.committed = max(op.committed, pos[i])
	}
	g.mu.Unlock()
	return nil
}

// maybeAutoCommit starts a background commit when auto-commit is on and
// due, and none runs.
func (g *GroupConsumer) maybeAutoCommit() {
	if g.cfg.AutoCommitInterval <= 0 {
		return
	}
	g.mu.Lock()
	due := !g.mu.asyncCommit && time.Since(g.mu.lastCommit) >= g.cfg.AutoCommitInterval
	if due {
		g.mu.asyncCommit = true
	}
	g.mu.Unlock()
	if !due {
		return
	}
	g.Commit(func(error) {
		g.mu.Lock()
		g.mu.asyncCommit = false
		g.mu.Unlock()
	})
}

// Close leaves the group: it stops heartbeating and fetching, runs
// OnRevoked for every partition the member owns (and commits them when
// auto-commit is on), and tells the coordinator. A dynamic member's
// partitions go to the others at once; a static member's place and
// partitions are held for it until its session timeout, so that a
// restart gets them back with no rebalance. The Client stays open.
func (g *GroupConsumer) Close(ctx context.Context) error {
	g.mu.Lock()
	if g.mu.closed {
		g.mu.Unlock()
		return nil
	}
	g.mu.Unlock()
	g.stop()
	<-g.loop
	g.mu.Lock()
	var ops []*ownedPartition
	for _, op := range g.mu.parts {
		op.cancel()
		ops = append(ops, op)
	}
	g.mu.revoked, g.mu.assigned = nil, nil
	member, epoch := g.mu.memberID, g.mu.epoch
	g.mu.Unlock()
	if len(ops) > 0 {
		g.revoke(ctx, ops)
	}
	var err error
	if member != "" {
		leave := transport.LeaveGroup
		if g.cfg.InstanceID != "" {
			leave = transport.LeaveHeld
		}
		req := &transport.GroupHeartbeatRequest{Group: g.cfg.Group, MemberID: member, InstanceID: g.cfg.InstanceID, MemberEpoch: epoch,
			SessionTimeoutMs: int32(g.cfg.SessionTimeout.Milliseconds()), Host: g.cfg.Host, Leave: leave}
		if err = g.c.coordinatorCall(ctx, g.cfg.Group, transport.APIGroupHeartbeat, req, &transport.GroupHeartbeatResponse{}); err != nil {
			err = fmt.Errorf("leave group %q: %w", g.cfg.Group, err)
		}
	}
	g.mu.Lock()
	g.mu.closed = true
	g.mu.Unlock()
	g.end()
	return err
}
