package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"gostream/metadata"
	"gostream/transport"
)

// Moves (docs/reassignment.md). Reassign persists a move's start: the
// partition's Move and its replicas, the target followed by the replicas
// it takes off. From then on DriveMoves, on whichever controller is
// active, carries every move forward from what the metadata says, one
// step of a partition at a time: copy (the leader recovers a replica of
// the target that is not active, paced; then it joins the active set),
// lead (leadership to the target's first replica, as elect-leaders),
// finish (the replicas become the target; the others leave). Each step is
// its own persisted, audited change, checked against the partition as the
// step found it, so a step that lost a race with a failover, a drop or a
// cancel changes nothing and the next round decides again.

// Throttles of a move's copies, in bytes per second.
const (
	DefaultMoveThrottle int64 = 50_000_000
	MinMoveThrottle     int64 = 100_000
	MaxMoveThrottle     int64 = 10_000_000_000
)

const (
	// moveParallel bounds the copies running at once in the cluster.
	moveParallel = 4
	// moveTick is how often the moves are looked at when nothing wakes
	// the driver.
	moveTick = time.Second
	// moveRetry is the first wait after a step failed; it doubles up to
	// moveRetryMax.
	moveRetry    = 2 * time.Second
	moveRetryMax = 30 * time.Second
	// copyStall ends a copy whose leader reports no progress for that
	// long (a leader that hangs); the next round starts it again.
	copyStall = 2 * time.Minute
	// copyCallDeadline is the deadline of the call that has a leader run
	// a copy, far enough to be none: watchCopy is what bounds a copy. A
	// call without a deadline gets transport.DefaultCallTimeout (30 s),
	// which a copy of a few gigabytes at the throttle outlasts.
	copyCallDeadline = 365 * 24 * time.Hour
	// moveRequester is the audit trail's requester of the steps the
	// driver takes.
	moveRequester = "reassign"
)

// The steps of a move, as ReassignStatus names them.
const (
	stepCopy   = "copy"
	stepLead   = "lead"
	stepFinish = "finish"
)

// moveKey names a partition of one topic incarnation.
type moveKey struct {
	topicID   string
	partition int32
}

// moveState is the driver's own: which partitions have a step running,
// and why a move waits. It is lost with the controller, and rebuilt from
// the metadata by the next.
type moveState struct {
	mu       sync.Mutex
	wake     chan struct{}
	busy     map[moveKey]bool
	copies   int
	waiting  map[moveKey]string
	retryAt  map[moveKey]time.Time
	failures map[moveKey]int
	wg       sync.WaitGroup
}

func (s *moveState) init() {
	if s.wake == nil {
		s.wake = make(chan struct{}, 1)
		s.busy = map[moveKey]bool{}
		s.waiting = map[moveKey]string{}
		s.retryAt = map[moveKey]time.Time{}
		s.failures = map[moveKey]int{}
	}
}

// wakeMoves has the driver look at the moves now.
func (c *Controller) wakeMoves() {
	c.moves.mu.Lock()
	c.moves.init()
	w := c.moves.wake
	c.moves.mu.Unlock()
	select {
	case w <- struct{}{}:
	default:
	}
}

// DriveMoves carries the moves of the metadata forward while this
// controller is the active one, until ctx ends. The node runs it for as
// long as it runs.
func (c *Controller) DriveMoves(ctx context.Context) error {
	c.moves.mu.Lock()
	c.moves.init()
	wake := c.moves.wake
	c.moves.mu.Unlock()
	t := time.NewTicker(moveTick)
	defer t.Stop()
	for {
		if c.Refusal() == nil {
			c.driveMoves(ctx)
		}
		select {
		case <-ctx.Done():
			c.moves.wg.Wait()
			return nil
		case <-t.C:
		case <-wake:
		}
	}
}

