/* mhdgz.h: HTTP response compression (gzip, zstd, br) for libmicrohttpd servers. */
/**
 * @file
 * libmhdgz adds content coding to an existing libmicrohttpd server by
 * changing two calls:
 *
 *     MHD_create_response_from_buffer (size, buf, mode)
 *  -> mhdgz_response_from_buffer (gz, size, buf, mode)
 *
 *     MHD_queue_response (connection, status, response)
 *  -> mhdgz_queue_response (gz, connection, status, response)
 *
 * Bodies under min_nbytes (1 KiB by default) stay identity.
 * mhdgz_queue_response_ex() also takes the request (method, path, flags).
 * The response is a real struct MHD_Response. At queue time the library
 * plans once from Accept-Encoding, the status, the fields and the body size
 * (every "no" a counted enum mhdgz_reason) and queues the response or a
 * coded one in its place (RFC 9110 sections 8.4, 8.8.3, 12.5.3, 12.5.5);
 * a failure or a body that does not shrink goes out identity, counted.
 * A handle may be used from any number of threads at once. Errors are
 * negative MHDGZ_E* codes; the library never aborts, exits or prints.
 * mhdgz(3) has the longer story.
 */
#ifndef MHDGZ_H
#define MHDGZ_H

#include <microhttpd.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the exported functions; the library's own build defines it. */
#ifndef MHDGZ_API
#define MHDGZ_API
#endif

/* === Setup =========================================================== */

/** The one version source: configure.ac reads these three lines. @{ */
#define MHDGZ_VERSION_MAJOR 0
#define MHDGZ_VERSION_MINOR 2
#define MHDGZ_VERSION_PATCH 0
#define MHDGZ_VERSION_STRING "0.2.0"
/** @} */

/**
 * The version of the library linked at run time, "MAJOR.MINOR.PATCH".
 * @return a static string; never NULL. Thread-safe.
 */
MHDGZ_API const char *mhdgz_version(void);

/**
 * gzip backends, each writing one RFC 1952 member per body (MTIME 0). Level
 * 1 is the fastest; 0 in the options is the backend's default.
 *  - ZLIB: levels 1-9 (default 6); always built.
 *  - LIBDEFLATE: 1-12 (default 5: 0.7x the time of level 6 for about 1 %
 *    more bytes); whole bodies only, its streams are zlib's (level <= 9).
 *  - ISAL: ISA-L igzip, 1-4 (default 2; igzip's 0-3 plus one), the fastest;
 *    on x86-64 2-4 are igzip's 3 (its 1-2 depend on addresses, ISA-L 2.30).
 * DEFAULT (0) is the first built of libdeflate, ISA-L, zlib (configure
 * --with-libdeflate, --with-isal).
 */
enum mhdgz_backend {
	MHDGZ_BACKEND_DEFAULT = 0,
	MHDGZ_BACKEND_ZLIB = 1,
	MHDGZ_BACKEND_LIBDEFLATE = 2,
	MHDGZ_BACKEND_ISAL = 3
};

/**
 * Content codings (RFC 9110 section 8.4.1): gzip (RFC 1952) always; zstd
 * (RFC 8878 as RFC 9659 profiles it: one frame, window at most 8 MiB;
 * levels 1-19, default 3; built with --with-zstd, offered by default before
 * gzip) and br (RFC 7932; levels 1-11, default 5; --with-brotli, offered
 * when listed in options codings). libbrotlienc 1.0.9 calls exit() when
 * its allocation fails: do not offer br with an allocator that may fail.
 */
enum mhdgz_coding {
	MHDGZ_CODING_GZIP = 0,
	MHDGZ_CODING_ZSTD = 1,
	MHDGZ_CODING_BR = 2,
	MHDGZ_CODING_COUNT /**< the number of codings, not a coding */
};

/** A strong ETag on a coded response: it names one exact representation
 * (RFC 9110 section 8.8.1), and the coded one differs. */
enum mhdgz_etag_policy {
	MHDGZ_ETAG_WEAKEN = 0, /**< W/"x" (default; as Apache and nginx) */
	MHDGZ_ETAG_SUFFIX = 1, /**< "x-gzip", "x-zstd", "x-br": distinct strong ETags */
	MHDGZ_ETAG_DROP = 2,   /**< no ETag on coded responses */
	MHDGZ_ETAG_KEEP = 3    /**< unchanged (deterministic bytes, no ranges) */
};

/** Flags of struct mhdgz_options. @{ */
/** No compressor pools: one compressor per compression. */
#define MHDGZ_F_NO_POOL 0x2u
/** A response with Content-Digest gets "Content-Digest: sha-256=:...:" of
 * its coded bytes (RFC 9530; a chunked trailer for a stream); without it
 * the identity's integrity fields are only dropped. */
#define MHDGZ_F_CONTENT_DIGEST 0x4u
/** Length hiding for every gzip response (MHDGZ_RESPONSE_LENGTH_HIDING). */
#define MHDGZ_F_LENGTH_HIDING 0x8u
/** @} */

/** Default padding.max_nbytes (the mean padding is half of it; mhdgz(3),
 * LENGTH HIDING, gives the attacker's odds). */
#define MHDGZ_DEFAULT_LENGTH_HIDING_MAX 512
/** Largest padding.max_nbytes accepted, in bytes. */
#define MHDGZ_LENGTH_HIDING_MAX_LIMIT 65536
/** Shortest and longest padding.key accepted, in bytes. @{ */
#define MHDGZ_LENGTH_HIDING_KEY_MIN 16
#define MHDGZ_LENGTH_HIDING_KEY_MAX 64
/** @} */
/** Default min_nbytes, in bytes (nginx uses 20, Go's gziphandler 1400). */
#define MHDGZ_DEFAULT_MIN_NBYTES 1024
/** Default limits.pool_idle_low: idle compressors never trimmed. */
#define MHDGZ_DEFAULT_POOL_IDLE_LOW 2
/** Default limits.pool_trim_ms: 10 seconds. */
#define MHDGZ_DEFAULT_POOL_TRIM_MS 10000u
/** Default limits.coder_nbytes: 128 MiB, an eighth of a 1 GiB server. */
#define MHDGZ_DEFAULT_CODER_NBYTES ((size_t)128 * 1024 * 1024)
/** limits.coder_nbytes: no budget. */
#define MHDGZ_CODER_NBYTES_UNLIMITED SIZE_MAX
/** limits.pool_trim_ms: never trim (keep up to pool_idle_cap). */
#define MHDGZ_POOL_TRIM_NEVER 0xffffffffu
/** Default gzip.event_window_bits: a 4 KiB history. */
#define MHDGZ_DEFAULT_EVENT_WINDOW_BITS 12
/** Default gzip.event_mem_level: zlib memLevel 5. */
#define MHDGZ_DEFAULT_EVENT_MEM_LEVEL 5

