#!/usr/bin/env bash
# Measures the web console at scale (docs/console.md; item 4 of issue
# "17 of 18": with 2,000 partitions and 200 groups the topics page is
# usable in under half a second).
#
# It starts three nodes (node 1 the controller), creates TOPICS topics of
# PARTITIONS / TOPICS partitions each, replication factor 3, writes
# RECORDS records to every partition (gostream-ctl bench produce, which
# sends records without keys round robin), and gives CONSUMER_GROUPS groups
# committed offsets: group i commits offset 1 on every partition of topic
# i mod TOPICS (gostream-ctl group reset-offsets --to-offset 1 --execute,
# which commits for a group with no members), so each has a lag of
# RECORDS - 1 a partition. Then it asks node 1's console
#
#   GET /ui/api/topics             every topic, with its groups and their lag
#   GET /ui/api/groups             every group, with its lag
#   GET /ui/api/overview           the cluster's status, asked then
#   GET /ui/api/topics/{topic}     one topic, its replicas asked then
#
# REQUESTS times each, one after the other, after one request that is not
# counted (the first list waits for the survey's first round; the first
# call of a kind opens connections), and prints the time to the last byte
# (curl's time_total: min, median, max) and the body's size. The lists
# answer from the survey; the survey's rounds are timed by the node
# (roundMs in the lists' answers): it prints ROUNDS rounds, and what the
# three nodes spent in CPU while the survey went round beside the same
# time before the console was opened.
#
# Then, with BROWSER=1, the page in a browser: console/e2e/bench.mjs
# drives Debian's headless Chromium (CHROMIUM, default /usr/bin/chromium)
# through playwright-core (console/e2e's, npm ci as make console-test
# does when it is not there) at 1280x800 and loads node 1's
# /ui/#/topics, #/groups, #/topics/t000 and #/overview BROWSER_LOADS
# times each, each load in a new browser context, after one of each not
# counted; each is timed from the start of its navigation to the first
# frame in which the screen's table shows all its rows (the topics, the
# groups, the topic's partitions, the brokers), with the time its API
# answer had arrived; then BROWSER_SORTS clicks on the topics list's
# Topic header, each timed from the click to the frame that shows the
# new order. BROWSER is 1 by default when Chromium and Node.js are there
# (and playwright-core is, or npm to install it), else 0; it says which.
#
# Then, with TAIL=1 (the default), the live tail (GET
# /ui/api/topics/live/tail) of a topic `live` of TAIL_PARTITIONS
# partitions, RF 3, that `gostream-ctl bench produce --rate TAIL_RATE`
# writes records of TAIL_RECORD_SIZE bytes to, while node 1's memory
# (VmRSS in /proc/PID/status) is sampled every second, in phases of
# TAIL_SECONDS each: idle; the producer alone; TAIL_READERS readers that
# take everything as a browser does (curl -N, each one's record events
# counted); one more reader that reads for 3 s and then stops reading,
# its connection left open (bash's /dev/tcp), with the time until the
# node drops it (gostream_console_tail_drops_total on /metrics) and ends
# its tail (gostream_console_tails); and after, the producer stopped.
#
# Targets: GET /ui/api/topics's median under 0.2 s, so that the page,
# which draws the table from it, has the rest of half a second; with
# BROWSER=1, the topics page's median load, navigation to rows shown,
# under 0.5 s (issue "17 of 18": usable in under half a second); the
# node's memory while it serves tails at most 24 MiB over its memory with
# the producer alone (the largest sample of each): docs/console.md's
# bound for 32 tails, 32 x (256 KiB + its encoding), the JSON of 256 KiB
# of 200-byte records being about 480 KiB (the values in base64, each
# record's fields); the reader that stopped reading dropped within 30 s
# (the socket's buffers fill at the tail's rate, then the write deadline
# is 5 s).
#
# Settings, all environment variables:
#
#   PARTITIONS=2000      partitions in all
#   TOPICS=20            topics they are spread over (PARTITIONS a multiple)
#   CONSUMER_GROUPS=200  consumer groups with committed offsets
#   RECORDS=3            records per partition (2 or more: groups commit 1)
#   REQUESTS=20          timed requests of each API
#   ROUNDS=3             survey rounds to time
#   BROWSER=1            time the page in Chromium (0: not; default 1 when
#                        Chromium, Node.js and playwright-core or npm are
#                        there, else 0)
#   BROWSER_LOADS=10     timed loads of each screen
#   BROWSER_SORTS=10     timed sort clicks on the topics list
#   TAIL=1               measure the live tail too (0: the lists alone)
#   TAIL_RATE=5000       records a second written to the tailed topic
#   TAIL_RECORD_SIZE=200 bytes of each record's value
#   TAIL_PARTITIONS=3    partitions of the tailed topic (at most 64)
#   TAIL_READERS=1       readers that read everything (at most 31)
#   TAIL_SECONDS=20      the length of each phase of the tail
#   KEEP=1               keep the temporary directory (logs, data, answers,
#                        the memory samples)
#
# Everything listens on 127.0.0.1 on free ports, keeps its data in a
# temporary directory (under the repository if $TMPDIR is a tmpfs, where
# fsync costs nothing) and is stopped when the script exits. It needs curl
# and timeout (coreutils); the browser's phase needs Chromium and Node.js.
# Exit status: 0 every target met, 1 one missed, 2 the run failed.
set -euo pipefail
cd "$(dirname "$0")/.."
SCRIPT=bench-console
. scripts/bench-lib.sh

