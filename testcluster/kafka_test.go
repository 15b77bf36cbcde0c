package testcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ctlRecord is a record as gostream-ctl consume -o json prints it.
type ctlRecord struct {
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Timestamp string `json:"timestamp"`
	Key       string `json:"key"`
	Value     string `json:"value"`
	Headers   []struct {
		Key   string `json:"key"`
		Value string `json:"value"`
	} `json:"headers"`
}

// One log, two protocols: franz-go produces keyed records with headers
// and their own timestamps, in gzip, to an RF=3 topic through one node;
// franz-go reads them back through each node, and gostream-ctl consume
// reads the same records at the same offsets, keys, values, headers and
// timestamps intact.
func TestKafkaClientsAndNativeConsumersShareTheLog(t *testing.T) {
	c := startClusterWith(t, Config{Nodes: 3, Kafka: true})
	ctlOK(t, c, "topic", "create", "k", "--partitions", "3", "--replication-factor", "3")

	const n = 3000
	pr, err := kgo.NewClient(kgo.SeedBrokers(c.Node(2).Kafka), kgo.DisableIdempotentWrite(), kgo.ProducerBatchCompression(kgo.GzipCompression()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(5*time.Millisecond))
	require.NoError(t, err)
	defer pr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var recs []*kgo.Record
	base := time.UnixMilli(1_700_000_000_000)
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: "k", Key: []byte(fmt.Sprint("key-", i%97)), Value: []byte(fmt.Sprint("value-", i)),
			Headers: []kgo.RecordHeader{{Key: "i", Value: []byte(strconv.Itoa(i))}}, Timestamp: base.Add(time.Duration(i) * time.Millisecond)})
	}
	results := pr.ProduceSync(ctx, recs...)
	require.NoError(t, results.FirstErr())

	// What gostream-ctl reads.
	out := ctlOK(t, c, "consume", "k", "-o", "json").Stdout
	native := map[string]ctlRecord{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r ctlRecord
		require.NoError(t, json.Unmarshal([]byte(line), &r), line)
		native[r.Value] = r
	}
	require.Len(t, native, n)
	for _, res := range results {
		r := res.Record
		got, ok := native[string(r.Value)]
		require.True(t, ok, "%s not read by gostream-ctl", r.Value)
		assert.Equal(t, r.Partition, got.Partition)
		assert.Equal(t, r.Offset, got.Offset, "%s", r.Value)
		assert.Equal(t, string(r.Key), got.Key)
		require.Len(t, got.Headers, 1)
		assert.Equal(t, string(r.Headers[0].Value), got.Headers[0].Value)
		ts, err := time.Parse(time.RFC3339Nano, got.Timestamp)
		require.NoError(t, err)
		assert.Equal(t, r.Timestamp.UnixMilli(), ts.UnixMilli(), "%s: the producer's timestamp", r.Value)
	}

	// What franz-go reads, through each node.
	for _, node := range c.Nodes {
		cl, err := kgo.NewClient(kgo.SeedBrokers(node.Kafka), kgo.ConsumeTopics("k"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		require.NoError(t, err)
		read := 0
		for read < n {
			fs := cl.PollFetches(ctx)
			require.NoError(t, ctx.Err(), "through node %d: read %d of %d", node.ID, read, n)
			fs.EachError(func(topic string, p int32, err error) { t.Fatalf("through node %d: %s/%d: %v", node.ID, topic, p, err) })
			fs.EachRecord(func(r *kgo.Record) {
				read++
				want := native[string(r.Value)]
				assert.Equal(t, want.Offset, r.Offset)
				assert.Equal(t, want.Key, string(r.Key))
			})
		}
		cl.Close()
		assert.Equal(t, n, read, "through node %d", node.ID)
	}
}
