package rpcapi

import (
	"context"
	"encoding/json"
	"fmt"

	"gostream/transport"
)

// planMoves has the controller plan a rebalance or a decommission
// (controller.PlanMoves); the plan is the answer, as JSON.
func (h *Handler) planMoves(req *transport.Request) transport.Reply {
	var m transport.JSONMessage
	if err := decode(req, &m); err != nil {
		return transport.Immediate(nil, err)
	}
	var r transport.PlanRequest
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return transport.Immediate(nil, fmt.Errorf("%w: plan moves: %v", transport.ErrInvalidRequest, err))
	}
	c, err := h.controller()
	if err != nil {
		return transport.Immediate(nil, err)
	}
	return func(ctx context.Context) (transport.Message, error) {
		return jsonReply(c.PlanMoves(ctx, r))
	}
}

// replicaSizes answers the size of every replica this node hosts.
func (h *Handler) replicaSizes(req *transport.Request) transport.Reply {
	var m transport.JSONMessage
	if err := decode(req, &m); err != nil {
		return transport.Immediate(nil, err)
	}
	var r transport.ReplicaSizesRequest
	if len(m.Data) > 0 {
		if err := json.Unmarshal(m.Data, &r); err != nil {
			return transport.Immediate(nil, fmt.Errorf("%w: replica sizes: %v", transport.ErrInvalidRequest, err))
		}
	}
	return func(context.Context) (transport.Message, error) {
		return jsonReply(transport.ReplicaSizes{Replicas: h.cfg.Replicas.ReplicaSizes(r.Topics)}, nil)
	}
}
