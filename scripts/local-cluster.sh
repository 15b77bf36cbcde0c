# The local three-node cluster of `make run` and `make node`, sourced by
# scripts/run-cluster.sh, scripts/run-node.sh and scripts/signal-node.sh,
# so that a node started again by itself gets exactly the flags and data
# it had. Node N listens on PORT_BASE + 10(N-1) for RPC, +1 for gossip
# and +2 for HTTP; with the default PORT_BASE, 9400:
#
#   node 1: RPC 9400, gossip 9401, HTTP 9402
#   node 2: RPC 9410, gossip 9411, HTTP 9412
#   node 3: RPC 9420, gossip 9421, HTTP 9422
#
# All three are candidates of the replicated controller
# (docs/controller-raft.md): one of them is the active controller, and
# another takes over by itself if it dies.
#
# Data lives under $DATA/node1, node2, node3: ./data for the default port
# base, ./data-PORT_BASE for another (./data-19400), so that two clusters
# on two port bases never share a storage root, and a port base always
# comes back to its own data. DATA=DIR overrides it.
#
# Whichever script starts a node writes its PID to $DATA/nodeN.pid and
# removes the file once the node has ended: `make kill N=2`, `make reload`
# and the stop of `make run` find the nodes of this cluster by these files,
# never by name (other clusters may run on the same machine).
#
# SECURE=1 runs the same cluster with TLS on every link, mutual TLS
# between the nodes, gossip encryption and authentication (docs/security.md),
# with what secure_setup makes once in $DATA/secure: a development CA and
# a certificate per node and for the operator, a gossip key, and a token
# for the principal admin.

BIN="${BIN:-./bin}"
DEFAULT_PORT_BASE=9400
PORT_BASE="${PORT_BASE:-$DEFAULT_PORT_BASE}"
NODES=(1 2 3)
SECURE="${SECURE:-}"

# port_base_valid PREFIX: whether PORT_BASE is a number that leaves room
# for the nine ports (the last is PORT_BASE+22); says why not after PREFIX.
port_base_valid() {
	case "$PORT_BASE" in
	"" | *[!0-9]*) ;;
	*)
		if [ "${#PORT_BASE}" -le 5 ] && [ "$PORT_BASE" -ge 1 ] && [ "$PORT_BASE" -le 65513 ]; then
			return 0
		fi
		;;
	esac
	echo "$1: PORT_BASE=$PORT_BASE: want a port number from 1 to 65513 (node N uses PORT_BASE+10(N-1) to +3)" >&2
	return 1
}

# default_data: the data directory of PORT_BASE when DATA is not given.
default_data() {
	if [ "$PORT_BASE" = "$DEFAULT_PORT_BASE" ]; then
		echo ./data
	else
		echo "./data-$PORT_BASE"
	fi
}
DATA="${DATA:-$(default_data)}"
SECURE_DIR="$DATA/secure"

# make_vars: the make variables that name this cluster (PORT_BASE, DATA)
# where they are not the defaults, each with a space before it, for the
# make commands the scripts print: `make node N=2$(make_vars)`.
make_vars() {
	local vars=""
	if [ "$PORT_BASE" != "$DEFAULT_PORT_BASE" ]; then
		vars+=" PORT_BASE=$PORT_BASE"
	fi
	if [ "$DATA" != "$(default_data)" ]; then
		vars+=" DATA=$DATA"
	fi
	echo "$vars"
}

# secure: whether SECURE asks for the secure cluster.
secure() { case "$SECURE" in "" | 0 | no | false) return 1 ;; esac; }

# secure_setup: makes, once, the files of the secure cluster, and exports
# the variables that make gostream-ctl use them.
secure_setup() {
	if [ ! -f "$SECURE_DIR/ca.crt" ]; then
		"$BIN/gostream-ctl" cert init "$SECURE_DIR" --nodes "${#NODES[@]}" >/dev/null
	fi
	if [ ! -f "$SECURE_DIR/gossip.key" ]; then
		(umask 077 && head -c 32 /dev/urandom | base64 >"$SECURE_DIR/gossip.key")
	fi
	if [ ! -f "$SECURE_DIR/admin.token" ]; then
		"$BIN/gostream-ctl" token create --principal admin --tokens-file "$SECURE_DIR/tokens" --out "$SECURE_DIR/admin.token" >/dev/null
	fi
	export GOSTREAM_TLS_CA="$SECURE_DIR/ca.crt" GOSTREAM_TOKEN_FILE="$SECURE_DIR/admin.token"
}

