package controller

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"gostream/controller/quorum"
	"gostream/metadata"
	"gostream/transport"
)

// A node whose --controller lists several candidates, itself among them,
// is a candidate of the replicated controller (docs/controller-raft.md).
// It runs a broker like any other node (registers with the active
// controller, polls it, takes its pushes), and beside it a Candidacy: a
// member of the candidates' Raft group and a Controller on that group.
// Each change the group applies is adopted by the controller and handed
// to this node's broker; the controller makes changes only while this
// candidate leads the group.

// CandidacyConfig is what a node hands its part in the controller group:
// who the candidates are, and narrow access to its own broker, storage
// root and network.
type CandidacyConfig struct {
	// Dir holds the candidate's Raft state, and a single controller's
	// files when the cluster is upgraded to a replicated controller
	// (<data-dir>/controller).
	Dir string
	// Self is this candidate, and Candidates every candidate of the
	// node's --controller list, Self among them.
	Self       quorum.Candidate
	Candidates []quorum.Candidate
	// Broker is this node as the metadata lists it; its Addr is the RPC
	// address the group's Raft traffic shares (Divert).
	Broker metadata.Broker
	// LocalIP, TLS and Allow are the Raft connections' (quorum.Layer).
	LocalIP net.IP
	TLS     func() *tls.Config
	Allow   func(principal string) error
	// Logger is the node's logger; the group's and the controller's are
	// named under it.
	Logger hclog.Logger
	// ClusterID is the cluster id stamped on the node's storage root, ""
	// while it belongs to none; SetClusterID stamps it (a seed of a new
	// cluster, before Raft starts).
	ClusterID    func() string
	SetClusterID func(id string) error
	// Metadata is the newest metadata the node's broker holds, nil if
	// none; Apply hands the broker newer metadata.
	Metadata func() *metadata.Cluster
	Apply    func(*metadata.Cluster) error
	// Push, Pool and WireError are the controller's (Config).
	Push      func(context.Context, *metadata.Cluster)
	Pool      Caller
	WireError func(error) error
}

// Candidacy is a node's part in the controller group: its member of the
// candidates' Raft group and its Controller on that group. The node owns
// the goroutines that run it (ApplyChanges, Lead) and closes it.
type Candidacy struct {
	cfg    CandidacyConfig
	logger hclog.Logger // the node's
	layer  *quorum.Layer
	group  *quorum.Group
	ctrl   *Controller
	// seed gives the group's first metadata should this candidate lead a
	// group that has none; nil: it does not seed.
	seed    func() (*metadata.Cluster, []transport.HistoryEvent, error)
	upgrade bool // seeds from a single controller's file

	mu      sync.Mutex
	latest  *metadata.Cluster // the newest change applied, not yet handed to the broker
	changed chan struct{}     // buffered 1: latest moved
}

// OpenCandidacy opens this candidate's Raft state and its controller. The
// node applies its broker's cached metadata first, so that it serves
// while the group elects.
func OpenCandidacy(cfg CandidacyConfig) (*Candidacy, error) {
	cd := &Candidacy{cfg: cfg, logger: cfg.Logger, changed: make(chan struct{}, 1)}
	log := cfg.Logger.Named("controller")
	qcfg := quorum.Config{Dir: cfg.Dir, Self: cfg.Self, Candidates: cfg.Candidates, Logger: log.Named("group")}
	has, err := quorum.HasState(qcfg)
	if err != nil {
		return nil, err
	}
	// A single controller's file seeds the group (the upgrade), and seeds
	// it again after a restart of a seed that stopped between
	// bootstrapping its log and writing the first metadata into it: the
	// file is renamed only once the group holds it.
	single, hist, err := SingleState(cfg.Dir)
	switch {
	case err == nil:
		cd.upgrade = true
		cd.seed = func() (*metadata.Cluster, []transport.HistoryEvent, error) { return single, hist, nil }
	case !has && !errors.Is(err, metadata.ErrNotFound):
		return nil, fmt.Errorf("controller metadata: %w", err)
	}
	if !has {
		if err := cd.decideSeed(&qcfg, single, hist); err != nil {
			return nil, err
		}
	}
	cd.layer = quorum.NewLayer(cfg.Broker.Addr, cfg.ClusterID, log.Named("raft-layer"))
	cd.layer.LocalIP = cfg.LocalIP
	cd.layer.TLS = cfg.TLS
	cd.layer.Allow = cfg.Allow
	qcfg.Transport = quorum.NewTransport(cd.layer, log.Named("raft-transport"))
	var ctrl atomic.Pointer[Controller] // set once the group is open
	qcfg.Probe = cd.candidateAnswers
	qcfg.OnChange = func(meta *metadata.Cluster) {
		if c := ctrl.Load(); c != nil {
			c.Adopt(meta)
		}
		cd.offer(meta)
	}
	g, err := quorum.Open(qcfg)
	if err != nil {
		cd.layer.Close()
		return nil, err
	}
	cd.group = g
	c := OpenCandidate(Config{
		Dir: cfg.Dir, RootCluster: cfg.ClusterID(), Self: cfg.Broker,
		Logger: log, Apply: cfg.Apply, Push: cfg.Push, Pool: cfg.Pool, WireError: cfg.WireError,
	}, g)
	ctrl.Store(c)
	// A change applied while the controller was being made.
	if m := g.Metadata(); m != nil {
		c.Adopt(m)
	}
	cd.ctrl = c
	if len(cfg.Candidates)%2 == 0 {
		cd.logger.Warn("an even number of controller candidates tolerates no more failures than one fewer", "candidates", cd.candidateList())
	}
	return cd, nil
}

