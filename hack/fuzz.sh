#!/usr/bin/env bash
# Runs each fuzz target given as pkg:Target for FUZZTIME (a duration or a
# count, as go test's -fuzztime takes it).
#
# Go 1.26's fuzzing coordinator can fail a target at the end of a duration
# budget with a bare "context deadline exceeded" and no failing input: it
# compares the timed-out parent context's error with its child's before the
# child is cancelled (go.dev/issue/75804, fixed in Go 1.27). That is not a
# finding, so such a run is repeated (up to twice) rather than failing the
# build; any other failure, or a failing input written, fails at once.
set -uo pipefail
fuzztime=${FUZZTIME:-30s}
out=$(mktemp)
trap 'rm -f "$out"' EXIT

spurious() {
	# One failure, whose only message is the coordinator's, and no input written.
	[ "$(grep -c -- '^--- FAIL: ' "$out")" = 1 ] &&
		[ "$(grep -A1 -- '^--- FAIL: ' "$out" | tail -n1 | tr -d '[:space:]')" = contextdeadlineexceeded ] &&
		! grep -q -e 'Failing input written to' -e '^panic:' "$out"
}

for t in "$@"; do
	pkg=${t%%:*} name=${t#*:}
	for try in 1 2 3; do
		echo "== fuzz $name ($fuzztime)"
		"${GO:-go}" test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "./$pkg/" >"$out" 2>&1
		rc=$?
		cat "$out"
		if grep -q 'no fuzz tests to fuzz' "$out"; then
			echo "fuzz target $t does not exist"
			exit 1
		fi
		[ $rc = 0 ] && break
		if [ $try -lt 3 ] && spurious; then
			echo "== $name: Go's coordinator timed out with no failing input (go.dev/issue/75804); running it again"
			continue
		fi
		exit $rc
	done
done