GO="${GO:-go}"
PARTITIONS="${PARTITIONS:-2000}"
TOPICS="${TOPICS:-20}"
CONSUMER_GROUPS="${CONSUMER_GROUPS:-200}"
RECORDS="${RECORDS:-3}"
REQUESTS="${REQUESTS:-20}"
ROUNDS="${ROUNDS:-3}"
BROWSER="${BROWSER:-}"
BROWSER_LOADS="${BROWSER_LOADS:-10}"
BROWSER_SORTS="${BROWSER_SORTS:-10}"
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"
TAIL="${TAIL:-1}"
TAIL_RATE="${TAIL_RATE:-5000}"
TAIL_RECORD_SIZE="${TAIL_RECORD_SIZE:-200}"
TAIL_PARTITIONS="${TAIL_PARTITIONS:-3}"
TAIL_READERS="${TAIL_READERS:-1}"
TAIL_SECONDS="${TAIL_SECONDS:-20}"
TARGET_MS=200
PAGE_TARGET_MS=500
# The node's memory for tails as docs/console.md bounds it, 32 x (256 KiB
# of records + their JSON, about 480 KiB for records of a few hundred
# bytes); and how long a reader that stops reading may hold on: the
# socket's buffers to fill at the tail's rate, then the write deadline of
# 5 s.
TAIL_BOUND_MIB=24
DROP_LIMIT_S=30

positive() { [[ $2 =~ ^[1-9][0-9]*$ ]] || die "$1=$2: want a positive integer"; }
# bash keeps GROUPS for the user's group ids and ignores GROUPS=N typed
# before a command: the count has a name of its own.
if printenv GROUPS >/dev/null; then
	die "GROUPS=$(printenv GROUPS): the number of groups is CONSUMER_GROUPS (bash ignores GROUPS=N before a command)"
