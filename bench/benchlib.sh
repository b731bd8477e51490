# benchlib.sh: shell helpers shared by bench/e2e.sh and bench/passthru.sh (sourced): servers on 127.0.0.1 port 0, the report, wrk's exact totals.
#
# Every wait here is bounded; a server is found by its
# "listening on http://ADDR:PORT/" line, as gzserve and bench/passthru
# print it.

# bl_stop PID: SIGTERM, up to 5 s for the process to finish what is in
# flight, then SIGKILL. An empty or gone PID is not an error.
bl_stop() {
	if [ -n "$1" ] && kill -0 "$1" 2>/dev/null; then
		kill -TERM "$1" 2>/dev/null || :
		bl_i=0
		while kill -0 "$1" 2>/dev/null && [ $bl_i -lt 50 ]; do
			sleep 0.1
			bl_i=$((bl_i + 1))
		done
		kill -KILL "$1" 2>/dev/null || :
	fi
}

# bl_start WHAT OUT ERR COMMAND...: start COMMAND in the background with
# stdout to OUT and stderr to ERR, wait (at most 10 s) for its listening
# line; sets BL_PID and BL_URL (without the trailing /). Exits 1, naming
# WHAT and showing ERR, if the process ends or stays silent.
bl_start() {
	bl_what=$1 bl_out=$2 bl_err=$3
	shift 3
	: >"$bl_out"
	"$@" >"$bl_out" 2>"$bl_err" &
	BL_PID=$!
	BL_URL=
	bl_i=0
	while [ $bl_i -lt 100 ]; do
		BL_URL=$(sed -n 's|^listening on \(http://[^ ]*\)/$|\1|p' "$bl_out" | head -n 1)
		[ -n "$BL_URL" ] && return 0
		if ! kill -0 "$BL_PID" 2>/dev/null; then
			echo "$bl_what exited:" >&2
			cat "$bl_err" >&2
			exit 1
		fi
		sleep 0.1
		bl_i=$((bl_i + 1))
	done
	echo "$bl_what did not report its address within 10 s" >&2
	exit 1
}

# bl_report LINE...: print, and append to $OUTFILE when set.
bl_report() {
	if [ -n "${OUTFILE:-}" ]; then
		printf '%s\n' "$*" | tee -a "$OUTFILE"
	else
		printf '%s\n' "$*"
	fi
}

# bl_wrk_script FILE TAG: a wrk Lua script printing, when the run is done,
# "TAG requests seconds bytes errors p50-latency-us" (wrk's own summary
# rounds them).
bl_wrk_script() {
	cat >"$1" <<LUA
done = function(summary, latency, requests)
	local secs = summary.duration / 1e6
	local errs = summary.errors.connect + summary.errors.read + summary.errors.write
		+ summary.errors.status + summary.errors.timeout
	io.write(string.format("$2 %d %.6f %d %d %d\n", summary.requests, secs,
		summary.bytes, errs, latency:percentile(50)))
end
LUA
}
