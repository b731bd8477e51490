#!/usr/bin/env bash
# soak.sh: gzserve under wrk for a bounded time: no errors, no memory growth, pool within its cap, consistent counters (make soak).
#
# Usage: soak.sh [--seconds N] [--warmup N] [--connections C] [--streams S] GZSERVE [SOAK_LUA]
#
# Loopback only, bounded: the load runs N seconds (default 60, warm-up
# included) and everything stops by itself; the servers are killed on any
# exit. Two gzserve processes on 127.0.0.1 port 0: the built-in demo (all
# its endpoints, and /stats) and a temporary --root static tree (HTML, CSS,
# JS, JSON, an image, a file small enough to stay identity and one larger
# than 1 MiB, which is compressed as a stream). Two wrk processes share
# C connections (default 64) between them; tests/soak.lua rotates paths,
# ten Accept-Encoding forms and, on the static tree, a byte range (206).
# Beside wrk, curl loops over HEAD and If-None-Match requests (wrk's parser
# would wait for a body after those), and S clients (default 24, more than
# the pool keeps idle) loop over /events (ten server-sent events in ten
# seconds, which wrk would count as timeouts; each a gzip stream with a
# compressor from the compressor pool).
#
# Checks, then prints the figures:
#  - wrk: zero socket errors (connect, read, write, timeout) and zero
#    responses outside 2xx/3xx, on both servers;
#  - every HEAD is a 2xx and every If-None-Match a 304, without a body;
#  - every /events fetch decodes to all ten events;
#  - resident memory (VmRSS, sampled each second from /proc) of each server
#    grows less than 10 % from the end of the warm-up (--warmup, default
#    15 s) to the largest sample after it;
#  - /stats of the demo: pool_idle within the cap (16 per compressor pool:
#    whole bodies, streams, low-latency streams such as /events: 48), no failures, the
#    reasons sum to the responses, compressed = reasons.compressed, one
#    decision per request, and the requests the clients completed are all
#    counted (at most one per connection more: those cut off when wrk
#    stopped).
# Needs wrk and curl. Exit status 0 when every check passes.
set -uo pipefail
. "$(dirname "$0")/testlib.sh"

seconds=60
warmup=15
conns=64
streams=24
tl_options soak.sh seconds=seconds warmup=warmup connections=conns streams=streams -- "$@"
set -- "${REST[@]}"
gzserve="${1:?usage: soak.sh [--seconds N] [--warmup N] [--connections C] [--streams S] GZSERVE [SOAK_LUA]}"
lua="${2:-$(dirname "$0")/soak.lua}"
for tool in wrk curl; do
	command -v "$tool" >/dev/null || { echo "soak.sh: $tool not found (apt-get install $tool)" >&2; exit 2; }
done
[ -x "$gzserve" ] || { echo "soak.sh: $gzserve is not executable" >&2; exit 2; }
[ -f "$lua" ] || { echo "soak.sh: $lua not found" >&2; exit 2; }
[ "$warmup" -lt "$((seconds - 10))" ] || { echo "soak.sh: --warmup must end 10 s before the run" >&2; exit 2; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mhdgz-soak.XXXXXX")
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null
	done
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fail=0
check() { # check CONDITION-RESULT MESSAGE: print and remember
	if [ "$1" -eq 0 ]; then
		echo "  ok    $2"
	else
		echo "  FAIL  $2"
		fail=1
	fi
}

# --- the static tree ------------------------------------------------------
www="$tmp/www"
mkdir -p "$www/dir/sub"
gen_text() { # gen_text BYTES: deterministic, compressible text
	awk -v n="$1" 'BEGIN {
		w = "the quick brown fox jumps over the lazy dog compression header response content"
		for (i = 0; len < n; i++) {
			line = i ": " w " " (i * 7919 % 1000) " " w "\n"
			len += length(line)
			out = out line
			if (length(out) > 65536) { printf "%s", out; out = "" }
		}
		printf "%s", out
	}' | head -c "$1"
}
{
	echo "<!doctype html><title>soak</title><link rel=stylesheet href=/style.css>"
	gen_text 20000
} >"$www/index.html"
gen_text 6000 >"$www/style.css"
gen_text 9000 >"$www/app.js"
{
	printf '['
	for i in $(seq 1 1500); do printf '{"id":%d,"name":"item %d","ok":true},' "$i" "$i"; done
	printf '{}]'
} >"$www/data.json"
gen_text 300 >"$www/small.txt"
gen_text 1500000 >"$www/big.txt"
head -c 30000 /dev/urandom >"$www/image.png"
gen_text 4000 >"$www/dir/sub/index.html"

