package kafkaapi_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"gostream/broker"
	"gostream/kafkaapi"
	"gostream/metadata"
	"gostream/producers"
	"gostream/record"
	"gostream/storage"
	"gostream/transport"
)

// oneNode is a broker (id 1) that leads every partition of its topics
// alone, with its core and a Kafka server on a loopback port.
type oneNode struct {
	addr     string
	replicas *broker.Replicas
	core     *broker.Broker
	// fromFile counts the bytes of fetches read as ranges of their
	// segment files (sent with sendfile).
	fromFile *atomic.Int64
}

func startOneNode(t *testing.T, topics map[string]int) *oneNode {
	t.Helper()
	return startOneNodeAdvertising(t, topics, "")
}

// startOneNodeAdvertising is startOneNode with its Metadata naming
// advertise (HOST:PORT), when set, as the broker's address; its producer
// ids come from a stand-in for the controller.
func startOneNodeAdvertising(t *testing.T, topics map[string]int, advertise string) *oneNode {
	t.Helper()
	root, err := storage.OpenRoot(t.TempDir(), 1, "", hclog.NewNullLogger())
	require.NoError(t, err)
	r := broker.NewReplicas(broker.ReplicasConfig{Broker: 1, Root: root})
	t.Cleanup(func() { r.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	meta := &metadata.Cluster{Version: metadata.FormatVersion, ClusterID: "0123456789abcdef", ControllerID: 1, Epoch: 1}
	meta.PutBroker(metadata.Broker{ID: 1, Addr: ln.Addr().String()})
	i := 0
	for name, n := range topics {
		tp := metadata.Topic{Name: name, ID: fmt.Sprintf("%032x", i+1), ReplicationFactor: 1}
		for range n {
			tp.Partitions = append(tp.Partitions, metadata.Partition{Replicas: []int32{1}, Active: []int32{1}, Leader: 1, LeaderEpoch: 1})
		}
		meta.Topics = append(meta.Topics, tp)
		i++
	}
	require.NoError(t, r.ApplyMetadata(meta))
	prod := producers.New(producers.Config{})
	t.Cleanup(prod.Close)
	var blocks, fromFile atomic.Int64
	core := broker.New(broker.Config{Broker: 1, Replicas: r, MaxBatchBytes: 1 << 20, Producers: prod,
		OnFetched: func(bytes int, _ int64, file bool) {
			if file {
				fromFile.Add(int64(bytes))
			}
		},
		CallController: func(_ context.Context, api transport.API, req, resp transport.Message) error {
			if api != transport.APIAllocateProducerIDs {
				return transport.ErrNotController
			}
			a := resp.(*transport.AllocateProducerIDsResponse)
			a.Count = req.(*transport.AllocateProducerIDsRequest).Count
			a.First = blocks.Add(int64(a.Count)) - int64(a.Count)
			return nil
		}})
	addr := ln.Addr().String()
	if advertise != "" {
		addr = advertise
	}
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	s := kafkaapi.New(kafkaapi.Config{Broker: 1, Core: core, Endpoints: func(*metadata.Cluster, string) []kafkaapi.Endpoint {
		return []kafkaapi.Endpoint{{Broker: 1, Host: host, Port: int32(p)}}
	}})
	go s.Serve(ln)
	t.Cleanup(func() { ln.Close(); s.Close() })
	return &oneNode{addr: ln.Addr().String(), replicas: r, core: core, fromFile: &fromFile}
}

// franz-go, with its defaults (idempotence off here: InitProducerId needs
// a controller; testcluster's tests use real nodes and idempotence), produces keyed records with headers in every codec,
// and reads them back from the start, record for record, timestamps kept.
func TestFranzGoProducesAndFetches(t *testing.T) {
	n := startOneNode(t, map[string]int{"orders": 3})
	for _, codec := range []kgo.CompressionCodec{kgo.NoCompression(), kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr), kgo.DisableIdempotentWrite(), kgo.ProducerBatchCompression(codec),
			kgo.RequiredAcks(kgo.AllISRAcks()))
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		var recs []*kgo.Record
		for i := range 50 {
			recs = append(recs, &kgo.Record{Topic: "orders", Key: []byte(fmt.Sprint("k", i%7)), Value: []byte(fmt.Sprint("v", i)),
				Headers: []kgo.RecordHeader{{Key: "n", Value: []byte(strconv.Itoa(i))}}, Timestamp: time.UnixMilli(1_700_000_000_000 + int64(i))})
		}
		require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
		cancel()
		cl.Close()
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr), kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	seen := map[string]int{}
	for len(seen) < 50 || total(seen) < 250 {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %d of 250", total(seen))
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("%s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			seen[string(r.Value)]++
			i, _ := strconv.Atoi(string(r.Value[1:]))
			assert.Equal(t, fmt.Sprint("k", i%7), string(r.Key))
			assert.Equal(t, strconv.Itoa(i), string(r.Headers[0].Value))
			assert.Equal(t, int64(1_700_000_000_000+i), r.Timestamp.UnixMilli())
		})
	}
	for v, c := range seen {
		assert.Equal(t, 5, c, "%s once per codec", v)
	}
}

