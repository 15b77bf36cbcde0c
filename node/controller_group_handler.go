package node

import (
	"context"
	"encoding/json"
	"fmt"

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

// controllerChange carries out a change of the controller group on the
// active controller (controller.Candidacy.Change), and records it in the
// audit trail.
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
	cd := n.candidacy
	if cd == nil {
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
	if err := cd.CheckChange(r); err != nil {
		return transport.Immediate(nil, err)
	}
	return func(ctx context.Context) (transport.Message, error) {
		requester := r.Requester
		if requester == "" {
			requester = req.RemoteAddr
		}
		ev, err := cd.Change(ctx, r, requester)
		if err != nil {
			return nil, err
		}
		n.audit(ctx, ev)
		data, err := json.Marshal(n.controllerStatus())
		return &transport.JSONMessage{Data: data}, err
	}
}
