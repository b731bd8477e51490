/*
 * notify.c: change notification for kept file responses (keep.c): inotify
 * watches on a kept file and on every directory from the root down to it,
 * and the mount table, so that a request costs one epoll_wait() instead of
 * an openat2(), fstat() and close() while nothing changed.
 *
 * The protocol. A generation counter starts at 1. Every request first
 * takes in what the kernel queued (notify_gen): an epoll_wait() with no
 * timeout on the inotify descriptor and /proc/self/mountinfo (whose poll
 * reports a mount or unmount); if anything is ready, the queue is read
 * empty and the generation moves on. The kernel queues an event before the
 * system call that caused it returns (the write, rename, unlink, chmod,
 * mount), so any change that finished before a request began is seen by
 * that request's notify_gen. An entry checked by a full resolution and
 * fstat (notify_watch) after notify_gen returned G may skip the check as
 * long as the generation is still G: a change after G's epoll_wait is
 * either seen by that fstat or moves the generation on later.
 *
 * The epoll_wait, the read and the move of the generation happen under one
 * lock, so no thread can find the queue empty while another has taken
 * events out of it (or the mount table's change, which the epoll_wait
 * itself consumes: its poll remembers the table's event count) and not
 * yet moved the generation on; with only the read under the lock, a
 * stale file was served after a mount with --threads 4.
 * The lock is held for one non-blocking epoll_wait per request (about
 * 1 us here: at 50,000 requests/s a thread holds it 5 % of the time);
 * watches are added outside it.
 *
 * What is watched, and why that is enough. Each directory of the path
 * is watched before its child is resolved (openat2 from the parent's
 * descriptor, RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV), so a later rename,
 * creation or removal of any name on the path is an event; the file
 * itself is watched for writes, truncation, attribute and time changes
 * (IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE), and every watched inode for its
 * own move or removal. A path with a symlink or a mount point on it, a
 * file with more than one hard link (written through another directory,
 * its parent's watch would not see it), a root on a file system other than
 * ext2/3/4, XFS, btrfs or tmpfs (network and overlay file systems do not
 * report every change), or no /proc: notify_watch refuses, and keep.c
 * checks that entry on every request as before. What inotify does not
 * report, the times do not tell either: writes through a shared mmap (no
 * event until writeback, and none at all then), and a single write() that
 * lasts over keep.c's 2 s (its event comes at the end, with the times
 * stamped at its start: the revalidation finds them unchanged).
 *
 * Which events count. An event on a watched inode itself (a file's
 * write, a directory's own move, removal or mode change, IN_IGNORED, an
 * overflowed queue) moves the generation on; so does an event on a
 * directory for a name that some watched path goes through (a table of
 * (directory watch, name hash) pairs, each put in before its name is
 * resolved, so a change after that is counted and one before it is seen
 * by the resolution). Any other named event (a file created, written or
 * removed beside the kept ones: a log, an upload, an editor's temporary
 * file) is read and dropped, so a busy root does not send every entry to
 * a full check (strace counted 122 full checks in 500 kept GETs with
 * 1,000 files created and removed per second in the root). Every change
 * test_kept_notified makes also raises an event on a watched inode
 * itself; the names are the second line, for a change to a name on the
 * path whose old inode reports nothing.
 *
 * Watches are never removed one by one; past NOTIFY_WATCH_MAX the inotify
 * instance is replaced by a new, empty one and the generation moves on,
 * so every entry is checked again and watched anew; at most once per
 * NOTIFY_REPLACE_MIN_US, and in between a path that needs new watches is
 * checked per request. Some writes are not reported to inotify before
 * the writer closes the file: Linux native AIO (io_submit), writes through
 * a loop device backed by the file (none until losetup -d), and
 * EXT4_IOC_SWAP_BOOT; keep.c bounds
 * how long an entry goes unchecked (--recheck-ms, 1 s by default).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>
#ifdef SYS_openat2
#include <linux/openat2.h>
#endif

#include "gzserve.h"

/* Watches per inotify instance before it is replaced: each costs the
 * kernel about 1 KiB (fs.inotify.max_user_watches caps them per user,
 * 8192 on small machines). Larger: fewer replacements, each of which makes
 * every entry pay one full check; smaller: less kernel memory. */
#ifndef NOTIFY_WATCH_MAX
#define NOTIFY_WATCH_MAX 4096
#endif
/* Microseconds between two replacements at least: a working set of more
 * watched inodes than NOTIFY_WATCH_MAX would otherwise fill and replace
 * the instance on every pass over it, each replacement sending every
 * entry to a full check (6,000 files: no hit unchecked,
 * slower than without notification). Within it, a path needing new
 * watches is refused (checked per request) instead. */
