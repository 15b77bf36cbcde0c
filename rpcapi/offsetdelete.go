package rpcapi

import (
	"context"

	"gostream/transport"
)

func (h *Handler) offsetDelete(req *transport.Request) transport.Reply {
	var r transport.OffsetDeleteRequest
	return h.serve(req, &r, func(ctx context.Context) (transport.Message, error) {
		if r.Requester == "" {
			r.Requester = req.RemoteAddr
		}
		return h.cfg.Core.DeleteOffsets(ctx, req.Principal, &r)
	})
}
