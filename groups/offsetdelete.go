package groups

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// Deleting committed offsets: Kafka's OffsetDelete (docs/kafka-groups.md)
// and gostream-ctl group delete-offsets. A deletion is an offsets-deleted
// record, applied in log order as every record is, so a coordinator that
// rebuilds from the log (or from a snapshot, which restates only the
// offsets that are left) holds no deleted offset.

// ErrGroupSubscribed: an offset of a topic a member of the group
// subscribes to (Kafka's GROUP_SUBSCRIBED_TO_TOPIC). It is kept: the
// members would commit it again, or start over by their reset policy.
var ErrGroupSubscribed = errors.New("groups: group subscribed to the topic")

// AllPartitions, as the partition of a TopicPartition given to
// DeleteOffsets, stands for every partition of its topic the group has
// committed.
const AllPartitions int32 = -1

// DeleteOffsets deletes group's committed offsets of tps. It returns an
// error for the whole request, writing nothing: ErrUnknownGroup for a group
// with no member and no committed offset, ErrGroupNotEmpty for one with
// Kafka-protocol members whose protocol type is not "consumer" (their
// subscriptions are bytes the coordinator does not read); or, with the
// offsets deleted, sorted, one error per entry of tps: nil when the
// partition has no committed offset now (it was deleted, or there was
// none), ErrGroupSubscribed when a member of the group subscribes to its
// topic. A Kafka-protocol member's subscription that cannot be read (no
// protocol chosen yet, metadata that is not the consumer protocol's)
// counts as a subscription to every topic, as Kafka counts it. A group
// left with no member and no offset is deleted with them. It returns once
// the deletion is acknowledged (when there was nothing to delete, once
// the state it answered from is confirmed).
func (c *Coordinator) DeleteOffsets(ctx context.Context, group, requester string, tps []TopicPartition) ([]Commit, []error, error) {
	if err := validGroup(group); err != nil {
		return nil, nil, err
	}
	if len(tps) > MaxCommitOffsets {
		return nil, nil, fmt.Errorf("%w: a deletion of %d offsets, at most %d", ErrInvalidRequest, len(tps), MaxCommitOffsets)
	}
	for _, tp := range tps {
		if err := checkTopic(tp.Topic); err != nil {
			return nil, nil, fmt.Errorf("%w: %v", ErrInvalidRequest, err)
		}
		if tp.Partition < AllPartitions {
			return nil, nil, fmt.Errorf("%w: partition %d of %q", ErrInvalidRequest, tp.Partition, tp.Topic)
		}
	}
	if len(requester) > maxIDBytes {
		requester = requester[:maxIDBytes]
	}

	c.mu.Lock()
	g := c.state.Group(group)
	members := g != nil && len(g.Members) > 0 || c.hasClassicMembers(group)
	if !members && (g == nil || len(g.Offsets) == 0) {
		c.mu.Unlock()
		return nil, nil, fmt.Errorf("%w: %q has no members and no committed offsets", ErrUnknownGroup, group)
	}
	subscribed, all, err := c.subscribedLocked(group, g)
	if err != nil {
		c.mu.Unlock()
		return nil, nil, err
	}
	errs := make([]error, len(tps))
	gone := map[TopicPartition]bool{}
	for i, tp := range tps {
		switch {
		case all:
			errs[i] = fmt.Errorf("%w: group %q has a Kafka-protocol member whose subscription cannot be read; every topic counts as subscribed", ErrGroupSubscribed, group)
		case subscribed[tp.Topic]:
			errs[i] = fmt.Errorf("%w: members of group %q subscribe to %q", ErrGroupSubscribed, group, tp.Topic)
		case g == nil:
		case tp.Partition == AllPartitions:
			for o := range g.Offsets {
				if o.Topic == tp.Topic {
					gone[o] = true
				}
			}
		default:
			if _, ok := g.Offsets[tp]; ok {
				gone[tp] = true
			}
		}
	}
	deleted := make([]Commit, 0, len(gone))
	parts := slices.Collect(maps.Keys(gone))
	sortPartitions(parts)
	for _, tp := range parts {
		deleted = append(deleted, g.Offsets[tp])
	}
	var recs []Record
	for len(parts) > 0 {
		n := min(len(parts), MaxCommitOffsets)
		recs = append(recs, Record{Group: group, Kind: KindOffsetsDeleted, Deleted: &OffsetsDeleted{Requester: requester, Partitions: parts[:n]}})
		parts = parts[n:]
	}
	if len(recs) > 0 && !members && len(gone) == len(g.Offsets) {
		// Nothing left: the group goes, as Kafka's does once empty.
		recs = append(recs, Record{Group: group, Kind: KindGroupDeleted})
	}
	wait, err := c.write(recs)
	c.mu.Unlock()
	if err != nil {
		return nil, nil, err
	}
	if err := wait(ctx); err != nil {
		return nil, nil, err
	}
	if len(recs) == 0 {
		if err := c.cfg.Log.Confirm(ctx); err != nil {
			return nil, nil, err
		}
	}
	return deleted, errs, nil
}

// subscribedLocked returns the topics group's members subscribe to, the
// native members' and the Kafka-protocol members' (their metadata for the
// group's protocol, read as the consumer protocol's); all when a
// Kafka-protocol member's cannot be read. A group with Kafka-protocol
// members whose protocol type is not "consumer" is ErrGroupNotEmpty. The
// caller holds mu.
func (c *Coordinator) subscribedLocked(group string, g *Group) (topics map[string]bool, all bool, err error) {
	topics = map[string]bool{}
	if g != nil {
		for _, m := range g.Members {
			for _, t := range m.Topics {
				topics[t] = true
			}
		}
	}
	cg := c.classic[group]
	if cg == nil || len(cg.members) == 0 {
		return topics, false, nil
	}
	if cg.protocolType != "consumer" {
		return nil, false, fmt.Errorf("%w: group %q has %d members of protocol type %q, whose subscriptions are not read; its offsets are deleted only once they have left",
			ErrGroupNotEmpty, group, len(cg.members), cg.protocolType)
	}
	if cg.protocol == "" {
		return nil, true, nil
	}
	for _, m := range cg.members {
		ts, err := ConsumerSubscription(m.protocol(cg.protocol).Metadata)
		if err != nil {
			return nil, true, nil
		}
		for _, t := range ts {
			topics[t] = true
		}
	}
	return topics, false, nil
}
