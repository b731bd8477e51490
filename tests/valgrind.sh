#!/usr/bin/env bash
# valgrind.sh: Check suites under valgrind memcheck, a few at a time (make valgrind).
#
# Usage: valgrind.sh [--jobs J] [--logs DIR] BINARY[:SUITE[:CASE]]...
#
# Each argument runs BINARY (a Check runner) under memcheck, restricted to
# SUITE and CASE with CK_RUN_SUITE/CK_RUN_CASE when given, with CK_FORK=no
# so the tests run inside the process valgrind watches (forked children
# would escape the leak check). Errors of any kind, and definite or
# indirect leaks, fail the run (--error-exitcode=1). J runs go at once
# (valgrind runs a process's threads one at a time, so each is one core).
# Prints one line per run (seconds, Check's summary, memcheck errors) and
# the log of each failing run; exits 1 if any failed. $VALGRIND_FLAGS adds
# memcheck options. Per-test timeouts are stretched (CK_TIMEOUT_MULTIPLIER
# 20): memcheck is 20-50 times slower than native code.
set -uo pipefail

. "$(dirname "$0")/testlib.sh"

jobs=1
logs=tests/valgrind-logs
tl_options valgrind.sh jobs=jobs logs=logs -- "$@"
set -- "${REST[@]}"
[ $# -gt 0 ] || { echo "valgrind.sh: nothing to run" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "valgrind.sh: valgrind not found (apt-get install valgrind)" >&2; exit 2; }
mkdir -p "$logs"

name_of() { tr '/:' '__' <<<"$1"; }

run_one() {
	local spec="$1" bin suite case name t0
	IFS=: read -r bin suite case <<<"$spec"
	name=$(name_of "$spec")
	t0=$(date +%s)
	# shellcheck disable=SC2086
	env CK_FORK=no CK_TIMEOUT_MULTIPLIER=20 ${suite:+CK_RUN_SUITE="$suite"} \
		${case:+CK_RUN_CASE="$case"} \
		valgrind -q --error-exitcode=1 --leak-check=full \
		--errors-for-leak-kinds=definite,indirect --show-leak-kinds=definite,indirect \
		--num-callers=30 ${VALGRIND_FLAGS:-} "$bin" >"$logs/$name.log" 2>&1
	echo "$? $(($(date +%s) - t0))" >"$logs/$name.rc"
}

tl_pool "$jobs" valgrind run_one "$@"

failed=0
for spec in "$@"; do
	name=$(name_of "$spec")
	read -r rc secs <"$logs/$name.rc" 2>/dev/null || { rc=99; secs=?; }
	summary=$(grep -E '^[0-9]+%: Checks:' "$logs/$name.log" | tail -1)
	errors=$(grep -cE '^==[0-9]+== [A-Z]' "$logs/$name.log")
	result=ok
	[ "$rc" -eq 0 ] || { result="FAILED (exit $rc)"; failed=1; }
	printf '%-32s %5s s  %-42s memcheck lines %s  %s\n' "$spec" "$secs" "${summary:-no summary}" \
		"$errors" "$result"
done
for spec in "$@"; do
	name=$(name_of "$spec")
	read -r rc secs <"$logs/$name.rc" 2>/dev/null || rc=99
	[ "$rc" -eq 0 ] && continue
	echo "----- $spec: $logs/$name.log"
	tail -120 "$logs/$name.log"
done
exit "$failed"
