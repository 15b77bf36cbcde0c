// Package durable is the Durable Streams protocol over HTTP
// (docs/durable-streams.md): Handler serves it under Prefix over a
// Backend (streams.Server in a node), and the pieces that are pure
// functions of their input are here too, so that they can be tested and
// fuzzed apart from the server: offset tokens (Offset, ParseOffset) and
// the JSON-mode splitter (SplitJSON). The rule that makes a stream path a
// topic name is metadata's (metadata.StreamTopic, CheckStreamPath).
//
// Invariants:
//
//   - A request's stream path is checked before anything else but a
//     CORS preflight (StreamPath: under Prefix, decoded once, no encoded
//     slash, no NUL, no empty, . or .. segment); a bad one is answered
//     400 and never cleaned into another path.
//   - Every request is authorized by the Backend (Authorize) before its
//     body is read or the stream touched, a fork on its source too; a 401
//     carries WWW-Authenticate.
//   - A body is never read past Limits.MaxBody (413 above it), and live
//     reads past MaxLiveReaders are answered 503. The live reads open
//     are counted by stream path (LiveReaders), each counted out when it
//     ends, so the count holds at most MaxLiveReaders paths.
//   - A refusal (*Refusal) is answered with its status and headers; any
//     other error is 503 with Retry-After: only the cluster's state makes
//     a valid request fail.
//   - Tokens have one fixed width and sort as strings in stream order;
//     ParseOffset takes back exactly what Token writes (and -1, now).
//
// It imports metadata and nothing else of gostream: the store under it
// is the Backend interface it declares.
package durable
