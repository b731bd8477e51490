/* validate.c: gzserve's validators and ranges for files: the strong ETag, Last-Modified, If-Range, Range (RFC 9110 sections 8.8, 13.1.5, 14); the handler evaluates the other preconditions. */
#define _GNU_SOURCE /* gmtime_r */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gzserve.h"

/* Strong validator of a file: inode, size, modification and change times
 * (ns). It changes whenever the file is replaced or written, as a strong
 * ETag must (RFC 9110 section 8.8.3): the change time too, because a
 * rewrite in place may keep the size and set the modification time back
 * (utimensat), which the change time does not allow. The handle remembers
 * coded lengths under it (HEAD, 304), so it must not outlive the bytes. */
void
file_etag(const struct stat *st, char *out, size_t cap)
{
	snprintf(out, cap, "\"%jx-%jx-%jx-%jx\"", (uintmax_t)st->st_ino, (uintmax_t)st->st_size,
		 (uintmax_t)st->st_mtim.tv_sec * 1000000000u + (uintmax_t)st->st_mtim.tv_nsec,
		 (uintmax_t)st->st_ctim.tv_sec * 1000000000u + (uintmax_t)st->st_ctim.tv_nsec);
}

/* IMF-fixdate (RFC 9110 section 5.6.7). */
void
http_date(time_t t, char *out, size_t cap)
{
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(out, cap, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

static bool
parse_u64(const char **pp, uint64_t *v_ret)
{
	const char *p = *pp;
	uint64_t v = 0;

	if (*p < '0' || *p > '9')
		return false;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - 9) / 10)
			return false;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	*pp = p;
	*v_ret = v;
	return true;
}

/*
 * Range: bytes=... (RFC 9110 section 14.1.2) for a body of len bytes.
 * Returns 1 with the one range [*first_ret, *last_ret]; -1 if the range is
 * not satisfiable (416); 0 to ignore the header and send the whole body:
 * absent, another unit, malformed, or several ranges (a multipart/byteranges
 * body is not worth it here; RFC 9110 allows ignoring Range).
 */
int
parse_range(const char *v, uint64_t len, uint64_t *first_ret, uint64_t *last_ret)
{
	uint64_t a, b;

	if (!v || strncasecmp(v, "bytes=", 6) != 0)
		return 0;
	v += 6;
	while (*v == ' ' || *v == '\t')
		v++;
	if (strchr(v, ','))
		return 0;
	if (*v == '-') {
		v++;
		if (!parse_u64(&v, &b))
			return 0;
		while (*v == ' ' || *v == '\t')
			v++;
		if (*v)
			return 0;
		if (b == 0 || len == 0)
			return -1;
		*first_ret = b >= len ? 0 : len - b;
		*last_ret = len - 1;
		return 1;
	}
	if (!parse_u64(&v, &a) || *v++ != '-')
		return 0;
	if (*v >= '0' && *v <= '9') {
		if (!parse_u64(&v, &b) || b < a)
			return 0;
	} else {
		b = UINT64_MAX;
	}
	while (*v == ' ' || *v == '\t')
		v++;
	if (*v)
		return 0;
	if (a >= len)
		return -1;
	*first_ret = a;
	*last_ret = b >= len ? len - 1 : b;
	return 1;
}

/* If-Range (RFC 9110 section 13.1.5): does the range still apply? An
 * entity-tag must match strongly; a date must be exactly the
 * Last-Modified value sent (lastmod: the section's step 2 compares field
 * values, so no date is parsed here; the library parses the dates of the
 * other preconditions; lastmod NULL: a weak date, which never applies,
 * step 1; and only when the client accepts none of the codings offered,
 * coded: the date names the coded 200 too). With
 * --etag keep the gzip representation carries the identity's entity-tag,
 * so a tag names both: the bytes the client holds may be gzip, and ranges
 * are of the identity body, so such a range is refused (the whole body). */
bool
if_range_ok(struct MHD_Connection *conn, const char *etag, const char *lastmod, bool etag_shared,
	    bool coded)
{
	const char *v;

	v = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_IF_RANGE);
	if (!v)
		return true;
	if (v[0] == '"')
		return !etag_shared && strcmp(v, etag) == 0;
	if (v[0] == 'W' && v[1] == '/')
		return false;
	/* The coded and identity 200s share the date: a client that accepts
	 * a coding may hold coded bytes, and ranges are of the identity. */
	return lastmod && !coded && strcmp(v, lastmod) == 0;
}
