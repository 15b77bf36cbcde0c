#!/usr/bin/env bash
# Runs gostream and NATS JetStream side by side on this machine, in one run,
# and prints both, their ratios and whether each target is met. `make
# bench-compare` builds the binaries and runs this; docs/benchmarks.md says
# what each figure means.
#
#   Part A, one node:  one gostream-node (fsync before every ack) against one
#     nats-server -js with file storage (its defaults: no fsync before acking).
#     A1 pipelined produce, A2 consume of the same data, A3 one synchronous
#     producer's p50 against a plain 1 KiB write+fsync on the same disk.
#   Part B, cluster:   three gostream-nodes (RF=3 topics) against three
#     nats-servers with sync_interval: always (fsync before acking, as we do),
#     R3 stream. B1 pipelined produce, B2 one synchronous producer's p50,
#     B3 sixteen synchronous producers. Then a Kafka client through the
#     nodes' Kafka listeners against our own client, on the same cluster:
#     B4 franz-go's pipelined produce (acks=all, idempotent;
#     scripts/kafkabench) against gostream-ctl bench produce, B5 franz-go
#     fetching against gostream-ctl bench consume of the same data. Then
#     consumer groups, franz-go's against ours on the same cluster: B6 a
#     group of three members reading six partitions (kafkabench consume
#     -group against gostream-ctl bench consume --group), B7 sixteen
#     synchronous committers (kafkabench commit against gostream-ctl bench
#     commit), and B8 the time from kill -9 of a group member to its
#     partitions being read by another (kcat -G, franz-go and
#     gostream-ctl consume --group members; kafkabench takeover).
#
# Every measurement runs RUNS times, interleaved (gostream, NATS, gostream,
# NATS, ...); the table compares medians, and beneath each row gives the
# min-max of the runs of both columns. Every run's line ends with the load
# average and CPU pressure after it; the table's header gives them at the
# start and at the end. The produce and consume runs (A1, A2, B1, B3 to B7)
# also print the CPU per record of the servers and of the bench client
# apart (user + system time over the run); a table after the results gives
# each as median (min-max), and their sum.
#
# With BEFORE=DIR or BEFORE_REV=REV another build of gostream (before) is
# measured alternately with this one (after): in every round each gostream
# measurement runs for before, then after, then NATS, each build on nodes of
# its own started for the part and running side by side through it, as
# NATS's servers do; each build's runs use its own gostream-ctl, and
# scripts/kafkabench is built from this tree for both. A table "after vs
# before" then sets every gostream figure of this build against the
# other's (ratio after / before of the medians), with one target: B1's CPU
# per record, servers + client, at most 0.5x before's, for each producer
# count.
#
# Settings, all environment variables:
#
#   RUNS=3                  repetitions of every measurement
#   RECORDS=200000          records (1 KiB) per pipelined produce run (<= 500000)
#   PRODUCERS="1 2"         producer counts tried for pipelined produce, on both
#                           sides (NATS --clients); each side's best median counts
#   PARTITIONS=4            partitions of the one-node produce topics
#   CLUSTER_PARTITIONS=3    partitions of the cluster (RF=3) produce topics (B1)
#   SYNC16_PARTITIONS=1     partitions of the 16-synchronous-producer topic (B3);
#                           one, like the one NATS stream, batches best
#   SYNC_RECORDS=2000       records of one synchronous producer
#   SYNC16_RECORDS=16000    records of 16 synchronous producers, in all
#   NATS_SERVER, NATS_CLI   paths of the peer binaries, used as they are
#                           (else found or installed, below)
#   ONLY="A1 B3"            run only these measurements (A2 needs A1, B5 B4;
#                           default all: A1 A2 A3 B1 B2 B3 B4 B5 B6 B7 B8);
#                           the table shows those run
#   B5_DATA=kafka           which of B4's topics B5 reads: kafka, the ones
#                           franz-go wrote, or native, gostream-ctl's
#   GROUP_RECORDS=720000    records (1 KiB) of B6's topic of 6 partitions (at
#                           about a million a second, fewer are read too fast
#                           to time)
#   B6_DATA=kafka           who writes B6's topic: kafka (franz-go) or native
#   COMMITS=16000           commits of B7's 16 committers, in all
#   TAKEOVER_SESSION_MS=6000, TAKEOVER_HEARTBEAT_MS=500
#                           B8's session timeout and heartbeat interval
#   TAKEOVER_RATE=500       records/s produced while B8's members read
#   KCAT                    the kcat binary for B8 (else kcat on PATH; without
#                           one B8 runs franz-go and native members only)
#   NATS=0                  skip NATS (our side alone, e.g. to profile it);
#                           the table then has no ratios against NATS
#   BEFORE=DIR              a directory holding gostream-node and gostream-ctl
#                           of another build, measured alternately with BIN's
#   BEFORE_REV=REV          a git revision of this repository to build (git
#                           archive into the run's temporary directory, go
#                           build ./cmd/node ./cmd/ctl) and measure as BEFORE
#   KEEP=1                  keep the temporary directory (logs, data)
#   CLUSTER_GOMAXPROCS=N    GOMAXPROCS of every server of the three-server
#                           clusters (ours, BEFORE's and NATS's alike; Part A's
#                           single servers keep the default): unset, each gets
#                           one per CPU, as a process does by default
#
# The peers: nats-server v2.15.2 and nats (natscli) v0.5.0, taken from
# bin/peers, PATH or $(go env GOPATH)/bin if the version matches, else
# installed into bin/peers with go install. Everything listens on 127.0.0.1
# on free ports, keeps its data in a temporary directory (under the
# repository if $TMPDIR is a tmpfs, where fsync costs nothing), and is
# stopped when the script exits. Exit status: 0 all targets met, 1 a target
# missed, 2 the run failed.
set -euo pipefail
# BEFORE may be given relative to where the script was started.
if [ -n "${BEFORE:-}" ] && [ -d "$BEFORE" ]; then
	BEFORE="$(cd "$BEFORE" && pwd)"
fi
cd "$(dirname "$0")/.."
SCRIPT=bench-compare
. scripts/bench-lib.sh

GO="${GO:-go}"
BIN="${BIN:-bin}"
RUNS="${RUNS:-3}"
RECORDS="${RECORDS:-200000}"
PRODUCERS="${PRODUCERS:-1 2}"
PARTITIONS="${PARTITIONS:-4}"
CLUSTER_PARTITIONS="${CLUSTER_PARTITIONS:-3}"
SYNC16_PARTITIONS="${SYNC16_PARTITIONS:-1}"
SYNC_RECORDS="${SYNC_RECORDS:-2000}"
SYNC16_RECORDS="${SYNC16_RECORDS:-16000}"
NATS_SERVER_VERSION=v2.15.2
NATS_CLI_VERSION=v0.5.0
SIZE=1024
ALL="A1 A2 A3 B1 B2 B3 B4 B5 B6 B7 B8"
ONLY="${ONLY:-$ALL}"
NATS="${NATS:-1}"
B5_DATA="${B5_DATA:-kafka}"
GROUP_RECORDS="${GROUP_RECORDS:-720000}"
B6_DATA="${B6_DATA:-kafka}"
COMMITS="${COMMITS:-16000}"
TAKEOVER_SESSION_MS="${TAKEOVER_SESSION_MS:-6000}"
TAKEOVER_HEARTBEAT_MS="${TAKEOVER_HEARTBEAT_MS:-500}"
TAKEOVER_RATE="${TAKEOVER_RATE:-500}"
KCAT="${KCAT:-$(command -v kcat || true)}"
BEFORE="${BEFORE:-}"
BEFORE_REV="${BEFORE_REV:-}"
CLUSTER_GOMAXPROCS="${CLUSTER_GOMAXPROCS:-}"

for b in gostream-node gostream-ctl; do
	[ -x "$BIN/$b" ] || die "$BIN/$b is missing; run 'make build' first"
done
[ -z "$BEFORE" ] || [ -z "$BEFORE_REV" ] || die "BEFORE and BEFORE_REV both given: give one, a directory of binaries or a revision to build"
if [ -n "$BEFORE" ]; then
	for b in gostream-node gostream-ctl; do
		[ -x "$BEFORE/$b" ] || die "BEFORE=$BEFORE: $BEFORE/$b is missing or not executable; give the directory a build put its gostream-node and gostream-ctl in"
	done
fi
if [ -n "$BEFORE_REV" ]; then
	before_commit="$(git rev-parse --verify --quiet "$BEFORE_REV^{commit}")" ||
		die "BEFORE_REV=$BEFORE_REV is not a revision of this repository (git rev-parse finds no commit)"
