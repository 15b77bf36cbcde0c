package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// APIs of the test handlers.
const (
	apiEcho  API = 100 // TopicRequest -> the same TopicRequest
	apiBig   API = 101 // FetchRequest -> FetchResponse with MaxBytes bytes
	apiBlock API = 102 // Reply waits until the connection's context ends
)

// logWriter sends log lines to t.Log, and keeps them for assertions.
type logWriter struct {
	t  testing.TB
	mu sync.Mutex
	b  strings.Builder
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	return len(p), nil
}

func (w *logWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

func testLogger(t testing.TB) (hclog.Logger, *logWriter) {
	w := &logWriter{t: t}
	return hclog.New(&hclog.LoggerOptions{Name: "transport", Level: hclog.Debug, Output: w}), w
}

// startServer serves h on a loopback port until the test ends.
func startServer(t testing.TB, cfg ServerConfig, h Handler) (*Server, string) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger, _ = testLogger(t)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := NewServer(cfg, h)
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	t.Cleanup(func() {
		assert.NoError(t, s.Close())
		select {
		case err := <-served:
			assert.NoError(t, err, "Serve after Close")
		case <-time.After(5 * time.Second):
			t.Error("Serve did not return after Close")
		}
	})
	return s, ln.Addr().String()
}

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func dial(t testing.TB, addr string) *Conn {
	t.Helper()
	c, err := Dial(testContext(t), addr, ConnConfig{})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func dialRaw(t testing.TB, addr string) net.Conn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	return nc
}

// testHandler serves the test APIs and counts the requests it was handed.
func testHandler(handled *atomic.Int64) Handler {
	return HandlerFunc(func(ctx context.Context, req *Request) Reply {
		if handled != nil {
			handled.Add(1)
		}
		switch API(req.API) {
		case apiEcho:
			var r TopicRequest
			if err := Unmarshal(req.Body, &r); err != nil {
				return Immediate(nil, fmt.Errorf("%w: %v", ErrInvalidRequest, err))
			}
			return Immediate(&r, nil)
		case apiBig:
			var r FetchRequest
			if err := Unmarshal(req.Body, &r); err != nil {
				return Immediate(nil, fmt.Errorf("%w: %v", ErrInvalidRequest, err))
			}
			return Immediate(&FetchResponse{HighWatermark: r.Offset, Batches: make([]byte, r.MaxBytes)}, nil)
		case apiBlock:
			return func(ctx context.Context) (Message, error) {
				<-ctx.Done()
				return nil, ctx.Err()
			}
		}
		return Immediate(nil, fmt.Errorf("%w: API %d", ErrUnsupportedVersion, req.API))
	})
}

func echo(t testing.TB, c *Conn, name string) {
	t.Helper()
	var got TopicRequest
	require.NoError(t, c.Call(testContext(t), apiEcho, &TopicRequest{Name: name}, &got))
	require.Equal(t, name, got.Name)
}

// expectClosed reads from nc, discarding data, until the peer closes it.
// It fails if that takes longer than within.
func expectClosed(t testing.TB, nc net.Conn, within time.Duration) {
	t.Helper()
	require.NoError(t, nc.SetReadDeadline(time.Now().Add(within)))
	buf := make([]byte, 64<<10)
	for {
		_, err := nc.Read(buf)
		if err == nil {
			continue
		}
		require.Falsef(t, errors.Is(err, os.ErrDeadlineExceeded), "the server did not close the connection within %v", within)
		if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("read: want EOF or reset, got %v", err)
		}
		return
	}
}

func requestFrame(api API, id uint32, m Message) []byte {
	return AppendFrame(nil, Frame{API: uint16(api), Version: Version1, CorrelationID: id, Body: Marshal(nil, m)})
}

