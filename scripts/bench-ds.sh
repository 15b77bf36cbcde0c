#!/usr/bin/env bash
# Runs gostream's Durable Streams server and the reference server side by
# side on this machine, in one run, and prints both, their ratios and
# whether each target is met. `make bench-ds` builds the binaries
# (gostream-node, gostream-ctl and scripts/dsbench) and runs this;
# docs/benchmarks.md says what each figure means.
#
#   ours:      three gostream-nodes, every stream replicated to all three
#              (--ds-replication-factor 3); an append is acknowledged once
#              it is on the three replicas' disks. The controller spreads
#              the streams' leaders over the nodes, so before each run the
#              script creates the run's stream, asks which node leads it,
#              and by default sends the run through another node (the
#              lowest-numbered follower), which forwards every request to
#              the leader and serves SSE itself from forwarded long-polls.
#              Each run's line says which node led and which was used.
#   reference: @durable-streams/server 0.3.7 (conformance/node_modules),
#              file-backed (node conformance/reference-server.mjs PORT DIR):
#              one process, appends to one stream serialized, each written
#              and fdatasynced before the next.
#
# Measurements, each a fresh stream, run RUNS times interleaved (append on
# ours, append on the reference, sse on ours, sse on the reference); the
# table compares medians:
#
#   append  CLIENTS clients, one connection each, POST SIZE-byte bodies to
#           one application/octet-stream stream for DURATION: appends/s
#           (target: ours >= 3x the reference's), MB/s, POST p50/p99.
#   sse     one reader on GET ?offset=now&live=sse of a text/plain stream;
#           SSE_COUNT appends one at a time, each sent once the one before
#           was delivered and SSE_GAP has passed: p50, p99, max from the
#           start of the POST to the SSE data event (targets: ours p50 and
#           p99 <= the reference's).
#
# Settings, all environment variables:
#
#   RUNS=3          rounds, each all four runs
#   CLIENTS=16      concurrent appending clients
#   DURATION=10s    length of one append run
#   SIZE=1024       bytes per appended body
#   SSE_COUNT=500   messages of one sse run
#   SSE_GAP=5ms     pause after a delivery before the next append
#   VIA=follower    the node our runs go through: follower (a node that
#                   does not lead the run's stream) or leader
#   KEEP=1          keep the temporary directory (logs, data)
#   LOG_LEVEL=warn  the nodes' --log-level
#
# Ports: 9700-9722 for the nodes (node N: RPC 9700 + 10(N-1), gossip +1,
# HTTP +2, as scripts/conformance.sh does on 96xx) and 9790 for the
# reference, all on 127.0.0.1; a port in use fails the run. Data in a
# temporary directory (under the repository if $TMPDIR is a tmpfs, where
# fsync costs nothing), the same filesystem for both servers. Everything
# started is stopped when the script exits. Exit status: 0 all targets
# met, 1 a target missed, 2 the run failed.
set -euo pipefail
cd "$(dirname "$0")/.."
SCRIPT=bench-ds
. scripts/bench-lib.sh

BIN="${BIN:-bin}"
RUNS="${RUNS:-3}"
CLIENTS="${CLIENTS:-16}"
DURATION="${DURATION:-10s}"
SIZE="${SIZE:-1024}"
SSE_COUNT="${SSE_COUNT:-500}"
SSE_GAP="${SSE_GAP:-5ms}"
VIA="${VIA:-follower}"
REF_PORT=9790

for b in gostream-node gostream-ctl dsbench; do
	[ -x "$BIN/$b" ] || die "$BIN/$b is missing; run 'make bench-ds', which builds it"
done
command -v node >/dev/null 2>&1 || die "node (Node.js) is needed for the reference server"
case $VIA in
follower | leader) ;;
*) die "VIA: follower or leader, not $VIA" ;;
esac
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "RUNS: a positive integer, not $RUNS"

if [ ! -d conformance/node_modules ]; then
	(cd conformance && npm ci --no-audit --no-fund) || die "npm ci in conformance/ failed"
fi
ref_version="$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' conformance/node_modules/@durable-streams/server/package.json | head -1)"

# ---------------------------------------------------------------- work dir

make_work
gs_srv=() ref_srv=() # the running servers of each side, in bg_pids too

# check_servers: dies, after the last lines of their logs, if a server has
# exited.
check_servers() {
	local pid
	for pid in "${bg_pids[@]}"; do
		if ! kill -0 "$pid" 2>/dev/null; then
			tail -n 20 "$WORK"/node*.log "$WORK"/reference.log 2>/dev/null >&2 || true
			die "process $pid exited early (logs above)"
		fi
	done
}

# ---------------------------------------------------------------- ports

