#!/usr/bin/env bash
# soak_streams.sh: N concurrent gzip /events streams against gzserve (tests/stream_load.py), every event decoded, then the pools trimmed (make soak-streams).
#
# Usage: soak_streams.sh [--streams N] [--events E] [--event-ms MS] [--trim-wait S] GZSERVE
#
# Loopback only, bounded: one gzserve (built-in demo, port 0, --quiet) and
# one tests/stream_load.py run of N streams (default 1000), each /events
# sending E events (default 10) MS apart (default 500), with a timeout of
# E x MS + 90 s for the whole run; the server is stopped on any exit.
# Checks: every stream good (200, gzip, a complete member, all E events),
# no errors, no decode failures, all N open at once, the server's RSS peak
# under 1 GiB; then, with no request for S seconds (default 13: one trim
# period of 10 s, gzserve's 1 s mhdgz_trim tick, and a margin), /stats
# shows the pools back at their low watermark (pool_idle at most 6: 2 per
# pool) and pool_trims above 0. Prints stream_load.py's figures. Needs
# python3 and curl.
set -uo pipefail
. "$(dirname "$0")/testlib.sh"

streams=1000
events=10
event_ms=500
trim_wait=13
tl_options soak_streams.sh streams=streams events=events event-ms=event_ms trim-wait=trim_wait -- "$@"
set -- "${REST[@]}"
gzserve="${1:?usage: soak_streams.sh [--streams N] [--events E] [--event-ms MS] [--trim-wait S] GZSERVE}"
tl_need python3 curl
[ -x "$gzserve" ] || { echo "soak_streams.sh: $gzserve is not executable" >&2; exit 2; }
tl_scratch mhdgz-soak-streams

tl_start gzserve "$T/gzserve.err" "$gzserve" --port 0 --quiet --events "$events" \
	--event-ms "$event_ms" || exit 1
port=${BASE##*:}
timeout_s=$((events * event_ms / 1000 + 90))

fail=0
check() { # check RC WHAT
	if [ "$1" -eq 0 ]; then echo "ok:   $2"; else echo "FAIL: $2"; fail=1; fi
}

python3 "$(dirname "$0")/stream_load.py" --port "$port" --pid "$PID" --streams "$streams" \
	--events "$events" --timeout "$timeout_s" >"$T/load.txt" 2>&1
load_rc=$?
cat "$T/load.txt"
val() { sed -n "s/^$1 //p" "$T/load.txt" | head -1; }
check "$load_rc" "stream_load: every stream good, no errors, no decode failures"
peak=$(val peak_open)
rss_peak=$(val rss_peak_kib)
check $(( ${peak:-0} == streams ? 0 : 1 )) "all ${streams} streams open at once (peak ${peak})"
check $(( ${rss_peak:-1048576} < 1048576 ? 0 : 1 )) "server RSS peak ${rss_peak} KiB < 1 GiB"

sleep "$trim_wait"
stats=$(curl -s "$BASE/stats")
num() { sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p" <<<"$stats" | head -1; }
idle=$(num pool_idle)
trims=$(num pool_trims)
echo "after ${trim_wait} s without requests: pool_idle ${idle}, pool_trims ${trims}," \
	"$(grep VmRSS /proc/"$PID"/status | tr -s ' \t' ' ')"
check $(( ${idle:-999} <= 6 ? 0 : 1 )) "pools back at their low watermark (pool_idle ${idle} <= 6)"
check $(( ${trims:-0} > 0 ? 0 : 1 )) "pool_trims ${trims} > 0"

tl_stop "$PID"
check $(( STOP_RC == 0 ? 0 : 1 )) "gzserve exits 0 on SIGTERM (${STOP_RC})"
exit "$fail"