func TestCallsCompleteOutOfOrder(t *testing.T) {
	const n = 50
	gates := make(map[string]chan struct{})
	for i := range n {
		gates[fmt.Sprint(i)] = make(chan struct{})
	}
	var handled atomic.Int64
	h := HandlerFunc(func(ctx context.Context, req *Request) Reply {
		var r TopicRequest
		if err := Unmarshal(req.Body, &r); err != nil {
			return Immediate(nil, err)
		}
		handled.Add(1)
		return func(ctx context.Context) (Message, error) {
			select {
			case <-gates[r.Name]:
				return &TopicRequest{Name: "reply to " + r.Name}, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	})
	_, addr := startServer(t, ServerConfig{}, h)
	c := dial(t, addr)

	type result struct {
		name, got string
		err       error
	}
	results := make(chan result, n)
	for i := range n {
		go func() {
			name := fmt.Sprint(i)
			var got TopicRequest
			err := c.Call(testContext(t), apiEcho, &TopicRequest{Name: name}, &got)
			results <- result{name, got.Name, err}
		}()
	}
	require.Eventually(t, func() bool { return handled.Load() == n }, 5*time.Second, 5*time.Millisecond,
		"every request is handed over while none has been answered")

	// The last one is answered first, while all others still wait.
	close(gates["49"])
	select {
	case r := <-results:
		require.NoError(t, r.err)
		assert.Equal(t, "49", r.name)
		assert.Equal(t, "reply to 49", r.got)
	case <-time.After(5 * time.Second):
		t.Fatal("the released call did not complete")
	}
	for i := n - 2; i >= 0; i-- {
		close(gates[fmt.Sprint(i)])
	}
	seen := map[string]bool{"49": true}
	for range n - 1 {
		select {
		case r := <-results:
			require.NoError(t, r.err)
			assert.Equal(t, "reply to "+r.name, r.got, "each call gets its own response")
			seen[r.name] = true
		case <-time.After(5 * time.Second):
			t.Fatal("calls did not complete")
		}
	}
	assert.Len(t, seen, n)
}

// TestHandleInArrivalOrder sends pipelined requests in one write and checks
// that Handle sees them in order, without waiting for earlier Replies,
// while the Replies finish in another order.
func TestHandleInArrivalOrder(t *testing.T) {
	const n = 100
	gates := make([]chan struct{}, n+1)
	for i := range gates {
		gates[i] = make(chan struct{})
	}
	var mu sync.Mutex
	var arrivals []uint32
	h := HandlerFunc(func(ctx context.Context, req *Request) Reply {
		mu.Lock()
		arrivals = append(arrivals, req.CorrelationID)
		mu.Unlock()
		id := req.CorrelationID
		return func(ctx context.Context) (Message, error) {
			select {
			case <-gates[id]:
				return &TopicRequest{Name: fmt.Sprint(id)}, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	})
	_, addr := startServer(t, ServerConfig{}, h)
	nc := dialRaw(t, addr)

	var stream []byte
	for id := uint32(1); id <= n; id++ {
		stream = append(stream, requestFrame(apiEcho, id, &TopicRequest{Name: "x"})...)
	}
	_, err := nc.Write(stream)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(arrivals) == n
	}, 5*time.Second, 5*time.Millisecond, "Handle must not wait for earlier Replies")
	mu.Lock()
	for i, id := range arrivals {
		assert.Equal(t, uint32(i+1), id, "Handle order")
	}
	mu.Unlock()

	require.NoError(t, nc.SetReadDeadline(time.Now().Add(10*time.Second)))
	readResponse := func() (uint32, string) {
		f, err := ReadFrame(nc, DefaultMaxFrameBytes)
		require.NoError(t, err)
		rest, werr, err := SplitResponse(f.Body)
		require.NoError(t, err)
		require.Nil(t, werr)
		var r TopicRequest
		require.NoError(t, Unmarshal(rest, &r))
		assert.Equal(t, uint16(apiEcho), f.API)
		assert.Equal(t, uint16(Version1), f.Version)
		return f.CorrelationID, r.Name
	}
	close(gates[n])
	id, name := readResponse()
	assert.Equal(t, uint32(n), id, "the last request is answered first")
	assert.Equal(t, fmt.Sprint(n), name)
	for id := n - 1; id >= 1; id-- {
		close(gates[id])
	}
	seen := map[uint32]bool{n: true}
	for range n - 1 {
		id, name := readResponse()
		assert.Equal(t, fmt.Sprint(id), name, "the response carries its request's correlation id")
		seen[id] = true
	}
	assert.Len(t, seen, n)
}

func TestServerMaxInFlight(t *testing.T) {
	release := make(chan struct{})
	var handled atomic.Int64
	h := HandlerFunc(func(ctx context.Context, req *Request) Reply {
		handled.Add(1)
		return func(ctx context.Context) (Message, error) {
			select {
			case <-release:
				return nil, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	})
	_, addr := startServer(t, ServerConfig{MaxInFlight: 4}, h)
	nc := dialRaw(t, addr)
	var stream []byte
	for id := uint32(1); id <= 10; id++ {
		stream = append(stream, requestFrame(apiEcho, id, &Empty{})...)
	}
	_, err := nc.Write(stream)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return handled.Load() == 4 }, 5*time.Second, 5*time.Millisecond)
	assert.Never(t, func() bool { return handled.Load() > 4 }, 200*time.Millisecond, 10*time.Millisecond,
		"no more than MaxInFlight requests are served at once")
	close(release)
	require.NoError(t, nc.SetReadDeadline(time.Now().Add(10*time.Second)))
	for range 10 {
		_, err := ReadFrame(nc, DefaultMaxFrameBytes)
		require.NoError(t, err)
	}
	assert.Equal(t, int64(10), handled.Load())
}

// Long polls (Request.Waits) queued on one connection do not hold up its
// other requests: with more long polls waiting than MaxInFlight, a call
// on the same connection is answered at once, and no call times out on a
// connection presumed dead. Before, the long polls took every in-flight
// slot, the server read nothing more, and the call behind them waited
// until it timed out.
func TestServerWaitingRequestsDoNotHoldUpOthers(t *testing.T) {
	release := make(chan struct{})
	var waiting atomic.Int64
	h := HandlerFunc(func(ctx context.Context, req *Request) Reply {
		if API(req.API) != apiBlock {
			return testHandler(nil).Handle(ctx, req)
		}
		req.Waits = true
		return func(ctx context.Context) (Message, error) {
			waiting.Add(1)
			defer waiting.Add(-1)
			select {
			case <-release:
				return &Empty{}, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	})
	_, addr := startServer(t, ServerConfig{MaxInFlight: 4, MaxWaiting: 16}, h)
	c := dial(t, addr)
	ctx := testContext(t)
	var polls []*Pending
	for range 12 {
		p, err := c.Send(ctx, apiBlock, &Empty{})
		require.NoError(t, err)
		polls = append(polls, p)
	}
	require.Eventually(t, func() bool { return waiting.Load() == 12 }, 5*time.Second, 5*time.Millisecond,
		"12 long polls wait at once, past MaxInFlight")
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var echo TopicRequest
	require.NoError(t, c.Call(cctx, apiEcho, &TopicRequest{Name: "t"}, &echo), "a call behind the long polls")
	assert.Equal(t, "t", echo.Name)
	// Past MaxWaiting, a long poll holds an in-flight slot, as any request.
	for range 6 {
		p, err := c.Send(ctx, apiBlock, &Empty{})
		require.NoError(t, err)
		polls = append(polls, p)
	}
	require.Eventually(t, func() bool { return waiting.Load() == 18 }, 5*time.Second, 5*time.Millisecond)
	close(release)
	for _, p := range polls {
		require.NoError(t, p.Wait(ctx, nil))
	}
	require.NoError(t, c.Err(), "the connection stays open")
}

func TestServerErrorsComeBackAsSentinels(t *testing.T) {
	_, addr := startServer(t, ServerConfig{}, testHandler(nil))
	c := dial(t, addr)

	err := c.Call(testContext(t), API(999), &Empty{}, nil)
	assert.ErrorIs(t, err, ErrUnsupportedVersion)
	var we *Error
	require.ErrorAs(t, err, &we)
	assert.Equal(t, "UnsupportedVersion: API 999", we.Message)

	// A body the handler cannot decode.
	err = c.Call(testContext(t), apiEcho, &FetchRequest{Topic: "x"}, nil)
	assert.ErrorIs(t, err, ErrInvalidRequest)

	// A response that does not decode as the message the caller expects.
	var wrong FetchResponse
	err = c.Call(testContext(t), apiEcho, &TopicRequest{Name: "x"}, &wrong)
	assert.ErrorIs(t, err, ErrMalformed)
	assert.Nil(t, c.Err(), "a response that does not decode fails that call only")
	echo(t, c, "still fine")
}

func TestServerResponseTooLarge(t *testing.T) {
	_, addr := startServer(t, ServerConfig{MaxBatchBytes: 64 << 10}, testHandler(nil))
	c := dial(t, addr)
	var resp FetchResponse
	err := c.Call(testContext(t), apiBig, &FetchRequest{MaxBytes: 128 << 10}, &resp)
	assert.ErrorIs(t, err, ErrMessageTooLarge)
	require.NoError(t, c.Call(testContext(t), apiBig, &FetchRequest{MaxBytes: 64 << 10}, &resp))
	assert.Len(t, resp.Batches, 64<<10)
}

// TestServerClosesBadConnections sends each kind of bad input on its own
// connection and checks that the server closes that connection, says why in
// its log, and goes on serving a well-behaved connection.
func TestServerClosesBadConnections(t *testing.T) {
	logger, logs := testLogger(t)
	cfg := ServerConfig{
		MaxBatchBytes: 1 << 20,
		ReadTimeout:   500 * time.Millisecond,
		WriteTimeout:  300 * time.Millisecond,
		Logger:        logger,
	}
	s, addr := startServer(t, cfg, testHandler(nil))
	good := dial(t, addr)
	echo(t, good, "before")

	body := Marshal(nil, &TopicRequest{Name: strings.Repeat("z", 1000)})
	slowFrame := AppendFrame(nil, Frame{API: uint16(apiEcho), Version: Version1, CorrelationID: 1, Body: body})

	// trickle writes b one byte every 100ms until stop or a write fails.
	trickle := func(t *testing.T, nc net.Conn, b []byte) {
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for _, c := range b {
				if _, err := nc.Write([]byte{c}); err != nil {
					return
				}
				select {
				case <-time.After(100 * time.Millisecond):
				case <-stop:
					return
				}
			}
		}()
		t.Cleanup(func() { close(stop); <-done })
	}

	cases := []struct {
		name    string
		send    func(t *testing.T, nc net.Conn)
		within  time.Duration // the server closes the connection this soon
		atLeast time.Duration // and not before
		log     string        // the reason in the server's log
	}{
		{
			name: "garbage",
			send: func(t *testing.T, nc net.Conn) {
				nc.Write([]byte("\xde\xad\xbe\xef garbage \x00\x01\x02\x03 more garbage"))
			},
			within: 2 * time.Second,
			log:    "length 3735928559",
		},
		{
			name:   "length below the header size",
			send:   func(t *testing.T, nc net.Conn) { nc.Write(frameWithLength(3, 1, 2, 3)) },
			within: 2 * time.Second,
			log:    "length 3 outside",
		},
		{
			name:   "HTTP request",
			send:   func(t *testing.T, nc net.Conn) { nc.Write([]byte("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")) },
			within: 2 * time.Second,
			log:    "looks like HTTP",
		},
		{
			name:   "TLS ClientHello",
			send:   func(t *testing.T, nc net.Conn) { nc.Write([]byte("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")) },
			within: 2 * time.Second,
			log:    "a TLS client reached this plaintext listener",
		},
		{
			name:   "length over 1 GiB",
			send:   func(t *testing.T, nc net.Conn) { nc.Write(frameWithLength(1<<30+1, make([]byte, 100)...)) },
			within: 2 * time.Second,
			log:    fmt.Sprintf("length %d outside", 1<<30+1),
		},
		{
			name: "truncated frame, then the client closes",
			send: func(t *testing.T, nc net.Conn) {
				nc.Write(slowFrame[:100])
				require.NoError(t, nc.(*net.TCPConn).CloseWrite())
			},
			within: 2 * time.Second,
			log:    "closed inside a frame",
		},
		{
			name:    "slow frame: one byte every 100ms",
			send:    func(t *testing.T, nc net.Conn) { trickle(t, nc, slowFrame) },
			within:  1500 * time.Millisecond,
			atLeast: 400 * time.Millisecond,
			log:     "read deadline",
		},
		{
			// The next frame starts in the same segment as a request whose
			// Reply is pending, and stops: ReadTimeout still bounds it.
			name: "stalled frame behind a pending request",
			send: func(t *testing.T, nc net.Conn) {
				first := requestFrame(apiBlock, 1, &Empty{})
				nc.Write(append(first, slowFrame[:6]...))
			},
			within:  1500 * time.Millisecond,
			atLeast: 400 * time.Millisecond,
			log:     "read deadline",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nc := dialRaw(t, addr)
			require.Eventually(t, func() bool { return s.Conns() == 2 }, 5*time.Second, 5*time.Millisecond)
			start := time.Now()
			tc.send(t, nc)
			expectClosed(t, nc, tc.within)
			assert.GreaterOrEqual(t, time.Since(start), tc.atLeast)
			require.Eventually(t, func() bool { return s.Conns() == 1 }, 5*time.Second, 5*time.Millisecond)
			assert.Contains(t, logs.String(), tc.log)

			assert.NoError(t, good.Err(), "the well-behaved connection is not affected")
			echo(t, good, tc.name)
		})
	}

	t.Run("client sends many requests and never reads", func(t *testing.T) {
		nc := dialRaw(t, addr)
		require.NoError(t, nc.(*net.TCPConn).SetReadBuffer(8<<10))
		require.Eventually(t, func() bool { return s.Conns() == 2 }, 5*time.Second, 5*time.Millisecond)
		var stream []byte
		for id := uint32(1); id <= 64; id++ {
			stream = append(stream, requestFrame(apiBig, id, &FetchRequest{MaxBytes: 256 << 10})...)
		}
		_, err := nc.Write(stream)
		require.NoError(t, err)
		require.Eventually(t, func() bool { return s.Conns() == 1 }, 5*time.Second, 10*time.Millisecond,
			"the server closes a connection it cannot write to")
		// Draining megabytes through the small window would be slow; a
		// closed peer answers new data with a reset instead.
		require.Eventually(t, func() bool {
			_, err := nc.Write([]byte{0})
			return err != nil
		}, 5*time.Second, 10*time.Millisecond, "writes to the closed connection fail")
		assert.Contains(t, logs.String(), "cannot write response")
		assert.NoError(t, good.Err())
		echo(t, good, "after the reader that never reads")
	})
}

func TestServerMaxConns(t *testing.T) {
	logger, logs := testLogger(t)
	s, addr := startServer(t, ServerConfig{MaxConns: 2, Logger: logger}, testHandler(nil))
	a, b := dial(t, addr), dial(t, addr)
	echo(t, a, "a")
	echo(t, b, "b")
	require.Equal(t, 2, s.Conns())

	extra := dialRaw(t, addr)
	expectClosed(t, extra, 2*time.Second)
	assert.Contains(t, logs.String(), "too many connections")
	echo(t, a, "a still served")
	echo(t, b, "b still served")

	require.NoError(t, b.Close())
	require.Eventually(t, func() bool { return s.Conns() == 1 }, 5*time.Second, 5*time.Millisecond)
	echo(t, dial(t, addr), "a new connection fits again")
}

func TestServerIdleTimeout(t *testing.T) {
	const idle = 300 * time.Millisecond
	s, addr := startServer(t, ServerConfig{IdleTimeout: idle}, testHandler(nil))

	t.Run("an idle connection is closed", func(t *testing.T) {
		nc := dialRaw(t, addr)
		start := time.Now()
		expectClosed(t, nc, 3*time.Second)
		assert.GreaterOrEqual(t, time.Since(start), idle-50*time.Millisecond)
	})

	t.Run("a connection in use stays open", func(t *testing.T) {
		c := dial(t, addr)
		for range 10 {
			echo(t, c, "busy")
			assert.Never(t, func() bool { return c.Err() != nil }, idle/3, idle/30)
		}
	})

	t.Run("a connection with a call in flight is not idle", func(t *testing.T) {
		release := make(chan struct{})
		h := HandlerFunc(func(ctx context.Context, req *Request) Reply {
			return func(ctx context.Context) (Message, error) {
				select {
				case <-release:
					return &TopicRequest{Name: "late"}, nil
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
		})
		_, addr := startServer(t, ServerConfig{IdleTimeout: idle}, h)
		c := dial(t, addr)
		done := make(chan error, 1)
		go func() {
			var got TopicRequest
			done <- c.Call(testContext(t), apiEcho, &Empty{}, &got)
		}()
		assert.Never(t, func() bool { return c.Err() != nil }, 4*idle, idle/30,
			"a long poll longer than the idle timeout must not be cut off")
		close(release)
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(5 * time.Second):
			t.Fatal("call did not complete")
		}
		require.Eventually(t, func() bool { return c.Err() != nil }, 3*time.Second, 10*time.Millisecond,
			"idle once the reply is sent")
	})
	require.Eventually(t, func() bool { return s.Conns() == 0 }, 3*time.Second, 10*time.Millisecond)
}

// raiseFileLimit makes room for n more descriptors, or skips the test.
func raiseFileLimit(t *testing.T, n uint64) {
	var lim syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim))
	if lim.Cur >= n {
		return
	}
	if lim.Max < n {
		t.Skipf("needs %d file descriptors; the hard limit is %d", n, lim.Max)
	}
	old := lim
	lim.Cur = n
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skipf("needs %d file descriptors; cannot raise the limit from %d: %v", n, old.Cur, err)
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })
}