# port N K: node N's RPC (K=0), gossip (1) and HTTP (2) port.
port() { echo $((9700 + 10 * ($1 - 1) + $2)); }
for p in $(port 1 0) $(port 1 1) $(port 1 2) $(port 2 0) $(port 2 1) $(port 2 2) \
	$(port 3 0) $(port 3 1) $(port 3 2) "$REF_PORT"; do
	port_in_use "$p" && die "port $p is in use (a gostream-node or reference server left from another run?)"
done

# ---------------------------------------------------------------- helpers

BOOTSTRAP="127.0.0.1:$(port 1 0)"
ctl() { "$BIN/gostream-ctl" --bootstrap "$BOOTSTRAP" --timeout 30s "$@"; }

fmt_mb() { awk -v v="$1" 'BEGIN { printf "%.2f", v }'; }

seq_no=0
mkdir -p "$WORK/logs"

# bench gs|ref MODE STREAM ARGS...: one dsbench run against that server
# (ours through node VIA_ID) on the stream STREAM, fresh or just made by
# gs_stream; sets RESULT to its JSON and CPU_SRV to the CPU seconds the
# server processes spent meanwhile.
bench() {
	local side=$1 mode=$2 stream=$3 base s0
	local -a srv
	shift 3
	if [ "$side" = gs ]; then
		base="http://127.0.0.1:$(port "$VIA_ID" 2)/v1/stream"
		srv=("${gs_srv[@]}")
	else
		base="http://127.0.0.1:$REF_PORT/v1/stream"
		srv=("${ref_srv[@]}")
	fi
	seq_no=$((seq_no + 1))
	s0="$(cpu_ticks "${srv[@]}")"
	run_logged "$WORK/logs/$seq_no" "$BIN/dsbench" -base "$base" -stream "$stream" -json "$@" "$mode"
	CPU_SRV="$(awk -v a="$s0" -v b="$(cpu_ticks "${srv[@]}")" -v k="$clk_tck" 'BEGIN { print (b - a) / k }')"
	RESULT="$(cat "$WORK/logs/$seq_no.out")"
	check_servers
}
append_args=(-clients "$CLIENTS" -size "$SIZE" -duration "$DURATION")
sse_args=(-count "$SSE_COUNT" -gap "$SSE_GAP")

# leader_of STREAM: sets LEADER to the node that leads our stream STREAM;
# a stream of fewer than three replicas fails the run.
leader_of() {
	local topic json rf
	topic="__ds.$(printf '%s' "$1" | sha256sum | cut -c1-32)"
	json="$(ctl topic describe "$topic" -o json 2>"$WORK/logs/describe.err")" ||
		die "cannot describe $topic (stream $1): $(cat "$WORK/logs/describe.err")"
	LEADER="$(sed -n 's/.*"leader":\([0-9]*\).*/\1/p' <<<"$json" | head -1)"
	rf="$(sed -n 's/.*"replication_factor":\([0-9]*\).*/\1/p' <<<"$json" | head -1)"
	[ "$rf" = 3 ] || die "stream $1 ($topic) has replication factor ${rf:-?}, not 3"
	[ -n "$LEADER" ] || die "stream $1 ($topic) has no leader: $json"
}

# gs_stream MODE STREAM: creates STREAM on our cluster as dsbench MODE
# would (through node 1), and sets VIA_ID to the node our run on it goes
# through (VIA: a follower, the lowest-numbered, or the leader) and
# STREAM_LEADER to its leader.
gs_stream() {
	local id
	seq_no=$((seq_no + 1))
	run_logged "$WORK/logs/$seq_no" "$BIN/dsbench" -base "http://127.0.0.1:$(port 1 2)/v1/stream" -stream "$2" -create-only "$1"
	leader_of "$2"
	STREAM_LEADER=$LEADER
	VIA_ID=$LEADER
	if [ "$VIA" = follower ]; then
		for id in 1 2 3; do
			if [ "$id" != "$LEADER" ]; then
				VIA_ID=$id
				break
			fi
		done
	fi
}

# gs_check STREAM: sets LEADER_NOTE, for the run's line, to which node led
# STREAM and which one the run went through, and warns if the leader
# changed during the run.
leader_moved=0
gs_check() {
	leader_of "$1"
	LEADER_NOTE="; led by node $STREAM_LEADER, through node $VIA_ID"
	if [ "$LEADER" != "$STREAM_LEADER" ]; then
		leader_moved=1
		LEADER_NOTE+="; WARNING: led by node $LEADER after the run"
	fi
}

# ---------------------------------------------------------------- servers

