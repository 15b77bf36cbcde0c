// Package testcluster runs real gostream-node processes for tests and for
// the chaos harness: it builds the binaries once, starts nodes each with a
// data directory of its own, stops, kills, pauses and restarts them, and runs
// gostream-ctl against them as an operator would. It never imports the
// node's packages: it sees the cluster only as a user does, through
// processes, ports, files and the client library.
package testcluster

// The chaos harness (history.go, workload.go, checker.go, porcupine.go,
// porcupine_history.go, epochs.go, scenario.go, faults*.go, diskfault.go,
// netns.go, proxy.go and cmd/chaos, run by `make chaos`, and briefly by
// TestChaosSmoke in `make test`) runs a workload of producers and
// consumers against a 3-node cluster on the crashfs build, inside a
// network namespace of its own, while it injects a scenario's faults
// (kills, pauses, iptables cuts, proxy delay and loss, lost unsynced
// bytes, power loss of the whole cluster, flipped bits, full disks,
// duplicate nodes, topics created again) and runs gostream-ctl as an
// operator would, following its advice; then it checks the invariants of
// docs/design.md section 10 from the recorded history (with its own
// checker and with porcupine against a model of a partitioned log), the
// audit trail and the replicas' files. docs/chaos.md says how.
