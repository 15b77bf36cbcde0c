package node_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/record"
	"gostream/transport"
)

// metricValue reads one unlabelled metric from a node's /metrics.
func metricValue(t *testing.T, httpAddr, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err)
			return f
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// produceLarge writes n batches of one record of 128 KiB each, value i
// made of the byte 'a'+i%26, to partition 0 of topic.
func produceLarge(t *testing.T, ctx context.Context, c *transport.Conn, topic string, n int) {
	t.Helper()
	for i := range n {
		value := bytes.Repeat([]byte{byte('a' + i%26)}, 128<<10)
		var ack transport.ProduceResponse
		require.NoError(t, c.Call(ctx, transport.APIProduce, &transport.ProduceRequest{Topic: topic, Partition: 0, Batch: batchOf(t, string(value))}, &ack))
	}
}

// segmentsOnDisk is the concatenation of a partition's segment files
// (the newest with the zeros preallocated after its data).
func segmentsOnDisk(t *testing.T, dir string) []byte {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	require.NoError(t, err)
	var all []byte
	for _, s := range segs {
		b, err := os.ReadFile(s)
		require.NoError(t, err)
		all = append(all, b...)
	}
	return all
}

// TestFetchSendsFromTheFile: a consumer on a plaintext connection reads a
// partition in fetches of more than 64 KiB, which the node sends from the
// segment files (its sendfile metric counts every byte), and gets exactly
// the bytes of the files, its records whole.
func TestFetchSendsFromTheFile(t *testing.T) {
	cfg := testConfig(t, 1, t.TempDir())
	startNode(t, cfg)
	c := dialNode(t, cfg.Listen)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var ti transport.TopicInfo
	require.NoError(t, c.Call(ctx, transport.APICreateTopic, &transport.CreateTopicRequest{Name: "big", Partitions: 1, ReplicationFactor: 1,
		Config: []transport.ConfigEntry{{Key: "segment.bytes", Value: 1 << 20}}}, &ti))
	const batches = 20
	produceLarge(t, ctx, c, "big", batches)

	var got []byte
	var values []byte
	for off := int64(0); off < batches; {
		var fr transport.FetchResponse
		require.NoError(t, c.Call(ctx, transport.APIFetch, &transport.FetchRequest{Topic: "big", Partition: 0, Offset: off, MaxBytes: 1 << 20}, &fr))
		require.NotEmpty(t, fr.Batches, "offset %d", off)
		got = append(got, fr.Batches...)
		require.NoError(t, record.Batches(fr.Batches, func(b record.Batch) bool {
			recs, err := b.Decode()
			require.NoError(t, err)
			values = append(values, recs[0].Value[0])
			off = b.NextOffset()
			return true
		}))
	}
	want := segmentsOnDisk(t, filepath.Join(cfg.DataDir, "topics", "big", "partition-0"))
	require.GreaterOrEqual(t, len(want), len(got))
	assert.True(t, bytes.Equal(want[:len(got)], got), "the fetches carry the segments' bytes exactly")
	assert.Empty(t, bytes.Trim(want[len(got):], "\x00"), "and nothing else is in them")
	assert.Equal(t, "abcdefghijklmnopqrst", string(values))
	assert.Equal(t, float64(len(got)), metricValue(t, cfg.HTTP, "gostream_fetch_sendfile_bytes_total"), "every fetch was sent from the file")
}

// TestRetentionDeletesASegmentBeingSent: a consumer that reads slowly
// has fetches of the first segment queued on its connection, sent from
// the file, when retention deletes that segment. Every answer still
// carries exactly the bytes the segment held.
func TestRetentionDeletesASegmentBeingSent(t *testing.T) {
	cfg := testConfig(t, 1, t.TempDir())
	cfg.RetentionInterval = 20 * time.Millisecond
	startNode(t, cfg)
	c := dialNode(t, cfg.Listen)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var ti transport.TopicInfo
	require.NoError(t, c.Call(ctx, transport.APICreateTopic, &transport.CreateTopicRequest{Name: "big", Partitions: 1, ReplicationFactor: 1,
		Config: []transport.ConfigEntry{{Key: "segment.bytes", Value: 1 << 20}}}, &ti))
	produceLarge(t, ctx, c, "big", 20)
	dir := filepath.Join(cfg.DataDir, "topics", "big", "partition-0")
	first := filepath.Join(dir, fmt.Sprintf("%020d.log", 0))
	segment, err := os.ReadFile(first)
	require.NoError(t, err)

	// A connection that takes 4 KiB at a time: 16 fetches of the first
	// segment are read and their answers lent ranges of it, most of them
	// waiting behind full socket buffers.
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	slow, err := d.DialContext(ctx, "tcp", cfg.Listen)
	require.NoError(t, err)
	defer slow.Close()
	const fetches = 16
	before := metricValue(t, cfg.HTTP, "gostream_fetch_sendfile_bytes_total")
	req := &transport.FetchRequest{Topic: "big", Partition: 0, Offset: 0, MaxBytes: 1 << 20}
	for id := range uint32(fetches) {
		_, err := slow.Write(transport.AppendFrame(nil, transport.Frame{API: uint16(transport.APIFetch), Version: transport.Version1, CorrelationID: id, Body: transport.Marshal(nil, req)}))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		return metricValue(t, cfg.HTTP, "gostream_fetch_sendfile_bytes_total")-before == float64(fetches*len(segment))
	}, 10*time.Second, 5*time.Millisecond, "every fetch lent a range of the first segment")

	var alt transport.TopicInfo
	require.NoError(t, c.Call(ctx, transport.APIAlterTopicConfig, &transport.AlterTopicConfigRequest{Name: "big",
		Set: []transport.ConfigEntry{{Key: "retention.bytes", Value: 1}}}, &alt))
	require.Eventually(t, func() bool {
		_, err := os.Stat(first)
		return os.IsNotExist(err)
	}, 10*time.Second, 5*time.Millisecond, "retention deletes the first segment")
	var lo transport.ListOffsetsResponse
	require.NoError(t, c.Call(ctx, transport.APIListOffsets, &transport.ListOffsetsRequest{Topic: "big", Partition: 0}, &lo))
	require.Positive(t, lo.LogStartOffset)

	for range fetches {
		f, err := transport.ReadFrame(slow, transport.DefaultMaxFrameBytes)
		require.NoError(t, err)
		rest, werr, err := transport.SplitResponse(f.Body)
		require.NoError(t, err)
		require.Nil(t, werr)
		var fr transport.FetchResponse
		require.NoError(t, transport.Unmarshal(rest, &fr))
		require.True(t, bytes.Equal(segment, fr.Batches), "answer %d carries the deleted segment's bytes", f.CorrelationID)
	}
	slow.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	n, _ := io.ReadFull(slow, make([]byte, 1))
	assert.Zero(t, n, "nothing but the answers")
}