// nextMoveStep is the step a moving partition takes next, and for a
// copy, the broker it copies to.
func nextMoveStep(p metadata.Partition) (string, int32) {
	for _, b := range p.Move.Target {
		if !slices.Contains(p.Active, b) {
			return stepCopy, b
		}
	}
	if p.Leader != p.Move.Target[0] {
		return stepLead, p.Move.Target[0]
	}
	return stepFinish, 0
}

// driveMoves starts the next step of every moving partition that has
// none running and is not waiting to try again.
func (c *Controller) driveMoves(ctx context.Context) {
	meta := c.Metadata()
	now := time.Now()
	moving := map[moveKey]bool{}
	c.moves.mu.Lock()
	defer c.moves.mu.Unlock()
	for _, t := range meta.Topics {
		for i, part := range t.Partitions {
			if part.Move == nil {
				continue
			}
			k := moveKey{t.ID, int32(i)}
			moving[k] = true
			if c.moves.busy[k] || now.Before(c.moves.retryAt[k]) {
				continue
			}
			step, broker := nextMoveStep(part)
			if step == stepCopy && c.moves.copies >= moveParallel {
				continue
			}
			c.moves.busy[k] = true
			if step == stepCopy {
				c.moves.copies++
			}
			c.moves.wg.Add(1)
			go func(topic string) {
				defer c.moves.wg.Done()
				err := c.moveStep(ctx, topic, k, step, broker)
				c.moves.mu.Lock()
				delete(c.moves.busy, k)
				if step == stepCopy {
					c.moves.copies--
				}
				if err != nil && ctx.Err() == nil {
					n := c.moves.failures[k]
					c.moves.failures[k] = n + 1
					wait := min(moveRetry<<min(n, 5), moveRetryMax)
					c.moves.retryAt[k] = time.Now().Add(wait)
					c.moves.waiting[k] = fmt.Sprintf("%s step failed (%d time(s) in a row): %v; trying again in %s", step, n+1, err, wait.Round(time.Second))
					c.logger.Warn("a step of a move failed; trying again", "topic", topic, "partition", k.partition, "step", step, "broker", broker, "err", err, "retry_in", wait)
				} else if err == nil {
					delete(c.moves.failures, k)
					delete(c.moves.retryAt, k)
					delete(c.moves.waiting, k)
				}
				c.moves.mu.Unlock()
				c.wakeMoves()
			}(t.Name)
		}
	}
	for k := range c.moves.failures {
		if !moving[k] {
			delete(c.moves.failures, k)
			delete(c.moves.retryAt, k)
			delete(c.moves.waiting, k)
		}
	}
}

// moveStep runs one step of a partition's move.
func (c *Controller) moveStep(ctx context.Context, topic string, k moveKey, step string, broker int32) error {
	switch step {
	case stepCopy:
		return c.moveCopy(ctx, topic, k, broker)
	case stepLead:
		return c.moveLead(ctx, topic, k, broker)
	default:
		return c.moveFinish(ctx, topic, k)
	}
}

// movingPartition is the partition of k as the metadata has it now, and
// its move; nil when it is gone or no longer moving.
func movingPartition(meta *metadata.Cluster, topic string, k moveKey) (*metadata.Partition, *metadata.Move) {
	t := meta.Topic(topic)
	if t == nil || t.ID != k.topicID || int(k.partition) >= len(t.Partitions) {
		return nil, nil
	}
	p := t.Partitions[k.partition]
	return &p, p.Move
}

// sameMove is the check of every step's change: the partition still
// moves to the same target from the same replicas.
func sameMove(p *metadata.Partition, m *metadata.Move) error {
	if p.Move == nil || !slices.Equal(p.Move.Target, m.Target) || !slices.Equal(p.Move.From, m.From) {
		return fmt.Errorf("%w: the move of the partition finished or was cancelled meanwhile", ErrInvalidRequest)
	}
	return nil
}

