#!/usr/bin/env bash
# make conformance: the Durable Streams server conformance suite (pinned in
# conformance/package.json) against a three-node cluster this script starts
# on loopback (ports 9600-9622, data in a temporary directory), with every
# stream replicated to all three nodes. It runs the suite twice: through
# node 1, which leads every stream (a stream's leader is the first broker
# of its placement), and through node 2, which forwards every request to
# node 1 over the cluster's transport. Exit status: the suite's.
#
#   DS_RUNS="leader follower"  which runs (default both)
#   KEEP=1                     keep the data directory and node logs
set -euo pipefail

BIN="${BIN:-./bin}"
RUNS="${DS_RUNS:-leader follower}"
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
	leader) id=1 ;;
	follower) id=2 ;;
	*) echo "conformance: unknown run $run (leader or follower)" >&2; exit 2 ;;
	esac
	echo "conformance: the suite through node $id (the $run of every stream)"
	(cd "$here/conformance" && DS_BASE_URL="http://127.0.0.1:$(port "$id" 2)" DS_LONG_POLL_TIMEOUT_MS=20000 \
		npx vitest run --config vitest.config.mjs conformance.test.mjs) || status=$?
done
exit $status
