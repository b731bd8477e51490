/* hnd_entry.h: tracked responses: what the library keeps of a response it created, and the table that finds it. */
#ifndef HND_ENTRY_H
#define HND_ENTRY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "gz_backend.h"
#include "hnd_plan.h"
#include "hnd_public.h"
#include "hnd_store.h"

struct mhdgz;
struct hnd_body;
struct hnd_stream;

/* Shards of the response table, each with its own lock: a thread pool
 * creating and freeing a response per request takes the table's lock three
 * times per response (insert, lookup, remove), and one lock for all would
 * bounce between the cores. A power of two. */
#ifndef HND_TABLE_SHARDS
#define HND_TABLE_SHARDS 16
#endif

struct hnd_table_shard {
	pthread_mutex_t lock;
	struct hnd_entry **bucket;
	size_t nbuckets; /* power of two */
	size_t count;
} __attribute__((aligned(64)));

struct hnd_table {
	/* Maps a struct MHD_Response * to its entry: the shard by the top
	 * bits of the pointer's hash, the bucket by lower ones. */
	struct hnd_table_shard shard[HND_TABLE_SHARDS];
	bool ready; /* hnd_table_init succeeded */
};

/* hnd_table.c. The table does not hold references: an entry leaves it in
 * its response's free callback, before its address can be reused. */

int hnd_table_init(struct hnd_table *t);
void hnd_table_fini(struct hnd_table *t);
void hnd_table_insert(struct hnd_table *t, struct hnd_entry *e);
void hnd_table_remove(struct hnd_table *t, struct hnd_entry *e);
/* The entry of a response created by this handle, or NULL. */
struct hnd_entry *hnd_table_lookup(struct hnd_table *t, const struct MHD_Response *r);
/* The entry of a response created through gz, its lock taken (the public
 * per-response setters); NULL when gz or r is NULL or r is not gz's. */
struct hnd_entry *hnd_entry_locked(struct mhdgz *gz, const struct MHD_Response *r);
/* Entries in the table now (tests). */
size_t hnd_table_count(struct hnd_table *t);

/* The responses an entry built per content coding (the gzip ones for
 * gzip). The bytes and lengths are the store's (hnd_store.c): rep is
 * built over a body the store holds and is reused while it does. */
struct hnd_coded {
	struct MHD_Response *rep;     /* the coded representation: body, headers */
	struct hnd_body *body;        /* its body (rep holds the reference) */
	bool pending;                 /* body not offered to the store yet (first use) */
	struct MHD_Response *rep_304; /* the 304 response: no body, the 200's length and ETag */
};

/* Is k's coded response to be used: its first use, or the store still
 * holds its body? */
static inline bool
hnd_coded_live(const struct hnd_coded *k)
{
	return k->rep && (k->pending || hnd_store_holds(k->body));
}

/* The dcz response an entry built per dictionary (hnd_dcz.c): its bytes
 * are the store's (the entry's id with the dictionary), and rep is reused
 * while the store holds them. */
struct hnd_dcz {
	struct hnd_dcz *next;
	const struct mhdgz_dictionary *dict;
	struct MHD_Response *rep; /* our reference */
	struct hnd_body *body;    /* its body (rep holds the reference) */
	size_t plain_len;         /* plain zstd of the same body, bytes (dict_bytes_saved) */
	bool stored;              /* the store has an item under the entry and dict */
};

/*
 * What the library remembers of a response it created: the body (which
 * libmicrohttpd cannot give back) and its variants. The user's response is
 * created with our free callback; when its last reference goes, the entry
 * leaves the table (the pointer may be reused by a new response) and drops
 * its own reference. Streams made from a callback response hold a
 * reference too, because they call the user's reader; the user's free
 * callback runs when the last reference goes.
 *
 * Variants are responses of our own with their own body (or their own
 * duplicate of the file descriptor); our reference to a cached variant is
 * dropped with the entry, and libmicrohttpd keeps its own while a
 * connection still sends it.
 */
struct hnd_entry {
	struct hnd_entry *next; /* table chain */
	struct mhdgz *gz;
	uint64_t id; /* its name in the store (hnd_store_entry_id); 0: none yet */
	struct MHD_Response *response;
	enum hnd_kind kind;
	atomic_uint refs;
	uint64_t body_len; /* bytes; MHD_SIZE_UNKNOWN for an unknown-size stream */

