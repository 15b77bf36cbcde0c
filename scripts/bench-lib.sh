# shellcheck shell=bash
# What the benchmark scripts (scripts/bench-*.sh) do alike, sourced by
# each after it has changed to the repository's root:
#
#   SCRIPT=bench-move
#   . scripts/bench-lib.sh
#
# SCRIPT, the script's name, starts every message printed here and names
# its work directory. Sourcing defines the functions below, sets
# WORK_PARENT and clk_tck, and declares node_pid, bg_pids, values, rpc,
# gossip and http empty; it starts no process and writes nothing. Besides
# SCRIPT the functions read TMPDIR, KEEP, GO, BIN, DIR and NODE_FLAGS as
# said below, and wait_ready calls the script's own ctl (gostream-ctl
# against BOOTSTRAP, with the script's timeout).
#
# Failing
#   die MSG...             prints "SCRIPT: MSG" on stderr and exits 2, the
#                          scripts' status for a run that failed.
#   run_logged LOG CMD...  runs CMD with stdout to LOG.out and stderr to
#                          LOG.err; if it fails, prints the command and the
#                          last lines of both and exits 2.
#
# The work directory and exit
#   WORK_PARENT            where the work directory goes: $TMPDIR (default
#                          /tmp), or the repository when that is a tmpfs,
#                          where fsync costs nothing and the data would
#                          stay in memory.
#   make_work              creates WORK, WORK_PARENT/.SCRIPT.XXXXXX, and
#                          sets the traps: cleanup at exit, and exit 130 on
#                          SIGINT or SIGTERM (cleanup then runs too).
#   cleanup                stop_all, then removes WORK, or with KEEP=1
#                          keeps it and says where; a second Ctrl-C (or
#                          SIGTERM) while it runs is ignored, so that it
#                          runs to the end (at most 10 s and a SIGKILL).
#   fstype PATH            the type of the filesystem PATH is on (ext4,
#                          tmpfs).
#
# Processes the script starts, all stopped at exit
#   node_pid               an associative array, node id -> pid, of the
#                          cluster's gostream-nodes (start_cluster fills it;
#                          a script that kills a node unsets its entry).
#   bg_pids                every other process started in the background:
#                          helpers (producers, pollers, readers) or servers
#                          that are not a cluster's nodes.
#   stop_all               SIGTERM to every process of bg_pids and node_pid,
#                          then waits for each, SIGKILL to one still running
#                          10 seconds after; empties both.
#   forget PID             drops PID, a helper that has ended and been
#                          waited for, from bg_pids.
#   stop_bg PID            stops the helper PID (SIGTERM), waits for it and
#                          forgets it.
#   check_alive            dies, after the last lines of $DIR/node*.log, if
#                          a node of node_pid has exited.
#   cpu_ticks PID...       the CPU time those processes have used so far,
#                          user + system, in clock ticks (clk_tck a second;
#                          0 for one /proc does not show).
#
# Binaries, ports and a cluster
#   build_binaries         builds ./cmd/node and ./cmd/ctl with $GO into
#                          BIN=$WORK/bin (gostream-node, gostream-ctl),
#                          saying so; dies if either fails.
#   port_in_use PORT       whether something listens on PORT (TCP or UDP;
#                          with ss, else a TCP connect to 127.0.0.1).
#   free_port VAR          sets VAR to a port in 20000-31999 with no
#                          listener, not handed out before in this run.
#   start_cluster DIR [N]  a fresh three-node cluster, its data and its
#                          logs (nodeI.log) under DIR: sets DIR and, from
#                          free ports, rpc, gossip and http (arrays by node
#                          id), JOIN, BOOTSTRAP and CONTROLLER (node 1; with
#                          N=3 all three are controller candidates); starts
#                          the nodes with NODE_FLAGS (an array, if set)
#                          added, and waits for wait_ready.
#   start_node I           starts node I of the cluster again, with the
#                          addresses and data start_cluster gave it.
#   wait_ready             waits up to 60 s for every node to answer health
#                          and for the controller to have all three
#                          registered (through the script's ctl, which
#                          reads BOOTSTRAP); dies if not.
#
# Figures
#   values                 an associative array, series -> its values,
#                          space separated.
#   add SERIES VALUE       adds VALUE to SERIES.
#   median SERIES          the median of SERIES, nan if it is empty.
#   spread SERIES          "MIN MAX" of SERIES, "nan nan" if it is empty.
#   ratio A B              A / B with two decimals, nan if B is not > 0.
#   count PATTERN          how many times PATTERN occurs on stdin (0 is no
#                          error).
#   json_num FIELD         the number FIELD of the one-line JSON on stdin
#                          (of the first line that has one).
#   now_ns                 the time, in nanoseconds since the epoch.
#   secs_since NS [NS2]    seconds from NS to NS2 (default now), one
#                          decimal.
#   fmt_rate V, fmt_ms V   V with no decimals, with three.
#   say WHO WHAT TEXT      a run's line, WHO and WHAT in columns.
#   busy                   the load average and, where the kernel reports
#                          it, the share of the last minute that runnable
#                          tasks waited for a CPU (PSI): the other work the
#                          figures share the machine with.
#   load_now               sets LOAD, the load average over 1, 5 and 15
#                          minutes ("?" without /proc/loadavg), and PSI,
#                          that share in % (empty where the kernel has no
#                          /proc/pressure/cpu); reads the two files with
#                          builtins, so it is cheap enough for every line.

