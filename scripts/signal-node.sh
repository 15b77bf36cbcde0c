#!/usr/bin/env bash
# Sends a signal to nodes of the local cluster of `make run`, found by the
# PID files the scripts that started them write ($DATA/nodeN.pid), never
# by name: other gostream nodes on the machine (another cluster on another
# PORT_BASE, someone else's) are left alone. Before it signals a PID it
# checks that the process is that node of this cluster (its command line
# has the node's --id, --listen and --data-dir), so a stale file cannot
# make it signal another process.
#
#   scripts/signal-node.sh KILL 2    # make kill N=2: node 2, kill -9 (the failure drill)
#   scripts/signal-node.sh HUP       # make reload: every node that runs, SIGHUP
#
# KILL waits until the node is gone. HUP makes a node read its
# certificate, key, CA, tokens and gossip keys again (docs/security.md).
# Exit status 1 when a node named is not running, or on bad usage.
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/local-cluster.sh
. scripts/local-cluster.sh
port_base_valid signal-node || exit 1

usage="usage: scripts/signal-node.sh KILL N (make kill N=N) or scripts/signal-node.sh HUP [N...] (make reload), N one of ${NODES[*]}"
sig="${1:-}"
case "$sig" in
KILL | HUP) shift ;;
*)
	echo "signal-node: which signal? $usage" >&2
	exit 1
	;;
esac
ids=("$@")
if [ "${#ids[@]}" = 0 ]; then
	if [ "$sig" = KILL ]; then
		echo "signal-node: which node? $usage" >&2
		exit 1
	fi
	ids=("${NODES[@]}")
	all=1
fi
for id in "${ids[@]}"; do
	case "$id" in
	1 | 2 | 3) ;;
	*)
		echo "signal-node: node $id: $usage" >&2
		exit 1
		;;
	esac
done

status=0
signalled=0
for id in "${ids[@]}"; do
	if ! pid=$(node_pid "$id"); then
		# make reload signals the nodes that run; one named is missed.
		if [ -z "${all:-}" ]; then
			echo "signal-node: node $id of the cluster on ports $PORT_BASE-$((PORT_BASE + 22)) is not running (no running node in $(pid_file "$id"))" >&2
			status=1
		fi
		continue
	fi
	kill "-$sig" "$pid"
	signalled=$((signalled + 1))
	if [ "$sig" = HUP ]; then
		echo "signal-node: node $id (pid $pid): SIGHUP, it reads its certificates, tokens and gossip keys again"
		continue
	fi
	# A killed node lingers until its parent reaps it: wait, so that its
	# ports are free for `make node` when this returns.
	deadline=$((SECONDS + 10))
	while is_node "$pid" "$id" && [ "$SECONDS" -lt "$deadline" ]; do
		sleep 0.1
	done
	echo "signal-node: node $id (pid $pid) killed with SIGKILL"
done
if [ "$signalled" = 0 ] && [ -n "${all:-}" ]; then
	echo "signal-node: no node of the cluster on ports $PORT_BASE-$((PORT_BASE + 22)) is running (no running node in $DATA/node{1,2,3}.pid)" >&2
	status=1
fi
exit "$status"
