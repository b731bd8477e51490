/* files.c: gzserve --root: safe paths, the file path of a request (validators and ranges applied), kept responses. */
#define _GNU_SOURCE /* syscall() for openat2 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#ifdef SYS_openat2
#include <linux/openat2.h>
#endif

#include "gzserve.h"

/* ------------------------------------------------------------------------ */
/* Request targets                                                          */

static int
hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * The file a request target names, relative to the root, from the target
 * exactly as received (libmicrohttpd's url argument is already decoded, so
 * "%2e%2e%2f" and "%00" could no longer be told apart from what they
 * spell). Refused with 403: a "." or ".." segment, plain or encoded; an
 * encoded "/" or "\" (a separator that did not look like one); a NUL or
 * any control byte. Returns 0 with *rel_ret (malloc'd; "" for the root)
 * and *slash_ret (the path ends in "/"), or the status to refuse with.
 */
static unsigned int
target_to_relpath(const char *target, char **rel_ret, bool *slash_ret)
{
	const char *p = target, *end;
	char *dec, *rel, *seg, *save = NULL;
	size_t n = 0, rlen = 0;

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
		goto fail500;
	for (; p < end; p++) {
		unsigned char c = (unsigned char)*p;

		if (c == '%') {
			int hi = p + 1 < end ? hexval(p[1]) : -1;
			int lo = p + 2 < end ? hexval(p[2]) : -1;

			if (hi < 0 || lo < 0)
				goto fail400;
			c = (unsigned char)(hi * 16 + lo);
			p += 2;
			if (c == '/' || c == '\\' || c == 0)
				goto fail403;
		} else if (c == '\\') {
			goto fail403;
		}
		if (c < 0x20 || c == 0x7f)
			goto fail403;
		dec[n++] = (char)c;
	}
	dec[n] = '\0';
	for (seg = strtok_r(dec, "/", &save); seg; seg = strtok_r(NULL, "/", &save)) {
		size_t len = strlen(seg);

		if (strcmp(seg, ".") == 0 || strcmp(seg, "..") == 0)
			goto fail403;
		if (rlen)
			rel[rlen++] = '/';
		memcpy(rel + rlen, seg, len);
		rlen += len;
	}
	rel[rlen] = '\0';
	free(dec);
	*rel_ret = rel;
	return 0;
fail400:
	free(dec);
	free(rel);
	return MHD_HTTP_BAD_REQUEST;
fail403:
	free(dec);
	free(rel);
	return MHD_HTTP_FORBIDDEN;
fail500:
	free(dec);
	free(rel);
	return MHD_HTTP_INTERNAL_SERVER_ERROR;
}

/* ------------------------------------------------------------------------ */
/* Static files                                                             */

/* The real path of path if it exists and is inside the root (symlinks
 * resolved: a link out of the root is refused). NULL with *status_ret 404
 * (does not exist) or 403 (outside the root, or not permitted). */
static char *
resolve(const struct server *s, const char *path, unsigned int *status_ret)
{
	char *real = realpath(path, NULL);

	if (!real) {
		*status_ret = (errno == EACCES || errno == ELOOP) ? MHD_HTTP_FORBIDDEN
								  : MHD_HTTP_NOT_FOUND;
		return NULL;
	}
	if (strncmp(real, s->root, s->root_len) != 0 ||
	    (real[s->root_len] != '/' && real[s->root_len] != '\0')) {
		free(real);
		*status_ret = MHD_HTTP_FORBIDDEN;
		return NULL;
	}
	return real;
}

/* dir + "/" + name, malloc'd. */
static char *
path_join(const char *dir, const char *name)
{
	size_t len = strlen(dir) + 1 + strlen(name) + 1;
	char *p = malloc(len);

	if (p)
		snprintf(p, len, "%s/%s", dir, name);
	return p;
}

/* Open a resolved path (any type: a directory is for index.html), and
 * fstat it. O_NONBLOCK so a FIFO planted in the tree cannot block a pool
 * thread in open(); it does nothing to regular files. O_NOFOLLOW: the path
 * is real, a symlink there now was planted after realpath() looked. Returns
 * the fd, or -1 with *status_ret. */
static int
open_real(const char *real, struct stat *st, unsigned int *status_ret)
{
	int fd = open(real, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);

	if (fd < 0) {
		*status_ret = errno == ENOENT ? MHD_HTTP_NOT_FOUND : MHD_HTTP_FORBIDDEN;
		return -1;
	}
	if (fstat(fd, st) != 0) {
		close(fd);
		*status_ret = MHD_HTTP_FORBIDDEN;
		return -1;
	}
	return fd;
}

/* The slow path of open_in_root: realpath() (a readlink per component),
 * checked to be inside the root, then opened. */
static int
open_resolved(const struct server *s, const char *rel, struct stat *st, unsigned int *status_ret)
{
	char *path = path_join(s->root, rel), *real;
	int fd;

	if (!path) {
		*status_ret = MHD_HTTP_INTERNAL_SERVER_ERROR;
		return -1;
	}
	real = resolve(s, path, status_ret);
	free(path);
	if (!real)
		return -1;
	fd = open_real(real, st, status_ret);
	free(real);
	return fd;
}

/*
 * rel (a path relative to the root without "." or ".." segments, "" for
 * the root itself) opened read-only and fstat'ed, any type. The fast path
 * is one openat2() from the root's descriptor with RESOLVE_BENEATH: the
 * kernel refuses any resolution that would leave the root (a ".." above
 * it, an absolute symlink, a /proc magic link) with EXDEV, during the
 * walk itself, so no check races the open. A symlink inside the root is
 * followed as realpath() would. What it refuses (a symlink it will not
 * follow, which may still land inside the root, e.g. an absolute one)
 * and a kernel without openat2 (ENOSYS) take the slow path: realpath(),
 * the prefix check, open with O_NOFOLLOW. Either way: inside the root,
 * symlinks resolved, or 403/404. Returns the fd, or -1 with *status_ret.
 */
int
open_in_root(const struct server *s, const char *rel, struct stat *st, unsigned int *status_ret)
{
#ifdef SYS_openat2
	struct open_how how = {
		.flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
	};
	int fd;

	if (s->root_fd >= 0) {
		fd = (int)syscall(SYS_openat2, s->root_fd, rel[0] ? rel : ".", &how, sizeof how);
		if (fd >= 0) {
			if (fstat(fd, st) == 0)
				return fd;
			close(fd);
			*status_ret = MHD_HTTP_FORBIDDEN;
			return -1;
		}
		switch (errno) {
		case EXDEV:  /* would leave the root: realpath() decides */
		case ENOSYS: /* kernel before 5.6 */
		case EPERM:  /* a seccomp filter that does not know openat2 */
		case EINVAL:
		case E2BIG:
			break;
		case ENOENT:
		case ENOTDIR:
		case ENAMETOOLONG:
			*status_ret = MHD_HTTP_NOT_FOUND;
			return -1;
		default: /* EACCES, ELOOP, ... */
			*status_ret = MHD_HTTP_FORBIDDEN;
			return -1;
		}
	}
#endif
	return open_resolved(s, rel, st, status_ret);
}

static enum MHD_Result
redirect_slash(struct req *rq, struct MHD_Connection *conn)
{
	const char *q = rq->uri + strcspn(rq->uri, "?#");
	size_t len = (size_t)(q - rq->uri);
	char *loc = malloc(len + 2 + strlen(q));
	static const char body[] = "<!doctype html><title>301 Moved Permanently</title>"
				   "<h1>301 Moved Permanently</h1>\n";
	struct MHD_Response *r;

	if (!loc)
		return MHD_NO;
	memcpy(loc, rq->uri, len);
	loc[len] = '/';
	strcpy(loc + len + 1, *q == '?' ? q : "");
	r = mhdgz_response_from_buffer(rq->s->gz, sizeof body - 1, (void *)body,
				       MHD_RESPMEM_PERSISTENT);
	if (r) {
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
					"text/html; charset=utf-8");
		MHD_add_response_header(r, MHD_HTTP_HEADER_LOCATION, loc);
	}
	free(loc);
	return respond(rq, conn, MHD_HTTP_MOVED_PERMANENTLY, r, sizeof body - 1);
}

