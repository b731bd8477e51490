/* bh_runner.c: the bench's runner: per-thread setup, the timed loops, Go-style calibration, interleaved passes, medians and the Benchmark lines. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"

/*
 * The selection without a connection: hnd_select(), what
 * mhdgz_queue_response_ex() runs before MHD_queue_response() (which only
 * takes a reference; it is left out with the socket), for a request with
 * the Accept-Encoding ae (struct bh_handler; NULL: none). Returns the
 * reason, or MHDGZ_SKIP_ERROR when a response other than the expected one
 * was chosen.
 */
static inline enum mhdgz_reason
bh_select(struct mhdgz *gz, const char *ae, struct MHD_Response *r)
{
	const char *lines[] = { ae };
	struct hnd_request rq = { .head = false, .flags = 0 };
	struct hnd_result res;
	struct MHD_Response *q;

	hnd_accept_parse(ae ? lines : NULL, ae ? 1 : 0, &rq.acc);
	(void)hnd_select(gz, &rq, MHD_HTTP_OK, r, &q, &res);
	if ((q == r) == (res.reason == MHDGZ_COMPRESSED))
		return MHDGZ_SKIP_ERROR;
	return res.reason;
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

/* One op of a handler row; returns 0 if the response was compressed. */
static inline int
op_handler(struct mhdgz *gz, const char *ae, const uint8_t *body, size_t len)
{
	struct MHD_Response *r;
	enum mhdgz_reason reason;

	r = mhdgz_response_from_buffer(gz, len, (void *)body, MHD_RESPMEM_PERSISTENT);
	if (!r)
		return -1;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	reason = bh_select(gz, ae, r);
	MHD_destroy_response(r); /* destroys the variant too */
	return reason == MHDGZ_COMPRESSED ? 0 : -1;
}

/* One op of an Identity row: what a client without gzip costs; 0 if the
 * response itself was chosen, for that reason. */
static inline int
op_identity(struct mhdgz *gz, const uint8_t *body, size_t len)
{
	struct MHD_Response *r;
	enum mhdgz_reason reason;

	r = mhdgz_response_from_buffer(gz, len, (void *)body, MHD_RESPMEM_PERSISTENT);
	if (!r)
		return -1;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	reason = bh_select(gz, NULL, r);
	MHD_destroy_response(r);
	return reason == MHDGZ_SKIP_NOT_ACCEPTED ? 0 : -1;
}

/* One op of a PlainMHD row: the same response with libmicrohttpd alone. */
static inline int
op_plain(const uint8_t *body, size_t len)
{
	struct MHD_Response *r;

	r = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_PERSISTENT);
	if (!r)
		return -1;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	MHD_destroy_response(r);
	return 0;
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

void
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
		if (deflateInit2(&w->zs, c->level, Z_DEFLATED, 16 + wb, ml, Z_DEFAULT_STRATEGY) !=
		    Z_OK)
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
	case K_CACHED:
		w->cached = mhdgz_response_from_buffer(c->h->gz, len, (void *)body,
						       MHD_RESPMEM_PERSISTENT);
		if (!w->cached)
			die("out of memory");
		MHD_add_response_header(w->cached, MHD_HTTP_HEADER_CONTENT_TYPE,
					"application/json");
		if (bh_select(c->h->gz, c->h->ae, w->cached) != MHDGZ_COMPRESSED)
			w->bad = 1;
		break;
	case K_STREAM:
		bh_stream_connect(w);
		/* Warm the pool and the connection, as for the handler rows. */
		for (i = 0; i < 2; i++)
			if (bh_stream_op(w) < 0)
				w->bad = 1;
		w->out_bytes = 0;
		w->chunks = 0;
		break;
	case K_HANDLER:
	case K_UNPOOLED:
	case K_PADDED:
		/* Warm the pool (one compressor per thread, scratch grown). */
		for (i = 0; i < 2; i++)
			if (op_handler(c->h->gz, c->h->ae, body, len) < 0)
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
		for (i = 0; i < n; i++)
			bad |= bh_select(gz, c->h->ae, w->cached) != MHDGZ_COMPRESSED;
		break;
	}
	case K_IDENTITY: {
		struct mhdgz *gz = c->h->gz;
		for (i = 0; i < n; i++)
			bad |= op_identity(gz, body, len);
		w->out_bytes = (uint64_t)len * n;
		break;
	}
	case K_PLAIN:
		for (i = 0; i < n; i++)
			bad |= op_plain(body, len);
		w->out_bytes = (uint64_t)len * n;
		break;
	case K_STREAM:
		for (i = 0; i < n; i++)
			bad |= bh_stream_op(w) < 0;
		break;
	default: {
		struct mhdgz *gz = c->h->gz;
		for (i = 0; i < n; i++)
			bad |= op_handler(gz, c->h->ae, body, len);
		break;
	}
	}
	if (bad)
		w->bad = 1;
}

