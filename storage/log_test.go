package storage_test

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/record"
	"gostream/storage"
)

func TestSegmentsRollBySize(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, storage.Options{SegmentBytes: 4096})
	// Four 1000-byte batches fit a segment; the fifth rolls.
	for i := range 10 {
		mustAppend(t, l, sizedBatch(t, 1000, byte(i)), 0)
	}
	assert.Equal(t, []string{segName(0), segName(4), segName(8)}, segmentFiles(t, dir))
	assert.Equal(t, 3, l.SegmentCount())
	// Rolled segments end at their data; the active one is preallocated
	// with zeros, up to SegmentBytes.
	for name, want := range map[string]int64{segName(0): 4000, segName(4): 4000, segName(8): 4096} {
		fi, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.Equal(t, want, fi.Size(), name)
	}
	assert.Equal(t, int64(10000), l.Size())
	for _, base := range []int64{0, 4} {
		_, err := os.Stat(filepath.Join(dir, segName(base)[:20]+".index"))
		assert.NoError(t, err, "a rolled segment has its index written")
	}

	// A batch larger than a segment gets a segment of its own.
	big := mustAppend(t, l, sizedBatch(t, 5000, 'B'), 0)
	assert.Equal(t, int64(10), big.BaseOffset)
	mustAppend(t, l, sizedBatch(t, 100, 's'), 0)
	assert.Equal(t, []string{segName(0), segName(4), segName(8), segName(10), segName(11)}, segmentFiles(t, dir))
	got := readAll(t, l)
	require.Len(t, got, 12)
	assert.Len(t, got[10], 5000)
}

func TestSegmentsRollByAge(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	opts := storage.Options{SegmentAge: time.Hour, Now: clk.Now}
	l := openLog(t, dir, opts)
	first := mustAppend(t, l, sizedBatch(t, 100, 'a'), 0)
	assert.Equal(t, clk.Now().UnixMilli(), first.AppendTime, "append time comes from Options.Now")
	clk.Advance(59 * time.Minute)
	mustAppend(t, l, sizedBatch(t, 100, 'b'), 0)
	assert.Equal(t, []string{segName(0)}, segmentFiles(t, dir), "younger than SegmentAge: no roll")
	clk.Advance(time.Minute)
	mustAppend(t, l, sizedBatch(t, 100, 'c'), 0)
	assert.Equal(t, []string{segName(0), segName(2)}, segmentFiles(t, dir), "the first batch is SegmentAge old: roll")
	clk.Advance(30 * time.Minute)
	mustAppend(t, l, sizedBatch(t, 100, 'd'), 0)
	assert.Len(t, segmentFiles(t, dir), 2, "the new segment's age counts from its own first batch")

	// The age survives a reopen: it comes from the batches, not from memory.
	require.NoError(t, l.Close())
	l = openLog(t, dir, opts)
	clk.Advance(30 * time.Minute)
	mustAppend(t, l, sizedBatch(t, 100, 'e'), 0)
	assert.Equal(t, []string{segName(0), segName(2), segName(4)}, segmentFiles(t, dir))
	assert.Len(t, readAll(t, l), 5)
}

// writeRandomLog appends n random batches with nondecreasing epochs and
// returns them as stored.
func writeRandomLog(t testing.TB, l *storage.Log, rng *rand.Rand, n, maxRecords, maxValue int) []record.Batch {
	t.Helper()
	var out []record.Batch
	epoch := l.LastEpoch()
	for range n {
		if epoch < 0 || rng.IntN(8) == 0 {
			epoch++
		}
		b := randomBatch(t, rng, maxRecords, maxValue)
		mustAppend(t, l, b, epoch)
		out = append(out, b)
	}
	return out
}

