/* fuzz_gzserve.c: libFuzzer target for gzserve's own parsers: a request target to the path beneath the root, Range. */
/*
 * Input: one byte choosing the parser, then for Range eight bytes of the
 * body's length; the rest is the field or target (up to a NUL). Checked:
 *  - target_to_relpath (examples/gzserve/files.c): 0 or one of 400, 403,
 *    500; on 0 the path has no "." or ".." segment, no leading, trailing
 *    or double "/", no control byte and no "\"; and "/" + that path, when
 *    it has nothing to decode again ("%", "?", "#"), gives the same path;
 *  - parse_range (validate.c): -1, 0 or 1; on 1 first <= last < length;
 *    on -1 the length is 0 or the range starts at or past it (or asks for
 *    a zero-length suffix).
 * gzserve parses no date (If-Range compares Last-Modified values); the
 * library's HTTP-date parser is fuzz_etag's.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gzserve.h"
#include "fuzz_util.h"

static void
check_target(const char *t)
{
	char *rel = NULL, *again = NULL, *back;
	bool slash = false, slash2 = false;
	unsigned int status = target_to_relpath(t, &rel, &slash);
	size_t len, i;

	FZ_CHECK(status == 0 || status == 400 || status == 403 || status == 500, "status %u",
		 status);
	if (status != 0)
		return;
	len = strlen(rel);
	FZ_CHECK(len == 0 || (rel[0] != '/' && rel[len - 1] != '/'), "path \"%s\"", rel);
	FZ_CHECK(!strstr(rel, "//"), "double slash in \"%s\"", rel);
	for (i = 0; i < len; i++)
		FZ_CHECK((unsigned char)rel[i] >= 0x20 && rel[i] != 0x7f && rel[i] != '\\',
			 "byte %#x at %zu", (unsigned char)rel[i], i);
	for (const char *seg = rel; *seg;) {
		size_t n = strcspn(seg, "/");

		FZ_CHECK(!(n == 1 && seg[0] == '.') && !(n == 2 && seg[0] == '.' && seg[1] == '.'),
			 "dot segment in \"%s\"", rel);
		seg += n;
		if (*seg == '/')
			seg++;
	}
	if (!strpbrk(rel, "%?#")) {
		back = malloc(len + 2);
		FZ_CHECK(back != NULL, "no memory");
		back[0] = '/';
		memcpy(back + 1, rel, len + 1);
		FZ_CHECK(target_to_relpath(back, &again, &slash2) == 0 && strcmp(again, rel) == 0,
			 "\"/%s\" does not give itself back", rel);
		free(again);
		free(back);
	}
	free(rel);
}

static void
check_range(const char *v, uint64_t len)
{
	uint64_t first = UINT64_MAX, last = UINT64_MAX;
	int rc = parse_range(v, len, &first, &last);

	FZ_CHECK(rc >= -1 && rc <= 1, "parse_range returned %d", rc);
	if (rc == 1)
		FZ_CHECK(first <= last && last < len, "range %llu-%llu of %llu",
			 (unsigned long long)first, (unsigned long long)last,
			 (unsigned long long)len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz f = { .p = data, .n = size };
	uint8_t which = fz_u8(&f);
	uint64_t len = 0;
	char *s;

	if (which % 2 == 1)
		for (int i = 0; i < 8; i++)
			len = len << 8 | fz_u8(&f);
	s = malloc(f.n + 1);
	if (!s)
		return 0;
	memcpy(s, f.p, f.n);
	s[f.n] = '\0';
	if (which % 2 == 0)
		check_target(s);
	else
		check_range(s, len);
	free(s);
	return 0;
}
