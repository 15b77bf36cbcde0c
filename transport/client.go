package transport

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"gostream/internal/bufpool"
)

// DefaultCallTimeout is the deadline of a call whose context has none:
// every RPC has a deadline, so a paused peer never hangs a caller.
const DefaultCallTimeout = 30 * time.Second

// ErrConnClosed means the connection closed before the response arrived.
// Whether the request took effect is unknown. It matches
// ErrBrokerNotAvailable.
var ErrConnClosed = fmt.Errorf("%w: connection closed", ErrBrokerNotAvailable)

// ConnConfig configures a client connection. Zero values take defaults.
type ConnConfig struct {
	DialTimeout time.Duration // default 5s
	// MaxFrameBytes bounds a response; default the frame limit of the
	// largest batch limit a cluster may have
	// (FrameLimit(MaxBatchBytesCeiling)). A response is read into a buffer
	// of its own size, so the bound costs nothing for smaller ones.
	MaxFrameBytes int
	// LocalIP is the source address of the connections; nil lets the
	// operating system choose.
	LocalIP net.IP
	// UserTimeout is how long data sent may stay unacknowledged by the
	// peer's TCP before the connection is aborted (TCP_USER_TIMEOUT on
	// Linux); default DefaultUserTimeout, negative for the system's
	// (minutes of retransmissions).
	UserTimeout time.Duration
	// IdleTimeout is how long a Pool keeps a connection that carried
	// nothing: one idle longer is closed and dialed anew when next
	// needed, so that a call never meets a server closing it for
	// idleness at the same moment (with a request on the wire, its
	// outcome would be unknown). Keep it below the servers' idle timeout;
	// default DefaultClientIdleTimeout, negative for never.
	IdleTimeout time.Duration
	// TLS, if set, is called at each dial for the TLS configuration of
	// the connection (so that a node's reloaded certificates are used
	// from the next dial on); nil dials in plaintext. An empty ServerName
	// is the dialed host.
	TLS func() *tls.Config
	// Token, if set, is sent in an Authenticate request as soon as the
	// connection is open; Dial fails if the node refuses it.
	Token string
}

// DefaultClientIdleTimeout is ConnConfig.IdleTimeout unless configured:
// half of the server's DefaultIdleTimeout.
const DefaultClientIdleTimeout = DefaultIdleTimeout / 2

// DefaultUserTimeout is ConnConfig.UserTimeout's default. Without it a
// connection across a network partition stays open, its retransmissions
// backing off to tens of seconds apart, and after the partition heals a
// call on it waits for the next retransmission; with it the connection
// is gone within seconds and the next call dials anew. A peer that is
// merely slow or paused still acknowledges at the TCP level and is not
// affected (see SilentAfter for that).
const DefaultUserTimeout = 5 * time.Second

// Conn is a client connection that carries many calls at once; responses
// are matched to calls by correlation id. Each request is written whole.
// Requests queued while a write runs go out together in the next one (one
// writev), so concurrent callers share syscalls, and the server reads them
// in one go. Concurrent calls have no order between them: Call also waits
// for the answer, so goroutines racing into it cannot fix the order in
// which their requests reach the wire.
type Conn struct {
	nc   net.Conn
	addr string
	cfg  ConnConfig
	done chan struct{} // closed when the reader stops

	callTimeout time.Duration // DefaultCallTimeout; tests shorten it
	// principal is who the node took this connection for, as it said
	// when the connection opened ("" when not asked, or nobody).
	principal string

	// lastRead is when the last frame arrived (UnixNano), for telling a
	// slow answer from a dead connection, and lastSent when a request was
	// last written, for telling an idle connection.
	lastRead atomic.Int64
	lastSent atomic.Int64

	// wsem serializes writes. It is a channel, not a mutex, so that a call
	// waiting behind a write stuck on a peer that does not read gives up
	// at its own deadline. Its holder writes every frame queued in wq.
	wsem chan struct{}
	wq   struct {
		sync.Mutex
		queue []*outFrame
	}

	mu struct {
		sync.Mutex
		next    uint32
		pending map[uint32]*Pending
		err     error // why the connection closed
	}
}