for id in 1 2 3; do
	join=()
	for o in 1 2 3; do [ "$o" = "$id" ] || join+=("127.0.0.1:$(port "$o" 1)"); done
	mkdir -p "$WORK/node$id"
	"$BIN/gostream-node" --id "$id" --data-dir "$WORK/node$id" \
		--listen "127.0.0.1:$(port "$id" 0)" --gossip "127.0.0.1:$(port "$id" 1)" --http "127.0.0.1:$(port "$id" 2)" \
		--join "$(IFS=,; echo "${join[*]}")" --controller "1@127.0.0.1:$(port 1 0)" \
		--ds-replication-factor 3 --log-level "${LOG_LEVEL:-warn}" \
		>"$WORK/node$id.log" 2>&1 </dev/null &
	bg_pids+=("$!")
	gs_srv+=("$!")
done
mkdir -p "$WORK/reference"
node conformance/reference-server.mjs "$REF_PORT" "$WORK/reference" >"$WORK/reference.log" 2>&1 </dev/null &
bg_pids+=("$!")
ref_srv+=("$!")

# Ready when the controller has all three brokers, every node answers
# health, and the reference server has printed its URL.
deadline=$((SECONDS + 60))
until "$BIN/gostream-ctl" --bootstrap "$BOOTSTRAP" --timeout 2s -o json cluster status 2>/dev/null | grep -o '"registered":"registered"' | wc -l | grep -qx 3; do
	check_servers
	[ "$SECONDS" -lt "$deadline" ] || die "the three brokers did not register within 60 s"
	sleep 0.2
done
for id in 1 2 3; do
	until "$BIN/gostream-ctl" health --http "127.0.0.1:$(port "$id" 2)" --timeout 1s >/dev/null 2>&1; do
		check_servers
		[ "$SECONDS" -lt "$deadline" ] || die "node $id is not healthy after 60 s"
		sleep 0.2
	done
done
until grep -q "^http://" "$WORK/reference.log"; do
	check_servers
	[ "$SECONDS" -lt "$deadline" ] || die "the reference server did not start within 60 s"
	sleep 0.2
done

# ---------------------------------------------------------------- runs

node_fs="$(df -P "$WORK" | awk 'NR == 2 { print $1 }') ($(fstype "$WORK"))"
started=$SECONDS
cat <<HEAD
bench-ds: gostream $(git describe --always --dirty 2>/dev/null || echo dev) vs @durable-streams/server $ref_version (file-backed, Node $(node --version))
  ours: 3 gostream-nodes, RF 3, on 127.0.0.1:$(port 1 2),$(port 2 2),$(port 3 2); each run through a $VIA of its stream; reference: 127.0.0.1:$REF_PORT
  machine: $(nproc) cores, $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || uname -m); before starting: $(busy)
  NOTE: a small shared machine is noisy; only the ratios of this run mean anything.
  data: $WORK on $node_fs, for both servers
  runs: $RUNS rounds, interleaved; append: $CLIENTS clients x $SIZE B for $DURATION; sse: $SSE_COUNT messages, gap $SSE_GAP
HEAD

echo "-- warm-up (not counted): append 2s and sse 50 messages on each"
tag="$$-$RANDOM"
gs_stream append "bench-ds/warmup-append-$tag"
bench gs append "bench-ds/warmup-append-$tag" -clients "$CLIENTS" -size "$SIZE" -duration 2s
bench ref append "bench-ds/warmup-append-$tag" -clients "$CLIENTS" -size "$SIZE" -duration 2s
gs_stream sse "bench-ds/warmup-sse-$tag"
bench gs sse "bench-ds/warmup-sse-$tag" -count 50 -gap "$SSE_GAP"
bench ref sse "bench-ds/warmup-sse-$tag" -count 50 -gap "$SSE_GAP"

append_line() {
	local n
	n="$(json_num appends <<<"$RESULT")"
	add "append.$1.rate" "$(json_num appends_per_sec <<<"$RESULT")"
	add "append.$1.mb" "$(json_num mb_per_sec <<<"$RESULT")"
	add "append.$1.p50" "$(json_num p50_ms <<<"$RESULT")"
	add "append.$1.p99" "$(json_num p99_ms <<<"$RESULT")"
	add "append.$1.cpu" "$(awk -v c="$CPU_SRV" -v n="$n" 'BEGIN { printf "%.0f", c * 1e6 / n }')"
	say "run $r" "$2" "append: $(fmt_rate "$(json_num appends_per_sec <<<"$RESULT")") appends/s, $(fmt_mb "$(json_num mb_per_sec <<<"$RESULT")") MB/s, POST p50 $(fmt_ms "$(json_num p50_ms <<<"$RESULT")") ms, p99 $(fmt_ms "$(json_num p99_ms <<<"$RESULT")") ms; server CPU $(awk -v c="$CPU_SRV" -v n="$n" 'BEGIN { printf "%.0f", c * 1e6 / n }') us/append$3"
}
sse_line() {
	add "sse.$1.p50" "$(json_num p50_ms <<<"$RESULT")"
	add "sse.$1.p99" "$(json_num p99_ms <<<"$RESULT")"
	add "sse.$1.max" "$(json_num max_ms <<<"$RESULT")"
	add "sse.$1.post" "$(json_num append_p50_ms <<<"$RESULT")"
	say "run $r" "$2" "sse: append to delivery p50 $(fmt_ms "$(json_num p50_ms <<<"$RESULT")") ms, p99 $(fmt_ms "$(json_num p99_ms <<<"$RESULT")") ms, max $(fmt_ms "$(json_num max_ms <<<"$RESULT")") ms; POST p50 $(fmt_ms "$(json_num append_p50_ms <<<"$RESULT")") ms; $(json_num connections <<<"$RESULT") connection(s)$3"
}

