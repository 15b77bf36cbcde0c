package broker

import (
	"context"
	"fmt"

	"gostream/groups"
	"gostream/metadata"
	"gostream/transport"
)

// Deleting a group's committed offsets (docs/kafka-groups.md): Kafka's
// OffsetDelete and gostream-ctl group delete-offsets. Both need delete on
// the group and read on each topic, as Kafka's OffsetDelete does; the
// group's coordinator deletes (groups.Coordinator.DeleteOffsets).

// KafkaDeleteOffsets serves Kafka's OffsetDelete for principal: delete on
// the group, else nothing is done; then, as Kafka's API layer answers, a
// partition of a topic principal may not read gets the authorization
// error and one that does not exist groups.ErrUnknownTopic or
// groups.ErrUnknownPartition, and the coordinator answers the others.
func (b *Broker) KafkaDeleteOffsets(ctx context.Context, principal, group string, tps []groups.TopicPartition) ([]error, error) {
	if err := b.Authorize(principal, metadata.OpDelete, metadata.ResourceGroup, group); err != nil {
		return nil, err
	}
	meta := b.cfg.Replicas.Metadata()
	errs := make([]error, len(tps))
	var asked []groups.TopicPartition
	var at []int
	for i, tp := range tps {
		if err := b.Authorize(principal, metadata.OpRead, metadata.ResourceTopic, tp.Topic); err != nil {
			errs[i] = err
			continue
		}
		var t *metadata.Topic
		if meta != nil {
			t = meta.Topic(tp.Topic)
		}
		switch {
		case t == nil:
			errs[i] = fmt.Errorf("%w: %q", groups.ErrUnknownTopic, tp.Topic)
		case tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions):
			errs[i] = fmt.Errorf("%w: topic %q has partitions 0 to %d, not %d", groups.ErrUnknownPartition, tp.Topic, len(t.Partitions)-1, tp.Partition)
		default:
			asked = append(asked, tp)
			at = append(at, i)
		}
	}
	c, err := b.coordinator(group)
	if err != nil {
		return nil, err
	}
	_, got, err := c.DeleteOffsets(ctx, group, principal, asked)
	if err != nil {
		return nil, err
	}
	for j, i := range at {
		errs[i] = got[j]
	}
	return errs, nil
}

// DeleteOffsets deletes a group's committed offsets of one topic for
// principal (delete on the group, read on the topic): of the partitions
// named, or of every partition the group has committed. It deletes all of
// them or none. A partition named that the topic does not have is
// groups.ErrUnknownPartition; a topic that does not exist (any more) is no
// error, so that the offsets of a deleted topic can go too.
func (b *Broker) DeleteOffsets(ctx context.Context, principal string, req *transport.OffsetDeleteRequest) (*transport.OffsetDeleteResponse, error) {
	if err := b.Authorize(principal, metadata.OpDelete, metadata.ResourceGroup, req.Group); err != nil {
		return nil, err
	}
	if err := b.Authorize(principal, metadata.OpRead, metadata.ResourceTopic, req.Topic); err != nil {
		return nil, err
	}
	tps := []groups.TopicPartition{{Topic: req.Topic, Partition: groups.AllPartitions}}
	if len(req.Partitions) > 0 {
		var t *metadata.Topic
		if meta := b.cfg.Replicas.Metadata(); meta != nil {
			t = meta.Topic(req.Topic)
		}
		tps = tps[:0]
		for _, p := range req.Partitions {
			if p < 0 || t != nil && int(p) >= len(t.Partitions) {
				return nil, fmt.Errorf("%w: topic %q has no partition %d", groups.ErrUnknownPartition, req.Topic, p)
			}
			tps = append(tps, groups.TopicPartition{Topic: req.Topic, Partition: p})
		}
	}
	c, err := b.coordinator(req.Group)
	if err != nil {
		return nil, err
	}
	deleted, errs, err := c.DeleteOffsets(ctx, req.Group, req.Requester, tps)
	if err != nil {
		return nil, err
	}
	for _, err := range errs {
		if err != nil {
			// A refusal is of the topic (or the group): every partition
			// has it, and nothing was deleted.
			return nil, err
		}
	}
	resp := &transport.OffsetDeleteResponse{}
	for _, o := range deleted {
		resp.Deleted = append(resp.Deleted, transport.CommittedOffset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset,
			Metadata: o.Metadata, MemberID: o.MemberID, MemberEpoch: o.MemberEpoch, TimeMs: o.TimeMs})
	}
	return resp, nil
}
