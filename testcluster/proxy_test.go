package testcluster

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// loopback is the link identity of every connection in these tests: the
// dialer and the proxy listener are both on 127.0.0.1.
const loopback = "127.0.0.1"

// testDialer dials from 127.0.0.1 even inside the harness's namespace,
// where connections that choose no source come from 127.0.0.254.
var testDialer = net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(loopback)}, Timeout: 5 * time.Second}

// needLoopback makes sure loopback is up: inside the namespace TestMain
// runs the tests in, it is down until Netns sets it up.
func needLoopback(t *testing.T) {
	t.Helper()
	if os.Getenv(netnsEnv) == "1" {
		require.NoError(t, Netns(), "set up the test namespace's loopback")
	}
}

// testServer runs handle for every connection accepted on 127.0.0.1 and,
// at cleanup, closes the listener and every connection and waits for the
// handlers.
func testServer(t *testing.T, handle func(c *net.TCPConn)) string {
	t.Helper()
	needLoopback(t)
	ln, err := net.Listen("tcp", loopback+":0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				handle(c.(*net.TCPConn))
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// echo writes back everything it reads, then closes its write side.
func echo(c *net.TCPConn) {
	io.Copy(c, c)
	c.CloseWrite()
}

// startProxy starts a proxy in front of target and returns it and its
// address; cleanup closes it (before the servers the test started
// earlier, so those see their connections end).
func startProxy(t *testing.T, target string) (*Proxy, string) {
	t.Helper()
	needLoopback(t)
	p := NewProxy(1, t.Logf)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	addr, err := p.Listen(loopback+":0", target)
	require.NoError(t, err)
	return p, addr
}

func dialTCP(t *testing.T, addr string) *net.TCPConn {
	t.Helper()
	c, err := testDialer.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

// roundTrip writes one byte to an echo and reads it back.
func roundTrip(t *testing.T, c net.Conn) time.Duration {
	t.Helper()
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	start := time.Now()
	_, err := c.Write([]byte{'x'})
	require.NoError(t, err)
	var b [1]byte
	_, err = io.ReadFull(c, b[:])
	require.NoError(t, err)
	return time.Since(start)
}

// fastestRoundTrip is the least of a few round trips, to shrug off a
// scheduling hiccup of a busy machine.
func fastestRoundTrip(t *testing.T, c net.Conn) time.Duration {
	t.Helper()
	best := time.Hour
	for range 5 {
		best = min(best, roundTrip(t, c))
	}
	return best
}

// queued counts the chunks the proxy holds back, over every connection.
func queued(p *Proxy) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n int64
	for c := range p.mu.conns {
		n += c.up.pending.Load() + c.down.pending.Load()
	}
	return n
}

func TestProxyForwardsBytesExactly(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault LinkFault // exercises the queued path when set
		size  int
	}{
		{"no fault", LinkFault{}, 5 << 20},
		{"delay and jitter", LinkFault{Delay: time.Millisecond, Jitter: 2 * time.Millisecond}, 2 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, addr := startProxy(t, testServer(t, echo))
			p.SetFault(loopback, loopback, tc.fault)
			c := dialTCP(t, addr)
			require.NoError(t, c.SetDeadline(time.Now().Add(20*time.Second)))

			rng := rand.New(rand.NewSource(7))
			data := make([]byte, tc.size)
			rng.Read(data)
			writeErr := make(chan error, 1)
			go func() {
				rest := data
				for len(rest) > 0 {
					n := min(len(rest), 1+rng.Intn(100<<10))
					if _, err := c.Write(rest[:n]); err != nil {
						writeErr <- err
						return
					}
					rest = rest[n:]
				}
				writeErr <- c.CloseWrite()
			}()
			// ReadAll ends without error only at EOF: the echo saw the
			// client's half-close through the proxy and closed its own.
			got, err := io.ReadAll(c)
			require.NoError(t, err)
			require.NoError(t, <-writeErr)
			require.Equal(t, len(data), len(got))
			assert.True(t, bytes.Equal(data, got), "echoed bytes differ")
		})
	}
}

