#!/usr/bin/env bash
# Starts a local three-node gostream cluster on loopback, in the foreground.
# `make run` builds the binaries and runs this. The nodes, their ports
# and flags are in scripts/local-cluster.sh; with the default PORT_BASE,
# 9400, they have the addresses of docs/cli.md, so that gostream-ctl with
# no flags talks to them:
#
#   node 1: RPC 9400, gossip 9401, HTTP 9402
#   node 2: RPC 9410, gossip 9411, HTTP 9412
#   node 3: RPC 9420, gossip 9421, HTTP 9422
#
# PORT_BASE=19400 (make run PORT_BASE=19400) moves them to 19400-19422,
# with their data in ./data-19400, beside a cluster on other ports; the
# banner then prints the GOSTREAM_BOOTSTRAP to export for gostream-ctl.
#
# All three are candidates of the replicated controller
# (docs/controller-raft.md): one of them is the active controller, and
# another takes over by itself if it dies. `ready` is printed once the
# three answer, are registered, and a candidate is active.
#
# AUTOPILOT=1 (make run AUTOPILOT=1) starts a gostream-ctl autopilot
# beside them once they are ready (docs/autopilot.md), with the flags in
# AUTOPILOT_ARGS if any; its lines are prefixed [autopilot]. It fails over
# a node that stays silent, recovers it when it is back and moves
# leadership back, with nobody typing. Ctrl-C stops it first (it gives its
# lease back), then the nodes; if it stops by itself (a command failed
# twice, most nodes silent at once) that is reported and the nodes keep
# running.
#
# Data lives under $DATA/node1, node2, node3 and is kept: running it again
# brings back the same cluster. Each node's PID is in $DATA/nodeN.pid
# while it runs. Logs of all three go to the terminal, each line prefixed
# with [node1], [node2] or [node3]. A node that fails to start stops the
# others. Once all are up, a node that dies (`make kill N=2`, a crash) is
# reported with how it ended, and the others keep running: `make node
# N=<id>` starts it again with the same flags and data. Ctrl-C (or
# SIGTERM, or SIGHUP) sends SIGTERM to each node still running, this
# script's and any `make node` started since, waits for them to stop
# (SIGKILL after STOP_TIMEOUT seconds), removes its run directory and
# exits 0; a second signal meanwhile changes nothing.
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/local-cluster.sh
. scripts/local-cluster.sh
port_base_valid run-cluster || exit 1
# How long the nodes get to answer /api/health, and to stop after Ctrl-C.
START_TIMEOUT="${START_TIMEOUT:-30}"
STOP_TIMEOUT="${STOP_TIMEOUT:-30}"
# This script's own gostream-ctl calls go to its nodes, whatever the
# caller's environment names.
export GOSTREAM_BOOTSTRAP
GOSTREAM_BOOTSTRAP=$(bootstrap)

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
	for id in "${NODES[@]}"; do
		if pid=$(node_pid "$id"); then
			echo "run-cluster: node $id of this cluster runs already (pid $pid, in $(pid_file "$id"))" >&2
		fi
	done
	echo "run-cluster: is another 'make run' or gostream-node running on these ports? Stop it, or free the port(s) above." >&2
	if other=$(free_port_base); then
		echo "run-cluster: or run a cluster on other ports, which are free: make run PORT_BASE=$other" >&2
	else
		echo "run-cluster: or run this cluster on other ports: make run PORT_BASE=N (ports N to N+22)" >&2
	fi
	if command -v ss >/dev/null 2>&1; then
		echo "run-cluster: listeners on ports $PORT_BASE-$((PORT_BASE + 22)):" >&2
		ss -Hltnp "sport >= :$PORT_BASE and sport <= :$((PORT_BASE + 22))" >&2 || true
	fi
	exit 1
fi

if [ -t 1 ]; then
	colors=($'\033[36m' $'\033[35m' $'\033[33m') reset=$'\033[0m'
else
	colors=('' '' '') reset=''
fi

run_dir="$(mktemp -d "${TMPDIR:-/tmp}/gostream-run.XXXXXX")"
ap_pid="" ap_down="" # the autopilot of AUTOPILOT=1, once started; set once it has exited
pids=()
prefixers=()
down=() # down[I] is set once node I, started here, has exited

