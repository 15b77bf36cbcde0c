package transport

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Request is one decoded frame on the server side.
type Request struct {
	Frame
	RemoteAddr string
}

// Reply produces the response to a request. It runs on its own goroutine,
// concurrently with later requests of the same connection, and its context
// ends when the connection closes.
type Reply func(ctx context.Context) (Message, error)

// Handler serves requests. Handle is called for the requests of one
// connection one at a time, in the order they arrived: work whose order
// matters (appending a produced batch to a log) is done in Handle, and work
// that waits (for an fsync, for replication, for a long poll) in the Reply
// it returns. So a pipelining client keeps its order without waiting for
// one request before the next.
type Handler interface {
	Handle(ctx context.Context, req *Request) Reply
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, req *Request) Reply

// Handle implements Handler.
func (f HandlerFunc) Handle(ctx context.Context, req *Request) Reply { return f(ctx, req) }

// Immediate is a Reply with a result known already.
func Immediate(m Message, err error) Reply {
	return func(context.Context) (Message, error) { return m, err }
}

// ServerConfig holds the server's limits. Zero values take defaults.
type ServerConfig struct {
	MaxFrameBytes int           // largest frame accepted (default 8 MiB)
	MaxConns      int           // connections beyond this are closed at once (default 4096)
	MaxInFlight   int           // requests of one connection being served at once (default 256)
	ReadTimeout   time.Duration // to receive the rest of a frame once it started (default 30s)
	WriteTimeout  time.Duration // to write one response (default 30s)
	IdleTimeout   time.Duration // a connection with nothing in flight and no new frame is closed (default 10m)
	Logger        hclog.Logger
	// OnConn is called with +1 and -1 as connections open and close.
	OnConn func(delta int)
}

func (c *ServerConfig) setDefaults() {
	if c.MaxFrameBytes <= 0 {
		c.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if c.MaxConns <= 0 {
		c.MaxConns = 4096
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 256
	}
	if c.ReadTimeout <= 0 {
		c.ReadTimeout = 30 * time.Second
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 30 * time.Second
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 10 * time.Minute
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.OnConn == nil {
		c.OnConn = func(int) {}
	}
}

// Server accepts connections and serves framed requests with a Handler.
type Server struct {
	cfg     ServerConfig
	handler Handler
	logger  hclog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	conns  atomic.Int64

	mu struct {
		sync.Mutex
		listeners []net.Listener
		conns     map[*serverConn]struct{}
		closed    bool
	}
}

// NewServer returns a server that serves with h.
func NewServer(cfg ServerConfig, h Handler) *Server {
	cfg.setDefaults()
	s := &Server{cfg: cfg, handler: h, logger: cfg.Logger}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.mu.conns = make(map[*serverConn]struct{})
	return s
}

// Serve accepts connections on ln until Close. It returns nil after Close.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.mu.listeners = append(s.mu.listeners, ln)
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded) || isTemporary(err) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.logger.Warn("accept failed; retrying", "err", err, "backoff", backoff)
				select {
				case <-time.After(backoff):
				case <-s.ctx.Done():
					return nil
				}
				continue
			}
			return fmt.Errorf("accept: %w", err)
		}
		backoff = 0
		if s.conns.Load() >= int64(s.cfg.MaxConns) {
			s.logger.Warn("too many connections; closing new one", "peer", nc.RemoteAddr().String(), "limit", s.cfg.MaxConns)
			nc.Close()
			continue
		}
		s.startConn(nc)
	}
}

func isTemporary(err error) bool {
	// EMFILE and friends: running out of descriptors should not stop the server.
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

func (s *Server) startConn(nc net.Conn) {
	c := &serverConn{s: s, nc: nc, sem: make(chan struct{}, s.cfg.MaxInFlight)}
	c.ctx, c.cancel = context.WithCancel(s.ctx)
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		nc.Close()
		return
	}
	s.mu.conns[c] = struct{}{}
	s.conns.Add(1)
	s.wg.Add(1)
	s.mu.Unlock()
	s.cfg.OnConn(1)
	go func() {
		defer s.wg.Done()
		c.serve()
		s.mu.Lock()
		delete(s.mu.conns, c)
		s.mu.Unlock()
		s.conns.Add(-1)
		s.cfg.OnConn(-1)
	}()
}

// Conns is the number of open connections.
func (s *Server) Conns() int { return int(s.conns.Load()) }

