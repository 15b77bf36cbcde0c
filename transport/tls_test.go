package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/security"
)

// testPKI is a CA with a server certificate for 127.0.0.1 and client
// certificates, as tls.Certificates.
type testPKI struct {
	ca     *security.CA
	pool   *x509.CertPool
	server tls.Certificate
}

func newTestPKI(t testing.TB) *testPKI {
	t.Helper()
	ca, err := security.NewCA("test CA", time.Hour)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(ca.PEM))
	p := &testPKI{ca: ca, pool: pool}
	p.server = p.cert(t, "node1", []string{"127.0.0.1"}, time.Now().Add(time.Hour))
	return p
}

func (p *testPKI) cert(t testing.TB, name string, hosts []string, notAfter time.Time) tls.Certificate {
	t.Helper()
	is, err := p.ca.Issue(security.IssueOptions{Name: name, Hosts: hosts, NotAfter: notAfter})
	require.NoError(t, err)
	c, err := tls.X509KeyPair(is.CertPEM, is.KeyPEM)
	require.NoError(t, err)
	return c
}

// serverTLS asks clients for a certificate (required or not) and
// verifies it against the CA.
func (p *testPKI) serverTLS(require bool) *tls.Config {
	auth := tls.VerifyClientCertIfGiven
	if require {
		auth = tls.RequireAndVerifyClientCert
	}
	return &tls.Config{MinVersion: MinTLSVersion, Certificates: []tls.Certificate{p.server}, ClientCAs: p.pool, ClientAuth: auth}
}

// clientTLS trusts the CA and presents certs.
func (p *testPKI) clientTLS(certs ...tls.Certificate) func() *tls.Config {
	return func() *tls.Config {
		return &tls.Config{MinVersion: MinTLSVersion, RootCAs: p.pool, Certificates: certs}
	}
}

// principalHandler answers apiEcho with the request's principal as the
// topic name, and counts the requests it was given.
func principalHandler(handled *atomic.Int64) Handler {
	return HandlerFunc(func(ctx context.Context, req *Request) Reply {
		handled.Add(1)
		return Immediate(&TopicRequest{Name: req.Principal}, nil)
	})
}

func echoPrincipal(t *testing.T, c *Conn) (string, error) {
	var got TopicRequest
	err := c.Call(testContext(t), apiEcho, &TopicRequest{}, &got)
	return got.Name, err
}

// A TLS server and client talk; the client certificate, verified, names
// the principal the handler sees; without one there is none.
func TestTLSCallsCarryTheCertificatesPrincipal(t *testing.T) {
	p := newTestPKI(t)
	var handled atomic.Int64
	_, addr := startServer(t, ServerConfig{TLS: p.serverTLS(false)}, principalHandler(&handled))

	c, err := Dial(testContext(t), addr, ConnConfig{TLS: p.clientTLS(p.cert(t, "alice", nil, time.Now().Add(time.Hour)))})
	require.NoError(t, err)
	defer c.Close()
	got, err := echoPrincipal(t, c)
	require.NoError(t, err)
	assert.Equal(t, "alice", got)

	anon, err := Dial(testContext(t), addr, ConnConfig{TLS: p.clientTLS()})
	require.NoError(t, err)
	defer anon.Close()
	got, err = echoPrincipal(t, anon)
	require.NoError(t, err)
	assert.Equal(t, "", got, "no certificate, no principal")
}

