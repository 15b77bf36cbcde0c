package groups

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/transport"
)

// countingTopics counts the high watermarks looked up.
type countingTopics struct {
	Topics
	lookups atomic.Int64
}

func (t *countingTopics) HighWatermark(ctx context.Context, topic string, p int32, offset int64) (int64, error) {
	t.lookups.Add(1)
	return t.Topics.HighWatermark(ctx, topic, p, offset)
}

func kafkaBeat(t *testing.T, c *Coordinator, b ConsumerBeat) *transport.GroupHeartbeatResponse {
	t.Helper()
	b.Group = "g"
	resp, err := c.ConsumerHeartbeat(context.Background(), b)
	require.NoError(t, err)
	return resp
}

// A Kafka member of the new protocol names its own id, leaves out of its
// heartbeats what did not change (its subscription, what it owns), and
// is a member like a native one: partitions move between it and a native
// member only once released.
func TestConsumerHeartbeatIsANativeMember(t *testing.T) {
	log, clock := &memLog{}, &fakeClock{t: time.Unix(1000, 0)}
	c := newTestCoordinator(log, clock)
	k := kafkaBeat(t, c, ConsumerBeat{MemberID: "kafka-1", Topics: []string{"t"}, Owned: []transport.TopicPartitions{}})
	assert.Equal(t, "kafka-1", k.MemberID, "the client's own id")
	assert.Positive(t, k.MemberEpoch)
	assert.Equal(t, []int32{0, 1, 2, 3, 4, 5}, parts(k.Assigned))

	// A keepalive (nothing but id and epoch) keeps the subscription and
	// what it owns: the coordinator holds it owns all six.
	k2 := kafkaBeat(t, c, ConsumerBeat{MemberID: "kafka-1", Epoch: k.MemberEpoch})
	assert.Equal(t, []int32{0, 1, 2, 3, 4, 5}, parts(k2.Assigned))
	assert.Equal(t, []string{"t"}, c.State().Group("g").Members["kafka-1"].Topics)

	// A native member joins: it gets nothing while the Kafka member,
	// heartbeating keepalives, has not released 3-5.
	n := join(t, c, "")
	k3 := kafkaBeat(t, c, ConsumerBeat{MemberID: "kafka-1", Epoch: k.MemberEpoch})
	assert.Equal(t, []int32{0, 1, 2}, parts(k3.Assigned), "told its part")
	n2, err := beat(c, n, nil)
	require.NoError(t, err)
	assert.Empty(t, n2.Assigned, "3-5 are still the Kafka member's")
	// The Kafka member commits 4 (it still owns it) with its epoch as
	// the generation, then says it owns 0-2 only.
	errs, err := c.CommitClassic(context.Background(), ClassicCommit{Group: "g", MemberID: "kafka-1", Generation: k.MemberEpoch,
		Offsets: []ClassicOffset{{Topic: "t", Partition: 4, Offset: 7}}})
	require.NoError(t, err)
	require.NoError(t, errs[0])
	kafkaBeat(t, c, ConsumerBeat{MemberID: "kafka-1", Epoch: k.MemberEpoch, Owned: k3.Assigned})
	n3, err := beat(c, n, nil)
	require.NoError(t, err)
	assert.Equal(t, []int32{3, 4, 5}, parts(n3.Assigned))
	assert.Equal(t, int64(7), c.State().Group("g").Offsets[TopicPartition{"t", 4}].Offset)

	// A commit of a partition it no longer owns, or at another epoch,
	// is refused and writes nothing.
	before := log.len()
	errs, err = c.CommitClassic(context.Background(), ClassicCommit{Group: "g", MemberID: "kafka-1", Generation: k.MemberEpoch,
		Offsets: []ClassicOffset{{Topic: "t", Partition: 4, Offset: 9}}})
	require.NoError(t, err)
	assert.ErrorIs(t, errs[0], ErrNotOwner)
	// Who commits is checked before any high watermark is looked up.
	topics := &countingTopics{Topics: c.cfg.Topics}
	c.cfg.Topics = topics
	_, err = c.CommitClassic(context.Background(), ClassicCommit{Group: "g", MemberID: "kafka-1", Generation: k.MemberEpoch + 1,
		Offsets: []ClassicOffset{{Topic: "t", Partition: 0, Offset: 9}}})
	assert.ErrorIs(t, err, ErrFencedMember)
	_, err = c.CommitClassic(context.Background(), ClassicCommit{Group: "g", Generation: -1,
		Offsets: []ClassicOffset{{Topic: "t", Partition: 0, Offset: 9}}})
	assert.ErrorIs(t, err, ErrUnknownMember)
	_, err = c.CommitClassic(context.Background(), ClassicCommit{Group: "g", MemberID: "stranger", Generation: 1,
		Offsets: []ClassicOffset{{Topic: "t", Partition: 0, Offset: 9}}})
	assert.ErrorIs(t, err, ErrUnknownMember)
	assert.Zero(t, topics.lookups.Load(), "no high watermark looked up for a committer refused")
	assert.Equal(t, before, log.len(), "nothing written")

	// A join of a member of gostream's own protocol is refused to a
	// classic Kafka member (one group, one kind of membership).
	_, err = c.JoinClassic(context.Background(), ClassicJoin{Group: "g", ProtocolType: "consumer", SessionTimeout: 10 * time.Second,
		RebalanceTime: 10 * time.Second, Protocols: []Protocol{{Name: "range"}}})
	assert.ErrorIs(t, err, ErrInconsistentProtocol)
}

