// Package metadata is the cluster metadata of gostream: the model (cluster
// id, brokers, topics with their configuration, and per partition its
// assigned replicas, active set, leader and leader epoch), its validation,
// the deterministic placement of replicas, and the durable store the
// controller keeps it in.
//
// Invariants that Validate checks and every change keeps:
//   - broker ids are positive and unique; topic names follow the
//     cluster's naming rule (ValidateTopicName: 1 to 249 of
//     [A-Za-z0-9._-], not . or ..), which also makes each one directory
//     name for storage;
//   - a topic has at least one partition, and each partition exactly
//     ReplicationFactor distinct assigned replicas, all registered brokers;
//   - the active set is a subset of the assigned replicas and holds the
//     leader;
//   - a topic's configuration (TopicConfig) names only known keys, each
//     with a value it takes (CheckConfig);
//   - the metadata epoch and every leader epoch only increase.
//
// The Store writes atomically (temp file, fsync, rename, fsync of the
// directory) and never rewrites a file it could not load: damaged metadata
// is reported with the file and the reason.
package metadata
