#!/usr/bin/env bash
# Times an operator failover of a whole broker against plain metadata
# changes, measured in the same run on the same cluster.
#
# Each run starts a fresh three-node cluster (node 1 the controller), creates
# a topic of PARTITIONS partitions with replication factor 3, writes a few
# records to every partition, kills broker 2 with SIGKILL and times
#
#   gostream-ctl failover --broker 2   fails over the partitions broker 2 led
#                                      (about a third) and drops it from the
#                                      active set of the others
#
# and then, on the same cluster with broker 2 still down,
#
#   gostream-ctl topic seal ...        one metadata change (a topic created
#                                      before the kill)
#   gostream-ctl topic create ... --partitions 1 --replication-factor 3
#   gostream-ctl topic list            no change: a ctl process, a bootstrap
#                                      and one request, the floor of all
#                                      the above
#
# Each run does this twice, on a cluster with a single controller (node 1)
# and on one whose three nodes are the candidates of the replicated
# controller (docs/controller-raft.md; node 1 made the active one with
# `controller transfer` before the kill), so that a metadata change with
# three candidates is compared with one in the same run. On the latter it
# finally kills the active controller with SIGKILL and times how long
# until a `gostream-ctl topic seal` succeeds (the new active controller
# elected and taken over, and the command found it).
#
# Afterwards it restarts broker 2, times `gostream-ctl recover --broker 2`
# (every replica of broker 2 copied, verified and put back) and checks
# `gostream-ctl verify`. A fresh cluster per run keeps the runs
# alike: after a failover broker 2 leads nothing. Every figure is the wall
# time of one gostream-ctl process; the summary gives medians and the
# failover's ratio to each metadata change of the same run.
#
# Settings, all environment variables:
#
#   RUNS=3          runs (fresh clusters)
#   PARTITIONS=2000 partitions of the topic (the targets are for 2,000)
#   RECORDS=3       records per partition before the kill
#   KEEP=1          keep the temporary directory (logs, data)
#
# Everything listens on 127.0.0.1 on free ports, keeps its data in a
# temporary directory (under the repository if $TMPDIR is a tmpfs, where
# fsync costs nothing) and is stopped when the script exits. Exit status:
# 0 done, 2 the run failed.
set -euo pipefail
cd "$(dirname "$0")/.."

GO="${GO:-go}"
RUNS="${RUNS:-3}"
PARTITIONS="${PARTITIONS:-2000}"
RECORDS="${RECORDS:-3}"

die() {
	echo "bench-failover: $*" >&2
	exit 2
}

# ---------------------------------------------------------------- work dir

fstype() { df -PT "$1" | awk 'NR == 2 { print $2 }'; }
tmp_parent="${TMPDIR:-/tmp}"
if [ "$(fstype "$tmp_parent")" = tmpfs ]; then
	tmp_parent="$PWD"
fi
WORK="$(mktemp -d "$tmp_parent/.bench-failover.XXXXXX")"
declare -A node_pid=()

