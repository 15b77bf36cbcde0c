#!/usr/bin/env bash
# The cost of security, measured: two three-node gostream clusters on this
# machine at once, one plaintext and one with TLS on every link (clients and
# peers), mutual TLS between the nodes, gossip encryption and a bearer
# token (docs/security.md), the same measurements on both, interleaved
# (plaintext, TLS, plaintext, TLS, ...), medians and ratios TLS/plaintext
# against the targets. `make bench-tls` builds the binaries and runs this.
#
#   B1  pipelined produce, RF 3, 1 KiB records, 1 and 2 producers (the best
#       median of each side): records/s, target TLS >= 0.8x plaintext
#   B3  16 synchronous producers, RF 3, one partition: records/s,
#       target TLS >= 0.9x plaintext
#   S1  one synchronous producer, RF 3: p50 latency, target TLS <= 1.2x
#
# Settings, all environment variables:
#   RUNS=3            repetitions of every measurement
#   RECORDS=200000    records per pipelined run
#   PRODUCERS="1 2"   producer counts of the pipelined runs
#   PARTITIONS=3      partitions of the B1 topics
#   SYNC_RECORDS=2000 records of the one synchronous producer
#   SYNC16_RECORDS=16000  records of the 16 synchronous producers, in all
#   KEEP=1            keep the temporary directory (logs, data)
# Exit status: 0 every target met, 1 one missed, 2 the run failed.
set -euo pipefail
cd "$(dirname "$0")/.."
SCRIPT=bench-tls
. scripts/bench-lib.sh

BIN="${BIN:-bin}"
RUNS="${RUNS:-3}"
RECORDS="${RECORDS:-200000}"
PRODUCERS="${PRODUCERS:-1 2}"
PARTITIONS="${PARTITIONS:-3}"
SYNC_RECORDS="${SYNC_RECORDS:-2000}"
SYNC16_RECORDS="${SYNC16_RECORDS:-16000}"
SIZE=1024

for b in gostream-node gostream-ctl; do
	[ -x "$BIN/$b" ] || die "$BIN/$b is missing; run 'make build' first"
done

make_work

# The security files of the TLS cluster: a CA, node1..3 and admin
# certificates, a gossip key, a token for admin.
SEC="$WORK/secure"
"$BIN/gostream-ctl" cert init "$SEC" --nodes 3 >/dev/null
(umask 077 && head -c 32 /dev/urandom | base64 >"$SEC/gossip.key")
"$BIN/gostream-ctl" token create --principal admin --tokens-file "$SEC/tokens" --out "$SEC/admin.token" >/dev/null

declare -A BOOT
# start NAME SECURE: three nodes, all controller candidates; sets BOOT[NAME].
start() {
	local name=$1 secure=$2 i p rpc=() gossip=() http=() join ctrl=() args
	for i in 1 2 3; do
		free_port p; rpc+=("127.0.0.1:$p")
		free_port p; gossip+=("127.0.0.1:$p")
		free_port p; http+=("127.0.0.1:$p")
	done
	for i in 1 2 3; do ctrl+=("$i@${rpc[$((i - 1))]}"); done
	join="$(IFS=,; echo "${gossip[*]}")"
	BOOT[$name]="$(IFS=,; echo "${rpc[*]}")"
	for i in 1 2 3; do
		mkdir -p "$WORK/$name/node$i"
		args=(--id "$i" --data-dir "$WORK/$name/node$i" --listen "${rpc[$((i - 1))]}" --gossip "${gossip[$((i - 1))]}"
			--http "${http[$((i - 1))]}" --join "$join" --controller "$(IFS=,; echo "${ctrl[*]}")")
		if [ "$secure" = 1 ]; then
			args+=(--tls-cert "$SEC/node$i.crt" --tls-key "$SEC/node$i.key" --tls-ca "$SEC/ca.crt"
				--gossip-key-file "$SEC/gossip.key" --auth-tokens-file "$SEC/tokens" --superusers node1,node2,node3,admin)
		fi
		"$BIN/gostream-node" "${args[@]}" >"$WORK/$name/node$i.log" 2>&1 </dev/null &
		bg_pids+=("$!")
	done
	local deadline=$((SECONDS + 90))
	until [ "$(ctl "$name" broker list -o json 2>/dev/null | grep -o '"registered":"registered"' | wc -l)" -eq 3 ]; do
		[ "$SECONDS" -lt "$deadline" ] || { tail -n 20 "$WORK/$name"/node*.log >&2; die "$name: not every node registered within 90s"; }
		sleep 0.3
	done
	echo "  $name: three nodes up, bootstrap ${BOOT[$name]}"
}

