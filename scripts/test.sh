#!/usr/bin/env bash
# Runs what `make test` runs once its tools are installed: the packages
# with goroutines of their own under -race, the others plain, and the
# fuzz smoke (scripts/fuzz.sh at FUZZ_SMOKE_TIME a target).
#
# The race run and the plain run (after the fuzz smoke) run side by side.
# Each ends on one long package (the Chromium console suite, the crash
# walk) that alone keeps one core busy while the other idles; in parallel
# the two tails overlap. The plain side's output goes to a file shown when
# both are done, so the two never interleave.
#
# Usage: scripts/test.sh RACE_PKGS_FILE PLAIN_PKGS_FILE (one package a line)
set -uo pipefail
cd "$(dirname "$0")/.."
race_pkgs=$(cat "$1")
plain_pkgs=$(cat "$2")
go=${GO:-go}
smoke=${FUZZ_SMOKE_TIME:-1s}
plainlog=$(mktemp)
trap 'rm -f "$plainlog"' EXIT
t0=$(date +%s)
(
	FUZZ_MIN_RATE=0 scripts/fuzz.sh "$smoke" || exit 1
	# shellcheck disable=SC2086
	$go test -count=1 -timeout 15m $plain_pkgs
) >"$plainlog" 2>&1 &
plain=$!
# shellcheck disable=SC2086
$go test -race -count=1 -timeout 15m $race_pkgs
race_rc=$?
wait "$plain"
plain_rc=$?
echo "--- fuzz smoke and tests without -race:"
cat "$plainlog"
echo "--- test.sh: race run rc=$race_rc, fuzz smoke + plain run rc=$plain_rc, $(($(date +%s) - t0)) s"
[ "$race_rc" -eq 0 ] && [ "$plain_rc" -eq 0 ]
