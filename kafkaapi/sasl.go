package kafkaapi

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"gostream/transport"
)

// Security is what a listener asks of its clients (docs/kafka.md,
// "Security"). Its zero value is none: every client is the empty
// principal, which authorization (when on) lets do nothing.
type Security struct {
	// TLS, when set, makes the listener speak TLS only, with the node's
	// certificate; a client certificate that verifies against its CA
	// names the connection's principal.
	TLS *tls.Config
	// Required refuses, by closing the connection, every request but
	// ApiVersions and the SASL ones until the connection has a
	// principal (authentication is on).
	Required bool
	// Token returns the principal of a bearer token: SASL/PLAIN's password
	// (the principal its username) or SASL/OAUTHBEARER's token. Nil: no
	// SASL mechanism is offered.
	Token func(token string) (string, error)
	// Sessions, when set, holds every connection that proved a
	// principal, with its credential: one whose token a reload revoked,
	// or whose certificate no longer verifies or expired, is closed.
	Sessions *transport.Sessions
}

// SASL mechanisms served: over TLS only.
const (
	mechPlain       = "PLAIN"
	mechOAuthBearer = "OAUTHBEARER"
)

// connState is what a connection proved, kept by its goroutine.
type connState struct {
	host      string // the client's address, without its port
	tls       bool
	sendfile  bool // plain TCP: a fetch's large batches are sent from their files (transport.CanSendFile)
	principal string
	mech      string // the mechanism SaslHandshake chose, "" before it
	rawToken  bool   // SaslHandshake v0: the next frame is a bare SASL token
	// sess is the principal's credential in Security.Sessions; end
	// closes the connection when it stops standing.
	sess *transport.Session
	end  func(error)
}

// watch puts the credential the connection proved its principal with in
// Security.Sessions (in place of one it proved before), gen being
// Sessions.Gen from before it was checked.
func (s *Server) watch(st *connState, gen uint64, cred transport.Credential) {
	if s.cfg.Security.Sessions == nil {
		return
	}
	st.sess.Close()
	st.sess = s.cfg.Security.Sessions.Open(gen, cred, st.end)
}

// gen is Security.Sessions.Gen, 0 without sessions.
func (s *Server) gen() uint64 {
	if s.cfg.Security.Sessions == nil {
		return 0
	}
	return s.cfg.Security.Sessions.Gen()
}

type connKey struct{}

// principalOf is the principal of the connection ctx is a request of.
func principalOf(ctx context.Context) string {
	if st, ok := ctx.Value(connKey{}).(*connState); ok {
		return st.principal
	}
	return ""
}

// sendsFiles reports whether the connection ctx is a request of sends
// files (transport.SendFile): whether a fetch asks for its batches as ranges of
// their segment files.
func sendsFiles(ctx context.Context) bool {
	st, ok := ctx.Value(connKey{}).(*connState)
	return ok && st.sendfile
}

// handshakeTimeout bounds a TLS handshake.
const handshakeTimeout = 10 * time.Second

// secure shakes hands on a TLS listener and returns the connection to
// read, with its state: the principal of a client certificate that
// verified, watched until it no longer stands.
func (s *Server) secure(c net.Conn) (net.Conn, *connState, error) {
	host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
	st := &connState{host: host, end: func(err error) {
		s.log.Debug("closing a Kafka connection: its credential no longer stands", "peer", c.RemoteAddr(), "err", err)
		c.Close()
	}}
	if s.cfg.Security.TLS == nil {
		st.sendfile = transport.CanSendFile(c)
		return c, st, nil
	}
	gen := s.gen()
	tc := tls.Server(c, s.cfg.Security.TLS)
	tc.SetDeadline(time.Now().Add(handshakeTimeout))
	if err := tc.Handshake(); err != nil {
		return nil, nil, err
	}
	tc.SetDeadline(time.Time{})
	st.tls = true
	if cred, ok := transport.CertCredential(tc.ConnectionState()); ok {
		st.principal = cred.Principal
		s.watch(st, gen, cred)
	}
	return tc, st, nil
}