fi
positive PARTITIONS "$PARTITIONS"
positive TOPICS "$TOPICS"
positive CONSUMER_GROUPS "$CONSUMER_GROUPS"
positive REQUESTS "$REQUESTS"
positive ROUNDS "$ROUNDS"
[ -z "$BROWSER" ] || [ "$BROWSER" = 0 ] || [ "$BROWSER" = 1 ] || die "BROWSER=$BROWSER: want 1 (time the page in Chromium) or 0"
positive BROWSER_LOADS "$BROWSER_LOADS"
positive BROWSER_SORTS "$BROWSER_SORTS"
[ "$TAIL" = 0 ] || [ "$TAIL" = 1 ] || die "TAIL=$TAIL: want 1 (measure the live tail) or 0"
positive TAIL_RATE "$TAIL_RATE"
positive TAIL_RECORD_SIZE "$TAIL_RECORD_SIZE"
positive TAIL_PARTITIONS "$TAIL_PARTITIONS"
[ "$TAIL_PARTITIONS" -le 64 ] || die "TAIL_PARTITIONS=$TAIL_PARTITIONS: a tail follows at most 64 partitions"
positive TAIL_READERS "$TAIL_READERS"
[ "$TAIL_READERS" -le 31 ] || die "TAIL_READERS=$TAIL_READERS: a node serves 32 tails, one of them the stalled reader's"
positive TAIL_SECONDS "$TAIL_SECONDS"
[[ $RECORDS =~ ^[0-9]+$ ]] && [ "$RECORDS" -ge 2 ] || die "RECORDS=$RECORDS: want 2 or more (each group commits offset 1)"
[ $((PARTITIONS % TOPICS)) -eq 0 ] || die "PARTITIONS=$PARTITIONS is not a multiple of TOPICS=$TOPICS"
[ $((PARTITIONS / TOPICS)) -le 10000 ] || die "PARTITIONS / TOPICS = $((PARTITIONS / TOPICS)): a topic has at most 10000 partitions"
PER_TOPIC=$((PARTITIONS / TOPICS))
command -v curl >/dev/null 2>&1 || die "refusing to start: curl is not installed (it times the console's answers and reads the live tail); install it (apt-get install curl)"
command -v timeout >/dev/null 2>&1 || die "refusing to start: timeout (coreutils) is not installed"
[ "$TAIL" = 0 ] || [ -r /proc/self/status ] || die "refusing to start: no /proc/PID/status to read the node's memory from (TAIL=0 measures the lists alone)"

# The browser: Chromium, Node.js and console/e2e's playwright-core,
# installed by npm ci from its lock file when it is not there. BROWSER
# unset is 1 when all can be had, else 0, browser_why saying why.
browser_missing() {
	if [ ! -x "$CHROMIUM" ]; then
		echo "no Chromium at $CHROMIUM (apt-get install chromium, or set CHROMIUM)"
	elif ! command -v node >/dev/null 2>&1; then
		echo "no Node.js (apt-get install nodejs npm)"
	elif [ ! -e console/e2e/node_modules/playwright-core/package.json ] && ! command -v npm >/dev/null 2>&1; then
		echo "no playwright-core in console/e2e/node_modules and no npm to install it (apt-get install npm)"
	fi
}
browser_asked="$BROWSER"
browser_why="$(browser_missing)"
if [ "$BROWSER" = 0 ]; then
	browser_why="BROWSER=0"
elif [ -n "$browser_why" ]; then
	[ -z "$browser_asked" ] || die "refusing to start: BROWSER=1 but $browser_why"
	BROWSER=0
else
	BROWSER=1
fi
if [ "$BROWSER" = 1 ] && [ ! -e console/e2e/node_modules/playwright-core/package.json ]; then
	echo "bench-console: npm ci --prefix console/e2e (playwright-core, for the page in Chromium)"
	if ! npm ci --prefix console/e2e --no-audit --no-fund >&2; then
		[ -z "$browser_asked" ] || die "npm ci --prefix console/e2e failed (above); BROWSER=0 measures without the browser"
		BROWSER=0
		browser_why="npm ci --prefix console/e2e failed (above)"
	fi
fi

# ---------------------------------------------------------------- work dir, build

make_work
build_binaries

# ---------------------------------------------------------------- helpers

ctl() { "$BIN/gostream-ctl" --bootstrap "$BOOTSTRAP" --timeout 60s "$@"; }

# spread KEY: "min / median / max" of a series.
spread() {
	# shellcheck disable=SC2086
	printf '%s / %s / %s' "$(printf '%s\n' ${values[$1]:-} | sort -g | head -n 1)" "$(median "$1")" \
		"$(printf '%s\n' ${values[$1]:-} | sort -g | tail -n 1)"
}

# retry LOG CMD...: runs CMD as run_logged does, again every 0.5 s for up
# to 60 s while it fails (a topic just created may have no leader yet).
retry() {
	local log=$1 deadline=$((SECONDS + 60))
	shift
	until "$@" >"$log.out" 2>"$log.err"; do
		if [ "$SECONDS" -ge "$deadline" ]; then
			echo "bench-console: failed for 60 s: $*" >&2
			tail -n 20 "$log.out" "$log.err" >&2 || true
			return 1
		fi
		sleep 0.5
	done
}