# stop: SIGTERM to every node of the cluster still running, those this
# script started and those a `make node` started since (found by their
# PID files), and a wait until each has ended (SIGKILL after STOP_TIMEOUT
# seconds); then a wait for the prefixers to print their last lines, and
# the run directory removed. It runs once: called again while it runs
# or after, it does nothing and leaves the first call to finish.
# ap_running: whether the autopilot runs (one that has ended and is not
# reaped yet has no command line: it does not).
ap_running() {
	local first=""
	[ -n "$ap_pid" ] && kill -0 "$ap_pid" 2>/dev/null || return 1
	if [ -d /proc/self ]; then
		{ IFS= read -r -d '' first <"/proc/$ap_pid/cmdline"; } 2>/dev/null
		[ -n "$first" ] || return 1
	fi
}

stop_state=""
stop() {
	if [ -z "$stop_state" ]; then
		stop_state=stopping
		stop_nodes
		stop_state=stopped
	fi
}
stop_nodes() {
	local i id pid nodes=() waited=0
	# The autopilot first, so that it fails nothing over while the nodes
	# stop; SIGTERM makes it give its lease back.
	if ap_running; then
		kill -TERM "$ap_pid" 2>/dev/null || true
		while ap_running && [ "$waited" -lt $((STOP_TIMEOUT * 5)) ]; do
			# A signal to the process group ends this sleep early: not an error.
			sleep 0.2 || true
			waited=$((waited + 1))
		done
		kill -KILL "$ap_pid" 2>/dev/null || true
	fi
	# Exactly one SIGTERM each: a node that gets a second signal while it
	# stops is killed by it instead of stopping cleanly.
	for i in "${!pids[@]}"; do
		if [ -z "${down[$i]:-}" ]; then
			kill -TERM "${pids[$i]}" 2>/dev/null || true
			nodes+=("${NODES[$i]}:${pids[$i]}")
		fi
	done
	for id in "${NODES[@]}"; do
		if pid=$(node_pid "$id") && [[ " ${pids[*]} " != *" $pid "* ]]; then
			kill -TERM "$pid" 2>/dev/null || true
			nodes+=("$id:$pid")
		fi
	done
	end_nodes run-cluster "$STOP_TIMEOUT" ${nodes[@]+"${nodes[@]}"}
	# Reap this script's own processes. A signal's trap cuts a wait short,
	# so wait again until each is gone.
	for pid in ${pids[@]+"${pids[@]}"} ${prefixers[@]+"${prefixers[@]}"} $ap_pid; do
		while kill -0 "$pid" 2>/dev/null; do
			wait "$pid" 2>/dev/null || true
		done
	done
	for i in "${!pids[@]}"; do
		remove_pid "${NODES[$i]}" "${pids[$i]}"
	done
	rm -rf "$run_dir"
}
# on_signal: the trap of INT, TERM and HUP. A second signal while the
# first one's stop runs does nothing: this returns into that stop, which
# goes on and exits once every node has ended. (No `return` in it: when
# the signal has also killed a foreground command, the sleep of a poll,
# bash 5.2 abandons what the trap interrupted if the trap's function runs
# `return`: the stop would end half done.)
on_signal() {
	if [ -z "$stop_state" ]; then
		echo "run-cluster: stopping the nodes"
		stop
		echo "run-cluster: stopped"
		exit 0
	fi
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

node_gomaxprocs
echo "run-cluster: each node runs with GOMAXPROCS=$NODE_GOMAXPROCS ($GOMAXPROCS_WHY)"
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
	# second signal instead of stopping cleanly.) The node starts first: a
	# stop between the two then ends a node blocked opening its FIFO, where
	# a prefixer without its node would wait for it for ever.
	set -m
	GOMAXPROCS=$NODE_GOMAXPROCS "$BIN/gostream-node" "${NODE_ARGS[@]}" >"$fifo" 2>&1 </dev/null &
	pids+=("$!")
	prefix_lines "$prefix" <"$fifo" &
	prefixers+=("$!")
	set +m
	write_pid "$id" "${pids[$i]}"
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

# starting WHAT: one more try of the wait for WHAT, the nodes up so far:
# gives up when a node has exited or START_TIMEOUT has passed.
deadline=$((SECONDS + START_TIMEOUT))
starting() {
	local j
	for j in "${!pids[@]}"; do
		if ! kill -0 "${pids[$j]}" 2>/dev/null; then
			start_failed "$j"
		fi
	done
	if [ "$SECONDS" -ge "$deadline" ]; then
		echo "run-cluster: $1 within ${START_TIMEOUT}s; stopping (see the [node] lines above)" >&2
		stop
		exit 1
	fi
	sleep 0.2
}

for i in "${!NODES[@]}"; do
	http="127.0.0.1:$(node_port "${NODES[$i]}" 2)"
	until "$BIN/gostream-ctl" health --http "$http" --timeout 1s >/dev/null 2>&1; do
		starting "node ${NODES[$i]} did not answer http://$http/api/health"
	done
done

# Answering health is not enough: a node that started before the
# controller registers a moment later, and until then a topic of
# replication factor 3 cannot be created.
until [ "$("$BIN/gostream-ctl" broker list -o json --timeout 1s 2>/dev/null | grep -o '"registered":"registered"' | wc -l)" -ge "${#NODES[@]}" ]; do
	starting "not every node registered with the controller"
done

# Nor is being registered: after a restart the nodes answer from the
# metadata they cached, before the candidates have elected an active
# controller, and until one is active no admin change (topic create)
# can be made. controller status -o json names it ("active":N, 0 for
# none).
active=""
until active=$("$BIN/gostream-ctl" controller status -o json --timeout 1s 2>/dev/null | grep -o '"active":[1-9][0-9]*' | cut -d: -f2) && [ -n "$active" ]; do
	starting "no controller candidate became active (gostream-ctl controller status)"
done

ctl="$BIN/gostream-ctl"
autopilot_on() { case "${AUTOPILOT:-}" in "" | 0 | no | false) return 1 ;; esac; }
if autopilot_on; then
	fifo="$run_dir/autopilot"
	mkfifo "$fifo"
	# In a process group of its own, as the nodes: stop() ends it.
	set -m
	# shellcheck disable=SC2086 # AUTOPILOT_ARGS is a list of flags
	"$ctl" autopilot ${AUTOPILOT_ARGS:-} >"$fifo" 2>&1 </dev/null &
	ap_pid=$!
	prefix_lines "[autopilot] " <"$fifo" &
	prefixers+=("$!")
	set +m