// checkEveryOffset reads each offset of the log alone and checks that it
// gets the batch holding it, byte for byte.
func checkEveryOffset(t *testing.T, l *storage.Log, want []record.Batch) {
	t.Helper()
	require.NotEmpty(t, want)
	require.Equal(t, want[0].BaseOffset(), l.LogStartOffset())
	require.Equal(t, want[len(want)-1].NextOffset(), l.LogEndOffset())
	for _, b := range want {
		for off := b.BaseOffset(); off < b.NextOffset(); off++ {
			got, err := l.Read(ctxFor(t), off, 1, 1<<62, nil)
			require.NoError(t, err, "offset %d", off)
			if !assertSameBytes(t, b, got, "offset %d", off) {
				return
			}
		}
	}
	assertSameBytes(t, concat(want), concat(readAll(t, l)))
}

func TestSparseIndexAcrossManySegments(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	dir := t.TempDir()
	opts := storage.Options{SegmentBytes: 4096, IndexIntervalBytes: 200}
	l := openLog(t, dir, opts)
	want := writeRandomLog(t, l, rng, 150, 5, 120)
	require.Greater(t, l.SegmentCount(), 5)
	checkEveryOffset(t, l, want)

	// Closed segments keep a sparse index with several entries.
	require.NoError(t, l.Close())
	idx, err := os.ReadFile(filepath.Join(dir, segName(0)[:20]+".index"))
	require.NoError(t, err)
	assert.Greater(t, len(idx)/8, 2, "index entries in the first segment")

	// After a reopen the indexes come from the files.
	l = openLog(t, dir, opts)
	checkEveryOffset(t, l, want)
}

func TestReopenKeepsEverything(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	dir := t.TempDir()
	opts := storage.Options{SegmentBytes: 4096, IndexIntervalBytes: 256}
	l := openLog(t, dir, opts)
	want := writeRandomLog(t, l, rng, 60, 4, 200)
	end, epoch, segs := l.LogEndOffset(), l.LastEpoch(), l.SegmentCount()
	require.NoError(t, l.Close())

	l = openLog(t, dir, opts)
	assert.Equal(t, int64(0), l.LogStartOffset())
	assert.Equal(t, end, l.LogEndOffset())
	assert.Equal(t, end, l.DurableEndOffset())
	assert.Equal(t, epoch, l.LastEpoch())
	assert.Equal(t, segs, l.SegmentCount())
	checkEveryOffset(t, l, want)
	assert.Nil(t, quarantined(t, dir), "a clean reopen cuts nothing")

	_, err := l.Append(ctxFor(t), sizedBatch(t, 100, 'x'), epoch-1)
	assert.ErrorIs(t, err, storage.ErrEpochRegression, "the last epoch survives a reopen")
	res := mustAppend(t, l, sizedBatch(t, 100, 'x'), epoch)
	assert.Equal(t, end, res.BaseOffset)
}

func TestReopenEmptyLog(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, storage.Options{})
	require.NoError(t, l.Close())
	l = openLog(t, dir, storage.Options{})
	assert.Equal(t, int64(0), l.LogEndOffset())
	assert.Equal(t, int32(-1), l.LastEpoch())
	assert.Equal(t, int64(0), mustAppend(t, l, sizedBatch(t, 100, 'a'), 0).BaseOffset)
}

