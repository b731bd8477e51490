/* files.c: gzserve --root: a request's file in stages: resolve beneath the root, choose the representation, validate, respond (mhdgz_response_from_fd64). */
#define _GNU_SOURCE
#include <ctype.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gzserve.h"

/* ------------------------------------------------------------------------ */
/* Request targets                                                          */

/*
 * The file a request target names, relative to the root, from the target
 * exactly as received (libmicrohttpd's url argument is already decoded, so
 * "%2e%2e%2f" and "%00" could no longer be told apart from what they
 * spell). Refused with 403: a "." or ".." segment, plain or encoded; an
 * encoded "/" or "\" (a separator that did not look like one); a NUL or
 * any control byte. Returns 0 with *rel_ret (malloc'd; "" for the root)
 * and *slash_ret (the path ends in "/"), or the status to refuse with.
 */
unsigned int
target_to_relpath(const char *target, char **rel_ret, bool *slash_ret)
{
	const char *p = target, *end;
	char *dec, *rel, *seg, *save = NULL;
	size_t n = 0, rlen = 0;
	unsigned int status = MHD_HTTP_INTERNAL_SERVER_ERROR;

	/* absolute-form (RFC 9112 section 3.2.2): skip scheme and authority */
	if (strncasecmp(p, "http://", 7) == 0 || strncasecmp(p, "https://", 8) == 0) {
		p = strstr(p, "://") + 3;
		p += strcspn(p, "/?#");
	}
	end = p + strcspn(p, "?#");
	if (p == end || *p != '/')
		return MHD_HTTP_BAD_REQUEST;
	*slash_ret = end[-1] == '/';
	dec = malloc((size_t)(end - p) + 1);
	rel = malloc((size_t)(end - p) + 1);
	if (!dec || !rel)
		goto fail;
	for (status = MHD_HTTP_FORBIDDEN; p < end; p++) {
		unsigned char c = (unsigned char)*p;

		if (c == '%') {
			char hex[3] = { p + 1 < end ? p[1] : 0, p + 2 < end ? p[2] : 0, 0 };

			if (!isxdigit((unsigned char)hex[0]) || !isxdigit((unsigned char)hex[1])) {
				status = MHD_HTTP_BAD_REQUEST;
				goto fail;
			}
			c = (unsigned char)strtoul(hex, NULL, 16);
			p += 2;
			if (c == '/' || c == '\\' || c == 0)
				goto fail;
		}
		if (c == '\\' || c < 0x20 || c == 0x7f)
			goto fail;
		dec[n++] = (char)c;
	}
	dec[n] = '\0';
	for (seg = strtok_r(dec, "/", &save); seg; seg = strtok_r(NULL, "/", &save)) {
		size_t len = strlen(seg);

		if (strcmp(seg, ".") == 0 || strcmp(seg, "..") == 0)
			goto fail;
		if (rlen)
			rel[rlen++] = '/';
		memcpy(rel + rlen, seg, len);
		rlen += len;
	}
	rel[rlen] = '\0';
	free(dec);
	*rel_ret = rel;
	return 0;
fail:
	free(dec);
	free(rel);
	return status;
}

/* ------------------------------------------------------------------------ */
/* Static files                                                             */

/* One file request through its stages (serve_file). */
struct file_req {
	char *rel;         /* the file beneath the root (malloc'd; "" for the root) */
	const char *name;  /* its media type comes from this name */
	bool slash;        /* the target ended in "/" */
	int fd;            /* the body: FILE, or its precompressed sibling; -1: none */
	struct stat st;    /* fd's */
	uint64_t file_len; /* FILE's size (the access log's body bytes) */
	bool varies;       /* a sibling is usable: the response varies with Accept-Encoding */
	bool sibling;      /* fd is the sibling, coded with coding */
	const struct mhdgz_dictionary *dict; /* FILE is this --dictionary */
	enum mhdgz_coding coding;
	char etag[80], lastmod[64];
	bool date_strong;     /* lastmod is a strong validator (If-Range) */
	uint64_t first, last; /* the one range to send (range > 0) */
	int range;
};

/* The 301 of a directory named without its trailing slash. Location is
 * built from the path beneath the root, percent-encoded again, never from
 * the raw target: "//evil.example" must not become a scheme-relative
 * "//evil.example/" (an open redirect); the query is kept. */