fi
# BUILDS: the gostream builds measured, in the order each round runs them;
# after is BIN's (this tree's), before the other (BEFORE or BEFORE_REV).
BUILDS=after
if [ -n "$BEFORE$BEFORE_REV" ]; then
	BUILDS="before after"
fi
# before: whether a before build is measured.
before() { [ "$BUILDS" != after ]; }

# ---------------------------------------------------------------- peers

# find_peer VAR NAME VERSION MODULE: sets VAR, unless the caller set it, to
# a NAME binary of VERSION, installing it into bin/peers if none is found.
find_peer() {
	local var=$1 name=$2 version=$3 module=$4 cand gopath
	if [ -n "${!var:-}" ]; then
		[ -x "${!var}" ] || die "$var=${!var} is not an executable"
		return
	fi
	gopath="$("$GO" env GOPATH 2>/dev/null || true)"
	for cand in "$BIN/peers/$name" "$(command -v "$name" || true)" \
		"${gopath:+$gopath/bin/$name}" "/root/go/bin/$name"; do
		if [ -n "$cand" ] && [ -x "$cand" ] && "$cand" --version 2>&1 | grep -qF "$version"; then
			printf -v "$var" '%s' "$cand"
			return
		fi
	done
	echo "bench-compare: installing $module@$version into $BIN/peers"
	mkdir -p "$BIN/peers"
	GOBIN="$(cd "$BIN/peers" && pwd)" "$GO" install "$module@$version" ||
		die "could not install $module@$version"
	printf -v "$var" '%s' "$BIN/peers/$name"
}
# want M: whether measurement M (A1 ... B5) is to be run.
want() { [[ " $ONLY " == *" $1 "* ]]; }
for m in $ONLY; do
	case $m in A1 | A2 | A3 | B1 | B2 | B3 | B4 | B5 | B6 | B7 | B8) ;; *) die "ONLY: unknown measurement $m ($ALL)" ;; esac
done
if want A2 && ! want A1; then
	die "ONLY: A2 consumes what A1 produced; add A1"
fi
if want B5 && ! want B4; then
	die "ONLY: B5 consumes what B4 produced; add B4"
fi
case $B5_DATA in kafka | native) ;; *) die "B5_DATA=$B5_DATA: want kafka or native" ;; esac
case $B6_DATA in kafka | native) ;; *) die "B6_DATA=$B6_DATA: want kafka or native" ;; esac
case $CLUSTER_GOMAXPROCS in '' | [1-9] | [1-9][0-9]) ;; *) die "CLUSTER_GOMAXPROCS=$CLUSTER_GOMAXPROCS: want a number of processors, 1 to 99" ;; esac
CLUSTER_ENV=() # the environment the three-server clusters' servers get
if [ -n "$CLUSTER_GOMAXPROCS" ]; then
	CLUSTER_ENV=("GOMAXPROCS=$CLUSTER_GOMAXPROCS")
fi
[ -z "$KCAT" ] || [ -x "$KCAT" ] || die "KCAT=$KCAT is not an executable"
# B4 to B8 set a Kafka client against ours: without any of the others,
# NATS has nothing to do.
if ! want A1 && ! want A3 && ! want B1 && ! want B2 && ! want B3; then
	NATS=0
fi
# nats: whether the NATS side runs.
nats() { [ "$NATS" = 1 ]; }
part_a() { want A1 || want A3; }
part_b() { want B1 || want B2 || want B3 || want B4 || want B6 || want B7 || want B8; }
# kafka_b: whether Part B runs scripts/kafkabench.
kafka_b() { want B4 || want B6 || want B7 || want B8; }
# nats_b: whether Part B has a NATS side (B4 to B8 have none).
nats_b() { nats && { want B1 || want B2 || want B3; }; }

if nats; then
find_peer NATS_SERVER nats-server "$NATS_SERVER_VERSION" github.com/nats-io/nats-server/v2
find_peer NATS_CLI nats "$NATS_CLI_VERSION" github.com/nats-io/natscli/nats
fi

# ---------------------------------------------------------------- work dir

make_work
gs_srv=() nats_srv=() # the running servers measured (use_build sets gs_srv), in bg_pids too

"$GO" build -o "$WORK/fsyncbench" ./scripts/fsyncbench || die "cannot build scripts/fsyncbench"
if kafka_b; then
	"$GO" build -o "$WORK/kafkabench" ./scripts/kafkabench || die "cannot build scripts/kafkabench"
fi

# The builds' binaries: BIN's, and the before build's, given or built here
# from BEFORE_REV's tree (into WORK, so removed at exit with the rest).
declare -A build_bin=([after]="$BIN")
if [ -n "$BEFORE_REV" ]; then
	before_desc="$(git describe --always "$before_commit")"
	echo "bench-compare: building $BEFORE_REV ($before_desc) into $WORK/before/bin"
	mkdir -p "$WORK/before/src" "$WORK/before/bin"
	git archive "$before_commit" | tar -x -C "$WORK/before/src" || die "cannot extract $BEFORE_REV with git archive"
	for b in node ctl; do
		"$GO" -C "$WORK/before/src" build -ldflags "-X main.version=$before_desc" \
			-o "$WORK/before/bin/gostream-$b" "./cmd/$b" || die "cannot build ./cmd/$b of $BEFORE_REV"
	done
	BEFORE="$WORK/before/bin"
	BEFORE_NAME="$BEFORE_REV ($before_desc, built into $BEFORE)"
elif [ -n "$BEFORE" ]; then
	BEFORE_NAME="$BEFORE ($("$BEFORE/gostream-node" --version 2>&1 | head -n 1 || true))"
fi
if before; then
	build_bin[before]="$BEFORE"
fi

# ---------------------------------------------------------------- helpers

ctl() { "$BIN/gostream-ctl" --bootstrap "$BOOTSTRAP" --timeout 30s "$@"; }
nats_cli() { "$NATS_CLI" --no-context -s "$NATS_URL" "$@"; }

# nats_rate / nats_p50: from `nats bench` output on stdin, the msgs/sec (the
# aggregated line with several clients) and the P50 latency in ms.
nats_rate() {
	awk '/aggregated stats:/ { agg = $0 } / stats: / && !/aggregated/ { one = $0 }
		END { l = agg != "" ? agg : one; sub(/.*stats: */, "", l); sub(/ msgs\/sec.*/, "", l)
		      gsub(/,/, "", l); print l }'
}
nats_p50() {
	awk '/latencies per operation/ { agg = $0 } / stats: / && !/aggregated/ { one = $0 }
		END { l = agg != "" ? agg : one; if (!sub(/.*P50:? */, "", l)) exit 1
		      sub(/us.*/, "", l); gsub(/,/, "", l); printf "%.6f\n", l / 1000 }'
}

fmt_us() { awk -v v="$1" 'BEGIN { printf (v < 10 ? "%.2f" : "%.0f"), v }'; }

# CPU accounting, where /proc has it (Linux): child_secs sets CHILD_SECS,
# the CPU seconds of this script's finished children (the bench clients).
# (times runs in this shell, not in a command substitution, whose own
# children would be none.)
child_secs() {
	times >"$WORK/times"
	CHILD_SECS="$(awk 'NR == 2 { s = 0; for (i = 1; i <= 2; i++) { split($i, t, /[ms]/); s += t[1] * 60 + t[2] } print s }' "$WORK/times")"
}
# measure gs|nats CMD...: runs CMD and sets CPU_SRV and CPU_CLI, the CPU
# seconds that system's servers and the bench client spent meanwhile
# (empty without /proc).
measure() {
	local s0 c0
	local -a srv
	if [ "$1" = gs ]; then srv=("${gs_srv[@]}"); else srv=("${nats_srv[@]}"); fi
	shift
	# The runs before wrote gigabytes that the kernel may still be writing
	# back: a run that began meanwhile would pay for it in its fsyncs (in
	# its servers' CPU, too), more the later it comes. Every run starts
	# with nothing dirty.
	sync
	# A consumer reads what a run before wrote, from the page cache as a
	# consumer at the tail does: its cache is kept.
	case " $* " in
	*" consume "* | *" ordered "*) ;;
	*) drop_caches ;;
	esac
	s0="$(cpu_ticks "${srv[@]}")"
	child_secs
	c0=$CHILD_SECS
	"$@"
	CPU_SRV="" CPU_CLI=""
	if [ -r /proc/self/stat ]; then
		child_secs
		CPU_SRV="$(awk -v a="$s0" -v b="$(cpu_ticks "${srv[@]}")" -v k="$clk_tck" 'BEGIN { print (b - a) / k }')"
		CPU_CLI="$(awk -v a="$c0" -v b="$CHILD_SECS" 'BEGIN { print b - a }')"
	fi
}
# cpu_note SERIES RECORDS: adds the CPU per record (µs) of the last
# measured run, the servers' to SERIES.srv, the client's to SERIES.cli and
# their sum to SERIES, and sets CPU_NOTE, its text for the run's line.
cpu_note() {
	CPU_NOTE=""
	[ -n "$CPU_SRV" ] || return 0
	local srv cli
	srv="$(awk -v c="$CPU_SRV" -v n="$2" 'BEGIN { printf "%.3f", c * 1e6 / n }')"
	cli="$(awk -v c="$CPU_CLI" -v n="$2" 'BEGIN { printf "%.3f", c * 1e6 / n }')"
	add "$1.srv" "$srv"
	add "$1.cli" "$cli"
	add "$1" "$(awk -v a="$srv" -v b="$cli" 'BEGIN { printf "%.3f", a + b }')"
	# Two significant digits: a consume costs about a microsecond a record.
	CPU_NOTE="; CPU per record: servers $(fmt_us "$srv") us, client $(fmt_us "$cli") us"
}

