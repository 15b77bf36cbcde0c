#!/usr/bin/env bash
# Starts a local three-node gostream cluster on loopback, in the foreground,
# with the addresses of docs/cli.md, so that gostream-ctl with no flags talks to
# it. `make run` builds the binaries and runs this.
#
#   node 1 (the controller): RPC 9400, gossip 9401, HTTP 9402
#   node 2:                  RPC 9410, gossip 9411, HTTP 9412
#   node 3:                  RPC 9420, gossip 9421, HTTP 9422
#
# Data lives under $DATA/node1, node2, node3 (./data by default) and is kept:
# running it again brings back the same cluster. Logs of all three go to the
# terminal, each line prefixed with [node1], [node2] or [node3]. Ctrl-C sends
# SIGTERM to each node, waits for them to stop, and exits 0.
set -euo pipefail

cd "$(dirname "$0")/.."
BIN="${BIN:-./bin}"
DATA="${DATA:-./data}"
# How long the nodes get to answer /api/health, and to stop after Ctrl-C.
START_TIMEOUT="${START_TIMEOUT:-30}"
STOP_TIMEOUT="${STOP_TIMEOUT:-30}"
NODES=(1 2 3)

for b in gostream-node gostream-ctl; do
	if [ ! -x "$BIN/$b" ]; then
		echo "run-cluster: $BIN/$b is missing; run 'make build' first" >&2
		exit 1
	fi
done

# node_port ID OFFSET: the docs/cli.md port of node ID (9400 + 10*(ID-1) + OFFSET),
# OFFSET 0 for RPC, 1 for gossip, 2 for HTTP.
node_port() { echo $((9400 + 10 * ($1 - 1) + $2)); }
port_name() { case $1 in 0) echo RPC ;; 1) echo gossip ;; 2) echo HTTP ;; esac; }

# Every port must be free before anything starts, so that a taken port is
# named rather than found as one node dying among the logs of the others.
# (This sees TCP listeners; a UDP-only squatter on a gossip port makes that
# node exit with CannotListen, which the startup wait below reports.)
port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
taken=0
for id in "${NODES[@]}"; do
	for off in 0 1 2; do
		port=$(node_port "$id" "$off")
		if port_taken "$port"; then
			echo "run-cluster: port $port (node $id $(port_name "$off")) is taken" >&2
			taken=1
		fi
	done
done
if [ "$taken" = 1 ]; then
	echo "run-cluster: is another 'make run' or gostream-node running? Stop it, or free the port(s) above." >&2
	if command -v ss >/dev/null 2>&1; then
		echo "run-cluster: listeners on ports 9400-9422:" >&2
		ss -Hltnp 'sport >= :9400 and sport <= :9422' >&2 || true
	fi
	exit 1
fi

if [ -t 1 ]; then
	colors=($'\033[36m' $'\033[35m' $'\033[33m') reset=$'\033[0m'
else
	colors=('' '' '') reset=''
fi

run_dir="$(mktemp -d "${TMPDIR:-/tmp}/gostream-run.XXXXXX")"
pids=()
prefixers=()

# stop: SIGTERM to each node still running, wait for them (SIGKILL after
# STOP_TIMEOUT seconds), then for the prefixers to print their last lines.
stopping=0
stop() {
	if [ "$stopping" = 1 ]; then return; fi
	stopping=1
	for pid in "${pids[@]}"; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	local deadline=$((SECONDS + STOP_TIMEOUT))
	for i in "${!pids[@]}"; do
		while kill -0 "${pids[$i]}" 2>/dev/null; do
			if [ "$SECONDS" -ge "$deadline" ]; then
				echo "run-cluster: node ${NODES[$i]} did not stop within ${STOP_TIMEOUT}s; killing it" >&2
				kill -KILL "${pids[$i]}" 2>/dev/null || true
				break
			fi
			sleep 0.1
		done
	done
	for pid in "${pids[@]}" "${prefixers[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	rm -rf "$run_dir"
}
on_signal() {
	echo "run-cluster: stopping the nodes"
	stop
	echo "run-cluster: stopped"
	exit 0
}
# HUP too: closing the terminal stops the nodes rather than orphaning them.
trap on_signal INT TERM HUP
trap stop EXIT