static enum MHD_Result
redirect_slash(struct req *rq, struct MHD_Connection *conn, const char *rel)
{
	static const char keep[] = "-._~!$&'()*+,;=:@/"; /* RFC 3986 pchar and "/" */
	const char *q = rq->uri + strcspn(rq->uri, "?#");
	size_t qlen = *q == '?' ? strcspn(q, "#") : 0, n = 0;
	char *loc = malloc(3 * strlen(rel) + qlen + 3);
	enum MHD_Result ret;

	if (!loc)
		return MHD_NO;
	loc[n++] = '/';
	for (const unsigned char *p = (const unsigned char *)rel; *p; p++) {
		if (isalnum(*p) || strchr(keep, *p))
			loc[n++] = (char)*p;
		else
			n += (size_t)sprintf(loc + n, "%%%02X", *p);
	}
	loc[n++] = '/';
	memcpy(loc + n, q, qlen);
	loc[n + qlen] = '\0';
	ret = respond_page(rq, conn, MHD_HTTP_MOVED_PERMANENTLY, MHD_HTTP_HEADER_LOCATION, loc);
	free(loc);
	return ret;
}

/* Stage 1: the target's file opened beneath the root (beneath.c): a
 * regular file, or a directory's index.html (no listings). 0, 301 (a
 * directory without its slash) or the status to refuse with. */
static unsigned int
resolve_file(struct server *s, struct file_req *f)
{
	unsigned int status;
	char *idx;

	f->fd = open_in_root(s, f->rel, &f->st, &status);
	if (f->fd < 0)
		return status;
	f->name = f->rel;
	if (S_ISDIR(f->st.st_mode)) {
		close(f->fd);
		f->fd = -1;
		if (!f->slash)
			return MHD_HTTP_MOVED_PERMANENTLY;
		if (asprintf(&idx, "%s%sindex.html", f->rel, f->rel[0] ? "/" : "") < 0)
			return MHD_HTTP_INTERNAL_SERVER_ERROR;
		free(f->rel);
		f->rel = idx;
		f->name = "index.html";
		f->fd = open_in_root(s, f->rel, &f->st, &status);
		if (f->fd < 0)
			return status == MHD_HTTP_NOT_FOUND ? MHD_HTTP_FORBIDDEN : status;
	} else if (f->slash) {
		/* "/a.txt/" names a directory a.txt, and a.txt is not one:
		 * 404, as open(2) says (ENOTDIR) and nginx and Apache answer. */
		return MHD_HTTP_NOT_FOUND;
	}
	if (!S_ISREG(f->st.st_mode))
		return MHD_HTTP_FORBIDDEN;
	f->file_len = (uint64_t)f->st.st_size;
	return 0;
}

/* Stage 2: the representation: with --precompressed, the sibling the
 * client's Accept-Encoding prefers (siblings.c), sent whole with its own
 * validators and length; else FILE, whole or one range (stage 4). */
static void
choose_sibling(struct server *s, struct MHD_Connection *conn, struct file_req *f)
{
	struct stat gst;
	int gzfd;

	if (!s->cfg.precompressed)
		return;
	gzfd = choose_precompressed(s, conn, f->rel, &f->st, &gst, &f->coding, &f->varies);
	if (gzfd < 0)
		return;
	close(f->fd);
	f->fd = gzfd;
	f->st = gst;
	f->sibling = true;
}

/* Stage 3: the validators of what is sent (validate.c). The handler
 * evaluates the preconditions on them when the response is queued
 * (MHDGZ_REQUEST_PRECONDITIONS: a 304 or a 412 in its place). */
static void
validate(struct req *rq, struct file_req *f)
{
	time_t now = time(NULL), mtime = f->st.st_mtim.tv_sec;

	file_etag(&f->st, f->etag, sizeof f->etag);
	/* Never a Last-Modified after now, the response's Date (RFC 9110
	 * section 8.8.2.1: a file touched into the future, a clock set back).
	 * The date names one version of the file only once the second it
	 * covers is over: a write later in that second keeps it (section
	 * 8.8.2.2), so until then it is weak, and If-Range ignores it. */
	http_date(mtime < now ? mtime : now, f->lastmod, sizeof f->lastmod);
	f->date_strong = mtime < now;
	rq->preconditions = true;
}

/* Stage 4: a Range of a GET for FILE itself (a sibling is sent whole),
 * if If-Range lets it apply: f->range 1 (one range), 0 (the whole
 * body) or -1 (416). */
static void
choose_range(struct server *s, struct MHD_Connection *conn, const char *method, struct file_req *f)
{
	enum mhdgz_coding k;

	if (strcmp(method, "GET") != 0 || f->sibling ||
	    !if_range_ok(conn, f->etag, f->date_strong ? f->lastmod : NULL,
			 s->cfg.etag == MHDGZ_ETAG_KEEP,
			 preferred_coding(conn, s->order, s->norder, &k)))
		return;
	f->range = parse_range(MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
							   MHD_HTTP_HEADER_RANGE),
			       (uint64_t)f->st.st_size, &f->first, &f->last);
}

