package transport

import (
	"bufio"
	"context"
	"crypto/tls"
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

	"gostream/internal/bufpool"

	"github.com/hashicorp/go-hclog"
)

// Request is one decoded frame on the server side.
type Request struct {
	Frame
	RemoteAddr string
	// Listener is the name of the listener the request came in on, as
	// ServeNamed was given it; "" for Serve's (a node's first listener,
	// the one the nodes use among themselves).
	Listener string
	// Principal is who the connection proved to be when the request was
	// read: a verified client certificate's name or an accepted token's
	// principal; "" when it proved nothing.
	Principal string
	// Waits is set by a Handler whose Reply waits for an event that may be
	// long in coming (a long poll). While it runs such a request holds one
	// of the connection's MaxWaiting slots, not one of its MaxInFlight
	// ones, so that long polls queued on a connection never stop the
	// server from reading and serving the connection's other requests.
	// When every waiting slot is taken it holds an in-flight slot, as any
	// request.
	Waits bool
	// SendFile says that the connection writes a response's file range
	// (FetchResponse.File) from the file without reading it (SendFile): it is plain
	// TCP (CanSendFile). On other connections (TLS) a Server reads a file
	// range into memory to write it, so a handler reads the bytes itself.
	SendFile bool

	charge  *charge      // what the request holds of its connection's and server's memory; nil outside a Server
	waiting bool         // it holds a waiting slot, not an in-flight one
	body    *bufpool.Ref // Body's pooled buffer, when the handler reuses bodies (BodyReuser)
}

