/* siblings.c: gzserve --precompressed: FILE.gz, FILE.zst, FILE.br beside FILE (like nginx's gzip_static and brotli_static). */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gzserve.h"

/* The file name suffix of a coding's precompressed sibling. */
static const char *
sibling_suffix(enum mhdgz_coding coding)
{
	return coding == MHDGZ_CODING_ZSTD ? ".zst" : coding == MHDGZ_CODING_BR ? ".br" : ".gz";
}

/* The FILE.gz (.zst, .br) beside FILE (rel: FILE relative to the root),
 * if it is a regular file inside the root. */
static int
open_precompressed(const struct server *s, const char *rel, enum mhdgz_coding coding,
		   struct stat *st)
{
	size_t len = strlen(rel) + 5;
	char *gzpath = malloc(len);
	unsigned int status;
	int fd;

	if (!gzpath)
		return -1;
	snprintf(gzpath, len, "%s%s", rel, sibling_suffix(coding));
	fd = open_in_root(s, gzpath, st, &status);
	free(gzpath);
	if (fd >= 0 && !S_ISREG(st->st_mode)) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/*
 * The precompressed sibling to send: among the codings of --codings whose
 * sibling exists, the one the client's Accept-Encoding prefers, chosen as
 * mhdgz chooses on the fly. Returns its descriptor (and *st, *coding_ret)
 * or -1 (identity); *any_ret says whether some sibling exists (then the
 * response varies with Accept-Encoding).
 */
int
choose_precompressed(const struct server *s, struct MHD_Connection *conn, const char *rel,
		     struct stat *st, enum mhdgz_coding *coding_ret, bool *any_ret)
{
	int fds[MHDGZ_CODING_COUNT];
	struct stat sts[MHDGZ_CODING_COUNT];
	enum mhdgz_coding have[MHDGZ_CODING_COUNT], k;
	size_t i, n = 0;
	int fd = -1;

	*any_ret = false;
	for (i = 0; i < s->cfg.norder; i++) {
		int f = open_precompressed(s, rel, s->cfg.order[i], &sts[n]);

		if (f >= 0) {
			fds[n] = f;
			have[n++] = s->cfg.order[i];
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
