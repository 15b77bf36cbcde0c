package rpcapi

import (
	"context"

	"gostream/controller"
	"gostream/transport"
)

func (h *Handler) initProducerID(req *transport.Request) transport.Reply {
	var r transport.InitProducerIDRequest
	return h.serve(req, &r, func(ctx context.Context) (transport.Message, error) {
		id, epoch, err := h.cfg.Core.InitProducerID(ctx, req.Principal)
		if err != nil {
			return nil, err
		}
		return &transport.InitProducerIDResponse{ProducerID: id, Epoch: epoch}, nil
	})
}

func (h *Handler) allocateProducerIDs(req *transport.Request) transport.Reply {
	var r transport.AllocateProducerIDsRequest
	return serveWith(req, &r, h.controller, func(ctx context.Context, c *controller.Controller) (transport.Message, error) {
		first, err := c.AllocateProducerIDs(ctx, r.Broker, r.Count)
		if err != nil {
			return nil, err
		}
		return &transport.AllocateProducerIDsResponse{First: first, Count: r.Count}, nil
	})
}
