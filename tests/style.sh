#!/usr/bin/env bash
# style.sh: the house-style checks of make check-style, and make style's in-place reformatting.
#
# Usage: style.sh [--fix] [--clang-format PROG] SRCDIR
#
# Checks, over the C sources (*.c, *.h) of src/ handler/ examples/ tests/
# bench/ under SRCDIR:
#  (a) clang-format --dry-run -Werror with SRCDIR/.clang-format: the files
#      are formatted as the checked-in style says;
#  (b) src/ and handler/ allocate only through the core's allocator (it
#      honours the application's hook and the tests' failure injection):
#      no call of malloc, calloc, realloc, free or strdup outside
#      src/gz_alloc.c. A line that must call libc (freeing a buffer the
#      caller allocated with malloc, MHD_RESPMEM_MUST_FREE) says so with the
#      marker comment "check-style: libc" on that line;
#  (c) the layers: src/ includes neither mhdgz.h nor microhttpd.h; the
#      handler's pure modules (negotiation, media types, the plan:
#      hnd_negotiate, hnd_mtype, hnd_decide, hnd_plan.h) include no header
#      of handle, entry, stream or representation state;
#  (d) handler/mhdgz.h is clean under clang -Wdocumentation (when clang is
#      installed).
# Each finding is printed as FILE:LINE: what; exits 1 if any.
#
# --fix reformats the files in place with clang-format instead (make style)
# and checks nothing.
set -uo pipefail

fix=0
clang_format=clang-format
while [ $# -gt 0 ]; do
	case "$1" in
	--fix) fix=1; shift ;;
	--clang-format) clang_format="$2"; shift 2 ;;
	--) shift; break ;;
	-*) echo "style.sh: unknown option $1" >&2; exit 2 ;;
	*) break ;;
	esac
done
[ $# -eq 1 ] || { echo "usage: style.sh [--fix] [--clang-format PROG] SRCDIR" >&2; exit 2; }
cd "$1" || exit 2

# The sources, without what an in-tree make fuzz puts under tests/fuzz/
# (a build and a copy of the tree), npm under tests/interop/, or make
# check-upstream's libmicrohttpd sources under tests/upstream-build/, and
# gzserve's generated demo_assets.h (an in-tree build writes it there).
mapfile -t files < <(find src handler examples tests bench \
	\( -path tests/fuzz/build -o -path tests/fuzz/tree -o -path tests/interop-out -o -path tests/upstream-build -o -name node_modules \) -prune -o \
	-type f \( -name '*.c' -o -name '*.h' \) ! -name demo_assets.h -print | LC_ALL=C sort)
[ "${#files[@]}" -gt 0 ] || { echo "style.sh: no C sources under $1" >&2; exit 2; }

if ! command -v "$clang_format" >/dev/null; then
	echo "style.sh: $clang_format not found: apt-get install clang-format" >&2
	exit 2
fi

if [ "$fix" -eq 1 ]; then
	"$clang_format" -i --style=file "${files[@]}"
	exit
fi

failed=0

# (a) Formatting: clang-format --dry-run reports each place it would change
# as "FILE:LINE:COL: warning: code should be clang-formatted" with the
# line (-Werror turns that into an error and its exit status). The first
# places are shown, then the counts.
out=$("$clang_format" --dry-run -Werror --style=file "${files[@]}" 2>&1)
rc=$?
if [ "$rc" -ne 0 ]; then
	printf '%s\n' "$out" | head -n 60 >&2
	places=$(printf '%s\n' "$out" | grep -c 'code should be clang-formatted')
	nfiles=$(printf '%s\n' "$out" | grep 'code should be clang-formatted' | cut -d: -f1 | sort -u | wc -l)
	echo "check-style: (a) clang-format would change ${places} places in ${nfiles} files (exit ${rc}); make style reformats" >&2
	failed=1
fi

# code_lines FILE: FILE with comments blanked (line numbers kept), so that
# prose such as "released with free()" is not taken for a call. String
# literals are not parsed: none in src/ or handler/ holds "/*".
code_lines() {
	awk '{
		out = ""; line = $0
		while (line != "") {
			if (inc) {
				i = index(line, "*/")
				if (!i) { line = ""; break }
				line = substr(line, i + 2); inc = 0
			} else {
				i = index(line, "/*"); j = index(line, "//")
				if (j && (!i || j < i)) { out = out substr(line, 1, j - 1); line = ""; break }
				if (!i) { out = out line; line = ""; break }
				out = out substr(line, 1, i - 1); line = substr(line, i + 2); inc = 1
			}
		}
		print out
	}' "$1"
}

# (b) Raw allocator calls: a name followed by "(" and not a member
# (->free, .free) or part of a longer name (gz_free, hnd_strdup).
for f in "${files[@]}"; do
	case "$f" in
	src/gz_alloc.c) continue ;;
	src/* | handler/*) ;;
	*) continue ;;
	esac
	while IFS=: read -r n _; do
		if sed -n "${n}p" "$f" | grep -q 'check-style: libc'; then
			continue
		fi
		echo "${f}:${n}: raw libc allocation (use gz_malloc/gz_free, or mark the line 'check-style: libc')" >&2
		failed=1
	done < <(code_lines "$f" |
		grep -nE '(^|[^A-Za-z0-9_.>])(malloc|calloc|realloc|free|strdup)[[:space:]]*\(')
done

# (c) Upward includes from the core.
if grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]([^">]*/)?(mhdgz|microhttpd)\.h[">]' \
	$(printf '%s\n' "${files[@]}" | grep '^src/') >&2; then
	echo "check-style: (c) src/ must not include mhdgz.h or microhttpd.h (the core sits below the handler)" >&2
	failed=1
fi

# (c) Fences in the handler: the plan is a pure function of the request,
# the response's fields and the handle's policy.
if grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"hnd_(handle|entry|stream|repr|queue|store|pad|headers)\.h"' \
	$(printf '%s\n' "${files[@]}" | grep -E '^handler/hnd_(negotiate|mtype|decide)\.c$|^handler/hnd_(negotiate|mtype|plan|dict)\.h$') >&2; then
	echo "check-style: (c) negotiation, media types and the plan must not include handle, entry, store, stream or representation headers" >&2
	failed=1
fi

# (d) The public header is the manual: its doc comments name every
# parameter they describe (clang -Wdocumentation), when clang is installed.
if command -v clang >/dev/null; then
	if ! echo '#include "mhdgz.h"' | clang -x c -fsyntax-only -Wdocumentation \
		-Wdocumentation-unknown-command -Werror -Ihandler - >&2; then
		echo "check-style: (d) handler/mhdgz.h: clang -Wdocumentation warnings" >&2
		failed=1
	fi
else
	echo "check-style: (d) skipped: clang not found (apt-get install clang)" >&2
fi

[ "$failed" -eq 0 ] && echo "check-style: ${#files[@]} files: formatting, allocation, layer and header documentation checks passed"
exit "$failed"