#ifndef NOTIFY_REPLACE_MIN_US
#define NOTIFY_REPLACE_MIN_US 60000000u
#endif
/* Path components watched at most (directories plus the file); a deeper
 * file is checked on every request. */
#define NOTIFY_DEPTH_MAX 32

/* Slots of the table of names on watched paths (struct notify): a pair
 * per watched inode but the root, so twice NOTIFY_WATCH_MAX keeps it at
 * most half full. A power of two. */
#define NOTIFY_NAMES_CAP (2u * NOTIFY_WATCH_MAX)

#define DIR_MASK                                                                                   \
	(IN_ATTRIB | IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF |        \
	 IN_MOVE_SELF | IN_ONLYDIR)
#define FILE_MASK (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF)

struct notify {
	pthread_mutex_t lock;   /* taking in events (notify_gen), gen */
	pthread_rwlock_t fd_rw; /* in_fd: written (replaced) after lock, read by
	                         * the take-in (after lock) and the watches */
	int ep_fd;              /* epoll: in_fd (EPOLLIN) and mnt_fd (EPOLLPRI) */
	int in_fd;              /* inotify, non-blocking */
	int mnt_fd;             /* /proc/self/mountinfo */
	atomic_int fs_ok;       /* the root's file system: 0 not yet known,
	                       * 1 reports every change, -1 not */
	atomic_bool off;        /* epoll or read failed: every entry is checked */
	uint64_t gen;           /* under the lock */
	uint64_t replaced_us;   /* under the lock: CLOCK_MONOTONIC of the last
	                         * replacement, 0 none */
	/* The names on watched paths: (directory watch, hash of the child's
	 * name) of every component resolved from a watched directory, put in
	 * before that component is resolved. An event on a directory for a
	 * name not among them cannot change a watched path, and leaves the
	 * generation alone. Open addressing, 0 empty; emptied when the
	 * instance is replaced (its watch numbers go with it). names_full: a
	 * pair did not fit, every event on a directory counts. */
	pthread_mutex_t names_lock; /* innermost: held around nothing else */
	uint64_t names[NOTIFY_NAMES_CAP];
	unsigned int names_n;
	bool names_full;
};

static int
epoll_add(int ep_fd, int fd, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.fd = fd };

	return epoll_ctl(ep_fd, EPOLL_CTL_ADD, fd, &ev);
}

struct notify *
notify_new(void)
{
	struct notify *n = calloc(1, sizeof *n);

	if (!n)
		return NULL;
	pthread_mutex_init(&n->lock, NULL);
	pthread_rwlock_init(&n->fd_rw, NULL);
	pthread_mutex_init(&n->names_lock, NULL);
	atomic_init(&n->fs_ok, 0);
	atomic_init(&n->off, false);
	n->gen = 1;
	n->ep_fd = epoll_create1(EPOLL_CLOEXEC);
	n->in_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	n->mnt_fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
	if (n->ep_fd < 0 || n->in_fd < 0 || n->mnt_fd < 0 ||
	    epoll_add(n->ep_fd, n->in_fd, EPOLLIN) != 0 ||
	    epoll_add(n->ep_fd, n->mnt_fd, EPOLLPRI) != 0) {
		notify_free(n);
		return NULL;
	}
	return n;
}

void
notify_free(struct notify *n)
{
	if (!n)
		return;
	if (n->ep_fd >= 0)
		close(n->ep_fd);
	if (n->in_fd >= 0)
		close(n->in_fd);
	if (n->mnt_fd >= 0)
		close(n->mnt_fd);
	pthread_mutex_destroy(&n->names_lock);
	pthread_rwlock_destroy(&n->fd_rw);
	pthread_mutex_destroy(&n->lock);
	free(n);
}

/* The key of a directory watch and a child's name: never 0 (a watch
 * number is at least 1). */
static uint64_t
name_key(int wd, const char *name, size_t len)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	for (size_t i = 0; i < len && name[i]; i++)
		h = (h ^ (unsigned char)name[i]) * 16777619u;
	return (uint64_t)(uint32_t)wd << 32 | h;
}

/* Note that an event for name under directory watch wd changes a watched
 * path. Before the name is resolved: a change after this is an event
 * that counts, one before it is seen by the resolution. */
