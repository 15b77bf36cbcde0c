package storage_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/record"
	"gostream/storage"
)

var genFuzzSeeds = flag.Bool("gen-fuzz-seeds", false, "rewrite the generated seed corpus under testdata/fuzz")

const (
	// recoveryFuzzMaxBatch is the MaxBatchBytes of the fuzzed logs: small, so
	// that a garbage length field does not make every input allocate the
	// default 4 MiB.
	recoveryFuzzMaxBatch = 64 << 10
	recoveryFuzzSegment  = "00000000000000000000.log"
)

// recoveryPrefix is the longest valid prefix of a segment: the batches that
// frame and validate from position 0, with base offsets contiguous from 0
// and epochs that never go down.
type recoveryPrefix struct {
	end   int   // bytes
	next  int64 // offset after its last batch
	epoch int32 // epoch of its last batch, -1 when empty
}

// longestValidPrefix is the fuzz oracle. It is written against package
// record and the documented rules only, not against storage's scanner.
func longestValidPrefix(data []byte) recoveryPrefix {
	p := recoveryPrefix{epoch: -1}
	for rest := data; len(rest) > 0; {
		b, after, err := record.Frame(rest, recoveryFuzzMaxBatch)
		if err != nil || b.Validate() != nil || b.BaseOffset() != p.next || b.LeaderEpoch() < p.epoch {
			break
		}
		p.end += len(b)
		p.next, p.epoch = b.NextOffset(), b.LeaderEpoch()
		rest = after
	}
	return p
}

// wantCorrupt is the documented rule for what follows the valid prefix:
// zeros to the end are free space; a valid batch right there (so its offset
// or epoch is wrong) is corruption; so is a damaged batch that a crash
// cannot leave (see tornByCrash), or one with a valid batch starting
// anywhere after it; anything else is a torn write.
func wantCorrupt(data []byte, p recoveryPrefix) bool {
	tail := data[p.end:]
	if len(bytes.TrimRight(tail, "\x00")) == 0 {
		return false
	}
	if b, _, err := record.Frame(tail, recoveryFuzzMaxBatch); err == nil && b.Validate() == nil {
		return true
	}
	if !tornByCrash(data, p.end) {
		return true
	}
	for i := 1; i < len(tail); i++ {
		if _, _, err := record.Frame(tail[i:], recoveryFuzzMaxBatch); err == nil {
			return true
		}
	}
	return false
}

// tornByCrash reports whether the damaged batch at position pos of a file
// holding data is one a crash can leave, by the documented rule: its frame
// cannot be read whole (the file ends inside its header, its length is out
// of range, or the file ends inside it), or a 512-byte sector of the file,
// aligned to file position, is all zeros where it overlaps the batch.
func tornByCrash(data []byte, pos int) bool {
	if len(data)-pos < record.HeaderSize {
		return true
	}
	n, err := record.FrameSize(data[pos:], recoveryFuzzMaxBatch)
	if err != nil || pos+n > len(data) {
		return true
	}
	for from := pos; from < pos+n; {
		to := min((from/512+1)*512, pos+n)
		if len(bytes.TrimLeft(data[from:to], "\x00")) == 0 {
			return true
		}
		from = to
	}
	return false
}

// fixSegmentCRCs rewrites the checksum of every batch that frames back to
// back from position 0, following the documented layout, so that the fuzzer
// reaches the offset, epoch and record checks behind the checksum.
func fixSegmentCRCs(data []byte) {
	table := crc32.MakeTable(crc32.Castagnoli)
	for pos := 0; len(data)-pos >= 16; {
		n := int(binary.BigEndian.Uint32(data[pos+8:])) + 12
		if n < 16 || n > len(data)-pos {
			return
		}
		b := data[pos : pos+n]
		c := crc32.Update(crc32.Update(0, table, b[:12]), table, b[16:])
		binary.BigEndian.PutUint32(b[12:], c)
		pos += n
	}
}

// recoveryFuzzDir returns a fresh directory for one input. What recovery
// decides does not depend on durability, so a tmpfs, where fsync is free,
// is used when there is one: it makes the fuzzer many times faster.
func recoveryFuzzDir(t *testing.T) string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "gostream-fuzz-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

func openFuzzSegment(t *testing.T, data []byte) (string, *storage.Log, error) {
	dir := recoveryFuzzDir(t)
	require.NoError(t, os.WriteFile(filepath.Join(dir, recoveryFuzzSegment), data, 0o644))
	l, err := storage.Open(dir, storage.Options{MaxBatchBytes: recoveryFuzzMaxBatch})
	return dir, l, err
}

// requireUntouched checks that a log directory holds exactly the segment
// file it was given, byte for byte.
func requireUntouched(t *testing.T, dir string, data []byte) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.Equal(t, []string{recoveryFuzzSegment}, names, "corrupt log directory was changed")
	got, err := os.ReadFile(filepath.Join(dir, recoveryFuzzSegment))
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got), "corrupt segment was changed")
}

