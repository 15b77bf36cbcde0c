// Package streams is a node's Durable Streams server (docs/durable-streams.md):
// the state of each stream on the stream's leader, creation and deletion
// through the controller, routing of each operation to the stream's
// leader, and the node's live readers. Its Server implements
// durable.Backend, the store under the HTTP protocol of package durable,
// and serves the stream APIs that other nodes forward to it (Handle). It
// gets what it needs of the node as funcs in a Config (the metadata, a
// replica's replication.Partition, RPCs to a broker and to the
// controller); it never sees the node.
//
// # A stream on its leader
//
// A stream is the one partition of an internal topic (durable.TopicFor).
// Every append is one batch of it, so an append is in the log whole or
// not at all; the one-byte key of each record says what it is (data,
// ready, closed, filler) and the batch's first record carries the
// stream's byte position and the producer's id, epoch and sequence and
// the Stream-Seq in headers (log.go). The leader keeps, per stream, what
// an append is checked against (the tail, closed, the producers, the last
// Stream-Seq) in a replication.LeaderStates keyed by topic id: built once
// per leadership by replaying the replica's log, shared by every request,
// built again from the log when an append's replication failed (what the
// log holds is then no longer known to be acknowledged), and dropped when
// the leadership ends or the sweep finds the stream led elsewhere. A
// request takes the state, locks it, checks, appends through the state's
// Leadership and applies the batch, then waits for the acknowledgement
// after unlocking; an append whose state was dropped before it landed
// (replication.ErrStateDropped: nothing was appended) takes the state
// again. Readers are told only what is below the high watermark (the
// acknowledged tail); an append or a duplicate answers once its batch is
// acknowledged.
//
// # Routing
//
// Any node serves any stream. The Server finds the stream's topic in the
// broker's metadata (asking for newer metadata once before it answers
// 404) and has the operation done by the stream's leader: on this broker
// it calls the leader side with the request as the HTTP handler decoded
// it, with no encoding at all; elsewhere it forwards a typed transport
// request (APIStreamAppend, Read, Head, Init, Log), bounded by
// Config.ForwardTimeout plus the read's wait. A protocol refusal (a
// durable.Refusal) travels in the response, any other error is the
// frame's. Errors that prove the operation was not done (no leader yet,
// metadata moving, a new leader not ready, a state dropped, the request
// never sent) are retried for up to three seconds; anything else reaches
// the client as 503 with Retry-After.
//
// On the leader, forwarded reads that wait are marked
// (transport.Request.Waits), so the waiting reads of many streams on one
// connection never stop the other requests on it from being served.
//
// Every goroutine is owned: a state's build by the LeaderStates, closed
// when Run ends.
package streams
