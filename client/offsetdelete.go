package client

import (
	"context"
	"fmt"

	"gostream/transport"
)

// DeleteOffsets deletes group's committed offsets of topic: of partitions,
// or of every partition the group has committed when none is named. It
// returns the offsets deleted, sorted by partition (none when the group
// had none of them committed), once every active replica of the group's
// partition of __consumer_offsets holds the deletion. It deletes all of
// them or none: it is refused while a member of the group subscribes to
// topic (transport.ErrGroupSubscribed), while the group has Kafka members
// of a protocol type other than "consumer" (transport.ErrGroupNotEmpty),
// and for a group that holds nothing (transport.ErrUnknownGroup). A group
// left with no member and no committed offset is deleted. requester is
// kept with the deletion, for the record. Sent again after an answer was
// lost, a deletion finds nothing left to delete (or, the group gone,
// ErrUnknownGroup).
func (c *Client) DeleteOffsets(ctx context.Context, group, requester, topic string, partitions ...int32) ([]CommittedOffset, error) {
	var resp transport.OffsetDeleteResponse
	req := &transport.OffsetDeleteRequest{Group: group, Topic: topic, Partitions: partitions, Requester: requester}
	if err := c.coordinatorCall(ctx, group, transport.APIOffsetDelete, req, &resp); err != nil {
		return nil, fmt.Errorf("delete offsets of group %q: %w", group, err)
	}
	out := make([]CommittedOffset, len(resp.Deleted))
	for i, o := range resp.Deleted {
		out[i] = CommittedOffset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, Metadata: o.Metadata,
			MemberID: o.MemberID, MemberEpoch: o.MemberEpoch, TimeMs: o.TimeMs}
	}
	return out, nil
}
