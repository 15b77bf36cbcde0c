package transport

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Credential is what a connection (or a long-lived HTTP response) proved
// who it is with: a client certificate that verified, or a bearer token
// the node accepted. Sessions keep it for as long as the connection is
// open, to ask again whether it still stands.
type Credential struct {
	// Principal is the name it proved.
	Principal string
	// Chain is the verified certificate chain, leaf first and the CA
	// last, when Principal is the leaf's name; nil for a token.
	Chain []*x509.Certificate
	// TokenSHA256 is the SHA-256 of the token Principal came from. The
	// token itself is never kept. Zero for a certificate.
	TokenSHA256 [sha256.Size]byte
}

// TokenCredential is the credential of token, accepted for principal.
func TokenCredential(principal, token string) Credential {
	return Credential{Principal: principal, TokenSHA256: sha256.Sum256([]byte(token))}
}

// CertCredential is the credential of a TLS connection's client
// certificate; false when none verified (see CertPrincipal).
func CertCredential(st tls.ConnectionState) (Credential, bool) {
	p := CertPrincipal(st)
	if p == "" {
		return Credential{}, false
	}
	return Credential{Principal: p, Chain: st.VerifiedChains[0]}, true
}

// IsToken reports whether the credential is a token's.
func (c Credential) IsToken() bool { return c.Chain == nil && c.TokenSHA256 != [sha256.Size]byte{} }

// Expires is when the credential stops standing on its own: the earliest
// NotAfter of its chain (the leaf's, or its CA's if that comes first);
// zero for a token.
func (c Credential) Expires() time.Time {
	var t time.Time
	for _, cert := range c.Chain {
		if t.IsZero() || cert.NotAfter.Before(t) {
			t = cert.NotAfter
		}
	}
	return t
}

// key tells credentials apart for Recheck's memo: the same certificate
// or the same token, for the same principal, is checked once.
func (c Credential) key() string {
	if len(c.Chain) > 0 {
		return "cert\x00" + c.Principal + "\x00" + string(c.Chain[0].Raw)
	}
	return "token\x00" + c.Principal + "\x00" + string(c.TokenSHA256[:])
}

// Sessions are the open connections, or long-lived responses, that
// proved a principal, each with its Credential. Recheck (after the node
// reloads its tokens file or its CA) asks the check again about every
// one and ends those it refuses; a session whose credential is a
// certificate is ended when the certificate expires. A connection is
// opened once and closed once, so nothing here runs per request. Safe
// for concurrent use.
type Sessions struct {
	check func(Credential) error // nil: every credential stands until it expires
	log   hclog.Logger
	rate  *RateLog
	mu    struct {
		sync.Mutex
		gen  uint64
		open map[*Session]struct{}
	}
}

// Session is one open connection's, or response's, credential.
type Session struct {
	ss    *Sessions
	cred  Credential
	end   func(error)
	once  sync.Once
	timer *time.Timer // guarded by ss.mu; fires at the credential's expiry
}

// Ended is a session that Recheck ended, and why.
type Ended struct {
	Principal string
	Err       error
}

// NewSessions returns an empty set. check says whether a credential
// still stands (nil, or an error wrapping ErrUnauthenticated that says
// why not); nil means every credential does until it expires. log gets
// the line about each expiry, at most one a minute per principal.
func NewSessions(check func(Credential) error, log hclog.Logger) *Sessions {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	s := &Sessions{check: check, log: log, rate: NewRateLog(log, 0)}
	s.mu.open = make(map[*Session]struct{})
	return s
}

// Gen is the number of Rechecks begun. A caller reads it before it
// authenticates and hands it to Open, which checks the credential again
// if a Recheck began meanwhile: so a credential accepted just before a
// reload, and opened just after the Recheck went by, is not missed.
func (s *Sessions) Gen() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.gen
}

// Open starts the session of cred. end ends the connection (or the
// response), with the reason as an error wrapping ErrUnauthenticated; it
// is called at most once, by Recheck, at the credential's expiry, or
// here when a Recheck began after gen (see Gen) and the credential no
// longer stands. The owner calls Close when the connection ends, however
// it ends.
func (s *Sessions) Open(gen uint64, cred Credential, end func(error)) *Session {
	ss := &Session{ss: s, cred: cred, end: end}
	s.mu.Lock()
	s.mu.open[ss] = struct{}{}
	if exp := cred.Expires(); !exp.IsZero() {
		ss.timer = time.AfterFunc(time.Until(exp), ss.expired)
	}
	stale := s.mu.gen != gen
	s.mu.Unlock()
	if stale && s.check != nil {
		if err := s.check(cred); err != nil {
			ss.stop(err)
		}
	}
	return ss
}

// Len is the number of open sessions.
func (s *Sessions) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.open)
}

// Recheck asks the check about every open session's credential, each
// distinct credential once, and ends the sessions it refuses. It returns
// them, for the caller to log in one line.
func (s *Sessions) Recheck() []Ended {
	s.mu.Lock()
	s.mu.gen++
	open := make([]*Session, 0, len(s.mu.open))
	for ss := range s.mu.open {
		open = append(open, ss)
	}
	s.mu.Unlock()
	if s.check == nil {
		return nil
	}
	var ended []Ended
	memo := map[string]error{}
	for _, ss := range open {
		k := ss.cred.key()
		err, seen := memo[k]
		if !seen {
			err = s.check(ss.cred)
			memo[k] = err
		}
		if err != nil && ss.stop(err) {
			ended = append(ended, Ended{Principal: ss.cred.Principal, Err: err})
		}
	}
	return ended
}

// expired ends a session at its certificate's NotAfter.
func (ss *Session) expired() {
	exp := ss.cred.Expires()
	err := fmt.Errorf("%w: the client certificate of %q expired at %s; renew it", ErrUnauthenticated,
		ss.cred.Principal, exp.UTC().Format(time.RFC3339))
	if ss.stop(err) {
		ss.ss.rate.Warn("expired:"+ss.cred.Principal, "a client certificate expired; the connections it opened are ended",
			"principal", ss.cred.Principal, "not_after", exp.UTC())
	}
}

// stop ends the session once; it reports whether this call did.
func (ss *Session) stop(err error) bool {
	did := false
	ss.once.Do(func() {
		did = true
		ss.ss.remove(ss)
		ss.end(err)
	})
	return did
}

// Close forgets the session without ending anything: its connection
// ended on its own. It is idempotent, and nil-safe.
func (ss *Session) Close() {
	if ss == nil {
		return
	}
	ss.once.Do(func() { ss.ss.remove(ss) })
}

func (s *Sessions) remove(ss *Session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss.timer != nil {
		ss.timer.Stop()
	}
	delete(s.mu.open, ss)
}
