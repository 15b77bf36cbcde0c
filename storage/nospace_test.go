package storage_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/record"
	"gostream/storage"
)

// faultLog opens a log in a new directory on a FaultFS over the operating
// system's FS.
func faultLog(t *testing.T, opts storage.Options) (string, *storage.FaultFS, *storage.Log) {
	t.Helper()
	dir := t.TempDir()
	ffs := storage.NewFaultFS(storage.OSFS{})
	opts.FS = ffs
	return dir, ffs, openLog(t, dir, opts)
}

// requireNoSpace checks that err is a full disk that left the log going.
func requireNoSpace(t *testing.T, l *storage.Log, err error) {
	t.Helper()
	require.ErrorIs(t, err, storage.ErrNoSpace)
	require.ErrorIs(t, err, syscall.ENOSPC, "the system error is kept")
	require.NotErrorIs(t, err, storage.ErrFailed, "a full disk does not fail the log")
	require.NoError(t, l.Failed())
}

// reopenHolds closes l, reopens dir on the operating system's FS and checks
// that it holds exactly want.
func reopenHolds(t *testing.T, l *storage.Log, dir string, opts storage.Options, want []record.Batch) {
	t.Helper()
	require.NoError(t, l.Close())
	opts.FS = nil
	r := openLog(t, dir, opts)
	assertSameBytes(t, concat(want), concat(readAll(t, r)), "the log after a reopen")
	assert.Empty(t, quarantined(t, dir), "nothing was cut")
}

// TestNoSpaceWhilePreallocating: an append that needs a new stretch of
// preallocated space on a full disk fails with ErrNoSpace, gives back what
// it got part way, and leaves the log taking appends; once there is space
// again the same append succeeds.
func TestNoSpaceWhilePreallocating(t *testing.T) {
	for _, zeros := range []bool{false, true} {
		t.Run(map[bool]string{false: "fallocate", true: "written zeros"}[zeros], func(t *testing.T) {
			dir, ffs, l := faultLog(t, storage.Options{})
			if zeros {
				ffs.SetFault(func(op storage.FaultOp) error {
					if op.Kind == storage.FaultAllocate {
						return errors.ErrUnsupported
					}
					return nil
				})
			}
			const size = storage.PreallocBytes / 4
			batches := appendSized(t, l, 4, size, 'a') // fill the first stretch
			path := filepath.Join(dir, segName(0))
			before, err := os.ReadFile(path)
			require.NoError(t, err)
			require.Len(t, before, storage.PreallocBytes)

			ffs.SetSpace(100 << 10) // some of the next stretch, not all
			next := sizedBatch(t, size, 'e')
			_, err = l.Append(ctxFor(t), next, 0)
			requireNoSpace(t, l, err)
			after, err := os.ReadFile(path)
			require.NoError(t, err)
			assertSameBytes(t, before, after, "the space got part way is given back")
			_, err = l.Append(ctxFor(t), next, 0)
			requireNoSpace(t, l, err)
			assert.Equal(t, int64(4), l.LogEndOffset())

			ffs.SetSpace(-1)
			res := mustAppend(t, l, next, 0)
			assert.Equal(t, int64(4), res.BaseOffset)
			reopenHolds(t, l, dir, storage.Options{}, append(batches, next))
		})
	}
}

// TestNoSpaceWhileWriting: a batch write cut short for want of space is cut
// off again, preallocated space and all, so that the next append starts
// afresh; a crash before that cut finds a torn write, not corruption.
func TestNoSpaceWhileWriting(t *testing.T) {
	dir, ffs, l := faultLog(t, storage.Options{})
	batches := appendSized(t, l, 3, 1000, 'a')
	crashed := t.TempDir()
	var once, snap sync.Once
	ffs.SetFault(func(op storage.FaultOp) error {
		var err error
		if op.Kind == storage.FaultWrite && op.Off == 3000 {
			// The kernel cuts a write short at a block boundary.
			once.Do(func() { err = storage.ShortWrite{N: 3072 - 3000, Err: syscall.ENOSPC} })
		}
		if op.Kind == storage.FaultTruncate {
			snap.Do(func() { copyDir(t, dir, crashed) }) // a crash just before the cut
		}
		return err
	})
	next := sizedBatch(t, 1000, 'd')
	_, err := l.Append(ctxFor(t), next, 0)
	requireNoSpace(t, l, err)
	data, err := os.ReadFile(filepath.Join(dir, segName(0)))
	require.NoError(t, err)
	assertSameBytes(t, concat(batches), data, "the file ends at its data again")

	r := openLog(t, crashed, storage.Options{})
	assertSameBytes(t, concat(batches), concat(readAll(t, r)), "a crash mid-way recovers what was acknowledged")
	assert.Len(t, quarantined(t, crashed), 1, "the partial write is a torn write")

	ffs.SetFault(nil)
	res := mustAppend(t, l, next, 0)
	assert.Equal(t, int64(3), res.BaseOffset)
	reopenHolds(t, l, dir, storage.Options{}, append(batches, next))
}

