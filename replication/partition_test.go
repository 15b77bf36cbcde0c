package replication_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/record"
	"gostream/replication"
	"gostream/storage"
)

// storage.MemLog has no Write (only Append), so it is not a replication.Log;
// these tests run on a real storage.Log in a temporary directory.
var _ replication.Log = (*storage.Log)(nil)

const self int32 = 1

// appendTime is the fixed clock of the test logs, so acks can be checked.
var appendTime = time.UnixMilli(1_700_000_000_000)

// testWriter sends log lines to t.Log, so they show only when a test fails.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func testLogger(t testing.TB) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Debug, Output: testWriter{t}})
}

func openLog(t *testing.T, dir string) *storage.Log {
	t.Helper()
	l, err := storage.Open(dir, storage.Options{Logger: testLogger(t), Now: func() time.Time { return appendTime }})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l
}

// newPartition returns partition "orders"/0 on broker self over a fresh log.
func newPartition(t *testing.T) (*replication.Partition, *storage.Log) {
	t.Helper()
	l := openLog(t, t.TempDir())
	p := replication.NewPartition("orders", 0, self, l, testLogger(t))
	t.Cleanup(p.Close)
	return p, l
}

// soleLeader is the state in which self leads with no other active replica.
func soleLeader(epoch int32) replication.State {
	return replication.State{Leader: self, LeaderEpoch: epoch, Active: []int32{self}}
}

// batch returns a batch of n records whose values are tag-0, tag-1, ...
func batch(t testing.TB, tag string, n int) record.Batch {
	t.Helper()
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Key: []byte(tag), Value: fmt.Appendf(nil, "%s-%d", tag, i)}
	}
	b, err := record.AppendBatch(nil, recs)
	require.NoError(t, err)
	return b
}

