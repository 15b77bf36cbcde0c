package transport

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tokenTable is a tokens file in memory: what a node's Authenticate and
// Recheck read, changed by a test as a reload would.
type tokenTable struct {
	mu     sync.Mutex
	tokens map[string]string // token -> principal
}

func (tt *tokenTable) set(token, principal string) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if principal == "" {
		delete(tt.tokens, token)
		return
	}
	tt.tokens[token] = principal
}

func (tt *tokenTable) authenticate(token string) (string, error) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if p, ok := tt.tokens[token]; ok {
		return p, nil
	}
	return "", fmt.Errorf("%w: the token is not recognized", ErrUnauthenticated)
}

// stands refuses a token credential whose token is gone or names
// another principal now; certificates stand.
func (tt *tokenTable) stands(c Credential) error {
	if !c.IsToken() {
		return nil
	}
	tt.mu.Lock()
	defer tt.mu.Unlock()
	for tok, p := range tt.tokens {
		if sha256.Sum256([]byte(tok)) == c.TokenSHA256 {
			if p != c.Principal {
				return fmt.Errorf("%w: the token of %q names %q now", ErrUnauthenticated, c.Principal, p)
			}
			return nil
		}
	}
	return fmt.Errorf("%w: the token of %q was revoked", ErrUnauthenticated, c.Principal)
}

// block starts a call that the server answers only when the connection
// ends (apiBlock), and returns where its error goes.
func block(t *testing.T, c *Conn) chan error {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- c.Call(testContext(t), apiBlock, &TopicRequest{}, &TopicRequest{}) }()
	return errc
}

func closedWithin(t *testing.T, errc chan error, within time.Duration, what string) {
	t.Helper()
	select {
	case err := <-errc:
		assert.ErrorIs(t, err, ErrConnClosed, what)
	case <-time.After(within):
		t.Fatalf("%s: still open %s later", what, within)
	}
}

// Server.Recheck closes, at once, the connections whose token no longer
// stands (gone from the table, or naming another principal now), with a
// call in flight on them; dialing again is refused, or is the new
// principal. Connections whose tokens and certificates stand go on, and
// nothing reached the handler from a closed one.
func TestRecheckEndsTheConnectionsOfARevokedToken(t *testing.T) {
	p := newTestPKI(t)
	tt := &tokenTable{tokens: map[string]string{"r-token": "reader", "k-token": "keeper", "m-token": "mover"}}
	var handled atomic.Int64
	srv, addr := startServer(t, ServerConfig{TLS: p.serverTLS(false), Authenticate: tt.authenticate, RequireAuth: true, Recheck: tt.stands},
		testHandler(&handled))
	dialAs := func(token string, certs ...tls.Certificate) *Conn {
		c, err := Dial(testContext(t), addr, ConnConfig{TLS: p.clientTLS(certs...), Token: token})
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		return c
	}
	reader, keeper, mover := dialAs("r-token"), dialAs("k-token"), dialAs("m-token")
	carol := dialAs("", p.cert(t, "carol", nil, time.Now().Add(time.Hour)))
	assert.Equal(t, "carol", carol.Principal())
	readerCall := block(t, reader)
	moverCall := block(t, mover)
	require.Eventually(t, func() bool { return srv.sessions.Len() == 4 }, 5*time.Second, time.Millisecond)
	// Both calls are in flight at the server before their connections
	// end: one not sent yet would fail as not sent, not as closed.
	require.Eventually(t, func() bool { return handled.Load() == 2 }, 5*time.Second, time.Millisecond)

	assert.Empty(t, srv.Recheck(), "nothing changed, nothing ended")
	tt.set("r-token", "")
	tt.set("m-token", "someone-else")
	ended := srv.Recheck()
	require.Len(t, ended, 2)
	why := map[string]string{}
	for _, e := range ended {
		assert.ErrorIs(t, e.Err, ErrUnauthenticated)
		why[e.Principal] = e.Err.Error()
	}
	assert.Contains(t, why["reader"], "revoked")
	assert.Contains(t, why["mover"], `names "someone-else" now`)
	closedWithin(t, readerCall, 5*time.Second, "the revoked reader's call")
	closedWithin(t, moverCall, 5*time.Second, "the mover's call")
	assert.Error(t, reader.Err())

	_, err := Dial(testContext(t), addr, ConnConfig{TLS: p.clientTLS(), Token: "r-token"})
	assert.ErrorIs(t, err, ErrUnauthenticated, "dialing again with the revoked token is refused")
	again := dialAs("m-token")
	assert.Equal(t, "someone-else", again.Principal(), "the moved token authenticates its new principal")

	echo(t, keeper, "still here")
	echo(t, carol, "me too")
	assert.Empty(t, srv.Recheck(), "a second recheck ends nothing more")
	assert.Equal(t, 3, srv.sessions.Len(), "keeper, carol and the mover's new connection")
}

