package storage_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/record"
	"gostream/storage"
)

// These tests use storage.SetSyncHook (a package-level test hook), so none
// of them may run in parallel.

// appendAll runs one Append per batch, each in its own goroutine, and
// returns the errors by batch.
func appendAll(ctx context.Context, l *storage.Log, batches []record.Batch, epoch int32) []error {
	errs := make([]error, len(batches))
	var wg sync.WaitGroup
	for i, b := range batches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = l.Append(ctx, b, epoch)
		}()
	}
	wg.Wait()
	return errs
}

// TestGroupCommitOneFsyncForAllWaiting holds the first fsync until every
// appender has written its batch: that one fsync must then cover them all.
func TestGroupCommitOneFsyncForAllWaiting(t *testing.T) {
	const appenders = 32
	l := openLog(t, t.TempDir(), storage.Options{})
	var syncs atomic.Int64
	restore := storage.SetSyncHook(func() {
		if syncs.Add(1) == 1 {
			// assert, not require: this runs on an appender's goroutine.
			assert.Eventually(t, func() bool { return l.LogEndOffset() == appenders },
				10*time.Second, time.Millisecond, "appenders did not all write while an fsync ran")
		}
	})
	defer restore()

	batches := make([]record.Batch, appenders)
	for i := range batches {
		batches[i] = sizedBatch(t, 100, byte(i))
	}
	for i, err := range appendAll(ctxFor(t), l, batches, 0) {
		require.NoError(t, err, "append %d", i)
	}
	assert.Equal(t, int64(1), syncs.Load(), "one fsync covers every append that waited for it")
	assert.Equal(t, int64(appenders), l.DurableEndOffset())
	assert.Len(t, readAll(t, l), appenders)
}

