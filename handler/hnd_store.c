/* hnd_store.c: the one store of coded bytes and coded lengths: one key, one byte budget, one LRU, one freshness rule. */
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "gz_alloc.h"
#include "hnd_stats.h"
#include "hnd_entry.h"
#include "hnd_handle.h"
#include "hnd_pad.h"
#include "hnd_store.h"

/*
 * Everything the handler keeps of coded bytes is an item here: the coded
 * body of a tracked response (reused by its every queue, its HEADs and
 * 304s), the coded body of a file version (reused by every response on
 * it: a file server opens the file per request), and coded lengths alone
 * (a stream's, for HEAD and 304; a strong ETag's, for the next response
 * made per request with that ETag). A key is what names the identity
 * bytes (enum hnd_name) plus how they are coded (coding, level, length
 * hiding, whole or stream, dictionary); an item holds a body and its
 * length, a length alone, or "not smaller" (HND_STORE_NOT_SMALLER).
 *
 * A strong ETag names one exact representation (RFC 9110 section 8.8.1),
 * and a file version is what fstat says of the descriptor: a write
 * changes the size or the change time. The one gap of such a key, a
 * rewrite of the same size within one tick of the file system's clock
 * (Linux stamps files with a coarse clock, a few milliseconds), is closed
 * by the freshness rule, git's "racy" rule: a file changed less than
 * racy_ns ago is not remembered; once remembered, any later write stamps
 * a later change time. The version is taken before the bytes are read
 * (hnd_store_entry_version), so a write while they are read or coded
 * never names the old bytes. Pinned by test_fc_stale, test_fc_off_racy,
 * test_fc_changed_while_coded
 * (check_hnd_filecache.c) and test_store_fresh (check_hnd_store.c).
 *
 * One byte budget bounds the items (body bytes plus
 * HND_STORE_ITEM_OVERHEAD each); the least recently used go first. Bodies
 * are shared by reference (struct hnd_body), so an eviction never frees
 * bytes a response still sends (test_store_refcount). One lock: a lookup
 * is a hash and a short chain walk; a response reused from its entry
 * checks hnd_store_holds (an atomic load) and takes no lock at all. A
 * body named by its response alone enters at the response's second use
 * (hnd_store_entry_offer), so a response queued once, most of them, never
 * takes the lock (test_store_counters).
 */

