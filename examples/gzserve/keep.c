/*
 * keep.c: file responses kept in memory (--keep-size), each revalidated by
 * a resolution and fstat per request unless change notification (notify.c)
 * reports nothing changed since the last one.
 *
 * Without it every request for a file opens, fstats, reads and closes the
 * file and builds a response with its header fields; with it a file's
 * response (its bytes read once, its fields set once, the coded variants
 * the library caches on a reused response) is queued again while a stat of
 * the same path still reports the same file version: device, inode, size,
 * modification and change times (ns). That is what nginx's open_file_cache
 * saves, without its 60 s window in which a changed file is served stale.
 *
 * A file version is kept only once its times are older than KEEP_RACY_NS:
 * a file system stamps times from a coarse clock (1-10 ms), so a write in
 * the same tick as the read that filled the entry could leave every field
 * the stat compares unchanged (git's "racy clean" case). Once kept, any
 * write stamps a later change time, which the stat sees.
 *
 * The check resolves the path as files.c's open does, beneath the root
 * (openat2 with RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS, O_PATH: no file
 * is opened for reading), then fstats it: a plain stat would follow a
 * directory of the path moved out of the root and replaced by a symlink
 * to it, to the same unchanged file (same device, inode and times), and
 * serve what the open now refuses. What the kernel refuses here (EXDEV:
 * a symlink leaving the root) takes files.c's path, which decides. A
 * kernel without openat2 (before 5.6; also valgrind 3.19) keeps nothing.
 *
 * Change notification (notify.c) skips that check: an entry whose path
 * is watched, checked at notification generation G, is served without a
 * system call of its own while the generation stays G, that is while no
 * watched file, directory or mount changed, and for at most --recheck-ms
 * after its check: a write inotify does not report (Linux native AIO,
 * io_submit, reports nothing until the writer closes the file) is served
 * stale at most that long. A path that cannot be watched is
 * checked on every request.
 *
 * Bytes held: each entry's identity body, the coded variants queued from it
 * (charged as they are first reported), and KEEP_ENTRY_OVERHEAD; past the
 * budget the least recently used entries go. Entries in use by a request
 * are freed by its keep_put().
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sys/syscall.h>
#ifdef SYS_openat2
#include <linux/openat2.h>
#endif
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gzserve.h"

/* A file version changed less than this long ago is not kept (above). */
#define KEEP_RACY_NS 2000000000LL
/* Bytes charged per entry besides its bodies: the entry, its key and the
 * libmicrohttpd response with its four header fields. */
#define KEEP_ENTRY_OVERHEAD 512u
/* Initial hash buckets; doubled as entries outnumber them. */
#define KEEP_BUCKETS0 256u

struct keep {
	pthread_mutex_t lock;
	struct kept **bucket;
	size_t nbuckets;
	size_t count;             /* entries listed */
	atomic_size_t count_hint; /* count, read without the lock */
	atomic_bool off;          /* openat2 is not available: keep nothing */
	struct kept *lru_first;   /* most recently used */
	struct kept *lru_last;
	size_t budget_nbytes;
	size_t file_max_nbytes;
	uint64_t recheck_us; /* longest unchecked; 0: no notification */
	size_t held_nbytes;
	struct notify *note; /* NULL: every request checks */
	/* Counters, read at exit (keep_report); unchecked: hits served on a
	 * notification generation, without a check of their own. */
	atomic_uint_fast64_t hits, misses, stale, evictions, unchecked;
};

static uint64_t
hash_str(const char *p)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */

	while (*p)
		h = (h ^ (unsigned char)*p++) * 1099511628211ull;
	return h;
}

