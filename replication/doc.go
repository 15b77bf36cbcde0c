// Package replication owns a partition replica's place in the protocol: the
// leader's write path, the high watermark, fencing by leader epoch, and
// (with followers) the replication of every batch to the active replicas.
//
// Promises of a Partition:
//   - A produced batch is acknowledged only after every active replica
//     holds it durably. With a single active replica, that is the leader's
//     own fsync.
//   - The high watermark (HW) is the offset below which every active replica
//     holds the records. Reads never return a batch at or above it, and it
//     never moves backward.
//   - Appends are ordered: batches produced through Produce land in the
//     order Produce was called, even though their acknowledgements are
//     awaited concurrently.
//   - Only the leader of the current epoch accepts produce requests; a
//     replica asked to act for an older epoch refuses (ErrStaleEpoch).
//   - A replica that leads or is an active follower reports a full disk
//     as its Problem from the first append that fails for want of space
//     (its own as leader, of its leader's batches as follower) until an
//     append succeeds. It still takes every append, so it resumes by
//     itself once space is freed; recovery does not rebuild it, since a
//     full disk leaves its log whole.
//
// State kept beside a leader's log (a group coordinator's groups, a
// Durable Streams stream's tail and producers) follows one pattern, which
// Leadership and LeaderStates own:
//   - A state is built for one leadership (a replica, a leader epoch) by
//     replaying the replica's log from its start to its end
//     (Leadership.Replay), once: the callers of LeaderStates.Get share
//     the build, and LeaderStates.Peek answers ErrLoading meanwhile
//     without waiting. A new epoch builds a new state from its own log,
//     which holds every acknowledged record.
//   - An append (Leadership.Append) lands only while its leadership is
//     current and its state is kept: once the leadership ended
//     (ErrNotLeader) or the state was dropped (ErrStateDropped), nothing
//     more is appended through it, so no state is built from a log that
//     an older one still writes to. The user applies the batch to its
//     state when Append returns, under its own lock that orders its
//     appends, and waits for the acknowledgement after it.
//   - A state is dropped when its leadership ends, when LeaderStates.Retain
//     lets its key go, and (unless configured otherwise) when an
//     append's wait fails; the next Get builds it again.
//   - What a user answers from its state is acknowledged
//     (Leadership.WaitAcked of the log end it read at) and, when a
//     newer leader could have passed it, confirmed (Leadership.Confirm).
//     Leadership.Done is closed when the leadership ends.
//
// Durable Streams keeps a stream's state so: LeaderStates keyed by topic
// id, whose Load replays the stream's batches into a new state; a request
// takes the state with Get (ErrNotLeader: another broker leads it), locks
// it, appends through the state's Leadership and applies the batch, and
// waits after unlocking; its sweep calls Retain with the streams it
// leads. A group coordinator host keeps one state per partition of
// __consumer_offsets: Begin from a periodic task, Peek for a request
// (ErrLoading: CoordinatorLoading), KeepOnFailedAck since a coordinator
// is what the leader's log holds.
package replication
