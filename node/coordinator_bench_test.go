package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gostream/groups"
	"gostream/record"
	"gostream/replication"
	"gostream/storage"
	"gostream/transport"
)

// benchLog is a coordinator's log straight onto a storage log, with no
// replication: what a benchmark of the rebuild needs written.
type benchLog struct {
	l    *storage.Log
	last storage.Durable
}

func (b *benchLog) Append(recs []groups.Record) (int64, func(context.Context) error, error) {
	rs := make([]record.Record, len(recs))
	for i, r := range recs {
		k, v, err := r.Encode()
		if err != nil {
			return 0, nil, err
		}
		rs[i] = record.Record{Key: k, Value: v}
	}
	batch, err := record.AppendBatch(nil, rs)
	if err != nil {
		return 0, nil, err
	}
	res, durable, err := b.l.Write(batch, 0)
	if err != nil {
		return 0, nil, err
	}
	b.last = durable
	return res.NextOffset, func(context.Context) error { return nil }, nil
}

func (b *benchLog) WaitAcked(context.Context, int64) error { return nil }
func (b *benchLog) Confirm(context.Context) error          { return nil }
func (b *benchLog) Done() <-chan struct{}                  { return nil }

type benchTopics struct{}

func (benchTopics) Topic(string) (string, int32, bool) { return "id", 64, true }
func (benchTopics) HighWatermark(context.Context, string, int32, int64) (int64, error) {
	return 1 << 40, nil
}

// BenchmarkCoordinatorRebuild measures a coordinator's rebuild from a
// __consumer_offsets log that 1,000,000 commits (1,000 groups, 64
// partitions each) were written to through a coordinator, as a broker
// does it (Coordinator.Rebuild over the storage log): once from the whole
// log, once after the segments below the newest complete snapshot are
// deleted, as retention does. Run with -benchtime=1x; the commits are
// written once, outside the timing.
func BenchmarkCoordinatorRebuild(b *testing.B) {
	const commits, groupCount = 1_000_000, 1000
	l, err := storage.Open(b.TempDir(), storage.Options{SegmentBytes: 16 << 20})
	require.NoError(b, err)
	defer l.Close()
	bl := &benchLog{l: l}
	c := groups.NewCoordinator(groups.CoordinatorConfig{Log: bl, Topics: benchTopics{}})
	c.Start(0)
	ctx := context.Background()
	start := time.Now()
	for i := range commits {
		err := c.Commit(ctx, &transport.OffsetCommitRequest{Group: fmt.Sprintf("g%d", i%groupCount), MemberEpoch: transport.NoMemberEpoch,
			Offsets: []transport.CommitOffset{{Topic: "orders", Partition: int32(i / groupCount % 64), Offset: int64(i)}}})
		require.NoError(b, err)
	}
	require.NoError(b, bl.last(ctx)) // reads stop at what is durable
	b.Logf("%d commits written in %v: log of %d records, %d segments", commits, time.Since(start).Round(time.Millisecond), l.LogEndOffset(), l.SegmentCount())
	part := replication.NewPartition(transport.OffsetsTopic, 0, 1, l, nil)
	defer part.Close()
	require.NoError(b, part.SetState(replication.State{Leader: 1, LeaderEpoch: 0, Active: []int32{1}}))
	lead, err := part.Leadership()
	require.NoError(b, err)
	load := func() (time.Duration, int) {
		next := groups.NewCoordinator(groups.CoordinatorConfig{Log: &benchLog{l: l}, Topics: benchTopics{}})
		t0 := time.Now()
		n, err := next.Rebuild(ctx, lead)
		require.NoError(b, err)
		took := time.Since(t0)
		require.Len(b, next.State().Groups(), groupCount)
		return took, n
	}
	b.Run("whole-log", func(b *testing.B) {
		for range b.N {
			took, n := load()
			b.ReportMetric(float64(took.Milliseconds()), "ms/rebuild")
			b.ReportMetric(float64(n), "records")
		}
	})
	floor, ok := c.LastSnapshot()
	require.True(b, ok)
	_, err = l.DeleteBelow(ctx, floor)
	require.NoError(b, err)
	b.Logf("after deleting below the snapshot at %d: log starts at %d, %d segments", floor, l.LogStartOffset(), l.SegmentCount())
	b.Run("from-snapshot", func(b *testing.B) {
		for range b.N {
			took, n := load()
			b.ReportMetric(float64(took.Milliseconds()), "ms/rebuild")
			b.ReportMetric(float64(n), "records")
		}
	})
}
