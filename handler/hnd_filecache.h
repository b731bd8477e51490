/* hnd_filecache.h: coded representations of file responses, by file version. */
#ifndef HND_FILECACHE_H
#define HND_FILECACHE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gz_backend.h"

struct mhdgz;
struct hnd_entry;
struct hnd_body;

/* hnd_filecache.c: the compressed representations of file responses,
 * shared by every response of the handle on the same file version. */
struct hnd_fc_key {
	uint64_t dev, ino, size;   /* fstat of the descriptor */
	int64_t mtime_s, mtime_ns; /* st_mtim */
	int64_t ctime_s, ctime_ns; /* st_ctim: changes with every write, */
	uint64_t offset, len;      /* and cannot be set back by utimensat */
	uint32_t coding, padded;   /* the coding, length hiding asked for */
	int32_t level;
};

struct hnd_fc_item;

struct hnd_filecache {
	pthread_mutex_t lock;
	size_t budget;      /* bytes; 0: off */
	atomic_size_t held; /* bytes charged now (bodies and item overhead); under lock */
	size_t count;       /* items */
	struct hnd_fc_item **bucket;
	size_t nbuckets;                         /* power of two */
	struct hnd_fc_item *lru_head, *lru_tail; /* most recent first */
	/* A file changed less than this many nanoseconds before it is read
	 * is not remembered: a rewrite within one tick of the file system's
	 * clock would keep its timestamps. Tests set 0. */
	int64_t racy_ns;
	bool ready;
};

int hnd_fc_init(struct hnd_filecache *fc, size_t budget);
void hnd_fc_fini(struct hnd_filecache *fc);
/* The key of e's bytes in coding (fstat of e->fd); false when the
 * descriptor cannot be stat'ed or is not a regular file. */
bool hnd_fc_key_of(const struct mhdgz *gz, const struct hnd_entry *e, enum gz_coding coding,
		   bool padded, struct hnd_fc_key *key);
/* Look key up: true on a hit, with *body_ret a new reference to the coded
 * bytes (NULL: the coding was found not smaller) and *padded_ret whether
 * they carry padding. Counted as a hit or a miss. Thread-safe. */
bool hnd_fc_get(struct mhdgz *gz, const struct hnd_fc_key *key, struct hnd_body **body_ret,
		bool *padded_ret);
/* Remember body (NULL: not smaller; a reference is taken) under key when
 * e's file still has that key (it did not change while it was read) and
 * is not racy; evicts least recently used items to stay in the budget.
 * Thread-safe. */
void hnd_fc_put(struct mhdgz *gz, const struct hnd_entry *e, const struct hnd_fc_key *key,
		struct hnd_body *body, bool padded);

#endif /* HND_FILECACHE_H */