: "${SCRIPT:?set SCRIPT, the name the messages start with, before sourcing scripts/bench-lib.sh}"

# ---------------------------------------------------------------- failing

die() {
	echo "$SCRIPT: $*" >&2
	exit 2
}

run_logged() {
	local log=$1
	shift
	if ! "$@" >"$log.out" 2>"$log.err"; then
		echo "$SCRIPT: failed: $*" >&2
		tail -n 20 "$log.out" "$log.err" >&2 || true
		exit 2
	fi
}

# ---------------------------------------------------------------- work dir

fstype() { df -PT "$1" | awk 'NR == 2 { print $2 }'; }

WORK_PARENT="${TMPDIR:-/tmp}"
if [ "$(fstype "$WORK_PARENT")" = tmpfs ]; then
	WORK_PARENT="$PWD"
fi

make_work() {
	WORK="$(mktemp -d "$WORK_PARENT/.$SCRIPT.XXXXXX")"
	trap cleanup EXIT
	trap 'exit 130' INT TERM
}

cleanup() {
	trap '' INT TERM
	stop_all
	if [ "${KEEP:-0}" = 1 ]; then
		echo "$SCRIPT: kept $WORK"
	else
		rm -rf "$WORK"
	fi
}

# ---------------------------------------------------------------- processes

declare -A node_pid=()
bg_pids=()

stop_all() {
	local pid deadline=$((SECONDS + 10))
	for pid in "${bg_pids[@]}" "${node_pid[@]}"; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for pid in "${bg_pids[@]}" "${node_pid[@]}"; do
		while kill -0 "$pid" 2>/dev/null; do
			if [ "$SECONDS" -ge "$deadline" ]; then
				kill -KILL "$pid" 2>/dev/null || true
				break
			fi
			sleep 0.1
		done
		wait "$pid" 2>/dev/null || true
	done
	bg_pids=()
	node_pid=()
}

forget() {
	local keep=() p
	for p in "${bg_pids[@]}"; do
		[ "$p" = "$1" ] || keep+=("$p")
	done
	bg_pids=("${keep[@]}")
}

