package testcluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/record"
	"gostream/storage"
)

// diskFaultSeeds is how many seeds TestDamageReplicaRecovers runs (a
// quarter in -short). A failure names its seed in the subtest's name:
// replay it with -run 'TestDamageReplicaRecovers/seed/<n>$'.
const diskFaultSeeds = 200

// logWriter sends log lines to t.Log, so they show only when a test fails.
type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func diskFaultLogOpts(t testing.TB, segmentBytes int64) storage.Options {
	return storage.Options{
		SegmentBytes:       segmentBytes,
		IndexIntervalBytes: 128,
		Logger:             hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Debug, Output: logWriter{t}}),
	}
}

// writeDiskFaultLog appends the given batches to a new log in dir, under
// non-decreasing epochs, closes it, and returns the batches as stamped.
func writeDiskFaultLog(t *testing.T, dir string, opts storage.Options, batches [][]record.Record, rng *rand.Rand) []record.Batch {
	t.Helper()
	l, err := storage.Open(dir, opts)
	require.NoError(t, err)
	var out []record.Batch
	epoch := int32(0)
	for _, recs := range batches {
		b, err := record.AppendBatch(nil, recs)
		require.NoError(t, err)
		if rng != nil && rng.Intn(5) == 0 {
			epoch++
		}
		// Write stamps the batch in place; Close makes it durable.
		_, _, err = l.Write(b, epoch)
		require.NoError(t, err)
		out = append(out, b)
	}
	require.NoError(t, l.Close())
	return out
}

func randomRecords(rng *rand.Rand) []record.Record {
	recs := make([]record.Record, 1+rng.Intn(4))
	for i := range recs {
		if rng.Intn(2) == 0 {
			recs[i].Key = []byte(fmt.Sprint("k", rng.Intn(100)))
		}
		recs[i].Value = make([]byte, rng.Intn(121))
		rng.Read(recs[i].Value)
	}
	return recs
}

// placedBatch is a batch and where it lies in its segment file.
type placedBatch struct {
	b          record.Batch
	seg        int64 // base offset of its segment
	start, end int64
}

// placeBatches finds each batch in the segment files of dir and checks that
// the files hold exactly the batches, in order.
func placeBatches(t *testing.T, dir string, batches []record.Batch) ([]placedBatch, []int64) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.log"))
	require.NoError(t, err)
	sort.Strings(files)
	require.NotEmpty(t, files)
	var bases []int64
	for _, f := range files {
		var base int64
		_, err := fmt.Sscanf(filepath.Base(f), "%020d.log", &base)
		require.NoError(t, err)
		bases = append(bases, base)
	}
	var placed []placedBatch
	seg, pos := 0, int64(0)
	for _, b := range batches {
		for seg+1 < len(bases) && b.BaseOffset() >= bases[seg+1] {
			seg, pos = seg+1, 0
		}
		placed = append(placed, placedBatch{b: b, seg: bases[seg], start: pos, end: pos + int64(len(b))})
		pos += int64(len(b))
	}
	for i, base := range bases {
		data, err := os.ReadFile(files[i])
		require.NoError(t, err)
		var want []byte
		for _, p := range placed {
			if p.seg == base {
				want = append(want, p.b...)
			}
		}
		require.True(t, bytes.Equal(want, data), "segment %d holds exactly its batches", base)
	}
	return placed, bases
}

// expectedBound is the lowest position in the newest segment a cut may go
// to for keep, worked out from the batches as written.
func expectedBound(placed []placedBatch, newest, keep int64) int64 {
	var bound int64
	for _, p := range placed {
		if p.seg == newest && p.b.BaseOffset() < keep {
			bound = p.end
		}
	}
	return bound
}

// writeStaleIndex writes an index for the newest segment, as a crash
// between persisting the index of a rolling segment and creating the next
// one leaves it, with an entry for every batch: after a cut it points past
// the end of the file. The format is storage's (segment.go): big-endian
// u32 relative offset, u32 position.
func writeStaleIndex(t *testing.T, dir string, placed []placedBatch, newest int64) {
	t.Helper()
	var buf []byte
	for _, p := range placed {
		if p.seg == newest {
			buf = binary.BigEndian.AppendUint32(buf, uint32(p.b.BaseOffset()-newest))
			buf = binary.BigEndian.AppendUint32(buf, uint32(p.start))
		}
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("%020d.index", newest)), buf, 0o644))
}