// TestNoSpaceWhileRolling: a roll that cannot write the old segment's index
// or create the new segment leaves the old one active, whole and synced;
// the next append rolls again, and succeeds once there is space.
func TestNoSpaceWhileRolling(t *testing.T) {
	for _, tc := range []struct{ name, path string }{
		{"index", ".index.tmp-"},
		{"new segment", segName(4)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := storage.Options{SegmentBytes: 4096}
			dir, ffs, l := faultLog(t, opts)
			batches := appendSized(t, l, 4, 1000, 'a')
			ffs.SetFault(func(op storage.FaultOp) error {
				if op.Kind == storage.FaultCreate && strings.Contains(op.Path, tc.path) {
					return syscall.ENOSPC
				}
				return nil
			})
			next := sizedBatch(t, 1000, 'e')
			for range 2 {
				_, err := l.Append(ctxFor(t), next, 0)
				requireNoSpace(t, l, err)
			}
			assert.Equal(t, []string{segName(0)}, segmentFiles(t, dir))
			assert.Equal(t, int64(4), l.DurableEndOffset())
			leftovers, err := filepath.Glob(filepath.Join(dir, ".*tmp-*"))
			require.NoError(t, err)
			assert.Empty(t, leftovers, "no temporary file is left")

			crashed := t.TempDir() // a crash now
			copyDir(t, dir, crashed)
			r := openLog(t, crashed, opts)
			assertSameBytes(t, concat(batches), concat(readAll(t, r)))
			assert.Empty(t, quarantined(t, crashed))

			ffs.SetFault(nil)
			res := mustAppend(t, l, next, 0)
			assert.Equal(t, int64(4), res.BaseOffset)
			assert.Equal(t, []string{segName(0), segName(4)}, segmentFiles(t, dir))
			reopenHolds(t, l, dir, opts, append(batches, next))
		})
	}
}

// failSyncs makes fsyncs of segments fail with err while on is set.
func failSyncs(ffs *storage.FaultFS, err error) {
	ffs.SetFault(func(op storage.FaultOp) error {
		if op.Kind == storage.FaultSync && strings.HasSuffix(op.Path, ".log") {
			return err
		}
		return nil
	})
}

// TestFailedFsyncAndResume: a failed fsync fails the log (nothing above
// the last good fsync can be trusted), and Resume cuts back to the durable
// end, quarantining what it cuts, and takes appends again.
func TestFailedFsyncAndResume(t *testing.T) {
	dir, ffs, l := faultLog(t, storage.Options{})
	b0 := sizedBatch(t, 500, 'a')
	mustAppend(t, l, b0, 0)
	assert.NoError(t, l.Resume(ctxFor(t)), "a healthy log: nothing to do")
	assert.Empty(t, quarantined(t, dir))

	failSyncs(ffs, syscall.EIO)
	b1, b2 := sizedBatch(t, 500, 'b'), sizedBatch(t, 500, 'c')
	_, d1, err := l.Write(b1, 0)
	require.NoError(t, err)
	_, d2, err := l.Write(b2, 0)
	require.NoError(t, err)
	err = d1(ctxFor(t))
	require.ErrorIs(t, err, storage.ErrFailed)
	require.ErrorIs(t, err, syscall.EIO)
	require.ErrorIs(t, l.Failed(), syscall.EIO)
	require.ErrorIs(t, d2(ctxFor(t)), storage.ErrFailed)
	_, err = l.Append(ctxFor(t), sizedBatch(t, 100, 'x'), 0)
	require.ErrorIs(t, err, storage.ErrFailed, "a failed log refuses appends")

	ffs.SetFault(nil)
	require.NoError(t, l.Resume(ctxFor(t)))
	require.NoError(t, l.Failed())
	assert.ErrorIs(t, d1(ctxFor(t)), storage.ErrTruncated, "the appends above the durable end were cut")
	assert.ErrorIs(t, d2(ctxFor(t)), storage.ErrTruncated)
	assert.Equal(t, int64(1), l.LogEndOffset())
	q := quarantined(t, dir)
	require.Len(t, q, 1)
	for _, data := range q {
		assertSameBytes(t, concat([]record.Batch{b1, b2}), data, "the cut appends are quarantined")
	}
	b3 := sizedBatch(t, 500, 'd')
	res := mustAppend(t, l, b3, 0)
	assert.Equal(t, int64(1), res.BaseOffset)
	require.NoError(t, l.Resume(ctxFor(t)))
	assert.Len(t, quarantined(t, dir), 1)

	require.NoError(t, l.Close())
	r := openLog(t, dir, storage.Options{})
	assertSameBytes(t, concat([]record.Batch{b0, b3}), concat(readAll(t, r)))
	assert.ErrorIs(t, r.Resume(ctxFor(t)), nil)
	require.NoError(t, r.Close())
	assert.ErrorIs(t, r.Resume(ctxFor(t)), storage.ErrClosed)
}

