package transport

import (
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// FuzzServerAuthExchange sends a connection's first bytes, anything, to a
// server that requires authentication: whatever they are (frames in any
// order, Authenticate requests with any token, garbage, a cut frame), no
// request reaches the handler without the principal of an accepted token,
// and the server stays up and answers the next client.
func FuzzServerAuthExchange(f *testing.F) {
	auth := func(token string) (string, error) {
		if token == "good" {
			return "alice", nil
		}
		return "", ErrUnauthenticated
	}
	var unauthenticated atomic.Int64
	handler := HandlerFunc(func(ctx context.Context, req *Request) Reply {
		if req.Principal != "alice" {
			unauthenticated.Add(1)
		}
		return Immediate(&TopicRequest{Name: req.Principal}, nil)
	})
	// The log is dropped: a fuzz target may not log through f.
	srv := NewServer(ServerConfig{RequireAuth: true, Authenticate: auth, Logger: hclog.NewNullLogger(),
		ReadTimeout: 200 * time.Millisecond, IdleTimeout: 200 * time.Millisecond}, handler)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	go srv.Serve(ln)
	f.Cleanup(func() { srv.Close() })
	addr := ln.Addr().String()

	echo := requestFrame(apiEcho, 2, &TopicRequest{Name: "x"})
	good := requestFrame(APIAuthenticate, 1, &AuthenticateRequest{Token: "good"})
	bad := requestFrame(APIAuthenticate, 1, &AuthenticateRequest{Token: "bad"})
	empty := requestFrame(APIAuthenticate, 1, &AuthenticateRequest{})
	f.Add(echo)
	f.Add(append(append([]byte{}, good...), echo...))
	f.Add(append(append([]byte{}, bad...), echo...))
	f.Add(append(append(append([]byte{}, bad...), good...), echo...))
	f.Add(append(append([]byte{}, empty...), echo...))
	f.Add(good[:len(good)-2])
	f.Add([]byte{0x16, 0x03, 0x01, 0x00, 0x05})
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))

	f.Fuzz(func(t *testing.T, data []byte) {
		// Each input is a connection of its own: an accepted token on one
		// is never another's principal.
		nc, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		nc.SetDeadline(time.Now().Add(2 * time.Second))
		nc.Write(data)
		nc.(*net.TCPConn).CloseWrite()
		io.Copy(io.Discard, nc) // until the server closes or the deadline
		nc.Close()
		if n := unauthenticated.Load(); n > 0 {
			t.Fatalf("%d requests reached the handler without the principal of an accepted token", n)
		}
		// The server serves the next client.
		c, err := Dial(context.Background(), addr, ConnConfig{Token: "good"})
		if err != nil {
			t.Fatalf("the server stopped serving: %v", err)
		}
		var got TopicRequest
		err = c.Call(context.Background(), apiEcho, &TopicRequest{}, &got)
		c.Close()
		if err != nil || got.Name != "alice" {
			t.Fatalf("the next client: %q, %v", got.Name, err)
		}
	})
}
