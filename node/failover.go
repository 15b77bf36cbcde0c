package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"gostream/metadata"
	"gostream/transport"
)

// Operator-triggered failover and recovery, carried out by the controller
// step by step as docs/failover.md describes.

// FailoverRequest is the JSON body of a Failover request.
type FailoverRequest struct {
	Topic     string `json:"topic,omitempty"`
	Partition int32  `json:"partition"`
	Broker    int32  `json:"broker,omitempty"` // every partition this broker leads or follows
	// BrokerOfPartition, with Topic and Partition, names one replica to
	// take out of the partition's active set: failed over if it leads,
	// dropped if it follows.
	BrokerOfPartition int32  `json:"broker_of_partition,omitempty"`
	DryRun            bool   `json:"dry_run"`
	Requester         string `json:"requester,omitempty"`
}

// Candidate is one replica considered by a failover.
type Candidate struct {
	Broker       int32  `json:"broker"`
	Reachable    bool   `json:"reachable"`
	LastEpoch    int32  `json:"last_epoch"`
	LogEndOffset int64  `json:"log_end_offset"`
	logStart     int64  // from the same answer; bounds the shared range
	Agrees       bool   `json:"agrees"`
	Chosen       bool   `json:"chosen"`
	Note         string `json:"note,omitempty"`
}

// ChangeResult is what a failover or recovery did (or, dry, would do) to
// one partition.
type ChangeResult struct {
	Topic      string      `json:"topic"`
	Partition  int32       `json:"partition"`
	Action     string      `json:"action"` // failover, drop-follower, recover, none
	DryRun     bool        `json:"dry_run,omitempty"`
	OldLeader  int32       `json:"old_leader"`
	NewLeader  int32       `json:"new_leader"`
	OldEpoch   int32       `json:"old_epoch"`
	NewEpoch   int32       `json:"new_epoch"`
	OldActive  []int32     `json:"old_active"`
	NewActive  []int32     `json:"new_active"`
	Candidates []Candidate `json:"candidates,omitempty"`
	LostFrom   *int64      `json:"lost_from_offset,omitempty"` // records at or past this offset held only by the old leader are lost
	Truncated  *[2]int64   `json:"truncated,omitempty"`        // recovery: the replica's log was cut from [0] back to [1]
	CopiedTo   int64       `json:"copied_to,omitempty"`
	Note       string      `json:"note,omitempty"` // why a live leader or follower was replaced
	Error      string      `json:"error,omitempty"`
	ErrorName  string      `json:"error_name,omitempty"`
}

// ChangeReport is the JSON body of a Failover or Recover response.
type ChangeReport struct {
	Results []ChangeResult `json:"results"`
}

// HistoryEvent is one entry of the controller's audit trail.
type HistoryEvent struct {
	Time      time.Time `json:"time"`
	Requester string    `json:"requester,omitempty"`
	ChangeResult
}

const (
	aliveTimeout = 1500 * time.Millisecond
	fenceTimeout = 3 * time.Second
)

// topicID is the id of the topic of that name in the controller's
// metadata, for the requests it sends about the topic's partitions.
func (c *controller) topicID(topic string) string {
	if t := c.Metadata().Topic(topic); t != nil {
		return t.ID
	}
	return ""
}

// call makes one RPC to a registered broker.
func (c *controller) call(ctx context.Context, broker int32, api transport.API, req, resp transport.Message) error {
	b, ok := c.Metadata().Broker(broker)
	if !ok {
		return fmt.Errorf("%w: broker %d is not registered", transport.ErrBrokerNotAvailable, broker)
	}
	return c.pool.Call(ctx, b.Addr, api, req, resp)
}

// replicaHealth asks broker for its replica of a partition and reports
// whether it answers at all, and, when it does, why its replica cannot be
// trusted ("" when it can): damaged, behind an active follower, its
// storage failed, offline, or not there. Within one operator request, a
// broker found silent is not asked again: a broker cut off by the network
// costs aliveTimeout once per request, not once per partition (one
// request may name a hundred).
func (c *controller) replicaHealth(ctx context.Context, broker int32, topic string, partition int32) (st *transport.ReplicaStateResponse, answers bool, problem string) {
	if c.opSilent[broker] {
		return nil, false, ""
	}
	ctx, cancel := context.WithTimeout(ctx, aliveTimeout)
	defer cancel()
	st = &transport.ReplicaStateResponse{}
	err := c.call(ctx, broker, transport.APIReplicaState, &transport.ReplicaStateRequest{Topic: topic, TopicID: c.topicID(topic), Partition: partition}, st)
	switch {
	case err == nil:
		return st, true, st.Problem
	case answeredWith(err):
		return nil, true, err.Error()
	}
	if c.opSilent != nil {
		c.opSilent[broker] = true
	}
	return nil, false, ""
}