func TestServerManyIdleConnections(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 2,000 connections")
	}
	const n = 2000
	raiseFileLimit(t, 2*n+256)
	logger := hclog.NewNullLogger() // 2,000 connection lines are noise
	s, addr := startServer(t, ServerConfig{Logger: logger, MaxConnsPerAddr: n + 1}, testHandler(nil))

	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	conns := make([]net.Conn, 0, n)
	t.Cleanup(func() {
		for _, nc := range conns {
			nc.Close()
		}
	})
	for range n {
		nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
		require.NoError(t, err)
		conns = append(conns, nc)
	}
	require.Eventually(t, func() bool { return s.Conns() == n }, 10*time.Second, 10*time.Millisecond)
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	perConn := (int64(after.HeapInuse) - int64(before.HeapInuse)) / n
	t.Logf("heap per idle connection, both ends: %d bytes", perConn)
	assert.Less(t, perConn, int64(32<<10), "an idle connection should cost little memory")

	start := time.Now()
	c := dial(t, addr)
	echo(t, c, "newcomer")
	assert.Less(t, time.Since(start), time.Second, "a new client is served quickly")
	assert.Equal(t, n+1, s.Conns())

	for _, nc := range conns {
		nc.Close()
	}
	require.Eventually(t, func() bool { return s.Conns() == 1 }, 10*time.Second, 10*time.Millisecond)
}