static void
name_put(struct notify *n, int wd, const char *name)
{
	uint64_t key = name_key(wd, name, strlen(name));
	unsigned int i = (unsigned int)(key * 0x9e3779b97f4a7c15ull >> 32) & (NOTIFY_NAMES_CAP - 1);

	pthread_mutex_lock(&n->names_lock);
	if (n->names_n >= NOTIFY_NAMES_CAP / 2) {
		n->names_full = true; /* every named event counts from now on */
		goto out;
	}
	while (n->names[i] && n->names[i] != key)
		i = (i + 1) & (NOTIFY_NAMES_CAP - 1);
	if (!n->names[i]) {
		n->names[i] = key;
		n->names_n++;
	}
out:
	pthread_mutex_unlock(&n->names_lock);
}

/* Whether ev may change a watched path: an event on the watched inode
 * itself (a file's write or attribute change, a directory's own move,
 * removal or mode, IN_IGNORED, a queue overflow: no name), or on a name
 * that a watched path goes through (or might: a hash shared with one,
 * names_full). */
static bool
event_counts(struct notify *n, const struct inotify_event *ev)
{
	uint64_t key;
	unsigned int i;
	bool hit;

	if (ev->len == 0 || ev->wd < 0 || (ev->mask & IN_Q_OVERFLOW))
		return true;
	key = name_key(ev->wd, ev->name, ev->len);
	i = (unsigned int)(key * 0x9e3779b97f4a7c15ull >> 32) & (NOTIFY_NAMES_CAP - 1);
	pthread_mutex_lock(&n->names_lock);
	hit = n->names_full;
	while (!hit && n->names[i]) {
		hit = n->names[i] == key;
		i = (i + 1) & (NOTIFY_NAMES_CAP - 1);
	}
	pthread_mutex_unlock(&n->names_lock);
	return hit;
}

/* Take in what the kernel queued: the epoll_wait consumes a mount table
 * change, the read empties the inotify queue; a mount table change, or an
 * event that may change a watched path (event_counts), moves the
 * generation on. Under n->lock. */
static void
take_in_locked(struct notify *n)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	struct epoll_event ev[2];
	ssize_t got;
	bool counts = false;
	int ready = epoll_wait(n->ep_fd, ev, 2, 0);

	if (ready < 0 && errno != EINTR) {
		atomic_store(&n->off, true); /* every entry is checked from now on */
		return;
	}
	if (ready == 0)
		return;
	for (int i = 0; i < ready; i++)
		if (ev[i].data.fd == n->mnt_fd)
			counts = true;
	pthread_rwlock_rdlock(&n->fd_rw);
	for (;;) {
		got = read(n->in_fd, buf, sizeof buf);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		/* The kernel returns whole events only. */
		for (ssize_t off = 0; off < got && !counts;) {
			const struct inotify_event *e = (const struct inotify_event *)(buf + off);

			counts = event_counts(n, e);
			off += (ssize_t)(sizeof *e + e->len);
		}
	}
	if (got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
		atomic_store(&n->off, true);
		counts = true;
	}
	pthread_rwlock_unlock(&n->fd_rw);
	if (counts)
		n->gen++;
}

uint64_t
notify_gen(struct notify *n)
{
	uint64_t gen;

	if (!n || atomic_load(&n->off))
		return 0;
	pthread_mutex_lock(&n->lock);
	take_in_locked(n);
	gen = n->gen;
	pthread_mutex_unlock(&n->lock);
	return atomic_load(&n->off) ? 0 : gen;
}

/* A new, empty inotify instance in place of the full one, unless the
 * last replacement is under NOTIFY_REPLACE_MIN_US old: 0, or -1. Takes
 * n->lock, then fd_rw for writing. */
static int
replace(struct notify *n)
{
	uint64_t t_us = now_us(); /* log.c */
	int fd = -1;

	pthread_mutex_lock(&n->lock);
	if (n->replaced_us && t_us - n->replaced_us < NOTIFY_REPLACE_MIN_US)
		goto out;
	fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (fd < 0 || epoll_add(n->ep_fd, fd, EPOLLIN) != 0) {
		if (fd >= 0)
			close(fd);
		fd = -1;
		goto out;
	}
	/* Events still queued on the old instance go with it: the generation
	 * moves on, under the lock that every notify_gen takes. */
	pthread_rwlock_wrlock(&n->fd_rw);
	epoll_ctl(n->ep_fd, EPOLL_CTL_DEL, n->in_fd, NULL);
	close(n->in_fd);
	n->in_fd = fd;
	n->gen++;
	n->replaced_us = t_us;
	pthread_mutex_lock(&n->names_lock);
	memset(n->names, 0, sizeof n->names);
	n->names_n = 0;
	n->names_full = false;
	pthread_mutex_unlock(&n->names_lock);
	pthread_rwlock_unlock(&n->fd_rw);
out:
	pthread_mutex_unlock(&n->lock);
	return fd >= 0 ? 0 : -1;
}

