#!/bin/bash
# tests/upstream.sh: libmicrohttpd's own src/testcurl programs run through mhdgz's two-call change (make check-upstream).
#
# Gets the source package of the INSTALLED libmicrohttpd (apt-get source,
# the installed version), configures it (only to have its MHD_config.h
# and its test list), and compiles every program of src/testcurl four
# times, linked against the system libmicrohttpd:
#
#   plain    as upstream wrote it (a control: is the program sound here?)
#   a        -include tests/upstream/mhdgz_twins.h with UPSTREAM_MHDGZ:
#            constructors and MHD_queue_response through mhdgz
#   b        as a, plus UPSTREAM_CURL_GZIP: libcurl asks for gzip and
#            decodes it
#   ctl-b    UPSTREAM_CURL_GZIP alone (plain libmicrohttpd): tells a
#            failure of the gzip-asking client (a longer request) from
#            one of mhdgz
#
# Each program runs in its own network namespace with only loopback up
# (unshare -n), with a timeout; exit status 77 is a skip. Prints a table
# and totals; exits 1 when a program fails in mode a while passing plain,
# or fails in mode b while passing in ctl-b (a program that fails in its
# control fails here for reasons of its own: it is shown, not counted);
# 77 when it cannot run here (not root and no source, no unshare).
#
# Options (make check-upstream passes the first five):
#   --top-srcdir DIR     this tree's sources
#   --top-builddir DIR   this tree's build (handler/.libs/libmhdgz.so)
#   --cc CC --cflags F --ldflags F
#                        compiler and flags for the programs: this tree's,
#                        so a sanitizer build gives sanitized programs
#   --work DIR           cache and logs (default TOP_BUILDDIR/tests/upstream-build)
#   --timeout SEC        per program and mode (default 120)
#   --only ERE           programs whose name matches
#   --jobs N             compile and run N at a time (default 1 for runs,
#                        2 for compiles); libmicrohttpd's tests time things
#   --equivalents        also map libmicrohttpd 1.0's from_buffer_static
#                        and from_buffer_copy (no twins) to
#                        mhdgz_response_from_buffer (see mhdgz_twins.h)
#   --light              configure the suite without --enable-heavy-tests
#                        (by default on: its test_get_response_cleanup,
#                        test_concurrent_stop, perf_get... run too)
# Environment: UPSTREAM_GZ_MIN_NBYTES (see mhdgz_twins.h).
set -u

top_srcdir=.
top_builddir=.
cc=${CC:-cc}
cflags=${CFLAGS:--O2 -g}
ldflags=${LDFLAGS:-}
work=
timeout_s=120
only=
run_jobs=1
cc_jobs=2
equivalents=0
heavy=1
while test $# -gt 0; do
	case $1 in
	--top-srcdir) top_srcdir=$2; shift ;;
	--top-builddir) top_builddir=$2; shift ;;
	--cc) cc=$2; shift ;;
	# -Werror is for our code: libmicrohttpd's tests use interfaces
	# libcurl has deprecated since (curl_formadd in test_postform).
	--cflags) cflags=$(printf '%s\n' "$2" | sed 's/\(^\| \)-Werror\( \|$\)/ /g'); shift ;;
	--ldflags) ldflags=$2; shift ;;
	--work) work=$2; shift ;;
	--timeout) timeout_s=$2; shift ;;
	--only) only=$2; shift ;;
	--jobs) run_jobs=$2; cc_jobs=$2; shift ;;
	--equivalents) equivalents=1 ;;
	--light) heavy=0 ;;
	*) echo "upstream.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
top_srcdir=$(cd "$top_srcdir" && pwd) || exit 2
top_builddir=$(cd "$top_builddir" && pwd) || exit 2
test -n "$work" || work=$top_builddir/tests/upstream-build
mkdir -p "$work" && work=$(cd "$work" && pwd) || exit 2
twins=$top_srcdir/tests/upstream/mhdgz_twins.h
libdir=$top_builddir/handler/.libs