// Hold keeps the request's body from being reused until release is called,
// for a handler that hands part of it to work that may outlive the Reply (a
// leader's follower queues hold a produced batch until it is sent). The
// body is reused once the response is written and every hold is released;
// release may be called more than once (only the first counts). A body
// that is not reused needs no holding: release then does nothing.
func (r *Request) Hold() (release func()) {
	if r.body == nil {
		return func() {}
	}
	return r.body.Hold()
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

// BodyReuser is implemented by a Handler that keeps nothing of some
// requests' bodies once their Reply has returned, unless it holds them
// (Request.Hold): no slice of Body, nor of anything decoded from it (a
// Decoder's Bytes32 aliases the body), is used after that, by the handler
// or anything it called. The server reads the bodies of those requests
// into buffers it reuses once their responses are written and their holds
// released, rather than allocating and collecting one a request.
type BodyReuser interface {
	ReusesBody(api API) bool
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
//
// Request memory: the bytes of request bodies read and not yet answered,
// of what Replies reserved (Request.Reserve), and of response frames built
// and not yet written, are charged to the memory of their connection
// (ConnMemoryBytes) and of the server (MemoryBytes). A connection whose
// share is spent waits: its reader stops reading, so TCP slows that
// client alone, and a Reply's reservation waits for the connection's
// responses to be written. When the server's memory is spent, a request
// waits up to MemoryWait and is then refused, unread, with ErrBusy; an
// eighth of MemoryBytes past it is kept for requests of at most 64 KiB,
// so that small requests of other connections (metadata, acknowledgements)
// are served while large ones fill it. A response frame is charged when
// it is built, without waiting: the work is done by then, and a handler
// that builds a large one reserves its size first.
type ServerConfig struct {
	// MaxBatchBytes is the batch limit, from which the frame limit is
	// derived (FrameLimit); default DefaultMaxBatchBytes. A request frame
	// over the frame limit is read, discarded and answered
	// ErrMessageTooLarge; one claiming more than 1 GiB is not a frame and
	// closes the connection.
	MaxBatchBytes int
	// MaxConns bounds the open connections in all, MaxConnsPerAddr those
	// from one IP address (defaults DefaultMaxConns,
	// DefaultMaxConnsPerAddr). Connections over a limit are closed at once.
	MaxConns        int
	MaxConnsPerAddr int
	// MaxInFlight bounds the requests of one connection being served at
	// once (default 256), besides those that wait (Request.Waits).
	MaxInFlight int
	// MaxWaiting bounds the requests of one connection that wait
	// (Request.Waits) without holding an in-flight slot (default 1024).
	// A waiting request holds a goroutine and its small body, charged to
	// the connection's memory.
	MaxWaiting int
	// ConnMemoryBytes bounds one connection's request memory (default two
	// frames; never less than one frame).
	ConnMemoryBytes int64
	// MemoryBytes bounds the server's request memory (default
	// DefaultMemoryBytes; never less than ConnMemoryBytes).
	MemoryBytes int64
	// MemoryWait is how long a request waits for the server's memory
	// before it is refused with ErrBusy (default 1s).
	MemoryWait   time.Duration
	ReadTimeout  time.Duration // to receive the rest of a frame once it started (default 30s)
	WriteTimeout time.Duration // to write one response (default 30s)
	// IdleTimeout closes a connection with nothing in flight and no new
	// frame for this long (default DefaultIdleTimeout).
	IdleTimeout time.Duration
	Logger      hclog.Logger
	// OnConn is called with +1 and -1 as connections open and close.
	OnConn func(delta int)
	// OnRefused, if set, is called for every connection and request
	// refused by a limit.
	OnRefused func(Refusal)
	// Divert, if set, is handed the connections whose first byte is
	// DivertByte, that byte consumed: a second protocol on the same
	// address (the controller candidates' Raft traffic). A frame begins
	// with its length's high byte, 0 for every frame a node takes, so
	// DivertByte must not be 0. A diverted connection was admitted by the
	// connection limits like any other and counts against them until it
	// is closed; the server closes it when it closes. Divert must not
	// block.
	DivertByte byte
	Divert     func(conn net.Conn, principal string)

	// TLS, if set, makes the listener speak TLS only: a connection's
	// handshake (bounded by ReadTimeout) comes before anything else. One
	// that begins with a frame instead is answered with one
	// ErrTLSMismatch frame and closed; a failed handshake is logged (a
	// line per source a minute) and closed. A config whose
	// GetConfigForClient loads the current files reloads certificates
	// without a restart.
	TLS *tls.Config
	// Authenticate, if set, checks the token of an Authenticate request
	// and returns the principal it names, or an error wrapping
	// ErrUnauthenticated. Without it an Authenticate request is answered
	// with the connection's principal and changes nothing.
	Authenticate func(token string) (principal string, err error)
	// RequireAuth refuses every request but Authenticate with
	// ErrUnauthenticated on a connection that has no principal: neither
	// a client certificate that verified (see CertPrincipal) nor an
	// accepted token.
	RequireAuth bool
	// OnAuthFailure, if set, is called for each failed TLS handshake
	// ("tls"), plaintext connection to a TLS listener ("plaintext"),
	// refused token ("token") and unauthenticated request
	// ("unauthenticated").
	OnAuthFailure func(kind string)
	// Recheck, if set, says whether the credential a connection proved
	// its principal with still stands: nil, or an error wrapping
	// ErrUnauthenticated that says why not. Server.Recheck asks it about
	// every open connection (after the node reloads its tokens file or
	// its CA). Without it only expiry ends a connection: one whose
	// principal is a client certificate's is closed at the certificate's
	// NotAfter either way.
	Recheck func(Credential) error
}

// DefaultMemoryBytes is ServerConfig.MemoryBytes unless configured: room
// for 60 frames of the default size at once, and little enough for a
// small VM.
const DefaultMemoryBytes = 256 << 20

// DefaultIdleTimeout is ServerConfig.IdleTimeout unless configured. An
// idle connection holds a descriptor, a goroutine, a read buffer and a
// place under the connection limits; clients dial again in one round
// trip, so two minutes is plenty (Kafka's ten are for clients that keep
// idle connections around, which ours do not: see
// ConnConfig.IdleTimeout). A long poll in flight is not idle.
const DefaultIdleTimeout = 2 * time.Minute

func (c *ServerConfig) setDefaults() {
	if c.MaxBatchBytes <= 0 {
		c.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 256
	}
	if c.MaxWaiting <= 0 {
		c.MaxWaiting = 1024
	}
	frame := int64(FrameLimit(c.MaxBatchBytes))
	if c.ConnMemoryBytes <= 0 {
		c.ConnMemoryBytes = 2 * frame
	}
	c.ConnMemoryBytes = max(c.ConnMemoryBytes, frame)
	if c.MemoryBytes <= 0 {
		c.MemoryBytes = DefaultMemoryBytes
	}
	c.MemoryBytes = max(c.MemoryBytes, c.ConnMemoryBytes)
	if c.MemoryWait <= 0 {
		c.MemoryWait = time.Second
	}
	if c.ReadTimeout <= 0 {
		c.ReadTimeout = 30 * time.Second
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 30 * time.Second
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.OnConn == nil {
		c.OnConn = func(int) {}
	}
	if c.OnRefused == nil {
		c.OnRefused = func(Refusal) {}
	}
	if c.OnAuthFailure == nil {
		c.OnAuthFailure = func(string) {}
	}
}

// Server accepts connections and serves framed requests with a Handler.
type Server struct {
	cfg        ServerConfig
	handler    Handler
	logger     hclog.Logger
	frameLimit int
	limiter    *ConnLimiter
	mem        *memory
	busyLog    *refusalLog
	authLog    *RateLog  // failed handshakes and tokens, per source IP
	sessions   *Sessions // the authenticated connections' credentials

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
	s := &Server{cfg: cfg, handler: h, logger: cfg.Logger, frameLimit: FrameLimit(cfg.MaxBatchBytes),
		mem: newMemory(cfg.MemoryBytes, cfg.MemoryBytes/8), busyLog: newRefusalLog(cfg.Logger), authLog: NewRateLog(cfg.Logger, 0),
		sessions: NewSessions(cfg.Recheck, cfg.Logger)}
	s.limiter = NewConnLimiter(ConnLimits{MaxConns: cfg.MaxConns, MaxConnsPerAddr: cfg.MaxConnsPerAddr,
		Logger: cfg.Logger, OnRefused: cfg.OnRefused})
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.mu.conns = make(map[*serverConn]struct{})
	return s
}

// Serve accepts connections on ln until Close. It returns nil after Close.
func (s *Server) Serve(ln net.Listener) error { return s.ServeNamed(ln, "") }

// ServeNamed is Serve for a named listener: each request read from its
// connections carries the name (Request.Listener), so that a handler
// answers with the addresses clients on that listener dial.
func (s *Server) ServeNamed(ln net.Listener, name string) error {
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
		release := s.limiter.Admit(nc.RemoteAddr())
		if release == nil {
			nc.Close()
			continue
		}
		s.startConn(nc, name, release)
	}
}

func isTemporary(err error) bool {
	// EMFILE and friends: running out of descriptors should not stop the server.
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

func (s *Server) startConn(nc net.Conn, listener string, release func()) {
	c := &serverConn{s: s, nc: nc, listener: listener, sem: make(chan struct{}, s.cfg.MaxInFlight), waitSem: make(chan struct{}, s.cfg.MaxWaiting),
		mem: newMemory(s.cfg.ConnMemoryBytes, 0)}
	if s.cfg.TLS != nil {
		// No I/O yet: serve checks the first byte, then shakes hands.
		c.raw = &peekedConn{Conn: nc, br: bufio.NewReaderSize(nc, 1024)}
		c.nc = tls.Server(c.raw, s.cfg.TLS)
	} else {
		c.sendfile = CanSendFile(nc)
	}
	c.ctx, c.cancel = context.WithCancel(s.ctx)
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		nc.Close()
		release()
		return
	}
	s.mu.conns[c] = struct{}{}
	s.conns.Add(1)
	s.wg.Add(1)
	s.mu.Unlock()
	s.cfg.OnConn(1)
	// Run by whichever goroutine ends the connection's reading, once its
	// replies are written (serverConn.finish).
	c.forget = func() {
		s.mu.Lock()
		delete(s.mu.conns, c)
		s.mu.Unlock()
		release()
		s.conns.Add(-1)
		s.cfg.OnConn(-1)
		s.wg.Done()
	}
	go c.serve()
}

// Conns is the number of open connections.
func (s *Server) Conns() int { return int(s.conns.Load()) }

// Recheck asks ServerConfig.Recheck about the credential of every open
// connection that proved a principal, and closes, at once, each whose
// credential no longer stands: as Close does, so a request in flight on
// it is not answered (its outcome is unknown to its client, as when a
// node stops), and its client, dialing again, is refused when it
// authenticates. It returns the connections it ended, for the caller to
// log in one line. Requests are not slowed: nothing is checked per
// request.
func (s *Server) Recheck() []Ended { return s.sessions.Recheck() }

// MemoryInUse is the number of bytes of request memory charged (see
// ServerConfig).
func (s *Server) MemoryInUse() int64 { return s.mem.inUse() }

// FrameLimit is the largest frame the server reads, after its length
// prefix.
func (s *Server) FrameLimit() int { return s.frameLimit }

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
	s        *Server
	nc       net.Conn
	listener string      // the name of its listener (Request.Listener)
	raw      *peekedConn // under nc when the server speaks TLS; nil otherwise
	// principal is who the connection proved to be ("" none yet): its
	// verified client certificate's name, or an accepted token's; session
	// is the credential it proved it with, rechecked by Server.Recheck.
	// Only the reading goroutine touches them.
	principal string
	session   *Session
	ctx       context.Context
	cancel    context.CancelFunc
	sendfile  bool          // it writes file ranges from the file (Request.SendFile)
	forget    func()        // takes the ended connection off its server's books (finish)
	sem       chan struct{} // one slot per request in flight
	waitSem   chan struct{} // one slot per waiting request (Request.Waits)
	mem       *memory       // the connection's request memory
	wg        sync.WaitGroup

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
		queue   []*response
	}
}

