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
#   gostream-ctl topic create ... --partitions 1 --replication-factor 2
#                                      (new replicas go only to brokers
#                                      that answer: two, with broker 2 down)
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
SCRIPT=bench-failover
. scripts/bench-lib.sh

GO="${GO:-go}"
RUNS="${RUNS:-3}"
PARTITIONS="${PARTITIONS:-2000}"
RECORDS="${RECORDS:-3}"

# ---------------------------------------------------------------- work dir, build

make_work
build_binaries

# ---------------------------------------------------------------- helpers

ctl() { "$BIN/gostream-ctl" --bootstrap "$BOOTSTRAP" --timeout 120s "$@"; }

ms_since() { awk -v a="$1" -v b="$(now_ns)" 'BEGIN { printf "%.1f", (b - a) / 1e6 }'; }

# timed KEY LOG CMD...: runs CMD as run_logged does, adds its wall time in
# ms to series KEY and sets MS.
timed() {
	local key=$1 log=$2 t0
	shift 2
	t0="$(now_ns)"
	run_logged "$log" "$@"
	MS="$(ms_since "$t0")"
	add "$key" "$MS"
}

# ---------------------------------------------------------------- cluster

# make_active: candidate 1 the active controller, as with a single
# controller: broker 2's kill then elects no controller.
make_active() {
	local deadline=$((SECONDS + 30))
	until ctl controller status -o json 2>/dev/null | grep -q '"active":1,'; do
		ctl controller transfer --to 1 >/dev/null 2>&1 || true
		[ "$SECONDS" -lt "$deadline" ] || die "candidate 1 never became the active controller"
		sleep 0.2
	done
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
	if [ "$m" = 3 ]; then
		make_active
	fi
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
	timed "create$m" "$DIR/create" ctl topic create fresh --partitions 1 --replication-factor 2
	printf '  %-34s %8s ms\n' "topic create 1 partition, RF 2" "$MS"
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