say() { echo "upstream: $*"; }
skip() { echo "upstream: SKIP: $*" >&2; exit 77; }
die() { echo "upstream: ERROR: $*" >&2; exit 2; }
is_root() { test "$(id -u)" = 0; }

test -e "$libdir/libmhdgz.so" ||
	die "no $libdir/libmhdgz.so: build this tree first (make), shared (not --disable-shared)"

# --- network namespaces --------------------------------------------------
# Root: unshare -n. Otherwise a user namespace maps us to root in it.
if is_root; then
	ns=(unshare -n)
elif unshare -rn true 2>/dev/null; then
	ns=(unshare -rn)
else
	skip "needs root or unprivileged user namespaces (unshare -n)"
fi
if ! command -v ip >/dev/null 2>&1; then
	is_root || skip "needs ip (iproute2) to bring loopback up: apt-get install iproute2"
	say "installing iproute2 (ip brings loopback up in each namespace)"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q iproute2 >"$work/apt-iproute2.log" 2>&1 ||
		die "apt-get install iproute2 failed: see $work/apt-iproute2.log"
fi
"${ns[@]}" sh -c 'ip link set lo up' || skip "cannot bring loopback up in a new network namespace"

# --- the installed libmicrohttpd's source --------------------------------
version=$(dpkg-query -W -f='${Version}' libmicrohttpd-dev 2>/dev/null) ||
	skip "libmicrohttpd-dev is not installed (dpkg-query)"
srcpkg=$(dpkg-query -W -f='${source:Package}' libmicrohttpd-dev)
upver=${version#*:}
upver=${upver%-*}
srcroot=$work/src-$version
usrc=$srcroot/$srcpkg-$upver
own_src=mhdgz-upstream-deb-src

# A deb-src copy of each enabled apt source of this machine, in a file of
# our own: deb822 stanzas get "Types: deb-src", one-line sources a
# deb-src line with the same options, URI, suite and components.
enable_deb_src() {
	local d=/etc/apt/sources.list.d f out=
	for f in "$d"/*.sources; do
		test -e "$f" && test "${f##*/}" != "$own_src.sources" || continue
		out+=$(awk '
			function flush() {
				if (st != "" && types ~ /(^|[ \t])deb([ \t]|$)/ && types !~ /deb-src/ &&
				    tolower(enabled) != "no")
					printf "%s\n", st
				st = ""; types = ""; enabled = ""
			}
			/^[ \t]*$/ { flush(); next }
			/^#/ { next }
			/^Types:/ { types = $0; sub(/^Types:/, "", types); $0 = "Types: deb-src" }
			/^Enabled:/ { enabled = $2 }
			{ st = st $0 "\n" }
			END { flush() }' "$f")
		out+=$'\n'
	done
	if test -n "${out//[$'\n']/}"; then
		printf '# deb-src copies of %s/*.sources, written by mhdgz tests/upstream.sh\n%s' \
			"$d" "$out" >"$d/$own_src.sources"
		say "wrote $d/$own_src.sources (deb-src of this machine's deb822 sources)"
	fi
	out=
	for f in /etc/apt/sources.list "$d"/*.list; do
		test -e "$f" && test "${f##*/}" != "$own_src.list" || continue
		out+=$(sed -n 's/^[ \t]*deb\([ \t]\)/deb-src\1/p' "$f")
		out+=$'\n'
	done
	if test -n "${out//[$'\n']/}"; then
		printf '# deb-src copies of the one-line apt sources, written by mhdgz tests/upstream.sh\n%s' \
			"$out" >"$d/$own_src.list"
		say "wrote $d/$own_src.list (deb-src of this machine's one-line sources)"
	fi
}

