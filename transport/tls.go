package transport

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// MinTLSVersion is the oldest TLS version a node or client speaks.
const MinTLSVersion = tls.VersionTLS12

// tlsRecordHandshake is the first byte of a TLS connection (a handshake
// record); a frame of ours begins with 0 (its length's high byte).
const tlsRecordHandshake = 0x16

// peekedConn is a connection whose first bytes were looked at before TLS
// took it over: reads come through br.
type peekedConn struct {
	net.Conn
	br *bufio.Reader
}

func (p *peekedConn) Read(b []byte) (int, error) { return p.br.Read(b) }

// handshake makes a TLS connection of a new one, bounded by ReadTimeout:
// a plaintext frame is answered with ErrTLSMismatch; a failed handshake
// is logged at a bounded rate. It reports whether the connection may go
// on, and sets the connection's principal from a verified client
// certificate.
func (c *serverConn) handshake(log hclog.Logger) bool {
	peer := c.raw.RemoteAddr().String()
	ip := addrKey(c.raw.RemoteAddr())
	deadline := time.Now().Add(c.s.cfg.ReadTimeout)
	c.raw.SetDeadline(deadline)
	first, err := c.raw.br.Peek(1)
	if err != nil {
		log.Trace("closed before a TLS handshake", "err", err)
		return false
	}
	if first[0] != tlsRecordHandshake {
		c.s.cfg.OnAuthFailure("plaintext")
		c.refusePlaintext(peer)
		c.s.authLog.Warn("plaintext:"+ip, "a connection that is not TLS reached the TLS listener; closed", "peer", peer)
		return false
	}
	ctx, cancel := context.WithDeadline(c.ctx, deadline)
	defer cancel()
	tc := c.nc.(*tls.Conn)
	gen := c.s.sessions.Gen() // before the handshake reads the CA: see Sessions.Gen
	if err := tc.HandshakeContext(ctx); err != nil {
		c.s.cfg.OnAuthFailure("tls")
		c.s.authLog.Warn("tls:"+ip, "TLS handshake failed; connection closed", "peer", peer, "err", err)
		return false
	}
	c.raw.SetDeadline(time.Time{})
	if cred, ok := CertCredential(tc.ConnectionState()); ok {
		c.principal = cred.Principal
		c.session = c.s.sessions.Open(gen, cred, c.end)
	}
	return true
}

// end closes a connection whose credential no longer stands (see
// Server.Recheck). It closes the socket under TLS, which never blocks: a
// close_notify could wait on a peer that reads nothing.
func (c *serverConn) end(err error) {
	c.s.logger.Debug("closing connection: its credential no longer stands", "peer", c.raw0().RemoteAddr().String(), "err", err)
	c.raw0().Close()
	c.cancel()
}

// plaintextAnswer is what a plaintext listener writes to a TLS client:
// not a TLS record, so the client's handshake fails at once, saying the
// first record does not look like TLS, rather than waiting for a timeout.
const plaintextAnswer = "gostream: this address speaks the gostream protocol without TLS\n"

// refusePlaintext answers the frame a plaintext client sent first with
// ErrTLSMismatch, so that its caller reads why, not a closed connection.
func (c *serverConn) refusePlaintext(peer string) {
	f, _, err := readHeader(c.raw.br, c.s.frameLimit, maxClaimedFrame)
	if err != nil {
		return // not a frame either: nothing to answer
	}
	e := ToWire(fmt.Errorf("%w: %s accepts only TLS connections; give the cluster's CA (gostream-ctl --tls-ca, client.Config.TLS)",
		ErrTLSMismatch, c.raw.LocalAddr()))
	frame := finishFrame(AppendResponseError(newFrame(nil, len(e.Message)+8), e), f.API, f.Version, f.CorrelationID)
	c.raw.SetWriteDeadline(time.Now().Add(c.s.cfg.WriteTimeout))
	c.raw.Write(frame)
}

// authenticate serves an Authenticate request on the reading goroutine,
// so the requests after it are the principal's.
func (c *serverConn) authenticate(req *Request) Reply {
	var r AuthenticateRequest
	if err := Unmarshal(req.Body, &r); err != nil {
		return Immediate(nil, fmt.Errorf("%w: Authenticate: %v", ErrInvalidRequest, err))
	}
	if len(r.Token) > MaxTokenBytes {
		c.s.cfg.OnAuthFailure("token")
		return Immediate(nil, fmt.Errorf("%w: a token of %d bytes; tokens are at most %d", ErrUnauthenticated, len(r.Token), MaxTokenBytes))
	}
	if c.s.cfg.Authenticate == nil || r.Token == "" {
		// No token: the client asks who it is (after its handshake).
		return Immediate(&AuthenticateResponse{Principal: c.principal}, nil)
	}
	gen := c.s.sessions.Gen() // before the tokens are read: see Sessions.Gen
	principal, err := c.s.cfg.Authenticate(r.Token)
	if err != nil {
		c.s.cfg.OnAuthFailure("token")
		c.s.authLog.Warn("token:"+addrKey(c.raw0().RemoteAddr()), "a token was refused", "peer", req.RemoteAddr, "err", err)
		if !errors.Is(err, ErrUnauthenticated) {
			err = fmt.Errorf("%w: %v", ErrUnauthenticated, err)
		}
		return Immediate(nil, err)
	}
	c.principal = principal
	prev := c.session
	c.session = c.s.sessions.Open(gen, TokenCredential(principal, r.Token), c.end)
	prev.Close()
	return Immediate(&AuthenticateResponse{Principal: principal}, nil)
}

