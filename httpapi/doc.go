// Package httpapi owns a node's HTTP surface (docs/design.md section 9): its
// routes, the methods each accepts, and the JSON each answers with. New
// returns an http.Handler; the node owns the listener, the http.Server, its
// timeouts and connection limits, and their lifetime.
//
// Routes:
//
//   - GET /api/health (HealthPath): a Health object. 200 with status "ok"
//     while Config.Problems reports nothing; 503 with status "degraded" and
//     the problems while it reports some (a node says so for 30 s after it
//     last refused a connection or a request over its limits). It tells
//     that the process serves everyone, not that its partitions are
//     healthy; gostream-ctl health reads it, and so does the docker
//     compose healthcheck.
//   - GET /metrics (MetricsPath): Config.Metrics, the Prometheus text
//     format in a node.
//   - GET /api/status (StatusPath): Config.Status marshaled as JSON; in a
//     node, its own view of the cluster (brokers and their gossip states,
//     and every replica it hosts with its offsets, followers and problems),
//     which gostream-ctl cluster status gathers from every node.
//
// Invariants:
//
//   - A route whose Config field is nil is not served: 404, as for any
//     unknown path.
//   - With Config.Authenticate set, every request but those to
//     /api/health and CORS preflights (OPTIONS) names its principal
//     first, or is answered 401 with WWW-Authenticate and reaches no
//     handler; with Config.AllowDescribe set, /metrics and /api/status
//     need describe on the cluster (403 otherwise).
//   - Each route answers HEAD as GET does. Another method gets 405 with an
//     Allow header.
//   - JSON bodies end with a newline and are sent with Content-Type
//     application/json and Cache-Control no-store.
//   - Every request is logged at Debug once answered (method, path, status,
//     remote address, duration), never above Debug.
//
// GET /metrics serves the Prometheus text format and GET /api/status the
// node's view as JSON (the document transport.NodeStatus defines), when
// the node gives them (Config.Metrics, Config.Status). Config.Streams,
// when set, serves the Durable Streams protocol under durable.Prefix
// (/v1/stream/): requests there go to it before the mux, which would clean
// the path, so the protocol's handler refuses a path with .. or an empty
// segment instead of serving another one (docs/durable-streams.md).
//
// It imports durable (its Prefix, to route there) and transport (the
// status document's path) and nothing else of gostream (hclog besides).
package httpapi