stop_bg() {
	kill -TERM "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
	forget "$1"
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

clk_tck="$(getconf CLK_TCK 2>/dev/null || echo 100)"
cpu_ticks() {
	local pid s=0 t
	for pid in "$@"; do
		t="$(awk '{ print $14 + $15 }' "/proc/$pid/stat" 2>/dev/null || echo 0)"
		s=$((s + t))
	done
	echo "$s"
}

# ---------------------------------------------------------------- binaries

build_binaries() {
	BIN="$WORK/bin"
	mkdir -p "$BIN"
	echo "$SCRIPT: building gostream-node and gostream-ctl into $BIN"
	"$GO" build -o "$BIN/gostream-node" ./cmd/node || die "cannot build ./cmd/node"
	"$GO" build -o "$BIN/gostream-ctl" ./cmd/ctl || die "cannot build ./cmd/ctl"
}

# ---------------------------------------------------------------- ports

port_in_use() {
	if command -v ss >/dev/null 2>&1; then
		ss -Htuln "( sport = :$1 )" | grep -q .
	else
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
	fi
}

# Ports below the usual ephemeral range, so that no connection's local
# port takes one between free_port and the node's listen.
handed_out=" "
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

# ---------------------------------------------------------------- cluster

declare -a rpc gossip http

start_cluster() {
	local i p
	DIR=$1
	mkdir -p "$DIR"
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
	if [ "${2:-1}" = 3 ]; then
		CONTROLLER="1@${rpc[1]},2@${rpc[2]},3@${rpc[3]}"
	fi
	for i in 1 2 3; do
		start_node "$i"
	done
	wait_ready
}

start_node() {
	local i=$1
	mkdir -p "$DIR/node$i"
	"$BIN/gostream-node" --id "$i" --data-dir "$DIR/node$i" --listen "${rpc[$i]}" \
		--gossip "${gossip[$i]}" --http "${http[$i]}" \
		--controller "$CONTROLLER" --join "$JOIN" ${NODE_FLAGS[@]+"${NODE_FLAGS[@]}"} \
		>>"$DIR/node$i.log" 2>&1 </dev/null &
	node_pid[$i]=$!
}

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

# ---------------------------------------------------------------- figures

declare -A values=()
add() { values[$1]="${values[$1]:-} $2"; }
median() {
	# shellcheck disable=SC2086
	printf '%s\n' ${values[$1]:-} | sort -g | awk 'NF { a[++n] = $1 }
		END { if (n == 0) print "nan"; else if (n % 2) print a[(n + 1) / 2]; else print (a[n / 2] + a[n / 2 + 1]) / 2 }'
}
spread() {
	# shellcheck disable=SC2086
	printf '%s\n' ${values[$1]:-} | sort -g | awk 'NF { if (n++ == 0) lo = $1; hi = $1 }
		END { if (n == 0) print "nan nan"; else print lo, hi }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "nan" }'; }

count() { { grep -o -- "$1" || true; } | wc -l; }
json_num() { sed -n "s/.*\"$1\":\([-0-9.eE+]*\).*/\1/p" | head -n 1; }

now_ns() { date +%s%N; }
secs_since() { awk -v a="$1" -v b="${2:-$(now_ns)}" 'BEGIN { printf "%.1f", (b - a) / 1e9 }'; }

fmt_rate() { awk -v v="$1" 'BEGIN { printf "%.0f", v }'; }
fmt_ms() { awk -v v="$1" 'BEGIN { printf "%.3f", v }'; }
say() { printf '  %-7s %-9s %s\n' "$1" "$2" "$3"; }

load_now() {
	local a b c kind avg60 _
	LOAD="?" PSI=""
	if read -r a b c _ 2>/dev/null </proc/loadavg; then
		LOAD="$a $b $c"
	fi
	# The first line of /proc/pressure/cpu: some avg10=.. avg60=.. avg300=.. total=..
	if read -r kind _ avg60 _ 2>/dev/null </proc/pressure/cpu && [ "$kind" = some ]; then
		PSI="${avg60#avg60=}"
	fi
}

busy() {
	load_now
	echo "load average $LOAD${PSI:+, CPU pressure $PSI% (last minute)}"
}