// moveCopy has the partition's leader copy its log to broker, a replica
// of the move's target outside the active set, and then adds it to the
// active set: a recovery (recover.go), paced by the move's throttle and
// bounded by its progress rather than by a fixed time.
func (c *Controller) moveCopy(ctx context.Context, topic string, k moveKey, broker int32) error {
	meta := c.Metadata()
	part, m := movingPartition(meta, topic, k)
	if m == nil {
		return nil
	}
	s := recoverStep(meta, topic, k.partition, broker)
	if s.err != nil {
		return s.err
	}
	s.res.Action = transport.ActionReassignJoin
	s.res.OldReplicas, s.res.NewReplicas = slices.Clone(part.Replicas), slices.Clone(part.Replicas)
	cctx, cancel := context.WithTimeout(ctx, copyCallDeadline)
	defer cancel()
	go c.watchCopy(cctx, cancel, s)
	req := &transport.CatchUpRequest{Topic: topic, TopicID: k.topicID, Partition: k.partition, Broker: broker, Throttle: m.Throttle}
	c.recoverWith(cctx, s, req)
	if s.err != nil {
		if ctx.Err() == nil && cctx.Err() != nil {
			return fmt.Errorf("the copy to broker %d made no progress for %s: started again", broker, copyStall)
		}
		return fmt.Errorf("copy to broker %d from leader %d: %w", broker, s.part.Leader, s.err)
	}
	recovered := s.apply
	s.apply = func(p *metadata.Partition) error {
		if err := sameMove(p, m); err != nil {
			return err
		}
		return recovered(p)
	}
	c.commitSteps(ctx, fmt.Sprintf("reassign %s/%d: broker %d copied", topic, k.partition, broker), moveRequester, []*step{s})
	if s.err == nil {
		c.record(moveRequester, c.report(moveRequester, false, []*step{s}).Results...)
	}
	return s.err
}

// watchCopy cancels a copy whose leader reports no progress for
// copyStall.
func (c *Controller) watchCopy(ctx context.Context, cancel func(), s *step) {
	t := time.NewTicker(copyStall / 8)
	defer t.Stop()
	last, since := int64(-1), time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pr, err := c.copyProgress(ctx, s.topic, s.topicID, s.partition, s.part.Leader, s.broker)
		if err == nil && pr.CopiedBytes != last {
			last, since = pr.CopiedBytes, time.Now()
			continue
		}
		if time.Since(since) > copyStall {
			cancel()
			return
		}
	}
}

// copyProgress asks leader how far its copy of the partition to broker
// has come.
func (c *Controller) copyProgress(ctx context.Context, topic, topicID string, partition, leader, broker int32) (transport.MoveProgressResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, aliveTimeout)
	defer cancel()
	var m transport.JSONMessage
	req := &transport.CatchUpRequest{Topic: topic, TopicID: topicID, Partition: partition, Broker: broker}
	var pr transport.MoveProgressResponse
	if err := c.call(ctx, leader, transport.APIMoveProgress, req, &m); err != nil {
		return pr, err
	}
	return pr, json.Unmarshal(m.Data, &pr)
}

// moveLead moves the partition's leadership to the first replica of its
// move's target, as elect-leaders does; one operator command at a time.
// When that replica lacks acknowledged records the move goes to another
// (elect), and the next round tries again.
func (c *Controller) moveLead(ctx context.Context, topic string, k moveKey, to int32) error {
	end, err := c.beginOp()
	if err != nil {
		return err
	}
	defer end()
	meta := c.Metadata()
	part, m := movingPartition(meta, topic, k)
	if m == nil || part.Leader == to || m.Target[0] != to || !slices.Contains(part.Active, to) {
		return nil // the next round decides again
	}
	s := newStep(meta, topic, k.partition, transport.ActionElectLeader)
	s.to = to
	s.res.OldReplicas, s.res.NewReplicas = slices.Clone(part.Replicas), slices.Clone(part.Replicas)
	c.moveOff(ctx, moveRequester, false, []*step{s})
	if s.err == nil && s.res.Note == "" {
		s.res.Note = fmt.Sprintf("the move to %v: leadership to its first replica", m.Target)
	}
	c.report(moveRequester, false, []*step{s})
	if s.err == nil && s.res.NewLeader != to {
		// Leadership went elsewhere at the new epoch (broker to did not
		// answer, or lacks acknowledged records): the step is tried again
		// after its pause, not at once, which would fence the partition
		// again with every round.
		return fmt.Errorf("%w: %s", ErrNotReady, s.res.Note)
	}
	return s.err
}