// TestIndexIsACache damages the index files of the closed segments in
// several ways; the log must open and read every offset as before.
func TestIndexIsACache(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	opts := storage.Options{SegmentBytes: 4096, IndexIntervalBytes: 200}
	template := t.TempDir()
	l := openLog(t, template, opts)
	want := writeRandomLog(t, l, rng, 80, 4, 150)
	require.Greater(t, l.SegmentCount(), 3)
	require.NoError(t, l.Close())

	entries := func(b []byte) [][2]uint32 {
		var out [][2]uint32
		for i := 0; i+8 <= len(b); i += 8 {
			out = append(out, [2]uint32{binary.BigEndian.Uint32(b[i:]), binary.BigEndian.Uint32(b[i+4:])})
		}
		return out
	}
	encode := func(es [][2]uint32) []byte {
		b := make([]byte, 8*len(es))
		for i, e := range es {
			binary.BigEndian.PutUint32(b[8*i:], e[0])
			binary.BigEndian.PutUint32(b[8*i+4:], e[1])
		}
		return b
	}
	// m is the batch that the middle index entry of the first segment points
	// at: truncating right after it makes TruncateTo look that entry up.
	idx0, err := os.ReadFile(filepath.Join(template, segName(0)[:20]+".index"))
	require.NoError(t, err)
	mid := entries(idx0)[len(idx0)/8/2]
	m, pos := -1, 0
	for i, b := range want {
		if pos == int(mid[1]) {
			m = i
			break
		}
		pos += len(b)
	}
	require.GreaterOrEqual(t, m, 0)
	require.Equal(t, want[m].BaseOffset(), int64(mid[0]))

	cases := []struct {
		name   string
		damage func(idx []byte) []byte // nil result: delete the file
	}{
		{"deleted", func([]byte) []byte { return nil }},
		{"empty", func([]byte) []byte { return []byte{} }},
		{"odd length", func(b []byte) []byte { return b[:len(b)-3] }},
		{"garbage", func(b []byte) []byte {
			g := make([]byte, len(b))
			for i := range g {
				g[i] = byte(rng.Uint32())
			}
			return g
		}},
		{"last entry points inside a batch", func(b []byte) []byte {
			es := entries(b)
			es[len(es)-1][1]++
			return encode(es)
		}},
		{"last entry offset off by one", func(b []byte) []byte {
			es := entries(b)
			es[len(es)-1][0]++
			return encode(es)
		}},
		{"middle entry points inside a batch", func(b []byte) []byte {
			es := entries(b)
			es[len(es)/2][1]++
			return encode(es)
		}},
		{"middle entry offset too high", func(b []byte) []byte {
			es := entries(b)
			es[len(es)/2][0] = (es[len(es)/2][0] + es[len(es)/2+1][0]) / 2
			if es[len(es)/2][0] == es[len(es)/2-1][0] {
				es[len(es)/2][0]++
			}
			return encode(es)
		}},
		{"entries dropped", func(b []byte) []byte { return b[:8] }},
		{"stale entry past the end", func(b []byte) []byte {
			es := entries(b)
			return encode(append(es, [2]uint32{es[len(es)-1][0] + 1000, 4000}))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, data := range snapshotDir(t, template) {
				require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
			}
			idxFiles, err := filepath.Glob(filepath.Join(dir, "*.index"))
			require.NoError(t, err)
			require.NotEmpty(t, idxFiles)
			for _, p := range idxFiles {
				data, err := os.ReadFile(p)
				require.NoError(t, err)
				require.Greater(t, len(data), 16, "the case needs several index entries")
				if d := tc.damage(data); d == nil {
					require.NoError(t, os.Remove(p))
				} else {
					require.NoError(t, os.WriteFile(p, d, 0o644))
				}
			}
			l, err := storage.Open(dir, storage.Options{SegmentBytes: opts.SegmentBytes, IndexIntervalBytes: opts.IndexIntervalBytes, Logger: testLogger(t)})
			require.NoError(t, err, "a damaged index must not stop the log from opening")
			t.Cleanup(func() { l.Close() })
			checkEveryOffset(t, l, want)

			require.NoError(t, l.TruncateTo(ctxFor(t), want[m+1].BaseOffset()))
			assert.Equal(t, want[m+1].BaseOffset(), l.LogEndOffset())
			assert.Equal(t, want[m].LeaderEpoch(), l.LastEpoch())
			assertSameBytes(t, concat(want[:m+1]), concat(readAll(t, l)))
		})
	}
}

