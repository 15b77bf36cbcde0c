package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"gostream/controller"
	"gostream/controller/quorum"
	"gostream/metadata"
	"gostream/transport"
)

// A node whose --controller lists several candidates, itself among them,
// is a candidate of the replicated controller (docs/controller-raft.md).
// It runs a broker like any other node (registers with the active
// controller, polls it, takes its pushes), and beside it a member of the
// candidates' Raft group and a controller on that group. Each change the
// group applies is adopted by the controller and handed to this node's
// broker; the controller makes changes only while this candidate leads
// the group.

// candidacy is this node's part in the controller group.
type candidacy struct {
	self  ControllerAddr
	dir   string
	layer *quorum.Layer
	group *quorum.Group
	// seed gives the group's first metadata should this candidate lead a
	// group that has none; nil: it does not seed.
	seed    func() (*metadata.Cluster, []transport.HistoryEvent, error)
	upgrade bool // seeds from a single controller's file

	mu      sync.Mutex
	latest  *metadata.Cluster // the newest change applied, not yet handed to the broker
	changed chan struct{}     // buffered 1: latest moved
}

// candidates is the --controller list as the group's members.
func (n *Node) candidates() []quorum.Candidate {
	out := make([]quorum.Candidate, len(n.cfg.Controllers))
	for i, c := range n.cfg.Controllers {
		out[i] = quorum.Candidate{ID: c.ID, Addr: c.Addr}
	}
	return out
}

// startCandidate opens this candidate's Raft state and its controller.
// The broker's cached metadata, if any, is applied first, so that the
// node serves while the group elects.
func (n *Node) startCandidate(self ControllerAddr) error {
	cd := &candidacy{self: self, dir: filepath.Join(n.cfg.DataDir, "controller"), changed: make(chan struct{}, 1)}
	log := n.logger.Named("controller")
	if err := n.startBroker(); err != nil {
		return err
	}
	qcfg := quorum.Config{Dir: cd.dir, Self: quorum.Candidate{ID: self.ID, Addr: self.Addr}, Candidates: n.candidates(), Logger: log.Named("group")}
	has, err := quorum.HasState(qcfg)
	if err != nil {
		return err
	}
	// A single controller's file seeds the group (the upgrade), and seeds
	// it again after a restart of a seed that stopped between
	// bootstrapping its log and writing the first metadata into it: the
	// file is renamed only once the group holds it.
	single, hist, err := controller.SingleState(cd.dir)
	switch {
	case err == nil:
		cd.upgrade = true
		cd.seed = func() (*metadata.Cluster, []transport.HistoryEvent, error) { return single, hist, nil }
	case !has && !errors.Is(err, metadata.ErrNotFound):
		return fmt.Errorf("controller metadata: %w", err)
	}
	if !has {
		if err := n.decideSeed(cd, &qcfg, single, hist); err != nil {
			return err
		}
	}
	cd.layer = quorum.NewLayer(n.cfg.Advertise, func() string { return n.root.Stamp().ClusterID }, log.Named("raft-layer"))
	cd.layer.LocalIP = net.ParseIP(n.cfg.DialSource)
	cd.layer.TLS = n.sec.clientTLS()
	cd.layer.Allow = n.sec.raftAllowed
	qcfg.Transport = quorum.NewTransport(cd.layer, log.Named("raft-transport"))
	var ctrl atomic.Pointer[controller.Controller] // set once the group is open
	qcfg.Probe = n.candidateAnswers
	qcfg.OnChange = func(meta *metadata.Cluster) {
		if c := ctrl.Load(); c != nil {
			c.Adopt(meta)
		}
		cd.offer(meta)
	}
	g, err := quorum.Open(qcfg)
	if err != nil {
		cd.layer.Close()
		return err
	}
	cd.group = g
	c := controller.OpenCandidate(controller.Config{
		Dir: cd.dir, RootCluster: n.root.Stamp().ClusterID, Self: n.selfBroker(),
		Logger: log, Apply: n.broker.applyMetadata, Push: n.pushMetadata, Pool: n.pool, WireError: wireError,
	}, g)
	ctrl.Store(c)
	// A change applied while the controller was being made.
	if m := g.Metadata(); m != nil {
		c.Adopt(m)
	}
	n.controller, n.candidacy = c, cd
	if len(n.cfg.Controllers)%2 == 0 {
		n.logger.Warn("an even number of controller candidates tolerates no more failures than one fewer", "candidates", n.candidateList())
	}
	return nil
}