// response is a response frame waiting to be written: one buffer, or a
// head and the tail a message lent it (see splicer), bytes or a range of
// a file written after bufs.
type response struct {
	bufs    [][]byte
	file    *FileRange
	charge  *charge
	release func()       // gives back what the message lent, once written
	reuse   [][]byte     // buffers given back to the pool once written: the frame
	body    *bufpool.Ref // the request's pooled body, dropped once written
	waiting bool         // it frees a waiting slot, not an in-flight one
}

// serverReadBuffer is small because every open connection holds one, idle or
// not; frame bodies larger than it are read around it.
const serverReadBuffer = 8 << 10

func (c *serverConn) serve() {
	log := c.s.logger.With("peer", c.nc.RemoteAddr().String())
	if c.raw != nil && !c.handshake(log) {
		c.finish()
		return
	}
	r := &deadlineReader{c: c}
	br := bufio.NewReaderSize(r, serverReadBuffer)
	if c.divert(br, r, log) {
		c.finish()
		return
	}
	c.serveRequests(br, r, log)
}

// finish ends the connection once its reading has: it closes it, waits
// for its replies and takes it off the server's books.
func (c *serverConn) finish() {
	c.nc.Close() // before cancel: see Server.Close
	c.cancel()
	c.wg.Wait()
	c.session.Close()
	c.forget()
}

