package groups

import (
	"context"
	"fmt"

	"gostream/transport"
)

// The member epochs of Kafka's ConsumerGroupHeartbeat that are not a
// member's epoch.
const (
	// KafkaLeaveEpoch leaves the group.
	KafkaLeaveEpoch int32 = -1
	// KafkaStaticLeaveEpoch leaves a static member's place held.
	KafkaStaticLeaveEpoch int32 = -2
)

// ConsumerBeat is Kafka's ConsumerGroupHeartbeat (KIP-848) as gostream's
// own membership serves it: the two protocols are the same one (the
// coordinator assigns, a member owns only what it is handed, and hands
// back what it loses before another member gets it), so a Kafka client of
// the new protocol is a native member, in a group native members may
// share. What differs is the reading of the request (docs/kafka-groups.md,
// "The new protocol"): Kafka leaves out what did not change, the client
// names its own member id, and a leave names no epoch.
type ConsumerBeat struct {
	Group      string
	MemberID   string
	InstanceID string
	// Epoch is Kafka's member epoch: 0 joins (or, with the id of a
	// member of the group, joins again in its place), KafkaLeaveEpoch
	// and KafkaStaticLeaveEpoch leave, above 0 heartbeats.
	Epoch int32
	// Topics is the subscription; nil when it did not change (never on
	// a join).
	Topics []string
	// Owned is what the member owns; nil when it did not change (never
	// on a join).
	Owned []transport.TopicPartitions
	Host  string
}

// ConsumerHeartbeat serves a ConsumerGroupHeartbeat: see ConsumerBeat. A
// join with an owned partition, or without a subscription, is
// ErrInvalidRequest.
func (c *Coordinator) ConsumerHeartbeat(ctx context.Context, b ConsumerBeat) (*transport.GroupHeartbeatResponse, error) {
	req := &transport.GroupHeartbeatRequest{Group: b.Group, MemberID: b.MemberID, InstanceID: b.InstanceID,
		MemberEpoch: b.Epoch, Topics: b.Topics, SessionTimeoutMs: int32(c.cfg.ConsumerSession.Milliseconds()), Owned: b.Owned, Host: b.Host}
	switch {
	case b.Epoch == transport.JoinEpoch && (b.Topics == nil || b.Owned == nil || len(b.Owned) > 0):
		return nil, fmt.Errorf("%w: a join names its subscription and owns nothing", ErrInvalidRequest)
	case b.Epoch == KafkaLeaveEpoch, b.Epoch == KafkaStaticLeaveEpoch && b.InstanceID == "":
		req.Leave = transport.LeaveGroup
	case b.Epoch == KafkaStaticLeaveEpoch:
		req.Leave = transport.LeaveHeld
	case b.Epoch < 0:
		return nil, fmt.Errorf("%w: member epoch %d", ErrInvalidRequest, b.Epoch)
	}
	return c.heartbeat(ctx, req, beatReading{keepTopics: b.Topics == nil, keepOwned: b.Owned == nil, ownID: true, leaveByID: true})
}