# --- the servers ----------------------------------------------------------
start_server() { # start_server NAME ARGS...: sets port_NAME, pid_NAME
	local name="$1" out="$tmp/$1.out" port="" i
	shift
	"$gzserve" --port 0 --quiet "$@" >"$out" 2>"$tmp/$name.err" &
	pids+=($!)
	eval "pid_$name=$!"
	for i in $(seq 1 100); do
		port=$(sed -n 's|^listening on http://127\.0\.0\.1:\([0-9]*\)/$|\1|p' "$out")
		[ -n "$port" ] && break
		sleep 0.1
	done
	[ -n "$port" ] || { echo "soak.sh: gzserve $name did not start:" >&2; cat "$tmp/$name.err" >&2; exit 1; }
	eval "port_$name=$port"
}
start_server demo
start_server root --root "$www"
# shellcheck disable=SC2154 # set by start_server through eval
echo "soak: gzserve demo on port $port_demo (pid $pid_demo), static tree on port $port_root (pid $pid_root); ${seconds} s, ${conns} connections"

demo_paths="/ /index.html /style.css /app.js /2k.json /20k.json /100k.json /stats /204"
root_paths="/ /index.html /style.css /app.js /data.json /small.txt /big.txt /image.png /dir/sub/"

etags_of() { # etags_of PORT PATHS...: "path=etag" for each path with an ETag
	local port="$1" p tag
	shift
	for p in "$@"; do
		tag=$(curl -s -o /dev/null -D - -H 'Accept-Encoding: gzip' "http://127.0.0.1:$port$p" |
			tr -d '\r' | sed -n 's/^[Ee][Tt][Aa][Gg]: //p' | head -1)
		[ -n "$tag" ] && printf '%s=%s ' "$p" "$tag"
	done
}
# shellcheck disable=SC2086
demo_etags=$(etags_of "$port_demo" $demo_paths)
# shellcheck disable=SC2086
root_etags=$(etags_of "$port_root" $root_paths)
setup_requests=$(( $(wc -w <<<"$demo_paths") ))

# --- the load -------------------------------------------------------------
half=$((conns / 2))
SOAK_PATHS="$demo_paths" \
	wrk -t1 -c"$half" -d"${seconds}s" --timeout 10s -s "$lua" "http://127.0.0.1:$port_demo/" \
	>"$tmp/wrk_demo.out" 2>&1 &
wrk_demo=$!
SOAK_PATHS="$root_paths" SOAK_RANGE=/data.json \
	wrk -t1 -c"$((conns - half))" -d"${seconds}s" --timeout 10s -s "$lua" \
	"http://127.0.0.1:$port_root/" >"$tmp/wrk_root.out" 2>&1 &
wrk_root=$!

# /events: $streams clients in parallel, each fetching it again and again
# until the load ends (a new fetch starts only while 11 s remain). Every
# gzip stream takes a compressor from the compressor pool and gives it back at
# its end: more streams at once than the pool keeps idle test its cap.
event_loops=()
for j in $(seq 1 "$streams"); do
	(
		i=0
		end=$((SECONDS + seconds - 11))
		while [ "$SECONDS" -lt "$end" ]; do
			curl -s --compressed --max-time 20 "http://127.0.0.1:$port_demo/events" \
				>"$tmp/events.$j.$i"
			echo $? >"$tmp/events.$j.$i.rc"
			i=$((i + 1))
		done
	) &
	event_loops+=($!)
done

