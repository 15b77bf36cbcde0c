#!/usr/bin/env bash
# Starts one node of the local cluster of `make run` again, by itself, in
# the foreground, with the flags and the data directory `make run` gave it:
# after that node died, or after it was killed to try a failover.
# `make node N=2` builds the binaries and runs this (with the PORT_BASE
# and DATA of its cluster, when they are not the defaults). Ctrl-C (or
# SIGTERM, or SIGHUP) stops it.
#
#   scripts/run-node.sh 2
#
# While the node runs, its PID is in $DATA/node2.pid, as when `make run`
# started it: `make kill N=2` and `make reload` find it there, and the
# stop of `make run` stops it too.
#
# Once it answers, `gostream-ctl cluster status` says what is left to do
# (usually `gostream-ctl recover --broker 2`).
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/local-cluster.sh
. scripts/local-cluster.sh
port_base_valid run-node || exit 1
# How long the node gets to stop after Ctrl-C.
STOP_TIMEOUT="${STOP_TIMEOUT:-30}"

id="${1:-}"
case "$id" in
1 | 2 | 3) ;;
*)
	echo "run-node: which node? usage: scripts/run-node.sh N (or make node N=N), N one of ${NODES[*]}" >&2
	exit 1
	;;
esac
if [ ! -x "$BIN/gostream-node" ]; then
	echo "run-node: $BIN/gostream-node is missing; run 'make build' first" >&2
	exit 1
fi
if ! ports_free run-node "$id"; then
	if pid=$(node_pid "$id"); then
		echo "run-node: node $id runs already (pid $pid, in $(pid_file "$id")): stop it first, or kill it: make kill N=$id$(make_vars)" >&2
	else
		echo "run-node: is node $id still running (in 'make run', or another 'make node N=$id')? Stop it first." >&2
	fi
	exit 1
fi
if [ ! -d "$DATA/node$id" ]; then
	echo "run-node: $DATA/node$id does not exist: node $id has never run here. 'make run$(make_vars)' starts the whole cluster." >&2
	exit 1
fi
if secure; then
	secure_setup
fi
node_args "$id"
node_gomaxprocs
echo "run-node: starting node $id: GOMAXPROCS=$NODE_GOMAXPROCS $BIN/gostream-node ${NODE_ARGS[*]}"
echo "run-node: once it is up, run: $BIN/gostream-ctl cluster status"

# The node runs in a process group of its own (set -m), so that Ctrl-C
# reaches this script only and the node gets exactly one signal, the
# SIGTERM of on_signal (see scripts/run-cluster.sh). This script stays to
# remove the PID file once the node has ended, however it ended.
set -m
GOMAXPROCS=$NODE_GOMAXPROCS "$BIN/gostream-node" "${NODE_ARGS[@]}" </dev/null &
pid=$!
set +m
trap 'remove_pid "$id" "$pid"' EXIT
write_pid "$id" "$pid"

# on_signal: SIGTERM to the node, once, and a wait for it to end (SIGKILL
# after STOP_TIMEOUT seconds). A second signal meanwhile changes nothing
# (and no `return`: see on_signal in scripts/run-cluster.sh).
stopping=""
on_signal() {
	if [ -z "$stopping" ]; then
		stopping=1
		kill -TERM "$pid" 2>/dev/null || true
		end_nodes run-node "$STOP_TIMEOUT" "$id:$pid"
	fi
}
trap on_signal INT TERM HUP

# Wait for the node, and exit as it did. A signal's trap cuts wait short
# while the node still runs: then wait again. If the node ended just as a
# trap cut the wait short, bash holds its status for one more wait (and
# answers 127, not a child, once the status was taken).
while :; do
	status=0
	wait "$pid" || status=$?
	if kill -0 "$pid" 2>/dev/null; then
		continue
	fi
	again=0
	wait "$pid" 2>/dev/null || again=$?
	if [ "$again" != 127 ]; then
		status=$again
	fi
	break
done
if [ "$status" = 0 ]; then
	echo "run-node: node $id stopped"
else
	echo "run-node: node $id exited: $(exit_reason "$status")" >&2
fi
exit "$status"