# node_ticks: the nodes' CPU time so far, user + system, in clock ticks.
node_ticks() { cpu_ticks "${node_pid[@]}"; }
# cpu_rate TICKS0 NS0: the nodes' CPU seconds a second since then.
cpu_rate() {
	awk -v k="$clk_tck" -v t0="$1" -v t1="$(node_ticks)" -v n0="$2" -v n1="$(now_ns)" \
		'BEGIN { printf "%.2f", (t1 - t0) / k / ((n1 - n0) / 1e9) }'
}

# ---------------------------------------------------------------- cluster

start_cluster "$WORK/cluster"
CONSOLE="http://${http[1]}/ui/api"

# ---------------------------------------------------------------- header

cat <<HEAD
bench-console: gostream $(git describe --always --dirty 2>/dev/null || echo dev), $(date -u '+%Y-%m-%d %H:%M UTC')
  machine: $(nproc) cores; before starting: $(busy)
  NOTE: a small shared machine is noisy: the load average is printed with each figure.
  data: $WORK ($(fstype "$WORK")); 3 nodes, node 1 the controller and the console asked
  seed: $TOPICS topics of $PER_TOPIC partitions (RF 3), $RECORDS records each; $CONSUMER_GROUPS groups, each committed on one topic
  the lists: $REQUESTS requests each, $ROUNDS survey rounds; the page: $([ "$BROWSER" = 1 ] && echo "$BROWSER_LOADS loads of each screen in $CHROMIUM (BROWSER=1)" || echo "not timed in a browser: $browser_why")
  the live tail: $([ "$TAIL" = 1 ] && echo "$TAIL_RATE records/s, $TAIL_READERS reader(s), phases of $TAIL_SECONDS s" || echo "not measured (TAIL=0)")
HEAD

# ---------------------------------------------------------------- seed

echo
echo "-- seeding"
t0="$(now_ns)"
topic_name() { printf 't%03d' "$1"; }
group_name() { printf 'g%04d' "$1"; }
for t in $(seq 0 $((TOPICS - 1))); do
	run_logged "$DIR/create-$t" ctl topic create "$(topic_name "$t")" --partitions "$PER_TOPIC" --replication-factor 3
done
echo "  $TOPICS topics created in $(secs_since "$t0") s"

# Each topic's records, four gostream-ctl processes at a time.
t0="$(now_ns)"
pids=()
for t in $(seq 0 $((TOPICS - 1))); do
	retry "$DIR/fill-$t" ctl bench produce --topic "$(topic_name "$t")" --records $((PER_TOPIC * RECORDS)) \
		--record-size 100 -o json &
	pids+=($!)
	if [ "${#pids[@]}" -ge 4 ]; then
		wait "${pids[0]}" || die "cannot fill topic $(topic_name "$t")"
		pids=("${pids[@]:1}")
	fi
done
for pid in "${pids[@]}"; do
	wait "$pid" || die "cannot fill the topics"
done
for t in $(seq 0 $((TOPICS - 1))); do
	n="$(ctl topic describe "$(topic_name "$t")" -o json | count "\"high_watermark\":$RECORDS,")"
	[ "$n" -eq "$PER_TOPIC" ] || die "$n of $PER_TOPIC partitions of $(topic_name "$t") hold $RECORDS records"
done
echo "  $((PARTITIONS * RECORDS)) records written in $(secs_since "$t0") s"

# Each group's committed offsets, four at a time.
t0="$(now_ns)"
pids=()
for g in $(seq 0 $((CONSUMER_GROUPS - 1))); do
	retry "$DIR/commit-$g" ctl group reset-offsets "$(group_name "$g")" --topic "$(topic_name $((g % TOPICS)))" \
		--to-offset 1 --execute &
	pids+=($!)
	if [ "${#pids[@]}" -ge 4 ]; then
		wait "${pids[0]}" || die "cannot commit the offsets of the groups"
		pids=("${pids[@]:1}")
	fi
