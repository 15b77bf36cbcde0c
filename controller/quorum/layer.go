package quorum

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"gostream/transport"
)

// Raft traffic shares each candidate's RPC address with the frames of the
// gostream protocol. An outgoing Raft connection begins with Marker, which
// no frame begins with (the RPC server diverts such connections to the
// layer: transport.ServerConfig.Divert), then a preamble: one byte of
// length and the cluster id of the dialing candidate (empty while it has
// none). A candidate refuses, closes and logs a connection from another
// cluster; an empty id on either side is let through, since a candidate
// that joins empty learns the id from the log.

// Marker begins every Raft connection.
const Marker byte = 0xd7

// preambleTimeout bounds the wait for a diverted connection's preamble.
const preambleTimeout = 5 * time.Second

// Layer is a raft.StreamLayer over the RPC address.
type Layer struct {
	addr      layerAddr
	clusterID func() string
	// LocalIP, if set, is the address this candidate's Raft connections
	// are dialed from (the node's --dial-source), as every other
	// connection the node opens is.
	LocalIP net.IP
	// TLS, if set, gives the configuration of each connection Dial
	// opens (mutual TLS between the nodes); nil dials in plaintext.
	TLS func() *tls.Config
	// Allow, if set, decides whether a diverted connection's principal
	// (its verified certificate's name, "" without one) may speak Raft
	// with this candidate; an error says why not.
	Allow  func(principal string) error
	logger hclog.Logger
	conns  chan net.Conn
	done   chan struct{}
	once   sync.Once

	mu          sync.Mutex
	lastRefusal time.Time
	refusals    int // since lastRefusal was logged
}

var _ raft.StreamLayer = (*Layer)(nil)

type layerAddr string

func (a layerAddr) Network() string { return "tcp" }
func (a layerAddr) String() string  { return string(a) }

// NewLayer makes the layer of the candidate advertised at advertise (its
// RPC address). clusterID gives the cluster id it holds now.
func NewLayer(advertise string, clusterID func() string, logger hclog.Logger) *Layer {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	return &Layer{addr: layerAddr(advertise), clusterID: clusterID, logger: logger, conns: make(chan net.Conn), done: make(chan struct{})}
}

// NewTransport is Raft's network transport over l.
func NewTransport(l *Layer, logger hclog.Logger) *raft.NetworkTransport {
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: l, MaxPool: 3, Timeout: 2 * time.Second, Logger: newLimitedLogger(logger)})
}

// Divert takes a connection the RPC server diverted (its Marker read).
func (l *Layer) Divert(c net.Conn, principal string) {
	if l.Allow != nil {
		if err := l.Allow(principal); err != nil {
			l.refuse(c, err.Error())
			return
		}
	}
	go func() {
		c.SetReadDeadline(time.Now().Add(preambleTimeout))
		theirs, err := readPreamble(c)
		c.SetReadDeadline(time.Time{})
		if err != nil {
			l.refuse(c, fmt.Sprintf("bad preamble: %v", err))
			return
		}
		if ours := l.clusterID(); ours != "" && theirs != "" && ours != theirs {
			l.refuse(c, fmt.Sprintf("it is a candidate of cluster %q, this one is of cluster %q", theirs, ours))
			return
		}
		select {
		case l.conns <- c:
		case <-l.done:
			c.Close()
		}
	}()
}

// refuse closes c and logs why, at most once a minute with the count.
func (l *Layer) refuse(c net.Conn, why string) {
	c.Close()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refusals++
	if time.Since(l.lastRefusal) < time.Minute {
		return
	}
	l.logger.Warn("refused a controller Raft connection", "peer", c.RemoteAddr().String(), "why", why, "refused_since_last_warning", l.refusals)
	l.lastRefusal, l.refusals = time.Now(), 0
}

func readPreamble(r io.Reader) (string, error) {
	var n [1]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return "", err
	}
	id := make([]byte, n[0])
	if _, err := io.ReadFull(r, id); err != nil {
		return "", err
	}
	return string(id), nil
}

// Accept implements net.Listener.
func (l *Layer) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener.
func (l *Layer) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr implements net.Listener: the advertised address, which Raft
// gives the others as this candidate's.
func (l *Layer) Addr() net.Addr { return l.addr }

// Dial implements raft.StreamLayer.
func (l *Layer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	select {
	case <-l.done:
		return nil, errors.New("the controller's Raft layer is closed")
	default:
	}
	d := net.Dialer{Timeout: timeout}
	if l.LocalIP != nil {
		d.LocalAddr = &net.TCPAddr{IP: l.LocalIP}
	}
	c, err := d.Dial("tcp", string(address))
	if err != nil {
		return nil, err
	}
	if l.TLS != nil {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		tc, err := transport.ClientHandshake(ctx, c, string(address), l.TLS())
		cancel()
		if err != nil {
			c.Close()
			return nil, err
		}
		c = tc
	}
	id := l.clusterID()
	if len(id) > 255 {
		c.Close()
		return nil, fmt.Errorf("cluster id of %d bytes", len(id))
	}
	c.SetWriteDeadline(time.Now().Add(timeout))
	_, err = c.Write(append([]byte{Marker, byte(len(id))}, id...))
	c.SetWriteDeadline(time.Time{})
	if err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}