func TestProxyPropagatesHalfClose(t *testing.T) {
	// The server answers only once it has read to EOF.
	_, addr := startProxy(t, testServer(t, func(c *net.TCPConn) {
		h := sha256.New()
		if _, err := io.Copy(h, c); err != nil {
			return
		}
		c.Write(h.Sum(nil))
		c.CloseWrite()
	}))
	c := dialTCP(t, addr)
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	data := make([]byte, 1<<20)
	rand.New(rand.NewSource(3)).Read(data)
	_, err := c.Write(data)
	require.NoError(t, err)
	require.NoError(t, c.CloseWrite())
	got, err := io.ReadAll(c)
	require.NoError(t, err)
	want := sha256.Sum256(data)
	assert.Equal(t, want[:], got)
}

func TestProxyDelay(t *testing.T) {
	p, addr := startProxy(t, testServer(t, echo))
	c := dialTCP(t, addr)

	fast := fastestRoundTrip(t, c)
	t.Logf("round trip without faults: %s", fast)
	assert.Less(t, fast, 50*time.Millisecond)

	// The link is the same both ways here, so a round trip pays it twice.
	p.SetFault(loopback, loopback, LinkFault{Delay: 50 * time.Millisecond})
	assert.Equal(t, map[[2]string]LinkFault{{loopback, loopback}: {Delay: 50 * time.Millisecond}}, p.Faults())
	slow := roundTrip(t, c)
	t.Logf("round trip with 50ms each way: %s", slow)
	assert.GreaterOrEqual(t, slow, 100*time.Millisecond)

	p.SetFault(loopback, loopback, LinkFault{})
	assert.Empty(t, p.Faults())
	fast = fastestRoundTrip(t, c)
	t.Logf("round trip after clearing: %s", fast)
	assert.Less(t, fast, 50*time.Millisecond)
}

// TestProxyFaultIsPerDirection needs a second loopback address, so that
// the two directions are different links.
func TestProxyFaultIsPerDirection(t *testing.T) {
	const node = "127.0.0.2"
	needLoopback(t)
	if ln, err := net.Listen("tcp", node+":0"); err != nil {
		t.Skipf("no %s here: %v", node, err)
	} else {
		ln.Close()
	}
	arrived := make(chan time.Time, 16)
	target := testServer(t, func(c *net.TCPConn) {
		var b [1]byte
		for {
			if _, err := c.Read(b[:]); err != nil {
				return
			}
			arrived <- time.Now()
			if _, err := c.Write(b[:]); err != nil {
				return
			}
		}
	})
	p := NewProxy(1, t.Logf)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	addr, err := p.Listen(node+":0", target)
	require.NoError(t, err)
	conn, err := testDialer.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })

	// times writes one byte and returns how long it took to reach the
	// server and to come back.
	times := func() (there, back time.Duration) {
		start := time.Now()
		rt := roundTrip(t, conn)
		select {
		case at := <-arrived:
			return at.Sub(start), rt
		case <-time.After(5 * time.Second):
			t.Fatal("the server never saw the byte")
			return 0, 0
		}
	}
	const delay = 200 * time.Millisecond

	p.SetFault(node, loopback, LinkFault{Delay: delay}) // the replies only
	there, back := times()
	t.Logf("delay on %s->%s: there %s, round trip %s", node, loopback, there, back)
	assert.Less(t, there, delay/2)
	assert.GreaterOrEqual(t, back, delay)

	p.ClearFaults()
	p.SetFault(loopback, node, LinkFault{Delay: delay}) // the requests only
	there, back = times()
	t.Logf("delay on %s->%s: there %s, round trip %s", loopback, node, there, back)
	assert.GreaterOrEqual(t, there, delay)
	assert.Less(t, back-there, delay/2)
}

func TestProxyDelayKeepsThroughput(t *testing.T) {
	const chunks, size, delay = 100, 1024, 50 * time.Millisecond
	got := make(chan time.Time, 1) // when the last byte arrived
	p, addr := startProxy(t, testServer(t, func(c *net.TCPConn) {
		if _, err := io.CopyN(io.Discard, c, chunks*size); err == nil {
			got <- time.Now()
		}
	}))
	p.SetFault(loopback, loopback, LinkFault{Delay: delay})
	c := dialTCP(t, addr)

	// Paced writes, so that the proxy reads them as separate chunks: one
	// chunk per delay would take chunks*delay = 5s.
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	msg := bytes.Repeat([]byte{'m'}, size)
	for range chunks {
		<-tick.C
		_, err := c.Write(msg)
		require.NoError(t, err)
	}
	sent := time.Since(start)
	select {
	case at := <-got:
		took := at.Sub(start)
		t.Logf("%d chunks written over %s arrived after %s", chunks, sent, took)
		assert.GreaterOrEqual(t, took, delay)
		assert.Less(t, took, sent+10*delay)
	case <-time.After(10 * time.Second):
		t.Fatal("the bytes never all arrived")
	}
}