done
for pid in "${pids[@]}"; do
	wait "$pid" || die "cannot commit the offsets of the groups"
done
n="$(ctl group list -o json | count '"group":"g[0-9]*"')"
[ "$n" -eq "$CONSUMER_GROUPS" ] || die "group list shows $n groups, want $CONSUMER_GROUPS"
echo "  $CONSUMER_GROUPS groups committed in $(secs_since "$t0") s"

# ---------------------------------------------------------------- the lists

# The nodes' CPU while nobody has the console open, for the survey's cost.
echo
echo "-- the console of node 1, $CONSOLE"
ticks0="$(node_ticks)" ns0="$(now_ns)"
sleep 10
idle_cpu="$(cpu_rate "$ticks0" "$ns0")"

# get NAME PATH: one request; its status, seconds to the last byte and
# bytes, "CODE SECONDS BYTES", and the body in $DIR/NAME.json.
get() {
	curl -sS -o "$DIR/$1.json" -w '%{http_code} %{time_total} %{size_download}' --max-time 60 "$CONSOLE$2" ||
		die "GET $CONSOLE$2 failed"
}

# timed NAME PATH: REQUESTS requests of PATH after one not counted; adds
# each one's milliseconds to series NAME and sets BYTES to the body's size.
timed() {
	local name=$1 path=$2 code secs i
	read -r code secs BYTES <<<"$(get "$1" "$2")"
	[ "$code" = 200 ] || die "GET $path answered $code: $(head -c 300 "$DIR/$name.json")"
	for i in $(seq "$REQUESTS"); do
		read -r code secs BYTES <<<"$(get "$1" "$2")"
		[ "$code" = 200 ] || die "GET $path answered $code: $(head -c 300 "$DIR/$name.json")"
		add "$name" "$(awk -v s="$secs" 'BEGIN { printf "%.1f", s * 1000 }')"
		if [ "$name" = topics ] || [ "$name" = groups ]; then
			rounds["$(json_num at <"$DIR/$name.json")"]="$(json_num roundMs <"$DIR/$name.json")"
		fi
	done
}
declare -A rounds # the survey's rounds seen: at (ms) -> roundMs

t0="$(now_ns)"
read -r code secs BYTES <<<"$(get first /topics)"
[ "$code" = 200 ] || die "the first GET /topics answered $code: $(head -c 300 "$DIR/first.json")"
echo "  the first GET /topics (it waits for the survey's first round): $secs s, $BYTES bytes; $(busy)"
n="$(count '"name":"t[0-9]*"' <"$DIR/first.json")"
[ "$n" -eq "$TOPICS" ] || die "GET /topics lists $n of the $TOPICS topics"
n="$(count '"group":"g[0-9]*"' <"$DIR/first.json")"
[ "$n" -eq "$CONSUMER_GROUPS" ] || die "GET /topics lists $n readers, want the $CONSUMER_GROUPS groups once each"
ticks0="$(node_ticks)" ns0="$(now_ns)"

timed topics /topics
topics_bytes=$BYTES
timed groups /groups
groups_bytes=$BYTES
n="$(count '"name":"g[0-9]*"' <"$DIR/groups.json")"
[ "$n" -eq "$CONSUMER_GROUPS" ] || die "GET /groups lists $n of the $CONSUMER_GROUPS groups"
timed overview /overview
overview_bytes=$BYTES
timed topic "/topics/$(topic_name 0)"
topic_bytes=$BYTES
n="$(count '"replicaStates"' <"$DIR/topic.json")"
[ "$n" -eq "$PER_TOPIC" ] || die "GET /topics/$(topic_name 0) shows $n of its $PER_TOPIC partitions"

# Keep the console open (a list every 2 s) until ROUNDS rounds are seen.
deadline=$((SECONDS + 30 * ROUNDS + 30))
while [ "${#rounds[@]}" -lt "$ROUNDS" ]; do
	check_alive
	[ "$SECONDS" -lt "$deadline" ] || die "the survey made ${#rounds[@]} rounds of $ROUNDS in $((30 * ROUNDS + 30)) s"
	sleep 2
	read -r code secs _ <<<"$(get round /topics)"
	[ "$code" = 200 ] || die "GET /topics answered $code: $(head -c 300 "$DIR/round.json")"
	rounds["$(json_num at <"$DIR/round.json")"]="$(json_num roundMs <"$DIR/round.json")"