static bool
same_version(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
	       a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

struct keep *
keep_new(size_t budget_nbytes, unsigned int recheck_ms)
{
	struct keep *k;

	if (!budget_nbytes)
		return NULL;
	k = calloc(1, sizeof *k);
	if (!k)
		return NULL;
	k->bucket = calloc(KEEP_BUCKETS0, sizeof *k->bucket);
	if (!k->bucket) {
		free(k);
		return NULL;
	}
	k->nbuckets = KEEP_BUCKETS0;
	k->budget_nbytes = budget_nbytes;
	/* One entry may take a quarter of the budget, and a file at most
	 * GZS_KEEP_FILE_MAX: larger files go out by sendfile. A budget
	 * whose quarter cannot hold an entry keeps nothing. */
	k->file_max_nbytes = budget_nbytes / 4 > KEEP_ENTRY_OVERHEAD
				     ? budget_nbytes / 4 - KEEP_ENTRY_OVERHEAD
				     : 0;
	if (k->file_max_nbytes > GZS_KEEP_FILE_MAX)
		k->file_max_nbytes = GZS_KEEP_FILE_MAX;
	atomic_init(&k->count_hint, 0);
	atomic_init(&k->off, false);
	atomic_init(&k->hits, 0);
	atomic_init(&k->misses, 0);
	atomic_init(&k->stale, 0);
	atomic_init(&k->evictions, 0);
	atomic_init(&k->unchecked, 0);
	pthread_mutex_init(&k->lock, NULL);
	k->recheck_us = (uint64_t)recheck_ms * 1000u;
	k->note = recheck_ms ? notify_new() : NULL;
	return k;
}

static void
entry_free(struct kept *e)
{
	MHD_destroy_response(e->r); /* requests still sending it hold their own */
	free(e);
}

/* Take e out of the table and the LRU list and drop the table's reference.
 * Returns e when that was the last reference (the caller frees it after
 * unlocking), else NULL. Under k->lock. */
static struct kept *
unlist(struct keep *k, struct kept *e)
{
	struct kept **pp = &k->bucket[e->hash & (k->nbuckets - 1)];

	while (*pp != e)
		pp = &(*pp)->next;
	*pp = e->next;
	if (e->lru_prev)
		e->lru_prev->lru_next = e->lru_next;
	else
		k->lru_first = e->lru_next;
	if (e->lru_next)
		e->lru_next->lru_prev = e->lru_prev;
	else
		k->lru_last = e->lru_prev;
	e->listed = false;
	k->held_nbytes -= e->charge_nbytes;
	k->count--;
	atomic_store_explicit(&k->count_hint, k->count, memory_order_relaxed);
	return --e->refs == 0 ? e : NULL;
}

static void
lru_front(struct keep *k, struct kept *e)
{
	if (k->lru_first == e)
		return;
	if (e->lru_prev)
		e->lru_prev->lru_next = e->lru_next;
	if (e->lru_next)
		e->lru_next->lru_prev = e->lru_prev;
	else if (e->lru_prev)
		k->lru_last = e->lru_prev;
	e->lru_prev = NULL;
	e->lru_next = k->lru_first;
	if (k->lru_first)
		k->lru_first->lru_prev = e;
	k->lru_first = e;
	if (!k->lru_last)
		k->lru_last = e;
}

/* Evict least recently used entries while over budget. Under k->lock; the
 * entries whose last reference went are chained on *dead for keep_reap. */
static void
evict(struct keep *k, struct kept **dead)
{
	while (k->held_nbytes > k->budget_nbytes && k->lru_last) {
		struct kept *e = unlist(k, k->lru_last);

		atomic_fetch_add_explicit(&k->evictions, 1, memory_order_relaxed);
		if (e) {
			e->next = *dead;
			*dead = e;
		}
	}
}

static void
reap(struct kept *dead)
{
	while (dead) {
		struct kept *next = dead->next;

		entry_free(dead);
		dead = next;
	}
}

/* The version of rel beneath dirfd as files.c would open it (above): 0, or
 * -1 (refused, missing, or no openat2: then k->off). */
static int
stat_beneath(struct keep *k, int dirfd, const char *rel, struct stat *st)
{
#ifdef SYS_openat2
	struct open_how how = {
		.flags = O_PATH | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
	};
	int fd = (int)syscall(SYS_openat2, dirfd, rel, &how, sizeof how), rc;

	if (fd < 0) {
		if (errno == ENOSYS || errno == EPERM || errno == EINVAL || errno == E2BIG)
			atomic_store(&k->off, true);
		return -1;
	}
	rc = fstat(fd, st);
	close(fd);
	return rc;
#else
	(void)dirfd;
	(void)rel;
	(void)st;
	atomic_store(&k->off, true);
	return -1;
#endif
}

bool
keep_findable(struct keep *k, int dirfd, const char *rel, const struct stat *st)
{
	struct stat now;

	return k && dirfd >= 0 && rel[0] && stat_beneath(k, dirfd, rel, &now) == 0 &&
	       same_version(st, &now);
}

static struct kept *
find(struct keep *k, uint64_t h, const char *rel)
{
	struct kept *e;

	for (e = k->bucket[h & (k->nbuckets - 1)]; e; e = e->next)
		if (e->hash == h && strcmp(e->rel, rel) == 0)
			break;
	return e;
}

struct kept *
keep_get(struct keep *k, int dirfd, const char *rel)
{
	struct stat st;
	struct kept *e, *dead = NULL;
	uint64_t h, gen, t_us = 0;
	bool watch, watched = false;

	if (!k)
		return NULL;
	/* Nothing kept (yet): a miss. */
	if (dirfd < 0 || !rel[0] ||
	    atomic_load_explicit(&k->count_hint, memory_order_relaxed) == 0) {
		atomic_fetch_add_explicit(&k->misses, 1, memory_order_relaxed);
		return NULL;
	}
	gen = notify_gen(k->note);
	if (gen)
		t_us = now_us(); /* log.c */
	h = hash_str(rel);
	pthread_mutex_lock(&k->lock);
	e = find(k, h, rel);
	if (e && gen && e->note_gen == gen &&
	    t_us - e->note_us < k->recheck_us) { /* nothing changed since its check */
		e->refs++;
		lru_front(k, e);
		pthread_mutex_unlock(&k->lock);
		atomic_fetch_add_explicit(&k->hits, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&k->unchecked, 1, memory_order_relaxed);
		return e;
	}
	watch = e && gen && !e->note_never;
	pthread_mutex_unlock(&k->lock);
	/* The full check; with watches first when the entry may skip it
	 * afterwards. A path that fails it is a miss. */
	if (watch && notify_watch(k->note, dirfd, rel, &st) == 0)
		watched = true;
	else if (stat_beneath(k, dirfd, rel, &st) != 0) {
		atomic_fetch_add_explicit(&k->misses, 1, memory_order_relaxed);
		return NULL;
	}
	pthread_mutex_lock(&k->lock);
	e = find(k, h, rel);
	if (e && same_version(&e->st, &st)) {
		e->refs++;
		if (watched) {
			e->note_gen = gen;
			e->note_us = t_us; /* taken before the check */
		} else if (watch)
			e->note_never = true;
		lru_front(k, e);
		atomic_fetch_add_explicit(&k->hits, 1, memory_order_relaxed);
	} else if (e) {
		dead = unlist(k, e);
		if (dead)
			dead->next = NULL; /* its chain link, not a reap list */
		e = NULL;
		atomic_fetch_add_explicit(&k->stale, 1, memory_order_relaxed);
	} else {
		atomic_fetch_add_explicit(&k->misses, 1, memory_order_relaxed);
	}
	pthread_mutex_unlock(&k->lock);
	reap(dead);
	return e;
}

void
keep_put(struct keep *k, struct kept *e)
{
	bool last;

	if (!e)
		return;
	pthread_mutex_lock(&k->lock);
	last = --e->refs == 0;
	pthread_mutex_unlock(&k->lock);
	if (last)
		entry_free(e);
}

void *
keep_read(int fd, const struct stat *st)
{
	size_t len = (size_t)st->st_size, got = 0;
	uint8_t *body = malloc(len ? len : 1);
	struct stat now;

	if (!body)
		return NULL;
	while (got < len) {
		ssize_t n = pread(fd, body + got, len - got, (off_t)got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) /* an error, or the file is shorter now */
			goto fail;
		got += (size_t)n;
	}
	/* The bytes read are this version's only if nothing changed it
	 * meanwhile (a write stamps a later change time). */
	if (fstat(fd, &now) != 0 || !same_version(st, &now))
		goto fail;
	return body;
fail:
	free(body);
	return NULL;
}

bool
keep_wanted(const struct keep *k, const struct stat *st)
{
	struct timespec now;
	long long newest_ns, now_ns;

	if (!k || atomic_load(&k->off) || !S_ISREG(st->st_mode) || st->st_size <= 0 ||
	    (uint64_t)st->st_size > k->file_max_nbytes)
		return false;
	if (clock_gettime(CLOCK_REALTIME, &now) != 0)
		return false;
	now_ns = (long long)now.tv_sec * 1000000000LL + now.tv_nsec;
	newest_ns = (long long)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec;
	if ((long long)st->st_ctim.tv_sec * 1000000000LL + st->st_ctim.tv_nsec > newest_ns)
		newest_ns = (long long)st->st_ctim.tv_sec * 1000000000LL + st->st_ctim.tv_nsec;
	return now_ns - newest_ns >= KEEP_RACY_NS;
}

static int
grow(struct keep *k)
{
	size_t n = k->nbuckets * 2, i;
	struct kept **b = calloc(n, sizeof *b);

	if (!b)
		return -1;
	for (i = 0; i < k->nbuckets; i++) {
		struct kept *e = k->bucket[i], *next;

		for (; e; e = next) {
			next = e->next;
			e->next = b[e->hash & (n - 1)];
			b[e->hash & (n - 1)] = e;
		}
	}
	free(k->bucket);
	k->bucket = b;
	k->nbuckets = n;
	return 0;
}

struct kept *
keep_add(struct keep *k, const char *rel, const struct stat *st, struct MHD_Response *r,
	 const char *etag, uint64_t body_nbytes)
{
	size_t rel_len = strlen(rel);
	struct kept *e = calloc(1, sizeof *e + rel_len + 1), *old, *dead = NULL;

	if (!e)
		return NULL;
	atomic_init(&e->charged, 0);
	e->hash = hash_str(rel);
	memcpy(e->rel, rel, rel_len + 1);
	e->st = *st;
	e->r = r;
	snprintf(e->etag, sizeof e->etag, "%s", etag);
	e->mtime = st->st_mtim.tv_sec;
	e->body_nbytes = body_nbytes;
	e->charge_nbytes = body_nbytes + KEEP_ENTRY_OVERHEAD + rel_len;
	e->refs = 2; /* the table's and the caller's */
	e->listed = true;

	pthread_mutex_lock(&k->lock);
	if (k->count >= k->nbuckets && grow(k) != 0) {
		pthread_mutex_unlock(&k->lock);
		free(e);
		return NULL;
	}
	old = find(k, e->hash, rel);
	if (old) /* another request kept this path meanwhile: the newer wins */
		dead = unlist(k, old);
	if (dead)
		dead->next = NULL;
	e->next = k->bucket[e->hash & (k->nbuckets - 1)];
	k->bucket[e->hash & (k->nbuckets - 1)] = e;
	k->count++;
	atomic_store_explicit(&k->count_hint, k->count, memory_order_relaxed);
	k->held_nbytes += e->charge_nbytes;
	lru_front(k, e);
	evict(k, &dead);
	pthread_mutex_unlock(&k->lock);
	reap(dead);
	return e;
}

void
keep_charge(struct keep *k, struct kept *e, const char *coding, uint64_t coded_nbytes)
{
	struct kept *dead = NULL;
	unsigned int bit = 0;
	int i;

	if (!coding || coded_nbytes == MHDGZ_NBYTES_UNKNOWN)
		return;
	for (i = 0; i < MHDGZ_CODING_COUNT; i++)
		if (strcmp(coding, mhdgz_coding_name((enum mhdgz_coding)i)) == 0)
			bit = 1u << i;
	if (!bit) /* identity: the body already charged */
		return;
	if (atomic_load_explicit(&e->charged, memory_order_relaxed) & bit)
		return; /* the common case: no lock */
	pthread_mutex_lock(&k->lock);
	if (e->listed && !(atomic_load_explicit(&e->charged, memory_order_relaxed) & bit)) {
		atomic_fetch_or_explicit(&e->charged, bit, memory_order_relaxed);
		e->charge_nbytes += coded_nbytes;
		k->held_nbytes += coded_nbytes;
		evict(k, &dead);
	}
	pthread_mutex_unlock(&k->lock);
	reap(dead);
}

void
keep_report(struct keep *k, FILE *f)
{
	if (!k)
		return;
	pthread_mutex_lock(&k->lock);
	fprintf(f,
		"gzserve: kept responses: %" PRIu64 " hits, %" PRIu64 " misses, %" PRIu64
		" stale, %" PRIu64 " evictions, %zu entries, %zu bytes held, %" PRIu64
		" hits unchecked (change notification %s)\n",
		(uint64_t)atomic_load(&k->hits), (uint64_t)atomic_load(&k->misses),
		(uint64_t)atomic_load(&k->stale), (uint64_t)atomic_load(&k->evictions), k->count,
		k->held_nbytes, (uint64_t)atomic_load(&k->unchecked),
		k->note && notify_gen(k->note) ? "on" : "off");
	pthread_mutex_unlock(&k->lock);
}

void
keep_free(struct keep *k)
{
	struct kept *e, *next;

	if (!k)
		return;
	/* Every request is over: the table holds the last references. */
	for (e = k->lru_first; e; e = next) {
		next = e->lru_next;
		entry_free(e);
	}
	free(k->bucket);
	notify_free(k->note);
	pthread_mutex_destroy(&k->lock);
	free(k);
}