// tryProduce produces a batch of n records and waits for its ack. It may
// run outside the test's goroutine.
func tryProduce(p *replication.Partition, tag string, n int) (replication.Ack, error) {
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Key: []byte(tag), Value: fmt.Appendf(nil, "%s-%d", tag, i)}
	}
	b, err := record.AppendBatch(nil, recs)
	if err != nil {
		return replication.Ack{}, err
	}
	wait, err := p.Produce(b)
	if err != nil {
		return replication.Ack{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return wait(ctx)
}

// produce is tryProduce for the test's goroutine.
func produce(t testing.TB, p *replication.Partition, tag string, n int) replication.Ack {
	t.Helper()
	ack, err := tryProduce(p, tag, n)
	require.NoError(t, err)
	return ack
}

// fetchedBatch is what a test checks of one fetched batch.
type fetchedBatch struct {
	Base, Next int64
	Epoch      int32
	Values     []string
}

func decodeBatches(t testing.TB, buf []byte) []fetchedBatch {
	t.Helper()
	var out []fetchedBatch
	require.NoError(t, record.Batches(buf, func(b record.Batch) bool {
		recs, err := b.Decode()
		require.NoError(t, err)
		fb := fetchedBatch{Base: b.BaseOffset(), Next: b.NextOffset(), Epoch: b.LeaderEpoch()}
		for _, r := range recs {
			fb.Values = append(fb.Values, string(r.Value))
		}
		out = append(out, fb)
		return true
	}))
	return out
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestPartitionLeadsNothingUntilSetState(t *testing.T) {
	p, l := newPartition(t)
	assert.Equal(t, "orders", p.Topic)
	assert.Equal(t, int32(0), p.Index)
	st := p.State()
	assert.NotEqual(t, self, st.Leader)
	assert.Empty(t, st.Active)
	assert.Equal(t, int64(0), p.HighWatermark())

	wait, err := p.Produce(batch(t, "a", 1))
	require.ErrorIs(t, err, replication.ErrNotLeader)
	assert.Nil(t, wait)
	assert.Equal(t, int64(0), l.LogEndOffset(), "a refused produce wrote to the log")

	_, err = p.Fetch(ctxTimeout(t, 5*time.Second), 0, 1<<20, 0)
	require.ErrorIs(t, err, replication.ErrNotLeader)
}

func TestPartitionNotLeader(t *testing.T) {
	tests := []struct {
		name  string
		state replication.State
	}{
		{"another broker leads", replication.State{Leader: 2, LeaderEpoch: 3, Active: []int32{2, self}}},
		{"follower not active", replication.State{Leader: 2, LeaderEpoch: 3, Active: []int32{2}}},
		{"no leader", replication.State{Leader: 0, LeaderEpoch: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, l := newPartition(t)
			require.NoError(t, p.SetState(soleLeader(1)))
			produce(t, p, "a", 2)
			require.NoError(t, p.SetState(tt.state))
			assert.Equal(t, tt.state, p.State())

			_, err := p.Produce(batch(t, "b", 1))
			require.ErrorIs(t, err, replication.ErrNotLeader)
			assert.Contains(t, err.Error(), "orders/0")
			assert.Equal(t, int64(2), l.LogEndOffset(), "a refused produce wrote to the log")

			_, err = p.Fetch(ctxTimeout(t, 5*time.Second), 0, 1<<20, 0)
			require.ErrorIs(t, err, replication.ErrNotLeader)
			assert.Equal(t, int64(2), p.HighWatermark())
		})
	}
}

func TestProduceAsSoleLeader(t *testing.T) {
	p, l := newPartition(t)
	require.NoError(t, p.SetState(soleLeader(3)))
	assert.Equal(t, int64(0), p.HighWatermark())

	want := []replication.Ack{
		{BaseOffset: 0, NextOffset: 3, LeaderEpoch: 3, AppendTime: appendTime.UnixMilli(), Replicas: []int32{self}},
		{BaseOffset: 3, NextOffset: 4, LeaderEpoch: 3, AppendTime: appendTime.UnixMilli(), Replicas: []int32{self}},
		{BaseOffset: 4, NextOffset: 9, LeaderEpoch: 3, AppendTime: appendTime.UnixMilli(), Replicas: []int32{self}},
	}
	for i, n := range []int{3, 1, 5} {
		ack := produce(t, p, fmt.Sprint("b", i), n)
		assert.Equal(t, want[i], ack, "ack %d", i)
		assert.Equal(t, ack.NextOffset, p.HighWatermark(), "HW after ack %d", i)
		assert.Equal(t, ack.NextOffset, l.DurableEndOffset(), "acked before durable")
	}
	start, hw, end := p.Offsets()
	assert.Equal(t, [3]int64{0, 9, 9}, [3]int64{start, hw, end})
}

func TestProduceAcksCarryTheCurrentEpoch(t *testing.T) {
	p, _ := newPartition(t)
	require.NoError(t, p.SetState(soleLeader(1)))
	assert.Equal(t, int32(1), produce(t, p, "a", 1).LeaderEpoch)
	require.NoError(t, p.SetState(soleLeader(4)))
	ack := produce(t, p, "b", 2)
	assert.Equal(t, int32(4), ack.LeaderEpoch)
	assert.Equal(t, int64(1), ack.BaseOffset)

	res, err := p.Fetch(ctxTimeout(t, 5*time.Second), 0, 1<<20, 0)
	require.NoError(t, err)
	got := decodeBatches(t, res.Batches)
	require.Len(t, got, 2)
	assert.Equal(t, int32(1), got[0].Epoch)
	assert.Equal(t, int32(4), got[1].Epoch)
}

// TestProduceOrder produces batches without waiting, then awaits the acks
// in reverse: the batches land in call order and share the fsync.
func TestProduceOrder(t *testing.T) {
	p, _ := newPartition(t)
	require.NoError(t, p.SetState(soleLeader(0)))
	var waits []func(context.Context) (replication.Ack, error)
	for i := range 5 {
		w, err := p.Produce(batch(t, fmt.Sprint("b", i), 2))
		require.NoError(t, err)
		waits = append(waits, w)
	}
	assert.Equal(t, int64(0), p.HighWatermark(), "HW moved before any ack was awaited")
	for i := len(waits) - 1; i >= 0; i-- {
		ack, err := waits[i](ctxTimeout(t, 10*time.Second))
		require.NoError(t, err)
		assert.Equal(t, int64(2*i), ack.BaseOffset)
		assert.Equal(t, int64(2*i+2), ack.NextOffset)
		assert.Equal(t, int64(10), p.HighWatermark(), "HW after the last batch's ack")
	}
}

func TestSetState(t *testing.T) {
	t.Run("stale epoch", func(t *testing.T) {
		p, _ := newPartition(t)
		require.NoError(t, p.SetState(soleLeader(5)))
		err := p.SetState(replication.State{Leader: 2, LeaderEpoch: 4, Active: []int32{2}})
		require.ErrorIs(t, err, replication.ErrStaleEpoch)
		assert.Equal(t, soleLeader(5), p.State(), "a stale state was applied")
		produce(t, p, "still-leader", 1)

		require.ErrorIs(t, p.SetState(soleLeader(-1)), replication.ErrStaleEpoch)
		require.NoError(t, p.SetState(soleLeader(5)), "the same epoch again")
		require.NoError(t, p.SetState(replication.State{Leader: 2, LeaderEpoch: 6, Active: []int32{2, self}}))
		require.ErrorIs(t, p.SetState(soleLeader(5)), replication.ErrStaleEpoch)
		assert.Equal(t, int32(2), p.State().Leader)
	})
	t.Run("state is copied", func(t *testing.T) {
		p, _ := newPartition(t)
		active := []int32{self, 2}
		require.NoError(t, p.SetState(replication.State{Leader: self, LeaderEpoch: 1, Active: active}))
		active[0] = 9
		got := p.State()
		assert.Equal(t, []int32{self, 2}, got.Active)
		got.Active[1] = 9
		assert.Equal(t, []int32{self, 2}, p.State().Active)
	})
}

// TestSetStateCommitsDurableLog reopens a replica whose log holds durable
// batches: it commits them only once it leads alone.
func TestSetStateCommitsDurableLog(t *testing.T) {
	l := openLog(t, t.TempDir())
	ctx := ctxTimeout(t, 10*time.Second)
	for i := range 3 {
		_, err := l.Append(ctx, batch(t, fmt.Sprint("old", i), 2), 1)
		require.NoError(t, err)
	}
	p := replication.NewPartition("orders", 0, self, l, nil)
	t.Cleanup(p.Close)
	assert.Equal(t, int64(0), p.HighWatermark())

	// Broker 2 cannot be reached (no Peers): the HW stays where it was,
	// and nothing above it is served.
	require.NoError(t, p.SetState(replication.State{Leader: self, LeaderEpoch: 2, Active: []int32{self, 2}}))
	assert.Equal(t, int64(0), p.HighWatermark(), "committed without the other active replica")
	res, err := p.Fetch(ctx, 0, 1<<20, 0)
	require.NoError(t, err)
	assert.Empty(t, res.Batches)

	require.NoError(t, p.SetState(replication.State{Leader: 2, LeaderEpoch: 3, Active: []int32{2}}))
	assert.Equal(t, int64(0), p.HighWatermark(), "a follower committed on its own")

	require.NoError(t, p.SetState(soleLeader(4)))
	assert.Equal(t, int64(6), p.HighWatermark())
	res, err = p.Fetch(ctx, 0, 1<<20, 0)
	require.NoError(t, err)
	assert.Len(t, decodeBatches(t, res.Batches), 3)
}

func TestFetch(t *testing.T) {
	p, _ := newPartition(t)
	require.NoError(t, p.SetState(soleLeader(2)))
	produce(t, p, "a", 3) // [0, 3)
	produce(t, p, "b", 2) // [3, 5)
	produce(t, p, "c", 1) // [5, 6)
	a := fetchedBatch{0, 3, 2, []string{"a-0", "a-1", "a-2"}}
	b := fetchedBatch{3, 5, 2, []string{"b-0", "b-1"}}
	c := fetchedBatch{5, 6, 2, []string{"c-0"}}

	tests := []struct {
		name     string
		offset   int64
		maxBytes int
		want     []fetchedBatch
	}{
		{"from the start", 0, 1 << 20, []fetchedBatch{a, b, c}},
		{"inside the first batch", 1, 1 << 20, []fetchedBatch{a, b, c}},
		{"second batch", 3, 1 << 20, []fetchedBatch{b, c}},
		{"last batch", 5, 1 << 20, []fetchedBatch{c}},
		{"at least one batch however small maxBytes", 0, 1, []fetchedBatch{a}},
		{"at the HW", 6, 1 << 20, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := p.Fetch(ctxTimeout(t, 5*time.Second), tt.offset, tt.maxBytes, 0)
			require.NoError(t, err)
			assert.Equal(t, int64(6), res.HighWatermark)
			assert.Equal(t, int64(0), res.LogStartOffset)
			assert.Equal(t, tt.want, decodeBatches(t, res.Batches))
		})
	}

	t.Run("below the log start", func(t *testing.T) {
		_, err := p.Fetch(ctxTimeout(t, 5*time.Second), -1, 1<<20, time.Minute)
		require.ErrorIs(t, err, replication.ErrOffsetOutOfRange)
		assert.Contains(t, err.Error(), "-1")
	})
	// A consumer may seek past the end: its fetches wait, as at the HW,
	// and come back empty.
	for _, offset := range []int64{7, 1 << 40} {
		t.Run(fmt.Sprint("past the end ", offset), func(t *testing.T) {
			start := time.Now()
			res, err := p.Fetch(ctxTimeout(t, 5*time.Second), offset, 1<<20, 50*time.Millisecond)
			require.NoError(t, err)
			assert.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond, "the fetch waits")
			assert.Empty(t, res.Batches)
			assert.Equal(t, int64(6), res.HighWatermark)
		})
	}
}