// Close stops accepting, closes every connection, ends the contexts of
// requests in flight and waits for every goroutine of the server. It is
// idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.mu.closed = true
	// Close the sockets before ending the requests' contexts: a Reply cut
	// short by the shutdown must not be answered with a context error (the
	// client would read Unknown, not retriable). Its caller sees the
	// connection close instead, which is ErrBrokerNotAvailable.
	for c := range s.mu.conns {
		c.nc.Close()
	}
	s.cancel() // before closing the listeners: Serve then returns nil
	for _, ln := range s.mu.listeners {
		ln.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

type serverConn struct {
	s      *Server
	nc     net.Conn
	ctx    context.Context
	cancel context.CancelFunc
	sem    chan struct{} // one slot per request in flight
	wg     sync.WaitGroup

	// inFlight counts Replies not yet written, and lastReply is when one
	// was last written (Unix nanoseconds): a connection is idle only when
	// nothing is in flight and nothing was written for IdleTimeout.
	inFlight  atomic.Int64
	lastReply atomic.Int64

	// wmu guards the responses waiting to be written. Whoever queues a
	// response when no write is running writes everything queued, in one
	// write call (writev), until the queue is empty: responses that become
	// ready together, such as those of one group commit, share a syscall.
	wmu struct {
		sync.Mutex
		failed  bool
		writing bool
		queue   [][]byte
	}
}

// serverReadBuffer is small because every open connection holds one, idle or
// not; frame bodies larger than it are read around it.
const serverReadBuffer = 8 << 10

func (c *serverConn) serve() {
	log := c.s.logger.With("peer", c.nc.RemoteAddr().String())
	defer func() {
		c.nc.Close() // before cancel: see Server.Close
		c.cancel()
		c.wg.Wait()
	}()
	r := &deadlineReader{c: c}
	br := bufio.NewReaderSize(r, serverReadBuffer)
	for {
		// Wait for a free in-flight slot before reading more: a client that
		// floods us is slowed by TCP, not by our memory.
		select {
		case c.sem <- struct{}{}:
		case <-c.ctx.Done():
			return
		}
		// A frame whose first bytes are buffered already has started: the
		// rest of it is due within ReadTimeout, not IdleTimeout.
		r.idle = br.Buffered() == 0
		if !r.idle {
			r.frameDeadline = time.Now().Add(c.s.cfg.ReadTimeout)
		}
		f, err := ReadFrame(br, c.s.cfg.MaxFrameBytes)
		if err != nil {
			<-c.sem
			switch {
			case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), c.ctx.Err() != nil:
				log.Trace("connection closed")
			case errors.Is(err, os.ErrDeadlineExceeded):
				log.Debug("closing connection: read deadline", "idle", r.wasIdle)
			default:
				log.Warn("closing connection: bad input", "err", err)
			}
			return
		}
		req := &Request{Frame: f, RemoteAddr: c.nc.RemoteAddr().String()}
		reply := c.handle(req, log)
		c.inFlight.Add(1)
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			m, err := c.runReply(reply, req, log)
			c.respond(req, m, err, log) // frees the in-flight slot once written
		}()
	}
}

// handle calls the handler. A panic in it is a bug of ours, never the
// peer's doing: it is logged with its stack and answered with an Unknown
// error, and the node goes on serving.
func (c *serverConn) handle(req *Request, log hclog.Logger) (reply Reply) {
	defer func() {
		if r := recover(); r != nil {
			log.Error("handler panicked; answering Unknown", "api", API(req.API).String(), "panic", r, "stack", string(debug.Stack()))
			reply = Immediate(nil, fmt.Errorf("%w: internal error serving %s", ErrUnknown, API(req.API)))
		}
	}()
	return c.s.handler.Handle(c.ctx, req)
}

// runReply runs a Reply, recovering from a panic as handle does.
func (c *serverConn) runReply(reply Reply, req *Request, log hclog.Logger) (m Message, err error) {
	defer func() {
		if r := recover(); r != nil {
			log.Error("reply panicked; answering Unknown", "api", API(req.API).String(), "panic", r, "stack", string(debug.Stack()))
			m, err = nil, fmt.Errorf("%w: internal error serving %s", ErrUnknown, API(req.API))
		}
	}()
	return reply(c.ctx)
}

