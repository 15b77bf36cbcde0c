// Package broker is the core of a gostream node: what a request does once
// a front end (the native RPC handler, Durable Streams over HTTP, next
// Kafka's protocol) has decoded it. Broker holds the typed operations
// (produce, fetch, offsets, metadata, topic administration on the active
// controller, groups through their coordinators); Replicas hosts the
// node's replicas: it opens, leads, follows and closes each partition
// replica the metadata assigns to this broker, and serves by them.
//
// Invariants:
//
//   - Every operation of Broker is authorized here, once, whatever
//     protocol asked (Config.Authorizer; nil allows everything): one
//     refused does nothing, and lists and descriptions leave out what
//     the principal may not describe.
//   - No client produces to an internal topic (__consumer_offsets) or to
//     a sealed one, nor a batch over MaxBatchBytes; a produce is appended
//     before Produce returns, so produces made one after another are in
//     the log in that order.
//   - The replicas match the metadata applied last (ApplyMetadata):
//     replicas assigned here are open and lead or follow as it says,
//     replicas of deleted topics are closed and removed from disk, and a
//     replica of a deleted incarnation of a topic's name is removed before
//     the new one opens. Metadata older than what is held is ignored.
//   - Every broker but the single controller caches the metadata on disk
//     before it serves by it, and after a restart leads nothing on the
//     cached copy until the controller has answered it
//     (HeardFromController): a failover may have happened meanwhile.
//   - A replica whose log is damaged is offline, with the reason, and the
//     others are served (Lookup returns the reason for it).
//   - High watermarks are checkpointed (CheckpointHW, and at Close), never
//     above what every active replica held, so that a restarted leader
//     serves at once; a replica opens with its checkpoint as the floor of
//     its durable log.
//   - Retention never deletes at or above a replica's high watermark;
//     __consumer_offsets keeps what its newest complete snapshot needs.
//
// It imports replication, groups (the coordinators it finds and calls),
// controller (topic administration on the active controller), metadata,
// storage, record and transport (and hclog); nothing above it.
package broker
