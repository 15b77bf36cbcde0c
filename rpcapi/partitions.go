package rpcapi

import (
	"context"
	"encoding/json"
	"fmt"

	"gostream/transport"
)

// createPartitions grows a topic: the core checks alter on it and has
// the active controller do it (this node must be it: NotController sends
// the client there). The request and its report travel as JSON, as the
// operator's do; the connection is the requester when the request names
// none.
func (h *Handler) createPartitions(req *transport.Request) transport.Reply {
	var m transport.JSONMessage
	if err := decode(req, &m); err != nil {
		return transport.Immediate(nil, err)
	}
	var r transport.CreatePartitionsRequest
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return transport.Immediate(nil, fmt.Errorf("%w: %v", transport.ErrInvalidRequest, err))
	}
	if r.Requester == "" {
		r.Requester = req.RemoteAddr
	}
	return func(ctx context.Context) (transport.Message, error) {
		return jsonReply(h.cfg.Core.CreatePartitions(ctx, req.Principal, r))
	}
}
