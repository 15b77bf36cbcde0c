package testcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// The proxy stands in for tc netem, which the harness's kernel lacks: every
// connection to a node's RPC address is accepted by the proxy and forwarded
// to the node, and the bytes of each direction can be delayed, held back as
// if lost, or the connection reset. A link is the ordered pair (source IP,
// destination IP): bytes from the dialer to the node travel on (dialer's
// IP, proxy listener's IP), the node's replies on the reverse pair.

// ErrProxyClosed is returned by Proxy.Listen after Proxy.Close.
var ErrProxyClosed = errors.New("testcluster: proxy closed")

const (
	// proxyChunk is the most one read of a direction takes at once.
	proxyChunk = 64 << 10
	// proxyQueue bounds the chunks held back in one direction; past it the
	// reader stops reading, so a slow receiver slows the sender as TCP would.
	proxyQueue = 256
	// rtoMin and rtoMax bound the retransmission timeout a lost chunk waits:
	// Linux's minimum RTO, doubled per consecutive loss.
	rtoMin = 200 * time.Millisecond
	rtoMax = 3200 * time.Millisecond
	// proxyDialTimeout bounds the dial to a target that does not answer.
	proxyDialTimeout = 5 * time.Second
	// proxyAcceptBackoff is the pause after an accept error that is not
	// the listener closing (out of file descriptors, say).
	proxyAcceptBackoff = 50 * time.Millisecond
)

// LinkFault is what happens to bytes on one link. The zero LinkFault
// forwards them untouched.
type LinkFault struct {
	// Delay is added latency for every chunk.
	Delay time.Duration
	// Jitter adds a uniform random 0..Jitter to Delay.
	Jitter time.Duration
	// Loss is the probability that a chunk is "lost": as TCP would
	// retransmit it, it is held back an extra retransmission timeout
	// (200ms, doubling for each consecutive loss in the same direction of
	// the connection, up to 3.2s). Later chunks wait behind it: order is
	// kept, as TCP does.
	Loss float64
	// Reset is the probability per chunk that the connection is reset:
	// both sides are closed abruptly (SO_LINGER 0), so each sees an RST.
	Reset float64
}

// String describes f for logs.
func (f LinkFault) String() string {
	if f == (LinkFault{}) {
		return "none"
	}
	return fmt.Sprintf("delay=%s jitter=%s loss=%g reset=%g", f.Delay, f.Jitter, f.Loss, f.Reset)
}

// Proxy forwards TCP connections to targets, injecting per-link faults. It
// is safe for concurrent use. Every goroutine it starts is stopped and
// waited for by Close.
type Proxy struct {
	logf   func(format string, args ...any)
	dialer net.Dialer
	bufs   sync.Pool // *[]byte of proxyChunk bytes

	// faults is replaced whole (under mu) on every change, so that the
	// per-chunk lookup takes no lock.
	faults atomic.Pointer[map[[2]string]LinkFault]

	closing chan struct{} // closed by Close
	wg      sync.WaitGroup

	rng struct {
		sync.Mutex
		r *rand.Rand
	}

	mu struct {
		sync.Mutex
		closed    bool
		listeners []net.Listener
		conns     map[*proxyConn]struct{}
	}
}

// NewProxy returns a proxy with no listeners and no faults. Its random
// choices (jitter, loss, reset) come from a source seeded with seed. logf
// receives one line per connection opened and closed and per fault
// change; nil discards them.
func NewProxy(seed int64, logf func(format string, args ...any)) *Proxy {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	p := &Proxy{logf: logf, closing: make(chan struct{})}
	p.bufs.New = func() any {
		b := make([]byte, proxyChunk)
		return &b
	}
	p.rng.r = rand.New(rand.NewSource(seed))
	p.mu.conns = map[*proxyConn]struct{}{}
	empty := map[[2]string]LinkFault{}
	p.faults.Store(&empty)
	return p
}

