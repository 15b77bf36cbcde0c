# The local three-node cluster of `make run` and `make node`, sourced by
# scripts/run-cluster.sh and scripts/run-node.sh so that a node started
# again by itself gets exactly the flags and data it had:
#
#   node 1: RPC 9400, gossip 9401, HTTP 9402
#   node 2: RPC 9410, gossip 9411, HTTP 9412
#   node 3: RPC 9420, gossip 9421, HTTP 9422
#
# All three are candidates of the replicated controller
# (docs/controller-raft.md): one of them is the active controller, and
# another takes over by itself if it dies.
#
# Data lives under $DATA/node1, node2, node3 (./data by default).
#
# SECURE=1 runs the same cluster with TLS on every link, mutual TLS
# between the nodes, gossip encryption and authentication (docs/security.md),
# with what secure_setup makes once in $DATA/secure: a development CA and
# a certificate per node and for the operator, a gossip key, and a token
# for the principal admin.

BIN="${BIN:-./bin}"
DATA="${DATA:-./data}"
NODES=(1 2 3)
SECURE="${SECURE:-}"
SECURE_DIR="$DATA/secure"

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

# node_port ID OFFSET: the port of node ID (9400 + 10*(ID-1) + OFFSET),
# OFFSET 0 for RPC, 1 for gossip, 2 for HTTP.
node_port() { echo $((9400 + 10 * ($1 - 1) + $2)); }
port_name() { case $1 in 0) echo RPC ;; 1) echo gossip ;; 2) echo HTTP ;; esac; }

# port_taken PORT: something listens on TCP port PORT of 127.0.0.1. (A
# UDP-only squatter on a gossip port is not seen; the node then exits with
# CannotListen.)
port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# ports_free PREFIX ID...: prints, after PREFIX, each port of the
# nodes ID... that is taken; returns 1 if one is, 0 if all are free.
ports_free() {
	local prefix=$1 taken=0 id off port
	shift
	for id in "$@"; do
		for off in 0 1 2; do
			port=$(node_port "$id" "$off")
			if port_taken "$port"; then
				echo "$prefix: port $port (node $id $(port_name "$off")) is taken" >&2
				taken=1
			fi
		done
	done
	return "$taken"
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