// TestFetchStopsAtHW writes a batch that is in the log but not committed:
// a fetch does not return it, and a fetch from its offset is not out of
// range but empty.
func TestFetchStopsAtHW(t *testing.T) {
	p, l := newPartition(t)
	require.NoError(t, p.SetState(soleLeader(1)))
	produce(t, p, "a", 2)
	_, err := p.Produce(batch(t, "b", 3)) // written, its ack never awaited
	require.NoError(t, err)
	require.Equal(t, int64(5), l.LogEndOffset())
	require.Equal(t, int64(2), p.HighWatermark())

	ctx := ctxTimeout(t, 5*time.Second)
	res, err := p.Fetch(ctx, 0, 1<<20, 0)
	require.NoError(t, err)
	assert.Equal(t, []fetchedBatch{{0, 2, 1, []string{"a-0", "a-1"}}}, decodeBatches(t, res.Batches))
	assert.Equal(t, int64(2), res.HighWatermark)
	for _, offset := range []int64{2, 3, 5} {
		res, err = p.Fetch(ctx, offset, 1<<20, 0)
		require.NoError(t, err, offset)
		assert.Empty(t, res.Batches, offset)
		assert.Equal(t, int64(2), res.HighWatermark)
	}
}

func TestFetchLongPoll(t *testing.T) {
	t.Run("returns when a produce lands", func(t *testing.T) {
		p, _ := newPartition(t)
		require.NoError(t, p.SetState(soleLeader(1)))
		produce(t, p, "a", 1)

		const maxWait = time.Minute
		ctx := ctxTimeout(t, 2*maxWait)
		started := make(chan struct{})
		produced := make(chan replication.Ack, 1)
		go func() {
			<-started
			ack, err := tryProduce(p, "b", 2)
			assert.NoError(t, err)
			produced <- ack
		}()

		begin := time.Now()
		close(started)
		res, err := p.Fetch(ctx, 1, 1<<20, maxWait)
		require.NoError(t, err)
		assert.Less(t, time.Since(begin), maxWait/2, "the fetch waited for its maxWait, not for the produce")
		assert.Equal(t, []fetchedBatch{{1, 3, 1, []string{"b-0", "b-1"}}}, decodeBatches(t, res.Batches))
		assert.Equal(t, int64(3), res.HighWatermark)
		select {
		case ack := <-produced:
			assert.Equal(t, int64(1), ack.BaseOffset)
		case <-ctx.Done():
			t.Fatal("the producer did not finish")
		}
	})

	t.Run("returns empty at maxWait", func(t *testing.T) {
		p, _ := newPartition(t)
		require.NoError(t, p.SetState(soleLeader(1)))
		produce(t, p, "a", 1)
		const maxWait = 100 * time.Millisecond
		begin := time.Now()
		res, err := p.Fetch(ctxTimeout(t, time.Minute), 1, 1<<20, maxWait)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, time.Since(begin), maxWait)
		assert.Empty(t, res.Batches)
		assert.Equal(t, int64(1), res.HighWatermark)
	})

	t.Run("below the HW returns at once", func(t *testing.T) {
		p, _ := newPartition(t)
		require.NoError(t, p.SetState(soleLeader(1)))
		produce(t, p, "a", 1)
		begin := time.Now()
		res, err := p.Fetch(ctxTimeout(t, time.Minute), 0, 1<<20, time.Minute)
		require.NoError(t, err)
		assert.Less(t, time.Since(begin), 30*time.Second)
		assert.Len(t, decodeBatches(t, res.Batches), 1)
	})

	t.Run("the read buffer is asked for once there is data", func(t *testing.T) {
		p, _ := newPartition(t)
		require.NoError(t, p.SetState(soleLeader(1)))
		produce(t, p, "a", 1)
		var asked atomic.Int64
		buf := func() ([]byte, error) { asked.Add(1); return make([]byte, 0, 1<<20), nil }
		done := make(chan replication.FetchResult, 1)
		go func() {
			res, err := p.FetchInto(ctxTimeout(t, time.Minute), 1, 1<<20, time.Minute, 0, buf)
			assert.NoError(t, err)
			done <- res
		}()
		assert.Never(t, func() bool { return asked.Load() > 0 }, 200*time.Millisecond, 5*time.Millisecond,
			"no buffer while the long poll waits")
		produce(t, p, "b", 1)
		select {
		case res := <-done:
			assert.Len(t, decodeBatches(t, res.Batches), 1)
		case <-time.After(30 * time.Second):
			t.Fatal("the fetch did not return")
		}
		assert.Equal(t, int64(1), asked.Load())

		refused := errors.New("no memory")
		_, err := p.FetchInto(ctxTimeout(t, time.Minute), 0, 1<<20, 0, 0, func() ([]byte, error) { return nil, refused })
		assert.ErrorIs(t, err, refused)
	})

	t.Run("a range of the file when asked, and the batches are that large", func(t *testing.T) {
		p, _ := newPartition(t)
		require.NoError(t, p.SetState(soleLeader(1)))
		for i := range 4 {
			produce(t, p, fmt.Sprint("r", i), 200)
		}
		want, err := p.Fetch(ctxTimeout(t, time.Minute), 0, 1<<20, 0)
		require.NoError(t, err)
		noBuf := func() ([]byte, error) { t.Error("a range is read into no buffer"); return nil, nil }
		res, err := p.FetchInto(ctxTimeout(t, time.Minute), 0, 1<<20, 0, 1, noBuf)
		require.NoError(t, err)
		require.NotNil(t, res.Range)
		defer res.Range.Release()
		assert.Empty(t, res.Batches)
		assert.Equal(t, want.HighWatermark, res.HighWatermark)
		got := make([]byte, res.Range.Len())
		_, err = res.Range.File().ReadAt(got, res.Range.Position())
		require.NoError(t, err)
		assert.Equal(t, want.Batches, got)
		assert.Equal(t, res.HighWatermark, res.Range.NextOffset(), "below the HW, up to it")

		res, err = p.FetchInto(ctxTimeout(t, time.Minute), 0, 1<<20, 0, len(want.Batches)+1, nil)
		require.NoError(t, err)
		assert.Nil(t, res.Range, "fewer bytes than asked for are read")
		assert.Equal(t, want.Batches, res.Batches)
	})

	t.Run("context ends the wait", func(t *testing.T) {
		p, _ := newPartition(t)
		require.NoError(t, p.SetState(soleLeader(1)))
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := p.Fetch(ctx, 0, 1<<20, time.Minute)
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})
}

