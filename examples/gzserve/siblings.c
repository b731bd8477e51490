/* siblings.c: gzserve --precompressed: FILE.gz, FILE.zst, FILE.br beside FILE (like nginx's gzip_static and brotli_static), chosen with mhdgz_accept_coding. */
#define _GNU_SOURCE /* asprintf */
#include "config.h" /* HAVE_ZSTD */

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef HAVE_ZSTD
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_getFrameHeader */
#include <zstd.h>
#endif

#include "gzserve.h"

/* The largest zstd window a sibling may need, in bytes: RFC 9659 section
 * 3 lets an HTTP client refuse a window above 8 MiB (browsers do), and
 * mhdgz never codes one. */
#define GZS_ZSTD_WINDOW_MAX (8u * 1024 * 1024)

/* The file name suffix of each coding's precompressed sibling. */
static const char *const sibling_suffix[MHDGZ_CODING_COUNT] = {
	[MHDGZ_CODING_GZIP] = ".gz",
	[MHDGZ_CODING_ZSTD] = ".zst",
	[MHDGZ_CODING_BR] = ".br",
};

/* Does the zstd frame at the start of fd need a window of at most
 * GZS_ZSTD_WINDOW_MAX? Its header says (ZSTD_getFrameHeader); a skippable
 * frame, a header cut short or garbage: no. Without libzstd zstd is not
 * offered, so there is no such sibling to send. */
static bool
zstd_window_ok(int fd)
{
#ifdef HAVE_ZSTD
	unsigned char head[ZSTD_FRAMEHEADERSIZE_MAX];
	ZSTD_frameHeader zfh;
	ssize_t n = pread(fd, head, sizeof head, 0);

	return n > 0 && ZSTD_getFrameHeader(&zfh, head, (size_t)n) == 0 &&
	       zfh.frameType == ZSTD_frame && zfh.windowSize <= GZS_ZSTD_WINDOW_MAX;
#else
	(void)fd;
	return false;
#endif
}

/* The FILE.gz (.zst, .br) beside FILE (rel: FILE relative to the root;
 * file_st: its fstat), if it is a regular file inside the root, at least
 * as new as FILE (an older sibling was made from an older FILE: sending
 * it would serve stale bytes), and, for zstd, within the window limit. */
static int
open_precompressed(const struct server *s, const char *rel, const struct stat *file_st,
		   enum mhdgz_coding coding, struct stat *st)
{
	char *gzpath;
	unsigned int status;
	int fd;

	if (asprintf(&gzpath, "%s%s", rel, sibling_suffix[coding]) < 0)
		return -1;
	fd = open_in_root(s, gzpath, st, &status);
	free(gzpath);
	if (fd >= 0 && (!S_ISREG(st->st_mode) || st->st_mtim.tv_sec < file_st->st_mtim.tv_sec ||
			(st->st_mtim.tv_sec == file_st->st_mtim.tv_sec &&
			 st->st_mtim.tv_nsec < file_st->st_mtim.tv_nsec) ||
			(coding == MHDGZ_CODING_ZSTD && !zstd_window_ok(fd)))) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* Every Accept-Encoding line of a request (every line counts, RFC 9110
 * section 5.3); the strings are libmicrohttpd's. */
struct ae_lines {
	const char **v;
	size_t n;
	bool failed; /* out of memory: some lines are missing */
};

static enum MHD_Result
ae_line(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct ae_lines *ae = cls;
	const char **v;

	(void)kind;
	if (!value || strcasecmp(key, MHD_HTTP_HEADER_ACCEPT_ENCODING) != 0)
		return MHD_YES;
	v = realloc(ae->v, (ae->n + 1) * sizeof *v);
	if (!v) {
		ae->failed = true;
		return MHD_NO;
	}
	ae->v = v;
	ae->v[ae->n++] = value;
	return MHD_YES;
}

/* The coding the request's Accept-Encoding prefers among offered (in the
 * server's order), chosen as the handler chooses on the fly
 * (mhdgz_accept_coding): true and *coding_ret, or false (identity, or
 * out of memory). */
bool
preferred_coding(struct MHD_Connection *conn, const enum mhdgz_coding *offered, size_t noffered,
		 enum mhdgz_coding *coding_ret)
{
	struct ae_lines ae = { NULL, 0, false };
	bool ok;

	MHD_get_connection_values(conn, MHD_HEADER_KIND, ae_line, &ae);
	ok = !ae.failed && mhdgz_accept_coding(ae.v, ae.n, offered, noffered, coding_ret);
	free(ae.v);
	return ok;
}

/* Among the codings offered (in the order mhdgz_coding_info() ranks them)
 * whose sibling is usable, the one the client prefers. */
int
choose_precompressed(const struct server *s, struct MHD_Connection *conn, const char *rel,
		     const struct stat *file_st, struct stat *st, enum mhdgz_coding *coding_ret,
		     bool *any_ret)
{
	int fds[MHDGZ_CODING_COUNT];
	struct stat sts[MHDGZ_CODING_COUNT];
	enum mhdgz_coding have[MHDGZ_CODING_COUNT], k;
	size_t i, n = 0;
	int fd = -1;

	*any_ret = false;
	for (i = 0; i < s->norder; i++) {
		int f = open_precompressed(s, rel, file_st, s->order[i], &sts[n]);

		if (f >= 0) {
			fds[n] = f;
			have[n++] = s->order[i];
		}
	}
	if (n == 0)
		return -1;
	*any_ret = true;
	if (preferred_coding(conn, have, n, &k)) {
		for (i = 0; i < n; i++)
			if (have[i] == k) {
				fd = fds[i];
				fds[i] = -1;
				*st = sts[i];
				*coding_ret = k;
			}
	}
	for (i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	return fd;
}
