// Package autopilot is the operator's runbook run by a process
// (docs/autopilot.md): it watches a cluster as `gostream-ctl cluster
// status` does (client.ClusterStatus) and, by a Policy the operator set,
// runs the commands an operator would run: failover --broker N for a
// broker silent longer than the grace period, recover --broker N for one
// that came back, elect-leaders once the cluster is whole again. The
// nodes still decide nothing: every command is the controller's to check
// and carry out, as a person's is.
//
// Promises:
//
//   - A broker is failed over only after it has been silent (no answer to
//     the direct probe, or gossip calling it gone) for Policy.FailoverAfter,
//     never while gossip still calls it alive when it does not answer, and
//     never while half of the brokers or more are silent at once.
//   - Only the autopilot that holds the lease kept by the active controller
//     acts; the others watch and stand by. A dry run takes no lease and
//     acts on nothing.
//   - Run stops, with an error matching ErrCommandFailedTwice or
//     ErrMostBrokersSilent, when a command it ran failed twice in a row for
//     the same reason, or when half of the brokers or more stayed silent
//     for the grace period (or none answered): a person must look.
//   - A Policy whose grace period is shorter than what gossip needs to
//     find a dead node dead is refused (ErrInvalidPolicy, GossipBound).
//
// It imports client (and metadata's and transport's types through it),
// memberlist for the gossip settings the nodes run with, hclog and
// Prometheus; nothing of the nodes.
package autopilot