func TestTruncateAcrossSegments(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	dir := t.TempDir()
	opts := storage.Options{SegmentBytes: 4096, IndexIntervalBytes: 256}
	l := openLog(t, dir, opts)
	batches := writeRandomLog(t, l, rng, 70, 3, 200)
	require.Greater(t, l.SegmentCount(), 4)
	filesBefore := segmentFiles(t, dir)

	// Cut at a batch in the second segment, neither its first nor its last.
	second := filesBefore[1]
	var cut int
	for i, b := range batches {
		if segName(b.BaseOffset()) == second {
			cut = i + 2
			break
		}
	}
	require.NotZero(t, cut)
	offset := batches[cut].BaseOffset()
	require.NotEqual(t, segName(offset), filesBefore[1])
	require.NotEqual(t, segName(offset), filesBefore[2])
	oldEnd := l.LogEndOffset()

	require.NoError(t, l.TruncateTo(ctxFor(t), offset))
	assert.Equal(t, offset, l.LogEndOffset())
	assert.Equal(t, offset, l.DurableEndOffset())
	assert.Equal(t, batches[cut-1].LeaderEpoch(), l.LastEpoch())
	assert.Equal(t, filesBefore[:2], segmentFiles(t, dir), "later segments are deleted")
	idx, err := filepath.Glob(filepath.Join(dir, "*.index"))
	require.NoError(t, err)
	assert.Len(t, idx, 1, "only the first segment, still closed, keeps an index")
	assertSameBytes(t, concat(batches[:cut]), concat(readAll(t, l)))
	_, err = l.Read(ctxFor(t), offset+1, 1<<20, 1<<62, nil)
	assert.ErrorIs(t, err, storage.ErrOffsetOutOfRange)

	// The cut bytes are in quarantine, exactly, and decode as the cut batches.
	q := quarantined(t, dir)
	require.Len(t, q, 1)
	for name, data := range q {
		assert.Contains(t, name, segName(offset)[:20])
		assert.Contains(t, name, segName(oldEnd)[:20])
		assertSameBytes(t, concat(batches[cut:]), data, "quarantine holds exactly the cut bytes")
		next := offset
		require.NoError(t, record.Batches(data, func(b record.Batch) bool {
			assert.Equal(t, next, b.BaseOffset())
			next = b.NextOffset()
			return true
		}))
		assert.Equal(t, oldEnd, next)
	}

	// Appends continue at the cut with a new epoch, and it all survives a reopen.
	newEpoch := batches[len(batches)-1].LeaderEpoch() + 1
	first := randomBatch(t, rng, 3, 200)
	mustAppend(t, l, first, newEpoch)
	more := append([]record.Batch{first}, writeRandomLog(t, l, rng, 30, 3, 200)...)
	want := append(append([]record.Batch(nil), batches[:cut]...), more...)
	assert.Equal(t, offset, more[0].BaseOffset())
	assert.Greater(t, l.SegmentCount(), 2, "the truncated segment filled up and rolled again")
	checkEveryOffset(t, l, want)
	require.NoError(t, l.Close())
	l = openLog(t, dir, opts)
	checkEveryOffset(t, l, want)
	assert.Equal(t, more[len(more)-1].LeaderEpoch(), l.LastEpoch())
	assert.Len(t, quarantined(t, dir), 1)
}

func TestTruncateToSegmentBase(t *testing.T) {
	dir := t.TempDir()
	opts := storage.Options{SegmentBytes: 4096}
	l := openLog(t, dir, opts)
	for i := range 10 {
		mustAppend(t, l, sizedBatch(t, 1000, byte(i)), int32(i))
	}
	require.Equal(t, []string{segName(0), segName(4), segName(8)}, segmentFiles(t, dir))
	require.NoError(t, l.TruncateTo(ctxFor(t), 4))
	assert.Equal(t, int64(4), l.LogEndOffset())
	assert.Equal(t, int32(3), l.LastEpoch(), "the epoch of the last batch of the previous segment")
	assert.Len(t, readAll(t, l), 4)
	require.NoError(t, l.Close())

	l = openLog(t, dir, opts)
	assert.Equal(t, int64(4), l.LogEndOffset())
	assert.Equal(t, int32(3), l.LastEpoch())
	res := mustAppend(t, l, sizedBatch(t, 1000, 'n'), 3)
	assert.Equal(t, int64(4), res.BaseOffset)
	assert.Len(t, readAll(t, l), 5)

	require.NoError(t, l.TruncateTo(ctxFor(t), 0))
	assert.Equal(t, int64(0), l.LogEndOffset())
	assert.Equal(t, int32(-1), l.LastEpoch())
	require.NoError(t, l.Close())
	l = openLog(t, dir, opts)
	assert.Equal(t, int64(0), l.LogEndOffset())
	assert.Equal(t, int32(-1), l.LastEpoch())
	assert.Empty(t, readAll(t, l))
}

