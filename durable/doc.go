// Package durable holds the pieces of the Durable Streams HTTP protocol
// that are pure functions of their input, so that they can be tested and
// fuzzed apart from the server: offset tokens, the mapping of stream
// paths to internal topic names, and the JSON-mode splitter. The design
// is docs/durable-streams.md. The HTTP server is built: Handler serves the
// protocol over a Backend, which the node implements.
package durable
