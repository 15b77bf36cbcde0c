#!/usr/bin/env bash
# Starts one node of the local cluster of `make run` again, by itself, in
# the foreground, with the flags and the data directory `make run` gave it:
# after that node died, or after it was stopped to try a failover.
# `make node N=2` builds the binaries and runs this. Ctrl-C stops it.
#
#   scripts/run-node.sh 2
#
# Once it answers, `gostream-ctl cluster status` says what is left to do
# (usually `gostream-ctl recover --broker 2`).
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/local-cluster.sh
. scripts/local-cluster.sh

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
	echo "run-node: is node $id still running (in 'make run', or another 'make node N=$id')? Stop it first." >&2
	exit 1
fi
if [ ! -d "$DATA/node$id" ]; then
	echo "run-node: $DATA/node$id does not exist: node $id has never run here. 'make run' starts the whole cluster." >&2
	exit 1
fi
if secure; then
	secure_setup
fi
node_args "$id"
echo "run-node: starting node $id: $BIN/gostream-node ${NODE_ARGS[*]}"
echo "run-node: once it is up, run: $BIN/gostream-ctl cluster status"
exec "$BIN/gostream-node" "${NODE_ARGS[@]}"