// moveFinish ends the move once every replica of its target is active
// and leads: the replicas become the target, those taken off leave the
// active set (and delete their copies when the metadata reaches them).
func (c *Controller) moveFinish(ctx context.Context, topic string, k moveKey) error {
	_, m := movingPartition(c.Metadata(), topic, k)
	if m == nil {
		return nil
	}
	return c.changeAudited(ctx, fmt.Sprintf("reassign %s/%d: finish", topic, k.partition), moveRequester, func(meta *metadata.Cluster) ([]transport.ChangeResult, error) {
		t := meta.Topic(topic)
		if t == nil || t.ID != k.topicID || int(k.partition) >= len(t.Partitions) {
			return nil, fmt.Errorf("%w: %s/%d is gone", ErrUnknownPartition, topic, k.partition)
		}
		p := &t.Partitions[k.partition]
		if err := sameMove(p, m); err != nil {
			return nil, err
		}
		for _, b := range m.Target {
			if !slices.Contains(p.Active, b) {
				return nil, fmt.Errorf("%w: broker %d of the target %v is not active", ErrNotReady, b, m.Target)
			}
		}
		if !slices.Contains(m.Target, p.Leader) {
			return nil, fmt.Errorf("%w: leader %d is not in the target %v", ErrNotReady, p.Leader, m.Target)
		}
		res := transport.ChangeResult{Topic: topic, Partition: k.partition, Action: transport.ActionReassignFinish,
			OldLeader: p.Leader, NewLeader: p.Leader, OldEpoch: p.LeaderEpoch, NewEpoch: p.LeaderEpoch,
			OldActive: slices.Clone(p.Active), OldReplicas: slices.Clone(p.Replicas)}
		p.Replicas = slices.Clone(m.Target)
		p.Active = slices.DeleteFunc(p.Active, func(b int32) bool { return !slices.Contains(m.Target, b) })
		p.Move = nil
		res.NewActive, res.NewReplicas = slices.Clone(p.Active), slices.Clone(p.Replicas)
		if removed := metadata.Without(res.OldReplicas, m.Target); len(removed) > 0 {
			res.Note = fmt.Sprintf("brokers %v no longer hold a replica: they delete theirs", removed)
		}
		settleReplicationFactor(t)
		return []transport.ChangeResult{res}, nil
	})
}

// settleReplicationFactor makes a topic's replication factor, the one its
// new partitions get, the replica count of its partitions once they all
// have the same and none moves.
func settleReplicationFactor(t *metadata.Topic) {
	n := -1
	for _, p := range t.Partitions {
		if p.Move != nil || n >= 0 && len(p.Replicas) != n {
			return
		}
		n = len(p.Replicas)
	}
	if n > 0 {
		t.ReplicationFactor = n
	}
}

