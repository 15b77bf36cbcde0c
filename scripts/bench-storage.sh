#!/usr/bin/env bash
# Runs the storage benchmarks and prints, for each benchmark beside the
# baseline measured in the same run on the same disk, the median of each and
# their ratio against the targets. Exits 1 if a target is missed.
#
#   scripts/bench-storage.sh [go test flags...]
#
# COUNT (default 5) is passed to -count, BENCH (default .) to -bench. The
# logs live in $TMPDIR (default /tmp); if that is a tmpfs, where fsync costs
# nothing, a directory under the repository is used instead.
set -euo pipefail
cd "$(dirname "$0")/.."

fstype() { df -PT "$1" | awk 'NR == 2 { print $2 }'; }

cleanup=()
trap 'rm -rf "${cleanup[@]}"' EXIT
export TMPDIR="${TMPDIR:-/tmp}"
if [ "$(fstype "$TMPDIR")" = tmpfs ]; then
	TMPDIR="$(mktemp -d "$PWD/.bench-tmp.XXXXXX")"
	cleanup+=("$TMPDIR")
fi
echo "benchmark files in $TMPDIR: $(df -P "$TMPDIR" | awk 'NR == 2 { print $1 }'), $(fstype "$TMPDIR")"

out="$(mktemp)"
cleanup+=("$out")
go test -run='^$' -bench="${BENCH:-.}" -count="${COUNT:-5}" "$@" ./storage/ | tee "$out"

echo
awk '
# Collect every "value unit" pair of every benchmark line, by name without
# the -GOMAXPROCS suffix.
/^Benchmark/ {
	name = $1
	sub(/-[0-9]+$/, "", name)
	for (i = 3; i < NF; i += 2) {
		k = name SUBSEP $(i + 1)
		vals[k, ++n[k]] = $i
	}
}

function median(name, unit,    k, m, i, j, t, a) {
	k = name SUBSEP unit
	m = n[k]
	if (m == 0) return -1
	for (i = 1; i <= m; i++) a[i] = vals[k, i] + 0
	for (i = 2; i <= m; i++)
		for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
	return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
}

# pair prints our median, the baseline median and the ratio. The target is
# on the ratio, or, when minOurs > 0, on our median alone.
function pair(ours, base, unit, minRatio, minOurs,    o, b, r, target, ok) {
	o = median(ours, unit)
	b = median(base, unit)
	if (o < 0 || b < 0) {
		printf "%-44s  missing from the run\n", ours " vs " base
		missed = 1
		return
	}
	r = o / b
	if (minOurs > 0) {
		target = sprintf("%s >= %g %s", ours, minOurs, unit)
		ok = o >= minOurs
	} else {
		target = sprintf("ratio >= %g", minRatio)
		ok = r >= minRatio
	}
	if (!ok) missed = 1
	printf "%-44s median %12.2f %-7s (n=%d)\n", ours, o, unit, n[ours SUBSEP unit]
	printf "%-44s median %12.2f %-7s (n=%d)\n", base, b, unit, n[base SUBSEP unit]
	printf "%-44s ratio  %12.3f          target: %s  %s\n\n", "", r, target, ok ? "MET" : "MISSED"
}

END {
	pair("BenchmarkAppend1KiBSync", "BenchmarkBaselineWriteFsync1KiB", "msgs/s", 0.8, 0)
	pair("BenchmarkAppend1KiB64Appenders", "BenchmarkBaselineWrite64KiBFsync", "MB/s", 0.3, 0)
	# go test reports MB/s as 1e6 bytes/s, so 1 GB/s is 1000 MB/s.
	pair("BenchmarkReadSequential1GiB/Log", "BenchmarkReadSequential1GiB/BaselineReadAt", "MB/s", 0, 1000)
	exit missed
}
' "$out"