# say_run R WHO TEXT: the line of run R, ending with the load average and
# CPU pressure (the last minute's, PSI) right after it, this run's own
# processes included: how busy the machine was.
say_run() {
	load_now
	say "run $1" "$2" "$3 [load $LOAD${PSI:+, CPU pressure $PSI%}]"
}

seq_no=0
next_log() {
	seq_no=$((seq_no + 1))
	LOG="$WORK/logs/$seq_no"
}
mkdir -p "$WORK/logs"

# ---------------------------------------------------------------- gostream nodes

# Each build's nodes, once start_gostream has started them: the native and
# Kafka addresses and the servers' pids (space separated).
declare -A build_bootstrap=() build_kafka=() build_srv=()

# use_build after|before: the build the runs that follow measure. Sets BIN
# (its gostream-node and gostream-ctl), BOOTSTRAP, KAFKA_BOOTSTRAP and
# gs_srv (its nodes, once started), S (the prefix of its series: none for
# after, "before:" for before) and TAG (the start of its run lines: none
# without a before build, else "before: " or "after: ").
use_build() {
	BIN="${build_bin[$1]}"
	BOOTSTRAP="${build_bootstrap[$1]:-}"
	KAFKA_BOOTSTRAP="${build_kafka[$1]:-}"
	read -ra gs_srv <<<"${build_srv[$1]:-}"
	S="" TAG=""
	if [ "$1" = before ]; then
		S="before:"
	fi
	if before; then
		TAG="$1: "
	fi
}

# start_gostream BUILD N DIR: N nodes of BUILD, node 1 the controller, each
# with its own data directory under $WORK/DIR (DIR-before for before) and
# a Kafka listener; then use_build BUILD.
start_gostream() {
	local build=$1 n=$2 dir=$WORK/$3 i rpc=() gossip=() http=() kafka=() join controller p pids=()
	use_build "$build"
	if [ "$build" = before ]; then
		dir+=-before
	fi
	for i in $(seq "$n"); do
		free_port p
		rpc+=("127.0.0.1:$p")
		free_port p
		gossip+=("127.0.0.1:$p")
		free_port p
		http+=("127.0.0.1:$p")
		free_port p
		kafka+=("127.0.0.1:$p")
	done
	controller="1@${rpc[0]}"
	join="$(IFS=,; echo "${gossip[*]}")"
	build_bootstrap[$build]="$(IFS=,; echo "${rpc[*]}")"
	build_kafka[$build]="$(IFS=,; echo "${kafka[*]}")"
	for i in $(seq "$n"); do
		mkdir -p "$dir/node$i"
		local args=(--id "$i" --data-dir "$dir/node$i" --listen "${rpc[$((i - 1))]}"
			--gossip "${gossip[$((i - 1))]}" --http "${http[$((i - 1))]}"
			--kafka-listen "${kafka[$((i - 1))]}")
		if [ "$n" -gt 1 ]; then
			args+=(--controller "$controller" --join "$join")
		fi
		local envs=()
		if [ "$n" -gt 1 ]; then
			envs=("${CLUSTER_ENV[@]}")
		fi
		env "${envs[@]}" "$BIN/gostream-node" "${args[@]}" >"$dir/node$i.log" 2>&1 </dev/null &
		bg_pids+=("$!")
		pids+=("$!")
		echo "  gostream-node $i${TAG:+ ($build)}: pid $!, rpc ${rpc[$((i - 1))]}, kafka ${kafka[$((i - 1))]}, data $dir/node$i"
	done
	build_srv[$build]="${pids[*]}"
	use_build "$build"
	local deadline=$((SECONDS + 60)) h
	for h in "${http[@]}"; do
		until "$BIN/gostream-ctl" health --http "$h" --timeout 1s >/dev/null 2>&1; do
			check_servers
			[ "$SECONDS" -lt "$deadline" ] || die "gostream-node at http://$h not healthy after 60s"
			sleep 0.2
		done
	done
	until [ "$(ctl broker list -o json 2>/dev/null | grep -o '"registered":"registered"' | wc -l)" -eq "$n" ]; do
		check_servers
		[ "$SECONDS" -lt "$deadline" ] || die "not all $n brokers registered with the controller after 60s"
		sleep 0.2
	done
}