// divert looks at the first byte of a connection that may not speak the
// protocol: a TLS client on a plaintext listener is answered and closed,
// and a connection for the divert handler is handed to it. It reports
// whether the connection is done with.
func (c *serverConn) divert(br *bufio.Reader, r *deadlineReader, log hclog.Logger) bool {
	divert := c.s.cfg.Divert != nil && c.s.cfg.DivertByte != 0
	if divert || c.raw == nil {
		r.idle = true
		first, err := br.Peek(1)
		if err != nil {
			return true
		}
		if c.raw == nil && first[0] == tlsRecordHandshake {
			c.s.authLog.Warn("tls-on-plaintext:"+addrKey(c.nc.RemoteAddr()), "a TLS client reached this plaintext listener (this node runs without --tls-cert); closed", "peer", c.nc.RemoteAddr().String())
			c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.WriteTimeout))
			io.WriteString(c.nc, plaintextAnswer)
			return true
		}
		if divert && first[0] == c.s.cfg.DivertByte {
			br.Discard(1)
			c.nc.SetReadDeadline(time.Time{})
			d := &divertedConn{Conn: c.nc, br: br, closed: make(chan struct{})}
			c.s.cfg.Divert(d, c.principal)
			select {
			case <-d.closed:
			case <-c.ctx.Done():
			}
			return true
		}
	}
	return false
}