// readLog reads every batch of l, from its start, back to back.
func readLog(t *testing.T, l *storage.Log) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var all []byte
	for off := l.LogStartOffset(); ; {
		buf, err := l.Read(ctx, off, 1<<20, 1<<62, nil)
		require.NoError(t, err, "read at %d", off)
		if len(buf) == 0 {
			return all
		}
		require.NoError(t, record.Batches(buf, func(b record.Batch) bool {
			all = append(all, b...)
			off = b.NextOffset()
			return true
		}))
	}
}

// dirFiles returns the content of every regular file under dir.
func dirFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	require.NoError(t, filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		files[rel] = data
		return err
	}))
	return files
}

// coverage counts the cases the random test met, so that it can insist
// on meeting each.
type coverage struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *coverage) add(cases ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range cases {
		c.n[k]++
	}
}

// TestDamageReplicaRecovers writes logs of several small segments, damages
// the newest segment with a random fault and keep, and reopens them with
// the storage engine: the damage stays above the durable bound, leaves
// every other file as it was, and recovery must cut the damaged tail and
// keep every record below keep, byte for byte.
func TestDamageReplicaRecovers(t *testing.T) {
	seeds := int64(diskFaultSeeds)
	if testing.Short() {
		seeds = 50
	}
	cov := &coverage{n: map[string]int{}}
	t.Run("seed", func(t *testing.T) {
		for seed := int64(1); seed <= seeds; seed++ {
			t.Run(fmt.Sprint(seed), func(t *testing.T) {
				t.Parallel()
				damageAndRecover(t, seed, cov)
			})
		}
	})
	t.Logf("cases: %v", cov.n)
	if testing.Short() {
		return // too few seeds to meet every case
	}
	for _, k := range []string{
		"lose-unsynced", "lose-unsynced/appended", "lose-unsynced/not-appended", "lose-unsynced/zeroed-sectors",
		"lose-unsynced/on-boundary", "lose-unsynced/mid-batch", "lose-unsynced/no-cut",
		"torn-tail", "torn-tail/cut", "torn-tail/zeroed", "torn-tail/skipped", "keep-0", "keep-in-older-segment", "keep-all",
		"keep-past-end", "keep-mid-newest", "cut-to-0-with-older-segments", "empty-log", "stale-index", "several-segments",
		"torn-before-damage",
	} {
		assert.Positive(t, cov.n[k], "no seed met case %s", k)
	}
}