# check_servers: dies, after the last lines of their logs, if a server has
# exited.
check_servers() {
	local pid
	for pid in "${bg_pids[@]}"; do
		if ! kill -0 "$pid" 2>/dev/null; then
			tail -n 20 "$WORK"/gostream-*/*.log "$WORK"/nats/*.log 2>/dev/null >&2 || true
			die "process $pid exited early (logs above)"
		fi
	done
}

# gs_topic NAME PARTITIONS RF: creates the topic and waits until every node
# knows it, so that a bench does not time the spreading of metadata.
gs_topic() {
	next_log
	run_logged "$LOG" ctl topic create "$1" --partitions "$2" --replication-factor "$3"
	gs_topic_known "$1" 1
}

# gs_drop_topic NAME: deletes a topic no later measurement reads, on the
# current build's nodes, and waits until no node knows it: its files go,
# and with them their pages in the page cache. On this VM a page cache
# that grows over a long run raises every later run's CPU per record two
# to three times (below); deleting what was measured keeps it small.
gs_drop_topic() {
	next_log
	run_logged "$LOG" ctl topic delete "$1"
	gs_topic_known "$1" 0
}

# gs_topic_known NAME 1|0: waits, 60 seconds at most, until every node of
# the current build knows topic NAME (1) or none does (0).
gs_topic_known() {
	local name=$1 want=$2 deadline=$((SECONDS + 60)) addr known
	for addr in ${BOOTSTRAP//,/ }; do
		while :; do
			known=0
			"$BIN/gostream-ctl" --bootstrap "$addr" topic describe "$name" -o json >/dev/null 2>&1 && known=1
			[ "$known" = "$want" ] && break
			[ "$SECONDS" -lt "$deadline" ] || die "broker $addr: topic $name $([ "$want" = 1 ] && echo "unknown" || echo "still known after its deletion") after 60s"
			sleep 0.05
		done
	done
}

# b5_reads N KIND: whether B5 will read B4's topic of N producers written
# by KIND (native or kafka), which must then be kept until it has.
b5_reads() {
	want B5 && [ "$1" = "$B5_n" ] && [ "$2" = "$B5_DATA" ]
}

# drop_caches, with DROP_CACHES=1, empties the page cache before a run
# that writes, where this user may (root). On this VM later rounds of a
# long run cost both builds two to three times the CPU per record of the
# first as the page cache grows (gs_drop_topic keeps it small without
# this); but a consumer then reads from the disk what a run before wrote
# (the other build's produce run, between, empties it), so it is off by
# default.
drop_caches() {
	if [ "${DROP_CACHES:-0}" != 0 ] && [ -w /proc/sys/vm/drop_caches ]; then
		echo 3 > /proc/sys/vm/drop_caches
	fi
}

# settle: before every bench run, flush the page cache and wait SETTLE
# seconds, so that one run's writes (and the disk's catching up on them) do
# not land in the next run, whichever system it is.
settle() {
	if [ "${SETTLE:-0}" != 0 ]; then
		sync
		sleep "$SETTLE"
	fi
}

# gs_bench produce|consume ARGS...: one run of gostream-ctl bench; sets
# RESULT to its JSON summary.
gs_bench() {
	settle
	next_log
	measure gs run_logged "$LOG" ctl bench "$@" -o json
	RESULT="$(cat "$LOG.out")"
}

# kafka_bench FLAGS... produce|consume: one run of scripts/kafkabench
# (franz-go) through the nodes' Kafka listeners; sets RESULT to its JSON
# summary, which has gostream-ctl bench's fields.
kafka_bench() {
	settle
	next_log
	measure gs run_logged "$LOG" "$WORK/kafkabench" -brokers "$KAFKA_BOOTSTRAP" -json "$@"
	RESULT="$(cat "$LOG.out")"
}

# ---------------------------------------------------------------- NATS servers

# start_nats_single: one nats-server with JetStream file storage, defaults.
start_nats_single() {
	local p
	free_port p
	mkdir -p "$WORK/nats"
	"$NATS_SERVER" -js -sd "$WORK/nats/single" -a 127.0.0.1 -p "$p" \
		>"$WORK/nats/single.log" 2>&1 </dev/null &
	bg_pids+=("$!")
	nats_srv=("$!")
	echo "  nats-server: pid $!, 127.0.0.1:$p, store $WORK/nats/single"
	NATS_URL="nats://127.0.0.1:$p"
	nats_wait 1
}

# start_nats_cluster: three nats-servers in one cluster, each fsyncing
# every write before acknowledging (sync_interval: always).
start_nats_cluster() {
	local i client=() route=() p routes
	nats_srv=()
	for i in 1 2 3; do
		free_port p
		client+=("$p")
		free_port p
		route+=("$p")
	done
	routes="$(for p in "${route[@]}"; do printf 'nats-route://127.0.0.1:%s, ' "$p"; done)"
	mkdir -p "$WORK/nats"
	for i in 1 2 3; do
		cat >"$WORK/nats/n$i.conf" <<-CONF
			server_name: n$i
			listen: 127.0.0.1:${client[$((i - 1))]}
			jetstream {
			  store_dir: "$WORK/nats/n$i"
			  sync_interval: always
			}
			cluster {
			  name: bench
			  listen: 127.0.0.1:${route[$((i - 1))]}
			  routes: [ ${routes%, } ]
			}
		CONF
		env "${CLUSTER_ENV[@]}" "$NATS_SERVER" -c "$WORK/nats/n$i.conf" >"$WORK/nats/n$i.log" 2>&1 </dev/null &
		bg_pids+=("$!")
		nats_srv+=("$!")
		echo "  nats-server n$i: pid $!, 127.0.0.1:${client[$((i - 1))]}, store $WORK/nats/n$i, sync_interval: always"
	done
	NATS_URL="nats://127.0.0.1:${client[0]},nats://127.0.0.1:${client[1]},nats://127.0.0.1:${client[2]}"
	nats_wait 3
}

# nats_wait REPLICAS: waits until a stream of REPLICAS file replicas takes
# writes (the cluster has elected its JetStream meta leader).
nats_wait() {
	local deadline=$((SECONDS + 60))
	until nats_cli bench js pub sync --create --purge --storage file --replicas "$1" \
		--msgs 100 --size 1KB --no-progress bench >/dev/null 2>&1; do
		check_servers
		[ "$SECONDS" -lt "$deadline" ] || die "NATS JetStream ($1 replicas) not ready after 60s"
		sleep 0.5
	done
}

# nats_bench ARGS...: one run of nats bench js; sets RESULT to its output.
nats_bench() {
	settle
	next_log
	measure nats run_logged "$LOG" nats_cli bench js "$@" --no-progress
	RESULT="$(cat "$LOG.out")"
}

# ---------------------------------------------------------------- header

node_fs="$(df -P "$WORK" | awk 'NR == 2 { print $1 }') ($(fstype "$WORK"))"
started=$SECONDS
if nats; then
	peers="nats-server $("$NATS_SERVER" --version 2>&1 | awk '{ print $NF }') ($NATS_SERVER), nats $("$NATS_CLI" --version 2>&1) ($NATS_CLI)"
else
	peers="NATS not run (NATS=0, or only B4 to B8), no ratios against it"
fi
load_now
start_load="$LOAD${PSI:+, CPU pressure $PSI%}"
cat <<HEAD
bench-compare: gostream $(git describe --always --dirty 2>/dev/null || echo dev) vs NATS JetStream
  $peers
  machine: $(nproc) cores, $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || uname -m); before starting: $(busy)
  NOTE: a small shared machine is noisy; absolute figures move between runs,
        so every figure is set against a baseline measured in the same run.
  data: $WORK on $node_fs, for every server and the fsync baseline
  runs: $RUNS, interleaved; 1 KiB records; pipelined runs $RECORDS records; measurements: $ONLY
HEAD
if before; then
	cat <<HEAD
  after: this build, ${build_bin[after]}; before: $BEFORE_NAME
         alternated in every round (before, after$(nats && echo ", NATS")), each on nodes of its own;
         each build's own gostream-ctl, and scripts/kafkabench of this tree for both
HEAD
fi

# best_of PREFIX: the producer count with the highest median of PREFIX.N.
best_of() {
	local n best="" bestv=-1 m
	for n in $PRODUCERS; do
		m="$(median "$1.$n")"
		if awk -v a="$m" -v b="$bestv" 'BEGIN { exit !(a > b) }'; then
			best=$n bestv=$m
		fi
	done
	echo "$best"
}
A1_gs_n="" A1_nats_n="" B1_gs_n="" B1_nats_n="" B4_kafka_n=""
read -r B5_n _ <<<"$PRODUCERS" # B5 reads B4's topics of the first producer count
# B8's kinds of member and its bound, set whatever runs: the settings line
# at the end names them.
B8_kinds="franz-go native"
[ -n "$KCAT" ] && B8_kinds="kcat $B8_kinds"
B8_bound="$(awk -v s="$TAKEOVER_SESSION_MS" -v h="$TAKEOVER_HEARTBEAT_MS" 'BEGIN { print (s + h) / 1000 + 0.5 }')"

# best_line PREFIX WHAT: the line naming each build's best producer count of
# PREFIX (gostream's, PREFIX.N) and NATS's (WHAT.N), if NATS ran.
best_line() {
	local line="  best:" b
	for b in $BUILDS; do
		use_build "$b"
		line+=" gostream${TAG:+ ${TAG%: }} with $(best_of "$S$1") producer(s),"
	done
	if nats; then
		line+=" NATS with $(best_of "$2") client(s)"
	fi
	echo "${line%,}"
}

# ================================================================ Part A

if part_a; then
echo
echo "== Part A: one node. gostream (fsync before every ack) vs nats-server -js, file storage, defaults (no fsync before ack)"
for b in $BUILDS; do
	start_gostream "$b" 1 gostream-one
done
nats && start_nats_single

echo "-- warm-up (not counted)"
for b in $BUILDS; do
	use_build "$b"
	gs_bench produce --topic warmup --records 20000 --record-size "$SIZE" --partitions "$PARTITIONS"
done
nats && nats_bench pub async --create --purge --storage file --replicas 1 --msgs 20000 --size 1KB bench

if want A1; then
echo "-- A1 pipelined produce, $RECORDS records; gostream topics with $PARTITIONS partitions, RF 1"
for r in $(seq "$RUNS"); do
	for n in $PRODUCERS; do
		topic="a1-r$r-p$n"
		for b in $BUILDS; do
			use_build "$b"
			gs_topic "$topic" "$PARTITIONS" 1
			gs_bench produce --topic "$topic" --records "$RECORDS" --record-size "$SIZE" --producers "$n"
			v="$(json_num records_per_sec <<<"$RESULT")"
			add "${S}A1.gs.$n" "$v"
			cpu_note "${S}A1.gs.cpu.$n" "$RECORDS"
			say_run "$r" gostream "$TAG$n producer(s), $PARTITIONS partitions: $(fmt_rate "$v") records/s$CPU_NOTE"
		done
		nats || continue
		nats_bench pub async --create --purge --storage file --replicas 1 --msgs "$RECORDS" --size 1KB --clients "$n" bench
		v="$(nats_rate <<<"$RESULT")"
		add "A1.nats.$n" "$v"
		cpu_note "A1.nats.cpu.$n" "$RECORDS"
		say_run "$r" NATS "$n client(s): $(fmt_rate "$v") msgs/s$CPU_NOTE"
	done
done
A1_gs_n="$(best_of A1.gs)"
nats && A1_nats_n="$(best_of A1.nats)"
for n in $PRODUCERS; do
	for b in $BUILDS; do
		use_build "$b"
		say median gostream "$TAG$n producer(s): $(fmt_rate "$(median "${S}A1.gs.$n")") records/s"
	done
	nats && say median NATS "$n client(s): $(fmt_rate "$(median "A1.nats.$n")") msgs/s"
done
best_line A1.gs A1.nats
fi

if want A2; then
echo "-- A2 consume everything produced above: gostream topic a1-rR-p$A1_gs_n ($RECORDS records)$(before && echo " on each build's nodes"); NATS the stream of the last publish ($RECORDS messages)"
for r in $(seq "$RUNS"); do
	for b in $BUILDS; do
		use_build "$b"
		gs_bench consume --topic "a1-r$r-p$A1_gs_n"
		v="$(json_num records_per_sec <<<"$RESULT")"
		add "${S}A2.gs" "$v"
		cpu_note "${S}A2.gs.cpu" "$(json_num records <<<"$RESULT")"
		say_run "$r" gostream "${TAG}consume: $(fmt_rate "$v") records/s ($(json_num records <<<"$RESULT") records)$CPU_NOTE"
	done
	nats || continue
	nats_bench ordered --msgs "$RECORDS"
	v="$(nats_rate <<<"$RESULT")"
	add A2.nats "$v"
	cpu_note A2.nats.cpu "$RECORDS"
	say_run "$r" NATS "ordered consumer: $(fmt_rate "$v") msgs/s$CPU_NOTE"
done
fi

if want A3; then
echo "-- A3 one synchronous producer, $SYNC_RECORDS records, p50 vs a plain 1 KiB write+fsync on the same filesystem"
mkdir -p "$WORK/fsync"
for r in $(seq "$RUNS"); do
	next_log
	run_logged "$LOG" "$WORK/fsyncbench" -dir "$WORK/fsync" -ops "$SYNC_RECORDS" -size "$SIZE"
	v="$(json_num p50_ms <"$LOG.out")"
	add A3.fsync "$v"
	say_run "$r" fsync "write 1 KiB + fsync: p50 $(fmt_ms "$v") ms (mean $(fmt_ms "$(json_num mean_ms <"$LOG.out")") ms)"
	topic="a3-r$r"
	for b in $BUILDS; do
		use_build "$b"
		gs_topic "$topic" 1 1
		gs_bench produce --topic "$topic" --sync --producers 1 --records "$SYNC_RECORDS" --record-size "$SIZE"
		v="$(json_num p50_ms <<<"$RESULT")"
		add "${S}A3.gs" "$v"
		say_run "$r" gostream "${TAG}sync produce: p50 $(fmt_ms "$v") ms, p99 $(fmt_ms "$(json_num p99_ms <<<"$RESULT")") ms"
	done
done
fi
stop_all
# Part A's data is read no more: its files, and their pages in the page
# cache, go before Part B.
rm -rf "$WORK"/gostream-one "$WORK"/gostream-one-before "$WORK"/nats/single
fi

# ================================================================ Part B

if part_b; then
echo
echo "== Part B: three nodes. gostream RF 3 vs NATS JetStream R3 with sync_interval: always (both fsync before ack)"
for b in $BUILDS; do
	start_gostream "$b" 3 gostream-three
done
nats_b && start_nats_cluster

echo "-- warm-up (not counted)"
for b in $BUILDS; do
	use_build "$b"
	gs_topic warmup "$CLUSTER_PARTITIONS" 3
	gs_bench produce --topic warmup --records 20000 --record-size "$SIZE"
	kafka_b && kafka_bench -topic warmup -records 20000 -size "$SIZE" produce
done
nats_b && nats_bench pub async --create --purge --storage file --replicas 3 --msgs 20000 --size 1KB bench

if want B1; then
echo "-- B1 pipelined produce, $RECORDS records; gostream topics with $CLUSTER_PARTITIONS partitions, RF 3; NATS R3"
for r in $(seq "$RUNS"); do
	for n in $PRODUCERS; do
		topic="b1-r$r-p$n"
		for b in $BUILDS; do
			use_build "$b"
			gs_topic "$topic" "$CLUSTER_PARTITIONS" 3
			gs_bench produce --topic "$topic" --records "$RECORDS" --record-size "$SIZE" --producers "$n"
			v="$(json_num records_per_sec <<<"$RESULT")"
			add "${S}B1.gs.$n" "$v"
			cpu_note "${S}B1.gs.cpu.$n" "$RECORDS"
			say_run "$r" gostream "$TAG$n producer(s), $CLUSTER_PARTITIONS partitions RF 3: $(fmt_rate "$v") records/s$CPU_NOTE"
			gs_drop_topic "$topic"
		done
		nats || continue
		nats_bench pub async --create --purge --storage file --replicas 3 --msgs "$RECORDS" --size 1KB --clients "$n" bench
		v="$(nats_rate <<<"$RESULT")"
		add "B1.nats.$n" "$v"
		cpu_note "B1.nats.cpu.$n" "$RECORDS"
		say_run "$r" NATS "$n client(s), R3: $(fmt_rate "$v") msgs/s$CPU_NOTE"
	done
done
B1_gs_n="$(best_of B1.gs)"
nats && B1_nats_n="$(best_of B1.nats)"
for n in $PRODUCERS; do
	for b in $BUILDS; do
		use_build "$b"
		say median gostream "$TAG$n producer(s): $(fmt_rate "$(median "${S}B1.gs.$n")") records/s"
	done
	nats && say median NATS "$n client(s): $(fmt_rate "$(median "B1.nats.$n")") msgs/s"
done
best_line B1.gs B1.nats
fi

if want B2; then
echo "-- B2 one synchronous producer, $SYNC_RECORDS records; gostream topic with 1 partition, RF 3; NATS R3"
for r in $(seq "$RUNS"); do
	topic="b2-r$r"
	for b in $BUILDS; do
		use_build "$b"
		gs_topic "$topic" 1 3
		gs_bench produce --topic "$topic" --sync --producers 1 --records "$SYNC_RECORDS" --record-size "$SIZE"
		v="$(json_num p50_ms <<<"$RESULT")"
		add "${S}B2.gs" "$v"
		say_run "$r" gostream "${TAG}sync produce: p50 $(fmt_ms "$v") ms, p99 $(fmt_ms "$(json_num p99_ms <<<"$RESULT")") ms"
		gs_drop_topic "$topic"
	done
	nats || continue
	nats_bench pub sync --create --purge --storage file --replicas 3 --msgs "$SYNC_RECORDS" --size 1KB bench
	v="$(nats_p50 <<<"$RESULT")"
	add B2.nats "$v"
	say_run "$r" NATS "sync publish: p50 $(fmt_ms "$v") ms"
done
fi

if want B3; then
echo "-- B3 16 synchronous producers, $SYNC16_RECORDS records in all; gostream topic with $SYNC16_PARTITIONS partition(s), RF 3; NATS R3, 16 clients"
for r in $(seq "$RUNS"); do
	topic="b3-r$r"
	for b in $BUILDS; do
		use_build "$b"
		gs_topic "$topic" "$SYNC16_PARTITIONS" 3
		gs_bench produce --topic "$topic" --sync --producers 16 --records "$SYNC16_RECORDS" --record-size "$SIZE"
		v="$(json_num records_per_sec <<<"$RESULT")"
		add "${S}B3.gs" "$v"
		cpu_note "${S}B3.gs.cpu" "$SYNC16_RECORDS"
		say_run "$r" gostream "${TAG}16 sync producers: $(fmt_rate "$v") records/s, p50 $(fmt_ms "$(json_num p50_ms <<<"$RESULT")") ms$CPU_NOTE"
		gs_drop_topic "$topic"
	done
	nats || continue
	nats_bench pub sync --create --purge --storage file --replicas 3 --msgs "$SYNC16_RECORDS" --size 1KB --clients 16 bench
	v="$(nats_rate <<<"$RESULT")"
	add B3.nats "$v"
	cpu_note B3.nats.cpu "$SYNC16_RECORDS"
	say_run "$r" NATS "16 sync clients: $(fmt_rate "$v") msgs/s, p50 $(fmt_ms "$(nats_p50 <<<"$RESULT")") ms$CPU_NOTE"
done
fi

if want B4; then
echo "-- B4 pipelined produce, $RECORDS records, through the Kafka listeners (franz-go, scripts/kafkabench) vs our client (gostream-ctl bench produce: linger 5ms, batches up to 256 KiB, 5 in flight per partition); topics with $CLUSTER_PARTITIONS partitions, RF 3"
for r in $(seq "$RUNS"); do
	for n in $PRODUCERS; do
		for b in $BUILDS; do
			use_build "$b"
			topic="b4-r$r-p$n-native"
			gs_topic "$topic" "$CLUSTER_PARTITIONS" 3
			gs_bench produce --topic "$topic" --records "$RECORDS" --record-size "$SIZE" --producers "$n"
			v="$(json_num records_per_sec <<<"$RESULT")"
			add "${S}B4.native.$n" "$v"
			cpu_note "${S}B4.native.cpu.$n" "$RECORDS"
			say_run "$r" native "$TAG$n producer(s): $(fmt_rate "$v") records/s, p50 $(fmt_ms "$(json_num p50_ms <<<"$RESULT")") ms$CPU_NOTE"
			b5_reads "$n" native || gs_drop_topic "$topic"
			topic="b4-r$r-p$n-kafka"
			gs_topic "$topic" "$CLUSTER_PARTITIONS" 3
			kafka_bench -topic "$topic" -records "$RECORDS" -size "$SIZE" -producers "$n" produce
			if [ -z "${kafka_settings_said:-}" ]; then
				say "" franz-go "settings: $(sed -n 's/.*"settings":"\([^"]*\)".*/\1/p' <<<"$RESULT")"
				kafka_settings_said=1
			fi
			v="$(json_num records_per_sec <<<"$RESULT")"
			add "${S}B4.kafka.$n" "$v"
			cpu_note "${S}B4.kafka.cpu.$n" "$RECORDS"
			say_run "$r" franz-go "$TAG$n producer(s): $(fmt_rate "$v") records/s, p50 $(fmt_ms "$(json_num p50_ms <<<"$RESULT")") ms$CPU_NOTE"
			b5_reads "$n" kafka || gs_drop_topic "$topic"
		done
	done
done
for n in $PRODUCERS; do
	for b in $BUILDS; do
		use_build "$b"
		say median native "$TAG$n producer(s): $(fmt_rate "$(median "${S}B4.native.$n")") records/s"
		say median franz-go "$TAG$n producer(s): $(fmt_rate "$(median "${S}B4.kafka.$n")") records/s"
	done
done
B4_kafka_n="$(best_of B4.kafka)"
fi

if want B5; then
echo "-- B5 consume each run's B4 topic written by $([ "$B5_DATA" = kafka ] && echo franz-go || echo gostream-ctl) with $B5_n producer(s) ($RECORDS records, all partitions at once): gostream-ctl bench consume vs franz-go"
for r in $(seq "$RUNS"); do
	topic="b4-r$r-p$B5_n-$B5_DATA"
	for b in $BUILDS; do
		use_build "$b"
		gs_bench consume --topic "$topic"
		v="$(json_num records_per_sec <<<"$RESULT")"
		add "${S}B5.native" "$v"
		cpu_note "${S}B5.native.cpu" "$(json_num records <<<"$RESULT")"
		say_run "$r" native "${TAG}consume: $(fmt_rate "$v") records/s ($(json_num records <<<"$RESULT") records)$CPU_NOTE"
		kafka_bench -topic "$topic" consume
		v="$(json_num records_per_sec <<<"$RESULT")"
		add "${S}B5.kafka" "$v"
		cpu_note "${S}B5.kafka.cpu" "$(json_num records <<<"$RESULT")"
		say_run "$r" franz-go "${TAG}consume: $(fmt_rate "$v") records/s ($(json_num records <<<"$RESULT") records)$CPU_NOTE"
		gs_drop_topic "$topic"
	done
done
fi

# from_first: the records/s of the last group read from its first records
# on (records / (seconds - FIRST)), and its join (FIRST) in ms.
from_first() {
	awk -v n="$(json_num records <<<"$RESULT")" -v s="$(json_num seconds <<<"$RESULT")" -v f="$1" \
		'BEGIN { if (s - f > 0) printf "%.0f", n / (s - f); else print "nan" }'
}

if want B6; then
echo "-- B6 a group of 3 members reading a topic of 6 partitions, RF 3, $GROUP_RECORDS records written by $([ "$B6_DATA" = kafka ] && echo franz-go || echo gostream-ctl), from the log start; a new group each run: gostream-ctl bench consume --group G --members 3 vs franz-go (kafkabench consume -group G -members 3); records/s from the first records to the last (the join apart)"
for b in $BUILDS; do
	use_build "$b"
	gs_topic b6 6 3
	if [ "$B6_DATA" = kafka ]; then
		kafka_bench -topic b6 -records "$GROUP_RECORDS" -size "$SIZE" produce
	else
		gs_bench produce --topic b6 --records "$GROUP_RECORDS" --record-size "$SIZE"
	fi
done
for r in $(seq "$RUNS"); do
	for b in $BUILDS; do
		use_build "$b"
		gs_bench consume --topic b6 --group "b6-r$r-native" --members 3
		first="$(sed -n 's/.*first records after \([0-9.]*\) s.*/\1/p' "$LOG.err")"
		per="$(sed -n 's/.*records counted per member: \([0-9, ]*\);.*/\1/p' "$LOG.err")"
		v="$(from_first "${first:-0}")"
		add "${S}B6.native" "$v"
		cpu_note "${S}B6.native.cpu" "$(json_num records <<<"$RESULT")"
		say_run "$r" native "${TAG}group of 3: $(fmt_rate "$v") records/s from the first records ($(json_num records <<<"$RESULT") records; join $(fmt_ms "${first:-0}") s; per member: $per)$CPU_NOTE"
		kafka_bench -topic b6 -group "b6-r$r-kafka" -members 3 consume
		first="$(json_num first_records_s <<<"$RESULT")"
		per="$(sed -n 's/.*"member_records":\[\([0-9,]*\)\].*/\1/p' <<<"$RESULT")"
		v="$(from_first "${first:-0}")"
		add "${S}B6.kafka" "$v"
		cpu_note "${S}B6.kafka.cpu" "$(json_num records <<<"$RESULT")"
		say_run "$r" franz-go "${TAG}group of 3: $(fmt_rate "$v") records/s from the first records ($(json_num records <<<"$RESULT") records; join $(fmt_ms "${first:-0}") s; per member: ${per//,/, })$CPU_NOTE"
	done
done
fi

if want B7; then
echo "-- B7 16 synchronous committers, $COMMITS commits in all, each its own group and its own partition of a topic of 16 partitions, RF 3, committing from outside any membership: gostream-ctl bench commit vs franz-go (kafkabench commit: OffsetCommit with generation -1)"
for b in $BUILDS; do
	use_build "$b"
	gs_topic b7 16 3
done
for r in $(seq "$RUNS"); do
	for b in $BUILDS; do
		use_build "$b"
		gs_bench commit --topic b7 --committers 16 --commits "$COMMITS" --group-prefix "b7-r$r-native"
		v="$(json_num records_per_sec <<<"$RESULT")"
		add "${S}B7.native" "$v"
		cpu_note "${S}B7.native.cpu" "$COMMITS"
		say_run "$r" native "${TAG}16 committers: $(fmt_rate "$v") commits/s, p50 $(fmt_ms "$(json_num p50_ms <<<"$RESULT")") ms$CPU_NOTE"
		kafka_bench -topic b7 -committers 16 -commits "$COMMITS" -group-prefix "b7-r$r-kafka" commit
		v="$(json_num records_per_sec <<<"$RESULT")"
		add "${S}B7.kafka" "$v"
		cpu_note "${S}B7.kafka.cpu" "$COMMITS"
		say_run "$r" franz-go "${TAG}16 committers: $(fmt_rate "$v") commits/s, p50 $(fmt_ms "$(json_num p50_ms <<<"$RESULT")") ms$CPU_NOTE"
		kafka_bench -topic b7 -committers 16 -commits "$COMMITS" -group-prefix "b7-r$r-kafka-own" -client-per-committer commit
		v="$(json_num records_per_sec <<<"$RESULT")"
		add "${S}B7.kafka.own" "$v"
		say_run "$r" franz-go "${TAG}16 committers, a client each: $(fmt_rate "$v") commits/s, p50 $(fmt_ms "$(json_num p50_ms <<<"$RESULT")") ms"
	done
done
fi

if want B8; then
echo "-- B8 kill -9 of one of 3 group members reading a topic of 6 partitions, RF 3, while $TAKEOVER_RATE records/s are written; the time to the first record of one of its partitions read by another member (kafkabench takeover); members: $B8_kinds; session timeout $TAKEOVER_SESSION_MS ms, heartbeat interval $TAKEOVER_HEARTBEAT_MS ms; bound: session + heartbeat + 0.5 s for a fetch = $B8_bound s"
[ -n "$KCAT" ] || echo "  (kcat not found: no kcat members; KCAT=path or apt-get install kcat)"
for r in $(seq "$RUNS"); do
	for kind in $B8_kinds; do
		topic="b8-r$r-$kind"
		for b in $BUILDS; do
			use_build "$b"
			gs_topic "$topic" 6 3
			kafka_bench -topic "$topic" -group "$topic" -member "$kind" -kcat "${KCAT:-kcat}" -ctl "$BIN/gostream-ctl" \
				-native-bootstrap "$BOOTSTRAP" -session "${TAKEOVER_SESSION_MS}ms" -heartbeat "${TAKEOVER_HEARTBEAT_MS}ms" \
				-rate "$TAKEOVER_RATE" takeover
			v="$(json_num takeover_s <<<"$RESULT")"
			add "${S}B8.$kind" "$v"
			say_run "$r" "$kind" "${TAG}kill -9 to takeover: $(fmt_ms "$v") s (all of its partitions $(fmt_ms "$(json_num all_s <<<"$RESULT")") s; heartbeat $(json_num heartbeat_ms <<<"$RESULT") ms; steady after $(fmt_ms "$(json_num steady_s <<<"$RESULT")") s)"
		done
	done
done
for kind in $B8_kinds; do
	for b in $BUILDS; do
		use_build "$b"
		say median "$kind" "${TAG}kill -9 to takeover: $(fmt_ms "$(median "${S}B8.$kind")") s"
	done
done
add B8.bound "$B8_bound"
fi
stop_all
fi

# ================================================================ tables

missed=0
# The table's columns: a row's median figures, and beneath them (RUNS > 1)
# the min-max of the runs behind each.
row_fmt='%-48s %17s %17s %7s %12s  %s\n'
span_fmt='%-48s %17s %17s\n'

# num UNIT V: V as the table prints a figure of UNIT (rate, ms, s, us).
num() {
	case $1 in
	ms | s) fmt_ms "$2" ;;
	us) fmt_us "$2" ;;
	*) fmt_rate "$2" ;;
	esac
}
# cell UNIT TEXT: TEXT (a figure or a min-max) with UNIT's suffix.
cell() {
	case $1 in
	ms) echo "$2 ms" ;;
	s) echo "$2 s" ;;
	us) echo "$2 us" ;;
	*) echo "$2/s" ;;
	esac
}
# span UNIT SERIES: the min-max of SERIES's runs, its value if they are one,
# - if it has none.
span() {
	local lo hi
	read -r lo hi <<<"$(spread "$2")"
	if [ "$lo" = nan ]; then
		echo -
	elif [ "$(num "$1" "$lo")" = "$(num "$1" "$hi")" ]; then
		cell "$1" "$(num "$1" "$lo")"
	else
		cell "$1" "$(num "$1" "$lo")-$(num "$1" "$hi")"
	fi
}