// Reassign starts the moves of a plan, checked whole first (a dry run
// unless req.Execute), or with req.Cancel rolls moves back.
func (c *Controller) Reassign(ctx context.Context, req transport.ReassignRequest) (transport.ChangeReport, error) {
	if req.Cancel {
		return c.cancelMoves(ctx, req)
	}
	throttle := req.Throttle
	if throttle == 0 {
		throttle = DefaultMoveThrottle
	}
	if throttle < MinMoveThrottle || throttle > MaxMoveThrottle {
		return transport.ChangeReport{}, fmt.Errorf("%w: a throttle of %d bytes/s; it must be between %d (0.1 MB/s) and %d (10,000 MB/s)",
			ErrInvalidRequest, throttle, MinMoveThrottle, MaxMoveThrottle)
	}
	if err := c.Refusal(); err != nil {
		return transport.ChangeReport{}, err
	}
	meta := c.Metadata()
	starts, err := checkPlan(meta, req.Plan)
	if err != nil {
		return transport.ChangeReport{}, err
	}
	if req.Execute {
		if err := c.addedAnswer(ctx, meta, starts); err != nil {
			return transport.ChangeReport{}, err
		}
	}
	rep := transport.ChangeReport{Results: []transport.ChangeResult{}}
	var todo []transport.ChangeResult
	var moving []moveStart
	for _, st := range starts {
		res := st.result(!req.Execute)
		if slices.Equal(st.part.Replicas, st.target) {
			res.Note = "already on these replicas: nothing to move"
			rep.Results = append(rep.Results, res)
			continue
		}
		todo = append(todo, res)
		moving = append(moving, st)
	}
	if !req.Execute || len(todo) == 0 {
		rep.Results = append(rep.Results, todo...)
		return rep, nil
	}
	started := time.Now().UnixMilli()
	err = c.changeAudited(ctx, fmt.Sprintf("reassign: start %d moves", len(todo)), req.Requester, func(m *metadata.Cluster) ([]transport.ChangeResult, error) {
		for i, res := range todo {
			t := m.Topic(res.Topic)
			st := moving[i]
			if t == nil || t.ID != st.topicID || int(res.Partition) >= len(t.Partitions) {
				return nil, fmt.Errorf("%w: %s/%d is gone", ErrUnknownPartition, res.Topic, res.Partition)
			}
			p := &t.Partitions[res.Partition]
			if p.Move != nil || !slices.Equal(p.Replicas, res.OldReplicas) {
				return nil, fmt.Errorf("%w: %s/%d changed meanwhile (its replicas are %v); nothing was started", ErrInvalidRequest, res.Topic, res.Partition, p.Replicas)
			}
			from := slices.Clone(p.Replicas)
			// From is leader first, as the move reads it when rolled back.
			if i := slices.Index(from, p.Leader); i > 0 {
				from = append([]int32{p.Leader}, slices.Delete(from, i, i+1)...)
			}
			p.Move = &metadata.Move{Target: slices.Clone(res.NewReplicas), From: from, Throttle: throttle, Started: started}
			p.Replicas = metadata.MoveReplicas(from, p.Move.Target)
		}
		return todo, nil
	})
	if err != nil {
		return transport.ChangeReport{}, err
	}
	rep.Results = append(rep.Results, todo...)
	c.wakeMoves()
	return rep, nil
}

// moveStart is one partition of a plan, checked.
type moveStart struct {
	topic, topicID string
	partition      int32
	part           metadata.Partition
	target         []int32
}

func (s moveStart) result(dry bool) transport.ChangeResult {
	res := transport.ChangeResult{Topic: s.topic, Partition: s.partition, Action: transport.ActionReassign, DryRun: dry,
		OldLeader: s.part.Leader, NewLeader: s.part.Leader, OldEpoch: s.part.LeaderEpoch, NewEpoch: s.part.LeaderEpoch,
		OldActive: slices.Clone(s.part.Active), NewActive: slices.Clone(s.part.Active),
		OldReplicas: slices.Clone(s.part.Replicas), NewReplicas: slices.Clone(s.target)}
	var notes []string
	if add := metadata.Without(s.target, s.part.Replicas); len(add) > 0 {
		notes = append(notes, fmt.Sprintf("copies to %v", add))
	}
	if rm := metadata.Without(s.part.Replicas, s.target); len(rm) > 0 {
		notes = append(notes, fmt.Sprintf("removes %v once they are active", rm))
	}
	if s.part.Leader != s.target[0] {
		notes = append(notes, fmt.Sprintf("then leadership %d → %d", s.part.Leader, s.target[0]))
	}
	res.Note = strings.Join(notes, "; ")
	return res
}

