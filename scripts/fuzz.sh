#!/usr/bin/env bash
# Runs every fuzz target of the repository (each `func FuzzXxx` in a
# *_test.go file) for FUZZTIME each, one after the other.
#
#   FUZZTIME=10s scripts/fuzz.sh      # the short pass of `make test`
#   FUZZTIME=60s scripts/fuzz.sh      # `make fuzz`
#
# A failing input is written under the package's testdata/fuzz/ by go test;
# commit it as a regression seed once the bug is fixed.
set -euo pipefail

FUZZTIME="${FUZZTIME:-10s}"
GO="${GO:-go}"
cd "$(dirname "$0")/.."

# "dir name" pairs, one per fuzz target.
targets=$(grep -rEo --include='*_test.go' --exclude-dir=.git --exclude-dir=vendor --exclude-dir=testdata \
	'^func Fuzz[A-Za-z0-9_]+\(' . |
	sed -E 's#^(.*)/[^/]+_test\.go:func (Fuzz[A-Za-z0-9_]+)\($#\1 \2#' | sort -u || true)

if [ -z "$targets" ]; then
	echo "fuzz: no fuzz targets found"
	exit 0
fi

count=0
while read -r dir name; do
	echo "fuzz: $name in $dir for $FUZZTIME"
	"$GO" test -run='^$' -fuzz="^${name}\$" -fuzztime="$FUZZTIME" "$dir" </dev/null
	count=$((count + 1))
done <<<"$targets"
echo "fuzz: $count targets passed"
