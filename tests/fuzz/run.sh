#!/usr/bin/env bash
# run.sh: run libFuzzer targets for a bounded time each, a few at a time, and summarise (make fuzz).
#
# Usage: run.sh [--seconds N] [--jobs J] [--src DIR] [--bin DIR] [--dir DIR] TARGET...
#
#   --seconds N  fuzzing time per target (libFuzzer -max_total_time), default 60
#   --jobs J     targets run at once, default 1 (each is one process on one core)
#   --src DIR    tests/fuzz of the source tree: corpus/TARGET/ seeds, TARGET.dict
#   --bin DIR    the target binaries, default: the --dir DIR
#   --dir DIR    tests/fuzz of the build tree: work/TARGET/ (the growing
#                corpus, kept between runs), logs/, artifacts/
#
# The seeds are read, never written (the source tree may be read-only, as
# under distcheck): new inputs go to DIR/work/TARGET. Extra libFuzzer options
# come from $FUZZ_FLAGS. Prints one line per target (runs, runs/s, coverage,
# features, corpus, new inputs) and, for a failing target, the end of its log
# and the saved input (crash-*, timeout-*, leak-*, oom-* under
# DIR/artifacts/); exits 1 if any target failed. Reproduce with
# BIN/TARGET DIR/artifacts/TARGET-crash-...
set -uo pipefail
. "$(dirname "$0")/../testlib.sh"

seconds=60
jobs=1
src=.
dir=.
bin=
tl_options run.sh seconds=seconds jobs=jobs src=src bin=bin dir=dir -- "$@"
set -- "${REST[@]}"
[ $# -gt 0 ] || { echo "run.sh: no target given" >&2; exit 2; }
[ -n "$bin" ] || bin="$dir"

mkdir -p "$dir/logs" "$dir/artifacts"
# Leak checks per input are on (libFuzzer's default with ASan); UBSan
# findings abort so that libFuzzer saves the input.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

run_one() {
	local t="$1" dict=() seeds="$src/corpus/$1"
	[ -f "$src/$t.dict" ] && dict=(-dict="$src/$t.dict")
	[ -d "$seeds" ] || seeds=
	mkdir -p "$dir/work/$t"
	# -timeout: one input taking this long is a hang worth a report.
	# -rss_limit_mb: ASan's quarantine and the compressor pools of every
	# level stay well below it.
	# shellcheck disable=SC2086
	"$bin/$t" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=3072 \
		-print_final_stats=1 -artifact_prefix="$dir/artifacts/$t-" \
		"${dict[@]}" ${FUZZ_FLAGS:-} "$dir/work/$t" ${seeds:+"$seeds"} \
		>"$dir/logs/$t.log" 2>&1
	echo $? >"$dir/logs/$t.rc"
}

tl_pool "$jobs" "fuzz (${seconds} s)" run_one "$@"

failed=0
printf '%-12s %10s %8s %6s %7s %7s %5s  %s\n' target runs runs/s cov ft corpus new result
for t in "$@"; do
	log="$dir/logs/$t.log"
	rc=$(cat "$dir/logs/$t.rc" 2>/dev/null || echo 99)
	final() { sed -n "s/^stat::$1: *//p" "$log" | tail -1; }
	last=$(grep -E '^#[0-9]+' "$log" | grep -E 'cov: ' | tail -1)
	cov=$(sed -n 's/.*cov: \([0-9]*\).*/\1/p' <<<"$last")
	ft=$(sed -n 's/.*ft: \([0-9]*\).*/\1/p' <<<"$last")
	corp=$(sed -n 's/.*corp: \([0-9]*\).*/\1/p' <<<"$last")
	result=ok
	[ "$rc" -eq 0 ] || { result="FAILED (exit $rc)"; failed=1; }
	printf '%-12s %10s %8s %6s %7s %7s %5s  %s\n' "$t" "$(final number_of_executed_units)" \
		"$(final average_exec_per_sec)" "${cov:-?}" "${ft:-?}" "${corp:-?}" \
		"$(final new_units_added)" "$result"
done
for t in "$@"; do
	rc=$(cat "$dir/logs/$t.rc" 2>/dev/null || echo 99)
	[ "$rc" -eq 0 ] && continue
	echo "----- $t: end of $dir/logs/$t.log"
	grep -v -E '^#[0-9]+' "$dir/logs/$t.log" | tail -40
	ls -1 "$dir/artifacts/$t-"* 2>/dev/null | sed 's/^/saved input: /'
done
exit "$failed"