// serveRequests reads the connection's requests and answers them until
// reading fails or the connection closes, then ends it (finish). Requests
// are answered on goroutines of their own, but a lone one that may be is
// answered where it was read (AnswerHerer); when such an answer goes on to
// wait on others, reading goes on on a new goroutine, which runs
// serveRequests.
func (c *serverConn) serveRequests(br *bufio.Reader, r *deadlineReader, log hclog.Logger) {
	maxBody := c.s.frameLimit - FrameHeaderSize
	for {
		// Wait for a free in-flight slot before reading more: a client that
		// floods us is slowed by TCP, not by our memory.
		select {
		case c.sem <- struct{}{}:
		case <-c.ctx.Done():
			c.finish()
			return
		}
		// A frame whose first bytes are buffered already has started: the
		// rest of it is due within ReadTimeout, not IdleTimeout.
		r.idle = br.Buffered() == 0
		if !r.idle {
			r.frameDeadline = time.Now().Add(c.s.cfg.ReadTimeout)
		}
		req, reply, err := c.read(br, r, maxBody, log)
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
			c.finish()
			return
		}
		if req.Waits {
			// It gives its in-flight slot back for a waiting one, if one
			// is free: the next request is read at once.
			select {
			case c.waitSem <- struct{}{}:
				req.waiting = true
				<-c.sem
			default:
			}
		}
		c.inFlight.Add(1)
		c.wg.Add(1)
		if c.answersHere(req) && c.inFlight.Load() == 1 && br.Buffered() == 0 {
			if !c.answerHere(reply, req, br, r, log) {
				return // reading went on on another goroutine
			}
			continue
		}
		go func() {
			defer c.wg.Done()
			m, err := c.runReply(c.ctx, reply, req, log)
			c.respond(req, m, err, log) // frees the in-flight slot once written
		}()
	}
}

// AnswerHerer is implemented by a Handler some of whose requests are
// answered quickly by work on this node alone, such as a produce's append
// and fsync, or that say when they go on to wait for others
// (WaitingOnOthers): a lone request of those (none other in flight on its
// connection, no byte of another read) is answered on the goroutine that
// read it, not on a new one. On a new goroutine, as requests that come
// together are answered, its answer waits for an idle thread to be woken
// and to take it: a synchronous producer's round trip (append, fsync,
// response) paid one such wake-up on every record, 0.34 ms at p50 against
// 0.30 answered here, on one node (docs/benchmarks.md). Meanwhile the
// connection's next request is not read: a handler must not hold such an
// answer long without WaitingOnOthers.
type AnswerHerer interface {
	AnswersHere(api API) bool
}

func (c *serverConn) answersHere(req *Request) bool {
	h, ok := c.s.handler.(AnswerHerer)
	return ok && !req.Waits && h.AnswersHere(API(req.API))
}

// answerHere answers a lone request on the goroutine that read it (see
// AnswerHerer), and reports whether that goroutine is still the
// connection's reader: it is not once the answer said it waits on others
// (WaitingOnOthers), which started another to read on.
func (c *serverConn) answerHere(reply Reply, req *Request, br *bufio.Reader, r *deadlineReader, log hclog.Logger) bool {
	reading := true
	handOver := func() {
		if reading {
			reading = false
			go c.serveRequests(br, r, log)
		}
	}
	m, err := c.runReply(context.WithValue(c.ctx, handOverKey{}, handOver), reply, req, log)
	c.respond(req, m, err, log)
	c.wg.Done()
	return reading
}