// admitted reports whether a request of key may be served on a
// connection in state st.
func (s *Server) admitted(st *connState, key int16) bool {
	if !s.cfg.Security.Required || st.principal != "" {
		return true
	}
	switch key {
	case kmsg.ApiVersions.Int16(), kmsg.SASLHandshake.Int16(), kmsg.SASLAuthenticate.Int16():
		return true
	}
	return false
}

// mechanisms are the SASL mechanisms this listener offers: none without
// TLS (a token is never sent in the clear) or without tokens.
func (s *Server) mechanisms(st *connState) []string {
	if !st.tls || s.cfg.Security.Token == nil {
		return []string{}
	}
	return []string{mechPlain, mechOAuthBearer}
}

// saslHandshake picks the connection's mechanism.
func (s *Server) saslHandshake(st *connState, req *kmsg.SASLHandshakeRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SupportedMechanisms = s.mechanisms(st)
	mech := strings.ToUpper(req.Mechanism)
	switch {
	case st.principal != "" && st.mech != "":
		resp.ErrorCode = kerr.IllegalSaslState.Code
	case !slices.Contains(resp.SupportedMechanisms, mech):
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
	default:
		st.mech, st.rawToken = mech, req.Version == 0
	}
	return resp
}

// saslAuthenticate checks the client's SASL message and, when it proves a
// principal, gives the connection that principal. A failure is answered,
// and then the connection is closed (errClose).
func (s *Server) saslAuthenticate(st *connState, req *kmsg.SASLAuthenticateRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	if st.mech == "" || st.rawToken {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		resp.ErrorMessage = kmsg.StringPtr("SaslAuthenticate before SaslHandshake v1")
		return resp, nil
	}
	if err := s.authenticate(st, req.SASLAuthBytes); err != nil {
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr(err.Error())
		return resp, nil
	}
	return resp, nil
}

// authenticate reads a SASL message of the connection's mechanism and
// sets its principal.
func (s *Server) authenticate(st *connState, msg []byte) error {
	var user, token string
	switch st.mech {
	case mechPlain:
		// [authzid] NUL authcid NUL passwd (RFC 4616).
		parts := bytes.Split(msg, []byte{0})
		if len(parts) != 3 {
			return fmt.Errorf("a PLAIN message is authzid NUL username NUL password")
		}
		if len(parts[0]) > 0 && !bytes.Equal(parts[0], parts[1]) {
			return fmt.Errorf("PLAIN: acting for another principal (%q) is not supported", parts[0])
		}
		user, token = string(parts[1]), string(parts[2])
	case mechOAuthBearer:
		// gs2-header ^A auth=Bearer TOKEN ^A ... ^A ^A (RFC 7628).
		fields := strings.Split(string(msg), "\x01")
		for _, f := range fields[1:] {
			if v, ok := strings.CutPrefix(f, "auth="); ok {
				scheme, t, _ := strings.Cut(v, " ")
				if strings.EqualFold(scheme, "Bearer") {
					token = strings.TrimSpace(t)
				}
			}
		}
		if token == "" {
			return fmt.Errorf("an OAUTHBEARER message without auth=Bearer TOKEN")
		}
	default:
		return fmt.Errorf("no SASL mechanism chosen")
	}
	if len(token) > transport.MaxTokenBytes {
		return fmt.Errorf("a token of %d bytes; tokens are at most %d", len(token), transport.MaxTokenBytes)
	}
	gen := s.gen()
	principal, err := s.cfg.Security.Token(token)
	if err != nil {
		return err
	}
	if user != "" && user != principal {
		return fmt.Errorf("the token is not %q's", user)
	}
	st.principal = principal
	s.watch(st, gen, transport.TokenCredential(principal, token))
	return nil
}
