package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"gostream/testcluster"
)

// startCluster starts three nodes with Kafka listeners and returns the
// cluster and the Kafka bootstrap addresses.
func startCluster(t *testing.T) (*testcluster.Cluster, []string) {
	t.Helper()
	c, err := testcluster.New(testcluster.Config{Nodes: 3, Kafka: true, Dir: t.TempDir(), Logf: t.Logf})
	require.NoError(t, err)
	t.Cleanup(func() {
		c.Close()
		if t.Failed() {
			for _, n := range c.Nodes {
				t.Logf("node %d log tail:\n%s", n.ID, n.LogTail(40))
			}
		}
	})
	require.NoError(t, c.Start())
	var brokers []string
	for _, n := range c.Nodes {
		brokers = append(brokers, n.Kafka)
	}
	return c, brokers
}

func ctl(t *testing.T, c *testcluster.Cluster, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := c.Ctl(ctx, "", append([]string{"--timeout", "30s"}, args...)...)
	require.NoError(t, err)
	require.Equal(t, 0, res.Exit, "gostream-ctl %s: %s", strings.Join(args, " "), res.Stderr)
	return res.Stdout
}

func testConfig(brokers []string, topic string) config {
	return config{brokers: brokers, topic: topic, size: 100, producers: 1, linger: 5 * time.Millisecond,
		batchBytes: 256 << 10, bufferBytes: 32 << 20, partitioner: "round-robin", fetchPartBytes: 1 << 20,
		timeout: 2 * time.Minute}
}

// What bench-compare's B4 and B5 rest on: kafkabench counts every record
// acknowledged once and spreads keyless records round robin as
// gostream-ctl bench produce does; kafkabench consume reads exactly what
// is below the high watermarks (or -records), of data written by either
// client, and counts what gostream-ctl bench consume counts of the same
// topic.
func TestKafkabenchCountsAsGostreamCtlBench(t *testing.T) {
	c, brokers := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ctl(t, c, "topic", "create", "kb", "--partitions", "3", "--replication-factor", "3")

	cfg := testConfig(brokers, "kb")
	cfg.records, cfg.producers = 3000, 2
	r, err := runProduce(ctx, cfg)
	require.NoError(t, err)
	assert.Equal(t, int64(3000), r.Records)
	assert.Equal(t, int64(3000*100), r.Bytes)
	assert.Equal(t, 3, r.Partitions)
	assert.Positive(t, r.RecordsPerSec)
	assert.Positive(t, r.P50Ms)
	assert.GreaterOrEqual(t, r.P99Ms, r.P50Ms)

	// Each record once, a third of them in each partition.
	probe, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer probe.Close()
	hw, err := offsets(ctx, probe, "kb", []int32{0, 1, 2}, -1)
	require.NoError(t, err)
	assert.Equal(t, map[int32]int64{0: 1000, 1: 1000, 2: 1000}, hw)

	native := func(topic string) (records, bytes int64) {
		var s struct{ Records, Bytes int64 }
		require.NoError(t, json.Unmarshal([]byte(ctl(t, c, "bench", "consume", "--topic", topic, "-o", "json")), &s))
		return s.Records, s.Bytes
	}
	t.Run("consume what franz-go wrote", func(t *testing.T) {
		r, err := runConsume(ctx, testConfig(brokers, "kb"))
		require.NoError(t, err)
		assert.Equal(t, int64(3000), r.Records)
		assert.Equal(t, int64(3000*100), r.Bytes)
		n, b := native("kb")
		assert.Equal(t, n, r.Records, "gostream-ctl bench consume's count")
		assert.Equal(t, b, r.Bytes, "gostream-ctl bench consume's bytes")
	})
	t.Run("consume stops at -records", func(t *testing.T) {
		cfg := testConfig(brokers, "kb")
		cfg.records = 1234
		r, err := runConsume(ctx, cfg)
		require.NoError(t, err)
		assert.Equal(t, int64(1234), r.Records)
		assert.Equal(t, int64(1234*100), r.Bytes)
	})
	t.Run("consume what gostream-ctl wrote", func(t *testing.T) {
		ctl(t, c, "bench", "produce", "--topic", "nat", "--records", "2000", "--record-size", "100",
			"--partitions", "3", "--replication-factor", "3")
		r, err := runConsume(ctx, testConfig(brokers, "nat"))
		require.NoError(t, err)
		assert.Equal(t, int64(2000), r.Records)
		assert.Equal(t, int64(2000*100), r.Bytes)
		n, b := native("nat")
		assert.Equal(t, n, r.Records)
		assert.Equal(t, b, r.Bytes)
	})
	t.Run("a topic that does not exist", func(t *testing.T) {
		cfg := testConfig(brokers, "none")
		cfg.records = 10
		_, err := runProduce(ctx, cfg)
		require.ErrorContains(t, err, "UNKNOWN_TOPIC_OR_PARTITION")
		_, err = runConsume(ctx, cfg)
		require.ErrorContains(t, err, "UNKNOWN_TOPIC_OR_PARTITION")
	})
}