// checkPlan checks a whole plan against meta: every error it finds, and
// no move, when one is wrong.
func checkPlan(meta *metadata.Cluster, plan transport.MovePlan) ([]moveStart, error) {
	if plan.Version != 0 && plan.Version != transport.MovePlanVersion {
		return nil, fmt.Errorf("%w: plan version %d; this controller reads version %d", ErrInvalidRequest, plan.Version, transport.MovePlanVersion)
	}
	if len(plan.Partitions) == 0 {
		return nil, fmt.Errorf("%w: the plan names no partition", ErrInvalidRequest)
	}
	var errs []error
	var out []moveStart
	seen := map[string]bool{}
	for _, pm := range plan.Partitions {
		where := fmt.Sprintf("%s/%d", pm.Topic, pm.Partition)
		t := meta.Topic(pm.Topic)
		if t == nil {
			errs = append(errs, fmt.Errorf("%w: %q", metadata.ErrUnknownTopic, pm.Topic))
			continue
		}
		if pm.Partition < 0 || int(pm.Partition) >= len(t.Partitions) {
			errs = append(errs, fmt.Errorf("%w: %s", ErrUnknownPartition, metadata.NoSuchPartition(t.Name, len(t.Partitions), pm.Partition)))
			continue
		}
		if seen[where] {
			errs = append(errs, fmt.Errorf("%w: %s is named twice in the plan", ErrInvalidRequest, where))
			continue
		}
		seen[where] = true
		part := t.Partitions[pm.Partition]
		if err := checkTarget(meta, where, pm.Replicas); err != nil {
			errs = append(errs, err)
			continue
		}
		if m := part.Move; m != nil {
			errs = append(errs, fmt.Errorf("%w: %s is already moving, from %v to %v: wait for it to finish (partition reassign --status), or cancel it",
				ErrInvalidRequest, where, m.From, m.Target))
			continue
		}
		out = append(out, moveStart{topic: t.Name, topicID: t.ID, partition: pm.Partition, part: part, target: slices.Clone(pm.Replicas)})
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("the plan is refused, nothing moved: %w", errors.Join(errs...))
	}
	return out, nil
}

// checkTarget checks one partition's new replica list.
func checkTarget(meta *metadata.Cluster, where string, target []int32) error {
	switch {
	case len(target) == 0:
		return fmt.Errorf("%w: %s: a partition needs at least one replica", ErrInvalidReplication, where)
	case len(target) > len(meta.Brokers):
		return fmt.Errorf("%w: %s: %d replicas, and the cluster has %d brokers", ErrInvalidReplication, where, len(target), len(meta.Brokers))
	}
	for i, b := range target {
		if _, ok := meta.Broker(b); !ok {
			return fmt.Errorf("%w: %s names broker %d; the registered brokers are %v", ErrUnknownBroker, where, b, meta.BrokerIDs())
		}
		if slices.Contains(target[:i], b) {
			return fmt.Errorf("%w: %s names broker %d twice", ErrInvalidRequest, where, b)
		}
	}
	return nil
}

// addedAnswer refuses moves that add replicas on brokers that do not
// answer: their copies could not start.
func (c *Controller) addedAnswer(ctx context.Context, meta *metadata.Cluster, starts []moveStart) error {
	added := map[int32]bool{}
	for _, st := range starts {
		for _, b := range metadata.Without(st.target, st.part.Replicas) {
			added[b] = true
		}
	}
	if len(added) == 0 {
		return nil
	}
	_, silent := c.answering(ctx, meta)
	var down []int32
	for _, b := range silent {
		if added[b] {
			down = append(down, b)
		}
	}
	if len(down) > 0 {
		return fmt.Errorf("%w: the plan adds replicas on %s, which %s: start %s, or plan without %s; nothing moved",
			ErrBrokerNotAvailable, brokerList(down), doNot(down), themOrIt(down), themOrIt(down))
	}
	return nil
}

func themOrIt(ids []int32) string {
	if len(ids) == 1 {
		return "it"
	}
	return "them"
}

