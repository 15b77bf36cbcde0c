package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"gostream/client"
	"gostream/metadata"
	"gostream/transport"
)

// Config is what the console needs of its node.
type Config struct {
	// NodeID is the broker id of the node that serves the console.
	NodeID int32
	// Version is the node's release, shown on the page.
	Version string
	// Client returns the node's client of the cluster (the node itself
	// as principal), opened on first use; an error when it cannot be
	// opened yet (the page says so and tries again).
	Client func(ctx context.Context) (*client.Client, error)
	// Security is whether authentication is on: the page shows a banner
	// when it is off (anyone who reaches the port can act).
	Security bool
	// Principal is the principal of a request, as the HTTP surface
	// authenticated it ("" when authentication is off).
	Principal func(r *http.Request) string
	// Authorize says whether principal may do op on the resource: nil
	// when it may, else an error wrapping transport.ErrUnauthorized. Nil
	// Authorize allows everything (authorization off).
	Authorize func(principal string, op metadata.Operation, rt metadata.ResourceType, name string) error
	// Logger receives the console's logs; nil discards them.
	Logger hclog.Logger
	// Counters, if set, returns the node's counters: the console samples
	// them every SeriesInterval (zero: DefaultSeriesInterval), from New
	// to Close, for the charts (GET /ui/api/series). It is called from
	// one goroutine at a time.
	Counters       func() Counters
	SeriesInterval time.Duration
	// SurveyInterval is the time between the starts of two rounds of
	// the survey of the cluster (zero: SurveyInterval).
	SurveyInterval time.Duration
	// Registerer, if set, takes the console's metrics: the live tails it
	// serves, and those it dropped for a browser that did not read.
	Registerer prometheus.Registerer
}

// Server is the console's HTTP handler. Close stops its survey of the
// cluster.
type Server struct {
	cfg    Config
	log    hclog.Logger
	mux    *http.ServeMux
	survey *survey

	// reads holds a token per request reading records (maxReads).
	reads chan struct{}
	// tails counts the live tails served; tailDrops those dropped for a
	// browser that did not take the bytes in time.
	tails     atomic.Int32
	tailDrops prometheus.Counter
	// stopping ends when the node stops (Shutdown): the live tails end.
	stopping context.Context
	stop     context.CancelFunc
	prod     consoleProducer
	sampler  *sampler // nil without Config.Counters
	closed   sync.Once
}

// New returns the console's handler, to be served under /ui/. It starts
// the charts' sampler; Close stops it.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Principal == nil {
		cfg.Principal = func(*http.Request) string { return "" }
	}
	s := &Server{cfg: cfg, log: cfg.Logger, mux: http.NewServeMux(), reads: make(chan struct{}, maxReads)}
	s.survey = newSurvey(s.surveyRound, cfg.Logger.Named("survey"))
	if cfg.SurveyInterval > 0 {
		s.survey.interval = cfg.SurveyInterval
	}
	s.stopping, s.stop = context.WithCancel(context.Background())
	s.tailDrops = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "gostream_console_tail_drops_total",
		Help: "Live tails of the web console ended because the browser did not take the bytes within 5 s.",
	})
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(s.tailDrops, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "gostream_console_tails", Help: "Live tails the web console serves now.",
		}, func() float64 { return float64(s.tails.Load()) }))
	}
	s.routes()
	s.startSeries()
	return s
}

// Shutdown ends the live tails, each with an error event saying the node
// is stopping, so that an HTTP server's graceful shutdown does not wait
// for streams that never end; other requests go on.
func (s *Server) Shutdown() { s.stop() }

// Close stops what the console runs besides its requests: the live tails
// (Shutdown), the survey of the cluster (the API's lists answer 503 from
// then on), the charts' sampler and its producer, once the records given
// to it have their outcome. It is idempotent.
func (s *Server) Close() {
	s.closed.Do(func() {
		s.Shutdown()
		s.survey.close()
		s.stopSeries()
		s.closeProducer()
	})
}