done
survey_cpu="$(cpu_rate "$ticks0" "$ns0")"
for at in "${!rounds[@]}"; do
	add round "${rounds[$at]}"
done

# ---------------------------------------------------------------- the lists' figures

kib() { awk -v b="$1" 'BEGIN { printf "%.0f KiB", b / 1024 }'; }
row() { printf '  %-42s %-24s %s\n' "$1" "$2" "${3:-}"; }
lists_met="$(awk -v m="$(median topics)" -v t="$TARGET_MS" 'BEGIN { print (m < t) ? "MET" : "MISSED" }')"
echo
echo "== the lists, $PARTITIONS partitions in $TOPICS topics, $CONSUMER_GROUPS groups ($(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, shared and noisy)"
row "answer" "ms: min / median / max" "body"
row "GET /ui/api/topics" "$(spread topics)" "$(kib "$topics_bytes")   target median < $TARGET_MS ms: $lists_met"
row "GET /ui/api/groups" "$(spread groups)" "$(kib "$groups_bytes")"
row "GET /ui/api/overview" "$(spread overview)" "$(kib "$overview_bytes")"
row "GET /ui/api/topics/$(topic_name 0) ($PER_TOPIC partitions)" "$(spread topic)" "$(kib "$topic_bytes")"
row "the survey's round (${#rounds[@]} rounds)" "$(spread round)" "-"
echo "  the nodes' CPU: $idle_cpu CPU-s/s with the console closed, $survey_cpu while it was open (the requests above and the survey)"
echo "  $(busy)"

# ---------------------------------------------------------------- the page

# page_met: the topics page's target, or "not timed" without the browser.
page_met="not timed ($browser_why)"
if [ "$BROWSER" = 1 ]; then
	echo
	echo "== the page in a browser: node 1's console, http://${http[1]}/ui/ ($(date -u '+%Y-%m-%d %H:%M UTC'))"
	echo "  before: $(busy)"
	rc=0
	(
		cd console/e2e
		CONSOLE_URL="http://${http[1]}/ui/" TOPIC="$(topic_name 0)" CHROMIUM="$CHROMIUM" \
			TOPIC_ROWS="$TOPICS" GROUP_ROWS="$CONSUMER_GROUPS" PARTITION_ROWS="$PER_TOPIC" BROKER_ROWS=3 \
			LOADS="$BROWSER_LOADS" SORTS="$BROWSER_SORTS" TARGET_MS="$PAGE_TARGET_MS" node bench.mjs
	) || rc=$?
	case "$rc" in
	0) page_met=MET ;;
	1) page_met=MISSED ;;
	*) die "the page could not be timed in the browser (above)" ;;
	esac
	echo "  after: $(busy) (Chromium shares the cores with the three nodes)"
fi

if [ "$TAIL" = 0 ]; then
	echo "bench-console: the lists' target $lists_met, the topics page's $page_met (TAIL=0: no live tail)"
	[ "$lists_met" = MET ] && [ "$page_met" != MISSED ]
	exit
fi

# ---------------------------------------------------------------- the live tail

# Node 1's memory (VmRSS, KiB) every second, each sample labelled with the
# phase written in $DIR/phase at the time.
NODE1="${node_pid[1]}"
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$NODE1/status"; }
metric() {
	curl -sS --max-time 10 "http://${http[1]}/metrics" | awk -v m="$1" '$1 == m { printf "%.0f", $2; found = 1 } END { if (!found) print 0 }'
}
phase() { echo "$1" >"$DIR/phase"; }
phase idle
(
	while kill -0 "$NODE1" 2>/dev/null; do
		echo "$(cat "$DIR/phase") $(rss_kib)"
		sleep 1
	done
) >"$DIR/rss" 2>/dev/null &
SAMPLER=$!
bg_pids+=("$SAMPLER")