// TestRetentionBySize: 22 batches of 1000 bytes, four to a segment.
func TestRetentionBySize(t *testing.T) {
	dir := t.TempDir()
	opts := storage.Options{SegmentBytes: 4096, RetentionBytes: 9000}
	l := openLog(t, dir, opts)
	var batches []record.Batch
	for i := range 22 {
		b := sizedBatch(t, 1000, byte(i))
		mustAppend(t, l, b, 0)
		batches = append(batches, b)
	}
	require.Equal(t, 6, l.SegmentCount())

	n, err := l.ApplyRetention(ctxFor(t), noLimit)
	require.NoError(t, err)
	// Keep the newest segments that still hold at least 9000 bytes: 4000+4000+2000.
	assert.Equal(t, 3, n)
	assert.Equal(t, []string{segName(12), segName(16), segName(20)}, segmentFiles(t, dir))
	assert.Equal(t, int64(12), l.LogStartOffset())
	assert.Equal(t, int64(22), l.LogEndOffset())
	assertSameBytes(t, concat(batches[12:]), concat(readAll(t, l)))
	for _, off := range []int64{0, 11} {
		_, err := l.Read(ctxFor(t), off, 1<<20, 1<<62, nil)
		assert.ErrorIs(t, err, storage.ErrOffsetOutOfRange, "offset %d", off)
	}
	assert.ErrorIs(t, l.TruncateTo(ctxFor(t), 11), storage.ErrOffsetOutOfRange, "never below the log start")

	n, err = l.ApplyRetention(ctxFor(t), noLimit)
	require.NoError(t, err)
	assert.Zero(t, n, "retention is idempotent")
	require.NoError(t, l.Close())

	// A reopen keeps the new start; a tiny limit never deletes the active segment.
	opts.RetentionBytes = 1
	l = openLog(t, dir, opts)
	assert.Equal(t, int64(12), l.LogStartOffset())
	n, err = l.ApplyRetention(ctxFor(t), noLimit)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.Equal(t, []string{segName(20)}, segmentFiles(t, dir))
	assert.Equal(t, int64(20), l.LogStartOffset())
	assertSameBytes(t, concat(batches[20:]), concat(readAll(t, l)))
	n, err = l.ApplyRetention(ctxFor(t), noLimit)
	require.NoError(t, err)
	assert.Zero(t, n)
	assert.Equal(t, int64(20), l.LogStartOffset())
	assert.Equal(t, int64(22), mustAppend(t, l, sizedBatch(t, 100, 'z'), 0).BaseOffset)
	require.NoError(t, l.Close())
	l = openLog(t, dir, opts)
	assert.Equal(t, int64(20), l.LogStartOffset())
	assert.Equal(t, int64(23), l.LogEndOffset())
}

func TestRetentionByAge(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	opts := storage.Options{SegmentBytes: 4096, RetentionAge: time.Hour, Now: clk.Now}
	l := openLog(t, dir, opts)
	// Segments of four batches, appended ten minutes apart.
	for i := range 14 {
		mustAppend(t, l, sizedBatch(t, 1000, byte(i)), 0)
		clk.Advance(10 * time.Minute)
	}
	require.Equal(t, []string{segName(0), segName(4), segName(8), segName(12)}, segmentFiles(t, dir))
	// Now is 140 minutes after the first batch. Segment 0's newest batch is
	// 110 minutes old, segment 4's 70, segment 8's 30.
	n, err := l.ApplyRetention(ctxFor(t), noLimit)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.Equal(t, int64(8), l.LogStartOffset())
	assert.Equal(t, []string{segName(8), segName(12)}, segmentFiles(t, dir))

	// Much later everything is old, but the active segment stays.
	clk.Advance(24 * time.Hour)
	n, err = l.ApplyRetention(ctxFor(t), noLimit)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, int64(12), l.LogStartOffset())
	assert.Equal(t, int64(14), l.LogEndOffset())
	assert.Len(t, readAll(t, l), 2)
	_, err = l.Read(ctxFor(t), 11, 1<<20, 1<<62, nil)
	assert.ErrorIs(t, err, storage.ErrOffsetOutOfRange)
	require.NoError(t, l.Close())

	l = openLog(t, dir, opts)
	assert.Equal(t, int64(12), l.LogStartOffset())
	assert.Equal(t, int64(14), l.LogEndOffset())
}