// TestResumeWithoutSpace: when the quarantine copy of what Resume must cut
// finds no space, Resume fails with ErrNoSpace, removes its partial copy,
// and the log stays failed until a Resume with space.
func TestResumeWithoutSpace(t *testing.T) {
	dir, ffs, l := faultLog(t, storage.Options{})
	b0 := sizedBatch(t, 500, 'a')
	mustAppend(t, l, b0, 0)
	failSyncs(ffs, syscall.ENOSPC)
	_, err := l.Append(ctxFor(t), sizedBatch(t, 500, 'b'), 0)
	require.ErrorIs(t, err, storage.ErrFailed, "a failed fsync fails the log, whatever its cause")
	require.ErrorIs(t, err, storage.ErrNoSpace)
	require.ErrorIs(t, err, syscall.ENOSPC)

	ffs.SetFault(nil)
	ffs.SetSpace(10) // the quarantine file is made, its copy cut short
	err = l.Resume(ctxFor(t))
	require.ErrorIs(t, err, storage.ErrNoSpace)
	require.Error(t, l.Failed(), "still failed")
	assert.Empty(t, quarantined(t, dir), "the partial copy is removed")
	_, err = l.Append(ctxFor(t), sizedBatch(t, 500, 'c'), 0)
	require.ErrorIs(t, err, storage.ErrFailed)

	ffs.SetSpace(-1)
	require.NoError(t, l.Resume(ctxFor(t)))
	b1 := sizedBatch(t, 500, 'd')
	mustAppend(t, l, b1, 0)
	require.NoError(t, l.Close())
	r := openLog(t, dir, storage.Options{})
	assertSameBytes(t, concat([]record.Batch{b0, b1}), concat(readAll(t, r)))
}

// TestNoSpaceErrorsMatch: errors caused by ENOSPC or EDQUOT match
// ErrNoSpace and the system error, wherever they come from.
func TestNoSpaceErrorsMatch(t *testing.T) {
	ffs := storage.NewFaultFS(storage.OSFS{})
	ffs.SetSpace(0)
	_, err := storage.OpenRootWith(filepath.Join(t.TempDir(), "root"), storage.RootOptions{BrokerID: 1, FS: ffs})
	assert.ErrorIs(t, err, storage.ErrNoSpace)
	assert.ErrorIs(t, err, syscall.ENOSPC)
	_, err = storage.Open(filepath.Join(t.TempDir(), "log"), storage.Options{FS: ffs})
	assert.ErrorIs(t, err, storage.ErrNoSpace)

	_, ffs, l := faultLog(t, storage.Options{})
	ffs.SetFault(func(op storage.FaultOp) error {
		if op.Kind == storage.FaultAllocate {
			return syscall.EDQUOT
		}
		return nil
	})
	_, err = l.Append(ctxFor(t), sizedBatch(t, 100, 'a'), 0)
	assert.ErrorIs(t, err, storage.ErrNoSpace, "a quota is a full disk too")
	assert.ErrorIs(t, err, syscall.EDQUOT)
	assert.NoError(t, l.Failed())
}