/** gzip settings (struct mhdgz_options gzip). */
struct mhdgz_gzip_options {
	/** Compression backend; 0 = MHDGZ_BACKEND_DEFAULT. */
	enum mhdgz_backend backend;
	/** Level in the backend's range; 0 = its default. Never clamped. */
	int level;
	/** Streams: the history, 2^bits bytes, 9-15 (zlib windowBits, ISA-L
	 * hist_bits); 0 = 15. zlib holds 2^(bits+2) + 2^(mem_level+9) bytes
	 * plus 6 KiB per stream (DESIGN.md, "Memory per stream"). */
	int stream_window_bits;
	/** Streams: zlib memLevel 1-9; 0 = 8 (ISA-L below 8: its smallest). */
	int stream_mem_level;
	/** As stream_window_bits, for low-latency streams (text/event-stream,
	 * MHDGZ_RESPONSE_LOW_LATENCY); 0 = MHDGZ_DEFAULT_EVENT_WINDOW_BITS. */
	int event_window_bits;
	/** As stream_mem_level, for low-latency streams; 0 =
	 * MHDGZ_DEFAULT_EVENT_MEM_LEVEL (38 KiB per zlib stream, not 262). */
	int event_mem_level;
};

/** A coding's settings (struct mhdgz_options zstd and br). */
struct mhdgz_coding_options {
	/** Level, zstd 1-19, br 1-11; 0 = the default. Checked (never
	 * clamped) also when the coding is not offered. */
	int level;
};

/** Memory limits (struct mhdgz_options limits). */
struct mhdgz_limit_options {
	/** Most idle compressors per pool; 0 = 16 (DESIGN.md gives their bytes). */
	size_t pool_idle_cap;
	/** Idle compressors never trimmed, per pool; 0 = MHDGZ_DEFAULT_POOL_IDLE_LOW. */
	size_t pool_idle_low;
	/** Trim period in milliseconds: an idle compressor beyond pool_idle_low
	 * unused for this long is freed (see mhdgz_trim()); 0 =
	 * MHDGZ_DEFAULT_POOL_TRIM_MS, MHDGZ_POOL_TRIM_NEVER = never. */
	unsigned int pool_trim_ms;
	/** The store's byte budget: coded bodies and coded lengths kept for
	 * reuse, in bytes (plus 128 per item); 0 = 32 MiB without file
	 * versions, the default. It keeps a reused response's coded bodies
	 * (its later queues, HEADs and 304s send them without compressing),
	 * stream lengths for HEAD and 304, lengths by strong ETag and, with a
	 * nonzero budget, coded file bodies by file version: fstat() of the
	 * descriptor (device, inode, size, modification and change time),
	 * offset, length, coding, level and padding; a file changed within 2
	 * seconds is not kept. Least recently used first out; a response
	 * whose body went codes it again. File versions are not for files
	 * rewritten in place without reliable change times (some network and
	 * FUSE file systems). Counted in mhdgz_stats store_*. */
	size_t store_nbytes;
	/** Compressor state of live streams in all, in bytes; 0 = 128 MiB. A
	 * stream holds its pool's measured peak (DESIGN.md) until it ends; one
	 * past the budget goes identity (MHDGZ_SKIP_MEMORY). */
	size_t coder_nbytes;
};

/** Length hiding (struct mhdgz_options padding). */
struct mhdgz_padding_options {
	/** Most padding bytes per gzip body, 1 to MHDGZ_LENGTH_HIDING_MAX_LIMIT;
	 * 0 = MHDGZ_DEFAULT_LENGTH_HIDING_MAX. */
	size_t max_nbytes;
	/** The key of the padding's HMAC-SHA256, copied; NULL = 32 random
	 * bytes (getrandom()). Give every process of a site the same key. */
	const void *key;
	/** Bytes at key, MHDGZ_LENGTH_HIDING_KEY_MIN to _MAX. */
	size_t key_nbytes;
};

/** Options for mhdgz_new(). Zero-initialise, set size, then set what you
 * need: a zero field means its default, so the struct can grow. */
struct mhdgz_options {
	/** sizeof(struct mhdgz_options); another size is refused. */
	size_t size;
	/** MHDGZ_F_* flags. */
	unsigned int flags;
	/** The codings offered in the server's order of preference, which
	 * breaks ties of the client's q-values (RFC 9110 section 12.5.3): "gzip",
	 * "zstd", "br", comma-separated, each at most once, e.g. "zstd, br, gzip";
	 * NULL = "zstd, gzip" (gzip without zstd). Read during mhdgz_new() only. */
	const char *codings;
	struct mhdgz_gzip_options gzip;   /**< gzip: backend, level, streams */
	struct mhdgz_coding_options zstd; /**< zstd: level */
	struct mhdgz_coding_options br;   /**< br: level */
	/** Bodies of known length below this many bytes are identity for every
	 * client, without Vary (RFC 9110 section 12.5.5); not streams of unknown
	 * length. 0 = MHDGZ_DEFAULT_MIN_NBYTES; 1 codes every non-empty body. */
	size_t min_nbytes;
	/** NULL-terminated list of media types to compress replacing the
	 * default (NULL): "type/subtype", a type and slash-asterisk, a suffix
	 * (RFC 6838 section 4.2.8) as asterisk-slash-asterisk "+json", or
	 * asterisk-slash-asterisk alone. Case and parameters ignored. Copied. */
	const char *const *compress_types;
	/** Media types never compressed (checked first), as compress_types. */
	const char *const *skip_types;
	/** ETag policy for coded responses; 0 = MHDGZ_ETAG_WEAKEN. */
	enum mhdgz_etag_policy etag_policy;
	struct mhdgz_limit_options limits;    /**< pools and the store */
	struct mhdgz_padding_options padding; /**< length hiding */
};

struct mhdgz; /**< a handler: options, compressor pools, responses, stats */

/**
 * Create a handler.
 * @param opts options, or NULL for all defaults; borrowed (copied).
 * @param gz_ret receives the handler, the caller's (mhdgz_free());
 *        untouched on error.
 * @return 0; MHDGZ_EINVAL for a NULL gz_ret or an option out of its range;
 *         MHDGZ_ENOTSUP for a backend or coding not compiled in;
 *         MHDGZ_EBACKEND if getrandom() failed (no padding key given);
 *         MHDGZ_ENOMEM. mhdgz_strerror() of the code, on this thread,
 *         names the field: "zstd.level: 23 is outside 1..19".
 * @note Thread-safe (creates independent handlers).
 */
