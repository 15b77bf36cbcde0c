package rpcapi

import (
	"context"

	"gostream/transport"
)

// The group APIs (docs/groups.md), decoded here and served by the core.

func (h *Handler) findCoordinator(req *transport.Request) transport.Reply {
	var r transport.FindCoordinatorRequest
	return h.serve(req, &r, func(ctx context.Context) (transport.Message, error) {
		resp, err := h.cfg.Core.FindCoordinator(ctx, req.Principal, r.Group)
		if err != nil || req.Listener == "" {
			return resp, err
		}
		// The coordinator's address on the listener the request came in
		// on (none if its node has no listener of that name).
		resp.Addr = ""
		if meta := h.cfg.Core.Replicas().Metadata(); meta != nil {
			if b, ok := meta.Broker(resp.Leader); ok {
				resp.Addr, _ = b.RPCEndpoint(req.Listener)
			}
		}
		return resp, nil
	})
}

func (h *Handler) offsetCommit(req *transport.Request) transport.Reply {
	var r transport.OffsetCommitRequest
	return h.serve(req, &r, func(ctx context.Context) (transport.Message, error) {
		return nil, h.cfg.Core.CommitOffsets(ctx, req.Principal, &r)
	})
}

func (h *Handler) offsetFetch(req *transport.Request) transport.Reply {
	var r transport.OffsetFetchRequest
	return h.serve(req, &r, func(ctx context.Context) (transport.Message, error) {
		return h.cfg.Core.CommittedOffsets(ctx, req.Principal, &r)
	})
}

func (h *Handler) groupHeartbeat(req *transport.Request) transport.Reply {
	var r transport.GroupHeartbeatRequest
	return h.serve(req, &r, func(ctx context.Context) (transport.Message, error) {
		if r.Host == "" {
			r.Host = req.RemoteAddr
		}
		return h.cfg.Core.GroupHeartbeat(ctx, req.Principal, &r)
	})
}

func (h *Handler) listGroups(req *transport.Request) transport.Reply {
	var r transport.ListGroupsRequest
	return h.serve(req, &r, func(ctx context.Context) (transport.Message, error) {
		return h.cfg.Core.ListGroups(ctx, req.Principal, r.Partition)
	})
}

func (h *Handler) describeGroup(req *transport.Request) transport.Reply {
	var r transport.GroupRequest
	return h.serve(req, &r, func(ctx context.Context) (transport.Message, error) {
		return h.cfg.Core.DescribeGroup(ctx, req.Principal, r.Group)
	})
}

func (h *Handler) deleteGroup(req *transport.Request) transport.Reply {
	var r transport.GroupRequest
	return h.serve(req, &r, func(ctx context.Context) (transport.Message, error) {
		return nil, h.cfg.Core.DeleteGroup(ctx, req.Principal, r.Group)
	})
}