fi
vars=$(make_vars)
ap_note=""
if [ -n "$ap_pid" ]; then
	ap_note="An autopilot runs beside them (AUTOPILOT=1, its lines prefixed [autopilot]; docs/autopilot.md): it fails over a node
silent for its grace period (10s unless AUTOPILOT_ARGS says otherwise), recovers it once it is back and moves leadership back.
"
fi
exports=""
if [ "$PORT_BASE" != "$DEFAULT_PORT_BASE" ]; then
	exports="GOSTREAM_BOOTSTRAP=$GOSTREAM_BOOTSTRAP"
fi
nodes_table() {
	local id http=HTTP
	if secure; then http=HTTPS; fi
	for id in "${NODES[@]}"; do
		echo "  node $id  RPC 127.0.0.1:$(node_port "$id" 0)  gossip 127.0.0.1:$(node_port "$id" 1)  $http 127.0.0.1:$(node_port "$id" 2)  Kafka 127.0.0.1:$(node_port "$id" 3)"
	done
}
if secure; then
	cat <<MSG

gostream: three nodes are up with TLS on every link, mutual TLS between the nodes,
gossip encryption and authentication (SECURE=1; docs/security.md); candidate $active is the active controller.
The files are in $SECURE_DIR: a development CA (ca.crt), node1..3.crt, admin.crt, gossip.key, the tokens file and admin.token.
$(nodes_table)
In another terminal, make gostream-ctl use them (as admin, a superuser):
  export ${exports:+$exports }GOSTREAM_TLS_CA=$SECURE_DIR/ca.crt GOSTREAM_TOKEN_FILE=$SECURE_DIR/admin.token
  $ctl cluster status
  $ctl topic create orders --partitions 3 --replication-factor 3
  $ctl token create --principal alice --tokens-file $SECURE_DIR/tokens --out alice.token   # then: make reload$vars
  $ctl acl add --principal alice --topic orders --operation write --operation read
  curl -s --cacert $SECURE_DIR/ca.crt -H "Authorization: Bearer \$(cat $SECURE_DIR/admin.token)" https://127.0.0.1:$(node_port 2 2)/api/status
