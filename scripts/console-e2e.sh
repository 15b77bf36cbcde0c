#!/usr/bin/env bash
# make console-test: the web console (docs/console.md) in a real browser,
# Debian's headless Chromium driven by playwright-core (console/e2e,
# pinned by its lock file, npm ci if needed), against two three-node
# clusters this script starts on free loopback ports with the flags of
# `make run` (scripts/local-cluster.sh), data in a temporary directory,
# after building the binaries (make build):
#
#   1. security off, seeded with topics, records with headers (one
#      holding markup, which must be shown and never run), a record kcat
#      produced to a Kafka listener, a Kafka consumer group (kcat -G) and a
#      native one (gostream-ctl consume --group) with commits, and a
#      Durable Streams stream; then console/e2e/plain.test.mjs: every
#      screen, the live tail, search, produce, reset-offsets.
#   2. security on, as `make run SECURE=1` (TLS, a development CA, tokens):
#      the superuser admin and a principal viewer that may only describe;
#      then console/e2e/secure.test.mjs: nothing shown without a token,
#      the API 401, viewer refused the ACL form.
#
# Screenshots of every screen (1280x800) go to the run's temporary
# directory (kept with KEEP=1); SCREENSHOTS=docs/console refreshes the
# ones the documentation shows, SCREENSHOTS= empty makes none. Needs chromium (CHROMIUM,
# default /usr/bin/chromium), kcat (KCAT), Node.js and npm. KEEP=1 keeps
# the data and the nodes' logs. Exit status: 0 when both runs passed.
set -euo pipefail

cd "$(dirname "$0")/.."
root=$PWD
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"
KCAT="${KCAT:-kcat}"

# The binaries, built now: the page is embedded in gostream-node, so a
# binary older than console/web would test another page.
BIN="${BIN:-./bin}"
make --no-print-directory build BIN="$BIN"
BIN=$(cd "$BIN" && pwd)
[ -x "$CHROMIUM" ] || { echo "console-e2e: no Chromium at $CHROMIUM; install it (apt-get install chromium) or set CHROMIUM" >&2; exit 1; }
command -v "$KCAT" >/dev/null 2>&1 || { echo "console-e2e: kcat not found; install it (apt-get install kcat) or set KCAT" >&2; exit 1; }
command -v node >/dev/null 2>&1 || { echo "console-e2e: Node.js not found; install nodejs and npm" >&2; exit 1; }
if [ ! -e console/e2e/node_modules/playwright-core/package.json ]; then
	echo "npm ci --prefix console/e2e"
	npm ci --prefix console/e2e --no-audit --no-fund
fi

# shellcheck source=scripts/local-cluster.sh
. scripts/local-cluster.sh
# This script's gostream-ctl calls go to its own clusters only, whatever
# the caller's environment says.
unset GOSTREAM_TLS_CA GOSTREAM_TOKEN_FILE GOSTREAM_TOKEN GOSTREAM_BOOTSTRAP