/* Stage 5: the response on the file's descriptor, made per request
 * (mhdgz_response_from_fd64 and _at_offset64, as libmicrohttpd's own fd
 * responses): the handler compresses it, or with --cache-size takes the
 * coded bytes of this file version from its file cache, which keys them
 * on what fstat() says of the descriptor. The descriptor passes to the
 * response (f->fd = -1). */
static enum MHD_Result
respond_file(struct req *rq, struct MHD_Connection *conn, struct file_req *f)
{
	struct server *s = rq->s;
	uint64_t len = (uint64_t)f->st.st_size;
	struct MHD_Response *r;
	char type[160], crange[96];
	enum MHD_Result ret;

	if (f->range > 0)
		r = mhdgz_response_from_fd_at_offset64(s->gz, f->last - f->first + 1, f->fd,
						       f->first);
	else
		r = mhdgz_response_from_fd64(s->gz, len, f->fd);
	if (!r)
		return MHD_NO; /* fd is still ours (as with libmicrohttpd) */
	f->fd = -1;
	mime_type(s, f->name, type, sizeof type);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, f->etag);
	MHD_add_response_header(r, MHD_HTTP_HEADER_LAST_MODIFIED, f->lastmod);
	/* An empty file is never coded: marked so, its 304 carries the 200's
	 * own fields (no Vary, the ETag unchanged), where an empty response
	 * queued for a 304 otherwise stands for a 304 of its own that may be
	 * of a coded 200 (mhdgz.h). The handler's 304 of a sibling carries
	 * no Content-Encoding (RFC 9110 section 15.4.5). */
	if (len == 0)
		mhdgz_response_set_flags(s->gz, r, MHDGZ_RESPONSE_IDENTITY);
	if (f->sibling) /* already coded: the handler leaves it alone */
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_ENCODING,
					coding_name(f->coding));
	if (!f->sibling)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ACCEPT_RANGES, "bytes");
	if (f->varies)
		MHD_add_response_header(r, MHD_HTTP_HEADER_VARY, "Accept-Encoding");
	/* FILE is a --dictionary: advertised (Use-As-Dictionary), and fresh
	 * for an hour, since a client keeps a dictionary only while fresh. */
	if (f->dict && f->range == 0 &&
	    (mhdgz_response_use_as_dictionary(r, f->dict) != 0 ||
	     MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "max-age=3600") !=
		     MHD_YES)) {
		MHD_destroy_response(r);
		return MHD_NO;
	}
	if (f->range > 0) {
		snprintf(crange, sizeof crange, "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, f->first,
			 f->last, len);
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_RANGE, crange);
		return respond(rq, conn, MHD_HTTP_PARTIAL_CONTENT, r, f->last - f->first + 1);
	}
	ret = respond(rq, conn, MHD_HTTP_OK, r, len);
	/* The access log's body bytes are the identity body's, as for a body
	 * coded on the fly (and its 304): FILE's size, not FILE.gz's. */
	if (f->sibling)
		rq->body_nbytes = f->file_len;
	return ret;
}

enum MHD_Result
serve_file(struct req *rq, struct MHD_Connection *conn, const char *method)
{
	struct server *s = rq->s;
	struct file_req f = { .fd = -1 };
	char crange[48];
	unsigned int status;
	enum MHD_Result ret;

	/* past the descriptor budget's file limit (main.c): 503, and close */
	if ((unsigned int)atomic_load(&s->conns) > s->file_limit)
		status = MHD_HTTP_SERVICE_UNAVAILABLE;
	else
		status = target_to_relpath(rq->uri, &f.rel, &f.slash);
	if (status == 0)
		status = resolve_file(s, &f);
	if (status == 0) {
		f.dict = dict_of_file(s, &f.st); /* FILE's, before a sibling's */
		choose_sibling(s, conn, &f);
		validate(rq, &f);
	}
	if (status == 0)
		choose_range(s, conn, method, &f);
	snprintf(crange, sizeof crange, "bytes */%" PRIu64, (uint64_t)f.st.st_size);
	if (status == MHD_HTTP_MOVED_PERMANENTLY)
		ret = redirect_slash(rq, conn, f.rel);
	else if (status)
		ret = respond_error(rq, conn, status);
	else if (f.range < 0)
		ret = respond_page(rq, conn, MHD_HTTP_RANGE_NOT_SATISFIABLE,
				   MHD_HTTP_HEADER_CONTENT_RANGE, crange);
	else
		ret = respond_file(rq, conn, &f);
	if (f.fd >= 0)
		close(f.fd);
	free(f.rel);
	return ret;
}