// readWholeLog reads every durable batch of l from offset 0.
func readWholeLog(t *testing.T, l *storage.Log) []byte {
	t.Helper()
	var all []byte
	var off int64
	for range 1 << 16 {
		out, err := l.Read(context.Background(), off, 1<<20, 1<<62, nil)
		require.NoError(t, err)
		if len(out) == 0 {
			return all
		}
		require.NoError(t, record.Batches(out, func(b record.Batch) bool {
			off = b.NextOffset()
			return true
		}), "Read returned bytes that are not whole batches")
		all = append(all, out...)
	}
	t.Fatal("Read never reached the end of the log")
	return nil
}

// FuzzSegmentRecovery opens a log whose only segment holds arbitrary bytes.
// Open must either report corruption and change nothing, or recover exactly
// the longest valid prefix, cutting (and quarantining) the rest, as the
// rule for torn writes says; and with a DurableFloor above that prefix it
// must report corruption.
func FuzzSegmentRecovery(f *testing.F) {
	for _, s := range recoveryFuzzSeeds(f) {
		f.Add(s.data, s.fixCRC)
	}
	f.Fuzz(func(t *testing.T, data []byte, fixCRC bool) {
		if len(data) > 1<<16 {
			t.Skip("inputs are kept small so that the fuzzer stays fast")
		}
		if fixCRC {
			data = bytes.Clone(data)
			fixSegmentCRCs(data)
		}
		want := longestValidPrefix(data)
		corrupt := wantCorrupt(data, want)

		dir, l, err := openFuzzSegment(t, data)
		if err != nil {
			require.ErrorIs(t, err, storage.ErrCorrupt, "Open failed with an error that is not corruption")
			requireUntouched(t, dir, data)
			require.True(t, corrupt, "Open reported corruption for a torn tail after %d valid bytes: %v", want.end, err)
		} else {
			require.False(t, corrupt, "Open accepted a log with valid data after damage at byte %d", want.end)
			assert.Equal(t, want.next, l.LogEndOffset())
			assert.Equal(t, want.epoch, l.LastEpoch())
			require.True(t, bytes.Equal(data[:want.end], readWholeLog(t, l)), "log does not hold the longest valid prefix")
			require.NoError(t, l.Close())
			got, err := os.ReadFile(filepath.Join(dir, recoveryFuzzSegment))
			require.NoError(t, err)
			require.True(t, bytes.Equal(data[:want.end], got), "segment on disk is not the longest valid prefix")
			// Zeros after the valid prefix are free space (preallocated for
			// appends), not a torn write: nothing is quarantined for them.
			q, _ := filepath.Glob(filepath.Join(dir, storage.QuarantineDir, "*"))
			if len(bytes.TrimRight(data[want.end:], "\x00")) == 0 {
				require.Empty(t, q, "nothing but zeros followed the valid prefix, yet something was quarantined")
			} else {
				require.Len(t, q, 1)
				cut, err := os.ReadFile(q[0])
				require.NoError(t, err)
				require.True(t, bytes.Equal(data[want.end:], cut), "quarantine does not hold the bytes that were cut")
			}

			// A caller that knows one more offset was durable gets
			// corruption, and nothing is cut.
			dir := recoveryFuzzDir(t)
			require.NoError(t, os.WriteFile(filepath.Join(dir, recoveryFuzzSegment), data, 0o644))
			l, err := storage.Open(dir, storage.Options{MaxBatchBytes: recoveryFuzzMaxBatch, DurableFloor: want.next + 1})
			if err == nil {
				l.Close()
			}
			require.ErrorIs(t, err, storage.ErrCorrupt, "a log ending at %d opened with durable floor %d", want.next, want.next+1)
			requireUntouched(t, dir, data)
		}

		// A valid batch whose base offset is not the next one is corruption,
		// right after the prefix or after a damaged tail.
		wrong, err := record.AppendBatch(nil, []record.Record{{Key: []byte("k"), Value: []byte("v")}})
		require.NoError(t, err)
		record.Batch(wrong).Stamp(want.next+1, max(want.epoch, 0), 1)
		inputs := [][]byte{append(bytes.Clone(data[:want.end]), wrong...)}
		if want.end < len(data) {
			inputs = append(inputs, append(bytes.Clone(data), wrong...))
		}
		for _, in := range inputs {
			if longestValidPrefix(in) != want {
				continue // the appended bytes completed a valid batch: not the case under test
			}
			dir, l, err := openFuzzSegment(t, in)
			if err == nil {
				l.Close()
			}
			require.ErrorIs(t, err, storage.ErrCorrupt, "a valid batch at offset %d after %d valid bytes (log end %d) was accepted",
				want.next+1, want.end, want.next)
			requireUntouched(t, dir, in)
		}
	})
}

type recoveryFuzzSeed struct {
	name   string
	data   []byte
	fixCRC bool
}

