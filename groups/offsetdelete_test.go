package groups

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"gostream/transport"
)

// An offsets-deleted record round-trips; one that names no partition, a
// partition twice, a negative one, a bad topic or too many is neither
// written nor read.
func TestOffsetsDeletedRecord(t *testing.T) {
	r := Record{Group: "g", Kind: KindOffsetsDeleted, Deleted: &OffsetsDeleted{Requester: "ops@host", Partitions: []TopicPartition{tp("t", 0), tp("u", 3)}}}
	k, v, err := r.Encode()
	require.NoError(t, err)
	got, err := Decode(k, v)
	require.NoError(t, err)
	assert.Equal(t, r, got)
	assert.Equal(t, "offsets-deleted", got.Kind.String())

	many := make([]TopicPartition, MaxCommitOffsets+1)
	for i := range many {
		many[i] = tp("t", int32(i))
	}
	for name, od := range map[string]*OffsetsDeleted{
		"no partition":   {},
		"one twice":      {Partitions: []TopicPartition{tp("t", 1), tp("t", 1)}},
		"negative":       {Partitions: []TopicPartition{tp("t", -1)}},
		"bad topic":      {Partitions: []TopicPartition{tp("../t", 0)}},
		"long requester": {Requester: strings.Repeat("r", 256), Partitions: []TopicPartition{tp("t", 0)}},
		"too many":       {Partitions: many},
		"nil":            nil,
	} {
		_, _, err := Record{Group: "g", Kind: KindOffsetsDeleted, Deleted: od}.Encode()
		assert.ErrorIs(t, err, ErrMalformed, name)
	}
}

// outside commits offsets to group from outside any membership.
func outside(t *testing.T, c *Coordinator, group string, offs ...transport.CommitOffset) {
	t.Helper()
	require.NoError(t, c.Commit(context.Background(), &transport.OffsetCommitRequest{Group: group, MemberEpoch: transport.NoMemberEpoch, Offsets: offs}))
}

// A deleted offset is gone, and stays gone for a coordinator rebuilt from
// the whole log, from a snapshot taken after the deletion, and from a
// little before that snapshot; the offsets left are untouched. A group
// left with nothing is deleted; a group that holds nothing is
// ErrUnknownGroup and nothing is written.
func TestDeleteOffsets(t *testing.T) {
	log, clock := &memLog{}, &fakeClock{t: time.Unix(1000, 0)}
	c := NewCoordinator(CoordinatorConfig{Log: log, Topics: fakeTopics{"t": 6, "u": 3}, Now: clock.now, SnapshotEvery: -1})
	c.Start(0)
	ctx := context.Background()
	outside(t, c, "p", transport.CommitOffset{Topic: "t", Partition: 0, Offset: 5}, transport.CommitOffset{Topic: "t", Partition: 1, Offset: 6},
		transport.CommitOffset{Topic: "u", Partition: 0, Offset: 7}, transport.CommitOffset{Topic: "u", Partition: 2, Offset: 8})
	outside(t, c, "q", transport.CommitOffset{Topic: "t", Partition: 0, Offset: 1})

	deleted, errs, err := c.DeleteOffsets(ctx, "p", "ops", []TopicPartition{tp("t", 0), tp("t", 4), tp("t", 0)})
	require.NoError(t, err)
	assert.Equal(t, []error{nil, nil, nil}, errs, "t/4 was never committed: nothing to delete is no error")
	require.Len(t, deleted, 1)
	assert.Equal(t, int64(5), deleted[0].Offset)
	_, ok := c.State().Committed("p", "t", 0)
	assert.False(t, ok, "deleted")
	_, ok = c.State().Committed("q", "t", 0)
	assert.True(t, ok, "another group's offset is not touched")
	last := log.recs[len(log.recs)-1]
	require.Equal(t, KindOffsetsDeleted, last.Kind)
	assert.Equal(t, &OffsetsDeleted{Requester: "ops", Partitions: []TopicPartition{tp("t", 0)}}, last.Deleted)

	want := image(c.State())
	assert.Equal(t, want, image(rebuild(log, 0).State()), "the whole log")
	_, ok = rebuild(log, 0).State().Committed("p", "t", 0)
	assert.False(t, ok, "the deletion outlives the coordinator")
	deletion := len(log.recs) - 1
	c.mu.Lock()
	c.writeSnapshot()
	c.mu.Unlock()
	start, ok := c.LastSnapshot()
	require.True(t, ok)
	assert.Equal(t, want, image(rebuild(log, int(start)).State()), "from the snapshot alone")
	assert.Equal(t, want, image(rebuild(log, deletion).State()), "from the deletion on")
	assert.Equal(t, want, image(rebuild(log, deletion-1).State()), "from a little before the deletion")

	// Every partition of u, then the last offset: the group, empty, goes.
	deleted, errs, err = c.DeleteOffsets(ctx, "p", "ops", []TopicPartition{tp("u", AllPartitions)})
	require.NoError(t, err)
	assert.Equal(t, []error{nil}, errs)
	assert.Len(t, deleted, 2)
	assert.NotNil(t, c.State().Group("p"))
	_, _, err = c.DeleteOffsets(ctx, "p", "ops", []TopicPartition{tp("t", 1)})
	require.NoError(t, err)
	assert.Nil(t, c.State().Group("p"), "a group left with nothing is deleted")
	assert.Nil(t, rebuild(log, 0).State().Group("p"))
	n := log.len()
	_, _, err = c.DeleteOffsets(ctx, "p", "ops", []TopicPartition{tp("t", 1)})
	assert.ErrorIs(t, err, ErrUnknownGroup)
	_, _, err = c.DeleteOffsets(ctx, "nosuch", "ops", []TopicPartition{tp("t", 1)})
	assert.ErrorIs(t, err, ErrUnknownGroup)
	_, _, err = c.DeleteOffsets(ctx, "q", "ops", []TopicPartition{tp("t", -2)})
	assert.ErrorIs(t, err, ErrInvalidRequest)
	assert.Equal(t, n, log.len(), "refusals write nothing")
}

