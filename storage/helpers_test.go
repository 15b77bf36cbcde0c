package storage_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"gostream/record"
	"gostream/storage"
)

// testWriter sends log lines to t.Log, so they show only when a test fails.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func testLogger(t testing.TB) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Debug, Output: testWriter{t}})
}

// clock is a fake time source for Options.Now.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.UnixMilli(1_700_000_000_000)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// openLog opens a log in dir with a test logger, and closes it at cleanup.
func openLog(t testing.TB, dir string, opts storage.Options) *storage.Log {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	l, err := storage.Open(dir, opts)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l
}

func ctxFor(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// sizedBatch returns a batch of one record with a null key whose encoded
// size is exactly size bytes.
func sizedBatch(t testing.TB, size int, tag byte) record.Batch {
	t.Helper()
	const overhead = record.HeaderSize + 12 // one record, null key, no headers
	require.GreaterOrEqual(t, size, overhead)
	b, err := record.AppendBatch(nil, []record.Record{{Value: bytes.Repeat([]byte{tag}, size-overhead)}})
	require.NoError(t, err)
	require.Len(t, b, size)
	return b
}

// randomBatch returns a batch of 1 to maxRecords records with random keys,
// values up to maxValue bytes, and sometimes headers.
func randomBatch(t testing.TB, rng *rand.Rand, maxRecords, maxValue int) record.Batch {
	t.Helper()
	recs := make([]record.Record, 1+rng.IntN(maxRecords))
	for i := range recs {
		r := &recs[i]
		switch rng.IntN(3) {
		case 0: // null key
		case 1:
			r.Key = []byte{}
		default:
			r.Key = []byte(fmt.Sprintf("key-%d", rng.IntN(1000)))
		}
		r.Value = make([]byte, rng.IntN(maxValue+1))
		for j := range r.Value {
			r.Value[j] = byte(rng.Uint32())
		}
		if rng.IntN(4) == 0 {
			r.Headers = []record.Header{{Key: "h", Value: []byte{byte(rng.Uint32())}}}
		}
	}
	b, err := record.AppendBatch(nil, recs)
	require.NoError(t, err)
	return b
}

// appendSized appends n batches of size bytes to l at epoch 0, tagged first,
// first+1, ..., and returns them.
func appendSized(t testing.TB, l *storage.Log, n, size int, first byte) []record.Batch {
	t.Helper()
	batches := make([]record.Batch, n)
	for i := range batches {
		batches[i] = sizedBatch(t, size, first+byte(i))
		mustAppend(t, l, batches[i], 0)
	}
	return batches
}

func mustAppend(t testing.TB, l *storage.Log, b record.Batch, epoch int32) storage.AppendResult {
	t.Helper()
	res, err := l.Append(ctxFor(t), b, epoch)
	require.NoError(t, err)
	return res
}

// readAll returns every readable batch from the log start, as copies.
func readAll(t testing.TB, l *storage.Log) []record.Batch {
	t.Helper()
	var out []record.Batch
	for off := l.LogStartOffset(); ; {
		buf, err := l.Read(ctxFor(t), off, 1<<20, 1<<62, nil)
		require.NoError(t, err, "read at %d", off)
		if len(buf) == 0 {
			return out
		}
		require.NoError(t, record.Batches(buf, func(b record.Batch) bool {
			out = append(out, append(record.Batch(nil), b...))
			off = b.NextOffset()
			return true
		}))
	}
}

func concat(batches []record.Batch) []byte {
	var out []byte
	for _, b := range batches {
		out = append(out, b...)
	}
	return out
}

// segmentFiles returns the names of the .log files in dir, sorted.
func segmentFiles(t testing.TB, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.log"))
	require.NoError(t, err)
	for i := range m {
		m[i] = filepath.Base(m[i])
	}
	sort.Strings(m)
	return m
}

func segName(base int64) string { return fmt.Sprintf("%020d.log", base) }

// snapshotDir returns the content of every regular file under dir.
func snapshotDir(t testing.TB, dir string) map[string][]byte {
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
		rel, _ := filepath.Rel(dir, path)
		files[rel] = data
		return nil
	}))
	return files
}

// quarantined returns the contents of the files under the log's quarantine
// directory, by name.
func quarantined(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	qdir := filepath.Join(dir, storage.QuarantineDir)
	if _, err := os.Stat(qdir); os.IsNotExist(err) {
		return nil
	}
	return snapshotDir(t, qdir)
}