// outFrame is a request waiting to be written, and where the outcome of
// its write goes.
type outFrame struct {
	bufs     [][]byte // the frame: its head, and its request's gathered slices if any (see gatherer)
	size     int      // the frame's length, all bufs together
	p        *Pending
	deadline time.Time
	sent     chan error // buffered: nil once written whole, else an ErrNotSent
}

type callResult struct {
	body []byte
	err  error
}

// Dial connects to addr.
func Dial(ctx context.Context, addr string, cfg ConnConfig) (*Conn, error) {
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	if cfg.MaxFrameBytes <= 0 {
		cfg.MaxFrameBytes = FrameLimit(MaxBatchBytesCeiling)
	}
	d := net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 15 * time.Second}
	if cfg.LocalIP != nil {
		d.LocalAddr = &net.TCPAddr{IP: cfg.LocalIP}
	}
	if cfg.UserTimeout == 0 {
		cfg.UserTimeout = DefaultUserTimeout
	}
	if cfg.UserTimeout > 0 {
		d.Control = func(_, _ string, c syscall.RawConn) error { return setUserTimeout(c, cfg.UserTimeout) }
	}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w: dial %s: %w", ErrBrokerNotAvailable, addr, err)
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	if cfg.TLS != nil {
		hctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
		tc, err := ClientHandshake(hctx, nc, addr, cfg.TLS())
		cancel()
		if err != nil {
			nc.Close()
			return nil, err
		}
		nc = tc
	}
	c := &Conn{
		nc: nc, addr: addr, cfg: cfg, done: make(chan struct{}), callTimeout: DefaultCallTimeout,
		wsem: make(chan struct{}, 1),
	}
	c.mu.pending = make(map[uint32]*Pending)
	c.lastSent.Store(time.Now().UnixNano())
	go c.readLoop()
	if cfg.Token != "" || cfg.TLS != nil {
		// One round trip: with a token, to authenticate; over TLS, also
		// to learn now, not at the first call, whether the node took this
		// client's certificate (TLS 1.3 refuses it after the handshake).
		var resp AuthenticateResponse
		if err := c.Call(ctx, APIAuthenticate, &AuthenticateRequest{Token: cfg.Token}, &resp); err != nil {
			// The alert may have closed the connection before the request
			// was written: the connection's own error says why.
			cerr := c.Err()
			c.Close()
			if cerr != nil && isTLSAlert(cerr) {
				err = cerr
			}
			return nil, fmt.Errorf("authenticate to %s: %w", addr, refusedAfterHandshake(addr, err))
		}
		c.principal = resp.Principal
	}
	return c, nil
}

// idleFor is how long the connection has carried nothing: no call pending
// and nothing written or read since. It is 0 while a call is pending.
func (c *Conn) idleFor(now time.Time) time.Duration {
	c.mu.Lock()
	pending := len(c.mu.pending)
	c.mu.Unlock()
	if pending > 0 {
		return 0
	}
	last := max(c.lastSent.Load(), c.lastRead.Load())
	return now.Sub(time.Unix(0, last))
}

// Principal is who the node took this connection for when it opened: the
// name of the client's certificate or token; "" when it proved nothing,
// or for a plaintext connection without a token (not asked).
func (c *Conn) Principal() string { return c.principal }

// Addr is the address the connection was dialed to.
func (c *Conn) Addr() string { return c.addr }