// routes registers every path of the console: its files and its API.
func (s *Server) routes() {
	// The files answer GET and HEAD alone, under a pattern of every
	// method: "GET /ui/" and the API's catch-all "/ui/api/" would be
	// patterns neither more specific than the other, which ServeMux
	// refuses (it panics).
	s.mux.Handle("/ui/", readOnly(staticFiles()))
	api := func(pattern string, h func(w http.ResponseWriter, r *http.Request)) {
		s.mux.HandleFunc(pattern, h)
	}
	api("GET /ui/api/whoami", s.whoami)
	api("GET /ui/api/overview", s.overview)
	api("GET /ui/api/topics", s.topics)
	api("GET /ui/api/topics/{topic}", s.topic)
	api("GET /ui/api/topics/{topic}/messages", s.messages)
	api("GET /ui/api/topics/{topic}/tail", s.tail)
	api("POST /ui/api/topics/{topic}/produce", s.produce)
	api("GET /ui/api/groups", s.groups)
	api("GET /ui/api/groups/{group}", s.group)
	api("POST /ui/api/groups/{group}/reset-offsets", s.resetOffsets)
	api("DELETE /ui/api/groups/{group}", s.deleteGroup)
	api("GET /ui/api/streams", s.streams)
	api("GET /ui/api/acls", s.acls)
	api("POST /ui/api/acls", s.addACL)
	api("DELETE /ui/api/acls", s.removeACL)
	api("GET /ui/api/history", s.history)
	api("GET /ui/api/series", s.series)
	api("GET /ui/api/lag", s.lag)
	// Anything else under the API is 404 as JSON, not the page.
	api("/ui/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "NotFound", fmt.Sprintf("no console API %s %s", r.Method, r.URL.Path))
	})
}

// readOnly answers 405 to a request that is not GET or HEAD.
func readOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "the console's files are read with GET", http.StatusMethodNotAllowed)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// ServeHTTP sets the console's headers, refuses a cross-site change, and
// routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'")
	h.Set("Referrer-Policy", "no-referrer")
	if strings.HasPrefix(r.URL.Path, "/ui/api/") {
		h.Set("Cache-Control", "no-store")
		if changes(r.Method) {
			if err := sameOrigin(r); err != nil {
				writeError(w, http.StatusForbidden, "CrossSite", err.Error())
				return
			}
		}
		if r.Method != http.MethodOptions {
			// The page is open: survey the cluster (SurveyIdle more).
			s.survey.touch()
		}
	}
	s.mux.ServeHTTP(w, r)
}

// changes reports whether a request of method may change anything: every
// method but GET, HEAD and OPTIONS.
func changes(method string) bool {
	return method != http.MethodGet && method != http.MethodHead && method != http.MethodOptions
}

// ConsoleHeader is the header every request that changes anything must
// carry (with the value "1"): a page of another origin cannot send it
// without a CORS preflight, which the console never allows.
const ConsoleHeader = "X-Gostream-Console"

// sameOrigin refuses a request that changes anything unless it carries
// ConsoleHeader, has a JSON body (or none), and, when the browser says
// where it comes from, comes from the node's own origin.
func sameOrigin(r *http.Request) error {
	if r.Header.Get(ConsoleHeader) != "1" {
		return fmt.Errorf("a change needs the %s: 1 header (the console's page sends it)", ConsoleHeader)
	}
	if ct := r.Header.Get("Content-Type"); r.ContentLength != 0 && !strings.HasPrefix(ct, "application/json") {
		return fmt.Errorf("a change's body must be application/json, not %q", ct)
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return fmt.Errorf("a change from another site (Sec-Fetch-Site: %s) is refused", site)
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		if err != nil || u.Host != r.Host {
			return fmt.Errorf("a change from origin %q, not this node's (%s), is refused", origin, r.Host)
		}
	}
	return nil
}

// principal is the request's principal.
func (s *Server) principal(r *http.Request) string { return s.cfg.Principal(r) }

// requester names who asks for a change, for the audit trail: the
// request's principal, or with authentication off (no principal) this
// node's console, console:nodeN.
func (s *Server) requester(r *http.Request) string {
	if p := s.principal(r); p != "" {
		return p
	}
	return fmt.Sprintf("console:node%d", s.cfg.NodeID)
}

// allowed says whether the request's principal may do op on a resource.
func (s *Server) allowed(r *http.Request, op metadata.Operation, rt metadata.ResourceType, name string) error {
	if s.cfg.Authorize == nil {
		return nil
	}
	return s.cfg.Authorize(s.principal(r), op, rt, name)
}

// may is allowed as a bool, for lists that leave out what the principal
// may not see.
func (s *Server) may(r *http.Request, op metadata.Operation, rt metadata.ResourceType, name string) bool {
	return s.allowed(r, op, rt, name) == nil
}

