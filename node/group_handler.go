package node

import (
	"context"

	"gostream/transport"
)

// The group APIs (docs/groups.md), decoded here and served by the core.

func (h *rpcHandler) findCoordinator(req *transport.Request) transport.Reply {
	var r transport.FindCoordinatorRequest
	return h.serve(req, &r, func(ctx context.Context) (transport.Message, error) {
		return h.n.core.FindCoordinator(ctx, req.Principal, r.Group)
	})
}

func (h *rpcHandler) offsetCommit(req *transport.Request) transport.Reply {
	var r transport.OffsetCommitRequest
	return h.serve(req, &r, func(ctx context.Context) (transport.Message, error) {
		return nil, h.n.core.CommitOffsets(ctx, req.Principal, &r)
	})
}

func (h *rpcHandler) offsetFetch(req *transport.Request) transport.Reply {
	var r transport.OffsetFetchRequest
	return h.serve(req, &r, func(ctx context.Context) (transport.Message, error) {
		return h.n.core.CommittedOffsets(ctx, req.Principal, &r)
	})
}

func (h *rpcHandler) groupHeartbeat(req *transport.Request) transport.Reply {
	var r transport.GroupHeartbeatRequest
	return h.serve(req, &r, func(ctx context.Context) (transport.Message, error) {
		if r.Host == "" {
			r.Host = req.RemoteAddr
		}
		return h.n.core.GroupHeartbeat(ctx, req.Principal, &r)
	})
}

func (h *rpcHandler) listGroups(req *transport.Request) transport.Reply {
	var r transport.ListGroupsRequest
	return h.serve(req, &r, func(ctx context.Context) (transport.Message, error) {
		return h.n.core.ListGroups(ctx, req.Principal, r.Partition)
	})
}

func (h *rpcHandler) describeGroup(req *transport.Request) transport.Reply {
	var r transport.GroupRequest
	return h.serve(req, &r, func(ctx context.Context) (transport.Message, error) {
		return h.n.core.DescribeGroup(ctx, req.Principal, r.Group)
	})
}

func (h *rpcHandler) deleteGroup(req *transport.Request) transport.Reply {
	var r transport.GroupRequest
	return h.serve(req, &r, func(ctx context.Context) (transport.Message, error) {
		return nil, h.n.core.DeleteGroup(ctx, req.Principal, r.Group)
	})
}
