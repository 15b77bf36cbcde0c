package controller

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"gostream/metadata"
	"gostream/transport"
)

// Operator-triggered failover, drops and leadership moves, carried out as
// docs/failover.md describes. One command of any number of partitions is
// carried out in phases, each over all its partitions at once (at most
// opParallel at a time): the checks, one persisted change reserving every
// new epoch, the fences and the choice of leaders, and one persisted and
// pushed change with every new leader and active set. The cost of a
// command is then two metadata changes, whatever its size, and the
// slowest partition's round trips, not their sum.

// opParallel bounds the partitions one operator command works on at once:
// each costs a few small RPCs and, on its replicas, an epoch file fsync'd.
const opParallel = 64

// step is one partition of an operator command, as the command found it,
// what it did or will do, and why it failed.
type step struct {
	topic     string
	topicID   string
	partition int32
	part      metadata.Partition // as the command found it
	broker    int32              // drop: the follower to take out
	to        int32              // elect-leader: the new leader
	newEpoch  int32
	res       transport.ChangeResult
	err       error
	// recorded says res is in the audit trail, committed with the change.
	recorded bool
	// apply is the step's part of the command's last change, set once the
	// step is decided; it refuses a partition that changed meanwhile.
	apply func(p *metadata.Partition) error
}

func newStep(meta *metadata.Cluster, topic string, partition int32, action transport.Action) *step {
	s := &step{topic: topic, partition: partition}
	if t := meta.Topic(topic); t != nil {
		s.topicID = t.ID
	}
	part, err := partitionOf(meta, topic, partition)
	s.part, s.err = part, err
	s.res = transport.ChangeResult{Topic: topic, Partition: partition, Action: action,
		OldLeader: part.Leader, NewLeader: part.Leader, OldEpoch: part.LeaderEpoch, NewEpoch: part.LeaderEpoch,
		OldActive: slices.Clone(part.Active), NewActive: slices.Clone(part.Active)}
	return s
}

// unchanged is the check every step's apply makes first: the partition
// still has the leader and epoch the command found.
func (s *step) unchanged(p *metadata.Partition, what string) error {
	if p.Leader != s.part.Leader || p.LeaderEpoch != s.part.LeaderEpoch {
		return fmt.Errorf("%w: partition %s/%d changed during the %s", ErrInvalidRequest, s.topic, s.partition, what)
	}
	return nil
}

// each runs fn on every step that has not failed, at most opParallel at
// once, and returns when all are done. fn touches only its own step.
func each(steps []*step, fn func(*step)) {
	sem := make(chan struct{}, opParallel)
	var wg sync.WaitGroup
	for _, s := range steps {
		if s.err != nil {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			fn(s)
		}()
	}
	wg.Wait()
}

// commitSteps persists every decided step of a command in one change,
// with the audit events of those it makes, and pushes it. A step whose
// partition changed meanwhile fails alone; a change that cannot be
// persisted fails them all.
func (c *Controller) commitSteps(ctx context.Context, what, requester string, steps []*step) {
	var decided []*step
	for _, s := range steps {
		if s.err == nil && s.apply != nil {
			decided = append(decided, s)
		}
	}
	if len(decided) == 0 {
		return
	}
	failed := map[*step]error{}
	what = fmt.Sprintf("%s: %d partitions", what, len(decided))
	next, err := c.commitAudited(ctx, what, requester, func(m *metadata.Cluster) ([]transport.ChangeResult, error) {
		clear(failed)
		var made []transport.ChangeResult
		for _, s := range decided {
			t := m.Topic(s.topic)
			if t == nil || t.ID != s.topicID || int(s.partition) >= len(t.Partitions) {
				failed[s] = fmt.Errorf("%w: %s/%d is gone", ErrUnknownPartition, s.topic, s.partition)
				continue
			}
			if err := s.apply(&t.Partitions[s.partition]); err != nil {
				failed[s] = err
				continue
			}
			made = append(made, s.res)
		}
		if len(made) == 0 {
			return nil, errNoChange
		}
		return made, nil
	})
	if err == nil && next != nil {
		for _, s := range decided {
			s.recorded = failed[s] == nil
		}
		if hasAction(decided, transport.ActionFailover, transport.ActionElectLeader) {
			crashpoint("failover-after-commit")
		}
		err = c.publish(ctx, what, next)
	}
	for _, s := range decided {
		switch {
		case err != nil:
			s.err = err
		case failed[s] != nil:
			s.err = failed[s]
		}
	}
}