# node_port ID OFFSET: the port of node ID (PORT_BASE + 10*(ID-1) +
# OFFSET), OFFSET 0 for RPC, 1 for gossip, 2 for HTTP.
# Offsets 0 to 3 of a node's ports: RPC, gossip, HTTP, Kafka. The Kafka
# listeners of the default cluster are on 9092 (the port every Kafka tool
# tries first), 9093 and 9094.
node_port() {
	if [ "$2" = 3 ] && [ "$PORT_BASE" = "$DEFAULT_PORT_BASE" ]; then
		echo $((9091 + $1))
	else
		echo $((PORT_BASE + 10 * ($1 - 1) + $2))
	fi
}
port_name() { case $1 in 0) echo RPC ;; 1) echo gossip ;; 2) echo HTTP ;; 3) echo Kafka ;; esac; }

# port_taken PORT: something listens on TCP port PORT of 127.0.0.1. (A
# UDP-only squatter on a gossip port is not seen; the node then exits with
# CannotListen.)
# node_offsets: the port offsets a node uses.
node_offsets() { echo 0 1 2 3; }

port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# ports_free PREFIX ID...: prints, after PREFIX, each port of the
# nodes ID... that is taken; returns 1 if one is, 0 if all are free.
ports_free() {
	local prefix=$1 taken=0 id off port
	shift
	for id in "$@"; do
		for off in $(node_offsets); do
			port=$(node_port "$id" "$off")
			if port_taken "$port"; then
				echo "$prefix: port $port (node $id $(port_name "$off")) is taken" >&2
				taken=1
			fi
		done
	done
	return "$taken"
}

# free_port_base: prints a port base other than PORT_BASE whose twelve
# ports are all free, for a refusal to suggest (19400, 29400, ... first,
# then steps of 1000); returns 1 when it finds none.
free_port_base() {
	local base id off free
	for base in $(seq $((PORT_BASE + 10000)) 10000 65513) $(seq $((PORT_BASE + 1000)) 1000 65513); do
		free=1
		for id in "${NODES[@]}"; do
			for off in 0 1 2 3; do
				if port_taken $((base + 10 * (id - 1) + off)); then
					free=0
				fi
			done
		done
		if [ "$free" = 1 ]; then
			echo "$base"
			return 0
		fi
	done
	return 1
}

# bootstrap: the RPC addresses of the three nodes, as GOSTREAM_BOOTSTRAP
# (gostream-ctl's default is those of the default PORT_BASE).
bootstrap() {
	local id list=()
	for id in "${NODES[@]}"; do
		list+=("127.0.0.1:$(node_port "$id" 0)")
	done
	(IFS=,; echo "${list[*]}")
}

# pid_file ID: the file that holds the PID of node ID while it runs.
pid_file() { echo "$DATA/node$1.pid"; }

# write_pid ID PID: records PID as node ID's (atomically: a reader sees
# the old PID or the new one).
write_pid() {
	local f
	f=$(pid_file "$1")
	printf '%s\n' "$2" >"$f.$$"
	mv -f "$f.$$" "$f"
}

# remove_pid ID PID: removes node ID's PID file if it still names PID (a
# `make node` may have written its own node's since).
remove_pid() {
	local f pid=""
	f=$(pid_file "$1")
	{ read -r pid <"$f"; } 2>/dev/null || true
	if [ "$pid" = "$2" ]; then
		rm -f "$f"
	fi
}

