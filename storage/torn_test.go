package storage_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/record"
	"gostream/storage"
)

// These tests pin down the rule of Open that tells a torn write (cut) from
// corruption (refused): a crash only leaves bytes of a batch missing, past
// the end of the file or reading as zeros a 512-byte sector at a time.

// lastBatchLog writes n batches of size bytes into one segment and returns
// the directory, the batches, and the segment's bytes: as closed (ending at
// its data) or, with open, as a crash of the open log leaves it (zeros
// preallocated after the data).
func lastBatchLog(t *testing.T, n, size int, open bool) (string, []record.Batch, []byte) {
	t.Helper()
	if open {
		return preallocatedSized(t, n, size)
	}
	dir := t.TempDir()
	l := openLog(t, dir, storage.Options{})
	batches := appendSized(t, l, n, size, 'a')
	require.NoError(t, l.Close())
	data, err := os.ReadFile(filepath.Join(dir, segName(0)))
	require.NoError(t, err)
	return dir, batches, data
}

func preallocatedSized(t *testing.T, n, size int) (string, []record.Batch, []byte) {
	t.Helper()
	dir := t.TempDir()
	l := openLog(t, dir, storage.Options{})
	batches := appendSized(t, l, n, size, 'a')
	crashed := t.TempDir()
	copyDir(t, dir, crashed)
	require.NoError(t, l.Close())
	data, err := os.ReadFile(filepath.Join(crashed, segName(0)))
	require.NoError(t, err)
	require.Greater(t, len(data), len(concat(batches)), "zeros are preallocated after the data")
	return crashed, batches, data
}

func writeSegment(t *testing.T, dir string, data []byte) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, segName(0)), data, 0o644))
}

// TestBitFlipInLastBatchIsCorrupt: one bit flipped in the last batch of the
// newest segment, acknowledged and fsync'd, leaves a batch that lies whole
// in the file: no crash explains it, so Open refuses the log rather than
// cut acknowledged data, with or without preallocated zeros after it.
func TestBitFlipInLastBatchIsCorrupt(t *testing.T) {
	const size = 300 // the last of 5 is [1200, 1500): no sector of it is all zeros
	fields := map[string]int{
		"base offset":  7,
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
	for _, open := range []bool{false, true} {
		for name, off := range fields {
			t.Run(map[bool]string{false: "closed/", true: "preallocated/"}[open]+name, func(t *testing.T) {
				dir, batches, data := lastBatchLog(t, 5, size, open)
				data[len(concat(batches[:4]))+off] ^= 0x10
				writeSegment(t, dir, data)
				assertCorruptUntouched(t, dir, storage.Options{})
			})
		}
	}
}

// TestTornLastBatchIsCut: the damage a crash leaves in the last batch is cut
// off and quarantined, with any zeros after it; the batches before it stay
// and appends go on after them.
func TestTornLastBatchIsCut(t *testing.T) {
	const size = 1500 // the last of 5 is [6000, 7500): sectors start at 6144, 6656, 7168
	cases := []struct {
		name   string
		open   bool
		damage func(data []byte) []byte
	}{
		{"file ends inside it", false, func(d []byte) []byte { return d[:6000+700] }},
		{"file ends inside its header", false, func(d []byte) []byte { return d[:6000+20] }},
		{"file ends inside its length field", false, func(d []byte) []byte { return d[:6000+9] }},
		{"prefix written, the rest zeros", true, func(d []byte) []byte { clear(d[6144:7500]); return d }},
		{"the last sectors zeros", true, func(d []byte) []byte { clear(d[7168:7500]); return d }},
		{"one sector in the middle zeros", true, func(d []byte) []byte { clear(d[6656:7168]); return d }},
		{"one sector zeros, file closed", false, func(d []byte) []byte { clear(d[6656:7168]); return d }},
		{"cut at a sector boundary, zeros after", true, func(d []byte) []byte { clear(d[6144:]); return d }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir, batches, data := lastBatchLog(t, 5, size, tc.open)
			damaged := tc.damage(bytes.Clone(data))
			writeSegment(t, dir, damaged)
			good := len(concat(batches[:4]))

			l := openLog(t, dir, storage.Options{DurableFloor: 4})
			assert.Equal(t, int64(4), l.LogEndOffset())
			assertSameBytes(t, concat(batches[:4]), concat(readAll(t, l)))
			q := quarantined(t, dir)
			require.Len(t, q, 1)
			for _, cut := range q {
				assertSameBytes(t, damaged[good:], cut, "the torn batch and everything after it are quarantined")
			}
			fi, err := os.Stat(filepath.Join(dir, segName(0)))
			require.NoError(t, err)
			assert.Equal(t, int64(good), fi.Size())
			res := mustAppend(t, l, sizedBatch(t, 100, 'n'), 0)
			assert.Equal(t, int64(4), res.BaseOffset)
		})
	}
}

// TestPartlyWrittenSectorIsCorrupt: zeros that start inside a sector and
// run to the end of the batch, with no whole sector of the batch zero, are
// not what a crash leaves (a sector is written whole or not at all): the
// batch is refused as corrupt, not cut.
func TestPartlyWrittenSectorIsCorrupt(t *testing.T) {
	dir, batches, data := lastBatchLog(t, 5, 700, true) // the last is [2800, 3500)
	require.Equal(t, 3500, len(concat(batches)))
	clear(data[3300:3500]) // the sector [3072, 3584) holds its bytes 3072..3300
	writeSegment(t, dir, data)
	assertCorruptUntouched(t, dir, storage.Options{})
}