// Listen starts forwarding connections accepted on listen (host:port, port
// may be 0) to target, and returns the address it bound. Each accepted
// connection is forwarded over a new connection to target; if that dial
// fails, the accepted connection is reset. It returns ErrProxyClosed after
// Close.
func (p *Proxy) Listen(listen, target string) (string, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return "", fmt.Errorf("proxy listen %s: %w", listen, err)
	}
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		ln.Close()
		return "", ErrProxyClosed
	}
	p.mu.listeners = append(p.mu.listeners, ln)
	p.wg.Add(1)
	p.mu.Unlock()
	go p.accept(ln.(*net.TCPListener), target)
	addr := ln.Addr().String()
	p.logf("proxy: %s forwards to %s", addr, target)
	return addr, nil
}

// SetFault sets the fault of link from->to (IPs such as "127.0.0.2"); the
// zero LinkFault clears it. It applies to connections already open too,
// from their next chunk on.
func (p *Proxy) SetFault(from, to string, f LinkFault) {
	key := [2]string{normalizeIP(from), normalizeIP(to)}
	p.mu.Lock()
	faults := maps.Clone(*p.faults.Load())
	old := faults[key]
	if f == (LinkFault{}) {
		delete(faults, key)
	} else {
		faults[key] = f
	}
	p.faults.Store(&faults)
	p.mu.Unlock()
	p.logf("proxy: link %s->%s fault %s (was %s)", key[0], key[1], f, old)
}

// ClearFaults clears the fault of every link.
func (p *Proxy) ClearFaults() {
	empty := map[[2]string]LinkFault{}
	p.mu.Lock()
	n := len(*p.faults.Load())
	p.faults.Store(&empty)
	p.mu.Unlock()
	if n > 0 {
		p.logf("proxy: cleared the faults of %d links", n)
	}
}

// Faults returns a copy of the faults in force, keyed by {from, to}.
func (p *Proxy) Faults() map[[2]string]LinkFault {
	return maps.Clone(*p.faults.Load())
}

// Close stops every listener, closes every connection and waits for every
// goroutine of the proxy to return. It is safe to call more than once.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		p.wg.Wait()
		return nil
	}
	p.mu.closed = true
	close(p.closing)
	listeners := p.mu.listeners
	p.mu.listeners = nil
	conns := make([]*proxyConn, 0, len(p.mu.conns))
	for c := range p.mu.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()

	var errs []error
	for _, ln := range listeners {
		if err := ln.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, c := range conns {
		c.abort("proxy closed", false)
	}
	p.wg.Wait()
	return errors.Join(errs...)
}

// fault is the fault in force on link.
func (p *Proxy) fault(link [2]string) LinkFault {
	faults := *p.faults.Load()
	if len(faults) == 0 {
		return LinkFault{}
	}
	return faults[link]
}

// decide draws the random parts of f for one chunk.
func (p *Proxy) decide(f LinkFault) (jitter time.Duration, lost, reset bool) {
	if f.Jitter <= 0 && f.Loss <= 0 && f.Reset <= 0 {
		return 0, false, false
	}
	p.rng.Lock()
	defer p.rng.Unlock()
	if f.Jitter > 0 {
		jitter = time.Duration(p.rng.r.Int63n(int64(f.Jitter) + 1))
	}
	lost = f.Loss > 0 && p.rng.r.Float64() < f.Loss
	reset = f.Reset > 0 && p.rng.r.Float64() < f.Reset
	return jitter, lost, reset
}

func (p *Proxy) getBuf() *[]byte  { return p.bufs.Get().(*[]byte) }
func (p *Proxy) putBuf(b *[]byte) { p.bufs.Put(b) }

func (p *Proxy) accept(ln *net.TCPListener, target string) {
	defer p.wg.Done()
	for {
		client, err := ln.AcceptTCP()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			p.logf("proxy: %s: accept: %v", ln.Addr(), err)
			select {
			case <-p.closing:
				return
			case <-time.After(proxyAcceptBackoff):
			}
			continue
		}
		p.wg.Add(1)
		go p.serve(client, target)
	}
}