func damageAndRecover(t *testing.T, seed int64, cov *coverage) {
	rng := rand.New(rand.NewSource(seed))
	dir := t.TempDir()
	opts := diskFaultLogOpts(t, 256+rng.Int63n(1024))
	var recs [][]record.Record
	if rng.Intn(25) != 0 {
		for range 1 + rng.Intn(40) {
			recs = append(recs, randomRecords(rng))
		}
	} else {
		cov.add("empty-log")
	}
	batches := writeDiskFaultLog(t, dir, opts, recs, rng)
	placed, bases := placeBatches(t, dir, batches)
	newest := bases[len(bases)-1]
	if len(bases) > 1 {
		cov.add("several-segments")
	}
	end := newest
	if len(batches) > 0 {
		end = batches[len(batches)-1].NextOffset()
	}

	var keep int64
	switch rng.Intn(8) {
	case 0:
		keep = 0
	case 1:
		keep = KeepAll
	case 2:
		keep = end
	case 3:
		keep = end + 1 + rng.Int63n(5)
	case 4, 5:
		keep = newest + rng.Int63n(end-newest+1)
	default:
		keep = rng.Int63n(end + 1)
	}
	switch {
	case keep == 0:
		cov.add("keep-0")
	case keep == KeepAll:
		cov.add("keep-all")
	case keep > end:
		cov.add("keep-past-end")
	case keep > 0 && keep <= newest:
		cov.add("keep-in-older-segment")
	case keep > newest && keep < end:
		cov.add("keep-mid-newest")
	}
	var inNewest []placedBatch
	for _, p := range placed {
		if p.seg == newest {
			inNewest = append(inNewest, p)
		}
	}
	if len(inNewest) > 1 && rng.Intn(4) == 0 {
		writeStaleIndex(t, dir, placed, newest)
		cov.add("stale-index")
	}
	bound := expectedBound(placed, newest, keep)
	segName := fmt.Sprintf("%020d.log", newest)
	if rng.Intn(6) == 0 {
		// kill -9 in the middle of a write: a batch the node never
		// acknowledged lies partly written after the last whole one.
		b, err := record.AppendBatch(nil, randomRecords(rng))
		require.NoError(t, err)
		record.Batch(b).Stamp(end, 100, 0)
		f, err := os.OpenFile(filepath.Join(dir, segName), os.O_WRONLY|os.O_APPEND, 0)
		require.NoError(t, err)
		_, err = f.Write(b[:1+rng.Intn(len(b)-1)])
		require.NoError(t, err)
		require.NoError(t, f.Close())
		cov.add("torn-before-damage")
	}
	before := dirFiles(t, dir)
	old := before[segName]

	fault := DiskFault(rng.Intn(2))
	d, err := DamageReplica(dir, keep, fault, rng)
	require.NoError(t, err)
	t.Logf("seed %d: %s", seed, d)
	assert.Equal(t, dir, d.Dir)
	assert.Equal(t, segName, d.Segment)
	assert.Equal(t, fault, d.Kind)
	assert.Equal(t, keep, d.Keep)
	assert.Equal(t, int64(len(old)), d.OldSize)

	after := dirFiles(t, dir)
	damaged := after[segName]
	for name, data := range before {
		if name != segName {
			assert.True(t, bytes.Equal(data, after[name]), "%s is not touched", name)
		}
	}
	assert.Len(t, after, len(before), "no file is created or removed")

	switch {
	case d.Skipped != "":
		cov.add(fault.String() + "/skipped")
		require.Equal(t, TornTail, fault, "only a torn tail is ever skipped")
		assert.True(t, bytes.Equal(old, damaged), "a skipped replica is not touched")
		assert.Equal(t, d.OldSize, d.CutTo)
		assert.Equal(t, d.CutTo, d.ZeroFrom)
		assert.Zero(t, d.Appended)
		if len(inNewest) > 0 {
			assert.Less(t, inNewest[len(inNewest)-1].start, bound, "skipped only when the last batch holds kept records")
		}
	default:
		cov.add(fault.String())
		assert.GreaterOrEqual(t, d.CutTo, bound, "the cut never goes below the durable bound")
		assert.LessOrEqual(t, d.CutTo, d.OldSize)
		require.Len(t, damaged, int(d.CutTo+d.Appended))
		require.LessOrEqual(t, d.ZeroFrom, d.CutTo)
		assert.True(t, bytes.Equal(old[:d.ZeroFrom], damaged[:d.ZeroFrom]), "the bytes before the damage are unchanged")
		assert.True(t, bytes.Equal(make([]byte, int(d.CutTo-d.ZeroFrom+d.Appended)), damaged[d.ZeroFrom:]),
			"nothing but zeros is written: a crash leaves bytes missing, never different")
		if d.ZeroFrom < d.CutTo {
			assert.Zero(t, d.ZeroFrom%512, "whole sectors are zeroed")
			assert.GreaterOrEqual(t, d.ZeroFrom, bound, "no durable byte is zeroed")
		}
		onBoundary := d.CutTo == 0 || d.CutTo == bound
		for _, p := range inNewest {
			onBoundary = onBoundary || d.CutTo == p.end
		}
		if d.Appended > 0 {
			assert.True(t, onBoundary || d.CutTo%512 == 0 || d.ZeroFrom < d.CutTo,
				"zeros appended after a cut at %d, inside a sector and a batch, with nothing zeroed before it", d.CutTo)
		}
		switch fault {
		case LoseUnsynced:
			assert.LessOrEqual(t, d.Appended, int64(8<<10))
			cov.add(map[bool]string{true: "lose-unsynced/appended", false: "lose-unsynced/not-appended"}[d.Appended > 0])
			if d.ZeroFrom < d.CutTo {
				cov.add("lose-unsynced/zeroed-sectors")
			}
			cov.add(map[bool]string{true: "lose-unsynced/on-boundary", false: "lose-unsynced/mid-batch"}[onBoundary])
			if d.CutTo == d.OldSize {
				cov.add("lose-unsynced/no-cut")
			}
			if d.CutTo == 0 && len(bases) > 1 {
				cov.add("cut-to-0-with-older-segments")
			}
		case TornTail:
			require.NotEmpty(t, inNewest)
			last := inNewest[len(inNewest)-1]
			assert.Zero(t, d.Appended)
			assert.GreaterOrEqual(t, last.start, bound)
			if d.ZeroFrom < d.CutTo {
				cov.add("torn-tail/zeroed")
				assert.Equal(t, d.OldSize, d.CutTo, "zeroed, not cut")
				assert.True(t, d.ZeroFrom > last.start && d.ZeroFrom < last.end, "zeroed from %d, inside the last batch [%d, %d)", d.ZeroFrom, last.start, last.end)
				break
			}
			cov.add("torn-tail/cut")
			assert.Less(t, d.CutTo, d.OldSize, "a torn tail shortens the file")
			assert.True(t, d.CutTo > last.start && d.CutTo < last.end, "cut at %d inside the last batch [%d, %d)", d.CutTo, last.start, last.end)
		}
	}

	// What recovery must leave: every batch of the older segments, and the
	// batches of the newest that are still whole. Compare bytes, not
	// positions: zeroes (or junk that happens to match) can refill the end
	// of a batch cut short.
	var want []byte
	wantEnd, wantSize := newest, int64(0)
	for _, p := range placed {
		if p.seg != newest {
			want = append(want, p.b...)
			wantEnd = p.b.NextOffset()
			continue
		}
		if p.end > int64(len(damaged)) || !bytes.Equal(damaged[p.start:p.end], p.b) {
			break
		}
		want = append(want, p.b...)
		wantEnd, wantSize = p.b.NextOffset(), p.end
	}

	l, err := storage.Open(dir, opts)
	require.NoError(t, err, "seed %d: %s: recovery must cut a crash-damaged tail, not refuse the log", seed, d)
	assert.Equal(t, wantEnd, l.LogEndOffset())
	assert.GreaterOrEqual(t, l.LogEndOffset(), min(keep, end), "every record below keep survives")
	got := readLog(t, l)
	assert.True(t, bytes.Equal(want, got), "the log reads back exactly the whole batches (%d bytes, want %d)", len(got), len(want))
	for _, p := range placed {
		if p.b.BaseOffset() < keep {
			assert.True(t, bytes.Contains(got, p.b), "kept batch at offset %d reads back identical", p.b.BaseOffset())
		}
	}
	fi, err := os.Stat(filepath.Join(dir, segName))
	require.NoError(t, err)
	q, err := filepath.Glob(filepath.Join(dir, storage.QuarantineDir, "torn-*"))
	require.NoError(t, err)
	if onlyZeroBytes(damaged[min(wantSize, int64(len(damaged))):]) {
		// Zeros after the last whole batch are the space storage
		// preallocates ahead of its data: kept as they are, not a tear.
		assert.Equal(t, int64(len(damaged)), fi.Size(), "zeros after the data are free space, left in place")
		assert.Empty(t, q)
	} else if int64(len(damaged)) > wantSize {
		assert.Equal(t, wantSize, fi.Size(), "the damaged tail is cut off")
		require.Len(t, q, 1, "the cut bytes are quarantined")
		data, err := os.ReadFile(q[0])
		require.NoError(t, err)
		assert.True(t, bytes.Equal(damaged[wantSize:], data), "quarantine holds exactly the cut bytes")
	} else {
		assert.Empty(t, q)
	}

	// The recovered log takes appends after what it kept, and opens again.
	more, err := record.AppendBatch(nil, randomRecords(rng))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := l.Append(ctx, more, max(l.LastEpoch(), 0))
	require.NoError(t, err)
	assert.Equal(t, wantEnd, res.BaseOffset)
	require.NoError(t, l.Close())
	l, err = storage.Open(dir, opts)
	require.NoError(t, err, "seed %d: reopen after an append to the recovered log", seed)
	assert.Equal(t, res.NextOffset, l.LogEndOffset())
	assert.True(t, bytes.Equal(append(want, more...), readLog(t, l)))
	require.NoError(t, l.Close())
}