// silentPeer accepts connections and never reads or answers. It returns
// its address.
func silentPeer(t *testing.T) string {
	ln := listenWindow(t, 4<<10)
	var mu sync.Mutex
	var accepted []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			accepted = append(accepted, nc)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, nc := range accepted {
			nc.Close()
		}
	})
	return ln.Addr().String()
}

func TestCallTimeout(t *testing.T) {
	t.Run("silent peer", func(t *testing.T) {
		c := dial(t, silentPeer(t))
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := c.Call(ctx, apiEcho, &TopicRequest{Name: "x"}, nil)
		assert.ErrorIs(t, err, ErrTimeout)
		assert.Less(t, time.Since(start), 2*time.Second)
		assert.NoError(t, c.Err(), "a timed-out call leaves the connection open")
	})

	t.Run("blocked handler: the connection stays usable", func(t *testing.T) {
		_, addr := startServer(t, ServerConfig{}, testHandler(nil))
		c := dial(t, addr)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := c.Call(ctx, apiBlock, &Empty{}, nil)
		assert.ErrorIs(t, err, ErrTimeout)
		assert.Less(t, time.Since(start), 2*time.Second)
		echo(t, c, "after a timeout")
	})

	t.Run("silent past SilentAfter: the connection is presumed dead and the pool dials anew", func(t *testing.T) {
		addr := silentPeer(t)
		pool := NewPool(ConnConfig{})
		defer pool.Close()
		c, err := pool.Get(context.Background(), addr)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), SilentAfter+300*time.Millisecond)
		defer cancel()
		err = c.Call(ctx, apiEcho, &TopicRequest{Name: "x"}, nil)
		assert.ErrorIs(t, err, ErrTimeout)
		assert.Error(t, c.Err(), "a connection silent for longer than SilentAfter stays open")
		c2, err := pool.Get(context.Background(), addr)
		require.NoError(t, err)
		assert.NotSame(t, c, c2, "the pool handed out the dead connection again")
	})

	t.Run("slow handler past SilentAfter while other calls are answered: the connection stays", func(t *testing.T) {
		_, addr := startServer(t, ServerConfig{}, testHandler(nil))
		c := dial(t, addr)
		errc := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), SilentAfter+300*time.Millisecond)
			defer cancel()
			errc <- c.Call(ctx, apiBlock, &Empty{}, nil)
		}()
		for {
			echo(t, c, "while another call waits")
			select {
			case err := <-errc:
				assert.ErrorIs(t, err, ErrTimeout)
				assert.NoError(t, c.Err(), "a connection that answers other calls was closed")
				echo(t, c, "after the slow call timed out")
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	})

	t.Run("canceled context", func(t *testing.T) {
		_, addr := startServer(t, ServerConfig{}, testHandler(nil))
		c := dial(t, addr)
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- c.Call(ctx, apiBlock, &Empty{}, nil) }()
		cancel()
		select {
		case err := <-errc:
			assert.ErrorIs(t, err, context.Canceled)
			assert.NotErrorIs(t, err, ErrTimeout)
		case <-time.After(5 * time.Second):
			t.Fatal("a canceled call did not return")
		}
		echo(t, c, "after a cancel")
	})

	t.Run("no deadline on the context: DefaultCallTimeout applies", func(t *testing.T) {
		c := dial(t, silentPeer(t))
		assert.Equal(t, DefaultCallTimeout, c.callTimeout)
		c.callTimeout = 200 * time.Millisecond // instead of waiting 30s
		start := time.Now()
		err := c.Call(context.Background(), apiEcho, &TopicRequest{Name: "x"}, nil)
		assert.ErrorIs(t, err, ErrTimeout)
		assert.Less(t, time.Since(start), 2*time.Second)
	})

	t.Run("a call is not held past its deadline by another call's stuck write", func(t *testing.T) {
		c := dial(t, silentPeer(t))
		bigDone := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			// Far more than the socket buffers hold: the write blocks.
			bigDone <- c.Call(ctx, apiEcho, &ProduceRequest{Batch: make([]byte, blockingWriteBytes(4<<10))}, nil)
		}()
		require.Eventually(t, c.writing, 5*time.Second, time.Millisecond)

		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := c.Call(ctx, apiEcho, &TopicRequest{Name: "small"}, nil)
		assert.ErrorIs(t, err, ErrTimeout)
		assert.Less(t, time.Since(start), 1500*time.Millisecond)

		select {
		case err := <-bigDone:
			assert.Error(t, err)
		case <-time.After(10 * time.Second):
			t.Fatal("the big call did not end at its deadline")
		}
	})
}