/* A kept response (keep.c): the preconditions of the path below on its
 * validators, then the response itself, nothing opened. */
static enum MHD_Result
serve_kept(struct req *rq, struct MHD_Connection *conn, const char *method, struct kept *e)
{
	unsigned int status = file_preconditions(conn, method, e->etag, e->mtime);
	enum MHD_Result ret;

	if (status == MHD_HTTP_PRECONDITION_FAILED)
		return respond_error(rq, conn, status);
	if (status == MHD_HTTP_NOT_MODIFIED) {
		enum mhdgz_coding k;

		ret = queue(rq, conn, MHD_HTTP_NOT_MODIFIED, e->r, 0);
		/* A 304 may have compressed to learn the length of the 200 it
		 * stands for, and the coded body then stays with the response;
		 * the outcome of a 304 names neither that coding nor a length:
		 * charge the identity length, which a kept coded body never
		 * exceeds (one not smaller is not kept), to the coding the 200
		 * would have (chosen as the handler chooses it). */
		if (rq->s->cfg.cache_size && !rq->s->cfg.no_compress &&
		    preferred_coding(conn, rq->s->cfg.order, rq->s->cfg.norder, &k))
			keep_charge(rq->s->keep, e, mhdgz_coding_name(k), e->body_nbytes);
		return ret;
	}
	ret = queue(rq, conn, MHD_HTTP_OK, e->r, e->body_nbytes);
	/* The coded body stays with the response (unless --cache-size 0
	 * made it uncached): charge it. A HEAD may have been answered from
	 * a remembered length without making it; the GET that follows
	 * would: charged once per coding either way. */
	if (rq->s->cfg.cache_size)
		keep_charge(rq->s->keep, e, rq->coding, rq->coded_nbytes);
	return ret;
}

