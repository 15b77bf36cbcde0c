// Package guard is what a node loaded of its security configuration
// (Config; docs/security.md): the TLS and tokens files and the authorizer
// of package security, and what its listeners ask of them: who a token or
// a certificate proves, whether an open connection's or a live read's
// credential still stands, whether a principal may do something. It keeps
// the metrics and the bounded log of refusals, and reloads the files on
// demand (SIGHUP), ending what no longer stands.
package guard

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"gostream/security"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"gostream/metadata"
	"gostream/transport"
)

// Config configures TLS, gossip encryption, authentication and
// authorization (docs/md). Its zero value is none of them.
type Config struct {
	// TLSCert and TLSKey (PEM files, both or neither) turn TLS on for the
	// RPC and HTTP listeners and for the connections the node dials.
	TLSCert, TLSKey string
	// TLSCA (PEM) is the cluster's CA: peers and client certificates are
	// verified against it, and the node presents its certificate to the
	// nodes it dials (mutual TLS). It needs TLSCert and TLSKey.
	TLSCA string
	// TLSClientAuth is what clients must show: "" is ClientAuthNone
	// without a CA and ClientAuthRequest with one.
	TLSClientAuth security.ClientAuth
	// GossipKeyFile holds the gossip encryption keys (base64, one per
	// line, the first sends).
	GossipKeyFile string
	// AuthTokensFile holds the bearer tokens' hashes and principals. It
	// turns authentication and authorization on, and needs TLSCA.
	AuthTokensFile string
	// Superusers may do everything once authorization is on; every node's
	// certificate name must be among them.
	Superusers []string
	// Reload, if set, makes the node read the TLS, tokens and gossip key
	// files again at each receive (gostream-node sends one per SIGHUP).
	Reload <-chan struct{}
}

// ClientAuthMode is TLSClientAuth with its default filled in.
func (s Config) ClientAuthMode() security.ClientAuth {
	if s.TLSClientAuth != "" {
		return s.TLSClientAuth
	}
	if s.TLSCA != "" {
		return security.ClientAuthRequest
	}
	return security.ClientAuthNone
}

// AuthOn reports whether authentication (and with it authorization) is
// on.
func (s Config) AuthOn() bool {
	return s.AuthTokensFile != "" || s.ClientAuthMode() == security.ClientAuthRequire
}

// Validate checks the combination of the security settings; the files
// themselves are read at start.
func (s Config) Validate() error {
	bad := func(field, value, reason string) error {
		return &ConfigError{Field: field, Value: value, Reason: reason}
	}
	if (s.TLSCert == "") != (s.TLSKey == "") {
		return bad("TLSCert", s.TLSCert+","+s.TLSKey, "a certificate needs its key and a key its certificate: give both --tls-cert and --tls-key")
	}
	if s.TLSCA != "" && s.TLSCert == "" {
		return bad("TLSCA", s.TLSCA, "with a CA the nodes present their certificates to each other (mutual TLS): give --tls-cert and --tls-key too")
	}
	switch s.TLSClientAuth {
	case "":
	case security.ClientAuthNone:
		if s.TLSCA != "" {
			return bad("TLSClientAuth", string(s.TLSClientAuth), "with --tls-ca a node asks every connection for a certificate, so that nodes can present theirs: use request (optional for clients) or require")
		}
	case security.ClientAuthRequest, security.ClientAuthRequire:
		if s.TLSCA == "" {
			return bad("TLSClientAuth", string(s.TLSClientAuth), "client certificates are verified against the cluster's CA: give --tls-ca")
		}
	default:
		return bad("TLSClientAuth", string(s.TLSClientAuth), "want none, request or require")
	}
	if s.AuthTokensFile != "" && s.TLSCA == "" {
		return bad("AuthTokensFile", s.AuthTokensFile, "tokens are never sent in the clear, and nodes prove themselves to each other by certificate: give --tls-cert, --tls-key and --tls-ca")
	}
	for _, p := range s.Superusers {
		if err := security.CheckPrincipal(p); err != nil {
			return bad("Superusers", p, err.Error())
		}
	}
	if s.AuthOn() && len(s.Superusers) == 0 {
		return bad("Superusers", "", "authentication is on, and with it authorization (default deny): name the nodes' certificate names, and an administrator, in --superusers")
	}
	return nil
}

