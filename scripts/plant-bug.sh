#!/usr/bin/env bash
# Plants a known bug in a copy of the source tree and runs chaos scenarios
# against it: the harness must find a violation. Shows that the harness can
# see the class of bug the planted one stands for.
#
#   scripts/plant-bug.sh testcluster/plants/no-fsync.patch        # one bug
#   scripts/plant-bug.sh                                          # every bug, then a control run
#
# Each patch names the scenarios that must catch it on a line
# "scenarios: a,b" above its diff (power-loss if it names none).
# Environment: PLANT_SCENARIOS (instead of every patch's own), PLANT_SEEDS
# (default "1 2"), PLANT_DURATION (default 30s). A bug counts as caught
# when a scenario run on one of the seeds reports a violation. With no
# argument, every scenario the patches name also runs on the unpatched copy
# ("control"), on every seed, and must report none. Exit 1 if a bug is
# missed or the control run fails.
set -euo pipefail

cd "$(dirname "$0")/.."
GO="${GO:-go}"
SEEDS="${PLANT_SEEDS:-1 2}"
DURATION="${PLANT_DURATION:-30s}"

patches=("$@")
control=0
if [ "${#patches[@]}" -eq 0 ]; then
	patches=(testcluster/plants/*.patch)
	control=1
fi

work=$(mktemp -d /tmp/gostream-plant-XXXXXX)
trap 'rm -rf "$work"' EXIT

# copy_tree DIR: the tracked and untracked (not ignored) files of this
# checkout, as they are now, into DIR.
copy_tree() {
	mkdir -p "$1"
	git ls-files -co --exclude-standard -z | tar --null -cf - -T - | tar -xf - -C "$1"
}

# scenarios_of PATCH: the scenarios that must catch it, comma-separated:
# PLANT_SCENARIOS if set, else those its "scenarios:" line names, else
# power-loss.
scenarios_of() {
	if [ -n "${PLANT_SCENARIOS:-}" ]; then
		echo "$PLANT_SCENARIOS"
		return
	fi
	local s
	s=$(sed -n '/^diff /q; s/^scenarios: *//p' "$1" | head -1)
	echo "${s:-power-loss}"
}

# run_scenarios DIR LABEL SCENARIOS: runs every scenario on every seed in
# DIR; prints one line per run; returns the number of runs with violations.
run_scenarios() {
	local dir=$1 label=$2 scenarios=$3 found=0
	for scenario in ${scenarios//,/ }; do
		for seed in $SEEDS; do
			local log="$work/$label-$scenario-$seed.log"
			if (cd "$dir" && "$GO" run ./testcluster/cmd/chaos --scenarios "$scenario" --seed "$seed" --duration "$DURATION") >"$log" 2>&1; then
				echo "plant: $label: $scenario seed $seed: no violation"
			else
				found=$((found + 1))
				echo "plant: $label: $scenario seed $seed: violations:"
				# The violations the run printed (not where it was saved nor
				# how to replay it), counted by kind, and the first one.
				awk '/ seed [0-9]+: [0-9]+ violations:$/ {f = 1; next} f && /^  (saved to |replay: )/ {next} f && /^  / {print; next} {f = 0}' "$log" >"$log.v"
				sed -E 's/^  //; s/:.*//' "$log.v" | sort | uniq -c | sort -rn | head -6 | sed 's/^/plant:     /'
				grep -v ': [0-9]* more ' "$log.v" | head -1 | cut -c1-220 | sed 's/^ */plant:     first: /' || true
				grep -E 'harness error' "$log" | head -2 | cut -c1-200 | sed 's/^/plant:     /' || true
			fi
		done
	done
	return "$found"
}

missed=0
all=""
for patch in "${patches[@]}"; do
	name=$(basename "$patch" .patch)
	scenarios=$(scenarios_of "$patch")
	for s in ${scenarios//,/ }; do
		case ",$all," in *",$s,"*) ;; *) all="${all:+$all,}$s" ;; esac
	done
	dir="$work/$name"
	copy_tree "$dir"
	(cd "$dir" && git apply) <"$patch"
	echo "plant: $name: planted ($(grep -c '^+[^+]' "$patch") line(s) changed); running $scenarios on seeds $SEEDS for $DURATION each"
	if run_scenarios "$dir" "$name" "$scenarios"; then
		echo "plant: $name: MISSED: no scenario found a violation"
		missed=$((missed + 1))
	else
		echo "plant: $name: caught"
	fi
	rm -rf "$dir"
done

if [ "$control" = 1 ]; then
	dir="$work/control"
	copy_tree "$dir"
	echo "plant: control: no bug planted; running $all on seeds $SEEDS"
	if ! run_scenarios "$dir" control "$all"; then
		echo "plant: control: FAILED: the unpatched code has violations"
		missed=$((missed + 1))
	fi
fi
exit $((missed > 0))
