#!/usr/bin/env bash
# Times `gostream-ctl partition reassign` of one large partition at a
# throttle, and what it costs a producer writing to other partitions
# meanwhile (docs/reassignment.md; the targets of issue "16 of 18").
#
# It starts a three-node cluster (node 1 the controller), creates topic
# `big` (1 partition, replication factor 1, kept whole: retention.bytes -1)
# and fills it with SIZE_GB GiB of RECORD_SIZE records (gostream-ctl bench
# produce). It creates topic `load` (3 partitions, RF 3: every broker leads
# one and follows two, so the producer's records go through the source and
# the target of the move too; on one machine the three nodes share the
# CPUs and the disk anyway, so no placement keeps the load off the copy's
# path). Then each run
#
#   before   gostream-ctl bench produce --topic load (pipelined, 1 KiB
#            records) for LOAD_SECONDS: the producer's rate without a move;
#   during   gostream-ctl partition reassign big 0 --replicas T --execute
#            --throttle THROTTLE_MB (T the next broker after the one that
#            holds big/0), then at once the same producer, until the move
#            ends; the move is timed from the command to the first
#            `partition reassign --status` that shows no move (polled every
#            0.5 s, each answer kept for the report).
#
# In both phases the same --status poll runs every 0.5 s, so that the
# baseline bears its cost too. After each move it checks that big/0 is on
# T alone, that its log end is what it was, and `gostream-ctl verify
# --topic big`. Run r+1 moves the partition on from where run r left it:
# one fill serves every run.
#
# Targets: the move takes SIZE / THROTTLE (1 MB = 10^6 bytes, as the CLI
# counts it; 5 GiB at 50 MB/s is 107 s) within 20 %, ratio 0.8 to 1.2; the
# producer keeps at least 0.8 of its rate during the move. Medians of RUNS.
#
# Settings, all environment variables:
#
#   SIZE_GB=5             GiB written to big/0 (fractions work: 0.5)
#   THROTTLE_MB=50        the move's --throttle, MB/s
#   RUNS=1                moves (each with its baseline before it)
#   RECORD_SIZE=65536     bytes of one record of big
#   LOAD_SECONDS          the baseline's length; default the move's expected
#                         time, SIZE / THROTTLE
#   LOAD_PRODUCERS=1      producers of the load (bench produce --producers)
#   ALONE=1               after each run's move, one more with no producer
#                         (a reference without a target: what the copy does
#                         on this machine by itself)
#   KEEP=1                keep the temporary directory (logs, data, samples)
#
# Everything listens on 127.0.0.1 on free ports, keeps its data in a
# temporary directory (under the repository if $TMPDIR is a tmpfs, where
# fsync costs nothing and memory would hold the data), and is stopped when
# the script exits. It needs about 2.2 x SIZE_GB of free disk there (the
# partition and its copy) and 3 GiB for the load's topic (its retention
# keeps 128 MiB a partition, checked every 5 s); it refuses to start
# without. Exit status: 0 both targets met, 1 one missed, 2 the run failed.
set -euo pipefail
cd "$(dirname "$0")/.."
SCRIPT=bench-move
. scripts/bench-lib.sh

GO="${GO:-go}"
SIZE_GB="${SIZE_GB:-5}"
THROTTLE_MB="${THROTTLE_MB:-50}"
RUNS="${RUNS:-1}"
RECORD_SIZE="${RECORD_SIZE:-65536}"
LOAD_PRODUCERS="${LOAD_PRODUCERS:-1}"
ALONE="${ALONE:-0}"
LOAD_RECORD_SIZE=1024

is_number() { awk -v v="$1" 'BEGIN { exit !(v ~ /^[0-9]+(\.[0-9]+)?$/ && v > 0) }'; }
is_number "$SIZE_GB" || die "SIZE_GB=$SIZE_GB: want a positive number of GiB"
is_number "$THROTTLE_MB" || die "THROTTLE_MB=$THROTTLE_MB: want a positive number of MB/s"
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "RUNS=$RUNS: want a positive integer"
[[ $RECORD_SIZE =~ ^[1-9][0-9]*$ ]] && [ "$RECORD_SIZE" -le 1048576 ] ||
	die "RECORD_SIZE=$RECORD_SIZE: want 1 to 1048576 bytes"
