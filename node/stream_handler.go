package node

import (
	"context"
	"encoding/json"
	"fmt"

	"gostream/metadata"
	"gostream/transport"
)

// stream serves an operation forwarded by a broker that does not lead the
// stream.
func (h *rpcHandler) stream(req *transport.Request) transport.Reply {
	var r transport.StreamRequest
	if err := decode(req, &r); err != nil {
		return transport.Immediate(nil, err)
	}
	return func(ctx context.Context) (transport.Message, error) {
		return h.n.ds.serve(ctx, &r)
	}
}

// streamAdmin creates or deletes a stream's topic, on the controller.
func (h *rpcHandler) streamAdmin(req *transport.Request) transport.Reply {
	var r transport.StreamAdminRequest
	if err := decode(req, &r); err != nil {
		return transport.Immediate(nil, err)
	}
	c, err := h.controller()
	if err != nil {
		return transport.Immediate(nil, err)
	}
	return func(ctx context.Context) (transport.Message, error) {
		var s *metadata.Stream
		if r.Op == "create" {
			s = &metadata.Stream{}
			if err := json.Unmarshal(r.Stream, s); err != nil {
				return nil, fmt.Errorf("%w: stream metadata: %v", transport.ErrInvalidRequest, err)
			}
		}
		var res any
		var err error
		switch r.Op {
		case "create":
			res, err = c.CreateStream(ctx, r.Topic, int(r.ReplicationFactor), s)
		case "delete":
			res, err = c.DeleteStream(ctx, r.Topic, r.TopicID)
		default:
			err = fmt.Errorf("%w: stream admin operation %q", transport.ErrInvalidRequest, r.Op)
		}
		if err != nil {
			return nil, err
		}
		raw, err := json.Marshal(res)
		if err != nil {
			return nil, err
		}
		return &transport.StreamAdminResponse{Result: raw}, nil
	}
}
