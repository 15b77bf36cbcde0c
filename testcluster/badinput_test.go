package testcluster

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/record"
	"gostream/transport"
)

func raceEnabledOrNot() bool { return raceEnabled }

func startCluster(t *testing.T, nodes int) *Cluster {
	t.Helper()
	return startClusterWith(t, Config{Nodes: nodes})
}

// startClusterWith starts a cluster of cfg, in a temporary directory, with
// the race detector when the tests have it, logging to t; a race the
// detector reports in a node fails the test.
func startClusterWith(t *testing.T, cfg Config) *Cluster {
	t.Helper()
	c := newClusterWith(t, cfg)
	require.NoError(t, c.Start())
	return c
}

// newClusterWith is startClusterWith but for the start: no node runs yet.
func newClusterWith(t *testing.T, cfg Config) *Cluster {
	t.Helper()
	cfg.Dir, cfg.Race, cfg.Logf = t.TempDir(), raceEnabledOrNot(), t.Logf
	c, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		c.Close()
		// A race in a node goes to its log, not to this test: fail on it.
		for _, r := range c.DataRaces() {
			t.Errorf("the race detector reported, in a node process:\n%s", r)
		}
		if t.Failed() {
			for _, n := range c.Nodes {
				t.Logf("node %d log tail:\n%s", n.ID, n.LogTail(60))
			}
		}
	})
	return c
}

func call(t *testing.T, addr string, api transport.API, req, resp transport.Message) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := transport.Dial(ctx, addr, transport.ConnConfig{})
	require.NoError(t, err)
	defer conn.Close()
	return conn.Call(ctx, api, req, resp)
}

// TestRandomFramesLeaveTheNodeServing throws random frames, garbage and
// other protocols at a running node from several connections at once, then
// checks that it still serves everyone correctly and that nothing was
// written. Admin APIs are left out of the random API keys: a random body
// that happened to decode as a valid CreateTopic would be a real change.
func TestRandomFramesLeaveTheNodeServing(t *testing.T) {
	c := startCluster(t, 1)
	addr := c.Nodes[0].RPC
	require.NoError(t, call(t, addr, transport.APICreateTopic, &transport.CreateTopicRequest{Name: "t", Partitions: 2, ReplicationFactor: 1}, &transport.TopicInfo{}))
	batch, err := record.AppendBatch(nil, []record.Record{{Key: []byte("k"), Value: []byte("before")}})
	require.NoError(t, err)
	var ack transport.ProduceResponse
	require.NoError(t, call(t, addr, transport.APIProduce, &transport.ProduceRequest{Topic: "t", Partition: 0, Batch: batch}, &ack))

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for i := 0; i < 40; i++ {
				sendRandom(t, rng, addr)
			}
		}(w)
	}
	wg.Wait()

	require.True(t, c.Nodes[0].Healthy(), "node is down after random input")
	var fr transport.FetchResponse
	require.NoError(t, call(t, addr, transport.APIFetch, &transport.FetchRequest{Topic: "t", Partition: 0, Offset: 0, MaxBytes: 1 << 20}, &fr))
	assert.Equal(t, int64(1), fr.HighWatermark, "a rejected request wrote something")
	require.NoError(t, call(t, addr, transport.APIFetch, &transport.FetchRequest{Topic: "t", Partition: 1, Offset: 0, MaxBytes: 1 << 20}, &fr))
	assert.Equal(t, int64(0), fr.HighWatermark, "a rejected request wrote something")
	var md transport.MetadataResponse
	require.NoError(t, call(t, addr, transport.APIMetadata, &transport.MetadataRequest{}, &md))
	assert.Len(t, md.Topics, 1)
	require.NoError(t, call(t, addr, transport.APIProduce, &transport.ProduceRequest{Topic: "t", Partition: 0, Batch: batch}, &ack))
	assert.Equal(t, int64(1), ack.BaseOffset)
}

