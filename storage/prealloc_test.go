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

// preallocatedLog appends n batches to a new log and, without closing it,
// copies its directory as a crash would leave it. It returns the copy, the
// batches, and the newest segment's bytes in the copy.
func preallocatedLog(t *testing.T, n int) (string, []record.Batch, []byte) {
	t.Helper()
	dir := t.TempDir()
	l := openLog(t, dir, storage.Options{})
	batches := appendSized(t, l, n, 300, 'a')
	crashed := t.TempDir()
	copyDir(t, dir, crashed)
	require.NoError(t, l.Close())
	data, err := os.ReadFile(filepath.Join(crashed, segName(0)))
	require.NoError(t, err)
	return crashed, batches, data
}

// TestPreallocatedSegment: the active segment is zero-filled ahead of its
// data while the log is open, and ends at its data once closed.
func TestPreallocatedSegment(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, storage.Options{})
	batches := appendSized(t, l, 3, 500, 0)
	path := filepath.Join(dir, segName(0))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	want := concat(batches)
	require.Greater(t, len(data), len(want), "space after the data is preallocated")
	assert.Equal(t, want, data[:len(want)])
	assert.Equal(t, make([]byte, len(data)-len(want)), data[len(want):], "preallocated space is zeros")
	assert.Equal(t, int64(len(want)), l.Size(), "Size counts data, not preallocated space")

	require.NoError(t, l.Close())
	data, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, want, data, "a closed segment ends at its data")
}

// TestZeroTailIsFreeSpace: a crash leaves the newest segment with zeros after
// its data. Open takes them as free space: nothing is cut or quarantined,
// and appends go on right after the data.
func TestZeroTailIsFreeSpace(t *testing.T) {
	dir, batches, data := preallocatedLog(t, 4)
	want := concat(batches)
	require.Greater(t, len(data), len(want))

	l := openLog(t, dir, storage.Options{})
	assert.Equal(t, int64(4), l.LogEndOffset())
	assert.Equal(t, want, concat(readAll(t, l)))
	assert.Empty(t, quarantined(t, dir), "zeros are not a torn write")
	fi, err := os.Stat(filepath.Join(dir, segName(0)))
	require.NoError(t, err)
	assert.Equal(t, int64(len(data)), fi.Size(), "the free space is kept")

	next := sizedBatch(t, 300, 'z')
	res := mustAppend(t, l, next, 0)
	assert.Equal(t, int64(4), res.BaseOffset)
	require.NoError(t, l.Close())
	got, err := os.ReadFile(filepath.Join(dir, segName(0)))
	require.NoError(t, err)
	assert.Equal(t, append(bytes.Clone(want), next...), got)
}

// TestTornWriteBeforeZeros: a batch torn by a crash inside the preallocated
// space (its sectors from some point on never written, so zeros) is cut off
// and quarantined with the zeros after it; the batches before it stay.
func TestTornWriteBeforeZeros(t *testing.T) {
	dir, batches, data := preallocatedLog(t, 4) // the last batch is [900, 1200)
	good := len(concat(batches[:3]))
	torn := bytes.Clone(data)
	clear(torn[1024:len(concat(batches))]) // the last batch's end never reached the disk
	require.NoError(t, os.WriteFile(filepath.Join(dir, segName(0)), torn, 0o644))

	l := openLog(t, dir, storage.Options{})
	assert.Equal(t, int64(3), l.LogEndOffset())
	assert.Equal(t, concat(batches[:3]), concat(readAll(t, l)))
	q := quarantined(t, dir)
	require.Len(t, q, 1)
	for _, cut := range q {
		assert.Equal(t, torn[good:], cut, "the torn batch and the zeros after it are quarantined")
	}
	fi, err := os.Stat(filepath.Join(dir, segName(0)))
	require.NoError(t, err)
	assert.Equal(t, int64(good), fi.Size())
}

// TestZerosThenValidBatchIsCorrupt: zeros are free space only at the end. A
// valid batch after them is not explained by a crash.
func TestZerosThenValidBatchIsCorrupt(t *testing.T) {
	dir, batches, data := preallocatedLog(t, 3)
	good := len(concat(batches[:1]))
	damaged := bytes.Clone(data)
	clear(damaged[good : good+len(batches[1])]) // batch 1 lost, batch 2 intact after it
	require.NoError(t, os.WriteFile(filepath.Join(dir, segName(0)), damaged, 0o644))
	assertCorruptUntouched(t, dir, storage.Options{})
}

// TestTruncatePreallocated: truncating the active segment cuts the file at
// the new end, so no old batch is left in the space appends will use.
func TestTruncatePreallocated(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, storage.Options{})
	batches := appendSized(t, l, 4, 300, 0)
	require.NoError(t, l.TruncateTo(ctxFor(t), 2))
	next := sizedBatch(t, 100, 'n')
	mustAppend(t, l, next, 0)

	crashed := t.TempDir()
	copyDir(t, dir, crashed)
	data, err := os.ReadFile(filepath.Join(crashed, segName(0)))
	require.NoError(t, err)
	want := append(concat(batches[:2]), next...)
	assert.Equal(t, want, data[:len(want)])
	assert.Equal(t, make([]byte, len(data)-len(want)), data[len(want):], "only zeros after the data")

	r := openLog(t, crashed, storage.Options{})
	assert.Equal(t, int64(3), r.LogEndOffset())
	assert.Equal(t, want, concat(readAll(t, r)))
}

