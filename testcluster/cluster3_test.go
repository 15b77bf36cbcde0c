package testcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/record"
	"gostream/transport"
)

// replicaBytes concatenates a replica's segment files, in order, up to the
// end of the newest one's whole batches (see segmentBytes).
func replicaBytes(t *testing.T, n *Node, topic string, p int32) []byte {
	t.Helper()
	all, err := segmentBytes(n, topic, p)
	require.NoError(t, err)
	return all
}

func produceOne(ctx context.Context, addr, topic string, p int32, value string) (transport.ProduceResponse, error) {
	var ack transport.ProduceResponse
	b, err := record.AppendBatch(nil, []record.Record{{Key: []byte("k"), Value: []byte(value)}})
	if err != nil {
		return ack, err
	}
	conn, err := transport.Dial(ctx, addr, transport.ConnConfig{})
	if err != nil {
		return ack, err
	}
	defer conn.Close()
	err = conn.Call(ctx, transport.APIProduce, &transport.ProduceRequest{Topic: topic, Partition: p, Batch: b}, &ack)
	return ack, err
}

func TestThreeNodesReplicate(t *testing.T) {
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ctrl := c.Nodes[0].RPC
	var ti transport.TopicInfo
	require.Eventually(t, func() bool {
		err := call(t, ctrl, transport.APICreateTopic, &transport.CreateTopicRequest{Name: "r3", Partitions: 3, ReplicationFactor: 3}, &ti)
		return err == nil
	}, 30*time.Second, 200*time.Millisecond, "all three brokers register")
	require.Len(t, ti.Partitions, 3)

	// Produce through each partition's leader, concurrently.
	const perPartition = 300
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for _, p := range ti.Partitions {
		wg.Add(1)
		go func(p transport.PartitionInfo) {
			defer wg.Done()
			addr := c.Node(p.Leader).RPC
			for i := 0; i < perPartition; i++ {
				var ack transport.ProduceResponse
				var err error
				for try := 0; try < 50; try++ {
					ack, err = produceOne(ctx, addr, "r3", p.Partition, fmt.Sprintf("p%d-%d", p.Partition, i))
					if !errors.Is(err, transport.ErrUnknownTopic) {
						break
					}
					time.Sleep(100 * time.Millisecond) // the broker has not taken the new metadata yet
				}
				if err != nil {
					errs <- fmt.Errorf("partition %d record %d: %w", p.Partition, i, err)
					return
				}
				if ack.BaseOffset != int64(i) || len(ack.Replicas) != 3 {
					errs <- fmt.Errorf("partition %d record %d: ack %+v", p.Partition, i, ack)
					return
				}
			}
		}(p)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for _, p := range ti.Partitions {
		lead := replicaBytes(t, c.Node(p.Leader), "r3", p.Partition)
		require.NotEmpty(t, lead)
		for _, r := range p.Replicas {
			assert.True(t, bytes.Equal(lead, replicaBytes(t, c.Node(r), "r3", p.Partition)), "partition %d: broker %d differs from the leader", p.Partition, r)
		}
	}

	// Kill a follower of partition 0: its writes fail naming it.
	p0 := ti.Partitions[0]
	victim := p0.Replicas[1]
	require.NoError(t, c.Node(victim).Kill())
	_, err := produceOne(ctx, c.Node(p0.Leader).RPC, "r3", 0, "while down")
	require.ErrorIs(t, err, transport.ErrReplicationFailed)
	assert.Contains(t, err.Error(), fmt.Sprintf("broker %d", victim))

	// Restart it: catch-up makes writes succeed and the replicas identical.
	require.NoError(t, c.StartNode(victim))
	require.Eventually(t, func() bool {
		_, err := produceOne(ctx, c.Node(p0.Leader).RPC, "r3", 0, "after restart")
		return err == nil
	}, 30*time.Second, 200*time.Millisecond)
	lead := replicaBytes(t, c.Node(p0.Leader), "r3", 0)
	for _, r := range p0.Replicas {
		assert.True(t, bytes.Equal(lead, replicaBytes(t, c.Node(r), "r3", 0)), "broker %d differs after catch-up", r)
	}
}
