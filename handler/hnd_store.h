/* hnd_store.h: the one store of coded bytes and coded lengths (hnd_store.c). */
#ifndef HND_STORE_H
#define HND_STORE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gz_backend.h" /* enum gz_coding */

struct mhdgz;
struct mhdgz_dictionary;
struct hnd_body;
struct hnd_entry;

/* The store's budget when the options give none (limits.store_nbytes 0), in
 * bytes: coded bodies and lengths of tracked responses and strong ETags;
 * file versions are then not remembered (an application turns them on by
 * giving a budget). */
#ifndef HND_STORE_DEFAULT_NBYTES
#define HND_STORE_DEFAULT_NBYTES (32u * 1024u * 1024u)
#endif

/* Bytes charged per item beyond its body: the item and its bucket slot. */
#define HND_STORE_ITEM_OVERHEAD 128

/* The longest ETag that names bytes, in bytes (NUL excluded). */
#define HND_STORE_ETAG_MAX 127

/* A changed file is remembered only this long after its last change, in
 * nanoseconds: well above any file system's timestamp granularity (ext4 and
 * tmpfs stamp with the kernel's coarse clock, 1-10 ms; FAT has 2 s). */
#ifndef HND_STORE_RACY_NS
#define HND_STORE_RACY_NS 2000000000LL
#endif

/*
 * A coded body, shared by reference: the store's item, the responses built
 * over it and every connection sending it hold one each; the last drop
 * frees it, so an eviction never frees bytes still being sent.
 */
struct hnd_body {
	atomic_uint refs;
	atomic_bool stored; /* an item of the store holds it (hnd_store_holds) */
	size_t len;         /* bytes at data */
	uint8_t data[];
};

/* A body holding a copy of data[0..len) (data NULL: len bytes for the caller
 * to fill), one reference; NULL without memory. */
struct hnd_body *hnd_body_new(const void *data, size_t len);
void hnd_body_unref(void *cls);

/* What names the identity bytes. */
enum hnd_name {
	HND_NAME_RESPONSE = 1, /* a tracked response (its entry's id) */
	HND_NAME_FILE,         /* a file version (fstat of the descriptor) and the range */
	HND_NAME_ETAG          /* a strong ETag and the identity length */
};

/* How the bytes are coded: whole, or as a stream (HND_FD_BLOCK input
 * blocks), flushed per block (low latency) or not. */
enum hnd_store_mode { HND_SM_WHOLE, HND_SM_STREAM, HND_SM_STREAM_LL };

/*
 * A key: the name of the identity bytes, then how they are coded. Built
 * by one hnd_store_key_* name constructor (which zeroes it: keys are
 * hashed and compared as bytes), then hnd_store_key_coding.
 */
struct hnd_store_key {
	uint8_t name;                        /* enum hnd_name */
	uint8_t coding;                      /* enum gz_coding */
	uint8_t mode;                        /* enum hnd_store_mode */
	uint8_t padded;                      /* length hiding (the handle's HMAC key is fixed) */
	int32_t level;                       /* the coding's level */
	const struct mhdgz_dictionary *dict; /* coded against it; NULL: none */
	union {
		uint64_t response; /* HND_NAME_RESPONSE: the entry's id */
		struct {
			uint64_t dev, ino, size;   /* fstat of the descriptor */
			int64_t mtime_s, mtime_ns; /* st_mtim */
			int64_t ctime_s, ctime_ns; /* st_ctim: changes with every write, */
			uint64_t offset, len;      /* and cannot be set back by utimensat */
		} file;
		struct {
			uint64_t body_len; /* identity bytes */
			uint64_t resource; /* hnd_store_resource of its path; 0: none */
			uint32_t len;      /* bytes at tag */
			char tag[HND_STORE_ETAG_MAX + 1];
		} etag;
	} u;
};

/* What the store holds of a key: the coded bytes and/or their length. */
struct hnd_store_val {
	struct hnd_body *body; /* a reference (get: the caller's); NULL: a length only */
	uint64_t len;          /* coded bytes; HND_STORE_NOT_SMALLER */
};

/* The length of a coding found not smaller than the identity bytes. */
#define HND_STORE_NOT_SMALLER UINT64_MAX

struct hnd_store_item;

struct hnd_store {
	pthread_mutex_t lock;
	size_t budget;      /* bytes */
	atomic_size_t held; /* bytes charged now (bodies and item overhead); written under lock */
	size_t count;       /* items */
	struct hnd_store_item **bucket;
	size_t nbuckets;                            /* power of two */
	struct hnd_store_item *lru_head, *lru_tail; /* most recent first */
	/* The freshness rule (hnd_store_fresh): a file changed less than this
	 * many nanoseconds before it is read is not remembered. Tests set 0. */
	int64_t racy_ns;
	bool files; /* file versions are remembered (a budget was given) */
	bool ready;
};

/* budget bytes, 0 for HND_STORE_DEFAULT_NBYTES without file versions.
 * 0 or MHDGZ_ENOMEM. */
int hnd_store_init(struct hnd_store *s, size_t budget);
void hnd_store_fini(struct hnd_store *s);

/* The resource a strong ETag belongs to: an entity tag tells apart the
 * representations of one resource only (RFC 9110 section 8.8.3), so a
 * length remembered under it is the path's the response was queued for
 * (FNV-1a 64, never 0); 0 without a path: the handle's (then ETags must
 * differ across resources). Pinned by test_etag_per_resource. */
static inline uint64_t
hnd_store_resource(const char *path)
{
	uint64_t h = 14695981039346656037ull;

	if (!path)
		return 0;
	for (; *path; path++)
		h = (h ^ (uint8_t)*path) * 1099511628211ull;
	return h | 1;
}

