/* mhdgz.h: HTTP response compression (gzip) for libmicrohttpd servers. */
/**
 * @file
 * libmhdgz adds gzip content coding to an existing libmicrohttpd server by
 * changing two calls:
 *
 *     MHD_create_response_from_buffer (size, buf, mode)
 *  -> mhdgz_response_from_buffer (gz, size, buf, mode)
 *
 *     MHD_queue_response (connection, status, response)
 *  -> mhdgz_queue_response_ex (gz, connection, method, status, response, NULL)
 *
 * (with the method the access handler was given, so that a HEAD gets
 * exactly GET's header fields; mhdgz_queue_response() without it treats
 * every request as a GET).
 *
 * The response returned by mhdgz_response_from_buffer() is a real
 * struct MHD_Response: add headers to it with MHD_add_response_header() in
 * any order and destroy it with MHD_destroy_response() as usual. At queue
 * time the library sees the request's Accept-Encoding, the status, every
 * response header and the body together, decides (one decision function,
 * every "no" a counted reason, see enum mhdgz_reason), and queues either
 * the response itself or a gzip variant of it with the right headers
 * (Content-Encoding, Vary, ETag; RFC 9110 sections 8.4, 12.5.3, 12.5.5,
 * 8.8.3). The gzip variant is built once per response and reused when the
 * same response is queued again.
 *
 * Compression is an optimisation: any failure (allocation, compressor
 * error) or a compressed body that is not smaller yields the identity
 * response with the original body, and is counted in the statistics.
 *
 * Thread-safety: a struct mhdgz handle may be used from any number of
 * threads at once (libmicrohttpd's thread-per-connection and thread-pool
 * modes). Functions that take a response must not race with the caller's
 * own modifications of that response (the same rule libmicrohttpd has).
 *
 * Errors are negative MHDGZ_E* codes; mhdgz_strerror() names them. The
 * library never aborts, exits or prints.
 */
#ifndef MHDGZ_H
#define MHDGZ_H

#include <stddef.h>
#include <stdint.h>

#include <microhttpd.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the exported functions; the library's own build defines it. */
#ifndef MHDGZ_API
#define MHDGZ_API
#endif

/* ===================================================================== */
/*                              Setup                                    */
/* ===================================================================== */

/** The one version source: configure.ac reads these three lines. @{ */
#define MHDGZ_VERSION_MAJOR 0
#define MHDGZ_VERSION_MINOR 1
#define MHDGZ_VERSION_PATCH 0
#define MHDGZ_VERSION_STRING "0.1.0"
/** @} */

/**
 * The version of the library linked at run time, "MAJOR.MINOR.PATCH".
 *
 * @return a static string; never NULL. Thread-safe.
 */
MHDGZ_API const char *mhdgz_version(void);

/**
 * Compression backends. Each produces one RFC 1952 gzip member per body
 * (MTIME 0, no file name, CRC-32 and ISIZE trailer).
 *
 * Compression levels follow one convention for every backend: 1 is the
 * fastest, a higher level gives smaller output, and 0 in struct
 * mhdgz_options means the backend's default.
 *
 *  - MHDGZ_BACKEND_ZLIB: zlib deflate, levels 1-9 (zlib's own numbers;
 *    default 6); whole buffers and streaming. Always built.
 *  - MHDGZ_BACKEND_LIBDEFLATE: libdeflate, levels 1-12 (libdeflate's own
 *    numbers; default 5: 0.7x the time of level 6 at 20-100 KiB for about
 *    1 % more bytes, still fewer than Go gzhttp's default); whole buffers
 *    only (libdeflate has no streaming interface: its streams are
 *    compressed by zlib at the same level, capped at 9). Faster than
 *    zlib at every level with output no larger at the same level number.
 *    Only when built with libdeflate (configure --with-libdeflate, the
 *    default when found).
 *  - MHDGZ_BACKEND_ISAL: ISA-L igzip, levels 1-4 (default 2), which are
 *    igzip's own levels 0-3 plus one; whole buffers and streaming; only
 *    when built with ISA-L (configure --with-isal, the default when found).
 *    The fastest, with ratios near zlib's levels 1-2. On x86-64, levels
 *    2-4 are one compressor (igzip's level 3): igzip's levels 1-2 there
 *    give bytes that depend on where the compressor is in memory (ISA-L
 *    2.30), and identical input must give identical output.
 *
 * MHDGZ_BACKEND_DEFAULT (0) means the first compiled-in backend of
 * libdeflate (the fastest whole-buffer backend with zlib-level ratios),
 * ISA-L and zlib.
 */
enum mhdgz_backend {
	MHDGZ_BACKEND_DEFAULT = 0,
	MHDGZ_BACKEND_ZLIB = 1,
	MHDGZ_BACKEND_LIBDEFLATE = 2,
	MHDGZ_BACKEND_ISAL = 3
};

/**
 * Whether a backend was compiled in.
 *
 * @param backend a backend, or MHDGZ_BACKEND_DEFAULT
 * @return 1 if available, 0 if not (or unknown). Thread-safe.
 */
MHDGZ_API int mhdgz_backend_available(enum mhdgz_backend backend);

/**
 * The backend's name: "zlib", "libdeflate" or "isal". For
 * MHDGZ_BACKEND_DEFAULT, the name of the backend it stands for.
 *
 * @return a static string, or NULL for an unknown value or a backend not
 *         compiled in. Thread-safe.
 */
MHDGZ_API const char *mhdgz_backend_name(enum mhdgz_backend backend);

/**
 * Parse a backend name as printed by mhdgz_backend_name().
 *
 * @param name NUL-terminated name, case-insensitive; borrowed.
 * @param backend_ret receives the backend; untouched on error.
 * @return 0, MHDGZ_EINVAL for NULL or an unknown name, MHDGZ_ENOTSUP for a
 *         known backend that was not compiled in. Thread-safe.
 */
MHDGZ_API int mhdgz_backend_from_name(const char *name, enum mhdgz_backend *backend_ret);

/**
 * The backend's level range and default level (see enum mhdgz_backend for
 * the convention).
 *
 * @param backend a backend, or MHDGZ_BACKEND_DEFAULT.
 * @param min_ret receives the lowest level; may be NULL.
 * @param max_ret receives the highest level; may be NULL.
 * @param default_ret receives the default level; may be NULL.
 * @return 0, or MHDGZ_ENOTSUP if the backend is not compiled in. Thread-safe.
 */
MHDGZ_API int mhdgz_backend_levels(enum mhdgz_backend backend, int *min_ret, int *max_ret,
				   int *default_ret);

/**
 * Content codings (RFC 9110 section 8.4.1) the handler can offer. gzip is
 * always built; zstd and br only when the libraries were found by
 * configure (--with-zstd, --with-brotli). By default a handler offers zstd
 * (where built) and gzip, zstd first; br only when struct mhdgz_options
 * codings names it.
 *
 *  - MHDGZ_CODING_GZIP: "gzip", RFC 9110 section 8.4.1.3 (RFC 1952), by
 *    the backend of struct mhdgz_options backend.
 *  - MHDGZ_CODING_ZSTD: "zstd", RFC 8878 as RFC 9659 profiles it for HTTP:
 *    one frame per body, a window of at most 8 MiB at every level, the
 *    content size in the frame header of a body compressed whole, no
 *    dictionary ID. libzstd; levels 1-19 (zstd's own numbers, default 3).
 *  - MHDGZ_CODING_BR: "br", RFC 7932 (brotli). libbrotlienc; levels 1-11
 *    (brotli's qualities, default 5). libbrotlienc 1.0.9 ends the process
 *    (exit()) when an allocation inside its encoder fails: do not offer br
 *    with an allocator (mhdgz_set_allocator()) that may fail.
 *
 * Every coding goes through the same decision, compressor pools, caches
 * and header rewriting as gzip; "gzip" in the rest of this header means
 * the coding chosen for the request.
 */
enum mhdgz_coding {
	MHDGZ_CODING_GZIP = 0,
	MHDGZ_CODING_ZSTD = 1,
	MHDGZ_CODING_BR = 2,
	MHDGZ_CODING_COUNT /**< the number of codings, not a coding */
};

/**
 * Whether a content coding was compiled in.
 *
 * @param coding a coding.
 * @return 1 if available (gzip always), 0 if not or unknown. Thread-safe.
 */
MHDGZ_API int mhdgz_coding_available(enum mhdgz_coding coding);

/**
 * The coding's token as Content-Encoding and Accept-Encoding spell it:
 * "gzip", "zstd" or "br".
 *
 * @return a static string, also for a coding not compiled in; NULL for an
 *         unknown value. Thread-safe.
 */
MHDGZ_API const char *mhdgz_coding_name(enum mhdgz_coding coding);

/**
 * The level range and default level of a coding: for gzip, those of the
 * default backend (mhdgz_backend_levels()); for zstd 1-19 (default 3), for
 * br 1-11 (default 5).
 *
 * @param coding a coding.
 * @param min_ret receives the lowest level; may be NULL.
 * @param max_ret receives the highest level; may be NULL.
 * @param default_ret receives the default level; may be NULL.
 * @return 0, MHDGZ_EINVAL for an unknown value, MHDGZ_ENOTSUP for a
 *         coding not compiled in. Thread-safe.
 */
MHDGZ_API int mhdgz_coding_levels(enum mhdgz_coding coding, int *min_ret, int *max_ret,
				  int *default_ret);

/**
 * What happens to a strong ETag on a gzip-coded response. A strong
 * validator identifies one exact representation (RFC 9110 section 8.8.1),
 * and the gzip representation differs from the identity one, so it must
 * not share the identity's strong ETag.
 */
enum mhdgz_etag_policy {
	/** W/"x": the gzip representation gets the weak form (default; what
	 * Apache and nginx do). If-None-Match still matches (weak comparison). */
	MHDGZ_ETAG_WEAKEN = 0,
	/** "x-gzip": a distinct strong ETag ("x-zstd", "x-br" for the other
	 * codings); use mhdgz_etag_match() or mhdgz_evaluate_preconditions()
	 * to evaluate If-None-Match/If-Match. */
	MHDGZ_ETAG_SUFFIX = 1,
	/** Remove the ETag from gzip responses. */
	MHDGZ_ETAG_DROP = 2,
	/** Leave the ETag unchanged (only correct if the compressed bytes are
	 * deterministic and the ETag is never used for byte ranges). */
	MHDGZ_ETAG_KEEP = 3
};

/** Flags of struct mhdgz_options. */
/** Do not pool compressors: create one per compression (pass-through). */
#define MHDGZ_F_NO_POOL 0x2u
/** When the application's response carries a Content-Digest field or
 * trailer (any algorithm), its gzip response gets a new
 * "Content-Digest: sha-256=:...:" computed over exactly its gzip bytes
 * (RFC 9530 section 2; SHA-256 from nettle) instead of none: a header
 * field when compressed whole; for a gzip stream, whose bytes are not
 * known when its header is sent, "Trailer: Content-Digest" and the field
 * in the chunked trailer section once the member is complete (RFC 9112
 * section 7.1.2; a stream sent without chunked framing, to an HTTP/1.0
 * client, has no trailer section and so none). Without this flag an
 * integrity field of the identity bytes is only dropped (counted in
 * digests_dropped). */