// A member that joins again under its id (fenced, or its answer lost)
// is taken back in its place at a new epoch, its old epoch fenced; a
// leave names no epoch; a join must own nothing.
func TestConsumerHeartbeatRejoinAndLeave(t *testing.T) {
	log, clock := &memLog{}, &fakeClock{t: time.Unix(1000, 0)}
	c := newTestCoordinator(log, clock)
	k := kafkaBeat(t, c, ConsumerBeat{MemberID: "kafka-1", Topics: []string{"t"}, Owned: []transport.TopicPartitions{}})
	again := kafkaBeat(t, c, ConsumerBeat{MemberID: "kafka-1", Topics: []string{"t"}, Owned: []transport.TopicPartitions{}})
	assert.Greater(t, again.MemberEpoch, k.MemberEpoch)
	assert.Equal(t, []int32{0, 1, 2, 3, 4, 5}, parts(again.Assigned), "its partitions back at once: no one else owns them")
	assert.Len(t, c.State().Group("g").Members, 1, "the same member, not a second one")
	_, err := c.ConsumerHeartbeat(context.Background(), ConsumerBeat{Group: "g", MemberID: "kafka-1", Epoch: k.MemberEpoch})
	assert.ErrorIs(t, err, ErrFencedMember)

	_, err = c.ConsumerHeartbeat(context.Background(), ConsumerBeat{Group: "g", MemberID: "kafka-2", Topics: []string{"t"},
		Owned: []transport.TopicPartitions{{Topic: "t", Partitions: []int32{1}}}})
	assert.ErrorIs(t, err, ErrInvalidRequest, "a join owns nothing")
	_, err = c.ConsumerHeartbeat(context.Background(), ConsumerBeat{Group: "g", MemberID: "kafka-2", Owned: []transport.TopicPartitions{}})
	assert.ErrorIs(t, err, ErrInvalidRequest, "a join names its subscription")

	kafkaBeat(t, c, ConsumerBeat{MemberID: "kafka-1", Epoch: KafkaLeaveEpoch})
	assert.NotContains(t, c.State().Group("g").Members, "kafka-1", "left")
	_, err = c.ConsumerHeartbeat(context.Background(), ConsumerBeat{Group: "g", MemberID: "kafka-1", Epoch: KafkaLeaveEpoch})
	assert.ErrorIs(t, err, ErrUnknownMember)
}