// TestDamageReplicaKeepToPosition checks how keep maps to the lowest cut
// position in the newest segment, on a log of three segments of batches of
// two records, each batch size bytes: [0, 6) [6, 12) [12, 16).
func TestDamageReplicaKeepToPosition(t *testing.T) {
	twoRecords := []record.Record{{Value: []byte("aaaa")}, {Value: []byte("bbbb")}}
	one, err := record.AppendBatch(nil, twoRecords)
	require.NoError(t, err)
	size := int64(len(one))

	dir := t.TempDir()
	batches := make([][]record.Record, 8)
	for i := range batches {
		batches[i] = twoRecords
	}
	written := writeDiskFaultLog(t, dir, diskFaultLogOpts(t, 3*size), batches, nil)
	_, bases := placeBatches(t, dir, written)
	require.Equal(t, []int64{0, 6, 12}, bases)

	single := t.TempDir()
	writeDiskFaultLog(t, single, diskFaultLogOpts(t, 0), batches[:2], nil)

	for _, tc := range []struct {
		name  string
		dir   string
		keep  int64
		bound int64
	}{
		{"keep 0, several segments", dir, 0, 0},
		{"keep 0, one segment", single, 0, 0},
		{"keep 1, one segment", single, 1, size},
		{"keep-1 in the oldest segment", dir, 5, 0},
		{"keep-1 the last offset of the previous segment", dir, 12, 0},
		{"keep-1 the first offset of the newest segment", dir, 13, size},
		{"keep at a batch boundary", dir, 14, size},
		{"keep-1 in the last batch", dir, 15, 2 * size},
		{"keep at the log end", dir, 16, 2 * size},
		{"keep past the log end", dir, 100, 2 * size},
		{"keep all", dir, KeepAll, 2 * size},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, err := newestSegment(tc.dir)
			require.NoError(t, err)
			seg, err := scanSegment(filepath.Join(tc.dir, fmt.Sprintf("%020d.log", base)))
			require.NoError(t, err)
			assert.Equal(t, tc.bound, seg.bound(tc.keep))

			// Through the API: a torn tail happens exactly when the last
			// batch starts at or above the bound.
			path := filepath.Join(tc.dir, fmt.Sprintf("%020d.log", base))
			orig, err := os.ReadFile(path)
			require.NoError(t, err)
			lastStart := seg.batches[len(seg.batches)-1].start
			for s := range int64(20) {
				d, err := DamageReplica(tc.dir, tc.keep, TornTail, rand.New(rand.NewSource(s)))
				require.NoError(t, err)
				if lastStart < tc.bound {
					assert.NotEmpty(t, d.Skipped)
					assert.Contains(t, d.String(), "skipped")
					continue
				}
				assert.Empty(t, d.Skipped)
				damage := min(d.CutTo, d.ZeroFrom) // the first byte cut or zeroed
				assert.True(t, damage > lastStart && damage < d.OldSize)
				assert.GreaterOrEqual(t, damage, tc.bound)
				require.NoError(t, os.WriteFile(path, orig, 0o644))
			}
		})
	}
}

