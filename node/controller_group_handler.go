package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"gostream/controller/quorum"
	"gostream/transport"
)

// controllerStatus answers any node's part in the controller group.
func (h *rpcHandler) controllerStatus(req *transport.Request) transport.Reply {
	var m transport.JSONMessage
	if err := decode(req, &m); err != nil {
		return transport.Immediate(nil, err)
	}
	st := h.n.controllerStatus()
	data, err := json.Marshal(st)
	return transport.Immediate(&transport.JSONMessage{Data: data}, err)
}

// controllerStatus is this node's part in the controller group.
func (n *Node) controllerStatus() transport.ControllerStatus {
	st := transport.ControllerStatus{Node: n.cfg.ID, Mode: "none", MetadataEpoch: -1}
	if m := n.broker.metadata(); m != nil {
		st.MetadataEpoch = m.Epoch
	}
	switch {
	case n.candidacy != nil:
		qs := n.candidacy.group.Status()
		st.Mode, st.State, st.Active = "candidate", qs.State, n.activeController() != nil
		st.Term, st.LastIndex, st.CommitIndex, st.AppliedIndex = qs.Term, qs.LastIndex, qs.CommitIndex, qs.AppliedIndex
		st.Leader, st.LeaderAddr, st.MetadataEpoch = qs.Leader.ID, qs.Leader.Addr, qs.Epoch
		for _, m := range qs.Members {
			st.Members = append(st.Members, transport.ControllerMember{ID: m.ID, Addr: m.Addr, Voter: m.Voter, Reachable: m.Reachable})
		}
	case n.isController():
		st.Mode, st.Active, st.Leader, st.LeaderAddr = "single", true, n.cfg.ID, n.cfg.Advertise
		if c := n.controller; c != nil {
			st.MetadataEpoch = c.Metadata().Epoch
		}
	}
	return st
}

// controllerChange carries out a change of the controller group on the
// active controller.
func (h *rpcHandler) controllerChange(req *transport.Request) transport.Reply {
	var m transport.JSONMessage
	if err := decode(req, &m); err != nil {
		return transport.Immediate(nil, err)
	}
	var r transport.ControllerChangeRequest
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return transport.Immediate(nil, fmt.Errorf("%w: controller change: %v", transport.ErrInvalidRequest, err))
	}
	n := h.n
	if n.candidacy == nil {
		if n.isController() {
			return transport.Immediate(nil, fmt.Errorf("%w: this cluster has a single controller (broker %d), not a controller group: "+
				"to replicate it, give every node the list of candidates in --controller (see the README, \"Upgrading to a replicated controller\")",
				transport.ErrInvalidRequest, n.cfg.ID))
		}
		return transport.Immediate(nil, n.notControllerError())
	}
	if _, err := h.controller(); err != nil {
		return transport.Immediate(nil, err)
	}
	switch r.Op {
	case transport.ControllerTransfer, transport.ControllerRemove:
	case transport.ControllerAdd:
		listed := false
		for _, c := range n.cfg.Controllers {
			if c.ID == r.ID {
				listed = true
				if !sameHostPort(c.Addr, r.Addr) {
					return transport.Immediate(nil, fmt.Errorf("%w: candidate %d is listed in this node's --controller at %s, not %s",
						transport.ErrInvalidRequest, r.ID, c.Addr, r.Addr))
				}
			}
		}
		if !listed {
			return transport.Immediate(nil, fmt.Errorf("%w: candidate %d@%s is not in the active controller's --controller list (%s): "+
				"give every node the new list first (restart them one at a time), then add it",
				transport.ErrInvalidRequest, r.ID, r.Addr, n.candidateList()))
		}
	default:
		return transport.Immediate(nil, fmt.Errorf("%w: controller change %q: want transfer, add or remove", transport.ErrInvalidRequest, r.Op))
	}
	if r.ID <= 0 {
		return transport.Immediate(nil, fmt.Errorf("%w: controller change: want a candidate id, a positive number", transport.ErrInvalidRequest))
	}
	return func(ctx context.Context) (transport.Message, error) {
		g := n.candidacy.group
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
			return nil, fmt.Errorf("%w: %v", transport.ErrNotController, err)
		case errors.Is(err, quorum.ErrInvalid):
			return nil, fmt.Errorf("%w: %v", transport.ErrInvalidRequest, err)
		case err != nil:
			return nil, err
		}
		n.logger.Info("controller group changed", "op", r.Op, "candidate", r.ID, "addr", r.Addr, "requester", r.Requester)
		if r.Op == transport.ControllerTransfer {
			n.waitActive(ctx, r.ID)
		}
		requester := r.Requester
		if requester == "" {
			requester = req.RemoteAddr
		}
		n.audit(ctx, groupEvent(r, requester, before, g.Status()))
		data, err := json.Marshal(n.controllerStatus())
		return &transport.JSONMessage{Data: data}, err
	}
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
func (n *Node) waitActive(ctx context.Context, id int32) {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if l, ok := n.candidacy.group.Leader(); ok && l.ID == id {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}