// Guard is what a node loaded of its Config: the TLS and tokens files, the
// authorizer, and what its listeners ask of them (who a token or a
// certificate proves, whether a credential still stands, whether a
// principal may do something), with the metrics and the bounded log of
// refusals. Its zero value allows everything and loads nothing.
type Guard struct {
	cfg    Config
	tls    *security.TLSFiles   // nil without TLS
	tokens *security.Tokens     // nil without tokens
	authz  *security.Authorizer // nil while authorization is off
	denied *transport.RateLog
	// live holds the credentials of the Durable Streams live reads in
	// progress (long-polls, SSE streams), ended as the RPC server ends
	// connections (endStale); reloads counts the reloads done, for the
	// HTTP connections' certificates (httpConn).
	live    *transport.Sessions
	reloads atomic.Uint64
	// kafka holds the credentials of the Kafka connections that proved
	// a principal (KafkaSessions), ended as the others are.
	kafka *transport.Sessions

	log    hclog.Logger
	gossip func() error

	deniedTotal  *prometheus.CounterVec
	authFailures *prometheus.CounterVec
	reloadsTotal *prometheus.CounterVec
	endedTotal   *prometheus.CounterVec
}

// ConfigError reports an invalid Config field (its Go name), or a
// combination of fields, and why.
type ConfigError struct {
	Field, Value, Reason string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("security: %s %q: %s", e.Field, e.Value, e.Reason)
}

// ErrFiles is matched by the errors of loading the TLS, tokens and gossip
// key files.
var ErrFiles = errors.New("security files")

// GuardOptions are what a Guard needs besides its Config.
type GuardOptions struct {
	// ACLs are the cluster metadata's ACLs of the moment.
	ACLs func() []metadata.ACL
	// ReloadGossipKeys reads the gossip key file again into the running
	// gossip (nil: nothing to reload).
	ReloadGossipKeys func() error
	// Registry takes the Guard's metrics; Logger its lines.
	Registry prometheus.Registerer
	Logger   hclog.Logger
}

// NewGuard reads the files cfg names and, with authorization on, checks
// that this node's certificate name is a superuser (a *ConfigError for
// Superusers if not). A file that does not load gives an error matching
// ErrFiles.
func NewGuard(cfg Config, opts GuardOptions) (*Guard, error) {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	s := &Guard{cfg: cfg, log: opts.Logger, gossip: opts.ReloadGossipKeys, denied: transport.NewRateLog(opts.Logger.Named("authz"), 0)}
	s.deniedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gostream_authorization_denied_total", Help: "Requests refused because their principal may not do what they ask, by operation and resource type.",
	}, []string{"operation", "resource_type"})
	s.authFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gostream_authentication_failures_total", Help: "Connections and requests refused before authentication: failed TLS handshakes, plaintext on a TLS listener, refused tokens, requests without a principal.",
	}, []string{"kind"})
	s.reloadsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gostream_security_reloads_total", Help: "Reloads of the TLS, tokens and gossip key files (SIGHUP), by result.",
	}, []string{"result"})
	s.endedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gostream_credential_ended_total", Help: "Connections (rpc, kafka) and live HTTP reads (http) ended at a reload because the token or certificate they authenticated with no longer stands.",
	}, []string{"listener"})
	if opts.Registry != nil {
		opts.Registry.MustRegister(s.deniedTotal, s.authFailures, s.reloadsTotal, s.endedTotal)
	}
	s.live = transport.NewSessions(s.Stands, opts.Logger.Named("http"))
	s.kafka = transport.NewSessions(s.Stands, opts.Logger.Named("kafka"))
	if cfg.TLSCert != "" {
		f, err := security.LoadTLSFiles(cfg.TLSCert, cfg.TLSKey, cfg.TLSCA, cfg.ClientAuthMode())
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrFiles, err)
		}
		s.tls = f
	}
	if cfg.AuthTokensFile != "" {
		t, err := security.LoadTokens(cfg.AuthTokensFile)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrFiles, err)
		}
		s.tokens = t
	}
	if cfg.GossipKeyFile != "" {
		if _, err := security.LoadGossipKeys(cfg.GossipKeyFile); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrFiles, err)
		}
	}
	if cfg.AuthOn() {
		s.authz = security.NewAuthorizer(cfg.Superusers, opts.ACLs)
		if name := s.tls.Name(); !s.authz.Superuser(name) {
			return nil, &ConfigError{Field: "Superusers", Value: strings.Join(cfg.Superusers, ","), Reason: fmt.Sprintf(
				"this node's certificate (%s) names %q, which --superusers does not list: nodes act for each other (replication, registration, the controller), so every node's certificate name must be a superuser", cfg.TLSCert, name)}
		}
	}
	return s, nil
}

