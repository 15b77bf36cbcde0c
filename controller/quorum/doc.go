// Package quorum replicates the controller's state among the controller
// candidates with hashicorp/raft (docs/controller-raft.md). The Raft
// leader is the active controller; the others follow and stand ready.
//
// The replicated state is what a single controller keeps on disk: the
// cluster metadata document and the audit trail. It changes only by
// committed entries, each one of:
//
//   - a change: the whole metadata after it, with the epoch it was
//     computed from (its base) and the audit events it records. The state
//     machine applies it only when the base is the epoch it holds
//     (compare-and-set), so a change computed by a deposed leader from an
//     old view never overwrites a newer one, and every candidate applies
//     the same log to the same state. A change that loses is answered
//     ErrConflict and nothing is applied.
//   - a record: audit events alone.
//
// Propose returns once the entry is committed by a quorum and applied on
// this candidate, or with an error after which it may or may not have
// been committed (a leader lost mid-proposal): the caller reads the state
// and decides, as the controller does after any failure to persist.
//
// Storage, under the candidate's directory: raft.db (raft-boltdb v2: the
// log and Raft's own term and vote) and snapshots/ (raft's file snapshot
// store: the metadata and audit trail, with a CRC). Open checks both
// before Raft reads them, and a damage is ErrCorrupt with the path: the
// candidate does not start, and nothing is rewritten (Raft itself would
// skip a snapshot it cannot read and go on from an older one).
//
// Bootstrap: a candidate with no Raft state and Config.Seed set seeds the
// group, with every candidate of its list as a voter; the others start
// empty, grant it their votes and are given the log. Which candidate
// seeds is the caller's choice (docs/controller-raft.md): the one that
// holds a single controller's metadata (an upgrade), or on a brand-new
// cluster the lowest id. Given its first metadata (Config.First), the seed
// writes it into the log it bootstraps, as the entry after the
// configuration and in the same term: any candidate elected has it in its
// log and commits it with its first entry, so no leader ever holds an
// empty state and no other candidate can seed a second first metadata.
//
// Invariants:
//
//   - Every candidate applies the same committed entries, in order, to
//     the same state; an entry that cannot be applied (a lost
//     compare-and-set, a malformed entry) changes nothing on any of them,
//     and Raft's log is never failed for it.
//   - A change's metadata and its audit events are one entry: both are
//     applied, or neither. A change's epoch is above the one it replaces.
//   - Only the Raft leader proposes (ErrNotLeader elsewhere, naming the
//     leader it knows).
//   - A damaged raft.db or snapshot stops the candidate with ErrCorrupt
//     before Raft reads it, and nothing is rewritten.
//   - The audit trail keeps the newest MaxHistory events; older ones go
//     first.
//
// It imports metadata and transport (and hashicorp/raft, raft-boltdb v2,
// bbolt and hclog); nothing else of gostream.
package quorum