#define MHDGZ_F_CONTENT_DIGEST 0x4u
/** BREACH length hiding for every gzip response of the handler, unless a
 * response opts out with mhdgz_response_set_length_hiding(): the gzip
 * member carries 1 to length_hiding_max bytes of padding in its header
 * comment (RFC 1952 section 2.3.1, FCOMMENT), a length chosen by a keyed
 * hash of the body, so that the same body always has the same length and
 * bodies differing in one byte have independent lengths. The padding is a
 * gzip header field, so a response with length hiding is sent gzip or
 * identity only: zstd, br and dcz (which would go out unpadded) count as
 * refused for it, whatever the client's q-values and the codings option.
 * mhdgz(3), LENGTH HIDING, says when it is needed and what it does and does not
 * give. */
#define MHDGZ_F_LENGTH_HIDING 0x8u

/** Default length_hiding_max in bytes: the mean padding is half of it.
 * With 64 candidate guesses that each gain d bytes when right, an attacker
 * picking the shortest response is right with probability about
 * d / 512 + 1 / 64 (mhdgz(3), LENGTH HIDING). */
#define MHDGZ_DEFAULT_LENGTH_HIDING_MAX 512
/** Largest length_hiding_max accepted, in bytes. */
#define MHDGZ_LENGTH_HIDING_MAX_LIMIT 65536
/** Shortest and longest length_hiding_key accepted, in bytes. @{ */
#define MHDGZ_LENGTH_HIDING_KEY_MIN 16
#define MHDGZ_LENGTH_HIDING_KEY_MAX 64
/** @} */

/** Default min_nbytes: smaller bodies gain little and cost a round of
 * compressor setup (RFC-free tradition; nginx uses 20, Go's gziphandler 1400,
 * one TCP segment is ~1460). */
#define MHDGZ_DEFAULT_MIN_NBYTES 1024

/** Default pool_idle_low: idle compressors kept by each compressor pool
 * however long they stay unused (a small site's steady state needs no
 * new compressor per request). */
#define MHDGZ_DEFAULT_POOL_IDLE_LOW 2
/** Default pool_trim_ms: an idle compressor beyond pool_idle_low is freed
 * after 10 seconds without use. */
#define MHDGZ_DEFAULT_POOL_TRIM_MS 10000u
/** pool_trim_ms value: never trim, keep up to pool_idle_cap compressors
 * idle until mhdgz_free() (the behaviour before trimming existed). */
#define MHDGZ_POOL_TRIM_NEVER 0xffffffffu

/** Default event_window_bits: a 4 KiB history for low-latency streams,
 * whose every chunk is flushed (DESIGN.md, "Memory per stream"). */
#define MHDGZ_DEFAULT_EVENT_WINDOW_BITS 12
/** Default event_mem_level: zlib memLevel 5 (a 4 Ki-entry hash table). */
#define MHDGZ_DEFAULT_EVENT_MEM_LEVEL 5

/**
 * Options for mhdgz_new(). Zero-initialise, set size to
 * sizeof(struct mhdgz_options), then set what you need: every zero field
 * means its documented default, so the struct can grow without breaking
 * callers compiled against an older header.
 */
struct mhdgz_options {
	/** sizeof(struct mhdgz_options); a size the library does not know is
	 * rejected with MHDGZ_EINVAL. */
	size_t size;
	/** Compression backend; 0 = MHDGZ_BACKEND_DEFAULT. */
	enum mhdgz_backend backend;
	/** Compression level in the backend's range (see enum mhdgz_backend);
	 * 0 = the backend's default. Out of range: mhdgz_new() fails with
	 * MHDGZ_EINVAL (never clamped). */
	int level;
	/** MHDGZ_F_* flags. */
	unsigned int flags;
	/** Bodies of known length smaller than this many bytes are served
	 * identity, without Vary: they are identity for every client (RFC
	 * 9110 section 12.5.5), and so are their 304s; a stream of unknown
	 * length is not held to it. 0 = MHDGZ_DEFAULT_MIN_NBYTES. Use 1 to
	 * compress every non-empty body. */
	size_t min_nbytes;
	/** NULL-terminated list of media types to compress, replacing the
	 * default list; NULL = default. An entry is an exact "type/subtype"
	 * ("application/json"); a whole type, written as the type, a slash and
	 * an asterisk ("text/" followed by "*"); a structured syntax suffix
	 * (RFC 6838 section 4.2.8), written as asterisk, slash, asterisk and
	 * the suffix (matches "application/ld+json" for "+json"); or asterisk,
	 * slash, asterisk alone for every type. Matching ignores case and
	 * Content-Type parameters. The strings are copied. */
	const char *const *compress_types;
	/** NULL-terminated list of media types never compressed (checked before
	 * compress_types), replacing the default list; NULL = default. */
	const char *const *skip_types;
	/** ETag policy for gzip responses; 0 = MHDGZ_ETAG_WEAKEN. */
	enum mhdgz_etag_policy etag_policy;
	/** Most compressors kept idle in the compressor pool; 0 = default (16).
	 * Each idle compressor holds the backend's state (DESIGN.md, "Why a
	 * compressor pool", gives the bytes per backend). */
	size_t pool_idle_cap;
	/** Length hiding (MHDGZ_F_LENGTH_HIDING, mhdgz_response_set_length_hiding()):
	 * the most padding bytes per gzip body, from 1 to
	 * MHDGZ_LENGTH_HIDING_MAX_LIMIT; 0 = MHDGZ_DEFAULT_LENGTH_HIDING_MAX. */
	size_t length_hiding_max;
	/** The key of the padding's hash (HMAC-SHA256), copied; NULL = 32 random
	 * bytes from getrandom() for this handler. Give the same key to every
	 * process serving the same content so that they pad it alike (else
	 * an attacker spreads requests over processes and averages). */
	const void *length_hiding_key;
	/** Bytes at length_hiding_key, from MHDGZ_LENGTH_HIDING_KEY_MIN to
	 * MHDGZ_LENGTH_HIDING_KEY_MAX; ignored when it is NULL. */
	size_t length_hiding_key_nbytes;
	/** The content codings offered, in the server's order of preference,
	 * which decides between codings the client gives equal q-values (RFC
	 * 9110 section 12.5.3; the client's q-values decide first): a
	 * comma-separated list of "gzip", "zstd" and "br" (case-insensitive,
	 * optional whitespace, each at most once), e.g. "zstd, br, gzip".
	 * NULL = "zstd, gzip" where zstd is built, else "gzip": zstd for the
	 * clients that ask for it (every current browser), at a third of
	 * gzip's CPU time for 1-3 % more bytes; gzip for the others. "gzip"
	 * gives the behaviour of earlier versions (gzip alone). br is never
	 * offered by default: it costs about twice gzip's time (mhdgz(3),
	 * "CONTENT CODINGS", gives the bench figures). The string is read
	 * during mhdgz_new() only. An empty or malformed list, or an
	 * unknown or repeated coding: mhdgz_new() fails with MHDGZ_EINVAL; a
	 * coding not compiled in: MHDGZ_ENOTSUP. */
	const char *codings;
	/** zstd level, 1-19 (mhdgz_coding_levels()); 0 = the default, 3. Out
	 * of range: MHDGZ_EINVAL (never clamped), also when zstd is not in
	 * codings. */
	int zstd_level;
	/** brotli quality, 1-11; 0 = the default, 5. Out of range:
	 * MHDGZ_EINVAL. */
	int br_level;
	/** The pools' low watermark: idle compressors never trimmed, per
	 * pool (whole bodies, streams); 0 = MHDGZ_DEFAULT_POOL_IDLE_LOW (2).
	 * Above pool_idle_cap it acts as pool_idle_cap. */
	size_t pool_idle_low;
	/** Trim period in milliseconds: an idle compressor beyond
	 * pool_idle_low is freed once unused for this long, so memory taken
	 * by a burst goes back (heap pages too, with glibc); 0 =
	 * MHDGZ_DEFAULT_POOL_TRIM_MS (10 s), MHDGZ_POOL_TRIM_NEVER = never.
	 * There is no thread: a pool looks every quarter period when a
	 * compressor is taken or given back, and mhdgz_trim() looks at once;
	 * a server that can go quiet after a burst calls mhdgz_trim() from a
	 * timer (gzserve does, every second). */
	unsigned int pool_trim_ms;
	/** Streams (gzip compressed as they are sent): the compressor's
	 * history, 2^bits bytes, 9-15 (zlib windowBits; ISA-L hist_bits);
	 * 0 = 15, 32 KiB. With stream_mem_level it sets a stream's memory:
	 * zlib holds 2^(bits+2) + 2^(mem_level+9) bytes plus 6 KiB, 262 KiB
	 * at 15 and 8 (DESIGN.md, "Memory per stream", measured per backend).
	 * Out of range: mhdgz_new() fails with MHDGZ_EINVAL. Streams of
	 * libdeflate, which has no streaming interface, are zlib's. */
	int stream_window_bits;
	/** Streams: zlib memLevel 1-9 (hash table of 2^(mem_level+7)
	 * entries); 0 = 8. ISA-L: below 8, its smallest level buffer (its
	 * 80.5 KiB stream state does not shrink). */
	int stream_mem_level;
	/** As stream_window_bits, for low-latency streams (text/event-stream
	 * and the types of the low-latency policy, and
	 * mhdgz_response_set_low_latency()): each chunk is flushed, so the
	 * history matters less and a server holds many at once; 0 =
	 * MHDGZ_DEFAULT_EVENT_WINDOW_BITS (12). */
	int event_window_bits;
	/** As stream_mem_level, for low-latency streams; 0 =
	 * MHDGZ_DEFAULT_EVENT_MEM_LEVEL (5): 38 KiB per zlib stream instead
	 * of 262, for 9 % more bytes on 100-300-byte JSON events. */
	int event_mem_level;
	/** The file cache: the most bytes of coded file bodies kept for reuse
	 * by later responses on the same file, in bytes (coded bytes plus
	 * about 128 bytes per file version); 0 = off, the default.
	 *
	 * A file server makes a fresh mhdgz_response_from_fd() per request,
	 * so without it every request compresses the file again (a body is
	 * compressed whole up to 1 MiB; larger files are streamed and not
	 * cached). With it, the coded bytes of a file version are made once:
	 * the key is what fstat() says of the descriptor (st_dev, st_ino,
	 * st_size, st_mtim and st_ctim), the offset and length served, the
	 * coding, its level and whether length hiding applies; the least
	 * recently used versions are dropped to stay within the budget.
	 * HEADs and 304s state the lengths of the same bytes.
	 *
	 * A changed file is never served stale: a write changes its size or
	 * its change time, and a file changed less than 2 seconds before it
	 * is read (within the file system's timestamp granularity, or while
	 * it is still being written) is compressed but not remembered. It is
	 * off by default because the memory is the application's to give and
	 * because an application that serves files it rewrites in place
	 * through a file system without reliable change times (some network
	 * and FUSE file systems) must not turn it on. Counted in struct
	 * mhdgz_stats filecache_*. */
	size_t file_cache_nbytes;
};

/** A compression handler: configuration, compressor pool, response table, stats. */
struct mhdgz;

