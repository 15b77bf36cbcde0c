package storage_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"gostream/record"
	"gostream/storage"
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
