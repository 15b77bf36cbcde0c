package storage_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/record"
	"gostream/storage"
)

// crashOutcome is what one crash of a log on a CrashFS did.
type crashOutcome struct {
	acked, written int      // appends that returned success; appends tried
	lost           []string // acknowledged appends missing or changed after the reopen
}

// crashDuringAppends appends from several goroutines at once (so that they
// share group commits) to a log on a CrashFS, crashes the FS as the
// target'th append returns success, while the others are in flight,
// reopens the directory on the operating system's FS, and reports every
// acknowledged append that is not there byte for byte.
func crashDuringAppends(t *testing.T, seed uint64, segmentBytes int64, target int) crashOutcome {
	t.Helper()
	dir := recoveryFuzzDir(t)
	c := storage.NewCrashFS(storage.OSFS{}, nil)
	opts := storage.Options{SegmentBytes: segmentBytes, IndexIntervalBytes: 512, Logger: hclog.NewNullLogger(), FS: c}
	l, err := storage.Open(dir, opts)
	require.NoError(t, err)

	const workers, perWorker = 8, 60
	type acked struct {
		res   storage.AppendResult
		batch record.Batch
	}
	var (
		mu       sync.Mutex
		acks     []acked
		written  atomic.Int64
		ackCount atomic.Int64
		wg       sync.WaitGroup
	)
	for w := range workers {
		rng := rand.New(rand.NewPCG(seed, uint64(w)))
		batches := make([]record.Batch, perWorker)
		for i := range batches {
			batches[i] = randomBatch(t, rng, 4, 300)
		}
		wg.Go(func() {
			for _, b := range batches {
				written.Add(1)
				res, err := l.Append(context.Background(), b, 1)
				if err != nil {
					return // the crash failed the log
				}
				mu.Lock()
				acks = append(acks, acked{res, b})
				mu.Unlock()
				if ackCount.Add(1) == int64(target) {
					c.Crash()
				}
			}
		})
	}
	wg.Wait()
	require.GreaterOrEqual(t, ackCount.Load(), int64(target), "the crash never came")
	l.Close() // fails: its files are gone with the crash

	opts.FS, opts.Logger = storage.OSFS{}, testLogger(t)
	r, err := storage.Open(dir, opts)
	require.NoError(t, err, "a crash that loses unsynced bytes is recovered, not corruption")
	defer r.Close()
	out := crashOutcome{acked: len(acks), written: int(written.Load())}
	for _, a := range acks {
		got, err := r.Read(ctxFor(t), a.res.BaseOffset, 1, 1<<62, nil)
		if err != nil || string(got) != string(a.batch) {
			out.lost = append(out.lost, fmt.Sprintf("offsets [%d, %d) (read: %v, %d bytes)", a.res.BaseOffset, a.res.NextOffset, err, len(got)))
		}
	}
	require.NotPanics(t, func() { readAll(t, r) }, "the reopened log reads whole")
	res, err := r.Append(ctxFor(t), sizedBatch(t, 100, 'n'), 1)
	require.NoError(t, err, "the reopened log takes appends")
	assert.Equal(t, r.LogEndOffset()-1, res.BaseOffset)
	return out
}

// TestCrashKeepsEveryAcknowledgedAppend is the durability promise tested
// against the calls storage makes: on a CrashFS, where a crash loses
// exactly the bytes not yet fsync'd, every append that returned success
// before a crash at a random moment is there after it, byte for byte.
func TestCrashKeepsEveryAcknowledgedAppend(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	runs := 30
	if testing.Short() {
		runs = 8
	}
	var acked, written int
	for run := range runs {
		segment := int64(2048 + rng.IntN(32<<10)) // rolls now and then
		out := crashDuringAppends(t, seed+uint64(run), segment, 1+rng.IntN(300))
		require.Empty(t, out.lost, "run %d (seed %d): acknowledged appends lost in a crash", run, seed)
		acked, written = acked+out.acked, written+out.written
	}
	t.Logf("%d appends, %d acknowledged before their crash", written, acked)
	assert.Positive(t, acked)
}

// TestCrashTestNoticesAMissingFsync shows that the test above can fail: with
// group commits that publish appends as durable without an fsync, a crash
// loses appends that returned success.
func TestCrashTestNoticesAMissingFsync(t *testing.T) {
	defer storage.SkipGroupCommitFsync()()
	out := crashDuringAppends(t, rand.Uint64(), 1<<20, 50)
	assert.NotEmpty(t, out.lost, "appends acknowledged without an fsync survived a crash")
	t.Logf("without the fsync, %d of %d acknowledged appends were lost", len(out.lost), out.acked)
}
