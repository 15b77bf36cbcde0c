package node

import (
	"context"
	"fmt"
	"slices"

	"gostream/groups"
	"gostream/metadata"
	"gostream/transport"
)

// The group APIs (docs/groups.md): the group's coordinator serves them,
// except FindCoordinator, which any broker answers from its metadata.

func (h *rpcHandler) findCoordinator(req *transport.Request) transport.Reply {
	var r transport.FindCoordinatorRequest
	if err := decode(req, &r); err != nil {
		return transport.Immediate(nil, err)
	}
	if err := h.allow(req, metadata.OpDescribe, metadata.ResourceGroup, r.Group); err != nil {
		return transport.Immediate(nil, err)
	}
	if err := metadata.ValidateTopicName(r.Group); err != nil {
		return transport.Immediate(nil, fmt.Errorf("%w: %v", transport.ErrInvalidGroupName, err))
	}
	return func(ctx context.Context) (transport.Message, error) {
		meta := h.n.broker.Metadata()
		if meta == nil {
			return nil, fmt.Errorf("%w: broker %d has no metadata yet", transport.ErrNotReady, h.n.cfg.ID)
		}
		t := meta.Topic(transport.OffsetsTopic)
		if t == nil {
			// The first use of groups: the controller creates the topic.
			c := h.n.activeController()
			if c == nil {
				var resp transport.FindCoordinatorResponse
				if ctrl, err := h.n.callController(ctx, transport.APIFindCoordinator, &r, &resp); err != nil {
					return nil, fmt.Errorf("ask the controller %s: %w", ctrl, err)
				}
				return &resp, nil
			}
			var err error
			if t, err = c.EnsureOffsetsTopic(ctx, h.n.cfg.OffsetsPartitions); err != nil {
				return nil, err
			}
			meta = c.Metadata()
		}
		p := int32(metadata.KeyPartition([]byte(r.Group), len(t.Partitions)))
		part := t.Partitions[p]
		resp := &transport.FindCoordinatorResponse{Partition: p, Leader: part.Leader, LeaderEpoch: part.LeaderEpoch}
		if b, ok := meta.Broker(part.Leader); ok {
			resp.Addr = b.Addr
		}
		return resp, nil
	}
}

func (h *rpcHandler) coordinatorOf(group *string) func() (*groups.Coordinator, error) {
	return func() (*groups.Coordinator, error) { return h.n.coords.ForGroup(*group) }
}

func (h *rpcHandler) offsetCommit(req *transport.Request) transport.Reply {
	var r transport.OffsetCommitRequest
	return serveWith(req, &r, allowing(func() error {
		if r.Reset {
			// An explicit reset moves a group back: the operator's.
			return h.allow(req, metadata.OpOperate, metadata.ResourceCluster, "")
		}
		if err := h.allow(req, metadata.OpRead, metadata.ResourceGroup, r.Group); err != nil {
			return err
		}
		for _, o := range r.Offsets {
			if err := h.allow(req, metadata.OpRead, metadata.ResourceTopic, o.Topic); err != nil {
				return err
			}
		}
		return nil
	}, h.coordinatorOf(&r.Group)), func(ctx context.Context, c *groups.Coordinator) (transport.Message, error) {
		return nil, c.Commit(ctx, &r)
	})
}

func (h *rpcHandler) offsetFetch(req *transport.Request) transport.Reply {
	var r transport.OffsetFetchRequest
	return serveWith(req, &r, allowing(func() error {
		return h.allow(req, metadata.OpDescribe, metadata.ResourceGroup, r.Group)
	}, h.coordinatorOf(&r.Group)), func(ctx context.Context, c *groups.Coordinator) (transport.Message, error) {
		resp, err := c.Committed(ctx, &r)
		if resp != nil && h.n.sec.authz != nil {
			resp.Offsets = slices.DeleteFunc(resp.Offsets, func(o transport.CommittedOffset) bool {
				return !h.canSee(req, metadata.ResourceTopic, o.Topic)
			})
		}
		return resp, err
	})
}

func (h *rpcHandler) groupHeartbeat(req *transport.Request) transport.Reply {
	var r transport.GroupHeartbeatRequest
	return serveWith(req, &r, allowing(func() error {
		if err := h.allow(req, metadata.OpRead, metadata.ResourceGroup, r.Group); err != nil {
			return err
		}
		for _, t := range r.Topics {
			if err := h.allow(req, metadata.OpDescribe, metadata.ResourceTopic, t); err != nil {
				return err
			}
		}
		return nil
	}, h.coordinatorOf(&r.Group)), func(ctx context.Context, c *groups.Coordinator) (transport.Message, error) {
		if r.Host == "" {
			r.Host = req.RemoteAddr
		}
		return c.Heartbeat(ctx, &r)
	})
}

func (h *rpcHandler) listGroups(req *transport.Request) transport.Reply {
	var r transport.ListGroupsRequest
	return serveWith(req, &r, func() (*groups.Coordinator, error) {
		return h.n.coords.ForPartition(r.Partition)
	}, func(ctx context.Context, c *groups.Coordinator) (transport.Message, error) {
		resp, err := c.List(ctx)
		if err != nil || h.n.sec.authz == nil {
			return resp, err
		}
		seen := resp.Groups[:0]
		for _, g := range resp.Groups {
			if h.canSee(req, metadata.ResourceGroup, g.Name) {
				seen = append(seen, g)
			}
		}
		resp.Groups = seen
		return resp, nil
	})
}

func (h *rpcHandler) describeGroup(req *transport.Request) transport.Reply {
	var r transport.GroupRequest
	return serveWith(req, &r, allowing(func() error {
		return h.allow(req, metadata.OpDescribe, metadata.ResourceGroup, r.Group)
	}, h.coordinatorOf(&r.Group)), func(ctx context.Context, c *groups.Coordinator) (transport.Message, error) {
		resp, err := c.Describe(ctx, r.Group)
		if resp != nil {
			resp.Coordinator = h.n.cfg.ID
			h.hideTopics(req, resp)
		}
		return resp, err
	})
}

// hideTopics leaves out of a group's description the topics the
// principal may not describe: their names, subscriptions, assignments and
// committed offsets.
func (h *rpcHandler) hideTopics(req *transport.Request, resp *transport.DescribeGroupResponse) {
	if h.n.sec.authz == nil {
		return
	}
	see := func(topic string) bool { return h.canSee(req, metadata.ResourceTopic, topic) }
	resp.Offsets = slices.DeleteFunc(resp.Offsets, func(o transport.CommittedOffset) bool { return !see(o.Topic) })
	for i := range resp.Members {
		m := &resp.Members[i]
		m.Topics = slices.DeleteFunc(m.Topics, func(t string) bool { return !see(t) })
		m.Owned = slices.DeleteFunc(m.Owned, func(tp transport.TopicPartitions) bool { return !see(tp.Topic) })
		m.Target = slices.DeleteFunc(m.Target, func(tp transport.TopicPartitions) bool { return !see(tp.Topic) })
	}
}

func (h *rpcHandler) deleteGroup(req *transport.Request) transport.Reply {
	var r transport.GroupRequest
	return serveWith(req, &r, allowing(func() error {
		return h.allow(req, metadata.OpDelete, metadata.ResourceGroup, r.Group)
	}, h.coordinatorOf(&r.Group)), func(ctx context.Context, c *groups.Coordinator) (transport.Message, error) {
		return nil, c.Delete(ctx, r.Group)
	})
}