# ctl NAME ARGS...: gostream-ctl against cluster NAME, as admin over TLS
# for the TLS cluster.
ctl() {
	local name=$1
	shift
	if [ "$name" = tls ]; then
		GOSTREAM_TLS_CA="$SEC/ca.crt" GOSTREAM_TOKEN_FILE="$SEC/admin.token" \
			"$BIN/gostream-ctl" --bootstrap "${BOOT[$name]}" --timeout 60s "$@"
	else
		"$BIN/gostream-ctl" --bootstrap "${BOOT[$name]}" --timeout 60s "$@"
	fi
}

seq_no=0
# bench NAME ARGS...: one gostream-ctl bench run on cluster NAME; sets RESULT.
bench() {
	local name=$1 log
	shift
	seq_no=$((seq_no + 1))
	log="$WORK/bench.$seq_no"
	if ! ctl "$name" bench "$@" -o json >"$log.out" 2>"$log.err"; then
		tail -n 20 "$log.out" "$log.err" >&2
		die "$name: bench $* failed"
	fi
	RESULT="$(cat "$log.out")"
}

echo "bench-tls: gostream $(git describe --always --dirty 2>/dev/null || echo dev), plaintext vs TLS + mutual TLS + gossip encryption + token"
echo "  machine: $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg); data under $WORK"
echo "  runs: $RUNS, interleaved; 1 KiB records; RF 3"
start plain 0
start tls 1
for name in plain tls; do
	ctl "$name" topic create warmup --partitions "$PARTITIONS" --replication-factor 3 >/dev/null
	bench "$name" produce --topic warmup --records 20000 --record-size "$SIZE"
done

for r in $(seq "$RUNS"); do
	echo "-- run $r"
	for n in $PRODUCERS; do
		for name in plain tls; do
			topic="b1-$r-$n"
			ctl "$name" topic create "$topic" --partitions "$PARTITIONS" --replication-factor 3 >/dev/null
			bench "$name" produce --topic "$topic" --records "$RECORDS" --record-size "$SIZE" --producers "$n"
			v="$(json_num records_per_sec <<<"$RESULT")"
			add "B1.$name.$n" "$v"
			printf '  %-6s B1 %d producer(s): %.0f records/s\n' "$name" "$n" "$v"
		done
	done
	for name in plain tls; do
		topic="b3-$r"
		ctl "$name" topic create "$topic" --partitions 1 --replication-factor 3 >/dev/null
		bench "$name" produce --topic "$topic" --sync --producers 16 --records "$SYNC16_RECORDS" --record-size "$SIZE"
		v="$(json_num records_per_sec <<<"$RESULT")"
		add "B3.$name" "$v"
		printf '  %-6s B3 16 sync producers: %.0f records/s\n' "$name" "$v"
	done
	for name in plain tls; do
		topic="s1-$r"
		ctl "$name" topic create "$topic" --partitions 1 --replication-factor 3 >/dev/null
		bench "$name" produce --topic "$topic" --sync --producers 1 --records "$SYNC_RECORDS" --record-size "$SIZE"
		v="$(json_num p50_ms <<<"$RESULT")"
		add "S1.$name" "$v"
		printf '  %-6s S1 1 sync producer: p50 %.3f ms\n' "$name" "$v"
	done
done

# best NAME: the B1 median of the producer count that did best.
best() {
	local n b=0 m
	for n in $PRODUCERS; do
		m="$(median "B1.$1.$n")"
		b="$(awk -v a="$m" -v b="$b" 'BEGIN { print (a > b) ? a : b }')"
	done
	echo "$b"
}
status=0
fmt() { awk -v u="$1" -v v="$2" 'BEGIN { if (u == "ms") printf "%.3f", v; else printf "%.0f", v }'; }
row() { # NAME UNIT TLS PLAIN OP TARGET
	local ratio met
	ratio="$(awk -v a="$3" -v b="$4" 'BEGIN { printf "%.2f", a / b }')"
	met="$(awk -v r="$ratio" -v t="$6" -v op="$5" 'BEGIN { ok = (op == "ge") ? r >= t : r <= t; print ok ? "MET" : "MISSED" }')"
	[ "$met" = MET ] || status=1
	printf '%-40s %12s %12s %7sx  %s %sx  %s\n' "$1" "$(fmt "$2" "$3")" "$(fmt "$2" "$4")" "$ratio" "$([ "$5" = ge ] && echo '>=' || echo '<=')" "$6" "$met"
}
echo
printf '%-40s %12s %12s %8s  %s\n' "measurement (medians)" "TLS" "plaintext" "ratio" "target"
row "B1 pipelined produce, records/s" "r/s" "$(best tls)" "$(best plain)" ge 0.8
row "B3 16 sync producers, records/s" "r/s" "$(median B3.tls)" "$(median B3.plain)" ge 0.9
row "S1 one sync producer, p50 ms" "ms" "$(median S1.tls)" "$(median S1.plain)" le 1.2
exit "$status"