// client returns the node's client, or writes why there is none (503)
// and returns nil.
func (s *Server) client(w http.ResponseWriter, r *http.Request) *client.Client {
	c, err := s.cfg.Client(r.Context())
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "Unavailable", "the node cannot reach the cluster yet: "+err.Error())
		return nil
	}
	return c
}

// callTimeout bounds one API request's calls to the cluster.
const callTimeout = 10 * time.Second

// ask checks that the request's principal may do op on the resource
// and then, as dial, returns the node's client and the context of the
// request's calls to the cluster; when the principal may not, or there
// is no client, it writes why and returns false, having asked the
// cluster nothing. Authorization comes first, so that a refusal does
// not depend on whether the resource exists (docs/security.md). The
// caller defers cancel.
func (s *Server) ask(w http.ResponseWriter, r *http.Request, op metadata.Operation, rt metadata.ResourceType, name string) (*client.Client, context.Context, context.CancelFunc, bool) {
	if err := s.allowed(r, op, rt, name); err != nil {
		writeErr(w, err)
		return nil, nil, nil, false
	}
	return s.dial(w, r)
}

// dial returns the node's client and the request's context bounded by
// callTimeout, for a request checked already (ask, or a handler that
// also checks its body or query before anything goes to the cluster);
// or writes why there is no client (503) and returns false. The caller
// defers cancel.
func (s *Server) dial(w http.ResponseWriter, r *http.Request) (*client.Client, context.Context, context.CancelFunc, bool) {
	c := s.client(w, r)
	if c == nil {
		return nil, nil, nil, false
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	return c, ctx, cancel, true
}

// maxBody bounds the JSON body of a request that changes something.
const maxBody = 1 << 20

// readJSON decodes r's body into v, refusing unknown fields and more
// than maxBody bytes; on failure it writes 400 and returns false.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		badRequest(w, "the request's body: "+err.Error())
		return false
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		badRequest(w, "the request's body holds more than one JSON value")
		return false
	}
	return true
}

// apiError is the body of every error the API answers.
type apiError struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "Internal", "encode the answer: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	body, _ := json.Marshal(apiError{Error: msg, Code: code})
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}

// badRequest writes 400 InvalidRequest: msg says what is wrong with the
// request.
func badRequest(w http.ResponseWriter, msg string) {
	writeError(w, http.StatusBadRequest, transport.CodeInvalidRequest.String(), msg)
}

// writeErr writes err as the API's error: its HTTP status and code from
// the cluster's error code it carries (transport's table), 502 for an
// error of no known code (the cluster did not answer as it should).
func writeErr(w http.ResponseWriter, err error) {
	status, code := statusOf(err)
	writeError(w, status, code, err.Error())
}

// statusOf maps an error of the cluster to an HTTP status and a code.
func statusOf(err error) (int, string) {
	var te *transport.Error
	if !errors.As(err, &te) {
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			return http.StatusGatewayTimeout, transport.CodeTimeout.String()
		case errors.Is(err, client.ErrInvalidConfig):
			return http.StatusBadRequest, transport.CodeInvalidRequest.String()
		case errors.Is(err, errClosed):
			return http.StatusServiceUnavailable, "Unavailable"
		}
		return http.StatusBadGateway, "Unavailable"
	}
	code := te.Code
	switch code {
	case transport.CodeUnauthorized:
		return http.StatusForbidden, code.String()
	case transport.CodeUnauthenticated:
		return http.StatusUnauthorized, code.String()
	case transport.CodeUnknownTopic, transport.CodeUnknownPartition, transport.CodeUnknownGroup, transport.CodeUnknownBroker:
		return http.StatusNotFound, code.String()
	case transport.CodeGroupNotEmpty, transport.CodeTopicExists, transport.CodeTopicSealed:
		return http.StatusConflict, code.String()
	case transport.CodeInvalidRequest, transport.CodeInvalidTopicName, transport.CodeInvalidPartitions, transport.CodeInvalidOffset,
		transport.CodeInvalidGroupName, transport.CodeInvalidConfig, transport.CodeMessageTooLarge, transport.CodeInvalidBatch,
		transport.CodeOffsetOutOfRange, transport.CodeInvalidReplication:
		return http.StatusBadRequest, code.String()
	case transport.CodeTimeout:
		return http.StatusGatewayTimeout, code.String()
	case transport.CodeBusy:
		return http.StatusTooManyRequests, code.String()
	}
	return http.StatusServiceUnavailable, code.String()
}