# prefix_lines PREFIX: copy stdin to stdout, PREFIX before each line, a line
# at a time (awk and sed may hold input from a pipe until a buffer fills).
prefix_lines() {
	local line
	while IFS= read -r line || [ -n "$line" ]; do
		printf '%s%s\n' "$1" "$line"
	done
}

controller="1@127.0.0.1:$(node_port 1 0)"
for i in "${!NODES[@]}"; do
	id=${NODES[$i]}
	join=()
	for other in "${NODES[@]}"; do
		if [ "$other" != "$id" ]; then
			join+=("127.0.0.1:$(node_port "$other" 1)")
		fi
	done
	join_list="$(IFS=,; echo "${join[*]}")"
	rpc="127.0.0.1:$(node_port "$id" 0)"
	gossip="127.0.0.1:$(node_port "$id" 1)"
	http="127.0.0.1:$(node_port "$id" 2)"
	prefix="${colors[$i]}[node$id]${reset} "
	mkdir -p "$DATA/node$id"
	fifo="$run_dir/node$id"
	mkfifo "$fifo"

	# Each node writes into a FIFO read by a prefixer (a subshell), so that
	# both pids are known. Job control (set -m) while they start puts each
	# in a process group of its own: Ctrl-C then reaches this script only,
	# and each node gets exactly one signal, the SIGTERM of stop(). (A node
	# that got the terminal's SIGINT and then SIGTERM would be killed by the
	# second signal instead of stopping cleanly.)
	set -m
	prefix_lines "$prefix" <"$fifo" &
	prefixers+=("$!")
	"$BIN/gostream-node" --id "$id" --data-dir "$DATA/node$id" \
		--listen "$rpc" --gossip "$gossip" --http "$http" \
		--join "$join_list" --controller "$controller" \
		>"$fifo" 2>&1 </dev/null &
	pids+=("$!")
	set +m
done

# node_failed I: node I has exited; report its status and give up.
node_failed() {
	local status=0
	wait "${pids[$1]}" || status=$?
	echo "run-cluster: node ${NODES[$1]} exited with status $status; its last [node${NODES[$1]}] lines" \
		"above say why (CannotListen: a port is taken). Stopping the others." >&2
	stop
	exit "$(( status == 0 ? 1 : status ))"
}

deadline=$((SECONDS + START_TIMEOUT))
for i in "${!NODES[@]}"; do
	http="127.0.0.1:$(node_port "${NODES[$i]}" 2)"
	until "$BIN/gostream-ctl" health --http "$http" --timeout 1s >/dev/null 2>&1; do
		for j in "${!pids[@]}"; do
			if ! kill -0 "${pids[$j]}" 2>/dev/null; then
				node_failed "$j"
			fi
		done
		if [ "$SECONDS" -ge "$deadline" ]; then
			echo "run-cluster: node ${NODES[$i]} did not answer http://$http/api/health within ${START_TIMEOUT}s; stopping" >&2
			stop
			exit 1
		fi
		sleep 0.2
	done
done

ctl="$BIN/gostream-ctl"
cat <<MSG

gostream: three nodes are up; node 1 is the controller. Data in $DATA/node{1,2,3}.
  node 1  RPC 127.0.0.1:9400  gossip 127.0.0.1:9401  HTTP 127.0.0.1:9402
  node 2  RPC 127.0.0.1:9410  gossip 127.0.0.1:9411  HTTP 127.0.0.1:9412
  node 3  RPC 127.0.0.1:9420  gossip 127.0.0.1:9421  HTTP 127.0.0.1:9422
In another terminal (gostream-ctl talks to 127.0.0.1:9400 by default):
  $ctl cluster status
  $ctl topic create orders --partitions 3 --replication-factor 3
  $ctl produce orders --key user-1 'hello'
  $ctl consume orders --from-beginning
  curl -s http://127.0.0.1:9412/api/health
Ctrl-C stops all three; 'make run' again brings the same cluster back.
ready
MSG

# Stay in the foreground until Ctrl-C (handled by on_signal) or until a
# node exits on its own, which stops the others and fails the script.
while :; do
	for j in "${!pids[@]}"; do
		if ! kill -0 "${pids[$j]}" 2>/dev/null; then
			node_failed "$j"
		fi
	done
	sleep 0.5 &
	wait $! || true
done
