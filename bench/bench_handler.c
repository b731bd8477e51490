/* bench_handler.c: the GzipHandler S/P benchmarks (make bench) in Go's benchmark format. */
/*
 * Rows line up with Go gziphandler's BenchmarkGzipHandler_S2k ... P100k and
 * with tools that read Go's format (benchstat):
 *
 *   BenchmarkGzipHandler_S20k/libdeflate/level=6-2  12000  98765 ns/op
 *       207.40 MB/s  5343 out-B/op  412 B/op  3 allocs/op
 *
 * What one op is, per row family (NAME_{S,P}{2k,20k,100k}/BACKEND/level=L):
 *
 *  GzipHandler  Exactly what one request costs the handler, without sockets:
 *               mhdgz_response_from_buffer(body, MHD_RESPMEM_PERSISTENT),
 *               MHD_add_response_header(Content-Type: application/json),
 *               mhdgz_select() for a request carrying "Accept-Encoding:
 *               gzip" (negotiation, the decision, Vary merged into the
 *               response, a compressor from the compressor pool, compression,
 *               the gzip variant built with its headers), then
 *               MHD_destroy_response(), which destroys the variant too.
 *               mhdgz_queue_response() is mhdgz_select() followed by
 *               MHD_queue_response(); the latter only takes a reference, so
 *               it is left out with the socket. A fresh response per op
 *               means the response cache never hits (checked: every op must
 *               be a compression). Handler options are the defaults apart
 *               from backend and level.
 *  Raw          The floor the handler adds to: the backend's compress() call
 *               alone (src/gz_backend.h) into a preallocated buffer of
 *               gz_bound() bytes, one compressor per thread.
 *  Cached       One response (per thread) created once and selected again and
 *               again: every op is a cache hit returning the same variant.
 *  Unpooled     GzipHandler with MHDGZ_F_NO_POOL: a compressor is created and
 *               freed in every op, showing what the compressor pool buys.
 *  RawSmallWindow  zlib only, 2k: the raw call on a stream whose windowBits
 *               and memLevel are sized to the body as nginx does
 *               (nginx_params()); the small-body proposal, against Raw.
 *
 * S = one thread. P = N threads (--cpu; default the number of online CPUs)
 * sharing one handler (Raw: one compressor each); ns/op = wall time / total
 * ops. The "-N" suffix is Go's GOMAXPROCS: the online CPUs for S rows, the
 * thread count for P rows.
 *
 * Columns: MB/s is input (identity) bytes per second (10^6); out-B/op the
 * compressed body size; B/op and allocs/op count every allocation in the
 * process during the timed loop (malloc, calloc, realloc, memalign, ...
 * are interposed below and forwarded to glibc), like Go's -benchmem. The
 * allocation breakdown at the end separates mhdgz's own allocations
 * (counted through mhdgz_set_allocator) from libmicrohttpd's.
 *
 * Method: every configuration's output is verified once before anything is
 * timed (handler rows through a real libmicrohttpd daemon on 127.0.0.1 and
 * mhdgz_queue_response, so the bytes a client gets are inflated with zlib
 * and compared with the input; Raw rows by inflating the compress()
 * output). Each configuration is calibrated like Go's testing package (N
 * grows until a run lasts --benchtime), then the --count passes run every
 * configuration in turn (interleaved, so drift hits all alike) and the
 * medians are printed. A summary compares the backends with zlib and
 * checks the targets of issue 6; it also shows the process CPU time per op,
 * which other work on the machine disturbs less than wall time.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem, reallocarray, memalign, valloc */
#endif
#include "config.h"

#include <errno.h>
#include <malloc.h>
#include <regex.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/utsname.h>

#include <microhttpd.h>
#include <zlib.h>

#include "mhdgz.h"
#include "gz_backend.h"
#include "payload.h"

/* Most --count passes and --cpu entries. */
#define BH_MAX_COUNT 64
#define BH_MAX_CPUS 16
/* Default --benchtime in seconds when none is given. */
#ifndef BH_DEFAULT_BENCHTIME
#define BH_DEFAULT_BENCHTIME 1.0
#endif

/* ======================================================================== */
/* Process-wide allocation counting                                         */
/* ======================================================================== */

/*
 * The allocation functions are defined here, so the dynamic linker binds
 * every caller in the process (libmicrohttpd, zlib, libdeflate, ISA-L, libc
 * itself) to them; they count and forward to glibc's own entry points.
 * Counters live in per-thread slots (one cache line each, written only by
 * their thread with plain relaxed load/store), so counting costs a few
 * nanoseconds and no cache-line traffic between the P threads; readers sum
 * the slots while the workers wait at a barrier. A worker folds its slot
 * into the retired totals before it exits; allocations after that, and of
 * threads beyond BA_SLOTS, go to a shared slot with atomic adds.
 * free() is not counted (Go's allocs/op counts allocations only).
 */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define BA_INTERPOSE 0 /* the sanitizer owns malloc: no counting */
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
	__has_feature(memory_sanitizer)
#define BA_INTERPOSE 0
#endif
#endif
#ifndef BA_INTERPOSE
#define BA_INTERPOSE 1
#endif

extern void *__libc_malloc(size_t nbytes);
extern void *__libc_calloc(size_t count, size_t nbytes);
extern void *__libc_realloc(void *ptr, size_t nbytes);
extern void __libc_free(void *ptr);
extern void *__libc_memalign(size_t align, size_t nbytes);

#define BA_SLOTS 128

struct ba_counts {
	uint64_t allocs;     /* blocks allocated, everyone */
	uint64_t bytes;      /* bytes asked for, everyone */
	uint64_t own_allocs; /* of which through mhdgz's allocator */
	uint64_t own_bytes;
};

struct ba_slot {
	_Atomic uint64_t v[4]; /* struct ba_counts, in order */
	atomic_int used;
} __attribute__((aligned(64)));

static struct ba_slot ba_slot[BA_SLOTS];
static struct ba_slot ba_shared; /* atomic adds */
static struct ba_slot ba_retired; /* atomic adds */
/* Initial-exec TLS of the executable: reading it never allocates. */
static __thread struct ba_slot *ba_mine;
static __thread bool ba_done; /* this thread released its slot */

static struct ba_slot *
ba_self(void)
{
	unsigned int i;

	if (ba_mine)
		return ba_mine;
	if (ba_done)
		return &ba_shared;
	for (i = 0; i < BA_SLOTS; i++) {
		int zero = 0;
		if (atomic_load_explicit(&ba_slot[i].used, memory_order_relaxed) == 0 &&
		    atomic_compare_exchange_strong(&ba_slot[i].used, &zero, 1)) {
			ba_mine = &ba_slot[i];
			return ba_mine;
		}
	}
	return &ba_shared;
}

static inline void
ba_add(unsigned int which, uint64_t n)
{
	struct ba_slot *s = ba_self();

	if (s == &ba_shared) {
		atomic_fetch_add_explicit(&s->v[which], n, memory_order_relaxed);
		return;
	}
	atomic_store_explicit(&s->v[which],
			      atomic_load_explicit(&s->v[which], memory_order_relaxed) + n,
			      memory_order_relaxed);
}

static inline void
ba_count(size_t nbytes)
{
	ba_add(0, 1);
	ba_add(1, nbytes);
}

/* A worker thread about to exit: move its counts to the retired totals
 * and free its slot for the next thread. */
static void
ba_release(void)
{
	struct ba_slot *s = ba_mine;
	unsigned int i;

	if (!s)
		return;
	for (i = 0; i < 4; i++) {
		atomic_fetch_add(&ba_retired.v[i], atomic_load(&s->v[i]));
		atomic_store(&s->v[i], 0);
	}
	ba_mine = NULL;
	ba_done = true;
	atomic_store(&s->used, 0);
}

