package node_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/httpapi"
	"gostream/record"
	"gostream/transport"
)

// TestBatchLimit runs a node with a small --max-batch-bytes: the metadata
// carries it, a batch over it is refused in the words the producer uses,
// and a frame over the frame limit is answered on a connection that goes
// on.
func TestBatchLimit(t *testing.T) {
	const limit = 64 << 10
	cfg := testConfig(t, 1, t.TempDir())
	cfg.MaxBatchBytes = limit
	startNode(t, cfg)
	c := dialNode(t, cfg.Listen)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, c.Call(ctx, transport.APICreateTopic, &transport.CreateTopicRequest{Name: "t", Partitions: 1, ReplicationFactor: 1}, &transport.TopicInfo{}))

	var md transport.MetadataResponse
	require.NoError(t, c.Call(ctx, transport.APIMetadata, &transport.MetadataRequest{}, &md))
	assert.Equal(t, int32(limit), md.MaxBatchBytes)

	batch := func(valueBytes int) []byte {
		b, err := record.AppendBatch(nil, []record.Record{{Value: make([]byte, valueBytes)}})
		require.NoError(t, err)
		return b
	}
	var ack transport.ProduceResponse
	over := batch(limit)
	err := c.Call(ctx, transport.APIProduce, &transport.ProduceRequest{Topic: "t", Batch: over}, &ack)
	require.ErrorIs(t, err, transport.ErrMessageTooLarge)
	assert.Equal(t, fmt.Sprintf("MessageTooLarge: a batch of %d bytes exceeds the cluster's limit of %d bytes (--max-batch-bytes)", len(over), limit), err.Error())

	atLimit := batch(limit - (len(over) - limit))
	require.Len(t, atLimit, limit)
	require.NoError(t, c.Call(ctx, transport.APIProduce, &transport.ProduceRequest{Topic: "t", Batch: atLimit}, &ack))

	// Over the frame limit: the node reads the frame, answers and serves on.
	huge := batch(2 * limit)
	err = c.Call(ctx, transport.APIProduce, &transport.ProduceRequest{Topic: "t", Batch: huge}, &ack)
	require.ErrorIs(t, err, transport.ErrMessageTooLarge)
	assert.Contains(t, err.Error(), fmt.Sprintf("the cluster's batch limit of %d bytes, --max-batch-bytes", limit))
	require.NoError(t, c.Err())
	var lo transport.ListOffsetsResponse
	require.NoError(t, c.Call(ctx, transport.APIListOffsets, &transport.ListOffsetsRequest{Topic: "t"}, &lo))
	assert.Equal(t, int64(1), lo.HighWatermark, "only the batch within the limit was appended")
}

// TestHealthDegradedWhileRefusingConnections fills a node's per-address
// connection limit: the next connection is closed at once, and health and
// metrics say so.
func TestHealthDegradedWhileRefusingConnections(t *testing.T) {
	cfg := testConfig(t, 5, t.TempDir())
	cfg.MaxConnsPerAddr = 2
	startNode(t, cfg)
	waitHealthy(t, cfg.HTTP)

	for range 2 {
		dialNode(t, cfg.Listen)
	}
	nc, err := net.Dial("tcp", cfg.Listen)
	require.NoError(t, err)
	defer nc.Close()
	require.NoError(t, nc.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = nc.Read(make([]byte, 1))
	require.Error(t, err, "the connection over the limit is closed")
	require.NotErrorIs(t, err, context.DeadlineExceeded)

	var h httpapi.Health
	require.Eventually(t, func() bool {
		var code int
		code, h, err = getHealth(cfg.HTTP)
		return err == nil && code == http.StatusServiceUnavailable
	}, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, httpapi.HealthDegraded, h.Status)
	assert.Equal(t, int32(5), h.Node)
	require.Len(t, h.Problems, 1)
	assert.True(t, strings.HasPrefix(h.Problems[0], "refusing connections: 1 on the rpc listener"), h.Problems[0])
	assert.Contains(t, h.Problems[0], "127.0.0.1 holds the per-address limit of 2 (--max-conns-per-ip)")

	resp, err := http.Get("http://" + cfg.HTTP + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Contains(t, string(body), `gostream_refused_connections_total{limit="per-address",listener="rpc"} 1`)
	assert.Contains(t, string(body), "gostream_request_memory_bytes ")
	assert.Contains(t, string(body), "gostream_busy_requests_total 0")
}