// Controller is this candidate's controller, active or not.
func (cd *Candidacy) Controller() *Controller { return cd.ctrl }

// candidateList is the candidates as --controller spells them.
func (cd *Candidacy) candidateList() string {
	names := make([]string, len(cd.cfg.Candidates))
	for i, c := range cd.cfg.Candidates {
		names[i] = c.String()
	}
	return strings.Join(names, ",")
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
func (cd *Candidacy) decideSeed(qcfg *quorum.Config, single *metadata.Cluster, hist []transport.HistoryEvent) error {
	self := cd.cfg.Self.ID
	if single != nil {
		if single.ControllerID != self {
			return fmt.Errorf("controller metadata %s names controller %d, but this is broker %d", filepath.Join(cd.cfg.Dir, metadataFile), single.ControllerID, self)
		}
		qcfg.Seed, qcfg.First, qcfg.FirstHistory = true, single, hist
		cd.logger.Info("seeding the controller group with this node's single-controller metadata", "metadata_epoch", single.Epoch, "cluster", single.ClusterID)
		return nil
	}
	for _, c := range cd.cfg.Candidates {
		if c.ID < self {
			return nil
		}
	}
	if cd.cfg.ClusterID() != "" || cd.cfg.Metadata() != nil {
		cd.logger.Warn("this candidate has no controller state but its storage belongs to a cluster: it joins the group instead of seeding one",
			"cluster", cd.cfg.ClusterID())
		return nil
	}
	if c, ok := cd.candidateWithMetadata(); ok {
		cd.logger.Warn("this candidate has no controller state, but another candidate holds metadata: it joins the group instead of seeding one", "candidate", c.String())
		return nil
	}
	first, err := NewClusterMetadata(cd.cfg.Broker)
	if err != nil {
		return err
	}
	if err := cd.cfg.SetClusterID(first.ClusterID); err != nil {
		return err
	}
	qcfg.Seed, qcfg.First = true, first
	cd.seed = func() (*metadata.Cluster, []transport.HistoryEvent, error) { return first, nil, nil }
	cd.logger.Info("seeding the controller group for a new cluster", "cluster", first.ClusterID, "candidates", cd.candidateList())
	return nil
}

// candidateWithMetadata asks the other candidates whether one holds
// metadata.
func (cd *Candidacy) candidateWithMetadata() (quorum.Candidate, bool) {
	for _, c := range cd.cfg.Candidates {
		if c.ID == cd.cfg.Self.ID {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		var resp transport.DescribeClusterResponse
		err := cd.cfg.Pool.Call(ctx, c.Addr, transport.APIDescribeCluster, &transport.Empty{}, &resp)
		cancel()
		if err == nil && len(resp.Metadata) > 0 {
			return c, true
		}
	}
	return quorum.Candidate{}, false
}

// offer makes meta the next change to hand this node's broker. Raft's
// apply loop calls it: it never waits.
func (cd *Candidacy) offer(meta *metadata.Cluster) {
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

// ApplyChanges hands this node's broker each change its group applies,
// the newest first, skipping what the broker holds already (a push got
// there first), until ctx ends. It returns nil.
func (cd *Candidacy) ApplyChanges(ctx context.Context) error {
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
			if err := RetireSingleState(cd.cfg.Dir); err != nil {
				cd.logger.Error("cannot rename the single controller's metadata file after seeding the group with it", "err", err)
			} else {
				retired = true
			}
		}
		if cur := cd.cfg.Metadata(); cur != nil && cur.Epoch >= meta.Epoch && cur.ClusterID == meta.ClusterID {
			continue
		}
		if err := cd.cfg.Apply(meta); err != nil {
			cd.logger.Error("cannot apply the controller group's metadata", "metadata_epoch", meta.Epoch, "err", err)
		}
	}
}

// Lead makes the controller active while this candidate leads the group,
// until ctx ends: on winning the leadership it takes over (retrying while
// it leads), on losing it cancels a takeover under way, waits for it, and
// steps down. It returns nil.
func (cd *Candidacy) Lead(ctx context.Context) error {
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
		cd.ctrl.StepDown()
		cd.logger.Info("no longer the active controller", "candidate", cd.cfg.Self.ID)
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
				cd.takeOver(tctx)
			}(cur.done)
		}
	}
}