/* The 200 response of a file (fd, version st) read whole into memory and
 * kept; NULL when it cannot be (the caller then sends from fd). */
static struct kept *
keep_file(struct server *s, const char *rel, int fd, const struct stat *st, const char *type,
	  const char *etag, const char *lastmod)
{
	void *body;
	struct MHD_Response *r;
	struct kept *e;

	if (!keep_findable(s->keep, s->root_fd, rel, st))
		return NULL;
	body = keep_read(fd, st);
	if (!body)
		return NULL;
	r = mhdgz_response_from_buffer(s->gz, (size_t)st->st_size, body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body);
		return NULL;
	}
	/* --cache-size 0: no coded body is kept, every request compresses. */
	if ((!s->cfg.cache_size && mhdgz_response_set_uncached(s->gz, r) != 0) ||
	    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type) != MHD_YES ||
	    MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, etag) != MHD_YES ||
	    MHD_add_response_header(r, MHD_HTTP_HEADER_LAST_MODIFIED, lastmod) != MHD_YES ||
	    MHD_add_response_header(r, MHD_HTTP_HEADER_ACCEPT_RANGES, "bytes") != MHD_YES ||
	    !(e = keep_add(s->keep, rel, st, r, etag, (uint64_t)st->st_size))) {
		MHD_destroy_response(r); /* frees body */
		return NULL;
	}
	return e;
}

/* Is this request one a kept response can answer: no Range (ranges are
 * cut from the file by the path below)? The method is GET or HEAD. */
static bool
keep_applies(const struct server *s, struct MHD_Connection *conn)
{
	return s->keep &&
	       !MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_RANGE);
}

