// Package node is the composition root of one gostream process: it wires the
// parts a broker is made of for one node and owns every goroutine it starts.
// cmd/node turns flags into a Config and calls Run; tests may do the same
// in-process.
//
// Run promises:
//
//   - It refuses to start, and returns an error, when the Config is invalid
//     (ErrInvalidConfig), when the storage root belongs to another broker or
//     cluster (an error matching storage.ErrStampMismatch), when the root is
//     damaged (storage.ErrCorrupt), or when it cannot bind an address
//     (ErrCannotListen). On that path nothing is left running and the root
//     is closed again.
//   - Once started it logs "node started" at Info and serves until ctx is
//     canceled. Then it stops: in-flight HTTP requests get up to
//     ShutdownTimeout to finish, the storage root is closed, and every
//     goroutine Run started has returned before Run returns. A clean stop
//     returns nil.
//   - If a server fails while running, the whole node stops and Run returns
//     that error.
//   - Its memory for RPC requests and responses, and its connections, stay
//     within the Config's limits whatever clients send (MaxBatchBytes,
//     RequestMemory, ConnRequestMemory, MaxConns, MaxConnsPerAddr,
//     IdleTimeout; docs/cluster.md, "Limits"); while it refuses
//     connections or requests over them, and for 30 s after, GET
//     /api/health says it is degraded.
//   - Every replica's log runs with its topic's configuration: the keys
//     the topic sets (metadata.Topic.Config), the node's defaults for the
//     others (Config.RetentionBytes, ...). A change of the configuration
//     reaches the open logs with the metadata that carries it. Retention
//     never deletes a record at or above a replica's high watermark.
//
// What a node is made of, and which file wires it:
//
//   - its storage root (package storage) and the replicas it hosts, one
//     replication.Partition each, opened, led, followed and closed as the
//     metadata says (broker.Replicas, built in node.go), and the core over
//     them (broker.Broker: produce, fetch, offsets, metadata, topic
//     administration and groups, authorized there) that every front end
//     calls;
//   - the host of its group coordinators (groups.Host, group_host.go),
//     its Durable Streams server (streams.Server, stream_host.go) and its
//     idempotent producers' sequences (producers.Host, node.go), each a
//     state kept on partition leaders (replication.LeaderStates);
//   - on the node --controller names, the controller (package controller),
//     built in node.go from the node's data directory, its RPC pool and two
//     functions: apply metadata to this node's broker, push it to the
//     others (push.go);
//   - on a candidate of several --controller names, its part in the
//     controller group (controller.Candidacy), opened in controllers.go
//     from narrow dependencies of the same kind; Run owns the goroutines
//     that hand the group's changes to this node's broker and step the
//     controller up and down (ApplyChanges, Lead), and closes it;
//   - elsewhere, registration with the controller and a poll of its
//     metadata, cached on disk so that a restarted broker serves at once
//     (node.go);
//   - the front ends: the native protocol (package rpcapi, its handler
//     built by rpcHandler in node.go) on Listen, with the candidates' Raft
//     traffic diverted from the same port; Durable Streams (package
//     durable's handler over the streams server) on HTTP; Kafka's (package
//     kafkaapi) on each Kafka listener;
//   - gossip (hashicorp/memberlist) on Gossip, which shows who is alive and
//     decides nothing (gossip.go);
//   - the front ends' listeners: the Kafka protocol's named listeners
//     (package listeners reads them, kafka.go serves them);
//   - the node's security: its guard.Guard (TLS, tokens, the
//     authorizer and their reload), loaded in security.go and handed to
//     the core and the front ends as narrow interfaces;
//   - on HTTP: GET /api/health, /api/status and /metrics (status.go,
//     metrics.go), and refusals of RPC sent there.
//
// No type outside this package points back at the node: each part is
// built from a Config of what it needs.
package node