// decideSeed decides whether this candidate, which holds no Raft state,
// bootstraps the group, and with what (docs/controller-raft.md):
//   - the holder of a single controller's metadata file seeds with it and
//     its audit trail (the upgrade from one controller);
//   - otherwise the lowest id seeds a new cluster, but only if its root
//     belongs to no cluster, it holds no broker metadata, and no other
//     candidate answers with metadata: a candidate whose disk was lost
//     joins the group it belonged to instead.
//
// A seed of a new cluster stamps its root with the cluster id before Raft
// starts, so that the others' layers and controller refuse it should it
// ever seed a second cluster. single and hist are the single
// controller's file and audit trail, nil when there is none.
func (n *Node) decideSeed(cd *candidacy, qcfg *quorum.Config, single *metadata.Cluster, hist []transport.HistoryEvent) error {
	if single != nil {
		if single.ControllerID != n.cfg.ID {
			return fmt.Errorf("controller metadata %s names controller %d, but this is broker %d", filepath.Join(cd.dir, "metadata.json"), single.ControllerID, n.cfg.ID)
		}
		qcfg.Seed, qcfg.First, qcfg.FirstHistory = true, single, hist
		n.logger.Info("seeding the controller group with this node's single-controller metadata", "metadata_epoch", single.Epoch, "cluster", single.ClusterID)
		return nil
	}
	for _, c := range n.cfg.Controllers {
		if c.ID < n.cfg.ID {
			return nil
		}
	}
	if n.root.Stamp().ClusterID != "" || n.broker.metadata() != nil {
		n.logger.Warn("this candidate has no controller state but its storage belongs to a cluster: it joins the group instead of seeding one",
			"cluster", n.root.Stamp().ClusterID)
		return nil
	}
	if c, ok := n.candidateWithMetadata(); ok {
		n.logger.Warn("this candidate has no controller state, but another candidate holds metadata: it joins the group instead of seeding one", "candidate", c.String())
		return nil
	}
	first, err := controller.NewClusterMetadata(n.selfBroker())
	if err != nil {
		return err
	}
	if err := n.root.SetClusterID(first.ClusterID); err != nil {
		return err
	}
	qcfg.Seed, qcfg.First = true, first
	cd.seed = func() (*metadata.Cluster, []transport.HistoryEvent, error) { return first, nil, nil }
	n.logger.Info("seeding the controller group for a new cluster", "cluster", first.ClusterID, "candidates", n.candidateList())
	return nil
}

// candidateWithMetadata asks the other candidates whether one holds
// metadata.
func (n *Node) candidateWithMetadata() (ControllerAddr, bool) {
	for _, c := range n.cfg.Controllers {
		if c.ID == n.cfg.ID {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		var resp transport.DescribeClusterResponse
		err := n.pool.Call(ctx, c.Addr, transport.APIDescribeCluster, &transport.Empty{}, &resp)
		cancel()
		if err == nil && len(resp.Metadata) > 0 {
			return c, true
		}
	}
	return ControllerAddr{}, false
}

// offer makes meta the next change to hand this node's broker. Raft's
// apply loop calls it: it never waits.
func (cd *candidacy) offer(meta *metadata.Cluster) {
	cd.mu.Lock()
	if cd.latest == nil || meta.Epoch > cd.latest.Epoch {
		cd.latest = meta
	}
	cd.mu.Unlock()
	select {
	case cd.changed <- struct{}{}:
	default:
	}
}

// applyGroupChanges hands this node's broker each change its group
// applies, the newest first, skipping what the broker holds already (a
// push got there first).
func (n *Node) applyGroupChanges(ctx context.Context) error {
	cd := n.candidacy
	retired := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-cd.changed:
		}
		cd.mu.Lock()
		meta := cd.latest
		cd.latest = nil
		cd.mu.Unlock()
		if meta == nil {
			continue
		}
		if cd.upgrade && !retired {
			// The group holds the single controller's metadata now: the
			// file must never seed a group again.
			if err := controller.RetireSingleState(cd.dir); err != nil {
				n.logger.Error("cannot rename the single controller's metadata file after seeding the group with it", "err", err)
			} else {
				retired = true
			}
		}
		if cur := n.broker.metadata(); cur != nil && cur.Epoch >= meta.Epoch && cur.ClusterID == meta.ClusterID {
			continue
		}
		if err := n.broker.applyMetadata(meta); err != nil {
			n.logger.Error("cannot apply the controller group's metadata", "metadata_epoch", meta.Epoch, "err", err)
		}
	}
}

// leadWhenElected makes the controller active while this candidate leads
// the group: on winning the leadership it takes over (retrying while it
// leads), on losing it cancels a takeover under way, waits for it, and
// steps down.
func (n *Node) leadWhenElected(ctx context.Context) error {
	cd, c := n.candidacy, n.controller
	type takeover struct {
		cancel context.CancelFunc
		done   chan struct{}
	}
	var cur *takeover
	stop := func() {
		if cur == nil {
			return
		}
		cur.cancel()
		<-cur.done
		cur = nil
		c.StepDown()
		n.logger.Info("no longer the active controller", "candidate", n.cfg.ID)
	}
	defer stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case leader := <-cd.group.Leadership():
			if !leader {
				stop()
				continue
			}
			if cur != nil {
				continue
			}
			tctx, cancel := context.WithCancel(ctx)
			cur = &takeover{cancel: cancel, done: make(chan struct{})}
			go func(done chan struct{}) {
				defer close(done)
				n.takeOver(tctx)
			}(cur.done)
		}
	}
}

// takeOver runs TakeOver until it succeeds or ctx ends.
func (n *Node) takeOver(ctx context.Context) {
	backoff := 100 * time.Millisecond
	warned := false
	for {
		tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := n.controller.TakeOver(tctx, n.candidacy.seed)
		cancel()
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			return
		}
		if !warned {
			n.logger.Warn("leads the controller group but cannot take over as the active controller yet; retrying", "err", err)
			warned = true
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// closeCandidacy stops this candidate's Raft.
func (n *Node) closeCandidacy() error {
	cd := n.candidacy
	if cd == nil || cd.group == nil {
		return nil
	}
	err := cd.group.Close()
	cd.layer.Close()
	return err
}

// candidateAnswers reports whether candidate c answers, now, as a
// candidate of the controller group.
func (n *Node) candidateAnswers(ctx context.Context, c quorum.Candidate) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var resp transport.JSONMessage
	if err := n.pool.Call(ctx, c.Addr, transport.APIControllerStatus, &transport.JSONMessage{Data: []byte("{}")}, &resp); err != nil {
		return false
	}
	var st transport.ControllerStatus
	return json.Unmarshal(resp.Data, &st) == nil && st.Node == c.ID && st.Mode == "candidate"
}
