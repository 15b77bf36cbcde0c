package broker

import (
	"context"
	"fmt"
	"slices"

	"gostream/groups"
	"gostream/metadata"
	"gostream/transport"
)

// Consumer groups (docs/groups.md): a group's coordinator is the leader
// of its partition of __consumer_offsets; the core authorizes each
// operation and hands it to this broker's coordinator of the group
// (groups.Host answers NotCoordinator when it is not this broker), but
// FindCoordinator, which any broker answers from its metadata.

// FindCoordinator says which broker coordinates group, for principal
// (describe on the group). The first use of groups creates
// __consumer_offsets, through the active controller.
func (b *Broker) FindCoordinator(ctx context.Context, principal, group string) (*transport.FindCoordinatorResponse, error) {
	if err := b.Authorize(principal, metadata.OpDescribe, metadata.ResourceGroup, group); err != nil {
		return nil, err
	}
	if err := metadata.ValidateTopicName(group); err != nil {
		return nil, fmt.Errorf("%w: %v", transport.ErrInvalidGroupName, err)
	}
	meta := b.cfg.Replicas.Metadata()
	if meta == nil {
		return nil, fmt.Errorf("%w: broker %d has no metadata yet", transport.ErrNotReady, b.cfg.Broker)
	}
	t := meta.Topic(transport.OffsetsTopic)
	if t == nil {
		// The first use of groups: the controller creates the topic.
		c, err := b.active()
		if err != nil {
			if b.cfg.CallController == nil {
				return nil, err
			}
			var resp transport.FindCoordinatorResponse
			if err := b.cfg.CallController(ctx, transport.APIFindCoordinator, &transport.FindCoordinatorRequest{Group: group}, &resp); err != nil {
				return nil, err
			}
			return &resp, nil
		}
		if t, err = c.EnsureOffsetsTopic(ctx, b.cfg.OffsetsPartitions); err != nil {
			return nil, err
		}
		meta = c.Metadata()
	}
	p := int32(metadata.KeyPartition([]byte(group), len(t.Partitions)))
	part := t.Partitions[p]
	resp := &transport.FindCoordinatorResponse{Partition: p, Leader: part.Leader, LeaderEpoch: part.LeaderEpoch}
	if br, ok := meta.Broker(part.Leader); ok {
		resp.Addr = br.Addr
	}
	return resp, nil
}

// coordinator is this broker's coordinator of group.
func (b *Broker) coordinator(group string) (*groups.Coordinator, error) {
	if b.cfg.Groups == nil {
		return nil, fmt.Errorf("%w: broker %d coordinates no group", transport.ErrNotCoordinator, b.cfg.Broker)
	}
	return b.cfg.Groups.ForGroup(group)
}

// CommitOffsets commits offsets for principal: read on the group and on
// each topic; an explicit reset, which moves a group back, needs operate
// on the cluster.
func (b *Broker) CommitOffsets(ctx context.Context, principal string, req *transport.OffsetCommitRequest) error {
	if req.Reset {
		if err := b.Authorize(principal, metadata.OpOperate, metadata.ResourceCluster, ""); err != nil {
			return err
		}
	} else {
		if err := b.Authorize(principal, metadata.OpRead, metadata.ResourceGroup, req.Group); err != nil {
			return err
		}
		for _, o := range req.Offsets {
			if err := b.Authorize(principal, metadata.OpRead, metadata.ResourceTopic, o.Topic); err != nil {
				return err
			}
		}
	}
	c, err := b.coordinator(req.Group)
	if err != nil {
		return err
	}
	return c.Commit(ctx, req)
}