# row METRIC UNIT OURS BASE MODE TARGET: the medians of the series OURS and
# BASE, their ratio and, beneath, their min-max. MODE ge means ours/base >=
# TARGET, le means ours/base <= TARGET, ref means no target. A row whose
# measurement was not run (ONLY) is left out; one whose baseline was not
# run (NATS=0) shows ours alone.
row() {
	local metric=$1 unit=$2 ours base mode=$5 target=$6 ratio verdict tgt
	ours="$(median "$3")" base="$(median "$4")"
	[ "$ours" = nan ] && return
	if [ "$base" = nan ]; then
		mode=none
	fi
	ratio="-"
	[ "$base" = nan ] || ratio="$(awk -v a="$ours" -v b="$base" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }')"
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
	none)
		tgt="(not run)"
		verdict="-"
		;;
	esac
	[ "$verdict" = MISSED ] && missed=1
	ours="$(cell "$unit" "$(num "$unit" "$ours")")"
	if [ "$base" = nan ]; then
		base=-
	else
		base="$(cell "$unit" "$(num "$unit" "$base")")"
	fi
	# shellcheck disable=SC2059
	printf "$row_fmt" "$metric" "$ours" "$base" "$ratio" "$tgt" "$verdict"
	if [ "$RUNS" -gt 1 ]; then
		# shellcheck disable=SC2059
		printf "$span_fmt" "  min-max" "$(span "$unit" "$3")" "$(span "$unit" "$4")"
	fi
}