func (c *Conn) readLoop() {
	defer close(c.done)
	br := bufio.NewReaderSize(c.nc, 64<<10)
	for {
		f, bodyLen, err := readHeader(br, c.cfg.MaxFrameBytes, c.cfg.MaxFrameBytes)
		if err != nil {
			c.fail(err)
			return
		}
		c.mu.Lock()
		p, ok := c.mu.pending[f.CorrelationID]
		delete(c.mu.pending, f.CorrelationID)
		c.mu.Unlock()
		var into []byte
		if ok {
			into = p.into
		}
		// The reader takes the whole body at once: its length is bounded
		// by the client's own frame limit.
		body, err := readBody(br, bodyLen, c.cfg.MaxFrameBytes, into)
		if err != nil {
			c.fail(err)
			if ok {
				p.deliver(c.closedResult(err)) // out of pending: fail did not tell it
			}
			return
		}
		c.lastRead.Store(time.Now().UnixNano())
		if ok {
			p.deliver(callResult{body: body})
		}
		// A response nobody waits for belongs to a call that gave up.
	}
}

// fail closes the connection and fails every pending call.
func (c *Conn) fail(err error) {
	c.mu.Lock()
	if c.mu.err == nil {
		c.mu.err = err
	}
	pending := c.mu.pending
	c.mu.pending = make(map[uint32]*Pending)
	c.mu.Unlock()
	c.nc.Close()
	for _, p := range pending {
		// A request not yet written is its Send's to report (ErrNotSent),
		// and is never notified; see writeQueued.
		if p.written.Load() {
			p.deliver(c.closedResult(err))
		}
	}
}

func (c *Conn) closedResult(err error) callResult {
	return callResult{err: fmt.Errorf("%w: %s: %v", ErrConnClosed, c.addr, err)}
}

// Err returns why the connection is closed, or nil while it is open.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.err
}

// Close closes the connection; calls in flight fail with ErrConnClosed.
func (c *Conn) Close() error {
	c.fail(net.ErrClosed)
	<-c.done
	return nil
}

// ErrNotSent marks a request that was never handed to the server: the
// connection was closed or the context ended before it was written, or the
// write failed part way (a server never handles a partial frame). Retrying
// such a request cannot duplicate it. It matches ErrBrokerNotAvailable.
var ErrNotSent = fmt.Errorf("%w: request not sent", ErrBrokerNotAvailable)

// Call sends req as api and decodes the response into resp (which may be
// nil for responses without fields). An error from the server comes back as
// an *Error matching the sentinels of this package. If ctx has no deadline,
// DefaultCallTimeout applies; when the deadline passes the call returns an
// error matching ErrTimeout, and the connection stays usable unless it has
// been silent since the request was written (see SilentAfter).
func (c *Conn) Call(ctx context.Context, api API, req, resp Message) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.callTimeout)
		defer cancel()
	}
	in, _ := resp.(*Into)
	var into []byte
	if in != nil {
		into, resp = *in.Buf, in.Resp
		// Until the call succeeds the memory is the connection's reader's,
		// which may still be writing into it after a call that gave up.
		*in.Buf = nil
	}
	p, err := c.send(ctx, api, req, nil, into)
	if err != nil {
		return err
	}
	body, err := p.wait(ctx, resp)
	if in != nil && err == nil {
		*in.Buf = body[:0]
	}
	return err
}

// Into is a response to decode (Resp) whose body is read into *Buf when it
// is large enough, overwriting what it held, instead of into new memory:
// for a caller that reads large responses one after another (a consumer's
// fetches), done with each before the next. Pass it to Call as the
// response. When the call succeeds, *Buf is the memory the body was read
// into (Buf's own, or new memory when Buf's was too small), which Resp's
// byte fields may alias; when it fails, *Buf is nil: the connection's
// reader may still write into the memory it had.
type Into struct {
	Resp Message
	Buf  *[]byte
}

// Encode and Decode make an Into a Message, so that it passes through
// Pool.Call to Conn.Call, which unwraps it; neither is meant to be called.
func (in *Into) Encode(e *Encoder) { in.Resp.Encode(e) }
func (in *Into) Decode(d *Decoder) { in.Resp.Decode(d) }

