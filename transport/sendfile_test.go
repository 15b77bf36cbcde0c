package transport

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	apiFile  API = 110 // FetchRequest -> FetchResponse whose File is the test file's [Offset, Offset+MaxBytes)
	apiBytes API = 111 // the same, as Batches read from the file
)

// fileHandler answers apiFile and apiBytes from f, and records whether
// each request's connection sends files, and how many answers were given
// back (Done).
type fileHandler struct {
	f        *os.File
	sendfile atomic.Int64 // requests that said SendFile
	done     atomic.Int64
}

func (h *fileHandler) Handle(ctx context.Context, req *Request) Reply {
	var r FetchRequest
	if err := Unmarshal(req.Body, &r); err != nil {
		return Immediate(nil, err)
	}
	if req.SendFile {
		h.sendfile.Add(1)
	}
	resp := &FetchResponse{HighWatermark: r.Offset, LogStartOffset: 3, Done: func() { h.done.Add(1) }}
	switch API(req.API) {
	case apiFile:
		resp.File = &FileRange{File: h.f, Offset: r.Offset, Length: int64(r.MaxBytes)}
	case apiBytes:
		// Read into a pooled buffer, given back once written, as a
		// fetch's read is.
		bp := readBufs.Get().(*[]byte)
		if cap(*bp) < int(r.MaxBytes) {
			*bp = make([]byte, r.MaxBytes)
		}
		resp.Batches = (*bp)[:r.MaxBytes]
		resp.Done = func() { readBufs.Put(bp); h.done.Add(1) }
		if _, err := h.f.ReadAt(resp.Batches, r.Offset); err != nil {
			return Immediate(nil, err)
		}
	}
	return Immediate(resp, nil)
}

var readBufs = sync.Pool{New: func() any { return new([]byte) }}

// testFile is a file of n random bytes, and its content.
func testFile(t *testing.T, n int) (*os.File, []byte) {
	t.Helper()
	content := make([]byte, n)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range content {
		content[i] = byte(rng.Uint32())
	}
	path := filepath.Join(t.TempDir(), "segment")
	require.NoError(t, os.WriteFile(path, content, 0o644))
	f, err := os.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return f, content
}

// TestFileRangeIsSentAsItsBytes: a response whose batches are a range of
// a file reads, on the wire, exactly as the same response carrying the
// bytes: byte for byte, over a plain connection (sendfile), where many
// ranges of one file are written at once, and over TLS (read into
// memory); each is given back once written.
func TestFileRangeIsSentAsItsBytes(t *testing.T) {
	f, content := testFile(t, 4<<20)
	h := &fileHandler{f: f}

	t.Run("plaintext, byte for byte", func(t *testing.T) {
		_, addr := startServer(t, ServerConfig{}, h)
		nc := dialRaw(t, addr)
		for i, size := range []int{0, 1, 70 << 10, 1 << 20, 3 << 20} {
			off := int64(len(content) - size - i)
			req := &FetchRequest{Offset: off, MaxBytes: int32(size)}
			_, err := nc.Write(append(requestFrame(apiFile, 1, req), requestFrame(apiBytes, 2, req)...))
			require.NoError(t, err)
			// The two are answered in either order.
			frames := map[uint32][]byte{}
			for range 2 {
				f, err := ReadFrame(nc, DefaultMaxFrameBytes)
				require.NoError(t, err)
				frames[f.CorrelationID] = f.Body
			}
			require.Equal(t, frames[2], frames[1], "%d bytes at %d", size, off)
			rest, werr, err := SplitResponse(frames[1])
			require.NoError(t, err)
			require.Nil(t, werr)
			var got FetchResponse
			require.NoError(t, Unmarshal(rest, &got))
			assert.True(t, bytes.Equal(content[off:off+int64(size)], got.Batches))
		}
		if runtime.GOOS == "linux" {
			assert.Equal(t, int64(10), h.sendfile.Load(), "a plain TCP connection sends files")
		}
		require.Eventually(t, func() bool { return h.done.Load() == 10 }, 5*time.Second, time.Millisecond)
	})

	t.Run("plaintext, many at once", func(t *testing.T) {
		h.done.Store(0)
		_, addr := startServer(t, ServerConfig{}, h)
		c := dial(t, addr)
		const n = 64
		errs := make(chan error, n)
		for i := range n {
			go func() {
				off, size := int64(i*61<<10), 64<<10+i*1000
				var got FetchResponse
				err := c.Call(testContext(t), apiFile, &FetchRequest{Offset: off, MaxBytes: int32(size)}, &got)
				if err == nil && !bytes.Equal(got.Batches, content[off:off+int64(size)]) {
					err = fmt.Errorf("call %d: wrong bytes", i)
				}
				errs <- err
			}()
		}
		for range n {
			require.NoError(t, <-errs)
		}
		require.Eventually(t, func() bool { return h.done.Load() == n }, 5*time.Second, time.Millisecond)
	})

	t.Run("TLS reads the range", func(t *testing.T) {
		h.done.Store(0)
		h.sendfile.Store(0)
		p := newTestPKI(t)
		_, addr := startServer(t, ServerConfig{TLS: p.serverTLS(false)}, h)
		c, err := Dial(testContext(t), addr, ConnConfig{TLS: p.clientTLS()})
		require.NoError(t, err)
		defer c.Close()
		for _, size := range []int{10, 1 << 20} {
			var got FetchResponse
			require.NoError(t, c.Call(testContext(t), apiFile, &FetchRequest{Offset: 5, MaxBytes: int32(size)}, &got))
			assert.Equal(t, content[5:5+size], got.Batches)
			assert.Equal(t, int64(3), got.LogStartOffset)
		}
		assert.Zero(t, h.sendfile.Load(), "a TLS connection does not send files")
		require.Eventually(t, func() bool { return h.done.Load() == 2 }, 5*time.Second, time.Millisecond, "given back once written")
	})
}