func (c *serverConn) respond(req *Request, m Message, err error, log hclog.Logger) {
	// The frame is built in one buffer, header space first, sized for the
	// message when it can say how big it is (fetch responses), so batch
	// bytes are copied once on their way out.
	var frame []byte
	if err != nil {
		frame = AppendResponseError(newFrame(nil, 64), ToWire(err))
	} else {
		frame = AppendResponseError(newFrame(m, 64), nil)
		if m != nil {
			frame = Marshal(frame, m)
		}
	}
	if len(frame)-4 > c.s.cfg.MaxFrameBytes {
		n := len(frame) - frameHead
		frame = AppendResponseError(frame[:frameHead], ToWire(fmt.Errorf("%w: response of %d bytes exceeds the frame limit", ErrMessageTooLarge, n)))
	}
	// The frame holds its own copy now: a message may give back what it
	// borrowed (a fetch's read buffer).
	if r, ok := m.(interface{ Release() }); ok {
		r.Release()
	}
	frame = finishFrame(frame, req.API, req.Version, req.CorrelationID)
	c.wmu.Lock()
	if c.wmu.failed {
		c.wmu.Unlock()
		c.written(1)
		return
	}
	c.wmu.queue = append(c.wmu.queue, frame)
	if c.wmu.writing {
		c.wmu.Unlock() // the running write takes it along
		return
	}
	c.wmu.writing = true
	// With other requests of the connection in flight, let the responses
	// that became ready with this one (a group commit, a replication round)
	// queue behind it first, so that they share the write: the goroutines
	// they run on are ready to run now. A lone request does not wait.
	if c.inFlight.Load() > 1 {
		c.wmu.Unlock()
		runtime.Gosched()
		c.wmu.Lock()
	}
	for len(c.wmu.queue) > 0 && !c.wmu.failed {
		frames := c.wmu.queue
		c.wmu.queue = nil
		c.wmu.Unlock()
		if serverWriteHook != nil {
			serverWriteHook(len(frames))
		}
		c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.WriteTimeout))
		bufs := net.Buffers(frames)
		_, werr := bufs.WriteTo(c.nc)
		c.wmu.Lock()
		if werr != nil {
			c.wmu.failed = true
			if c.ctx.Err() == nil && !errors.Is(werr, net.ErrClosed) {
				log.Warn("closing connection: cannot write response", "err", werr)
			}
			c.nc.Close()
			c.cancel()
		}
		c.written(len(frames))
	}
	dropped := len(c.wmu.queue) // queued behind a failed write
	c.wmu.queue = nil
	c.wmu.writing = false
	c.wmu.Unlock()
	c.written(dropped)
}

// serverWriteHook, when set by a test, is told how many responses each
// write of a server connection carries.
var serverWriteHook func(frames int)

// written accounts for n responses written (or dropped with their failed
// connection): each frees its in-flight slot.
func (c *serverConn) written(n int) {
	if n == 0 {
		return
	}
	c.lastReply.Store(time.Now().UnixNano())
	c.inFlight.Add(-int64(n)) // after lastReply: see deadlineReader
	for range n {
		<-c.sem
	}
}

// deadlineReader sets the read deadline before each read: the idle timeout
// while waiting for a frame to begin, and one fixed deadline, ReadTimeout
// after its first byte, for the rest of the frame. A peer that trickles a
// frame one byte at a time is cut off when that deadline passes. A
// connection waiting for a frame is not idle while a Reply is in flight (a
// long poll may outlast IdleTimeout), nor for IdleTimeout after the last
// one was written.
type deadlineReader struct {
	c             *serverConn
	idle          bool
	wasIdle       bool
	frameDeadline time.Time
}

func (r *deadlineReader) Read(p []byte) (int, error) {
	r.wasIdle = r.idle
	if !r.idle {
		r.c.nc.SetReadDeadline(r.frameDeadline)
		return r.c.nc.Read(p)
	}
	idle := r.c.s.cfg.IdleTimeout
	deadline := time.Now().Add(idle)
	for {
		r.c.nc.SetReadDeadline(deadline)
		n, err := r.c.nc.Read(p)
		if n > 0 {
			r.idle = false
			r.frameDeadline = time.Now().Add(r.c.s.cfg.ReadTimeout)
			return n, err
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return n, err
		}
		// Nothing was read, so the stream is where it was: wait on if the
		// connection was not idle all along.
		if r.c.inFlight.Load() > 0 {
			deadline = time.Now().Add(idle)
			continue
		}
		if next := time.Unix(0, r.c.lastReply.Load()).Add(idle); next.After(time.Now()) {
			deadline = next
			continue
		}
		return n, err
	}
}