// Each way a TLS connection goes wrong is a clear error on the client's
// side, a bounded log line on the server's, and the server serves the
// next client.
func TestTLSRefusalsAreClearAndTheServerGoesOn(t *testing.T) {
	p := newTestPKI(t)
	other := newTestPKI(t)
	log, lines := testLogger(t)
	var handled atomic.Int64
	var failures atomic.Int64
	_, addr := startServer(t, ServerConfig{TLS: p.serverTLS(true), Logger: log, OnAuthFailure: func(string) { failures.Add(1) }},
		principalHandler(&handled))
	good := p.cert(t, "alice", nil, time.Now().Add(time.Hour))

	for _, tc := range []struct {
		name string
		cfg  ConnConfig
		code error
		says string
	}{
		{"plaintext client", ConnConfig{}, ErrTLSMismatch, "accepts only TLS"},
		{"server from another CA", ConnConfig{TLS: other.clientTLS(good)}, ErrUnauthenticated, "does not verify"},
		{"no client certificate", ConnConfig{TLS: p.clientTLS()}, ErrUnauthenticated, "refused this client"},
		{"client certificate from another CA", ConnConfig{TLS: p.clientTLS(other.cert(t, "mallory", nil, time.Now().Add(time.Hour)))}, ErrUnauthenticated, "refused this client"},
		{"expired client certificate", ConnConfig{TLS: p.clientTLS(p.cert(t, "old", nil, time.Now().Add(-time.Minute)))}, ErrUnauthenticated, "refused this client"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Dial(testContext(t), addr, tc.cfg)
			if err == nil {
				// A plaintext dial asks nothing: its first call learns.
				_, err = echoPrincipal(t, c)
				c.Close()
			}
			require.Error(t, err)
			t.Log(err)
			assert.ErrorIs(t, err, tc.code)
			assert.Contains(t, err.Error(), tc.says)
		})
	}
	assert.Zero(t, handled.Load(), "no refused connection reached the handler")
	assert.GreaterOrEqual(t, failures.Load(), int64(4))

	// The server goes on, and its log holds a line per source a minute,
	// however many handshakes fail.
	for range 30 {
		c, err := Dial(testContext(t), addr, ConnConfig{TLS: other.clientTLS(good)})
		if err == nil {
			c.Close()
		}
	}
	c, err := Dial(testContext(t), addr, ConnConfig{TLS: p.clientTLS(good)})
	require.NoError(t, err)
	defer c.Close()
	got, err := echoPrincipal(t, c)
	require.NoError(t, err)
	assert.Equal(t, "alice", got)
	assert.LessOrEqual(t, strings.Count(lines.String(), "TLS handshake failed"), 1, "handshake failures are logged once a minute per source")
}

// A TLS client at a plaintext server is told the server does not speak
// TLS, at once.
func TestTLSClientAtAPlaintextServer(t *testing.T) {
	p := newTestPKI(t)
	_, addr := startServer(t, ServerConfig{}, testHandler(nil))
	start := time.Now()
	_, err := Dial(testContext(t), addr, ConnConfig{TLS: p.clientTLS()})
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrTLSMismatch)
	assert.Contains(t, err.Error(), "does not speak TLS")
	assert.Less(t, time.Since(start), 2*time.Second)
}

// Nothing older than TLS 1.2 is spoken.
func TestTLSRefusesOldVersions(t *testing.T) {
	p := newTestPKI(t)
	_, addr := startServer(t, ServerConfig{TLS: p.serverTLS(false)}, testHandler(nil))
	_, err := Dial(testContext(t), addr, ConnConfig{TLS: func() *tls.Config {
		return &tls.Config{RootCAs: p.pool, MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}
	}})
	require.Error(t, err)
	assert.NotErrorIs(t, err, ErrTLSMismatch)
}

