/* beneath.c: gzserve --root: every file opened beneath the root's descriptor, never by an absolute path (openat2, or a walk of openat calls). */
#define _GNU_SOURCE /* syscall() for openat2, O_PATH */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#ifdef SYS_openat2
#include <linux/openat2.h>
#endif

#include "gzserve.h"

/* Most symlinks one open follows: Linux's own limit (MAXSYMLINKS). */
#ifndef GZS_MAX_HOPS
#define GZS_MAX_HOPS 40
#endif

/* O_NONBLOCK: a FIFO planted in the tree cannot block a pool thread in
 * open(); it does nothing to regular files. */
#define GZS_OPEN_FLAGS (O_RDONLY | O_CLOEXEC | O_NONBLOCK)
/* A directory on the way: searched, not read (O_PATH needs no read
 * permission, as a path lookup needs none). */
#ifdef O_PATH
#define GZS_DIR_FLAGS (O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
#else
#define GZS_DIR_FLAGS (O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
#endif
/* walk_pass: the path was rewritten, walk it again from the root. */
#define GZS_WALK_AGAIN (-2)

/* path becomes path[0, keep) "/" insert "/" rest (rest may point into
 * path): 0, or -1 and ENAMETOOLONG. */
static int
path_splice(char *path, size_t cap, size_t keep, const char *insert, const char *rest)
{
	char buf[PATH_MAX];
	int n = snprintf(buf, sizeof buf, "%.*s/%s/%s", (int)keep, path, insert, rest);

	if (n < 0 || (size_t)n >= cap || (size_t)n >= sizeof buf) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(path, buf, (size_t)n + 1);
	return 0;
}

/* The symlink name (in dfd, whose path beneath the root is path[0, dir_len))
 * spliced into path in place of path[0, rest - path): a relative target
 * from the link's directory, an absolute one only when it names the root
 * or a path under it (then from the root). 0, or -1 and errno (EXDEV: it
 * points out of the root; EINVAL: name is not a symlink). */
static int
follow(const struct server *s, int dfd, const char *name, char *path, size_t cap, size_t dir_len,
       const char *rest)
{
	char target[PATH_MAX];
	ssize_t n = readlinkat(dfd, name, target, sizeof target);

	if (n < 0)
		return -1;
	if ((size_t)n == sizeof target) {
		errno = ENAMETOOLONG;
		return -1;
	}
	target[n] = '\0';
	if (target[0] != '/')
		return path_splice(path, cap, dir_len, target, rest);
	if (strncmp(target, s->root, s->root_len) != 0 ||
	    (target[s->root_len] != '/' && target[s->root_len] != '\0')) {
		errno = EXDEV;
		return -1;
	}
	return path_splice(path, cap, 0, target + s->root_len, rest);
}

/*
 * One pass of the walk over path from the root's descriptor: each
 * component opened with O_NOFOLLOW from the directory before it. A
 * symlink, or "..", rewrites path (follow(), or the last directory walked
 * taken off: those are real directories, so that is the physical parent,
 * and there is none above the root) and returns GZS_WALK_AGAIN. Returns
 * the descriptor, or -1 and errno.
 */
static int
walk_pass(const struct server *s, char *path, size_t cap)
{
	int dfd = s->root_fd, fd = -1, err = 0;
	char *name = path;
	size_t dir_len = 0; /* path[0, dir_len): the directories walked */

	for (;;) {
		size_t len;
		char *next, c;

		name += strspn(name, "/");
		len = strcspn(name, "/");
		next = name + len + strspn(name + len, "/");
		if (len == 1 && name[0] == '.' && *next) {
			name = next;
			continue;
		}
		if (len == 0 || (len == 1 && name[0] == '.')) { /* the directory walked */
			fd = openat(dfd, ".", GZS_OPEN_FLAGS);
			break;
		}
		if (len == 2 && name[0] == '.' && name[1] == '.') {
			char *up = dir_len ? memrchr(path, '/', dir_len) : NULL;

			if (!dir_len) {
				errno = EXDEV;
				break;
			}
			fd = path_splice(path, cap, up ? (size_t)(up - path) : 0, "", next)
				     ? -1
				     : GZS_WALK_AGAIN;
			break;
		}
		c = name[len];
		name[len] = '\0';
		fd = openat(dfd, name, *next ? GZS_DIR_FLAGS : GZS_OPEN_FLAGS | O_NOFOLLOW);
		/* ELOOP: a symlink refused by O_NOFOLLOW; ENOTDIR: one O_PATH
		 * opened as itself, then refused by O_DIRECTORY. */
		if (fd < 0 && (errno == ELOOP || errno == ENOTDIR)) {
			err = errno;
			if (follow(s, dfd, name, path, cap, dir_len, next) == 0) {
				fd = GZS_WALK_AGAIN; /* path rewritten: c is gone */
				break;
			}
			name[len] = c;
			if (errno == EINVAL) /* not a symlink after all */
				errno = err;
			break;
		}
		name[len] = c;
		if (fd < 0 || !*next)
			break;
		if (dfd != s->root_fd)
			close(dfd);
		dfd = fd;
		dir_len = (size_t)(name + len - path);
		name = next;
	}
	err = errno;
	if (dfd != s->root_fd)
		close(dfd);
	errno = err;
	return fd;
}

/* The walk, pass after pass: at most GZS_MAX_HOPS rewrites of the path. */
static int
walk_beneath(const struct server *s, const char *rel)
{
	char path[PATH_MAX];
	int fd = GZS_WALK_AGAIN;

	if (snprintf(path, sizeof path, "%s", rel) >= (int)sizeof path) {
		errno = ENAMETOOLONG;
		return -1;
	}
	for (int hops = 0; fd == GZS_WALK_AGAIN && hops <= GZS_MAX_HOPS; hops++)
		fd = walk_pass(s, path, sizeof path);
	if (fd == GZS_WALK_AGAIN)
		errno = ELOOP;
	return fd < 0 ? -1 : fd;
}

/* One openat2() from the root's descriptor with RESOLVE_BENEATH: the
 * kernel refuses any lookup that would leave the root (EXDEV), so no check
 * races the open, and a symlink inside is followed. Never an absolute
 * path: a directory swapped for a symlink to outside answers 403 or 404,
 * never the outside file (test_files_swap_race). */
int
open_in_root(const struct server *s, const char *rel, struct stat *st, unsigned int *status_ret)
{
	int fd = -1;

#ifdef SYS_openat2
	struct open_how how = {
		.flags = GZS_OPEN_FLAGS,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
	};

	fd = (int)syscall(SYS_openat2, s->root_fd, rel[0] ? rel : ".", &how, sizeof how);
	/* EXDEV: the walk decides (see above); ENOSYS: a kernel before 5.6;
	 * EPERM: a seccomp filter that does not know openat2. */
	if (fd < 0 && (errno == EXDEV || errno == ENOSYS || errno == EPERM || errno == EINVAL ||
		       errno == E2BIG))
#endif
		fd = walk_beneath(s, rel);
	if (fd >= 0 && fstat(fd, st) != 0) {
		close(fd);
		fd = -1;
		errno = EACCES;
	}
	if (fd < 0)
		*status_ret = errno == ENOENT || errno == ENOTDIR || errno == ENAMETOOLONG
				      ? MHD_HTTP_NOT_FOUND
			      : errno == EMFILE || errno == ENFILE ? MHD_HTTP_SERVICE_UNAVAILABLE
								   : MHD_HTTP_FORBIDDEN;
	return fd;
}