func TestProxyLoss(t *testing.T) {
	type arrival struct {
		data []byte
		at   time.Time
	}
	const size = 1000
	arrived := make(chan arrival, 1)
	p, addr := startProxy(t, testServer(t, func(c *net.TCPConn) {
		var buf bytes.Buffer
		var first time.Time
		b := make([]byte, 4096)
		for buf.Len() < 2*size {
			n, err := c.Read(b)
			if n > 0 && first.IsZero() {
				first = time.Now()
			}
			buf.Write(b[:n])
			if err != nil {
				return
			}
		}
		arrived <- arrival{buf.Bytes(), first}
	}))
	c := dialTCP(t, addr)

	first := bytes.Repeat([]byte{'a'}, size)
	second := bytes.Repeat([]byte{'b'}, size)
	p.SetFault(loopback, loopback, LinkFault{Loss: 1})
	start := time.Now()
	_, err := c.Write(first)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return queued(p) == 1 }, 5*time.Second, time.Millisecond,
		"the lost chunk is held back")
	// The second chunk is not lost, but must wait behind the first.
	p.SetFault(loopback, loopback, LinkFault{})
	_, err = c.Write(second)
	require.NoError(t, err)

	select {
	case a := <-arrived:
		took := a.at.Sub(start)
		t.Logf("a lost chunk arrived after %s", took)
		assert.GreaterOrEqual(t, took, rtoMin)
		assert.Less(t, took, rtoMin+time.Second)
		assert.Equal(t, append(append([]byte(nil), first...), second...), a.data, "bytes intact and in order")
	case <-time.After(10 * time.Second):
		t.Fatal("the bytes never all arrived")
	}
}

func TestProxyLossBacksOff(t *testing.T) {
	for i, want := range []time.Duration{200, 400, 800, 1600, 3200, 3200, 3200} {
		assert.Equal(t, want*time.Millisecond, rto(i), "rto after %d losses", i)
	}
	d := &pipe{p: NewProxy(1, nil)}
	now := time.Now()
	due := func(f LinkFault) time.Duration {
		at, reset := d.stamp(f, now)
		require.False(t, reset)
		return at.Sub(now)
	}
	lossy := LinkFault{Delay: 10 * time.Millisecond, Loss: 1}
	assert.Equal(t, 210*time.Millisecond, due(lossy))
	assert.Equal(t, 410*time.Millisecond, due(lossy))
	assert.Equal(t, 810*time.Millisecond, due(lossy))
	assert.Equal(t, 10*time.Millisecond, due(LinkFault{Delay: 10 * time.Millisecond}), "a delivered chunk ends the run of losses")
	assert.Equal(t, 210*time.Millisecond, due(lossy))
}

func TestProxyJitterIsSeeded(t *testing.T) {
	f := LinkFault{Delay: 10 * time.Millisecond, Jitter: 5 * time.Millisecond}
	draws := func(seed int64) []time.Duration {
		d := &pipe{p: NewProxy(seed, nil)}
		now := time.Now()
		var out []time.Duration
		for range 100 {
			at, _ := d.stamp(f, now)
			out = append(out, at.Sub(now))
		}
		return out
	}
	a := draws(42)
	assert.Equal(t, a, draws(42), "the same seed draws the same")
	assert.NotEqual(t, a, draws(43))
	distinct := map[time.Duration]bool{}
	for _, d := range a {
		assert.GreaterOrEqual(t, d, f.Delay)
		assert.LessOrEqual(t, d, f.Delay+f.Jitter)
		distinct[d] = true
	}
	assert.Greater(t, len(distinct), 50)
}

func TestProxyReset(t *testing.T) {
	p, addr := startProxy(t, testServer(t, echo))
	c := dialTCP(t, addr)
	roundTrip(t, c) // the connection works

	p.SetFault(loopback, loopback, LinkFault{Reset: 1})
	require.NoError(t, c.SetDeadline(time.Now().Add(5*time.Second)))
	start := time.Now()
	_, err := c.Write([]byte("hello"))
	require.NoError(t, err)
	_, err = c.Read(make([]byte, 16))
	t.Logf("read after an injected reset: %v after %s", err, time.Since(start))
	require.Error(t, err)
	var ne net.Error
	assert.False(t, errors.As(err, &ne) && ne.Timeout(), "the connection failed rather than timed out")
	assert.ErrorIs(t, err, syscall.ECONNRESET)
}

