package rpcapi

import (
	"context"
	"encoding/json"
	"fmt"

	"gostream/transport"
)

// controllerStatus answers any node's part in the controller group. The
// active candidate's status waits for a quorum to confirm it (up to half
// a second when none answers), so it is made in the Reply, off the
// connection's request loop.
func (h *Handler) controllerStatus(req *transport.Request) transport.Reply {
	var m transport.JSONMessage
	if err := decode(req, &m); err != nil {
		return transport.Immediate(nil, err)
	}
	return func(context.Context) (transport.Message, error) {
		data, err := json.Marshal(h.cfg.ControllerStatus())
		return &transport.JSONMessage{Data: data}, err
	}
}

// controllerChange carries out a change of the controller group on the
// active controller (controller.Candidacy.Change), and records it in the
// audit trail.
func (h *Handler) controllerChange(req *transport.Request) transport.Reply {
	var m transport.JSONMessage
	if err := decode(req, &m); err != nil {
		return transport.Immediate(nil, err)
	}
	var r transport.ControllerChangeRequest
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return transport.Immediate(nil, fmt.Errorf("%w: controller change: %v", transport.ErrInvalidRequest, err))
	}
	cd := h.cfg.Candidacy()
	if cd == nil {
		if h.cfg.IsController() {
			return transport.Immediate(nil, fmt.Errorf("%w: this cluster has a single controller (broker %d), not a controller group: "+
				"to replicate it, give every node the list of candidates in --controller (see the README, \"Upgrading to a replicated controller\")",
				transport.ErrInvalidRequest, h.cfg.ID))
		}
		return transport.Immediate(nil, h.cfg.NotController())
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
		h.cfg.Audit(ctx, ev)
		data, err := json.Marshal(h.cfg.ControllerStatus())
		return &transport.JSONMessage{Data: data}, err
	}
}
