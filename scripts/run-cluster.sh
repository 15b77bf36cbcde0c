#!/usr/bin/env bash
# Starts a local three-node gostream cluster on loopback, in the foreground,
# with the addresses of docs/cli.md, so that gostream-ctl with no flags talks to
# it. `make run` builds the binaries and runs this. The nodes, their ports
# and flags are in scripts/local-cluster.sh:
#
#   node 1: RPC 9400, gossip 9401, HTTP 9402
#   node 2: RPC 9410, gossip 9411, HTTP 9412
#   node 3: RPC 9420, gossip 9421, HTTP 9422
#
# All three are candidates of the replicated controller
# (docs/controller-raft.md): one of them is the active controller, and
# another takes over by itself if it dies.
#
# Data lives under $DATA/node1, node2, node3 (./data by default) and is kept:
# running it again brings back the same cluster. Logs of all three go to the
# terminal, each line prefixed with [node1], [node2] or [node3]. A node that
# fails to start stops the others. Once all are up, a node that dies (kill
# -9, a crash) is reported with how it ended, and the others keep running:
# `make node N=<id>` starts it again with the same flags and data. Ctrl-C
# sends SIGTERM to each node still running here, waits for them to stop,
# and exits 0.
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/local-cluster.sh
. scripts/local-cluster.sh
# How long the nodes get to answer /api/health, and to stop after Ctrl-C.
START_TIMEOUT="${START_TIMEOUT:-30}"
STOP_TIMEOUT="${STOP_TIMEOUT:-30}"

for b in gostream-node gostream-ctl; do
	if [ ! -x "$BIN/$b" ]; then
		echo "run-cluster: $BIN/$b is missing; run 'make build' first" >&2
		exit 1
	fi
done

if secure; then
	secure_setup
fi

# Every port must be free before anything starts, so that a taken port is
# named rather than found as one node dying among the logs of the others.
if ! ports_free run-cluster "${NODES[@]}"; then
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

for i in "${!NODES[@]}"; do
	id=${NODES[$i]}
	node_args "$id"
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
	"$BIN/gostream-node" "${NODE_ARGS[@]}" >"$fifo" 2>&1 </dev/null &
	pids+=("$!")
	set +m
done

# start_failed I: node I exited while the cluster started; report how
# and give up.
start_failed() {
	local status=0
	wait "${pids[$1]}" || status=$?
	echo "run-cluster: node ${NODES[$1]} exited while starting: $(exit_reason "$status"); its last [node${NODES[$1]}] lines" \
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
				start_failed "$j"
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

# Answering health is not enough: a node that started before the
# controller registers a moment later, and until then a topic of
# replication factor 3 cannot be created.
until [ "$("$BIN/gostream-ctl" broker list -o json --timeout 1s 2>/dev/null | grep -o '"registered":"registered"' | wc -l)" -ge "${#NODES[@]}" ]; do
	for j in "${!pids[@]}"; do
		if ! kill -0 "${pids[$j]}" 2>/dev/null; then
			start_failed "$j"
		fi
	done
	if [ "$SECONDS" -ge "$deadline" ]; then
		echo "run-cluster: not every node registered with the controller within ${START_TIMEOUT}s; stopping (see the [node] lines above)" >&2
		stop
		exit 1
	fi
	sleep 0.2
done

ctl="$BIN/gostream-ctl"
if secure; then
	cat <<MSG

gostream: three nodes are up with TLS on every link, mutual TLS between the nodes,
gossip encryption and authentication (SECURE=1; docs/security.md). The files are in $SECURE_DIR:
a development CA (ca.crt), node1..3.crt, admin.crt, gossip.key, the tokens file and admin.token.
  node 1  RPC 127.0.0.1:9400  gossip 127.0.0.1:9401  HTTPS 127.0.0.1:9402
  node 2  RPC 127.0.0.1:9410  gossip 127.0.0.1:9411  HTTPS 127.0.0.1:9412
  node 3  RPC 127.0.0.1:9420  gossip 127.0.0.1:9421  HTTPS 127.0.0.1:9422
In another terminal, make gostream-ctl use them (as admin, a superuser):
  export GOSTREAM_TLS_CA=$SECURE_DIR/ca.crt GOSTREAM_TOKEN_FILE=$SECURE_DIR/admin.token
  $ctl cluster status
  $ctl topic create orders --partitions 3 --replication-factor 3
  $ctl token create --principal alice --tokens-file $SECURE_DIR/tokens --out alice.token   # then: pkill -HUP gostream-node
  $ctl acl add --principal alice --topic orders --operation write --operation read
  curl -s --cacert $SECURE_DIR/ca.crt -H "Authorization: Bearer \$(cat $SECURE_DIR/admin.token)" https://127.0.0.1:9412/api/status
Ctrl-C stops all three; 'make run SECURE=1' again brings the same cluster back.
If a node dies, the others keep running; 'make node N=<id> SECURE=1' starts it again.
ready
MSG
else
	cat <<MSG

gostream: three nodes are up, each a controller candidate; one is active (gostream-ctl controller status). Data in $DATA/node{1,2,3}.
  node 1  RPC 127.0.0.1:9400  gossip 127.0.0.1:9401  HTTP 127.0.0.1:9402
  node 2  RPC 127.0.0.1:9410  gossip 127.0.0.1:9411  HTTP 127.0.0.1:9412
  node 3  RPC 127.0.0.1:9420  gossip 127.0.0.1:9421  HTTP 127.0.0.1:9422
In another terminal (gostream-ctl talks to these three nodes by default):
  $ctl cluster status
  $ctl topic create orders --partitions 3 --replication-factor 3
  $ctl produce orders --key user-1 'hello'
  $ctl consume orders --from-beginning
  curl -s http://127.0.0.1:9412/api/health
Ctrl-C stops all three; 'make run' again brings the same cluster back.
If a node dies, the others keep running; 'make node N=<id>' starts it again.
ready
MSG
fi

# Stay in the foreground until Ctrl-C (handled by on_signal). A node that
# exits on its own is reported, once, and the others keep running; when
# none is left, the script exits 1.
down=()
while :; do
	alive=0
	for j in "${!pids[@]}"; do
		if [ -n "${down[$j]:-}" ]; then
			continue
		fi
		if kill -0 "${pids[$j]}" 2>/dev/null; then
			alive=$((alive + 1))
			continue
		fi
		status=0
		wait "${pids[$j]}" || status=$?
		down[$j]=1
		id=${NODES[$j]}
		echo "run-cluster: node $id exited: $(exit_reason "$status"); the other nodes keep running." >&2
		echo "run-cluster: see what that means with: $ctl cluster status" >&2
		echo "run-cluster: start node $id again, with its flags and data, in another terminal: make node N=$id" >&2
	done
	if [ "$alive" = 0 ]; then
		echo "run-cluster: every node has exited; stopping" >&2
		exit 1
	fi
	sleep 0.5 &
	wait $! || true
done
