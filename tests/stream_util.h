/* stream_util.h: daemon, libcurl and body-source helpers for the streaming end-to-end tests. */
#ifndef STREAM_UTIL_H
#define STREAM_UTIL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <curl/curl.h>

#include "mhdgz.h"

/* Whole-transfer timeout of every request in seconds (CURLOPT_TIMEOUT): a
 * server that hangs fails the transfer instead of the test runner. */
#ifndef SU_CURL_TIMEOUT_S
#define SU_CURL_TIMEOUT_S 60L
#endif

/* Most body bytes a transfer keeps; more fail it (a runaway stream is
 * reported, not swapped in). */
#ifndef SU_MAX_BODY
#define SU_MAX_BODY (64u * 1024 * 1024)
#endif

/* Most response header lines kept per transfer. */
#define SU_MAX_HDRS 48

/* Built with AddressSanitizer (GCC or clang)? Then RSS says nothing and the
 * 1 GiB test is skipped. */
#if defined(__SANITIZE_ADDRESS__)
#define SU_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer) ||                      \
	__has_feature(thread_sanitizer)
#define SU_SANITIZED 1
#endif
#endif
#ifndef SU_SANITIZED
#define SU_SANITIZED 0
#endif

/* ===================================================================== */
/*                               Server                                  */
/* ===================================================================== */

struct su_server;

/* Answer one request (second call of the access handler, body read):
 * create a response, queue it (normally with mhdgz_queue_response) and
 * destroy it. */
typedef enum MHD_Result (*su_route_fn)(struct su_server *s, struct MHD_Connection *c,
				       const char *url, const char *method);

struct su_server {
	struct MHD_Daemon *d;
	struct mhdgz *gz; /* borrowed */
	uint16_t port;
	su_route_fn route;
	void *cls; /* the test's fixture */
};

/* Start a daemon on 127.0.0.1, port 0. threads 0: one internal polling
 * thread; n > 0: a thread pool of n. Fails the test on error. */
void su_start(struct su_server *s, struct mhdgz *gz, unsigned int threads, su_route_fn route,
	      void *cls);
/* Stop the daemon (every connection closed, every response released).
 * Idempotent. */
void su_stop(struct su_server *s);

/* A handler with the given backend and level (0: default), min_size
 * (0: default); fails the test on error. */
struct mhdgz *su_gz_new(enum mhdgz_backend backend, int level, size_t min_size);

/* ===================================================================== */
/*                               Client                                  */
/* ===================================================================== */

/* su_fetch flags. */
#define SU_GZIP 0x1u   /* send "Accept-Encoding: gzip"; keep the coded bytes */
#define SU_DECODE 0x2u /* CURLOPT_ACCEPT_ENCODING "gzip": libcurl decodes */
#define SU_HEAD 0x4u   /* HEAD instead of GET */
#define SU_RAW 0x8u    /* CURLOPT_HTTP_TRANSFER_DECODING 0: raw chunked bytes */
#define SU_HTTP10 0x10u /* an HTTP/1.0 request (no chunked coding possible) */

struct su_reply;
/* Called with each piece of body as libcurl delivers it (after the
 * reply keeps it). */
typedef void (*su_data_fn)(struct su_reply *r, const uint8_t *p, size_t n);

struct su_reply {
	CURLcode rc;
	long status;
	uint8_t *body; /* malloc'd */
	size_t body_len, body_cap;
	char hdr[SU_MAX_HDRS][512]; /* "Name: value", CRLF stripped; trailer
				     * fields of a chunked body follow */
	unsigned int nhdr;
	bool hdr_overflow;
	const char *accept_encoding; /* non-NULL: sent as the Accept-Encoding line */
	bool discard;       /* keep no body bytes (only count them and call on_data) */
	size_t abort_after; /* > 0: the write callback fails once this many bytes are in */
	su_data_fn on_data; /* optional */
	void *cls;          /* for on_data */
	uint64_t writes;    /* write callback calls */
};

/* Zero a reply (keeping nothing). */
void su_reply_init(struct su_reply *r);
void su_reply_free(struct su_reply *r);

/* GET (or HEAD) http://127.0.0.1:port/path into r (which is reset first,
 * keeping accept_encoding, discard, abort_after, on_data and cls). h: a handle to reuse (keep-alive)
 * or NULL for a fresh one. Returns r->rc. */
CURLcode su_fetch(CURL *h, uint16_t port, const char *path, unsigned int flags,
		  struct su_reply *r);

/* The value of the first header line named name (case-insensitive), or
 * NULL; *count_ret (may be NULL) receives how many lines have the name. */
const char *su_header(const struct su_reply *r, const char *name, unsigned int *count_ret);

/* Parse a raw chunked body (RFC 9112 section 7.1). Returns 0 when it is
 * well-formed and ends with the last chunk and an empty trailer section;
 * -1 otherwise. *out (malloc'd) receives the chunk data, *nchunks the
 * number of non-empty chunks; *empty_early is set when a zero-size chunk
 * occurs before the end. */
int su_dechunk(const uint8_t *raw, size_t len, uint8_t **out, size_t *out_len, size_t *nchunks,
	       bool *empty_early);

/* ===================================================================== */
/*                             Utilities                                 */
/* ===================================================================== */

/* Milliseconds of CLOCK_MONOTONIC. */
uint64_t su_now_ms(void);
/* Poll pred(cls) every 5 ms for at most timeout_ms; returns its last value. */
bool su_wait(bool (*pred)(void *cls), void *cls, unsigned int timeout_ms);
/* The handler's counters; fails the test on error. */
struct mhdgz_stats su_stats(struct mhdgz *gz);
/* Every compressor taken from the compressor pool is back: no get without its
 * put. True when every created compressor is idle (pool below its cap), or
 * in pass-through mode when nothing is idle and every get was a miss. */
bool su_pool_all_back(struct mhdgz *gz);
/* VmRSS of this process in KiB (0 if unknown). */
uint64_t su_rss_kib(void);
/* A temporary file (mkstemp, unlinked) holding data; returns an fd opened
 * read-write, positioned at 0. Fails the test on error. */
int su_temp_file(const void *data, size_t len);

/* ===================================================================== */
/*                    A body source for content readers                  */
/* ===================================================================== */

/*
 * The body a content reader serves: data[0..len), at most chunk bytes per
 * call (and at most libmicrohttpd's max). Counts calls and free-callback
 * runs, and records protocol violations (a call after the free callback,
 * a call while another is running).
 */
struct su_src {
	const uint8_t *data; /* borrowed */
	uint64_t len;
	size_t chunk;
	_Atomic uint64_t calls;
	_Atomic uint64_t bytes;      /* bytes returned */
	_Atomic unsigned int frees;  /* free callback runs */
	_Atomic unsigned int inside; /* calls running now */
	_Atomic unsigned int max_inside;
	_Atomic unsigned int after_free; /* calls after the free callback */
};

/* MHD_ContentReaderCallback over a struct su_src. */
ssize_t su_src_read(void *cls, uint64_t pos, char *buf, size_t max);
/* MHD_ContentReaderFreeCallback over a struct su_src: counts. */
void su_src_free(void *cls);

#endif /* STREAM_UTIL_H */