// writing reports whether a call is writing its request.
func (c *Conn) writing() bool { return len(c.wsem) == cap(c.wsem) }

func TestPendingCallsFailWhenServerCloses(t *testing.T) {
	var handled atomic.Int64
	s, addr := startServer(t, ServerConfig{}, testHandler(&handled))
	c := dial(t, addr)
	const n = 5
	errs := make(chan error, n)
	for range n {
		go func() { errs <- c.Call(testContext(t), apiBlock, &Empty{}, nil) }()
	}
	require.Eventually(t, func() bool { return handled.Load() == n }, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, s.Close())
	for range n {
		select {
		case err := <-errs:
			assert.ErrorIs(t, err, ErrConnClosed)
			assert.ErrorIs(t, err, ErrBrokerNotAvailable)
		case <-time.After(5 * time.Second):
			t.Fatal("a pending call did not fail")
		}
	}
	require.Eventually(t, func() bool { return c.Err() != nil }, 5*time.Second, 5*time.Millisecond)
	err := c.Call(testContext(t), apiEcho, &Empty{}, nil)
	assert.ErrorIs(t, err, ErrNotSent, "a call on a closed connection was never sent")
	assert.ErrorIs(t, err, ErrBrokerNotAvailable)
}

func TestPool(t *testing.T) {
	_, addr := startServer(t, ServerConfig{IdleTimeout: 200 * time.Millisecond}, testHandler(nil))
	p := NewPool(ConnConfig{})
	t.Cleanup(func() { p.Close() })

	var got TopicRequest
	require.NoError(t, p.Call(testContext(t), addr, apiEcho, &TopicRequest{Name: "one"}, &got))
	c1, err := p.Get(testContext(t), addr)
	require.NoError(t, err)
	c1again, err := p.Get(testContext(t), addr)
	require.NoError(t, err)
	assert.Same(t, c1, c1again, "one connection per address")

	// The server closes the idle connection; the pool dials a new one.
	require.Eventually(t, func() bool { return c1.Err() != nil }, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, p.Call(testContext(t), addr, apiEcho, &TopicRequest{Name: "two"}, &got))
	assert.Equal(t, "two", got.Name)
	c2, err := p.Get(testContext(t), addr)
	require.NoError(t, err)
	assert.NotSame(t, c1, c2)

	// A connection closed on the client side is replaced too.
	require.NoError(t, c2.Close())
	require.NoError(t, p.Call(testContext(t), addr, apiEcho, &TopicRequest{Name: "three"}, &got))
	assert.Equal(t, "three", got.Name)

	t.Run("unreachable address", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		dead := ln.Addr().String()
		ln.Close()
		err = p.Call(testContext(t), dead, apiEcho, &Empty{}, nil)
		assert.ErrorIs(t, err, ErrBrokerNotAvailable)
	})

	require.NoError(t, p.Close())
	require.NoError(t, p.Close(), "Close is idempotent")
	_, err = p.Get(testContext(t), addr)
	assert.ErrorIs(t, err, ErrConnClosed)
}

