package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"time"

	"gostream/controller"
	"gostream/controller/quorum"
	"gostream/rpcapi"
	"gostream/transport"
)

// A node reaches the controller through the candidates its --controller
// lists (one today; several with the replicated controller,
// docs/controller-raft.md): first the one the newest metadata it holds
// names as the controller, then the others in the list's order. A
// candidate that is not the active controller answers NotController, and
// one that cannot be reached did nothing; both are passed over.

// controllerOrder is the candidates to ask, in order.
func (n *Node) controllerOrder() []ControllerAddr {
	cands := n.cfg.Controllers
	named := int32(0)
	if m := n.broker.Metadata(); m != nil {
		named = m.ControllerID
	}
	out := make([]ControllerAddr, 0, len(cands))
	for _, c := range cands {
		if c.ID == named {
			out = append(out, c)
		}
	}
	for _, c := range cands {
		if c.ID != named {
			out = append(out, c)
		}
	}
	return out
}

// isCandidate reports whether id is one of the controller candidates.
func (n *Node) isCandidate(id int32) bool {
	for _, c := range n.cfg.Controllers {
		if c.ID == id {
			return true
		}
	}
	return false
}

// candidateList is the candidates as --controller spells them.
func (n *Node) candidateList() string {
	names := make([]string, len(n.cfg.Controllers))
	for i, c := range n.cfg.Controllers {
		names[i] = c.String()
	}
	return strings.Join(names, ",")
}

// callController sends a controller request to the candidates in turn
// (controllerOrder) until one that is the active controller answers. It
// passes over a candidate only when the request provably did nothing
// there: it answered NotController, or the request was never sent. It
// returns the candidate that answered last, and its error.
func (n *Node) callController(ctx context.Context, api transport.API, req, resp transport.Message) (ControllerAddr, error) {
	var last ControllerAddr
	var err error
	for _, c := range n.controllerOrder() {
		last = c
		// A connection that cannot be opened carries no request.
		if _, err = n.pool.Get(ctx, c.Addr); err != nil {
			if ctx.Err() != nil {
				return c, err
			}
			continue
		}
		err = n.pool.Call(ctx, c.Addr, api, req, resp)
		if err == nil || ctx.Err() != nil ||
			!errors.Is(err, transport.ErrNotController) && !errors.Is(err, transport.ErrNotSent) {
			return c, err
		}
	}
	return last, err
}

// notControllerError is the refusal of a controller request by a node
// that is not the active controller.
func (n *Node) notControllerError() error {
	if len(n.cfg.Controllers) == 1 {
		return fmt.Errorf("%w: broker %d is not the controller; the controller is %s", transport.ErrNotController, n.cfg.ID, n.cfg.Controllers[0])
	}
	if cd := n.candidacy; cd != nil {
		if l, ok := cd.Leader(); ok && l.ID != n.cfg.ID {
			return fmt.Errorf("%w: candidate %d is not the active controller; candidate %s is (candidates %s)",
				transport.ErrNotController, n.cfg.ID, l, n.candidateList())
		}
	}
	named := n.controllerOrder()[0]
	if named.ID == n.cfg.ID {
		return fmt.Errorf("%w: candidate %d is not the active controller, and knows of no active one yet (candidates %s)",
			transport.ErrNotController, n.cfg.ID, n.candidateList())
	}
	return fmt.Errorf("%w: broker %d is not the active controller; the newest metadata it holds names %s (candidates %s)",
		transport.ErrNotController, n.cfg.ID, named, n.candidateList())
}

// startCandidate starts this node as a candidate of the replicated
// controller: its broker on the cached metadata first, so that it serves
// while the group elects, then its part in the group
// (controller.Candidacy), whose goroutines serve runs.
func (n *Node) startCandidate(self ControllerAddr) error {
	if err := n.startBroker(); err != nil {
		return err
	}
	cands := make([]quorum.Candidate, len(n.cfg.Controllers))
	for i, c := range n.cfg.Controllers {
		cands[i] = quorum.Candidate{ID: c.ID, Addr: c.Addr}
	}
	root := n.root
	cd, err := controller.OpenCandidacy(controller.CandidacyConfig{
		Dir: filepath.Join(n.cfg.DataDir, "controller"), Self: quorum.Candidate{ID: self.ID, Addr: self.Addr}, Candidates: cands,
		Broker: n.selfBroker(), LocalIP: net.ParseIP(n.cfg.DialSource), TLS: n.sec.ClientTLS(), Allow: n.sec.RaftAllowed,
		Logger: n.logger, ClusterID: func() string { return root.Stamp().ClusterID }, SetClusterID: root.SetClusterID,
		Metadata: n.broker.Metadata, Apply: n.broker.ApplyMetadata, Push: n.pushMetadata, Pool: n.pool, WireError: rpcapi.WireError,
	})
	if err != nil {
		return err
	}
	n.controller, n.candidacy = cd.Controller(), cd
	return nil
}

// closeCandidacy stops this candidate's Raft, if it is one.
func (n *Node) closeCandidacy() error {
	if n.candidacy == nil {
		return nil
	}
	return n.candidacy.Close()
}

// controllerStatus is this node's part in the controller group.
func (n *Node) controllerStatus() transport.ControllerStatus {
	if cd := n.candidacy; cd != nil {
		return cd.Status()
	}
	st := transport.ControllerStatus{Node: n.cfg.ID, Mode: "none", MetadataEpoch: -1}
	if m := n.broker.Metadata(); m != nil {
		st.MetadataEpoch = m.Epoch
	}
	if n.isController() {
		st.Mode, st.Active, st.Leader, st.LeaderAddr = "single", true, n.cfg.ID, n.cfg.Advertise
		if c := n.controller; c != nil {
			st.MetadataEpoch = c.Metadata().Epoch
		}
	}
	return st
}

// audit hands an event to the controller's audit trail: directly on the
// controller, by an Audit request elsewhere. It is best effort: the change
// it records is already done, so a failure is logged, not returned.
func (n *Node) audit(ctx context.Context, ev transport.HistoryEvent) {
	if c := n.activeController(); c != nil {
		// A candidate that has just handed the group over may still call
		// itself active; the group refuses the entry before it is sent
		// (NotController), so it goes to the new active controller below.
		err := c.Record(ev)
		if err == nil {
			return
		}
		if !errors.Is(err, controller.ErrNotController) {
			n.logger.Error("write audit trail", "err", err)
			return
		}
	}
	data, err := json.Marshal(ev)
	if err != nil {
		return
	}
	// Right after a transfer of the controller group no candidate may
	// call itself active yet: the new leader first catches up on the
	// log. Ask again, a little later, until one does or time is up.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	for {
		_, err = n.callController(ctx, transport.APIAudit, &transport.JSONMessage{Data: data}, nil)
		if err == nil {
			return
		}
		if ctx.Err() != nil || !errors.Is(err, transport.ErrNotController) && !errors.Is(err, transport.ErrNotSent) {
			n.logger.Warn("could not add an event to the controller's audit trail", "action", ev.Action, "err", err)
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}