// raw0 is the connection under TLS, or the connection itself.
func (c *serverConn) raw0() net.Conn {
	if c.raw != nil {
		return c.raw.Conn
	}
	return c.nc
}

// ClientHandshake makes a TLS client connection of nc to addr, bounded by
// ctx. Failures that no retry mends (a certificate that does not verify,
// a refused client certificate) are ErrUnauthenticated; others are
// ErrBrokerNotAvailable.
func ClientHandshake(ctx context.Context, nc net.Conn, addr string, cfg *tls.Config) (*tls.Conn, error) {
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		cfg = cfg.Clone()
		cfg.ServerName = host
	}
	tc := tls.Client(nc, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, handshakeError(addr, err)
	}
	return tc, nil
}

// refusedAfterHandshake names a TLS alert a client read after its
// handshake: with TLS 1.3 a server refuses a client certificate only
// then. Other errors are returned as they are.
func refusedAfterHandshake(addr string, err error) error {
	if err == nil || !isTLSAlert(err) {
		return err
	}
	msg := err.Error()
	return fmt.Errorf("%w: TLS with %s: the node refused this client: %s (it wants a client certificate signed by its CA, valid now: --tls-cert, --tls-key)",
		ErrUnauthenticated, addr, msg[strings.Index(msg, "remote error: tls:"):])
}

// isTLSAlert reports whether err is a TLS alert the peer sent.
func isTLSAlert(err error) bool { return strings.Contains(err.Error(), "remote error: tls:") }

// handshakeError names why a client's handshake with addr failed.
func handshakeError(addr string, err error) error {
	var (
		verr   *tls.CertificateVerificationError
		alert  tls.AlertError
		header tls.RecordHeaderError
	)
	msg := err.Error()
	switch {
	case errors.As(err, &verr):
		return fmt.Errorf("%w: TLS handshake with %s: the node's certificate does not verify: %v (is --tls-ca the cluster's CA, and does the certificate name %s?)",
			ErrUnauthenticated, addr, verr.Err, hostOf(addr))
	case errors.As(err, &alert), strings.Contains(msg, "remote error: tls:"):
		return fmt.Errorf("%w: TLS handshake with %s: the node refused this client: %v (it may want a client certificate signed by its CA: --tls-cert, --tls-key)",
			ErrUnauthenticated, addr, err)
	case errors.As(err, &header):
		return fmt.Errorf("%w: TLS handshake with %s: the node does not speak TLS on this address (it runs without --tls-cert): drop --tls-ca", ErrTLSMismatch, addr)
	}
	return fmt.Errorf("%w: TLS handshake with %s: %w (does the node speak TLS? it closed the connection)", ErrBrokerNotAvailable, addr, err)
}

func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// coalesceMax is the scratch buffer WriteBuffers packs small buffers into
// over TLS; a buffer at least this large is written as it is.
const coalesceMax = 32 << 10

var coalesceBufs = sync.Pool{New: func() any { b := make([]byte, 0, coalesceMax); return &b }}

// WriteBuffers writes bufs to nc, as one writev on a plain connection
// (also one a LimitListener accepted, whose wrapper has no writev of its
// own: net.Buffers would write it buffer by buffer). tls.Conn has no
// writev: each Write is at least one TLS record and one syscall, so the
// small buffers (frame heads, acknowledgements of one group commit) are
// packed together first, and only large ones are written as they are.
// It returns the bytes of bufs written.
func WriteBuffers(nc net.Conn, bufs net.Buffers) (int64, error) {
	if lc, ok := nc.(*limitedConn); ok {
		nc = lc.Conn
	}
	if _, ok := nc.(*tls.Conn); !ok || len(bufs) == 1 {
		return bufs.WriteTo(nc)
	}
	sp := coalesceBufs.Get().(*[]byte)
	defer coalesceBufs.Put(sp)
	scratch := (*sp)[:0]
	var written int64
	flush := func() error {
		if len(scratch) == 0 {
			return nil
		}
		n, err := nc.Write(scratch)
		written += int64(n)
		scratch = scratch[:0]
		return err
	}
	for _, b := range bufs {
		if len(b) >= coalesceMax {
			if err := flush(); err != nil {
				return written, err
			}
			n, err := nc.Write(b)
			written += int64(n)
			if err != nil {
				return written, err
			}
			continue
		}
		if len(scratch)+len(b) > coalesceMax {
			if err := flush(); err != nil {
				return written, err
			}
		}
		scratch = append(scratch, b...)
	}
	return written, flush()
}
