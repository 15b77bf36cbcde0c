package replication_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
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

// waitingFetches is how many goroutines wait in a long poll
// (Partition.FetchInto, blocked in its select).
func waitingFetches() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte("[select")) && bytes.Contains(g, []byte("replication.(*Partition).FetchInto(")) {
			count++
		}
	}
	return count
}

// leaders opens n partitions, each leading alone over its own log in a
// directory under dir.
func leaders(tb testing.TB, dir string, n int) []*replication.Partition {
	tb.Helper()
	ps := make([]*replication.Partition, n)
	for i := range ps {
		l, err := storage.Open(filepath.Join(dir, fmt.Sprint(i)), storage.Options{Logger: hclog.NewNullLogger()})
		require.NoError(tb, err)
		tb.Cleanup(func() { l.Close() })
		ps[i] = replication.NewPartition("t", int32(i), self, l, hclog.NewNullLogger())
		tb.Cleanup(ps[i].Close)
		require.NoError(tb, ps[i].SetState(soleLeader(1)))
	}
	return ps
}

// longPolls starts a long poll on p at offset for each of n goroutines;
// each sends its result's batch count (or -1 for an error) on the
// returned channel when it ends.
func longPolls(ctx context.Context, p *replication.Partition, offset int64, n int, wg *sync.WaitGroup) <-chan int {
	out := make(chan int, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := p.Fetch(ctx, offset, 1<<20, time.Minute)
			if err != nil {
				out <- -1
				return
			}
			out <- len(res.Batches)
		}()
	}
	return out
}

// TestLongPollWakesOnlyItsPartition: with long polls waiting on 300
// other partitions, 50 writes to one partition wake none of them; the
// polls waiting on that partition at its end wake and return with the
// first write, and those waiting past its end wake at most once a write.
func TestLongPollWakesOnlyItsPartition(t *testing.T) {
	ps := leaders(t, t.TempDir(), 301)
	x, others := ps[0], ps[1:]
	var wakesX, wakesOthers atomic.Int64
	replication.SetFetchWakeHook(func(p *replication.Partition) {
		if p == x {
			wakesX.Add(1)
		} else {
			wakesOthers.Add(1)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		replication.SetFetchWakeHook(nil)
	})
	for _, p := range others {
		longPolls(ctx, p, 0, 1, &wg)
	}
	atEnd := longPolls(ctx, x, 0, 20, &wg)
	pastEnd := longPolls(ctx, x, 1<<40, 20, &wg)
	require.Eventually(t, func() bool { return waitingFetches() == 340 }, 10*time.Second, 10*time.Millisecond)

	const writes = 50
	for i := range writes {
		produce(t, x, fmt.Sprint("w", i), 1)
	}
	for range 20 {
		select {
		case n := <-atEnd:
			assert.Positive(t, n, "a poll at the end returns with the writes")
		case <-time.After(10 * time.Second):
			t.Fatal("a long poll at the end did not return after a write")
		}
	}
	assert.Zero(t, wakesOthers.Load(), "writes to one partition wake no poll of another")
	assert.GreaterOrEqual(t, wakesX.Load(), int64(20))
	assert.LessOrEqual(t, wakesX.Load(), int64(20+20*writes), "a poll wakes at most once a write")
	require.Eventually(t, func() bool { return waitingFetches() == 320 }, 10*time.Second, 10*time.Millisecond, "the others still wait")
	select {
	case n := <-pastEnd:
		t.Fatalf("a poll past the end returned (%d batches)", n)
	default:
	}
}

// BenchmarkProduceWithWaiters: a write to one partition, with 0 or 1,000
// long polls waiting on other partitions, on a file system where fsync
// costs nothing (/dev/shm where there is one), so that what a write costs
// the node shows.
func BenchmarkProduceWithWaiters(b *testing.B) {
	root := os.TempDir()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		root = "/dev/shm"
	}
	for _, waiters := range []int{0, 1000} {
		b.Run(fmt.Sprintf("waiters=%d", waiters), func(b *testing.B) {
			dir, err := os.MkdirTemp(root, "longpoll")
			require.NoError(b, err)
			b.Cleanup(func() { os.RemoveAll(dir) })
			ps := leaders(b, dir, 1+waiters)
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			b.Cleanup(func() { cancel(); wg.Wait() })
			for _, p := range ps[1:] {
				longPolls(ctx, p, 0, 1, &wg)
			}
			require.Eventually(b, func() bool { return waitingFetches() == waiters }, 30*time.Second, 10*time.Millisecond)
			batch, err := record.AppendBatch(nil, []record.Record{{Value: make([]byte, 1024)}})
			require.NoError(b, err)
			b.ReportAllocs()
			for b.Loop() {
				wait, err := ps[0].Produce(append(record.Batch(nil), batch...))
				if err != nil {
					b.Fatal(err)
				}
				if _, err := wait(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