type handOverKey struct{}

// WaitingOnOthers is called by a Reply, with the context it was given,
// before it waits on other nodes (a leader's produce, for its
// followers): if the request is answered by the goroutine that read it
// (AnswerHerer), reading its connection goes on on another goroutine, so
// that the wait holds up no request that follows. It is cheap to call for
// any request and may be called more than once, from the Reply's
// goroutine only.
func WaitingOnOthers(ctx context.Context) {
	if f, ok := ctx.Value(handOverKey{}).(func()); ok {
		f()
	}
}

// read reads the next request and returns it with its Reply. Before it
// reads a body it charges its length to the connection's memory, waiting
// while that is spent (it reads nothing meanwhile), and to the server's,
// waiting up to MemoryWait. A body over the frame limit, or one the
// server has no memory for, is read and discarded and its request
// answered with an error without reaching the handler; the connection
// goes on.
func (c *serverConn) read(br *bufio.Reader, r *deadlineReader, maxBody int, log hclog.Logger) (*Request, Reply, error) {
	f, n, err := readHeader(br, c.s.frameLimit, maxClaimedFrame)
	if err != nil {
		return nil, nil, err
	}
	req := &Request{Frame: f, RemoteAddr: c.nc.RemoteAddr().String(), Listener: c.listener, SendFile: c.sendfile}
	if n > maxBody {
		log.Debug("request over the frame limit; discarding it", "api", API(f.API).String(), "bytes", n+FrameHeaderSize, "limit", c.s.frameLimit)
		if err := discard(br, n); err != nil {
			return nil, nil, err
		}
		return req, Immediate(nil, fmt.Errorf("%w: a request of %d bytes exceeds the limit of %d bytes (the cluster's batch limit of %d bytes, --max-batch-bytes, plus %d for headers)",
			ErrMessageTooLarge, n+FrameHeaderSize, c.s.frameLimit, c.s.cfg.MaxBatchBytes, FrameAllowance)), nil
	}
	ch := &charge{conn: c.mem, server: c.s.mem, wait: c.s.cfg.MemoryWait}
	err = ch.take(c.ctx, int64(n))
	// The rest of the frame is due ReadTimeout from now: the time spent
	// waiting for memory was ours, not the peer's.
	r.frameDeadline = time.Now().Add(c.s.cfg.ReadTimeout)
	if errors.Is(err, ErrBusy) {
		c.s.busyLog.refused("request memory in use; refusing requests", Refusal{Limit: LimitMemory, Addr: req.RemoteAddr, Max: c.s.mem.capacity})
		c.s.cfg.OnRefused(Refusal{Limit: LimitMemory, Addr: req.RemoteAddr, Max: c.s.mem.capacity})
		if err := discard(br, n); err != nil {
			return nil, nil, err
		}
		return req, Immediate(nil, err), nil
	}
	if err != nil {
		return nil, nil, err
	}
	req.charge = ch
	var body []byte
	if r, ok := c.s.handler.(BodyReuser); ok && r.ReusesBody(API(f.API)) {
		body = bufpool.Get(n)
		req.body = bufpool.NewRef(body)
	} else {
		body = make([]byte, n)
	}
	if _, err := io.ReadFull(br, body); err != nil {
		ch.release()
		return nil, nil, truncated(err)
	}
	req.Body = body
	if API(f.API) == APIAuthenticate {
		return req, c.authenticate(req), nil
	}
	if c.s.cfg.RequireAuth && c.principal == "" {
		c.s.cfg.OnAuthFailure("unauthenticated")
		c.s.authLog.Warn("unauthenticated:"+addrKey(c.raw0().RemoteAddr()), "a request without authentication was refused",
			"peer", req.RemoteAddr, "api", API(f.API).String())
		return req, Immediate(nil, fmt.Errorf("%w: %s needs an authenticated connection: send a token (gostream-ctl --token-file) or a client certificate (--tls-cert, --tls-key)",
			ErrUnauthenticated, API(f.API))), nil
	}
	req.Principal = c.principal
	return req, c.handle(req, log), nil
}

