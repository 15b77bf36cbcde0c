package controller

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/metadata"
)

// Streams are spread: each new stream is led by the broker that leads the
// fewest partitions of the cluster, plain topics' too (topic t is led by
// broker 3), with the next brokers as its followers; a topic of one
// partition would otherwise always be led by the lowest broker id.
func TestCreateStreamSpreadsLeaders(t *testing.T) {
	c := openWith(t, &fakeBrokers{})
	ctx := context.Background()
	want := [][]int32{{1, 2, 3}, {2, 3, 1}, {1, 2, 3}, {2, 3, 1}, {3, 1, 2}}
	for i, w := range want {
		res, err := c.CreateStream(ctx, fmt.Sprintf("__ds.s%d", i), 3, &metadata.Stream{Path: fmt.Sprintf("s%d", i)})
		require.NoError(t, err)
		require.Equal(t, StreamCreated, res.Outcome)
		p := res.Topic.Partitions[0]
		assert.Equal(t, w, p.Replicas, "stream %d", i)
		assert.Equal(t, w, p.Active, "stream %d", i)
		assert.Equal(t, w[0], p.Leader, "stream %d", i)
	}
	// Fewer replicas than brokers: each broker leads two, so broker 1
	// leads, and the next broker follows.
	res, err := c.CreateStream(ctx, "__ds.small", 2, &metadata.Stream{Path: "small"})
	require.NoError(t, err)
	assert.Equal(t, []int32{1, 2}, res.Topic.Partitions[0].Replicas)
}

// An expired stream's leader deletes the incarnation that expired. When
// that is gone and a stream was created at the same path since, the
// delete leaves the new one alone: without the id the leader's late
// delete took the stream a client had just created.
func TestDeleteStreamNamesTheIncarnation(t *testing.T) {
	c := openWith(t, &fakeBrokers{})
	ctx := context.Background()
	const topic = "__ds.0123456789abcdef0123456789abcdef"
	s := &metadata.Stream{Path: "a/b", ContentType: "text/plain"}

	old, err := c.CreateStream(ctx, topic, 3, s)
	require.NoError(t, err)
	require.Equal(t, StreamCreated, old.Outcome)
	assert.Equal(t, c.Metadata().Epoch, old.Epoch, "the answer names the epoch it was read from")
	again, err := c.CreateStream(ctx, topic, 3, s)
	require.NoError(t, err)
	assert.Equal(t, StreamExists, again.Outcome)
	assert.Equal(t, old.Topic.ID, again.Topic.ID)

	res, err := c.DeleteStream(ctx, topic, old.Topic.ID)
	require.NoError(t, err)
	require.Equal(t, StreamDeleted, res.Outcome)
	fresh, err := c.CreateStream(ctx, topic, 3, s)
	require.NoError(t, err)
	require.Equal(t, StreamCreated, fresh.Outcome)
	require.NotEqual(t, old.Topic.ID, fresh.Topic.ID)

	// The expired incarnation's delete, late: nothing happens.
	res, err = c.DeleteStream(ctx, topic, old.Topic.ID)
	require.NoError(t, err)
	assert.Equal(t, StreamNotFound, res.Outcome)
	require.NotNil(t, c.Metadata().Topic(topic))
	assert.Equal(t, fresh.Topic.ID, c.Metadata().Topic(topic).ID)

	// A client's DELETE names no incarnation and takes what is there.
	res, err = c.DeleteStream(ctx, topic, "")
	require.NoError(t, err)
	assert.Equal(t, StreamDeleted, res.Outcome)
	assert.Nil(t, c.Metadata().Topic(topic))
}