func TestHighWatermarkNeverDecreases(t *testing.T) {
	p, l := newPartition(t)
	require.NoError(t, p.SetState(soleLeader(1)))
	produce(t, p, "a", 4)
	require.Equal(t, int64(4), p.HighWatermark())

	steps := []struct {
		name  string
		state replication.State
	}{
		{"another leader", replication.State{Leader: 2, LeaderEpoch: 2, Active: []int32{2, self}}},
		{"no leader", replication.State{LeaderEpoch: 3}},
		{"leader with a follower", replication.State{Leader: self, LeaderEpoch: 4, Active: []int32{self, 2}}},
		{"sole leader again", soleLeader(5)},
	}
	for _, s := range steps {
		require.NoError(t, p.SetState(s.state), s.name)
		assert.Equal(t, int64(4), p.HighWatermark(), s.name)
	}

	// Truncating the log (as recovery may) does not pull the HW back.
	require.NoError(t, p.SetState(replication.State{Leader: 2, LeaderEpoch: 6, Active: []int32{2}}))
	require.NoError(t, l.TruncateTo(ctxTimeout(t, 5*time.Second), 0))
	require.NoError(t, p.SetState(soleLeader(7)))
	assert.Equal(t, int64(4), p.HighWatermark())
}

func TestHighWatermarkMonotonicUnderLoad(t *testing.T) {
	p, _ := newPartition(t)
	require.NoError(t, p.SetState(soleLeader(1)))
	done := make(chan struct{})
	var observer sync.WaitGroup
	var decreased []string
	observer.Go(func() {
		last := int64(0)
		for {
			hw := p.HighWatermark()
			if hw < last {
				decreased = append(decreased, fmt.Sprintf("%d after %d", hw, last))
			}
			last = hw
			select {
			case <-done:
				return
			default:
				runtime.Gosched()
			}
		}
	})
	var producers sync.WaitGroup
	for g := range 8 {
		producers.Go(func() {
			for i := range 20 {
				_, err := tryProduce(p, fmt.Sprintf("g%d-%d", g, i), 1+i%3)
				assert.NoError(t, err)
			}
		})
	}
	producers.Wait()
	close(done)
	observer.Wait()
	assert.Empty(t, decreased, "the HW moved backward")
	assert.Equal(t, int64(8*(7+7*2+6*3)), p.HighWatermark())
}

