// Package metadata is the cluster metadata of gostream: the model (cluster
// id, brokers, topics with their configuration, and per partition its
// assigned replicas, active set, leader and leader epoch), its validation,
// the deterministic placement of replicas, and the durable store the
// controller keeps it in.
//
// Invariants that Validate checks (Parse and Store.Save refuse a
// document that breaks one) and every change keeps:
//
//   - broker ids are positive and unique; topic names follow the
//     cluster's naming rule (ValidateTopicName: 1 to 249 of
//     [A-Za-z0-9._-], not . or ..), which also makes each one directory
//     name for storage;
//   - a topic has at least one partition, and each partition at least one
//     assigned replica, distinct registered brokers (ReplicationFactor is
//     what new partitions get; a reassignment changes one partition's
//     count: docs/reassignment.md);
//   - a partition being moved (Move) lists as its replicas its target
//     followed by the replicas it moves off, both lists distinct
//     registered brokers, and moves at a positive throttle;
//   - the active set is a subset of the assigned replicas and holds the
//     leader;
//   - a topic's configuration (TopicConfig) names only known keys, each
//     with a value it takes (CheckConfig);
//   - a partition's leader epoch is not negative, and its reserved epoch
//     (the highest a failover handed out), when set, is not below it.
//
// Beyond one document, which Validate cannot see: every change the
// controller persists has a higher metadata epoch than the one before,
// and a partition's leader epoch never goes back either, but for an
// operator's restore of an older broker's copy (RestoreMetadata with a
// broker named), which takes that copy's leader epochs and keeps the
// higher reserved epoch, so that no epoch is handed out twice.
//
// Store.Save writes atomically (temp file, fsync, rename, fsync of the
// directory). Store.Load never writes: damaged metadata is reported
// (ErrCorrupt) with the file and the reason, and its users (the
// controller, a broker's cache) then stop rather than rewrite it.
//
// It imports storage (the atomic write, and the log policy a topic's
// configuration becomes) and nothing else of gostream.
package metadata