func TestProxyDialFailureClosesClient(t *testing.T) {
	needLoopback(t)
	ln, err := net.Listen("tcp", loopback+":0")
	require.NoError(t, err)
	dead := ln.Addr().String()
	ln.Close() // nothing listens there now

	_, addr := startProxy(t, dead)
	// The reset can come so soon that the dial itself sees it.
	c, err := testDialer.Dial("tcp", addr)
	if err == nil {
		defer c.Close()
		require.NoError(t, c.SetDeadline(time.Now().Add(5*time.Second)))
		_, err = c.Read(make([]byte, 1))
	}
	t.Logf("dialing a proxy whose target is down: %v", err)
	require.Error(t, err)
	var ne net.Error
	assert.False(t, errors.As(err, &ne) && ne.Timeout(), "the connection failed rather than timed out: %v", err)
}

// proxyGoroutines returns the stacks of the goroutines running the proxy's
// code.
func proxyGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "testcluster.(*Proxy)") || strings.Contains(g, "testcluster.(*pipe)") ||
			strings.Contains(g, "testcluster.(*proxyConn)") {
			out = append(out, g)
		}
	}
	return out
}

// requireNoProxyGoroutines waits for every proxy goroutine to return, and
// fails with the stacks of those left after a deadline.
func requireNoProxyGoroutines(t *testing.T, msg string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := proxyGoroutines()
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s:\n%s", msg, strings.Join(left, "\n\n"))
		}
		time.Sleep(time.Millisecond) // polling, with the deadline above
	}
}

func TestProxyCloseStopsEverything(t *testing.T) {
	requireNoProxyGoroutines(t, "an earlier test left proxy goroutines running")
	target := testServer(t, echo)
	// drain reads to EOF and keeps its side open until the test ends.
	sawEOF := make(chan struct{}, 1)
	stop := make(chan struct{})
	drain := testServer(t, func(c *net.TCPConn) {
		if _, err := io.Copy(io.Discard, c); err == nil {
			sawEOF <- struct{}{}
		}
		<-stop
	})
	t.Cleanup(func() { close(stop) })
	p := NewProxy(1, t.Logf)
	t.Cleanup(func() { p.Close() }) // should the test stop early
	addr, err := p.Listen(loopback+":0", target)
	require.NoError(t, err)
	drainAddr, err := p.Listen(loopback+":0", drain)
	require.NoError(t, err)
	_, err = p.Listen(loopback+":0", target) // a listener nobody dials
	require.NoError(t, err)

	idle := dialTCP(t, addr)
	roundTrip(t, idle)
	halfClosed := dialTCP(t, drainAddr)
	require.NoError(t, halfClosed.CloseWrite())
	select {
	case <-sawEOF:
	case <-time.After(5 * time.Second):
		t.Fatal("the half-close never reached the server")
	}
	held := dialTCP(t, addr)
	roundTrip(t, held)
	p.SetFault(loopback, loopback, LinkFault{Delay: time.Minute})
	_, err = held.Write([]byte("held back"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return queued(p) == 1 }, 5*time.Second, time.Millisecond)
	require.NotEmpty(t, proxyGoroutines(), "the check sees the proxy's goroutines")

	start := time.Now()
	require.NoError(t, p.Close())
	t.Logf("Close took %s", time.Since(start))
	assert.Less(t, time.Since(start), 2*time.Second)
	require.NoError(t, p.Close(), "Close is idempotent")
	_, err = p.Listen(loopback+":0", target)
	assert.ErrorIs(t, err, ErrProxyClosed)

	for _, c := range []*net.TCPConn{idle, halfClosed, held} {
		require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
		_, err := io.ReadAll(c)
		var ne net.Error
		assert.False(t, errors.As(err, &ne) && ne.Timeout(), "the connection ended: %v", err)
	}
	requireNoProxyGoroutines(t, "proxy goroutines still running after Close")
	_, err = testDialer.Dial("tcp", addr)
	assert.Error(t, err, "the listener is closed")
}
