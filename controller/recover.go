package controller

import (
	"context"
	"fmt"
	"slices"
	"time"

	"gostream/metadata"
	"gostream/transport"
)

// recoverTimeout bounds one replica's recovery by its leader: it copies
// what the replica misses, which takes as long as the copy.
const recoverTimeout = 5 * time.Minute

// Recover brings returning replicas back: for each, its leader cuts it to
// the common prefix, fills and verifies it; then the controller adds every
// replica recovered to its active set, in one change. The leaders work on
// the replicas at once (at most opParallel at a time).
func (c *Controller) Recover(ctx context.Context, req transport.RecoverRequest) (transport.ChangeReport, error) {
	end, err := c.beginOp()
	if err != nil {
		return transport.ChangeReport{}, err
	}
	defer end()
	meta := c.Metadata()
	if _, ok := meta.Broker(req.Broker); !ok {
		return transport.ChangeReport{}, unknownBroker(meta, req.Broker)
	}
	var steps []*step
	if req.Topic != "" {
		if _, err := partitionOf(meta, req.Topic, req.Partition); err != nil {
			return transport.ChangeReport{}, err
		}
		steps = append(steps, recoverStep(meta, req.Topic, req.Partition, req.Broker))
	} else {
		for _, t := range meta.Topics {
			for p, part := range t.Partitions {
				// A replica a move is adding is the move's to copy, at its
				// throttle (reassign.go), not this command's.
				if slices.Contains(part.Replicas, req.Broker) && !slices.Contains(part.Active, req.Broker) && !slices.Contains(part.Adding(), req.Broker) {
					steps = append(steps, recoverStep(meta, t.Name, int32(p), req.Broker))
				}
			}
		}
	}
	c.recoverSteps(ctx, req.Requester, steps)
	rep := c.report(req.Requester, false, steps)
	if req.Topic != "" && steps[0].err != nil {
		return rep, steps[0].err
	}
	return rep, nil
}

// recoverStep is the recovery of broker's replica of a partition, checked
// against the metadata given.
func recoverStep(meta *metadata.Cluster, topic string, partition, broker int32) *step {
	s := newStep(meta, topic, partition, transport.ActionRecover)
	s.broker = broker
	switch {
	case s.err != nil:
	case !slices.Contains(s.part.Replicas, broker):
		s.err = fmt.Errorf("%w: broker %d holds no replica of %s/%d", ErrInvalidRequest, broker, topic, partition)
	case broker == s.part.Leader:
		s.err = fmt.Errorf("%w: broker %d leads %s/%d; the leader is never recovered", ErrInvalidRequest, broker, topic, partition)
	case slices.Contains(s.part.Active, broker):
		s.err = fmt.Errorf("%w: broker %d is already active for %s/%d; use gostream-ctl catch-up", ErrInvalidRequest, broker, topic, partition)
	}
	return s
}

// recoverSteps has each replica recovered by its leader, at once, and
// then puts every one recovered back in its active set, in one change.
func (c *Controller) recoverSteps(ctx context.Context, requester string, steps []*step) {
	waited := map[int32]error{}
	for _, s := range steps {
		if s.err != nil {
			continue
		}
		err, ok := waited[s.broker]
		if !ok {
			err = c.awaitRegistration(ctx, s.broker)
			waited[s.broker] = err
		}
		s.err = err
	}
	each(steps, func(s *step) { c.recoverOne(ctx, s) })
	c.commitSteps(ctx, "recover", requester, steps)
}

// recoverOne asks the partition's leader to recover the step's replica
// and decides the step's change: the replica joins the active set.
func (c *Controller) recoverOne(ctx context.Context, s *step) {
	rctx, cancel := context.WithTimeout(ctx, recoverTimeout)
	defer cancel()
	c.recoverWith(rctx, s, &transport.CatchUpRequest{Topic: s.topic, TopicID: s.topicID, Partition: s.partition, Broker: s.broker})
}

// recoverWith is recoverOne's call and decision, with req (a move's
// carries its throttle) and no bound but ctx's.
func (c *Controller) recoverWith(ctx context.Context, s *step, req *transport.CatchUpRequest) {
	var rr transport.RecoverReplicaResponse
	if err := c.call(ctx, s.part.Leader, transport.APIRecoverReplica, req, &rr); err != nil {
		s.err = err
		return
	}
	if rr.CommonPrefix < rr.PreviousEnd {
		s.res.Truncated = &[2]int64{rr.PreviousEnd, rr.CommonPrefix}
	}
	s.res.CopiedTo = rr.CopiedTo
	active := append(slices.Clone(s.part.Active), s.broker)
	slices.Sort(active)
	s.res.NewActive = active
	// The leader counts the replica in every acknowledgement for
	// transport.RecoveredReplicaHold from now, so that it lacks none once
	// it is active; made active later, it could.
	commitBy := time.Now().Add(transport.RecoveredReplicaHold / 2)
	s.apply = func(p *metadata.Partition) error {
		if err := s.unchanged(p, "recovery"); err != nil {
			return err
		}
		if time.Now().After(commitBy) {
			return fmt.Errorf("%w: the recovery of broker %d for %s/%d was not committed within %s of its copy; run recover again",
				ErrNotReady, s.broker, s.topic, s.partition, transport.RecoveredReplicaHold/2)
		}
		if !slices.Contains(p.Active, s.broker) {
			p.Active = append(p.Active, s.broker)
			slices.Sort(p.Active)
		}
		return nil
	}
}

// registrationWait is how long a recovery waits for a replaced broker's
// new node to register: "start the new node, then recover" must work when
// the commands follow each other at once.
const registrationWait = 15 * time.Second

// awaitRegistration waits until broker is bound to a storage root again
// after broker replace, that is until its new node has registered and
// holds the metadata.
func (c *Controller) awaitRegistration(ctx context.Context, broker int32) error {
	deadline := time.Now().Add(registrationWait)
	for {
		if b, ok := c.Metadata().Broker(broker); !ok || b.RootID != "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: broker %d was replaced and no new node has registered with its id yet: start it (an empty --data-dir, --id %d), then run recover again", ErrNotReady, broker, broker)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
