package testcluster

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestKafkaPartitionReassignments: Kafka's AlterPartitionReassignments
// and ListPartitionReassignments, sent by franz-go, are gostream's moves.
// A move to 4, 2, 3 ends there; a broker that does not exist is
// INVALID_REPLICA_ASSIGNMENT; a move whose new broker is down waits,
// listed with the replicas it adds and removes; another move of it is
// REASSIGNMENT_IN_PROGRESS; null replicas cancel it, and a second cancel
// is NO_REASSIGNMENT_IN_PROGRESS.
func TestKafkaPartitionReassignments(t *testing.T) {
	c := startClusterWith(t, Config{Nodes: 4, Kafka: true})
	cl := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	createTopic(t, cl, "kr", 2, 3) // 0: 1, 2, 3; 1: 2, 3, 4
	produceTo(t, cl, "kr", 0, "v", 50)
	var seeds []string
	for _, n := range c.Nodes {
		seeds = append(seeds, n.Kafka)
	}
	kc, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	require.NoError(t, err)
	defer kc.Close()

	topic := "kr"
	alter := func(partition int32, replicas []int32) kmsg.AlterPartitionAssignmentsResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
		req.TimeoutMillis = 30_000
		rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		rp.Partition, rp.Replicas = partition, replicas
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, kc)
		require.NoError(t, err)
		require.Zero(t, resp.ErrorCode, "%v", resp.ErrorMessage)
		require.Len(t, resp.Topics, 1)
		require.Len(t, resp.Topics[0].Partitions, 1)
		return resp.Topics[0].Partitions[0]
	}
	list := func() []kmsg.ListPartitionReassignmentsResponseTopic {
		t.Helper()
		resp, err := kmsg.NewPtrListPartitionReassignmentsRequest().RequestWith(ctx, kc)
		require.NoError(t, err)
		require.Zero(t, resp.ErrorCode)
		return resp.Topics
	}

	assert.Empty(t, list())
	got := alter(0, []int32{4, 2, 3})
	require.Zero(t, got.ErrorCode, "%v", got.ErrorMessage)
	waitMoved(t, c, cl, "kr", 0, []int32{4, 2, 3}, time.Minute)

	got = alter(0, []int32{9, 2, 3})
	assert.Equal(t, kerr.InvalidReplicaAssignment.Code, got.ErrorCode, "%v", got.ErrorMessage)
	got = alter(0, []int32{2, 2, 3})
	assert.Equal(t, kerr.InvalidReplicaAssignment.Code, got.ErrorCode, "%v", got.ErrorMessage)

	// kr2/0 onto broker 3, which dies at once (not the controller, node
	// 1): the move waits.
	createTopic(t, cl, "kr2", 1, 2)
	produceTo(t, cl, "kr2", 0, strings.Repeat("z", 100_000), 60) // 6 MB: a copy of 0.1 s at 50 MB/s
	from := partitionNow(t, cl, "kr2", 0).Replicas
	x := outside(4, append(from, 1)...)
	target := []int32{x, from[1]}
	topic = "kr2"
	got = alter(0, target)
	require.Zero(t, got.ErrorCode, "%v", got.ErrorMessage)
	require.NoError(t, c.Node(x).Kill())
	var moving []kmsg.ListPartitionReassignmentsResponseTopic
	require.Eventually(t, func() bool {
		moving = list()
		return len(moving) == 1
	}, 30*time.Second, 100*time.Millisecond)
	require.Len(t, moving[0].Partitions, 1)
	{
		p := moving[0].Partitions[0]
		assert.Equal(t, "kr2", moving[0].Topic)
		assert.Equal(t, int32(0), p.Partition)
		assert.Equal(t, []int32{x, from[1], from[0]}, p.Replicas)
		assert.Equal(t, []int32{x}, p.AddingReplicas)
		assert.Equal(t, []int32{from[0]}, p.RemovingReplicas)
		got = alter(0, from)
		assert.Equal(t, kerr.ReassignmentInProgress.Code, got.ErrorCode, "%v", got.ErrorMessage)
		got = alter(0, nil)
		require.Zero(t, got.ErrorCode, "%v", got.ErrorMessage)
		assert.Empty(t, list())
		assert.Equal(t, from, partitionNow(t, cl, "kr2", 0).Replicas)
	}
	got = alter(0, nil)
	assert.Equal(t, kerr.NoReassignmentInProgress.Code, got.ErrorCode, "%v", got.ErrorMessage)
}