// failover runs a failover request over the partitions it names.
//
// One named partition: its error is the answer, with its code. A dry run
// and a whole broker answer with every result, errors inside, so the
// operator sees the candidates and the other partitions.
func (c *Controller) Failover(ctx context.Context, req transport.FailoverRequest) (transport.ChangeReport, error) {
	end, err := c.beginOp()
	if err != nil {
		return transport.ChangeReport{}, err
	}
	defer end()
	meta := c.Metadata()
	var steps []*step
	switch {
	case req.Broker > 0:
		if _, ok := meta.Broker(req.Broker); !ok {
			return transport.ChangeReport{}, unknownBroker(meta, req.Broker)
		}
		steps = brokerSteps(meta, req.Broker)
	case req.Topic != "":
		part, err := partitionOf(meta, req.Topic, req.Partition)
		if err != nil {
			return transport.ChangeReport{}, err
		}
		// With a broker too: that broker's replica of the partition goes
		// out of the active set, failed over if it leads, dropped if it
		// follows.
		b := req.BrokerOfPartition
		if b > 0 && !slices.Contains(part.Active, b) {
			return transport.ChangeReport{}, fmt.Errorf("%w: broker %d is not in the active set %v of %s/%d", ErrInvalidRequest, b, part.Active, req.Topic, req.Partition)
		}
		if b > 0 && part.Leader != b {
			steps = append(steps, dropStep(meta, req.Topic, req.Partition, b))
		} else {
			steps = append(steps, newStep(meta, req.Topic, req.Partition, transport.ActionFailover))
		}
	default:
		return transport.ChangeReport{}, fmt.Errorf("%w: name --topic and --partition, or --broker", ErrInvalidRequest)
	}
	c.moveOff(ctx, req.Requester, req.DryRun, steps)
	rep := c.report(req.Requester, req.DryRun, steps)
	if req.Topic != "" && !req.DryRun && steps[0].err != nil {
		return rep, steps[0].err
	}
	return rep, nil
}

// brokerSteps are the partitions broker leads (to fail over) or follows
// (to drop).
func brokerSteps(meta *metadata.Cluster, broker int32) []*step {
	var out []*step
	for _, t := range meta.Topics {
		for p, part := range t.Partitions {
			switch {
			case part.Leader == broker:
				out = append(out, newStep(meta, t.Name, int32(p), transport.ActionFailover))
			case slices.Contains(part.Active, broker):
				out = append(out, dropStep(meta, t.Name, int32(p), broker))
			}
		}
	}
	return out
}

func dropStep(meta *metadata.Cluster, topic string, partition, broker int32) *step {
	s := newStep(meta, topic, partition, transport.ActionDropFollower)
	s.broker = broker
	s.res.NewActive = slices.DeleteFunc(slices.Clone(s.part.Active), func(id int32) bool { return id == broker })
	return s
}

// moveOff carries out failovers, leadership moves and drops, each step
// its own: the checks, the epochs reserved (one change), the fences and
// choices, and the new leaders and active sets (one change).
func (c *Controller) moveOff(ctx context.Context, requester string, dry bool, steps []*step) {
	quiet := &silence{}
	c.findSilent(ctx, quiet, steps)
	// 1. Refuse a failover while the leader answers and its replica is
	// healthy, and a drop while the follower does.
	each(steps, func(s *step) {
		switch s.res.Action {
		case transport.ActionFailover:
			c.checkLeader(ctx, quiet, s)
		case transport.ActionDropFollower:
			c.checkFollower(ctx, quiet, s)
		}
	})
	// 2. Every new epoch is above any handed out; persisted before it is
	// used, in one change.
	c.reserveEpochs(ctx, dry, steps)
	if !dry && hasAction(steps, transport.ActionFailover, transport.ActionElectLeader) {
		crashpoint("failover-after-reserve")
	}
	// 3-5. Fence, choose, compare.
	each(steps, func(s *step) {
		if s.res.Action != transport.ActionDropFollower {
			c.elect(ctx, quiet, dry, s)
		}
	})
	if dry {
		return
	}
	if hasAction(steps, transport.ActionFailover, transport.ActionElectLeader) {
		crashpoint("failover-after-fence")
	}
	// 6. Persist every new leader, epoch and active set, and every drop,
	// then tell the replicas (change pushes the metadata).
	c.commitSteps(ctx, "failover", requester, steps)
}

