package storage_test

import (
	"context"
	"io"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/record"
	"gostream/storage"
)

// rangeBytes reads what a lent range holds, through its file.
func rangeBytes(t testing.TB, r *storage.Range) []byte {
	t.Helper()
	buf := make([]byte, r.Len())
	_, err := io.ReadFull(io.NewSectionReader(r.File(), r.Position(), int64(r.Len())), buf)
	require.NoError(t, err)
	return buf
}

// TestReadRangeMatchesRead: on logs of batches of random sizes, several
// segments and index spacings, every range ReadRange lends holds exactly
// the bytes Read returns for the same arguments, and it lends one for
// every read that returns batches, since this process checked them all.
// After a reopen, a closed segment whose index was loaded is lent only
// once a Read has checked it.
func TestReadRangeMatchesRead(t *testing.T) {
	for seed := range uint64(12) {
		rng := rand.New(rand.NewPCG(seed, 7))
		dir := t.TempDir()
		opts := storage.Options{
			SegmentBytes:       int64(8<<10 + rng.IntN(64<<10)),
			IndexIntervalBytes: int64(64 + rng.IntN(4096)),
		}
		l := openLog(t, dir, opts)
		for range 80 {
			size := 60 + rng.IntN(600)
			if rng.IntN(4) == 0 {
				size = 4<<10 + rng.IntN(20<<10)
			}
			mustAppend(t, l, sizedBatch(t, size, byte(rng.Uint32())), 0)
		}
		end := l.LogEndOffset()
		check := func(reopened bool) {
			for range 300 {
				offset := rng.Int64N(end + 1)
				maxBytes := 1 + rng.IntN(80<<10)
				limit := rng.Int64N(end + 3)
				want, err := l.Read(ctxFor(t), offset, maxBytes, limit, nil)
				require.NoError(t, err)
				r, err := l.ReadRange(offset, maxBytes, limit, 0)
				require.NoError(t, err)
				if r == nil {
					assert.True(t, reopened || len(want) == 0, "seed %d: no range for %d bytes at offset %d", seed, len(want), offset)
					continue
				}
				require.NotEmpty(t, want)
				assert.Equal(t, want, rangeBytes(t, r), "seed %d: offset %d max %d limit %d", seed, offset, maxBytes, limit)
				assert.Equal(t, record.Batch(want).BaseOffset(), r.BaseOffset())
				var next int64
				require.NoError(t, record.Batches(want, func(b record.Batch) bool { next = b.NextOffset(); return true }))
				assert.Equal(t, next, r.NextOffset())
				r.Release()
			}
		}
		check(false)
		require.NoError(t, l.Close())
		l = openLog(t, dir, opts)
		check(true)
		// Every read above went through Read first: what it returned is
		// checked now, and lent.
		for off := int64(0); off < end; {
			want, err := l.Read(ctxFor(t), off, 1<<20, noLimit, nil)
			require.NoError(t, err)
			r, err := l.ReadRange(off, 1<<20, noLimit, 0)
			require.NoError(t, err)
			require.NotNil(t, r, "seed %d: offset %d, read once", seed, off)
			assert.Equal(t, want, rangeBytes(t, r))
			r.Release()
			off = r.NextOffset()
		}
	}
}

// TestReadRangeIsNotLentWhenSmall: below minBytes, and past the durable
// end or the limit, there is no range.
func TestReadRangeIsNotLentWhenSmall(t *testing.T) {
	l := openLog(t, t.TempDir(), storage.Options{})
	appendSized(t, l, 4, 1000, 'a')
	r, err := l.ReadRange(0, 1<<20, noLimit, 4001)
	require.NoError(t, err)
	assert.Nil(t, r, "4000 bytes are fewer than asked")
	r, err = l.ReadRange(0, 1<<20, noLimit, 4000)
	require.NoError(t, err)
	require.NotNil(t, r)
	assert.Equal(t, 4000, r.Len())
	r.Release()
	r, err = l.ReadRange(0, 1<<20, 2, 0)
	require.NoError(t, err)
	require.NotNil(t, r)
	assert.Equal(t, 2000, r.Len(), "only batches below the limit")
	r.Release()
	r, err = l.ReadRange(4, 1<<20, noLimit, 0)
	require.NoError(t, err)
	assert.Nil(t, r, "nothing at the log end")
	_, err = l.ReadRange(5, 1<<20, noLimit, 0)
	assert.ErrorIs(t, err, storage.ErrOffsetOutOfRange)
}

