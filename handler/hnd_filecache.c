/* hnd_filecache.c: compressed representations of file responses, keyed by the file's identity, shared across responses, bounded by a byte budget (LRU). */
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "gz_alloc.h"
#include "hnd_stats.h"
#include "hnd_entry.h"
#include "hnd_filecache.h"
#include "hnd_handle.h"
#include "hnd_repr.h"

/*
 * A file server makes a fresh response per request (it opens the file
 * again), so the coded variant an entry caches dies with the request. This
 * cache keeps the coded bytes of a file version for every later response
 * of the handle on it: the version is what fstat says of the descriptor
 * (device, inode, size, modification and change times) plus the range
 * served, the coding, its level and whether length hiding was asked for.
 *
 * Never stale: a write changes the size or the times. The one gap of such
 * a key, a rewrite of the same size within one tick of the file system's
 * clock (Linux stamps files with a coarse clock, a few milliseconds), is
 * closed by not remembering a file changed less than racy_ns ago (git's
 * "racy" rule): once remembered, any later write stamps a later change
 * time. A file that changes while it is read is not remembered either
 * (its key is taken again after the read). Bodies are shared by reference
 * (struct hnd_body), so an eviction never frees bytes a response still
 * sends.
 */

/* A changed file is remembered only this long after its last change, in
 * nanoseconds: well above any file system's timestamp granularity (ext4 and
 * tmpfs stamp with the kernel's coarse clock, 1-10 ms; FAT has 2 s). */
#ifndef HND_FC_RACY_NS
#define HND_FC_RACY_NS 2000000000LL
#endif

/* Bytes charged per item beyond its body: the item and its bucket slot. */
#define HND_FC_ITEM_OVERHEAD 128

/* Initial buckets (power of two); the table doubles above 2 items per
 * bucket. */
#define HND_FC_BUCKETS0 256

struct hnd_fc_item {
	struct hnd_fc_item *hnext;       /* bucket chain */
	struct hnd_fc_item *prev, *next; /* LRU list, most recent first */
	uint64_t hash;
	struct hnd_fc_key key;
	struct hnd_body *body; /* one reference; NULL: not smaller */
	bool padded;           /* body carries length-hiding padding */
	size_t charge;         /* bytes counted in held */
};