// discard reads and drops the n bytes of a body, in bounded memory.
func discard(br *bufio.Reader, n int) error {
	if _, err := io.CopyN(io.Discard, br, int64(n)); err != nil {
		return truncated(err)
	}
	return nil
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
func (c *serverConn) runReply(ctx context.Context, reply Reply, req *Request, log hclog.Logger) (m Message, err error) {
	defer func() {
		if r := recover(); r != nil {
			log.Error("reply panicked; answering Unknown", "api", API(req.API).String(), "panic", r, "stack", string(debug.Stack()))
			m, err = nil, fmt.Errorf("%w: internal error serving %s", ErrUnknown, API(req.API))
		}
	}()
	return reply(ctx)
}

// spliceMin is the size from which a splicer's tail is written from where
// it lies rather than copied into the frame.
const spliceMin = 64 << 10

// SendFileMin is the size from which a front end asks for a fetch's
// batches as a range of a file (FileRange) on a connection that sends
// files (Request.SendFile): below it, reading them costs less than the
// system calls that spare the copies.
const SendFileMin = spliceMin

// build makes the response frame to req. A message's large tail (a
// fetch's batches) is not copied: the frame is its head and the tail, and
// the message gives its buffer back once they are written. A tail that is
// a range of a file is written from the file on a connection that can
// (sendfile), else read into memory first.
func (c *serverConn) build(req *Request, m Message, err error) *response {
	sp, _ := m.(splicer)
	if err == nil && sp != nil && sp.fileTail() != nil && !c.sendfile {
		err = sp.readFile()
	}
	if err == nil && sp != nil && (sp.fileTail() != nil || len(sp.tail()) >= spliceMin) {
		head := AppendResponseError(make([]byte, frameHead, frameHead+128), nil)
		head = sp.encodeHead(head)
		tail, file := sp.tail(), sp.fileTail()
		n := len(head) - 4 + len(tail)
		if file != nil {
			n += int(file.Length)
		}
		if n <= c.s.frameLimit {
			head = finishFrameLen(head, n, req.API, req.Version, req.CorrelationID)
			if file != nil {
				return &response{bufs: [][]byte{head}, file: file, release: releaser(m)}
			}
			return &response{bufs: [][]byte{head, tail}, release: releaser(m)}
		}
		if file != nil {
			err = fmt.Errorf("%w: response of %d bytes exceeds the frame limit", ErrMessageTooLarge, n-FrameHeaderSize)
		}
	}
	// The frame is built in one buffer, header space first, sized for the
	// message when it can say how big it is, so batch bytes are copied once
	// on their way out.
	var frame []byte
	if err != nil {
		frame = AppendResponseError(newFrame(nil, 64), ToWire(err))
	} else {
		frame = AppendResponseError(newFrame(m, 64), nil)
		if m != nil {
			frame = Marshal(frame, m)
		}
	}
	if len(frame)-4 > c.s.frameLimit {
		n := len(frame) - frameHead
		frame = AppendResponseError(frame[:frameHead], ToWire(fmt.Errorf("%w: response of %d bytes exceeds the frame limit", ErrMessageTooLarge, n)))
	}
	// The frame holds its own copy now: a message may give back what it
	// borrowed (a fetch's read buffer).
	if release := releaser(m); release != nil {
		release()
	}
	frame = finishFrame(frame, req.API, req.Version, req.CorrelationID)
	return &response{bufs: [][]byte{frame}, reuse: [][]byte{frame}}
}

// releaser returns m's Release, or nil.
func releaser(m Message) func() {
	if r, ok := m.(interface{ Release() }); ok {
		return r.Release
	}
	return nil
}

func (c *serverConn) respond(req *Request, m Message, err error, log hclog.Logger) {
	resp := c.build(req, m, err)
	resp.waiting = req.waiting
	resp.body = req.body
	// From now on the request holds its body and its frame: its
	// reservations are used or given back.
	resp.charge = req.charge
	if resp.charge == nil {
		resp.charge = &charge{conn: c.mem, server: c.s.mem}
	}
	size := int64(len(req.Body))
	for _, b := range resp.bufs {
		size += int64(cap(b))
	}
	resp.charge.set(size)
	c.wmu.Lock()
	if c.wmu.failed {
		c.wmu.Unlock()
		c.written([]*response{resp})
		return
	}
	c.wmu.queue = append(c.wmu.queue, resp)
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
		resps := c.wmu.queue
		c.wmu.queue = nil
		c.wmu.Unlock()
		if serverWriteHook != nil {
			serverWriteHook(len(resps))
		}
		c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.WriteTimeout))
		werr := c.write(resps)
		c.wmu.Lock()
		if werr != nil {
			c.wmu.failed = true
			if c.ctx.Err() == nil && !errors.Is(werr, net.ErrClosed) {
				log.Warn("closing connection: cannot write response", "err", werr)
			}
			c.nc.Close()
			c.cancel()
		}
		c.written(resps)
	}
	dropped := c.wmu.queue // queued behind a failed write
	c.wmu.queue = nil
	c.wmu.writing = false
	c.wmu.Unlock()
	c.written(dropped)
}