echo
echo "-- the live tail: topic live ($TAIL_PARTITIONS partitions, RF 3), $TAIL_RATE records/s of $TAIL_RECORD_SIZE bytes"
run_logged "$DIR/create-live" ctl topic create live --partitions "$TAIL_PARTITIONS" --replication-factor 3
TAIL_URL="$CONSOLE/topics/live/tail"
sleep "$TAIL_SECONDS"

# The producer, from the load phase to the end of the stalled reader's.
phase load
"$BIN/gostream-ctl" --bootstrap "$BOOTSTRAP" --timeout 60s bench produce --topic live --rate "$TAIL_RATE" \
	--record-size "$TAIL_RECORD_SIZE" --duration 1h -o json >"$DIR/producer.out" 2>"$DIR/producer.err" &
PRODUCER=$!
bg_pids+=("$PRODUCER")
sleep "$TAIL_SECONDS"
kill -0 "$PRODUCER" 2>/dev/null || { tail -n 20 "$DIR/producer.err" >&2; die "the producer on live ended early"; }
echo "  producer alone: $(busy)"

# (a) TAIL_READERS readers that take everything, as a browser does: each
# curl's events counted as they come.
phase reading
readers=()
for i in $(seq "$TAIL_READERS"); do
	curl -sS -N --max-time $((TAIL_SECONDS + 30)) "$TAIL_URL" 2>"$DIR/reader-$i.err" \
		> >(grep -c '^event: record' >"$DIR/reader-$i.count") &
	readers+=($!)
	bg_pids+=($!)
done
t0="$(now_ns)"
deadline=$((SECONDS + 10))
until [ "$(metric gostream_console_tails)" -eq "$TAIL_READERS" ]; do
	[ "$SECONDS" -lt "$deadline" ] || die "the node serves $(metric gostream_console_tails) tails, not the $TAIL_READERS readers', after 10 s"
	sleep 0.2
done
sleep "$TAIL_SECONDS"
read_s="$(secs_since "$t0")"
for pid in "${readers[@]}"; do
	kill -TERM "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	forget "$pid"
done
# Each count is written once its curl has ended.
deadline=$((SECONDS + 10))
for i in $(seq "$TAIL_READERS"); do
	until [ -s "$DIR/reader-$i.count" ]; do
		[ "$SECONDS" -lt "$deadline" ] || die "reader $i's count never came"
		sleep 0.1
	done
	add read_rate "$(awk -v n="$(cat "$DIR/reader-$i.count")" -v s="$read_s" 'BEGIN { printf "%.0f", n / s }')"
done
echo "  readers: $(busy)"

# (b) a reader that reads for 3 s and then stops reading, its connection
# kept open: bash's /dev/tcp, so that nothing reads on its behalf.
phase stalled
deadline=$((SECONDS + 10))
until [ "$(metric gostream_console_tails)" -eq 0 ]; do
	[ "$SECONDS" -lt "$deadline" ] || die "the readers' tails did not end within 10 s of their readers"
	sleep 0.2
done
drops0="$(metric gostream_console_tail_drops_total)"
(
	exec 3<>"/dev/tcp/${http[1]%:*}/${http[1]##*:}"
	printf 'GET /ui/api/topics/live/tail HTTP/1.1\r\nHost: %s\r\n\r\n' "${http[1]}" >&3
	timeout 3 cat <&3 >/dev/null || true
	now_ns >"$DIR/stalled.at"
	exec sleep 600
) &
STALLED=$!
bg_pids+=("$STALLED")
deadline=$((SECONDS + 10))
until [ -s "$DIR/stalled.at" ]; do
	[ "$SECONDS" -lt "$deadline" ] || die "the stalled reader did not start"
	sleep 0.1
done
stalled_at="$(cat "$DIR/stalled.at")"
deadline=$((SECONDS + 60))
until [ "$(metric gostream_console_tail_drops_total)" -gt "$drops0" ]; do
	[ "$SECONDS" -lt "$deadline" ] || die "the node did not drop the reader that stopped reading in 60 s"
	sleep 0.2
