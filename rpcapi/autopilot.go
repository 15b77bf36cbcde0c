package rpcapi

import (
	"context"
	"encoding/json"
	"fmt"

	"gostream/transport"
)

// autopilotLease hands an autopilot's lease request (docs/autopilot.md)
// to the active controller.
func (h *Handler) autopilotLease(req *transport.Request) transport.Reply {
	var m transport.JSONMessage
	if err := decode(req, &m); err != nil {
		return transport.Immediate(nil, err)
	}
	var r transport.AutopilotLeaseRequest
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return transport.Immediate(nil, fmt.Errorf("%w: %v", transport.ErrInvalidRequest, err))
	}
	c, err := h.controller()
	if err != nil {
		return transport.Immediate(nil, err)
	}
	return func(ctx context.Context) (transport.Message, error) {
		return jsonReply(c.AutopilotLease(ctx, r))
	}
}
