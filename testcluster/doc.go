// Package testcluster runs real gostream-node processes for tests and for
// the chaos harness: it builds the binaries once, starts nodes each with a
// data directory of its own, stops, kills, pauses and restarts them, and runs
// gostream-ctl against them as an operator would. It drives the cluster
// only as a user does, through processes, ports, files, the client
// library and the wire protocol.
//
// Invariants:
//
//   - The binaries are built once per process (Build), from the module's
//     own source, with the race detector when asked; the crashfs build
//     (storage.CrashFS) loses exactly the bytes not yet fsync'd when it
//     is killed. The chaos harness's Kafka group member (cmd/kafkamember)
//     is built once too (BuildKafkaMember), never with the race detector,
//     and only by a run that starts one.
//   - Each node has a data directory of its own, and addresses that no
//     other node of the process was handed (freeAddr never hands one out
//     twice).
//   - Cluster.Close kills every node, heals the network it cut and stops
//     its proxy; it may be called more than once.
//   - A race the detector reports in a node is read from the node's log
//     (Cluster.DataRaces): it fails a test that started the cluster through
//     startClusterWith, and is a data-race violation of a chaos run.
//
// It imports client, and for their formats and constants transport (the
// wire protocol), record (batches), storage (a node's files), groups (the
// records of __consumer_offsets) and security (TLS files and tokens), and
// porcupine; never node, nor a package that runs a node's work (broker,
// replication, controller, rpcapi, streams).
package testcluster

// The chaos harness (history.go, workload.go, kafkaload.go, groupload.go,
// kafkagroup.go, checker.go, porcupine.go, porcupine_history.go,
// epochs.go, scenario.go, faults*.go, diskfault.go, netns.go, proxy.go,
// cmd/chaos and cmd/kafkamember, run by `make chaos`, and briefly by
// TestChaosSmoke in `make test`) runs a workload of producers, consumers
// and consumer groups (a native one, and in group-members and random a
// Kafka one of franz-go member processes beside it, each member printing
// what it owns in every generation, what it reads and what was
// committed) against a 3-node cluster on the crashfs build, inside a
// network namespace of its own, while it injects a scenario's faults
// (kills, pauses, iptables cuts, proxy delay and loss, lost unsynced
// bytes, power loss of the whole cluster, flipped bits, full disks,
// duplicate nodes, topics created again) and runs gostream-ctl as an
// operator would, following its advice; then it checks the invariants of
// docs/design.md section 10 from the recorded history (with its own
// checker and with porcupine against a model of a partitioned log), the
// audit trail and the replicas' files. docs/chaos.md says how.