done
dropped_s="$(secs_since "$stalled_at")"
until [ "$(metric gostream_console_tails)" -eq 0 ]; do
	[ "$SECONDS" -lt "$deadline" ] || die "the dropped tail still counts in gostream_console_tails"
	sleep 0.2
done
ended_s="$(secs_since "$stalled_at")"
# Memory with the stalled reader still connected, for as long as (a).
sleep "$((TAIL_SECONDS > 10 ? TAIL_SECONDS - 10 : 0))"
stop_bg "$STALLED"
echo "  stalled reader: $(busy)"

phase after
kill -TERM "$PRODUCER" 2>/dev/null || true
wait "$PRODUCER" 2>/dev/null || true
forget "$PRODUCER"
produced="$(json_num records_per_sec <"$DIR/producer.out")"
[ -n "$produced" ] || { tail -n 20 "$DIR/producer.err" >&2; die "the producer on live failed"; }
sleep "$TAIL_SECONDS"
stop_bg "$SAMPLER"

# rss PHASE: "min / median / max" of node 1's samples in PHASE, in MiB.
rss() {
	awk -v p="$1" '$1 == p && $2 > 0 { print $2 / 1024 }' "$DIR/rss" | sort -g | awk '{ a[++n] = $1 }
		END { if (n == 0) { print "- / - / -"; exit }
			m = (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
			printf "%.1f / %.1f / %.1f", a[1], m, a[n] }'
}
# The tails' growth: node 1's largest sample while it served tails over
# its largest with the producer alone (peak to peak: the survey's rounds
# and the garbage collector move the memory by megabytes either way).
peak() { awk -v p="$1" '$1 == p && $2 > max { max = $2 } END { print max + 0 }' "$DIR/rss"; }
growth="$(awk -v a="$(peak reading)" -v b="$(peak stalled)" -v base="$(peak load)" \
	'BEGIN { printf "%.1f", ((a > b ? a : b) - base) / 1024 }')"
memory_met="$(awk -v g="$growth" -v b="$TAIL_BOUND_MIB" 'BEGIN { print (g <= b) ? "MET" : "MISSED" }')"
drop_met="$(awk -v d="$dropped_s" -v l="$DROP_LIMIT_S" 'BEGIN { print (d <= l) ? "MET" : "MISSED" }')"

echo
echo "== the live tail of node 1 ($(date -u '+%Y-%m-%d %H:%M UTC'))"
echo "  producer: $(awk -v r="$produced" 'BEGIN { printf "%.0f", r }') records/s of $TAIL_RECORD_SIZE bytes (--rate $TAIL_RATE) on $TAIL_PARTITIONS partitions"
echo "  readers that read everything: $TAIL_READERS, records/s each (min / median / max) $(spread read_rate) over $read_s s"
echo "  node 1's RSS, MiB (min / median / max), sampled every second:"
row "  idle, $TAIL_SECONDS s" "$(rss idle)"
row "  the producer alone, $TAIL_SECONDS s" "$(rss load)"
row "  + $TAIL_READERS reader(s), $TAIL_SECONDS s" "$(rss reading)"
row "  + a reader that stopped reading" "$(rss stalled)"
row "  after, $TAIL_SECONDS s" "$(rss after)"
echo "  growth with tails: $growth MiB, the largest sample with tails over the largest with the producer alone; bound $TAIL_BOUND_MIB MiB (docs/console.md: 32 tails x (256 KiB + its encoding, about 480 KiB)): $memory_met"
echo "  the reader that stopped reading: dropped (gostream_console_tail_drops_total + 1) $dropped_s s after it stopped, its tail ended after $ended_s s;"
echo "    a write blocks once the socket's buffers are full, and is dropped 5 s later: limit $DROP_LIMIT_S s: $drop_met"
echo "  at the end: $(busy)"

if [ "$lists_met" = MET ] && [ "$page_met" != MISSED ] && [ "$memory_met" = MET ] && [ "$drop_met" = MET ]; then
	echo "bench-console: every target MET (the topics page $page_met)"
	exit 0
fi
echo "bench-console: a target MISSED (the lists $lists_met, the topics page $page_met, the tail's memory $memory_met, the drop $drop_met)"
exit 1