MHDGZ_API int mhdgz_new(const struct mhdgz_options *opts, struct mhdgz **gz_ret);

/**
 * Release the application's reference to a handler; its responses keep it
 * alive until the last is freed (also after MHD_stop_daemon()). Afterwards
 * it must not make or queue responses. NULL is a no-op.
 * @note Not thread-safe with other uses of the same handler by the
 *       application (its responses may be freed on any thread).
 */
MHDGZ_API void mhdgz_free(struct mhdgz *gz);

/** What mhdgz_backend_info() says of a backend. */
struct mhdgz_backend_info {
	/** sizeof(struct mhdgz_backend_info), set by the caller. */
	size_t size;
	/** "zlib", "libdeflate" or "isal" (static). */
	const char *name;
	/** 1 if compiled in, else 0 (then the levels are 0). */
	int available;
	/** Lowest, highest and default level. @{ */
	int level_min;
	int level_max;
	int level_default;
	/** @} */
	/** The backend described (DEFAULT's stands-for). */
	enum mhdgz_backend backend;
};

/**
 * Describe a backend (look one up by name by looping ZLIB to ISAL).
 * @param backend a backend, or MHDGZ_BACKEND_DEFAULT.
 * @param info the caller's struct, info->size set; filled on success.
 * @return 0; MHDGZ_EINVAL for a NULL @a info, an unknown info->size or an
 *         unknown @a backend. Thread-safe.
 */
MHDGZ_API int mhdgz_backend_info(enum mhdgz_backend backend, struct mhdgz_backend_info *info);

/** What mhdgz_coding_info() says of a coding. */
struct mhdgz_coding_info {
	/** sizeof(struct mhdgz_coding_info), set by the caller. */
	size_t size;
	/** "gzip", "zstd" or "br" (static). */
	const char *name;
	/** 1 if compiled in (gzip always), else 0 (then the levels are 0). */
	int available;
	/** Lowest, highest and default level (gzip: its backend's). @{ */
	int level_min;
	int level_max;
	int level_default;
	/** @} */
	int enabled; /**< with a handler: 1 if it offers the coding */
	int level;   /**< with a handler and enabled: the level in use, else 0 */
	int rank;    /**< with a handler and enabled: its place in the order, 0
		      *   first; else -1 */
};

/**
 * Describe a coding, and with a handler how it uses it (the codings by
 * rank are its order of preference, for mhdgz_accept_coding()).
 * @param gz a handler, or NULL for what the build offers.
 * @param coding a coding.
 * @param info the caller's struct, info->size set; filled on success.
 * @return 0; MHDGZ_EINVAL for a NULL @a info, an unknown info->size or an
 *         unknown @a coding. Thread-safe.
 */
MHDGZ_API int mhdgz_coding_info(const struct mhdgz *gz, enum mhdgz_coding coding,
				struct mhdgz_coding_info *info);

/* === Responses ======================================================= */

/* Each constructor is the twin of the libmicrohttpd call it names: the
 * same arguments after @a gz (a response keeps it alive), ownership and
 * result: a response the caller destroys, or NULL, after which the caller
 * still owns a MUST_FREE buffer or descriptor and no free callback runs.
 * All are thread-safe. */

/**
 * Same as MHD_create_response_from_buffer().
 * @param gz the handler.
 * @param size body size in bytes (0 allowed).
 * @param buffer the body; NULL only if size is 0.
 * @param mode MHD_RESPMEM_PERSISTENT (borrowed, must outlive the
 *        response), MHD_RESPMEM_MUST_COPY (copied now) or
 *        MHD_RESPMEM_MUST_FREE (the response free()s it).
 * @return a response, or NULL.
 */
MHDGZ_API struct MHD_Response *mhdgz_response_from_buffer(struct mhdgz *gz, size_t size,
							  void *buffer,
							  enum MHD_ResponseMemoryMode mode);

#if MHD_VERSION >= 0x01000000
/**
 * Same as MHD_create_response_from_buffer_static() (libmicrohttpd 1.0):
 * the @a size bytes at @a buffer, borrowed, never copied or freed; they
 * must stay unchanged while the response or a response queued in its place
 * lives. The coded bodies are mhdgz's own memory.
 * @return a response, or NULL (NULL @a gz, NULL @a buffer with a size,
 *         allocation).
 */
MHDGZ_API struct MHD_Response *mhdgz_response_from_buffer_static(struct mhdgz *gz, size_t size,
								 const void *buffer);

/**
 * Same as MHD_create_response_from_buffer_copy() (libmicrohttpd 1.0): the
 * @a size bytes at @a buffer are copied now (with the allocator of
 * mhdgz_set_allocator()); @a buffer is borrowed for the call only.
 * @return a response, or NULL (NULL @a gz, NULL @a buffer with a size,
 *         allocation).
 */
MHDGZ_API struct MHD_Response *mhdgz_response_from_buffer_copy(struct mhdgz *gz, size_t size,
							       const void *buffer);

/**
 * Same as MHD_create_response_empty() (libmicrohttpd 1.0): an empty body
 * (never coded), @a flags carried as mhdgz_response_set_options() does.
 * With MHD_RF_HEAD_ONLY_RESPONSE it is always queued itself, untouched.
 * @param gz the handler. @param flags as for MHD_create_response_empty().
 * @return a response, or NULL (NULL @a gz, allocation, flags refused).
 */
MHDGZ_API struct MHD_Response *mhdgz_response_empty(struct mhdgz *gz, enum MHD_ResponseFlags flags);
#endif /* MHD_VERSION >= 0x01000000 */

/**
 * Same as MHD_create_response_from_callback(). Coded, each connection gets
 * a stream of its own (a pooled compressor, back when done), chunked; the
 * reader is called as libmicrohttpd would, never inside the queue call;
 * held bytes are flushed within 20 ms. Known size under min_nbytes or no
 * Content-Type: identity. With MHD_SIZE_UNKNOWN the first queue carries
 * the stream in the response itself (its footers go in the trailer); a
 * kept response whose client left keeps that compressor until destroyed.
 * @param gz the handler. @param size body bytes, or MHD_SIZE_UNKNOWN.
 * @param block_size bytes of room the reader gets per call.
 * @param crc the content reader; @param crc_cls its closure.
 * @param crfc called as crfc(crc_cls) once, after the response and every
 *        stream made from it are done; may be NULL.
 * @return a response, or NULL (then crfc is not called).
 */
