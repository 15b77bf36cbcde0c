package broker

import (
	"context"
	"fmt"

	"gostream/groups"
	"gostream/metadata"
)

// Deleting a group's committed offsets (docs/kafka-groups.md): Kafka's
// OffsetDelete needs delete on the group and read on each topic; the
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