// TestLentRangeOutlivesRetention: retention deletes the segment of a lent
// range; the range still reads the bytes it was lent with, and its file
// is closed once it is released.
func TestLentRangeOutlivesRetention(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, storage.Options{SegmentBytes: 4096, RetentionBytes: 1})
	batches := appendSized(t, l, 12, 1000, 'a')
	r, err := l.ReadRange(0, 1<<20, noLimit, 0)
	require.NoError(t, err)
	require.NotNil(t, r)
	require.Equal(t, concat(batches[:4]), rangeBytes(t, r))

	n, err := l.ApplyRetention(ctxFor(t), noLimit)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.NotContains(t, segmentFiles(t, dir), segName(0))
	assert.Equal(t, concat(batches[:4]), rangeBytes(t, r), "a deleted segment's lent range reads what it held")

	f := r.File()
	r.Release()
	_, err = f.ReadAt(make([]byte, 1), 0)
	assert.ErrorIs(t, err, os.ErrClosed, "the last release closes the deleted segment's file")
	r.Release() // a second release changes nothing
}

// TestLentRangeOutlivesClose: a log closed while a range is lent keeps the
// file open until the range is released.
func TestLentRangeOutlivesClose(t *testing.T) {
	l, err := storage.Open(t.TempDir(), storage.Options{Logger: testLogger(t)})
	require.NoError(t, err)
	batches := appendSized(t, l, 3, 1000, 'a')
	r, err := l.ReadRange(0, 1<<20, noLimit, 0)
	require.NoError(t, err)
	require.NotNil(t, r)
	require.NoError(t, l.Close())
	_, err = l.ReadRange(0, 1<<20, noLimit, 0)
	assert.ErrorIs(t, err, storage.ErrClosed)
	assert.Equal(t, concat(batches), rangeBytes(t, r))
	f := r.File()
	r.Release()
	_, err = f.ReadAt(make([]byte, 1), 0)
	assert.ErrorIs(t, err, os.ErrClosed)
}

// TestTruncateWaitsForLentRange: a truncation that would cut into a lent
// range waits until it is released, so the range never sends bytes
// written after the cut; one that cuts only after it does not wait, and
// one whose context ends first cuts nothing.
func TestTruncateWaitsForLentRange(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, storage.Options{})
	batches := appendSized(t, l, 6, 1000, 'a')
	r, err := l.ReadRange(0, 3000, noLimit, 0)
	require.NoError(t, err)
	require.NotNil(t, r)
	require.Equal(t, 3000, r.Len())

	require.NoError(t, l.TruncateTo(ctxFor(t), 5), "a cut after the range does not wait")

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, l.TruncateTo(ctx, 1), context.DeadlineExceeded)
	assert.Equal(t, int64(5), l.LogEndOffset(), "a truncation that gave up cut nothing")

	done := make(chan error, 1)
	go func() { done <- l.TruncateTo(ctxFor(t), 1) }()
	// The truncation waits for the range: whatever it does meanwhile, the
	// range reads what it was lent with.
	assert.Equal(t, concat(batches[:3]), rangeBytes(t, r))
	select {
	case err := <-done:
		t.Fatalf("truncation returned (%v) while a range it cuts was lent", err)
	default:
	}
	r.Release()
	require.NoError(t, <-done)
	assert.Equal(t, int64(1), l.LogEndOffset())
	appendSized(t, l, 2, 1000, 'x')
	assert.Equal(t, concat(batches[:1]), concat(readAll(t, l)[:1]))
}

// FuzzReadRange: whatever the batches' sizes, the index spacing and the
// read asked, a lent range holds exactly what Read returns. The input's
// bytes give the spacing, then a batch size per pair of bytes, then
// reads of three bytes each (offset, max bytes, limit).
func FuzzReadRange(f *testing.F) {
	f.Add([]byte{8, 0, 40, 1, 200, 0, 60, 9, 9, 0, 1, 1, 2, 0, 255, 3, 7, 7, 0})
	f.Add([]byte{200, 3, 0, 3, 0, 3, 0, 0, 90, 0, 90, 0, 90, 1, 255, 255, 2, 1, 1})
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) < 3 {
			return
		}
		interval := 34 + int64(in[0])*16
		in = in[1:]
		l := openLog(t, t.TempDir(), storage.Options{IndexIntervalBytes: interval, SegmentBytes: 16 << 10, Logger: hclog.NewNullLogger()})
		n := min(len(in)/2, 40)
		for i := range n {
			size := 46 + (int(in[2*i])<<8|int(in[2*i+1]))%(6<<10)
			mustAppend(t, l, sizedBatch(t, size, byte(i)), 0)
		}
		end := l.LogEndOffset()
		for q := in[2*n:]; len(q) >= 3; q = q[3:] {
			offset := int64(q[0]) % (end + 1)
			maxBytes := 1 + int(q[1])*64
			limit := int64(q[2]) % (end + 2)
			want, err := l.Read(ctxFor(t), offset, maxBytes, limit, nil)
			require.NoError(t, err)
			r, err := l.ReadRange(offset, maxBytes, limit, 0)
			require.NoError(t, err)
			if len(want) == 0 {
				require.Nil(t, r)
				continue
			}
			require.NotNil(t, r, "offset %d max %d limit %d", offset, maxBytes, limit)
			require.Equal(t, want, rangeBytes(t, r))
			r.Release()
		}
	})
}
