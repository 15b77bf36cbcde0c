// Package httpapi owns a node's HTTP surface (DESIGN.md section 9): its
// routes, the methods each route accepts, and the JSON each answers with.
// It provides an http.Handler; the node owns the listener and the server's
// lifetime.
//
// Promises:
//
//   - GET /api/health answers 200 with a Health object as JSON while the
//     node's HTTP server runs. It is a liveness check: it says the process
//     serves, not that its partitions are healthy.
//   - A known path asked with a method it does not accept answers 405 with
//     an Allow header; an unknown path answers 404.
//   - Every request is logged at Debug with method, path, status and
//     duration, never above Debug.
//
// GET /metrics, GET /api/status and the Durable Streams protocol under /ds/
// come later.
package httpapi