// serve forwards one accepted connection until both directions end, an
// error or reset ends it, or the proxy closes.
func (p *Proxy) serve(client *net.TCPConn, target string) {
	defer p.wg.Done()
	name := client.RemoteAddr().String() + "->" + client.LocalAddr().String()
	server, err := p.dial(target)
	if err != nil {
		p.logf("proxy: %s: dial %s: %v; resetting", name, target, err)
		client.SetLinger(0)
		client.Close()
		return
	}
	c := newProxyConn(p, name, client, server)
	if !p.track(c) {
		c.abort("proxy closed", false)
		return
	}
	p.logf("proxy: %s open to %s via %s", name, target, server.LocalAddr())
	c.run()
	p.untrack(c)
	p.logf("proxy: %s closed after %s, %d bytes to %s, %d back: %s", name,
		time.Since(c.opened).Round(time.Millisecond), c.up.bytes.Load(), target, c.down.bytes.Load(), c.closeReason())
}

// dial connects to target, giving up when the proxy closes.
func (p *Proxy) dial(target string) (*net.TCPConn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), proxyDialTimeout)
	defer cancel()
	dialed := make(chan struct{})
	defer close(dialed)
	p.wg.Add(1) // serve's own count is held, so this cannot race Close's Wait
	go func() {
		defer p.wg.Done()
		select {
		case <-p.closing:
			cancel()
		case <-dialed:
		}
	}()
	conn, err := p.dialer.DialContext(ctx, "tcp", target)
	if err != nil {
		return nil, err
	}
	return conn.(*net.TCPConn), nil
}

func (p *Proxy) track(c *proxyConn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.closed {
		return false
	}
	p.mu.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c *proxyConn) {
	p.mu.Lock()
	delete(p.mu.conns, c)
	p.mu.Unlock()
}

// proxyConn is one forwarded connection: up carries the dialer's bytes to
// the target, down the target's replies back.
type proxyConn struct {
	name           string
	client, server *net.TCPConn
	opened         time.Time
	up, down       pipe

	done      chan struct{} // closed by abort
	abortOnce sync.Once
	reason    atomic.Pointer[string]
}

func newProxyConn(p *Proxy, name string, client, server *net.TCPConn) *proxyConn {
	src := normalizeIP(client.RemoteAddr().(*net.TCPAddr).IP.String())
	dst := normalizeIP(client.LocalAddr().(*net.TCPAddr).IP.String())
	c := &proxyConn{name: name, client: client, server: server, opened: time.Now(), done: make(chan struct{})}
	c.up = pipe{p: p, c: c, src: client, dst: server, link: [2]string{src, dst}, queue: make(chan chunk, proxyQueue)}
	c.down = pipe{p: p, c: c, src: server, dst: client, link: [2]string{dst, src}, queue: make(chan chunk, proxyQueue)}
	return c
}

// run forwards both directions and returns when all four of their
// goroutines have, with both sockets closed.
func (c *proxyConn) run() {
	var wg sync.WaitGroup
	for _, d := range []*pipe{&c.up, &c.down} {
		wg.Add(2)
		go func() {
			defer wg.Done()
			d.read()
		}()
		go func() {
			defer wg.Done()
			d.write()
		}()
	}
	wg.Wait()
	c.client.Close()
	c.server.Close()
}

// abort ends the connection at once: both sockets are closed (with an RST
// when rst is true) and every goroutine of the connection returns. Only
// the first call has an effect.
func (c *proxyConn) abort(reason string, rst bool) {
	c.abortOnce.Do(func() {
		c.reason.Store(&reason)
		if rst {
			c.client.SetLinger(0)
			c.server.SetLinger(0)
		}
		close(c.done)
		c.client.Close()
		c.server.Close()
	})
}

func (c *proxyConn) closeReason() string {
	if r := c.reason.Load(); r != nil {
		return *r
	}
	return "both sides closed"
}

// pipe is one direction of a connection: read copies src's bytes into
// queue, stamped with when they are due; write delivers them to dst.
// Without a fault and with nothing queued, read writes to dst itself.
type pipe struct {
	p        *Proxy
	c        *proxyConn
	src, dst *net.TCPConn
	link     [2]string
	queue    chan chunk   // closed by read when it returns
	pending  atomic.Int64 // chunks handed to queue and not yet delivered
	bytes    atomic.Int64 // bytes read from src
	losses   int          // consecutive lost chunks; read's alone
}