# HEAD and conditional GET (wrk cannot send them: see soak.lua) over both
# servers' paths, in a loop: a HEAD must be a 2xx without a body, a GET
# with If-None-Match of the path's gzip ETag a 304 without a body.
declare -A etag
for pair in $demo_etags; do etag["$port_demo ${pair%%=*}"]="${pair#*=}"; done
for pair in $root_etags; do etag["$port_root ${pair%%=*}"]="${pair#*=}"; done
(
	i=0
	end=$((SECONDS + seconds - 2))
	# shellcheck disable=SC2086
	set -- $demo_paths
	nd=$#
	# shellcheck disable=SC2086
	set -- $demo_paths $root_paths
	while [ "$SECONDS" -lt "$end" ]; do
		k=$((i / 2 % $# + 1))
		port=$port_root
		[ "$k" -le "$nd" ] && port=$port_demo
		tag="${etag["$port ${!k}"]:-}"
		if [ $((i % 2)) -eq 0 ] || [ -z "$tag" ]; then
			kind=HEAD
			out=$(curl -s -I -o /dev/null -w '%{http_code} %{size_download}' \
				-H 'Accept-Encoding: gzip' "http://127.0.0.1:$port${!k}")
		else
			kind=COND
			out=$(curl -s -o /dev/null -w '%{http_code} %{size_download}' \
				-H 'Accept-Encoding: gzip' -H "If-None-Match: $tag" \
				"http://127.0.0.1:$port${!k}")
		fi
		echo "$port $kind $out ${!k}" >>"$tmp/side"
		i=$((i + 1))
		sleep 0.05
	done
) &
side_loop=$!

# Memory, once a second, while the load runs.
: >"$tmp/rss"
t0=$SECONDS
while kill -0 "$wrk_demo" 2>/dev/null || kill -0 "$wrk_root" 2>/dev/null; do
	d=$(sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$pid_demo/status")
	r=$(sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$pid_root/status")
	echo "$((SECONDS - t0)) ${d:-0} ${r:-0}" >>"$tmp/rss"
	sleep 1
done
wait "$wrk_demo" "$wrk_root" "${event_loops[@]}" "$side_loop"
sleep 1 # let the last connections close

# --- checks -----------------------------------------------------------------
wrk_field() { # wrk_field FILE: requests, socket errors, non-2xx/3xx
	local req err non
	req=$(sed -n 's/^ *\([0-9]*\) requests in.*/\1/p' "$1")
	err=$(sed -n 's/.*Socket errors: connect \([0-9]*\), read \([0-9]*\), write \([0-9]*\), timeout \([0-9]*\).*/\1 \2 \3 \4/p' "$1" |
		awk '{print $1 + $2 + $3 + $4}')
	non=$(sed -n 's/.*Non-2xx or 3xx responses: *\([0-9]*\).*/\1/p' "$1")
	echo "${req:-0} ${err:-0} ${non:-0}"
}
read -r req_demo err_demo non_demo < <(wrk_field "$tmp/wrk_demo.out")
read -r req_root err_root non_root < <(wrk_field "$tmp/wrk_root.out")
rps_demo=$(sed -n 's/^Requests\/sec: *//p' "$tmp/wrk_demo.out")
rps_root=$(sed -n 's/^Requests\/sec: *//p' "$tmp/wrk_root.out")

events_ok=0
events_n=0
for f in "$tmp"/events.*; do
	case "$f" in *.rc) continue ;; esac
	events_n=$((events_n + 1))
	if [ "$(cat "$f.rc")" = 0 ] && grep -q '^id: 10$' "$f" && [ "$(grep -c '^data: ' "$f")" -eq 10 ]; then
		events_ok=$((events_ok + 1))
	fi
done

# HEAD: a 2xx status and no body bytes; conditional GET: 304, no body.
side_n=$(wc -l <"$tmp/side")
side_demo=$(awk -v p="$port_demo" '$1 == p' "$tmp/side" | wc -l)
heads_n=$(awk '$2 == "HEAD"' "$tmp/side" | wc -l)
conds_n=$(awk '$2 == "COND"' "$tmp/side" | wc -l)
side_bad=$(awk '($2 == "HEAD" && $3 !~ /^2/) || ($2 == "COND" && $3 != 304) || $4 != 0' "$tmp/side" | wc -l)

# RSS: the sample at the end of the warm-up, and the largest after it.
rss_growth() { # rss_growth COLUMN: "base max percent"
	awk -v w="$warmup" -v c="$1" '
		$1 <= w { base = $c }
		$1 > w && $c > max { max = $c }
		END { if (!base) base = 1; printf "%d %d %.1f\n", base, max, (max - base) * 100 / base }' "$tmp/rss"
}
read -r rss0_demo rss1_demo grow_demo < <(rss_growth 2)
read -r rss0_root rss1_root grow_root < <(rss_growth 3)

# The demo's counters, settled: one /stats request (this one) is in flight.
stats=$(curl -s "http://127.0.0.1:$port_demo/stats")
num() { sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p" <<<"$stats" | head -1; }
responses=$(num responses)
compressed=$(num compressed)
failures=$(num failures)
pool_idle=$(num pool_idle)
pool_gets=$(num pool_gets)
pool_misses=$(num pool_misses)
cache_hits=$(num cache_hits)
requests=$(num requests)
reasons_sum=$(sed -n 's/.*"reasons":{\([^}]*\)}.*/\1/p' <<<"$stats" | tr ',' '\n' |
	sed -n 's/.*:\([0-9]*\)$/\1/p' | awk '{s += $1} END {print s + 0}')
reason_compressed=$(sed -n 's/.*"reasons":{"compressed":\([0-9]*\).*/\1/p' <<<"$stats")
not_accepted=$(sed -n 's/.*"not-accepted":\([0-9]*\).*/\1/p' <<<"$stats")
client_requests=$((req_demo + events_n + side_demo + setup_requests + 1))
pool_cap=48

echo "soak: results after ${seconds} s (warm-up ${warmup} s)"
printf '  demo:   %s requests (%s/s), socket errors %s, non-2xx/3xx %s; /events %s of %s complete\n' \
	"$req_demo" "${rps_demo:-?}" "$err_demo" "$non_demo" "$events_ok" "$events_n"
printf '  static: %s requests (%s/s), socket errors %s, non-2xx/3xx %s\n' \
	"$req_root" "${rps_root:-?}" "$err_root" "$non_root"
printf '  curl: %s HEAD, %s If-None-Match (%s to the demo); %s wrong status or with a body\n' \
	"$heads_n" "$conds_n" "$side_demo" "$side_bad"
printf '  VmRSS demo:   %s kB after warm-up, max %s kB after: %s %%\n' "$rss0_demo" "$rss1_demo" "$grow_demo"
printf '  VmRSS static: %s kB after warm-up, max %s kB after: %s %%\n' "$rss0_root" "$rss1_root" "$grow_root"
printf '  demo /stats: requests %s, responses %s (reasons sum %s), compressed %s, not-accepted %s,\n' \
	"$requests" "$responses" "$reasons_sum" "$compressed" "$not_accepted"
printf '               cache hits %s, failures %s, pool gets %s, misses %s, idle %s (cap %s)\n' \
	"$cache_hits" "$failures" "$pool_gets" "$pool_misses" "$pool_idle" "$pool_cap"

check $(( req_demo > 0 && req_root > 0 ? 0 : 1 )) "both servers answered ($req_demo + $req_root requests)"
check $(( err_demo + err_root == 0 ? 0 : 1 )) "no socket errors"
check $(( non_demo + non_root == 0 ? 0 : 1 )) "no responses outside 2xx/3xx"
check $(( heads_n > 0 && conds_n > 0 && side_bad == 0 ? 0 : 1 )) \
	"HEAD: 2xx, If-None-Match: 304, no body ($side_n requests)"
check $(( events_n > 0 && events_ok == events_n ? 0 : 1 )) "every /events fetch got ten events ($events_ok/$events_n)"
# Under 10 %, or under 2 MiB in absolute terms: on a ~10 MiB server a few
# more pooled compressors (262 KiB each for zlib streams, created when more
# /events streams overlap than during the warm-up) are 10 % without any
# leak (seen once: 10968 -> 12300 kB with pool misses 44, idle 17 of 32).
check "$(awk -v g="$grow_demo" -v a="$rss0_demo" -v b="$rss1_demo" 'BEGIN { print (g < 10 || b - a < 2048) ? 0 : 1 }')" "demo RSS growth ${grow_demo} % < 10 % (or < 2 MiB)"
check "$(awk -v g="$grow_root" -v a="$rss0_root" -v b="$rss1_root" 'BEGIN { print (g < 10 || b - a < 2048) ? 0 : 1 }')" "static RSS growth ${grow_root} % < 10 % (or < 2 MiB)"
check $(( ${pool_idle:-999} <= pool_cap ? 0 : 1 )) "pool idle ${pool_idle} <= cap ${pool_cap}"
check $(( ${failures:-1} == 0 ? 0 : 1 )) "no compression failures"
check $(( ${reasons_sum:-0} == ${responses:--1} ? 0 : 1 )) "reasons sum to the responses"
check $(( ${reason_compressed:--1} == ${compressed:--2} && ${compressed:-0} > 0 ? 0 : 1 )) \
	"compressed = reasons.compressed > 0"
check $(( ${not_accepted:-0} > 0 ? 0 : 1 )) "some clients refused gzip (not-accepted > 0)"
# Every request but this /stats (decided after its snapshot) has its decision.
check $(( ${responses:-0} == ${requests:-0} - 1 ? 0 : 1 )) "one decision per request (${responses} = ${requests} - 1)"
check $(( ${requests:-0} >= client_requests && ${requests:-0} <= client_requests + half ? 0 : 1 )) \
	"server requests ${requests} within [${client_requests}, +${half}] of those the clients completed"
kill -0 "$pid_demo" 2>/dev/null && kill -0 "$pid_root" 2>/dev/null
check $? "both servers still running"
[ "$fail" -eq 0 ] && echo "soak: passed" || { echo "soak: FAILED"; tail -5 "$tmp"/*.err; }
exit "$fail"