echo "-- rounds: append ours, append reference, sse ours, sse reference"
for r in $(seq "$RUNS"); do
	s="bench-ds/append-r$r-$tag"
	gs_stream append "$s"
	bench gs append "$s" "${append_args[@]}"
	gs_check "$s"
	append_line gs gostream "$LEADER_NOTE"
	bench ref append "$s" "${append_args[@]}"
	append_line ref reference ""
	s="bench-ds/sse-r$r-$tag"
	gs_stream sse "$s"
	bench gs sse "$s" "${sse_args[@]}"
	gs_check "$s"
	sse_line gs gostream "$LEADER_NOTE"
	bench ref sse "$s" "${sse_args[@]}"
	sse_line ref reference ""
done
stop_all

# ---------------------------------------------------------------- table

missed=0
# row METRIC UNIT OURS BASE MODE TARGET: MODE ge means ours/base >= TARGET,
# le means ours/base <= TARGET, ref means no target.
row() {
	local metric=$1 unit=$2 ours=$3 base=$4 mode=$5 target=$6 ratio verdict tgt
	ratio="$(awk -v a="$ours" -v b="$base" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')"
	case $mode in
	ge)
		tgt=">= ${target}x"
		verdict="$(awk -v r="$ours" -v b="$base" -v t="$target" 'BEGIN { print (b > 0 && r / b >= t) ? "MET" : "MISSED" }')"
		;;
	le)
		tgt="<= ${target}x"
		verdict="$(awk -v r="$ours" -v b="$base" -v t="$target" 'BEGIN { print (b > 0 && r / b <= t) ? "MET" : "MISSED" }')"
		;;
	ref)
		tgt="(reference)"
		verdict="-"
		;;
	esac
	[ "$verdict" = MISSED ] && missed=1
	case $unit in
	ms) ours="$(fmt_ms "$ours") ms" base="$(fmt_ms "$base") ms" ;;
	us) ours="$(fmt_rate "$ours") us" base="$(fmt_rate "$base") us" ;;
	mb) ours="$(fmt_mb "$ours") MB/s" base="$(fmt_mb "$base") MB/s" ;;
	*) ours="$(fmt_rate "$ours")/s" base="$(fmt_rate "$base")/s" ;;
	esac
	printf '%-44s %14s %14s %7s %12s  %s\n' "$metric" "$ours" "$base" "${ratio}x" "$tgt" "$verdict"
}

echo
echo "== Results: medians of $RUNS interleaved runs; ratio = gostream / reference ($(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, shared and noisy)"
printf '%-44s %14s %14s %7s %12s  %s\n' metric gostream reference ratio target result
row "append, $CLIENTS clients x $SIZE B (appends/s)" rate "$(median append.gs.rate)" "$(median append.ref.rate)" ge 3
row "append throughput (MB/s)" mb "$(median append.gs.mb)" "$(median append.ref.mb)" ref 0
row "append POST p50" ms "$(median append.gs.p50)" "$(median append.ref.p50)" ref 0
row "append POST p99" ms "$(median append.gs.p99)" "$(median append.ref.p99)" ref 0
row "append server CPU per append (us)" us "$(median append.gs.cpu)" "$(median append.ref.cpu)" ref 0
row "sse append-to-delivery p50" ms "$(median sse.gs.p50)" "$(median sse.ref.p50)" le 1
row "sse append-to-delivery p99" ms "$(median sse.gs.p99)" "$(median sse.ref.p99)" le 1
row "sse append-to-delivery max" ms "$(median sse.gs.max)" "$(median sse.ref.max)" ref 0
row "sse POST p50 (one writer)" ms "$(median sse.gs.post)" "$(median sse.ref.post)" ref 0
echo "ours: 3 nodes, RF 3, every run through a $VIA of its stream (VIA=$VIA); server CPU: the 3 nodes' user + system time over the run, the reference's process"
if [ "$leader_moved" = 1 ]; then
	echo "bench-ds: WARNING: the leader of some of our streams changed during their run (see the run lines)"
fi
echo "at the end: $(busy); took $((SECONDS - started)) s"
if [ "$missed" = 1 ]; then
	echo "bench-ds: at least one target MISSED"
	exit 1
fi
echo "bench-ds: every target MET"