func recoveryFuzzSeeds(t testing.TB) []recoveryFuzzSeed {
	batch := func(base int64, epoch int32, recs ...record.Record) []byte {
		b, err := record.AppendBatch(nil, recs)
		require.NoError(t, err)
		record.Batch(b).Stamp(base, epoch, 1_700_000_000_000+base)
		return b
	}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	with := func(b []byte, f func([]byte)) []byte {
		c := bytes.Clone(b)
		f(c)
		return c
	}
	b0 := batch(0, 0, record.Record{Key: nil, Value: nil}, record.Record{Key: []byte{}, Value: []byte{}})
	b1 := batch(2, 0, record.Record{Key: []byte("k"), Value: []byte("v"), Headers: []record.Header{
		{Key: "", Value: nil}, {Key: "h", Value: []byte{}}, {Key: "trace-id", Value: []byte("0af7651916cd43dd")},
	}})
	b2 := batch(3, 2,
		record.Record{Key: nil, Value: bytes.Repeat([]byte("x"), 100)},
		record.Record{Key: []byte("k2"), Value: []byte("v2")},
		record.Record{Key: []byte{}, Headers: []record.Header{{Key: "e"}}})
	b3 := batch(6, 2, record.Record{Value: []byte("next")})
	big := batch(6, 2, record.Record{Value: bytes.Repeat([]byte("y"), 1500)}) // spans sectors
	valid := cat(b0, b1, b2)
	p1, p2 := len(b0), len(b0)+len(b1) // positions of b1 and b2

	return []recoveryFuzzSeed{
		{"empty", []byte{}, false},
		{"one-batch", b0, false},
		{"three-batches-null-empty-keys-headers", valid, false},
		{"torn-in-last-batch", valid[:len(valid)-10], false},
		{"torn-in-length-prefix", cat(valid, b3[:7]), false},
		{"torn-after-header", cat(valid, b3[:40]), false},
		{"bitflip-last-batch", with(valid, func(b []byte) { b[p2+60] ^= 0x04 }), false},
		{"bitflip-middle-batch", with(valid, func(b []byte) { b[p1+40] ^= 0x04 }), false},
		{"zero-filled-tail", cat(valid, make([]byte, 512)), false},
		{"only-zeros", make([]byte, 300), false},
		{"partial-sector-then-zeros", cat(valid, b3[:40], make([]byte, 700)), false},
		{"torn-sectors-zero", with(cat(valid, big, make([]byte, 300)), func(b []byte) { clear(b[512:]) }), false},
		{"one-sector-zero", with(cat(valid, big, b3), func(b []byte) { clear(b[1024:1536]) }), false},
		{"bitflip-last-batch-before-zeros", with(cat(valid, make([]byte, 512)), func(b []byte) { b[p2+60] ^= 0x04 }), false},
		{"zeros-then-valid-batch", cat(valid, make([]byte, 64), b3), false},
		{"garbage-then-valid-batch", cat(valid, []byte("xyz"), b3), false},
		{"offset-gap", cat(b0, batch(5, 0, record.Record{Value: []byte("gap")})), false},
		{"offset-repeat", cat(b0, b0), false},
		{"epoch-regression", cat(batch(0, 3, record.Record{}), batch(1, 1, record.Record{})), false},
		// Checksums fixed after the damage: only the checks behind them can object.
		{"bad-record-layout-fixcrc", with(valid, func(b []byte) { binary.BigEndian.PutUint32(b[p2+34:], 0xfffffffe) }), true},
		{"offset-gap-fixcrc", with(valid, func(b []byte) { binary.BigEndian.PutUint64(b[p1:], 7) }), true},
		{"negative-epoch-fixcrc", with(valid, func(b []byte) { binary.BigEndian.PutUint32(b[p2+16:], 0xffffffff) }), true},
		{"epoch-regression-fixcrc", with(valid, func(b []byte) { binary.BigEndian.PutUint32(b[p1+16:], 3) }), true},
	}
}

// TestRecoveryFuzzSeedCorpus keeps testdata/fuzz/FuzzSegmentRecovery in step
// with recoveryFuzzSeeds; run with -gen-fuzz-seeds to rewrite it.
func TestRecoveryFuzzSeedCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzSegmentRecovery")
	for _, s := range recoveryFuzzSeeds(t) {
		want := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\nbool(%t)\n", s.data, s.fixCRC)
		path := filepath.Join(dir, s.name)
		if *genFuzzSeeds {
			require.NoError(t, os.MkdirAll(dir, 0o755))
			require.NoError(t, os.WriteFile(path, []byte(want), 0o644))
			continue
		}
		got, err := os.ReadFile(path)
		require.NoError(t, err, "seed %s missing; run go test -run TestRecoveryFuzzSeedCorpus -gen-fuzz-seeds", s.name)
		assert.Equal(t, want, string(got), "seed %s is stale; run go test -run TestRecoveryFuzzSeedCorpus -gen-fuzz-seeds", s.name)
	}
}