func TestServerCloseIsIdempotentAndLeaksNothing(t *testing.T) {
	before := runtime.NumGoroutine()

	var handled atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := NewServer(ServerConfig{}, testHandler(&handled))
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()

	var conns []*Conn
	for range 4 {
		c, err := Dial(testContext(t), ln.Addr().String(), ConnConfig{})
		require.NoError(t, err)
		conns = append(conns, c)
		echo(t, c, "hello")
	}
	pending := make(chan error, 2)
	for _, c := range conns[:2] {
		go func() { pending <- c.Call(testContext(t), apiBlock, &Empty{}, nil) }()
	}
	raw := dialRaw(t, ln.Addr().String())
	require.Eventually(t, func() bool { return handled.Load() == 4+2 && s.Conns() == 5 }, 5*time.Second, 5*time.Millisecond)

	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { assert.NoError(t, s.Close()) })
	}
	wg.Wait()
	assert.NoError(t, s.Close())
	assert.Equal(t, 0, s.Conns())
	select {
	case err := <-served:
		assert.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return")
	}
	for range 2 {
		assert.ErrorIs(t, <-pending, ErrConnClosed)
	}
	expectClosed(t, raw, 2*time.Second)
	for _, c := range conns {
		require.Eventually(t, func() bool { return c.Err() != nil }, 5*time.Second, 5*time.Millisecond)
		c.Close()
	}
	raw.Close()

	// Serve after Close returns at once and closes the listener.
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	assert.NoError(t, s.Serve(ln2))
	_, err = net.DialTimeout("tcp", ln2.Addr().String(), time.Second)
	assert.Error(t, err)

	// Polled here, not with require.Eventually, whose own goroutine would count.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Fatalf("goroutines: %d before, %d after Close:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}