// TestFranzGoFetchesLargeBatchesFromTheFile: franz-go reads batches of
// hundreds of kilobytes, which a plain connection is sent from the
// segment files, and gets every record as it was produced.
func TestFranzGoFetchesLargeBatchesFromTheFile(t *testing.T) {
	n := startOneNode(t, map[string]int{"big": 1})
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr), kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchMaxBytes(900<<10), kgo.ProducerLinger(50*time.Millisecond))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const records = 60
	var recs []*kgo.Record
	for i := range records {
		recs = append(recs, &kgo.Record{Topic: "big", Key: []byte(strconv.Itoa(i)), Value: bytes.Repeat([]byte{byte(i)}, 50<<10)})
	}
	require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
	cl.Close()

	cl, err = kgo.NewClient(kgo.SeedBrokers(n.addr), kgo.ConsumeTopics("big"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	next := 0
	for next < records {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %d of %d", next, records)
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("%s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			require.Equal(t, int64(next), r.Offset)
			require.Equal(t, strconv.Itoa(next), string(r.Key))
			require.True(t, bytes.Equal(bytes.Repeat([]byte{byte(next)}, 50<<10), r.Value), "record %d", next)
			next++
		})
	}
	assert.Positive(t, n.fromFile.Load(), "the batches were sent from the file")
}

func total(m map[string]int) int {
	n := 0
	for _, c := range m {
		n += c
	}
	return n
}

// ApiVersions above ours is answered in v0 with UNSUPPORTED_VERSION and
// our list, with no tagged-field byte in the response header.
func TestApiVersionsAboveOursIsAnsweredInV0(t *testing.T) {
	n := startOneNode(t, nil)
	c, err := net.Dial("tcp", n.addr)
	require.NoError(t, err)
	defer c.Close()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 99
	body := append([]byte{0, 18, 0, 99, 0, 0, 0, 7, 0, 0}, req.AppendTo(nil)...)
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	_, err = c.Write(append(frame, body...))
	require.NoError(t, err)
	resp := readFrame(t, c)
	assert.Equal(t, int32(7), int32(binary.BigEndian.Uint32(resp)))
	var v kmsg.ApiVersionsResponse
	v.Version = 0
	require.NoError(t, v.ReadFrom(resp[4:]))
	assert.Equal(t, kerr.UnsupportedVersion.Code, v.ErrorCode)
	assert.NotEmpty(t, v.ApiKeys)
}

// A request of an API that is not served gets UNSUPPORTED_VERSION, and
// the connection goes on; bytes that are not Kafka close it.
func TestUnservedAPIAndGarbage(t *testing.T) {
	n := startOneNode(t, nil)
	c, err := net.Dial("tcp", n.addr)
	require.NoError(t, err)
	defer c.Close()
	dq := kmsg.NewPtrDescribeClientQuotasRequest()
	dq.Version = 0
	body := append([]byte{0, byte(kmsg.DescribeClientQuotas), 0, 0, 0, 0, 0, 1, 0, 0}, dq.AppendTo(nil)...)
	_, err = c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...))
	require.NoError(t, err)
	resp := readFrame(t, c)
	assert.Equal(t, int32(1), int32(binary.BigEndian.Uint32(resp)))
	var dr kmsg.DescribeClientQuotasResponse
	require.NoError(t, dr.ReadFrom(resp[4:]))
	assert.Equal(t, kerr.UnsupportedVersion.Code, dr.ErrorCode)

	_, err = c.Write([]byte{0x7f, 0xff, 0xff, 0xff, 1, 2, 3})
	require.NoError(t, err)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = c.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "a frame of 2 GiB closes the connection")
}