// Pending is a request that was written and whose response has not been
// read yet.
type Pending struct {
	c      *Conn
	id     uint32
	api    API
	ch     chan callResult
	sentAt time.Time
	notify func() // from SendNotify; nil for Send
	into   []byte // memory to read the response's body into, if large enough (see Into)
	// written is set once the request went out whole: until then a failing
	// connection leaves the call to its Send, which reports it not sent.
	written atomic.Bool
	settled atomic.Bool // deliver ran
}

// deliver hands the response (or the connection's failure) to the call,
// once: a later delivery is dropped.
func (p *Pending) deliver(r callResult) {
	if !p.settled.CompareAndSwap(false, true) {
		return
	}
	p.ch <- r
	if p.notify != nil {
		p.notify()
	}
}

// SilentAfter is how long a connection may stay silent, with a request
// written and unanswered, before a call that times out on it closes it.
// Nothing at all arriving for that long, not even the answers to other
// calls, means the peer or the path to it is gone (a paused process, a
// partition, a TCP connection deep in retransmission backoff after one):
// the next call is better off dialing again than queueing behind it.
const SilentAfter = time.Second

// Send writes req as api and returns once it is written, without waiting
// for the response: Wait collects it. Requests are written in the order
// their Sends run, so a caller that needs order (a pipelining producer)
// calls Send for them one after the other from one goroutine. An error from
// Send matches ErrNotSent: the server did not get the request. Every
// Pending must be waited for or canceled.
func (c *Conn) Send(ctx context.Context, api API, req Message) (*Pending, error) {
	return c.SendNotify(ctx, api, req, nil)
}

// SendNotify is Send that also calls notify once the response, or the
// failure of the connection, is there for Wait to collect without
// blocking. notify runs on the connection's reader goroutine and must not
// block; it is not called if Send fails, nor after Cancel. It spares a
// caller that waits for many calls at once a goroutine per call.
func (c *Conn) SendNotify(ctx context.Context, api API, req Message, notify func()) (*Pending, error) {
	return c.send(ctx, api, req, notify, nil)
}

// send is SendNotify whose response's body is read into into when it has
// the capacity.
func (c *Conn) send(ctx context.Context, api API, req Message, notify func(), into []byte) (*Pending, error) {
	if ctx.Err() != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotSent, c.ctxError(ctx, api)) // do not send what nobody waits for
	}
	c.mu.Lock()
	if err := c.mu.err; err != nil {
		c.mu.Unlock()
		return nil, fmt.Errorf("%w: %s: connection closed: %v", ErrNotSent, c.addr, err)
	}
	c.mu.next++
	p := &Pending{c: c, id: c.mu.next, api: api, ch: make(chan callResult, 1), notify: notify, into: into}
	c.mu.pending[p.id] = p
	others := len(c.mu.pending) > 1
	c.mu.Unlock()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(c.callTimeout)
	}
	// The frame is built in one buffer, sized for the request, so that a
	// batch is copied once on its way out, or, when the request's batches
	// are large, as a head written before them where they lie.
	bufs, own := frameOf(req, uint16(api), Version1, p.id)
	o := &outFrame{bufs: bufs, p: p, deadline: deadline, sent: make(chan error, 1)}
	for _, b := range bufs {
		o.size += len(b)
	}
	c.wq.Lock()
	c.wq.queue = append(c.wq.queue, o)
	c.wq.Unlock()
	// The frame is ours again once the write that took it is over (a
	// failed write included) or it was taken off the queue unwritten.
	defer bufpool.Put(own)
	var err error
	select {
	case c.wsem <- struct{}{}:
		// With other calls in flight, let those made ready together with
		// this one (by the answers of one group commit) queue their
		// requests first, to share the write. A lone call does not wait.
		if others {
			runtime.Gosched()
		}
		c.writeQueued() // o among them, unless the writer before took it
		<-c.wsem
		err = <-o.sent // written by now, by this call or the one before
	case err = <-o.sent: // another call's write took it along
	case <-ctx.Done():
		if c.unqueue(o) {
			p.Cancel()
			return nil, fmt.Errorf("%w: %w", ErrNotSent, c.ctxError(ctx, api))
		}
		// A write holds it; that write ends by o's deadline at the latest.
		err = <-o.sent
	}
	if err != nil {
		return nil, err
	}
	p.sentAt = time.Now()
	return p, nil
}

