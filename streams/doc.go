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
// A stream is the one partition of an internal topic (metadata.StreamTopic).
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
// # Live readers: one subscription per stream per node
//
// A read that waits (a long poll, and each read of an SSE stream after
// its first) does not send a wait of its own to the leader: the node
// keeps one subscription per stream its live readers wait on (a tail), so
// the leader serves one waiting read per stream per node, however many
// readers a node has, and a node's readers cost the node, not the
// leader or the connection between them.
//
// A reader first reads as any reader (no wait). When that read returns
// nothing and finds the stream at its acknowledged tail T (not closed),
// the reader joins the stream's tail on this node, which starts it, at T,
// when there is none. A tail is one goroutine that reads the stream from
// where it is (from), waiting on the leader up to 20 s for data, again
// and again. Its states:
//
//   - waiting on the leader at from: its readers at from wait on it;
//   - moved: a read returned data (or found the stream closed): the
//     answer is kept as last (read from last.Start, the old from), from
//     becomes the answer's Next, and every reader waiting is woken;
//   - failed: a read failed (the leader unreachable or gone past the
//     retries, the stream deleted): the error is handed to the readers
//     waiting at that moment, and the tail reads again after a backoff
//     (50 ms, doubling to 1 s) while readers remain;
//   - ended: after a read that woke no reader, when no reader waits and
//     none joined while it ran (so a tail outlives its last readers by
//     one read, and the readers it answered, which come back at once for
//     what follows, find it); or when the stream is closed at its tail,
//     or the node stops. A reader that finds it ended joins a new one.
//
// A woken reader at position p answers: last, when last.Start is p (cut
// to its MaxBytes: the first message whole); a read of its own from p,
// when the tail moved past p by another answer (there is data at p, so
// that read does not wait); the tail's error, when the tail's read
// failed while it waited; and, at the end of its own wait, the timed-out
// answer at p. A reader answered from the tail reads next from the
// answer's Next, which is the tail's from: that read joins the tail at
// once, without a read of its own first. So an SSE stream, once up to
// date, costs the leader nothing per reader.
//
// Failure cases:
//
//   - The leader is unreachable, paused, or moves: the tail's read is
//     retried (routing, above) and then fails; its readers get the error:
//     an SSE stream ends, so its client reconnects from its last offset,
//     and a long poll is answered 503 with Retry-After. A reader is never
//     left waiting on a tail that no longer reads: every read of a tail
//     ends (its deadline is ForwardTimeout plus its wait), and each ends
//     in an answer, an error handed out, or the tail's end, which wakes
//     its readers.
//   - The stream is deleted, or created again (another topic id): the
//     tail's read is refused (404, 410) and its readers get the refusal; a
//     reader of the new incarnation replaces the old tail.
//   - A reader's client goes away or its credential stops standing: its
//     wait ends with its context; the tail ends once no reader is left.
//   - A reader that does not read what it is sent (a stalled SSE client)
//     holds its own HTTP connection's write, never the tail: a tail wakes
//     readers by closing a channel and never waits for them.
//
// On the leader, forwarded reads that wait are marked
// (transport.Request.Waits), so the waiting reads of many streams on one
// connection never stop the other requests on it from being served.
//
// Every goroutine is owned: a tail's by the Server (Run's end stops and
// waits for them), a state's build by the LeaderStates (closed when Run
// ends).
//
// # Invariants
//
//   - An append is one batch, in the log whole or not at all, and is
//     answered (as a duplicate too) only once that batch is acknowledged
//     (replication's sense: durable on the active replicas); a reader is
//     told only what lies below the high watermark.
//   - An append lands only through the state of the stream leader's
//     current leadership, checked and applied under that state's lock:
//     a closed stream, a stale producer epoch, a gap in a producer's
//     sequence or a Stream-Seq not above the last is refused, and nothing
//     is appended.
//   - A stream's leader is asked to do an operation again only after an
//     error that proves it was not done, and for at most three seconds
//     (routing, above).
//   - Two paths whose topic names collide are refused (409), never merged.
//   - A node's live readers of a stream wait on its one tail there (one
//     of an older incarnation, or one that ended, is replaced); a tail
//     never waits for a reader, and no reader waits on a tail that no
//     longer reads.
//
// It imports durable (whose Backend it implements), controller (a
// stream's topic created or deleted by the active controller here),
// replication, metadata, record and transport (and hclog and the
// Prometheus client); never node, nor a front end but durable's types.
package streams