func TestConcurrentProduce(t *testing.T) {
	p, l := newPartition(t)
	require.NoError(t, p.SetState(soleLeader(7)))
	const goroutines, perGoroutine = 16, 25
	var mu sync.Mutex
	var acks []replication.Ack
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range perGoroutine {
				ack, err := tryProduce(p, fmt.Sprintf("g%d-%d", g, i), 1+(g+i)%4)
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				acks = append(acks, ack)
				mu.Unlock()
			}
		})
	}
	wg.Wait()

	require.Len(t, acks, goroutines*perGoroutine)
	slices.SortFunc(acks, func(a, b replication.Ack) int { return cmp.Compare(a.BaseOffset, b.BaseOffset) })
	next := int64(0)
	for i, ack := range acks {
		require.Equal(t, next, ack.BaseOffset, "ack %d: gap or overlap", i)
		require.Greater(t, ack.NextOffset, ack.BaseOffset, "ack %d", i)
		assert.Equal(t, int32(7), ack.LeaderEpoch)
		assert.Equal(t, []int32{self}, ack.Replicas)
		next = ack.NextOffset
	}
	assert.Equal(t, next, p.HighWatermark())
	assert.Equal(t, next, l.LogEndOffset())

	// Every acked batch is readable where its ack says, with its records.
	ctx := ctxTimeout(t, 10*time.Second)
	var got []fetchedBatch
	for offset := int64(0); offset < next; {
		res, err := p.Fetch(ctx, offset, 1<<20, 0)
		require.NoError(t, err)
		bs := decodeBatches(t, res.Batches)
		require.NotEmpty(t, bs, "nothing at %d below HW %d", offset, next)
		got = append(got, bs...)
		offset = bs[len(bs)-1].Next
	}
	require.Len(t, got, len(acks))
	for i, b := range got {
		assert.Equal(t, acks[i].BaseOffset, b.Base)
		assert.Equal(t, acks[i].NextOffset, b.Next)
	}
}

