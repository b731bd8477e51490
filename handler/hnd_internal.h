/* hnd_internal.h: the handler's internal types: handle, response table, negotiation, decision. */
#ifndef HND_INTERNAL_H
#define HND_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "config.h"

#include <nettle/hmac.h>

/* Exported: the public functions (the rest is hidden by
 * -fvisibility=hidden and the linker version script). */
#ifdef MHDGZ_HAVE_VISIBILITY
#define MHDGZ_API __attribute__((visibility("default")))
#endif
#include "mhdgz.h"

#include <nettle/base64.h>
#include <nettle/sha2.h>

#include "gz_alloc.h"
#include "gz_backend.h"
#include "gz_error.h"
#include "gz_pool.h"

/* Default idle cap of the compressor pool: enough for a thread pool of 16
 * workers to never miss, while bounding idle memory (zlib level 6 state is
 * ~268 KiB, libdeflate's up to ~1 MiB at level 10-12). */
#ifndef HND_POOL_IDLE_CAP
#define HND_POOL_IDLE_CAP 16
#endif

/* Bytes of an untyped body that the content sniff inspects (WHATWG MIME
 * sniffing looks at 512 as well). */
#ifndef HND_SNIFF_NBYTES
#define HND_SNIFF_NBYTES 512
#endif

/* Most Vary field lines merged into one; more are left as they are and
 * Accept-Encoding is added as a field of its own. */
#ifndef HND_VARY_MAX
#define HND_VARY_MAX 8
#endif

/* Input buffer of a file stream in bytes: large enough that pread() and the
 * compressor's per-call overhead vanish, small enough to keep a thousand
 * concurrent streams under 32 MiB of input buffers. */
#ifndef HND_FD_BLOCK
#define HND_FD_BLOCK (32 * 1024)
#endif

/* HEAD of a gzip stream of known source size: up to this many source bytes
 * are compressed to learn the Content-Length GET would send; above it the
 * HEAD response has no length (and, with libmicrohttpd 0.9.75, closes the
 * connection), so a HEAD never costs more than this much compression. */
#ifndef HND_HEAD_LENGTH_MAX
#define HND_HEAD_LENGTH_MAX (16 * 1024 * 1024)
#endif

/* The opaque-tag suffix of MHDGZ_ETAG_SUFFIX: "x" becomes "x-gzip"; the
 * other codings' variants get "-" and their token ("x-zstd", "x-br"). */
#define HND_GZIP_SUFFIX "-gzip"

/* The cache line size the layout of struct mhdgz assumes (x86-64, most
 * arm64 cores); mhdgz_new allocates the handle aligned to it. */
#define HND_CACHELINE 64
#define HND_LINE_ALIGNED __attribute__((aligned(HND_CACHELINE)))

/* Counters are striped over this many cache lines so threads of a pool do
 * not bounce one line between cores; reads sum the stripes. */
#ifndef HND_STAT_STRIPES
#define HND_STAT_STRIPES 8
#endif

/* ------------------------------------------------------------------------ */
/* Statistics                                                               */

enum hnd_counter {
	HND_C_RESPONSES,
	HND_C_COMPRESSED,
	HND_C_BYTES_IN,
	HND_C_BYTES_OUT,
	HND_C_COMPRESSIONS,
	HND_C_FAILURES,
	HND_C_CACHE_HITS,
	HND_C_DIGESTS_DROPPED,
	HND_C_PADDED,
	HND_C_DICT_HITS,  /* dcz responses queued (hnd_dict.c) */
	HND_C_DICT_SAVED, /* their bytes under plain zstd's, summed */
	HND_C_REASON0,    /* + enum mhdgz_reason */
	/* + enum gz_coding: coded variants queued per coding */
	HND_C_CODED0 = HND_C_REASON0 + MHDGZ_REASON_COUNT,
	/* Request bodies (hnd_upload.c). */
	HND_C_UPLOADS = HND_C_CODED0 + GZ_CODING_COUNT,
	HND_C_UPLOADS_GZIP,
	HND_C_UPLOAD_BYTES_IN,
	HND_C_UPLOAD_BYTES_OUT,
	HND_C_UPLOAD_REFUSED0, /* + enum mhdgz_upload_refusal */
	/* The file cache (hnd_filecache.c). */
	HND_C_FC_HITS = HND_C_UPLOAD_REFUSED0 + MHDGZ_UPLOAD_REFUSAL_COUNT,
	HND_C_FC_MISSES,
	HND_C_FC_EVICTIONS,
	/* + enum gz_coding: bytes_in and bytes_out of the coded responses */
	HND_C_CODED_IN0,
	HND_C_CODED_OUT0 = HND_C_CODED_IN0 + GZ_CODING_COUNT,
	HND_C_COUNT = HND_C_CODED_OUT0 + GZ_CODING_COUNT
};

struct hnd_stripe {
	_Atomic uint64_t c[HND_C_COUNT];
} __attribute__((aligned(64)));

void hnd_count(struct mhdgz *gz, enum hnd_counter which, uint64_t n);
/* The calling thread's stripe of gz's counters, for several counts in a
 * row (hnd_count finds it in thread-local storage each time, which in a
 * shared library is a call). */
struct hnd_stripe *hnd_stripe_of(struct mhdgz *gz);
static inline void
hnd_count_in(struct hnd_stripe *st, enum hnd_counter which, uint64_t n)
{
	if (n) /* a zero add would still take the cache line */
		atomic_fetch_add_explicit(&st->c[which], n, memory_order_relaxed);
}

/* ------------------------------------------------------------------------ */
/* Media type lists                                                          */