/**
 * Create a handler.
 *
 * @param opts options, or NULL for all defaults; borrowed (copied).
 * @param gz_ret receives the handler; owned by the caller, release with
 *        mhdgz_free(). Untouched on error.
 * @return 0; MHDGZ_EINVAL for a NULL gz_ret, an unknown opts->size, an
 *         unknown backend, a level out of range, an ETag policy out of
 *         range, a stream or event window setting out of range, a
 *         malformed media type pattern, a length_hiding_max above
 *         MHDGZ_LENGTH_HIDING_MAX_LIMIT or a length_hiding_key of a size
 *         out of range; MHDGZ_ENOTSUP for a backend not compiled in;
 *         MHDGZ_EBACKEND if getrandom() failed (no key given);
 *         MHDGZ_ENOMEM.
 * @note Thread-safe (creates independent handlers).
 */
MHDGZ_API int mhdgz_new(const struct mhdgz_options *opts, struct mhdgz **gz_ret);

/**
 * Release the application's reference to a handler. Responses created
 * through it keep it alive: its memory (compressor pools, statistics) goes
 * when both this call has been made and the last of those responses has
 * been freed by MHD_destroy_response() and libmicrohttpd, in either order.
 * So a long-lived response may be destroyed after mhdgz_free() (and after
 * MHD_stop_daemon()). After mhdgz_free() the handler must not be used to
 * create or queue responses. NULL is a no-op. Not thread-safe with other
 * uses of the same handler by the application (its responses may be
 * freed on any thread).
 */
MHDGZ_API void mhdgz_free(struct mhdgz *gz);

/**
 * The content codings a handler offers, in the server's order of
 * preference: struct mhdgz_options codings as mhdgz_new() parsed it
 * (zstd, then gzip, by default). For an application that chooses among files
 * it coded itself as the handler chooses on the fly, with
 * mhdgz_accept_coding() (gzserve --precompressed), without parsing the
 * list a second time.
 *
 * @param gz the handler.
 * @param order_ret receives the first @a order_cap codings offered; may
 *        be NULL when @a order_cap is 0.
 * @param order_cap room at @a order_ret, in codings; MHDGZ_CODING_COUNT
 *        always suffices.
 * @return the number of codings offered (1 to MHDGZ_CODING_COUNT), or 0
 *         when @a gz is NULL. Thread-safe.
 */
MHDGZ_API size_t mhdgz_get_codings(const struct mhdgz *gz, enum mhdgz_coding *order_ret,
				   size_t order_cap);

/* ===================================================================== */
/*                              Responses                                */
/* ===================================================================== */

/**
 * Same as MHD_create_response_from_buffer(), and registers the body with the
 * handler so mhdgz_queue_response() can compress it.
 *
 * @param gz the handler; a response keeps it alive (see mhdgz_free()).
 * @param size body size in bytes (0 allowed).
 * @param buffer the body; NULL only if size is 0.
 * @param mode as libmicrohttpd's: MHD_RESPMEM_PERSISTENT (borrowed, must
 *        outlive the response), MHD_RESPMEM_MUST_COPY (copied now) or
 *        MHD_RESPMEM_MUST_FREE (on success ownership passes to the
 *        response, which releases it with free() when it is freed).
 * @return a response owned by the caller (MHD_destroy_response()), or NULL
 *         on allocation failure or invalid arguments; then, exactly as with
 *         libmicrohttpd, the caller still owns a MUST_FREE buffer.
 * @note Thread-safe.
 */
MHDGZ_API struct MHD_Response *mhdgz_response_from_buffer(struct mhdgz *gz, size_t size,
							  void *buffer,
							  enum MHD_ResponseMemoryMode mode);

#if MHD_VERSION >= 0x01000000
/**
 * Same as MHD_create_response_from_buffer_static() (libmicrohttpd 1.0):
 * the @a size bytes at @a buffer are the body, borrowed, never copied and
 * never freed, by libmicrohttpd or by mhdgz; as
 * mhdgz_response_from_buffer() with MHD_RESPMEM_PERSISTENT. The coded
 * representations mhdgz makes of it are its own memory.
 *
 * @param gz the handler; a response keeps it alive (see mhdgz_free()).
 * @param size body size in bytes (0 allowed).
 * @param buffer the body; NULL only if @a size is 0. It must stay valid
 *        and unchanged for the lifetime of the response, which libmicrohttpd
 *        and mhdgz extend while a connection still sends it or a response
 *        queued in its place (a static buffer is simplest).
 * @return a response owned by the caller (MHD_destroy_response()), or NULL
 *         if @a gz is NULL, @a buffer is NULL with a size, or an allocation
 *         failed.
 * @note Thread-safe. Only when built against libmicrohttpd 1.0 or later
 *       (MHD_VERSION >= 0x01000000).
 */
MHDGZ_API struct MHD_Response *mhdgz_response_from_buffer_static(struct mhdgz *gz, size_t size,
								 const void *buffer);

/**
 * Same as MHD_create_response_from_buffer_copy() (libmicrohttpd 1.0): the
 * @a size bytes at @a buffer are copied when the response is made (with
 * the allocator of mhdgz_set_allocator(), freed with the response); as
 * mhdgz_response_from_buffer() with MHD_RESPMEM_MUST_COPY.
 *
 * @param gz the handler; a response keeps it alive (see mhdgz_free()).
 * @param size body size in bytes (0 allowed).
 * @param buffer the body; NULL only if @a size is 0. Borrowed for the
 *        call only: the caller may overwrite or free it once it returns.
 * @return a response owned by the caller (MHD_destroy_response()), or NULL
 *         if @a gz is NULL, @a buffer is NULL with a size, or an allocation
 *         failed.
 * @note Thread-safe. Only when built against libmicrohttpd 1.0 or later
 *       (MHD_VERSION >= 0x01000000).
 */
MHDGZ_API struct MHD_Response *mhdgz_response_from_buffer_copy(struct mhdgz *gz, size_t size,
							       const void *buffer);

/**
 * Same as MHD_create_response_empty() (libmicrohttpd 1.0): a response with
 * an empty body and @a flags, which are set and recorded exactly as
 * mhdgz_response_set_options() sets and records them (so every response
 * mhdgz queues in this one's place, a 304 with the coded ETag say, gets
 * them too).
 *
 * An empty body is never compressed: a GET gets "Content-Length: 0" and
 * the fields as they are (MHDGZ_SKIP_EMPTY). With
 * MHD_RF_HEAD_ONLY_RESPONSE, for a HEAD or a 304 (RFC 9110 sections 9.3.2
 * and 15.4.5), libmicrohttpd sends no Content-Length or Transfer-Encoding
 * of its own, and the application may add its own Content-Length field,
 * the length of the representation a GET would send. mhdgz cannot know
 * which representation such a response describes, so it is always queued
 * itself, whatever the status and Accept-Encoding: never compressed,
 * nothing added, nothing rewritten (no Vary, no coded ETag), its
 * Content-Length the application's (MHDGZ_SKIP_EMPTY; MHDGZ_SKIP_STATUS
 * with 1xx, 204 or 304). libmicrohttpd 1.0 refuses to queue it for a
 * request that needs a body (a GET answered 200).
 *
 * @param gz the handler; a response keeps it alive (see mhdgz_free()).
 * @param flags as for MHD_create_response_empty(); MHD_RF_NONE for none.
 * @return a response owned by the caller (MHD_destroy_response()), or NULL
 *         if @a gz is NULL, an allocation failed or libmicrohttpd refused
 *         @a flags.
 * @note Thread-safe. Only when built against libmicrohttpd 1.0 or later
 *       (MHD_VERSION >= 0x01000000).
 */
MHDGZ_API struct MHD_Response *mhdgz_response_empty(struct mhdgz *gz, enum MHD_ResponseFlags flags);
#endif /* MHD_VERSION >= 0x01000000 */

/**
 * Same as MHD_queue_response(), choosing the content coding first.
 *
 * Reads every Accept-Encoding line of the request (RFC 9110 section
 * 12.5.3), the status and the response's headers, then queues either
 * @a response itself (identity) or a response in its place (the gzip
 * representation, a gzip stream, a 304 or identity response framed as
 * libmicrohttpd cannot frame the response itself). A response not created
 * through mhdgz is queued unchanged (counted as MHDGZ_SKIP_UNTRACKED).
 *
 * This call cannot see the request method (libmicrohttpd 0.9.75 does not
 * tell it), so a HEAD is treated as a GET: use mhdgz_queue_response_ex()
 * with the method to get the HEAD response GET's fields call for.
 *
 * 1xx, 204 and 304 responses carry no body and no Transfer-Encoding,
 * whatever the response kind. A 304 carries the Vary, ETag and length of
 * the 200 it stands for for this client (RFC 9110 sections 15.4.5 and
 * 8.6): queue the 200's own response with status 304 so that its length
 * can be known (an empty response queued with 304 says
 * "Content-Length: 0", as it would without mhdgz, and carries the fields
 * of a 200 that may be coded: Vary, the gzip form of the ETag; when the
 * 200 is itself empty, an empty file say, mark it
 * mhdgz_response_set_identity() so that its 304 carries that 200's own
 * fields). When that 200 has no
 * length (a content reader's gzip stream, a stream of unknown size), the
 * 304 has none. Built against libmicrohttpd 1.0 it is a head-only response
 * (MHD_RF_HEAD_ONLY_RESPONSE) and the connection stays open for the next
 * request, unless the application's own response would close it (flags
 * MHD_RF_HTTP_1_0_COMPATIBLE_STRICT or MHD_RF_HTTP_1_0_SERVER, which
 * forbid chunked framing, or its own "Connection: close"). Built against
 * 0.9.75 the connection closes after it: 0.9.75 sends a Content-Length
 * with every other 304.
 *
 * On the first queue of a compressible response, "Vary: Accept-Encoding" is
 * merged into the response's own Vary header (the identity variant must
 * carry it too, RFC 9110 section 12.5.5); later queues do not modify it.
 *
 * @param gz the handler that created the response.
 * @param connection as for MHD_queue_response().
 * @param status_code as for MHD_queue_response().
 * @param response as for MHD_queue_response(); it stays owned by the
 *        caller.
 * @return MHD_queue_response()'s result; MHD_NO also if an argument is
 *         NULL. Failures of compression never fail the call: the identity
 *         response is queued.
 * @note Thread-safe; call from the access handler as libmicrohttpd requires.
 */
MHDGZ_API enum MHD_Result mhdgz_queue_response(struct mhdgz *gz, struct MHD_Connection *connection,
					       unsigned int status_code,
					       struct MHD_Response *response);

/**
 * Same as MHD_set_response_options(response, flags, MHD_RO_END), and
 * remembered so that every response mhdgz queues in this response's place
 * (the gzip representation, a gzip stream, a 304 or HEAD response, the
 * identity response of a file) gets the same flags: libmicrohttpd cannot
 * read a response's flags back, so flags set with
 * MHD_set_response_options() directly reach only the response itself.
 * Every flag of libmicrohttpd 0.9.75 is carried
 * (MHD_RF_HTTP_1_0_COMPATIBLE_STRICT, MHD_RF_HTTP_1_0_SERVER,
 * MHD_RF_INSANITY_HEADER_CONTENT_LENGTH, MHD_RF_SEND_KEEP_ALIVE_HEADER).
 *
 * libmicrohttpd 1.0 adds MHD_RF_HEAD_ONLY_RESPONSE, which it accepts on an
 * empty response only (MHDGZ_EMHD on another): such a response frames a
 * representation mhdgz never sees, so it is always queued itself, never
 * compressed, its fields untouched (see mhdgz_response_empty(), which
 * takes the flags at creation).
 *
 * As with libmicrohttpd (0.9.75 and 1.0 alike), @a flags replace the
 * response's flags: pass every flag wanted. libmicrohttpd 1.0 also refuses
 * to drop MHD_RF_INSANITY_HEADER_CONTENT_LENGTH, or (without it)
 * MHD_RF_HEAD_ONLY_RESPONSE, from a response that has an application
 * Content-Length field; whatever libmicrohttpd refuses leaves the flags
 * mhdgz carries unchanged.
 *
 * @param gz the handler that created @a response.
 * @param response a response created through @a gz.
 * @param flags as for MHD_set_response_options(); they replace earlier ones.
 * @return 0; MHDGZ_EINVAL if @a response was not created by @a gz;
 *         MHDGZ_EMHD if libmicrohttpd refused the flags.
 * @note Thread-safe; call before the response is first queued.
 */
