// Package testcluster runs real gostream-node processes for tests and for
// the chaos harness: it builds the binaries once, starts nodes each with a
// data directory of its own, stops, kills, pauses and restarts them, and runs
// gostream-ctl against them as an operator would. It never imports the
// node's packages: it sees the cluster only as a user does, through
// processes, ports, files and the client library.
package testcluster