func TestServerConnCallbacks(t *testing.T) {
	var open atomic.Int64
	s, addr := startServer(t, ServerConfig{OnConn: func(d int) { open.Add(int64(d)) }}, testHandler(nil))
	a := dial(t, addr)
	b := dial(t, addr)
	echo(t, a, "a")
	echo(t, b, "b")
	assert.Equal(t, int64(2), open.Load())
	a.Close()
	require.Eventually(t, func() bool { return open.Load() == 1 && s.Conns() == 1 }, 5*time.Second, 5*time.Millisecond)
}

// TestSendKeepsOrder: requests sent one after the other with Send reach the
// handler in that order, while their replies finish in any order.
func TestSendKeepsOrder(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	_, addr := startServer(t, ServerConfig{}, HandlerFunc(func(ctx context.Context, req *Request) Reply {
		var r TopicRequest
		if err := Unmarshal(req.Body, &r); err != nil {
			return Immediate(nil, err)
		}
		mu.Lock()
		seen = append(seen, r.Name)
		n := len(seen)
		mu.Unlock()
		return func(context.Context) (Message, error) {
			time.Sleep(time.Duration(n%3) * time.Millisecond) // replies finish out of order
			return &r, nil
		}
	}))
	c := dial(t, addr)
	ctx := testContext(t)
	var pendings []*Pending
	var want []string
	for i := range 100 {
		name := fmt.Sprint(i)
		p, err := c.Send(ctx, apiEcho, &TopicRequest{Name: name})
		require.NoError(t, err)
		pendings = append(pendings, p)
		want = append(want, name)
	}
	for i, p := range pendings {
		var got TopicRequest
		require.NoError(t, p.Wait(ctx, &got))
		assert.Equal(t, want[i], got.Name)
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, want, seen)
}