func sendRandom(t *testing.T, rng *rand.Rand, addr string) {
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Errorf("dial: %v", err)
		return
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	var buf []byte
	switch rng.IntN(6) {
	case 0: // garbage
		buf = make([]byte, rng.IntN(512))
		for i := range buf {
			buf[i] = byte(rng.Uint32())
		}
	case 1: // HTTP
		buf = []byte("GET /api/health HTTP/1.1\r\nHost: x\r\n\r\n")
	case 2: // TLS ClientHello prefix
		buf = []byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03}
	case 3: // oversized claim
		buf = binary.BigEndian.AppendUint32(nil, 1<<31)
	default: // well-framed, random API (no admin), version and body
		apis := []uint16{0, 1, 2, 3, 4, 8, 99, 65535}
		body := make([]byte, rng.IntN(256))
		for i := range body {
			body[i] = byte(rng.Uint32())
		}
		f := transport.Frame{API: apis[rng.IntN(len(apis))], Version: uint16(rng.IntN(3)), CorrelationID: rng.Uint32(), Body: body}
		buf = transport.AppendFrame(nil, f)
		if rng.IntN(4) == 0 {
			buf = buf[:rng.IntN(len(buf))] // truncated
		}
	}
	nc.Write(buf)
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.CloseWrite()
	}
	// The node answers a well-framed request with an error frame, and closes
	// the connection on anything else; either way the read ends.
	io.Copy(io.Discard, nc)
}

func TestBadInputOnAConnectionDoesNotDisturbOthers(t *testing.T) {
	c := startCluster(t, 1)
	addr := c.Nodes[0].RPC
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	good, err := transport.Dial(ctx, addr, transport.ConnConfig{})
	require.NoError(t, err)
	defer good.Close()
	require.NoError(t, good.Call(ctx, transport.APICreateTopic, &transport.CreateTopicRequest{Name: "t", Partitions: 1, ReplicationFactor: 1}, &transport.TopicInfo{}))

	// Unknown API and version get a clear error on a connection that stays open.
	bad, err := transport.Dial(ctx, addr, transport.ConnConfig{})
	require.NoError(t, err)
	defer bad.Close()
	err = bad.Call(ctx, transport.API(999), &transport.Empty{}, nil)
	assert.ErrorIs(t, err, transport.ErrUnsupportedVersion)
	assert.ErrorContains(t, err, "unknown API 999")
	// Negative and huge values.
	var fr transport.FetchResponse
	for _, req := range []*transport.FetchRequest{
		{Topic: "t", Partition: -1, MaxBytes: 10},
		{Topic: "t", Partition: 1 << 30, MaxBytes: 10},
		{Topic: "t", Offset: -5, MaxBytes: 10},
		{Topic: "t", MaxBytes: -1},
		{Topic: "t", MaxBytes: 10, MaxWaitMs: -1},
		{Topic: "t", MaxBytes: 10, MaxWaitMs: 1 << 30},
		{Topic: "../../etc", MaxBytes: 10},
	} {
		err := bad.Call(ctx, transport.APIFetch, req, &fr)
		assert.Error(t, err, fmt.Sprintf("%+v", req))
	}
	// Past the log end is a place to wait, not bad input: an empty answer.
	fr = transport.FetchResponse{}
	require.NoError(t, bad.Call(ctx, transport.APIFetch, &transport.FetchRequest{Topic: "t", Offset: 1 << 62, MaxBytes: 10}, &fr))
	assert.Empty(t, fr.Batches)
	err = bad.Call(ctx, transport.APICreateTopic, &transport.CreateTopicRequest{Name: "x", Partitions: -3, ReplicationFactor: 1}, nil)
	assert.ErrorIs(t, err, transport.ErrInvalidPartitions)
	err = bad.Call(ctx, transport.APICreateTopic, &transport.CreateTopicRequest{Name: "x", Partitions: 1 << 30, ReplicationFactor: 1}, nil)
	assert.ErrorIs(t, err, transport.ErrInvalidPartitions)
	err = bad.Call(ctx, transport.APICreateTopic, &transport.CreateTopicRequest{Name: "..", Partitions: 1, ReplicationFactor: 1}, nil)
	assert.ErrorIs(t, err, transport.ErrInvalidTopicName)

	var md transport.MetadataResponse
	require.NoError(t, good.Call(ctx, transport.APIMetadata, &transport.MetadataRequest{}, &md))
	assert.Len(t, md.Topics, 1, "rejected requests created nothing")
}