MHDGZ_API struct MHD_Response *mhdgz_response_from_callback(struct mhdgz *gz, uint64_t size,
							    size_t block_size,
							    MHD_ContentReaderCallback crc,
							    void *crc_cls,
							    MHD_ContentReaderFreeCallback crfc);

/**
 * Same as MHD_create_response_from_fd_at_offset64(): @a size bytes of the
 * file at @a offset. Identity: up to 64 KiB read into one buffer response
 * per queue, else libmicrohttpd's sendfile on a duplicate of @a fd. Coded:
 * up to 1 MiB compressed whole when first queued and kept with the
 * response; larger files streamed per connection. A file shorter than
 * @a size ends the response with an error; an untyped one is sniffed.
 * @param gz the handler. @param size bytes to send.
 * @param fd open descriptor; on success owned by the response (closed
 *        with it; mhdgz duplicates it close-on-exec where it needs its own).
 * @param offset byte offset of the body in the file.
 * @return a response, or NULL.
 */
MHDGZ_API struct MHD_Response *mhdgz_response_from_fd_at_offset64(struct mhdgz *gz, uint64_t size,
								  int fd, uint64_t offset);

/**
 * Same as MHD_create_response_from_fd(): mhdgz_response_from_fd_at_offset64()
 * at offset 0.
 * @return a response, or NULL.
 */
MHDGZ_API struct MHD_Response *mhdgz_response_from_fd(struct mhdgz *gz, size_t size, int fd);

/**
 * Same as MHD_create_response_from_fd64(): mhdgz_response_from_fd_at_offset64()
 * at offset 0.
 * @return a response, or NULL.
 */
MHDGZ_API struct MHD_Response *mhdgz_response_from_fd64(struct mhdgz *gz, uint64_t size, int fd);

/**
 * Same as MHD_create_response_from_pipe(): a body read from @a fd (the
 * read end of a blocking pipe, owned by the response on success) until end
 * of file: a stream of unknown size, coded when its type is compressible.
 * Queue it once, as with libmicrohttpd.
 * @return a response, or NULL.
 */
MHDGZ_API struct MHD_Response *mhdgz_response_from_pipe(struct mhdgz *gz, int fd);

/**
 * Same as MHD_create_response_from_buffer_with_free_callback(): the body at
 * @a buffer (borrowed until then), then crfc(@a buffer) once, when the
 * response and every response mhdgz made of it are done.
 * @param gz the handler. @param size body size in bytes.
 * @param buffer the body; NULL only if size is 0.
 * @param crfc releases @a buffer; may be NULL.
 * @return a response, or NULL.
 */
MHDGZ_API struct MHD_Response *
mhdgz_response_from_buffer_with_free_callback(struct mhdgz *gz, size_t size, void *buffer,
					      MHD_ContentReaderFreeCallback crfc);

/**
 * Same as MHD_create_response_from_buffer_with_free_callback_cls():
 * mhdgz_response_from_buffer_with_free_callback() calling crfc(@a crfc_cls).
 * @return a response, or NULL.
 */
MHDGZ_API struct MHD_Response *
mhdgz_response_from_buffer_with_free_callback_cls(struct mhdgz *gz, size_t size, void *buffer,
						  MHD_ContentReaderFreeCallback crfc,
						  void *crfc_cls);

/**
 * Same as MHD_create_response_from_iovec(): a body gathered from @a iovcnt
 * elements (borrowed for the call), copied into one buffer of mhdgz's now;
 * free_cb(@a cls) still runs once, when the response is freed.
 * @param gz the handler. @param iov the elements. @param iovcnt how many.
 * @param free_cb may be NULL. @param cls its argument.
 * @return a response, or NULL.
 */
MHDGZ_API struct MHD_Response *
mhdgz_response_from_iovec(struct mhdgz *gz, const struct MHD_IoVec *iov, unsigned int iovcnt,
			  MHD_ContentReaderFreeCallback free_cb, void *cls);

/**
 * Same as MHD_queue_response(), choosing the coding first from every
 * Accept-Encoding line (RFC 9110 section 12.5.3), the status and the
 * fields; a response not made through mhdgz goes unchanged. Every request
 * is a GET here (0.9.75 does not tell the method; see _ex). A 304 carries
 * the Vary, ETag and length of this client's 200 (RFC 9110 sections 8.6,
 * 15.4.5): queue the 200's own response with 304 (an empty 200 marked
 * MHDGZ_RESPONSE_IDENTITY keeps its own fields); without a known length it
 * has none (0.9.75 then closes the connection). The first queue merges
 * "Vary: Accept-Encoding" into the response's Vary (section 12.5.5).
 * @param gz the handler that created the response.
 * @param connection as for MHD_queue_response(). @param status_code too.
 * @param response as for MHD_queue_response(); stays the caller's.
 * @return MHD_queue_response()'s result; MHD_NO also for a NULL argument.
 *         A failed compression never fails the call: identity is queued.
 * @note Thread-safe; call from the access handler as libmicrohttpd requires.
 */
MHDGZ_API enum MHD_Result mhdgz_queue_response(struct mhdgz *gz, struct MHD_Connection *connection,
					       unsigned int status_code,
					       struct MHD_Response *response);

/**
 * Same as MHD_set_response_options(response, flags, MHD_RO_END), and
 * remembered, so that every response mhdgz queues in this one's place gets
 * them (libmicrohttpd cannot read them back). They replace earlier ones;
 * refused flags leave the carried ones unchanged.
 * @param gz the handler that created @a response.
 * @param response a response of @a gz.
 * @param flags as for MHD_set_response_options().
 * @return 0; MHDGZ_EINVAL if @a response is not @a gz's; MHDGZ_EMHD if
 *         libmicrohttpd refused the flags.
 * @note Thread-safe; call before the response is first queued.
 */
MHDGZ_API int mhdgz_response_set_options(struct mhdgz *gz, struct MHD_Response *response,
					 enum MHD_ResponseFlags flags);

/** Flags of mhdgz_response_set_flags(). @{ */
/** Never code: queued identity, unchanged, no Vary (MHDGZ_SKIP_OPT_OUT). */
#define MHDGZ_RESPONSE_IDENTITY 0x1u
/** BREACH length hiding whatever MHDGZ_F_LENGTH_HIDING: each gzip body
 * carries 1 to padding.max_nbytes bytes in its header comment (RFC 1952
 * section 2.3.1), a length keyed (HMAC-SHA256) on the body, or a stream's
 * ETag and first 64 KiB; such a response is sent gzip or identity only.
 * mhdgz(3), LENGTH HIDING, says what it hides and what not. */