// write writes responses in order: their buffers together in one write
// (writev), but where a response ends with a file range, which is sent
// from the file (sendfile) after the buffers before it.
func (c *serverConn) write(resps []*response) error {
	var bufs net.Buffers
	for _, r := range resps {
		bufs = append(bufs, r.bufs...)
		if r.file == nil {
			continue
		}
		if _, err := WriteBuffers(c.nc, bufs); err != nil {
			return err
		}
		bufs = nil
		if _, err := SendFile(c.nc, *r.file); err != nil {
			return err
		}
	}
	if len(bufs) == 0 {
		return nil
	}
	_, err := WriteBuffers(c.nc, bufs)
	return err
}

// serverWriteHook, when set by a test, is told how many responses each
// write of a server connection carries.
var serverWriteHook func(frames int)

// written accounts for responses written (or dropped with their failed
// connection): each gives back what it lent and what it held of the
// connection's and server's memory, and frees its in-flight slot.
func (c *serverConn) written(resps []*response) {
	if len(resps) == 0 {
		return
	}
	for _, r := range resps {
		if r.release != nil {
			r.release()
		}
		for _, b := range r.reuse {
			bufpool.Put(b)
		}
		if r.body != nil {
			r.body.Drop()
		}
		r.charge.release()
	}
	c.lastReply.Store(time.Now().UnixNano())
	c.inFlight.Add(-int64(len(resps))) // after lastReply: see deadlineReader
	for _, r := range resps {
		if r.waiting {
			<-c.waitSem
		} else {
			<-c.sem
		}
	}
}

// deadlineReader sets the read deadline before each read: the idle timeout
// while waiting for a frame to begin, and one fixed deadline, ReadTimeout
// after its first byte, for the rest of the frame. A peer that trickles a
// frame one byte at a time is cut off when that deadline passes. A
// connection waiting for a frame is not idle while a Reply is in flight (a
// long poll may outlast IdleTimeout), nor for IdleTimeout after the last
// one was written.
// divertedConn is a connection handed to ServerConfig.Divert: it reads
// first what the server had buffered.
type divertedConn struct {
	net.Conn
	br     *bufio.Reader
	once   sync.Once
	closed chan struct{}
}

func (d *divertedConn) Read(p []byte) (int, error) {
	if d.br != nil {
		if d.br.Buffered() > 0 {
			return d.br.Read(p)
		}
		d.br = nil
	}
	return d.Conn.Read(p)
}

func (d *divertedConn) Close() error {
	err := d.Conn.Close()
	d.once.Do(func() { close(d.closed) })
	return err
}

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
