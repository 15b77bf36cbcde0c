#!/usr/bin/env bash
# A one-minute tour of gostream: starts one node in the background on a
# temporary data directory, creates a topic, produces keyed events, reads
# them back, replays a partition, then stops the node and removes the data.
# It uses the docs/cli.md ports (RPC 9400, gossip 9401, HTTP 9402) when they are
# free and three free ports otherwise. `make demo` builds and runs it.
set -euo pipefail

cd "$(dirname "$0")/.."
BIN="${BIN:-./bin}"
TOPIC=demo-events

for b in gostream-node gostream-ctl; do
	if [ ! -x "$BIN/$b" ]; then
		echo "demo: $BIN/$b is missing; run 'make build' first" >&2
		exit 1
	fi
done

if [ -t 1 ]; then
	bold=$'\033[1m' dim=$'\033[2m' reset=$'\033[0m'
else
	bold='' dim='' reset=''
fi
heading() { printf '\n%s== %s%s\n' "$bold" "$*" "$reset"; }
note() { printf '%s%s%s\n' "$dim" "$*" "$reset"; }
indent() { sed "s/^./    &/"; }

# port_free PORT: nothing accepts TCP connections on it.
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
base=9400
if ! { port_free 9400 && port_free 9401 && port_free 9402; }; then
	found=0
	for _ in $(seq 100); do
		base=$((20000 + (RANDOM % 4000) * 10))
		if port_free "$base" && port_free $((base + 1)) && port_free $((base + 2)); then
			found=1
			break
		fi
	done
	if [ "$found" = 0 ]; then
		echo "demo: found no three free ports" >&2
		exit 1
	fi
fi
rpc="127.0.0.1:$base" gossip="127.0.0.1:$((base + 1))" http="127.0.0.1:$((base + 2))"

data="$(mktemp -d "${TMPDIR:-/tmp}/gostream-demo.XXXXXX")"
node_pid=''
cleanup() {
	if [ -n "$node_pid" ] && kill -0 "$node_pid" 2>/dev/null; then
		kill -TERM "$node_pid" 2>/dev/null || true
		wait "$node_pid" 2>/dev/null || true
	fi
	rm -rf "$data"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ctl() { "$BIN/gostream-ctl" --bootstrap "$rpc" "$@"; }

heading "Starting a node"
"$BIN/gostream-node" --id 1 --data-dir "$data/node1" \
	--listen "$rpc" --gossip "$gossip" --http "$http" >"$data/node1.log" 2>&1 &
node_pid=$!
deadline=$((SECONDS + 30))
until ctl health --http "$http" >/dev/null 2>&1; do
	if ! kill -0 "$node_pid" 2>/dev/null || [ "$SECONDS" -ge "$deadline" ]; then
		echo "demo: the node did not come up; its log:" >&2
		cat "$data/node1.log" >&2
		exit 1
	fi
	sleep 0.1
done
note "node 1 (pid $node_pid): RPC $rpc, HTTP $http, data in $data"
ctl cluster status | indent

heading "Creating topic $TOPIC with 4 partitions"
ctl topic create "$TOPIC" --partitions 4 | indent

heading "Producing 20 events of 5 users, keyed by user id"
note "gostream-ctl produce $TOPIC --key USER VALUE  ->  topic/partition@offset (value 1)"
for n in $(seq 1 20); do
	user="user-$(((n - 1) % 5 + 1))"
	where="$(ctl produce "$TOPIC" --key "$user" "{\"user\":\"$user\",\"event\":$n}")"
	where="${where% (value *}" # one VALUE: its number says nothing here
	printf '%-7s event %2d  ->  %s\n' "$user" "$n" "$where" | indent
	if [ "$user" = user-1 ]; then
		replay="${where#*/}" # demo-events/3@0 -> 3@0
		replay="${replay%@*}"
	fi
done

heading "Reading every partition from offset 0"
note "gostream-ctl consume $TOPIC --from-beginning"
records="$(ctl consume "$TOPIC" --from-beginning)"
printf '%s\n' "$records" | indent

heading "Each user's events are in one partition, in the order they were sent"
note "a key's partition is SHA-256(key) mod 4, the same in every process and release"
printf '%s\n' "$records" | awk -F'\t' '
	NR == 1 { next } # the header: PARTITION OFFSET KEY VALUE
	{
		match($4, /"event":[0-9]+/)
		ev = substr($4, RSTART + 8, RLENGTH - 8)
		if (!($3 in part)) { part[$3] = $1 } else if (part[$3] != $1) { part[$3] = part[$3] " and " $1 }
		events[$3] = events[$3] " " ev
		offs[$3] = offs[$3] " " $2
		used[$1] = 1
	}
	END {
		for (u in part) printf "%s  partition %s  offsets%s  events%s\n", u, part[u], offs[u], events[u]
		for (p = 0; p < 4; p++) if (!(p in used)) printf "~ partition %d: no events, none of these user ids hashes to it\n", p
	}' | sort | sed 's/^~ //' | indent

heading "Replaying partition $replay (user-1's) from offset 0"
note "gostream-ctl consume $TOPIC --partition $replay --offset 0"
ctl consume "$TOPIC" --partition "$replay" --offset 0 | indent

heading "Topic $TOPIC"
ctl topic describe "$TOPIC" | indent

heading "Stopping the node"
kill -TERM "$node_pid"
wait "$node_pid" || true
node_pid=''
note "stopped; $data is removed on exit"
