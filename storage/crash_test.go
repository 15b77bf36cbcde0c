package storage_test

import (
	"bytes"
	"cmp"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/record"
	"gostream/storage"
)

// sectorSize is the sector of the rule that tells torn writes from
// corruption (see storage.Open).
const sectorSize = 512

// crashOpts are small segments, so that crashes land in logs of one to a
// few segments.
var crashOpts = storage.Options{SegmentBytes: 1024, IndexIntervalBytes: 128}

func copyDir(t testing.TB, from, to string) {
	t.Helper()
	for name, data := range snapshotDir(t, from) {
		p := filepath.Join(to, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, data, 0o644))
	}
}

// TestCrashRecovery writes a log, takes the appends that returned as
// durable, lets a simulated crash damage the unsynced tail of the newest
// segment, and reopens: the log must hold exactly the batches that were
// whole before the damage, quarantine the rest, and take appends after them.
func TestCrashRecovery(t *testing.T) {
	seed := rand.Uint64()
	if crashSeed != 0 {
		seed = crashSeed
	}
	t.Logf("seed %d (set crashSeed to replay)", seed)
	iterations := 200
	if testing.Short() {
		iterations = 40
	}
	// Workers overlap their fsyncs; each has its own stream of the seed.
	const workers = 4
	for w := range workers {
		t.Run(fmt.Sprint("worker", w), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			modes := map[string]int{}
			for it := range iterations / workers {
				mode := crashIteration(t, rng, it)
				modes[mode]++
				if t.Failed() {
					t.Fatalf("iteration %d (mode %s) failed; seed %d", it, mode, seed)
				}
			}
			t.Logf("damage modes: %v", modes)
		})
	}
}

// crashSeed replays a failed run of TestCrashRecovery when set.
var crashSeed uint64

