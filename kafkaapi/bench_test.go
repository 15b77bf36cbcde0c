package kafkaapi

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"gostream/broker"
	"gostream/metadata"
	"gostream/record"
	"gostream/storage"
	"gostream/storage/logtest"
	"gostream/transport"
)

// Benchmarks of the Kafka front end's hot paths on their own, without the
// socket: a Produce request's and a Fetch request's whole life on a
// connection (serveConn), with batches of 1, 16 and 256 records of 1 KiB,
// on a broker that is the sole replica of its partition. make bench-micro
// runs them with the other packages' (docs/benchmarks.md, "Hot functions
// on their own").

var benchRecordCounts = []int{1, 16, 256}

// benchRecords returns n records with 3-byte keys, 1 KiB values and
// timestamps a millisecond apart.
func benchRecords(n int) []record.Record {
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Key: []byte("key"), Value: bytes.Repeat([]byte{byte('a' + i%26)}, 1<<10),
			Timestamp: 1_700_000_000_000 + int64(i)}
	}
	return recs
}

// benchKafkaBatch returns the Kafka record batch a producer without
// idempotence sends for n records, uncompressed.
func benchKafkaBatch(b *testing.B, n int) []byte {
	kb, err := record.AppendKafkaBatch(nil, benchRecords(n), record.NoProducer)
	require.NoError(b, err)
	return kb
}

// requestFrame is a Kafka request as a client writes it: its size, the
// request header (v2 for a flexible version, v1 before) and the body.
func requestFrame(req kmsg.Request, corr int32) []byte {
	frame := binary.BigEndian.AppendUint32(nil, 0) // the size, set below
	frame = binary.BigEndian.AppendUint16(frame, uint16(req.Key()))
	frame = binary.BigEndian.AppendUint16(frame, uint16(req.GetVersion()))
	frame = binary.BigEndian.AppendUint32(frame, uint32(corr))
	frame = binary.BigEndian.AppendUint16(frame, uint16(len("bench")))
	frame = append(frame, "bench"...)
	if req.IsFlexible() {
		frame = append(frame, 0) // no tagged fields
	}
	frame = req.AppendTo(frame)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	return frame
}

// benchServer is a Kafka server over the core of broker 1, the sole
// replica (RF 1) of orders/0, its log on the disk under b.TempDir() with
// fsync left out, in segments of 64 MiB; the replicas' retention keeps 64
// MiB of it.
func benchServer(b *testing.B) (*Server, *broker.Broker, *broker.Replicas) {
	root, err := storage.OpenRoot(b.TempDir(), 1, "", hclog.NewNullLogger())
	require.NoError(b, err)
	b.Cleanup(func() { root.Close() })
	replicas := broker.NewReplicas(broker.ReplicasConfig{Broker: 1, Root: root, LogOptions: storage.Options{FS: logtest.NoSyncFS{}}})
	b.Cleanup(func() { replicas.Close() })
	meta := &metadata.Cluster{Version: metadata.FormatVersion, ClusterID: "0123456789abcdef", ControllerID: 1, Epoch: 1}
	meta.PutBroker(metadata.Broker{ID: 1, Addr: "127.0.0.1:9092"})
	meta.Topics = append(meta.Topics, metadata.Topic{Name: "orders", ID: fmt.Sprintf("%032x", 1), ReplicationFactor: 1,
		Config:     metadata.TopicConfig{metadata.ConfigSegmentBytes: 64 << 20, metadata.ConfigRetentionBytes: 64 << 20},
		Partitions: []metadata.Partition{{Replicas: []int32{1}, Active: []int32{1}, Leader: 1, LeaderEpoch: 1}}})
	require.NoError(b, replicas.ApplyMetadata(meta))
	core := broker.New(broker.Config{Broker: 1, Replicas: replicas, MaxBatchBytes: transport.DefaultMaxBatchBytes})
	return New(Config{Broker: 1, Core: core}), core, replicas
}

// serveFrames serves a connection that reads the frames of feed over and
// over, n of them in all, until the n answers are written, then closes
// it. feed holds frames of one size.
func serveFrames(s *Server, feed []byte, frameSize, n int) {
	nc := &feedConn{closed: make(chan struct{}), feed: feed, left: n * frameSize, want: n, answered: make(chan struct{})}
	served := make(chan struct{})
	go func() {
		defer close(served)
		s.serveConn(nc)
	}()
	<-nc.answered
	nc.Close()
	<-served
}

// BenchmarkProduceRequest is a Produce request (v9, acks=all, one
// partition's batch, as franz-go sends it without idempotence) through
// its whole life on a connection, as a pipelining producer sends them:
// the frame read, parsed and decoded by kmsg, the Kafka batch checked and
// wrapped for the log, appended by the broker (BenchmarkProduce of
// package broker), and once durable answered, the answer written.
// A connection serves 16 MiB of requests; retention runs between two,
// the timer stopped.
func BenchmarkProduceRequest(b *testing.B) {
	for _, n := range benchRecordCounts {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			s, _, replicas := benchServer(b)
			req := kmsg.NewPtrProduceRequest()
			req.Version = 9
			req.Acks = -1
			req.TimeoutMillis = 30000
			topic := kmsg.NewProduceRequestTopic()
			topic.Topic = "orders"
			part := kmsg.NewProduceRequestTopicPartition()
			part.Records = benchKafkaBatch(b, n)
			topic.Partitions = append(topic.Partitions, part)
			req.Topics = append(req.Topics, topic)
			frame := requestFrame(req, 1)
			chunk := max(1, (16<<20)/len(frame))
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			b.ResetTimer()
			for done := 0; done < b.N; done += chunk {
				if done > 0 {
					b.StopTimer()
					replicas.ApplyRetention(b.Context())
					b.StartTimer()
				}
				serveFrames(s, frame, len(frame), min(chunk, b.N-done))
			}
			b.StopTimer()
		})
	}
}

