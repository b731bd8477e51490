/* bh_events.c: the event-stream rows of make bench: bytes, time and memory per event stream at each window setting. */
/*
 * One row per (stream backend, window bits, memLevel): a stream compressor
 * of the core (gz_compressor_new_win, as the handler's stream pools make
 * them) is fed BH_EV_COUNT server-sent events of 100-300 bytes of JSON,
 * each followed by a sync flush (what a low-latency stream does per
 * event), then finished. Printed, after the S/P rows, as
 *
 *   EventStream/zlib/level=6/window=12,mem=4  10000 events  812 ns/event
 *       61.3 out-B/event  0.31 ratio  30264 state-B
 *
 * ns/event is the median of --count runs (wall time of the whole stream
 * divided by the events); out-B/event the compressed bytes per event
 * (flush overhead included); ratio compressed / identity; state-B the
 * bytes the compressor allocated through mhdgz's allocator when created
 * (0 under a sanitizer, which hides allocations from bh_alloc.c). Every
 * stream is decoded with zlib and compared with its input once. Lines
 * start with "EventStream", not "Benchmark", so verdict.sh (which knows
 * the S/P rows only) leaves them alone.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "testutil.h"

#define BH_EV_COUNT 10000
#define BH_EV_MIN 100
#define BH_EV_MAX 300
/* Window settings measured: zlib's default, then smaller; the handler's
 * event default is MHDGZ_DEFAULT_EVENT_WINDOW_BITS/_MEM_LEVEL. */
static const int bh_ev_win[][2] = {
	{ 15, 8 }, { 13, 6 }, { 12, 5 }, { 11, 4 }, { 10, 3 }, { 9, 1 }
};

static const char *const bh_ev_words[] = { "alpha",   "bravo", "charlie", "delta", "echo",
					   "foxtrot", "golf",  "hotel",   "india", "juliet" };

/* The events, concatenated, and where each ends. */
static uint8_t *bh_ev_buf;
static size_t bh_ev_end[BH_EV_COUNT];

static void
bh_ev_make(void)
{
	size_t cap = (size_t)BH_EV_COUNT * (BH_EV_MAX + 1), len = 0;
	uint32_t s = 12345;

	bh_ev_buf = malloc(cap);
	if (!bh_ev_buf)
		die("out of memory");
	for (int i = 0; i < BH_EV_COUNT; i++) {
		char ev[BH_EV_MAX + 1];
		int n, want;

		s = s * 1103515245u + 12345u;
		want = BH_EV_MIN + (int)((s >> 8) % (BH_EV_MAX - BH_EV_MIN + 1));
		n = snprintf(
			ev, sizeof ev,
			"id: %d\nevent: tick\ndata: {\"seq\":%d,\"user\":\"%s\",\"price\":%u.%02u,"
			"\"note\":\"",
			i, i, bh_ev_words[(s >> 4) % 10], (s >> 12) % 1000, (s >> 20) % 100);
		/* Pad the note with words up to the event's length. */
		while (n < want - 4) {
			s = s * 1103515245u + 12345u;
			n += snprintf(ev + n, sizeof ev - (size_t)n, "%s ",
				      bh_ev_words[(s >> 8) % 10]);
			if (n > want - 4)
				n = want - 4;
		}
		memcpy(ev + n, "\"}\n\n", 4);
		n += 4;
		memcpy(bh_ev_buf + len, ev, (size_t)n);
		len += (size_t)n;
		bh_ev_end[i] = len;
	}
}

static double
bh_ev_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* One stream of every event; returns the compressed length (0 on error)
 * and, with check, verifies it decodes to the events. */
static size_t
bh_ev_stream(struct gz_compressor *c, uint8_t *out, size_t out_cap, int check)
{
	struct gz_io io = { .out = out, .out_cap = out_cap };
	size_t start = 0;

	if (c->be->reset(c) != 0)
		return 0;
	for (int i = 0; i < BH_EV_COUNT; i++) {
		io.in = bh_ev_buf + start;
		io.in_len = bh_ev_end[i] - start;
		if (c->be->stream(c, &io, GZ_FLUSH_SYNC) != 0 || io.in_len != 0 || io.out_cap == 0)
			return 0;
		start = bh_ev_end[i];
	}
	if (c->be->stream(c, &io, GZ_FLUSH_FINISH) != GZ_STREAM_END)
		return 0;
	if (check && tu_verify_member(out, out_cap - io.out_cap, bh_ev_buf, start) != 0)
		return 0;
	return out_cap - io.out_cap;
}

static int
bh_ev_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

void
bh_events_all(void)
{
	const size_t total = (size_t)BH_EV_COUNT * BH_EV_MAX;
	size_t out_cap = total + total / 2 + 1024;
	uint8_t *obuf = malloc(out_cap);

	if (!obuf)
		die("out of memory");
	bh_ev_make();
	out("\n# event streams: %d events of %d-%d bytes (%zu in all), a sync flush each\n",
	    BH_EV_COUNT, BH_EV_MIN, BH_EV_MAX, bh_ev_end[BH_EV_COUNT - 1]);
	for (size_t b = 0; gz_backends[b]; b++) {
		const struct gz_backend *be = gz_backends[b];

		/* Streams of a whole-buffer backend are zlib's (gz_stream_backend). */
		if (!(be->caps & GZ_CAP_STREAM))
			continue;
		for (size_t w = 0; w < sizeof bh_ev_win / sizeof bh_ev_win[0]; w++) {
			struct ba_counts c0, c1;
			struct gz_compressor *c;
			double ns[BH_MAX_COUNT];
			size_t len = 0;
			char name[96];

			snprintf(name, sizeof name, "EventStream/%s/level=%d/window=%d,mem=%d",
				 be->name, be->level_default, bh_ev_win[w][0], bh_ev_win[w][1]);
			if (bh_opt.have_filter && regexec(&bh_opt.filter, name, 0, NULL, 0) != 0)
				continue;
			ba_snapshot(&c0);
			if (gz_compressor_new_win(be, be->level_default, bh_ev_win[w][0],
						  bh_ev_win[w][1], &c) != 0)
				die("%s: cannot create the compressor", name);
			ba_snapshot(&c1);
			if (bh_ev_stream(c, obuf, out_cap, 1) == 0)
				die("%s: the stream does not decode to its events", name);
			for (int k = 0; k < bh_opt.count; k++) {
				double t0 = bh_ev_now_ns();

				len = bh_ev_stream(c, obuf, out_cap, 0);
				ns[k] = (bh_ev_now_ns() - t0) / BH_EV_COUNT;
			}
			qsort(ns, (size_t)bh_opt.count, sizeof ns[0], bh_ev_cmp);
			out("%s  %d events  %.0f ns/event  %.1f out-B/event  %.3f ratio  %llu state-B\n",
			    name, BH_EV_COUNT, ns[bh_opt.count / 2], (double)len / BH_EV_COUNT,
			    (double)len / (double)bh_ev_end[BH_EV_COUNT - 1],
			    (unsigned long long)(c1.own_bytes - c0.own_bytes));
			gz_compressor_free(c);
		}
	}
	free(obuf);
	free(bh_ev_buf);
	bh_ev_buf = NULL;
}