static void
ba_snapshot(struct ba_counts *c)
{
	uint64_t v[4];
	unsigned int i, k;

	for (k = 0; k < 4; k++)
		v[k] = atomic_load(&ba_shared.v[k]) + atomic_load(&ba_retired.v[k]);
	for (i = 0; i < BA_SLOTS; i++)
		for (k = 0; k < 4; k++)
			v[k] += atomic_load_explicit(&ba_slot[i].v[k], memory_order_relaxed);
	c->allocs = v[0];
	c->bytes = v[1];
	c->own_allocs = v[2];
	c->own_bytes = v[3];
}

#if BA_INTERPOSE
void *
malloc(size_t nbytes)
{
	ba_count(nbytes);
	return __libc_malloc(nbytes);
}

void *
calloc(size_t count, size_t nbytes)
{
	ba_count(count * nbytes);
	return __libc_calloc(count, nbytes);
}

void *
realloc(void *ptr, size_t nbytes)
{
	ba_count(nbytes);
	return __libc_realloc(ptr, nbytes);
}

void *
reallocarray(void *ptr, size_t count, size_t nbytes)
{
	if (nbytes && count > SIZE_MAX / nbytes) {
		errno = ENOMEM;
		return NULL;
	}
	return realloc(ptr, count * nbytes);
}

void
free(void *ptr)
{
	__libc_free(ptr);
}

void *
memalign(size_t align, size_t nbytes)
{
	ba_count(nbytes);
	return __libc_memalign(align, nbytes);
}

void *
aligned_alloc(size_t align, size_t nbytes)
{
	return memalign(align, nbytes);
}

int
posix_memalign(void **ptr_ret, size_t align, size_t nbytes)
{
	void *p;

	if (align < sizeof(void *) || (align & (align - 1)) != 0)
		return EINVAL;
	p = memalign(align, nbytes);
	if (!p)
		return ENOMEM;
	*ptr_ret = p;
	return 0;
}

void *
valloc(size_t nbytes)
{
	return memalign((size_t)sysconf(_SC_PAGESIZE), nbytes);
}

#endif /* BA_INTERPOSE */

/* mhdgz's allocator hook: counts mhdgz's own share, then the interposed
 * malloc counts it again as part of the process total. */
static void *
ba_gz_malloc(size_t nbytes, void *cls)
{
	(void)cls;
	ba_add(2, 1);
	ba_add(3, nbytes);
	return malloc(nbytes);
}

static void
ba_gz_free(void *ptr, void *cls)
{
	(void)cls;
	free(ptr);
}

/* ======================================================================== */
/* Output                                                                   */
/* ======================================================================== */

static FILE *bh_out_file; /* --out, or NULL */

static void __attribute__((format(printf, 1, 2)))
out(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	if (bh_out_file) {
		va_start(ap, fmt);
		vfprintf(bh_out_file, fmt, ap);
		va_end(ap);
	}
}