// answeredWith reports whether err is a broker's own answer about its
// replica (it is there but unusable, or not there), not a failure to
// reach the broker.
func answeredWith(err error) bool {
	for _, e := range []error{transport.ErrStorageFailed, transport.ErrNoSpace, transport.ErrUnknownPartition,
		transport.ErrUnknownTopic, transport.ErrUnknownTopicID, transport.ErrNotReady} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// leaderUsable reports whether a partition's leader answers with a
// healthy replica that is not behind any active follower; when it does not,
// problem says why (empty when the leader does not answer at all). The
// followers are asked first, then the leader: a leader writes before its
// followers do, so a follower read earlier never passes a healthy leader
// read later.
func (c *controller) leaderUsable(ctx context.Context, part metadata.Partition, topic string, partition int32) (problem string, ok bool) {
	followers := c.probe(ctx, topic, partition, part.Active, part.Leader, 0)
	st, answers, problem := c.replicaHealth(ctx, part.Leader, topic, partition)
	switch {
	case !answers:
		return "", false
	case problem != "":
		return problem, false
	}
	for _, f := range followers {
		if f.Reachable && (f.LastEpoch > st.LastEpoch || f.LastEpoch == st.LastEpoch && f.LogEndOffset > st.LogEndOffset) {
			return fmt.Sprintf("it is behind active follower %d (log end %d, last epoch %d; the leader's %d, %d)",
				f.Broker, f.LogEndOffset, f.LastEpoch, st.LogEndOffset, st.LastEpoch), false
		}
	}
	return "", true
}

// beginOp starts an operator change: one at a time, none while the
// controller refuses changes (a failover or a recovery acts on replicas,
// fencing or truncating them, before it records anything), and a broker
// found silent is asked once per request (see replicaHealth). The caller
// runs the returned end.
func (c *controller) beginOp() (end func(), err error) {
	c.opMu.Lock()
	if err := c.refusal(); err != nil {
		c.opMu.Unlock()
		return nil, err
	}
	c.opSilent = map[int32]bool{}
	return func() {
		c.opSilent = nil
		c.opMu.Unlock()
	}, nil
}

// opTarget is one partition an operator change acts on.
type opTarget struct {
	topic     string
	partition int32
	broker    int32 // the replica to take out of the active set
	drop      bool  // drop a lost follower rather than replace the leader
}

// brokerTargets are the partitions broker leads (to fail over) or follows
// (to drop).
func brokerTargets(meta *metadata.Cluster, broker int32) []opTarget {
	var out []opTarget
	for _, t := range meta.Topics {
		for p, part := range t.Partitions {
			switch {
			case part.Leader == broker:
				out = append(out, opTarget{t.Name, int32(p), broker, false})
			case slices.Contains(part.Active, broker):
				out = append(out, opTarget{t.Name, int32(p), broker, true})
			}
		}
	}
	return out
}

// moveOff takes each target's broker out of its partition's active set,
// failing the partition over or dropping the follower, into rep; it
// returns the first error.
func (c *controller) moveOff(ctx context.Context, req FailoverRequest, targets []opTarget, rep *ChangeReport) error {
	var firstErr error
	for _, tg := range targets {
		var res ChangeResult
		var err error
		if tg.drop {
			res, err = c.dropFollower(ctx, tg.topic, tg.partition, tg.broker, req.DryRun)
		} else {
			res, err = c.failoverPartition(ctx, tg.topic, tg.partition, req.DryRun, 0)
		}
		c.reportChange(rep, req, res, err)
		if firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

// failover runs a failover request over the partitions it names.
func (c *controller) failover(ctx context.Context, req FailoverRequest) (ChangeReport, error) {
	end, err := c.beginOp()
	if err != nil {
		return ChangeReport{}, err
	}
	defer end()
	meta := c.Metadata()
	var targets []opTarget
	switch {
	case req.Broker > 0:
		if _, ok := meta.Broker(req.Broker); !ok {
			return ChangeReport{}, unknownBroker(meta, req.Broker)
		}
		targets = brokerTargets(meta, req.Broker)
	case req.Topic != "":
		t := meta.Topic(req.Topic)
		if t == nil {
			return ChangeReport{}, fmt.Errorf("%w: %q", transport.ErrUnknownTopic, req.Topic)
		}
		if req.Partition < 0 || int(req.Partition) >= len(t.Partitions) {
			return ChangeReport{}, fmt.Errorf("%w: topic %q has no partition %d", transport.ErrUnknownPartition, req.Topic, req.Partition)
		}
		// With a broker too: that broker's replica of the partition goes
		// out of the active set, failed over if it leads, dropped if it
		// follows.
		part := t.Partitions[req.Partition]
		b := req.BrokerOfPartition
		if b > 0 && !slices.Contains(part.Active, b) {
			return ChangeReport{}, fmt.Errorf("%w: broker %d is not in the active set %v of %s/%d", transport.ErrInvalidRequest, b, part.Active, req.Topic, req.Partition)
		}
		targets = append(targets, opTarget{req.Topic, req.Partition, b, b > 0 && part.Leader != b})
	default:
		return ChangeReport{}, fmt.Errorf("%w: name --topic and --partition, or --broker", transport.ErrInvalidRequest)
	}
	rep := ChangeReport{Results: []ChangeResult{}}
	firstErr := c.moveOff(ctx, req, targets, &rep)
	// One named partition: its error is the answer, with its code. A dry run
	// and a whole broker answer with every result, errors inside, so the
	// operator sees the candidates and the other partitions.
	if req.Topic != "" && !req.DryRun && firstErr != nil {
		return rep, firstErr
	}
	return rep, nil
}

// unknownBroker is the error for a request that names a broker id the
// cluster does not have.
func unknownBroker(meta *metadata.Cluster, id int32) error {
	return fmt.Errorf("%w: broker %d is not registered; the registered brokers are %v", transport.ErrUnknownBroker, id, meta.BrokerIDs())
}

func partitionOf(meta *metadata.Cluster, topic string, partition int32) (metadata.Partition, error) {
	t := meta.Topic(topic)
	if t == nil || int(partition) >= len(t.Partitions) || partition < 0 {
		return metadata.Partition{}, fmt.Errorf("%w: %s/%d", transport.ErrUnknownPartition, topic, partition)
	}
	return t.Partitions[partition], nil
}

// failoverPartition replaces the leader of a partition whose leader does
// not answer, following docs/design.md section 7. With to > 0 it moves the
// leadership of a healthy partition to broker to instead (elect-leaders):
// the old leader is fenced with the new epoch like every other active
// replica and stays a candidate follower; see docs/failover.md.
func (c *controller) failoverPartition(ctx context.Context, topic string, partition int32, dry bool, to int32) (ChangeResult, error) {
	part, err := partitionOf(c.Metadata(), topic, partition)
	if err != nil {
		return ChangeResult{}, err
	}
	transfer := to > 0
	res := ChangeResult{Topic: topic, Partition: partition, Action: "failover", DryRun: dry,
		OldLeader: part.Leader, OldEpoch: part.LeaderEpoch, OldActive: slices.Clone(part.Active),
		NewLeader: part.Leader, NewEpoch: part.LeaderEpoch, NewActive: slices.Clone(part.Active)}
	if transfer {
		res.Action = ActionElectLeader
		if !slices.Contains(part.Active, to) {
			return res, fmt.Errorf("%w: broker %d is not in the active set %v of %s/%d; recover it first", transport.ErrInvalidRequest, to, part.Active, topic, partition)
		}
	}
	// 1. Refuse while the leader answers and its replica is healthy (a
	// failover is for a leader that is dead, or whose replica cannot
	// lead: damaged, failed, offline, or behind its followers).
	if !transfer {
		if problem, ok := c.leaderUsable(ctx, part, topic, partition); ok {
			return res, fmt.Errorf("%w: partition %s/%d is led by broker %d, which answers and whose replica is healthy", transport.ErrLeaderStillAvailable, topic, partition, part.Leader)
		} else if problem != "" {
			res.Note = "the leader answers, but its replica cannot lead: " + problem
		}
	}
	// 2. The new epoch is above any handed out; persist it before using it.
	newEpoch := max(part.LeaderEpoch, part.ReservedEpoch) + 1
	if !dry {
		err := c.reserve(ctx, fmt.Sprintf("reserve epoch %d for failover of %s/%d", newEpoch, topic, partition), func(m *metadata.Cluster) error {
			p := &m.Topic(topic).Partitions[partition]
			p.ReservedEpoch = max(p.ReservedEpoch, newEpoch)
			return nil
		})
		if err != nil {
			return res, err
		}
	}
	// 3-4. Fence every reachable active follower with it and read its state.
	fenceEpoch := newEpoch
	if dry {
		fenceEpoch = 0 // observe only
	}
	// A transfer fences the old leader too: it stops taking writes (they
	// fail as NotLeader, provably not appended) and its log end is final.
	skip := part.Leader
	if transfer {
		skip = 0
	}
	cands := c.probe(ctx, topic, partition, part.Active, skip, fenceEpoch)
	res.Candidates = cands
	if !dry {
		crashpoint("failover-after-fence")
	}
	var chosen *Candidate
	for i := range cands {
		cd := &cands[i]
		if !cd.Reachable {
			continue
		}
		if transfer {
			if cd.Broker == to {
				chosen = cd
			}
			continue
		}
		if chosen == nil || cd.LastEpoch > chosen.LastEpoch ||
			cd.LastEpoch == chosen.LastEpoch && (cd.LogEndOffset > chosen.LogEndOffset ||
				cd.LogEndOffset == chosen.LogEndOffset && cd.Broker < chosen.Broker) {
			chosen = cd
		}
	}
	switch {
	case chosen == nil && transfer:
		return res, fmt.Errorf("%w: broker %d, the new leader named for %s/%d, does not answer", transport.ErrNoEligibleReplica, to, topic, partition)
	case chosen == nil:
		return res, fmt.Errorf("%w: no active follower of %s/%d answers (active %v, leader %d down)", transport.ErrNoEligibleReplica, topic, partition, part.Active, part.Leader)
	}
	chosen.Chosen = true
	// 5. Every candidate must agree with the chosen one on every shared
	// offset, by content.
	var active []int32
	var disagree []string
	for i := range cands {
		cd := &cands[i]
		if !cd.Reachable {
			continue
		}
		if cd == chosen {
			cd.Agrees = true
			active = append(active, cd.Broker)
			continue
		}
		if transfer && cd.LogEndOffset > chosen.LogEndOffset {
			// It holds records the new leader lacks: a write in flight when
			// the fence came, which no active replica's absence let be
			// acknowledged. It leaves the active set and is recovered.
			cd.Note = fmt.Sprintf("holds offsets [%d, %d) the new leader lacks (never acknowledged): left out, then recovered", chosen.LogEndOffset, cd.LogEndOffset)
			continue
		}
		same, note := c.agree(ctx, topic, partition, chosen, cd)
		cd.Agrees, cd.Note = same, note
		if !same {
			disagree = append(disagree, fmt.Sprintf("broker %d (%s)", cd.Broker, note))
			continue
		}
		active = append(active, cd.Broker)
	}
	if len(disagree) > 0 {
		return res, fmt.Errorf("%w: candidates for %s/%d disagree with broker %d: %v; nothing was promoted", transport.ErrReplicaDivergence, topic, partition, chosen.Broker, disagree)
	}
	slices.Sort(active)
	lost := chosen.LogEndOffset
	res.LostFrom = &lost
	res.NewLeader, res.NewEpoch, res.NewActive = chosen.Broker, newEpoch, active
	if dry {
		return res, nil
	}
	// 6. Persist the new leader, epoch and active set, then tell the
	// replicas (change pushes the metadata).
	err = c.change(ctx, fmt.Sprintf("%s %s/%d: leader %d -> %d, epoch %d", res.Action, topic, partition, part.Leader, chosen.Broker, newEpoch), func(m *metadata.Cluster) error {
		p := &m.Topic(topic).Partitions[partition]
		if p.Leader != part.Leader || p.LeaderEpoch != part.LeaderEpoch {
			return fmt.Errorf("%w: partition %s/%d changed during the failover", transport.ErrInvalidRequest, topic, partition)
		}
		p.Leader, p.LeaderEpoch, p.Active = chosen.Broker, newEpoch, active
		p.ReservedEpoch = max(p.ReservedEpoch, newEpoch)
		return nil
	})
	return res, err
}

// ActionElectLeader is the action of a leadership move by elect-leaders.
const ActionElectLeader = "elect-leader"

// electLeaders moves the leadership of every partition (of req.Topic, or
// of all topics) whose leader is not its preferred replica, the first of
// its replicas, back to it, when that replica is active. A replica left
// out of the active set by a move (it held an unacknowledged write) is
// recovered in the same request; its result follows the move's.
func (c *controller) electLeaders(ctx context.Context, req FailoverRequest) (ChangeReport, error) {
	end, err := c.beginOp()
	if err != nil {
		return ChangeReport{}, err
	}
	defer end()
	meta := c.Metadata()
	if req.Topic != "" && meta.Topic(req.Topic) == nil {
		return ChangeReport{}, fmt.Errorf("%w: %q", transport.ErrUnknownTopic, req.Topic)
	}
	rep := ChangeReport{Results: []ChangeResult{}}
	for _, t := range meta.Topics {
		if req.Topic != "" && t.Name != req.Topic {
			continue
		}
		for p, part := range t.Partitions {
			preferred := part.Replicas[0]
			if part.Leader == preferred {
				continue
			}
			res, err := c.failoverPartition(ctx, t.Name, int32(p), req.DryRun, preferred)
			c.reportChange(&rep, req, res, err)
			if err != nil || req.DryRun {
				continue
			}
			for _, b := range res.OldActive {
				if !slices.Contains(res.NewActive, b) {
					rres, err := c.recoverReplica(ctx, t.Name, int32(p), b)
					c.reportChange(&rep, req, rres, err)
				}
			}
		}
	}
	return rep, nil
}

// reportChange adds one partition's result to a report of several,
// recording it in the audit trail when it changed something.
func (c *controller) reportChange(rep *ChangeReport, req FailoverRequest, res ChangeResult, err error) {
	if err != nil {
		res.Error = err.Error()
		var te *transport.Error
		if errors.As(wireError(err), &te) {
			res.ErrorName = te.Code.String()
		}
	} else if !req.DryRun {
		c.record(req.Requester, res)
	}
	rep.Results = append(rep.Results, res)
}

// probe asks every active replica but the leader for its state, fencing it
// at epoch when epoch > 0, all at once.
func (c *controller) probe(ctx context.Context, topic string, partition int32, active []int32, leader, epoch int32) []Candidate {
	var out []Candidate
	var mu sync.Mutex
	var wg sync.WaitGroup
	id := c.topicID(topic)
	for _, b := range active {
		if b == leader {
			continue
		}
		wg.Add(1)
		go func(b int32) {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, fenceTimeout)
			defer cancel()
			var st transport.ReplicaStateResponse
			err := c.call(cctx, b, transport.APIReplicaState, &transport.ReplicaStateRequest{Topic: topic, TopicID: id, Partition: partition, LeaderEpoch: epoch}, &st)
			cd := Candidate{Broker: b, LogEndOffset: -1, LastEpoch: -1}
			if err != nil {
				cd.Note = err.Error()
			} else {
				cd.Reachable, cd.LastEpoch, cd.LogEndOffset, cd.logStart = true, st.LastEpoch, st.LogEndOffset, st.LogStartOffset
			}
			mu.Lock()
			out = append(out, cd)
			mu.Unlock()
		}(b)
	}
	wg.Wait()
	sort.Slice(out, func(i, j int) bool { return out[i].Broker < out[j].Broker })
	return out
}

// agree compares two replicas over their shared offsets by digest.
func (c *controller) agree(ctx context.Context, topic string, partition int32, a, b *Candidate) (bool, string) {
	to := min(a.LogEndOffset, b.LogEndOffset)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var da, db transport.ReplicaDigestResponse
	// The shared range starts at the later log start of the two, as the
	// probe read them.
	req := &transport.ReplicaDigestRequest{Topic: topic, TopicID: c.topicID(topic), Partition: partition, From: max(a.logStart, b.logStart), To: to}
	if req.From >= to {
		return true, "no shared offsets"
	}
	if err := c.call(ctx, a.Broker, transport.APIReplicaDigest, req, &da); err != nil {
		return false, fmt.Sprintf("digest of [%d, %d) on broker %d: %v", req.From, to, a.Broker, err)
	}
	if err := c.call(ctx, b.Broker, transport.APIReplicaDigest, req, &db); err != nil {
		return false, fmt.Sprintf("digest of [%d, %d) on broker %d: %v", req.From, to, b.Broker, err)
	}
	if string(da.Digest) != string(db.Digest) {
		return false, fmt.Sprintf("offsets [%d, %d) differ", req.From, to)
	}
	return true, fmt.Sprintf("offsets [%d, %d) identical", req.From, to)
}

// dropFollower takes a lost follower out of a partition's active set, so
// writes go on with reduced redundancy.
func (c *controller) dropFollower(ctx context.Context, topic string, partition, broker int32, dry bool) (ChangeResult, error) {
	part, err := partitionOf(c.Metadata(), topic, partition)
	if err != nil {
		return ChangeResult{}, err
	}
	active := slices.DeleteFunc(slices.Clone(part.Active), func(id int32) bool { return id == broker })
	res := ChangeResult{Topic: topic, Partition: partition, Action: "drop-follower", DryRun: dry,
		OldLeader: part.Leader, NewLeader: part.Leader, OldEpoch: part.LeaderEpoch, NewEpoch: part.LeaderEpoch,
		OldActive: slices.Clone(part.Active), NewActive: active}
	if _, answers, problem := c.replicaHealth(ctx, broker, topic, partition); answers && problem == "" {
		return res, fmt.Errorf("%w: broker %d, a follower of %s/%d, answers and its replica is healthy; nothing to drop", transport.ErrLeaderStillAvailable, broker, topic, partition)
	} else if problem != "" {
		res.Note = "the follower answers, but its replica cannot serve: " + problem
	}
	if dry {
		return res, nil
	}
	err = c.change(ctx, fmt.Sprintf("drop follower %d of %s/%d", broker, topic, partition), func(m *metadata.Cluster) error {
		p := &m.Topic(topic).Partitions[partition]
		p.Active = slices.DeleteFunc(p.Active, func(id int32) bool { return id == broker })
		return nil
	})
	return res, err
}

// recoverReplicas brings returning replicas back: for each, the leader
// cuts it to the common prefix, fills and verifies it; then the controller
// adds it to the active set.
func (c *controller) recoverReplicas(ctx context.Context, req FailoverRequest) (ChangeReport, error) {
	end, err := c.beginOp()
	if err != nil {
		return ChangeReport{}, err
	}
	defer end()
	req.DryRun = false // a recovery has no dry run: what it does is recorded
	meta := c.Metadata()
	type target struct {
		topic     string
		partition int32
	}
	var targets []target
	if _, ok := meta.Broker(req.Broker); !ok {
		return ChangeReport{}, unknownBroker(meta, req.Broker)
	}
	if req.Topic != "" {
		if _, err := partitionOf(meta, req.Topic, req.Partition); err != nil {
			return ChangeReport{}, err
		}
		targets = append(targets, target{req.Topic, req.Partition})
	} else {
		for _, t := range meta.Topics {
			for p, part := range t.Partitions {
				if slices.Contains(part.Replicas, req.Broker) && !slices.Contains(part.Active, req.Broker) {
					targets = append(targets, target{t.Name, int32(p)})
				}
			}
		}
	}
	var rep ChangeReport
	var firstErr error
	for _, tg := range targets {
		res, err := c.recoverReplica(ctx, tg.topic, tg.partition, req.Broker)
		c.reportChange(&rep, req, res, err)
		if firstErr == nil {
			firstErr = err
		}
	}
	if rep.Results == nil {
		rep.Results = []ChangeResult{}
	}
	if req.Topic != "" && firstErr != nil {
		return rep, firstErr
	}
	return rep, nil
}

func (c *controller) recoverReplica(ctx context.Context, topic string, partition, broker int32) (ChangeResult, error) {
	part, err := partitionOf(c.Metadata(), topic, partition)
	if err != nil {
		return ChangeResult{}, err
	}
	res := ChangeResult{Topic: topic, Partition: partition, Action: "recover",
		OldLeader: part.Leader, NewLeader: part.Leader, OldEpoch: part.LeaderEpoch, NewEpoch: part.LeaderEpoch,
		OldActive: slices.Clone(part.Active), NewActive: slices.Clone(part.Active)}
	switch {
	case !slices.Contains(part.Replicas, broker):
		return res, fmt.Errorf("%w: broker %d holds no replica of %s/%d", transport.ErrInvalidRequest, broker, topic, partition)
	case broker == part.Leader:
		return res, fmt.Errorf("%w: broker %d leads %s/%d; the leader is never recovered", transport.ErrInvalidRequest, broker, topic, partition)
	case slices.Contains(part.Active, broker):
		return res, fmt.Errorf("%w: broker %d is already active for %s/%d; use gostream-ctl catch-up", transport.ErrInvalidRequest, broker, topic, partition)
	}
	if err := c.awaitRegistration(ctx, broker); err != nil {
		return res, err
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var rr transport.RecoverReplicaResponse
	if err := c.call(rctx, part.Leader, transport.APIRecoverReplica, &transport.CatchUpRequest{Topic: topic, TopicID: c.topicID(topic), Partition: partition, Broker: broker}, &rr); err != nil {
		return res, err
	}
	if rr.CommonPrefix < rr.PreviousEnd {
		res.Truncated = &[2]int64{rr.PreviousEnd, rr.CommonPrefix}
	}
	res.CopiedTo = rr.CopiedTo
	active := append(slices.Clone(part.Active), broker)
	slices.Sort(active)
	res.NewActive = active
	err = c.change(ctx, fmt.Sprintf("recover broker %d into %s/%d", broker, topic, partition), func(m *metadata.Cluster) error {
		p := &m.Topic(topic).Partitions[partition]
		if p.Leader != part.Leader || p.LeaderEpoch != part.LeaderEpoch {
			return fmt.Errorf("%w: partition %s/%d changed during the recovery", transport.ErrInvalidRequest, topic, partition)
		}
		if !slices.Contains(p.Active, broker) {
			p.Active = append(p.Active, broker)
			slices.Sort(p.Active)
		}
		return nil
	})
	return res, err
}

// registrationWait is how long a recovery waits for a replaced broker's
// new node to register: "start the new node, then recover" must work when
// the commands follow each other at once.
const registrationWait = 15 * time.Second

// awaitRegistration waits until broker is bound to a storage root again
// after broker replace, that is until its new node has registered and
// holds the metadata.
func (c *controller) awaitRegistration(ctx context.Context, broker int32) error {
	deadline := time.Now().Add(registrationWait)
	for {
		if b, ok := c.Metadata().Broker(broker); !ok || b.RootID != "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: broker %d was replaced and no new node has registered with its id yet: start it (an empty --data-dir, --id %d), then run recover again", transport.ErrNotReady, broker, broker)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// record appends an event to the audit trail. The trail is kept beside
// the metadata; a failure to write it is logged, not fatal to a change
// that is already persisted.
func (c *controller) record(requester string, res ChangeResult) {
	ev := HistoryEvent{Time: time.Now().UTC(), Requester: requester, ChangeResult: res}
	if err := c.history.append(ev); err != nil {
		c.logger.Error("write audit trail", "err", err)
	}
}

func jsonReply(v any, err error) (transport.Message, error) {
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &transport.JSONMessage{Data: data}, nil
}

// ActionReplaceBroker is the audit trail's action for a broker replaced.
const ActionReplaceBroker = "replace-broker"

// replaceBroker accepts a new storage root for a broker whose disk is lost
// (docs/failover.md, "Replacing a broker"): refused while the broker
// answers as itself, and when a partition it leads has no other active
// replica (nothing to rebuild it from). Every partition it leads fails
// over, it is dropped from every active set, and only once it is active
// nowhere is its root unbound, so that the next registration of its id,
// from any root, is accepted. Its replicas come back through recover,
// filled from their leaders: an empty replica never leads.
func (c *controller) replaceBroker(ctx context.Context, req FailoverRequest) (ChangeReport, error) {
	end, err := c.beginOp()
	if err != nil {
		return ChangeReport{}, err
	}
	defer end()
	meta := c.Metadata()
	b, ok := meta.Broker(req.Broker)
	if !ok {
		return ChangeReport{}, unknownBroker(meta, req.Broker)
	}
	if b.ID == meta.ControllerID {
		return ChangeReport{}, fmt.Errorf("%w: broker %d runs the controller; a controller with a new disk starts a new cluster: restore its metadata (docs/operations.md) instead", transport.ErrInvalidRequest, b.ID)
	}
	if c.answersAs(ctx, b) {
		return ChangeReport{}, fmt.Errorf("%w: broker %d answers at %s with its storage root %s: it is not lost. Stop it first; replace is for a broker whose disk is gone", transport.ErrBrokerAlive, b.ID, b.Addr, b.RootID)
	}
	var alone []string
	for _, t := range meta.Topics {
		for p, part := range t.Partitions {
			if part.Leader == b.ID && len(part.Active) == 1 {
				alone = append(alone, fmt.Sprintf("%s/%d", t.Name, p))
			}
		}
	}
	if len(alone) > 0 {
		return ChangeReport{}, fmt.Errorf("%w: broker %d holds the only active replica of %v: its records would be lost with the disk, and nothing could rebuild them. "+
			"Bring the disk back, or delete those topics, then run replace again", transport.ErrNoEligibleReplica, b.ID, alone)
	}
	rep := ChangeReport{Results: []ChangeResult{}}
	c.moveOff(ctx, req, brokerTargets(meta, b.ID), &rep)
	// Not a partition's change: OldLeader and NewLeader name the broker.
	res := ChangeResult{Action: ActionReplaceBroker, Partition: -1, OldLeader: b.ID, NewLeader: b.ID}
	for _, r := range rep.Results {
		if r.Error != "" {
			err := fmt.Errorf("%w: broker %d is still active in %s/%d (%s); it keeps its storage root until every partition is moved: run replace again", transport.ErrNoEligibleReplica, b.ID, r.Topic, r.Partition, r.Error)
			c.reportChange(&rep, req, res, err)
			return rep, nil
		}
	}
	if req.DryRun {
		rep.Results = append(rep.Results, res)
		return rep, nil
	}
	err = c.change(ctx, fmt.Sprintf("replace broker %d: unbind storage root %s", b.ID, b.RootID), func(m *metadata.Cluster) error {
		for _, t := range m.Topics {
			for p, part := range t.Partitions {
				if slices.Contains(part.Active, b.ID) {
					return fmt.Errorf("%w: broker %d became active in %s/%d meanwhile", transport.ErrInvalidRequest, b.ID, t.Name, p)
				}
			}
		}
		nb, _ := m.Broker(b.ID)
		nb.RootID = ""
		m.PutBroker(nb)
		return nil
	})
	c.reportChange(&rep, req, res, err)
	if err == nil {
		c.logger.Warn("broker replaced: its id is free for a new storage root; rebuild its replicas with gostream-ctl recover", "peer", b.ID, "old_root", b.RootID)
	}
	return rep, nil
}

func (h *rpcHandler) replaceBroker(req *transport.Request) transport.Reply {
	return h.operatorChange(req, func(ctx context.Context, c *controller, fr FailoverRequest) (ChangeReport, error) {
		if fr.Broker <= 0 {
			return ChangeReport{}, fmt.Errorf("%w: name the broker to replace", transport.ErrInvalidRequest)
		}
		return c.replaceBroker(ctx, fr)
	})
}

func (h *rpcHandler) failover(req *transport.Request) transport.Reply {
	return h.operatorChange(req, func(ctx context.Context, c *controller, fr FailoverRequest) (ChangeReport, error) {
		return c.failover(ctx, fr)
	})
}

func (h *rpcHandler) electLeaders(req *transport.Request) transport.Reply {
	return h.operatorChange(req, func(ctx context.Context, c *controller, fr FailoverRequest) (ChangeReport, error) {
		return c.electLeaders(ctx, fr)
	})
}

func (h *rpcHandler) recover(req *transport.Request) transport.Reply {
	return h.operatorChange(req, func(ctx context.Context, c *controller, fr FailoverRequest) (ChangeReport, error) {
		if fr.Broker <= 0 {
			return ChangeReport{}, fmt.Errorf("%w: name the broker to recover", transport.ErrInvalidRequest)
		}
		return c.recoverReplicas(ctx, fr)
	})
}

func (h *rpcHandler) operatorChange(req *transport.Request, fn func(context.Context, *controller, FailoverRequest) (ChangeReport, error)) transport.Reply {
	var m transport.JSONMessage
	if err := decode(req, &m); err != nil {
		return transport.Immediate(nil, err)
	}
	var fr FailoverRequest
	if err := json.Unmarshal(m.Data, &fr); err != nil {
		return transport.Immediate(nil, fmt.Errorf("%w: %v", transport.ErrInvalidRequest, err))
	}
	c, err := h.controller()
	if err != nil {
		return transport.Immediate(nil, err)
	}
	if fr.Requester == "" {
		fr.Requester = req.RemoteAddr
	}
	return func(ctx context.Context) (transport.Message, error) {
		rep, err := fn(ctx, c, fr)
		if err != nil {
			return nil, err // one named partition failed: the error, with its code
		}
		return jsonReply(rep, nil)
	}
}

func (h *rpcHandler) history(req *transport.Request) transport.Reply {
	c, err := h.controller()
	if err != nil {
		return transport.Immediate(nil, err)
	}
	return func(context.Context) (transport.Message, error) {
		evs, err := c.history.read()
		if err != nil {
			return nil, err
		}
		return jsonReply(map[string]any{"events": evs}, nil)
	}
}