// writeHook, when set by a test, is told how many frames each write of a
// client connection carries.
var writeHook func(frames int)

// unqueue takes o out of the write queue; false if a write took it.
func (c *Conn) unqueue(o *outFrame) bool {
	c.wq.Lock()
	defer c.wq.Unlock()
	i := slices.Index(c.wq.queue, o)
	if i < 0 {
		return false
	}
	c.wq.queue = slices.Delete(c.wq.queue, i, i+1)
	return true
}

// writeQueued writes every queued frame in one write, under the earliest
// of their deadlines, and tells each whether it went out whole. The caller
// holds wsem. A partly written frame leaves the stream unusable, and the
// server never handles a partial frame: after a failed write the frames
// not written whole are forgotten (their calls get ErrNotSent, not a
// connection failure) and the connection is closed.
func (c *Conn) writeQueued() {
	c.wq.Lock()
	frames := c.wq.queue
	c.wq.queue = nil
	c.wq.Unlock()
	if len(frames) == 0 {
		return
	}
	deadline := frames[0].deadline
	bufs := make(net.Buffers, 0, len(frames))
	for _, o := range frames {
		bufs = append(bufs, o.bufs...)
		if o.deadline.Before(deadline) {
			deadline = o.deadline
		}
	}
	if writeHook != nil {
		writeHook(len(frames))
	}
	c.nc.SetWriteDeadline(deadline)
	n, err := WriteBuffers(c.nc, bufs)
	c.lastSent.Store(time.Now().UnixNano())
	if err == nil {
		for _, o := range frames {
			o.p.written.Store(true)
		}
		// A connection that failed while these were written did not tell
		// their calls (they were not written yet): tell them now.
		if cerr := c.Err(); cerr != nil {
			for _, o := range frames {
				o.p.Cancel()
				o.p.deliver(c.closedResult(cerr))
			}
		}
		for _, o := range frames {
			o.sent <- nil
		}
		return
	}
	var lost []*outFrame
	for _, o := range frames {
		if n >= int64(o.size) {
			n -= int64(o.size)
			o.p.written.Store(true) // the server may handle it: its outcome is unknown
			o.sent <- nil
			continue
		}
		n = 0
		o.p.Cancel() // the call hears of it only as not sent
		lost = append(lost, o)
	}
	c.fail(fmt.Errorf("write: %w", err))
	for _, o := range lost {
		o.sent <- fmt.Errorf("%w: %s: write: %v", ErrNotSent, c.addr, err)
	}
}

// Wait waits for the response and decodes it into resp (which may be nil).
// If ctx ends first it returns an error matching ErrTimeout (deadline) or
// the context's error, and the request's outcome is unknown. A connection
// that closes first gives ErrConnClosed, also with an unknown outcome.
func (p *Pending) Wait(ctx context.Context, resp Message) error {
	_, err := p.wait(ctx, resp)
	return err
}

// wait is Wait that also returns the response's body.
func (p *Pending) wait(ctx context.Context, resp Message) ([]byte, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.c.callTimeout)
		defer cancel()
	}
	c, api := p.c, p.api
	var r callResult
	select {
	case r = <-p.ch: // an answer that is there wins over a deadline that passed
	default:
		select {
		case r = <-p.ch:
		case <-ctx.Done():
			p.Cancel()
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				c.closeIfSilent(p.sentAt)
			}
			return nil, c.ctxError(ctx, api)
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	rest, werr, err := SplitResponse(r.body)
	if err != nil {
		return nil, fmt.Errorf("%s response from %s: %w", api, c.addr, err)
	}
	if werr != nil {
		return nil, werr
	}
	if resp == nil {
		resp = &Empty{}
	}
	if err := Unmarshal(rest, resp); err != nil {
		return nil, fmt.Errorf("%s response from %s: %w", api, c.addr, err)
	}
	return r.body, nil
}

