#!/usr/bin/env bash
# Starts a local gostream cluster on loopback, in the foreground, with the
# addresses of CLI.md, so that gostream-ctl with no flags talks to it.
# Ctrl-C stops it. Data lives under ./data/node<ID>.
#
# Today the cluster is one node (node 1, the controller); nodes 2 and 3
# (RPC 9410/9420, gossip 9411/9421, HTTP 9412/9422) join the NODES list when
# replication arrives.
set -euo pipefail

cd "$(dirname "$0")/.."
BIN="${BIN:-./bin}"
DATA="${DATA:-./data}"
NODES="${NODES:-1}"

if [ ! -x "$BIN/gostream-node" ]; then
	echo "run-cluster: $BIN/gostream-node is missing; run 'make build' first" >&2
	exit 1
fi

# node_port ID OFFSET: the CLI.md port of node ID (9400 + 10*(ID-1) + OFFSET).
node_port() { echo $((9400 + 10 * ($1 - 1) + $2)); }

pids=()
interrupted=0
stop() {
	trap - INT TERM
	for pid in "${pids[@]}"; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	wait || true
}
trap 'interrupted=1; stop' INT TERM

controller="1@127.0.0.1:$(node_port 1 0)"
for id in $NODES; do
	mkdir -p "$DATA/node$id"
	"$BIN/gostream-node" \
		--id "$id" \
		--data-dir "$DATA/node$id" \
		--listen "127.0.0.1:$(node_port "$id" 0)" \
		--gossip "127.0.0.1:$(node_port "$id" 1)" \
		--http "127.0.0.1:$(node_port "$id" 2)" \
		--controller "$controller" &
	pids+=("$!")
done

cat <<MSG
gostream: started node(s) $NODES; Ctrl-C stops them. Check health with:
    curl -s http://127.0.0.1:$(node_port 1 2)/api/health
    $BIN/gostream-ctl health
MSG

# Stay in the foreground until Ctrl-C or until a node exits. Ctrl-C reaches
# the nodes too, so a node that exits 0 was stopped on purpose; one that
# fails stops the others and gives the script its exit status.
status=0
wait -n "${pids[@]}" || status=$?
stop
if [ "$interrupted" = 1 ] || [ "$status" = 0 ]; then
	exit 0
fi
echo "run-cluster: a node exited with status $status; stopped the others" >&2
exit "$status"