Kafka clients use TLS and SASL/PLAIN (a principal and its token) or OAUTHBEARER (the token), for example:
  kcat -b 127.0.0.1:$(node_port 1 3) -X security.protocol=SASL_SSL -X ssl.ca.location=$SECURE_DIR/ca.crt -X sasl.mechanisms=PLAIN -X sasl.username=admin -X sasl.password=\$(cat $SECURE_DIR/admin.token) -L
The web console (docs/console.md): https://127.0.0.1:$(node_port 1 2)/ui/ (the development CA signs its certificate: trust
$SECURE_DIR/ca.crt in the browser, or accept the warning); sign in with the token in $SECURE_DIR/admin.token.
'make reload$vars' makes the three read their certificates, tokens and gossip keys again (SIGHUP).
Ctrl-C stops all three; 'make run SECURE=1$vars' again brings the same cluster back.
If a node dies, the others keep running; 'make node N=<id> SECURE=1$vars' starts it again.
'make kill N=<id>$vars' kills one (kill -9), for the failure drill of the README.
${ap_note}ready
MSG
else
	if [ -n "$exports" ]; then
		talk="make gostream-ctl talk to these three nodes:
  export $exports"
	else
		talk="(gostream-ctl talks to these three nodes by default):"
	fi
	cat <<MSG

gostream: three nodes are up, each a controller candidate; candidate $active is active (gostream-ctl controller status). Data in $DATA/node{1,2,3}.
$(nodes_table)
In another terminal, $talk
  $ctl cluster status
  $ctl topic create orders --partitions 3 --replication-factor 3
  $ctl produce orders --key user-1 'hello'
  $ctl consume orders --from-beginning
  curl -s http://127.0.0.1:$(node_port 2 2)/api/health
Kafka clients and tools use the Kafka listeners, for example:
  kcat -b 127.0.0.1:$(node_port 1 3) -L
The web console (docs/console.md): http://127.0.0.1:$(node_port 1 2)/ui/ (every node serves it).
Ctrl-C stops all three; 'make run$vars' again brings the same cluster back.
If a node dies, the others keep running; 'make node N=<id>$vars' starts it again.
'make kill N=<id>$vars' kills one (kill -9), for the failure drill of the README.
${ap_note}ready
MSG
fi

# Stay in the foreground until Ctrl-C (handled by on_signal). A node that
# exits on its own is reported, once, and the others keep running; when
# no node of the cluster is left (neither this script's nor one a `make
# node` started again), the script exits 1.
while :; do
	for j in "${!pids[@]}"; do
		if [ -n "${down[$j]:-}" ] || kill -0 "${pids[$j]}" 2>/dev/null; then
			continue
		fi
		status=0
		wait "${pids[$j]}" || status=$?
		down[$j]=1
		id=${NODES[$j]}
		remove_pid "$id" "${pids[$j]}"
		echo "run-cluster: node $id exited: $(exit_reason "$status"); the other nodes keep running." >&2
		echo "run-cluster: see what that means with: $ctl cluster status" >&2
		echo "run-cluster: start node $id again, with its flags and data, in another terminal: make node N=$id$vars" >&2
	done
	if [ -n "$ap_pid" ] && [ -z "$ap_down" ] && ! ap_running; then
		status=0
		wait "$ap_pid" || status=$?
		ap_down=1
		echo "run-cluster: the autopilot exited: $(exit_reason "$status"); its last [autopilot] line says why. The nodes keep running." >&2
		echo "run-cluster: start it again, in another terminal: $ctl autopilot ${AUTOPILOT_ARGS:-}" >&2
	fi
	alive=0
	for j in "${!pids[@]}"; do
		if [ -z "${down[$j]:-}" ] || node_pid "${NODES[$j]}" >/dev/null; then
			alive=$((alive + 1))
		fi
	done
	if [ "$alive" = 0 ]; then
		echo "run-cluster: every node has exited; stopping" >&2
		exit 1
	fi
	sleep 0.5 &
	wait $! || true
done