// A replica reopened with its checkpointed HW leads with it at once: the
// records below it are read while a follower has not answered (it may be
// down for good); nothing above it is, and the checkpoint never reaches
// past the durable log.
func TestRestartedLeaderServesBelowItsCheckpoint(t *testing.T) {
	l := openLog(t, t.TempDir())
	ctx := ctxTimeout(t, 10*time.Second)
	for i := range 3 {
		_, err := l.Append(ctx, batch(t, fmt.Sprint("r", i), 2), 1)
		require.NoError(t, err)
	}
	p := replication.NewPartition("orders", 0, self, l, nil, replication.Options{HighWatermark: 4})
	t.Cleanup(p.Close)
	require.NoError(t, p.SetState(replication.State{Leader: self, LeaderEpoch: 2, Active: []int32{self, 2}}))
	assert.Equal(t, int64(4), p.HighWatermark())
	res, err := p.Fetch(ctx, 0, 1<<20, 0)
	require.NoError(t, err)
	assert.Equal(t, int64(4), res.HighWatermark)
	assert.Len(t, decodeBatches(t, res.Batches), 2, "the two batches below the checkpoint")
	_, hw, _, err := p.LeaderOffsets()
	require.NoError(t, err)
	assert.Equal(t, int64(4), hw)
	res, err = p.Fetch(ctx, 4, 1<<20, 50*time.Millisecond)
	require.NoError(t, err)
	assert.Empty(t, res.Batches, "above the checkpoint nothing is served until the follower answers")

	high := replication.NewPartition("orders", 0, self, l, nil, replication.Options{HighWatermark: 99})
	t.Cleanup(high.Close)
	assert.Equal(t, int64(6), high.HighWatermark(), "clamped to the durable log")
}