static void __attribute__((format(printf, 1, 2), noreturn))
die(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fputs("bench_handler: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static double
clock_s(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double
now_s(void)
{
	return clock_s(CLOCK_MONOTONIC);
}

/* ======================================================================== */
/* Configurations                                                           */
/* ======================================================================== */

enum bh_kind { K_HANDLER, K_RAW, K_CACHED, K_UNPOOLED, K_SMALLWIN, K_COUNT };

static const char *const bh_kind_name[K_COUNT] = {
	[K_HANDLER] = "GzipHandler",
	[K_RAW] = "Raw",
	[K_CACHED] = "Cached",
	[K_UNPOOLED] = "Unpooled",
	[K_SMALLWIN] = "RawSmallWindow",
};

#define BH_NSIZES 3
static const size_t bh_size[BH_NSIZES] = {PAYLOAD_JSON_2K, PAYLOAD_JSON_20K, PAYLOAD_JSON_100K};
static const char *const bh_size_name[BH_NSIZES] = {"2k", "20k", "100k"};

/* The payload slices, one per size. */
static uint8_t *bh_body[BH_NSIZES];
static size_t bh_body_len[BH_NSIZES];

/* One handler per (kind, backend, level), shared by its sizes and S/P rows
 * and kept for the whole run (its pool stays warm, as in a server). */
struct bh_handler {
	enum bh_kind kind; /* K_HANDLER, K_CACHED or K_UNPOOLED */
	const struct gz_backend *be;
	int level;
	struct mhdgz *gz;
	struct bh_handler *next;
};

/* Median metrics of one sample (one timed run). */
/* M_CPU: process CPU time per op (all threads), which other load on the
 * machine inflates far less than wall time. */
enum { M_NS, M_MBS, M_OUTB, M_BOP, M_ALLOCS, M_OWN_ALLOCS, M_OWN_BOP, M_CPU, M_NMETRICS };

struct bh_cfg {
	enum bh_kind kind;
	const struct gz_backend *be;
	int level;
	int size_idx;
	int threads;  /* 0 = S (main thread), else P with this many threads */
	char name[160]; /* without the -N suffix */
	struct bh_handler *h; /* NULL for K_RAW */
	uint64_t n;   /* calibrated iterations (total over threads) */
	double sample[BH_MAX_COUNT][M_NMETRICS];
	int nsamples;
	double med[M_NMETRICS];
	struct bh_cfg *next;
};

struct bh_opts {
	double benchtime_s; /* seconds per run, or 0 */
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

static struct bh_opts bh_opt;
static int bh_online_cpus;
static struct bh_handler *bh_handlers;
static struct bh_cfg *bh_cfgs, **bh_cfgs_tail = &bh_cfgs;

static const char *const bh_ae_gzip[] = {"gzip"};
static const struct mhdgz_request bh_req = {
	.size = sizeof(struct mhdgz_request),
	.accept_encoding = bh_ae_gzip,
	.accept_encoding_count = 1,
	.flags = 0,
};

static struct bh_handler *
handler_get(enum bh_kind kind, const struct gz_backend *be, int level)
{
	struct bh_handler *h;
	struct mhdgz_options o;
	enum mhdgz_backend id;
	int rc;

	for (h = bh_handlers; h; h = h->next)
		if (h->kind == kind && h->be == be && h->level == level)
			return h;
	if (mhdgz_backend_from_name(be->name, &id) != 0)
		die("backend %s has no public id", be->name);
	memset(&o, 0, sizeof o);
	o.size = sizeof o;
	o.backend = id;
	o.level = level;
	o.flags = kind == K_UNPOOLED ? MHDGZ_F_NO_POOL : 0;
	h = calloc(1, sizeof *h);
	if (!h)
		die("out of memory");
	h->kind = kind;
	h->be = be;
	h->level = level;
	rc = mhdgz_new(&o, &h->gz);
	if (rc < 0)
		die("mhdgz_new(%s, %d): %s", be->name, level, mhdgz_strerror(rc));
	h->next = bh_handlers;
	bh_handlers = h;
	return h;
}

static bool
filter_ok(const char *name)
{
	return !bh_opt.have_filter || regexec(&bh_opt.filter, name, 0, NULL, 0) == 0;
}

/* Add the rows of one (kind, backend, level, size): S, then P per --cpu. */
static void
add_rows(enum bh_kind kind, const struct gz_backend *be, int level, int size_idx, bool with_p)
{
	int t, nthreads[1 + BH_MAX_CPUS], n = 0;

	if (bh_body_len[size_idx] == 0)
		return;
	nthreads[n++] = 0;
	if (with_p)
		for (t = 0; t < bh_opt.ncpus; t++)
			nthreads[n++] = bh_opt.cpus[t];
	for (t = 0; t < n; t++) {
		struct bh_cfg *c = calloc(1, sizeof *c);
		if (!c)
			die("out of memory");
		c->kind = kind;
		c->be = be;
		c->level = level;
		c->size_idx = size_idx;
		c->threads = nthreads[t];
		snprintf(c->name, sizeof c->name, "Benchmark%s_%s%s/%s/level=%d",
			 bh_kind_name[kind], nthreads[t] ? "P" : "S", bh_size_name[size_idx],
			 be->name, level);
		if (!filter_ok(c->name)) {
			free(c);
			continue;
		}
		if (kind != K_RAW && kind != K_SMALLWIN)
			c->h = handler_get(kind, be, level);
		*bh_cfgs_tail = c;
		bh_cfgs_tail = &c->next;
	}
}

/* Levels of the full matrix: 1, 4, 6, 7, 9 and 12 where the backend has
 * them; every level of a backend with at most four (ISA-L's 0-3). */
static int
full_levels(const struct gz_backend *be, int *lv)
{
	static const int want[] = {1, 4, 6, 7, 9, 12};
	int n = 0, l;
	size_t i;

	if (be->level_max - be->level_min < 4) {
		for (l = be->level_min; l <= be->level_max; l++)
			lv[n++] = l;
		return n;
	}
	for (i = 0; i < sizeof want / sizeof want[0]; i++)
		if (want[i] >= be->level_min && want[i] <= be->level_max)
			lv[n++] = want[i];
	return n;
}

static const struct gz_backend *
backend_named(const char *name)
{
	return gz_backend_find(name);
}

/*
 * zlib parameters sized to a known body length as nginx's gzip filter does
 * (ngx_http_gzip_filter_module.c): halve the window (and the hash, via
 * memLevel) while the body is smaller than half the window minus zlib's
 * 262-byte lookahead, so every match distance the body can use is still in
 * the window. Returns 0 if the defaults (15, 8) stand. zlib refuses
 * windowBits 8 with the gzip wrapper, hence the floor of 9.
 */
static int
nginx_params(size_t len, int *wbits_ret, int *memlevel_ret)
{
	int wbits = 15, memlevel = 8;

	while (wbits > 9 && len < ((size_t)1 << (wbits - 1)) - 262) {
		wbits--;
		memlevel--;
	}
	if (memlevel < 1)
		memlevel = 1;
	*wbits_ret = wbits;
	*memlevel_ret = memlevel;
	return wbits != 15;
}

/*
 * The row set. Default (make bench): every backend at its default level
 * plus zlib 6 and libdeflate 6, for the Handler and Raw families, S and P;
 * Cached for the default backend; Unpooled S for each backend's default.
 * Full (make bench-full): every backend x full_levels for Handler and Raw,
 * S and P; Cached and Unpooled as in the default set. RawSmallWindow S for
 * zlib where nginx_params() shrinks the window (the 2k rows).
 */
static void
build_rows(void)
{
	const struct gz_backend *be, *dflt;
	int lv[16], nlv, s, i, b, l;

	dflt = backend_named(mhdgz_backend_name(MHDGZ_BACKEND_DEFAULT));
	for (s = 0; s < BH_NSIZES; s++) {
		for (b = 0; gz_backends[b]; b++) {
			be = gz_backends[b];
			if (bh_opt.full) {
				nlv = full_levels(be, lv);
			} else {
				nlv = 0;
				lv[nlv++] = be->level_default;
				/* The zlib-6 / libdeflate-6 comparison. */
				if (be->level_default != 6 && 6 >= be->level_min &&
				    6 <= be->level_max &&
				    (strcmp(be->name, "zlib") == 0 ||
				     strcmp(be->name, "libdeflate") == 0))
					lv[nlv++] = 6;
			}
			for (i = 0; i < nlv; i++) {
				int wb, ml;
				add_rows(K_HANDLER, be, lv[i], s, true);
				add_rows(K_RAW, be, lv[i], s, true);
				/* The small-body proposal, where it changes anything. */
				if (strcmp(be->name, "zlib") == 0 &&
				    nginx_params(bh_body_len[s], &wb, &ml))
					add_rows(K_SMALLWIN, be, lv[i], s, false);
			}
		}
		if (dflt)
			add_rows(K_CACHED, dflt, dflt->level_default, s, true);
		for (b = 0; gz_backends[b]; b++) {
			be = gz_backends[b];
			l = be->level_default;
			add_rows(K_UNPOOLED, be, l, s, be == dflt);
		}
	}
}

/* Per-thread state of one run. */
struct bh_worker {
	const struct bh_cfg *cfg;
	uint64_t n;
	pthread_t tid;
	pthread_barrier_t *bar;
	struct gz_compressor *z;       /* K_RAW */
	uint8_t *zout;                 /* K_RAW */
	size_t zout_cap, zout_len;     /* K_RAW */
	struct MHD_Response *cached;   /* K_CACHED */
	z_stream zs;                   /* K_SMALLWIN */
	bool zs_live;
	uint64_t out_bytes;            /* compressed bytes produced (Raw) */
	int bad;                       /* an op did not compress */
};

static void worker_setup(struct bh_worker *w);
static void worker_teardown(struct bh_worker *w);

/* ======================================================================== */
/* Verification                                                             */
/* ======================================================================== */

/* Inflate one gzip member (zlib, window bits 31: gzip only) and compare it
 * with want[0..want_len). Every input byte must be consumed. */
static int
gunzip_equal(const uint8_t *gz, size_t gz_len, const uint8_t *want, size_t want_len)
{
	z_stream zs;
	uint8_t *buf;
	int rc, ok;

	buf = malloc(want_len + 1);
	if (!buf)
		return 0;
	memset(&zs, 0, sizeof zs);
	if (inflateInit2(&zs, 31) != Z_OK) {
		free(buf);
		return 0;
	}
	zs.next_in = (Bytef *)gz;
	zs.avail_in = (uInt)gz_len;
	zs.next_out = buf;
	zs.avail_out = (uInt)want_len + 1;
	rc = inflate(&zs, Z_FINISH);
	ok = rc == Z_STREAM_END && zs.avail_in == 0 && zs.total_out == want_len &&
	     memcmp(buf, want, want_len) == 0;
	inflateEnd(&zs);
	free(buf);
	return ok;
}

/* What the verification daemon serves next (set by the main thread
 * between requests; the daemon handles one request at a time). */
static struct {
	struct mhdgz *gz;
	int size_idx;
	struct MHD_Response *keep; /* Cached: the response queued again */
} bh_v;

static enum MHD_Result
verify_ahc(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
	   const char *version, const char *upload, size_t *upload_len, void **req_cls)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	(void)cls, (void)url, (void)method, (void)version, (void)upload, (void)upload_len;
	(void)req_cls;
	if (bh_v.keep)
		return mhdgz_queue_response(bh_v.gz, conn, MHD_HTTP_OK, bh_v.keep);
	/* Exactly the op of the GzipHandler rows, queued for real. */
	r = mhdgz_response_from_buffer(bh_v.gz, bh_body_len[bh_v.size_idx],
				       bh_body[bh_v.size_idx], MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	ret = mhdgz_queue_response(bh_v.gz, conn, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

/* Whether the header block hdr[0..len) has "name: value" (case-insensitive
 * name, value compared exactly after optional whitespace). */
static bool
has_header(const char *hdr, size_t len, const char *name, const char *value)
{
	const char *p = hdr, *end = hdr + len;
	size_t nl = strlen(name), vl = strlen(value);

	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		const char *v;
		if (!eol)
			eol = end;
		if ((size_t)(eol - p) > nl && strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
			v = p + nl + 1;
			while (v < eol && *v == ' ')
				v++;
			if ((size_t)(eol - v) >= vl && strncmp(v, value, vl) == 0)
				return true;
		}
		p = eol + 1;
	}
	return false;
}

/* One GET with Accept-Encoding: gzip over HTTP/1.1 (Connection: close);
 * checks the status, Content-Encoding, Vary and Content-Length, inflates
 * the body and compares it with the payload slice. Returns the compressed
 * body length, or 0 on any failure (with a message). */
static size_t
verify_get(uint16_t port, const char *what)
{
	static const char req[] = "GET /bench HTTP/1.1\r\nHost: 127.0.0.1\r\n"
				  "Accept-Encoding: gzip\r\nConnection: close\r\n\r\n";
	struct sockaddr_in sa;
	size_t cap = bh_body_len[bh_v.size_idx] + 65536, len = 0, body_len;
	uint8_t *buf = malloc(cap);
	const char *hend;
	char cl[32];
	ssize_t n;
	int fd;

	if (!buf)
		die("out of memory");
	fd = socket(AF_INET, SOCK_STREAM, 0);
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_port = htons(port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
		die("verify %s: connect: %s", what, strerror(errno));
	if (write(fd, req, sizeof req - 1) != (ssize_t)(sizeof req - 1))
		die("verify %s: write failed", what);
	while (len < cap && (n = read(fd, buf + len, cap - len)) > 0)
		len += (size_t)n;
	close(fd);
	hend = memmem(buf, len, "\r\n\r\n", 4);
	if (!hend || len < 12 || memcmp(buf, "HTTP/1.1 200", 12) != 0) {
		fprintf(stderr, "verify %s: bad response\n", what);
		free(buf);
		return 0;
	}
	hend += 4;
	body_len = len - (size_t)(hend - (const char *)buf);
	snprintf(cl, sizeof cl, "%zu", body_len);
	if (!has_header((const char *)buf, (size_t)(hend - (const char *)buf), "Content-Encoding",
			"gzip") ||
	    !has_header((const char *)buf, (size_t)(hend - (const char *)buf), "Vary",
			"Accept-Encoding") ||
	    !has_header((const char *)buf, (size_t)(hend - (const char *)buf), "Content-Length",
			cl)) {
		fprintf(stderr, "verify %s: headers wrong:\n%.*s", what,
			(int)(hend - (const char *)buf), buf);
		free(buf);
		return 0;
	}
	if (!gunzip_equal((const uint8_t *)hend, body_len, bh_body[bh_v.size_idx],
			  bh_body_len[bh_v.size_idx])) {
		fprintf(stderr, "verify %s: body does not inflate to the payload\n", what);
		free(buf);
		return 0;
	}
	free(buf);
	return body_len;
}

/* Raw rows: one compression as the timed loop does it, inflated. */
static void
verify_raw(const struct bh_cfg *c)
{
	struct bh_worker w;

	memset(&w, 0, sizeof w);
	w.cfg = c;
	worker_setup(&w); /* compresses once into w.zout */
	if (w.bad || !gunzip_equal(w.zout, w.zout_len, bh_body[c->size_idx],
				   bh_body_len[c->size_idx]))
		die("verify %s: raw output does not inflate to the payload", c->name);
	worker_teardown(&w);
}

/* Verify every configuration once: each (handler, size) through a daemon,
 * each raw (backend, level, size) directly. */
static void
verify_all(void)
{
	struct MHD_Daemon *d;
	const union MHD_DaemonInfo *info;
	struct sockaddr_in sa;
	struct bh_cfg *c, *p;
	uint16_t port;
	unsigned int nverified = 0;

	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL,
			     verify_ahc, NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
			     MHD_OPTION_END);
	if (!d)
		die("cannot start the verification daemon on 127.0.0.1");
	info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	if (!info || info->port == 0)
		die("cannot learn the verification daemon's port");
	port = info->port;

	for (c = bh_cfgs; c; c = c->next) {
		/* S and P rows of a configuration share their output: once. */
		for (p = bh_cfgs; p != c; p = p->next)
			if (p->kind == c->kind && p->be == c->be && p->level == c->level &&
			    p->size_idx == c->size_idx)
				break;
		if (p != c)
			continue;
		if (c->kind == K_RAW || c->kind == K_SMALLWIN) {
			verify_raw(c);
			nverified++;
			continue;
		}
		bh_v.gz = c->h->gz;
		bh_v.size_idx = c->size_idx;
		bh_v.keep = NULL;
		if (c->kind == K_CACHED) {
			struct mhdgz_stats st0 = {.size = sizeof st0}, st1 = {.size = sizeof st1};
			bh_v.keep = mhdgz_response_from_buffer(c->h->gz, bh_body_len[c->size_idx],
							       bh_body[c->size_idx],
							       MHD_RESPMEM_PERSISTENT);
			if (!bh_v.keep)
				die("verify %s: no response", c->name);
			MHD_add_response_header(bh_v.keep, MHD_HTTP_HEADER_CONTENT_TYPE,
						"application/json");
			mhdgz_get_stats(c->h->gz, &st0);
			if (!verify_get(port, c->name) || !verify_get(port, c->name))
				die("verify %s failed", c->name);
			mhdgz_get_stats(c->h->gz, &st1);
			if (st1.cache_hits - st0.cache_hits != 1 ||
			    st1.compressions - st0.compressions != 1)
				die("verify %s: expected 1 compression and 1 cache hit", c->name);
			MHD_destroy_response(bh_v.keep);
			bh_v.keep = NULL;
		} else if (!verify_get(port, c->name)) {
			die("verify %s failed", c->name);
		}
		nverified++;
	}
	MHD_stop_daemon(d);
	fprintf(stderr, "verified %u configurations (gzip output inflates to the input)\n",
		nverified);
}

/* ======================================================================== */
/* Timed runs                                                               */
/* ======================================================================== */


/* One op of a handler row; returns 0 if the response was compressed. */
static inline int
op_handler(struct mhdgz *gz, const uint8_t *body, size_t len)
{
	struct MHD_Response *r, *q;
	enum mhdgz_reason reason = MHDGZ_SKIP_ERROR;

	r = mhdgz_response_from_buffer(gz, len, (void *)body, MHD_RESPMEM_PERSISTENT);
	if (!r)
		return -1;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	mhdgz_select(gz, &bh_req, MHD_HTTP_OK, r, &q, &reason);
	MHD_destroy_response(r); /* destroys the variant too */
	return reason == MHDGZ_COMPRESSED ? 0 : -1;
}

/* One op of a RawSmallWindow row: what the zlib backend's compress()
 * does (deflateReset, then deflate with Z_FINISH), on a stream made with
 * nginx_params(). Returns the compressed length, 0 on failure. */
static size_t
smallwin_compress(struct bh_worker *w, const uint8_t *body, size_t len)
{
	if (deflateReset(&w->zs) != Z_OK)
		return 0;
	w->zs.next_in = (Bytef *)body;
	w->zs.avail_in = (uInt)len;
	w->zs.next_out = w->zout;
	w->zs.avail_out = (uInt)w->zout_cap;
	if (deflate(&w->zs, Z_FINISH) != Z_STREAM_END)
		return 0;
	return w->zout_cap - w->zs.avail_out;
}

static void
worker_setup(struct bh_worker *w)
{
	const struct bh_cfg *c = w->cfg;
	const uint8_t *body = bh_body[c->size_idx];
	size_t len = bh_body_len[c->size_idx];
	int rc, i;

	switch (c->kind) {
	case K_RAW:
		rc = gz_compressor_new(c->be, c->level, &w->z);
		if (rc < 0)
			die("%s: gz_compressor_new: %s", c->name, mhdgz_strerror(rc));
		w->zout_cap = gz_bound(w->z, len);
		w->zout = malloc(w->zout_cap);
		if (!w->zout)
			die("out of memory");
		/* Warm-up, as the handler rows' pools are warm. */
		if (w->z->be->compress(w->z, body, len, w->zout, w->zout_cap, &w->zout_len) < 0)
			w->bad = 1;
		break;
	case K_SMALLWIN: {
		int wb, ml;
		nginx_params(len, &wb, &ml);
		memset(&w->zs, 0, sizeof w->zs);
		if (deflateInit2(&w->zs, c->level, Z_DEFLATED, 16 + wb, ml,
				 Z_DEFAULT_STRATEGY) != Z_OK)
			die("%s: deflateInit2 failed", c->name);
		w->zs_live = true;
		w->zout_cap = deflateBound(&w->zs, (uLong)len);
		w->zout = malloc(w->zout_cap);
		if (!w->zout)
			die("out of memory");
		w->zout_len = smallwin_compress(w, body, len);
		if (w->zout_len == 0)
			w->bad = 1;
		break;
	}
	case K_CACHED: {
		struct MHD_Response *q;
		enum mhdgz_reason reason;
		w->cached = mhdgz_response_from_buffer(c->h->gz, len, (void *)body,
						       MHD_RESPMEM_PERSISTENT);
		if (!w->cached)
			die("out of memory");
		MHD_add_response_header(w->cached, MHD_HTTP_HEADER_CONTENT_TYPE,
					"application/json");
		mhdgz_select(c->h->gz, &bh_req, MHD_HTTP_OK, w->cached, &q, &reason);
		if (reason != MHDGZ_COMPRESSED)
			w->bad = 1;
		break;
	}
	case K_HANDLER:
	case K_UNPOOLED:
		/* Warm the pool (one compressor per thread, scratch grown). */
		for (i = 0; i < 2; i++)
			if (op_handler(c->h->gz, body, len) < 0)
				w->bad = 1;
		break;
	default:
		break;
	}
}

static void
worker_run(struct bh_worker *w)
{
	const struct bh_cfg *c = w->cfg;
	const uint8_t *body = bh_body[c->size_idx];
	size_t len = bh_body_len[c->size_idx];
	uint64_t i, n = w->n;
	int bad = 0;

	switch (c->kind) {
	case K_RAW: {
		struct gz_compressor *z = w->z;
		size_t out_len = 0;
		uint64_t sum = 0;
		for (i = 0; i < n; i++) {
			bad |= z->be->compress(z, body, len, w->zout, w->zout_cap, &out_len) < 0;
			sum += out_len;
		}
		w->out_bytes = sum;
		break;
	}
	case K_SMALLWIN: {
		uint64_t sum = 0;
		for (i = 0; i < n; i++) {
			size_t out_len = smallwin_compress(w, body, len);
			bad |= out_len == 0;
			sum += out_len;
		}
		w->out_bytes = sum;
		break;
	}
	case K_CACHED: {
		struct mhdgz *gz = c->h->gz;
		struct MHD_Response *q;
		enum mhdgz_reason reason;
		for (i = 0; i < n; i++) {
			mhdgz_select(gz, &bh_req, MHD_HTTP_OK, w->cached, &q, &reason);
			bad |= reason != MHDGZ_COMPRESSED;
		}
		break;
	}
	default: {
		struct mhdgz *gz = c->h->gz;
		for (i = 0; i < n; i++)
			bad |= op_handler(gz, body, len);
		break;
	}
	}
	if (bad)
		w->bad = 1;
}

static void
worker_teardown(struct bh_worker *w)
{
	if (w->z)
		gz_compressor_free(w->z);
	free(w->zout);
	if (w->cached)
		MHD_destroy_response(w->cached);
	if (w->zs_live)
		deflateEnd(&w->zs);
	w->zs_live = false;
	w->z = NULL;
	w->zout = NULL;
	w->cached = NULL;
}

static void *
worker_main(void *arg)
{
	struct bh_worker *w = arg;

	worker_setup(w);
	pthread_barrier_wait(w->bar); /* set up */
	pthread_barrier_wait(w->bar); /* go */
	worker_run(w);
	pthread_barrier_wait(w->bar); /* done */
	worker_teardown(w);
	ba_release();
	return NULL;
}

/* Run cfg with n ops in total; fill one sample. Returns the seconds. */
static double
run_once(struct bh_cfg *c, uint64_t n, double *m)
{
	struct bh_worker ws[BH_MAX_CPUS > 64 ? BH_MAX_CPUS : 64];
	int t, nt = c->threads ? c->threads : 1;
	struct ba_counts a0, a1;
	struct mhdgz_stats st0 = {.size = sizeof st0}, st1 = {.size = sizeof st1};
	uint64_t out_bytes = 0;
	pthread_barrier_t bar;
	double t0, t1, c0, c1, secs;
	int bad = 0;

	if (nt > (int)(sizeof ws / sizeof ws[0]))
		die("too many threads");
	if ((uint64_t)nt > n)
		n = (uint64_t)nt;
	memset(ws, 0, sizeof ws);
	for (t = 0; t < nt; t++) {
		ws[t].cfg = c;
		ws[t].n = n / (uint64_t)nt + ((uint64_t)t < n % (uint64_t)nt);
		ws[t].bar = &bar;
	}
	if (c->threads == 0) {
		worker_setup(&ws[0]);
		if (c->h)
			mhdgz_get_stats(c->h->gz, &st0);
		ba_snapshot(&a0);
		c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
		t0 = now_s();
		worker_run(&ws[0]);
		t1 = now_s();
		c1 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
		ba_snapshot(&a1);
		if (c->h)
			mhdgz_get_stats(c->h->gz, &st1);
		worker_teardown(&ws[0]);
	} else {
		pthread_barrier_init(&bar, NULL, (unsigned int)nt + 1);
		for (t = 0; t < nt; t++)
			if (pthread_create(&ws[t].tid, NULL, worker_main, &ws[t]) != 0)
				die("pthread_create failed");
		pthread_barrier_wait(&bar); /* everyone set up */
		if (c->h)
			mhdgz_get_stats(c->h->gz, &st0);
		ba_snapshot(&a0);
		c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
		t0 = now_s();
		pthread_barrier_wait(&bar); /* go */
		pthread_barrier_wait(&bar); /* done */
		t1 = now_s();
		c1 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
		ba_snapshot(&a1);
		if (c->h)
			mhdgz_get_stats(c->h->gz, &st1);
		for (t = 0; t < nt; t++)
			pthread_join(ws[t].tid, NULL);
		pthread_barrier_destroy(&bar);
	}
	for (t = 0; t < nt; t++) {
		bad |= ws[t].bad;
		out_bytes += ws[t].out_bytes;
	}
	if (bad)
		die("%s: an op was not compressed", c->name);
	if (c->h) {
		uint64_t want_c = c->kind == K_CACHED ? 0 : n;
		if (st1.compressions - st0.compressions != want_c ||
		    st1.compressed - st0.compressed != n)
			die("%s: %llu compressions, %llu compressed for %llu ops", c->name,
			    (unsigned long long)(st1.compressions - st0.compressions),
			    (unsigned long long)(st1.compressed - st0.compressed),
			    (unsigned long long)n);
		out_bytes = st1.bytes_out - st0.bytes_out;
	}
	secs = t1 - t0;
	m[M_NS] = secs * 1e9 / (double)n;
	m[M_MBS] = (double)bh_body_len[c->size_idx] * (double)n / secs / 1e6;
	m[M_OUTB] = (double)out_bytes / (double)n;
	m[M_BOP] = (double)(a1.bytes - a0.bytes) / (double)n;
	m[M_ALLOCS] = (double)(a1.allocs - a0.allocs) / (double)n;
	m[M_OWN_ALLOCS] = (double)(a1.own_allocs - a0.own_allocs) / (double)n;
	m[M_OWN_BOP] = (double)(a1.own_bytes - a0.own_bytes) / (double)n;
	m[M_CPU] = (c1 - c0) * 1e9 / (double)n;
	return secs;
}

/* Go's rule: grow N from 1 until a run lasts benchtime, predicting with
 * 20 % headroom and at most 100x per step; the last run is the sample. */
static void
calibrate_and_run(struct bh_cfg *c)
{
	double m[M_NMETRICS], secs;
	uint64_t n = 1, next;

	if (bh_opt.benchtime_n) {
		c->n = bh_opt.benchtime_n;
		run_once(c, c->n, m);
	} else {
		for (;;) {
			secs = run_once(c, n, m);
			if (secs >= bh_opt.benchtime_s || n >= 1000000000ull)
				break;
			if (secs < 1e-9)
				secs = 1e-9;
			next = (uint64_t)(bh_opt.benchtime_s / (secs / (double)n) * 1.2);
			if (next > n * 100)
				next = n * 100;
			if (next <= n)
				next = n + 1;
			n = next;
		}
		c->n = n;
	}
	memcpy(c->sample[c->nsamples++], m, sizeof m);
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void
compute_median(struct bh_cfg *c)
{
	double v[BH_MAX_COUNT];
	int k, i;

	for (k = 0; k < M_NMETRICS; k++) {
		for (i = 0; i < c->nsamples; i++)
			v[i] = c->sample[i][k];
		qsort(v, (size_t)c->nsamples, sizeof v[0], cmp_double);
		c->med[k] = c->nsamples % 2 ? v[c->nsamples / 2]
					    : (v[c->nsamples / 2 - 1] + v[c->nsamples / 2]) / 2;
	}
}

static void
print_row(const struct bh_cfg *c)
{
	char name[200];

	snprintf(name, sizeof name, "%s-%d", c->name, c->threads ? c->threads : bh_online_cpus);
	out("%-52s %8llu %12.0f ns/op %9.2f MB/s %8.0f out-B/op %8.0f B/op %6.0f allocs/op\n", name,
	    (unsigned long long)c->n, c->med[M_NS], c->med[M_MBS], c->med[M_OUTB], c->med[M_BOP],
	    c->med[M_ALLOCS]);
}

/* ======================================================================== */
/* Summary and targets                                                      */
/* ======================================================================== */

static const struct bh_cfg *
find(enum bh_kind kind, const char *be, int level, int size_idx, int threads)
{
	const struct bh_cfg *c;

	for (c = bh_cfgs; c; c = c->next)
		if (c->kind == kind && strcmp(c->be->name, be) == 0 && c->level == level &&
		    c->size_idx == size_idx && c->threads == threads && c->nsamples > 0)
			return c;
	return NULL;
}

/* The P thread count the P/S target uses: 2 if measured, else the largest. */
static int
p_threads(void)
{
	int i, best = 0;

	for (i = 0; i < bh_opt.ncpus; i++) {
		if (bh_opt.cpus[i] == 2)
			return 2;
		if (bh_opt.cpus[i] > best)
			best = bh_opt.cpus[i];
	}
	return best;
}

/* "+12.3% (1.14x slower)" for the ratio x/ref. */
static const char *
rel(char *buf, size_t cap, double x, double ref)
{
	double r = x / ref;

	snprintf(buf, cap, "%+.1f%% (%.2fx %s)", (r - 1) * 100, r < 1 ? 1 / r : r,
		 r < 1 ? "faster" : "slower");
	return buf;
}

static void
print_summary(void)
{
	const struct bh_cfg *c, *z;
	char t1[48], t2[48];
	int s;

	out("\n# Summary: GzipHandler S rows (medians), each backend against zlib at the\n"
	    "# same level (ISA-L's levels 1-4 against zlib level 1). Wall time as in the\n"
	    "# rows, CPU time of the process per op (less disturbed by other load), and\n"
	    "# the compressed size; negative = faster / smaller.\n");
	out("# %-4s %-5s %-10s %10s %-22s %10s %-22s %7s %s\n", "size", "level", "backend",
	    "ns/op", "wall vs zlib", "cpu-ns/op", "cpu vs zlib", "out-B", "size vs zlib");
	for (s = 0; s < BH_NSIZES; s++) {
		for (c = bh_cfgs; c; c = c->next) {
			int zl;
			if (c->kind != K_HANDLER || c->threads || c->size_idx != s ||
			    c->nsamples == 0)
				continue;
			zl = strcmp(c->be->name, "isal") == 0 ? 1 : c->level;
			z = find(K_HANDLER, "zlib", zl, s, 0);
			if (!z || z == c) {
				out("# %-4s %-5d %-10s %10.0f %-22s %10.0f %-22s %7.0f %s\n",
				    bh_size_name[s], c->level, c->be->name, c->med[M_NS],
				    z ? "(reference)" : "(no zlib row)", c->med[M_CPU], "",
				    c->med[M_OUTB], "");
				continue;
			}
			out("# %-4s %-5d %-10s %10.0f %-22s %10.0f %-22s %7.0f %+.1f%%%s\n",
			    bh_size_name[s], c->level, c->be->name, c->med[M_NS],
			    rel(t1, sizeof t1, c->med[M_NS], z->med[M_NS]), c->med[M_CPU],
			    rel(t2, sizeof t2, c->med[M_CPU], z->med[M_CPU]), c->med[M_OUTB],
			    (c->med[M_OUTB] / z->med[M_OUTB] - 1) * 100,
			    zl != c->level ? " (vs zlib-1)" : "");
		}
	}
}

static int bh_fails;

static void __attribute__((format(printf, 2, 3)))
check(bool ok, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	out("%s %s\n", ok ? "PASS" : "FAIL", buf);
	if (!ok)
		bh_fails++;
}

/*
 * The targets of issue 6, computed from this run's medians. Ratios use wall
 * time, as the rows do; the CPU-time ratio follows in brackets because on a
 * machine with other work the wall times of two rows measured at different
 * moments are disturbed differently. P/S can only be judged on wall time,
 * and only when the P threads have otherwise idle CPUs.
 */
static void
print_targets(void)
{
	static const double limit[BH_NSIZES] = {25, 10, 10};
	const struct bh_cfg *h, *r, *p, *z, *c;
	int s, b, pt = p_threads();
	double la[3];

	out("\n# Targets of issue 6, from this run (medians; S rows unless stated):\n");
	if (getloadavg(la, 3) == 3 && la[0] > 0.5 * bh_online_cpus)
		out("# note: load average %.1f on %d CPUs: other processes competed for the\n"
		    "# CPUs, so wall-time figures (and P/S above all) are disturbed; see the\n"
		    "# CPU-time ratios.\n",
		    la[0], bh_online_cpus);
	/* 1. Handler overhead over the raw compress call. */
	for (b = 0; gz_backends[b]; b++) {
		const struct gz_backend *be = gz_backends[b];
		for (s = 0; s < BH_NSIZES; s++) {
			h = find(K_HANDLER, be->name, be->level_default, s, 0);
			r = find(K_RAW, be->name, be->level_default, s, 0);
			if (!h || !r)
				continue;
			check((h->med[M_NS] / r->med[M_NS] - 1) * 100 <= limit[s],
			      "handler-overhead %s/level=%d %s: %+.1f%% over raw "
			      "(%.0f vs %.0f ns/op; CPU time %+.1f%%; limit %+.0f%%)",
			      be->name, be->level_default, bh_size_name[s],
			      (h->med[M_NS] / r->med[M_NS] - 1) * 100, h->med[M_NS], r->med[M_NS],
			      (h->med[M_CPU] / r->med[M_CPU] - 1) * 100, limit[s]);
		}
	}
	/* 2. Allocations per op, process-wide, with mhdgz's own share. */
	for (b = 0; gz_backends[b]; b++) {
		const struct gz_backend *be = gz_backends[b];
		for (s = 0; s < BH_NSIZES; s++) {
			h = find(K_HANDLER, be->name, be->level_default, s, 0);
			if (!h)
				continue;
			check(h->med[M_ALLOCS] <= 3.0,
			      "allocs/op %s/level=%d %s: %.1f process-wide = "
			      "%.1f mhdgz (%.0f B) + %.1f libmicrohttpd (limit 3)",
			      be->name, be->level_default, bh_size_name[s], h->med[M_ALLOCS],
			      h->med[M_OWN_ALLOCS], h->med[M_OWN_BOP],
			      h->med[M_ALLOCS] - h->med[M_OWN_ALLOCS]);
		}
	}
	/* 2b. What mhdgz itself allocates (the part this library controls). */
	for (b = 0; gz_backends[b]; b++) {
		const struct gz_backend *be = gz_backends[b];
		h = find(K_HANDLER, be->name, be->level_default, 0, 0);
		if (!h)
			continue;
		check(h->med[M_OWN_ALLOCS] <= 3.0,
		      "allocs/op by mhdgz itself %s/level=%d: %.1f (the gzip variant's entry and "
		      "body; limit 3)",
		      be->name, be->level_default, h->med[M_OWN_ALLOCS]);
	}
	/* 3. P/S on 2 CPUs at 20k and 100k. */
	for (b = 0; gz_backends[b] && pt > 0; b++) {
		const struct gz_backend *be = gz_backends[b];
		for (s = 1; s < BH_NSIZES; s++) {
			h = find(K_HANDLER, be->name, be->level_default, s, 0);
			p = find(K_HANDLER, be->name, be->level_default, s, pt);
			if (!h || !p)
				continue;
			if (pt < 2 || bh_online_cpus < 2) {
				out("SKIP P/S %s %s: needs 2 CPUs and --cpu 2\n", be->name,
				    bh_size_name[s]);
				continue;
			}
			r = find(K_RAW, be->name, be->level_default, s, pt);
			z = find(K_RAW, be->name, be->level_default, s, 0);
			/* If independent compressors on their own threads do not
			 * scale either, the CPUs were not free: the run cannot
			 * tell whether the handler serialises. */
			if (p->med[M_NS] / h->med[M_NS] > 0.6 && r && z &&
			    r->med[M_NS] / z->med[M_NS] > 0.7) {
				out("INCONCLUSIVE P/S %s/level=%d %s: %.2f with %d threads "
				    "(P %.0f, S %.0f ns/op), but the raw compress call alone "
				    "scaled only %.2f: the CPUs were busy (limit 0.60)\n",
				    be->name, be->level_default, bh_size_name[s],
				    p->med[M_NS] / h->med[M_NS], pt, p->med[M_NS], h->med[M_NS],
				    r->med[M_NS] / z->med[M_NS]);
				continue;
			}
			check(p->med[M_NS] / h->med[M_NS] <= 0.6,
			      "P/S %s/level=%d %s: %.2f with %d threads (P %.0f, S %.0f ns/op; raw "
			      "compress alone %.2f; limit 0.60)",
			      be->name, be->level_default, bh_size_name[s],
			      p->med[M_NS] / h->med[M_NS], pt, p->med[M_NS], h->med[M_NS],
			      r && z ? r->med[M_NS] / z->med[M_NS] : 0.0);
		}
	}
	/* 4. libdeflate-6 against zlib-6: speed and size. */
	for (s = 1; s < BH_NSIZES; s++) {
		h = find(K_HANDLER, "libdeflate", 6, s, 0);
		z = find(K_HANDLER, "zlib", 6, s, 0);
		if (!h || !z)
			continue;
		check(z->med[M_NS] / h->med[M_NS] >= 1.4 && h->med[M_OUTB] <= z->med[M_OUTB],
		      "libdeflate-6 vs zlib-6 %s: %.2fx faster (CPU time %.2fx; limit 1.40x), "
		      "%.0f vs %.0f out-B (%+.1f%%; limit 0%%)",
		      bh_size_name[s], z->med[M_NS] / h->med[M_NS], z->med[M_CPU] / h->med[M_CPU],
		      h->med[M_OUTB], z->med[M_OUTB], (h->med[M_OUTB] / z->med[M_OUTB] - 1) * 100);
	}
	/* 5. Small bodies: nginx-sized zlib parameters against the raw call. */
	for (c = bh_cfgs; c; c = c->next) {
		int wb, ml;
		if (c->kind != K_SMALLWIN || c->threads || c->nsamples == 0)
			continue;
		r = find(K_RAW, c->be->name, c->level, c->size_idx, 0);
		if (!r)
			continue;
		nginx_params(bh_body_len[c->size_idx], &wb, &ml);
		out("INFO small-body %s/level=%d %s: windowBits %d, memLevel %d instead of 15, 8: "
		    "%+.1f%% wall, %+.1f%% CPU time, %.0f vs %.0f out-B\n",
		    c->be->name, c->level, bh_size_name[c->size_idx], wb, ml,
		    (c->med[M_NS] / r->med[M_NS] - 1) * 100,
		    (c->med[M_CPU] / r->med[M_CPU] - 1) * 100,
		    c->med[M_OUTB], r->med[M_OUTB]);
	}
	/* Informational: the pool and the cache. */
	for (s = 0; s < BH_NSIZES; s++) {
		const struct gz_backend *be;
		be = backend_named(mhdgz_backend_name(MHDGZ_BACKEND_DEFAULT));
		if (!be)
			break;
		h = find(K_HANDLER, be->name, be->level_default, s, 0);
		p = find(K_UNPOOLED, be->name, be->level_default, s, 0);
		r = find(K_CACHED, be->name, be->level_default, s, 0);
		if (h && p)
			out("INFO pool %s/level=%d %s: pooled %.0f, unpooled %.0f ns/op "
			    "(%.2fx; CPU %.2fx); %.0f vs %.0f B/op, %.1f vs %.1f allocs/op\n",
			    be->name, be->level_default, bh_size_name[s], h->med[M_NS],
			    p->med[M_NS], p->med[M_NS] / h->med[M_NS],
			    p->med[M_CPU] / h->med[M_CPU], h->med[M_BOP], p->med[M_BOP],
			    h->med[M_ALLOCS], p->med[M_ALLOCS]);
		if (h && r)
			out("INFO cache %s/level=%d %s: a cache hit costs %.0f ns/op, "
			    "%.1f allocs/op (%.0fx cheaper than compressing)\n",
			    be->name, be->level_default, bh_size_name[s], r->med[M_NS],
			    r->med[M_ALLOCS], h->med[M_NS] / r->med[M_NS]);
	}
}

/* ======================================================================== */
/* Options and main                                                         */
/* ======================================================================== */

static void
usage(FILE *f)
{
	fputs("usage: bench_handler [options]\n"
	      "  --benchtime T   time per run, e.g. 1s, 0.2s, 500ms; or Nx for N iterations\n"
	      "                  (default 1s)\n"
	      "  --count N       passes over all rows; the median is reported (default 1)\n"
	      "  --filter RE     only rows whose name matches the POSIX extended regex RE\n"
	      "  --cpu LIST      thread counts for the P rows, e.g. 1,2,4 (default: online CPUs)\n"
	      "  --payload FILE  use FILE's first 2048/20480/102400 bytes instead of the\n"
	      "                  generated JSON document\n"
	      "  --full          the whole matrix (every backend x level), as make bench-full\n"
	      "  --out FILE      also write the output to FILE\n"
	      "  -v              progress on stderr\n",
	      f);
}

static void
parse_benchtime(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	bh_opt.benchtime_s = 0;
	bh_opt.benchtime_n = 0;
	if (end == s || v <= 0)
		die("bad --benchtime %s", s);
	if (strcmp(end, "x") == 0)
		bh_opt.benchtime_n = (uint64_t)v;
	else if (strcmp(end, "s") == 0 || *end == '\0')
		bh_opt.benchtime_s = v;
	else if (strcmp(end, "ms") == 0)
		bh_opt.benchtime_s = v / 1e3;
	else
		die("bad --benchtime %s (use 1s, 200ms or 100x)", s);
}

static void
parse_cpus(const char *s)
{
	char *dup = strdup(s), *tok, *save = NULL;

	bh_opt.ncpus = 0;
	for (tok = strtok_r(dup, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int n = atoi(tok);
		if (n < 1 || n > 64 || bh_opt.ncpus == BH_MAX_CPUS)
			die("bad --cpu %s", s);
		bh_opt.cpus[bh_opt.ncpus++] = n;
	}
	free(dup);
	if (bh_opt.ncpus == 0)
		die("bad --cpu %s", s);
}

static void
load_payload(void)
{
	int s;

	if (!bh_opt.payload) {
		for (s = 0; s < BH_NSIZES; s++) {
			bh_body_len[s] = payload_json_sized(bh_size[s], &bh_body[s]);
			if (bh_body_len[s] != bh_size[s])
				die("payload_json_sized(%zu) failed", bh_size[s]);
		}
		return;
	}
	{
		FILE *f = fopen(bh_opt.payload, "rb");
		uint8_t *all;
		size_t len;
		if (!f)
			die("%s: %s", bh_opt.payload, strerror(errno));
		all = malloc(bh_size[BH_NSIZES - 1]);
		if (!all)
			die("out of memory");
		len = fread(all, 1, bh_size[BH_NSIZES - 1], f);
		fclose(f);
		for (s = 0; s < BH_NSIZES; s++) {
			if (len < bh_size[s]) {
				fprintf(stderr, "%s: %zu bytes, too short for the %s rows\n",
					bh_opt.payload, len, bh_size_name[s]);
				continue;
			}
			bh_body[s] = malloc(bh_size[s]);
			if (!bh_body[s])
				die("out of memory");
			memcpy(bh_body[s], all, bh_size[s]);
			bh_body_len[s] = bh_size[s];
		}
		free(all);
	}
}

/* The load average (other work on the machine inflates wall times). */
static void
print_loadavg(const char *label)
{
	double la[3];

	if (getloadavg(la, 3) == 3)
		out("%s: %.2f %.2f %.2f (%d CPUs online)\n", label, la[0], la[1], la[2],
		    bh_online_cpus);
}

static void
print_header(void)
{
	char model[256] = "unknown";
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[512];
	int b;

	if (f) {
		while (fgets(line, sizeof line, f))
			if (strncmp(line, "model name", 10) == 0) {
				char *v = strchr(line, ':');
				if (v) {
					v += 2;
					v[strcspn(v, "\n")] = '\0';
					snprintf(model, sizeof model, "%s", v);
				}
				break;
			}
		fclose(f);
	}
	out("goos: linux\ngoarch: %s\npkg: libmhdgz/bench\ncpu: %s\n",
#if defined(__x86_64__)
	    "amd64",
#elif defined(__aarch64__)
	    "arm64",
#else
	    "unknown",
#endif
	    model);
	out("mhdgz: %s\nlibmicrohttpd: %s\nzlib: %s\n", mhdgz_version(), MHD_get_version(),
	    zlibVersion());
	out("backends:");
	for (b = 0; gz_backends[b]; b++)
		out(" %s", gz_backends[b]->name);
	out("\npayload: %s\n",
	    bh_opt.payload ? bh_opt.payload : "generated JSON (examples/payload/payload.c)");
	if (bh_opt.benchtime_n)
		out("benchtime: %llux\n", (unsigned long long)bh_opt.benchtime_n);
	else
		out("benchtime: %gs\n", bh_opt.benchtime_s);
	out("count: %d\n", bh_opt.count);
	print_loadavg("loadavg");
	if (!BA_INTERPOSE)
		out("note: built with a sanitizer: allocations are not counted (B/op and "
		    "allocs/op read 0)\n");
}

int
main(int argc, char **argv)
{
	struct mhdgz_allocator alloc = {
		.size = sizeof alloc,
		.malloc_fn = ba_gz_malloc,
		.free_fn = ba_gz_free,
		.cls = NULL,
	};
	struct bh_cfg *c;
	int i, pass, rc;

	bh_opt.benchtime_s = BH_DEFAULT_BENCHTIME;
	bh_opt.count = 1;
	bh_online_cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (bh_online_cpus < 1)
		bh_online_cpus = 1;
	bh_opt.cpus[0] = bh_online_cpus > 64 ? 64 : bh_online_cpus;
	bh_opt.ncpus = 1;

	for (i = 1; i < argc; i++) {
		char key[32];
		const char *a = argv[i], *v, *eq = strchr(a, '=');

		/* --opt value or --opt=value */
		if (strncmp(a, "--", 2) == 0 && eq && (size_t)(eq - a) < sizeof key) {
			memcpy(key, a, (size_t)(eq - a));
			key[eq - a] = '\0';
			a = key;
			v = eq + 1;
		} else {
			v = NULL;
		}
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage(stdout);
			return 0;
		} else if (strcmp(a, "--full") == 0) {
			bh_opt.full = true;
			continue;
		} else if (strcmp(a, "-v") == 0) {
			bh_opt.verbose = true;
			continue;
		}
		if (!v) {
			if (i + 1 >= argc) {
				usage(stderr);
				return 2;
			}
			v = argv[++i];
		}
		if (strcmp(a, "--benchtime") == 0) {
			parse_benchtime(v);
		} else if (strcmp(a, "--count") == 0) {
			bh_opt.count = atoi(v);
			if (bh_opt.count < 1 || bh_opt.count > BH_MAX_COUNT)
				die("bad --count %s (1-%d)", v, BH_MAX_COUNT);
		} else if (strcmp(a, "--filter") == 0) {
			if (regcomp(&bh_opt.filter, v, REG_EXTENDED | REG_NOSUB) != 0)
				die("bad --filter regex %s", v);
			bh_opt.have_filter = true;
		} else if (strcmp(a, "--cpu") == 0) {
			parse_cpus(v);
		} else if (strcmp(a, "--payload") == 0) {
			bh_opt.payload = v;
		} else if (strcmp(a, "--out") == 0) {
			bh_opt.out = v;
		} else {
			usage(stderr);
			return 2;
		}
	}

	/* Before any mhdgz allocation: mhdgz refuses to switch allocators while
	 * a block of the old one is live. */
	rc = mhdgz_set_allocator(&alloc);
	if (rc < 0)
		die("mhdgz_set_allocator: %s", mhdgz_strerror(rc));
	if (bh_opt.out) {
		bh_out_file = fopen(bh_opt.out, "w");
		if (!bh_out_file)
			die("%s: %s", bh_opt.out, strerror(errno));
	}
	load_payload();
	build_rows();
	if (!bh_cfgs)
		die("no row matches the filter");
	print_header();
	verify_all();

	for (pass = 0; pass < bh_opt.count; pass++) {
		int k = 0;
		for (c = bh_cfgs; c; c = c->next, k++) {
			if (bh_opt.verbose)
				fprintf(stderr, "\rpass %d/%d row %d %-60s", pass + 1,
					bh_opt.count, k + 1, c->name);
			if (pass == 0) {
				calibrate_and_run(c);
			} else {
				double m[M_NMETRICS];
				run_once(c, c->n, m);
				memcpy(c->sample[c->nsamples++], m, sizeof m);
			}
		}
	}
	if (bh_opt.verbose)
		fputc('\n', stderr);
	for (c = bh_cfgs; c; c = c->next) {
		compute_median(c);
		print_row(c);
	}
	print_summary();
	print_targets();
	print_loadavg("\n# loadavg at the end");
	fflush(stdout);
	if (bh_out_file)
		fclose(bh_out_file);

	while (bh_cfgs) {
		c = bh_cfgs;
		bh_cfgs = c->next;
		free(c);
	}
	while (bh_handlers) {
		struct bh_handler *h = bh_handlers;
		bh_handlers = h->next;
		mhdgz_free(h->gz);
		free(h);
	}
	for (i = 0; i < BH_NSIZES; i++)
		free(bh_body[i]);
	if (bh_opt.have_filter)
		regfree(&bh_opt.filter);
	return 0;
}
