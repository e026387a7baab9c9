#!/usr/bin/env bash
# Runs every fuzz target of the module for a while (default 30s each).
# New crashers land in the package's testdata/fuzz/FuzzXxx/ and fail `make test`
# until fixed: commit them with the fix.
set -euo pipefail
cd "$(dirname "$0")/.."
time=${1:-30s}
for pkg in $(go list ./...); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	for fn in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
		echo "== $pkg $fn ($time)"
		go test -run "^$" -fuzz "^${fn}\$" -fuzztime "$time" -fuzzminimizetime 5s "$pkg"
	done
done
