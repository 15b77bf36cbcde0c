package controller

import (
	"context"
	"fmt"
	"slices"

	"gostream/metadata"
	"gostream/transport"
)

// ReplaceBroker accepts a new storage root for a broker whose disk is lost
// (docs/failover.md, "Replacing a broker"): refused while the broker
// answers as itself, and when a partition it leads has no other active
// replica (nothing to rebuild it from). Every partition it leads fails
// over, it is dropped from every active set, and only once it is active
// nowhere is its root unbound, so that the next registration of its id,
// from any root, is accepted. Its replicas come back through recover,
// filled from their leaders: an empty replica never leads.
func (c *Controller) ReplaceBroker(ctx context.Context, req transport.FailoverRequest) (transport.ChangeReport, error) {
	if req.Broker <= 0 {
		return transport.ChangeReport{}, fmt.Errorf("%w: name the broker to replace", ErrInvalidRequest)
	}
	end, err := c.beginOp()
	if err != nil {
		return transport.ChangeReport{}, err
	}
	defer end()
	meta := c.Metadata()
	b, ok := meta.Broker(req.Broker)
	if !ok {
		return transport.ChangeReport{}, unknownBroker(meta, req.Broker)
	}
	if b.ID == meta.ControllerID {
		return transport.ChangeReport{}, fmt.Errorf("%w: broker %d runs the controller; a controller with a new disk starts a new cluster: restore its metadata (docs/operations.md) instead", ErrInvalidRequest, b.ID)
	}
	if c.answersAs(ctx, b) {
		return transport.ChangeReport{}, fmt.Errorf("%w: broker %d answers at %s with its storage root %s: it is not lost. Stop it first; replace is for a broker whose disk is gone", ErrBrokerAlive, b.ID, b.Addr, b.RootID)
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
		return transport.ChangeReport{}, fmt.Errorf("%w: broker %d holds the only active replica of %v: its records would be lost with the disk, and nothing could rebuild them. "+
			"Bring the disk back, or delete those topics, then run replace again", ErrNoEligibleReplica, b.ID, alone)
	}
	steps := brokerSteps(meta, b.ID)
	c.moveOff(ctx, req.Requester, req.DryRun, steps)
	rep := c.report(req.Requester, req.DryRun, steps)
	// Not a partition's change: OldLeader and NewLeader name the broker.
	res := transport.ChangeResult{Action: transport.ActionReplaceBroker, Partition: -1, OldLeader: b.ID, NewLeader: b.ID}
	for _, s := range steps {
		if s.err != nil {
			err := fmt.Errorf("%w: broker %d is still active in %s/%d (%s); it keeps its storage root until every partition is moved: run replace again", ErrNoEligibleReplica, b.ID, s.topic, s.partition, s.err)
			rep.Results = append(rep.Results, c.result(res, err))
			return rep, nil
		}
	}
	if req.DryRun {
		rep.Results = append(rep.Results, res)
		return rep, nil
	}
	err = c.changeAudited(ctx, fmt.Sprintf("replace broker %d: unbind storage root %s", b.ID, b.RootID), req.Requester, func(m *metadata.Cluster) ([]transport.ChangeResult, error) {
		for _, t := range m.Topics {
			for p, part := range t.Partitions {
				if slices.Contains(part.Active, b.ID) {
					return nil, fmt.Errorf("%w: broker %d became active in %s/%d meanwhile", ErrInvalidRequest, b.ID, t.Name, p)
				}
			}
		}
		nb, _ := m.Broker(b.ID)
		nb.RootID = ""
		m.PutBroker(nb)
		return []transport.ChangeResult{res}, nil
	})
	// Recorded with the change when it was made.
	rep.Results = append(rep.Results, c.result(res, err))
	if err == nil {
		c.logger.Warn("broker replaced: its id is free for a new storage root; rebuild its replicas with gostream-ctl recover", "peer", b.ID, "old_root", b.RootID)
	}
	return rep, nil
}