func crashIteration(t *testing.T, rng *rand.Rand, it int) string {
	dir := filepath.Join(t.TempDir(), fmt.Sprint(it))
	opts := crashOpts
	opts.Logger = hclog.NewNullLogger()
	l, err := storage.Open(dir, opts)
	require.NoError(t, err)

	// Appends that returned are durable; then some that, for the crash, are
	// in flight: written but not known to be synced.
	durable := appendConcurrently(t, l, rng, rng.IntN(8), 1+int32(rng.IntN(2)))
	inflight := appendConcurrently(t, l, rng, rng.IntN(4), 2+int32(rng.IntN(2)))
	all := append(append([]record.Batch(nil), durable...), inflight...)

	crashed := dir
	if rng.IntN(2) == 0 {
		// Crash while open: copy the files as they are, without Close's fsync.
		crashed = dir + "-crashed"
		copyDir(t, dir, crashed)
		require.NoError(t, l.Close())
	} else {
		require.NoError(t, l.Close())
	}

	files := segmentFiles(t, crashed)
	require.NotEmpty(t, files)
	newest := filepath.Join(crashed, files[len(files)-1])
	content, err := os.ReadFile(newest)
	require.NoError(t, err)
	var newestBase int64
	_, err = fmt.Sscanf(files[len(files)-1], "%020d.log", &newestBase)
	require.NoError(t, err)

	// Positions of the batches in the newest segment.
	type placed struct {
		i          int // index in all
		start, end int
	}
	var inNewest []placed
	var pos, durablePos int
	for i, b := range all {
		if b.BaseOffset() < newestBase {
			continue
		}
		inNewest = append(inNewest, placed{i, pos, pos + len(b)})
		pos += len(b)
		if i < len(durable) {
			durablePos = pos
		}
	}
	// An open log's newest segment has zeros preallocated after its data.
	require.GreaterOrEqual(t, len(content), pos)
	require.Equal(t, make([]byte, len(content)-pos), content[pos:], "the newest segment holds its batches, then zeros")
	content = content[:pos]

	// Damage the newest segment as a crash can (see Open): its data ends at
	// some length at or above the durable batches; the sectors from some
	// aligned position on, above the durable batches, were never written
	// and read as zeros; and zeros (space allocated, never written) may
	// follow.
	mode := []string{"drop", "zeroes", "torn", "lost-sectors", "torn-sectors"}[rng.IntN(5)]
	last := len(inNewest) - 1
	if strings.HasPrefix(mode, "torn") && (last < 0 || inNewest[last].i < len(durable)) {
		mode = "drop" // no unsynced batch to tear
	}
	firstSector := (durablePos + sectorSize - 1) / sectorSize * sectorSize
	length, zeroFrom := len(content), len(content) // the data's length; zeros from zeroFrom up to it
	switch mode {
	case "drop", "zeroes":
		length = durablePos + rng.IntN(len(content)-durablePos+1)
		zeroFrom = length
	case "torn":
		p := inNewest[last]
		length = p.start + 1 + rng.IntN(p.end-p.start-1)
		zeroFrom = length
	case "lost-sectors":
		if firstSector < len(content) {
			zeroFrom = firstSector + rng.IntN((len(content)-firstSector)/sectorSize+1)*sectorSize
		}
	case "torn-sectors":
		p := inNewest[last]
		from := max(firstSector, (p.start+sectorSize)/sectorSize*sectorSize)
		if from >= p.end {
			mode, length = "torn", p.start+1+rng.IntN(p.end-p.start-1) // no sector boundary inside it
			zeroFrom = length
			break
		}
		zeroFrom = from + rng.IntN((p.end-1-from)/sectorSize+1)*sectorSize
	}
	damaged := append([]byte(nil), content[:length]...)
	clear(damaged[min(zeroFrom, length):])
	// Zeros after the data need the write that the data's end cut short to
	// have lost whole sectors: the data ends at a sector or batch boundary,
	// or zeros start before its end.
	atBoundary := length == durablePos || length%sectorSize == 0 || zeroFrom < length
	for _, p := range inNewest {
		atBoundary = atBoundary || length == p.end
	}
	if mode == "zeroes" || (atBoundary && rng.IntN(2) == 0) {
		if !atBoundary {
			damaged = damaged[:max(length/sectorSize*sectorSize, durablePos)]
		}
		damaged = append(damaged, make([]byte, 1+rng.IntN(2048))...)
	}
	require.NoError(t, os.WriteFile(newest, damaged, 0o644))

	// What must survive: every batch before the newest segment, and the
	// newest segment's batches that were whole before the damage.
	var want []record.Batch
	wholeEnd := 0
	for _, b := range all {
		if b.BaseOffset() < newestBase {
			want = append(want, b)
		}
	}
	for _, p := range inNewest {
		// A cut that drops only trailing zero bytes of a batch, refilled by
		// zeroes, leaves that batch whole: compare bytes, not positions.
		if p.end > len(damaged) || !bytes.Equal(damaged[p.start:p.end], all[p.i]) {
			break
		}
		want = append(want, all[p.i])
		wholeEnd = p.end
	}
	require.GreaterOrEqual(t, len(want), len(durable), "the damage model never reaches durable bytes")

	opts.Logger = testLogger(t)
	if len(durable) > 0 {
		opts.DurableFloor = durable[len(durable)-1].NextOffset() // acknowledged
	}
	r, err := storage.Open(crashed, opts)
	require.NoError(t, err, "mode %s: a crash-damaged tail is recovered, not an error", mode)
	defer r.Close()

	wantEnd, wantEpoch := int64(0), int32(-1)
	if len(want) > 0 {
		wantEnd, wantEpoch = want[len(want)-1].NextOffset(), want[len(want)-1].LeaderEpoch()
	}
	assert.Equal(t, wantEnd, r.LogEndOffset(), "mode %s", mode)
	assert.Equal(t, wantEnd, r.DurableEndOffset(), "mode %s", mode)
	assert.Equal(t, wantEpoch, r.LastEpoch(), "mode %s", mode)
	assertSameBytes(t, concat(want), concat(readAll(t, r)), "mode %s: exactly the whole batches, byte for byte", mode)
	for i, b := range durable {
		buf, err := r.Read(ctxFor(t), b.BaseOffset(), 1, 1<<62, nil)
		require.NoError(t, err)
		assertSameBytes(t, b, buf, "mode %s: durable batch %d", mode, i)
	}
	// Zeros after the whole batches are free space, left as they are; a
	// tail with anything else in it is torn: cut and quarantined, zeros and
	// all.
	fi, err := os.Stat(newest)
	require.NoError(t, err)
	q := quarantined(t, crashed)
	if len(bytes.TrimRight(damaged[wholeEnd:], "\x00")) > 0 {
		assert.Equal(t, int64(wholeEnd), fi.Size(), "mode %s: the torn tail is cut off", mode)
		require.Len(t, q, 1, "mode %s: the cut bytes are quarantined", mode)
		for name, data := range q {
			assert.True(t, strings.HasPrefix(name, "torn-"), name)
			assertSameBytes(t, damaged[wholeEnd:], data, "mode %s: quarantine holds exactly the cut bytes", mode)
		}
	} else {
		assert.Equal(t, int64(len(damaged)), fi.Size(), "mode %s: a zero tail is free space, left as it is", mode)
		assert.Empty(t, q, "mode %s: nothing was cut", mode)
	}

	// Appends continue right after the recovered end, and a second reopen
	// finds nothing more to cut.
	epoch := max(wantEpoch, 0)
	res, err := r.Append(ctxFor(t), sizedBatch(t, 60, 'n'), epoch)
	require.NoError(t, err)
	assert.Equal(t, wantEnd, res.BaseOffset, "mode %s", mode)
	require.NoError(t, r.Close())
	again, err := storage.Open(crashed, opts)
	require.NoError(t, err)
	defer again.Close()
	assert.Equal(t, wantEnd+1, again.LogEndOffset())
	assert.Len(t, quarantined(t, crashed), len(q), "a clean reopen quarantines nothing new")
	return mode
}

