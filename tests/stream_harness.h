/* stream_harness.h: fixtures and checks shared by the streaming suites (check_hnd_stream_*.c, binary check_streaming). */
#ifndef STREAM_HARNESS_H
#define STREAM_HARNESS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "harness.h"

#define KIB 1024u
#define MIB (1024u * 1024u)

/* How long a test waits for the daemon to release a finished or abandoned
 * response (free callback, compressor back in the pool), in milliseconds. */
#define RELEASE_WAIT_MS 10000

/* ===================================================================== */
/*          One test: a handler, its daemon, a reply, the body           */
/* ===================================================================== */

struct st_test {
	struct mhdgz *gz; /* owned */
	struct th_server s;
	struct th_reply r;
	uint8_t *data; /* owned (may be NULL) */
	size_t len;
};

/* Start a daemon (one polling thread) for gz answering with route over cls;
 * the test owns gz and data from now on. */
void st_begin(struct st_test *t, struct mhdgz *gz, uint8_t *data, size_t len, th_route_fn route,
	      void *cls);
/* GET "/" (or as flags say) on a new connection into t->r. */
void st_get(struct st_test *t, unsigned int flags);
/* Stop the daemon (if running); free the reply, the handler and the data. */
void st_end(struct st_test *t);

/* A handler made from o (size set); fails the test on error. */
struct mhdgz *st_gz_from(const struct mhdgz_options *o);
/* A handler with backend, level (0: default) and MHDGZ_F_* flags. */
struct mhdgz *st_gz_new(enum mhdgz_backend be, int level, unsigned int flags);

/* ===================================================================== */
/*              Body fixture: one route serving one body                 */
/* ===================================================================== */

enum bf_kind { BF_CALLBACK, BF_FD, BF_FD_OFFSET };

/* A fresh response per request, made from the fixture, queued through
 * mhdgz_queue_response and destroyed at once (the usual pattern). */
struct bfix {
	enum bf_kind kind;
	struct th_src src;   /* BF_CALLBACK: the body; counts frees */
	uint64_t size;       /* announced size, or MHD_SIZE_UNKNOWN */
	size_t block_size;   /* BF_CALLBACK */
	int fd;              /* BF_FD*: the test's descriptor, dup'ed per response */
	uint64_t offset;     /* BF_FD_OFFSET */
	unsigned int status; /* 0 = 200 */
	const char *hdr[13]; /* name, value pairs, NULL-terminated */
	ssize_t (*reader)(void *cls, uint64_t pos, char *buf, size_t max); /* NULL = th_src_read */
	const char *footer_name, *footer_value; /* a trailer field, if set */
	_Atomic unsigned int create_failures;
	_Atomic unsigned int responses;
};

/* th_route_fn over a struct bfix. */
enum MHD_Result body_route(struct th_server *s, struct MHD_Connection *c, const char *url,
			   const char *method);
/* A callback body data[0..len), chunk bytes per reader call; known: the
 * size is announced; ctype (may be NULL): the Content-Type. */
void bfix_callback(struct bfix *f, const uint8_t *data, uint64_t len, bool known, size_t chunk,
		   size_t block_size, const char *ctype);
/* A file body: size bytes of fd from offset (0: mhdgz_response_from_fd). */
void bfix_file(struct bfix *f, int fd, uint64_t size, uint64_t offset, const char *ctype);
/* Append a header to the fixture's list. */
void bfix_header(struct bfix *f, const char *name, const char *value);

/* ===================================================================== */
/*        Live fixture: per-response reader state, stops, errors         */
/* ===================================================================== */

/* Most responses a test makes with per-response state. */
#define MAX_RESP 16

struct lfix;

/* The state of one response's reader: which fixture, and whether its free
 * callback has run (a reader call after it is a use after free). */
struct rstate {
	struct lfix *f;
	uint64_t next_pos;  /* the position the next call should have */
	unsigned int zeros; /* 0 returns left at the current stop */
	uint64_t stop_pos;  /* position of the current stop */
	uint64_t stop_t0;   /* ms when the current stop began */
	_Atomic bool freed;
};

