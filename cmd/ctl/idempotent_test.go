package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/record"
	"gostream/testcluster"
	"gostream/transport"
)

// producedBatch is what a stored batch says of its producer.
type producedBatch struct {
	producer int64
	sequence int32
	records  int32
}

// storedBatches fetches a partition of a one-node cluster from its node
// as it is stored, batch by batch.
func storedBatches(t *testing.T, c *testcluster.Cluster, topic string, partition int32) []producedBatch {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := transport.Dial(ctx, c.Node(1).RPC, transport.ConnConfig{})
	require.NoError(t, err)
	defer conn.Close()
	var resp transport.FetchResponse
	require.NoError(t, conn.Call(ctx, transport.APIFetch, &transport.FetchRequest{Topic: topic, Partition: partition, MaxBytes: 64 << 20}, &resp))
	var out []producedBatch
	for buf := resp.Batches; len(buf) > 0; {
		var b record.Batch
		b, buf, err = record.Frame(buf, record.MaxBatchSize)
		require.NoError(t, err)
		id, _, seq := b.Producer()
		out = append(out, producedBatch{producer: id, sequence: seq, records: b.RecordCount()})
	}
	return out
}

// checkSequenced checks that batches are one idempotent producer's, with
// sequences from 0 that follow each other, and returns its producer id.
func checkSequenced(t *testing.T, batches []producedBatch) int64 {
	t.Helper()
	require.NotEmpty(t, batches)
	id := batches[0].producer
	assert.GreaterOrEqual(t, id, int64(0), "an idempotent producer's batch carries its producer id")
	next := int32(0)
	for _, b := range batches {
		assert.Equal(t, id, b.producer)
		assert.Equal(t, next, b.sequence, "sequences follow each other")
		next = b.sequence + b.records
	}
	return id
}

// produce --idempotent and bench produce --idempotent write idempotent
// producers' batches (a producer id and sequences); without the flag,
// batches carry none. What an idempotent producer does with them is
// client's and testcluster's TestIdempotent* tests.
func TestIdempotentProduceFlags(t *testing.T) {
	c := startCluster(t)
	ctlOK(t, c, "", "topic", "create", "t", "--partitions", "1")

	ctlOK(t, c, "", "produce", "t", "plain")
	out := ctlOK(t, c, "", "produce", "t", "--idempotent", "a", "b", "c")
	assert.Equal(t, []string{"t/0@1 (value 1)", "t/0@2 (value 2)", "t/0@3 (value 3)"}, lines(out))
	batches := storedBatches(t, c, "t", 0)
	require.NotEmpty(t, batches)
	assert.Equal(t, int64(-1), batches[0].producer, "without --idempotent, no producer id")
	checkSequenced(t, batches[1:])
	recs := decodeLines[consumed](t, ctlOK(t, c, "", "consume", "t", "-o", "json"))
	require.Len(t, recs, 4)
	for i, want := range []string{"plain", "a", "b", "c"} {
		assert.Equal(t, want, recs[i].Value)
		ts, err := time.Parse(timestampLayout, recs[i].Timestamp)
		require.NoError(t, err)
		assert.WithinDuration(t, time.Now(), ts, 10*time.Minute, "record %q: the leader's append time", want)
	}

	res := ctl(t, c, "", "bench", "produce", "--idempotent", "--records", "500", "--record-size", "100", "--topic", "bi", "--batch-bytes", "4096")
	require.Equal(t, 0, res.Exit, res.Stderr)
	assert.Contains(t, res.Stderr, "1 producer, async, idempotent, linger 5ms")
	batches = storedBatches(t, c, "bi", 0)
	assert.Greater(t, len(batches), 1, "several batches")
	checkSequenced(t, batches)
	var total int32
	for _, b := range batches {
		total += b.records
	}
	assert.Equal(t, int32(500), total)
}