// appendConcurrently appends n random batches at epoch, all at once so that
// they share fsyncs, and returns them as stored, in log order.
func appendConcurrently(t *testing.T, l *storage.Log, rng *rand.Rand, n int, epoch int32) []record.Batch {
	t.Helper()
	batches := make([]record.Batch, n)
	for i := range batches {
		batches[i] = randomBatch(t, rng, 3, 150)
	}
	for i, err := range appendAll(ctxFor(t), l, batches, epoch) {
		require.NoError(t, err, "append %d", i)
	}
	slices.SortFunc(batches, func(a, b record.Batch) int { return cmp.Compare(a.BaseOffset(), b.BaseOffset()) })
	return batches
}

// assertCorruptUntouched opens dir after damage and checks that Open reports
// corruption and leaves every file as it was.
func assertCorruptUntouched(t *testing.T, dir string, opts storage.Options) {
	t.Helper()
	before := snapshotDir(t, dir)
	opts.Logger = testLogger(t)
	l, err := storage.Open(dir, opts)
	if err == nil {
		l.Close()
	}
	require.ErrorIs(t, err, storage.ErrCorrupt)
	t.Logf("open: %v", err)
	assert.Equal(t, before, snapshotDir(t, dir), "files are left exactly as they were")
	_, statErr := os.Stat(filepath.Join(dir, storage.QuarantineDir))
	assert.True(t, os.IsNotExist(statErr), "corruption is not quarantined or repaired")
}

// writeOneSegment writes n batches into a single segment and closes the log.
func writeOneSegment(t *testing.T, dir string, n int) []record.Batch {
	t.Helper()
	rng := rand.New(rand.NewPCG(11, 12))
	l := openLog(t, dir, storage.Options{})
	batches := writeRandomLog(t, l, rng, n, 3, 100)
	require.Equal(t, 1, l.SegmentCount())
	require.NoError(t, l.Close())
	return batches
}

func TestCorruptBatchFollowedByValidData(t *testing.T) {
	template := t.TempDir()
	batches := writeOneSegment(t, template, 9)
	victim := 4
	start := len(concat(batches[:victim]))
	size := len(batches[victim])
	offsets := map[string]int{
		"base offset":  7,
		"length high":  8,
		"length low":   11,
		"crc":          13,
		"epoch":        19,
		"magic":        20,
		"attributes":   21,
		"append time":  29,
		"record count": 33,
		"first record": record.HeaderSize + 1,
		"middle":       size / 2,
		"last byte":    size - 1,
	}
	for name, off := range offsets {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			copyDir(t, template, dir)
			path := filepath.Join(dir, segName(0))
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			data[start+off] ^= 0x5a
			require.NoError(t, os.WriteFile(path, data, 0o644))
			assertCorruptUntouched(t, dir, storage.Options{})
		})
	}
}

// craftSegment writes the given batches, stamped as given, as segment base.
func craftSegment(t *testing.T, dir string, base int64, stamps [][2]int64) {
	t.Helper()
	var data []byte
	for i, s := range stamps {
		b := sizedBatch(t, 80, byte(i))
		b.Stamp(s[0], int32(s[1]), 1_700_000_000_000)
		data = append(data, b...)
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, segName(base)), data, 0o644))
}

func TestCraftedSegments(t *testing.T) {
	// Each stamp is {base offset, epoch}; batches hold one record.
	cases := []struct {
		name    string
		base    int64
		stamps  [][2]int64
		corrupt bool
	}{
		{"contiguous", 0, [][2]int64{{0, 0}, {1, 0}, {2, 1}}, false},
		{"gap after the first batch", 0, [][2]int64{{0, 0}, {5, 0}, {6, 0}}, true},
		{"gap in the last batch", 0, [][2]int64{{0, 0}, {1, 0}, {7, 0}}, true},
		{"overlap", 0, [][2]int64{{0, 0}, {1, 0}, {1, 0}}, true},
		{"offsets going back", 0, [][2]int64{{0, 0}, {1, 0}, {0, 0}}, true},
		{"epoch going back", 0, [][2]int64{{0, 3}, {1, 2}}, true},
		{"epoch going back in the last batch", 0, [][2]int64{{0, 3}, {1, 3}, {2, 1}}, true},
		{"first batch does not match the file name", 10, [][2]int64{{11, 0}, {12, 0}}, true},
		{"starts at its name", 10, [][2]int64{{10, 0}, {11, 0}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			craftSegment(t, dir, tc.base, tc.stamps)
			if tc.corrupt {
				assertCorruptUntouched(t, dir, storage.Options{})
				return
			}
			l := openLog(t, dir, storage.Options{})
			assert.Equal(t, tc.base, l.LogStartOffset())
			assert.Equal(t, tc.stamps[len(tc.stamps)-1][0]+1, l.LogEndOffset())
			assert.Equal(t, int32(tc.stamps[len(tc.stamps)-1][1]), l.LastEpoch())
			assert.Len(t, readAll(t, l), len(tc.stamps))
		})
	}
}

