// Package client is the Go client of gostream: a Client that knows the
// cluster's metadata and routes requests, a Producer, a Consumer for one
// partition, admin calls (topics, offsets, metadata) as methods on Client,
// and the cluster's health and verification as typed reports. It speaks the wire protocol of package transport and the batch
// format of package record, and nothing else of the server.
//
// # Routing and metadata
//
// New asks the bootstrap addresses, one after another, for the cluster's
// metadata and caches it: for every topic its partitions with their leader
// and leader epoch, and the address of every broker. Partition requests
// (produce, fetch, list offsets) go to the cached leader. An answer of
// NotLeader, UnknownTopic or UnknownPartition, or a broker that cannot be
// reached, makes the client ask again (RefreshMetadata) before it retries.
// Metadata answers are taken from any broker; an answer older (by metadata
// epoch) than the cached copy is ignored. Admin requests go to the
// controller named in the metadata.
//
// Reads (metadata, fetch, list offsets) change nothing, so they are retried
// after any of those errors, and after Busy (the broker's request memory
// was in use), up to Config.Retries times. Catch-up
// (CatchUp) goes to the partition's leader and is retried the same way:
// repeating it does no harm. The calls an operator makes to look at one
// broker (DescribeCluster, ReplicaState, ReplicaDigest) go to that broker
// once and are not retried: whether it answers is what the caller wants to
// know. Admin requests, and the operator changes (Failover, Recover) and
// the audit trail (History), go to the controller and are retried only
// when they provably did nothing: the connection could not be opened, or
// the broker answered NotController.
//
// # Producing: what is promised
//
// Records go to a partition chosen as follows: an explicit partition
// (ProducerRecord.ManualPartition) wins; otherwise a record with a key, even
// an empty one, goes to Partition(key, n), the SHA-256 of the key read as a
// big-endian unsigned integer modulo the partition count, the same in every
// process and release; a record with a nil key goes round robin across the
// topic's partitions.
//
// Ordering: records given to one Producer for one partition, by one
// goroutine, are appended in the order given, and among those that are
// acknowledged, an earlier record always has a lower offset. Callbacks of
// SendAsync for one partition run in that order too, on one goroutine that
// the Producer owns.
//
// Delivery is at least once for the records the caller retries itself and
// at most once for everything the client does on its own: the client never
// sends a batch a second time unless the answer to the first attempt proves
// it was not appended, so the client itself never writes a duplicate.
// Every record ends with exactly one outcome:
//
//   - acknowledged: Ack names its offset, leader and leader epoch. The batch
//     is durable on every active replica.
//   - an error matching ErrNotAppended: the record is not in the log.
//     Sending it again is safe, but it then follows records sent after it.
//   - an error matching ErrUnknownOutcome: the record may or may not be in
//     the log (a timeout, or the connection closed after the request was
//     written, or an error the broker may have raised after appending). The
//     client does not resend it; the caller decides, knowing it may
//     duplicate. Send also returns such an error when its context ends
//     before the answer: the record stays in flight.
//
// # Producing: the retry policy
//
// Batches are built per partition (closed after ProducerConfig.Linger or at
// ProducerConfig.BatchBytes), and up to MaxInFlightPerPartition batches of a
// partition are in flight at once on one connection to its leader, written
// in batch order by the partition's goroutine. The leader handles the
// requests of one connection in the order they arrive, so pipelining keeps
// the order. The batches a partition has in flight always share one
// connection: when the cached leader (or the connection to it) changes,
// the next batch waits until those on the old connection are answered.
//
// A batch is retried only when its attempt provably did not append it:
//
//   - the broker answered NotLeader, UnknownTopic or UnknownPartition (it
//     checks those before appending), or Busy (it refused the request
//     unread: its request memory was in use);
//   - no leader was known, or the connection to the leader could not be
//     opened, or the request was never written whole (the connection was
//     already closed, or the write failed part way, which the broker
//     discards): the broker never got it (transport.ErrNotSent).
//
// When one of those happens the partition stops sending and waits until
// every batch it has in flight is answered. Then it looks at the in-flight
// batches in the order they were sent. The longest run at the end of that
// order in which every batch provably was not appended is sent again, in
// its original order, before anything newer, after a metadata refresh and
// ProducerConfig.RetryBackoff (a batch in that run that failed for good,
// or has used its retries, keeps its error and finishes in its place). A batch that was not appended but that was
// followed by a batch that was (or may have been) appended is not retried,
// since sending it again would put it after a later record: it fails with
// ErrNotAppended. A batch is sent at most 1 + ProducerConfig.Retries times.
//
// A record whose batch would exceed the cluster's batch limit (the
// Metadata's MaxBatchBytes, a broker's --max-batch-bytes) fails at once
// with MessageTooLarge, before anything is sent.
//
// Nothing else is retried. TopicSealed, MessageTooLarge, InvalidBatch and
// InvalidRequest fail the batch with ErrNotAppended. Every other error
// fails it with ErrUnknownOutcome: a timeout (the client's or the
// broker's), a connection that closed after the request was written,
// ReplicationFailed, StorageFailed, and ShuttingDown (the broker may return
// it after appending, so it proves nothing). The client refreshes metadata
// before its next send after any failure but TopicSealed and the like.
//
// # Consuming
//
// A Consumer reads one partition from its leader at a position it keeps:
// Poll fetches the batches from the position on, long-polling up to maxWait
// when there is nothing below the high watermark, verifies every batch's
// checksum and layout, returns the records from the position on (a fetched
// batch may start before it) and moves the position past them. A batch
// that fails verification is never skipped: Poll returns the records before
// it, and the next Poll returns ErrCorruptBatch with the position left on
// it. NotLeader makes the consumer refresh metadata and fetch from the new
// leader; OffsetOutOfRange is returned to the caller.
//
// # Cluster health and verification
//
// ClusterStatus, DescribeBrokers and Verify return typed reports, in the
// manner of an admin library: what the CLI's cluster status, broker list
// and verify print is computed here, and any program gets the same
// verdict. The error of such a call says only that there was nothing to
// report on (no broker answered; a topic named does not exist); what each
// broker, partition and replica answered, or that it did not, is in the
// report.
//
// A survey asks every broker at once, each under a short deadline (2s, or
// Config.RequestTimeout when shorter), for its view of the cluster
// (DescribeCluster) and, for ClusterStatus, its status document
// (NodeStatus, GET /api/status, transport.NodeStatus). Metadata is the
// controller's when it answers, else the newest a broker holds; gossip
// states are the controller's view, else what a majority of the answering
// brokers report. ClusterReport then holds every broker (answers, gossip
// state and view, metadata epoch), every partition (leader, active set,
// each active follower's state: the leader's word, or judged by log ends),
// the counts of under-replicated and offline partitions, and the warnings.
// Each Warning is data: the problem, and either the gostream-ctl command
// that fixes it (meant to be run as it is, now, and working when it is) or
// none and why (NoCommandReason), with the command to run once that no
// longer holds. A command is given once, by the first warning it fixes;
// while the controller does not answer, none is given to run now.
//
// Verify has each active replica's broker read its log whole up to the
// high watermark and check every batch, then compares each follower's
// digest with its leader's over the offsets both hold; VerifyReport gives
// a verdict per replica (VerifyState), with the command that rebuilds a
// damaged one. Neither call changes anything: replica states are asked
// without a leader epoch, so they never fence.
//
// # Lifetimes
//
// Every goroutine the package starts is owned by a Client (connection
// readers) or a Producer (batchers, answer waiters, callbacks) and has
// stopped when its Close returns. Close is idempotent. A Consumer owns no
// goroutine. A Producer and a Consumer use a Client but do not own it:
// close the Producer before the Client.
package client