// CommittedOffsets returns a group's committed offsets for principal
// (describe on the group), leaving out the topics it may not describe.
func (b *Broker) CommittedOffsets(ctx context.Context, principal string, req *transport.OffsetFetchRequest) (*transport.OffsetFetchResponse, error) {
	if err := b.Authorize(principal, metadata.OpDescribe, metadata.ResourceGroup, req.Group); err != nil {
		return nil, err
	}
	c, err := b.coordinator(req.Group)
	if err != nil {
		return nil, err
	}
	resp, err := c.Committed(ctx, req)
	if resp != nil {
		resp.Offsets = slices.DeleteFunc(resp.Offsets, func(o transport.CommittedOffset) bool {
			return !b.CanDescribe(principal, metadata.ResourceTopic, o.Topic)
		})
	}
	return resp, err
}

// GroupHeartbeat is a member's heartbeat, for principal (read on the
// group, describe on each topic it subscribes to).
func (b *Broker) GroupHeartbeat(ctx context.Context, principal string, req *transport.GroupHeartbeatRequest) (*transport.GroupHeartbeatResponse, error) {
	if err := b.Authorize(principal, metadata.OpRead, metadata.ResourceGroup, req.Group); err != nil {
		return nil, err
	}
	for _, t := range req.Topics {
		if err := b.Authorize(principal, metadata.OpDescribe, metadata.ResourceTopic, t); err != nil {
			return nil, err
		}
	}
	c, err := b.coordinator(req.Group)
	if err != nil {
		return nil, err
	}
	return c.Heartbeat(ctx, req)
}

// ListGroups lists the groups of one partition of __consumer_offsets that
// this broker coordinates, those principal may describe.
func (b *Broker) ListGroups(ctx context.Context, principal string, partition int32) (*transport.ListGroupsResponse, error) {
	if b.cfg.Groups == nil {
		return nil, fmt.Errorf("%w: broker %d coordinates no group", transport.ErrNotCoordinator, b.cfg.Broker)
	}
	c, err := b.cfg.Groups.ForPartition(partition)
	if err != nil {
		return nil, err
	}
	resp, err := c.List(ctx)
	if err != nil {
		return resp, err
	}
	resp.Groups = slices.DeleteFunc(resp.Groups, func(g transport.GroupSummary) bool {
		return !b.CanDescribe(principal, metadata.ResourceGroup, g.Name)
	})
	return resp, nil
}

// DescribeGroup describes a group for principal (describe on it), leaving
// out the topics it may not describe: their names, subscriptions,
// assignments and committed offsets.
func (b *Broker) DescribeGroup(ctx context.Context, principal, group string) (*transport.DescribeGroupResponse, error) {
	if err := b.Authorize(principal, metadata.OpDescribe, metadata.ResourceGroup, group); err != nil {
		return nil, err
	}
	c, err := b.coordinator(group)
	if err != nil {
		return nil, err
	}
	resp, err := c.Describe(ctx, group)
	if resp == nil {
		return nil, err
	}
	resp.Coordinator = b.cfg.Broker
	see := func(topic string) bool { return b.CanDescribe(principal, metadata.ResourceTopic, topic) }
	resp.Offsets = slices.DeleteFunc(resp.Offsets, func(o transport.CommittedOffset) bool { return !see(o.Topic) })
	for i := range resp.Members {
		m := &resp.Members[i]
		m.Topics = slices.DeleteFunc(m.Topics, func(t string) bool { return !see(t) })
		m.Owned = slices.DeleteFunc(m.Owned, func(tp transport.TopicPartitions) bool { return !see(tp.Topic) })
		m.Target = slices.DeleteFunc(m.Target, func(tp transport.TopicPartitions) bool { return !see(tp.Topic) })
	}
	return resp, err
}

// DeleteGroup deletes a group that has no members, for principal (delete
// on it).
func (b *Broker) DeleteGroup(ctx context.Context, principal, group string) error {
	if err := b.Authorize(principal, metadata.OpDelete, metadata.ResourceGroup, group); err != nil {
		return err
	}
	c, err := b.coordinator(group)
	if err != nil {
		return err
	}
	return c.Delete(ctx, group)
}