// multiSegmentTemplate writes a log of several segments, closes it and
// returns its directory and batches.
func multiSegmentTemplate(t *testing.T) (string, []record.Batch) {
	t.Helper()
	dir := t.TempDir()
	l := openLog(t, dir, storage.Options{SegmentBytes: 4096})
	batches := appendSized(t, l, 14, 1000, 0)
	require.Equal(t, []string{segName(0), segName(4), segName(8), segName(12)}, segmentFiles(t, dir))
	require.NoError(t, l.Close())
	return dir, batches
}

func TestDamagedOlderSegment(t *testing.T) {
	template, _ := multiSegmentTemplate(t)
	cases := []struct {
		name   string
		damage func(t *testing.T, dir string)
	}{
		{"byte flipped in the middle", func(t *testing.T, dir string) {
			flip(t, filepath.Join(dir, segName(4)), 1500)
		}},
		{"byte flipped in the last batch", func(t *testing.T, dir string) {
			flip(t, filepath.Join(dir, segName(4)), 3990)
		}},
		{"byte flipped with the index gone", func(t *testing.T, dir string) {
			flip(t, filepath.Join(dir, segName(0)), 2500)
			require.NoError(t, os.Remove(filepath.Join(dir, segName(0)[:20]+".index")))
		}},
		{"cut inside its last batch", func(t *testing.T, dir string) {
			require.NoError(t, os.Truncate(filepath.Join(dir, segName(4)), 3500))
		}},
		{"cut at a batch boundary", func(t *testing.T, dir string) {
			require.NoError(t, os.Truncate(filepath.Join(dir, segName(4)), 3000))
		}},
		{"junk appended", func(t *testing.T, dir string) {
			f, err := os.OpenFile(filepath.Join(dir, segName(8)), os.O_APPEND|os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.Write([]byte("junk after a closed segment"))
			require.NoError(t, err)
			require.NoError(t, f.Close())
		}},
		{"zeroes appended", func(t *testing.T, dir string) {
			require.NoError(t, os.Truncate(filepath.Join(dir, segName(0)), 4500))
		}},
		{"emptied", func(t *testing.T, dir string) {
			require.NoError(t, os.Truncate(filepath.Join(dir, segName(4)), 0))
		}},
		{"segment missing in the middle", func(t *testing.T, dir string) {
			require.NoError(t, os.Remove(filepath.Join(dir, segName(4))))
			require.NoError(t, os.Remove(filepath.Join(dir, segName(4)[:20]+".index")))
		}},
		{"stray segment between", func(t *testing.T, dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, segName(6)), nil, 0o644))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			copyDir(t, template, dir)
			tc.damage(t, dir)
			assertCorruptUntouched(t, dir, storage.Options{SegmentBytes: 4096})
		})
	}
}

// TestCorruptOlderSegmentWithTornNewest: corruption found in an older
// segment stops Open before the torn tail of the newest one is touched.
func TestCorruptOlderSegmentWithTornNewest(t *testing.T) {
	dir, _ := multiSegmentTemplate(t)
	flip(t, filepath.Join(dir, segName(4)), 1500)
	newest := filepath.Join(dir, segName(12))
	fi, err := os.Stat(newest)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(newest, fi.Size()-10))
	assertCorruptUntouched(t, dir, storage.Options{SegmentBytes: 4096})
}

func flip(t *testing.T, path string, pos int) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Less(t, pos, len(data))
	data[pos] ^= 0x24
	require.NoError(t, os.WriteFile(path, data, 0o644))
}

// assertSameBytes compares byte slices without printing them whole.
func assertSameBytes(t *testing.T, want, got []byte, msgAndArgs ...any) bool {
	t.Helper()
	if bytes.Equal(want, got) {
		return true
	}
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	return assert.Fail(t, fmt.Sprintf("bytes differ: want %d bytes, got %d, first difference at %d", len(want), len(got), i), msgAndArgs...)
}
