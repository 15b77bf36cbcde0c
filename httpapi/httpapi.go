package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"gostream/durable"
	"gostream/transport"
)

// HealthPath is the path of the liveness check.
const HealthPath = "/api/health"

// Config is what the HTTP surface needs to know about its node.
type Config struct {
	// NodeID is the broker id the node reports.
	NodeID int32
	// Logger receives the per-request Debug lines; nil discards them.
	Logger hclog.Logger
	// Metrics serves GET /metrics (Prometheus text format); nil answers 404.
	Metrics http.Handler
	// Status returns the body of GET /api/status (a transport.NodeStatus),
	// marshaled as JSON; nil answers 404.
	Status func() any
	// Problems returns what keeps the node from serving everyone, such as
	// connections it refuses, one line each; while there is any, GET
	// /api/health answers 503 with status "degraded". Nil means none.
	Problems func() []string
	// Streams serves the Durable Streams protocol under
	// durable.Prefix (/v1/stream/); nil answers 404 there.
	Streams http.Handler
	// Authenticate, if set, names the principal of each request but the
	// liveness check and CORS preflights, or says why it proves nothing
	// (401 with that message). The principal is in the request's context
	// (Principal).
	Authenticate func(r *http.Request) (string, error)
	// AllowDescribe, if set, says whether a principal may read metrics
	// and status (describe on the cluster); 403 otherwise.
	AllowDescribe func(principal string) error
	// Console serves the web console under ConsolePrefix (/ui/); nil
	// answers 404 there. Its page and static files (every path under
	// /ui/ but ConsoleAPIPrefix) load without a principal, so that the
	// page can ask for a token; its API is authenticated as every other
	// route (docs/console.md).
	Console http.Handler
}

// The web console's paths: its page and files under ConsolePrefix, its
// JSON API under ConsoleAPIPrefix.
const (
	ConsolePrefix    = "/ui/"
	ConsoleAPIPrefix = "/ui/api/"
)

type principalKey struct{}

// Principal is the principal Config.Authenticate named for a request, ""
// without authentication.
func Principal(r *http.Request) string {
	p, _ := r.Context().Value(principalKey{}).(string)
	return p
}

// Paths of the HTTP surface besides HealthPath. The status document's
// path and shape are defined with it in package transport.
const (
	MetricsPath = "/metrics"
	StatusPath  = transport.StatusPath
)

// Health is the body of GET /api/health.
type Health struct {
	// Status is HealthOK, or HealthDegraded while the node has problems.
	Status string `json:"status"`
	// Node is the broker id of the node that answered.
	Node int32 `json:"node"`
	// Problems says what is wrong when Status is HealthDegraded.
	Problems []string `json:"problems,omitempty"`
}

// The values of Health.Status.
const (
	HealthOK       = "ok"
	HealthDegraded = "degraded"
)

// New returns the handler for one node's HTTP surface.
func New(cfg Config) http.Handler {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	mux := http.NewServeMux()
	// A GET pattern also serves HEAD; ServeMux answers other methods with
	// 405 and an Allow header, and unknown paths with 404.
	mux.HandleFunc("GET "+HealthPath, func(w http.ResponseWriter, r *http.Request) {
		if cfg.Problems != nil {
			if problems := cfg.Problems(); len(problems) > 0 {
				writeJSON(w, http.StatusServiceUnavailable, Health{Status: HealthDegraded, Node: cfg.NodeID, Problems: problems})
				return
			}
		}
		writeJSON(w, http.StatusOK, Health{Status: HealthOK, Node: cfg.NodeID})
	})
	if cfg.Metrics != nil {
		mux.Handle("GET "+MetricsPath, describing(cfg, cfg.Metrics))
	}
	if cfg.Status != nil {
		mux.Handle("GET "+StatusPath, describing(cfg, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, cfg.Status())
		})))
	}
	if cfg.Console != nil {
		mux.Handle(ConsolePrefix, cfg.Console)
		mux.Handle("GET /ui", http.RedirectHandler(ConsolePrefix, http.StatusMovedPermanently))
	}
	var h http.Handler = mux
	if cfg.Streams != nil {
		// Before the mux, which would clean the path and redirect: a
		// stream path with .. or // is refused by the protocol's handler,
		// not turned into another path.
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Path, durable.Prefix) {
				cfg.Streams.ServeHTTP(w, r)
				return
			}
			mux.ServeHTTP(w, r)
		})
	}
	if cfg.Authenticate != nil {
		h = authenticating(cfg.Authenticate, cfg.Console != nil, h)
	}
	return logRequests(cfg.Logger, h)
}

// authenticating answers 401 to a request that proves nothing; the
// liveness check (probes carry no token), CORS preflights (browsers
// send them without credentials) and, with console set, the console's
// static files (they hold no data; its API is authenticated) pass.
func authenticating(auth func(*http.Request) (string, error), console bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == HealthPath || r.Method == http.MethodOptions || (console && consoleStatic(r.URL.Path)) {
			next.ServeHTTP(w, r)
			return
		}
		p, err := auth(r)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="gostream"`)
			if strings.HasPrefix(r.URL.Path, durable.Prefix) {
				w.Header().Set("Access-Control-Allow-Origin", "*")
			}
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}

// consoleStatic reports whether path is one of the console's static
// files: under ConsolePrefix (or /ui itself) and not under its API. A
// path that is not clean (a dot segment, an empty one) is not: the mux
// would clean it into another, perhaps the API's.
func consoleStatic(p string) bool {
	if p == "/ui" {
		return true
	}
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	return clean == p && strings.HasPrefix(p, ConsolePrefix) && !strings.HasPrefix(p, ConsoleAPIPrefix)
}

// describing refuses metrics and status to a principal that may not
// describe the cluster.
func describing(cfg Config, next http.Handler) http.Handler {
	if cfg.AllowDescribe == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := cfg.AllowDescribe(Principal(r)); err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		// Only our own response types reach here; they always marshal.
		panic("httpapi: marshal response: " + err.Error())
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}

// logRequests logs every request at Debug once it has been answered.
func logRequests(log hclog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !log.IsDebug() {
			next.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		log.Debug("request", "method", r.Method, "path", r.URL.Path, "status", rec.status,
			"remote", r.RemoteAddr, "duration", time.Since(start))
	})
}

// statusRecorder remembers the status code a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
