package controller

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/metadata"
	"gostream/transport"
)

// A topic grows by one audited change: the new partitions are placed on
// from the topic's rotation, led by their first replica at epoch 0 with
// every replica active, and each is an event of the audit trail; a dry
// run shows the same and changes nothing.
func TestCreatePartitionsGrowsATopic(t *testing.T) {
	c := openWith(t, &fakeBrokers{})
	ctx := context.Background()
	epoch := c.Metadata().Epoch

	dry, err := c.CreatePartitions(ctx, transport.CreatePartitionsRequest{Topic: "t", Count: 3, DryRun: true, Requester: "ops"})
	require.NoError(t, err)
	assert.Equal(t, epoch, c.Metadata().Epoch, "a dry run changes nothing")
	assert.Len(t, c.Metadata().Topic("t").Partitions, 1)

	rep, err := c.CreatePartitions(ctx, transport.CreatePartitionsRequest{Topic: "t", Count: 3, Requester: "ops"})
	require.NoError(t, err)
	assert.Equal(t, epoch+1, c.Metadata().Epoch, "one change")
	require.Len(t, rep.Results, 2)
	// Partition 0 is led (preferred) by broker 3: the rotation goes on at 1.
	want := [][]int32{{1, 2, 3}, {2, 3, 1}}
	parts := c.Metadata().Topic("t").Partitions
	require.Len(t, parts, 3)
	for i, r := range rep.Results {
		p := int32(i + 1)
		assert.Equal(t, transport.ChangeResult{Topic: "t", Partition: p, Action: transport.ActionCreatePartition,
			OldLeader: want[i][0], NewLeader: want[i][0], NewActive: want[i], Note: "t grows from 1 to 3 partitions"}, r)
		assert.Equal(t, metadata.Partition{Replicas: want[i], Active: want[i], Leader: want[i][0]}, parts[p])
		d := dry.Results[i]
		assert.True(t, d.DryRun)
		d.DryRun = false
		assert.Equal(t, r, d, "the dry run showed what was done")
	}
	evs, err := c.History()
	require.NoError(t, err)
	require.Len(t, evs, 2)
	for i, ev := range evs {
		assert.Equal(t, "ops", ev.Requester)
		assert.Equal(t, rep.Results[i], ev.ChangeResult)
	}
}

// What may not grow, and counts that do not grow, are refused with
// nothing changed: each error names what is wrong.
func TestCreatePartitionsRefusals(t *testing.T) {
	f := &fakeBrokers{}
	c := openWith(t, f)
	ctx := context.Background()
	_, err := c.CreateStream(ctx, "__ds.0123456789abcdef0123456789abcdef", 3, &metadata.Stream{Path: "a/b", ContentType: "text/plain"})
	require.NoError(t, err)
	_, err = c.EnsureOffsetsTopic(ctx, 2)
	require.NoError(t, err)
	_, err = c.CreateTopic(ctx, &transport.CreateTopicRequest{Name: "sealed", Partitions: 1, ReplicationFactor: 1})
	require.NoError(t, err)
	require.NoError(t, c.SealTopic(ctx, "sealed"))

	tests := []struct {
		name  string
		req   transport.CreatePartitionsRequest
		want  error
		words string
	}{
		{"the same count", transport.CreatePartitionsRequest{Topic: "t", Count: 1}, ErrInvalidPartitions, `topic "t" already has 1 partition;`},
		{"none", transport.CreatePartitionsRequest{Topic: "t", Count: 0}, ErrInvalidPartitions, "partition count 0"},
		{"past the limit", transport.CreatePartitionsRequest{Topic: "t", Count: metadata.MaxPartitions + 1}, ErrInvalidPartitions, "outside [1, 10000]"},
		{"an unknown topic", transport.CreatePartitionsRequest{Topic: "nope", Count: 2}, metadata.ErrUnknownTopic, `"nope"`},
		{"a stream", transport.CreatePartitionsRequest{Topic: "__ds.0123456789abcdef0123456789abcdef", Count: 2}, ErrInvalidRequest, "/v1/stream/a/b"},
		{"the offsets topic", transport.CreatePartitionsRequest{Topic: "__consumer_offsets", Count: 4}, ErrInvalidRequest, "never grows"},
		{"a sealed topic", transport.CreatePartitionsRequest{Topic: "sealed", Count: 2}, transport.ErrTopicSealed, "sealed"},
		{"too few lists", transport.CreatePartitionsRequest{Topic: "t", Count: 3, Assignments: [][]int32{{1, 2, 3}}}, metadata.ErrInvalidAssignment, "adds 2, and 1 replica lists"},
		{"a list of RF 2", transport.CreatePartitionsRequest{Topic: "t", Count: 2, Assignments: [][]int32{{1, 2}}}, metadata.ErrInvalidAssignment, "replication factor is 3"},
		{"an unknown broker", transport.CreatePartitionsRequest{Topic: "t", Count: 2, Assignments: [][]int32{{1, 2, 9}}}, metadata.ErrInvalidAssignment, "broker 9"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := c.Metadata()
			_, err := c.CreatePartitions(ctx, tc.req)
			require.ErrorIs(t, err, tc.want)
			assert.Contains(t, err.Error(), tc.words)
			assert.Same(t, before, c.Metadata(), "nothing changed")
		})
	}

	// A count below the topic's names both.
	_, err = c.CreatePartitions(ctx, transport.CreatePartitionsRequest{Topic: "t", Count: 3})
	require.NoError(t, err)
	before := c.Metadata()
	_, err = c.CreatePartitions(ctx, transport.CreatePartitionsRequest{Topic: "t", Count: 2})
	require.ErrorIs(t, err, ErrInvalidPartitions)
	assert.Contains(t, err.Error(), `topic "t" has 3 partitions, and 2 would be fewer`)
	assert.Same(t, before, c.Metadata())

	// New replicas go only to brokers that answer: with broker 3 silent,
	// a topic of replication factor 3 cannot grow, and a list naming it is
	// refused.
	f.mu.Lock()
	f.silent = map[int32]bool{3: true}
	f.mu.Unlock()
	_, err = c.CreatePartitions(ctx, transport.CreatePartitionsRequest{Topic: "t", Count: 4})
	require.ErrorIs(t, err, ErrBrokerNotAvailable)
	assert.Contains(t, err.Error(), "broker 3 does not answer")
	_, err = c.CreatePartitions(ctx, transport.CreatePartitionsRequest{Topic: "t", Count: 4, Assignments: [][]int32{{1, 3, 2}}})
	require.ErrorIs(t, err, metadata.ErrInvalidAssignment)
	assert.Contains(t, err.Error(), "broker 3, which does not answer")
	assert.Same(t, before, c.Metadata())

	// Lists given are used as they are.
	f.mu.Lock()
	f.silent = nil
	f.mu.Unlock()
	rep, err := c.CreatePartitions(ctx, transport.CreatePartitionsRequest{Topic: "t", Count: 4, Assignments: [][]int32{{3, 2, 1}}})
	require.NoError(t, err)
	require.Len(t, rep.Results, 1)
	assert.Equal(t, []int32{3, 2, 1}, c.Metadata().Topic("t").Partitions[3].Replicas)
}
