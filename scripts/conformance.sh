#!/usr/bin/env bash
# make conformance: the Durable Streams server conformance suite (pinned in
# conformance/package.json) against a three-node cluster this script starts
# on loopback (ports 9600-9622, data in a temporary directory), with every
# stream replicated to all three nodes. It runs the suite twice, through
# node 1 and through node 2. New streams are led in turn by the broker
# that leads the fewest, so in each run a third of the streams are led by
# the node the suite talks to and two thirds are forwarded, over the
# cluster's transport, to the leader elsewhere: every test meets both.
# Then it runs conformance/client.test.mjs, the official client
# (@durable-streams/client), through node 2. Exit status: 0 when every run
# passed.
#
#   DS_RUNS="node1 node2 client"  which runs (default all three)
#   KEEP=1                     keep the data directory and node logs
set -euo pipefail

BIN="${BIN:-./bin}"
RUNS="${DS_RUNS:-node1 node2 client}"
LONG_POLL="${DS_LONG_POLL:-2s}"
here=$(cd "$(dirname "$0")/.." && pwd)
dir=$(mktemp -d /tmp/gostream-conformance.XXXXXX)
pids=()

stop() {
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
	if [ -z "${KEEP:-}" ]; then rm -rf "$dir"; else echo "conformance: data and logs kept in $dir"; fi
}
trap stop EXIT

port() { echo $((9600 + 10 * ($1 - 1) + $2)); }

if [ ! -d "$here/conformance/node_modules" ]; then
	(cd "$here/conformance" && npm ci --no-audit --no-fund)
fi

for id in 1 2 3; do
	join=()
	for o in 1 2 3; do [ "$o" = "$id" ] || join+=("127.0.0.1:$(port "$o" 1)"); done
	mkdir -p "$dir/node$id"
	"$BIN/gostream-node" --id "$id" --data-dir "$dir/node$id" \
		--listen "127.0.0.1:$(port "$id" 0)" --gossip "127.0.0.1:$(port "$id" 1)" --http "127.0.0.1:$(port "$id" 2)" \
		--join "$(IFS=,; echo "${join[*]}")" --controller "1@127.0.0.1:$(port 1 0)" \
		--ds-replication-factor 3 --ds-long-poll-timeout "$LONG_POLL" --log-level "${LOG_LEVEL:-warn}" \
		>"$dir/node$id.log" 2>&1 </dev/null &
	pids+=("$!")
done

# Ready when every node answers health and the controller has all three.
deadline=$((SECONDS + 60))
until "$BIN/gostream-ctl" --bootstrap "127.0.0.1:$(port 1 0)" -o json cluster status 2>/dev/null |
	grep -o "\"registered\":\"registered\"" | wc -l | grep -qx 3; do
	if [ $SECONDS -gt $deadline ]; then
		echo "conformance: the cluster did not come up in 60 s; node logs:" >&2
		tail -n 20 "$dir"/node*.log >&2
		exit 1
	fi
	sleep 0.2
done
for id in 1 2 3; do
	until "$BIN/gostream-ctl" health --http "127.0.0.1:$(port "$id" 2)" --timeout 1s >/dev/null 2>&1; do
		[ $SECONDS -le $deadline ] || { echo "conformance: node $id is not healthy" >&2; exit 1; }
		sleep 0.2
	done
done

status=0
for run in $RUNS; do
	case $run in
	node1) id=1 file=conformance.test.mjs what="the suite through node 1 (also the controller)" ;;
	node2) id=2 file=conformance.test.mjs what="the suite through node 2" ;;
	client) id=2 file=client.test.mjs what="the official client through node 2" ;;
	*) echo "conformance: unknown run $run (node1, node2 or client)" >&2; exit 2 ;;
	esac
	echo "conformance: $what"
	(cd "$here/conformance" && DS_BASE_URL="http://127.0.0.1:$(port "$id" 2)" DS_LONG_POLL_TIMEOUT_MS=20000 \
		npx vitest run --config vitest.config.mjs "$file") || status=$?
done
exit $status
