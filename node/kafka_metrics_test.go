package node_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"gostream/client"
	"gostream/internal/testaddr"
)

// The Kafka listener's requests are counted on /metrics by API, with the
// time from reading each to writing its answer.
func TestKafkaRequestsAreCounted(t *testing.T) {
	kafkaAddr := testaddr.For(t)
	cfg := testConfig(t, 1, t.TempDir())
	cfg.KafkaListen = kafkaAddr
	startNode(t, cfg)
	waitHealthy(t, cfg.HTTP)
	c := newClient(t, client.Config{Bootstrap: []string{cfg.Listen}})
	createTopic(t, c, "k", 1)
	c.Close()

	cl, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr), kgo.DefaultProduceTopic("k"))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 3 {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr())
	}
	// franz-go's first requests are ApiVersions and Metadata; its
	// idempotent producer asks for an id, then produces (three records,
	// one at a time: at least three Produce requests).
	assert.GreaterOrEqual(t, metricValue(t, cfg.HTTP, `gostream_kafka_requests_total{api="ApiVersions"}`), 1.0)
	assert.GreaterOrEqual(t, metricValue(t, cfg.HTTP, `gostream_kafka_requests_total{api="Metadata"}`), 1.0)
	produced := metricValue(t, cfg.HTTP, `gostream_kafka_requests_total{api="Produce"}`)
	assert.GreaterOrEqual(t, produced, 3.0)
	assert.Equal(t, produced, metricValue(t, cfg.HTTP, `gostream_kafka_request_duration_seconds_count{api="Produce"}`), "every Produce answered")
	assert.Greater(t, metricValue(t, cfg.HTTP, `gostream_kafka_request_duration_seconds_sum{api="Produce"}`), 0.0)
}