MHDGZ_API int mhdgz_response_set_options(struct mhdgz *gz, struct MHD_Response *response,
					 enum MHD_ResponseFlags flags);

/**
 * Opt one response out of compression: it is always queued identity,
 * unchanged (no Vary added). Counted as MHDGZ_SKIP_OPT_OUT.
 *
 * @return 0, MHDGZ_EINVAL if @a response was not created by @a gz.
 * @note Thread-safe; call before the response is first queued.
 */
MHDGZ_API int mhdgz_response_set_identity(struct mhdgz *gz, struct MHD_Response *response);

/**
 * Compress one response at every queue instead of keeping its coded
 * bodies with it. By default a response queued more than once (made once
 * and reused) keeps each coded body it was sent with (gzip, zstd, br), so
 * later clients get those bytes without compression, and the memory is
 * held until the response is destroyed. After this call its gzip, zstd
 * and br bodies are compressed for each queue, outside the response's
 * lock (so threads queueing the same response compress at once, as with a
 * response each), and freed once sent: a reused response holds only its
 * identity body. For an application that keeps many responses and bounds
 * their memory (a file server keeping its files' responses), or that
 * measures compression per request.
 *
 * What a HEAD or a 304 needs is the coded length of the 200: it is taken
 * without compressing when known, from the response's strong ETag (the
 * handler remembers coded lengths by strong ETag) or, for a buffer
 * response, from its previous compression (the body cannot change);
 * otherwise the body is compressed for that HEAD or 304 too. A dcz body
 * (RFC 9842) is also made per queue, but the last one per dictionary stays
 * with the response until the next. The handler's file cache (struct
 * mhdgz_options file_cache_nbytes) is separate and still applies to file
 * responses.
 *
 * @param gz the handler that created @a response.
 * @param response a response created through @a gz; stays the caller's.
 * @return 0; MHDGZ_EINVAL if @a gz or @a response is NULL or @a response
 *         was not created by @a gz.
 * @note Thread-safe. Call it before the response is first queued: coded
 *       bodies kept by earlier queues stay with the response (unused) until
 *       it is destroyed. The response may then be queued from any number of
 *       threads at once, as any response of the handler.
 */
MHDGZ_API int mhdgz_response_set_uncached(struct mhdgz *gz, struct MHD_Response *response);

/**
 * Turn BREACH length hiding on or off for one response, overriding the
 * handler's MHDGZ_F_LENGTH_HIDING. With it, every gzip body of the
 * response carries 1 to length_hiding_max bytes of padding in its gzip
 * header comment (RFC 1952 section 2.3.1, FCOMMENT; every gzip decoder
 * skips it), the length given by HMAC-SHA256, under the handler's key, of:
 *
 *  - a body compressed whole (buffers, files up to 1 MiB): the whole
 *    body. The same body gets the same bytes, so the cached gzip body,
 *    HEAD and 304 lengths stay right.
 *  - a stream (content reader, pipe, larger file): its ETag field, if
 *    any, and its first 64 KiB (all of it if shorter). The gzip header is
 *    held back until they have been read, so a slow producer's first
 *    bytes are delayed by up to that much; a low-latency stream
 *    (mhdgz_response_set_low_latency(), text/event-stream) instead keys on
 *    its reader's first call and adds no latency. Content after the first
 *    64 KiB does not change the padding: a page whose secret and
 *    reflected input both lie beyond it gets a constant padding, which
 *    hides nothing (serve it identity, see mhdgz(3), LENGTH HIDING). An ETag
 *    that changes on every request of the same content would let an
 *    attacker average: give streams no ETag or one derived from the
 *    content.
 *
 * Responses served identity are not padded (their length is the
 * application's). A padded response is never sent zstd, br or dcz (they
 * would carry no padding): gzip or identity only. A body whose padded gzip
 * bytes are not smaller than the body is served identity. A padded stream holds up to 64 KiB plus one
 * reader block of the body (the key's bytes) until it ends.
 *
 * @param gz the handler that created @a response.
 * @param response a response created through @a gz.
 * @param on nonzero: pad its gzip bodies; 0: do not.
 * @return 0, MHDGZ_EINVAL if @a response was not created by @a gz.
 * @note Thread-safe; call before the response is first queued.
 */
MHDGZ_API int mhdgz_response_set_length_hiding(struct mhdgz *gz, struct MHD_Response *response,
					       int on);

/**
 * Why a response was, or was not, compressed. The decision takes these
 * early-outs in this order; each is counted in struct mhdgz_stats.
 */
enum mhdgz_reason {
	MHDGZ_COMPRESSED = 0,    /**< gzip variant queued */
	MHDGZ_SKIP_UNTRACKED,    /**< response not created by this handler */
	MHDGZ_SKIP_OPT_OUT,      /**< mhdgz_response_set_identity() */
	MHDGZ_SKIP_STATUS,       /**< 1xx, 204, 304: no content (RFC 9110 6.4.1) */
	MHDGZ_SKIP_RANGE,        /**< 206 or a Content-Range header */
	MHDGZ_SKIP_ENCODED,      /**< already has a Content-Encoding */
	MHDGZ_SKIP_NO_TRANSFORM, /**< Cache-Control: no-transform (RFC 9111 5.2.2.6) */
	MHDGZ_SKIP_EMPTY,        /**< empty body (also a head-only response, libmicrohttpd 1.0) */
	MHDGZ_SKIP_TYPE,         /**< media type not compressible */
	MHDGZ_SKIP_NOT_ACCEPTED, /**< client does not accept gzip */
	MHDGZ_SKIP_SMALL,        /**< body below min_nbytes */
	MHDGZ_SKIP_NOT_SMALLER,  /**< gzip output not smaller than the body */
	MHDGZ_SKIP_ERROR,        /**< allocation or compressor failure */
	MHDGZ_REASON_COUNT
};

/**
 * A short lowercase name for a reason ("compressed", "not-accepted", ...).
 *
 * @return a static string; "unknown" for a value out of range.
 */
MHDGZ_API const char *mhdgz_reason_name(enum mhdgz_reason reason);

/** A byte count that is not known (a stream of unknown length, a body
 * compressed as it is sent). */
#define MHDGZ_NBYTES_UNKNOWN UINT64_MAX

/** What mhdgz_queue_response_ex() queued. */
struct mhdgz_outcome {
	/** sizeof(struct mhdgz_outcome), set by the caller. */
	size_t size;
	/** The content coding of the response queued: "gzip", "zstd", "br",
	 * "dcz" (mhdgz_queue_response_url()) or "identity"; a static string. */
	const char *coding;
	/** Why (MHDGZ_COMPRESSED for gzip). */
	enum mhdgz_reason reason;
	/** Bytes of the application's (identity) body, or
	 * MHDGZ_NBYTES_UNKNOWN (a stream of unknown size, a response not
	 * created through mhdgz). */
	uint64_t body_nbytes;
	/** Bytes of the body as coded: the gzip length of a body compressed
	 * whole (and of a HEAD's stream where it was computed), the identity
	 * length when not coded, MHDGZ_NBYTES_UNKNOWN for a gzip stream
	 * (compressed as it is sent). For HEAD, what GET would send; for 1xx,
	 * 204 and 304, 0. */
	uint64_t coded_nbytes;
};

/**
 * mhdgz_queue_response() for a request whose method is known, reporting
 * what was queued. Use it: only with the method can a HEAD response be
 * exactly the GET response's header fields without content (RFC 9110
 * section 9.3.2).
 *
 * For HEAD, the response queued carries the header fields the GET
 * response would carry and no content. Its length is the GET response's:
 * a body compressed whole has its gzip Content-Length; a file streamed
 * compressed (above the whole-file limit) of up to 16 MiB is compressed
 * once to learn its gzip length (the same bytes GET would stream; kept
 * with the response, and under its strong ETag for later responses); the
 * gzip stream of a content reader (a HEAD never runs the application's
 * reader), of a larger file, or of unknown length has no length. Built
 * against libmicrohttpd 1.0 that HEAD response is head-only and the
 * connection stays open (as for a 304, above); built against 0.9.75 the
 * connection is closed after the header block (0.9.75 cannot frame a HEAD
 * response of unknown length on a kept-alive connection: it writes a last
 * chunk after the header block). The same holds for the identity response
 * of a stream of unknown length. A stream of unknown size is decided from
 * its header fields, so its HEAD carries the fields its GET carries.
 *
 * @param gz the handler that created the response (NULL: queued as it is).
 * @param connection as for mhdgz_queue_response().
 * @param method the request method as the access handler received it
 *        ("GET", "HEAD", ...); borrowed. NULL: treated as GET.
 * @param status_code as for mhdgz_queue_response().
 * @param response as for mhdgz_queue_response().
 * @param outcome receives what was queued, with outcome->size set by the
 *        caller; NULL if not wanted.
 * @return MHD_queue_response()'s result; MHD_NO also for a NULL connection
 *         or response or an unknown outcome->size (nothing queued then).
 * @note Thread-safe; call from the access handler as libmicrohttpd requires.
 */
MHDGZ_API enum MHD_Result mhdgz_queue_response_ex(struct mhdgz *gz,
						  struct MHD_Connection *connection,
						  const char *method, unsigned int status_code,
						  struct MHD_Response *response,
						  struct mhdgz_outcome *outcome);

/* ===================================================================== */
/*               Compression dictionaries (RFC 9842)                     */
/* ===================================================================== */

/*
 * RFC 9842 (Compression Dictionary Transport): a response names itself a
 * dictionary for later requests (Use-As-Dictionary); a client that holds
 * it sends its SHA-256 (Available-Dictionary) with "dcz" in
 * Accept-Encoding, and the answer may be "dcz": a 40-byte header (the zstd
 * skippable frame 5e 2a 4d 18 20 00 00 00, then the SHA-256) followed by
 * one zstd frame compressed with the dictionary as raw content. The window
 * the frame declares is at most the larger of 8 MiB and 1.25 times the
 * dictionary (at most 128 MiB), and the frame reaches the start of the
 * dictionary when its body is no larger than that (the frame then
 * declares the body's size); a larger body gets the largest power-of-two
 * window within the limit. Dictionaries over 8 MiB are searched with
 * zstd's long-distance matching (one pass over the dictionary per dcz
 * body built). "dcb" (brotli with a dictionary) needs brotli 1.1, which Debian 12
 * does not ship: not offered.
 *
 * Match patterns: a subset of URLPattern's pathname syntax, same origin:
 * a path starting with '/', of printable ASCII, where '*' matches any run
 * of characters ('/' included) and everything else matches itself
 * (case-sensitive). Not supported (MHDGZ_EINVAL): absolute URLs and other
 * components (scheme, host, port, search, hash), named groups (":name"),
 * regular expression and non-capturing groups ("(...)", "{...}"),
 * modifiers ('?', '+'), escapes ('\'), '"'. The request's query string is
 * not looked at.
 */

