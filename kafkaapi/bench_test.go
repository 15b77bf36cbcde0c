package kafkaapi

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"gostream/broker"
	"gostream/metadata"
	"gostream/record"
	"gostream/storage"
	"gostream/transport"
)

// Benchmarks of the Kafka front end's hot functions on their own, with no
// socket, for batches of 1, 16 and 256 records of 1 KiB. make bench-micro
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

// requestFrame is the frame of a Kafka request after its size: the
// request header (v2 for a flexible version, v1 before) and the body.
func requestFrame(req kmsg.Request, corr int32) []byte {
	frame := binary.BigEndian.AppendUint16(nil, uint16(req.Key()))
	frame = binary.BigEndian.AppendUint16(frame, uint16(req.GetVersion()))
	frame = binary.BigEndian.AppendUint32(frame, uint32(corr))
	frame = binary.BigEndian.AppendUint16(frame, uint16(len("bench")))
	frame = append(frame, "bench"...)
	if req.IsFlexible() {
		frame = append(frame, 0) // no tagged fields
	}
	return req.AppendTo(frame)
}

// BenchmarkDecodeProduceRequest is what the server does with a Produce
// request (v9, as franz-go sends it) of one partition's batch before it
// is appended: parseRequest (the header, kmsg's decoding of the body)
// and Server.batch (the Kafka batch checked, its CRC-32C and every
// record, and wrapped for the log, a copy).
func BenchmarkDecodeProduceRequest(b *testing.B) {
	for _, n := range benchRecordCounts {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
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
			s := New(Config{})
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			for b.Loop() {
				r, err := parseRequest(frame)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := s.batch(r.kreq.(*kmsg.ProduceRequest).Topics[0].Partitions[0].Records); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFetchAnswer is a Fetch request (v12) of one batch from one
// partition, answered: Server.fetch (the broker's read of the leader's
// log, the batches made Kafka record batches) and writeResponse (the
// answer's frame encoded, written to a writer that drops it). The log
// holds 32 batches, read in turn: of magic 2 (produced by a Kafka
// client: the Kafka batch is written as it lies), or of magic 1
// (produced by the native client: each is converted).
func BenchmarkFetchAnswer(b *testing.B) {
	for _, magic := range []byte{record.Magic, record.MagicKafka} {
		for _, n := range benchRecordCounts {
			b.Run(fmt.Sprintf("magic=%d/records=%d", magic, n), func(b *testing.B) {
				s, core := benchServer(b)
				var batch record.Batch
				var err error
				if magic == record.MagicKafka {
					batch, err = record.WrapKafka(benchKafkaBatch(b, n))
				} else {
					batch, err = record.AppendBatch(nil, benchRecords(n))
				}
				require.NoError(b, err)
				ctx := context.Background()
				const batches = 32
				for range batches {
					wait, err := core.Produce("", broker.ProduceRequest{Topic: "orders", Partition: 0, Batch: batch})
					require.NoError(b, err)
					_, err = wait(ctx)
					require.NoError(b, err)
				}

				req := kmsg.NewPtrFetchRequest()
				req.Version = 12
				req.ReplicaID = -1
				req.MinBytes = 1
				req.MaxBytes = 50 << 20
				topic := kmsg.NewFetchRequestTopic()
				topic.Topic = "orders"
				part := kmsg.NewFetchRequestTopicPartition()
				part.PartitionMaxBytes = int32(len(batch))
				topic.Partitions = append(topic.Partitions, part)
				req.Topics = append(req.Topics, topic)
				r := &request{key: req.Key(), version: req.Version, corr: 1, kreq: req}
				var scratch []byte
				b.SetBytes(int64(len(batch)))
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					req.Topics[0].Partitions[0].FetchOffset = int64(i%batches) * int64(n)
					a, err := s.fetch(ctx, req)
					if err == nil {
						err = writeResponse(io.Discard, r, a, &scratch)
						a.release()
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// benchServer is a Kafka server over the core of broker 1, the sole
// replica (RF 1) of orders/0, its log in b.TempDir().
func benchServer(b *testing.B) (*Server, *broker.Broker) {
	root, err := storage.OpenRoot(b.TempDir(), 1, "", hclog.NewNullLogger())
	require.NoError(b, err)
	b.Cleanup(func() { root.Close() })
	replicas := broker.NewReplicas(broker.ReplicasConfig{Broker: 1, Root: root})
	b.Cleanup(func() { replicas.Close() })
	meta := &metadata.Cluster{Version: metadata.FormatVersion, ClusterID: "0123456789abcdef", ControllerID: 1, Epoch: 1}
	meta.PutBroker(metadata.Broker{ID: 1, Addr: "127.0.0.1:9400"})
	meta.Topics = append(meta.Topics, metadata.Topic{Name: "orders", ID: fmt.Sprintf("%032x", 1), ReplicationFactor: 1,
		Partitions: []metadata.Partition{{Replicas: []int32{1}, Active: []int32{1}, Leader: 1, LeaderEpoch: 1}}})
	require.NoError(b, replicas.ApplyMetadata(meta))
	core := broker.New(broker.Config{Broker: 1, Replicas: replicas, MaxBatchBytes: transport.DefaultMaxBatchBytes})
	return New(Config{Broker: 1, Core: core}), core
}