load_now
end_load="$LOAD${PSI:+, CPU pressure $PSI%}"
echo
echo "== Results ($(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, shared and noisy): medians of $RUNS interleaved runs$([ "$RUNS" -gt 1 ] && echo ", min-max beneath")"
echo "   ratio = gostream / baseline; the load average and CPU pressure count this run's own processes:"
echo "   load average at the start: $start_load; at the end: $end_load"
# shellcheck disable=SC2059
printf "$row_fmt" metric gostream baseline ratio target result
row "A1 1 node produce vs NATS R1 async (rec/s)" rate "A1.gs.$A1_gs_n" "A1.nats.$A1_nats_n" ge 1.0
row "A2 1 node consume vs our produce (rec/s)" rate A2.gs "A1.gs.$A1_gs_n" ge 4.0
row "A2 1 node consume vs NATS ordered (rec/s)" rate A2.gs A2.nats ref 0
row "A3 1 node sync p50 vs write+fsync p50" ms A3.gs A3.fsync le 1.5
row "B1 3 nodes produce RF3 vs NATS R3 async (rec/s)" rate "B1.gs.$B1_gs_n" "B1.nats.$B1_nats_n" ge 3.0
row "B2 3 nodes sync p50 vs NATS R3 sync p50" ms B2.gs B2.nats le 0.5
row "B3 3 nodes 16 sync producers vs NATS (rec/s)" rate B3.gs B3.nats ge 3.0
row "A1 CPU per record, servers + client (us)" us "A1.gs.cpu.$A1_gs_n" "A1.nats.cpu.$A1_nats_n" ref 0
row "A2 CPU per record, servers + client (us)" us A2.gs.cpu A2.nats.cpu ref 0
row "B1 CPU per record, servers + client (us)" us "B1.gs.cpu.$B1_gs_n" "B1.nats.cpu.$B1_nats_n" le 0.35
row "B3 CPU per record, servers + client (us)" us B3.gs.cpu B3.nats.cpu ref 0
# B4 and B5: the gostream column is franz-go through the Kafka listeners,
# the baseline our own client (gostream-ctl bench) on the same cluster.
for n in $PRODUCERS; do
	row "B4 franz-go vs native produce, $n prod (rec/s)" rate "B4.kafka.$n" "B4.native.$n" ge 1.0
