package storage_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gostream/record"
	"gostream/storage"
	"gostream/storage/logtest"
)

// Benchmarks of the log, each beside a baseline measured in the same run on
// the same disk: plain writes and fsyncs, or plain preads, of the same
// bytes. Compare ratios, not absolute figures (scripts/bench-storage.sh
// prints them). The logs live in b.TempDir(): run with TMPDIR on a real
// disk, since fsync on a tmpfs measures nothing.

const (
	benchValueSize = 1 << 10
	benchAppenders = 64
	benchReadBytes = 1 << 30
	benchReadChunk = 1 << 20
)

func reportMsgsPerSec(b *testing.B, msgs int) {
	b.ReportMetric(float64(msgs)/b.Elapsed().Seconds(), "msgs/s")
}

// benchBatch returns a batch of n records with 1 KiB values.
func benchBatch(b *testing.B, n int) record.Batch {
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Key: []byte("key"), Value: bytes.Repeat([]byte{byte('a' + i%26)}, benchValueSize)}
	}
	batch, err := record.AppendBatch(nil, recs)
	require.NoError(b, err)
	return batch
}

func openBenchLog(b *testing.B, dir string) *storage.Log {
	l, err := storage.Open(dir, storage.Options{})
	require.NoError(b, err)
	b.Cleanup(func() { l.Close() })
	return l
}

// benchWriteFsync is the baseline for appends: write size bytes at the end
// of a file, then fsync it, per op.
func benchWriteFsync(b *testing.B, size int) {
	f, err := os.Create(filepath.Join(b.TempDir(), "baseline.log"))
	require.NoError(b, err)
	b.Cleanup(func() { f.Close() })
	buf := bytes.Repeat([]byte{'b'}, size)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportMsgsPerSec(b, b.N)
}

// BenchmarkBaselineWriteFsync1KiB is a raw write of 1 KiB and an fsync per
// op: the ceiling for BenchmarkAppend1KiBSync.
func BenchmarkBaselineWriteFsync1KiB(b *testing.B) { benchWriteFsync(b, benchValueSize) }

// BenchmarkAppend1KiBSync is one appender appending one 1 KiB record per
// batch, each Append waiting for its own fsync. Target: at least 0.8 times
// the ops/s of BenchmarkBaselineWriteFsync1KiB.
func BenchmarkAppend1KiBSync(b *testing.B) {
	l := openBenchLog(b, b.TempDir())
	batch := benchBatch(b, 1)
	ctx := context.Background()
	b.SetBytes(benchValueSize)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := l.Append(ctx, batch, 0); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportMsgsPerSec(b, b.N)
}

// BenchmarkBaselineWrite64KiBFsync is a raw write of 64 KiB and an fsync per
// op: the ceiling for BenchmarkAppend1KiB64Appenders, whose fsyncs each
// cover up to 64 batches of about 1 KiB.
func BenchmarkBaselineWrite64KiBFsync(b *testing.B) { benchWriteFsync(b, 64<<10) }