// cancelMoves rolls back the moves of the partitions the request's plan
// names (every move when it names none): leadership back to the move's
// first replica of origin if it left them, then, in one change per
// partition, the replicas back to the origin and the active set to its
// active replicas. One operator command at a time, so that no step of
// the driver's leadership moves comes between.
func (c *Controller) cancelMoves(ctx context.Context, req transport.ReassignRequest) (transport.ChangeReport, error) {
	end, err := c.beginOp()
	if err != nil {
		return transport.ChangeReport{}, err
	}
	defer end()
	meta := c.Metadata()
	type named struct {
		topic, id string
		partition int32
	}
	var todo []named
	if len(req.Plan.Partitions) == 0 {
		for _, t := range meta.Topics {
			for i, p := range t.Partitions {
				if p.Move != nil {
					todo = append(todo, named{t.Name, t.ID, int32(i)})
				}
			}
		}
		if len(todo) == 0 {
			return transport.ChangeReport{}, fmt.Errorf("%w: no partition is moving", ErrInvalidRequest)
		}
	}
	for _, pm := range req.Plan.Partitions {
		part, err := partitionOf(meta, pm.Topic, pm.Partition)
		if err != nil {
			return transport.ChangeReport{}, err
		}
		if part.Move == nil {
			return transport.ChangeReport{}, fmt.Errorf("%w: %s/%d is not moving; a finished move is undone by another reassign", ErrInvalidRequest, pm.Topic, pm.Partition)
		}
		todo = append(todo, named{pm.Topic, meta.Topic(pm.Topic).ID, pm.Partition})
	}
	rep := transport.ChangeReport{Results: []transport.ChangeResult{}}
	for _, n := range todo {
		rep.Results = append(rep.Results, c.cancelMove(ctx, req.Requester, n.topic, moveKey{n.id, n.partition}))
	}
	if len(todo) == 1 && rep.Results[0].Error != "" {
		return rep, errors.New(rep.Results[0].Error)
	}
	c.wakeMoves()
	return rep, nil
}

// cancelMove rolls one move back; the caller holds the operator lock.
func (c *Controller) cancelMove(ctx context.Context, requester, topic string, k moveKey) transport.ChangeResult {
	meta := c.Metadata()
	part, m := movingPartition(meta, topic, k)
	res := transport.ChangeResult{Topic: topic, Partition: k.partition, Action: transport.ActionReassignCancel}
	if m == nil {
		return c.result(res, fmt.Errorf("%w: %s/%d is no longer moving", ErrInvalidRequest, topic, k.partition))
	}
	var back []int32
	for _, b := range m.From {
		if slices.Contains(part.Active, b) {
			back = append(back, b)
		}
	}
	if len(back) == 0 {
		return c.result(res, fmt.Errorf("%w: none of the replicas %s/%d moves from (%v) is active any more (active: %v): rolled back, it would have none; let the move finish",
			ErrNoEligibleReplica, topic, k.partition, m.From, part.Active))
	}
	if !slices.Contains(m.From, part.Leader) {
		s := newStep(meta, topic, k.partition, transport.ActionElectLeader)
		s.to = back[0]
		s.res.Note = fmt.Sprintf("cancel of the move to %v: leadership back to %d", m.Target, back[0])
		c.moveOff(ctx, requester, false, []*step{s})
		c.report(requester, false, []*step{s})
		if s.err != nil {
			return c.result(res, fmt.Errorf("move leadership back to broker %d: %w", back[0], s.err))
		}
	}
	var made transport.ChangeResult
	err := c.changeAudited(ctx, fmt.Sprintf("reassign %s/%d: cancel", topic, k.partition), requester, func(meta *metadata.Cluster) ([]transport.ChangeResult, error) {
		t := meta.Topic(topic)
		if t == nil || t.ID != k.topicID || int(k.partition) >= len(t.Partitions) {
			return nil, fmt.Errorf("%w: %s/%d is gone", ErrUnknownPartition, topic, k.partition)
		}
		p := &t.Partitions[k.partition]
		if err := sameMove(p, m); err != nil {
			return nil, err
		}
		if !slices.Contains(m.From, p.Leader) {
			return nil, fmt.Errorf("%w: leader %d is not one of %v", ErrInvalidRequest, p.Leader, m.From)
		}
		made = transport.ChangeResult{Topic: topic, Partition: k.partition, Action: transport.ActionReassignCancel,
			OldLeader: p.Leader, NewLeader: p.Leader, OldEpoch: p.LeaderEpoch, NewEpoch: p.LeaderEpoch,
			OldActive: slices.Clone(p.Active), OldReplicas: slices.Clone(p.Replicas)}
		p.Replicas = slices.Clone(m.From)
		p.Active = slices.DeleteFunc(p.Active, func(b int32) bool { return !slices.Contains(m.From, b) })
		p.Move = nil
		made.NewActive, made.NewReplicas = slices.Clone(p.Active), slices.Clone(p.Replicas)
		if added := metadata.Without(m.Target, m.From); len(added) > 0 {
			made.Note = fmt.Sprintf("brokers %v no longer hold a replica: they delete what was copied", added)
		}
		settleReplicationFactor(t)
		return []transport.ChangeResult{made}, nil
	})
	if err != nil {
		return c.result(res, err)
	}
	return made
}