void
worker_teardown(struct bh_worker *w)
{
	if (w->z)
		gz_compressor_free(w->z);
	free(w->zout);
	if (w->cached)
		MHD_destroy_response(w->cached);
	if (w->zs_live)
		deflateEnd(&w->zs);
	bh_stream_close(w);
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
	struct mhdgz_stats st0 = { .size = sizeof st0 }, st1 = { .size = sizeof st1 };
	uint64_t out_bytes = 0, chunks = 0;
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
	if (c->kind == K_STREAM)
		bh_stream_start(c, nt);
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
	if (c->kind == K_STREAM)
		bad |= bh_stream_stop();
	for (t = 0; t < nt; t++) {
		bad |= ws[t].bad;
		out_bytes += ws[t].out_bytes;
		chunks += ws[t].chunks;
	}
	if (bad)
		die("%s: an op was not compressed", c->name);
	if (c->h) {
		uint64_t want_c = c->kind == K_CACHED || c->kind == K_IDENTITY ? 0 : n;
		uint64_t want_z = c->kind == K_IDENTITY ? 0 : n;
		if (st1.compressions - st0.compressions != want_c ||
		    st1.compressed - st0.compressed != want_z)
			die("%s: %llu compressions, %llu compressed for %llu ops", c->name,
			    (unsigned long long)(st1.compressions - st0.compressions),
			    (unsigned long long)(st1.compressed - st0.compressed),
			    (unsigned long long)n);
		/* A stream's bytes are counted when libmicrohttpd frees it,
		 * which may come after the client has its last byte: the
		 * client's count stands. */
		if (c->kind != K_STREAM)
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
	m[M_CHUNKS] = (double)chunks / (double)n;
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
	out("%-52s %8llu %12.0f ns/op %9.2f MB/s %8.0f out-B/op %8.0f B/op %6.0f allocs/op"
	    " %12.0f cpu-ns/op %4.1f mhdgz-allocs/op %8.0f mhdgz-B/op",
	    name, (unsigned long long)c->n, c->med[M_NS], c->med[M_MBS], c->med[M_OUTB],
	    c->med[M_BOP], c->med[M_ALLOCS], c->med[M_CPU], c->med[M_OWN_ALLOCS],
	    c->med[M_OWN_BOP]);
	if (c->kind == K_STREAM)
		out(" %6.1f chunks/op", c->med[M_CHUNKS]);
	out("\n");
}

static double
median_of(double *v, int n)
{
	qsort(v, (size_t)n, sizeof v[0], cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The S row of P row p (same family, backend, level and size), or NULL. */
static const struct bh_cfg *
s_row_of(const struct bh_cfg *p)
{
	const struct bh_cfg *c;

	for (c = bh_cfgs; c; c = c->next)
		if (c->threads == 0 && c->kind == p->kind && c->be == p->be &&
		    c->level == p->level && c->size_idx == p->size_idx)
			return c;
	return NULL;
}

/*
 * One comment line per P row: its scaling, S ns/op over P ns/op of the
 * same pass, median over the passes (a ratio of the two printed medians
 * may pair passes minutes apart, which other load on the machine treats
 * differently), and how many CPUs the P threads kept busy (P cpu-ns/op over
 * P ns/op, median): with N threads and fewer than N busy, the machine did
 * not give them the CPUs, and the scaling says nothing about the code.
 */
static void
print_scaling(void)
{
	const struct bh_cfg *p, *s;
	double ratio[BH_MAX_COUNT], busy[BH_MAX_COUNT];
	bool header = false;
	int i;

	for (p = bh_cfgs; p; p = p->next) {
		if (p->threads == 0 || !(s = s_row_of(p)) || s->nsamples != p->nsamples)
			continue;
		if (!header) {
			out("# scaling: S ns/op over P ns/op of the same pass, median of %d;"
			    " busy: P cpu-ns/op over P ns/op (CPUs the P threads used)\n",
			    p->nsamples);
			header = true;
		}
		for (i = 0; i < p->nsamples; i++) {
			ratio[i] = s->sample[i][M_NS] / p->sample[i][M_NS];
			busy[i] = p->sample[i][M_CPU] / p->sample[i][M_NS];
		}
		out("# scaling %s-%d %.2fx busy %.2f\n", p->name, p->threads,
		    median_of(ratio, p->nsamples), median_of(busy, p->nsamples));
	}
}

/* --count passes over every row in turn (interleaved: drift on the machine
 * hits all rows alike), the first one calibrating; then the median rows. */
void
bh_run_all(void)
{
	struct bh_cfg *c;
	int pass;

	for (pass = 0; pass < bh_opt.count; pass++) {
		int k = 0;
		for (c = bh_cfgs; c; c = c->next, k++) {
			if (bh_opt.verbose)
				fprintf(stderr, "\rpass %d/%d row %d %-60s", pass + 1, bh_opt.count,
					k + 1, c->name);
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
	print_scaling();
}