// BenchmarkFetchRequest is a Fetch request (v12) of one batch of one
// partition through its whole life on a connection: the frame read and
// decoded, the broker's read of the leader's log, the batch made a Kafka
// record batch, the answer encoded and written. The log holds 32
// batches, fetched in turn: of magic 2 (produced by a Kafka client: the
// Kafka batch is written as it lies), or of magic 1 (produced by the
// native client: each is converted).
func BenchmarkFetchRequest(b *testing.B) {
	for _, magic := range []byte{record.Magic, record.MagicKafka} {
		for _, n := range benchRecordCounts {
			b.Run(fmt.Sprintf("magic=%d/records=%d", magic, n), func(b *testing.B) {
				s, core, _ := benchServer(b)
				var batch record.Batch
				var err error
				if magic == record.MagicKafka {
					batch, err = record.WrapKafka(benchKafkaBatch(b, n))
				} else {
					batch, err = record.AppendBatch(nil, benchRecords(n))
				}
				require.NoError(b, err)
				const batches = 32
				for range batches {
					wait, err := core.Produce("", broker.ProduceRequest{Topic: "orders", Partition: 0, Batch: batch})
					require.NoError(b, err)
					_, err = wait(b.Context())
					require.NoError(b, err)
				}
				var feed, frame []byte
				for i := range batches {
					req := kmsg.NewPtrFetchRequest()
					req.Version = 12
					req.ReplicaID = -1
					req.MinBytes = 1
					req.MaxBytes = 50 << 20
					topic := kmsg.NewFetchRequestTopic()
					topic.Topic = "orders"
					part := kmsg.NewFetchRequestTopicPartition()
					part.FetchOffset = int64(i * n)
					part.PartitionMaxBytes = int32(len(batch))
					topic.Partitions = append(topic.Partitions, part)
					req.Topics = append(req.Topics, topic)
					frame = requestFrame(req, int32(i))
					feed = append(feed, frame...)
				}
				b.SetBytes(int64(len(batch)))
				b.ReportAllocs()
				b.ResetTimer()
				serveFrames(s, feed, len(frame), b.N)
				b.StopTimer()
			})
		}
	}
}

// feedConn is a connection that reads feed over and over, left bytes in
// all, then waits until it is closed; what is written to it is dropped,
// its frames counted, and answered is closed once there were want of them.
type feedConn struct {
	closed   chan struct{}
	once     sync.Once
	feed     []byte
	off      int
	left     int
	mu       sync.Mutex
	counter  frameCounter
	want     int
	answered chan struct{}
}

func (c *feedConn) Read(p []byte) (int, error) {
	if c.left == 0 {
		<-c.closed
		return 0, net.ErrClosed
	}
	n := copy(p[:min(len(p), c.left)], c.feed[c.off:])
	c.off = (c.off + n) % len(c.feed)
	c.left -= n
	return n, nil
}

func (c *feedConn) Write(p []byte) (int, error) {
	select {
	case <-c.closed:
		return 0, net.ErrClosed
	default:
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	before := c.counter.frames
	c.counter.write(p)
	if before < c.want && c.counter.frames >= c.want {
		close(c.answered)
	}
	return len(p), nil
}

func (c *feedConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

var benchAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9092}

func (c *feedConn) LocalAddr() net.Addr              { return benchAddr }
func (c *feedConn) RemoteAddr() net.Addr             { return benchAddr }
func (c *feedConn) SetDeadline(time.Time) error      { return nil }
func (c *feedConn) SetReadDeadline(time.Time) error  { return nil }
func (c *feedConn) SetWriteDeadline(time.Time) error { return nil }

// frameCounter counts the frames of a stream of size-prefixed frames
// written to it in pieces of any size.
type frameCounter struct {
	frames int
	head   [4]byte
	inHead int // bytes of the next size seen
	left   int // bytes of the current frame still to come
}

func (fc *frameCounter) write(p []byte) {
	for len(p) > 0 {
		if fc.left > 0 {
			k := min(fc.left, len(p))
			fc.left, p = fc.left-k, p[k:]
			if fc.left == 0 {
				fc.frames++
			}
			continue
		}
		k := copy(fc.head[fc.inHead:], p)
		fc.inHead, p = fc.inHead+k, p[k:]
		if fc.inHead == len(fc.head) {
			fc.inHead, fc.left = 0, int(binary.BigEndian.Uint32(fc.head[:]))
			if fc.left == 0 {
				fc.frames++
			}
		}
	}
}
