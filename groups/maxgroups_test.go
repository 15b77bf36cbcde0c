package groups

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/transport"
)

// A coordinator holds at most MaxGroups groups, counting those that are
// only Kafka-protocol ids handed out in memory: a request that would make
// one more (a commit, a native or Kafka join, a classic join) is refused
// and writes nothing; the groups it holds go on, and a deleted group
// makes room.
func TestCoordinatorBoundsItsGroups(t *testing.T) {
	log, clock := &memLog{}, &fakeClock{t: time.Unix(1000, 0)}
	c := NewCoordinator(CoordinatorConfig{Log: log, Topics: fakeTopics{"t": 6}, Now: clock.now, InitialRebalanceDelay: -1, MaxGroups: 3})
	c.Start(0)
	ctx := context.Background()
	commit := func(group string) error {
		return c.Commit(ctx, &transport.OffsetCommitRequest{Group: group, MemberEpoch: transport.NoMemberEpoch,
			Offsets: []transport.CommitOffset{{Topic: "t", Partition: 0, Offset: 1}}})
	}
	require.NoError(t, commit("committed"))
	_, err := c.Heartbeat(ctx, &transport.GroupHeartbeatRequest{Group: "native", Topics: []string{"t"}, SessionTimeoutMs: 3000})
	require.NoError(t, err)
	j := classicJoin("", "", "x")
	j.Group = "kafka"
	_, err = c.JoinClassic(ctx, j)
	require.ErrorIs(t, err, ErrMemberIDRequired, "an id handed out: a group in memory only")

	before := log.len()
	assert.ErrorIs(t, commit("fourth"), ErrInvalidRequest)
	_, err = c.Heartbeat(ctx, &transport.GroupHeartbeatRequest{Group: "fourth", Topics: []string{"t"}, SessionTimeoutMs: 3000})
	assert.ErrorIs(t, err, ErrInvalidRequest)
	_, err = c.ConsumerHeartbeat(ctx, ConsumerBeat{Group: "fourth", MemberID: "k", Topics: []string{"t"}, Owned: []transport.TopicPartitions{}})
	assert.ErrorIs(t, err, ErrInvalidRequest)
	j.Group = "fourth"
	_, err = c.JoinClassic(ctx, j)
	assert.ErrorIs(t, err, ErrInvalidRequest)
	_, err = c.CommitClassic(ctx, ClassicCommit{Group: "fourth", Generation: -1, Offsets: []ClassicOffset{{Topic: "t", Partition: 0, Offset: 1}}})
	assert.ErrorIs(t, err, ErrInvalidRequest)
	assert.Equal(t, before, log.len(), "nothing written")
	assert.Nil(t, c.State().Group("fourth"))

	// The groups held go on; one deleted makes room for another.
	require.NoError(t, commit("committed"))
	require.NoError(t, c.Delete(ctx, "committed"))
	require.NoError(t, commit("fourth"))
	assert.ErrorIs(t, commit(fmt.Sprintf("fifth-%d", 5)), ErrInvalidRequest)
}
