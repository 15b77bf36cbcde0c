package node_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/record"
	"gostream/transport"
)

func dialNode(t *testing.T, addr string) *transport.Conn {
	t.Helper()
	var c *transport.Conn
	require.Eventually(t, func() bool {
		var err error
		c, err = transport.Dial(context.Background(), addr, transport.ConnConfig{})
		return err == nil
	}, 10*time.Second, 10*time.Millisecond)
	t.Cleanup(func() { c.Close() })
	return c
}

func batchOf(t *testing.T, values ...string) []byte {
	recs := make([]record.Record, len(values))
	for i, v := range values {
		recs[i] = record.Record{Key: []byte("k"), Value: []byte(v)}
	}
	b, err := record.AppendBatch(nil, recs)
	require.NoError(t, err)
	return b
}

func TestRPCTopicProduceFetch(t *testing.T) {
	cfg := testConfig(t, 1, t.TempDir())
	n := startNode(t, cfg)
	c := dialNode(t, cfg.Listen)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	var ti transport.TopicInfo
	require.NoError(t, c.Call(ctx, transport.APICreateTopic, &transport.CreateTopicRequest{Name: "orders", Partitions: 3, ReplicationFactor: 1}, &ti))
	assert.Len(t, ti.Partitions, 3)
	err := c.Call(ctx, transport.APICreateTopic, &transport.CreateTopicRequest{Name: "orders", Partitions: 3, ReplicationFactor: 1}, &ti)
	assert.ErrorIs(t, err, transport.ErrTopicExists)
	err = c.Call(ctx, transport.APICreateTopic, &transport.CreateTopicRequest{Name: "../x", Partitions: 1, ReplicationFactor: 1}, &ti)
	assert.ErrorIs(t, err, transport.ErrInvalidTopicName)
	err = c.Call(ctx, transport.APICreateTopic, &transport.CreateTopicRequest{Name: "x", Partitions: 1, ReplicationFactor: 3}, &ti)
	assert.ErrorIs(t, err, transport.ErrInvalidReplication)

	// Concurrent produces on one connection: each ack names where its
	// record really is.
	const n1 = 200
	var wg sync.WaitGroup
	acks := make([]transport.ProduceResponse, n1)
	errs := make([]error, n1)
	for i := 0; i < n1; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			req := &transport.ProduceRequest{Topic: "orders", Partition: 1, Batch: batchOf(t, fmt.Sprint(i))}
			errs[i] = c.Call(ctx, transport.APIProduce, req, &acks[i])
		}(i)
	}
	wg.Wait()
	for i := 0; i < n1; i++ {
		require.NoError(t, errs[i])
		assert.Equal(t, int32(1), acks[i].LeaderID)
		assert.Equal(t, acks[i].BaseOffset+1, acks[i].NextOffset)
	}

	var fr transport.FetchResponse
	require.NoError(t, c.Call(ctx, transport.APIFetch, &transport.FetchRequest{Topic: "orders", Partition: 1, Offset: 0, MaxBytes: 1 << 20}, &fr))
	assert.Equal(t, int64(n1), fr.HighWatermark)
	var got []string
	require.NoError(t, record.Batches(fr.Batches, func(b record.Batch) bool {
		recs, err := b.Decode()
		require.NoError(t, err)
		for _, r := range recs {
			got = append(got, string(r.Value))
			assert.Equal(t, acks[atoi(t, string(r.Value))].BaseOffset, r.Offset, "the ack names the offset the record has")
		}
		return true
	}))
	assert.Len(t, got, n1)

	// Long poll: a fetch at the end waits for the next produce.
	fetched := make(chan error, 1)
	go func() {
		var fr transport.FetchResponse
		err := c.Call(ctx, transport.APIFetch, &transport.FetchRequest{Topic: "orders", Partition: 0, Offset: 0, MaxBytes: 1 << 20, MaxWaitMs: 10000}, &fr)
		if err == nil && len(fr.Batches) == 0 {
			err = fmt.Errorf("empty long poll")
		}
		fetched <- err
	}()
	var ack transport.ProduceResponse
	require.NoError(t, c.Call(ctx, transport.APIProduce, &transport.ProduceRequest{Topic: "orders", Partition: 0, Batch: batchOf(t, "late")}, &ack))
	select {
	case err := <-fetched:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("long poll did not return after a produce")
	}
	// An empty long poll returns at its deadline.
	start := time.Now()
	require.NoError(t, c.Call(ctx, transport.APIFetch, &transport.FetchRequest{Topic: "orders", Partition: 2, Offset: 0, MaxBytes: 1024, MaxWaitMs: 200}, &fr))
	assert.Empty(t, fr.Batches)
	assert.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond)

	// Bad requests get clear errors and write nothing.
	err = c.Call(ctx, transport.APIProduce, &transport.ProduceRequest{Topic: "orders", Partition: 7, Batch: batchOf(t, "x")}, &ack)
	assert.ErrorIs(t, err, transport.ErrUnknownPartition)
	err = c.Call(ctx, transport.APIProduce, &transport.ProduceRequest{Topic: "nope", Partition: 0, Batch: batchOf(t, "x")}, &ack)
	assert.ErrorIs(t, err, transport.ErrUnknownTopic)
	bad := batchOf(t, "x")
	bad[len(bad)-1] ^= 0xff
	err = c.Call(ctx, transport.APIProduce, &transport.ProduceRequest{Topic: "orders", Partition: 0, Batch: bad}, &ack)
	assert.ErrorIs(t, err, transport.ErrInvalidBatch)
	err = c.Call(ctx, transport.APIFetch, &transport.FetchRequest{Topic: "orders", Partition: 0, Offset: -1, MaxBytes: 10}, &fr)
	assert.ErrorIs(t, err, transport.ErrOffsetOutOfRange)
	// Past the end is a position to wait at, not an error.
	fr = transport.FetchResponse{}
	require.NoError(t, c.Call(ctx, transport.APIFetch, &transport.FetchRequest{Topic: "orders", Partition: 0, Offset: 1 << 40, MaxBytes: 10, MaxWaitMs: 10}, &fr))
	assert.Empty(t, fr.Batches)
	assert.Equal(t, int64(1), fr.HighWatermark)
	var lo transport.ListOffsetsResponse
	require.NoError(t, c.Call(ctx, transport.APIListOffsets, &transport.ListOffsetsRequest{Topic: "orders", Partition: 0}, &lo))
	assert.Equal(t, transport.ListOffsetsResponse{LogStartOffset: 0, HighWatermark: 1, LogEndOffset: 1}, lo)

	// Seal: appends refused, reads go on, and it survives a restart.
	require.NoError(t, c.Call(ctx, transport.APISealTopic, &transport.TopicRequest{Name: "orders"}, nil))
	err = c.Call(ctx, transport.APIProduce, &transport.ProduceRequest{Topic: "orders", Partition: 0, Batch: batchOf(t, "x")}, &ack)
	assert.ErrorIs(t, err, transport.ErrTopicSealed)
	require.NoError(t, n.stop(t))

	n = startNode(t, cfg)
	c = dialNode(t, cfg.Listen)
	err = c.Call(ctx, transport.APIProduce, &transport.ProduceRequest{Topic: "orders", Partition: 0, Batch: batchOf(t, "x")}, &ack)
	assert.ErrorIs(t, err, transport.ErrTopicSealed)
	require.NoError(t, c.Call(ctx, transport.APIFetch, &transport.FetchRequest{Topic: "orders", Partition: 1, Offset: 0, MaxBytes: 1 << 20}, &fr))
	assert.Equal(t, int64(n1), fr.HighWatermark, "data and high watermark survive a restart")

	var md transport.MetadataResponse
	require.NoError(t, c.Call(ctx, transport.APIMetadata, &transport.MetadataRequest{}, &md))
	require.Len(t, md.Topics, 1)
	assert.True(t, md.Topics[0].Sealed)
	require.NoError(t, c.Call(ctx, transport.APIDeleteTopic, &transport.TopicRequest{Name: "orders"}, nil))
	err = c.Call(ctx, transport.APIFetch, &transport.FetchRequest{Topic: "orders", Partition: 0, Offset: 0, MaxBytes: 10}, &fr)
	assert.ErrorIs(t, err, transport.ErrUnknownTopic)
	_ = n
}

func atoi(t *testing.T, s string) int {
	var i int
	_, err := fmt.Sscan(s, &i)
	require.NoError(t, err)
	return i
}
