package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"gostream/transport"
)

// pipeConn is a connection on which a caller writes requests in an order
// it controls and waits for their answers separately: send returns once
// the request is written, so one goroutine can put several requests of a
// partition on the wire in batch order and wait for all of them at once.
// transport.Conn writes in the order Call is entered, but Call also waits
// for the answer, so goroutines racing into it have no order. This is the
// part of transport.Conn the producer needs, split in two; it reuses
// transport's framing and codecs.
//
// send also tells apart a request that was never written (the connection
// was already closed) from one whose fate is unknown, which the producer's
// retry policy depends on.
type pipeConn struct {
	nc       net.Conn
	addr     string
	maxFrame int
	done     chan struct{} // closed when the reader stops

	wmu sync.Mutex // serializes writes; taken before mu
	bw  *bufio.Writer

	mu struct {
		sync.Mutex
		next    uint32
		pending map[uint32]chan pipeResult
		err     error // why the connection closed
	}
}

type pipeResult struct {
	body []byte
	err  error
}

// pipeCall is a request that was written and whose answer is awaited.
type pipeCall struct {
	c   *pipeConn
	id  uint32
	api transport.API
	ch  chan pipeResult
}

func dialPipe(ctx context.Context, addr string, dialTimeout time.Duration, maxFrame int) (*pipeConn, error) {
	d := net.Dialer{Timeout: dialTimeout, KeepAlive: 15 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, notSent(fmt.Errorf("%w: dial %s: %w", transport.ErrBrokerNotAvailable, addr, err))
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	c := &pipeConn{nc: nc, addr: addr, maxFrame: maxFrame, done: make(chan struct{}), bw: bufio.NewWriterSize(nc, 64<<10)}
	c.mu.pending = make(map[uint32]chan pipeResult)
	go c.readLoop()
	return c, nil
}

func (c *pipeConn) readLoop() {
	defer close(c.done)
	br := bufio.NewReaderSize(c.nc, 64<<10)
	for {
		f, err := transport.ReadFrame(br, c.maxFrame)
		if err != nil {
			c.fail(err)
			return
		}
		c.mu.Lock()
		ch, ok := c.mu.pending[f.CorrelationID]
		delete(c.mu.pending, f.CorrelationID)
		c.mu.Unlock()
		if ok {
			ch <- pipeResult{body: f.Body}
		}
	}
}

// fail closes the connection and fails every pending call.
func (c *pipeConn) fail(err error) {
	c.mu.Lock()
	if c.mu.err == nil {
		c.mu.err = err
	}
	pending := c.mu.pending
	c.mu.pending = make(map[uint32]chan pipeResult)
	c.mu.Unlock()
	c.nc.Close()
	for _, ch := range pending {
		ch <- pipeResult{err: fmt.Errorf("%w: %s: %v", transport.ErrConnClosed, c.addr, err)}
	}
}

func (c *pipeConn) err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.err
}

func (c *pipeConn) close() {
	c.fail(net.ErrClosed)
	<-c.done
}

// send writes req as api and returns the call to wait on. An error that
// wraps notSentError means nothing was written; any other error means the
// request may have reached the broker.
func (c *pipeConn) send(api transport.API, req transport.Message, deadline time.Time) (*pipeCall, error) {
	body := transport.Marshal(make([]byte, 0, 64), req)
	ch := make(chan pipeResult, 1)

	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	if err := c.mu.err; err != nil {
		c.mu.Unlock()
		return nil, notSent(fmt.Errorf("%w: %s: %v", transport.ErrConnClosed, c.addr, err))
	}
	c.mu.next++
	id := c.mu.next
	c.mu.pending[id] = ch
	c.mu.Unlock()
	c.nc.SetWriteDeadline(deadline)
	_, err := c.bw.Write(transport.AppendFrame(nil, transport.Frame{API: uint16(api), Version: transport.Version1, CorrelationID: id, Body: body}))
	if err == nil {
		err = c.bw.Flush()
	}
	if err != nil {
		// Part of the frame may have left: the stream is unusable and the
		// request's fate unknown.
		c.fail(fmt.Errorf("write: %w", err))
		return nil, fmt.Errorf("%w: write %s to %s: %w", transport.ErrConnClosed, api, c.addr, err)
	}
	return &pipeCall{c: c, id: id, api: api, ch: ch}, nil
}

// wait waits for the answer and decodes it into resp. An answer with an
// error comes back as a *transport.Error. When ctx ends first the call is
// abandoned and the error matches transport.ErrTimeout (deadline) or is
// ctx.Err(); the connection stays usable.
func (pc *pipeCall) wait(ctx context.Context, resp transport.Message) error {
	select {
	case r := <-pc.ch:
		if r.err != nil {
			return r.err
		}
		rest, werr, err := transport.SplitResponse(r.body)
		if err != nil {
			return fmt.Errorf("%s response from %s: %w", pc.api, pc.c.addr, err)
		}
		if werr != nil {
			return werr
		}
		if err := transport.Unmarshal(rest, resp); err != nil {
			return fmt.Errorf("%s response from %s: %w", pc.api, pc.c.addr, err)
		}
		return nil
	case <-ctx.Done():
		pc.c.mu.Lock()
		delete(pc.c.mu.pending, pc.id)
		pc.c.mu.Unlock()
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("%w: %s to %s: no response before the deadline", transport.ErrTimeout, pc.api, pc.c.addr)
		}
		return ctx.Err()
	}
}

// pipePool keeps one pipeConn per address, dialing lazily and redialing
// after a connection fails.
type pipePool struct {
	dialTimeout time.Duration
	maxFrame    int
	mu          struct {
		sync.Mutex
		conns  map[string]*pipeConn
		closed bool
	}
}

func newPipePool(dialTimeout time.Duration, maxFrame int) *pipePool {
	p := &pipePool{dialTimeout: dialTimeout, maxFrame: maxFrame}
	p.mu.conns = make(map[string]*pipeConn)
	return p
}

// get returns an open connection to addr. Its errors wrap notSentError.
func (p *pipePool) get(ctx context.Context, addr string) (*pipeConn, error) {
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	if c, ok := p.mu.conns[addr]; ok && c.err() == nil {
		p.mu.Unlock()
		return c, nil
	}
	p.mu.Unlock()
	c, err := dialPipe(ctx, addr, p.dialTimeout, p.maxFrame)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.closed {
		c.close()
		return nil, ErrClosed
	}
	if old, ok := p.mu.conns[addr]; ok && old.err() == nil {
		c.close() // lost a race with another dialer
		return old, nil
	}
	p.mu.conns[addr] = c
	return c, nil
}

func (p *pipePool) close() {
	p.mu.Lock()
	conns := p.mu.conns
	p.mu.conns = map[string]*pipeConn{}
	p.mu.closed = true
	p.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
}
