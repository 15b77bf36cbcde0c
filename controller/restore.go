package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"gostream/metadata"
	"gostream/transport"
)

// The controller's guard against metadata that is older than the
// cluster's (a backup put back, a file restored from a snapshot) or gone,
// and the operator's way out of it: docs/operations.md, "Backing up and
// restoring the controller's metadata".
//
// Every broker keeps the newest metadata it was given and says which epoch
// it holds: in its registration, in its metadata polls, and by refusing a
// push older than what it holds. A controller that learns of an epoch
// above its own refuses every change from then on (StaleMetadata), since
// anything it did would be decided on facts the cluster has moved past,
// and its metadata would not even reach brokers that hold newer. At start,
// before it applies its metadata to its own broker, it asks every broker
// its metadata names. Only RestoreMetadata, run by the operator, lifts
// the refusal.

// epochProbeTimeout bounds asking one broker which metadata it holds.
const epochProbeTimeout = 1500 * time.Millisecond

// Refusal is why the controller makes no change, or nil.
func (c *Controller) Refusal() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.inactive {
		return c.notActive()
	}
	return c.mu.refused
}

// NoteBroker remembers where a broker that reached the controller is.
func (c *Controller) NoteBroker(id int32, addr string) {
	if id <= 0 || addr == "" {
		return
	}
	c.mu.Lock()
	c.mu.seen[id] = addr
	c.mu.Unlock()
}

// ClaimedEpoch is told that broker says it holds metadata of epoch: when
// that is above the controller's own, the controller asks the broker at
// the address it knows for it (its metadata's, else the one it reached
// the controller from) before it believes it, so that a request that
// only claims a high epoch cannot stop the controller.
func (c *Controller) ClaimedEpoch(ctx context.Context, broker int32, epoch int64) {
	c.mu.Lock()
	own, refused := c.mu.meta.Epoch, c.mu.refused
	addr := c.mu.seen[broker]
	if b, ok := c.mu.meta.Broker(broker); ok {
		addr = b.Addr
	}
	c.mu.Unlock()
	if refused != nil || epoch <= own || addr == "" {
		return
	}
	if id, _, held, ok := c.heldBy(ctx, addr); ok && id == broker && held.ClusterID == c.Metadata().ClusterID {
		c.checkEpoch(broker, held.Epoch)
	}
}

// checkEpoch makes the controller refuse changes if broker holds metadata
// of a later epoch than the controller's own, as the controller saw it
// hold.
func (c *Controller) checkEpoch(broker int32, epoch int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	own := c.mu.meta.Epoch
	if c.mu.refused != nil || epoch <= own {
		return // a missing file is refused already, with its own reason
	}
	if c.group != nil {
		// A candidate's metadata is what a quorum committed; no file of
		// it was put back. Said, not acted on.
		c.logger.Warn("a broker claims metadata newer than the controller group's", "metadata_epoch", own, "peer", broker, "peer_epoch", epoch)
		return
	}
	c.mu.refused = fmt.Errorf("%w: the controller's metadata (epoch %d, %s) is older than broker %d's (epoch %d): it was restored from an older copy. "+
		"Nothing is changed until it is reconciled: see what every broker holds with gostream-ctl cluster restore-metadata --dry-run, "+
		"then adopt the newest with gostream-ctl cluster restore-metadata", ErrStaleMetadata, own, c.store.Path(), broker, epoch)
	c.logger.Error("the controller's metadata is older than a broker's; refusing every change until it is restored",
		"metadata_epoch", own, "peer", broker, "peer_epoch", epoch)
}

// heldMetadata is the part of a metadata blob a check of epochs reads.
type heldMetadata struct {
	ClusterID string `json:"cluster_id"`
	Epoch     int64  `json:"epoch"`
}

// heldBy asks the node at addr which metadata it holds. ok is false when
// it does not answer, or holds none.
func (c *Controller) heldBy(ctx context.Context, addr string) (id int32, blob []byte, held heldMetadata, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, epochProbeTimeout)
	defer cancel()
	var resp transport.DescribeClusterResponse
	if err := c.cfg.Pool.Call(ctx, addr, transport.APIDescribeCluster, &transport.Empty{}, &resp); err != nil || len(resp.Metadata) == 0 {
		return 0, nil, heldMetadata{}, false
	}
	if err := json.Unmarshal(resp.Metadata, &held); err != nil {
		return 0, nil, heldMetadata{}, false
	}
	return resp.NodeID, resp.Metadata, held, true
}