[[ $LOAD_PRODUCERS =~ ^[1-9][0-9]*$ ]] || die "LOAD_PRODUCERS=$LOAD_PRODUCERS: want a positive integer"

# What the move copies and how long it should take at the throttle.
# (awk's %d stops at 2^31 - 1 in some awks: whole numbers go through %.0f.)
RECORDS="$(awk -v g="$SIZE_GB" -v r="$RECORD_SIZE" 'BEGIN { printf "%.0f", int(g * 1073741824 / r) }')"
[ "$RECORDS" -ge 1 ] || die "SIZE_GB=$SIZE_GB holds no record of $RECORD_SIZE bytes"
SIZE_BYTES=$((RECORDS * RECORD_SIZE))
EXPECTED="$(awk -v b="$SIZE_BYTES" -v t="$THROTTLE_MB" 'BEGIN { printf "%.1f", b / (t * 1e6) }')"
LOAD_SECONDS="${LOAD_SECONDS:-$(awk -v e="$EXPECTED" 'BEGIN { printf "%.0f", e < 5 ? 5 : e }')}"
[[ $LOAD_SECONDS =~ ^[1-9][0-9]*$ ]] || die "LOAD_SECONDS=$LOAD_SECONDS: want a positive number of seconds"

# ---------------------------------------------------------------- work dir

# The disk: the partition, its copy while both exist, a fifth to spare,
# and the load's topic.
need="$(awk -v b="$SIZE_BYTES" 'BEGIN { printf "%.0f", 2.2 * b + 3 * 1073741824 }')"
avail="$(df -P -B1 "$WORK_PARENT" | awk 'NR == 2 { print $4 }')"
gb() { awk -v b="$1" 'BEGIN { printf "%.1f GB", b / 1e9 }'; }
if [ "$avail" -lt "$need" ]; then
	die "refusing to start: $(gb "$avail") free on $WORK_PARENT, and a move of $SIZE_GB GiB needs about $(gb "$need") (2.2 x the partition, for it and its copy, and 3 GiB for the load's topic); free space, set SIZE_GB lower or TMPDIR to a larger disk"
fi

make_work
# The data's disk as /proc/diskstats names it (vda for /dev/vda), or
# empty when it is not there (then no disk figures).
DISK="$(df -P "$WORK" | awk 'NR == 2 { sub(/^\/dev\//, "", $1); print $1 }')"
DISK="$(awk -v d="$DISK" '$3 == d { print d; exit }' /proc/diskstats 2>/dev/null || true)"
build_binaries

# ---------------------------------------------------------------- helpers

ctl() { "$BIN/gostream-ctl" --bootstrap "$BOOTSTRAP" --timeout 120s "$@"; }

# snapshot: what the machine has done so far, for usage_since: the time
# (ns), the nodes' CPU time (ticks, user + system), the machine's busy and
# total CPU time (ticks), and the data disk's time busy (ms) and sectors
# written; zeros where /proc does not say.
snapshot() {
	echo "$(now_ns) $(cpu_ticks "${node_pid[@]}")" \
		"$(awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9; f = 1 } END { if (!f) print 0, 0 }' /proc/stat 2>/dev/null || echo 0 0)" \
		"$(awk -v d="$DISK" '$3 == d { print $13, $10; f = 1 } END { if (!f) print 0, 0 }' /proc/diskstats 2>/dev/null || echo 0 0)"
}
# usage_since SNAPSHOT: what the nodes and the machine did since it.
usage_since() {
	awk -v k="$clk_tck" -v cores="$(nproc)" -v disk="$DISK" -v a="$1" -v b="$(snapshot)" 'BEGIN {
		split(a, x, " "); split(b, y, " "); s = (y[1] - x[1]) / 1e9
		printf "the nodes used %.2f CPU-s/s, the machine was %.0f%% busy (%d cores)",
			(y[2] - x[2]) / k / s, 100 * (y[3] - x[3]) / (y[4] - x[4] + (y[4] == x[4])), cores
		if (disk != "")
			printf ", the disk %.0f%% busy writing %.0f MB/s", (y[5] - x[5]) / 10 / s, (y[6] - x[6]) * 512 / 1e6 / s
	}'
}