# is_node PID ID: whether process PID runs node ID of this cluster: a
# gostream-node with this cluster's --id, --listen and --data-dir. A PID
# file can outlive its node (when the script that wrote it was killed with
# -9) and its PID be another process's since; and a node that has ended
# but is not reaped yet has no command line, so it is not running either.
is_node() {
	local pid=$1 id=$2 args=() i found=0 listen
	case "$pid" in "" | *[!0-9]*) return 1 ;; esac
	listen="--listen 127.0.0.1:$((PORT_BASE + 10 * (id - 1)))"
	if [ -d /proc/self ]; then
		{ mapfile -d '' args <"/proc/$pid/cmdline"; } 2>/dev/null || return 1
	else
		# No /proc (macOS): ps's command line, split at spaces.
		read -ra args <<<"$(ps -p "$pid" -o args= 2>/dev/null)" || return 1
	fi
	if [ "${#args[@]}" = 0 ] || [ "${args[0]##*/}" != gostream-node ]; then
		return 1
	fi
	for ((i = 1; i + 1 < ${#args[@]}; i++)); do
		case "${args[$i]} ${args[$((i + 1))]}" in
		"--id $id" | "$listen" | "--data-dir $DATA/node$id") found=$((found + 1)) ;;
		esac
	done
	[ "$found" = 3 ]
}

# node_pid ID: prints the PID of node ID if its PID file names a process
# that is node ID; returns 1 when node ID is not running (for all this
# cluster knows: a node started by hand writes no PID file).
node_pid() {
	local pid=""
	{ read -r pid <"$(pid_file "$1")"; } 2>/dev/null || return 1
	is_node "$pid" "$1" || return 1
	echo "$pid"
}

# end_nodes PREFIX TIMEOUT ID:PID...: waits until each node ID (process
# PID), sent SIGTERM by the caller, has ended; SIGKILL, saying so after
# PREFIX, to any left after TIMEOUT seconds, and a wait of up to 5 s more
# for it to go. Each wait is a poll, which a signal trap that runs
# meanwhile cannot cut short.
end_nodes() {
	local prefix=$1 timeout=$2 entry id pid deadline killed
	shift 2
	deadline=$((SECONDS + timeout))
	for entry in "$@"; do
		id=${entry%%:*} pid=${entry#*:} killed=""
		while is_node "$pid" "$id"; do
			if [ -z "$killed" ] && [ "$SECONDS" -ge "$deadline" ]; then
				echo "$prefix: node $id did not stop within ${timeout}s; killing it" >&2
				kill -KILL "$pid" 2>/dev/null || true
				killed=$((SECONDS + 5))
			elif [ -n "$killed" ] && [ "$SECONDS" -ge "$killed" ]; then
				echo "$prefix: node $id (pid $pid) still runs 5s after SIGKILL; giving up on it" >&2
				break
			fi
			# A signal to the process group ends this sleep early: not an error.
			sleep 0.1 || true
		done
	done
}

# node_gomaxprocs: sets NODE_GOMAXPROCS to the processors each node's Go
# runtime gets, and GOMAXPROCS_WHY to a few words on why: GOMAXPROCS if
# the caller set it, else this machine's CPUs shared among the three nodes,
# at least one each. By default a Go process takes one per CPU, and three
# nodes on the same CPUs then spend CPU waking threads that find nothing to
# run (docs/operations.md, "Several nodes on one machine").
node_gomaxprocs() {
	if [ -n "${GOMAXPROCS:-}" ]; then
		NODE_GOMAXPROCS=$GOMAXPROCS
		GOMAXPROCS_WHY="GOMAXPROCS as set"
		return
	fi
	local cpus
	cpus=$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
	NODE_GOMAXPROCS=$((cpus / ${#NODES[@]}))
	if [ "$NODE_GOMAXPROCS" -lt 1 ]; then
		NODE_GOMAXPROCS=1
	fi
	GOMAXPROCS_WHY="$cpus CPUs shared by ${#NODES[@]} nodes; set GOMAXPROCS to choose"
}

# node_args ID: sets NODE_ARGS to the gostream-node flags of node ID.
node_args() {
	local id=$1 other join=()
	for other in "${NODES[@]}"; do
		if [ "$other" != "$id" ]; then
			join+=("127.0.0.1:$(node_port "$other" 1)")
		fi
	done
	NODE_ARGS=(--id "$id" --data-dir "$DATA/node$id"
		--listen "127.0.0.1:$(node_port "$id" 0)" --gossip "127.0.0.1:$(node_port "$id" 1)" --http "127.0.0.1:$(node_port "$id" 2)"
		--join "$(IFS=,; echo "${join[*]}")" --controller "$(controllers)")
	# With SECURE=1 the Kafka listeners speak TLS and take SASL/PLAIN and
	# OAUTHBEARER with the tokens (docs/kafka.md, "Security").
	NODE_ARGS+=(--kafka-listen "127.0.0.1:$(node_port "$id" 3)")
	if secure; then
		local supers=() n
		for n in "${NODES[@]}"; do supers+=("node$n"); done
		NODE_ARGS+=(--tls-cert "$SECURE_DIR/node$id.crt" --tls-key "$SECURE_DIR/node$id.key" --tls-ca "$SECURE_DIR/ca.crt"
			--gossip-key-file "$SECURE_DIR/gossip.key" --auth-tokens-file "$SECURE_DIR/tokens"
			--superusers "$(IFS=,; echo "${supers[*]}"),admin")
	fi
}

# controllers: the --controller list, all three nodes candidates of the
# replicated controller.
controllers() {
	local id list=()
	for id in "${NODES[@]}"; do
		list+=("$id@127.0.0.1:$(node_port "$id" 0)")
	done
	(IFS=,; echo "${list[*]}")
}

# exit_reason STATUS: how a process that exited with STATUS ended.
exit_reason() {
	if [ "$1" -gt 128 ]; then
		echo "killed by SIG$(kill -l "$(($1 - 128))" 2>/dev/null || echo $(($1 - 128))) (status $1)"
	else
		echo "exit status $1"
	fi
}