	/* HND_BUFFER */
	const uint8_t *body;
	void *owned_libc; /* MHD_RESPMEM_MUST_FREE buffer: free() */
	void *owned_gz;   /* MHD_RESPMEM_MUST_COPY copy, gathered iovec: gz_free() */
	MHD_ContentReaderFreeCallback body_free; /* the application's, or NULL */
	void *body_free_cls;

	/* HND_CALLBACK */
	MHD_ContentReaderCallback crc;
	void *crc_cls;
	MHD_ContentReaderFreeCallback crfc;
	size_t block_size;
	/* HND_FD, HND_PIPE */
	int fd;
	uint64_t offset;

	pthread_mutex_t read_lock; /* HND_CALLBACK, HND_PIPE only: one read at a time */
	/* The response's own Transfer-Encoding: chunked, as of its last queue
	 * (read by streams after the application may have destroyed it). */
	atomic_bool te_chunked;
	pthread_mutex_t lock; /* guards everything below */
	/* hnd_store_resource of the path of its last queue with a strong ETag
	 * (0: none): lengths remembered by ETag are that resource's. */
	uint64_t resource;
	bool opt_out;
	bool low_latency;
	int8_t length_hiding;             /* 0: the handle's default; 1 on; -1 off */
	bool queued;                      /* queued at least once: its flags are fixed */
	bool response_queued;             /* queued itself: its fields are now read-only */
	enum MHD_ResponseFlags mhd_flags; /* mhdgz_response_set_options: every variant gets them */
	bool vary_done;                   /* Vary: Accept-Encoding merged into the response */
	int sniffed;                      /* HND_FD: 0 not yet, 1 text-like, -1 binary */
	uint32_t stored; /* the store has items under its id (hnd_store.c), dropped with it */
	struct hnd_coded coded[GZ_CODING_COUNT]; /* per content coding */
	struct MHD_Response *rep_304_identity;   /* the 304 of an unknown-size identity 200 */
	struct MHD_Response *sendfile_rep;       /* HND_FD: the sendfile identity response */
	struct hnd_dcz *dcz; /* dcz representations, one per dictionary used (hnd_dict.c) */
	/* HND_CALLBACK of unknown size whose first queue was coded: the
	 * response itself carries that coded stream (hnd_stream_in_place), so
	 * its reader may use it as long as libmicrohttpd keeps it, as without
	 * mhdgz. fields: its header fields and trailers as the application
	 * made them, which every later queue reads (hnd_identity_fields). */
	struct hnd_stream *in_place;
	void (*in_place_free)(void *stream); /* frees in_place: the stream module's */
	struct MHD_Response *fields;
};

/* The header fields of e's identity representation: its response's, or,
 * once the response carries a coded stream in place, the copy made then. */
static inline struct MHD_Response *
hnd_identity_fields(const struct hnd_entry *e)
{
	return e->fields ? e->fields : e->response;
}

/* hnd_table.c: a new entry holding one reference (its response's), or
 * NULL; free it with hnd_entry_free while it has no response yet. */
struct hnd_entry *hnd_entry_new(struct mhdgz *gz, enum hnd_kind kind);
void hnd_entry_free(struct hnd_entry *e);
/* libmicrohttpd's free callback of a tracked response (cls: the entry). */
void hnd_entry_release(void *cls);
/* Drop a reference; the last one frees the entry and runs the user's free
 * callback (or closes the file). */
void hnd_entry_unref(struct hnd_entry *e);
/* The application's reader of e (HND_CALLBACK) at pos, one call at a time
 * (e->read_lock): what it returned, unchanged. */
ssize_t hnd_callback_read(struct hnd_entry *e, uint64_t pos, char *buf, size_t max);
/* Read e's source at pos into buf, at most max bytes: the user's reader
 * (under e->read_lock), the pipe, or the file through fd (a stream's own
 * duplicate, or e->fd), never past body_len. Returns bytes, 0 (no data
 * now), or MHD_CONTENT_READER_END_OF_STREAM / _WITH_ERROR (a source that
 * ends before its announced size is an error). */
ssize_t hnd_source_read(struct hnd_entry *e, int fd, uint64_t pos, char *buf, size_t max);


#endif /* HND_ENTRY_H */
