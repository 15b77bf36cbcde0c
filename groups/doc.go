// Package groups holds committed offsets and consumer groups: the records
// a group's coordinator writes to its partition of __consumer_offsets, the
// assignment of partitions to a group's members (range per topic, handed
// over incrementally), the Coordinator that serves the groups of one
// partition on its leader, and the Host that keeps a broker's
// coordinators, one per offsets partition it leads, over
// replication.LeaderStates. The design is docs/groups.md.
//
// Invariants:
//
//   - Decode accepts exactly what Encode writes, and refuses anything else
//     (an unknown version or kind, a field over its bound, a group name
//     the topic rules refuse, bytes left over) with an error matching
//     ErrMalformed: a damaged or hostile record is never taken for a
//     commit.
//   - RangeAssign is a pure function of the members' subscriptions and the
//     partition counts: the same input gives the same assignment on every
//     coordinator.
//   - Reconcile never gives a member a partition another member still
//     owns, and asks a member to release only the partitions it owns and
//     is no longer assigned: a partition has at most one owner at a time,
//     and only the partitions that must move, move.
//   - A Host serves a group only from the coordinator of its partition's
//     current leadership, rebuilt from the leader's log: from the moment
//     the leadership ends it answers ErrNotCoordinator, and the
//     coordinator it served appends nothing more and confirms no read.
//     While a coordinator rebuilds, it answers ErrCoordinatorLoading.
//   - A coordinator's groups are what its partition's log says: each
//     record is applied, in log order, as it is appended, so a successor
//     that replays the log holds the same; a record that does not decode
//     stops the rebuild (ErrMalformed), and the partition serves no group.
//   - A request is answered only once the records it wrote, or read, are
//     acknowledged; reads are also confirmed with the followers.
//   - A commit writes all its offsets in one batch or none. A committed
//     offset is never past its partition's high watermark and, for one
//     incarnation of its topic, never moves back but by an explicit reset,
//     which is refused while the group has members; a commit from a
//     member that is not current (its epoch) or does not own the
//     partition is refused. It is deleted only explicitly (DeleteOffsets,
//     or with its group), never while a member of the group subscribes
//     to its topic.
//
// It imports replication, metadata, record and transport (and hclog and
// the Prometheus client for its metrics); nothing above it.
package groups