# ---------------------------------------------------------------- cluster

# The load's retention is checked every 5 s, so that its topic stays small.
NODE_FLAGS=(--retention-check-interval 5s)
start_cluster "$WORK/cluster"

# replicas_of TOPIC: TOPIC/0's replica list, as "1,2".
replicas_of() {
	ctl topic describe "$1" -o json | sed -n 's/.*"partitions":\[{[^]]*"replicas":\[\([0-9,]*\)\].*/\1/p'
}

# ---------------------------------------------------------------- header

cat <<HEAD
bench-move: gostream $(git describe --always --dirty 2>/dev/null || echo dev), $(date -u '+%Y-%m-%d %H:%M UTC')
  machine: $(nproc) cores; before starting: $(busy)
  NOTE: a small shared machine is noisy: the producer's rate is set against
        its own rate measured in the same run, just before each move.
  data: $WORK ($(fstype "$WORK")), $(gb "$avail") free; 3 nodes, node 1 the controller
  big/0: $SIZE_GB GiB = $(gb "$SIZE_BYTES") in $RECORDS records of $RECORD_SIZE bytes, RF 1
  move: --throttle $THROTTLE_MB MB/s (1 MB = 10^6 bytes): expected $EXPECTED s; $RUNS run(s)
  load: topic load, 3 partitions, RF 3; bench produce, $LOAD_PRODUCERS producer(s), $LOAD_RECORD_SIZE-byte records, pipelined; baseline $LOAD_SECONDS s
HEAD

# ---------------------------------------------------------------- fill

run_logged "$DIR/create-big" ctl topic create big --partitions 1 --replication-factor 1 --config retention.bytes=-1
# 1 MiB batches (16 records of 64 KiB), or two records for larger ones:
# under the nodes' 4 MiB batch limit.
fill_batch=$((RECORD_SIZE > 1048576 / 2 ? RECORD_SIZE * 2 : 1048576))
echo
echo "-- filling big/0 with $(gb "$SIZE_BYTES")"
t0="$(now_ns)"
run_logged "$DIR/fill" ctl bench produce --topic big --records "$RECORDS" --record-size "$RECORD_SIZE" \
	--batch-bytes "$fill_batch" -o json
fill_s="$(secs_since "$t0")"
echo "  filled in $fill_s s ($(awk -v b="$SIZE_BYTES" -v s="$fill_s" 'BEGIN { printf "%.1f", b / 1e6 / s }') MB/s)"
hw="$(ctl topic describe big -o json | json_num high_watermark)"
[ "$hw" = "$RECORDS" ] || die "big/0's high watermark is $hw after the fill, want $RECORDS"
holder="$(replicas_of big)"
[[ $holder =~ ^[1-3]$ ]] || die "big/0 has replicas [$holder], want one broker"
echo "  big/0 is on broker $holder, high watermark $hw; $(du -sh "$DIR/node$holder" | cut -f1) on its disk"

run_logged "$DIR/create-load" ctl topic create load --partitions 3 --replication-factor 3 \
	--config retention.bytes=134217728 --config segment.bytes=16777216

# ---------------------------------------------------------------- phases