// VerifyEpochs asks every broker the metadata names, at once, which epoch
// it holds, and refuses changes if one is ahead of the controller.
// Brokers that do not answer prove nothing; they are checked again when
// they register or poll.
func (c *Controller) VerifyEpochs(ctx context.Context) {
	meta := c.Metadata()
	var wg sync.WaitGroup
	for _, b := range meta.Brokers {
		if b.ID == meta.ControllerID {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if id, _, held, ok := c.heldBy(ctx, b.Addr); ok && id == b.ID && held.ClusterID == meta.ClusterID {
				c.checkEpoch(b.ID, held.Epoch)
			}
		}()
	}
	wg.Wait()
}

// RestoreMetadata adopts the newest copy of the cluster's metadata the
// brokers hold (or the named broker's) as the controller's, with an epoch
// above every one seen, and lifts the refusal: the operator's consent to
// reconcile a controller whose metadata is missing or old. A dry run
// reports every copy and what would change.
func (c *Controller) RestoreMetadata(ctx context.Context, req transport.RestoreRequest) (transport.RestoreReport, error) {
	c.opMu.Lock()
	defer c.opMu.Unlock()
	c.mu.Lock()
	own, missing, refused, gossipPeers := c.mu.meta, c.mu.missing, c.mu.refused, c.mu.gossipPeers
	addrs := map[int32]string{}
	for id, a := range c.mu.seen {
		addrs[id] = a
	}
	c.mu.Unlock()
	for _, b := range own.Brokers {
		if _, ok := addrs[b.ID]; !ok {
			addrs[b.ID] = b.Addr
		}
	}
	if gossipPeers != nil {
		for id, a := range gossipPeers() {
			if _, ok := addrs[id]; !ok {
				addrs[id] = a
			}
		}
	}
	delete(addrs, own.ControllerID)
	rep := transport.RestoreReport{ControllerEpoch: own.Epoch, Missing: missing, DryRun: req.DryRun, Sources: []transport.RestoreSource{},
		TopicsGained: []string{}, TopicsLost: []string{}}
	if missing {
		rep.ControllerEpoch = -1
	}
	if refused != nil {
		rep.Refused = refused.Error()
	}
	type copyOf struct {
		src  *transport.RestoreSource
		meta *metadata.Cluster
	}
	var mu sync.Mutex
	var copies []copyOf
	var wg sync.WaitGroup
	for id, addr := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := transport.RestoreSource{Broker: id, Address: addr, Epoch: -1}
			var m *metadata.Cluster
			nodeID, blob, held, ok := c.heldBy(ctx, addr)
			switch {
			case !ok:
				src.Note = "does not answer, or holds no metadata"
			case nodeID != id:
				src.Answered, src.Note = true, fmt.Sprintf("answers as broker %d", nodeID)
			default:
				src.Answered, src.ClusterID, src.Epoch = true, held.ClusterID, held.Epoch
				var err error
				if m, err = metadata.Parse(blob, fmt.Sprintf("broker %d", id)); err != nil {
					src.Note, m = err.Error(), nil
				} else {
					src.Topics = len(m.Topics)
				}
				if own.ClusterID != "" && held.ClusterID != own.ClusterID {
					src.Note, m = fmt.Sprintf("another cluster's metadata (%s)", held.ClusterID), nil
				}
			}
			mu.Lock()
			copies = append(copies, copyOf{&src, m})
			mu.Unlock()
		}()
	}
	wg.Wait()
	sort.Slice(copies, func(i, j int) bool { return copies[i].src.Broker < copies[j].src.Broker })
	var chosen *copyOf
	maxEpoch := own.Epoch
	for i := range copies {
		cp := &copies[i]
		maxEpoch = max(maxEpoch, cp.src.Epoch)
		if cp.meta == nil {
			continue
		}
		switch {
		case req.FromBroker != 0:
			if cp.src.Broker == req.FromBroker {
				chosen = cp
			}
		case chosen == nil || cp.meta.Epoch > chosen.meta.Epoch:
			chosen = cp
		}
	}
	report := func() {
		for _, cp := range copies {
			rep.Sources = append(rep.Sources, *cp.src)
		}
	}
	switch {
	case chosen == nil && req.FromBroker != 0:
		report()
		return rep, fmt.Errorf("%w: broker %d holds no usable copy of this cluster's metadata (see the sources)", ErrInvalidRequest, req.FromBroker)
	case chosen == nil:
		report()
		return rep, fmt.Errorf("%w: no broker that answers holds a copy of this cluster's metadata: start the brokers, or put a backup of %s back and restart this node", ErrNoEligibleReplica, c.store.Path())
	case !missing && chosen.meta.Epoch <= own.Epoch && req.FromBroker == 0:
		report()
		return rep, fmt.Errorf("%w: the controller's metadata (epoch %d) is as new as every copy the answering brokers hold; nothing to restore%s",
			ErrInvalidRequest, own.Epoch, stillRefused(refused))
	}
	chosen.src.Chosen = true
	report()
	if clusterID := own.ClusterID; clusterID == "" {
		own = own.Clone()
		own.ClusterID = chosen.meta.ClusterID
	}
	next := chosen.meta.Clone()
	next.ControllerID = own.ControllerID
	next.Epoch = maxEpoch + 1
	if self, ok := own.Broker(own.ControllerID); ok {
		next.PutBroker(self)
	}
	next.AssignTopicIDs()
	// Producer ids below either copy's next one may have been handed out.
	// Without the controller's own copy, one that ran ahead of every
	// broker's (a block whose push did not land) is unknown: skip a
	// margin past it.
	next.NextProducerID = max(next.NextProducerID, own.NextProducerID)
	if missing {
		next.NextProducerID += ProducerIDRestoreMargin
	}
	// A reserved epoch is the controller's own bookkeeping, never pushed:
	// keep the higher of the two copies', so a failover never reuses one.
	for i := range next.Topics {
		t := &next.Topics[i]
		ot := own.Topic(t.Name)
		for p := range t.Partitions {
			np := &t.Partitions[p]
			np.ReservedEpoch = max(np.ReservedEpoch, np.LeaderEpoch)
			if ot != nil && ot.ID == t.ID && p < len(ot.Partitions) {
				np.ReservedEpoch = max(np.ReservedEpoch, ot.Partitions[p].ReservedEpoch)
			}
		}
		if !missing && own.Topic(t.Name) == nil {
			rep.TopicsGained = append(rep.TopicsGained, t.Name)
		}
	}
	for _, t := range own.Topics {
		if next.Topic(t.Name) == nil {
			rep.TopicsLost = append(rep.TopicsLost, t.Name)
		}
	}
	if missing {
		for _, t := range next.Topics {
			rep.TopicsGained = append(rep.TopicsGained, t.Name)
		}
	}
	rep.NewEpoch = next.Epoch
	if err := next.Validate(); err != nil {
		return rep, fmt.Errorf("%w: broker %d's copy cannot be adopted: %v", ErrInvalidRequest, chosen.src.Broker, err)
	}
	if req.DryRun {
		return rep, nil
	}
	restored := transport.ChangeResult{Action: transport.ActionRestoreMetadata, Partition: -1, OldLeader: chosen.src.Broker, NewLeader: chosen.src.Broker}
	c.changeMu.Lock()
	if err := c.persist(ctx, c.Metadata().Epoch, next, events(req.Requester, []transport.ChangeResult{restored})); err != nil {
		c.changeMu.Unlock()
		return rep, err
	}
	c.mu.Lock()
	c.mu.meta, c.mu.refused, c.mu.missing = next, nil, false
	c.mu.Unlock()
	c.changeMu.Unlock()
	rep.Restored = true
	c.logger.Warn("controller metadata restored from a broker's copy", "peer", chosen.src.Broker, "peer_epoch", chosen.src.Epoch, "metadata_epoch", next.Epoch)
	var errs []error
	if err := c.cfg.Apply(next); err != nil {
		errs = append(errs, fmt.Errorf("restored and persisted, but not yet applied on this node: %w", err))
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), PushTimeout(next))
	defer cancel()
	c.cfg.Push(pctx, next)
	return rep, errors.Join(errs...)
}

func stillRefused(refused error) string {
	if refused == nil {
		return ""
	}
	return "; the broker that reported a newer epoch does not answer now: start it and run restore-metadata again"
}

// CheckPushRefused is told that broker refused a push as older than what it
// holds: it asks the broker which epoch that is and refuses changes if it
// is above the controller's (a push that overtook another is not).
func (c *Controller) CheckPushRefused(ctx context.Context, b metadata.Broker) {
	if id, _, held, ok := c.heldBy(ctx, b.Addr); ok && id == b.ID && held.ClusterID == c.Metadata().ClusterID {
		c.checkEpoch(b.ID, held.Epoch)
	}
}
