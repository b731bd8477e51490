/* gz_stream.h: the stream pump: pull from a source, compress, sync-flush on a stall or per chunk, finish. */
#ifndef GZ_STREAM_H
#define GZ_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "gz_backend.h"
#include "gz_error.h"
#include "gz_pool.h"

/*
 * A source as the pump sees it: read up to max bytes into buf. Returns the
 * number of bytes (> 0), 0 when no data is ready yet (the pump flushes what
 * it holds and returns; call again later), GZ_SOURCE_END at the end of the
 * body, or GZ_SOURCE_ERROR (the body cannot be completed). The pump never
 * calls it again after END or ERROR.
 */
#define GZ_SOURCE_END (-1)
#define GZ_SOURCE_ERROR (-2)
typedef ssize_t (*gz_source_fn)(void *cls, uint8_t *buf, size_t max);

/*
 * One gzip member produced from a source, a window at a time. The
 * compressor comes from a streaming pool at gz_pump_init and goes back to it
 * the moment the trailer is written or the pump fails, not when the pump is
 * finished with (a pooled compressor is in use only while it works).
 *
 * Flush policy: output may lag input (better ratio) while the source keeps
 * producing; when the source stalls (returns 0), what the compressor holds
 * is sync-flushed once (RFC 1951 empty stored block) so data already
 * produced is not held back; in low-latency mode every source chunk is
 * compressed and sync-flushed before the source is asked for more, and a
 * read returns as soon as one chunk's output is complete.
 *
 * A paced pump (GZ_PUMP_PACED: an application's reader, which may block or
 * always be ready) calls its source at most once per gz_pump_read and
 * returns what the compressor has after it; when the compressor has held
 * everything for GZ_PUMP_FLUSH_US since the pump's last output, that call
 * sync-flushes it. So the first byte of each stretch of input goes out
 * within one source call plus GZ_PUMP_FLUSH_US, however slowly or quickly
 * the source produces, and the caller (libmicrohttpd) sees the connection
 * between any two source calls. Its first bytes, when a read yields the
 * member's header alone, wait for the read that has more. An unpaced pump (a file: reads never
 * block) fills the whole window per read, and its bytes depend only on the
 * input, so a length computed once holds for every stream of the file.
 *
 * Not thread-safe: one pump per connection; different pumps may run on
 * different threads at once (the pool is thread-safe).
 */
struct gz_pump {
	struct gz_pool *pool;
	struct gz_compressor *c; /* NULL once given back */
	uint8_t *in;             /* source bytes not yet compressed */
	size_t in_cap;           /* bytes at in */
	size_t in_off, in_len;   /* unconsumed bytes: in[in_off .. in_off + in_len) */
	uint64_t in_total;       /* source bytes read so far */
	uint64_t out_total;      /* compressed bytes produced so far */
	bool low_latency;        /* sync-flush every source chunk */
	bool paced;              /* one source call per read, flushed after GZ_PUMP_FLUSH_US */
	uint64_t last_out_us;    /* paced: when the pump last produced bytes (monotonic) */
	/* Paced: the member's first bytes when they are its header alone,
	 * held for the read that has more (one chunk fewer per stream). */
	uint8_t held[32];
	size_t held_len, held_off;
	/* gz_pump_set_comment: the member's header carries a comment of
	 * comment_nbytes (gz_header_comment); hdr collects the backend's
	 * plain header, then hdr_sent bytes of the rewritten one went out. */
	size_t comment_nbytes;
	uint8_t hdr[GZ_HEADER_NBYTES];
	size_t hdr_len, hdr_sent;
	bool flushing;  /* a sync flush is not complete yet */
	bool unflushed; /* input given since the last complete sync flush */
	bool eof;       /* the source ended: finish the member */
	bool done;      /* the trailer has been written */
	int err;        /* 0, or the error that ended the pump */
};

/* gz_pump_init flags. */
#define GZ_PUMP_LOW_LATENCY 0x1u /* sync-flush every source chunk */
#define GZ_PUMP_PACED 0x2u       /* one source call per read (see above) */
/* A paced pump sync-flushes what it has held this long without output. */
#ifndef GZ_PUMP_FLUSH_US
#define GZ_PUMP_FLUSH_US 20000u
#endif

/*
 * Start a pump: take a compressor from pool (which must hold a streaming
 * backend) and allocate an input buffer of in_cap bytes (> 0); flags is a
 * set of GZ_PUMP_*. Returns 0, GZ_EINVAL (NULL, in_cap 0, a pool whose
 * backend does not stream), GZ_ENOMEM or GZ_EBACKEND; on error nothing is
 * held.
 */
int gz_pump_init(struct gz_pump *p, struct gz_pool *pool, size_t in_cap, unsigned int flags);
/* Give the member's header a comment of comment_nbytes (> 0; a gzip
 * pump only), before the first gz_pump_read. Its first reads send the
 * header so rewritten (as much of it as fits; nothing else with it), and
 * out_total counts it. GZ_EINVAL otherwise. */
int gz_pump_set_comment(struct gz_pump *p, size_t comment_nbytes);
/* Release the input buffer and, if still held (an abandoned stream), the
 * compressor. Safe on a zeroed or failed-init pump. */
void gz_pump_fini(struct gz_pump *p);

/*
 * Fill out[0 .. out_cap) (out_cap >= 1) with the next bytes of the member.
 * Returns the number of bytes written, >= 0, and sets *end_ret when the
 * member is complete (the bytes returned by this call, if any, are its
 * last); 0 bytes without *end_ret means nothing is to be handed over now:
 * the source has no data and everything it gave has been flushed out, or
 * (paced) the one source call's bytes are held until the flush bound; call
 * again later. Returns
 * GZ_EBACKEND if the compressor failed or made no progress with room to
 * write, GZ_ESOURCE if the source reported an error; after an error every
 * call returns the same error and no trailer is ever written (a truncated
 * member is never made to look complete).
 */
ssize_t gz_pump_read(struct gz_pump *p, gz_source_fn src, void *cls, uint8_t *out, size_t out_cap,
		     bool *end_ret);

#endif /* GZ_STREAM_H */