// HasTLS reports whether the node's listeners speak TLS; HasTokens whether
// it takes bearer tokens; Authorizing whether authorization is on.
func (s *Guard) HasTLS() bool      { return s.tls != nil }
func (s *Guard) HasTokens() bool   { return s.tokens != nil }
func (s *Guard) Authorizing() bool { return s.authz != nil }

// Reload reads the files again (SIGHUP). Each file that fails to load
// keeps what was loaded of it before; the failures are logged. Then the
// connections of rpc (nil: none), the Kafka connections and the live HTTP
// reads whose credentials no longer stand are ended.
func (s *Guard) Reload(rpc *transport.Server) {
	s.loadAgain()
	s.reloads.Add(1) // after the files: see httpConn
	s.endStale(rpc)
}

// loadAgain reads the security files again.
func (s *Guard) loadAgain() {
	var errs []error
	if s.tls != nil {
		var check func(string) error
		if s.authz != nil {
			check = func(name string) error {
				if !s.authz.Superuser(name) {
					return fmt.Errorf("the new certificate names %q, which --superusers does not list (every node's certificate name must be a superuser)", name)
				}
				return nil
			}
		}
		if err := s.tls.ReloadChecked(check); err != nil {
			errs = append(errs, err)
		}
	}
	if s.tokens != nil {
		if err := s.tokens.Reload(); err != nil {
			errs = append(errs, err)
		}
	}
	if s.cfg.GossipKeyFile != "" && s.gossip != nil {
		if err := s.gossip(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		s.reloadsTotal.WithLabelValues("failed").Inc()
		s.log.Error("reload of the security files failed; each file that did not load keeps what it had, the others are new", "err", err)
		return
	}
	s.reloadsTotal.WithLabelValues("ok").Inc()
	args := []any{}
	if s.tls != nil {
		args = append(args, "certificate", s.tls.Name(), "expires", s.tls.NotAfter().UTC())
	}
	if s.tokens != nil {
		args = append(args, "tokens", s.tokens.Len())
	}
	s.log.Info("security files reloaded", args...)
}

// endStale ends the RPC and Kafka connections and the live HTTP reads
// whose credentials no longer stand after a reload (a token no longer in
// the file, or naming another principal; a certificate that no longer
// verifies against the CA), and says so in one line: how many, and whose.
func (s *Guard) endStale(rpc *transport.Server) {
	var conns []transport.Ended
	if rpc != nil {
		conns = rpc.Recheck()
	}
	kconns := s.kafka.Recheck()
	reads := s.live.Recheck()
	s.endedTotal.WithLabelValues("rpc").Add(float64(len(conns)))
	s.endedTotal.WithLabelValues("kafka").Add(float64(len(kconns)))
	s.endedTotal.WithLabelValues("http").Add(float64(len(reads)))
	if len(conns)+len(kconns)+len(reads) == 0 {
		return
	}
	// One line for the reload, whatever the number of connections: each
	// principal once, with one reason.
	why := map[string]string{}
	var names []string
	for _, e := range slices.Concat(conns, kconns, reads) {
		if _, ok := why[e.Principal]; !ok {
			names = append(names, e.Principal)
			why[e.Principal] = e.Err.Error()
		}
	}
	slices.Sort(names)
	reasons := make([]string, len(names))
	for i, p := range names {
		reasons[i] = why[p]
	}
	s.log.Warn("ended the connections whose credentials no longer stand", "rpc_connections", len(conns), "kafka_connections", len(kconns), "live_http_reads", len(reads),
		"principals", strings.Join(names, ","), "reasons", strings.Join(reasons, "; "))
}

// Stands says whether a credential an open connection or a live read
// proved its principal with still stands: a certificate that verifies
// against the CA loaded last, at this moment; a token still in the file,
// for the same principal. Its error wraps transport.ErrUnauthenticated
// and says why not.
func (s *Guard) Stands(c transport.Credential) error {
	switch {
	case c.Chain != nil:
		if s.tls == nil {
			return nil
		}
		if err := s.tls.VerifyClient(c.Chain, time.Now()); err != nil {
			return fmt.Errorf("%w: the client certificate of %q no longer verifies against the cluster's CA (%v); present one that does",
				transport.ErrUnauthenticated, c.Principal, err)
		}
	case c.IsToken():
		if s.tokens == nil {
			return nil
		}
		p, err := s.tokens.PrincipalOf(c.TokenSHA256)
		if err != nil {
			return fmt.Errorf("%w: the token of %q was revoked (it is no longer in the tokens file)", transport.ErrUnauthenticated, c.Principal)
		}
		if p != c.Principal {
			return fmt.Errorf("%w: the token of %q names %q now; authenticate again", transport.ErrUnauthenticated, c.Principal, p)
		}
	}
	return nil
}

// KafkaSessions holds the Kafka listeners' connections that proved a
// principal (kafkaapi.Security.Sessions): each is ended at a reload that
// its credential no longer survives, or at its certificate's NotAfter.
func (s *Guard) KafkaSessions() *transport.Sessions { return s.kafka }

// WatchLive is the Durable Streams handler's watch (durable.SetWatch): a
// live read's context ends, with the reason as its cause, when its
// credential stops standing (at a reload, or at its certificate's
// NotAfter).
func (s *Guard) WatchLive(r *http.Request) (context.Context, func()) {
	gen := s.live.Gen() // before the credential is checked: see transport.Sessions.Gen
	cred, err := s.httpCredential(r)
	if err == nil && cred.Principal == "" {
		return r.Context(), func() {} // nobody to watch: authentication is off
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	if err == nil {
		err = s.Stands(cred)
	}
	if err != nil {
		cancel(err) // it fell between the request's authentication and now
		return ctx, func() { cancel(nil) }
	}
	sess := s.live.Open(gen, cred, cancel)
	return ctx, func() {
		sess.Close()
		cancel(nil)
	}
}

// httpConn is what a node remembers of one HTTP connection: the reload
// its client certificate was last verified at (see httpCredential).
type httpConn struct {
	verifiedAt atomic.Uint64
}

type httpConnKey struct{}

// ConnContext is the HTTP server's ConnContext: each connection gets its
// httpConn, marked verified at the reloads done before its handshake
// (which verified it against the CA loaded by then, or a newer one).
func (s *Guard) ConnContext(ctx context.Context, _ net.Conn) context.Context {
	hc := &httpConn{}
	hc.verifiedAt.Store(s.reloads.Load())
	return context.WithValue(ctx, httpConnKey{}, hc)
}

// ServerTLS is the RPC listener's TLS configuration, nil without TLS.
func (s *Guard) ServerTLS(alpn ...string) *tls.Config {
	if s.tls == nil {
		return nil
	}
	return s.tls.ServerConfig(alpn...)
}

// ClientTLS gives the configuration of each connection the node dials,
// nil without TLS.
func (s *Guard) ClientTLS() func() *tls.Config {
	if s.tls == nil {
		return nil
	}
	return s.tls.ClientConfig
}

// Authenticate checks a bearer token, for the transport and HTTP.
func (s *Guard) Authenticate(token string) (string, error) {
	c, err := s.tokenCredential(token)
	return c.Principal, err
}

// tokenCredential is the credential of a bearer token the node accepts,
// the token hashed once (an HTTP request authenticates at each request).
func (s *Guard) tokenCredential(token string) (transport.Credential, error) {
	if s.tokens == nil {
		return transport.Credential{}, fmt.Errorf("%w: this node takes no tokens (it runs without --auth-tokens-file); authenticate with a client certificate", transport.ErrUnauthenticated)
	}
	c := transport.TokenCredential("", token)
	p, err := s.tokens.PrincipalOf(c.TokenSHA256)
	if token == "" || errors.Is(err, security.ErrUnknownToken) {
		return transport.Credential{}, fmt.Errorf("%w: the token is not recognized", transport.ErrUnauthenticated)
	}
	if err != nil {
		return transport.Credential{}, fmt.Errorf("%w: %v", transport.ErrUnauthenticated, err)
	}
	c.Principal = p
	return c, nil
}

// Authorize refuses, with ErrUnauthorized, what principal may not do; it
// counts and logs (bounded) each refusal. With authorization off it
// allows everything.
func (s *Guard) Authorize(principal string, op metadata.Operation, rt metadata.ResourceType, name string) error {
	if s.authz == nil || s.authz.Allowed(principal, op, rt, name) || openToDescribe(principal, op, rt, name) {
		return nil
	}
	s.deniedTotal.WithLabelValues(string(op), string(rt)).Inc()
	s.denied.Warn("denied:"+principal, "request denied", "principal", principal, "operation", op, "resource", security.Describe(rt, name))
	return fmt.Errorf("%w: principal %q may not %s %s", transport.ErrUnauthorized, principal, op, security.Describe(rt, name))
}

// CanDescribe reports, without counting a refusal, whether principal may
// see a resource: lists leave out what it may not.
func (s *Guard) CanDescribe(principal string, rt metadata.ResourceType, name string) bool {
	return s.authz == nil || s.authz.Allowed(principal, metadata.OpDescribe, rt, name) || openToDescribe(principal, metadata.OpDescribe, rt, name)
}

// Allowed reports, without counting a refusal, whether principal may do
// op on a resource.
func (s *Guard) Allowed(principal string, op metadata.Operation, rt metadata.ResourceType, name string) bool {
	return s.authz == nil || s.authz.Allowed(principal, op, rt, name) || openToDescribe(principal, op, rt, name)
}

// openToDescribe is what every authenticated principal may see without
// an ACL: the metadata of __consumer_offsets (its partitions tell a client
// where a group's coordinator is; a group is listed only to who may
// describe it). Its records are for the nodes alone.
func openToDescribe(principal string, op metadata.Operation, rt metadata.ResourceType, name string) bool {
	return principal != "" && op == metadata.OpDescribe && rt == metadata.ResourceTopic && name == transport.OffsetsTopic
}

// PeerOnly refuses a request only nodes make (replication, registration,
// metadata for brokers, the controller's Raft stream) from anyone else:
// with a CA, a connection whose certificate did not verify; with
// authorization on, a principal that is not a superuser.
func (s *Guard) PeerOnly(principal string, what string) error {
	switch {
	case s.authz != nil:
		if s.authz.Superuser(principal) {
			return nil
		}
		s.deniedTotal.WithLabelValues("peer", "cluster").Inc()
		s.denied.Warn("peer:"+principal, "a request only nodes make was refused", "principal", principal, "request", what)
		if principal == "" {
			return fmt.Errorf("%w: %s is for the cluster's nodes: they present a certificate signed by the cluster's CA", transport.ErrUnauthenticated, what)
		}
		return fmt.Errorf("%w: %s is for the cluster's nodes, and principal %q is not one (nodes are superusers)", transport.ErrUnauthorized, what, principal)
	case s.tls != nil && s.tls.HasCA():
		if principal != "" {
			return nil
		}
		s.authFailures.WithLabelValues("peer").Inc()
		s.denied.Warn("peer:", "a request only nodes make came without a certificate signed by the cluster's CA; refused", "request", what)
		return fmt.Errorf("%w: %s is for the cluster's nodes: they present a certificate signed by the cluster's CA (--tls-cert, --tls-key)", transport.ErrUnauthenticated, what)
	}
	return nil
}

// RaftAllowed decides whether a Raft connection's principal may speak to
// this candidate.
func (s *Guard) RaftAllowed(principal string) error {
	return s.PeerOnly(principal, "the controller's Raft stream")
}

// HTTPPrincipal is the principal of an HTTP request: its bearer token's,
// or its verified client certificate's. It is an error wrapping
// ErrUnauthenticated when authentication is on and the request proves
// nothing, its token is refused, or its certificate no longer stands.
func (s *Guard) HTTPPrincipal(r *http.Request) (string, error) {
	c, err := s.httpCredential(r)
	return c.Principal, err
}

// httpCredential is what an HTTP request proves its principal with (see
// httpPrincipal). A token is looked up at each request. A client
// certificate was verified by the connection's handshake; a request on a
// connection kept open is refused once the certificate has expired, and
// after a reload the certificate is verified again, once per connection,
// against the CA loaded then.
func (s *Guard) httpCredential(r *http.Request) (transport.Credential, error) {
	if auth := r.Header.Get("Authorization"); auth != "" && s.tokens != nil {
		scheme, token, ok := strings.Cut(auth, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return transport.Credential{}, fmt.Errorf("%w: the Authorization header must be Bearer TOKEN", transport.ErrUnauthenticated)
		}
		token = strings.TrimSpace(token)
		if len(token) > transport.MaxTokenBytes {
			return transport.Credential{}, fmt.Errorf("%w: a token of %d bytes; tokens are at most %d", transport.ErrUnauthenticated, len(token), transport.MaxTokenBytes)
		}
		c, err := s.tokenCredential(token)
		if err != nil {
			s.authFailures.WithLabelValues("token").Inc()
			s.denied.Warn("http-token:"+hostOfAddr(r.RemoteAddr), "an HTTP request's token was refused", "peer", r.RemoteAddr)
		}
		return c, err
	}
	if r.TLS != nil {
		if c, ok := transport.CertCredential(*r.TLS); ok {
			return c, s.certStands(r, c)
		}
	}
	if s.cfg.AuthOn() {
		s.authFailures.WithLabelValues("unauthenticated").Inc()
		return transport.Credential{}, fmt.Errorf("%w: send Authorization: Bearer TOKEN, or a client certificate signed by the cluster's CA", transport.ErrUnauthenticated)
	}
	return transport.Credential{}, nil
}

// certStands checks the client certificate of a request on a connection
// kept open: its expiry at each request (a comparison), and, after a
// reload, its chain against the CA (once per connection and reload).
func (s *Guard) certStands(r *http.Request, c transport.Credential) error {
	if exp := c.Expires(); time.Now().After(exp) {
		s.authFailures.WithLabelValues("expired").Inc()
		return fmt.Errorf("%w: the client certificate of %q expired at %s; renew it", transport.ErrUnauthenticated, c.Principal, exp.UTC().Format(time.RFC3339))
	}
	hc, _ := r.Context().Value(httpConnKey{}).(*httpConn)
	if hc == nil {
		return nil
	}
	reloads := s.reloads.Load()
	if hc.verifiedAt.Load() == reloads {
		return nil
	}
	if err := s.Stands(c); err != nil {
		s.authFailures.WithLabelValues("certificate").Inc()
		return err
	}
	hc.verifiedAt.Store(reloads)
	return nil
}

// HTTPErrorLog is where the HTTP server's own lines go: a failed TLS
// handshake (a plaintext client, another CA, a scanner) is counted and
// logged once a minute per source, as the RPC listener does; the rest as
// they come.
func (s *Guard) HTTPErrorLog(log hclog.Logger) io.Writer {
	w := log.StandardWriter(&hclog.StandardLoggerOptions{InferLevels: true})
	return writerFunc(func(p []byte) (int, error) {
		line := strings.TrimSpace(string(p))
		if rest, ok := strings.CutPrefix(line, "http: TLS handshake error from "); ok {
			src, why, _ := strings.Cut(rest, ": ")
			s.authFailures.WithLabelValues("tls").Inc()
			s.denied.Warn("https:"+hostOfAddr(src), "HTTPS handshake failed; connection closed", "peer", src, "err", why)
			return len(p), nil
		}
		return w.Write(p)
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// OnAuthFailure counts a refusal the transport made.
func (s *Guard) OnAuthFailure(kind string) { s.authFailures.WithLabelValues(kind).Inc() }

func hostOfAddr(addr string) string {
	if i := strings.LastIndexByte(addr, ':'); i > 0 {
		return addr[:i]
	}
	return addr
}