// TestFileRangeShortOrClosedClosesTheConnection: a range the file cannot
// fill is never sent with other bytes in its place. Over a plain
// connection its head is written already, so the connection closes; over
// TLS the read fails first and the request is answered with an error.
func TestFileRangeShortOrClosedClosesTheConnection(t *testing.T) {
	f, content := testFile(t, 1<<20)
	h := &fileHandler{f: f}
	_, addr := startServer(t, ServerConfig{}, h)
	c := dial(t, addr)
	var got FetchResponse
	err := c.Call(testContext(t), apiFile, &FetchRequest{Offset: int64(len(content)) - 100<<10, MaxBytes: 200 << 10}, &got)
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrBrokerNotAvailable, "the connection closed")
	require.Eventually(t, func() bool { return h.done.Load() == 1 }, 5*time.Second, time.Millisecond, "given back")

	p := newTestPKI(t)
	_, tlsAddr := startServer(t, ServerConfig{TLS: p.serverTLS(false)}, h)
	tc, err := Dial(testContext(t), tlsAddr, ConnConfig{TLS: p.clientTLS()})
	require.NoError(t, err)
	defer tc.Close()
	err = tc.Call(testContext(t), apiFile, &FetchRequest{Offset: int64(len(content)) - 100<<10, MaxBytes: 200 << 10}, &got)
	assert.ErrorIs(t, err, ErrUnknown)
	require.NoError(t, tc.Call(testContext(t), apiFile, &FetchRequest{MaxBytes: 10}, &got), "the connection goes on")
	assert.Equal(t, content[:10], got.Batches)
}

// BenchmarkFetchResponseWrite compares writing a fetch's batches over
// loopback from a buffer (read from the file first, as a fetch without
// sendfile does) and from the file (sendfile), by size: it places
// SendFileMin.
func BenchmarkFetchResponseWrite(b *testing.B) {
	for _, size := range []int{16 << 10, 64 << 10, 256 << 10, 1 << 20} {
		for _, api := range []API{apiBytes, apiFile} {
			name := map[API]string{apiBytes: "read", apiFile: "sendfile"}[api]
			b.Run(fmt.Sprintf("%s/%dKiB", name, size>>10), func(b *testing.B) {
				f := benchFile(b, 8<<20)
				_, addr := startServer(b, ServerConfig{}, &fileHandler{f: f})
				nc := dialRaw(b, addr)
				frame := requestFrame(api, 1, &FetchRequest{Offset: 4096, MaxBytes: int32(size)})
				answer := make([]byte, FrameLimit(DefaultMaxBatchBytes))
				b.SetBytes(int64(size))
				b.ReportAllocs()
				cpu := cpuTime()
				for b.Loop() {
					if _, err := nc.Write(frame); err != nil {
						b.Fatal(err)
					}
					if _, err := io.ReadFull(nc, answer[:4]); err != nil {
						b.Fatal(err)
					}
					if _, err := io.ReadFull(nc, answer[4:4+binary.BigEndian.Uint32(answer)]); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// cpuTime is the CPU time the process has used, user and system, in
// nanoseconds: client and server of a benchmark alike.
func cpuTime() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// benchFile is a file of n bytes.
func benchFile(b *testing.B, n int) *os.File {
	path := filepath.Join(b.TempDir(), "segment")
	require.NoError(b, os.WriteFile(path, bytes.Repeat([]byte{7}, n), 0o644))
	f, err := os.Open(path)
	require.NoError(b, err)
	b.Cleanup(func() { f.Close() })
	return f
}