// TestFullDisksAndFailedFsyncsLoseNothingAcknowledged runs rounds of
// concurrent appends on a disk that fills up (in preallocation, writes,
// rolls) and whose fsyncs sometimes fail, resuming the log after each
// round, and ends in a crash that loses everything unsynced: every append
// that returned success is there after a reopen, byte for byte.
func TestFullDisksAndFailedFsyncsLoseNothingAcknowledged(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 9))
	dir := recoveryFuzzDir(t)
	crash := storage.NewCrashFS(storage.OSFS{}, nil)
	ffs := storage.NewFaultFS(crash)
	opts := storage.Options{SegmentBytes: 16 << 10, IndexIntervalBytes: 512, Logger: hclog.NewNullLogger(), FS: ffs}
	l, err := storage.Open(dir, opts)
	require.NoError(t, err)

	var (
		mu     sync.Mutex
		acked  []record.Batch
		counts = map[string]int{}
	)
	for round := range 60 {
		var faultMu sync.Mutex
		faultRng := rand.New(rand.NewPCG(seed, uint64(round)))
		syncFailures := rng.IntN(3) == 0
		createFailures := rng.IntN(4) == 0
		ffs.SetFault(func(op storage.FaultOp) error {
			faultMu.Lock()
			defer faultMu.Unlock()
			switch {
			case syncFailures && op.Kind == storage.FaultSync && faultRng.IntN(4) == 0:
				return syscall.EIO
			case createFailures && op.Kind == storage.FaultCreate && faultRng.IntN(2) == 0:
				return syscall.ENOSPC
			}
			return nil
		})
		if rng.IntN(2) == 0 {
			ffs.SetSpace(int64(rng.IntN(64 << 10)))
		}
		var wg sync.WaitGroup
		for w := range 4 {
			wrng := rand.New(rand.NewPCG(seed, uint64(1000*round+w)))
			batches := make([]record.Batch, 5)
			for i := range batches {
				batches[i] = randomBatch(t, wrng, 4, 2000)
			}
			wg.Go(func() {
				for _, b := range batches {
					_, err := l.Append(context.Background(), b, 1)
					mu.Lock()
					switch {
					case err == nil:
						acked = append(acked, b)
						counts["acked"]++
					case errors.Is(err, storage.ErrFailed):
						counts["failed"]++
					case errors.Is(err, storage.ErrNoSpace):
						counts["no space"]++
					case errors.Is(err, storage.ErrTruncated):
						counts["truncated"]++
					default:
						t.Errorf("append: unexpected error %v", err)
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		ffs.SetFault(nil)
		ffs.SetSpace(-1)
		if l.Failed() != nil {
			counts["resumed"]++
			require.NoError(t, l.Resume(ctxFor(t)))
		}
		for _, b := range acked {
			got, err := l.Read(ctxFor(t), b.BaseOffset(), 1, 1<<62, nil)
			require.NoError(t, err)
			require.True(t, string(b) == string(got), "round %d: acknowledged batch at %d changed", round, b.BaseOffset())
		}
	}
	t.Logf("appends: %v; %d segments", counts, l.SegmentCount())
	require.Positive(t, counts["no space"])
	require.Positive(t, counts["resumed"])

	crash.Crash()
	l.Close()
	opts.FS, opts.Logger = nil, testLogger(t)
	r, err := storage.Open(dir, opts)
	require.NoError(t, err)
	defer r.Close()
	for _, b := range acked {
		got, err := r.Read(ctxFor(t), b.BaseOffset(), 1, 1<<62, nil)
		require.NoError(t, err)
		require.True(t, string(b) == string(got), "acknowledged batch at %d lost in the crash", b.BaseOffset())
	}
}

// TestRollPublishesTheOldSegmentAsDurable: a roll fsyncs the old segment
// before it creates the new one, so everything in it is durable from then
// on, without waiting for a group commit (Resume never cuts it).
func TestRollPublishesTheOldSegmentAsDurable(t *testing.T) {
	l := openLog(t, t.TempDir(), storage.Options{SegmentBytes: 4096})
	for i := range 4 {
		_, _, err := l.Write(sizedBatch(t, 1000, byte('a'+i)), 0)
		require.NoError(t, err)
	}
	assert.Zero(t, l.DurableEndOffset(), "nothing was synced yet")
	_, durable, err := l.Write(sizedBatch(t, 1000, 'e'), 0) // rolls
	require.NoError(t, err)
	assert.Equal(t, int64(4), l.DurableEndOffset())
	require.NoError(t, durable(ctxFor(t)))
}

// TestCrashFSFullDiskAndBack is the chaos harness's full disk on a log: on
// a CrashFS whose disk fills up, appends fail with ErrNoSpace while it is
// full and succeed once it is not, and a crash then loses none of those
// that returned success.
func TestCrashFSFullDiskAndBack(t *testing.T) {
	dir := recoveryFuzzDir(t)
	var full atomic.Bool
	c := storage.NewCrashFS(storage.OSFS{}, full.Load)
	opts := storage.Options{SegmentBytes: 64 << 10, FS: c}
	l := openLog(t, dir, opts)
	var acked []record.Batch
	rejected := 0
	for i := range 300 {
		if i%50 == 10 {
			full.Store(true)
		}
		if i%50 == 40 {
			full.Store(false)
		}
		b := sizedBatch(t, 2000, byte(i))
		_, err := l.Append(ctxFor(t), b, 0)
		if err != nil {
			requireNoSpace(t, l, err)
			rejected++
			continue
		}
		acked = append(acked, b)
	}
	t.Logf("%d appends acknowledged, %d rejected for want of space", len(acked), rejected)
	require.Positive(t, rejected)
	c.Crash()
	l.Close()
	r := openLog(t, dir, storage.Options{SegmentBytes: 64 << 10})
	assertSameBytes(t, concat(acked), concat(readAll(t, r)))
}
