// Package replication owns a partition replica's place in the protocol: the
// leader's write path, the high watermark, fencing by leader epoch, and
// (with followers) the replication of every batch to the active replicas.
//
// Invariants of a Partition:
//
//   - A produced batch is acknowledged only after every replica of the
//     active set the leader held when it appended the batch holds it
//     durably (and every replica recovered here that the metadata does
//     not list active yet). With a single active replica, that is the
//     leader's own fsync.
//   - The high watermark (HW) is the offset below which those replicas
//     hold the records: a leader advances it as its own fsyncs and its
//     followers' acknowledgements come, a follower takes its leader's,
//     cut to what it holds. Reads never return a batch at or above it.
//     It never moves backward, but on a replica outside the active set
//     that recovery cuts back (Truncate). A replica recovered here holds
//     every record below the HW when RecoverFollower returns, and is
//     counted in every acknowledgement from then on (see RecoverFollower),
//     so the metadata never lists active a replica that lacks one.
//   - Appends are ordered: batches produced through Produce land in the
//     order Produce was called, even though their acknowledgements are
//     awaited concurrently.
//   - Only the leader of the current epoch accepts produce requests; a
//     replica asked to act for an older epoch refuses (ErrStaleEpoch). A
//     replica records a newer epoch (durably, in Options.EpochFile) before
//     it acts on it, and a leader that learns of a newer one from a
//     follower stops taking writes.
//   - Replication never cuts a log: a follower whose log is not a prefix
//     of its leader's, by batch identity, is marked diverged and sent
//     nothing more. Only RecoverFollower has a replica cut or rebuilt,
//     one outside the active set, and the leader's log is never cut
//     (Truncate refuses on a replica that leads at the request's epoch or
//     a later one).
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
//   - A state is no longer served once its leadership ends (Peek answers
//     ErrNotLeader), nor (unless configured otherwise) once an append's
//     wait fails; it is dropped by the next Get or Begin of its key, or by
//     LeaderStates.Retain, which lets go of the keys it is not told to
//     keep and of ended leaderships. The next Get builds it again.
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
//
// It imports record, storage and transport (and hclog), and declares the
// narrow interfaces it needs of a log and of its peers (Log, Peer)
// itself.
package replication