func hasAction(steps []*step, actions ...transport.Action) bool {
	for _, s := range steps {
		if s.err == nil && slices.Contains(actions, s.res.Action) {
			return true
		}
	}
	return false
}

// findSilent asks each broker the steps would take out, once and all at
// once, for its replica of one of those partitions, so that a broker that
// does not answer is known silent before the partitions are checked one
// by one (thousands of checks of a dead broker would otherwise each wait
// for it until the first of them found it silent).
func (c *Controller) findSilent(ctx context.Context, quiet *silence, steps []*step) {
	first := map[int32]*step{}
	for _, s := range steps {
		b := s.broker
		if s.res.Action == transport.ActionFailover {
			b = s.part.Leader
		}
		if _, ok := first[b]; !ok && s.err == nil && b > 0 && s.res.Action != transport.ActionElectLeader {
			first[b] = s
		}
	}
	var wg sync.WaitGroup
	for b, s := range first {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.replicaHealth(ctx, quiet, b, s.topic, s.partition)
		}()
	}
	wg.Wait()
}

// checkLeader is step 1 of a failover: a failover is for a leader that is
// dead, or whose replica cannot lead (damaged, failed, offline, or behind
// its followers).
func (c *Controller) checkLeader(ctx context.Context, quiet *silence, s *step) {
	if problem, ok := c.leaderUsable(ctx, quiet, s.part, s.topic, s.partition); ok {
		s.err = fmt.Errorf("%w: partition %s/%d is led by broker %d, which answers and whose replica is healthy", ErrLeaderStillAvailable, s.topic, s.partition, s.part.Leader)
	} else if problem != "" {
		s.res.Note = "the leader answers, but its replica cannot lead: " + problem
	}
}

// checkFollower refuses to drop a follower that answers with a healthy
// replica, and decides the drop otherwise.
func (c *Controller) checkFollower(ctx context.Context, quiet *silence, s *step) {
	if _, answers, problem := c.replicaHealth(ctx, quiet, s.broker, s.topic, s.partition); answers && problem == "" {
		s.err = fmt.Errorf("%w: broker %d, a follower of %s/%d, answers and its replica is healthy; nothing to drop", ErrLeaderStillAvailable, s.broker, s.topic, s.partition)
		return
	} else if problem != "" {
		s.res.Note = "the follower answers, but its replica cannot serve: " + problem
	}
	s.apply = func(p *metadata.Partition) error {
		if err := s.unchanged(p, "drop"); err != nil {
			return err
		}
		p.Active = slices.DeleteFunc(p.Active, func(id int32) bool { return id == s.broker })
		return nil
	}
}

// reserveEpochs gives every failover and move its new epoch,
// max(leader epoch, reserved epoch) + 1, persisted (not pushed) in one
// change before any replica is fenced with it. A dry run only computes
// them.
func (c *Controller) reserveEpochs(ctx context.Context, dry bool, steps []*step) {
	var todo []*step
	for _, s := range steps {
		if s.err == nil && s.res.Action != transport.ActionDropFollower {
			s.newEpoch = max(s.part.LeaderEpoch, s.part.ReservedEpoch) + 1
			todo = append(todo, s)
		}
	}
	if dry || len(todo) == 0 {
		return
	}
	err := c.reserve(ctx, fmt.Sprintf("reserve epochs for %d partitions", len(todo)), func(m *metadata.Cluster) error {
		for _, s := range todo {
			t := m.Topic(s.topic)
			if t == nil || t.ID != s.topicID || int(s.partition) >= len(t.Partitions) {
				continue // gone: its failover fails at the last change
			}
			p := &t.Partitions[s.partition]
			s.newEpoch = max(s.newEpoch, p.LeaderEpoch+1, p.ReservedEpoch+1)
			p.ReservedEpoch = s.newEpoch
		}
		return nil
	})
	if err != nil {
		for _, s := range todo {
			s.err = err
		}
	}
}