// ReassignStatus lists the moves under way, with the progress of each
// copy from the partitions' leaders.
func (c *Controller) ReassignStatus(ctx context.Context, req transport.ReassignStatusRequest) (transport.ReassignStatus, error) {
	if err := c.Refusal(); err != nil {
		return transport.ReassignStatus{}, err
	}
	meta := c.Metadata()
	if req.Topic != "" && meta.Topic(req.Topic) == nil {
		return transport.ReassignStatus{}, fmt.Errorf("%w: %q", metadata.ErrUnknownTopic, req.Topic)
	}
	out := transport.ReassignStatus{Moves: []transport.MoveStatus{}}
	var wg sync.WaitGroup
	now := time.Now()
	for _, t := range meta.Topics {
		if req.Topic != "" && t.Name != req.Topic {
			continue
		}
		for i, p := range t.Partitions {
			if p.Move == nil {
				continue
			}
			k := moveKey{t.ID, int32(i)}
			step, _ := nextMoveStep(p)
			ms := transport.MoveStatus{Topic: t.Name, Partition: int32(i), From: p.Move.From, Target: p.Move.Target,
				Leader: p.Leader, Active: p.Active, Step: step, Throttle: p.Move.Throttle, Started: p.Move.Started}
			c.moves.mu.Lock()
			ms.Waiting = c.moves.waiting[k]
			c.moves.mu.Unlock()
			for _, b := range p.Move.Target {
				active := slices.Contains(p.Active, b)
				if active && slices.Contains(p.Move.From, b) {
					continue
				}
				ms.Copies = append(ms.Copies, transport.CopyStatus{Broker: b, Active: active, SecondsLeft: -1})
			}
			out.Moves = append(out.Moves, ms)
		}
	}
	// The leaders are asked at once, once every move is listed.
	for mi := range out.Moves {
		ms := &out.Moves[mi]
		id := meta.Topic(ms.Topic).ID
		for ci := range ms.Copies {
			st := &ms.Copies[ci]
			if st.Active {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				pr, err := c.copyProgress(ctx, ms.Topic, id, ms.Partition, ms.Leader, st.Broker)
				if err != nil {
					return
				}
				st.CopiedBytes, st.TotalBytes = pr.CopiedBytes, pr.TotalBytes
				if el := now.Sub(time.UnixMilli(pr.Started)).Seconds(); pr.Running && el > 0 && pr.CopiedBytes > 0 {
					st.BytesPerSec = float64(pr.CopiedBytes) / el
					st.SecondsLeft = max(0, float64(pr.TotalBytes-pr.CopiedBytes)/st.BytesPerSec)
				}
			}()
		}
	}
	wg.Wait()
	sort.SliceStable(out.Moves, func(i, j int) bool {
		a, b := out.Moves[i], out.Moves[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
	return out, nil
}