#define MHDGZ_RESPONSE_LENGTH_HIDING 0x2u
/** No length hiding for this response whatever MHDGZ_F_LENGTH_HIDING. */
#define MHDGZ_RESPONSE_NO_LENGTH_HIDING 0x4u
/** A stream whose every chunk must reach the client at once: each is coded
 * and sync-flushed before the reader is asked for more (text/event-stream
 * is so without it; other streams are flushed within 20 ms). Streams only. */
#define MHDGZ_RESPONSE_LOW_LATENCY 0x8u
/** @} */

/**
 * Set the per-response choices of mhdgz for @a response: an OR of
 * MHDGZ_RESPONSE_* flags, replacing any set before (0: the handler's
 * defaults).
 * @param gz the handler that created @a response.
 * @param response a response created through @a gz; stays the caller's.
 * @param flags MHDGZ_RESPONSE_* flags.
 * @return 0; MHDGZ_EINVAL if @a response was not created by @a gz, for an
 *         unknown flag, for both LENGTH_HIDING and NO_LENGTH_HIDING, or for
 *         LOW_LATENCY on a response that is not a stream; MHDGZ_EBUSY for
 *         other flags than it was queued with (the same again: a no-op).
 * @note Thread-safe; call before the response is first queued.
 */
MHDGZ_API int mhdgz_response_set_flags(struct mhdgz *gz, struct MHD_Response *response,
				       unsigned int flags);

/** Why a response was or was not coded: the plan's early-outs in this
 * order, each counted in struct mhdgz_stats. */
enum mhdgz_reason {
	MHDGZ_COMPRESSED = 0,    /**< a coded variant queued */
	MHDGZ_SKIP_UNTRACKED,    /**< response not created by this handler */
	MHDGZ_SKIP_OPT_OUT,      /**< MHDGZ_RESPONSE_IDENTITY */
	MHDGZ_SKIP_STATUS,       /**< 1xx, 204, 304, 412: no content (RFC 9110 6.4.1) */
	MHDGZ_SKIP_RANGE,        /**< 206 or a Content-Range header */
	MHDGZ_SKIP_ENCODED,      /**< already has a Content-Encoding */
	MHDGZ_SKIP_NO_TRANSFORM, /**< Cache-Control: no-transform (RFC 9111 5.2.2.6) */
	MHDGZ_SKIP_EMPTY,        /**< empty body (also a head-only response, libmicrohttpd 1.0) */
	MHDGZ_SKIP_TYPE,         /**< media type not compressible */
	MHDGZ_SKIP_NOT_ACCEPTED, /**< the client accepts no coding offered */
	MHDGZ_SKIP_SMALL,        /**< body below min_nbytes */
	MHDGZ_SKIP_NOT_SMALLER,  /**< coded output not smaller than the body */
	MHDGZ_SKIP_ERROR,        /**< allocation or compressor failure */
	MHDGZ_SKIP_MEMORY,       /**< a stream past limits.coder_nbytes */
	MHDGZ_REASON_COUNT
};

/** A reason's lowercase name ("compressed", "not-accepted", ...).
 * @return a static string; "unknown" out of range. Thread-safe. */
MHDGZ_API const char *mhdgz_reason_name(enum mhdgz_reason reason);

/** A byte count not known (a stream of unknown length, coded as sent). */
#define MHDGZ_NBYTES_UNKNOWN UINT64_MAX

/** What mhdgz_queue_response_ex() queued. */
struct mhdgz_outcome {
	/** sizeof(struct mhdgz_outcome), set by the caller. */
	size_t size;
	/** The coding queued: "gzip", "zstd", "br", "dcz" or "identity";
	 * static. */
	const char *coding;
	/** Why (MHDGZ_COMPRESSED when coded). */
	enum mhdgz_reason reason;
	/** Bytes of the application's body, or MHDGZ_NBYTES_UNKNOWN (a stream
	 * of unknown size, a response not made through mhdgz). */
	uint64_t body_nbytes;
	/** Bytes of the body as sent: the coded length of a body coded whole
	 * (and of a HEAD's stream where it was learnt), the identity length
	 * when not coded, MHDGZ_NBYTES_UNKNOWN for a coded stream; for HEAD
	 * what GET would send; 0 for 1xx, 204, 304 and 412. */
	uint64_t coded_nbytes;
	/** The status queued (MHDGZ_REQUEST_PRECONDITIONS: perhaps 304, 412). */
	unsigned int status;
};

/**
 * Request flag: evaluate If-Match, else If-Unmodified-Since, then
 * If-None-Match, else If-Modified-Since (RFC 9110 section 13.2.2) against
 * the response's ETag (each form the policy gives it names it) and
 * Last-Modified, for a 2xx of a response made through mhdgz. A failure
 * queues in its place a 412 without content or representation fields, or
 * for GET and HEAD the 304 of this client's 200 (its ETag form, Vary,
 * length; section 15.4.5). outcome->status tells which
 * (test_preconditions_412, test_preconditions_304).
 */
#define MHDGZ_REQUEST_PRECONDITIONS 0x1u

/** The request (zero-initialise, set size; zero means "not known"). */
struct mhdgz_request {
	/** sizeof(struct mhdgz_request); another size is refused. */
	size_t size;
	/** The method ("GET", "HEAD", ...); NULL: GET. */
	const char *method;
	/** The path without the query; NULL: no dictionary coding (RFC 9842). */
	const char *url;
	/** MHDGZ_REQUEST_* flags. */
	unsigned int flags;
};

/**
 * mhdgz_queue_response() knowing the request, reporting what was queued.
 * With the method a HEAD gets GET's fields and length, no content (RFC
 * 9110 section 9.3.2; a coded stream's length is learnt for files up to 16
 * MiB). With the path a body coded whole may go out dcz (RFC 9842): when
 * the client accepts dcz at least as much as the ordinary choice and its
 * Available-Dictionary (and Dictionary-ID) names a registered dictionary
 * whose pattern matches; under MHDGZ_ETAG_SUFFIX its ETag gets "-dcz-" and
 * 8 hex digits of the hash. Coded lengths remembered under a strong ETag
 * are the path's (without one, the handle's: ETags unique across paths).
 * @param gz as for mhdgz_queue_response() (NULL: queued as is).
 * @param connection as for mhdgz_queue_response(). @param status_code
 *        and @param response likewise.
 * @param req the request; borrowed. NULL: a GET, no path, no flags.
 * @param outcome receives what was queued (outcome->size set); may be NULL.
 * @return MHD_queue_response()'s result; MHD_NO also for a NULL connection
 *         or response, an unknown req->size, outcome->size or request flag
 *         (nothing queued then).
 * @note Thread-safe; call from the access handler as libmicrohttpd requires.
 */