func TestDamageReplicaErrors(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	dir := t.TempDir()
	_, err := DamageReplica(dir, 0, LoseUnsynced, rng)
	assert.ErrorContains(t, err, "no segment file")

	writeDiskFaultLog(t, dir, diskFaultLogOpts(t, 0), [][]record.Record{{{Value: []byte("v")}}}, nil)
	before := dirFiles(t, dir)
	_, err = DamageReplica(dir, -1, LoseUnsynced, rng)
	assert.ErrorContains(t, err, "negative keep")
	_, err = DamageReplica(dir, 0, DiskFault(7), rng)
	assert.ErrorContains(t, err, "unknown disk fault")
	assert.Equal(t, before, dirFiles(t, dir), "nothing is touched on an error")
}

func TestDamageNode(t *testing.T) {
	const topic = "t"
	n := &Node{ID: 4, DataDir: t.TempDir()}
	rng := rand.New(rand.NewSource(1))
	ends := map[int32]int64{}
	for p := range int32(3) {
		var recs [][]record.Record
		for range 10 {
			recs = append(recs, randomRecords(rng))
		}
		b := writeDiskFaultLog(t, n.ReplicaDir(topic, p), diskFaultLogOpts(t, 512), recs, rng)
		ends[p] = b[len(b)-1].NextOffset()
	}
	for _, name := range []string{"partition-01", "partition-x", "partition--1"} {
		// Not names ReplicaDir gives: left alone.
		writeDiskFaultLog(t, filepath.Join(filepath.Dir(n.ReplicaDir(topic, 0)), name), diskFaultLogOpts(t, 512), [][]record.Record{{{Value: []byte("v")}}}, nil)
	}
	other := n.ReplicaDir("other", 0)
	writeDiskFaultLog(t, other, diskFaultLogOpts(t, 512), [][]record.Record{{{Value: []byte("v")}}}, nil)
	otherBefore := dirFiles(t, other)

	t.Run("refuses a running node", func(t *testing.T) {
		// A process that has not exited, as Start leaves it.
		n.mu.cmd, n.mu.done = &exec.Cmd{}, make(chan struct{})
		defer func() { n.mu.cmd, n.mu.done = nil, nil }()
		require.True(t, n.Running())
		before := dirFiles(t, n.DataDir)
		_, err := DamageNode(n, topic, nil, LoseUnsynced, rng)
		require.ErrorIs(t, err, ErrNodeRunning)
		assert.Equal(t, before, dirFiles(t, n.DataDir))

		close(n.mu.done) // the process exited: kill -9 has returned
		require.False(t, n.Running())
		dd, err := DamageNode(n, "missing", nil, TornTail, rng)
		require.NoError(t, err)
		assert.Empty(t, dd, "a node without a replica of the topic gets no damage")
	})

	t.Run("torn tail skips partitions without keep", func(t *testing.T) {
		dd, err := DamageNode(n, topic, map[int32]int64{0: 0, 2: ends[2]}, TornTail, rng)
		require.NoError(t, err)
		require.Len(t, dd, 3)
		for i, d := range dd {
			t.Log(d)
			assert.Equal(t, n.ReplicaDir(topic, int32(i)), d.Dir)
		}
		assert.Empty(t, dd[0].Skipped)
		assert.Less(t, dd[0].CutTo, dd[0].OldSize)
		assert.Equal(t, KeepAll, dd[1].Keep)
		assert.NotEmpty(t, dd[1].Skipped, "a partition missing from keep keeps everything")
		assert.NotEmpty(t, dd[2].Skipped, "the last batch holds a kept record")
	})

	t.Run("lose unsynced only appends to partitions without keep", func(t *testing.T) {
		dd, err := DamageNode(n, topic, map[int32]int64{0: 0}, LoseUnsynced, rng)
		require.NoError(t, err)
		require.Len(t, dd, 3)
		for _, d := range dd[1:] {
			t.Log(d)
			assert.Equal(t, KeepAll, d.Keep)
			assert.Equal(t, d.OldSize, d.CutTo, "nothing is cut")
			assert.Positive(t, d.Appended)
		}
	})

	for p := range int32(3) {
		l, err := storage.Open(n.ReplicaDir(topic, p), diskFaultLogOpts(t, 512))
		require.NoError(t, err, "partition %d", p)
		if p > 0 {
			assert.Equal(t, ends[p], l.LogEndOffset(), "partition %d keeps everything", p)
		}
		require.NoError(t, l.Close())
	}
	assert.Equal(t, otherBefore, dirFiles(t, other), "another topic's replica is not touched")
}