fetch_source() {
	local log=$work/apt-source.log
	if ! apt-get source --print-uris "$srcpkg=$version" >/dev/null 2>&1; then
		is_root || skip "no deb-src index for $srcpkg=$version and not root to enable one; run as root or put the source at $usrc"
		say "enabling deb-src from this machine's apt sources"
		enable_deb_src
		apt-get update -q >"$work/apt-update.log" 2>&1 ||
			die "apt-get update failed: see $work/apt-update.log"
	fi
	if ! command -v dpkg-source >/dev/null 2>&1; then
		is_root || skip "apt-get source needs dpkg-source: apt-get install dpkg-dev"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q dpkg-dev >"$work/apt-dpkg-dev.log" 2>&1 ||
			die "apt-get install dpkg-dev failed: see $work/apt-dpkg-dev.log"
	fi
	rm -rf "$srcroot" && mkdir -p "$srcroot" || die "cannot create $srcroot"
	say "apt-get source $srcpkg=$version"
	(cd "$srcroot" && apt-get source -q "$srcpkg=$version") >"$log" 2>&1 ||
		die "apt-get source $srcpkg=$version failed (see $log): is that version still in the archive?"
	test -d "$usrc/src/testcurl" || die "no $usrc/src/testcurl after apt-get source"
	touch "$srcroot/.fetched"
}

test -e "$srcroot/.fetched" || fetch_source
say "libmicrohttpd $version: $usrc"

# --- configure it (once per version and options) -------------------------
# Only for MHD_config.h and the test list: the programs are compiled
# below, against the system library. libcurl tests are on by default.
ucfg=(--disable-doc --disable-examples)
test $heavy = 1 && ucfg+=(--enable-heavy-tests)
if test "$(cat "$usrc/.mhdgz-configured" 2>/dev/null)" != "${ucfg[*]}"; then
	say "configuring $srcpkg-$upver ${ucfg[*]}"
	rm -f "$usrc/.mhdgz-configured"
	(cd "$usrc" && ./configure "${ucfg[@]}") >"$work/configure.log" 2>&1 ||
		die "configure of $srcpkg-$upver failed: see $work/configure.log"
	printf '%s\n' "${ucfg[*]}" >"$usrc/.mhdgz-configured"
fi
tc=$usrc/src/testcurl

# Each program's sources and flags as its Makefile has them after
# configure, one line: name, sources, preprocessor flags,
# compiler flags (without CFLAGS: ours replace them), libraries, separated
# by US (octal 037): a tab would let read merge an empty field.
cat >"$work/info.mk" <<'EOF'
up_var = $(if $(filter undefined,$(origin $(1)_$(2))),$(3),$($(1)_$(2)))
upstream-info:
	@$(foreach p,$(check_PROGRAMS),printf '%s\037%s\037%s\037%s\037%s\n' '$(p)' '$(filter %.c,$($(p)_SOURCES))' '$(DEFS) $(DEFAULT_INCLUDES) $(INCLUDES) $(call up_var,$(p),CPPFLAGS,$(AM_CPPFLAGS)) $(CPPFLAGS)' '$(call up_var,$(p),CFLAGS,$(AM_CFLAGS))' '$(call up_var,$(p),LDADD,$(LDADD)) $(LIBS)';)
EOF
make -s -C "$tc" -f Makefile -f "$work/info.mk" upstream-info >"$work/programs.tsv" 2>"$work/info.err" ||
	die "cannot read the test list of $tc/Makefile: see $work/info.err"
test -s "$work/programs.tsv" ||
	die "$tc has no check_PROGRAMS: is libcurl's -dev package installed (configure.log, RUN_LIBCURL_TESTS)?"