/** A dictionary registered with mhdgz_dictionary_add(); owned by the
 * handler, valid until mhdgz_free(). */
struct mhdgz_dictionary;

/** What a dictionary is for (RFC 9842 section 2.1.1-2.1.4). */
struct mhdgz_dictionary_options {
	/** sizeof(struct mhdgz_dictionary_options), set by the caller. */
	size_t size;
	/** The URL pattern of the requests it serves (required; the subset
	 * above, at most 1024 bytes). Copied. */
	const char *match;
	/** Fetch destinations it is for ("script", "style", ...; lowercase
	 * letters and '-'), a NULL-terminated list of at most 8, or NULL:
	 * any. Advertised as match-dest; not checked by the server. Copied. */
	const char *const *match_dest;
	/** Its id (printable ASCII without '"' and '\', at most 1024
	 * bytes), or NULL. Advertised; a request's Dictionary-ID, when sent,
	 * must then be this id for dcz. Copied. */
	const char *id;
};

/**
 * Register a dictionary: its bytes (typically the body of an earlier
 * version of the resources its pattern matches). Its SHA-256 (nettle) is
 * computed and a zstd dictionary prepared once, at the handler's zstd
 * level (MHDGZ zstd default 3 when zstd is not among its codings), and
 * shared read-only by every thread. From now on a response queued with
 * mhdgz_queue_response_url() for a path its pattern matches may be dcz,
 * and when its representation depends on Accept-Encoding its Vary names
 * Available-Dictionary too (RFC 9842 section 6.2), whatever coding is
 * chosen. (A cached variant keeps the Vary it was built with: a response
 * is expected to be queued for one path, or for paths that agree on
 * matching.)
 *
 * @param gz the handler.
 * @param data the dictionary's bytes; copied.
 * @param data_nbytes its size in bytes, 1 to 100 MiB (so that the window
 *        may cover all of it).
 * @param opts its pattern, destinations and id; borrowed.
 * @param dict_ret receives the dictionary (owned by @a gz); may be NULL.
 * @return 0; MHDGZ_EINVAL for NULL arguments, an unknown opts->size, an
 *         empty or too large dictionary, a pattern, destination or id
 *         outside what is described above; MHDGZ_ENOTSUP without zstd;
 *         MHDGZ_ENOMEM.
 * @note Thread-safe, also while other threads queue responses (a
 *       dictionary is published whole). Registering a dictionary twice
 *       makes two entries; the first registered that matches wins.
 */
MHDGZ_API int mhdgz_dictionary_add(struct mhdgz *gz, const void *data, size_t data_nbytes,
				   const struct mhdgz_dictionary_options *opts,
				   const struct mhdgz_dictionary **dict_ret);

/**
 * mhdgz_dictionary_add() with the body of @a response as the dictionary,
 * then mhdgz_response_use_as_dictionary() on it: the response that
 * delivers the dictionary advertises it.
 *
 * @param gz the handler that created @a response.
 * @param response a buffer response (mhdgz_response_from_buffer*,
 *        _from_iovec) or a file response (mhdgz_response_from_fd*, read
 *        now) made through @a gz and not yet queued; borrowed.
 * @param opts as for mhdgz_dictionary_add().
 * @param dict_ret as for mhdgz_dictionary_add().
 * @return 0; MHDGZ_EINVAL as for mhdgz_dictionary_add(), and for a
 *         response not made by @a gz, a stream, or one already queued
 *         (its fields are then read-only); MHDGZ_EBACKEND when the file
 *         cannot be read; MHDGZ_EMHD; MHDGZ_ENOTSUP; MHDGZ_ENOMEM. On an
 *         error after registration (MHDGZ_EMHD) the dictionary stays
 *         registered.
 * @note Thread-safe as mhdgz_dictionary_add(); not while another thread
 *       queues @a response.
 */
MHDGZ_API int mhdgz_dictionary_add_response(struct mhdgz *gz, struct MHD_Response *response,
					    const struct mhdgz_dictionary_options *opts,
					    const struct mhdgz_dictionary **dict_ret);

/**
 * Advertise @a dict on @a response: adds the Use-As-Dictionary field
 * (RFC 9842 section 2.1): match="...", match-dest=(...) and id="..." as
 * registered. The response's body should be the dictionary's bytes, and
 * it must be cacheable (e.g. Cache-Control: max-age) for a client to
 * keep it.
 *
 * @param response any response, before it is first queued; borrowed.
 * @param dict the dictionary; borrowed.
 * @return 0; MHDGZ_EINVAL for NULL arguments; MHDGZ_EMHD if
 *         libmicrohttpd refused the field.
 * @note Not thread-safe on the same response (like MHD_add_response_header).
 */
MHDGZ_API int mhdgz_response_use_as_dictionary(struct MHD_Response *response,
					       const struct mhdgz_dictionary *dict);

/**
 * The SHA-256 of @a dict (what a client sends as Available-Dictionary).
 *
 * @param dict the dictionary; borrowed.
 * @param sha256_ret receives the 32 bytes.
 * @return 0, MHDGZ_EINVAL for NULL arguments. Thread-safe.
 */
MHDGZ_API int mhdgz_dictionary_sha256(const struct mhdgz_dictionary *dict, uint8_t sha256_ret[32]);

/**
 * mhdgz_queue_response_ex() with the request's path, which
 * libmicrohttpd 0.9.75 hands to the access handler only: with it the
 * response may be dictionary-compressed (RFC 9842) when all of these
 * hold: the request's Accept-Encoding lists "dcz" with a q not below the
 * coding the ordinary decision would choose; its Available-Dictionary
 * is the SHA-256 of a registered dictionary whose pattern matches @a url
 * (and its Dictionary-ID, if sent, that dictionary's id); the response is
 * a buffer or a whole-compressed file, of at least min_nbytes bytes, of a
 * compressible type, not otherwise excluded (range, no-transform,
 * Content-Encoding, 304); and the dcz body is smaller than the identity
 * one. The dcz body is built once per (response, dictionary) and cached
 * with the response. Otherwise the ordinary decision runs, as in
 * mhdgz_queue_response_ex(). outcome->coding is then "dcz" (the response
 * carries Content-Encoding: dcz; its ETag under MHDGZ_ETAG_SUFFIX gets
 * "-dcz-" and the first 4 bytes of the dictionary's hash in hex, which
 * mhdgz_etag_match() takes as naming the resource; a 304 queued for such
 * a request stands for the dcz 200: its ETag and length).
 * Dictionary-ID is a request field only: the RFC has the server echo
 * nothing.
 *
 * @param gz as for mhdgz_queue_response_ex().
 * @param connection as for mhdgz_queue_response_ex().
 * @param method as for mhdgz_queue_response_ex().
 * @param url the request path as the access handler received it
 *        (without the query); borrowed. NULL: no dcz.
 * @param status_code as for mhdgz_queue_response_ex().
 * @param response as for mhdgz_queue_response_ex().
 * @param outcome as for mhdgz_queue_response_ex().
 * @return as mhdgz_queue_response_ex().
 * @note Thread-safe; call from the access handler as libmicrohttpd requires.
 */
MHDGZ_API enum MHD_Result
mhdgz_queue_response_url(struct mhdgz *gz, struct MHD_Connection *connection, const char *method,
			 const char *url, unsigned int status_code, struct MHD_Response *response,
			 struct mhdgz_outcome *outcome);

/* ===================================================================== */
/*                              Streaming                                */
/* ===================================================================== */

/**
 * Same as MHD_create_response_from_callback(): a body produced by the
 * caller's content reader, registered with the handler so that
 * mhdgz_queue_response() can compress it on the fly.
 *
 * When the response is compressed, each connection gets its own gzip
 * stream (a streaming compressor taken from the compressor pool, returned as
 * soon as the gzip trailer is produced or the connection goes away), the
 * body is sent with chunked transfer coding (its compressed size is not
 * known in advance), and the reader is called at positions 0, 1, ... just
 * as libmicrohttpd would call it. Output per call never exceeds
 * libmicrohttpd's buffer. MHD_CONTENT_READER_END_OF_STREAM ends the body
 * with a complete gzip member (before the announced @a size it is an
 * error, as for libmicrohttpd); MHD_CONTENT_READER_END_WITH_ERROR ends the
 * response with an error (no trailer is faked). A reader returning 0 is
 * called again later, without empty chunks being sent; what the
 * compressor holds is sync-flushed first, so a stalled stream does not
 * hold back data already produced. As with libmicrohttpd, the reader of
 * one response is never called on two threads at once, even when several
 * connections stream it.
 *
 * A response of known size below min_nbytes is served identity, and so is
 * one without Content-Type (a reader's bytes cannot be sniffed: the queue
 * call never runs it). One of unknown size (MHD_SIZE_UNKNOWN) with a
 * compressible type is coded whatever its length (min_nbytes needs one).
 * The reader is called as libmicrohttpd calls it: at most once per
 * libmicrohttpd reader call, never inside the queue call, and what it gave
 * goes out after each call or, when the compressor holds it, within 20 ms
 * (a sync flush). Bulk streams are not flushed per chunk (ratio matters); use
 * mhdgz_response_set_low_latency() for streams whose every chunk must
 * reach the client at once (text/event-stream responses are treated so
 * automatically).
 *
 * The reader may use its own response while it reads, as libmicrohttpd
 * allows: with MHD_SIZE_UNKNOWN, the first queue of the response, coded
 * or not, is the response itself (coded: its header fields rewritten for
 * the coding), so libmicrohttpd keeps it alive while the reader runs even
 * after the application destroyed it, and a footer the reader adds
 * (MHD_add_response_footer()) goes out in the trailer of the coded body.
 * Later queues of the same response, and every coded queue of one of
 * known size (whose libmicrohttpd framing would announce the identity
 * length), are sent as responses of mhdgz's: there a reader must not use
 * its response once the application has destroyed it (a reader that adds
 * footers announces MHD_SIZE_UNKNOWN). The stream in the response itself
 * lives as long as the response: a response the application keeps and
 * queues again, whose first coded client left mid-stream, holds that
 * stream's compressor until it is destroyed (one per response, not per
 * request; in_place_shared_client_leaves).
 *
 * With a whole-buffer-only backend (libdeflate), streams are compressed
 * by zlib at the same level, capped at zlib's 9 (DESIGN.md, design notes).
 *
 * @param gz the handler; a response keeps it alive (see mhdgz_free()).
 * @param size body size in bytes, or MHD_SIZE_UNKNOWN.
 * @param block_size bytes of room the reader is given per call, as for
 *        MHD_create_response_from_callback().
 * @param crc the content reader.
 * @param crc_cls its closure.
 * @param crfc called as crfc(crc_cls) exactly once, after the response and
 *        every stream made from it are done; may be NULL.
 * @return a response owned by the caller, or NULL on failure (then crfc
 *         is not called).
 * @note Thread-safe.
 */
MHDGZ_API struct MHD_Response *mhdgz_response_from_callback(struct mhdgz *gz, uint64_t size,
							    size_t block_size,
							    MHD_ContentReaderCallback crc,
							    void *crc_cls,
							    MHD_ContentReaderFreeCallback crfc);