func TestRetentionOffByDefault(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	l := openLog(t, dir, storage.Options{SegmentBytes: 4096, Now: clk.Now})
	for i := range 10 {
		mustAppend(t, l, sizedBatch(t, 1000, byte(i)), 0)
	}
	clk.Advance(10 * 365 * 24 * time.Hour)
	n, err := l.ApplyRetention(ctxFor(t), noLimit)
	require.NoError(t, err)
	assert.Zero(t, n)
	assert.Equal(t, int64(0), l.LogStartOffset())
}

// DeleteBelow deletes every whole segment that ends at or below its
// limit, with no retention policy at all, and never the active segment.
func TestDeleteBelow(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, storage.Options{SegmentBytes: 4096})
	for i := range 14 {
		mustAppend(t, l, sizedBatch(t, 1000, byte(i)), 0)
	}
	require.Equal(t, []string{segName(0), segName(4), segName(8), segName(12)}, segmentFiles(t, dir))
	n, err := l.DeleteBelow(ctxFor(t), 7)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "segment 4 holds offset 7: kept")
	assert.Equal(t, int64(4), l.LogStartOffset())
	n, err = l.DeleteBelow(ctxFor(t), 8)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, int64(8), l.LogStartOffset())
	n, err = l.DeleteBelow(ctxFor(t), noLimit)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "the active segment stays")
	assert.Equal(t, []string{segName(12)}, segmentFiles(t, dir))
	assert.Equal(t, int64(14), l.LogEndOffset())
}

// noLimit is an ApplyRetention limit that keeps nothing from retention.
const noLimit = int64(1) << 62

// TestRetentionNeverPassesTheLimit: retention deletes only segments that
// end at or below the limit (the high watermark), however old or large.
func TestRetentionNeverPassesTheLimit(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, storage.Options{SegmentBytes: 4096, RetentionBytes: 1})
	for i := range 22 {
		mustAppend(t, l, sizedBatch(t, 1000, byte(i)), 0)
	}
	require.Equal(t, []string{segName(0), segName(4), segName(8), segName(12), segName(16), segName(20)}, segmentFiles(t, dir))

	// Offset 7 is in segment 4: only segment 0 ends at or below it.
	n, err := l.ApplyRetention(ctxFor(t), 7)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, int64(4), l.LogStartOffset())
	n, err = l.ApplyRetention(ctxFor(t), 7)
	require.NoError(t, err)
	assert.Zero(t, n, "segment 4 holds offset 7")

	// A limit at a segment's end frees it: segment 4 ends at 8.
	n, err = l.ApplyRetention(ctxFor(t), 8)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, int64(8), l.LogStartOffset())

	n, err = l.ApplyRetention(ctxFor(t), 0)
	require.NoError(t, err)
	assert.Zero(t, n, "nothing below a limit of 0")
	n, err = l.ApplyRetention(ctxFor(t), noLimit)
	require.NoError(t, err)
	assert.Equal(t, 3, n, "without a limit, every segment but the active one")
	assert.Equal(t, []string{segName(20)}, segmentFiles(t, dir))
}

