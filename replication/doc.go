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
package replication