// closeIfSilent closes the connection if nothing has arrived on it since
// sentAt, at least SilentAfter ago; see SilentAfter.
func (c *Conn) closeIfSilent(sentAt time.Time) {
	silent := time.Since(sentAt)
	if silent < SilentAfter || c.lastRead.Load() >= sentAt.UnixNano() {
		return
	}
	c.fail(fmt.Errorf("nothing received for %s with a request unanswered: presumed dead", silent.Round(time.Millisecond)))
}

// Cancel forgets the request: a response that arrives later is dropped.
func (p *Pending) Cancel() {
	p.c.mu.Lock()
	delete(p.c.mu.pending, p.id)
	p.c.mu.Unlock()
}

// ctxError is the error of a call whose context ended.
func (c *Conn) ctxError(ctx context.Context, api API) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w: %s to %s: no response before the deadline", ErrTimeout, api, c.addr)
	}
	return ctx.Err()
}

// Pool keeps one connection per address, dialing lazily and redialing after
// a connection fails or has been idle for ConnConfig.IdleTimeout.
type Pool struct {
	cfg ConnConfig
	mu  struct {
		sync.Mutex
		conns  map[string]*Conn
		closed bool
	}
}

// NewPool returns an empty pool.
func NewPool(cfg ConnConfig) *Pool {
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = DefaultClientIdleTimeout
	}
	p := &Pool{cfg: cfg}
	p.mu.conns = make(map[string]*Conn)
	return p
}

// Get returns an open connection to addr.
func (p *Pool) Get(ctx context.Context, addr string) (*Conn, error) {
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		return nil, fmt.Errorf("%w: pool closed", ErrConnClosed)
	}
	c, ok := p.mu.conns[addr]
	switch {
	case ok && c.Err() == nil && p.cfg.IdleTimeout > 0 && c.idleFor(time.Now()) >= p.cfg.IdleTimeout:
		// Dial anew rather than race the server's idle close.
		delete(p.mu.conns, addr)
		p.mu.Unlock()
		c.Close()
	case ok && c.Err() == nil:
		p.mu.Unlock()
		return c, nil
	default:
		p.mu.Unlock()
	}
	c, err := Dial(ctx, addr, p.cfg)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.closed {
		c.Close()
		return nil, fmt.Errorf("%w: pool closed", ErrConnClosed)
	}
	if old, ok := p.mu.conns[addr]; ok && old.Err() == nil {
		c.Close() // lost a race with another dialer
		return old, nil
	}
	p.mu.conns[addr] = c
	return c, nil
}

// Call gets a connection to addr and makes the call on it. A pooled
// connection can die between calls (the peer restarted, TCP gave up on a
// partition) without the pool having noticed yet: when the call finds it
// dead, Call dials anew and makes it once more, if that cannot do the
// request twice: it was never sent (ErrNotSent), or the API only reads
// (Idempotent).
func (p *Pool) Call(ctx context.Context, addr string, api API, req, resp Message) error {
	for attempt := 0; ; attempt++ {
		c, err := p.Get(ctx, addr)
		if err != nil {
			return err
		}
		err = c.Call(ctx, api, req, resp)
		if attempt == 0 && err != nil && ctx.Err() == nil && c.Err() != nil &&
			(errors.Is(err, ErrNotSent) || (errors.Is(err, ErrConnClosed) && Idempotent(api))) {
			continue
		}
		return err
	}
}

// Close closes every connection. It is idempotent.
func (p *Pool) Close() error {
	p.mu.Lock()
	conns := p.mu.conns
	p.mu.conns = map[string]*Conn{}
	p.mu.closed = true
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
	return nil
}