// TestSetPolicy changes segment size and retention on an open log.
func TestSetPolicy(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	l := openLog(t, dir, storage.Options{Now: clk.Now})
	assert.Equal(t, storage.Policy{SegmentBytes: storage.DefaultSegmentBytes, SegmentAge: storage.DefaultSegmentAge}, l.Policy())
	for i := range 8 {
		mustAppend(t, l, sizedBatch(t, 1000, byte(i)), 0)
	}
	require.Equal(t, 1, l.SegmentCount())
	n, err := l.ApplyRetention(ctxFor(t), noLimit)
	require.NoError(t, err)
	assert.Zero(t, n, "retention is off")

	// Smaller segments: the active one, already past the new size, rolls
	// at the next append; later ones roll at 4 KiB.
	require.NoError(t, l.SetPolicy(storage.Policy{SegmentBytes: 4096, RetentionBytes: 5000}))
	assert.Equal(t, storage.Policy{SegmentBytes: 4096, SegmentAge: storage.DefaultSegmentAge, RetentionBytes: 5000}, l.Policy())
	for i := range 9 {
		mustAppend(t, l, sizedBatch(t, 1000, byte(i)), 0)
	}
	require.Equal(t, []string{segName(0), segName(8), segName(12), segName(16)}, segmentFiles(t, dir))
	n, err = l.ApplyRetention(ctxFor(t), noLimit)
	require.NoError(t, err)
	assert.Equal(t, 2, n, "keep the newest segments that hold at least 5000 bytes: 4000+1000")
	assert.Equal(t, int64(12), l.LogStartOffset())

	// Retention by age, then off again.
	require.NoError(t, l.SetPolicy(storage.Policy{SegmentBytes: 4096, RetentionAge: time.Hour}))
	clk.Advance(2 * time.Hour)
	require.NoError(t, l.SetPolicy(storage.Policy{SegmentBytes: 4096}))
	n, err = l.ApplyRetention(ctxFor(t), noLimit)
	require.NoError(t, err)
	assert.Zero(t, n, "retention turned off again")
	require.NoError(t, l.SetPolicy(storage.Policy{SegmentBytes: 4096, RetentionAge: time.Hour}))
	n, err = l.ApplyRetention(ctxFor(t), noLimit)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, int64(16), l.LogStartOffset())

	// A batch larger than the segment size gets a segment of its own.
	big := sizedBatch(t, 10000, 'b')
	assert.Equal(t, int64(17), mustAppend(t, l, big, 0).BaseOffset)
	mustAppend(t, l, sizedBatch(t, 100, 'c'), 0)
	assert.Equal(t, []string{segName(16), segName(17), segName(18)}, segmentFiles(t, dir))

	// Bad policies are refused and change nothing.
	for _, p := range []storage.Policy{{SegmentBytes: 10}, {SegmentBytes: storage.MaxSegmentBytes + 1}, {SegmentBytes: -1}} {
		assert.Error(t, l.SetPolicy(p), "%+v", p)
	}
	assert.Equal(t, int64(4096), l.Policy().SegmentBytes)
	require.NoError(t, l.Close())
}

func TestOpenRejectsBadOptions(t *testing.T) {
	for name, opts := range map[string]storage.Options{
		"segment smaller than a batch header": {SegmentBytes: 10},
		"segment above 1 GiB":                 {SegmentBytes: 2 << 30},
		"batch above 1 GiB":                   {MaxBatchBytes: 2 << 30},
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "log")
			_, err := storage.Open(dir, opts)
			assert.Error(t, err)
			_, statErr := os.Stat(dir)
			assert.True(t, os.IsNotExist(statErr), "nothing is created for bad options")
		})
	}
}

// TestReplicaOfOldBatchesDoesNotRollEveryBatch: a replica that catches up on
// batches the leader appended long ago stores them with the leader's append
// times. Segment age must not make every such batch roll a new segment.
func TestReplicaOfOldBatchesDoesNotRollEveryBatch(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	l := openLog(t, dir, storage.Options{SegmentAge: time.Hour, Now: clk.Now})
	old := clk.Now().Add(-30 * 24 * time.Hour).UnixMilli()
	var next int64
	for i := range 20 {
		b := sizedBatch(t, 100, byte(i))
		b.Stamp(next, 1, old+int64(i)*1000) // a second apart, a month ago
		_, err := l.AppendExact(ctxFor(t), b)
		require.NoError(t, err)
		next = b.NextOffset()
	}
	assert.Equal(t, []string{segName(0)}, segmentFiles(t, dir), "twenty seconds of leader time fit one segment")

	// Two hours of leader time later, the segment rolls.
	b := sizedBatch(t, 100, 'x')
	b.Stamp(next, 1, old+2*3600*1000)
	_, err := l.AppendExact(ctxFor(t), b)
	require.NoError(t, err)
	assert.Equal(t, []string{segName(0), segName(20)}, segmentFiles(t, dir))
}
