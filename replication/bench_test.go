package replication_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"gostream/record"
	"gostream/replication"
	"gostream/storage"
	"gostream/storage/logtest"
	"gostream/transport"
)

// BenchmarkReplicate is Partition.Replicate on a follower (broker 2 of
// orders/0, led by broker 1) of one Replicate request carrying one batch
// of 1, 16 or 256 records of 1 KiB, and the wait for it to be durable: the
// epoch checked, the batch framed, checked and written as the leader
// stamped it, the high watermark taken. The log is on the disk under
// b.TempDir() with fsync left out (the disk's part is
// storage's BenchmarkLogWriteExact/fs=os), segments of 64 MiB, retention
// applied between chunks of 16 MiB, in which the next batches are
// stamped with their offsets, the timer stopped. make bench-micro runs it
// with the other packages' hot functions (docs/benchmarks.md).
func BenchmarkReplicate(b *testing.B) {
	for _, n := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			l, err := storage.Open(b.TempDir(), storage.Options{FS: logtest.NoSyncFS{}, SegmentBytes: 64 << 20, RetentionBytes: 64 << 20})
			require.NoError(b, err)
			b.Cleanup(func() { l.Close() })
			p := replication.NewPartition("orders", 0, 2, l, hclog.NewNullLogger())
			b.Cleanup(p.Close)
			require.NoError(b, p.SetState(replication.State{Leader: 1, LeaderEpoch: 3, Active: []int32{1, 2}}))

			recs := make([]record.Record, n)
			for i := range recs {
				recs[i] = record.Record{Key: []byte("key"), Value: bytes.Repeat([]byte{byte('a' + i%26)}, 1<<10)}
			}
			template, err := record.AppendBatch(nil, recs)
			require.NoError(b, err)
			batches := make([]record.Batch, max(1, (16<<20)/len(template)))
			for i := range batches {
				batches[i] = slices.Clone(template)
			}
			ctx := context.Background()
			b.SetBytes(int64(len(template)))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				k := i % len(batches)
				if k == 0 {
					b.StopTimer()
					_, err := l.ApplyRetention(ctx, l.DurableEndOffset())
					require.NoError(b, err)
					next := l.LogEndOffset()
					for _, batch := range batches {
						batch.Stamp(next, 3, time.Now().UnixMilli())
						next = batch.NextOffset()
					}
					b.StartTimer()
				}
				wait, err := p.Replicate(&transport.ReplicateRequest{Topic: "orders", Partition: 0, LeaderEpoch: 3, LeaderID: 1,
					HighWatermark: batches[k].BaseOffset(), Batch: batches[k]})
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
