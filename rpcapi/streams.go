package rpcapi

import (
	"context"

	"gostream/streams"
	"gostream/transport"
)

// streamAdmin creates or deletes a stream's topic, on the controller.
func (h *Handler) streamAdmin(req *transport.Request) transport.Reply {
	var r transport.StreamAdminRequest
	if err := decode(req, &r); err != nil {
		return transport.Immediate(nil, err)
	}
	c, err := h.controller()
	if err != nil {
		return transport.Immediate(nil, err)
	}
	return func(ctx context.Context) (transport.Message, error) {
		return streams.ServeAdmin(ctx, c, &r)
	}
}
