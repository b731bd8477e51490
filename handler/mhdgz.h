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
 *    numbers; default 6); whole buffers only (libdeflate has no streaming
 *    interface: its streams are compressed by zlib at the same level,
 *    capped at 9). Faster than zlib at every level with output no larger
 *    at the same level number. Only when built with libdeflate
 *    (configure --with-libdeflate, the default when found).
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
 * What happens to a strong ETag on a gzip-coded response. A strong
 * validator identifies one exact representation (RFC 9110 section 8.8.1),
 * and the gzip representation differs from the identity one, so it must
 * not share the identity's strong ETag.
 */
enum mhdgz_etag_policy {
	/** W/"x": the gzip representation gets the weak form (default; what
	 * Apache and nginx do). If-None-Match still matches (weak comparison). */
	MHDGZ_ETAG_WEAKEN = 0,
	/** "x-gzip": a distinct strong ETag; use mhdgz_etag_match() or
	 * mhdgz_evaluate_preconditions() to evaluate If-None-Match/If-Match. */
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
/** When the application's response carries a Content-Digest field (any
 * algorithm), a gzip response compressed whole gets a new
 * "Content-Digest: sha-256=:...:" computed over its gzip bytes (RFC 9530
 * section 2; SHA-256 from nettle) instead of none: without this flag an
 * integrity field of the identity bytes is only dropped (counted in
 * digests_dropped). A gzip stream, whose bytes are not known when its
 * header fields are sent, never carries one. */
#define MHDGZ_F_CONTENT_DIGEST 0x4u

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
 * whose every chunk is flushed (README, "Memory per stream"). */
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
	/** Bodies smaller than this many bytes are served identity (with
	 * Vary); 0 = MHDGZ_DEFAULT_MIN_NBYTES. Use 1 to compress every
	 * non-empty body. */
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
	 * Each idle compressor holds the backend's state (README, "Why a
	 * compressor pool", gives the bytes per backend). */
	size_t pool_idle_cap;
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
	 * at 15 and 8 (README, "Memory per stream", measured per backend).
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
 *         range, a stream or event window setting out of range or a
 *         malformed media type pattern; MHDGZ_ENOTSUP for a backend not
 *         compiled in; MHDGZ_ENOMEM.
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
 * "Content-Length: 0", as it would without mhdgz). When that 200 has no
 * length (a content reader's gzip stream, a stream of unknown size), the
 * 304 has none and the connection closes after it: libmicrohttpd 0.9.75
 * sends a Content-Length with every other 304.
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
 * sendfile identity response) gets the same flags: libmicrohttpd 0.9.75
 * cannot read a response's flags back, so flags set with
 * MHD_set_response_options() directly reach only the response itself.
 * Every flag of libmicrohttpd 0.9.75 is carried
 * (MHD_RF_HTTP_1_0_COMPATIBLE_STRICT, MHD_RF_HTTP_1_0_SERVER,
 * MHD_RF_INSANITY_HEADER_CONTENT_LENGTH, MHD_RF_SEND_KEEP_ALIVE_HEADER).
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
	MHDGZ_SKIP_EMPTY,        /**< empty body */
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
	/** The content coding of the response queued: "gzip" or "identity";
	 * a static string. */
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
 * reader), of a larger file, or of unknown length has no length, and then
 * the connection is closed after the header block (libmicrohttpd 0.9.75 cannot
 * frame a HEAD response of unknown length on a kept-alive connection: it
 * writes a last chunk after the header block). The same holds for the
 * identity response of a stream of unknown length. A stream of unknown
 * size is decided on its first bytes, which a HEAD does not read: for a
 * client that accepts gzip its HEAD omits the fields the coding
 * determines (Content-Encoding, ETag, integrity fields; RFC 9110 section
 * 9.3.2 allows it) and carries the others.
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
 * one of known size without Content-Type. One of unknown size
 * (MHD_SIZE_UNKNOWN) is decided on its first bytes, read when it is
 * queued (up to min_nbytes, at most 64 KiB; only one reader call for a
 * low-latency stream, so it gains no latency; never for HEAD): empty or
 * ending below min_nbytes, it is served identity with its exact
 * Content-Length; without Content-Type it is sniffed. The bytes read are
 * sent first, whatever is queued.
 * Bulk streams are not flushed per chunk (ratio matters); use
 * mhdgz_response_set_low_latency() for streams whose every chunk must
 * reach the client at once (text/event-stream responses are treated so
 * automatically).
 *
 * With a whole-buffer-only backend (libdeflate), streams are compressed
 * by zlib at the same level, capped at zlib's 9 (README, Design notes).
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
 * identity response keeps libmicrohttpd's own file path (sendfile where
 * available), on a duplicate of @a fd. A gzip response of a file up to
 * 1 MiB is compressed whole when first queued (with Content-Length, and
 * reused while the response lives: later changes to the file are not
 * seen by it); a larger file is read with pread() from its own duplicate
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
 * end of file, of unknown size. It is decided on its first bytes like any
 * stream of unknown size (empty or below min_nbytes: identity with its
 * exact length; untyped: sniffed) and, when compressed, sent as a gzip
 * stream (chunked). A pipe can be read only once: queue the response once,
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
 * compressed and sync-flushed (RFC 1951 empty stored block) before the
 * reader is asked for more, so it reaches the client at once.
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
 * codings and the "q" parameter are case-insensitive; a malformed element
 * (bad q such as "abc", "-1", "1.0001" or four decimals) is ignored.
 *
 * @param lines the header values; borrowed; NULL entries are skipped.
 * @param count number of lines; 0 means no Accept-Encoding header.
 * @return q in thousandths; 0 if gzip is not acceptable or the header is
 *         absent (identity only). Thread-safe, allocates nothing.
 */
MHDGZ_API unsigned int mhdgz_accept_gzip_q(const char *const *lines, size_t count);

/**
 * Whether an If-None-Match or If-Match field value matches an ETag,
 * knowing the ETag transformations this library applies: a member that is
 * the weak form W/"x" or the suffixed form "x-gzip" of the resource's
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
 * forms of the ETag mhdgz produced.
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
	uint64_t pool_trims;      /**< compressor pools: idle compressors freed by
				   *   trimming (pool_trim_ms) */
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
 * libdeflate 1.14 has one allocator for the whole process
 * (libdeflate_set_memory_allocator), shared with any other libdeflate user
 * in the program. mhdgz leaves it alone until the first call of this
 * function with a non-NULL allocator; from then on, for the rest of the
 * process, every libdeflate compressor (also the application's own) is
 * allocated through mhdgz's allocator, and therefore through @a alloc while
 * it is installed and malloc/free after NULL restores the default. So call
 * it at start-up, before the program or mhdgz has created any libdeflate
 * compressor, and do not free a libdeflate compressor made before that
 * call after it. zlib and ISA-L state is per compressor and always follows
 * the allocator installed when it was created.
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