enum MHD_Result
serve_file(struct req *rq, struct MHD_Connection *conn, const char *method)
{
	struct server *s = rq->s;
	char *rel = NULL, *path;
	bool slash, is_get = strcmp(method, "GET") == 0, sibling = false, not_modified;
	bool dir_page = false; /* rel is now a directory's index.html */
	unsigned int status;
	struct stat st, gst;
	char type[160], etag[80], lastmod[64], crange[96];
	const char *name;
	struct MHD_Response *r;
	uint64_t first = 0, last = 0, len, identity_len = 0;
	int fd = -1, gzfd = -1, range = 0;
	enum mhdgz_coding gzcoding = MHDGZ_CODING_GZIP;
	enum MHD_Result ret;

	status = target_to_relpath(rq->uri, &rel, &slash);
	if (status)
		return respond_error(rq, conn, status);
	if (keep_applies(s, conn)) {
		/* A directory's page is kept under its index.html (below). */
		char *idx = slash ? (rel[0] ? path_join(rel, "index.html") : strdup("index.html"))
				  : NULL;
		struct kept *e = slash && !idx ? NULL
					       : keep_get(s->keep, s->root_fd, slash ? idx : rel);

		free(idx);
		if (e) {
			ret = serve_kept(rq, conn, method, e);
			keep_put(s->keep, e);
			free(rel);
			return ret;
		}
	}
	fd = open_in_root(s, rel, &st, &status);
	if (fd < 0)
		goto refuse;
	name = rel;
	if (S_ISDIR(st.st_mode)) {
		close(fd);
		fd = -1;
		if (!slash) {
			free(rel);
			return redirect_slash(rq, conn);
		}
		/* index.html, or nothing: no directory listings. */
		path = rel[0] ? path_join(rel, "index.html") : strdup("index.html");
		if (!path)
			goto oom;
		free(rel);
		rel = path;
		fd = open_in_root(s, rel, &st, &status);
		if (fd < 0) {
			if (status == MHD_HTTP_NOT_FOUND)
				status = MHD_HTTP_FORBIDDEN;
			goto refuse;
		}
		name = "index.html";
		dir_page = true;
	}
	if (slash && !dir_page) {
		/* "/a.txt/" names a directory a.txt, and a.txt is not one: 404,
		 * as open(2) says (ENOTDIR) and nginx and Apache answer. */
		close(fd);
		status = MHD_HTTP_NOT_FOUND;
		goto refuse;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		status = MHD_HTTP_FORBIDDEN;
		goto refuse;
	}
	mime_type(s, name, type, sizeof type);

	if (s->cfg.precompressed) {
		gzfd = choose_precompressed(s, conn, rel, &gst, &gzcoding, &sibling);
		if (gzfd >= 0) {
			/* Serve the .gz: its own validators and length. */
			identity_len = (uint64_t)st.st_size;
			close(fd);
			fd = gzfd;
			st = gst;
		}
	}
	file_etag(&st, etag, sizeof etag);
	http_date(st.st_mtim.tv_sec, lastmod, sizeof lastmod);

	status = file_preconditions(conn, method, etag, st.st_mtim.tv_sec);
	if (status == MHD_HTTP_PRECONDITION_FAILED) {
		close(fd);
		goto refuse;
	}
	/* A 304 is the 200 below queued with status 304 (see the top of
	 * main.c); the file is opened but never read. */
	not_modified = status == MHD_HTTP_NOT_MODIFIED;

	len = (uint64_t)st.st_size;
	/* Ranges of the identity body only; a precompressed body is sent whole. */
	if (is_get && !not_modified && gzfd < 0 &&
	    if_range_ok(conn, etag, st.st_mtim.tv_sec, s->cfg.etag == MHDGZ_ETAG_KEEP))
		range = parse_range(MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
								MHD_HTTP_HEADER_RANGE),
				    len, &first, &last);
	if (range < 0) {
		struct MHD_Response *e416;
		static const char body[] = "<!doctype html><title>416 Range Not Satisfiable</title>"
					   "<h1>416 Range Not Satisfiable</h1>\n";

		close(fd);
		fd = -1;
		e416 = mhdgz_response_from_buffer(s->gz, sizeof body - 1, (void *)body,
						  MHD_RESPMEM_PERSISTENT);
		if (!e416)
			goto oom;
		snprintf(crange, sizeof crange, "bytes */%" PRIu64, len);
		MHD_add_response_header(e416, MHD_HTTP_HEADER_CONTENT_TYPE,
					"text/html; charset=utf-8");
		MHD_add_response_header(e416, MHD_HTTP_HEADER_CONTENT_RANGE, crange);
		ret = respond(rq, conn, MHD_HTTP_RANGE_NOT_SATISFIABLE, e416, sizeof body - 1);
		goto out;
	}
	/* A whole small file for a GET: read once and kept (keep.c), under
	 * the key its lookup above uses (a file named with a slash, "/a.txt/",
	 * is looked up as a directory's page: not kept). */
	if (is_get && range == 0 && !not_modified && gzfd < 0 && keep_applies(s, conn) &&
	    (!slash || dir_page) && keep_wanted(s->keep, &st)) {
		struct kept *e = keep_file(s, rel, fd, &st, type, etag, lastmod);

		if (e) {
			close(fd);
			ret = serve_kept(rq, conn, method, e);
			keep_put(s->keep, e);
			goto out;
		}
	}
	if (range > 0)
		r = mhdgz_response_from_fd_at_offset64(s->gz, last - first + 1, fd, first);
	else
		r = mhdgz_response_from_fd_at_offset64(s->gz, len, fd, 0);
	if (!r)
		goto oom; /* fd is still ours (as with libmicrohttpd): closed there */
	fd = -1;          /* the response owns it now */
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, etag);
	MHD_add_response_header(r, MHD_HTTP_HEADER_LAST_MODIFIED, lastmod);
	/* An empty file is never coded: marked so, its 304 carries the
	 * 200's own fields (no Vary, the ETag unchanged), where an empty
	 * response queued for a 304 otherwise stands for a 304 of its own
	 * that may be of a coded 200 (mhdgz.h). */
	if (len == 0)
		mhdgz_response_set_identity(s->gz, r);
	if (gzfd >= 0 && not_modified) {
		/* The 304 of the sibling's 200: like the handler's 304 of a
		 * coded 200, without Content-Encoding (RFC 9110 section
		 * 15.4.5: no representation metadata beyond the 200's
		 * validators and Vary). Marked identity, so that the handler
		 * queues it as it is instead of coding the sibling again to
		 * learn the 200's length. */
		mhdgz_response_set_identity(s->gz, r);
	} else if (gzfd >= 0) {
		/* Already coded: the handler skips responses with a
		 * Content-Encoding, so this is sent as it is. */
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_ENCODING,
					mhdgz_coding_name(gzcoding));
	} else {
		MHD_add_response_header(r, MHD_HTTP_HEADER_ACCEPT_RANGES, "bytes");
	}
	if (sibling)
		MHD_add_response_header(r, MHD_HTTP_HEADER_VARY, "Accept-Encoding");
	if (range > 0) {
		snprintf(crange, sizeof crange, "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, first,
			 last, len);
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_RANGE, crange);
		ret = respond(rq, conn, MHD_HTTP_PARTIAL_CONTENT, r, last - first + 1);
	} else if (not_modified) {
		ret = respond(rq, conn, MHD_HTTP_NOT_MODIFIED, r, 0);
	} else {
		ret = respond(rq, conn, MHD_HTTP_OK, r, len);
	}
	/* The access log's body bytes are the identity body's, as for a
	 * body coded on the fly (and its 304): FILE's size, not FILE.gz's. */
	if (gzfd >= 0)
		rq->body_nbytes = identity_len;
out:
	free(rel);
	return ret;
oom:
	if (fd >= 0)
		close(fd);
	free(rel);
	return MHD_NO;
refuse:
	free(rel);
	return respond_error(rq, conn, status);
}