done
row "B5 franz-go vs native consume (rec/s)" rate B5.kafka B5.native ge 1.0
for n in $PRODUCERS; do
	row "B4 CPU/record franz-go vs native, $n prod (us)" us "B4.kafka.cpu.$n" "B4.native.cpu.$n" ref 0
done
row "B5 CPU/record franz-go vs native consume (us)" us B5.kafka.cpu B5.native.cpu ref 0
if want B1 && nats; then
	row "B4 franz-go produce vs NATS R3 async (rec/s)" rate "B4.kafka.$B4_kafka_n" "B1.nats.$B1_nats_n" ref 0
fi
# B6 and B7: franz-go's groups against ours; B8: each kind of member's
# takeover against the bound (session + heartbeat + 0.5 s).
row "B6 franz-go vs native group of 3 consume (rec/s)" rate B6.kafka B6.native ge 0.9
row "B6 CPU/record franz-go vs native group (us)" us B6.kafka.cpu B6.native.cpu ref 0
row "B7 franz-go vs native 16 committers (commits/s)" rate B7.kafka B7.native ge 0.8
row "B7 franz-go, a client each, vs native (commits/s)" rate B7.kafka.own B7.native ref 0
row "B7 CPU/commit franz-go vs native (us)" us B7.kafka.cpu B7.native.cpu ref 0
if want B8; then
	row "B8 kill -9 to takeover, kcat vs bound (s)" s B8.kcat B8.bound le 1.0
	row "B8 kill -9 to takeover, franz-go vs bound (s)" s B8.franz-go B8.bound le 1.0
	row "B8 kill -9 to takeover, native vs bound (s)" s B8.native B8.bound ref 0
fi