// TestGroupCommitSharesFsyncs runs free-running appenders and counts fsyncs
// through Options.OnSync.
func TestGroupCommitSharesFsyncs(t *testing.T) {
	const goroutines, perG = 16, 50
	var syncs atomic.Int64
	l := openLog(t, t.TempDir(), storage.Options{OnSync: func(time.Duration) { syncs.Add(1) }})

	ctx := ctxFor(t)
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		batches := make([]record.Batch, perG)
		for i := range batches {
			batches[i] = sizedBatch(t, 64, byte(g+i))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, b := range batches {
				if _, err := l.Append(ctx, b, 0); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	n := syncs.Load()
	t.Logf("%d appends, %d fsyncs", goroutines*perG, n)
	assert.Less(t, n, int64(goroutines*perG), "concurrent appends share fsyncs")
	assert.Positive(t, n)
	assert.Equal(t, int64(goroutines*perG), l.DurableEndOffset())
}

// TestTruncateWhileAppendsWait truncates the log while two appends wait for
// one fsync: the append below the cut survives and must succeed, the one
// above it must fail with ErrTruncated, and a reader waiting for the surviving
// offset must wake up.
func TestTruncateWhileAppendsWait(t *testing.T) {
	l := openLog(t, t.TempDir(), storage.Options{})
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	defer storage.SetSyncHook(func() {
		once.Do(func() {
			close(entered)
			<-release
		})
	})()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()

	ctx := ctxFor(t)
	first, second := sizedBatch(t, 100, 'a'), sizedBatch(t, 100, 'b')
	errA, errB, waited := make(chan error, 1), make(chan error, 1), make(chan error, 1)
	go func() { _, err := l.Append(ctx, first, 1); errA <- err }()
	select {
	case <-entered: // A runs the fsync and is held in it
	case <-time.After(10 * time.Second):
		t.Fatal("the first append did not start an fsync")
	}
	go func() { _, err := l.Append(ctx, second, 1); errB <- err }()
	require.Eventually(t, func() bool { return l.LogEndOffset() == 2 }, 10*time.Second, time.Millisecond)
	go func() { waited <- l.Wait(ctx, 0) }()
	require.Never(t, func() bool { return len(waited) > 0 }, 50*time.Millisecond, 5*time.Millisecond,
		"nothing is durable yet")

	require.NoError(t, l.TruncateTo(ctx, 1))
	assert.Equal(t, int64(1), l.DurableEndOffset(), "TruncateTo makes what it keeps durable")
	select {
	case err := <-waited:
		assert.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Error("Wait(0) did not wake when the truncation made offset 0 durable")
	}

	close(release)
	select {
	case err := <-errA:
		assert.NoError(t, err, "the batch below the cut is in the log and durable: its append succeeded")
	case <-time.After(10 * time.Second):
		t.Fatal("first append did not return")
	}
	select {
	case err := <-errB:
		assert.ErrorIs(t, err, storage.ErrTruncated)
	case <-time.After(10 * time.Second):
		t.Fatal("second append did not return")
	}
	got := readAll(t, l)
	require.Len(t, got, 1)
	assert.Equal(t, first, got[0])
	assert.Len(t, quarantined(t, l.Dir()), 1)
}

// TestTruncatedAppendIsNotRevived checks that an append cut off by TruncateTo
// fails even when a new append fills its offsets and becomes durable before
// it looks.
func TestTruncatedAppendIsNotRevived(t *testing.T) {
	l := openLog(t, t.TempDir(), storage.Options{})
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	defer storage.SetSyncHook(func() {
		once.Do(func() {
			close(entered)
			<-release
		})
	})()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()

	ctx := ctxFor(t)
	errA, errB, errC := make(chan error, 1), make(chan error, 1), make(chan error, 1)
	a, b := sizedBatch(t, 100, 'a'), sizedBatch(t, 100, 'b')
	go func() { _, err := l.Append(ctx, a, 1); errA <- err }()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the first append did not start an fsync")
	}
	go func() { _, err := l.Append(ctx, b, 1); errB <- err }()
	require.Eventually(t, func() bool { return l.LogEndOffset() == 2 }, 10*time.Second, time.Millisecond)
	require.NoError(t, l.TruncateTo(ctx, 1))
	replacement := sizedBatch(t, 100, 'c')
	go func() { _, err := l.Append(ctx, replacement, 2); errC <- err }()
	require.Eventually(t, func() bool { return l.LogEndOffset() == 2 }, 10*time.Second, time.Millisecond)
	close(release)

	for name, tc := range map[string]struct {
		ch   chan error
		want error
	}{"below the cut": {errA, nil}, "cut": {errB, storage.ErrTruncated}, "after the cut": {errC, nil}} {
		select {
		case err := <-tc.ch:
			if tc.want == nil {
				assert.NoError(t, err, name)
			} else {
				assert.ErrorIs(t, err, tc.want, name)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("append %s did not return", name)
		}
	}
	got := readAll(t, l)
	require.Len(t, got, 2)
	assert.Equal(t, replacement, got[1])
}

// TestAbandonedWaitStillBecomesDurable: a write that lands while an fsync
// runs, and whose waiter gives up (its client hung up), still becomes
// durable though no one waits for it and nothing is written after it.
// Group commit is driven by waiters: without a finisher the write stayed
// unsynced, and a leader's high watermark, which waits for the durable
// end, stopped below it for good.
func TestAbandonedWaitStillBecomesDurable(t *testing.T) {
	l := openLog(t, t.TempDir(), storage.Options{})
	entered, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int64
	restore := storage.SetGroupCommitSync(func(f storage.File) error {
		if calls.Add(1) == 1 {
			close(entered)
			<-release
		}
		return f.Sync()
	})
	defer restore()

	ctx := ctxFor(t)
	_, durA, err := l.Write(sizedBatch(t, 100, 1), 0)
	require.NoError(t, err)
	errA := make(chan error, 1)
	go func() { errA <- durA(ctx) }() // drives the first fsync, which holds
	<-entered

	resB, durB, err := l.Write(sizedBatch(t, 100, 2), 0)
	require.NoError(t, err)
	gone, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, durB(gone), context.Canceled, "B's waiter gives up while A's fsync runs")
	close(release)
	require.NoError(t, <-errA)
	require.Eventually(t, func() bool { return l.DurableEndOffset() == resB.NextOffset }, 5*time.Second, time.Millisecond,
		"B became durable with no one waiting for it and nothing written after it")
	assert.Equal(t, int64(2), calls.Load(), "a second fsync, for B")
}