// With authentication required, a connection gets Unauthenticated for
// every request until a token is accepted, and nothing reaches the
// handler; a wrong token is refused and the connection may try again.
func TestAuthenticationIsRequired(t *testing.T) {
	p := newTestPKI(t)
	var handled atomic.Int64
	auth := func(token string) (string, error) {
		if token == "s3cret" {
			return "bob", nil
		}
		return "", fmt.Errorf("%w: the token is not recognized", ErrUnauthenticated)
	}
	_, addr := startServer(t, ServerConfig{TLS: p.serverTLS(false), Authenticate: auth, RequireAuth: true}, principalHandler(&handled))

	c, err := Dial(testContext(t), addr, ConnConfig{TLS: p.clientTLS()})
	require.NoError(t, err)
	defer c.Close()
	_, err = echoPrincipal(t, c)
	require.ErrorIs(t, err, ErrUnauthenticated)
	var resp AuthenticateResponse
	err = c.Call(testContext(t), APIAuthenticate, &AuthenticateRequest{Token: "guess"}, &resp)
	require.ErrorIs(t, err, ErrUnauthenticated)
	_, err = echoPrincipal(t, c)
	require.ErrorIs(t, err, ErrUnauthenticated, "a refused token authenticates nothing")
	require.NoError(t, c.Call(testContext(t), APIAuthenticate, &AuthenticateRequest{Token: "s3cret"}, &resp))
	assert.Equal(t, "bob", resp.Principal)
	got, err := echoPrincipal(t, c)
	require.NoError(t, err)
	assert.Equal(t, "bob", got)
	assert.Equal(t, int64(1), handled.Load(), "only the authenticated request reached the handler")

	// ConnConfig.Token authenticates as the connection opens; a wrong
	// one fails the dial.
	tc, err := Dial(testContext(t), addr, ConnConfig{TLS: p.clientTLS(), Token: "s3cret"})
	require.NoError(t, err)
	defer tc.Close()
	got, err = echoPrincipal(t, tc)
	require.NoError(t, err)
	assert.Equal(t, "bob", got)
	_, err = Dial(testContext(t), addr, ConnConfig{TLS: p.clientTLS(), Token: "wrong"})
	require.ErrorIs(t, err, ErrUnauthenticated)

	// A verified client certificate authenticates too.
	cc, err := Dial(testContext(t), addr, ConnConfig{TLS: p.clientTLS(p.cert(t, "carol", nil, time.Now().Add(time.Hour)))})
	require.NoError(t, err)
	defer cc.Close()
	got, err = echoPrincipal(t, cc)
	require.NoError(t, err)
	assert.Equal(t, "carol", got)
}

// A diverted connection carries the principal of its certificate.
func TestDivertedTLSConnectionNamesItsPrincipal(t *testing.T) {
	p := newTestPKI(t)
	got := make(chan string, 1)
	_, addr := startServer(t, ServerConfig{TLS: p.serverTLS(false), DivertByte: 0xd7, Divert: func(c net.Conn, principal string) {
		got <- principal
		c.Close()
	}}, testHandler(nil))
	cfg := p.clientTLS(p.cert(t, "node2", nil, time.Now().Add(time.Hour)))()
	cfg.ServerName = "127.0.0.1"
	c, err := tls.Dial("tcp", addr, cfg)
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Write([]byte{0xd7})
	require.NoError(t, err)
	select {
	case p := <-got:
		assert.Equal(t, "node2", p)
	case <-time.After(5 * time.Second):
		t.Fatal("not diverted")
	}
}

// Over TLS, the frames that go out together (packed into shared records,
// a large one on its own) all arrive whole and in order: many calls at
// once, small and large, are each answered with what they sent.
func TestTLSConcurrentCallsOfAllSizes(t *testing.T) {
	p := newTestPKI(t)
	_, addr := startServer(t, ServerConfig{TLS: p.serverTLS(false)}, testHandler(nil))
	c, err := Dial(testContext(t), addr, ConnConfig{TLS: p.clientTLS()})
	require.NoError(t, err)
	defer c.Close()
	const n = 200
	errs := make(chan error, n)
	for i := range n {
		go func() {
			name := strings.Repeat(fmt.Sprint(i%10), 1+i*i%240)
			var got TopicRequest
			err := c.Call(testContext(t), apiEcho, &TopicRequest{Name: name}, &got)
			if err == nil && got.Name != name {
				err = fmt.Errorf("call %d answered %d bytes, sent %d", i, len(got.Name), len(name))
			}
			if err == nil && i%20 == 0 {
				big := make([]byte, 100<<10+i)
				var resp FetchResponse
				err = c.Call(testContext(t), apiBig, &FetchRequest{MaxBytes: int32(len(big))}, &resp)
				if err == nil && len(resp.Batches) != len(big) {
					err = fmt.Errorf("big call %d: %d bytes, want %d", i, len(resp.Batches), len(big))
				}
			}
			errs <- err
		}()
	}
	for range n {
		require.NoError(t, <-errs)
	}
}