/**
 * Same as MHD_create_response_from_fd_at_offset64(): a file body. The
 * identity GET of a file up to 64 KiB is read (pread()) into a buffer
 * response at each queue, so libmicrohttpd sends its header and body in
 * one sendmsg() (libmicrohttpd 0.9.75 sends the header of an fd response
 * in a segment of its own); a larger file, a HEAD, or a file that turns
 * out shorter than @a size keeps libmicrohttpd's own file path (sendfile
 * where available), on a duplicate of @a fd. Either way each queue sends
 * what the file holds then, as libmicrohttpd's fd response does. A gzip
 * response of a file up to 1 MiB is compressed whole when first queued
 * (with Content-Length, and reused while the response lives: later
 * changes to the file are not seen by it); a larger file is read with pread() from its own duplicate
 * of @a fd and compressed as a stream per connection (chunked). A file
 * shorter than @a size ends the response with an error. An untyped file
 * is sniffed from its first 512 bytes.
 *
 * @param gz the handler.
 * @param size bytes of the file to send.
 * @param fd open file descriptor; on success ownership passes to the
 *        response (closed when it is freed); on failure (NULL), exactly as
 *        with libmicrohttpd, the caller still owns it. mhdgz duplicates it
 *        close-on-exec where it needs a descriptor of its own.
 * @param offset byte offset in the file where the body starts.
 * @return a response owned by the caller, or NULL on failure.
 * @note Thread-safe.
 */
MHDGZ_API struct MHD_Response *mhdgz_response_from_fd_at_offset64(struct mhdgz *gz, uint64_t size,
								  int fd, uint64_t offset);

/**
 * Same as MHD_create_response_from_fd(): mhdgz_response_from_fd_at_offset64()
 * with offset 0.
 */
MHDGZ_API struct MHD_Response *mhdgz_response_from_fd(struct mhdgz *gz, size_t size, int fd);

/**
 * Same as MHD_create_response_from_fd64(): mhdgz_response_from_fd_at_offset64()
 * with offset 0.
 */
MHDGZ_API struct MHD_Response *mhdgz_response_from_fd64(struct mhdgz *gz, uint64_t size, int fd);

/**
 * Same as MHD_create_response_from_pipe(): a body read from @a fd until
 * end of file, of unknown size. It is decided from its header fields like
 * any stream of unknown size (a compressible type: coded; untyped:
 * identity) and, when compressed, sent as a gzip stream (chunked). A pipe can be read only once: queue the response once,
 * as with libmicrohttpd.
 *
 * @param gz the handler.
 * @param fd the read end of a pipe (blocking, as libmicrohttpd wants);
 *        on success ownership passes to the response (closed when it is
 *        freed); on failure the caller still owns it.
 * @return a response owned by the caller, or NULL on failure.
 * @note Thread-safe.
 */
MHDGZ_API struct MHD_Response *mhdgz_response_from_pipe(struct mhdgz *gz, int fd);

/**
 * Same as MHD_create_response_from_buffer_with_free_callback(): the body
 * at @a buffer (borrowed until the response is freed), then
 * crfc(@a buffer) runs once, when the response and every variant mhdgz
 * made of it are done with it. On failure (NULL) @a crfc is not called
 * and the buffer is the caller's, as with libmicrohttpd.
 *
 * @param gz the handler.
 * @param size body size in bytes.
 * @param buffer the body; NULL only if size is 0.
 * @param crfc called with @a buffer to release it; may be NULL.
 * @return a response owned by the caller, or NULL.
 * @note Thread-safe.
 */
MHDGZ_API struct MHD_Response *
mhdgz_response_from_buffer_with_free_callback(struct mhdgz *gz, size_t size, void *buffer,
					      MHD_ContentReaderFreeCallback crfc);

/**
 * Same as MHD_create_response_from_buffer_with_free_callback_cls():
 * mhdgz_response_from_buffer_with_free_callback() calling
 * crfc(@a crfc_cls) instead.
 */
MHDGZ_API struct MHD_Response *
mhdgz_response_from_buffer_with_free_callback_cls(struct mhdgz *gz, size_t size, void *buffer,
						  MHD_ContentReaderFreeCallback crfc,
						  void *crfc_cls);

/**
 * Same as MHD_create_response_from_iovec(): a body gathered from
 * @a iovcnt elements. mhdgz copies the elements into one buffer of its
 * own when the response is made (so the body costs its size twice while
 * the application keeps its elements); free_cb(@a cls) still runs once,
 * when the response is freed, as libmicrohttpd would run it. On failure
 * (NULL) @a free_cb is not called.
 *
 * @param gz the handler.
 * @param iov the elements; borrowed for the call.
 * @param iovcnt the number of elements.
 * @param free_cb as for MHD_create_response_from_iovec(); may be NULL.
 * @param cls its argument.
 * @return a response owned by the caller, or NULL.
 * @note Thread-safe.
 */
MHDGZ_API struct MHD_Response *
mhdgz_response_from_iovec(struct mhdgz *gz, const struct MHD_IoVec *iov, unsigned int iovcnt,
			  MHD_ContentReaderFreeCallback free_cb, void *cls);

/**
 * Mark a streaming response low-latency: every chunk its reader produces is
 * compressed and sync-flushed (gzip: an RFC 1951 empty stored block; zstd:
 * the block closed, ZSTD_e_flush; br: BROTLI_OPERATION_FLUSH) before the
 * reader is asked for more, so it reaches the client at once. Without it a
 * stream's bytes still reach the client within 20 ms of the reader call
 * that produced them (a sync flush of what the compressor has held that
 * long), so this is for streams whose every chunk must go at once, such
 * as interactive events, at the cost of ratio (a flush per chunk).
 *
 * @return 0, MHDGZ_EINVAL if @a response is not a streaming response of
 *         @a gz. Call before the response is first queued.
 */
MHDGZ_API int mhdgz_response_set_low_latency(struct mhdgz *gz, struct MHD_Response *response);

/* ===================================================================== */
/*                     Accept-Encoding and validators                    */
/* ===================================================================== */

/**
 * The q-value (RFC 9110 section 12.4.2) the request gives to gzip, in
 * thousandths (0..1000), from all of its Accept-Encoding lines
 * (RFC 9110 section 12.5.3): an explicit "gzip" or "x-gzip" wins over "*";
 * codings and the "q" parameter are case-insensitive; a coding listed
 * twice counts with its higher q; parameter values may be quoted-strings
 * (RFC 9110 section 5.6.4: a comma inside one separates nothing); empty
 * parameters ("gzip;q=0 ;") are skipped; a malformed element (bad q such
 * as "abc", "-1", "1.0001", four decimals or quoted; a '"' never closed)
 * is ignored, and the other elements of its line still count.
 *
 * @param lines the header values; borrowed; NULL entries are skipped.
 * @param count number of lines; 0 means no Accept-Encoding header.
 * @return q in thousandths; 0 if gzip is not acceptable or the header is
 *         absent (identity only). Thread-safe, allocates nothing.
 */
MHDGZ_API unsigned int mhdgz_accept_gzip_q(const char *const *lines, size_t count);

/**
 * The content coding to send, chosen as the handler chooses it (RFC 9110
 * section 12.5.3): the highest q among the codings offered wins (an
 * explicit listing over "*"), equal q-values go to the one first in
 * @a offered, and none when that q is 0 or an explicitly listed identity
 * has a higher q. For an application that serves precompressed files
 * itself (gzserve --precompressed).
 *
 * @param lines the Accept-Encoding values, as for mhdgz_accept_gzip_q().
 * @param count number of lines; 0 means no Accept-Encoding header.
 * @param offered the codings the caller can send, in its order of
 *        preference; borrowed; values out of range are ignored.
 * @param noffered the number of them.
 * @param coding_ret receives the coding; untouched when 0 is returned.
 * @return 1 and *coding_ret, or 0: send identity. Thread-safe, allocates
 *         nothing.
 */
MHDGZ_API int mhdgz_accept_coding(const char *const *lines, size_t count,
				  const enum mhdgz_coding *offered, size_t noffered,
				  enum mhdgz_coding *coding_ret);

/**
 * Whether an If-None-Match or If-Match field value matches an ETag,
 * knowing the ETag transformations this library applies: a member that is
 * the weak form W/"x" or a suffixed form ("x-gzip", "x-zstd", "x-br") of the resource's
 * "x" denotes the same resource state.
 *
 * @param field_value the header value (a list of entity-tags or "*");
 *        borrowed; NULL or malformed elements never match.
 * @param etag the resource's current ETag as the application sets it
 *        ("x" or W/"x"); borrowed.
 * @param weak nonzero for the weak comparison (If-None-Match, RFC 9110
 *        section 13.1.2), zero for the strong comparison (If-Match,
 *        section 13.1.1: a weak member or weak @a etag never matches, but a
 *        "x-gzip" member matches a strong "x").
 * @return 1 if it matches, 0 if not. Thread-safe.
 */
MHDGZ_API int mhdgz_etag_match(const char *field_value, const char *etag, int weak);

/**
 * Evaluate If-Match and If-None-Match of the request against the resource's
 * current ETag (RFC 9110 section 13.2.2, steps 1 and 3), accepting the
 * forms of the ETag mhdgz produced. The date preconditions need the
 * resource's modification time and are the caller's: If-Unmodified-Since
 * (step 2: only without If-Match, so it may be evaluated before this
 * call; 412 when modified after it) and If-Modified-Since (step 4: only
 * for GET and HEAD, and only when this returns 0 without If-None-Match;
 * 304 when not modified since). gzserve's validate.c does both.
 *
 * @param connection the request; borrowed.
 * @param method the request method ("GET", "HEAD", ...); borrowed.
 * @param etag the resource's ETag ("x" or W/"x"), or NULL if it has none.
 * @return 0 to proceed, 412 (Precondition Failed) or 304 (Not Modified, GET
 *         and HEAD only). Thread-safe.
 */
MHDGZ_API unsigned int mhdgz_evaluate_preconditions(struct MHD_Connection *connection,
						    const char *method, const char *etag);

/* ===================================================================== */
/*                  Request bodies: uploads coded gzip                   */
/* ===================================================================== */

/*
 * A request body sent with "Content-Encoding: gzip" (log shippers such as
 * Elastic Beats compress their bulk uploads so) reaches the access handler
 * in pieces (upload_data, *upload_data_size). A struct mhdgz_upload
 * inflates those pieces as they come with zlib and hands the decoded bytes
 * to a callback of the application, in bounded memory and within limits
 * that stop a decompression bomb (the problem of Apache mod_deflate's
 * CVE-2014-0118). The pattern, in the access handler:
 *
 *     first call:  mhdgz_upload_new (gz, connection, NULL, on_data, ctx, &up)
 *                  (keep up in *req_cls; return MHD_YES)
 *     each call with *upload_data_size > 0:
 *                  mhdgz_upload_feed (up, upload_data, upload_data_size)
 *                  (it consumes every byte; return MHD_YES)
 *     final call:  status = mhdgz_upload_finish (up)
 *                  status != 0: mhdgz_upload_queue_refusal (connection, up)
 *                  status == 0: the body is complete; answer as usual
 *     request completed callback: mhdgz_upload_free (up)
 *
 * The callback sees the decoded bytes as they come, before the body is
 * known to be whole: a member's CRC-32 and ISIZE are checked at its end,
 * and a limit may be passed later. Act on the body (store it, apply it)
 * only once mhdgz_upload_finish() has returned 0; until then treat what
 * the callback got as provisional (parse it, stage it).
 *
 * libmicrohttpd 0.9.75 accepts a response only before the body is read
 * (first call) or after it (final call), not while it is being read: so a
 * body refused half way is read to its end and discarded (no more
 * inflating: that costs only the reading), and the refusal is queued on the
 * final call. An application that would rather not read the rest returns
 * MHD_NO from the access handler instead (libmicrohttpd closes the
 * connection without a response). A refusal known from the header fields
 * (an unsupported coding, an identity Content-Length over the limit) may be
 * queued on the first call already: libmicrohttpd then sends it without
 * reading the body (also to a client waiting on "Expect: 100-continue")
 * and closes the connection. That is safe for a client that waits
 * (RFC 9110 section 10.1.1): it sends no body. A client that sends its
 * body at once (curl does so below 1 MiB) may still be writing when the
 * connection closes; its kernel then receives a reset (libmicrohttpd
 * 0.9.75 does not linger to drain the unread body, RFC 9112 section 9.6),
 * and the client may fail its send before it reads the refusal. Refuse
 * early for clients that sent "Expect: 100-continue", or where reading
 * the body is worse than that risk (an identity Content-Length far over
 * the limit); otherwise feed the body and refuse on the final call.
 */