// chunk is bytes read at once, or the end of the stream (eof).
type chunk struct {
	buf *[]byte
	n   int
	at  time.Time // when it is due at dst
	eof bool
}

func (d *pipe) read() {
	defer close(d.queue)
	buf := d.p.getBuf()
	defer func() { d.p.putBuf(buf) }()
	for {
		n, err := d.src.Read(*buf)
		if n > 0 {
			d.bytes.Add(int64(n))
			f := d.p.fault(d.link)
			if f == (LinkFault{}) && d.pending.Load() == 0 {
				// The fast path: nothing to add and nothing to wait behind.
				if _, err := d.dst.Write((*buf)[:n]); err != nil {
					d.c.abort(fmt.Sprintf("write %s->%s: %v", d.link[0], d.link[1], err), true)
					return
				}
			} else {
				at, reset := d.stamp(f, time.Now())
				if reset {
					d.c.abort(fmt.Sprintf("injected reset on %s->%s", d.link[0], d.link[1]), true)
					return
				}
				if !d.enqueue(chunk{buf: buf, n: n, at: at}) {
					return
				}
				buf = d.p.getBuf()
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				d.end()
				return
			}
			d.c.abort(fmt.Sprintf("read %s->%s: %v", d.link[0], d.link[1], err), true)
			return
		}
	}
}

// end passes src's end of stream on: dst's write side is closed once the
// chunks before it are delivered, and as late as a chunk would be.
func (d *pipe) end() {
	f := d.p.fault(d.link)
	if f == (LinkFault{}) && d.pending.Load() == 0 {
		d.closeWrite()
		return
	}
	jitter, _, _ := d.p.decide(LinkFault{Jitter: f.Jitter})
	d.enqueue(chunk{eof: true, at: time.Now().Add(f.Delay + jitter)})
}

// enqueue hands ch to write; it reports false if the connection ended
// first.
func (d *pipe) enqueue(ch chunk) bool {
	d.pending.Add(1)
	select {
	case d.queue <- ch:
		return true
	case <-d.c.done:
		return false
	}
}

// stamp is when a chunk read at now is due at dst under f, or reset true
// if the connection is to be reset instead.
func (d *pipe) stamp(f LinkFault, now time.Time) (at time.Time, reset bool) {
	jitter, lost, reset := d.p.decide(f)
	if reset {
		return time.Time{}, true
	}
	at = now.Add(f.Delay + jitter)
	if lost {
		at = at.Add(rto(d.losses))
		d.losses++
	} else {
		d.losses = 0
	}
	return at, false
}

// rto is the retransmission timeout after consecutive earlier losses.
func rto(consecutive int) time.Duration {
	d := rtoMin
	for i := 0; i < consecutive && d < rtoMax; i++ {
		d *= 2
	}
	return min(d, rtoMax)
}

func (d *pipe) write() {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	var last time.Time // when the previous chunk was due: none goes before it
	for {
		var ch chunk
		var ok bool
		select {
		case ch, ok = <-d.queue:
			if !ok {
				return
			}
		case <-d.c.done:
			return
		}
		if ch.at.Before(last) {
			ch.at = last
		}
		last = ch.at
		if wait := time.Until(ch.at); wait > 0 {
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			select {
			case <-timer.C:
			case <-d.c.done:
				return
			}
		}
		if ch.eof {
			d.closeWrite()
			d.pending.Add(-1)
			continue
		}
		_, err := d.dst.Write((*ch.buf)[:ch.n])
		d.p.putBuf(ch.buf)
		d.pending.Add(-1)
		if err != nil {
			d.c.abort(fmt.Sprintf("write %s->%s: %v", d.link[0], d.link[1], err), true)
			return
		}
	}
}

func (d *pipe) closeWrite() {
	if err := d.dst.CloseWrite(); err != nil {
		d.c.abort(fmt.Sprintf("close write %s->%s: %v", d.link[0], d.link[1], err), true)
	}
}

// normalizeIP spells an IP as the proxy's link keys do ("::ffff:127.0.0.1"
// as "127.0.0.1"); anything else is kept as it is.
func normalizeIP(s string) string {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap().String()
	}
	return s
}
