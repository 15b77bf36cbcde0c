// Package client is the Go client of gostream: a Client that knows the
// cluster's metadata and routes requests, a Producer, a Consumer for one
// partition, admin calls (topics, offsets, metadata) as methods on Client,
// and the cluster's health and verification as typed reports. It speaks
// the wire protocol of package transport and the batch format of package
// record. Of the rest of the server it uses package metadata (the cluster
// model its reports read, metadata.Parse for the copies brokers hand it,
// the key partitioner it shares with the server, and the topic-name rule
// and topic configuration keys it checks before sending) and package
// security (to load TLS files, security.ClientTLS); through metadata it
// links package storage, which it never calls. It never imports node,
// controller or replication.
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
// controller named in the metadata. A topic's partition count may grow
// (CreatePartitions): a Producer asks for a topic's metadata again once
// the copy it routes by is older than Config.MetadataMaxAge, so that its
// keyed records go by the new count from then on.
//
// # Retries
//
// A cluster that is starting, a broker that has not taken a new topic's
// metadata yet, a leader that moved: these pass in a moment, and a call
// that meets one tries again rather than fail. Every call (New, metadata,
// list offsets, fetch, catch-up, admin requests, and each produce batch)
// is retried under one policy:
//
//   - What is retried: an error whose code transport's table marks
//     retriable (NotLeader, NotReady, BrokerNotAvailable, ShuttingDown,
//     Busy, Timeout, UnknownTopicID, ...; a broker that does not take the
//     connection within the dial timeout is BrokerNotAvailable), and, for
//     a partition request, a broker that does not know the topic or
//     partition yet (UnknownTopic, UnknownPartition) while fresh metadata
//     says it exists. A request that changes something is retried only
//     when the error proves it was not carried out (below). Anything else,
//     and the client's own final errors (ErrClosed, ErrTopicRecreated),
//     return at once.
//   - Between attempts: the metadata is refreshed first when the error
//     says the route may be stale (the leader moved, the broker is gone or
//     does not know the topic); not after Busy. The wait before retry n is
//     Config.RetryBackoff (25 ms) doubled n-1 times, capped at
//     Config.RetryBackoffMax (1 s), and drawn at random from its upper
//     half, so that clients that failed together do not come back
//     together.
//   - Until when: the call's context's deadline; a call whose context has
//     none gets Config.RetryTimeout (15 s) from its start. The last wait
//     is cut short so that one more attempt begins with a first backoff's
//     time left before the deadline. Config.Retries, if set, caps the
//     number of retries too.
//   - What the caller sees at the end: the last attempt's error (an
//     attempt cut short by the context does not hide the one before it),
//     with what was asked of which partition and how long it was tried:
//     "list offsets of orders/2: NotLeader: ... (12 attempts in 9.98s:
//     the deadline leaves no time for another)". It also matches the
//     context's error when the context ended.
//
// Reads (metadata, fetch, list offsets) change nothing, so every retriable
// error is retried. Catch-up (CatchUp) is retried the same way: repeating
// it does no harm. The calls an operator makes to look at one broker
// (DescribeCluster, ReplicaState, ReplicaDigest) go to that broker once and
// are not retried: whether it answers is what the caller wants to know;
// RefreshMetadata, too, asks each broker once. Admin requests that change
// the cluster, the operator changes (Failover, Recover, ...) and the audit
// trail (History) go to the controller. A change is sent again only when
// it provably did nothing: the connection could not be opened or the
// request was never written, or the broker answered NotController, Busy,
// ControllerUnavailable or NotReady, which it answers before acting. A
// change sent and not answered (a timeout, a connection cut) ends at once
// with ErrUnknownOutcome: it may have been made. What the controller only
// reads (History, ListACLs, an operator change with DryRun) is retried as
// reads are, and never ends with ErrUnknownOutcome.
//
// CreateTopic returns once every partition's leader answers ListOffsets,
// each retried as above (UnknownTopic too: the topic exists), so that a
// produce or a consume right after it works. If the deadline ends first,
// it returns the topic's metadata and an error matching ErrNotServing and
// transport.ErrNotReady that names the partitions that cannot serve yet,
// each with its last error.
//
// # Producing: what is promised
//
// Records go to a partition chosen as follows: an explicit partition
// (ProducerRecord.ManualPartition) wins; otherwise a record with a key, even
// an empty one, goes to Partition(key, n), the SHA-256 of the key read as a
// big-endian unsigned integer modulo the partition count, the same in every
// process and release; a record with a nil key goes round robin across the
// topic's partitions. When a topic grows, n is the count the producer's
// metadata holds: a key's records written after the producer learned of
// the new count may be in another partition than those before, each
// partition keeping the order below.
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
// it was not appended, so the client itself never writes a duplicate. An
// idempotent producer (ProducerConfig.Idempotent, below) does better: it
// also sends again a batch whose outcome is unknown, which the leader
// recognizes, so that every record acknowledged is in its partition
// exactly once. Every record ends with exactly one outcome:
//
//   - acknowledged: Ack names its offset, leader and leader epoch. The batch
//     is durable on every active replica.
//   - an error matching ErrNotAppended: the record is not in the log.
//     Sending it again is safe, but it then follows records sent after it.
//   - an error matching ErrUnknownOutcome: the record may or may not be in
//     the log (a timeout, or the connection closed after the request was
//     written, or an error the broker may have raised after appending). The
//     client does not resend it (an idempotent producer did, until it gave
//     up); the caller decides, knowing it may duplicate. Send also returns
//     such an error when its context ends before the answer: the record
//     stays in flight.
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
// A closed batch holds its records as the caller gave them (their keys,
// values and headers uncopied) until it is first sent: it is encoded then,
// into a buffer that is reused once the batch finishes, so that a queue
// behind a full in-flight window costs no copy of its records.
//
// A batch is retried only when its attempt provably did not append it:
//
//   - the broker answered NotLeader, UnknownTopic, UnknownTopicID or
//     UnknownPartition (it checks those before appending), NotReady (it
//     refuses before appending, as when it has no metadata yet), or Busy
//     (it refused the request unread: its request memory was in use);
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
// a backoff (ProducerConfig.RetryBackoff doubled with each attempt of the
// batch, capped at Config.RetryBackoffMax, drawn from its upper half). A
// batch in that run that failed for good, or may not be sent again, keeps
// its error and finishes in its place. A batch that was not appended but
// that was followed by a batch that was (or may have been) appended is not
// retried, since sending it again would put it after a later record: it
// fails with ErrNotAppended.
//
// A batch may be sent again while the longest backoff it would wait, and
// a first backoff more for the attempt, end before its deadline: the
// earliest deadline of its records, which is a Send's context's deadline,
// or ProducerConfig.DeliveryTimeout (default the client's RetryTimeout)
// after the record was given to SendAsync or to a Send without a deadline.
// ProducerConfig.Retries, if set, caps the attempts too. Then the batch
// fails with ErrNotAppended and its last attempt's error, before the
// deadline, so that a Send gets that answer rather than its context's end.
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
// That is a producer without idempotence; an idempotent one differs, as
// the next section says.
//
// # Producing: idempotence
//
// A Producer made with ProducerConfig.Idempotent is an idempotent
// producer, as Kafka's is (docs/kafka.md, "Idempotent producers").
// NewProducer asks a broker for a producer id (InitProducerID: any node
// answers; retried as every call is, for up to the client's
// RetryTimeout); a cluster whose nodes hand out none, being older than
// the client, is an error matching transport.ErrUnsupportedVersion. Each
// partition keeps the sequence of its next record, from 0. A batch is
// built when it is first sent: a Kafka record batch (magic 2) that carries
// the producer id, its epoch and the sequence of its first record; the
// partition's sequence moves on by its record count (past 2^31-1 to 0,
// as the leader counts). Its bytes never change after, whatever attempt
// sends them. Its records carry no timestamp of their own: the batch asks
// for the leader's append time (Kafka's LogAppendTime), so consumers see
// the same timestamps as for records of a producer without idempotence.
// The partition's leader checks a batch's sequence before it appends it
// (package producers): a batch equal to one of the producer's last five
// is a duplicate, answered with the original's offsets once the original
// is acknowledged, and nothing is appended; a batch whose first sequence
// does not follow the last one appended is refused with
// OutOfOrderSequence, and nothing is appended.
//
// The promise: every acknowledged record is in its partition exactly
// once, at the offset its Ack names, in the order given (as above),
// across lost answers, closed connections, timeouts and the operator's
// failovers (a new leader rebuilds the producers' state from its log,
// which holds every acknowledged batch). A record that ends with an error
// is in the log at most once.
//
// The retry policy is the one above, with these differences:
//
//   - A batch whose outcome is unknown (a timeout, a connection closed
//     after the request was written, ReplicationFailed where the leader
//     keeps the batch, StorageFailed, ShuttingDown, ...) is sent again as
//     a batch that provably was not appended is: the partition waits for
//     every batch in flight, and sends it again in order with the batches
//     after it, before anything newer, until its deadline. The leader
//     answers it as a duplicate if an attempt was appended, and appends
//     it if none was.
//   - A batch refused with OutOfOrderSequence after a batch that is sent
//     again (the gap is that batch) is sent again too, after it. A batch
//     that provably was not appended is still not sent again after one
//     that was appended: it would follow it (the leader would refuse it
//     out of sequence anyway).
//   - DeliveryTimeout is by default at least four RequestTimeouts, so that
//     an attempt that timed out leaves time for another.
//   - A batch that ends without being appended (given up at its deadline
//     or when Retries are used up, or refused for good) leaves a gap in
//     the producer id's sequence, for which the leader would refuse every
//     later batch. The partition then continues with a new producer id,
//     asked for when its next batch is first sent (once every batch of the
//     old id in flight is answered), from sequence 0. A batch refused out
//     of sequence with no batch before it that explains the gap, and no
//     attempt of which may have been appended, is built again under the
//     new producer id and sent again; one that may have been appended
//     ends with ErrUnknownOutcome.
//   - What the caller is told for a batch that is not acknowledged:
//     ErrUnknownOutcome when an attempt's outcome was unknown (the record
//     may be in the log, once), ErrNotAppended when every attempt proves
//     it was not appended; the error wraps the last attempt's error and
//     says why the batch was not sent again.
//
// MaxInFlightPerPartition is at most 5 for an idempotent producer
// (ErrInvalidConfig otherwise): a leader finds a duplicate among a
// producer's last five batches only. A leader forgets a producer idle for
// a day (producers.DefaultExpiry): its next batch is then taken at
// whatever sequence it has.
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
// it. A retriable error (NotLeader, a leader that cannot be reached, ...)
// is retried as every read is, after a metadata refresh when the leader
// may have moved; OffsetOutOfRange (a position below the log start) is
// returned to the caller. A position at or past the high watermark, even
// past the log end, is not an error: polls wait there and come back empty
// until records reach it.
//
// Poll's records alias the fetch's memory, without a copy per record, and
// by default every fetch is read into new memory, so they stay valid for
// good. A consumer done with each Poll's records before it polls again
// can set ConsumerConfig.ReuseMemory: every fetch is then read into the
// memory of the one before and the records returned in the same slice,
// valid until the next Poll, which spares a buffer of about MaxBytes a
// fetch (allocated, zeroed, then collected: on one machine more than half
// of a fast consumer's CPU). gostream-ctl bench consume reads so.
//
// # Committed offsets and groups: at least once
//
// A consumer's position is in memory; a group's committed offset of a
// partition is cluster data, replicated in __consumer_offsets and
// acknowledged like any write (docs/groups.md). Seeking moves the position
// and nothing else; nothing is committed unless the caller commits
// (Consumer.Commit or CommitOffset, GroupConsumer.Commit, CommitSync or
// CommitOffsets) or turns on GroupConfig.AutoCommitInterval, which is off
// by default. "Never committed" (Committed's false) is not a committed 0:
// a consumer with no committed offset starts where the reset policy says,
// the log start unless ResetLatest is asked for. A commit below the
// committed offset is refused (transport.ErrOffsetRegression) and writes
// nothing; only Client.ResetOffsets, refused while the group has
// members, moves one back (Client.PlanOffsetReset computes the offsets of
// a reset to the log start, the high watermark, an offset, a shift or a
// time, as gostream-ctl group reset-offsets does).
//
// A committed offset is the next record to process. Commit after the
// records are processed, and each record is processed at least once: a
// consumer that fails after processing and before its commit is
// acknowledged (a crash, a lost partition, a commit refused because the
// member was fenced) leaves the committed offset where it was, and the
// next reader of the partition is given those records again. Nothing
// acknowledged is skipped: a record is past a committed offset only once
// someone committed past it. Processing that must not repeat has to be
// idempotent, or keep its own progress with its results (the commit
// metadata string can carry a reference to it). GroupConsumer commits its
// positions, which Poll moves when it returns records: to commit only
// what is done, commit after processing everything Poll returned, or use
// CommitOffsets with offsets of your own.
//
// A GroupConsumer's partitions come and go as members join and leave. The
// coordinator gives a partition to a new owner only after the old owner
// has released it (after OnRevoked, where it commits) or its session has
// expired, so two members never own one partition at once, and requests
// of a member that is no longer current are fenced by its member epoch
// (FencedMember, UnknownMember, IllegalGeneration): a member that was
// paused past its session cannot commit over its successor.
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
// damaged one. Neither call changes any log, and neither fences: replica
// states are asked without a leader epoch. (A replica whose broker finds
// damage while Verify reads it is marked damaged there, as any read that
// found it would: see replication.Partition.Verify.)
//
// # Lifetimes
//
// Every goroutine the package starts is owned by a Client (connection
// readers), a Producer (batchers, answer waiters, callbacks) or a
// GroupConsumer (its heartbeat and fetchers) and has stopped when its
// Close returns. Close is idempotent. A Consumer owns no goroutine. A
// Producer and a Consumer use a Client but do not own it: close the
// Producer before the Client.
//
// # Invariants
//
// Gathered from the sections above:
//
//   - The client never writes a duplicate: without idempotence it sends a
//     batch again only when the answer to its attempt proves it was not
//     appended, and never after a later batch of its partition that was
//     (or may have been) appended; an idempotent producer also sends
//     again a batch whose outcome is unknown, with the bytes of its first
//     attempt, which the leader answers as the original if it was
//     appended.
//   - Every record given to a Producer ends with exactly one outcome (an
//     Ack, ErrNotAppended or ErrUnknownOutcome); among the acknowledged
//     records one goroutine gave one Producer for one partition, an
//     earlier one has a lower offset.
//   - A Consumer never skips a batch that fails verification.
//   - Nothing is committed unless the caller commits or turns auto-commit
//     on.
//   - The cached metadata never goes back to an older metadata epoch.
//   - Reports (ClusterStatus, Verify, ...) change no log and never fence.
package client