// TestPreallocationFollowsGroupCommitSize: a log whose fsyncs are small
// (one synchronous producer) preallocates with written zeros once it has
// seen them, and over zeros the file needs no block conversion at fsync; a
// log whose fsyncs are large (pipelined producers) keeps fallocate, which
// does not write every byte twice. Either way the space reads as zeros,
// and the stretches double from one block up to PreallocBytes, then come
// PreallocBytes at a time.
func TestPreallocationFollowsGroupCommitSize(t *testing.T) {
	const k = 1 << 10
	tests := []struct {
		name      string
		batchSize int
		ends      []int64 // where the file ends after each preallocation
		zeros     []bool
	}{
		{"small fsyncs", 1 << 10,
			[]int64{4 * k, 8 * k, 16 * k, 32 * k, 64 * k, 128 * k, 256 * k, 512 * k, 768 * k},
			[]bool{false, true, true, true, true, true, true, true, true}},
		{"large fsyncs", 64 << 10,
			[]int64{64 * k, 128 * k, 256 * k, 512 * k, 768 * k},
			[]bool{false, false, false, false, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var choices []bool
			defer storage.SetPreallocHook(func(zeros bool) { choices = append(choices, zeros) })()
			dir := t.TempDir()
			path := filepath.Join(dir, segName(0))
			l := openLog(t, dir, storage.Options{})
			// Each append waits for its own fsync: one batch per fsync.
			n := 2*storage.PreallocBytes/tt.batchSize + 1 // past the second full stretch
			var batches []record.Batch
			var ends []int64
			for i := range n {
				batches = append(batches, sizedBatch(t, tt.batchSize, byte(i)))
				mustAppend(t, l, batches[i], 0)
				fi, err := os.Stat(path)
				require.NoError(t, err)
				if len(ends) == 0 || ends[len(ends)-1] != fi.Size() {
					ends = append(ends, fi.Size())
				}
			}
			assert.Equal(t, tt.ends, ends)
			assert.Equal(t, tt.zeros, choices)

			data, err := os.ReadFile(path)
			require.NoError(t, err)
			want := concat(batches)
			assert.Equal(t, want, data[:len(want)])
			assert.Equal(t, make([]byte, len(data)-len(want)), data[len(want):], "preallocated space is zeros")
			require.NoError(t, l.Close())
		})
	}
}

// TestBusyLogPreallocatesRarely: a log that takes 8 MiB of small batches
// preallocates seven times on its way to PreallocBytes and then once per
// PreallocBytes, not once per few batches: the stretches that keep a quiet
// log small do not cost a busy one its preallocation.
func TestBusyLogPreallocatesRarely(t *testing.T) {
	var preallocs int
	defer storage.SetPreallocHook(func(bool) { preallocs++ })()
	dir := t.TempDir()
	l := openLog(t, dir, storage.Options{})
	const total, size = 8 << 20, 1 << 10
	batch := sizedBatch(t, size, 'b')
	var durable storage.Durable
	for range total / size {
		var err error
		_, durable, err = l.Write(batch, 0) // Write stamps the batch in place
		require.NoError(t, err)
	}
	require.NoError(t, durable(ctxFor(t)))
	fi, err := os.Stat(filepath.Join(dir, segName(0)))
	require.NoError(t, err)
	assert.Equal(t, int64(total), fi.Size(), "the data fills the last stretch exactly")
	// 4, 8, ... 256 KiB, then 512 KiB, 768 KiB, ... 8 MiB.
	assert.Equal(t, 7+(total-storage.PreallocBytes)/storage.PreallocBytes, preallocs)
}

// TestWrittenZeroTailIsFreeSpace is TestZeroTailIsFreeSpace for space
// preallocated with written zeros (small fsyncs): a crash leaves them after
// the data, and Open takes them as free space.
func TestWrittenZeroTailIsFreeSpace(t *testing.T) {
	var zeroFilled bool
	defer storage.SetPreallocHook(func(zeros bool) { zeroFilled = zeroFilled || zeros })()
	n := storage.PreallocBytes/300 + 10 // past the first PreallocBytes; small fsyncs zero-fill from the second stretch on
	dir, batches, data := preallocatedLog(t, n)
	require.True(t, zeroFilled, "the second stretch was not zero-filled")
	want := concat(batches)
	require.Equal(t, 2*storage.PreallocBytes, len(data))

	l := openLog(t, dir, storage.Options{})
	assert.Equal(t, int64(n), l.LogEndOffset())
	assert.Equal(t, want, concat(readAll(t, l)))
	assert.Empty(t, quarantined(t, dir), "zeros are not a torn write")
	next := sizedBatch(t, 300, 'z')
	res := mustAppend(t, l, next, 0)
	assert.Equal(t, int64(n), res.BaseOffset)
	require.NoError(t, l.Close())
	got, err := os.ReadFile(filepath.Join(dir, segName(0)))
	require.NoError(t, err)
	assert.Equal(t, append(bytes.Clone(want), next...), got)
}
