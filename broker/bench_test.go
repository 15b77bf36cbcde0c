package broker_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"gostream/broker"
	"gostream/metadata"
	"gostream/record"
	"gostream/storage"
	"gostream/storage/logtest"
	"gostream/transport"
)

// BenchmarkProduce is Broker.Produce of one batch of 1, 16 or 256 records
// of 1 KiB, and the wait for its acknowledgement, one batch at a time, on
// broker 1, the sole replica of orders/0 (RF 1: nothing to replicate):
// the request checked, the batch checked, stamped and written to the
// leader's log, durable, the high watermark moved. The log is on the disk
// under b.TempDir() with fsync left out (the disk's part is storage's
// BenchmarkLogWrite/fs=os), segments of 64 MiB, retention applied every
// 16 MiB, the timer stopped. make bench-micro runs it with the other
// packages' hot functions (docs/benchmarks.md).
func BenchmarkProduce(b *testing.B) {
	for _, n := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			root, err := storage.OpenRoot(b.TempDir(), 1, "", hclog.NewNullLogger())
			require.NoError(b, err)
			b.Cleanup(func() { root.Close() })
			replicas := broker.NewReplicas(broker.ReplicasConfig{Broker: 1, Root: root, LogOptions: storage.Options{FS: logtest.NoSyncFS{}}})
			b.Cleanup(func() { replicas.Close() })
			meta := &metadata.Cluster{Version: metadata.FormatVersion, ClusterID: "0123456789abcdef", ControllerID: 1, Epoch: 1}
			meta.PutBroker(metadata.Broker{ID: 1, Addr: "127.0.0.1:9400"})
			meta.Topics = append(meta.Topics, metadata.Topic{Name: "orders", ID: fmt.Sprintf("%032x", 1), ReplicationFactor: 1,
				Config:     metadata.TopicConfig{metadata.ConfigSegmentBytes: 64 << 20, metadata.ConfigRetentionBytes: 64 << 20},
				Partitions: []metadata.Partition{{Replicas: []int32{1}, Active: []int32{1}, Leader: 1, LeaderEpoch: 1}}})
			require.NoError(b, replicas.ApplyMetadata(meta))
			core := broker.New(broker.Config{Broker: 1, Replicas: replicas, MaxBatchBytes: transport.DefaultMaxBatchBytes})

			recs := make([]record.Record, n)
			for i := range recs {
				recs[i] = record.Record{Key: []byte("key"), Value: bytes.Repeat([]byte{byte('a' + i%26)}, 1<<10)}
			}
			batch, err := record.AppendBatch(nil, recs)
			require.NoError(b, err)
			chunk := max(1, (16<<20)/len(batch))
			ctx := context.Background()
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			for i := 1; b.Loop(); i++ {
				if i%chunk == 0 {
					b.StopTimer()
					replicas.ApplyRetention(ctx)
					b.StartTimer()
				}
				// The leader stamps the batch in place: the same bytes
				// serve every append.
				wait, err := core.Produce("", broker.ProduceRequest{Topic: "orders", Partition: 0, Batch: batch})
				if err == nil {
					_, err = wait(ctx)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
