// Package httpapi owns a node's HTTP surface (docs/design.md section 9): its
// routes, the methods each route accepts, and the JSON each answers with.
// It provides an http.Handler; the node owns the listener and the server's
// lifetime.
//
// Promises:
//
//   - GET /api/health answers 200 with a Health object as JSON while the
//     node's HTTP server runs and has no problems, and 503 with status
//     "degraded" and the problems while it has some (it refused
//     connections or requests over its limits lately). It says the
//     process serves everyone, not that its partitions are healthy.
//   - A known path asked with a method it does not accept answers 405 with
//     an Allow header; an unknown path answers 404.
//   - Every request is logged at Debug with method, path, status and
//     duration, never above Debug.
//
// GET /metrics serves the Prometheus text format and GET /api/status the
// node's view as JSON (the document transport.NodeStatus defines), when
// the node gives them (Config.Metrics, Config.Status). The Durable Streams protocol is not served yet.
package httpapi
