// Package controller keeps a gostream cluster's metadata and carries out
// every change to it: broker registration, topics, and the operator's
// commands (failover, drops, recovery, elect-leaders, broker replace,
// metadata restore). One node runs it; package node builds it from narrow
// dependencies (a directory, an RPC caller, functions that apply and push
// metadata), and the native protocol's front end (package rpcapi) serves
// its APIs. With several candidates, each runs a
// Candidacy (candidacy.go): its member of the candidates' Raft group
// (package quorum) and a Controller on it, active while it leads the
// group; the node hands it the same kind of narrow dependencies
// (CandidacyConfig) and owns its goroutines.
//
// Invariants:
//
//   - A change is done only once persisted: it is computed from the last
//     persisted metadata, written and fsync'd (metadata.Store; with
//     candidates, committed by their Raft group, which refuses one
//     computed from metadata no longer committed), and only then applied
//     on the controller's own broker and pushed to the others (at once),
//     and reported. A change that cannot be persisted changes nothing.
//   - Changes are ordered by one lock held across that persist, and only
//     there; readers of the metadata never wait for a disk or a broker, and
//     applying and pushing run after the lock is released (brokers ignore
//     metadata older than what they hold, so changes that overtake each
//     other there are harmless).
//   - Nothing fails over by itself. A failover replaces a leader that does
//     not answer or whose replica cannot lead, never a healthy one
//     (ErrLeaderStillAvailable); a drop takes out a follower that does not
//     answer or cannot serve.
//   - The autopilot's lease (autopilot.go) is held by one autopilot at a
//     time: its holder is persisted; its expiry lives in the active
//     controller's memory, and a controller that becomes active counts
//     the persisted holder's lease from then, so it is never granted to
//     another before the holder's own count has run out.
//   - Epochs: a new leader epoch is above every epoch handed out or
//     reserved, and is persisted as the partition's reserved epoch before
//     any replica is fenced with it, so a command interrupted anywhere and
//     run again never reuses one (docs/failover.md, "The controller dying
//     part way").
//   - Leader choice (chooseLeader) is a pure function of what the fenced
//     candidates answered: the greatest (last epoch, log end), ties to the
//     lowest broker id; every other candidate must agree with it by digest
//     over their shared offsets, or nothing is promoted
//     (ErrReplicaDivergence). A move to a named replica (elect-leaders)
//     fences the old leader too, goes to the failover's choice instead
//     when the named one lacks acknowledged records, and leaves out (to be
//     recovered) a candidate that holds more than the new leader.
//   - One operator command of any size is carried out in phases over all
//     its partitions at once (at most opParallel at a time): checks, one
//     change reserving every epoch, fences and choices, one change with
//     every new leader and active set (pushed once). A recovery likewise:
//     the leaders recover their replicas at once, then one change puts
//     every replica recovered back in its active set. Each partition keeps
//     its own result and error.
//   - A topic's partition count only grows (CreatePartitions, one audited
//     change); a Durable Streams stream's topic and the internal topics,
//     whose partition count says where each group lives, never grow.
//   - A single controller's metadata that is older than a broker's, or
//     missing, is never acted on: the controller refuses every change
//     (ErrStaleMetadata) until the operator restores it
//     (RestoreMetadata). (Candidates' metadata is what a quorum
//     committed: a broker's newer claim is logged, not acted on.)
//   - Every change an operator asked for is in the audit trail, committed
//     with the change itself (commitAudited): in its Raft entry, or for a
//     single controller through history.jsonl.pending before the metadata
//     file. A change made is in the trail whoever finishes the command; a
//     change not made is not. (The candidates' trail keeps the newest
//     quorum.MaxHistory events.)
//
// Errors are the package's sentinels (errors.go), which the native
// protocol's front end maps to wire codes (rpcapi.WireError, which node
// also hands the controller as Config.WireError); errors of the brokers
// it calls keep the codes they came with.
//
// It imports controller/quorum, metadata, storage (the atomic write of the
// audit trail's pending events) and transport (and hclog); nothing above
// it, and no broker: what it needs of a node comes as functions.
package controller