struct hnd_body *
hnd_body_new(const void *data, size_t len)
{
	struct hnd_body *b = gz_malloc(sizeof *b + len);

	if (!b)
		return NULL;
	atomic_init(&b->refs, 1);
	atomic_init(&b->stored, false);
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

/* Initial buckets (power of two); the table doubles above 2 items per
 * bucket. */
#define HND_STORE_BUCKETS0 256

struct hnd_store_item {
	struct hnd_store_item *hnext;       /* bucket chain */
	struct hnd_store_item *prev, *next; /* LRU list, most recent first */
	uint64_t hash;
	struct hnd_store_val val;
	size_t charge; /* bytes counted in held */
	size_t key_nbytes;
	struct hnd_store_key key; /* its first key_nbytes bytes are the key */
};

/* The bytes of k that are the key: the fixed part and the name's. */
static size_t
key_nbytes(const struct hnd_store_key *k)
{
	size_t head = offsetof(struct hnd_store_key, u);

	switch (k->name) {
	case HND_NAME_FILE:
		return head + sizeof k->u.file;
	case HND_NAME_ETAG:
		return offsetof(struct hnd_store_key, u.etag.tag) + k->u.etag.len;
	default:
		return head + sizeof k->u.response;
	}
}

static uint64_t
key_hash(const struct hnd_store_key *k, size_t n)
{
	const uint8_t *p = (const uint8_t *)k;
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a over the key's bytes */
	size_t i;

	for (i = 0; i < n; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h ^ (h >> 32);
}

void
hnd_store_key_response(struct hnd_store_key *k, uint64_t id)
{
	/* the bytes that are key: hashed and compared (key_nbytes) */
	memset(k, 0, offsetof(struct hnd_store_key, u) + sizeof k->u.response);
	k->name = HND_NAME_RESPONSE;
	k->u.response = id;
}

bool
hnd_store_key_file(struct hnd_store_key *k, int fd, uint64_t offset, uint64_t len)
{
	struct stat st;

	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
		return false;
	memset(k, 0, offsetof(struct hnd_store_key, u) + sizeof k->u.file);
	k->name = HND_NAME_FILE;
	k->u.file.dev = (uint64_t)st.st_dev;
	k->u.file.ino = (uint64_t)st.st_ino;
	k->u.file.size = (uint64_t)st.st_size;
	k->u.file.mtime_s = (int64_t)st.st_mtim.tv_sec;
	k->u.file.mtime_ns = (int64_t)st.st_mtim.tv_nsec;
	k->u.file.ctime_s = (int64_t)st.st_ctim.tv_sec;
	k->u.file.ctime_ns = (int64_t)st.st_ctim.tv_nsec;
	k->u.file.offset = offset;
	k->u.file.len = len;
	return true;
}

bool
hnd_store_key_etag(struct hnd_store_key *k, const char *etag, uint64_t body_len, uint64_t resource)
{
	const char *op;
	size_t op_len, len;
	bool weak;

	if (!etag || !hnd_etag_parse(etag, &weak, &op, &op_len) || weak)
		return false;
	len = strlen(etag);
	if (len > HND_STORE_ETAG_MAX)
		return false;
	memset(k, 0, offsetof(struct hnd_store_key, u.etag.tag)); /* the rest is not key */
	k->name = HND_NAME_ETAG;
	k->u.etag.body_len = body_len;
	k->u.etag.resource = resource;
	k->u.etag.len = (uint32_t)len;
	memcpy(k->u.etag.tag, etag, len + 1);
	return true;
}

void
hnd_store_key_coding(struct hnd_store_key *k, unsigned int coding, int level, bool padded,
		     enum hnd_store_mode mode, const struct mhdgz_dictionary *dict)
{
	k->coding = (uint8_t)coding;
	k->level = level;
	k->padded = padded;
	k->mode = (uint8_t)mode;
	k->dict = dict;
}

bool
hnd_store_key_eq(const struct hnd_store_key *a, const struct hnd_store_key *b)
{
	size_t n = key_nbytes(a);

	return n == key_nbytes(b) && memcmp(a, b, n) == 0;
}

int
hnd_store_init(struct hnd_store *s, size_t budget)
{
	memset(s, 0, sizeof *s);
	s->files = budget != 0;
	s->budget = budget ? budget : HND_STORE_DEFAULT_NBYTES;
	s->racy_ns = HND_STORE_RACY_NS;
	s->bucket = gz_calloc(HND_STORE_BUCKETS0, sizeof *s->bucket);
	if (!s->bucket)
		return MHDGZ_ENOMEM;
	s->nbuckets = HND_STORE_BUCKETS0;
	if (pthread_mutex_init(&s->lock, NULL) != 0) {
		gz_free(s->bucket);
		s->bucket = NULL;
		return MHDGZ_ENOMEM;
	}
	s->ready = true;
	return 0;
}

/* Drop an item taken out of the store: its body reference goes (a
 * response still sending the bytes holds its own). */
static void
item_free(struct hnd_store_item *it)
{
	if (it->val.body) {
		atomic_store_explicit(&it->val.body->stored, false, memory_order_release);
		hnd_body_unref(it->val.body);
	}
	gz_free(it);
}

void
hnd_store_fini(struct hnd_store *s)
{
	struct hnd_store_item *it, *next;

	if (!s->ready)
		return;
	for (it = s->lru_head; it; it = next) {
		next = it->next;
		item_free(it);
	}
	gz_free(s->bucket);
	pthread_mutex_destroy(&s->lock);
	s->ready = false;
}

static void
lru_unlink(struct hnd_store *s, struct hnd_store_item *it)
{
	if (it->prev)
		it->prev->next = it->next;
	else
		s->lru_head = it->next;
	if (it->next)
		it->next->prev = it->prev;
	else
		s->lru_tail = it->prev;
	it->prev = it->next = NULL;
}

static void
lru_push_front(struct hnd_store *s, struct hnd_store_item *it)
{
	it->prev = NULL;
	it->next = s->lru_head;
	if (s->lru_head)
		s->lru_head->prev = it;
	s->lru_head = it;
	if (!s->lru_tail)
		s->lru_tail = it;
}

/* The item of k in its chain, or NULL. s->lock held. */
static struct hnd_store_item *
find(struct hnd_store *s, const struct hnd_store_key *k, size_t n, uint64_t h)
{
	struct hnd_store_item *it;

	for (it = s->bucket[h & (s->nbuckets - 1)]; it; it = it->hnext)
		if (it->hash == h && it->key_nbytes == n && memcmp(&it->key, k, n) == 0)
			return it;
	return NULL;
}

/* Take it out of its chain, the list and the count. s->lock held. */
static void
unlink_item(struct hnd_store *s, struct hnd_store_item *it)
{
	struct hnd_store_item **pp = &s->bucket[it->hash & (s->nbuckets - 1)];

	while (*pp != it)
		pp = &(*pp)->hnext;
	*pp = it->hnext;
	lru_unlink(s, it);
	atomic_store_explicit(&s->held,
			      atomic_load_explicit(&s->held, memory_order_relaxed) - it->charge,
			      memory_order_relaxed);
	s->count--;
}

/* Double the buckets; on failure the table stays as it is (longer chains). */
static void
grow(struct hnd_store *s)
{
	size_t n = s->nbuckets * 2, i;
	struct hnd_store_item **b = gz_calloc(n, sizeof *b);
	struct hnd_store_item *it, *next;

	if (!b)
		return;
	for (i = 0; i < s->nbuckets; i++) {
		for (it = s->bucket[i]; it; it = next) {
			next = it->hnext;
			it->hnext = b[it->hash & (n - 1)];
			b[it->hash & (n - 1)] = it;
		}
	}
	gz_free(s->bucket);
	s->bucket = b;
	s->nbuckets = n;
}

bool
hnd_store_get(struct mhdgz *gz, const struct hnd_store_key *k, struct hnd_store_val *v)
{
	struct hnd_store *s = &gz->store;
	size_t n = key_nbytes(k);
	uint64_t h = key_hash(k, n);
	struct hnd_store_item *it;

	pthread_mutex_lock(&s->lock);
	it = find(s, k, n, h);
	if (it) {
		lru_unlink(s, it);
		lru_push_front(s, it);
		*v = it->val;
		if (v->body)
			atomic_fetch_add(&v->body->refs, 1);
	}
	pthread_mutex_unlock(&s->lock);
	hnd_count(gz, it ? HND_C_STORE_HITS : HND_C_STORE_MISSES, 1);
	return it != NULL;
}

bool
hnd_store_fresh(const struct hnd_store *s, const struct hnd_store_key *k)
{
	struct timespec now;
	int64_t age_ns;

	if (k->name != HND_NAME_FILE || s->racy_ns <= 0)
		return true;
	if (clock_gettime(CLOCK_REALTIME, &now) != 0)
		return false;
	age_ns = ((int64_t)now.tv_sec - k->u.file.ctime_s) * 1000000000LL +
		 ((int64_t)now.tv_nsec - k->u.file.ctime_ns);
	if (age_ns < s->racy_ns)
		return false;
	age_ns = ((int64_t)now.tv_sec - k->u.file.mtime_s) * 1000000000LL +
		 ((int64_t)now.tv_nsec - k->u.file.mtime_ns);
	return age_ns >= s->racy_ns;
}

bool
hnd_store_put(struct mhdgz *gz, const struct hnd_store_key *k, const struct hnd_store_val *v,
	      int fd)
{
	struct hnd_store *s = &gz->store;
	struct hnd_store_item *it, *old;
	size_t n = key_nbytes(k), charge = HND_STORE_ITEM_OVERHEAD + (v->body ? v->body->len : 0);
	struct hnd_store_key now;

	if (charge > s->budget)
		return false;
	if (k->name == HND_NAME_FILE) {
		if (!s->files || !hnd_store_fresh(s, k))
			return false;
		/* The bytes were read after k was taken: remember them only
		 * if the file still is what k says. */
		if (fd >= 0 && (!hnd_store_key_file(&now, fd, k->u.file.offset, k->u.file.len) ||
				memcmp(&now.u.file, &k->u.file, sizeof now.u.file) != 0))
			return false;
	}
	it = gz_malloc(offsetof(struct hnd_store_item, key) + n);
	if (!it)
		return false; /* not remembered: the next response codes again */
	memcpy(&it->key, k, n);
	it->key_nbytes = n;
	it->hash = key_hash(k, n);
	it->val = *v;
	it->charge = charge;
	it->prev = it->next = it->hnext = NULL;
	if (v->body)
		atomic_fetch_add(&v->body->refs, 1);
	pthread_mutex_lock(&s->lock);
	old = find(s, k, n, it->hash);
	if (old) /* another thread's, or one this replaces */
		unlink_item(s, old);
	while (atomic_load_explicit(&s->held, memory_order_relaxed) + charge > s->budget &&
	       s->lru_tail) {
		struct hnd_store_item *lru = s->lru_tail;

		unlink_item(s, lru);
		item_free(lru); /* a response still sending it holds its own reference */
		hnd_count(gz, HND_C_STORE_EVICTIONS, 1);
	}
	if (s->count >= 2 * s->nbuckets)
		grow(s);
	it->hnext = s->bucket[it->hash & (s->nbuckets - 1)];
	s->bucket[it->hash & (s->nbuckets - 1)] = it;
	lru_push_front(s, it);
	atomic_store_explicit(&s->held,
			      atomic_load_explicit(&s->held, memory_order_relaxed) + charge,
			      memory_order_relaxed);
	s->count++;
	if (old)
		item_free(old);
	/* Under the lock, after the item it may replace went: a body's
	 * stored flag changes only under it. */
	if (v->body)
		atomic_store_explicit(&v->body->stored, true, memory_order_release);
	pthread_mutex_unlock(&s->lock);
	return true;
}

void
hnd_store_drop(struct mhdgz *gz, const struct hnd_store_key *k)
{
	struct hnd_store *s = &gz->store;
	size_t n = key_nbytes(k);
	struct hnd_store_item *it;

	pthread_mutex_lock(&s->lock);
	it = find(s, k, n, key_hash(k, n));
	if (it) {
		unlink_item(s, it);
		item_free(it);
	}
	pthread_mutex_unlock(&s->lock);
}

bool
hnd_store_holds(const struct hnd_body *body)
{
	return atomic_load_explicit(&body->stored, memory_order_acquire);
}

/* ------------------------------------------------------------------------ */
/* A tracked response's names                                               */

uint64_t
hnd_store_entry_id(struct hnd_entry *e)
{
	if (!e->id) /* named at its first item: most responses never are */
		e->id = atomic_fetch_add_explicit(&e->gz->next_id, 1, memory_order_relaxed) + 1;
	return e->id;
}

/* e's body name in coding and mode: its file version when the store keeps
 * file versions, else the response (file false: the response alone). */
static void
entry_key(struct mhdgz *gz, const struct hnd_entry *e, enum gz_coding coding,
	  enum hnd_store_mode mode, bool file, struct hnd_store_key *k)
{
	if (!(file && e->kind == HND_FD && gz->store.files &&
	      hnd_store_key_file(k, e->fd, e->offset, e->body_len)))
		hnd_store_key_response(k, e->id);
	hnd_store_key_coding(k, coding, gz->coder[coding].level, hnd_padded(gz, e, coding), mode,
			     NULL);
}

/* The bit of e->stored a response-named key sets: one per coding, mode and
 * padding (3 x 3 x 2 < 32). */
static uint32_t
stored_bit(const struct hnd_store_key *k)
{
	return 1u << ((k->coding * 3u + k->mode) * 2u + k->padded);
}

/* Look k up unless it is e's response name and nothing was put under it
 * (a response queued once looks nothing up). */
static bool
entry_get(struct mhdgz *gz, const struct hnd_entry *e, const struct hnd_store_key *k,
	  struct hnd_store_val *v)
{
	if (k->name == HND_NAME_RESPONSE && !(e->stored & stored_bit(k)))
		return false;
	return hnd_store_get(gz, k, v);
}

/* Can e's bytes have a name the store was told anything under: a file
 * version, an item under its id, an ETag? (No key is built for a response
 * queued for the first time without ETag, most of them.) */
static bool
entry_named(const struct mhdgz *gz, const struct hnd_entry *e, const char *etag)
{
	return etag || e->stored || (e->kind == HND_FD && gz->store.files);
}

bool
hnd_store_entry_get(struct mhdgz *gz, const struct hnd_entry *e, const char *etag,
		    enum gz_coding coding, enum hnd_store_mode mode, struct hnd_store_val *v)
{
	struct hnd_store_key k;

	if (!entry_named(gz, e, etag))
		return false;

	entry_key(gz, e, coding, mode, true, &k);
	if (entry_get(gz, e, &k, v))
		return true;
	if (!hnd_store_key_etag(&k, etag, e->body_len, e->resource))
		return false;
	hnd_store_key_coding(&k, coding, gz->coder[coding].level, hnd_padded(gz, e, coding), mode,
			     NULL);
	return hnd_store_get(gz, &k, v);
}

bool
hnd_coded_len_known(struct mhdgz *gz, const struct hnd_entry *e, const char *etag,
		    enum gz_coding coding, enum hnd_store_mode mode, uint64_t *len_ret)
{
	const struct hnd_coded *c = &e->coded[coding];
	struct hnd_store_val v;

	if (mode == HND_SM_WHOLE && hnd_coded_live(c)) {
		/* the entry's coded response, reused for its length */
		struct hnd_stripe *st = hnd_stripe_of(gz);

		hnd_count_in(st, HND_C_CACHE_HITS, 1);
		hnd_count_in(st, HND_C_STORE_HITS, 1);
		*len_ret = c->body->len;
		return true;
	}
	if (!hnd_store_entry_get(gz, e, etag, coding, mode, &v))
		return false;
	if (v.body)
		hnd_body_unref(v.body);
	*len_ret = v.len;
	return true;
}

bool
hnd_store_entry_version(struct mhdgz *gz, const struct hnd_entry *e, struct hnd_store_key *k)
{
	return e->kind == HND_FD && gz->store.files &&
	       hnd_store_key_file(k, e->fd, e->offset, e->body_len);
}

bool
hnd_store_entry_put(struct mhdgz *gz, struct hnd_entry *e, const char *etag, enum gz_coding coding,
		    enum hnd_store_mode mode, struct hnd_body *body, uint64_t len,
		    const struct hnd_store_key *version)
{
	struct hnd_store_val v = { .body = body, .len = len };
	struct hnd_store_key k;
	bool pending = false;

	if (body && !etag && !(e->kind == HND_FD && gz->store.files))
		return true; /* the response's alone, offered at its second use (below) */
	hnd_store_entry_id(e);
	if (version && version->name == HND_NAME_FILE) {
		/* The version the bytes were read at, not the file's now: a
		 * write after the read must not name the old bytes
		 * (hnd_store_put stats the fd again and refuses a change). */
		k = *version;
		hnd_store_key_coding(&k, coding, gz->coder[coding].level, hnd_padded(gz, e, coding),
				     mode, NULL);
		if (hnd_store_put(gz, &k, &v, e->fd))
			return false; /* the version names it for every response; no ETag needed */
	}
	/* not a file, not fresh, or changed since read: the response's alone */
	entry_key(gz, e, coding, mode, false, &k);
	/* A body named by the response alone is offered at its second use
	 * (hnd_store_entry_offer): a response queued once, most of them,
	 * takes no lock of the store. */
	if (body)
		pending = true;
	else if (hnd_store_put(gz, &k, &v, -1))
		e->stored |= stored_bit(&k);
	if (hnd_store_key_etag(&k, etag, e->body_len, e->resource)) {
		hnd_store_key_coding(&k, coding, gz->coder[coding].level, hnd_padded(gz, e, coding),
				     mode, NULL);
		v.body = NULL;
		hnd_store_put(gz, &k, &v, -1);
	}
	return pending;
}

bool
hnd_store_entry_offer(struct mhdgz *gz, struct hnd_entry *e, enum gz_coding coding,
		      struct hnd_body *body)
{
	struct hnd_store_val v = { .body = body, .len = body->len };
	struct hnd_store_key k;

	hnd_store_entry_id(e);
	entry_key(gz, e, coding, HND_SM_WHOLE, false, &k);
	if (!hnd_store_put(gz, &k, &v, -1))
		return false;
	e->stored |= stored_bit(&k);
	return true;
}

void
hnd_store_key_dcz(struct hnd_store_key *k, uint64_t id, const struct mhdgz_dictionary *dict)
{
	hnd_store_key_response(k, id);
	hnd_store_key_coding(k, GZ_CODING_ZSTD, 0, false, HND_SM_WHOLE, dict);
}

void
hnd_store_entry_drop(struct hnd_entry *e)
{
	struct hnd_store_key k;
	unsigned int coding, mode, padded;
	struct hnd_dcz *d;

	for (d = e->dcz; d; d = d->next) {
		if (!d->stored)
			continue;
		hnd_store_key_dcz(&k, e->id, d->dict);
		hnd_store_drop(e->gz, &k);
		d->stored = false;
	}

	for (coding = 0; e->stored && coding < GZ_CODING_COUNT; coding++)
		for (mode = HND_SM_WHOLE; mode <= HND_SM_STREAM_LL; mode++)
			for (padded = 0; padded < 2; padded++) {
				hnd_store_key_response(&k, e->id);
				hnd_store_key_coding(&k, coding, e->gz->coder[coding].level, padded,
						     mode, NULL);
				if (!(e->stored & stored_bit(&k)))
					continue;
				e->stored &= ~stored_bit(&k);
				hnd_store_drop(e->gz, &k);
			}
}
