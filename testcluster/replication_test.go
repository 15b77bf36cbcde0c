package testcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/client"
	"gostream/record"
	"gostream/transport"
)

func newClient(t *testing.T, c *Cluster) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := client.New(ctx, c.Secured(client.Config{Bootstrap: strings.Split(c.Bootstrap(), ","), RequestTimeout: 3 * time.Second}))
	require.NoError(t, err)
	t.Cleanup(func() { cl.Close() })
	return cl
}

// createTopic creates a topic; Cluster.Start has waited for every broker
// to register, so placement spans them all.
func createTopic(t *testing.T, cl *client.Client, name string, partitions, rf int) client.TopicMetadata {
	t.Helper()
	var tm client.TopicMetadata
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var err error
		tm, err = cl.CreateTopic(ctx, name, partitions, rf)
		if err != nil {
			t.Logf("create topic %s: %v", name, err)
		}
		return err == nil || errors.Is(err, client.ErrNotServing) // created either way
	}, 60*time.Second, 250*time.Millisecond)
	return tm
}

type acked struct {
	partition int32
	offset    int64
	key       string
	seq       int // per producer and key, in send order
	producer  int
}

// consumeAll reads a partition from 0 to its high watermark.
func consumeAll(t *testing.T, cl *client.Client, topic string, p int32) map[int64]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cons, err := client.NewConsumer(cl, topic, p, client.ConsumerConfig{})
	require.NoError(t, err)
	var off client.PartitionOffsets
	require.Eventually(t, func() bool {
		// A leader that just started answers NotReady until it has heard
		// from its followers.
		off, err = cl.ListOffsets(ctx, topic, p)
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "list offsets of %s/%d: %v", topic, p, err)
	got := map[int64]string{}
	for cons.Position() < off.HighWatermark {
		recs, err := cons.Poll(ctx, time.Second)
		require.NoError(t, err)
		for _, r := range recs {
			_, dup := got[r.Offset]
			require.False(t, dup, "offset %d read twice", r.Offset)
			got[r.Offset] = string(r.Value)
		}
	}
	return got
}