# stop_all: SIGTERM to every node this script started, SIGKILL to any
# still running after 10 seconds.
stop_all() {
	local id pid deadline=$((SECONDS + 10))
	for pid in "${node_pid[@]}"; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for id in "${!node_pid[@]}"; do
		pid=${node_pid[$id]}
		while kill -0 "$pid" 2>/dev/null; do
			if [ "$SECONDS" -ge "$deadline" ]; then
				kill -KILL "$pid" 2>/dev/null || true
				break
			fi
			sleep 0.1
		done
		wait "$pid" 2>/dev/null || true
	done
	node_pid=()
}
cleanup() {
	stop_all
	if [ "${KEEP:-0}" = 1 ]; then
		echo "bench-failover: kept $WORK"
	else
		rm -rf "$WORK"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- build

BIN="$WORK/bin"
mkdir -p "$BIN"
echo "bench-failover: building gostream-node and gostream-ctl into $BIN"
"$GO" build -o "$BIN/gostream-node" ./cmd/node || die "cannot build ./cmd/node"
"$GO" build -o "$BIN/gostream-ctl" ./cmd/ctl || die "cannot build ./cmd/ctl"

# ---------------------------------------------------------------- ports

# free_port VAR: sets VAR to a loopback port with no TCP or UDP listener,
# below the usual ephemeral range and not handed out before in this run.
handed_out=" "
port_in_use() {
	if command -v ss >/dev/null 2>&1; then
		ss -Htuln "( sport = :$1 )" | grep -q .
	else
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
	fi
}
free_port() {
	local _port _try
	for _try in $(seq 500); do
		_port=$((20000 + RANDOM % 12000))
		if [[ $handed_out == *" $_port "* ]] || port_in_use "$_port"; then
			continue
		fi
		handed_out+="$_port "
		printf -v "$1" '%s' "$_port"
		return
	done
	die "no free port found"
}

# ---------------------------------------------------------------- helpers

ctl() { "$BIN/gostream-ctl" --bootstrap "$BOOTSTRAP" --timeout 120s "$@"; }

# values[KEY] holds the measurements of one series, space separated.
declare -A values
add() { values[$1]="${values[$1]:-} $2"; }
median() {
	# shellcheck disable=SC2086
	printf '%s\n' ${values[$1]:-} | sort -g | awk '{ a[NR] = $1 }
		END { if (NR == 0) print "nan"; else if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "nan" }'; }

# count PATTERN: how many times PATTERN occurs on stdin (0 is no error).
count() { { grep -o -- "$1" || true; } | wc -l; }

now_ns() { date +%s%N; }
ms_since() { awk -v a="$1" -v b="$(now_ns)" 'BEGIN { printf "%.1f", (b - a) / 1e6 }'; }

# timed KEY LOG CMD...: runs CMD with stdout to LOG.out and stderr to
# LOG.err, adds its wall time in ms to series KEY and sets MS; a failure
# shows both and fails the run.
timed() {
	local key=$1 log=$2 t0
	shift 2
	t0="$(now_ns)"
	if ! "$@" >"$log.out" 2>"$log.err"; then
		echo "bench-failover: failed: $*" >&2
		tail -n 20 "$log.out" "$log.err" >&2 || true
		exit 2
	fi
	MS="$(ms_since "$t0")"
	add "$key" "$MS"
}

# run_logged LOG CMD...: runs CMD untimed, as timed does.
run_logged() {
	local log=$1
	shift
	if ! "$@" >"$log.out" 2>"$log.err"; then
		echo "bench-failover: failed: $*" >&2
		tail -n 20 "$log.out" "$log.err" >&2 || true
		exit 2
	fi
}

check_alive() {
	local id
	for id in "${!node_pid[@]}"; do
		if ! kill -0 "${node_pid[$id]}" 2>/dev/null; then
			tail -n 20 "$DIR"/node*.log >&2 || true
			die "node $id (pid ${node_pid[$id]}) exited early (logs above)"
		fi
	done
}

# ---------------------------------------------------------------- cluster

declare -a rpc gossip http
# start_node I: starts node I of the current cluster (addresses fixed at
# setup, data under $DIR/nodeI) in the background.
start_node() {
	local i=$1
	mkdir -p "$DIR/node$i"
	"$BIN/gostream-node" --id "$i" --data-dir "$DIR/node$i" --listen "${rpc[$i]}" \
		--gossip "${gossip[$i]}" --http "${http[$i]}" \
		--controller "$CONTROLLER" --join "$JOIN" >>"$DIR/node$i.log" 2>&1 </dev/null &
	node_pid[$i]=$!
}

# wait_ready: every node healthy and registered with the controller.
wait_ready() {
	local deadline=$((SECONDS + 60)) i
	for i in 1 2 3; do
		until "$BIN/gostream-ctl" health --http "${http[$i]}" --timeout 1s >/dev/null 2>&1; do
			check_alive
			[ "$SECONDS" -lt "$deadline" ] || die "node $i not healthy after 60s"
			sleep 0.1
		done
	done
	until [ "$(ctl broker list -o json 2>/dev/null | count '"registered":"registered"')" -eq 3 ]; do
		check_alive
		[ "$SECONDS" -lt "$deadline" ] || die "not all 3 brokers registered with the controller after 60s"
		sleep 0.1
	done
}

# start_cluster DIR CANDIDATES: a fresh three-node cluster with its data
# under DIR, with a single controller (1) or three candidates (3).
start_cluster() {
	DIR=$1
	mkdir -p "$DIR"
	local i p
	for i in 1 2 3; do
		free_port p
		rpc[i]="127.0.0.1:$p"
		free_port p
		gossip[i]="127.0.0.1:$p"
		free_port p
		http[i]="127.0.0.1:$p"
	done
	JOIN="${gossip[1]},${gossip[2]},${gossip[3]}"
	BOOTSTRAP="${rpc[1]},${rpc[2]},${rpc[3]}"
	CONTROLLER="1@${rpc[1]}"
	if [ "$2" = 3 ]; then
		CONTROLLER="1@${rpc[1]},2@${rpc[2]},3@${rpc[3]}"
	fi
	for i in 1 2 3; do
		start_node "$i"
	done
	wait_ready
	if [ "$2" = 3 ]; then
		# Node 1 active, as with a single controller: broker 2's kill
		# then elects no controller.
		local deadline=$((SECONDS + 30))
		until ctl controller status -o json 2>/dev/null | grep -q '"active":1,'; do
			ctl controller transfer --to 1 >/dev/null 2>&1 || true
			[ "$SECONDS" -lt "$deadline" ] || die "candidate 1 never became the active controller"
			sleep 0.2
		done
	fi
}

# make_topic NAME PARTITIONS: creates a topic with RF 3 and waits until
# every node knows it.
make_topic() {
	local deadline=$((SECONDS + 60)) i
	run_logged "$DIR/create-$1" ctl topic create "$1" --partitions "$2" --replication-factor 3
	for i in 1 2 3; do
		until "$BIN/gostream-ctl" --bootstrap "${rpc[$i]}" topic describe "$1" -o json >/dev/null 2>&1; do
			[ "$SECONDS" -lt "$deadline" ] || die "node $i does not know topic $1 after 60s"
			sleep 0.05
		done
	done
}

# fill TOPIC: RECORDS records in every partition (eight gostream-ctl
# processes at a time), and a check that each partition's high watermark
# shows them.
fill_one() {
	local p=$2 deadline=$((SECONDS + 60))
	until seq "$RECORDS" | sed "s/^/p$p-/" | ctl produce "$1" --partition "$p" >/dev/null 2>"$DIR/produce-$p.err"; do
		[ "$SECONDS" -lt "$deadline" ] || { cat "$DIR/produce-$p.err" >&2; return 1; }
		sleep 0.1
	done
}
fill() {
	local p n pids=()
	for p in $(seq 0 $((PARTITIONS - 1))); do
		fill_one "$1" "$p" &
		pids+=($!)
		if [ "${#pids[@]}" -ge 8 ]; then
			wait "${pids[0]}" || die "cannot produce to $1"
			pids=("${pids[@]:1}")
		fi
	done
	for p in "${pids[@]}"; do
		wait "$p" || die "cannot produce to $1"
	done
	n="$(ctl topic describe "$1" -o json | count "\"high_watermark\":$RECORDS,")"
	[ "$n" -eq "$PARTITIONS" ] || die "$n of $PARTITIONS partitions of $1 hold $RECORDS records"
}

# ---------------------------------------------------------------- runs

echo "bench-failover: gostream $(git describe --always --dirty 2>/dev/null || echo dev)"
echo "  machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?')"
echo "  data: $WORK ($(fstype "$WORK")); $RUNS runs, each on a fresh 3-node cluster"
echo "  topic: $PARTITIONS partitions, RF 3, $RECORDS records each; broker 2 killed with SIGKILL"
echo "  NOTE: figures are wall times of one gostream-ctl process each (start, bootstrap,"
echo "        request); a shared machine is noisy, so compare within the run."

for r in $(seq "$RUNS"); do
for m in 1 3; do
	echo
	if [ "$m" = 1 ]; then
		echo "-- run $r, a single controller"
	else
		echo "-- run $r, three controller candidates"
	fi
	start_cluster "$WORK/run$r-$m" "$m"
	make_topic big "$PARTITIONS"
	make_topic sealme 1
	make_topic sealme2 1
	fill big
	led=$(($(ctl topic describe big -o json | count '"leader":2,') +
		$(ctl topic describe sealme -o json | count '"leader":2,') +
		$(ctl topic describe sealme2 -o json | count '"leader":2,')))

	kill -KILL "${node_pid[2]}"
	wait "${node_pid[2]}" 2>/dev/null || true
	unset 'node_pid[2]'

	timed "failover$m" "$DIR/failover" ctl failover --broker 2 -o json
	fo=$MS
	nfo="$(count '"action":"failover"' <"$DIR/failover.out")"
	ndrop="$(count '"action":"drop-follower"' <"$DIR/failover.out")"
	[ "$nfo" -eq "$led" ] || die "failover --broker 2 failed over $nfo partitions; broker 2 led $led"
	[ $((nfo + ndrop)) -eq "$((PARTITIONS + 2))" ] || die "failover --broker 2 changed $((nfo + ndrop)) partitions, want $((PARTITIONS + 2))"
	printf '  %-34s %8s ms  (%d partitions failed over, %d followers dropped)\n' \
		"failover --broker 2" "$fo" "$nfo" "$ndrop"

	timed "seal$m" "$DIR/seal" ctl topic seal sealme
	printf '  %-34s %8s ms\n' "topic seal (broker 2 down)" "$MS"
	timed "create$m" "$DIR/create" ctl topic create fresh --partitions 1 --replication-factor 3
	printf '  %-34s %8s ms\n' "topic create 1 partition, RF 3" "$MS"
	timed "list$m" "$DIR/list" ctl topic list
	printf '  %-34s %8s ms\n' "topic list (no change)" "$MS"

	start_node 2
	wait_ready
	# Broker 2 may take a moment to load its replicas after registering:
	# the first attempt that succeeds is the one timed.
	deadline=$((SECONDS + 60))
	while true; do
		t0="$(now_ns)"
		if ctl recover --broker 2 -o json >"$DIR/recover.out" 2>"$DIR/recover.err"; then
			MS="$(ms_since "$t0")"
			add "recover$m" "$MS"
			break
		fi
		[ "$SECONDS" -lt "$deadline" ] || { cat "$DIR/recover.err" >&2; die "recover --broker 2 never succeeded"; }
		sleep 0.2
	done
	nrec="$(count '"action":"recover"' <"$DIR/recover.out")"
	[ "$nrec" -eq "$((PARTITIONS + 2))" ] || die "recover --broker 2 brought back $nrec replicas, want $((PARTITIONS + 2))"
	printf '  %-34s %8s ms  (%d replicas back in their active sets)\n' "recover --broker 2" "$MS" "$nrec"
	deadline=$((SECONDS + 60))
	until ctl verify >"$DIR/verify.out" 2>"$DIR/verify.err"; do
		[ "$SECONDS" -lt "$deadline" ] || { cat "$DIR/verify.err" >&2; die "verify never succeeded"; }
		sleep 0.2
	done
	printf '  %-34s %8s\n' "verify" "OK"
	if [ "$m" = 3 ]; then
		# kill -9 of the active controller (node 1), then one metadata
		# change: the time until it succeeds.
		t0="$(now_ns)"
		kill -KILL "${node_pid[1]}"
		wait "${node_pid[1]}" 2>/dev/null || true
		unset 'node_pid[1]'
		deadline=$((SECONDS + 30))
		until ctl --timeout 10s topic seal sealme2 >"$DIR/takeover.out" 2>"$DIR/takeover.err"; do
			[ "$SECONDS" -lt "$deadline" ] || { cat "$DIR/takeover.err" >&2; die "no metadata change after the active controller's kill"; }
		done
		MS="$(ms_since "$t0")"
		add takeover "$MS"
		printf '  %-34s %8s ms\n' "kill -9 active -> topic seal ok" "$MS"
	fi
	stop_all
done
done

# ---------------------------------------------------------------- summary

met() { awk -v a="$1" -v b="$2" 'BEGIN { print (a + 0 < b + 0) ? "MET" : "MISSED" }'; }
echo
for m in 1 3; do
	fo="$(median "failover$m")"
	seal="$(median "seal$m")"
	create="$(median "create$m")"
	list="$(median "list$m")"
	rec="$(median "recover$m")"
	if [ "$m" = 1 ]; then
		echo "== medians of $RUNS runs, a single controller"
	else
		echo "== medians of $RUNS runs, three controller candidates"
	fi
	printf '  %-34s %8s ms\n' "failover --broker 2" "$fo"
	printf '  %-34s %8s ms\n' "topic seal" "$seal"
	printf '  %-34s %8s ms\n' "topic create (1 partition)" "$create"
	printf '  %-34s %8s ms\n' "topic list (no change)" "$list"
	printf '  %-34s %8s ms\n' "recover --broker 2" "$rec"
	echo "   ratios"
	printf '  %-34s %8sx\n' "failover / topic seal" "$(ratio "$fo" "$seal")"
	fo_net="$(awk -v a="$fo" -v b="$list" 'BEGIN { printf "%.1f", a - b }')"
	seal_net="$(awk -v a="$seal" -v b="$list" 'BEGIN { printf "%.1f", a - b }')"
	rec_net="$(awk -v a="$rec" -v b="$list" 'BEGIN { printf "%.1f", a - b }')"
	printf '  %-34s %8sx  (%s ms against %s ms)\n' "the same, less the topic list floor" "$(ratio "$fo_net" "$seal_net")" "$fo_net" "$seal_net"
	printf '  %-34s %8sx  (%s ms against %s ms)\n' "recover / topic seal, less the floor" "$(ratio "$rec_net" "$seal_net")" "$rec_net" "$seal_net"
	# The targets (docs/failover.md): at 2,000 partitions, RF 3, a
	# failover of a whole broker within a second, its recovery within five.
	echo "   targets (wall time of the gostream-ctl command)"
	printf '  %-34s %8s ms  < 1000 ms  %s\n' "failover --broker 2" "$fo" "$(met "$fo" 1000)"
	printf '  %-34s %8s ms  < 5000 ms  %s\n' "recover --broker 2" "$rec" "$(met "$rec" 5000)"
done
s1="$(median seal1)" s3="$(median seal3)" l1="$(median list1)" l3="$(median list3)"
echo "== three candidates against one, same runs"
printf '  %-34s %8sx  (%s ms against %s ms)  <= 2x  %s\n' "topic seal" "$(ratio "$s3" "$s1")" "$s3" "$s1" "$(met "$(ratio "$s3" "$s1")" 2.0001)"
s1n="$(awk -v a="$s1" -v b="$l1" 'BEGIN { printf "%.1f", a - b }')"
s3n="$(awk -v a="$s3" -v b="$l3" 'BEGIN { printf "%.1f", a - b }')"
printf '  %-34s %8sx  (%s ms against %s ms)\n' "topic seal, less the topic list floor" "$(ratio "$s3n" "$s1n")" "$s3n" "$s1n"
printf '  %-34s %8sx\n' "failover --broker 2" "$(ratio "$(median failover3)" "$(median failover1)")"
tk="$(median takeover)"
printf '  %-34s %8s ms  < 2000 ms  %s  (runs:%s)\n' "kill -9 active -> first change" "$tk" "$(met "$tk" 2000)" "${values[takeover]}"