# poll_status OUT START: every 0.5 s, `partition reassign --status -o
# json`, each answer a line "SECONDS_SINCE_START JSON" in OUT (START in
# ns), until killed.
poll_status() {
	local out=$1 start=$2 next now s
	next="$(now_ns)"
	while true; do
		if s="$("$BIN/gostream-ctl" --bootstrap "$BOOTSTRAP" --timeout 5s partition reassign --status -o json 2>&1)"; then
			printf '%s %s\n' "$(secs_since "$start")" "$s" >>"$out"
		else
			printf '%s error %s\n' "$(secs_since "$start")" "${s//$'\n'/ }" >>"$out"
		fi
		next=$((next + 500000000))
		now="$(now_ns)"
		if [ "$next" -gt "$now" ]; then
			sleep "$(awk -v d="$((next - now))" 'BEGIN { printf "%.3f", d / 1e9 }')"
		else
			next=$now
		fi
	done
}

# producer LOG ARGS...: bench produce on load in the background, with ARGS
# (the length); PRODUCER is the pid of gostream-ctl itself, which a
# SIGTERM stops sending and has print its summary.
producer() {
	local log=$1
	shift
	"$BIN/gostream-ctl" --bootstrap "$BOOTSTRAP" --timeout 120s bench produce --topic load \
		--record-size "$LOAD_RECORD_SIZE" --producers "$LOAD_PRODUCERS" -o json "$@" >"$log.out" 2>"$log.err" &
	PRODUCER=$!
	bg_pids+=("$PRODUCER")
}

# producer_rate LOG PID: waits for the producer and sets RATE, its
# records/s.
producer_rate() {
	local log=$1 pid=$2 rc=0
	wait "$pid" || rc=$?
	forget "$pid"
	RATE="$(json_num records_per_sec <"$log.out")"
	if [ -z "$RATE" ]; then
		echo "bench-move: the producer on load failed (exit $rc)" >&2
		tail -n 20 "$log.out" "$log.err" >&2 || true
		exit 2
	fi
}

# move_partition TARGET NAME [LOAD]: moves big/0 to broker TARGET, timed
# from the command to the first --status without a move (MOVE_S), the
# answers kept in $DIR/poll-NAME; with LOAD, the producer runs from the
# moment the command returned to the end of the move (RATE); USAGE is
# usage_since $snap at the end. Then checks that big/0 is whole on TARGET
# alone.
move_partition() {
	local target=$1 name=$2 load=${3:-} poll=$DIR/poll-$2 t0 poller deadline cap now leo
	cap="$(awk -v e="$EXPECTED" 'BEGIN { printf "%.0f", 3 * e + 60 }')"
	: >"$poll"
	t0="$(now_ns)"
	run_logged "$DIR/reassign-$name" ctl partition reassign big 0 --replicas "$target" --execute --throttle "$THROTTLE_MB"
	if [ -n "$load" ]; then
		producer "$DIR/load-$name" --duration "${cap}s"
	fi
	poll_status "$poll" "$t0" &
	poller=$!
	bg_pids+=("$poller")
	deadline=$((SECONDS + cap))
	until tail -n 1 "$poll" | grep -q '"moves":\[\]'; do
		check_alive
		if [ "$SECONDS" -ge "$deadline" ]; then
			tail -n 3 "$poll" >&2
			die "big/0's move still under way after $cap s (last status above)"
		fi
		if [ -n "$load" ] && ! kill -0 "$PRODUCER" 2>/dev/null; then
			producer_rate "$DIR/load-$name" "$PRODUCER"
			die "the producer on load ended before the move did"
		fi
		sleep 0.05
	done
	MOVE_S="$(secs_since "$t0")"
	USAGE="$(usage_since "$snap")"
	stop_bg "$poller"
	if [ -n "$load" ]; then
		kill -TERM "$PRODUCER" 2>/dev/null || true
		producer_rate "$DIR/load-$name" "$PRODUCER"
	fi

	now="$(replicas_of big)"
	[ "$now" = "$target" ] || die "big/0 is on [$now] after the move, want [$target]"
	leo="$(ctl topic describe big -o json | sed -n 's/.*"replica_status":\[{[^}]*"log_end_offset":\([0-9]*\).*/\1/p')"
	[ "$leo" = "$RECORDS" ] || die "big/0's replica on broker $target ends at offset ${leo:-?}, the old one at $RECORDS"
	run_logged "$DIR/verify-$name" ctl verify --topic big
	VERIFIED="big/0 on broker $target alone: log end $leo as before the move; verify OK"
}