/** Default max_decoded_nbytes of struct mhdgz_upload_options: 64 MiB. A
 * request body is held or parsed by the application; tens of MiB is what
 * bulk APIs accept (Elasticsearch's http.max_content_length is 100 MB). */
#define MHDGZ_UPLOAD_DEFAULT_MAX_DECODED_NBYTES (64ull * 1024 * 1024)
/** Default max_ratio: 200 decoded bytes per coded byte, Apache
 * mod_deflate's DeflateInflateRatioLimit. JSON and logs compress 5-30
 * times; a run of zeros about 1030 times (deflate's most). */
#define MHDGZ_UPLOAD_DEFAULT_MAX_RATIO 200u
/** Default ratio_burst_nbytes: the ratio is not checked until 1 MiB is
 * decoded, so a small but very repetitive body passes. */
#define MHDGZ_UPLOAD_DEFAULT_RATIO_BURST_NBYTES (1024u * 1024)
/** Default max_members: 16 gzip members (RFC 1952 section 2.2) back to
 * back; a compressor writes one, a concatenation of files a few. */
#define MHDGZ_UPLOAD_DEFAULT_MAX_MEMBERS 16u
/** Default chunk_nbytes: the data callback gets at most 16 KiB at once. */
#define MHDGZ_UPLOAD_DEFAULT_CHUNK_NBYTES (16u * 1024)
/** max_decoded_nbytes without a limit. */
#define MHDGZ_UPLOAD_UNLIMITED UINT64_MAX

/**
 * Limits of one request body, for mhdgz_upload_new(). Zero-initialise,
 * set size, then set what you need: every zero field means its default.
 */
struct mhdgz_upload_options {
	/** sizeof(struct mhdgz_upload_options); another size is rejected with
	 * MHDGZ_EINVAL. */
	size_t size;
	/** Most decoded bytes of the body, in bytes (for identity bodies too,
	 * whose decoded bytes are the bytes sent); more is refused with 413
	 * (MHDGZ_UPLOAD_TOO_LARGE): a gzip body has then given the callback
	 * exactly this many bytes (at most one byte past it was decoded), an
	 * identity body none of the piece that would pass it.
	 * 0 = MHDGZ_UPLOAD_DEFAULT_MAX_DECODED_NBYTES; MHDGZ_UPLOAD_UNLIMITED
	 * for none. */
	uint64_t max_decoded_nbytes;
	/** Most decoded bytes per coded byte read, once more than
	 * ratio_burst_nbytes are decoded (gzip only); more is refused with 413
	 * (MHDGZ_UPLOAD_RATIO). 0 = MHDGZ_UPLOAD_DEFAULT_MAX_RATIO; a value
	 * above 1032 never triggers (deflate cannot expand more). */
	unsigned int max_ratio;
	/** Decoded bytes before max_ratio is checked, in bytes;
	 * 0 = MHDGZ_UPLOAD_DEFAULT_RATIO_BURST_NBYTES (use 1 to check from
	 * the start). */
	uint64_t ratio_burst_nbytes;
	/** Most gzip members in the body; one more is refused with 413
	 * (MHDGZ_UPLOAD_MEMBERS). 0 = MHDGZ_UPLOAD_DEFAULT_MAX_MEMBERS. */
	unsigned int max_members;
	/** Most decoded bytes per call of the data callback, in bytes (the
	 * inflater's output buffer); 0 = MHDGZ_UPLOAD_DEFAULT_CHUNK_NBYTES.
	 * Identity bytes are passed as libmicrohttpd gives them. */
	size_t chunk_nbytes;
};

/**
 * Why an upload was refused (the first refusal is final); each is
 * counted in struct mhdgz_stats (uploads_refused). The status to send is
 * in parentheses.
 */
enum mhdgz_upload_refusal {
	MHDGZ_UPLOAD_OK = 0,      /**< not refused (counted when the body completes) */
	MHDGZ_UPLOAD_CODING,      /**< (415) a Content-Encoding other than gzip, x-gzip and
				   *   identity, or gzip twice (RFC 9110 section 15.5.16) */
	MHDGZ_UPLOAD_TOO_LARGE,   /**< (413) more than max_decoded_nbytes, or an identity
				   *   Content-Length above it */
	MHDGZ_UPLOAD_RATIO,       /**< (413) over max_ratio past the burst */
	MHDGZ_UPLOAD_MEMBERS,     /**< (413) more than max_members gzip members */
	MHDGZ_UPLOAD_MALFORMED,   /**< (400) not gzip, corrupt deflate data, a wrong CRC-32 or
				   *   ISIZE (RFC 1952 section 2.3.1), bytes after the last
				   *   member that do not begin another */
	MHDGZ_UPLOAD_TRUNCATED,   /**< (400) the body ended inside a gzip member */
	MHDGZ_UPLOAD_APPLICATION, /**< (the callback's) the data callback refused the bytes */
	MHDGZ_UPLOAD_NOMEM,       /**< (500) an allocation failed while inflating */
	MHDGZ_UPLOAD_REFUSAL_COUNT
};

/**
 * Receives decoded bytes of a request body, in order, as they are
 * decoded: data[0..nbytes) (nbytes > 0, at most chunk_nbytes for gzip),
 * borrowed for the call only. Called from mhdgz_upload_feed(), so on the
 * thread of the access handler.
 *
 * @param cls the data_cls given to mhdgz_upload_new().
 * @param data the decoded bytes; borrowed for the call.
 * @param nbytes how many, in bytes (at least 1).
 * @return 0 to go on; an HTTP status (400-599) to refuse the body
 *         (MHDGZ_UPLOAD_APPLICATION): no more bytes are delivered and the
 *         status is what mhdgz_upload_feed() and mhdgz_upload_finish()
 *         return. Another nonzero value is taken as 500.
 */
typedef unsigned int (*mhdgz_upload_data_fn)(void *cls, const void *data, size_t nbytes);

/** A request body being read and decoded (one per request). */
struct mhdgz_upload;

/**
 * Begin reading a request body: reads the request's Content-Encoding
 * fields (every line; a comma-separated list, tokens case-insensitive,
 * RFC 9110 section 8.4) and, for identity, its Content-Length. Absent,
 * empty or "identity": the bytes are passed to @a data_fn as they come.
 * "gzip" or "x-gzip" once (identity elements aside): inflated (one or more
 * members; an empty body is an empty body). Anything else: the upload is
 * created already refused with 415 (MHDGZ_UPLOAD_CODING), and an identity
 * Content-Length above max_decoded_nbytes with 413: mhdgz_upload_feed()
 * then discards the body and mhdgz_upload_finish() returns the status.
 *
 * Memory: for gzip, zlib's inflate state (a 32 KiB window and about 7 KiB)
 * plus chunk_nbytes, allocated here through the allocator of
 * mhdgz_set_allocator(); for identity, about a hundred bytes.
 *
 * @param gz the handler whose statistics count the upload; the upload
 *        keeps it alive until mhdgz_upload_free() (as a response does).
 * @param connection the request, on the access handler's first call;
 *        borrowed for this call only.
 * @param opts limits, or NULL for the defaults; copied.
 * @param data_fn receives the decoded bytes; must not be NULL.
 * @param data_cls its first argument; borrowed.
 * @param up_ret receives the upload, owned by the caller: release it with
 *        mhdgz_upload_free() when the request completes (also when it
 *        ends early). Untouched on error.
 * @return 0 (also for a body refused from its header fields: see
 *         mhdgz_upload_get_info()); MHDGZ_EINVAL for a NULL gz,
 *         connection, data_fn or up_ret or an unknown opts->size;
 *         MHDGZ_ENOMEM.
 * @note Thread-safe; each upload is then used by one thread at a time
 *       (libmicrohttpd calls the access handler of a connection so).
 */
MHDGZ_API int mhdgz_upload_new(struct mhdgz *gz, struct MHD_Connection *connection,
			       const struct mhdgz_upload_options *opts,
			       mhdgz_upload_data_fn data_fn, void *data_cls,
			       struct mhdgz_upload **up_ret);

/**
 * Read the next piece of the body, as the access handler received it:
 * decode it and pass what it decodes to the data callback, checking the
 * limits as it goes. Consumes every byte: *upload_data_size is set to 0
 * (so the access handler returns MHD_YES). Once refused, later pieces are
 * discarded without being decoded.
 *
 * @param up the upload; NULL returns 500.
 * @param upload_data the access handler's upload_data; borrowed.
 * @param upload_data_size the access handler's upload_data_size: bytes
 *        at upload_data on entry, 0 on return.
 * @return 0 while the body is accepted so far, else the status to send
 *         (413, 400, 415, 500 or the callback's; see enum
 *         mhdgz_upload_refusal), the same on every later call.
 * @note One thread at a time per upload (the access handler's); uploads
 *       of different requests may be fed on any threads at once. Follows
 *       RFC 1952 (members, CRC-32, ISIZE) and RFC 9110 section 8.4.1.3.
 */
MHDGZ_API unsigned int mhdgz_upload_feed(struct mhdgz_upload *up, const char *upload_data,
					 size_t *upload_data_size);

/**
 * The body has ended (the access handler's final call, *upload_data_size
 * 0): checks that it did not end inside a gzip member.
 *
 * @param up the upload; NULL returns 500.
 * @return 0 if the whole body was accepted and delivered; else the status
 *         to send (400 for a truncated member, or the earlier refusal's).
 *         Calling it again returns the same.
 * @note One thread at a time per upload, as mhdgz_upload_feed().
 */
MHDGZ_API unsigned int mhdgz_upload_finish(struct mhdgz_upload *up);

/** What an upload is and has done (mhdgz_upload_get_info()). */
struct mhdgz_upload_info {
	/** sizeof(struct mhdgz_upload_info), set by the caller. */
	size_t size;
	/** "gzip" or "identity" (a static string), or NULL for a coding not
	 * supported. */
	const char *coding;
	/** Body bytes read as sent (coded) before any refusal, in bytes. */
	uint64_t encoded_nbytes;
	/** Decoded bytes given to the data callback and accepted by it (a
	 * piece it refused is not counted), in bytes. */
	uint64_t decoded_nbytes;
	/** gzip members begun (0 for identity). */
	unsigned int members;
	/** Why it was refused; MHDGZ_UPLOAD_OK if it was not. */
	enum mhdgz_upload_refusal refusal;
	/** The status to send for the refusal; 0 if not refused. */
	unsigned int status;
};