// TestDamagedLengthField: a bit flipped in the length field of the last
// batch makes it run past the end of the file, which the rule cannot tell
// from a torn write; it is cut. A caller that knows the batch was
// acknowledged says so with DurableFloor, and Open refuses instead.
func TestDamagedLengthField(t *testing.T) {
	for _, open := range []bool{false, true} {
		t.Run(map[bool]string{false: "closed", true: "preallocated"}[open], func(t *testing.T) {
			dir, batches, data := lastBatchLog(t, 5, 300, open)
			data[len(concat(batches[:4]))+9] ^= 0x40 // length + 4 MiB: past the end of the file, and above MaxBatchBytes
			writeSegment(t, dir, data)
			assertCorruptUntouched(t, dir, storage.Options{DurableFloor: 5})

			l := openLog(t, dir, storage.Options{})
			assert.Equal(t, int64(4), l.LogEndOffset(), "without a floor the damage reads as a torn write")
		})
	}
}

// TestDurableFloor: Open refuses, as corruption and changing nothing, a
// log that would end below the offset its caller knows was durable.
func TestDurableFloor(t *testing.T) {
	t.Run("torn tail below the floor", func(t *testing.T) {
		dir, batches, data := lastBatchLog(t, 5, 300, false)
		writeSegment(t, dir, data[:len(concat(batches))-10])
		err := openCorrupt(t, dir, storage.Options{DurableFloor: 5})
		assert.ErrorContains(t, err, "offsets below 5 were acknowledged but")
	})
	t.Run("torn tail above the floor", func(t *testing.T) {
		dir, batches, data := lastBatchLog(t, 5, 300, false)
		writeSegment(t, dir, data[:len(concat(batches))-10])
		l := openLog(t, dir, storage.Options{DurableFloor: 4})
		assert.Equal(t, int64(4), l.LogEndOffset())
	})
	t.Run("whole log ending below the floor", func(t *testing.T) {
		dir, _, _ := lastBatchLog(t, 5, 300, true)
		err := openCorrupt(t, dir, storage.Options{DurableFloor: 6})
		assert.ErrorContains(t, err, "offsets below 6 were acknowledged but the log ends at offset 5")
		l := openLog(t, dir, storage.Options{DurableFloor: 5})
		assert.Equal(t, int64(5), l.LogEndOffset())
	})
	t.Run("no segment", func(t *testing.T) {
		for _, tc := range []struct {
			initial, floor int64
			ok             bool
		}{{0, 0, true}, {0, 1, false}, {10, 10, true}, {10, 11, false}, {10, -1, true}} {
			dir := filepath.Join(t.TempDir(), "log")
			l, err := storage.Open(dir, storage.Options{InitialOffset: tc.initial, DurableFloor: tc.floor})
			if tc.ok {
				require.NoError(t, err, "initial %d, floor %d", tc.initial, tc.floor)
				assert.Equal(t, tc.initial, l.LogEndOffset())
				require.NoError(t, l.Close())
				continue
			}
			require.ErrorIs(t, err, storage.ErrCorrupt, "initial %d, floor %d", tc.initial, tc.floor)
			assert.ErrorContains(t, err, "were acknowledged but the log has no segment")
			_, statErr := os.Stat(dir)
			assert.True(t, os.IsNotExist(statErr), "nothing is created")
		}
	})
}

// openCorrupt is assertCorruptUntouched that returns the error.
func openCorrupt(t *testing.T, dir string, opts storage.Options) error {
	t.Helper()
	before := snapshotDir(t, dir)
	opts.Logger = testLogger(t)
	l, err := storage.Open(dir, opts)
	if err == nil {
		l.Close()
	}
	require.ErrorIs(t, err, storage.ErrCorrupt)
	assert.Equal(t, before, snapshotDir(t, dir), "files are left exactly as they were")
	return err
}

// TestDamageBeforeAKafkaBatchIsCorrupt: a batch that carries a Kafka
// record batch (magic 2) after a damaged one shows that the damage is not
// a torn tail, as a batch of magic 1 does: Open refuses the log rather
// than cut the acknowledged batches after the damage.
func TestDamageBeforeAKafkaBatchIsCorrupt(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, storage.Options{})
	var sizes []int
	for i := range 3 {
		kb, err := record.AppendKafkaBatch(nil, []record.Record{{Key: []byte{byte('a' + i)}, Value: bytes.Repeat([]byte{byte(i)}, 200)}}, record.NoProducer)
		require.NoError(t, err)
		b, err := record.WrapKafka(kb)
		require.NoError(t, err)
		mustAppend(t, l, b, 0)
		sizes = append(sizes, len(b))
	}
	require.NoError(t, l.Close())
	data, err := os.ReadFile(filepath.Join(dir, segName(0)))
	require.NoError(t, err)
	// The second batch's length now runs past the end of the file, as a
	// torn write's would; the third batch, whole after it, says it is not.
	data[sizes[0]+9] ^= 0x40
	writeSegment(t, dir, data)
	assertCorruptUntouched(t, dir, storage.Options{})
}