// BenchmarkAppend1KiB64Appenders is 64 goroutines each appending one 1 KiB
// record per batch and waiting for it to be durable: group commit. Target:
// at least 0.3 times the MB/s of BenchmarkBaselineWrite64KiBFsync.
func BenchmarkAppend1KiB64Appenders(b *testing.B) {
	l := openBenchLog(b, b.TempDir())
	batches := make([]record.Batch, benchAppenders)
	for i := range batches {
		batches[i] = benchBatch(b, 1) // Append stamps in place: one per appender
	}
	ctx := context.Background()
	var ops atomic.Int64
	var wg sync.WaitGroup
	b.SetBytes(benchValueSize)
	b.ReportAllocs()
	b.ResetTimer()
	for _, batch := range batches {
		wg.Go(func() {
			for ops.Add(1) <= int64(b.N) {
				if _, err := l.Append(ctx, batch, 0); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	reportMsgsPerSec(b, b.N)
}

// BenchmarkReadSequential1GiB reads a 1 GiB log from start to end, in
// page cache, with Read into one reused buffer (Log; target at least 1 GB/s),
// and the same segment files with plain 1 MiB preads (BaselineReadAt). The
// log is built once, outside the timings, and removed afterwards.
func BenchmarkReadSequential1GiB(b *testing.B) {
	if testing.Short() {
		b.Skip("builds a 1 GiB log")
	}
	dir := b.TempDir()
	l := openBenchLog(b, dir)
	buildBenchLog(b, l, benchReadBytes)
	total := l.Size()
	buf := make([]byte, benchReadChunk)
	readLog(b, l, buf, total) // warm the page cache

	b.Run("Log", func(b *testing.B) {
		b.SetBytes(total)
		b.ReportAllocs()
		for range b.N {
			readLog(b, l, buf, total)
		}
	})

	// Closed, the newest segment ends at its data: an open log's newest
	// segment has space preallocated after it, which is not the log's to
	// read.
	require.NoError(b, l.Close())
	paths, err := filepath.Glob(filepath.Join(dir, "*.log"))
	require.NoError(b, err)
	sort.Strings(paths)
	files := make([]*os.File, len(paths))
	for i, p := range paths {
		files[i], err = os.Open(p)
		require.NoError(b, err)
		defer files[i].Close()
	}
	b.Run("BaselineReadAt", func(b *testing.B) {
		b.SetBytes(total)
		b.ReportAllocs()
		for range b.N {
			var n int64
			for _, f := range files {
				for pos := int64(0); ; {
					k, err := f.ReadAt(buf, pos)
					n, pos = n+int64(k), pos+int64(k)
					if err != nil {
						break // io.EOF at the end of the segment
					}
				}
			}
			if n != total {
				b.Fatalf("read %d bytes, want %d", n, total)
			}
		}
	})
}

// buildBenchLog appends batches of 256 records of 1 KiB until the log holds
// at least size bytes. Several appenders share fsyncs, to build it quickly.
func buildBenchLog(b *testing.B, l *storage.Log, size int64) {
	const appenders = 4
	per := (size + appenders - 1) / appenders
	var wg sync.WaitGroup
	for range appenders {
		batch := benchBatch(b, 256)
		wg.Go(func() {
			for written := int64(0); written < per; written += int64(len(batch)) {
				if _, err := l.Append(context.Background(), batch, 0); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
}

// readLog reads the whole log with Read, as a consumer would, and checks
// that it got every byte.
func readLog(b *testing.B, l *storage.Log, buf []byte, total int64) {
	var off, n int64
	for {
		out, err := l.Read(context.Background(), off, benchReadChunk, 1<<62, buf)
		if err != nil {
			b.Fatal(err)
		}
		if len(out) == 0 {
			break
		}
		n += int64(len(out))
		last := 0 // Read returns whole batches: find where the last one starts
		for p := 0; p < len(out); {
			size, err := record.FrameSize(out[p:], len(out))
			if err != nil {
				b.Fatal(err)
			}
			last, p = p, p+size
		}
		off = record.Batch(out[last:]).NextOffset()
	}
	if n != total {
		b.Fatalf("read %d bytes, want %d", n, total)
	}
}

// The log's hot functions on their own (make bench-micro, with the other
// packages' hot functions: docs/benchmarks.md, "Hot functions on their
// own"): Write and WriteExact, each waiting for its batch to be durable,
// and Read, with batches of 1, 16 and 256 records of 1 KiB. The writes
// run twice: on the disk under b.TempDir(), fsync included (fs=os), and
// on the same files with fsync left out (fs=nosync), which shows the
// CPU's part on its own.

var benchRecordCounts = []int{1, 16, 256}

var benchFileSystems = []struct {
	name string
	fs   storage.FS
}{{"os", storage.OSFS{}}, {"nosync", logtest.NoSyncFS{}}}

// benchChunkBytes is how many bytes of batches a write benchmark appends
// between two pauses of its timer, in which it applies retention: its log
// holds little more than that and the retention's 64 MiB, however long it
// runs, and the files leave the page cache before the kernel writes them
// back.
const benchChunkBytes = 16 << 20

// openMicroLog opens a log on fsys with 64 MiB segments, 64 MiB kept by
// retention.
func openMicroLog(b *testing.B, fsys storage.FS) *storage.Log {
	l, err := storage.Open(b.TempDir(), storage.Options{FS: fsys, SegmentBytes: 64 << 20, RetentionBytes: 64 << 20})
	require.NoError(b, err)
	b.Cleanup(func() { l.Close() })
	return l
}

// applyRetention deletes the log's old segments.
func applyRetention(b *testing.B, l *storage.Log) {
	if _, err := l.ApplyRetention(context.Background(), l.DurableEndOffset()); err != nil {
		b.Fatal(err)
	}
}

// benchWrites runs bench on every file system and record count, as
// sub-benchmarks named fs=F/records=N.
func benchWrites(b *testing.B, bench func(b *testing.B, fsys storage.FS, n int)) {
	for _, f := range benchFileSystems {
		for _, n := range benchRecordCounts {
			b.Run(fmt.Sprintf("fs=%s/records=%d", f.name, n), func(b *testing.B) { bench(b, f.fs, n) })
		}
	}
}

// BenchmarkLogWrite is Log.Write of a batch (checked, stamped and written)
// and the wait for it to be durable, one batch at a time: a leader's
// append with nothing else to share its fsync.
func BenchmarkLogWrite(b *testing.B) {
	benchWrites(b, func(b *testing.B, fsys storage.FS, n int) {
		l := openMicroLog(b, fsys)
		batch := benchBatch(b, n)
		chunk := max(1, benchChunkBytes/len(batch))
		ctx := context.Background()
		b.SetBytes(int64(len(batch)))
		b.ReportAllocs()
		for i := 1; b.Loop(); i++ {
			if i%chunk == 0 {
				b.StopTimer()
				applyRetention(b, l)
				b.StartTimer()
			}
			_, durable, err := l.Write(batch, 3)
			if err == nil {
				err = durable(ctx)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkLogWriteExact is Log.WriteExact of a batch a leader stamped
// (checked and written as it is) and the wait for it to be durable, one
// batch at a time: a follower's append. The batches are stamped with
// their offsets before they are timed, a chunk at a time.
func BenchmarkLogWriteExact(b *testing.B) {
	benchWrites(b, func(b *testing.B, fsys storage.FS, n int) {
		l := openMicroLog(b, fsys)
		template := benchBatch(b, n)
		batches := make([]record.Batch, max(1, benchChunkBytes/len(template)))
		for i := range batches {
			batches[i] = slices.Clone(template)
		}
		ctx := context.Background()
		b.SetBytes(int64(len(template)))
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			k := i % len(batches)
			if k == 0 {
				b.StopTimer()
				applyRetention(b, l)
				next := l.LogEndOffset()
				for _, batch := range batches {
					batch.Stamp(next, 3, time.Now().UnixMilli())
					next = batch.NextOffset()
				}
				b.StartTimer()
			}
			_, durable, err := l.WriteExact(batches[k])
			if err == nil {
				err = durable(ctx)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkLogRead is Log.Read of one batch into a reused buffer, the
// batches read in order, from a log of 32 MiB in the page cache: a
// follower's catch-up or a consumer's fetch, from the log's side.
func BenchmarkLogRead(b *testing.B) {
	for _, n := range benchRecordCounts {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			l := openMicroLog(b, logtest.NoSyncFS{})
			batch := benchBatch(b, n)
			ctx := context.Background()
			for written := 0; written < 32<<20; written += len(batch) {
				_, err := l.Append(ctx, batch, 3)
				require.NoError(b, err)
			}
			end := l.LogEndOffset()
			buf := make([]byte, len(batch))
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			for off := int64(0); b.Loop(); {
				out, err := l.Read(ctx, off, len(batch), end, buf)
				if err != nil || len(out) != len(batch) {
					b.Fatalf("read %d bytes at offset %d, want %d: %v", len(out), off, len(batch), err)
				}
				if off = record.Batch(out).NextOffset(); off == end {
					off = 0
				}
			}
		})
	}
}