# --- compile -------------------------------------------------------------
modes=(plain a b ctl-b)
mode_defs() {
	local eq=
	test $equivalents = 1 && eq=" -DUPSTREAM_EQUIVALENTS"
	case $1 in
	plain) echo "" ;;
	a) echo "-include $twins -I$top_srcdir/handler -DUPSTREAM_MHDGZ$eq" ;;
	b) echo "-include $twins -I$top_srcdir/handler -DUPSTREAM_MHDGZ -DUPSTREAM_CURL_GZIP$eq" ;;
	ctl-b) echo "-include $twins -DUPSTREAM_CURL_GZIP" ;;
	esac
}
mode_libs() {
	case $1 in
	a | b) echo "-L$libdir -Wl,-rpath,$libdir -lmhdgz" ;;
	*) echo "" ;;
	esac
}
mhd_libs=$(pkg-config --libs libmicrohttpd 2>/dev/null) || mhd_libs=-lmicrohttpd

# One shell script per program and mode, so a compile can be rerun by
# hand; a program is rebuilt when its flags, the header or a source
# changed.
: >"$work/compile.list"
while IFS=$'\037' read -r prog srcs cpp ucf libs; do
	test -z "$only" || [[ $prog =~ $only ]] || continue
	# The in-tree library is replaced by the installed one.
	libs=$(for w in $libs; do
		case $w in
		*libmicrohttpd.la) printf '%s ' "$mhd_libs" ;;
		*) printf '%s ' "$w" ;;
		esac
	done)
	for m in "${modes[@]}"; do
		d=$work/$m
		mkdir -p "$d/log"
		cmd="cd '$tc' && $cc $cpp $(mode_defs "$m") $ucf $cflags $srcs -o '$d/$prog' $ldflags $(mode_libs "$m") $libs"
		printf '%s\n' "$cmd" >"$d/$prog.cmd.new"
		stale=0
		if ! cmp -s "$d/$prog.cmd.new" "$d/$prog.cmd" || ! test -x "$d/$prog"; then
			stale=1
		else
			for s in $srcs; do test "$tc/$s" -nt "$d/$prog" && stale=1; done
			test "$m" != plain && test "$twins" -nt "$d/$prog" && stale=1
		fi
		mv "$d/$prog.cmd.new" "$d/$prog.cmd"
		if test $stale = 1; then
			rm -f "$d/$prog"
			echo "$d/$prog" >>"$work/compile.list"
		fi
	done
done <"$work/programs.tsv"
mapfile -t progs < <(cut -d$'\037' -f1 "$work/programs.tsv" | while read -r p; do
	test -z "$only" || [[ $p =~ $only ]] || continue
	echo "$p"
done)
test ${#progs[@]} -gt 0 || die "no program matches --only '$only'"
n_cc=$(wc -l <"$work/compile.list")
if test "$n_cc" -gt 0; then
	say "compiling $n_cc programs ($cc_jobs at a time)"
	xargs -a "$work/compile.list" -P "$cc_jobs" -I{} sh -c 'sh "$1.cmd" >"$1.cc.log" 2>&1 || :' _ {}
fi

# --- run -----------------------------------------------------------------
# run_one MODE PROG: writes MODE/log/PROG.rc (exit status or "nobuild").
run_one() {
	local d=$work/$1 p=$2 rc
	if ! test -x "$d/$p"; then
		echo nobuild >"$d/log/$p.rc"
		return
	fi
	(cd "$tc" && timeout -k 10 "$timeout_s" "${ns[@]}" \
		sh -c 'ip link set lo up && exec "$0"' "$d/$p") >"$d/log/$p.log" 2>&1 </dev/null
	rc=$?
	echo $rc >"$d/log/$p.rc"
}
export -f run_one
export work tc timeout_s
export ns_cmd="${ns[*]}"
: >"$work/run.list"
for p in "${progs[@]}"; do
	for m in "${modes[@]}"; do echo "$m $p" >>"$work/run.list"; done
done
say "running ${#progs[@]} programs x ${#modes[@]} modes ($run_jobs at a time, ${timeout_s}s each)"
t0=$(date +%s)
# bash's own "Segmentation fault" notices go to run.err: the table says it.
xargs -a "$work/run.list" -P "$run_jobs" -L1 bash -c \
	'ns=($ns_cmd); run_one "$0" "$1"; echo "$1 $0 $(cat "$work/$0/log/$1.rc")"' \
	>"$work/run.out" 2>"$work/run.err"
t1=$(date +%s)

# --- report --------------------------------------------------------------
status_of() {
	local rc
	rc=$(cat "$work/$1/log/$2.rc" 2>/dev/null || echo nobuild)
	case $rc in
	0) echo PASS ;;
	77) echo SKIP ;;
	nobuild) echo NOBUILD ;;
	124 | 137) echo TIMEOUT ;;
	*)
		if test "$rc" -gt 128; then
			echo "FAIL(SIG$(kill -l $((rc - 128)) 2>/dev/null || echo $((rc - 128))))"
		else
			echo "FAIL($rc)"
		fi
		;;
	esac
}
# The first line of a failure's log that looks like an error, or its
# first line, or the compiler's first error.
first_error() {
	local d=$work/$1 p=$2 f line
	if test "$(cat "$d/log/$p.rc")" = nobuild; then
		f=$d/$p.cc.log
	else
		f=$d/log/$p.log
	fi
	# Two distinct lines: libmicrohttpd's own log line (e.g. "Closing
	# connection (...)") often comes just before the test's verdict.
	line=$(grep -iE 'error|fail|unexpected|wrong|not found|assert|sanitizer|abort|timed? ?out' "$f" 2>/dev/null |
		awk '!seen[$0]++' | head -2 | paste -sd'|' | sed 's/|/ | /')
	test -n "$line" || line=$(grep -m1 -v '^[[:space:]]*$' "$f" 2>/dev/null)
	test -n "$line" || line="(no output)"
	case $(status_of "$1" "$p") in
	"FAIL(SIG"*) line="[$(status_of "$1" "$p" | sed 's/FAIL(\(.*\))/\1/')] $line" ;;
	esac
	printf '%s\n' "${line:0:240}"
}