// A native group's members subscribe to topics: their offsets are kept
// (ErrGroupSubscribed) while the others' are deleted.
func TestDeleteOffsetsOfANativeGroup(t *testing.T) {
	log, clock := &memLog{}, &fakeClock{t: time.Unix(1000, 0)}
	c := NewCoordinator(CoordinatorConfig{Log: log, Topics: fakeTopics{"t": 6, "u": 3}, Now: clock.now})
	c.Start(0)
	ctx := context.Background()
	outside(t, c, "g", transport.CommitOffset{Topic: "t", Partition: 2, Offset: 3}, transport.CommitOffset{Topic: "u", Partition: 1, Offset: 4})
	join(t, c, "")
	deleted, errs, err := c.DeleteOffsets(ctx, "g", "ops", []TopicPartition{tp("t", 2), tp("u", 1)})
	require.NoError(t, err)
	assert.ErrorIs(t, errs[0], ErrGroupSubscribed)
	assert.NoError(t, errs[1])
	require.Len(t, deleted, 1)
	assert.Equal(t, "u", deleted[0].Topic)
	_, ok := c.State().Committed("g", "t", 2)
	assert.True(t, ok, "the subscribed topic's offset is kept")
	_, ok = c.State().Committed("g", "u", 1)
	assert.False(t, ok)
	assert.NotNil(t, c.State().Group("g"), "a group with members stays")
}

// consumerMeta is a consumer protocol subscription to topics.
func consumerMeta(topics ...string) string {
	s := kmsg.NewConsumerMemberMetadata()
	s.Version, s.Topics = 3, topics
	return string(s.AppendTo(nil))
}

