package transport

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// apiReserve is a test API: FetchRequest -> FetchResponse with MaxBytes
// bytes, which its Reply reserves before allocating them, as a fetch does.
const apiReserve API = 103

// reservingHandler serves apiReserve, apiEcho and apiBlock (which holds
// its request until release is closed). allocated counts the Replies that
// allocated their response.
func reservingHandler(allocated *atomic.Int64, release <-chan struct{}) Handler {
	return HandlerFunc(func(ctx context.Context, req *Request) Reply {
		switch API(req.API) {
		case apiReserve:
			var r FetchRequest
			if err := Unmarshal(req.Body, &r); err != nil {
				return Immediate(nil, err)
			}
			return func(ctx context.Context) (Message, error) {
				if err := req.Reserve(ctx, int(r.MaxBytes)); err != nil {
					return nil, err
				}
				allocated.Add(1)
				return &FetchResponse{Batches: make([]byte, r.MaxBytes)}, nil
			}
		case apiBlock:
			return func(ctx context.Context) (Message, error) {
				select {
				case <-release:
					return &Empty{}, nil
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
		}
		return testHandler(nil).Handle(ctx, req)
	})
}

func TestFrameOverTheLimitIsAnsweredAndTheConnectionGoesOn(t *testing.T) {
	const maxBatch = 64 << 10
	var handled atomic.Int64
	s, addr := startServer(t, ServerConfig{MaxBatchBytes: maxBatch}, testHandler(&handled))
	require.Equal(t, maxBatch+FrameAllowance, s.FrameLimit())
	c := dial(t, addr)

	big := &ProduceRequest{Topic: "t", Batch: make([]byte, s.FrameLimit())}
	err := c.Call(testContext(t), apiEcho, big, nil)
	require.ErrorIs(t, err, ErrMessageTooLarge)
	assert.Contains(t, err.Error(), fmt.Sprintf("MessageTooLarge: a request of %d bytes exceeds the limit of %d bytes (the cluster's batch limit of %d bytes, --max-batch-bytes, plus %d for headers)",
		FrameHeaderSize+big.EncodedSize(), s.FrameLimit(), maxBatch, FrameAllowance))
	assert.Zero(t, handled.Load(), "the handler never sees a frame over the limit")
	assert.NoError(t, c.Err(), "the connection stays open")
	echo(t, c, "after the big one")
	assert.Equal(t, int64(1), handled.Load())

	// A frame exactly at the limit is read and handled.
	atLimit := &ProduceRequest{Topic: "t", Batch: make([]byte, s.FrameLimit()-FrameHeaderSize-big.EncodedSize()+len(big.Batch))}
	err = c.Call(testContext(t), apiEcho, atLimit, nil)
	assert.ErrorIs(t, err, ErrInvalidRequest, "handled: the echo handler cannot decode it")
	assert.Equal(t, int64(2), handled.Load())
}

func TestBatchTooLargeWording(t *testing.T) {
	err := BatchTooLarge(5242926, 4194304)
	assert.ErrorIs(t, err, ErrMessageTooLarge)
	assert.Equal(t, "MessageTooLarge: a batch of 5242926 bytes exceeds the cluster's limit of 4194304 bytes (--max-batch-bytes)", ToWire(err).Message)
}

// TestConnectionMemoryStopsAReaderThatNeverReads pipelines requests whose
// responses are large on a connection that never reads them: the Replies
// wait for the connection's memory, which the unwritten responses hold,
// and the server's memory in use stays within the connection's share,
// while another connection is served at once.
func TestConnectionMemoryStopsAReaderThatNeverReads(t *testing.T) {
	const (
		maxBatch = 256 << 10
		connMem  = 1 << 20
		respSize = 200 << 10
	)
	var allocated atomic.Int64
	s, addr := startServer(t, ServerConfig{MaxBatchBytes: maxBatch, ConnMemoryBytes: connMem, WriteTimeout: 2 * time.Second},
		reservingHandler(&allocated, nil))
	good := dial(t, addr)

	nc := dialRaw(t, addr)
	require.NoError(t, nc.(*net.TCPConn).SetReadBuffer(4<<10))
	var stream []byte
	const n = 128 // more than the kernel's socket buffers hold
	for id := uint32(1); id <= n; id++ {
		stream = append(stream, requestFrame(apiReserve, id, &FetchRequest{MaxBytes: respSize})...)
	}
	_, err := nc.Write(stream)
	require.NoError(t, err)

	// The kernel's buffers take a few responses; the rest wait for memory.
	require.Eventually(t, func() bool { return allocated.Load() >= connMem/respSize }, 5*time.Second, 5*time.Millisecond)
	assert.Never(t, func() bool { return s.MemoryInUse() > connMem }, 500*time.Millisecond, 5*time.Millisecond,
		"the connection's memory bounds what its Replies allocate")
	t.Logf("allocated %d of %d responses, %d bytes in use", allocated.Load(), n, s.MemoryInUse())
	assert.Less(t, allocated.Load(), int64(n/2), "the rest wait for the responses before them to be written")

	start := time.Now()
	echo(t, good, "another connection")
	assert.Less(t, time.Since(start), time.Second)

	// Past WriteTimeout the server gives up on the connection and its
	// memory comes back.
	require.Eventually(t, func() bool { return s.Conns() == 1 && s.MemoryInUse() == 0 }, 10*time.Second, 10*time.Millisecond)
}

// TestConnectionMemoryStopsReadingBodies pipelines large requests that
// are never answered: the server stops reading the connection once their
// bodies fill its share, so TCP pushes back on that client, and it reads
// on once they are answered, however long that took.
func TestConnectionMemoryStopsReadingBodies(t *testing.T) {
	const (
		maxBatch = 256 << 10
		connMem  = 1 << 20
		bodySize = 200 << 10
	)
	release := make(chan struct{})
	var handled atomic.Int64
	h := HandlerFunc(func(ctx context.Context, req *Request) Reply {
		handled.Add(1)
		return reservingHandler(nil, release).Handle(ctx, req)
	})
	s, addr := startServer(t, ServerConfig{MaxBatchBytes: maxBatch, ConnMemoryBytes: connMem, ReadTimeout: 300 * time.Millisecond}, h)
	c := dial(t, addr)

	const n = 20
	errs := make(chan error, n)
	for i := range n {
		go func() {
			req := &ProduceRequest{Topic: fmt.Sprint(i), Batch: make([]byte, bodySize)}
			errs <- c.Call(testContext(t), apiBlock, req, nil)
		}()
	}
	require.Eventually(t, func() bool { return handled.Load() == connMem/bodySize }, 5*time.Second, 5*time.Millisecond)
	assert.Never(t, func() bool { return handled.Load() > connMem/bodySize }, 4*300*time.Millisecond, 10*time.Millisecond,
		"no body is read while the connection's share is spent")
	assert.LessOrEqual(t, s.MemoryInUse(), int64(connMem))

	// Waiting for memory longer than ReadTimeout is not the peer's delay:
	// the connection is still open, and every request gets its answer.
	close(release)
	for range n {
		select {
		case err := <-errs:
			require.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Fatal("calls did not complete")
		}
	}
	assert.Equal(t, int64(n), handled.Load())
	assert.NoError(t, c.Err())
	require.Eventually(t, func() bool { return s.MemoryInUse() == 0 }, 5*time.Second, 5*time.Millisecond)
}

// TestServerMemoryRefusesWithBusy fills the server's memory from two
// connections: a large request of a third waits MemoryWait and is refused
// with ErrBusy, unread and unhandled, while its small requests are served.
func TestServerMemoryRefusesWithBusy(t *testing.T) {
	const (
		maxBatch = 900 << 10
		mem      = 2 << 20
		bodySize = 900 << 10
	)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	var handled atomic.Int64
	h := HandlerFunc(func(ctx context.Context, req *Request) Reply {
		handled.Add(1)
		return reservingHandler(new(atomic.Int64), release).Handle(ctx, req)
	})
	var mu sync.Mutex
	var refusals []Refusal
	cfg := ServerConfig{MaxBatchBytes: maxBatch, MemoryBytes: mem, MemoryWait: 200 * time.Millisecond,
		OnRefused: func(r Refusal) { mu.Lock(); refusals = append(refusals, r); mu.Unlock() }}
	_, addr := startServer(t, cfg, h)

	for range 2 {
		c := dial(t, addr)
		go c.Call(testContext(t), apiBlock, &ProduceRequest{Batch: make([]byte, bodySize)}, nil)
	}
	require.Eventually(t, func() bool { return handled.Load() == 2 }, 5*time.Second, 5*time.Millisecond)

	c := dial(t, addr)
	start := time.Now()
	err := c.Call(testContext(t), apiBlock, &ProduceRequest{Batch: make([]byte, bodySize)}, nil)
	require.ErrorIs(t, err, ErrBusy)
	assert.True(t, err.(*Error).Retriable)
	assert.Equal(t, fmt.Sprintf("Busy: the node's request memory (%d bytes) is in use; retry", mem), err.Error())
	assert.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond, "it waited MemoryWait first")
	assert.Equal(t, int64(2), handled.Load(), "a refused request is not handled")
	mu.Lock()
	require.Len(t, refusals, 1)
	assert.Equal(t, LimitMemory, refusals[0].Limit)
	assert.Equal(t, int64(mem), refusals[0].Max)
	assert.Equal(t, c.nc.LocalAddr().String(), refusals[0].Addr)
	mu.Unlock()

	// Small requests, on that connection and on a new one, are served
	// from the room kept for them.
	echo(t, c, "small")
	start = time.Now()
	echo(t, dial(t, addr), "small, elsewhere")
	assert.Less(t, time.Since(start), 200*time.Millisecond, "no wait for memory")

	// A Reply's reservation is refused the same way.
	err = c.Call(testContext(t), apiReserve, &FetchRequest{MaxBytes: 600 << 10}, nil)
	assert.ErrorIs(t, err, ErrBusy)
}

// TestSplicedResponse checks that a large fetch response goes out without
// being copied into its frame, and that the message's buffer is given
// back only once the frame is written.
func TestSplicedResponse(t *testing.T) {
	s := NewServer(ServerConfig{}, testHandler(nil))
	c := &serverConn{s: s}
	req := &Request{Frame: Frame{API: uint16(APIFetch), Version: Version1, CorrelationID: 9}}
	batches := bytes.Repeat([]byte{7}, 1<<20)
	released := 0
	m := &FetchResponse{HighWatermark: 5, LogStartOffset: 1, Batches: batches, Done: func() { released++ }}

	resp := c.build(req, m, nil)
	require.Len(t, resp.bufs, 2)
	assert.Same(t, &batches[0], &resp.bufs[1][0], "the batches are written from where they lie")
	assert.Zero(t, released, "the buffer is still needed")
	f, err := ReadFrame(bytes.NewReader(bytes.Join(resp.bufs, nil)), DefaultMaxFrameBytes)
	require.NoError(t, err)
	assert.Equal(t, uint32(9), f.CorrelationID)
	rest, werr, err := SplitResponse(f.Body)
	require.NoError(t, err)
	require.Nil(t, werr)
	var got FetchResponse
	require.NoError(t, Unmarshal(rest, &got))
	assert.Equal(t, batches, got.Batches)
	resp.release()
	assert.Equal(t, 1, released)

	small := &FetchResponse{Batches: []byte("abc"), Done: func() { released++ }}
	resp = c.build(req, small, nil)
	assert.Len(t, resp.bufs, 1, "a small response is copied")
	assert.Equal(t, 2, released, "and its buffer given back at once")
	assert.Nil(t, resp.release)

	// Over the wire, with the buffer given back after the write.
	var dones atomic.Int64
	h := HandlerFunc(func(ctx context.Context, req *Request) Reply {
		return Immediate(&FetchResponse{Batches: batches, Done: func() { dones.Add(1) }}, nil)
	})
	_, addr := startServer(t, ServerConfig{}, h)
	conn := dial(t, addr)
	var out FetchResponse
	require.NoError(t, conn.Call(testContext(t), APIFetch, &FetchRequest{}, &out))
	assert.Equal(t, batches, out.Batches)
	require.Eventually(t, func() bool { return dones.Load() == 1 }, 5*time.Second, time.Millisecond)
}

// dialFrom dials addr from the local IP address from (any of 127/8 works
// on Linux loopback).
func dialFrom(t *testing.T, from, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	nc, err := d.Dial("tcp", addr)
	if err == nil {
		t.Cleanup(func() { nc.Close() })
	}
	return nc, err
}

func TestServerMaxConnsPerAddr(t *testing.T) {
	logger, logs := testLogger(t)
	var mu sync.Mutex
	var refusals []Refusal
	cfg := ServerConfig{MaxConnsPerAddr: 2, MaxConns: 4, Logger: logger,
		OnRefused: func(r Refusal) { mu.Lock(); refusals = append(refusals, r); mu.Unlock() }}
	s, addr := startServer(t, cfg, testHandler(nil))
	a, b := dial(t, addr), dial(t, addr)
	echo(t, a, "a")
	echo(t, b, "b")

	// A third from the same address is closed at once, over and over; the
	// log says so once.
	for range 5 {
		extra := dialRaw(t, addr)
		expectClosed(t, extra, 2*time.Second)
	}
	assert.Equal(t, 1, strings.Count(logs.String(), "too many connections"), "refusals are logged at a bounded rate")
	assert.Contains(t, logs.String(), "limit=per-address")
	mu.Lock()
	require.Len(t, refusals, 5)
	assert.Equal(t, Refusal{Limit: LimitConnsPerAddr, Addr: "127.0.0.1", Max: 2}, refusals[0])
	mu.Unlock()

	// Another address is served.
	other, err := dialFrom(t, "127.0.0.2", addr)
	require.NoError(t, err)
	_, err = other.Write(requestFrame(apiEcho, 1, &TopicRequest{Name: "other"}))
	require.NoError(t, err)
	require.NoError(t, other.SetReadDeadline(time.Now().Add(5*time.Second)))
	f, err := ReadFrame(other, DefaultMaxFrameBytes)
	require.NoError(t, err)
	assert.Equal(t, uint32(1), f.CorrelationID)

	// The total limit holds across addresses.
	_, err = dialFrom(t, "127.0.0.3", addr)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return s.Conns() == 4 }, 5*time.Second, 5*time.Millisecond)
	over, err := dialFrom(t, "127.0.0.4", addr)
	require.NoError(t, err)
	expectClosed(t, over, 2*time.Second)
	mu.Lock()
	assert.Equal(t, Refusal{Limit: LimitConns, Addr: "127.0.0.4", Max: 4}, refusals[len(refusals)-1])
	mu.Unlock()

	// A connection that closes makes room for its address.
	require.NoError(t, b.Close())
	require.Eventually(t, func() bool { return s.Conns() == 3 }, 5*time.Second, 5*time.Millisecond)
	echo(t, dial(t, addr), "room again")
}

func TestLimitListener(t *testing.T) {
	var refused atomic.Int64
	lim := NewConnLimiter(ConnLimits{MaxConnsPerAddr: 1, OnRefused: func(Refusal) { refused.Add(1) }})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) })}
	go srv.Serve(LimitListener(ln, lim))
	t.Cleanup(func() { srv.Close() })

	first := dialRaw(t, ln.Addr().String())
	_, err = first.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	require.NoError(t, err)
	buf := make([]byte, 512)
	require.NoError(t, first.SetReadDeadline(time.Now().Add(5*time.Second)))
	n, err := first.Read(buf)
	require.NoError(t, err)
	assert.Contains(t, string(buf[:n]), "200 OK")
	assert.Equal(t, 1, lim.Conns())

	second := dialRaw(t, ln.Addr().String())
	expectClosed(t, second, 2*time.Second)
	assert.Equal(t, int64(1), refused.Load())

	require.NoError(t, first.Close())
	require.Eventually(t, func() bool { return lim.Conns() == 0 }, 5*time.Second, 5*time.Millisecond,
		"closing a connection releases it")
}