// A connection that authenticated with a certificate is closed at the
// certificate's NotAfter, its call in flight with it, and the expiry is
// logged once for its principal however many connections it had;
// another certificate's connection goes on.
func TestCertificateConnectionEndsAtExpiry(t *testing.T) {
	p := newTestPKI(t)
	log, lines := testLogger(t)
	_, addr := startServer(t, ServerConfig{TLS: p.serverTLS(false), Logger: log}, testHandler(nil))
	notAfter := time.Now().Add(3 * time.Second).Truncate(time.Second) // certificates hold whole seconds
	brief := p.cert(t, "brief", nil, notAfter)
	var conns []*Conn
	var calls []chan error
	for range 3 {
		c, err := Dial(testContext(t), addr, ConnConfig{TLS: p.clientTLS(brief)})
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		echo(t, c, "before")
		conns = append(conns, c)
		calls = append(calls, block(t, c))
	}
	steady, err := Dial(testContext(t), addr, ConnConfig{TLS: p.clientTLS(p.cert(t, "steady", nil, time.Now().Add(time.Hour)))})
	require.NoError(t, err)
	defer steady.Close()

	for i, errc := range calls {
		closedWithin(t, errc, time.Until(notAfter)+5*time.Second, fmt.Sprintf("connection %d of the brief certificate", i))
	}
	assert.False(t, time.Now().Before(notAfter), "not closed before the certificate's NotAfter")
	for _, c := range conns {
		assert.Error(t, c.Err())
	}
	echo(t, steady, "goes on")
	// The warning follows the closes it reports: wait for it.
	require.Eventually(t, func() bool { return strings.Contains(lines.String(), "a client certificate expired") },
		5*time.Second, 10*time.Millisecond, "no warning of the expiry: %s", lines.String())
	assert.Equal(t, 1, strings.Count(lines.String(), "a client certificate expired"), lines.String())
	assert.Contains(t, lines.String(), "principal=brief")
}

// A credential accepted just before a reload, whose session opens just
// after the Recheck went by, is checked when it opens: Open with the
// generation read before authenticating. One opened with the current
// generation is not checked again.
func TestSessionOpenedAcrossARecheckIsChecked(t *testing.T) {
	var checks atomic.Int64
	revoked := errors.New("revoked")
	s := NewSessions(func(Credential) error {
		checks.Add(1)
		return fmt.Errorf("%w: %w", ErrUnauthenticated, revoked)
	}, nil)
	cred := TokenCredential("reader", "r-token")

	gen := s.Gen()
	assert.Empty(t, s.Recheck(), "nothing open yet")
	var ended error
	ss := s.Open(gen, cred, func(err error) { ended = err })
	assert.ErrorIs(t, ended, revoked, "opened across a recheck: checked, and ended")
	assert.Equal(t, int64(1), checks.Load())
	assert.Zero(t, s.Len())
	ss.Close()

	ended = nil
	ss = s.Open(s.Gen(), cred, func(err error) { ended = err })
	assert.NoError(t, ended, "no recheck since: not checked")
	assert.Equal(t, int64(1), checks.Load())
	assert.Equal(t, 1, s.Len())
	ss.Close()
	ss.Close()
	assert.Zero(t, s.Len(), "Close is idempotent")
}

// Recheck asks once per distinct credential, however many sessions hold
// it, and ends each session once.
func TestRecheckAsksOncePerCredential(t *testing.T) {
	asked := map[string]int{}
	s := NewSessions(func(c Credential) error {
		asked[c.Principal]++
		if c.Principal == "reader" {
			return fmt.Errorf("%w: revoked", ErrUnauthenticated)
		}
		return nil
	}, nil)
	var ends atomic.Int64
	for range 50 {
		s.Open(s.Gen(), TokenCredential("reader", "r-token"), func(error) { ends.Add(1) })
		s.Open(s.Gen(), TokenCredential("keeper", "k-token"), func(error) { ends.Add(1) })
	}
	assert.Len(t, s.Recheck(), 50)
	assert.Equal(t, map[string]int{"reader": 1, "keeper": 1}, asked)
	assert.Equal(t, int64(50), ends.Load())
	assert.Empty(t, s.Recheck())
	assert.Equal(t, 50, s.Len())
}

// A certificate credential expires with the first of its chain to
// expire; a token's never does on its own.
func TestCredentialExpires(t *testing.T) {
	now := time.Now()
	leaf := &x509.Certificate{NotAfter: now.Add(time.Hour)}
	ca := &x509.Certificate{NotAfter: now.Add(time.Minute)}
	assert.Equal(t, now.Add(time.Minute), Credential{Principal: "a", Chain: []*x509.Certificate{leaf, ca}}.Expires())
	assert.True(t, TokenCredential("a", "t").Expires().IsZero())
	assert.True(t, TokenCredential("a", "t").IsToken())
	assert.False(t, Credential{Principal: "a", Chain: []*x509.Certificate{leaf}}.IsToken())
}
