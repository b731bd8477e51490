#!/bin/sh
# e2e.sh: make bench-e2e: gzserve and nginx side by side on 127.0.0.1 over the same files, driven by wrk in interleaved rounds; ratios of requests/s.
#
# Usage: bench/e2e.sh [GZSERVE [OUTFILE]]
#   GZSERVE   the gzserve binary (default examples/gzserve/gzserve)
#   OUTFILE   also write the report there
# Environment (all optional):
#   E2E_DURATION     seconds per case (default 2)
#   E2E_ROUNDS       interleaved rounds (default 3); 27 cases per round
#   E2E_CONNECTIONS  wrk connections, keep-alive (default 32)
#   E2E_THREADS      wrk threads (default 2)
#   E2E_SERVER_THREADS  gzserve --threads and nginx worker_processes
#                    (default 2)
#   E2E_NGINX        the nginx binary (default: nginx on PATH, /usr/sbin/nginx)
#
# Servers, all started once and kept for every round (each idle while
# another is measured):
#   gz-demo   gzserve's built-in demo: one response per path, kept, so every
#             gzip request after the first is its cached gzip variant
#   gz-off    gzserve --root --no-compress (identity: the file opened beneath
#             the root per request, its fd response sent by libmicrohttpd)
#   gz-z1     gzserve --root --backend zlib --level 1 --cache-size 0: the
#             file opened and its gzip body compressed per request
#   gz-z6     the same with --level 6
#   gz-def    gzserve --root --cache-size 0: the default backend and level
#             (libdeflate 5), every request compressed
#   gz-cache  gzserve --root: the default configuration: the file opened
#             per request, and the library's file cache (32 MiB) that
#             compresses each file version once
#   ngx-off   nginx, gzip off
#   ngx-z1    nginx, gzip_comp_level 1
#   ngx-z6    nginx, gzip_comp_level 6 (the level most configurations use)
# nginx is configured as a tuned static server would be: sendfile,
# open_file_cache (descriptors and metadata kept), no access log,
# keepalive_requests high enough that wrk's connections stay open;
# gzip_types application/json, gzip_min_length 1024, gzip_vary on, as
# gzserve's defaults. Every request sends "Accept-Encoding: gzip".
#
# Per round, for each size (/2k.json, /20k.json, /100k.json) every server
# is measured in turn, the order rotating from round to round; the report
# gives each server's median requests/s and, for each comparison, the
# median of the per-round ratios gzserve / nginx with its target (the
# table's target column, set in the awk below). Client and server share the machine: on 2 CPUs the figures
# measure the pair, not the server alone; only the ratios mean anything.
set -eu
. "$(dirname "$0")/benchlib.sh"

GZSERVE=${1:-examples/gzserve/gzserve}
OUTFILE=${2:-}
DURATION=${E2E_DURATION:-2}
ROUNDS=${E2E_ROUNDS:-3}
CONNS=${E2E_CONNECTIONS:-32}
THREADS=${E2E_THREADS:-2}
SRV_THREADS=${E2E_SERVER_THREADS:-2}
NGINX=${E2E_NGINX:-}

if ! command -v wrk >/dev/null 2>&1; then
	echo "bench-e2e: wrk is not installed (apt-get install wrk); skipped" >&2
	exit 0
fi
if [ ! -x "$GZSERVE" ]; then
	echo "bench-e2e: $GZSERVE not found; build it first (make examples/gzserve/gzserve)" >&2
	exit 1
fi
if [ -z "$NGINX" ]; then
	NGINX=$(command -v nginx 2>/dev/null || :)
	[ -z "$NGINX" ] && [ -x /usr/sbin/nginx ] && NGINX=/usr/sbin/nginx
fi
if [ -n "$NGINX" ] && [ ! -x "$NGINX" ]; then
	echo "bench-e2e: $NGINX is not an executable" >&2
	NGINX=