// elect is steps 3 to 5 of a failover or a leadership move: fence every
// reachable active replica (but a failed leader) with the new epoch and
// read its state, choose the new leader, and check that every other
// candidate agrees with it on every shared offset, by content.
func (c *Controller) elect(ctx context.Context, quiet *silence, dry bool, s *step) {
	transfer := s.to > 0
	fenceEpoch := s.newEpoch
	if dry {
		fenceEpoch = 0 // observe only
	}
	// A transfer fences the old leader too: it stops taking writes (they
	// fail as NotLeader, provably not appended) and its log end is final.
	skip := s.part.Leader
	if transfer {
		skip = 0
	}
	cands := c.probe(ctx, quiet, s.topic, s.partition, s.part.Active, skip, fenceEpoch)
	defer func() {
		s.res.Candidates = make([]transport.Candidate, len(cands))
		for i, cd := range cands {
			s.res.Candidates[i] = cd.Candidate
		}
	}()
	ci := chooseLeader(cands, s.to)
	if transfer && ci < 0 {
		// The replica named does not answer, and the old leader and the
		// others that answered are fenced with the new epoch already: left
		// so, the partition would have no leader that takes writes (the
		// old one waits for metadata newer than its fence) and nothing
		// would ever lift the fence. Leadership goes, at the new epoch, to
		// the replica a failover would choose (the old leader, unless it
		// did not answer either).
		transfer = false
		ci = chooseLeader(cands, 0)
		if ci >= 0 {
			s.res.Note = fmt.Sprintf("broker %d, named to lead, does not answer: broker %d leads at the new epoch instead (every replica that answered is fenced with it); the move can be asked again once broker %d answers",
				s.to, cands[ci].Broker, s.to)
		}
	}
	if transfer && ci >= 0 {
		// The replica named may still be catching up: a replica put back
		// by recover lacks what the leader acknowledged before it counted
		// the replica in, until the leader's sender fills it. With every
		// active replica fenced the acknowledged end is final; a new
		// leader short of it would lose acknowledged records. Leadership
		// then goes, at the new epoch (everyone is fenced with it), to the
		// replica a failover would choose, which holds them, and the move
		// can be asked again once the named one has caught up.
		if ack := acknowledgedEnd(cands); cands[ci].LogEndOffset < ack {
			short := cands[ci]
			transfer = false
			ci = chooseLeader(cands, 0)
			if ci >= 0 {
				s.res.Note = fmt.Sprintf("broker %d lacks acknowledged records [%d, %d) (it is still catching up): broker %d, which holds them, leads at the new epoch instead; run elect-leaders again once it has caught up",
					short.Broker, short.LogEndOffset, ack, cands[ci].Broker)
			}
		}
	}
	switch {
	case ci < 0 && s.to > 0:
		s.err = fmt.Errorf("%w: broker %d, the new leader named for %s/%d, does not answer, nor does any other active replica", ErrNoEligibleReplica, s.to, s.topic, s.partition)
		return
	case ci < 0:
		s.err = fmt.Errorf("%w: no active follower of %s/%d answers (active %v, leader %d down)", ErrNoEligibleReplica, s.topic, s.partition, s.part.Active, s.part.Leader)
		return
	}
	chosen := &cands[ci]
	chosen.Chosen = true
	var active []int32
	var disagree []string
	for i := range cands {
		cd := &cands[i]
		switch {
		case !cd.Reachable:
			continue
		case i == ci:
			cd.Agrees = true
			active = append(active, cd.Broker)
			continue
		case transfer && cd.LogEndOffset > chosen.LogEndOffset:
			// It holds records the new leader lacks: a write in flight when
			// the fence came, which no active replica's absence let be
			// acknowledged. It leaves the active set and is recovered.
			cd.Note = fmt.Sprintf("holds offsets [%d, %d) the new leader lacks (never acknowledged): left out, then recovered", chosen.LogEndOffset, cd.LogEndOffset)
			continue
		}
		same, note := c.agree(ctx, s.topic, s.partition, chosen, cd)
		cd.Agrees, cd.Note = same, note
		if !same {
			disagree = append(disagree, fmt.Sprintf("broker %d (%s)", cd.Broker, note))
			continue
		}
		active = append(active, cd.Broker)
	}
	if len(disagree) > 0 {
		s.err = fmt.Errorf("%w: candidates for %s/%d disagree with broker %d: %v; nothing was promoted", ErrReplicaDivergence, s.topic, s.partition, chosen.Broker, disagree)
		return
	}
	slices.Sort(active)
	lost := chosen.LogEndOffset
	s.res.LostFrom = &lost
	leader, epoch := chosen.Broker, s.newEpoch
	s.res.NewLeader, s.res.NewEpoch, s.res.NewActive = leader, epoch, active
	s.apply = func(p *metadata.Partition) error {
		if err := s.unchanged(p, string(s.res.Action)); err != nil {
			return err
		}
		p.Leader, p.LeaderEpoch, p.Active = leader, epoch, slices.Clone(active)
		p.ReservedEpoch = max(p.ReservedEpoch, epoch)
		return nil
	}
}