dir=$(mktemp -d "${TMPDIR:-/tmp}/gostream-console-e2e.XXXXXX")
SCREENSHOTS="${SCREENSHOTS-$dir/screenshots}"
case "$SCREENSHOTS" in "" | /*) ;; *) SCREENSHOTS="$root/$SCREENSHOTS" ;; esac
export CHROMIUM SCREENSHOTS
pids=()    # the nodes of the cluster running
members=() # the group members started beside them
status=0

# end PID...: SIGTERM to each, then a wait for each.
end() {
	local pid
	for pid in "$@"; do kill -TERM "$pid" 2>/dev/null || true; done
	for pid in "$@"; do wait "$pid" 2>/dev/null || true; done
}
# stop_nodes: the members first (they leave their groups while the nodes
# still answer), then the nodes.
stop_nodes() {
	end ${members[@]+"${members[@]}"}
	end ${pids[@]+"${pids[@]}"}
	members=() pids=()
}
cleanup() {
	local rc=$?
	stop_nodes
	if [ -n "${KEEP:-}" ] || [ "$rc" != 0 ]; then
		echo "console-e2e: data and node logs kept in $dir"
	else
		rm -rf "$dir"
	fi
}
trap cleanup EXIT

# pick_port_base: a PORT_BASE whose twelve ports are free, away from the
# default cluster's and the other scripts' (9400-9722).
pick_port_base() {
	local base
	for base in $(seq 24000 100 44000); do
		PORT_BASE=$base
		if ports_free console-e2e "${NODES[@]}" 2>/dev/null; then
			return 0
		fi
	done
	echo "console-e2e: found no free ports between 24000 and 44000" >&2
	return 1
}

ctl() { "$BIN/gostream-ctl" "$@"; }

# start_cluster NAME: three nodes with the flags of `make run` (SECURE
# as set), data and logs in $dir/NAME; returns once all three are
# registered and a controller is active.
start_cluster() {
	local name=$1 id deadline
	pick_port_base
	DATA="$dir/$name"
	SECURE_DIR="$DATA/secure"
	mkdir -p "$DATA"
	GOSTREAM_BOOTSTRAP=$(bootstrap)
	export GOSTREAM_BOOTSTRAP
	if secure; then
		secure_setup
		# The second principal, before the nodes read the tokens file.
		ctl token create --principal viewer --tokens-file "$SECURE_DIR/tokens" --out "$SECURE_DIR/viewer.token" >/dev/null
	fi
	for id in "${NODES[@]}"; do
		node_args "$id"
		mkdir -p "$DATA/node$id"
		"$BIN/gostream-node" "${NODE_ARGS[@]}" --log-level "${LOG_LEVEL:-warn}" >"$DATA/node$id.log" 2>&1 </dev/null &
		pids+=("$!")
	done
	deadline=$((SECONDS + 60))
	for id in "${NODES[@]}"; do
		until ctl health --http "127.0.0.1:$(node_port "$id" 2)" --timeout 1s >/dev/null 2>&1; do
			wait_or_fail "$deadline" "node $id did not answer its health check"
		done
	done
	until [ "$(ctl broker list -o json --timeout 1s 2>/dev/null | grep -o '"registered":"registered"' | wc -l)" -ge 3 ]; do
		wait_or_fail "$deadline" "not every node registered"
	done
	until ctl controller status -o json --timeout 1s 2>/dev/null | grep -q '"active":[1-9]'; do
		wait_or_fail "$deadline" "no controller became active"
	done
	echo "console-e2e: $name cluster up, HTTP on 127.0.0.1:$(node_port 1 2), $(node_port 2 2), $(node_port 3 2)"
}

wait_or_fail() {
	if [ "$SECONDS" -gt "$1" ]; then
		echo "console-e2e: $2 within 60 s; the nodes' last lines:" >&2
		tail -n 20 "$DATA"/node*.log >&2
		exit 1
	fi
	sleep 0.2
}

kafka() { echo "127.0.0.1:$(node_port 1 3)"; }

# seed: what the plain cluster's screens show.
seed() {
	local i http
	http="127.0.0.1:$(node_port 1 2)"
	ctl topic create orders --partitions 3 --replication-factor 3 >/dev/null
	ctl topic create payments --partitions 2 --replication-factor 3 >/dev/null
	ctl topic create audit-log --partitions 1 --replication-factor 2 >/dev/null
	for i in 1 2 3 4 5 6; do
		ctl produce orders --key "customer-$i" --header "trace-id=trace-$i" --header source=ctl \
			"{\"order\":$i,\"customer\":\"customer-$i\",\"total\":$((i * 7)).5,\"items\":[\"book\",\"pen\"]}" >/dev/null
	done
	# The record the search finds by its header alone.
	ctl produce orders --key customer-9 --header trace-id=needle-7f3a --header source=ctl '{"order":9,"note":"found by its header"}' >/dev/null
	# A value of markup: the page must show it as text and never run it.
	ctl produce orders --key markup '<img src=x onerror="window.__pwned=1"><script>window.__pwned=1</script>' >/dev/null
	printf 'payment-%s\n' 1 2 3 4 | ctl produce payments --key card >/dev/null
	printf 'user %s logged in\n' 1 2 3 | ctl produce audit-log >/dev/null
	# A record through the Kafka listener.
	printf 'kcat-key:{"from":"kcat","order":7}\n' | "$KCAT" -b "$(kafka)" -P -t orders -K: -H source=kcat
	# A Kafka consumer group with commits, and a native one.
	timeout 30 "$KCAT" -b "$(kafka)" -G kafka-readers -X auto.offset.reset=earliest -X enable.auto.commit=true \
		-X auto.commit.interval.ms=100 -e -q orders >/dev/null
	ctl consume orders --group native-readers >/dev/null
	ctl consume payments --group native-readers >/dev/null
	# Two groups with a member while the tests run (stopped with the
	# nodes): a Kafka one (kcat) and a native one.
	"$KCAT" -b "$(kafka)" -G kafka-live -X auto.offset.reset=earliest -q orders >/dev/null 2>&1 </dev/null &
	members+=("$!")
	ctl consume payments --group live-readers --follow >/dev/null 2>&1 </dev/null &
	members+=("$!")
	# Lag for both groups: records after their commits.
	for i in 10 11 12; do
		ctl produce orders --key "customer-$i" --header "trace-id=trace-$i" "{\"order\":$i}" >/dev/null
	done
	# Events of the audit trail (History): ACLs, which the security
	# screen lists too, and a topic grown by a partition.
	ctl acl add --principal alice --topic orders --operation read --operation write >/dev/null
	ctl acl add --principal '*' --group native- --prefix --operation read >/dev/null
	ctl topic alter audit-log --partitions 2 >/dev/null
	# A Durable Streams stream.
	curl -fsS -o /dev/null -X PUT -H 'Content-Type: application/json' "http://$http/v1/stream/demo/clicks"
	curl -fsS -o /dev/null -X POST -H 'Content-Type: application/json' -d '[{"page":"/"},{"page":"/pricing"}]' "http://$http/v1/stream/demo/clicks"
}

run_tests() {
	local file=$1
	shift
	(cd console/e2e && env "$@" node --test --test-reporter=spec "$file")
}

# 1. Security off.
SECURE=
start_cluster plain
seed
echo "console-e2e: the plain cluster is seeded; the browser tests:"
run_tests plain.test.mjs \
	CONSOLE_URL="http://127.0.0.1:$(node_port 1 2)/ui/" \
	KAFKA_BROKER="$(kafka)" KCAT="$KCAT" GOSTREAM_CTL="$BIN/gostream-ctl" GOSTREAM_BOOTSTRAP="$GOSTREAM_BOOTSTRAP" || status=1
stop_nodes

# 2. Security on.
SECURE=1
start_cluster secure
ctl acl add --principal viewer --cluster --operation describe >/dev/null
ctl acl add --principal viewer --topic '*' --operation describe >/dev/null
ctl acl add --principal viewer --group '*' --operation describe >/dev/null
ctl topic create orders --partitions 3 --replication-factor 3 >/dev/null
ctl produce orders --key secret 'a record nobody sees without a token' >/dev/null
ctl consume orders --group native-readers >/dev/null
echo "console-e2e: the secure cluster is ready; the browser tests:"
run_tests secure.test.mjs \
	CONSOLE_URL="https://127.0.0.1:$(node_port 1 2)/ui/" \
	ADMIN_TOKEN="$(cat "$SECURE_DIR/admin.token")" VIEWER_TOKEN="$(cat "$SECURE_DIR/viewer.token")" || status=1
stop_nodes
exit "$status"
