/* gz_inflate.h: a gzip request body inflated chunk by chunk within limits (zlib), for uploads. */
#ifndef GZ_INFLATE_H
#define GZ_INFLATE_H

#include <stddef.h>
#include <stdint.h>

/*
 * The inflater of a request body coded gzip (RFC 9110 section 8.4.1.3,
 * RFC 1952): bytes are fed as they arrive, in pieces of any size, and the
 * decoded bytes go to a sink in pieces of at most out_cap bytes, so its
 * memory is zlib's inflate state (a 32 KiB window and ~7 KiB) plus
 * out_cap, whatever the body.
 *
 * One or more members, back to back (RFC 1952 section 2.2); zero members
 * (an empty body) decode to nothing. Each member's CRC-32 and ISIZE are
 * checked by zlib. Errors, each final (every later feed returns it again):
 *  - GZ_EDATA: not a gzip member where one must start (also trailing
 *    garbage after a member), corrupt deflate data, a wrong CRC-32 or
 *    ISIZE; or, at gz_inflate_finish, a member cut short;
 *  - GZ_ELIMIT: a limit of struct gz_inflate_limits exceeded (which one:
 *    gz_inflate_stopped); no byte past max_out is ever given to the sink,
 *    and a body stopped by max_out has given it exactly max_out bytes;
 *  - GZ_ESINK: the sink returned nonzero (its value: gz_inflate_sink_rc);
 *  - GZ_ENOMEM: zlib's state could not be allocated.
 */

/* Malformed gzip data (see above). Internal: the handler turns it into a
 * 400 response, never a public code. */
#define GZ_EDATA (-101)
/* A limit was exceeded. Internal: the handler answers 413. */
#define GZ_ELIMIT (-102)
/* The sink stopped the body. Internal. */
#define GZ_ESINK (-103)

/* What stopped an inflater (gz_inflate_stopped). */
enum gz_inflate_stop {
	GZ_INF_RUNNING = 0, /* not stopped */
	GZ_INF_MAX_OUT,     /* more than max_out decoded bytes */
	GZ_INF_RATIO,       /* decoded > ratio x encoded, past the burst */
	GZ_INF_MEMBERS,     /* more than max_members members */
	GZ_INF_BAD_DATA,    /* malformed: header, deflate data, CRC-32, ISIZE, trailing bytes */
	GZ_INF_TRUNCATED,   /* the body ended inside a member */
	GZ_INF_SINK,        /* the sink returned nonzero */
	GZ_INF_NOMEM        /* allocation failure */
};

/* Limits; 0 in a field means no limit of that kind. */
struct gz_inflate_limits {
	uint64_t max_out;     /* most decoded bytes in all, in bytes */
	uint32_t ratio;       /* most decoded bytes per encoded byte consumed ... */
	uint64_t ratio_burst; /* ... checked once more than this many bytes are decoded */
	uint32_t max_members; /* most gzip members */
};

/* Receives decoded bytes p[0..n) (n > 0), borrowed for the call; returns 0
 * to go on, or nonzero to stop the inflater with GZ_ESINK. */
typedef int (*gz_inflate_sink)(void *cls, const uint8_t *p, size_t n);

struct gz_inflate;

/* A new inflater with its own copy of lim, delivering to sink(cls, ...) in
 * pieces of at most out_cap bytes (0: a default of 16 KiB). GZ_OK and
 * *ret, GZ_EINVAL (NULL sink or ret), GZ_ENOMEM. Allocates through
 * gz_alloc (zlib's state too). */
int gz_inflate_new(const struct gz_inflate_limits *lim, size_t out_cap, gz_inflate_sink sink,
		   void *cls, struct gz_inflate **ret);
/* Free; NULL is a no-op. */
void gz_inflate_free(struct gz_inflate *z);
/* Inflate in[0..len) (len 0 is a no-op) and deliver what it decodes.
 * GZ_OK, or an error above (final). Not thread-safe per inflater. */
int gz_inflate_feed(struct gz_inflate *z, const uint8_t *in, size_t len);
/* The body ended: GZ_OK if it ended between members (or was empty),
 * GZ_EDATA if a member was cut short; an earlier error again. */
int gz_inflate_finish(struct gz_inflate *z);

/* Counters, exact at any time: encoded bytes fed and consumed before a
 * stop (bytes after a stop are not counted), decoded bytes given to the
 * sink, members begun (the first byte of each counted) and completed. */
struct gz_inflate_counts {
	uint64_t in_nbytes;
	uint64_t out_nbytes;
	uint32_t members;
	uint32_t members_done;
};
void gz_inflate_get_counts(const struct gz_inflate *z, struct gz_inflate_counts *c);
/* Why it stopped, GZ_INF_RUNNING while it has not. */
enum gz_inflate_stop gz_inflate_stopped(const struct gz_inflate *z);
/* The sink's nonzero return value after GZ_ESINK, else 0. */
int gz_inflate_sink_rc(const struct gz_inflate *z);

#endif /* GZ_INFLATE_H */