/* Watch the inode fd refers to, its watch number in *wd_ret. 0, 1 when
 * the instance is full, -1. */
static int
watch_fd(struct notify *n, int fd, uint32_t mask, int *wd_ret)
{
	char proc[40];
	int wd;

	snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
	wd = inotify_add_watch(n->in_fd, proc, mask);
	if (wd < 0)
		return errno == ENOSPC ? 1 : -1;
	*wd_ret = wd;
	return wd > NOTIFY_WATCH_MAX ? 1 : 0;
}

static bool
fs_reports_all(int dirfd)
{
	struct statfs sf;

	if (fstatfs(dirfd, &sf) != 0)
		return false;
	switch ((unsigned long)sf.f_type) {
	case EXT4_SUPER_MAGIC: /* also ext2 and ext3 */
	case XFS_SUPER_MAGIC:
	case BTRFS_SUPER_MAGIC:
	case TMPFS_MAGIC:
		return true;
	default:
		return false;
	}
}

/* One pass of notify_watch: 0, 1 (the instance filled up), -1. Under
 * fd_rw for reading. */
static int
watch_path(struct notify *n, int dirfd, const char *rel, struct stat *st)
{
#ifdef SYS_openat2
	struct open_how how = {
		.flags = O_PATH | O_CLOEXEC | O_NOFOLLOW,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV |
			   RESOLVE_NO_MAGICLINKS,
	};
	char comp[NAME_MAX + 1];
	const char *p = rel;
	int parent = dirfd, rc, depth = 0, wd = -1;

	rc = watch_fd(n, dirfd, DIR_MASK, &wd);
	while (rc == 0) {
		const char *slash = strchr(p, '/');
		size_t len = slash ? (size_t)(slash - p) : strlen(p);
		int fd;

		if (len == 0 || len > NAME_MAX || ++depth > NOTIFY_DEPTH_MAX ||
		    (len <= 2 && strncmp(p, "..", len) == 0)) {
			rc = -1;
			break;
		}
		memcpy(comp, p, len);
		comp[len] = '\0';
		/* Before the name is resolved: see name_put. */
		name_put(n, wd, comp);
		fd = (int)syscall(SYS_openat2, parent, comp, &how, sizeof how);
		if (parent != dirfd)
			close(parent);
		parent = fd;
		if (fd < 0) {
			rc = -1;
			break;
		}
		rc = watch_fd(n, fd, slash ? DIR_MASK : FILE_MASK, &wd);
		if (!slash)
			break;
		p = slash + 1;
	}
	/* The fstat comes after the file's watch: what changed before it,
	 * it sees; what changes after, is an event. */
	if (rc == 0 && (fstat(parent, st) != 0 || !S_ISREG(st->st_mode) || st->st_nlink != 1))
		rc = -1;
	if (parent >= 0 && parent != dirfd)
		close(parent);
	return rc;
#else
	(void)n;
	(void)dirfd;
	(void)rel;
	(void)st;
	return -1;
#endif
}

int
notify_watch(struct notify *n, int dirfd, const char *rel, struct stat *st)
{
	int rc, fs_ok;

	if (!n || atomic_load(&n->off))
		return -1;
	fs_ok = atomic_load(&n->fs_ok);
	if (fs_ok == 0) {
		fs_ok = fs_reports_all(dirfd) ? 1 : -1;
		atomic_store(&n->fs_ok, fs_ok);
	}
	if (fs_ok < 0)
		return -1;
	/* Watches are added beside the take-in (inotify allows it), so a
	 * check after a change never stops other requests. */
	pthread_rwlock_rdlock(&n->fd_rw);
	rc = watch_path(n, dirfd, rel, st);
	pthread_rwlock_unlock(&n->fd_rw);
	if (rc == 1 && replace(n) == 0) {
		pthread_rwlock_rdlock(&n->fd_rw);
		rc = watch_path(n, dirfd, rel, st);
		pthread_rwlock_unlock(&n->fd_rw);
	}
	return rc == 0 ? 0 : -1;
}
