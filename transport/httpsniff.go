package transport

import (
	"fmt"
	"io"
	"net"
)

// RefuseRPCOnHTTP wraps a node's HTTP listener. A connection whose first
// byte cannot begin an HTTP request (every HTTP method is upper-case
// letters; a gostream frame begins with its length's high byte, 0 for any
// frame a node takes) gets a short HTTP 400 answer that names rpcAddr, and
// is closed at once, rather than waiting out the HTTP server's header
// timeout: so a client given the HTTP address by mistake is told so (it
// reads "HTTP" where a frame should be, see sniff).
func RefuseRPCOnHTTP(ln net.Listener, rpcAddr string) net.Listener {
	return &rpcRefusingListener{Listener: ln, rpcAddr: rpcAddr}
}

type rpcRefusingListener struct {
	net.Listener
	rpcAddr string
}

func (l *rpcRefusingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &rpcRefusingConn{Conn: c, rpcAddr: l.rpcAddr}, nil
}

// rpcRefusingConn checks the first byte read. The HTTP server reads a
// connection from one goroutine until the request's headers are in, so
// checked needs no lock.
type rpcRefusingConn struct {
	net.Conn
	rpcAddr string
	checked bool
}

func (c *rpcRefusingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.checked || n == 0 {
		return n, err
	}
	c.checked = true
	if p[0] >= 'A' && p[0] <= 'Z' || p[0] == tlsRecordHandshake {
		return n, err // HTTP, or a TLS handshake for a TLS listener above
	}
	body := fmt.Sprintf("this is a gostream node's HTTP address; the gostream protocol is on its RPC address, %s\n", c.rpcAddr)
	fmt.Fprintf(c.Conn, "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	c.Conn.Close()
	return 0, io.EOF
}