// Every request read is told to Config.Observe by its API's name: with
// no error once its answer is written, with the reason when the
// connection closes on it instead.
func TestObserveIsToldOfEveryRequest(t *testing.T) {
	type seen struct {
		api    string
		failed bool
	}
	var mu sync.Mutex
	var got []seen
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := kafkaapi.New(kafkaapi.Config{Broker: 1, Observe: func(api string, start time.Time, err error) {
		assert.WithinDuration(t, time.Now(), start, 5*time.Second, "%s: when it was read", api)
		mu.Lock()
		got = append(got, seen{api, err != nil})
		mu.Unlock()
	}})
	go s.Serve(ln)
	t.Cleanup(func() { ln.Close(); s.Close() })
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	send := func(key, version int16, corr int32, body []byte) {
		t.Helper()
		frame := binary.BigEndian.AppendUint16(nil, uint16(key))
		frame = binary.BigEndian.AppendUint16(frame, uint16(version))
		frame = binary.BigEndian.AppendUint32(frame, uint32(corr))
		frame = append(frame, 0, 0) // an empty client id
		frame = append(frame, body...)
		_, err := c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(frame))), frame...))
		require.NoError(t, err)
	}
	send(kmsg.ApiVersions.Int16(), 0, 1, nil)
	readFrame(t, c)
	dq := kmsg.NewPtrDescribeClientQuotasRequest()
	send(kmsg.DescribeClientQuotas.Int16(), 0, 2, dq.AppendTo(nil)) // not served: answered UNSUPPORTED_VERSION
	readFrame(t, c)
	send(30000, 0, 3, nil) // not Kafka's: the connection closes
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = c.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF)
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 3 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, []seen{{"ApiVersions", false}, {"DescribeClientQuotas", false}, {"Unknown", true}}, got)
}

func readFrame(t *testing.T, c net.Conn) []byte {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var size [4]byte
	_, err := io.ReadFull(c, size[:])
	require.NoError(t, err)
	b := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err = io.ReadFull(c, b)
	require.NoError(t, err)
	return b
}

// Close ends Serve (its listener closed) and every connection.
func TestCloseEndsServe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := kafkaapi.New(kafkaapi.Config{Broker: 1})
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	s.Close()
	select {
	case err := <-served:
		assert.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Serve still accepting after Close")
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = c.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "the connection is closed")
}

// An idempotent producer's batches through Kafka's Produce: a retry is
// answered with the original's base offset and appends nothing; a gap is
// OUT_OF_ORDER_SEQUENCE_NUMBER, an older epoch INVALID_PRODUCER_EPOCH.
func TestIdempotentProduce(t *testing.T) {
	n := startOneNode(t, map[string]int{"orders": 1})
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr))
	require.NoError(t, err)
	defer cl.Close()
	produce := func(epoch int16, seq int32, count int) kmsg.ProduceResponseTopicPartition {
		t.Helper()
		recs := make([]record.Record, count)
		for i := range recs {
			recs[i] = record.Record{Value: []byte(fmt.Sprint(seq + int32(i)))}
		}
		kb, err := record.AppendKafkaBatch(nil, recs, record.KafkaBatchOptions{ProducerID: 42, ProducerEpoch: epoch, BaseSequence: seq})
		require.NoError(t, err)
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = 7, -1, 10000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "orders"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = kb
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := req.RequestWith(ctx, cl)
		require.NoError(t, err)
		return resp.Topics[0].Partitions[0]
	}
	first := produce(0, 0, 3)
	require.Zero(t, first.ErrorCode)
	second := produce(0, 3, 2)
	require.Zero(t, second.ErrorCode)
	assert.Equal(t, int64(3), second.BaseOffset)
	again := produce(0, 0, 3)
	assert.Zero(t, again.ErrorCode, "a duplicate succeeds")
	assert.Equal(t, first.BaseOffset, again.BaseOffset, "as the original")
	assert.Equal(t, kerr.OutOfOrderSequenceNumber.Code, produce(0, 9, 1).ErrorCode)
	assert.Zero(t, produce(1, 0, 1).ErrorCode)
	assert.Equal(t, kerr.InvalidProducerEpoch.Code, produce(0, 5, 1).ErrorCode)
	offs, err := n.core.ListOffsets("", "orders", "", 0)
	require.NoError(t, err)
	assert.Equal(t, int64(6), offs.HighWatermark, "3 + 2 + 1 records, nothing twice")
}