// ElectLeaders moves the leadership of every partition (of req.Topic, or
// of all topics) whose leader is not its preferred replica, the first of
// its replicas, back to it, when that replica is active. A replica left
// out of the active set by a move (it held an unacknowledged write) is
// recovered in the same request; its result follows the move's.
func (c *Controller) ElectLeaders(ctx context.Context, req transport.ElectLeadersRequest) (transport.ChangeReport, error) {
	end, err := c.beginOp()
	if err != nil {
		return transport.ChangeReport{}, err
	}
	defer end()
	meta := c.Metadata()
	if req.Topic != "" && meta.Topic(req.Topic) == nil {
		return transport.ChangeReport{}, fmt.Errorf("%w: %q", metadata.ErrUnknownTopic, req.Topic)
	}
	var moves []*step
	for _, t := range meta.Topics {
		if req.Topic != "" && t.Name != req.Topic {
			continue
		}
		for p, part := range t.Partitions {
			preferred := part.Replicas[0]
			if part.Leader == preferred {
				continue
			}
			s := newStep(meta, t.Name, int32(p), transport.ActionElectLeader)
			s.to = preferred
			if !slices.Contains(part.Active, preferred) {
				s.err = fmt.Errorf("%w: broker %d is not in the active set %v of %s/%d; recover it first", ErrInvalidRequest, preferred, part.Active, t.Name, p)
			}
			moves = append(moves, s)
		}
	}
	c.moveOff(ctx, req.Requester, req.DryRun, moves)
	// The replicas a move left out are recovered, from the metadata the
	// moves made.
	after := c.Metadata()
	var recovers []*step
	followsMove := map[*step][]*step{}
	for _, m := range moves {
		if m.err != nil || req.DryRun {
			continue
		}
		for _, b := range m.res.OldActive {
			if !slices.Contains(m.res.NewActive, b) {
				r := recoverStep(after, m.topic, m.partition, b)
				recovers = append(recovers, r)
				followsMove[m] = append(followsMove[m], r)
			}
		}
	}
	c.recoverSteps(ctx, req.Requester, recovers)
	var ordered []*step
	for _, m := range moves {
		ordered = append(ordered, m)
		ordered = append(ordered, followsMove[m]...)
	}
	return c.report(req.Requester, req.DryRun, ordered), nil
}

// beginOp starts an operator command: one at a time, none while the
// controller refuses changes (a failover or a recovery acts on replicas,
// fencing or truncating them, before it records anything). The caller
// runs the returned end.
func (c *Controller) beginOp() (end func(), err error) {
	c.opMu.Lock()
	if err := c.Refusal(); err != nil {
		c.opMu.Unlock()
		return nil, err
	}
	return c.opMu.Unlock, nil
}

// unknownBroker is the error for a request that names a broker id the
// cluster does not have.
func unknownBroker(meta *metadata.Cluster, id int32) error {
	return fmt.Errorf("%w: broker %d is not registered; the registered brokers are %v", ErrUnknownBroker, id, meta.BrokerIDs())
}

func partitionOf(meta *metadata.Cluster, topic string, partition int32) (metadata.Partition, error) {
	t := meta.Topic(topic)
	if t == nil {
		return metadata.Partition{}, fmt.Errorf("%w: %q", metadata.ErrUnknownTopic, topic)
	}
	if partition < 0 || int(partition) >= len(t.Partitions) {
		return metadata.Partition{}, fmt.Errorf("%w: topic %q has no partition %d", ErrUnknownPartition, topic, partition)
	}
	return t.Partitions[partition], nil
}