// A Kafka consumer group's members' subscriptions, read from their
// metadata for the group's protocol, keep their topics' offsets, here and
// on a coordinator rebuilt from the log; a subscription that cannot be
// read keeps every offset; a group of another protocol type with members
// is ErrGroupNotEmpty. Once the members have left, the offsets go.
func TestDeleteOffsetsOfAKafkaGroup(t *testing.T) {
	log, clock := &memLog{}, &fakeClock{t: time.Unix(1000, 0)}
	newCoord := func() *Coordinator {
		return NewCoordinator(CoordinatorConfig{Log: log, Topics: fakeTopics{"t": 6, "u": 3}, Now: clock.now, InitialRebalanceDelay: -1})
	}
	c := newCoord()
	c.Start(0)
	ctx := context.Background()
	outside(t, c, "g", transport.CommitOffset{Topic: "u", Partition: 0, Offset: 2})
	a := waitJoin(t, newMember(t, c, consumerMeta("t")))
	syncAll(t, c, a)
	_, err := c.CommitClassic(ctx, ClassicCommit{Group: "g", MemberID: a.MemberID, Generation: a.Generation,
		Offsets: []ClassicOffset{{Topic: "t", Partition: 1, Offset: 4}}})
	require.NoError(t, err)

	both := []TopicPartition{tp("t", 1), tp("u", 0)}
	_, errs, err := c.DeleteOffsets(ctx, "g", "", both)
	require.NoError(t, err)
	assert.ErrorIs(t, errs[0], ErrGroupSubscribed, "a member subscribes to t")
	assert.NoError(t, errs[1])
	_, ok := c.State().Committed("g", "t", 1)
	assert.True(t, ok)
	_, ok = c.State().Committed("g", "u", 0)
	assert.False(t, ok)

	// A new coordinator knows the members' subscriptions.
	c2 := newCoord()
	for i, r := range log.recs {
		c2.Load(r, int64(i))
	}
	c2.Start(int64(len(log.recs)))
	_, errs, err = c2.DeleteOffsets(ctx, "g", "", both)
	require.NoError(t, err)
	assert.ErrorIs(t, errs[0], ErrGroupSubscribed)

	// A second member whose metadata is not a subscription: nothing can
	// be deleted while it is in the group.
	bch := newMember(t, c2, "not a subscription")
	require.Eventually(t, func() bool {
		return c2.HeartbeatClassic(ctx, "g", a.MemberID, "", a.Generation) != nil
	}, 5*time.Second, time.Millisecond)
	a2 := waitJoin(t, joinAsync(c2, classicJoin(a.MemberID, "", consumerMeta("t"))))
	b2 := waitJoin(t, bch)
	syncAll(t, c2, a2, b2)
	_, err = c2.CommitClassic(ctx, ClassicCommit{Group: "g", MemberID: b2.MemberID, Generation: b2.Generation,
		Offsets: []ClassicOffset{{Topic: "u", Partition: 0, Offset: 3}}})
	require.NoError(t, err)
	_, errs, err = c2.DeleteOffsets(ctx, "g", "", []TopicPartition{tp("u", 0)})
	require.NoError(t, err)
	assert.ErrorIs(t, errs[0], ErrGroupSubscribed, "an unreadable subscription counts as every topic")
	_, ok = c2.State().Committed("g", "u", 0)
	assert.True(t, ok)

	// Both leave: the offset is deleted.
	_, err = c2.LeaveClassic(ctx, "g", []ClassicLeaving{{MemberID: a2.MemberID}, {MemberID: b2.MemberID}})
	require.NoError(t, err)
	deleted, errs, err := c2.DeleteOffsets(ctx, "g", "", both)
	require.NoError(t, err)
	assert.Equal(t, []error{nil, nil}, errs)
	require.Len(t, deleted, 2)
	assert.Equal(t, int64(4), deleted[0].Offset)
	assert.Equal(t, int64(3), deleted[1].Offset)

	// A Kafka Connect group with members: its offsets are not deleted.
	outside(t, c2, "w", transport.CommitOffset{Topic: "u", Partition: 0, Offset: 1})
	outside(t, c2, "w", transport.CommitOffset{Topic: "u", Partition: 1, Offset: 1})
	wj := classicJoin("", "", "worker")
	wj.Group, wj.ProtocolType, wj.RequireMemberID = "w", "connect", false
	waitJoin(t, joinAsync(c2, wj))
	n := log.len()
	_, _, err = c2.DeleteOffsets(ctx, "w", "", []TopicPartition{tp("u", 0)})
	assert.ErrorIs(t, err, ErrGroupNotEmpty)
	assert.Equal(t, n, log.len())
}