/* One compiled pattern: lowercase; kind says how to match. */
enum hnd_pat_kind {
	HND_PAT_EXACT,  /* "type/subtype" */
	HND_PAT_TYPE,   /* type, slash, asterisk: any subtype */
	HND_PAT_SUFFIX, /* asterisk/asterisk+suffix (RFC 6838 4.2.8) */
	HND_PAT_ANY     /* asterisk/asterisk: everything */
};

struct hnd_pattern {
	enum hnd_pat_kind kind;
	char *text; /* EXACT: "type/subtype"; TYPE: "type"; SUFFIX: "+suffix" */
	size_t len;
	uint64_t hash; /* of text, ignoring ASCII case (hnd_negotiate.c) */
};

/* Lexical helpers shared by hnd_negotiate.c and hnd_mtype.c: ASCII
 * lowercase, and tchar (RFC 9110 section 5.6.2). */
static inline char
hnd_lower(char c)
{
	return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

static inline bool
hnd_is_tchar(char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return true;
	return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

struct hnd_typelist {
	struct hnd_pattern *pat;
	size_t count;
	/* The EXACT patterns by a hash of their text (open addressing, linear
	 * probing): an index into pat plus 1, 0 for an empty slot; nslots is a
	 * power of two above twice their number (0: none). A media type then
	 * costs one hash and a probe or two instead of a compare per pattern;
	 * the others (TYPE, SUFFIX, ANY), a few, are scanned from wild. */
	uint32_t *slot;
	size_t nslots;
	uint32_t *wild;
	size_t nwild;
};

int hnd_typelist_init(struct hnd_typelist *tl, const char *const *patterns);
void hnd_typelist_fini(struct hnd_typelist *tl);
/* Does the media type (type/subtype, no parameters) at mt[0..len) match? */
bool hnd_typelist_match(const struct hnd_typelist *tl, const char *mt, size_t len);

/* Longest media type lowercased on the stack for the lookup, in bytes; a
 * longer one is matched by a case-insensitive scan of every pattern. */
#ifndef HND_TYPE_LOWER_MAX
#define HND_TYPE_LOWER_MAX 128
#endif

/* A media type prepared once for the lookups in several lists (the skip
 * list, then the compress list): lowercased, hashed, its slash found. */
struct hnd_mtype {
	const char *mt; /* as given */
	size_t len;
	const char *slash; /* in lo when lowered, else in mt; NULL: none */
	bool lowered;      /* len <= HND_TYPE_LOWER_MAX: lo and hash are set */
	uint64_t hash;
	char lo[HND_TYPE_LOWER_MAX];
};
void hnd_mtype_prep(struct hnd_mtype *m, const char *mt, size_t len);
/* hnd_typelist_match of a prepared type. */
bool hnd_typelist_match_prep(const struct hnd_typelist *tl, const struct hnd_mtype *m);

extern const char *const hnd_default_compress_types[];
extern const char *const hnd_default_skip_types[];

/* ------------------------------------------------------------------------ */
/* The handle                                                               */

struct hnd_entry;
struct hnd_dcz;
struct hnd_accept;
struct hnd_facts;
struct hnd_body;

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
/* hnd_api.c: take or drop a reference to the handle; the last drop frees it. */
void hnd_gz_ref(struct mhdgz *gz);
void hnd_gz_unref(struct mhdgz *gz);

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

/* hnd_memo.c: gzip lengths by strong ETag (see there). Slots of the
 * table, and the longest ETag remembered, in bytes. */
#ifndef HND_MEMO_SLOTS
#define HND_MEMO_SLOTS 64
#endif
#define HND_MEMO_ETAG_MAX 128

/* Which gzip bytes a length is of: compressed whole, or a stream (of a
 * file: HND_FD_BLOCK input blocks), flushed per block or not. */
enum hnd_memo_mode { HND_MEMO_WHOLE, HND_MEMO_STREAM, HND_MEMO_STREAM_LL };

/* The memo's mode of a coding's bytes, padded by length hiding or not:
 * the modes above for unpadded gzip, shifted per other coding, and apart
 * again when padded (length hiding is per response, so one ETag may name a
 * padded and an unpadded length), so that each is remembered apart. */
#define HND_MEMO_MODE(mode, coding, padded)                                                        \
	((enum hnd_memo_mode)((unsigned int)(mode) + 4u * (unsigned int)(coding) +                 \
			      ((padded) ? 16u : 0u)))

/* What the gzip length is when gzip was found not smaller (identity 200). */
#define HND_MEMO_NOT_SMALLER UINT64_MAX

struct hnd_memo_slot {
	uint64_t body_len, gzip_len;
	uint8_t mode, used;
	char etag[HND_MEMO_ETAG_MAX];
};

struct hnd_memo {
	pthread_mutex_t lock;
	struct hnd_memo_slot slot[HND_MEMO_SLOTS];
};

int hnd_memo_init(struct hnd_memo *m);
void hnd_memo_fini(struct hnd_memo *m);
/* Remember, or look up, the gzip length of the representation named by a
 * strong etag with body_len identity bytes; a weak, absent or too long ETag
 * is never remembered. Thread-safe. */
void hnd_memo_put(struct hnd_memo *m, const char *etag, uint64_t body_len, enum hnd_memo_mode mode,
		  uint64_t gzip_len);
bool hnd_memo_get(struct hnd_memo *m, const char *etag, uint64_t body_len, enum hnd_memo_mode mode,
		  uint64_t *gzip_len_ret);

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
/* Bytes held now. Thread-safe. */
uint64_t hnd_fc_held(const struct mhdgz *gz);

/* A content coding the handle offers: its backend, level and pools. For
 * gzip, the pools are the handle's own pool and stream_pool (not owned
 * here); for the others, created by mhdgz_new and owned here. */
struct hnd_coder {
	const struct gz_backend *be; /* NULL: not offered */
	int level;
	struct gz_pool *pool;        /* whole buffers */
	struct gz_pool *stream_pool; /* streams */
};

/*
 * Layout: what every response writes, from whichever thread serves it, sits
 * on cache lines of its own, apart from the settings every response reads:
 * refs (each entry's creation and release), table (its lock and count, at
 * each creation, lookup and release), memo and filecache (their locks, for
 * responses with a strong ETag or from a file), stats (striped). Sharing a
 * line, each such write would evict the settings from the other CPUs'
 * caches (false sharing): with two threads, misses on every response
 * (bench/README.md, "Parallel rows"). The handle itself is allocated
 * HND_CACHELINE-aligned (mhdgz_new) so the lines are where the layout says.
 */
struct mhdgz {
	/* 1 for the application until mhdgz_free, plus 1 per live entry: the
	 * handle outlives every response made through it. */
	atomic_uint refs;
	void *alloc; /* the block gz_calloc returned, the handle aligned within it */
	const struct gz_backend *be HND_LINE_ALIGNED;
	int level;
	size_t min_nbytes;
	bool content_digest; /* MHDGZ_F_CONTENT_DIGEST */
	enum mhdgz_etag_policy etag_policy;
	struct hnd_typelist compress_types;
	struct hnd_typelist skip_types;
	struct gz_pool *pool;        /* whole-buffer (one-shot) compressors */
	struct gz_pool *stream_pool; /* streaming compressors (stream_window_bits) */
	struct gz_pool *event_pool;  /* low-latency streams' (event_window_bits) */
	struct hnd_table table HND_LINE_ALIGNED;
	struct hnd_memo memo HND_LINE_ALIGNED;
	bool memo_ready;
	/* off unless options file_cache_nbytes */
	struct hnd_filecache filecache HND_LINE_ALIGNED;
	/* BREACH length hiding (hnd_pad.c): on for every response unless a
	 * response says otherwise; padding of 1..pad_max bytes; the HMAC key. */
	bool pad_default HND_LINE_ALIGNED;
	size_t pad_max;
	size_t pad_key_nbytes;
	uint8_t pad_key[MHDGZ_LENGTH_HIDING_KEY_MAX];
	struct hnd_stripe stats[HND_STAT_STRIPES];
	/* The codings offered (struct mhdgz_options codings), in the server's
	 * order of preference; zstd (where built), then gzip, by default. */
	enum gz_coding order[GZ_CODING_COUNT];
	size_t norder;
	struct hnd_coder coder[GZ_CODING_COUNT];
	/* Compression dictionaries (hnd_dict.c): newest first, published
	 * with a release store; never removed before the handle is freed. */
	_Atomic(struct mhdgz_dictionary *) dicts;
};

/* The pool of coding's whole-buffer (stream false) or stream compressors. */
static inline struct gz_pool *
hnd_pool(const struct mhdgz *gz, enum gz_coding coding, bool stream)
{
	return stream ? gz->coder[coding].stream_pool : gz->coder[coding].pool;
}

/* The pool of a coding's streams: for gzip, low-latency streams have
 * their own (smaller windows: event_window_bits, event_mem_level). */
static inline struct gz_pool *
hnd_stream_pool(const struct mhdgz *gz, enum gz_coding coding, bool low_latency)
{
	if (coding == GZ_CODING_GZIP && low_latency)
		return gz->event_pool;
	return hnd_pool(gz, coding, true);
}

/* ------------------------------------------------------------------------ */
/* Tracked responses                                                        */

enum hnd_kind {
	HND_BUFFER,   /* mhdgz_response_from_buffer*, _from_iovec (gathered) */
	HND_CALLBACK, /* mhdgz_response_from_callback */
	HND_FD,       /* mhdgz_response_from_fd* */
	HND_PIPE      /* mhdgz_response_from_pipe: read once, unknown size */
};

/* What an entry keeps per content coding (the gzip ones for gzip). */
struct hnd_coded {
	bool not_smaller;             /* the coding was tried and did not shrink the body */
	bool padded;                  /* rep carries length-hiding padding (gzip) */
	struct MHD_Response *rep;     /* the coded representation: body, headers */
	size_t rep_len;               /* its body length in bytes */
	bool len_known;               /* uncached buffer: rep_len is the coded length */
	struct hnd_body *body;        /* its body (rep holds the reference) */
	struct MHD_Response *rep_304; /* the 304 response: no body sent, the coding's ETag */
	uint64_t stream_len[2]; /* HND_FD: coded stream length (bulk, low latency); 0: not known */
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
	bool opt_out;
	bool low_latency;
	bool uncached;        /* mhdgz_response_set_uncached: coded variants per queue */
	int8_t length_hiding; /* 0: the handle's default; 1 on; -1 off */
	bool response_queued; /* queued itself: its fields are now read-only */
	enum MHD_ResponseFlags mhd_flags; /* mhdgz_response_set_options: every variant gets them */
	bool vary_done;                   /* Vary: Accept-Encoding merged into the response */
	int sniffed;                      /* HND_FD: 0 not yet, 1 text-like, -1 binary */
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

/* ------------------------------------------------------------------------ */
/* Header rewriting (hnd_headers.c)                                         */

struct hnd_facts_ctx {
	struct hnd_facts *f;
	const char *vary[HND_VARY_MAX];     /* values of the Vary fields */
	const char *vary_key[HND_VARY_MAX]; /* their names, as the user spelled them */
};

/* Read the facts of r's header fields (and its Vary fields into c). */
void hnd_read_facts(struct MHD_Response *r, struct hnd_facts *f, struct hnd_facts_ctx *c);
/* Merge "Accept-Encoding" into r's own Vary. Only before r is first queued. */
int hnd_merge_vary(struct MHD_Response *r, const struct hnd_facts *f,
		   const struct hnd_facts_ctx *c);
/* Set f->vary_add/vary_replace: the Vary a variant carries (in buf of cap
 * bytes, or in *heap, which the caller gz_frees). */
void hnd_vary_for_variant(struct hnd_facts *f, const struct hnd_facts_ctx *c, char *buf, size_t cap,
			  char **heap);
/* What a response built in another's place stands for: the gzip
 * representation (header fields rewritten for the coding, Content-Encoding
 * set; "gzip" here and below means the coding in struct hnd_facts
 * coding, gzip, zstd or br), a 304 for it (the same fields without Content-Encoding), the
 * identity representation (the fields as they are), or a HEAD whose coding
 * is not known. */
enum hnd_rep { HND_REP_GZIP, HND_REP_GZIP_304, HND_REP_IDENTITY };
/* Copy the fields (and trailers) of r to v as rep says: for the gzip
 * kinds, Content-Encoding, Content-Length, Accept-Ranges and integrity
 * fields dropped (counted) and the ETag per policy; for identity, all but
 * Content-Length. The application's Transfer-Encoding: chunked goes to a v
 * with content (body), so that libmicrohttpd frames it as it frames the
 * application's own (chunked, with its trailer), never to one without (a
 * HEAD or 304: no framing). Returns 0 or MHDGZ_EMHD (v is left for the
 * caller to destroy). Content-Encoding: gzip itself is the caller's to
 * add. */
int hnd_copy_headers(struct mhdgz *gz, struct MHD_Response *r, struct MHD_Response *v,
		     const struct hnd_facts *f, enum hnd_rep rep, bool body);
/* A copy of r's fields and trailers on v as they are (Content-Length
 * aside: libmicrohttpd's). 0 or MHDGZ_EMHD. */
int hnd_copy_fields(struct MHD_Response *r, struct MHD_Response *v);
/* Rewrite r's own fields into those of the coded representation that
 * hnd_copy_headers gives a variant (orig: a copy of them as they were, see
 * hnd_copy_fields), Content-Encoding set, and, with digest, a Trailer
 * field announcing Content-Digest. Only before libmicrohttpd first has r.
 * 0, or MHDGZ_EMHD with r's fields as they were. */
int hnd_rewrite_coded(struct mhdgz *gz, struct MHD_Response *r, struct MHD_Response *orig,
		      const struct hnd_facts *f, bool digest);

/* ------------------------------------------------------------------------ */
/* Representations (hnd_variants.c, hnd_conditional.c, hnd_stream*.c)       */

/*
 * A compressed body, shared by reference: the gzip variant and the 304
 * variant (which libmicrohttpd sends without it, but whose size gives the
 * 304 the 200's Content-Length) point at the same bytes.
 */
struct hnd_body {
	atomic_uint refs;
	size_t len; /* bytes at data */
	uint8_t data[];
};


/* A body holding a copy of data[0..len) (data NULL: len bytes for the caller
 * to fill), one reference; NULL without memory. */
struct hnd_body *hnd_body_new(const void *data, size_t len);
void hnd_body_unref(void *cls);
/* A buffer response of body b (one reference passes in; NULL for none) with
 * r's fields as rep says. 0 or MHDGZ_E*. */
int hnd_build_response(struct mhdgz *gz, struct MHD_Response *r, const struct hnd_facts *f,
		       struct hnd_body *b, enum hnd_rep rep, struct MHD_Response **ret);
/*
 * A response of header fields only, for HEAD or a 304: r's fields as rep
 * says, no content, the length of the 200 it stands for: size bytes (its
 * Content-Length), or MHD_SIZE_UNKNOWN for a body whose length is known
 * only once it is generated, then no length. With libmicrohttpd 1.0
 * (HAVE_MHD_HEAD_ONLY) a head-only response that keeps the connection
 * unless the application's flags make its own 200 close-delimited; with
 * 0.9.75, an unknown length also means Connection: close, because 0.9.75
 * writes a chunked body's last chunk even after HEAD or 304 headers and
 * sends a Content-Length with every other 304. NULL on failure.
 */
struct MHD_Response *hnd_fields_response(struct mhdgz *gz, struct MHD_Response *r,
					 const struct hnd_facts *f, uint64_t size,
					 enum hnd_rep rep);
/* The gzip representation of a whole-body entry, built or reused: returns
 * MHDGZ_COMPRESSED and *v_ret, or why not (NOT_SMALLER, ERROR). With
 * no_cache it is built afresh (and then kept); for an uncached entry it is
 * built for this queue alone and not kept: *fresh_ret is then true and the
 * caller owns the reference to *v_ret; else the entry keeps it. e->lock
 * held. */
enum mhdgz_reason hnd_gzip_representation(struct mhdgz *gz, struct hnd_entry *e,
					  const struct hnd_facts *f, bool no_cache,
					  struct MHD_Response **v_ret, bool *fresh_ret);
/* The coded length of a whole body in f->coding, known without compressing:
 * remembered under its strong ETag (hnd_memo.c), or, for an uncached
 * buffer response (an immutable body), from its last compression. true
 * and *len_ret (HND_MEMO_NOT_SMALLER: not smaller), or false. e->lock
 * held. */
bool hnd_coded_len_known(struct mhdgz *gz, const struct hnd_entry *e, const struct hnd_facts *f,
			 uint64_t *len_ret);
/* Files up to this many bytes are sent to an identity GET from memory
 * (read per queue) rather than with sendfile(): header and body then go in
 * one sendmsg, and no descriptor is duplicated (hnd_file_identity). Served
 * by gzserve on loopback, 2k and 20k gain 30 % and 10-20 % requests/s;
 * at 100k the two copies cost what the second segment saves (bench/README.md,
 * make bench-e2e), and the buffer is held while the response is sent. */
#ifndef HND_FD_INLINE_MAX
#define HND_FD_INLINE_MAX (64u * 1024u)
#endif
/* The identity response of a file entry; NULL on failure. A small file's
 * GET gets a response of its own (*fresh_ret true: drop the reference after
 * queueing); otherwise the cached sendfile response. e->lock held. */
struct MHD_Response *hnd_file_identity(struct mhdgz *gz, struct hnd_entry *e,
				       const struct hnd_facts *f, bool head, bool *fresh_ret);
/* The response to queue for a 304 (hnd_conditional.c); gzip_client: the
 * decision's gzip_304; d200: the plan's decision for the 200 it stands
 * for. NULL on failure. *fresh_ret true: made for this queue alone (an uncached
 * entry's), the caller releases it; else the entry keeps it. e->lock
 * held. */
struct hnd_decision;
struct MHD_Response *hnd_not_modified(struct mhdgz *gz, struct hnd_entry *e,
				      const struct hnd_facts *f, const struct hnd_decision *d200,
				      bool gzip_client, bool *fresh_ret);
/* hnd_stream.c: the first bytes of a padded stream, read by its reader
 * to key the padding (hnd_pad.c) and sent first. */
struct hnd_prefix {
	uint8_t *buf;
	size_t len;  /* bytes at buf */
	bool eof;    /* the source ended after them */
	bool failed; /* the source reported an error after them */
};
void hnd_prefix_fini(struct hnd_prefix *px);
/* hnd_stream.c: a per-connection stream of a streaming entry in f->coding,
 * as a response of unknown size with the fields of r (the entry's response,
 * facts f) rewritten for the coding. A file's stream remembers its coded
 * length under f->etag (may be NULL) when complete. With digest, a
 * complete stream ends with a Content-Digest trailer of its coded bytes
 * (announced by a Trailer field; sent by libmicrohttpd when the response
 * is chunked). Takes a reference on e. NULL on failure. */
struct MHD_Response *hnd_gzip_stream_new(struct mhdgz *gz, struct hnd_entry *e,
					 struct MHD_Response *r, const struct hnd_facts *f,
					 bool low_latency, bool digest);
/* The coded stream in e's own response r (an application's reader of
 * unknown size, never queued yet): its fields rewritten (hnd_rewrite_coded,
 * the originals kept in e->fields) and its reader, hnd_entry_read, now
 * reading the stream (e->in_place), which hnd_entry_release frees with r.
 * 0, or a negative error with r as it was. e->lock held. */
int hnd_stream_in_place(struct mhdgz *gz, struct hnd_entry *e, struct MHD_Response *r,
			const struct hnd_facts *f, bool low_latency, bool digest);
/* The identity stream of e's reader in a response of its own, with e's
 * identity fields: for a queue after e's response carries a coded stream
 * in place. NULL on failure. e->lock held. */
struct MHD_Response *hnd_identity_stream(struct mhdgz *gz, struct hnd_entry *e,
					 const struct hnd_facts *f);
/* Free e's in-place stream (its response is gone: no reader call follows). */
void hnd_stream_in_place_fini(struct hnd_entry *e);

/* hnd_variants.c: the RFC 9530 Content-Digest value "sha-256=:<base64>:"
 * of what ctx has hashed, NUL-terminated in field (ctx is reset). */
#define HND_CONTENT_DIGEST_MAX (sizeof "sha-256=::" + BASE64_ENCODE_RAW_LENGTH(SHA256_DIGEST_SIZE))
void hnd_content_digest_value(struct sha256_ctx *ctx, char field[HND_CONTENT_DIGEST_MAX]);
/* hnd_stream_len.c: the length in bytes of the gzip stream of a file entry
 * (for HEAD and 304), remembered under its strong etag (may be NULL) or
 * found by compressing the file (counted as a compression). 0, or MHDGZ_E*
 * when it cannot be known: not a file, over HND_HEAD_LENGTH_MAX, a
 * failure. e->lock held. */
int hnd_gzip_stream_length(struct mhdgz *gz, struct hnd_entry *e, const char *etag,
			   bool low_latency, enum gz_coding coding, uint64_t *len_ret);
/* hnd_stream.c: the identity reader of a streaming entry's own response. */
ssize_t hnd_entry_read(void *cls, uint64_t pos, char *buf, size_t max);
/* hnd_stream.c: read e's source at pos into buf, at most max bytes: the
 * user's reader (under e->read_lock), the pipe, or the file through fd (a
 * stream's own duplicate, or e->fd), never past body_len. Returns bytes, 0
 * (no data now), or MHD_CONTENT_READER_END_OF_STREAM / _WITH_ERROR (a
 * source that ends before its announced size is an error). */
ssize_t hnd_source_read(struct hnd_entry *e, int fd, uint64_t pos, char *buf, size_t max);

/* ------------------------------------------------------------------------ */
/* BREACH length hiding (hnd_pad.c)                                         */

/* Bytes of a stream's body its padding is keyed on (with its ETag): a
 * stream's gzip header, which carries the padding, is held back until this
 * many bytes (or the whole body) have been read. More covers more of a
 * page, at the cost of that much memory per stream while it is read and of
 * first-byte latency for a slow producer. */
#ifndef HND_PAD_KEY_NBYTES
#define HND_PAD_KEY_NBYTES (64 * 1024)
#endif

/* What the key covers: a whole body, or a stream's first bytes. */
#define HND_PAD_WHOLE 'W'
#define HND_PAD_STREAM 'S'

struct hnd_pad_ctx {
	struct hmac_sha256_ctx h;
	uint64_t left; /* body bytes still to be keyed */
};

/* The handle's key: a copy of key[0..key_nbytes), or 32 bytes of
 * getrandom() for NULL. 0, MHDGZ_EINVAL (bad size), MHDGZ_EBACKEND. */
int hnd_pad_key_init(struct mhdgz *gz, const void *key, size_t key_nbytes);
/* Whether e's bytes in coding carry padding (its setting or the handle's;
 * gzip only: the padding is a gzip header field). */
bool hnd_padded(const struct mhdgz *gz, const struct hnd_entry *e, enum gz_coding coding);
/* The padding length, 1..gz->pad_max: HMAC-SHA256 under the handle's key of
 * kind, etag (may be NULL) and the first limit bytes given to update. */
void hnd_pad_begin(const struct mhdgz *gz, char kind, const char *etag, uint64_t limit,
		   struct hnd_pad_ctx *pc);
void hnd_pad_update(struct hnd_pad_ctx *pc, const uint8_t *data, size_t len);
size_t hnd_pad_end(const struct mhdgz *gz, struct hnd_pad_ctx *pc);
/* The same for a whole body (kind HND_PAD_WHOLE, no ETag). */
size_t hnd_pad_of_body(const struct mhdgz *gz, const uint8_t *body, size_t len);

/* ------------------------------------------------------------------------ */
/* Negotiation (hnd_negotiate.c): pure functions, no allocation.           */

/* Accept-Encoding, parsed: q-values in thousandths; -1 when not listed. */
struct hnd_accept {
	int gzip;     /* explicit gzip / x-gzip (highest if repeated) */
	int zstd;     /* explicit zstd */
	int br;       /* explicit br */
	int dcz;      /* explicit dcz (RFC 9842; "*" does not count: hnd_dict.c) */
	int identity; /* explicit identity */
	int star;     /* "*" */
	bool present; /* at least one Accept-Encoding line */
	/* Not read yet: the request whose lines hnd_accept_read() parses
	 * on first use (a response that is never compressed, an image, one
	 * opted out, never reads them); NULL once read. */
	struct MHD_Connection *lazy;
};

/* Parse lines into acc (read: lazy is NULL). */
void hnd_accept_parse(const char *const *lines, size_t count, struct hnd_accept *acc);
/* acc stands for conn's Accept-Encoding lines, read on first use. */
void hnd_accept_lazy(struct hnd_accept *acc, struct MHD_Connection *conn);
/* acc, its lines read if they were not yet (the one change a const acc
 * undergoes: a request's acc belongs to the thread queueing it). Every
 * hnd_accept_* query below calls it; read fields only through it. */
void hnd_accept_fill(struct hnd_accept *acc);
static inline const struct hnd_accept *
hnd_accept_read(const struct hnd_accept *acc)
{
	if (acc->lazy)
		hnd_accept_fill((struct hnd_accept *)acc); /* not const: hnd_accept_lazy */
	return acc;
}
/* Effective q of gzip (thousandths) from a parsed header. */
unsigned int hnd_accept_gzip_q(const struct hnd_accept *acc);
/* Whether gzip is the coding to use: acceptable and not less preferred
 * than an explicitly listed identity. */
bool hnd_accept_wants_gzip(const struct hnd_accept *acc);
/* Effective q (thousandths) of a coding: its explicit listing, else "*". */
unsigned int hnd_accept_q(const struct hnd_accept *acc, enum gz_coding coding);
/*
 * The coding to use among the norder offered in order (the server's
 * preference), RFC 9110 section 12.5.3: the highest q wins, equal q go to
 * the one first in order; none when that q is 0 or below an explicitly
 * listed identity's. Returns true and *coding_ret, or false (identity).
 * With order = { gzip } it is hnd_accept_wants_gzip.
 */
bool hnd_accept_choose(const struct hnd_accept *acc, const enum gz_coding *order, size_t norder,
		       enum gz_coding *coding_ret);

/* Split an entity-tag [W/]"opaque" at s into its weak flag and opaque-tag
 * (without quotes); the position after it, or NULL if malformed (RFC 9110
 * section 8.8.3: etagc = %x21 / %x23-7E / obs-text). */
const char *hnd_etag_parse(const char *s, bool *weak, const char **op, size_t *op_len);
/* Is the field one of the integrity fields computed over the content
 * (Content-MD5, Digest, Content-Digest, Repr-Digest; RFC 9530)? A coded
 * variant never carries a digest of other bytes. */
bool hnd_is_digest_field(const char *name);
/* Does a comma-separated header value contain token (case-insensitive)? */
bool hnd_list_has_token(const char *value, const char *token);
/* Content sniff of an untyped body: true for text-like. */
bool hnd_sniff_text(const uint8_t *body, size_t len);
/* Media type of a Content-Type value without parameters and whitespace:
 * returns a pointer into value and its length in *len_ret. */
const char *hnd_media_type(const char *value, size_t *len_ret);

/* ------------------------------------------------------------------------ */
/* The decision (hnd_decide.c)                                              */

/* What the decision needs from the response's header fields. */
struct hnd_facts {
	const char *content_type;     /* NULL if absent */
	const char *content_encoding; /* NULL if absent */
	const char *etag;             /* NULL if absent */
	bool content_digest;          /* a Content-Digest field or trailer is present */
	bool content_range;           /* a Content-Range field is present */
	bool te_chunked;              /* the application frames it: Transfer-Encoding: chunked */
	bool no_transform;            /* Cache-Control has no-transform */
	bool vary_has_ae;             /* Vary already lists Accept-Encoding or "*" */
	bool vary_has_ad;             /* Vary already lists Available-Dictionary or "*" */
	unsigned int vary_count;      /* number of Vary fields */
	/* Set by the handler, not read from the response: the Vary value a
	 * variant adds, and whether it replaces the response's Vary fields;
	 * the libmicrohttpd response flags every variant gets. */
	const char *vary_add;
	bool vary_replace;
	/* Set by the handler: the request path matches a dictionary's
	 * pattern, so the Vary added names Available-Dictionary too (RFC
	 * 9842 section 6.2). */
	bool dict_vary;
	enum MHD_ResponseFlags mhd_flags;
	/* Set by the handler: the coding of the coded variants built from
	 * these facts (Content-Encoding, ETag suffix, caches); 0, gzip, as
	 * hnd_read_facts leaves it. */
	enum gz_coding coding;
};

/* The outcome: a reason, plus what the headers of either variant need. */
struct hnd_decision {
	enum mhdgz_reason reason;
	bool vary;             /* the representation depends on Accept-Encoding */
	bool gzip_304;         /* a 304 standing for a 200 that would be coded for this
			 * client (as far as the header fields tell) */
	enum gz_coding coding; /* with MHDGZ_COMPRESSED or gzip_304: which */
};

/* ------------------------------------------------------------------------ */
/* Selection (hnd_queue.c)                                                  */

/* hnd_request flags: build a fresh gzip representation even if one is
 * cached (benchmarks, tests). */
#define HND_REQ_NO_CACHE 0x1u
/* hnd_select's result: the caller owns a reference to *queue_ret. */
#define HND_RELEASE 1

/* What the selection needs from the request. */
struct hnd_request {
	struct hnd_accept acc;
	bool head;          /* HEAD: GET's header fields, no content */
	unsigned int flags; /* HND_REQ_* */
	/* RFC 9842 (hnd_dict.c): the request's path (NULL: not known, no
	 * dcz), its Available-Dictionary and Dictionary-ID fields (NULL:
	 * absent). Borrowed for the call. */
	const char *url;
	const char *avail_dict;
	const char *dict_id;
};

/* What the selection did (struct mhdgz_outcome without the coding name). */
struct hnd_result {
	enum mhdgz_reason reason;
	uint64_t body_nbytes;  /* identity body, or MHDGZ_NBYTES_UNKNOWN */
	uint64_t coded_nbytes; /* body as coded, or MHDGZ_NBYTES_UNKNOWN */
	enum gz_coding coding; /* with MHDGZ_COMPRESSED: the coding */
	bool dcz;              /* with MHDGZ_COMPRESSED: dcz (coding then zstd) */
};

/* The decision applied: the response to queue in *queue_ret (response
 * itself or one of ours), HND_RELEASE when the caller must destroy it after
 * queueing, else 0. Never fails (identity, MHDGZ_SKIP_ERROR). What
 * mhdgz_queue_response_ex runs before MHD_queue_response; tests, fuzzers
 * and the bench call it without a connection. */
int hnd_select(struct mhdgz *gz, const struct hnd_request *rq, unsigned int status,
	       struct MHD_Response *response, struct MHD_Response **queue_ret,
	       struct hnd_result *res);

/* Policies of the decision (hnd_decide.c). A whole body (a buffer, or a
 * file up to HND_FD_WHOLE_MAX) is compressed once and cached with a
 * Content-Length; anything else is streamed per connection. */
bool hnd_whole_body(const struct hnd_entry *e);
/* A stream whose every chunk must reach the client at once: marked so, or
 * text/event-stream. */
bool hnd_low_latency(const struct hnd_entry *e, const struct hnd_facts *f);

void hnd_decide(const struct mhdgz *gz, bool opt_out, unsigned int status,
		const struct hnd_facts *facts, const uint8_t *sniff, size_t sniff_len,
		uint64_t body_len, const struct hnd_accept *acc, struct hnd_decision *d);

/* What is sent in a queued response's place (hnd_plan). */
enum hnd_plan_kind {
	HND_PLAN_IDENTITY,        /* the identity representation (hnd_queue.c: the response
				   * itself, a file's identity response, or fields only) */
	HND_PLAN_DCZ,             /* coded whole against plan.dict (GET, HEAD, 304) */
	HND_PLAN_WHOLE,           /* coded whole, kept per coding (GET; HEAD: the length
				   * from what is kept, else coded) */
	HND_PLAN_STREAM_FIELDS,   /* HEAD of a coded stream: fields, its length if cheap */
	HND_PLAN_STREAM_IN_PLACE, /* a coded stream in the response itself */
	HND_PLAN_STREAM,          /* a coded stream in a response of its own */
	HND_PLAN_NOT_MODIFIED     /* a 304 standing for the 200 of plan.d200 */
};

/* What the plan is made from: the request, the response's fields and
 * what its constructor told (the entry), no state of any cache. */
struct hnd_plan_in {
	unsigned int status;
	const struct hnd_request *rq;
	const struct hnd_facts *f;
	const uint8_t *sniff; /* first bytes of an untyped body, or NULL */
	size_t sniff_len;
	enum hnd_kind kind;
	uint64_t body_len; /* MHD_SIZE_UNKNOWN for a stream of unknown size */
	bool opt_out;
	bool padded;      /* length hiding applies to its gzip body */
	bool low_latency; /* mhdgz_response_set_low_latency (the plan adds text/event-stream) */
	bool fresh;       /* never queued, no coded stream in it: may carry one in place */
	bool no_dict;     /* plan without dcz (its build found it not smaller) */
};

struct hnd_plan {
	enum hnd_plan_kind kind;
	struct hnd_decision d;               /* the decision for this status */
	struct hnd_decision d200;            /* HND_PLAN_NOT_MODIFIED: the 200's */
	const struct hnd_accept *acc;        /* the codings planned on: rq's or acc_padded */
	struct hnd_accept acc_padded;        /* length hiding: the request's, gzip alone */
	const struct mhdgz_dictionary *dict; /* HND_PLAN_DCZ */
	bool whole;                          /* the body is coded whole, not streamed */
	bool digest;                         /* a Content-Digest of the coded body */
	bool low_latency;
};

/* The plan for one queue call: a pure function of in and the handle's
 * options (the request's Accept-Encoding lines are read on first use).
 * Pinned, table-driven, by test_plan (check_hnd_decision.c). */
void hnd_plan(const struct mhdgz *gz, const struct hnd_plan_in *in, struct hnd_plan *p);

/* The ETag a gzip response carries under the policy. Writes a NUL-terminated
 * tag to buf (cap bytes) and returns it, returns etag itself when unchanged,
 * or NULL when the ETag is to be dropped (or does not fit: dropping is
 * always safe). */
const char *hnd_etag_for_gzip(enum mhdgz_etag_policy policy, const char *etag, char *buf,
			      size_t cap);
/* The same for a coding: MHDGZ_ETAG_SUFFIX appends "-" and the coding's
 * token ("x-gzip", "x-zstd", "x-br"). */
const char *hnd_etag_for_coding(enum mhdgz_etag_policy policy, const char *etag,
				enum gz_coding coding, char *buf, size_t cap);

/* ------------------------------------------------------------------------ */
/* Compression dictionaries, RFC 9842 (hnd_dict.c)                          */

struct gz_zdict;

/* A registered dictionary (the public handle type): immutable once
 * published on the handle's list. */
struct mhdgz_dictionary {
	struct mhdgz_dictionary *next;
	struct gz_zdict *zd; /* digested for the handle's zstd level, shared */
	uint8_t hash[SHA256_DIGEST_SIZE];
	size_t nbytes;
	char *match; /* the URL pattern: '/' first, '*' wildcards */
	char *id;    /* its sf-string form ("\"id\""), or NULL */
	char *field; /* the Use-As-Dictionary value */
};

/* Does url (NULL: no) match the pattern of a registered dictionary? Then
 * the response could be dcz, and its Vary names Available-Dictionary. */
bool hnd_dict_url_matches(struct mhdgz *gz, const char *url);
/* Free the handle's dictionaries (mhdgz_free, no other thread left). */
void hnd_dicts_free(struct mhdgz *gz);
/* Free an entry's dcz representations (entry free). */
void hnd_dcz_free(struct hnd_entry *e);
/* Whether the Vary a response gets must name something it does not yet
 * (Accept-Encoding, and Available-Dictionary when f->dict_vary), and the
 * tokens to add (NULL: nothing). */
const char *hnd_vary_token(const struct hnd_facts *f);
/*
 * The dictionary a dcz response to this request would be coded against
 * (part of the plan, hnd_plan), if every RFC 9842 condition the request
 * and the fields show holds: dcz accepted in acc (explicitly, q not below
 * the ordinary choice's, not below an explicit identity), an
 * Available-Dictionary naming a registered dictionary whose pattern
 * matches rq->url (and whose id matches a Dictionary-ID sent), a whole
 * body of at least min_nbytes. d is the ordinary decision (MHDGZ_COMPRESSED
 * or MHDGZ_SKIP_NOT_ACCEPTED; or a 304's MHDGZ_SKIP_STATUS). NULL: none.
 */
const struct mhdgz_dictionary *hnd_dcz_plan(const struct mhdgz *gz, const struct hnd_request *rq,
					    const struct hnd_accept *acc,
					    const struct hnd_decision *d, const struct hnd_facts *f,
					    bool whole, uint64_t body_len);
/*
 * The dcz representation of e against dict, cached per dictionary (built
 * again with no_cache or for an uncached entry): true with *v_ret (the
 * entry's, not a reference for the caller) and its body length in
 * *len_ret; with is_304 *v_ret is the 304 of that dcz 200, its ETag and
 * length, a reference for the caller (*release_ret true). false when dcz
 * does not make the body smaller or on a failure: the plan without the
 * dictionary stands. Counts its compressions, cache hits, failures,
 * dictionary hits and bytes saved. e->lock held.
 */
bool hnd_dcz_build(struct mhdgz *gz, struct hnd_entry *e, const struct mhdgz_dictionary *dict,
		   bool is_304, bool no_cache, const struct hnd_facts *f,
		   struct MHD_Response **v_ret, uint64_t *len_ret, bool *release_ret);
/* Match a request path against a dictionary pattern (the subset of
 * URLPattern pathname syntax hnd_dict.c accepts: literal characters and
 * '*', any run of characters). Exposed for the tests. */
bool hnd_dict_match(const char *pattern, const char *path);
/* Parse an Available-Dictionary value (RFC 8941 byte sequence, ":b64:")
 * into a SHA-256; false when malformed or not 32 bytes. */
bool hnd_dict_parse_hash(const char *value, uint8_t hash[SHA256_DIGEST_SIZE]);

#endif /* HND_INTERNAL_H */
