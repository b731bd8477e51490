/* bench.h: what the bench_handler files share: the rows, the options, the per-thread worker and the allocation counters. */
/*
 * Calls point one way: bench_handler.c (main) -> bh_runner.c,
 * bh_verify.c, bh_events.c, bh_dict.c -> bh_stream.c -> bh_common.c,
 * bh_alloc.c. Nothing calls up into bench_handler.c; the state the files
 * share (the rows, the options, the payload slices) is defined in
 * bh_common.c.
 */
#ifndef BENCH_H
#define BENCH_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <pthread.h>

#include <microhttpd.h>
#include <zlib.h>

/* The public header, and the selection without a connection (hnd_select)
 * that the rows time: the bench links the convenience libraries. */
#include "hnd_handle.h"
#include "hnd_queue.h"

/* Most --count passes and --cpu entries. */
#define BH_MAX_COUNT 64
#define BH_MAX_CPUS 16

/* Row families; see bench_handler.c for what one op is in each. */
/* K_IDENTITY: a fresh mhdgz response queued for a client without gzip (the
 * pass-through cost); K_PLAIN: the same with libmicrohttpd alone. */
/* K_PADDED: K_HANDLER with MHDGZ_F_LENGTH_HIDING (BREACH padding, default
 * padding.max_nbytes). K_STREAM: a bulk stream of unknown size through a
 * real daemon and a keep-alive client (bh_stream.c). */
enum bh_kind {
	K_HANDLER,
	K_RAW,
	K_CACHED,
	K_UNPOOLED,
	K_SMALLWIN,
	K_IDENTITY,
	K_PLAIN,
	K_PADDED,
	K_STREAM,
	K_COUNT
};

#define BH_NSIZES 3
/* Defined in bh_common.c, as is every extern below. */
extern const char *const bh_kind_name[K_COUNT];
extern const size_t bh_size[BH_NSIZES];
extern const char *const bh_size_name[BH_NSIZES];

/* The payload slices, one per size (length 0: too short a --payload);
 * loaded by bench_handler.c before the rows are built. */
extern uint8_t *bh_body[BH_NSIZES];
extern size_t bh_body_len[BH_NSIZES];

/* One handler per (kind, backend, level), shared by its sizes and S/P rows
 * and kept for the whole run (its pool stays warm, as in a server). */
struct bh_handler {
	enum bh_kind kind; /* K_HANDLER, K_CACHED, K_UNPOOLED, K_PADDED or K_STREAM */
	const struct gz_backend *be;
	int level;
	/* The request's Accept-Encoding, and the coding it must get: the
	 * handler's one coding for both, or (the default rows: options left
	 * at their defaults) a browser's list or "gzip". */
	const char *ae, *coding;
	bool deflt; /* the default rows' handler */
	struct mhdgz *gz;
	struct bh_handler *next;
};

/* Metrics of one sample (one timed run). M_CPU: process CPU time per op
 * (all threads), which other load on the machine inflates far less than
 * wall time. M_OWN_*: the share that went through mhdgz's allocator.
 * M_CHUNKS: chunks per response (K_STREAM only). */
enum { M_NS, M_MBS, M_OUTB, M_BOP, M_ALLOCS, M_OWN_ALLOCS, M_OWN_BOP, M_CPU, M_CHUNKS, M_NMETRICS };

/* One row: a configuration at one size, S or P. */
struct bh_cfg {
	enum bh_kind kind;
	const struct gz_backend *be;
	int level;
	int size_idx;
	int threads;          /* 0 = S (main thread), else P with this many threads */
	char name[160];       /* without the -N suffix */
	struct bh_handler *h; /* NULL for K_RAW and K_SMALLWIN */
	uint64_t n;           /* calibrated iterations (total over threads) */
	double sample[BH_MAX_COUNT][M_NMETRICS];
	int nsamples;
	double med[M_NMETRICS];
	struct bh_cfg *next;
};

struct bh_opts {
	double benchtime_s;   /* seconds per run, or 0 */
	uint64_t benchtime_n; /* fixed iterations ("Nx"), or 0 */
	int count;
	bool have_filter;
	regex_t filter;
	int cpus[BH_MAX_CPUS];
	int ncpus;
	const char *payload;
	const char *out;
	bool full;
	bool verbose;
};

/* Set by bench_handler.c's main from the command line; bh_cfgs is the
 * row list its build_rows() makes, which the runner and the verification
 * walk. */
extern struct bh_opts bh_opt;
extern int bh_online_cpus;
extern struct bh_cfg *bh_cfgs;
extern FILE *bh_out_file; /* --out, or NULL */

/* Per-thread state of one run. */
struct bh_worker {
	const struct bh_cfg *cfg;
	uint64_t n;
	pthread_t tid;
	pthread_barrier_t *bar;
	struct gz_compressor *z;     /* K_RAW */
	uint8_t *zout;               /* K_RAW, K_SMALLWIN */
	size_t zout_cap, zout_len;   /* K_RAW, K_SMALLWIN */
	struct MHD_Response *cached; /* K_CACHED */
	z_stream zs;                 /* K_SMALLWIN */
	bool zs_live;
	int fd;                    /* K_STREAM: the client's connection */
	uint8_t *rbuf;             /* K_STREAM: the response as received */
	size_t hdr_len;            /* K_STREAM: of it, the header block */
	uint8_t *body;             /* K_STREAM: the chunks' data */
	size_t body_cap, body_len; /* K_STREAM */
	uint64_t chunks;           /* K_STREAM: chunks received */
	uint64_t out_bytes;        /* compressed bytes produced (Raw, Stream) */
	int bad;                   /* an op did not compress */
};

/* bh_common.c: output to stdout and the --out file; fatal errors; the
 * zlib windowBits and memLevel nginx sizes to a body of len bytes
 * (returns 0 when the defaults 15 and 8 stand). */
void out(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
int nginx_params(size_t len, int *wbits_ret, int *memlevel_ret);

/* bh_runner.c: setup and timed runs. */
void worker_setup(struct bh_worker *w); /* also compresses once (Raw rows) */
void worker_teardown(struct bh_worker *w);
void bh_run_all(void); /* every pass, then the median rows */

/* bh_verify.c */
void bh_verify_all(void);
/* bh_dict.c: the dcz rows (after the others; "DictRows" for --filter). */
void bh_dict_rows(void);

/* bh_stream.c: the Stream rows. One daemon per run (start before the
 * workers connect, stop after they close; stop returns nonzero if a queue
 * went wrong); one connection per worker; bh_stream_op: one request, 0 if
 * a complete chunked 200 came back. */
void bh_stream_start(const struct bh_cfg *c, int nthreads);
int bh_stream_stop(void);
void bh_stream_connect(struct bh_worker *w);
void bh_stream_close(struct bh_worker *w);
int bh_stream_op(struct bh_worker *w);

/* bh_events.c: the event-stream rows, after the S/P rows. */
void bh_events_all(void);

/* bh_alloc.c: process-wide allocation counting. */
struct ba_counts {
	uint64_t allocs;     /* blocks allocated, everyone */
	uint64_t bytes;      /* bytes asked for, everyone */
	uint64_t own_allocs; /* of which through mhdgz's allocator */
	uint64_t own_bytes;
};
extern const bool ba_counting; /* false under a sanitizer: all counts stay 0 */
void ba_snapshot(struct ba_counts *c);
void ba_release(void); /* a worker thread about to exit */
/* Route mhdgz's allocations through the counting hook; call before any
 * mhdgz allocation. Returns mhdgz_set_allocator's result. */
int ba_install_mhdgz(void);

#endif /* BENCH_H */