MHDGZ_API enum MHD_Result
mhdgz_queue_response_ex(struct mhdgz *gz, struct MHD_Connection *connection,
			const struct mhdgz_request *req, unsigned int status_code,
			struct MHD_Response *response, struct mhdgz_outcome *outcome);

/* === Compression dictionaries (RFC 9842) ============================= */

/* A response names itself a dictionary (Use-As-Dictionary); a client
 * holding it sends its SHA-256 (Available-Dictionary) and may get dcz: a
 * 40-byte header and a zstd frame coded with it, reaching the whole of it
 * for a body within RFC 9842's window limit. Patterns: a path starting
 * with '/' where '*' matches any run; no other URLPattern syntax. */

/** A registered dictionary, the handler's until mhdgz_free(). */
struct mhdgz_dictionary;

/** What a dictionary is for (RFC 9842 section 2.1). */
struct mhdgz_dictionary_options {
	/** sizeof(struct mhdgz_dictionary_options), set by the caller. */
	size_t size;
	/** The URL pattern it serves (required, at most 1024 bytes). Copied. */
	const char *match;
	/** Fetch destinations ("script": lowercase and '-'), NULL-terminated,
	 * at most 8, or NULL: any. Advertised, not checked. Copied. */
	const char *const *match_dest;
	/** Its id (printable ASCII but '"' and '\', at most 1024 bytes) or
	 * NULL; a request's Dictionary-ID, when sent, must be it. Copied. */
	const char *id;
};

/**
 * Register a dictionary (its SHA-256 and zstd digest made once, shared
 * read-only): responses queued with a request url its pattern matches may
 * be dcz, and their Vary names Available-Dictionary (RFC 9842 6.2).
 * @param gz the handler.
 * @param data the dictionary's bytes; copied.
 * @param data_nbytes its size, 1 byte to 100 MiB.
 * @param opts its pattern, destinations and id; borrowed.
 * @param dict_ret receives the dictionary (owned by @a gz); may be NULL.
 * @return 0; MHDGZ_EINVAL for NULL arguments, an unknown opts->size, a
 *         size, pattern, destination or id out of what is described above;
 *         MHDGZ_ENOTSUP without zstd; MHDGZ_ENOMEM.
 * @note Thread-safe, also while other threads queue responses. The first
 *       registered that matches wins.
 */
MHDGZ_API int mhdgz_dictionary_add(struct mhdgz *gz, const void *data, size_t data_nbytes,
				   const struct mhdgz_dictionary_options *opts,
				   const struct mhdgz_dictionary **dict_ret);

/**
 * mhdgz_dictionary_add() with the body of @a response (a buffer response,
 * or a file response read now, made through @a gz and not yet queued),
 * then mhdgz_response_use_as_dictionary() on it.
 * @return 0; as mhdgz_dictionary_add(), and MHDGZ_EINVAL for a response not
 *         @a gz's, a stream or one already queued; MHDGZ_EBACKEND when the
 *         file cannot be read; MHDGZ_EMHD (the dictionary stays
 *         registered).
 * @note Thread-safe as mhdgz_dictionary_add(); not while another thread
 *       queues @a response.
 */
MHDGZ_API int mhdgz_dictionary_add_response(struct mhdgz *gz, struct MHD_Response *response,
					    const struct mhdgz_dictionary_options *opts,
					    const struct mhdgz_dictionary **dict_ret);

/**
 * Advertise @a dict on @a response (any response, before its first queue;
 * borrowed): the Use-As-Dictionary field (RFC 9842 section 2.1) with
 * match, match-dest and id as registered. The response should carry the
 * dictionary's bytes and be cacheable (Cache-Control: max-age).
 * @return 0; MHDGZ_EINVAL for NULL arguments; MHDGZ_EMHD if libmicrohttpd
 *         refused the field.
 * @note Not thread-safe on the same response (as MHD_add_response_header).
 */
MHDGZ_API int mhdgz_response_use_as_dictionary(struct MHD_Response *response,
					       const struct mhdgz_dictionary *dict);

/**
 * The coding to send, chosen as the handler chooses (RFC 9110 section
 * 12.5.3: the highest q, ties to the first in @a offered, none when that q
 * is 0 or an explicit identity is higher), for files the application coded
 * itself (gzserve --precompressed; the order from mhdgz_coding_info()).
 * @param lines the Accept-Encoding values; borrowed; NULL entries skipped.
 * @param count number of lines; 0: no Accept-Encoding.
 * @param offered the codings the caller can send, in its order; borrowed.
 * @param noffered how many.
 * @param coding_ret receives the coding; untouched when 0 is returned.
 * @return 1 and *coding_ret, or 0: send identity. Thread-safe, allocates
 *         nothing.
 */
MHDGZ_API int mhdgz_accept_coding(const char *const *lines, size_t count,
				  const enum mhdgz_coding *offered, size_t noffered,
				  enum mhdgz_coding *coding_ret);

/* === Request bodies: uploads coded gzip ============================== */

/*
 * A request body sent "Content-Encoding: gzip" is inflated as it comes,
 * within limits that stop a decompression bomb: mhdgz_upload_new() on the
 * access handler's first call, mhdgz_upload_feed() on each with data,
 * mhdgz_upload_finish() on the final one (a nonzero status: queue
 * mhdgz_upload_refusal_response()), mhdgz_upload_free() when the request
 * completes. Act on the decoded bytes only once finish returned 0. A body
 * refused half way is read to its end and discarded; mhdgz(3), REQUEST BODIES.
 */

/** Defaults of struct mhdgz_upload_options. @{ */
#define MHDGZ_UPLOAD_DEFAULT_MAX_DECODED_NBYTES (64ull * 1024 * 1024)
#define MHDGZ_UPLOAD_DEFAULT_MAX_RATIO 200u /* Apache's DeflateInflateRatioLimit */
#define MHDGZ_UPLOAD_DEFAULT_RATIO_BURST_NBYTES (1024u * 1024)
#define MHDGZ_UPLOAD_DEFAULT_MAX_MEMBERS 16u
#define MHDGZ_UPLOAD_DEFAULT_CHUNK_NBYTES (16u * 1024)
#define MHDGZ_UPLOAD_UNLIMITED UINT64_MAX /* max_decoded_nbytes: no limit */
/** @} */