func TestPanicInHandlerIsAnsweredAndServingGoesOn(t *testing.T) {
	_, addr := startServer(t, ServerConfig{}, HandlerFunc(func(ctx context.Context, req *Request) Reply {
		switch API(req.API) {
		case apiEcho:
			panic("bug in Handle")
		case apiBlock:
			return func(context.Context) (Message, error) { panic("bug in Reply") }
		}
		return Immediate(&Empty{}, nil)
	}))
	c := dial(t, addr)
	err := c.Call(testContext(t), apiEcho, &TopicRequest{Name: "x"}, nil)
	assert.ErrorIs(t, err, ErrUnknown)
	err = c.Call(testContext(t), apiBlock, &Empty{}, nil)
	assert.ErrorIs(t, err, ErrUnknown)
	require.NoError(t, c.Call(testContext(t), apiBig, &Empty{}, nil), "the connection still serves")
}

func TestDialSetsUserTimeout(t *testing.T) {
	_, addr := startServer(t, ServerConfig{}, testHandler(nil))
	for _, tc := range []struct {
		cfg  ConnConfig
		want time.Duration
	}{
		{ConnConfig{}, DefaultUserTimeout},
		{ConnConfig{UserTimeout: 1500 * time.Millisecond}, 1500 * time.Millisecond},
	} {
		c, err := Dial(context.Background(), addr, tc.cfg)
		require.NoError(t, err)
		raw, err := c.nc.(*net.TCPConn).SyscallConn()
		require.NoError(t, err)
		got, err := userTimeout(raw)
		require.NoError(t, err)
		if runtime.GOOS == "linux" {
			assert.Equal(t, tc.want, got)
		}
		c.Close()
	}
}
func TestPoolDropsIdleConnections(t *testing.T) {
	const idle = 200 * time.Millisecond
	release := make(chan struct{})
	_, addr := startServer(t, ServerConfig{}, reservingHandler(nil, release))
	p := NewPool(ConnConfig{IdleTimeout: idle})
	t.Cleanup(func() { p.Close() })

	c1, err := p.Get(testContext(t), addr)
	require.NoError(t, err)
	echo(t, c1, "one")
	again, err := p.Get(testContext(t), addr)
	require.NoError(t, err)
	require.Same(t, c1, again)

	// A call in flight longer than the idle timeout keeps its connection.
	done := make(chan error, 1)
	go func() { done <- c1.Call(testContext(t), apiBlock, &Empty{}, nil) }()
	require.Eventually(t, func() bool { return c1.idleFor(time.Now()) == 0 }, 5*time.Second, time.Millisecond)
	assert.Never(t, func() bool {
		c, err := p.Get(testContext(t), addr)
		return err != nil || c != c1
	}, 2*idle, idle/10, "a connection with a call pending is not idle")
	close(release)
	require.NoError(t, <-done)

	// Idle past the timeout, it is dropped: the next Get dials anew,
	// before the server would close it.
	require.Eventually(t, func() bool { return c1.idleFor(time.Now()) >= idle }, 5*time.Second, 5*time.Millisecond)
	c2, err := p.Get(testContext(t), addr)
	require.NoError(t, err)
	assert.NotSame(t, c1, c2)
	assert.Error(t, c1.Err(), "the idle connection was closed")
	echo(t, c2, "two")
}

// listenWindow listens on loopback with the receive buffer of every
// accepted connection fixed at rcvbuf bytes. It is set on the listening
// socket, so each connection has it from its handshake on: set after
// Accept, a loaded machine may first grow the window towards tcp_rmem's
// maximum (32 MiB on some), and a write meant to block then completes.
func listenWindow(t *testing.T, rcvbuf int) net.Listener {
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf)
		})
		return errors.Join(err, serr)
	}}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	return ln
}

// blockingWriteBytes is a write size that cannot fit in the socket
// buffers between a client and a peer that reads nothing and whose
// receive buffer is rcvbuf: more than this machine's largest send buffer
// (tcp_wmem's maximum, which the kernel may grow the sender's to) plus
// the peer's window, with room to spare.
func blockingWriteBytes(rcvbuf int) int {
	wmemMax := 4 << 20 // Linux's default maximum
	if b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_wmem"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 3 {
			if n, err := strconv.Atoi(f[2]); err == nil {
				wmemMax = n
			}
		}
	}
	return max(8<<20, wmemMax+4*rcvbuf+4<<20)
}
