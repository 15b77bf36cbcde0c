package broker

import (
	"context"

	"gostream/groups"
	"gostream/metadata"
	"gostream/transport"
)

// Kafka's classic group protocol (docs/kafka-groups.md): the core
// authorizes each request as the native group requests are (read on the
// group; read on each topic a commit names) and hands it to this broker's
// coordinator of the group.

// JoinGroup serves a Kafka JoinGroup for principal (read on the group).
func (b *Broker) JoinGroup(ctx context.Context, principal string, req groups.ClassicJoin) (groups.ClassicJoined, error) {
	if err := b.Authorize(principal, metadata.OpRead, metadata.ResourceGroup, req.Group); err != nil {
		return groups.ClassicJoined{}, err
	}
	c, err := b.coordinator(req.Group)
	if err != nil {
		return groups.ClassicJoined{}, err
	}
	return c.JoinClassic(ctx, req)
}

// SyncGroup serves a Kafka SyncGroup for principal (read on the group).
func (b *Broker) SyncGroup(ctx context.Context, principal string, req groups.ClassicSync) (groups.ClassicSynced, error) {
	if err := b.Authorize(principal, metadata.OpRead, metadata.ResourceGroup, req.Group); err != nil {
		return groups.ClassicSynced{}, err
	}
	c, err := b.coordinator(req.Group)
	if err != nil {
		return groups.ClassicSynced{}, err
	}
	return c.SyncClassic(ctx, req)
}

// KafkaHeartbeat serves a Kafka Heartbeat for principal (read on the
// group).
func (b *Broker) KafkaHeartbeat(ctx context.Context, principal, group, member, instance string, generation int32) error {
	if err := b.Authorize(principal, metadata.OpRead, metadata.ResourceGroup, group); err != nil {
		return err
	}
	c, err := b.coordinator(group)
	if err != nil {
		return err
	}
	return c.HeartbeatClassic(ctx, group, member, instance, generation)
}

// LeaveGroup serves a Kafka LeaveGroup for principal (read on the group):
// an error per member.
func (b *Broker) LeaveGroup(ctx context.Context, principal, group string, members []groups.ClassicLeaving) ([]error, error) {
	if err := b.Authorize(principal, metadata.OpRead, metadata.ResourceGroup, group); err != nil {
		return nil, err
	}
	c, err := b.coordinator(group)
	if err != nil {
		return nil, err
	}
	return c.LeaveClassic(ctx, group, members)
}

// BeginKafkaCommit serves a Kafka OffsetCommit for principal: read on
// the group, and on each topic (an offset of a topic it may not read gets
// the authorization error, the others are committed). As
// groups.Coordinator.BeginCommitClassic, the commit is checked and
// appended now, and the wait returned gives its answer once it is
// acknowledged.
func (b *Broker) BeginKafkaCommit(ctx context.Context, principal string, req groups.ClassicCommit) (func(context.Context) ([]error, error), error) {
	if err := b.Authorize(principal, metadata.OpRead, metadata.ResourceGroup, req.Group); err != nil {
		return nil, err
	}
	errs := make([]error, len(req.Offsets))
	var allowed []groups.ClassicOffset
	var at []int
	for i, o := range req.Offsets {
		if err := b.Authorize(principal, metadata.OpRead, metadata.ResourceTopic, o.Topic); err != nil {
			errs[i] = err
			continue
		}
		allowed = append(allowed, o)
		at = append(at, i)
	}
	c, err := b.coordinator(req.Group)
	if err != nil {
		return nil, err
	}
	req.Offsets = allowed
	wait, err := c.BeginCommitClassic(ctx, req)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) ([]error, error) {
		got, err := wait(ctx)
		if err != nil {
			return nil, err
		}
		for j, i := range at {
			errs[i] = got[j]
		}
		return errs, nil
	}, nil
}

// KafkaGroups lists the groups of every offsets partition this broker
// coordinates, those principal may describe (Kafka's ListGroups: a client
// asks every broker).
func (b *Broker) KafkaGroups(ctx context.Context, principal string) ([]groups.KafkaGroup, error) {
	if b.cfg.Groups == nil {
		return nil, nil
	}
	var out []groups.KafkaGroup
	for _, c := range b.cfg.Groups.Coordinators() {
		gs, err := c.KafkaGroups(ctx)
		if err != nil {
			return nil, err
		}
		for _, g := range gs {
			if b.CanDescribe(principal, metadata.ResourceGroup, g.Name) {
				out = append(out, g)
			}
		}
	}
	return out, nil
}

// KafkaDescribeGroup describes a group for principal (describe on it),
// as Kafka's DescribeGroups does.
func (b *Broker) KafkaDescribeGroup(ctx context.Context, principal, group string) (groups.KafkaGroup, error) {
	if err := b.Authorize(principal, metadata.OpDescribe, metadata.ResourceGroup, group); err != nil {
		return groups.KafkaGroup{Name: group}, err
	}
	c, err := b.coordinator(group)
	if err != nil {
		return groups.KafkaGroup{Name: group}, err
	}
	return c.KafkaDescribe(ctx, group)
}

// ConsumerGroupHeartbeat serves Kafka's ConsumerGroupHeartbeat (KIP-848)
// for principal, with the ACLs of GroupHeartbeat: read on the group,
// describe on each topic it subscribes to.
func (b *Broker) ConsumerGroupHeartbeat(ctx context.Context, principal string, beat groups.ConsumerBeat) (*transport.GroupHeartbeatResponse, error) {
	if err := b.Authorize(principal, metadata.OpRead, metadata.ResourceGroup, beat.Group); err != nil {
		return nil, err
	}
	for _, t := range beat.Topics {
		if err := b.Authorize(principal, metadata.OpDescribe, metadata.ResourceTopic, t); err != nil {
			return nil, err
		}
	}
	c, err := b.coordinator(beat.Group)
	if err != nil {
		return nil, err
	}
	return c.ConsumerHeartbeat(ctx, beat)
}