# After vs before: every gostream figure of this build against the before
# build's, each producer count apart (like for like), CPU per record as the
# sum of servers and client (the CPU table below has both).
if before; then
echo
echo "== After vs before, alternated in every round; ratio = after / before of the medians"
echo "   after: this build; before: $BEFORE_NAME"
echo "   above 1 is better for /s figures, below 1 for ms, s and us (latency, takeover, CPU per record)"
# shellcheck disable=SC2059
printf "$row_fmt" metric after before ratio target result
for n in $PRODUCERS; do
	row "A1 1 node produce, $n prod (rec/s)" rate "A1.gs.$n" "before:A1.gs.$n" ref 0
	row "A1 CPU/record servers + client, $n prod (us)" us "A1.gs.cpu.$n" "before:A1.gs.cpu.$n" ref 0
done
row "A2 1 node consume (rec/s)" rate A2.gs before:A2.gs ref 0
row "A2 CPU/record servers + client (us)" us A2.gs.cpu before:A2.gs.cpu ref 0
row "A3 1 node sync produce p50" ms A3.gs before:A3.gs ref 0
for n in $PRODUCERS; do
	row "B1 3 nodes produce RF3, $n prod (rec/s)" rate "B1.gs.$n" "before:B1.gs.$n" ref 0
	row "B1 CPU/record servers + client, $n prod (us)" us "B1.gs.cpu.$n" "before:B1.gs.cpu.$n" le 0.5
done
row "B2 3 nodes sync produce p50" ms B2.gs before:B2.gs ref 0
row "B3 3 nodes 16 sync producers (rec/s)" rate B3.gs before:B3.gs ref 0
row "B3 CPU/record servers + client (us)" us B3.gs.cpu before:B3.gs.cpu ref 0
for n in $PRODUCERS; do
	row "B4 native produce, $n prod (rec/s)" rate "B4.native.$n" "before:B4.native.$n" ref 0
	row "B4 franz-go produce, $n prod (rec/s)" rate "B4.kafka.$n" "before:B4.kafka.$n" ref 0
	row "B4 CPU/record native, $n prod (us)" us "B4.native.cpu.$n" "before:B4.native.cpu.$n" ref 0
	row "B4 CPU/record franz-go, $n prod (us)" us "B4.kafka.cpu.$n" "before:B4.kafka.cpu.$n" ref 0
done
row "B5 native consume (rec/s)" rate B5.native before:B5.native ref 0
row "B5 franz-go consume (rec/s)" rate B5.kafka before:B5.kafka ref 0
row "B5 CPU/record native (us)" us B5.native.cpu before:B5.native.cpu ref 0
row "B5 CPU/record franz-go (us)" us B5.kafka.cpu before:B5.kafka.cpu ref 0
row "B6 native group of 3 consume (rec/s)" rate B6.native before:B6.native ref 0
row "B6 franz-go group of 3 consume (rec/s)" rate B6.kafka before:B6.kafka ref 0
row "B6 CPU/record native (us)" us B6.native.cpu before:B6.native.cpu ref 0
row "B6 CPU/record franz-go (us)" us B6.kafka.cpu before:B6.kafka.cpu ref 0
row "B7 native 16 committers (commits/s)" rate B7.native before:B7.native ref 0
row "B7 franz-go 16 committers (commits/s)" rate B7.kafka before:B7.kafka ref 0
row "B7 franz-go, a client each (commits/s)" rate B7.kafka.own before:B7.kafka.own ref 0
row "B7 CPU/commit native (us)" us B7.native.cpu before:B7.native.cpu ref 0
row "B7 CPU/commit franz-go (us)" us B7.kafka.cpu before:B7.kafka.cpu ref 0
row "B8 kill -9 to takeover, kcat (s)" s B8.kcat before:B8.kcat ref 0
row "B8 kill -9 to takeover, franz-go (s)" s B8.franz-go before:B8.franz-go ref 0
row "B8 kill -9 to takeover, native (s)" s B8.native before:B8.native ref 0
fi

# The CPU table: for each figure with CPU per record, each side's servers,
# client and sum, as median (min-max) of its runs.
cpu_fmt='%-24s %-15s %22s %22s %22s\n'
# mmm SERIES: "MEDIAN (MIN-MAX)" of SERIES in µs, the median alone if the
# runs are one value.
mmm() {
	local lo hi med
	med="$(fmt_us "$(median "$1")")"
	read -r lo hi <<<"$(spread "$1")"
	lo="$(fmt_us "$lo")" hi="$(fmt_us "$hi")"
	if [ "$lo" = "$hi" ]; then
		echo "$med"
	else
		echo "$med ($lo-$hi)"
	fi
}
# cpu_line FIGURE SIDE SERIES: the line of one side of FIGURE, if it ran.
cpu_line() {
	[ "$(median "$3")" = nan ] && return
	# shellcheck disable=SC2059
	printf "$cpu_fmt" "$1" "$2" "$(mmm "$3.srv")" "$(mmm "$3.cli")" "$(mmm "$3")"
}
# cpu_builds FIGURE WHO SERIES: cpu_line of each gostream build (WHO
# before, WHO after) or, without a before build, of this one (WHO).
cpu_builds() {
	if before; then
		cpu_line "$1" "$2 before" "before:$3"
		cpu_line "$1" "$2 after" "$3"
	else
		cpu_line "$1" "$2" "$3"
	fi
}
if [ -n "${CPU_SRV:-}" ] && { want A1 || want B1 || want B3 || want B4 || want B6 || want B7; }; then
echo
echo "== CPU per record (us, user + system time over each run): median (min-max) of the runs;"
echo "   servers: the nodes' (or nats-servers'), client: the bench process's (gostream-ctl, kafkabench or nats)"
# shellcheck disable=SC2059
printf "$cpu_fmt" figure side servers client "servers + client"
for n in $PRODUCERS; do
	cpu_builds "A1 produce, $n prod" gostream "A1.gs.cpu.$n"
	cpu_line "A1 produce, $n prod" NATS "A1.nats.cpu.$n"
done
cpu_builds "A2 consume" gostream A2.gs.cpu
cpu_line "A2 consume" NATS A2.nats.cpu
for n in $PRODUCERS; do
	cpu_builds "B1 produce RF3, $n prod" gostream "B1.gs.cpu.$n"
	cpu_line "B1 produce RF3, $n prod" NATS "B1.nats.cpu.$n"
done
cpu_builds "B3 16 sync producers" gostream B3.gs.cpu
cpu_line "B3 16 sync producers" NATS B3.nats.cpu
for n in $PRODUCERS; do
	cpu_builds "B4 produce, $n prod" native "B4.native.cpu.$n"
	cpu_builds "B4 produce, $n prod" franz-go "B4.kafka.cpu.$n"
done
cpu_builds "B5 consume" native B5.native.cpu
cpu_builds "B5 consume" franz-go B5.kafka.cpu
cpu_builds "B6 group of 3" native B6.native.cpu
cpu_builds "B6 group of 3" franz-go B6.kafka.cpu
cpu_builds "B7 commit (per commit)" native B7.native.cpu
cpu_builds "B7 commit (per commit)" franz-go B7.kafka.cpu
fi

echo "settings: A1 gostream ${A1_gs_n:--} producer(s) x $PARTITIONS partitions, NATS ${A1_nats_n:--} client(s);" \
	"B1 gostream ${B1_gs_n:--} producer(s) x $CLUSTER_PARTITIONS partitions, NATS ${B1_nats_n:--} client(s);" \
	"B3 16 producers x $SYNC16_PARTITIONS partition(s); B4 $PRODUCERS producer(s) x $CLUSTER_PARTITIONS partitions" \
	"(franz-go's best ${B4_kafka_n:--}); B5 reads B4's $B5_DATA topics of $B5_n producer(s); $RECORDS / $SYNC_RECORDS / $SYNC16_RECORDS records;" \
	"B6 $GROUP_RECORDS records ($B6_DATA) x 6 partitions, 3 members; B7 16 committers, $COMMITS commits;" \
	"B8 members ${B8_kinds// /, }, session $TAKEOVER_SESSION_MS ms, heartbeat $TAKEOVER_HEARTBEAT_MS ms, $TAKEOVER_RATE records/s;" \
	"cluster servers' GOMAXPROCS ${CLUSTER_GOMAXPROCS:-default ($(nproc))}"
echo "took $((SECONDS - started)) s"
if [ "$missed" = 1 ]; then
	echo "bench-compare: at least one target MISSED"
	exit 1
fi
if [ "$ONLY" != "$ALL" ] || ! nats; then
	echo "bench-compare: every target run MET (not all were run)"
	exit 0
fi
echo "bench-compare: every target MET"