static uint64_t
fc_hash(const struct hnd_fc_key *k)
{
	const uint8_t *p = (const uint8_t *)k;
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a over the key's bytes */
	size_t i;

	for (i = 0; i < sizeof *k; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

int
hnd_fc_init(struct hnd_filecache *fc, size_t budget)
{
	memset(fc, 0, sizeof *fc);
	fc->budget = budget;
	fc->racy_ns = HND_FC_RACY_NS;
	if (budget == 0)
		return 0;
	fc->bucket = gz_calloc(HND_FC_BUCKETS0, sizeof *fc->bucket);
	if (!fc->bucket)
		return MHDGZ_ENOMEM;
	fc->nbuckets = HND_FC_BUCKETS0;
	if (pthread_mutex_init(&fc->lock, NULL) != 0) {
		gz_free(fc->bucket);
		fc->bucket = NULL;
		return MHDGZ_ENOMEM;
	}
	fc->ready = true;
	return 0;
}

static void
item_free(struct hnd_fc_item *it)
{
	if (it->body)
		hnd_body_unref(it->body);
	gz_free(it);
}

void
hnd_fc_fini(struct hnd_filecache *fc)
{
	struct hnd_fc_item *it, *next;

	if (!fc->ready)
		return;
	for (it = fc->lru_head; it; it = next) {
		next = it->next;
		item_free(it);
	}
	gz_free(fc->bucket);
	pthread_mutex_destroy(&fc->lock);
	fc->ready = false;
}

struct hnd_body *
hnd_body_new(const void *data, size_t len)
{
	struct hnd_body *b = gz_malloc(sizeof *b + len);

	if (!b)
		return NULL;
	atomic_init(&b->refs, 1);
	b->len = len;
	if (len && data) /* NULL: the caller fills it */
		memcpy(b->data, data, len);
	return b;
}

void
hnd_body_unref(void *cls)
{
	struct hnd_body *b = cls;

	if (atomic_fetch_sub(&b->refs, 1) == 1)
		gz_free(b);
}

bool
hnd_fc_key_of(const struct mhdgz *gz, const struct hnd_entry *e, enum gz_coding coding, bool padded,
	      struct hnd_fc_key *key)
{
	struct stat st;

	if (fstat(e->fd, &st) != 0 || !S_ISREG(st.st_mode))
		return false;
	memset(key, 0, sizeof *key); /* hashed and compared as bytes */
	key->dev = (uint64_t)st.st_dev;
	key->ino = (uint64_t)st.st_ino;
	key->size = (uint64_t)st.st_size;
	key->mtime_s = (int64_t)st.st_mtim.tv_sec;
	key->mtime_ns = (int64_t)st.st_mtim.tv_nsec;
	key->ctime_s = (int64_t)st.st_ctim.tv_sec;
	key->ctime_ns = (int64_t)st.st_ctim.tv_nsec;
	key->offset = e->offset;
	key->len = e->body_len;
	key->coding = (uint32_t)coding;
	key->padded = padded;
	key->level = gz->coder[coding].level;
	return true;
}

static void
lru_unlink(struct hnd_filecache *fc, struct hnd_fc_item *it)
{
	if (it->prev)
		it->prev->next = it->next;
	else
		fc->lru_head = it->next;
	if (it->next)
		it->next->prev = it->prev;
	else
		fc->lru_tail = it->prev;
	it->prev = it->next = NULL;
}

static void
lru_push_front(struct hnd_filecache *fc, struct hnd_fc_item *it)
{
	it->prev = NULL;
	it->next = fc->lru_head;
	if (fc->lru_head)
		fc->lru_head->prev = it;
	fc->lru_head = it;
	if (!fc->lru_tail)
		fc->lru_tail = it;
}

/* The item of key in its chain, or NULL. fc->lock held. */
static struct hnd_fc_item *
fc_find(struct hnd_filecache *fc, const struct hnd_fc_key *key, uint64_t h)
{
	struct hnd_fc_item *it;

	for (it = fc->bucket[h & (fc->nbuckets - 1)]; it; it = it->hnext)
		if (it->hash == h && memcmp(&it->key, key, sizeof *key) == 0)
			return it;
	return NULL;
}

/* Take it out of its chain, the list and the count. fc->lock held. */
static void
fc_remove(struct hnd_filecache *fc, struct hnd_fc_item *it)
{
	struct hnd_fc_item **pp = &fc->bucket[it->hash & (fc->nbuckets - 1)];

	while (*pp != it)
		pp = &(*pp)->hnext;
	*pp = it->hnext;
	lru_unlink(fc, it);
	fc->held -= it->charge;
	fc->count--;
}

/* Double the buckets; on failure the table stays as it is (longer chains). */
static void
fc_grow(struct hnd_filecache *fc)
{
	size_t n = fc->nbuckets * 2, i;
	struct hnd_fc_item **b = gz_calloc(n, sizeof *b);
	struct hnd_fc_item *it, *next;

	if (!b)
		return;
	for (i = 0; i < fc->nbuckets; i++) {
		for (it = fc->bucket[i]; it; it = next) {
			next = it->hnext;
			it->hnext = b[it->hash & (n - 1)];
			b[it->hash & (n - 1)] = it;
		}
	}
	gz_free(fc->bucket);
	fc->bucket = b;
	fc->nbuckets = n;
}

bool
hnd_fc_get(struct mhdgz *gz, const struct hnd_fc_key *key, struct hnd_body **body_ret,
	   bool *padded_ret)
{
	struct hnd_filecache *fc = &gz->filecache;
	uint64_t h = fc_hash(key);
	struct hnd_fc_item *it;

	pthread_mutex_lock(&fc->lock);
	it = fc_find(fc, key, h);
	if (it) {
		lru_unlink(fc, it);
		lru_push_front(fc, it);
		*body_ret = it->body;
		if (it->body)
			atomic_fetch_add(&it->body->refs, 1);
		*padded_ret = it->padded;
	}
	pthread_mutex_unlock(&fc->lock);
	hnd_count(gz, it ? HND_C_FC_HITS : HND_C_FC_MISSES, 1);
	return it != NULL;
}

/* Was the file (as key says) changed less than racy_ns ago? A clock that
 * cannot be read counts as racy. */
static bool
fc_racy(const struct hnd_filecache *fc, const struct hnd_fc_key *key)
{
	struct timespec now;
	int64_t age_ns;

	if (fc->racy_ns <= 0)
		return false;
	if (clock_gettime(CLOCK_REALTIME, &now) != 0)
		return true;
	age_ns = ((int64_t)now.tv_sec - key->ctime_s) * 1000000000LL +
		 ((int64_t)now.tv_nsec - key->ctime_ns);
	if (age_ns < fc->racy_ns)
		return true;
	age_ns = ((int64_t)now.tv_sec - key->mtime_s) * 1000000000LL +
		 ((int64_t)now.tv_nsec - key->mtime_ns);
	return age_ns < fc->racy_ns;
}

void
hnd_fc_put(struct mhdgz *gz, const struct hnd_entry *e, const struct hnd_fc_key *key,
	   struct hnd_body *body, bool padded)
{
	struct hnd_filecache *fc = &gz->filecache;
	struct hnd_fc_key now;
	struct hnd_fc_item *it;
	size_t charge = HND_FC_ITEM_OVERHEAD + (body ? body->len : 0);
	uint64_t h;

	if (charge > fc->budget || fc_racy(fc, key))
		return;
	/* The bytes were read after key was taken: remember them only if
	 * the file still is what key says. */
	if (!hnd_fc_key_of(gz, e, (enum gz_coding)key->coding, key->padded, &now) ||
	    memcmp(&now, key, sizeof now) != 0)
		return;
	it = gz_calloc(1, sizeof *it);
	if (!it)
		return; /* not remembered: the next response compresses again */
	h = fc_hash(key);
	it->hash = h;
	it->key = *key;
	it->body = body;
	if (body)
		atomic_fetch_add(&body->refs, 1);
	it->padded = padded;
	it->charge = charge;
	pthread_mutex_lock(&fc->lock);
	if (fc_find(fc, key, h)) { /* another thread remembered it first */
		pthread_mutex_unlock(&fc->lock);
		item_free(it);
		return;
	}
	while (fc->held + charge > fc->budget && fc->lru_tail) {
		struct hnd_fc_item *old = fc->lru_tail;

		fc_remove(fc, old);
		item_free(old); /* a response still sending it holds its own reference */
		hnd_count(gz, HND_C_FC_EVICTIONS, 1);
	}
	if (fc->count >= 2 * fc->nbuckets)
		fc_grow(fc);
	it->hnext = fc->bucket[h & (fc->nbuckets - 1)];
	fc->bucket[h & (fc->nbuckets - 1)] = it;
	lru_push_front(fc, it);
	fc->held += charge;
	fc->count++;
	pthread_mutex_unlock(&fc->lock);
}