// TestTenThousandKeyedRecordsOnThreeReplicas is the acceptance test of
// the cluster: several producers at once, every acknowledged record read
// back at its offset, keys kept in order, replicas byte-identical.
func TestTenThousandKeyedRecordsOnThreeReplicas(t *testing.T) {
	c := startCluster(t, 3)
	cl := newClient(t, c)
	tm := createTopic(t, cl, "orders", 4, 3)

	const producers, perProducer, keys = 4, 2500, 40
	var mu sync.Mutex
	var acks []acked
	var wg sync.WaitGroup
	errs := make(chan error, producers*perProducer)
	for w := 0; w < producers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			p, err := client.NewProducer(cl, client.ProducerConfig{})
			if err != nil {
				errs <- err
				return
			}
			defer p.Close()
			seq := map[string]int{}
			for i := 0; i < perProducer; i++ {
				key := fmt.Sprintf("user-%d", (w*perProducer+i)%keys)
				s := seq[key]
				seq[key]++
				value := fmt.Sprintf("%d/%d/%s/%d", w, i, key, s)
				p.SendAsync(client.ProducerRecord{Topic: "orders", Key: []byte(key), Value: []byte(value)}, func(a client.Ack, err error) {
					if err != nil {
						errs <- fmt.Errorf("%s: %w", value, err)
						return
					}
					mu.Lock()
					acks = append(acks, acked{a.Partition, a.Offset, key, s, w})
					mu.Unlock()
				})
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if err := p.Flush(ctx); err != nil {
				errs <- err
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Len(t, acks, producers*perProducer)

	read := map[int32]map[int64]string{}
	for _, p := range tm.Partitions {
		read[p.Partition] = consumeAll(t, cl, "orders", p.Partition)
	}
	total := 0
	for _, m := range read {
		total += len(m)
	}
	assert.Equal(t, producers*perProducer, total, "records read back")
	keyPartition := map[string]int32{}
	lastOffset := map[string]int64{} // producer/key -> offset of its last record
	byOffset := map[int32][]acked{}
	for _, a := range acks {
		v, ok := read[a.partition][a.offset]
		require.True(t, ok, "acknowledged record %+v not found", a)
		assert.Equal(t, fmt.Sprintf("/%s/%d", a.key, a.seq), v[strings.Index(v, "/"+a.key+"/"):], "offset %d of partition %d", a.offset, a.partition)
		if p, ok := keyPartition[a.key]; ok {
			assert.Equal(t, p, a.partition, "key %s in two partitions", a.key)
		}
		keyPartition[a.key] = a.partition
		byOffset[a.partition] = append(byOffset[a.partition], a)
	}
	// Per producer and key, later sends have higher offsets.
	for _, list := range byOffset {
		seen := map[string]int{}
		for _, a := range sortByOffset(list) {
			k := fmt.Sprintf("%d/%s", a.producer, a.key)
			if prev, ok := seen[k]; ok {
				assert.Greater(t, a.seq, prev, "order of %s", k)
			}
			seen[k] = a.seq
			lastOffset[k] = a.offset
		}
	}
	assertReplicasIdentical(t, c, "orders", tm)
}

func sortByOffset(list []acked) []acked {
	out := append([]acked(nil), list...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].offset < out[j-1].offset; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func assertReplicasIdentical(t *testing.T, c *Cluster, topic string, tm client.TopicMetadata) {
	t.Helper()
	for _, p := range tm.Partitions {
		lead := replicaBytes(t, c.Node(p.Leader), topic, p.Partition)
		require.NotEmpty(t, lead, "partition %d is empty on its leader", p.Partition)
		for _, r := range p.Replicas {
			assert.True(t, bytes.Equal(lead, replicaBytes(t, c.Node(r), topic, p.Partition)),
				"partition %d: broker %d differs from leader %d", p.Partition, r, p.Leader)
		}
	}
}

// TestPausedFollowerNeverHoldsAProducerPastItsDeadline: SIGSTOP a follower;
// a produce with a 2 s deadline fails by then, naming the follower; after
// SIGCONT writes succeed again.
func TestPausedFollowerNeverHoldsAProducerPastItsDeadline(t *testing.T) {
	c := startCluster(t, 3)
	cl := newClient(t, c)
	tm := createTopic(t, cl, "paused", 1, 3)
	p0 := tm.Partitions[0]
	leader := c.Node(p0.Leader).RPC
	_, err := produceOne(context.Background(), leader, "paused", 0, "first")
	require.NoError(t, err)

	victim := p0.Replicas[1]
	require.NoError(t, c.Node(victim).Pause())
	defer c.Node(victim).Resume()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	var ack transport.ProduceResponse
	conn, err := transport.Dial(ctx, leader, transport.ConnConfig{})
	require.NoError(t, err)
	defer conn.Close()
	b := batchOf(t, "while paused")
	err = conn.Call(ctx, transport.APIProduce, &transport.ProduceRequest{Topic: "paused", Partition: 0, TimeoutMs: 2000, Batch: b}, &ack)
	elapsed := time.Since(start)
	require.ErrorIs(t, err, transport.ErrReplicationFailed)
	assert.Contains(t, err.Error(), fmt.Sprintf("broker %d", victim))
	assert.Less(t, elapsed, 4*time.Second, "the produce was held past its deadline")
	t.Logf("produce failed after %s: %v", elapsed, err)

	require.NoError(t, c.Node(victim).Resume())
	require.Eventually(t, func() bool {
		_, err := produceOne(context.Background(), leader, "paused", 0, "after resume")
		return err == nil
	}, 30*time.Second, 250*time.Millisecond)
}

// TestControllerDownDataGoesOn: with the controller killed, a partition it
// does not hold keeps taking writes and reads; admin changes fail; after a
// restart the controller's metadata is the same.
func TestControllerDownDataGoesOn(t *testing.T) {
	c := startCluster(t, 4)
	cl := newClient(t, c)
	tm := createTopic(t, cl, "ctrl", 4, 3)
	var free *client.PartitionMetadata
	for i, p := range tm.Partitions {
		if !contains(p.Replicas, 1) {
			free = &tm.Partitions[i]
		}
	}
	require.NotNil(t, free, "placement puts some partition away from broker 1")
	leader := c.Node(free.Leader).RPC
	_, err := produceOne(context.Background(), leader, "ctrl", free.Partition, "before")
	require.NoError(t, err)
	metaPath := filepath.Join(c.Node(1).DataDir, "controller", "metadata.json")
	before, err := os.ReadFile(metaPath)
	require.NoError(t, err)

	require.NoError(t, c.Node(1).Kill())
	for i := 0; i < 20; i++ {
		_, err := produceOne(context.Background(), leader, "ctrl", free.Partition, fmt.Sprint("during-", i))
		require.NoError(t, err, "produce while the controller is down")
	}
	got := consumeAll(t, cl, "ctrl", free.Partition)
	assert.Len(t, got, 21)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_, err = cl.CreateTopic(ctx, "while-down", 1, 1)
	cancel()
	assert.Error(t, err, "admin changes need the controller")

	require.NoError(t, c.StartNode(1))
	after, err := os.ReadFile(metaPath)
	require.NoError(t, err)
	assert.JSONEq(t, string(before), string(after), "the controller's metadata changed across a restart")
	_, err = produceOne(context.Background(), leader, "ctrl", free.Partition, "after")
	require.NoError(t, err)
}

func contains(list []int32, v int32) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func batchOf(t *testing.T, value string) []byte {
	t.Helper()
	b, err := record.AppendBatch(nil, []record.Record{{Key: []byte("k"), Value: []byte(value)}})
	require.NoError(t, err)
	return b
}