/* Name constructors (each zeroes k first). The response's id; a file
 * version (false when fd cannot be stat'ed or is not a regular file); a
 * strong ETag that fits (false for a weak, malformed, absent or too long
 * one). */
void hnd_store_key_response(struct hnd_store_key *k, uint64_t id);
bool hnd_store_key_file(struct hnd_store_key *k, int fd, uint64_t offset, uint64_t len);
bool hnd_store_key_etag(struct hnd_store_key *k, const char *etag, uint64_t body_len,
			uint64_t resource);
/* The coding part of a named key. */
void hnd_store_key_coding(struct hnd_store_key *k, unsigned int coding, int level, bool padded,
			  enum hnd_store_mode mode, const struct mhdgz_dictionary *dict);
/* Do two keys name the same bytes coded the same way? */
bool hnd_store_key_eq(const struct hnd_store_key *a, const struct hnd_store_key *b);

/* Look k up: true on a hit with *v (a new body reference for the caller,
 * or NULL), the item made most recent. Counted as a hit or a miss.
 * Thread-safe. */
bool hnd_store_get(struct mhdgz *gz, const struct hnd_store_key *k, struct hnd_store_val *v);
/* Remember v under k (a body reference is taken; an item of k already
 * there is replaced), evicting least recently used items to stay within
 * the budget: true. false, and nothing remembered, when the item is over
 * the budget, without memory, for a file version when file versions are
 * off, when the file is not fresh (hnd_store_fresh), or when fd >= 0 no
 * longer has k's version (changed while it was read). Thread-safe. */
bool hnd_store_put(struct mhdgz *gz, const struct hnd_store_key *k, const struct hnd_store_val *v,
		   int fd);
/* Forget k (a response's items when it is freed). Thread-safe. */
void hnd_store_drop(struct mhdgz *gz, const struct hnd_store_key *k);
/* The freshness rule: may a file version be remembered now? Its change
 * and modification times are at least racy_ns old (a clock that cannot be
 * read: no). */
bool hnd_store_fresh(const struct hnd_store *s, const struct hnd_store_key *k);
/* Bytes held now (mhdgz_stats store_nbytes; read by the stats without a
 * call into the store, which counts into them). Thread-safe. */
static inline uint64_t
hnd_store_held(const struct hnd_store *s)
{
	return s->ready ? atomic_load_explicit(&s->held, memory_order_relaxed) : 0;
}
/* Does the store still hold body (it was not evicted or dropped)? A
 * response built over a body it got from the store is reused while it
 * does. Thread-safe. */
bool hnd_store_holds(const struct hnd_body *body);

/* ------------------------------------------------------------------------ */
/* A tracked response's names (e's bytes: its file version when file
 * versions are on, else the response; its strong ETag for lengths)       */

/* The coded length of e's bytes in coding and mode (whole or a stream),
 * known without coding them: from the entry's kept response, or the store
 * under e's name (its file version or the response) or its strong etag
 * (may be NULL). true and *len_ret (HND_STORE_NOT_SMALLER: not smaller),
 * or false. e->lock held. */
bool hnd_coded_len_known(struct mhdgz *gz, const struct hnd_entry *e, const char *etag,
			 enum gz_coding coding, enum hnd_store_mode mode, uint64_t *len_ret);
/* What the store holds of e's bytes in coding and mode, under e's name
 * (its file version or the response), then its strong etag (may be
 * NULL): true and *v (v->body a reference for the caller, or NULL), or
 * false. e->lock held. */
bool hnd_store_entry_get(struct mhdgz *gz, const struct hnd_entry *e, const char *etag,
			 enum gz_coding coding, enum hnd_store_mode mode, struct hnd_store_val *v);
/* The file version of e's bytes now, taken before they are read for
 * hnd_store_entry_put: true and *k (its coding part unset), or false (not
 * a file, file versions off, fstat failed). */
bool hnd_store_entry_version(struct mhdgz *gz, const struct hnd_entry *e, struct hnd_store_key *k);
/* Remember e's coded bytes (body, may be NULL) or length len
 * (HND_STORE_NOT_SMALLER: not smaller) in coding and mode under the file
 * version they were read at (version, from hnd_store_entry_version before
 * the read; NULL: none) if the file still has it, else under the response
 * and, unless stored under a file version, the length under its strong
 * etag (may be NULL). e->lock held. */
bool hnd_store_entry_put(struct mhdgz *gz, struct hnd_entry *e, const char *etag,
			 enum gz_coding coding, enum hnd_store_mode mode, struct hnd_body *body,
			 uint64_t len, const struct hnd_store_key *version);
/* The true return of hnd_store_entry_put: body is named by the response
 * alone and is not in the store yet; the entry offers it at its second use
 * (hnd_store_entry_offer: true when the store took it; false: over the
 * budget or without memory, then it is not kept). e->lock held. */
bool hnd_store_entry_offer(struct mhdgz *gz, struct hnd_entry *e, enum gz_coding coding,
			   struct hnd_body *body);
/* e's id, its name in the store, given at its first item (0 before).
 * e->lock held. */
uint64_t hnd_store_entry_id(struct hnd_entry *e);
/* The key of a tracked response's bytes (id) coded dcz against dict. */
void hnd_store_key_dcz(struct hnd_store_key *k, uint64_t id, const struct mhdgz_dictionary *dict);
/* Forget what the store holds under e's id, its dcz bodies included (its
 * free). */
void hnd_store_entry_drop(struct hnd_entry *e);
#endif /* HND_STORE_H */