fi
if [ -z "$NGINX" ]; then
	echo "bench-e2e: nginx is not installed (apt-get install nginx-light):" \
		"gzserve's rows only, no ratios" >&2
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mhdgz-e2e.XXXXXX")
pids=
ngx_pid=
cleanup() {
	for p in $pids $ngx_pid; do
		bl_stop "$p"
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# start_gzserve NAME ARGS...: gzserve on 127.0.0.1 port 0 (bl_start); sets
# url_NAME and pid_NAME.
start_gzserve() {
	name=$1
	shift
	bl_start "bench-e2e: gzserve ($name)" "$tmp/$name.out" "$tmp/$name.err" \
		"$GZSERVE" --bind 127.0.0.1 --port 0 --quiet --threads "$SRV_THREADS" "$@"
	pids="$pids $BL_PID"
	eval "url_$name=\$BL_URL pid_$name=\$BL_PID"
}

# start_nginx: one nginx (master and E2E_SERVER_THREADS workers) with
# three server blocks, gzip off / level 1 / level 6, on three free ports
# of 127.0.0.1 (nginx cannot report a port 0 binding; a port taken
# between the probe and the bind is retried with others).
start_nginx() {
	mkdir -p "$tmp/nginx"
	try=0
	while [ $try -lt 10 ]; do
		try=$((try + 1))
		base=$(awk -v s="$$$try" 'BEGIN { srand(s); print 20000 + int(rand() * 30000) }')
		p_off=$base p_z1=$((base + 1)) p_z6=$((base + 2))
		cat >"$tmp/nginx/nginx.conf" <<EOF
worker_processes $SRV_THREADS;
daemon off;
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log warn;
events { worker_connections 1024; }
http {
	types { application/json json; }
	default_type application/octet-stream;
	access_log off;
	sendfile on;
	tcp_nopush on;
	tcp_nodelay on;
	keepalive_requests 10000000;
	open_file_cache max=1000 inactive=60s;
	open_file_cache_valid 60s;
	client_body_temp_path $tmp/nginx/body;
	proxy_temp_path $tmp/nginx/proxy;
	fastcgi_temp_path $tmp/nginx/fastcgi;
	uwsgi_temp_path $tmp/nginx/uwsgi;
	scgi_temp_path $tmp/nginx/scgi;
	gzip_types application/json;
	gzip_min_length 1024;
	gzip_vary on;
	root $tmp/root;
	server { listen 127.0.0.1:$p_off; gzip off; }
	server { listen 127.0.0.1:$p_z1; gzip on; gzip_comp_level 1; }
	server { listen 127.0.0.1:$p_z6; gzip on; gzip_comp_level 6; }
}
EOF
		"$NGINX" -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf" -e "$tmp/nginx/error.log" \
			>/dev/null 2>&1 &
		ngx_pid=$!
		i=0
		while [ $i -lt 50 ] && kill -0 "$ngx_pid" 2>/dev/null; do
			if curl -s -o /dev/null "http://127.0.0.1:$p_z6/2k.json" &&
				curl -s -o /dev/null "http://127.0.0.1:$p_off/2k.json" &&
				curl -s -o /dev/null "http://127.0.0.1:$p_z1/2k.json"; then
				url_ngx_off=http://127.0.0.1:$p_off
				url_ngx_z1=http://127.0.0.1:$p_z1
				url_ngx_z6=http://127.0.0.1:$p_z6
				pid_ngx_off=$ngx_pid pid_ngx_z1=$ngx_pid pid_ngx_z6=$ngx_pid
				return 0
			fi
			sleep 0.1
			i=$((i + 1))
		done
		bl_stop "$ngx_pid"
		ngx_pid=
	done
	echo "bench-e2e: nginx did not start:" >&2
	cat "$tmp/nginx/error.log" >&2 2>/dev/null || :
	exit 1
}

# cpu_ns PID: the CPU time of PID's threads and of its children's
# (nginx's workers), in nanoseconds (the scheduler's run time, which the
# kernel keeps per thread in /proc/PID/task/TID/schedstat).
cpu_ns() {
	kids=$(ps -o pid= --ppid "$1" 2>/dev/null || :)
	for q in "$1" $kids; do
		cat /proc/"$q"/task/*/schedstat 2>/dev/null || :
	done | awk '{ t += $1 } END { printf "%.0f\n", t }'
}

# wrk reports rounded totals; this script prints the exact ones.
bl_wrk_script "$tmp/report.lua" E2E

[ -n "$OUTFILE" ] && : >"$OUTFILE"
ncpu=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)

# The three bodies as files, from the demo (the benchmark payload slices).
start_gzserve demo
mkdir "$tmp/root"
for size in 2k 20k 100k; do
	curl -s -o "$tmp/root/$size.json" "$url_demo/$size.json"
done
# nginx's workers may run as another user: the files must be readable.
chmod 755 "$tmp" "$tmp/root"
chmod 644 "$tmp/root"/*.json
# The file cache keeps a file's coded body only once the file is 2 s old.
sleep 2

servers="demo off z1 z6 def cache"
start_gzserve off --root "$tmp/root" --no-compress
start_gzserve z1 --root "$tmp/root" --backend zlib --level 1 --cache-size 0
start_gzserve z6 --root "$tmp/root" --backend zlib --level 6 --cache-size 0
start_gzserve def --root "$tmp/root" --cache-size 0
start_gzserve cache --root "$tmp/root"
if [ -n "$NGINX" ]; then
	start_nginx
	servers="$servers ngx_off ngx_z1 ngx_z6"
fi

if [ -n "$NGINX" ]; then
	bl_report "# bench-e2e: gzserve ($GZSERVE, --threads $SRV_THREADS) and nginx ($NGINX, worker_processes $SRV_THREADS)"
else
	bl_report "# bench-e2e: gzserve ($GZSERVE, --threads $SRV_THREADS); no nginx"
fi
bl_report "# wrk -t$THREADS -c$CONNS -d${DURATION}s, keep-alive, Accept-Encoding: gzip; $ROUNDS interleaved rounds"
bl_report "# $(date -u '+%Y-%m-%d %H:%M UTC'); $(uname -m), $ncpu CPUs, $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -n 1)"
bl_report "# load before: $(cut -d' ' -f1-3 /proc/loadavg)"

# One response's size per server and path: on the wire (status line and
# headers, plus the body with any chunked framing, kept by --raw) and its
# body; and its coding. wrk's own byte count cannot give this: it includes
# the responses still in flight when the run stops.
: >"$tmp/sizes"
for size in 2k 20k 100k; do
	for s in $servers; do
		eval "u=\$url_$s"
		sz=$(curl -s --raw -D "$tmp/hdr" -o "$tmp/one" -w '%{size_header} %{size_download}' \
			-H 'Accept-Encoding: gzip' "$u/$size.json" 2>/dev/null || echo "0 0")
		ce=$(tr -d '\r' <"$tmp/hdr" | sed -n 's/^[Cc]ontent-[Ee]ncoding: *//p' | head -n 1)
		echo "$size $s $(( ${sz% *} + $(wc -c <"$tmp/one") )) ${sz#* } ${ce:-identity}" >>"$tmp/sizes"
	done
done

# The rounds: every server in turn per size, the order rotated per round.
: >"$tmp/rps"
nsrv=$(echo $servers | wc -w)
r=1
while [ $r -le "$ROUNDS" ]; do
	for size in 2k 20k 100k; do
		# rotate the server list by r
		order=$(echo $servers | tr ' ' '\n' | awk -v k="$r" -v n="$nsrv" \
			'{ a[NR - 1] = $0 } END { for (i = 0; i < n; i++) print a[(i + k) % n] }')
		for s in $order; do
			eval "u=\$url_$s p=\$pid_$s"
			c0=$(cpu_ns "$p")
			res=$(timeout $((DURATION + 20)) wrk -t"$THREADS" -c"$CONNS" -d"${DURATION}s" \
				-s "$tmp/report.lua" -H 'Accept-Encoding: gzip' "$u/$size.json" |
				sed -n 's/^E2E //p')
			if [ -z "$res" ]; then
				echo "bench-e2e: wrk failed for $s /$size.json" >&2
				exit 1
			fi
			c1=$(cpu_ns "$p")
			echo "$r $size $s $res $((c1 - c0))" >>"$tmp/rps"
		done
	done
	r=$((r + 1))
done
bl_report "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"

# The table: median req/s per server and size, one response's bytes, and
# the ratios (median of per-round ratios) against nginx with the targets.
awk -v ncpu="$ncpu" -v rounds="$ROUNDS" -v outfile="${OUTFILE:-/dev/null}" '
function median(arr, n,    i, j, t) {
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && arr[j - 1] > arr[j]; j--) {
			t = arr[j]; arr[j] = arr[j - 1]; arr[j - 1] = t
		}
	return n % 2 ? arr[(n + 1) / 2] : (arr[n / 2] + arr[n / 2 + 1]) / 2
}
function out(s) { print s; if (outfile != "/dev/null") print s >> outfile }
FNR == NR { wire[$1, $2] = $3; body[$1, $2] = $4; ce[$1, $2] = $5; next }
{
	# round size server nreq secs bytes errors p50 cpu-ns
	rps[$1, $2, $3] = $4 / $5; errs[$2, $3] += $7; seen[$3] = 1
	cpu[$1, $2, $3] = $4 ? $9 / $4 / 1000 : 0
	if (!($3 in order)) { order[$3] = ++nord; name[nord] = $3 }
}
END {
	split("2k 20k 100k", sizes, " ")
	out("# server    path        req/s(median)  cpu-us/req   wire-B    body-B  coding    errors")
	for (k = 1; k <= nord; k++) {
		s = name[k]
		for (z = 1; z <= 3; z++) {
			n = 0
			for (r = 1; r <= rounds; r++)
				if ((r, sizes[z], s) in rps) v[++n] = rps[r, sizes[z], s]
			med[sizes[z], s] = n ? median(v, n) : 0
			n = 0
			for (r = 1; r <= rounds; r++)
				if ((r, sizes[z], s) in cpu) v[++n] = cpu[r, sizes[z], s]
			mcpu = n ? median(v, n) : 0
			out(sprintf("  %-9s /%-9s %12.1f %11.1f %8d %9d  %-8s %7d", s, sizes[z] ".json",
				med[sizes[z], s], mcpu, wire[sizes[z], s], body[sizes[z], s], ce[sizes[z], s],
				errs[sizes[z], s]))
			nsop = med[sizes[z], s] ? 1e9 / med[sizes[z], s] : 0
			gol[++ngo] = sprintf("BenchmarkE2E_%s/%s-%d %d %.0f ns/op %d wire-B/op %d body-B/op",
				sizes[z], s, ncpu, 1, nsop, wire[sizes[z], s], body[sizes[z], s])
		}
	}
	if (!("ngx_z6" in seen)) {
		for (i = 1; i <= ngo; i++) out(gol[i])
		exit 0
	}
	out("")
	out("# ratios gzserve / nginx, requests/s (median of per-round ratios; > 1: gzserve serves more)")
	out("# cpu: nginx CPU per request / gzserve CPU per request (> 1: gzserve spends less)")
	out("# comparison                         size    ratio   target  verdict   cpu")
	ncmp = split("off:ngx_off:gzip off:0.90:0.90:0.90;" \
		"z1:ngx_z1:zlib 1 both:1.00:1.00:1.00;" \
		"z6:ngx_z6:zlib 6 both:1.00:1.00:1.00;" \
		"def:ngx_z6:default, no cache:1.00:1.50:1.50;" \
		"cache:ngx_z6:default:1.50:1.50:1.50;" \
		"demo:ngx_z6:cached variant:0:0:0", cmps, ";")
	for (c = 1; c <= ncmp; c++) {
		split(cmps[c], f, ":")
		for (z = 1; z <= 3; z++) {
			n = 0
			for (r = 1; r <= rounds; r++)
				if ((r, sizes[z], f[1]) in rps && (r, sizes[z], f[2]) in rps && rps[r, sizes[z], f[2]] > 0)
					v[++n] = rps[r, sizes[z], f[1]] / rps[r, sizes[z], f[2]]
			ratio = n ? median(v, n) : 0
			n = 0
			for (r = 1; r <= rounds; r++)
				if (cpu[r, sizes[z], f[1]] > 0 && cpu[r, sizes[z], f[2]] > 0)
					v[++n] = cpu[r, sizes[z], f[2]] / cpu[r, sizes[z], f[1]]
			cratio = n ? median(v, n) : 0
			tgt = f[3 + z]
			verdict = tgt == 0 ? "info" : (ratio >= tgt ? "met" : "NOT MET")
			out(sprintf("  %-9s / %-7s %-19s %5s %7.2fx %7s  %-8s %5.2fx", "gz-" f[1], f[2],
				"(" f[3] ")", sizes[z], ratio, tgt == 0 ? "-" : sprintf("%.2fx", tgt), verdict,
				cratio))
		}
	}
	for (i = 1; i <= ngo; i++) out(gol[i])
}' "$tmp/sizes" "$tmp/rps"