# samples FILE: what --status said along the way: the first answer, one
# about every 10 s, and the last; sets COPY_RATE, the median of the copy's
# MB/s in the answers of the copy step.
samples() {
	awk -v rates="$1.rates" '
		$2 == "error" { next }
		{
			t = $1; line = $0
			step = ""; copied = ""; total = ""; rate = ""; left = ""
			if (match(line, /"step":"[a-z]*"/)) step = substr(line, RSTART + 8, RLENGTH - 9)
			if (match(line, /"copied_bytes":[0-9]+/)) copied = substr(line, RSTART + 15, RLENGTH - 15)
			if (match(line, /"total_bytes":[0-9]+/)) total = substr(line, RSTART + 14, RLENGTH - 14)
			if (match(line, /"bytes_per_sec":[0-9.eE+]+/)) rate = substr(line, RSTART + 16, RLENGTH - 16)
			if (match(line, /"seconds_left":-?[0-9.eE+]+/)) left = substr(line, RSTART + 15, RLENGTH - 15)
			if (step == "") text = "no move"
			else if (copied == "") text = "step " step
			else text = sprintf("step %s: %.0f of %.0f MB copied, %.1f MB/s, %s s left", step, copied / 1e6, total / 1e6, rate / 1e6,
				left < 0 ? "?" : sprintf("%.0f", left))
			if (step == "copy" && rate + 0 > 0) print rate / 1e6 > rates
			if (NR == 1 || t >= shown + 10 || step == "") { printf "    %6.1f s  %s\n", t, text; shown = t }
		}' "$1"
	values[copy_rate_run]=""
	if [ -s "$1.rates" ]; then
		values[copy_rate_run]="$(cat "$1.rates")"
	fi
	COPY_RATE="$(awk -v v="$(median copy_rate_run)" 'BEGIN { printf "%.1f", v }')"
}