/** Limits of one request body (zero-initialise, set size; zero: default). */
struct mhdgz_upload_options {
	/** sizeof(struct mhdgz_upload_options); another size: MHDGZ_EINVAL. */
	size_t size;
	/** Most decoded bytes (identity too); more: 413, MHDGZ_UPLOAD_TOO_LARGE
	 * (the callback got exactly this many). MHDGZ_UPLOAD_UNLIMITED: none. */
	uint64_t max_decoded_nbytes;
	/** Most decoded bytes per coded byte past ratio_burst_nbytes (gzip);
	 * more: 413, MHDGZ_UPLOAD_RATIO. */
	unsigned int max_ratio;
	/** Decoded bytes before max_ratio is checked (1: from the start). */
	uint64_t ratio_burst_nbytes;
	/** Most gzip members; one more: 413 (MHDGZ_UPLOAD_MEMBERS). */
	unsigned int max_members;
	/** Most decoded bytes per data callback call (gzip). */
	size_t chunk_nbytes;
};

/** Why an upload was refused (the first refusal is final; counted in
 * mhdgz_stats uploads_refused); the status to send in parentheses. */
enum mhdgz_upload_refusal {
	MHDGZ_UPLOAD_OK = 0,      /**< not refused (counted when the body completes) */
	MHDGZ_UPLOAD_CODING,      /**< (415) another coding, or gzip twice (RFC 9110 15.5.16) */
	MHDGZ_UPLOAD_TOO_LARGE,   /**< (413) more than max_decoded_nbytes */
	MHDGZ_UPLOAD_RATIO,       /**< (413) over max_ratio past the burst */
	MHDGZ_UPLOAD_MEMBERS,     /**< (413) more than max_members gzip members */
	MHDGZ_UPLOAD_MALFORMED,   /**< (400) not gzip, corrupt, bad CRC-32 or ISIZE (RFC 1952) */
	MHDGZ_UPLOAD_TRUNCATED,   /**< (400) the body ended inside a gzip member */
	MHDGZ_UPLOAD_APPLICATION, /**< (the callback's) the data callback refused the bytes */
	MHDGZ_UPLOAD_NOMEM,       /**< (500) an allocation failed while inflating */
	MHDGZ_UPLOAD_REFUSAL_COUNT
};

/** Gets decoded bytes in order (data[0..nbytes), borrowed) from
 * mhdgz_upload_feed(); returns 0, or a status 400-599 to refuse (else 500). */
typedef unsigned int (*mhdgz_upload_data_fn)(void *cls, const void *data, size_t nbytes);

struct mhdgz_upload; /**< a request body being read and decoded */

/** Most body bytes mhdgz_upload_feed() discards after a refusal: 1 MiB,
 * curl's "Expect: 100-continue" threshold. A refusal from the fields goes
 * on the first call; to let the client read it, linger (mhdgz(3)). */
#define MHDGZ_UPLOAD_DISCARD_NBYTES (1024ull * 1024)

/**
 * Begin a request body from its Content-Encoding (RFC 9110 section 8.4):
 * none or identity as is, gzip once inflated (about 39 KiB plus
 * chunk_nbytes), else refused 415 (an identity length over the limit: 413).
 * @param gz the handler; the upload keeps it alive until mhdgz_upload_free().
 * @param connection the request, on the access handler's first call.
 * @param opts limits, or NULL for the defaults; copied.
 * @param data_fn receives the decoded bytes; @param data_cls its argument.
 * @param up_ret receives the upload, the caller's; untouched on error.
 * @return 0 (also for a body refused from its fields); MHDGZ_EINVAL for a
 *         NULL gz, connection, data_fn or up_ret or an unknown opts->size;
 *         MHDGZ_ENOMEM.
 * @note Thread-safe; an upload is then used by one thread at a time.
 */
MHDGZ_API int mhdgz_upload_new(struct mhdgz *gz, struct MHD_Connection *connection,
			       const struct mhdgz_upload_options *opts,
			       mhdgz_upload_data_fn data_fn, void *data_cls,
			       struct mhdgz_upload **up_ret);

/**
 * Decode the next piece as the access handler received it (RFC 1952,
 * RFC 9110 section 8.4.1.3), checking the limits; consumes every byte
 * (*upload_data_size becomes 0). Once refused, pieces are discarded, up
 * to MHDGZ_UPLOAD_DISCARD_NBYTES: past them none is (return MHD_NO).
 * @param up the upload; NULL returns 500.
 * @param upload_data the piece; borrowed.
 * @param upload_data_size its size in bytes on entry, 0 on return (but
 *        past the discard bound).
 * @return 0 while accepted so far, else the status to send (the same on
 *         every later call).
 * @note One thread at a time per upload.
 */
MHDGZ_API unsigned int mhdgz_upload_feed(struct mhdgz_upload *up, const char *upload_data,
					 size_t *upload_data_size);

/**
 * The body has ended (the access handler's final call): checks that it did
 * not end inside a gzip member.
 * @param up the upload; NULL returns 500.
 * @return 0 if the whole body was accepted, else the status to send (400
 *         truncated, or the earlier refusal's); the same when called again.
 * @note One thread at a time per upload.
 */
MHDGZ_API unsigned int mhdgz_upload_finish(struct mhdgz_upload *up);

/** What an upload is and has done (mhdgz_upload_get_info()). */
struct mhdgz_upload_info {
	/** sizeof(struct mhdgz_upload_info), set by the caller. */
	size_t size;
	/** "gzip", "identity" (static), or NULL for a coding not supported. */
	const char *coding;
	/** Body bytes read as sent (coded) before any refusal, in bytes. */
	uint64_t encoded_nbytes;
	/** Decoded bytes the data callback accepted, in bytes. */
	uint64_t decoded_nbytes;
	/** gzip members begun (0 for identity). */
	unsigned int members;
	/** Why it was refused; MHDGZ_UPLOAD_OK if it was not. */
	enum mhdgz_upload_refusal refusal;
	/** Its name, static: "ok", "coding", "too-large", "ratio", "members",
	 * "malformed", "truncated", "application" or "nomem". */
	const char *refusal_name;
	/** The status to send for the refusal; 0 if not refused. */
	unsigned int status;
};

