// Package rpcapi is the native protocol's front end: the transport.Handler
// a node's RPC server runs. For each request it checks what the API needs
// before anything else (access.go), decodes the body, has the core do the
// work (broker.Broker: produce, fetch, offsets, metadata, topic
// administration, groups; streams.Server for the Durable Streams
// operations forwarded between nodes; the node's replicas and controller
// for replication, failover, recovery and the operator's commands) and
// encodes the answer. It holds no state of its own.
//
// Invariants:
//
//   - Every API says what it needs (apiAccess): the cluster's nodes only,
//     describe or operate on the cluster, or a check on the resource it
//     names, made by the core once it has decoded the request. An API
//     missing from the table is refused while authorization is on
//     (TestEveryAPISaysWhatItNeeds).
//   - Decoding, validation and appends happen in Handle, in the order the
//     connection's requests arrived; waiting happens in the Reply. A
//     request that fails to decode, or asks for more than its bounds (a
//     wait over five minutes, a fetch larger than a frame), is answered
//     InvalidRequest and nothing is done.
//   - Every error a request ends with goes through WireError, the
//     protocol's one table (errors.go) from the sentinels of the packages
//     below to the codes the client sees; the Durable Streams and (next)
//     Kafka front ends keep their own tables next to their handlers.
//   - Every request is counted once (Config.ObserveRequest), with the
//     error as the client saw it.
//
// It imports the core (broker, streams, groups), the packages below them
// (controller, replication, metadata, storage, record, transport), and
// nothing above: node builds it from a Config of narrow dependencies and
// functions, and no type here points back at the node.
package rpcapi