// takeOver runs TakeOver until it succeeds or ctx ends.
func (cd *Candidacy) takeOver(ctx context.Context) {
	backoff := 100 * time.Millisecond
	warned := false
	for {
		tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := cd.ctrl.TakeOver(tctx, cd.seed)
		cancel()
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			return
		}
		if !warned {
			cd.logger.Warn("leads the controller group but cannot take over as the active controller yet; retrying", "err", err)
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

// Close stops this candidate's Raft.
func (cd *Candidacy) Close() error {
	err := cd.group.Close()
	cd.layer.Close()
	return err
}

// Divert takes a Raft connection the node's RPC server diverted (its
// first byte quorum.Marker): the candidates' Raft traffic shares the RPC
// address.
func (cd *Candidacy) Divert(c net.Conn, principal string) { cd.layer.Divert(c, principal) }

// Leader is the candidate that leads the group as this one knows it, if
// any.
func (cd *Candidacy) Leader() (quorum.Candidate, bool) { return cd.group.Leader() }

// candidateAnswers reports whether candidate c answers, now, as a
// candidate of the controller group.
func (cd *Candidacy) candidateAnswers(ctx context.Context, c quorum.Candidate) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var resp transport.JSONMessage
	if err := cd.cfg.Pool.Call(ctx, c.Addr, transport.APIControllerStatus, &transport.JSONMessage{Data: []byte("{}")}, &resp); err != nil {
		return false
	}
	var st transport.ControllerStatus
	return json.Unmarshal(resp.Data, &st) == nil && st.Node == c.ID && st.Mode == "candidate"
}

// statusConfirmWait bounds how long Status waits for a quorum to confirm
// that the active controller still leads.
const statusConfirmWait = 500 * time.Millisecond

// Status is this candidate's part in the controller group, as controller
// status shows it. It is Active only while a quorum of the group confirms,
// asked now, that it leads: a candidate cut off from the others, or paused
// and just resumed, still holds Raft's Leader state for a while after
// another has taken over, and would show two active controllers, the one
// of them with older metadata. The confirmation comes first, so that the
// state shown is the one after it.
func (cd *Candidacy) Status() transport.ControllerStatus {
	active := cd.ctrl.Active() && cd.group.ConfirmLeader(statusConfirmWait)
	qs := cd.group.Status()
	st := transport.ControllerStatus{Node: cd.cfg.Self.ID, Mode: "candidate", State: qs.State, Active: active}
	st.Term, st.LastIndex, st.CommitIndex, st.AppliedIndex = qs.Term, qs.LastIndex, qs.CommitIndex, qs.AppliedIndex
	st.Leader, st.LeaderAddr, st.MetadataEpoch = qs.Leader.ID, qs.Leader.Addr, qs.Epoch
	for _, m := range qs.Members {
		st.Members = append(st.Members, transport.ControllerMember{ID: m.ID, Addr: m.Addr, Voter: m.Voter, Reachable: m.Reachable})
	}
	return st
}

// CheckChange refuses a change of the controller group that cannot be
// made as asked, before anything is done: an unknown op, a candidate id
// that is not positive, or an add of a candidate that this node's
// --controller list does not hold at that address. The errors match
// transport.ErrInvalidRequest.
func (cd *Candidacy) CheckChange(r transport.ControllerChangeRequest) error {
	switch r.Op {
	case transport.ControllerTransfer, transport.ControllerRemove:
	case transport.ControllerAdd:
		listed := false
		for _, c := range cd.cfg.Candidates {
			if c.ID == r.ID {
				listed = true
				if !SameAddr(c.Addr, r.Addr) {
					return fmt.Errorf("%w: candidate %d is listed in this node's --controller at %s, not %s",
						transport.ErrInvalidRequest, r.ID, c.Addr, r.Addr)
				}
			}
		}
		if !listed {
			return fmt.Errorf("%w: candidate %d@%s is not in the active controller's --controller list (%s): "+
				"give every node the new list first (restart them one at a time), then add it",
				transport.ErrInvalidRequest, r.ID, r.Addr, cd.candidateList())
		}
	default:
		return fmt.Errorf("%w: controller change %q: want transfer, add or remove", transport.ErrInvalidRequest, r.Op)
	}
	if r.ID <= 0 {
		return fmt.Errorf("%w: controller change: want a candidate id, a positive number", transport.ErrInvalidRequest)
	}
	return nil
}

// Change carries out a change of the controller group that CheckChange
// let through: a transfer of its leadership (waiting a little for the
// new leader to be known here, so that the answer names it), or an add
// or a remove of a voter. It returns the audit trail's event of the
// change, requester its requester; the caller records it. The errors are
// transport.ErrNotController when this candidate does not lead the
// group, transport.ErrInvalidRequest when the group refuses the change,
// or the group's error, after which the change may or may not be made.
func (cd *Candidacy) Change(ctx context.Context, r transport.ControllerChangeRequest, requester string) (transport.HistoryEvent, error) {
	g := cd.group
	before := g.Status()
	var err error
	switch r.Op {
	case transport.ControllerTransfer:
		err = g.Transfer(ctx, r.ID)
	case transport.ControllerAdd:
		err = g.Add(ctx, quorum.Candidate{ID: r.ID, Addr: r.Addr})
	case transport.ControllerRemove:
		err = g.Remove(ctx, r.ID)
	}
	switch {
	case errors.Is(err, quorum.ErrNotLeader):
		return transport.HistoryEvent{}, fmt.Errorf("%w: %v", transport.ErrNotController, err)
	case errors.Is(err, quorum.ErrInvalid):
		return transport.HistoryEvent{}, fmt.Errorf("%w: %v", transport.ErrInvalidRequest, err)
	case err != nil:
		return transport.HistoryEvent{}, err
	}
	cd.logger.Info("controller group changed", "op", r.Op, "candidate", r.ID, "addr", r.Addr, "requester", r.Requester)
	if r.Op == transport.ControllerTransfer {
		cd.waitActive(ctx, r.ID)
	}
	return groupEvent(r, requester, before, g.Status()), nil
}

// groupEvent is the audit trail's event of a change of the controller
// group: the active controller and the voters before and after.
func groupEvent(r transport.ControllerChangeRequest, requester string, before, after quorum.Status) transport.HistoryEvent {
	voters := func(st quorum.Status) []int32 {
		var ids []int32
		for _, m := range st.Members {
			if m.Voter {
				ids = append(ids, m.ID)
			}
		}
		slices.Sort(ids)
		return ids
	}
	note := fmt.Sprintf("controller %s of candidate %d", r.Op, r.ID)
	if r.Addr != "" {
		note += " at " + r.Addr
	}
	return transport.HistoryEvent{Time: time.Now().UTC(), Requester: requester, ChangeResult: transport.ChangeResult{
		Partition: -1, Action: map[string]transport.Action{
			transport.ControllerTransfer: transport.ActionControllerTransfer,
			transport.ControllerAdd:      transport.ActionControllerAdd,
			transport.ControllerRemove:   transport.ActionControllerRemove,
		}[r.Op],
		OldLeader: before.Leader.ID, NewLeader: after.Leader.ID,
		OldActive: voters(before), NewActive: voters(after), Note: note,
	}}
}

// waitActive waits, a little, until this candidate knows id leads the
// group, so that a transfer's answer names the new leader.
func (cd *Candidacy) waitActive(ctx context.Context, id int32) {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if l, ok := cd.group.Leader(); ok && l.ID == id {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// SameAddr reports whether two HOST:PORT addresses name the same port on
// the same host, resolving host names: how a candidate's address in
// --controller is compared with another spelling of it.
func SameAddr(a, b string) bool {
	if a == b {
		return true
	}
	ha, pa, errA := net.SplitHostPort(a)
	hb, pb, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil || pa != pb {
		return false
	}
	ipsA, errA := net.LookupHost(ha)
	ipsB, errB := net.LookupHost(hb)
	if errA != nil || errB != nil {
		return false
	}
	for _, x := range ipsA {
		if slices.Contains(ipsB, x) {
			return true
		}
	}
	return false
}