declare -A pass skipped
for m in "${modes[@]}"; do pass[$m]=0; skipped[$m]=0; done
bad=0
failures=
printf '\n%-44s %-13s %-13s %-13s %-13s\n' program plain a b ctl-b
for p in "${progs[@]}"; do
	row=()
	for m in "${modes[@]}"; do
		s=$(status_of "$m" "$p")
		row+=("$s")
		case $s in
		PASS) pass[$m]=$((pass[$m] + 1)) ;;
		SKIP) skipped[$m]=$((skipped[$m] + 1)) ;;
		*) failures+="$m $p"$'\n' ;;
		esac
	done
	note=
	case ${row[1]} in
	PASS | SKIP) ;;
	*)
		if test "${row[0]}" = PASS; then
			bad=1
			note=" <- a"
		else
			note=" (a: plain too)"
		fi
		;;
	esac
	case ${row[2]} in
	PASS | SKIP) ;;
	*)
		if test "${row[3]}" = PASS; then
			bad=1
			note+=" <- b"
		else
			note+=" (b: client too)"
		fi
		;;
	esac
	printf '%-44s %-13s %-13s %-13s %-13s%s\n' "$p" "${row[@]}" "$note"
done
n=${#progs[@]}
echo
for m in "${modes[@]}"; do
	printf 'mode %-6s %d/%d pass, %d skip\n' "$m:" "${pass[$m]}" "$n" "${skipped[$m]}"
done
if test -n "$failures"; then
	echo
	echo "first error lines (logs in $work/MODE/log/PROG.log):"
	while read -r m p; do
		test -n "$m" || continue
		printf '%-6s %-40s %s\n' "$m" "$p" "$(first_error "$m" "$p")"
	done <<<"$failures"
fi
echo
say "libmicrohttpd $version, ${#progs[@]} programs, runs took $((t1 - t0)) s"
if test $bad = 1; then
	say "FAIL: a program fails in mode a but not plain, or in mode b but not in ctl-b (marked <-)"
	exit 1
fi
say "PASS"
exit 0