# history_span: from the controller's audit trail, the seconds from the
# last `reassign` of big/0 to its `reassign-join` and to its
# `reassign-finish` ("? ?" when not found): the controller's clock,
# without the polling.
history_span() {
	local s j f
	read -r s j f < <(ctl cluster history -o json | tr '{' '\n' | awk '
		match($0, /"time":"[^"]*"/) { t = substr($0, RSTART + 8, RLENGTH - 9) }
		!/"topic":"big"/ { next }
		/"action":"reassign"/ { s = t; j = "?"; f = "?" }
		/"action":"reassign-join"/ { j = t }
		/"action":"reassign-finish"/ { f = t }
		END { print (s == "" ? "?" : s), j, f }')
	if [ "$s" = "?" ] || [ "$f" = "?" ] || [ "$j" = "?" ]; then
		echo "? ?"
		return
	fi
	awk -v s="$(date -d "$s" +%s.%N)" -v j="$(date -d "$j" +%s.%N)" -v f="$(date -d "$f" +%s.%N)" \
		'BEGIN { printf "%.1f %.1f\n", j - s, f - s }'
}

# report_move NAME SERIES: the move's figures, what --status said, the
# history; the copy's median rate is added to SERIES.
report_move() {
	printf '  move:   %s s, %sx the expected %s s\n' "$MOVE_S" "$(ratio "$MOVE_S" "$EXPECTED")" "$EXPECTED"
	echo "  what --status said (seconds since the command):"
	samples "$DIR/poll-$1"
	read -r join_s finish_s <<<"$(history_span)"
	echo "  cluster history: reassign -> reassign-join $join_s s -> reassign-finish $finish_s s; the copy at a median $COPY_RATE MB/s by --status"
	add "$2" "$COPY_RATE"
	echo "  $VERIFIED"
}

for r in $(seq "$RUNS"); do
	target=$((holder % 3 + 1))
	echo
	echo "-- run $r: move big/0 from broker $holder to broker $target"

	# before: the producer alone, with the --status poll as during a move.
	echo "  before: $(busy)"
	: >"$DIR/poll-before-$r"
	poll_status "$DIR/poll-before-$r" "$(now_ns)" &
	poller=$!
	bg_pids+=("$poller")
	snap="$(snapshot)"
	producer "$DIR/load-before-$r" --duration "${LOAD_SECONDS}s"
	producer_rate "$DIR/load-before-$r" "$PRODUCER"
	stop_bg "$poller"
	before=$RATE
	before_s="$(json_num seconds <"$DIR/load-before-$r.out")"
	add before "$before"
	printf '  before: %s records/s for %.1f s (p99 %.0f ms); %s\n' "$(fmt_rate "$before")" "$before_s" \
		"$(json_num p99_ms <"$DIR/load-before-$r.out")" "$(usage_since "$snap")"

	# during: the move, and the same producer from the moment it started.
	echo "  during: $(busy)"
	snap="$(snapshot)"
	move_partition "$target" "during-$r" load
	during=$RATE
	during_s="$(json_num seconds <"$DIR/load-during-$r.out")"
	add move "$MOVE_S"
	add during "$during"
	add load_ratio "$(ratio "$during" "$before")"
	printf '  during: %s records/s for %.1f s (p99 %.0f ms), %sx before; %s\n' "$(fmt_rate "$during")" "$during_s" \
		"$(json_num p99_ms <"$DIR/load-during-$r.out")" "$(ratio "$during" "$before")" "$USAGE"
	report_move "during-$r" copy_rate
	holder=$target

	if [ "$ALONE" = 1 ]; then
		target=$((holder % 3 + 1))
		echo "  alone: a move from broker $holder to broker $target with no producer; $(busy)"
		snap="$(snapshot)"
		move_partition "$target" "alone-$r"
		add alone "$MOVE_S"
		echo "  alone: $USAGE"
		report_move "alone-$r" copy_rate_alone
		holder=$target
	fi
done

# ---------------------------------------------------------------- summary

list() {
	# shellcheck disable=SC2086
	printf '%s\n' ${values[$1]:-} | awk -v f="$2" '{ printf "%s" f, (NR > 1 ? ", " : ""), $1 }'
}
move="$(median move)"
before="$(median before)"
during="$(median during)"
move_ratio="$(ratio "$move" "$EXPECTED")"
load_ratio="$(ratio "$during" "$before")"
move_met="$(awk -v r="$move_ratio" 'BEGIN { print (r >= 0.8 && r <= 1.2) ? "MET" : "MISSED" }')"
load_met="$(awk -v r="$load_ratio" 'BEGIN { print (r >= 0.8) ? "MET" : "MISSED" }')"
echo
echo "== medians of $RUNS run(s) ($(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, shared and noisy)"
printf '  %-38s %11s  %-30s %s\n' "move of $SIZE_GB GiB at $THROTTLE_MB MB/s, loaded" "$move s" "${move_ratio}x of $EXPECTED s (0.8-1.2)" "$move_met"
printf '  %-38s %11s  %-30s %s\n' "producer on load, during / before" "$(fmt_rate "$during")/s" "${load_ratio}x of $(fmt_rate "$before")/s (>= 0.8)" "$load_met"
alone=""
if [ "$ALONE" = 1 ]; then
	alone="; moves alone $(list alone '%s') s, copying $(list copy_rate_alone '%s') MB/s"
	printf '  %-38s %11s  %-30s %s\n' "move with no producer (reference)" "$(median alone) s" "$(ratio "$(median alone)" "$EXPECTED")x of $EXPECTED s" "-"
fi
echo "  runs: moves $(list move '%s') s; before $(list before '%.0f'); during $(list during '%.0f') records/s;" \
	"ratios $(list load_ratio '%s'); the copy's median by --status $(list copy_rate '%s') MB/s$alone"
echo "  at the end: $(busy)"
if [ "$move_met" = MET ] && [ "$load_met" = MET ]; then
	echo "bench-move: both targets MET"
	exit 0
fi
echo "bench-move: a target MISSED"
exit 1