/**
 * Read what an upload is and has done (for an access log, or to answer).
 *
 * @param up the upload; borrowed.
 * @param info the caller's struct, with info->size set; filled on success
 *        (coding points to a static string).
 * @return 0; MHDGZ_EINVAL for NULL arguments or an unknown info->size.
 * @note Not thread-safe with mhdgz_upload_feed() on the same upload.
 */
MHDGZ_API int mhdgz_upload_get_info(const struct mhdgz_upload *up, struct mhdgz_upload_info *info);

/**
 * A short lowercase name of a refusal ("ok", "coding", "too-large",
 * "ratio", "members", "malformed", "truncated", "application", "nomem").
 *
 * @return a static string; "unknown" for a value out of range. Thread-safe.
 */
MHDGZ_API const char *mhdgz_upload_refusal_name(enum mhdgz_upload_refusal refusal);

/**
 * A small plain-text response for a refused request body: its body is
 * the status code, a space, libmicrohttpd's reason phrase for it
 * (MHD_get_reason_phrase_for(); "Request Body Refused" where it has none)
 * and a newline, e.g. "415 Unsupported Media Type\n" (27 bytes), copied
 * into the response; "Content-Type: text/plain; charset=utf-8",
 * and for 415 "Accept-Encoding: gzip", which tells the client the codings
 * a request body may have (RFC 9110 sections 15.5.16 and 12.5.3; identity
 * is always acceptable). Add fields to it before queueing if you need.
 *
 * @param status_code the status it is for (normally what
 *        mhdgz_upload_feed() or mhdgz_upload_finish() returned).
 * @return a response owned by the caller (MHD_destroy_response()), or
 *         NULL when libmicrohttpd cannot make one. Thread-safe.
 */
MHDGZ_API struct MHD_Response *mhdgz_upload_refusal_response(unsigned int status_code);

/**
 * Queue the refusal of @a up: mhdgz_upload_refusal_response() for its
 * status, queued with MHD_queue_response() and released.
 *
 * @param connection the request; on the access handler's final call (or
 *        its first, for a refusal known then: see the section above).
 * @param up the upload, refused; borrowed.
 * @return MHD_queue_response()'s result; MHD_NO also for NULL arguments,
 *         an upload that was not refused, or no response.
 * @note Thread-safe; call from the access handler as libmicrohttpd
 *       requires.
 */
MHDGZ_API enum MHD_Result mhdgz_upload_queue_refusal(struct MHD_Connection *connection,
						     const struct mhdgz_upload *up);

/**
 * Release an upload (its inflater and its reference to the handler).
 * NULL is a no-op. Call it once, when the request is done with it (the
 * request completed callback suits: it also runs when the client goes
 * away mid-body). The handler may have been released with mhdgz_free()
 * before: the upload kept it alive.
 * @note Not thread-safe with other calls on the same upload.
 */
MHDGZ_API void mhdgz_upload_free(struct mhdgz_upload *up);

/* ===================================================================== */
/*                              Stats                                    */
/* ===================================================================== */

/** Counters since mhdgz_new(); all monotonic except pool_idle. */
struct mhdgz_stats {
	/** sizeof(struct mhdgz_stats), set by the caller. */
	size_t size;
	uint64_t responses;                   /**< decisions made (queues and selects) */
	uint64_t compressed;                  /**< gzip variants queued (cache hits included) */
	uint64_t reasons[MHDGZ_REASON_COUNT]; /**< per enum mhdgz_reason */
	uint64_t bytes_in;                    /**< body bytes of the responses decided, in bytes */
	uint64_t bytes_out;                   /**< body bytes of what was queued, in bytes */
	uint64_t
		compressions; /**< gzip bodies built (buffer cache misses) and gzip streams started */
	uint64_t failures;    /**< compressions that failed (served identity) */
	uint64_t cache_hits;      /**< gzip variants reused */
	uint64_t pool_gets;       /**< compressor pools: compressors taken */
	uint64_t pool_misses;     /**< compressor pools: compressors created */
	uint64_t pool_idle;       /**< compressor pools: compressors idle now (the
			       *   one-shot pool plus the streams' pool) */
	uint64_t digests_dropped; /**< integrity fields (Content-MD5, Digest,
				   *   Content-Digest, Repr-Digest) left out of
				   *   gzip responses built: they describe the
				   *   identity bytes (RFC 9530) */
	uint64_t padded;          /**< gzip responses queued with length-hiding
				   *   padding (bodies, streams and HEADs whose
				   *   length includes it; cache hits included) */
	/** Coded variants queued per enum mhdgz_coding (they sum to
	 * compressed); pool_gets, pool_misses and pool_idle count the pools
	 * of every coding offered. */
	uint64_t coded[MHDGZ_CODING_COUNT];
	uint64_t uploads;          /**< request bodies begun (mhdgz_upload_new()) */
	uint64_t uploads_gzip;     /**< of which coded gzip */
	uint64_t upload_bytes_in;  /**< request body bytes read as sent (coded), before
				    *   refusals, in bytes */
	uint64_t upload_bytes_out; /**< decoded request body bytes given to the data
				    *   callbacks, in bytes */
	/** Request bodies refused, per enum mhdgz_upload_refusal;
	 * [MHDGZ_UPLOAD_OK] counts the bodies that completed accepted. */
	uint64_t uploads_refused[MHDGZ_UPLOAD_REFUSAL_COUNT];
	uint64_t pool_trims; /**< compressor pools: idle compressors freed by
				   *   trimming (pool_trim_ms) */
	/** File cache (struct mhdgz_options file_cache_nbytes): coded file
	 * bodies reused (no compression), looked up and not found, dropped
	 * to stay within the budget; and the bytes held now (coded bytes and
	 * per-version overhead). All 0 with the cache off. @{ */
	uint64_t filecache_hits;
	uint64_t filecache_misses;
	uint64_t filecache_evictions;
	uint64_t filecache_nbytes;
	/** @} */
	/** dcz responses queued (RFC 9842; also counted in compressed and
	 *  in coded[MHDGZ_CODING_ZSTD]; cache hits and HEADs included). */
	uint64_t dict_hits;
	/** Bytes those dcz bodies saved against plain zstd of the same
	 *  bodies at the same level, summed per response queued. */
	uint64_t dict_bytes_saved;
	/** Per coding (enum mhdgz_coding), the part of bytes_in and bytes_out
	 *  that belongs to the responses sent with it: identity bytes before
	 *  coding and coded bytes after, cache hits and HEADs included as in
	 *  bytes_in and bytes_out, a stream's once it ends; dcz bodies are
	 *  zstd's. */
	uint64_t coded_bytes_in[MHDGZ_CODING_COUNT];
	uint64_t coded_bytes_out[MHDGZ_CODING_COUNT];
};

/**
 * Read the handler's counters.
 *
 * @param gz the handler
 * @param st caller's struct with st->size set; filled on success.
 * @return 0, MHDGZ_EINVAL for NULL arguments or an unknown st->size.
 * @note Thread-safe; each counter is read atomically, the set is not a
 *       single snapshot.
 */
MHDGZ_API int mhdgz_get_stats(const struct mhdgz *gz, struct mhdgz_stats *st);

/* ===================================================================== */
/*                              Memory                                   */
/* ===================================================================== */

/**
 * Free now the idle compressors that trimming would free: in each of the
 * handler's compressor pools, those beyond pool_idle_low unused for
 * pool_trim_ms or longer (struct mhdgz_options), least recently used
 * first; then, with glibc's allocator, free heap pages go back to the
 * kernel (malloc_trim). Pools also do this by themselves, but only when a
 * compressor is taken or given back: call this from a timer (every
 * second is plenty) if the server can go quiet after a burst.
 *
 * @param gz the handler; NULL does nothing.
 * @return the number of compressors freed (also added to
 *         mhdgz_stats.pool_trims); 0 with MHDGZ_POOL_TRIM_NEVER.
 * @note Thread-safe, also with requests being served.
 */
MHDGZ_API size_t mhdgz_trim(struct mhdgz *gz);

/**
 * A replacement allocator for everything the library allocates, including
 * zlib's, libdeflate's and ISA-L's compressor state (not libmicrohttpd's
 * own allocations).
 */
struct mhdgz_allocator {
	/** sizeof(struct mhdgz_allocator). */
	size_t size;
	/** Like malloc(); may return NULL (the library then fails cleanly). */
	void *(*malloc_fn)(size_t nbytes, void *cls);
	/** Like free(); never called with NULL. */
	void (*free_fn)(void *ptr, void *cls);
	/** Passed to both functions. */
	void *cls;
};

/**
 * Install an allocator process-wide, or restore malloc/free with NULL.
 *
 * Everything mhdgz allocates goes through it, including the state of the
 * compression libraries, each reached per compressor where the library
 * allows it: zlib (zalloc/zfree), libzstd (ZSTD_customMem), libbrotli
 * (brotli_alloc_func), ISA-L (allocates nothing itself), and libdeflate
 * 1.19 and later (libdeflate_alloc_compressor_ex, found by configure).
 * Each compressor follows the allocator installed when it was created;
 * the application's own use of those libraries is not affected.
 *
 * Older libdeflate (1.14, Debian 12) has only one allocator for the whole
 * process (libdeflate_set_memory_allocator), shared with any other
 * libdeflate user in the program. There mhdgz leaves it alone until the
 * first call of this function with a non-NULL allocator; from then on, for
 * the rest of the process, every libdeflate compressor (also the
 * application's own) is allocated through mhdgz's allocator, and therefore
 * through @a alloc while it is installed and malloc/free after NULL
 * restores the default. With such a libdeflate, call it at start-up,
 * before the program or mhdgz has created any libdeflate compressor, do
 * not free a libdeflate compressor made before that call after it, and do
 * not call libdeflate_set_memory_allocator() yourself afterwards.
 *
 * @param alloc the allocator; copied. NULL restores the default.
 * @return 0; MHDGZ_EINVAL for an unknown size or a NULL function;
 *         MHDGZ_EBUSY if memory allocated through the current allocator is
 *         still live (a block must be freed by the allocator that made it).
 * @note Not thread-safe with any other mhdgz call: call it at start-up.
 */
MHDGZ_API int mhdgz_set_allocator(const struct mhdgz_allocator *alloc);

/* ===================================================================== */
/*                              Errors                                   */
/* ===================================================================== */

#define MHDGZ_OK 0          /**< success */
#define MHDGZ_ENOMEM (-1)   /**< an allocation failed */
#define MHDGZ_EINVAL (-2)   /**< an argument is invalid (level out of range, ...) */
#define MHDGZ_EBACKEND (-3) /**< the compression library reported an error */
#define MHDGZ_ENOSPC (-4)   /**< the output does not fit in the space given */
#define MHDGZ_ENOTSUP (-5)  /**< backend or capability not compiled in */
#define MHDGZ_EMHD (-6)     /**< libmicrohttpd refused a call */
#define MHDGZ_EBUSY (-7)    /**< resource in use */

/**
 * A message for an MHDGZ_E* code.
 *
 * @return a static English string; "unknown error" for other values.
 *         Thread-safe.
 */
MHDGZ_API const char *mhdgz_strerror(int err);

#ifdef __cplusplus
}
#endif

#endif /* MHDGZ_H */
