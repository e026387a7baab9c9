#!/usr/bin/env bash
# Runs every fuzz target of the module for a while (default 30s each) and
# prints each one's execution rate, so a target that stalls (large inputs,
# slow bodies, minimization) shows up instead of passing with a handful of
# executions.
# New crashers land in the package's testdata/fuzz/FuzzXxx/ and fail `make test`
# until fixed: commit them with the fix.
#
# Usage: scripts/fuzz.sh [FUZZTIME] [PACKAGE-PATTERN...]
#   FUZZ_MINIMIZE  -fuzzminimizetime (default 100x: minimizing a new input
#                  costs at most 100 executions; the default 60s per input
#                  left FuzzOpenSparse at 11 executions in 45s)
#   FUZZ_MIN_RATE  execs/s under which a target is flagged SLOW (default 100)
set -uo pipefail
cd "$(dirname "$0")/.."
time=${1:-30s}
shift || true
pkgs=("$@")
[ ${#pkgs[@]} -eq 0 ] && pkgs=(./...)
minimize=${FUZZ_MINIMIZE:-100x}
minrate=${FUZZ_MIN_RATE:-100}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
summary=()
failed=0
for pkg in $(go list "${pkgs[@]}"); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	for fn in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
		echo "== $pkg $fn ($time)"
		start=$(date +%s.%N)
		go test -run "^$" -fuzz "^${fn}\$" -fuzztime "$time" -fuzzminimizetime "$minimize" "$pkg" 2>&1 | tee "$log"
		rc=${PIPESTATUS[0]}
		end=$(date +%s.%N)
		# The last progress line: "fuzz: elapsed: 30s, execs: 81234 (2707/sec), ..."
		line=$(grep -E 'fuzz: elapsed: [0-9]+s, execs: [0-9]+' "$log" | tail -1)
		execs=$(sed -E 's/.*execs: ([0-9]+).*/\1/' <<<"$line")
		secs=$(sed -E 's/.*elapsed: ([0-9]+)s.*/\1/' <<<"$line")
		if [ -z "$line" ]; then
			execs=0
			secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%d", b - a }')
		fi
		rate=$(awk -v n="$execs" -v s="$secs" 'BEGIN { if (s > 0) printf "%d", n / s; else print n }')
		status=ok
		if [ "$rc" -ne 0 ]; then
			status=FAIL
			failed=1
		elif [ "$rate" -lt "$minrate" ]; then
			status=SLOW
		fi
		msg=$(printf '%-5s %-50s %-28s %10s execs %8s execs/s' "$status" "$pkg" "$fn" "$execs" "$rate")
		echo "$msg"
		summary+=("$msg")
	done
done
echo
echo "== fuzz rates ($time each, -fuzzminimizetime $minimize)"
printf '%s\n' "${summary[@]}"
exit $failed