/**
 * Read what an upload is and has done (an access log, an answer).
 * @param up the upload; borrowed.
 * @param info the caller's struct, info->size set; filled on success.
 * @return 0; MHDGZ_EINVAL for NULL arguments or an unknown info->size.
 * @note Not thread-safe with mhdgz_upload_feed() on the same upload.
 */
MHDGZ_API int mhdgz_upload_get_info(const struct mhdgz_upload *up, struct mhdgz_upload_info *info);

/**
 * A plain-text response for a refused request body, "STATUS PHRASE\n", and
 * for 415 "Accept-Encoding: gzip" (RFC 9110 sections 12.5.3, 15.5.16): queue
 * it with MHD_queue_response() and the same status, then destroy it.
 * @param status_code the status (what mhdgz_upload_feed() or
 *        mhdgz_upload_finish() returned).
 * @return a response owned by the caller, or NULL when libmicrohttpd
 *         cannot make one. Thread-safe.
 */
MHDGZ_API struct MHD_Response *mhdgz_upload_refusal_response(unsigned int status_code);

/**
 * Release an upload (its inflater, its reference to the handler); NULL is
 * a no-op. Call it once, when the request is done (the request completed
 * callback also runs when the client leaves mid-body).
 * @note Not thread-safe with other calls on the same upload.
 */
MHDGZ_API void mhdgz_upload_free(struct mhdgz_upload *up);

/* === Stats =========================================================== */

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
	uint64_t pool_idle;       /**< compressor pools: compressors idle now */
	uint64_t digests_dropped; /**< integrity fields of the identity bytes
				   *   left out of coded responses (RFC 9530) */
	uint64_t padded;          /**< gzip responses queued with length-hiding
				   *   padding (cache hits and HEADs included) */
	/** Coded variants queued per enum mhdgz_coding (they sum to
	 * compressed); the pool counters count every coding's pools. */
	uint64_t coded[MHDGZ_CODING_COUNT];
	uint64_t uploads;          /**< request bodies begun (mhdgz_upload_new()) */
	uint64_t uploads_gzip;     /**< of which coded gzip */
	uint64_t upload_bytes_in;  /**< request body bytes read as sent, in bytes */
	uint64_t upload_bytes_out; /**< decoded bytes given to data callbacks, in bytes */
	/** Request bodies refused, per enum mhdgz_upload_refusal;
	 * [MHDGZ_UPLOAD_OK] counts the bodies that completed accepted. */
	uint64_t uploads_refused[MHDGZ_UPLOAD_REFUSAL_COUNT];
	uint64_t pool_trims; /**< compressor pools: idle compressors freed by
				   *   trimming (pool_trim_ms) */
	/** The store (limits.store_nbytes): lookups answered (a coded body or
	 * length reused without compressing), lookups not answered, items
	 * dropped for the budget; bytes held now (coded bytes, 128 per item).
	 * A response queued once looks nothing up. @{ */
	uint64_t store_hits;
	uint64_t store_misses;
	uint64_t store_evictions;
	uint64_t store_nbytes;
	/** @} */
	uint64_t dict_hits;        /**< dcz responses queued (also in coded[ZSTD]) */
	uint64_t coder_nbytes;     /**< compressor state charged to live streams now */
	uint64_t dict_bytes_saved; /**< bytes dcz saved against plain zstd, summed */
	uint64_t coded_bytes_in[MHDGZ_CODING_COUNT];  /**< bytes_in per coding sent */
	uint64_t coded_bytes_out[MHDGZ_CODING_COUNT]; /**< bytes_out per coding sent */
};

/**
 * Read the handler's counters.
 * @param gz the handler.
 * @param st the caller's struct with st->size set; filled on success.
 * @return 0; MHDGZ_EINVAL for NULL arguments or an unknown st->size.
 * @note Thread-safe; each counter is atomic, the set not one snapshot.
 */
MHDGZ_API int mhdgz_get_stats(const struct mhdgz *gz, struct mhdgz_stats *st);

/* === Memory ========================================================== */

/**
 * Free now the idle compressors trimming would free (beyond
 * limits.pool_idle_low, unused for limits.pool_trim_ms), then with glibc
 * give heap pages back (malloc_trim). Pools trim only when a compressor is
 * taken or given back: call this from a timer if the server can go quiet.
 * @param gz the handler; NULL does nothing.
 * @return compressors freed (also in mhdgz_stats pool_trims).
 * @note Thread-safe, also while requests are served.
 */
MHDGZ_API size_t mhdgz_trim(struct mhdgz *gz);

/** An allocator for all the library allocates (not libmicrohttpd's). */
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
 * Each compressor uses the one installed when it was made (zlib zalloc,
 * ZSTD_customMem, brotli, libdeflate_alloc_compressor_ex from 1.19). Older
 * libdeflate (1.14) has one process-wide allocator: from the first call on,
 * every libdeflate compressor of the process goes through mhdgz's; call it
 * before any exists (mhdgz(3), MEMORY).
 * @param alloc the allocator; copied. NULL restores the default.
 * @return 0; MHDGZ_EINVAL for an unknown size or a NULL function;
 *         MHDGZ_EBUSY while memory from the current allocator is live.
 * @note Not thread-safe with any other mhdgz call: call it at start-up.
 */
MHDGZ_API int mhdgz_set_allocator(const struct mhdgz_allocator *alloc);

/* === Errors ========================================================== */

#define MHDGZ_OK 0          /**< success */
#define MHDGZ_ENOMEM (-1)   /**< an allocation failed */
#define MHDGZ_EINVAL (-2)   /**< an argument is invalid (level out of range, ...) */
#define MHDGZ_EBACKEND (-3) /**< the compression library reported an error */
#define MHDGZ_ENOSPC (-4)   /**< the output does not fit in the space given */
#define MHDGZ_ENOTSUP (-5)  /**< backend or capability not compiled in */
#define MHDGZ_EMHD (-6)     /**< libmicrohttpd refused a call */
#define MHDGZ_EBUSY (-7)    /**< resource in use */

/**
 * A message for an MHDGZ_E* code; for the code the last failing mhdgz_new()
 * on this thread returned, the option refused and what it allows ("zstd.level:
 * 23 is outside 1..19"; test_option_errors).
 * @return a static string, or that detail until the next mhdgz_new() on this
 *         thread; "unknown error" for other values. Thread-safe.
 */
MHDGZ_API const char *mhdgz_strerror(int err);

#ifdef __cplusplus
}
#endif

#endif /* MHDGZ_H */