/*
 * A generated body (data, len: cyclic over data when the stream is longer
 * than the buffer), per-response reader state, counters, and the
 * behaviour knobs of the tests.
 */
struct lfix {
	const uint8_t *data;
	size_t data_len; /* the generator cycles over data[0..data_len) */
	uint64_t len;    /* body length */
	bool known;      /* announce len (else MHD_SIZE_UNKNOWN) */
	size_t block_size;
	size_t chunk; /* most bytes per call */
	const char *ctype;
	const char *etag;
	uint64_t err_at;         /* UINT64_MAX: never; else END_WITH_ERROR at this position */
	uint64_t stop_every;     /* > 0: stop (return 0) at every multiple of this position */
	bool stop_at_start;      /* stop at position 0 too */
	unsigned int stop_zeros; /* counted stops: this many 0 returns */
	unsigned int stop_ms;    /* timed stops: return 0 for this many ms */
	struct rstate rs[MAX_RESP];
	_Atomic unsigned int nresp;
	_Atomic unsigned int frees;
	_Atomic unsigned int after_free;
	_Atomic unsigned int bad_pos;
	_Atomic uint64_t calls;
	_Atomic uint64_t zero_calls;
	_Atomic uint64_t data_calls;
	_Atomic unsigned int create_failures;
};

void lfix_init(struct lfix *f, const uint8_t *data, size_t data_len, uint64_t len, bool known,
	       size_t chunk, const char *ctype);
/* Response k of f (k < MAX_RESP): a callback response over the state
 * f->rs[k] with live_read, or NULL when the library could not make it. */
struct MHD_Response *lfix_response(struct th_server *s, struct lfix *f, unsigned int k);
/* The content reader and free callback over a struct rstate. */
ssize_t live_read(void *cls, uint64_t pos, char *buf, size_t max);
void live_free(void *cls);
/* th_route_fn over a struct lfix: a fresh response per request, queued
 * with the request's method. */
enum MHD_Result live_route(struct th_server *s, struct MHD_Connection *c, const char *url,
			   const char *method);
/* th_wait predicate: every response made so far is freed. */
bool all_freed(void *cls);

/* ===================================================================== */
/*                               Checks                                  */
/* ===================================================================== */

void expect_same_bytes(const uint8_t *got, size_t got_len, const uint8_t *want, size_t want_len,
		       const char *what);
/* r is a 200 gzip stream of want[0..want_len): Content-Encoding: gzip
 * once, chunked, no Content-Length, one Vary listing Accept-Encoding, no
 * Accept-Ranges, ETag etag_want (NULL: none), and one complete RFC 1952
 * member decoding to want. */
void expect_gzip(const struct th_reply *r, const uint8_t *want, size_t want_len,
		 const char *etag_want);
/* r is an identity 200 of want[0..want_len): no Content-Encoding (or the
 * one given), Content-Length when known (else chunked), Vary listing
 * Accept-Encoding when vary. */
void expect_identity(const struct th_reply *r, const uint8_t *want, size_t want_len, bool known,
		     bool vary, const char *ce_want);
/* The reply is a 200 with Content-Encoding: gzip and one complete gzip
 * member decoding to want (framing not checked). */
void expect_gzip_body(const struct th_reply *r, const uint8_t *want, size_t want_len);
/* r holds a raw chunked body (TH_RAW): it must be well-formed with no empty
 * chunk before the last; r's body becomes the chunk data. */
void expect_dechunked(struct th_reply *r);
/* After the requests of a bfix: every response released exactly once,
 * every compressor back in the pool, no failed creation. */
void expect_released(struct th_server *s, struct bfix *f);
/* Every lfix response made so far is released, each exactly once, with no
 * reader call after its release, and every compressor is back. */
void expect_all_released(struct th_server *s, struct lfix *f);
/* After the daemon is stopped: exactly one free per lfix response. */
void expect_freed_once(struct lfix *f);

#endif /* STREAM_HARNESS_H */
