/* demo.c: gzserve's built-in demo: pages, JSON payloads, /events and /stats. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gzserve.h"
#include "payload.h"

/* One built-in resource of the demo, made once and queued for every
 * request: mhdgz compresses it on the first request and reuses the gzip
 * variant afterwards. */
struct demo {
	const char *path;
	const char *type;
	const uint8_t *body;
	size_t len;
	uint8_t *json; /* the body when it is a payload made here */
	char etag[24];
	struct MHD_Response *ok; /* queued as 200, and as 304 */
};

/* The demo's page, stylesheet and script (demo_index, demo_css, demo_js):
 * examples/gzserve/demo/, made into C strings by embed.sh at build time.
 * The interop test checks the stylesheet's body background, rgb(244, 241,
 * 234), and #js-ok's rgb(47, 125, 50) to know it arrived (compressed) and
 * applied, and waits for the script's #js-ok: scripts, fetch() and
 * EventSource all work through the coding. */
#include <demo_assets.h> /* the build directory's (-I), never a stale copy beside demo.c */

/* FNV-1a 64: a strong validator of a built-in body (it changes whenever the
 * bytes do, which is all a strong ETag promises, RFC 9110 section 8.8.3). */
static void
etag_of(const uint8_t *p, size_t len, char *out, size_t cap)
{
	uint64_t h = 0xcbf29ce484222325ull;
	size_t i;

	for (i = 0; i < len; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	snprintf(out, cap, "\"%016" PRIx64 "\"", h);
}

/* ------------------------------------------------------------------------ */
/* /events: server-sent events through a suspended-between-events stream    */

struct events {
	struct server *s;
	struct MHD_Connection *conn;
	struct req *rq; /* valid while the stream runs (the request outlives it) */
	uint64_t t0_us, due_us;
	unsigned int sent;
	char pending[192]; /* the current event, for a reader buffer too small */
	size_t pend_len, pend_off;
	bool waiting; /* suspended, on the ticker's list */
	struct events *next;
};

/* Suspend the stream's connection until its next event is due. Returns false
 * when the server is stopping (the stream should end instead). */
static bool
ticker_wait(struct events *ev)
{
	struct server *s = ev->s;
	bool ok = false;

	pthread_mutex_lock(&s->tick_lock);
	if (!s->stopping) {
		/* Suspend before the ticker can see us: it resumes only what is on
		 * its list, under this lock. */
		MHD_suspend_connection(ev->conn);
		ev->waiting = true;
		ev->next = s->waiting;
		s->waiting = ev;
		pthread_cond_signal(&s->tick_cond);
		ok = true;
	}
	pthread_mutex_unlock(&s->tick_lock);
	return ok;
}

/* The ticker thread: resume every stream whose event is due (all of them
 * when stopping), sleep until the next one. */
static void *
ticker_main(void *cls)
{
	struct server *s = cls;

	pthread_mutex_lock(&s->tick_lock);
	for (;;) {
		struct events **pp = &s->waiting;
		uint64_t now = now_us(), next = UINT64_MAX;
		struct timespec ts;

		while (*pp) {
			struct events *ev = *pp;

			if (s->stopping || ev->due_us <= now) {
				*pp = ev->next;
				ev->waiting = false;
				MHD_resume_connection(ev->conn);
			} else {
				if (ev->due_us < next)
					next = ev->due_us;
				pp = &ev->next;
			}
		}
		if (s->stopping)
			break;
		if (next == UINT64_MAX) {
			pthread_cond_wait(&s->tick_cond, &s->tick_lock);
			continue;
		}
		clock_gettime(CLOCK_MONOTONIC, &ts);
		next -= now;
		ts.tv_sec += (time_t)(next / 1000000u);
		ts.tv_nsec += (long)(next % 1000000u) * 1000;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&s->tick_cond, &s->tick_lock, &ts);
	}
	pthread_mutex_unlock(&s->tick_lock);
	return NULL;
}

/* Start the ticker thread (demo mode or not: idle, it only sleeps). */
int
ticker_start(struct server *s)
{
	pthread_condattr_t ca;

	pthread_mutex_init(&s->tick_lock, NULL);
	/* Deadlines are monotonic, like now_us(). */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->tick_cond, &ca);
	pthread_condattr_destroy(&ca);
	return pthread_create(&s->tick_thread, NULL, ticker_main, s) != 0 ? -1 : 0;
}

/* Shutting down: every waiting stream is resumed and ends at its next
 * read, and no new one waits. */
void
ticker_stop(struct server *s)
{
	pthread_mutex_lock(&s->tick_lock);
	s->stopping = true;
	pthread_cond_signal(&s->tick_cond);
	pthread_mutex_unlock(&s->tick_lock);
}

/* After ticker_stop(), before MHD_stop_daemon(): libmicrohttpd must not be
 * stopped with a connection still suspended. */
void
ticker_join(struct server *s)
{
	pthread_join(s->tick_thread, NULL);
}

static ssize_t
events_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct events *ev = cls;
	uint64_t now;
	size_t n;
	bool stopping;

	(void)pos;
	if (ev->pend_off == ev->pend_len) {
		pthread_mutex_lock(&ev->s->tick_lock);
		stopping = ev->s->stopping;
		pthread_mutex_unlock(&ev->s->tick_lock);
		/* Shutting down ends the stream cleanly (a complete gzip member,
		 * the last chunk): the client sees the end, not a reset. */
		if (ev->sent == ev->s->cfg.events || stopping)
			return MHD_CONTENT_READER_END_OF_STREAM;
		now = now_us();
		if (ev->t0_us == 0)
			ev->t0_us = ev->due_us = now;
		if (now < ev->due_us)
			return ticker_wait(ev) ? 0 : MHD_CONTENT_READER_END_OF_STREAM;
		ev->sent++;
		/* Default "message" events, so EventSource.onmessage sees them. */
		n = (size_t)snprintf(ev->pending, sizeof ev->pending,
				     "id: %u\ndata: {\"n\":%u,\"of\":%u,"
				     "\"elapsed_ms\":%" PRIu64 "}\n\n",
				     ev->sent, ev->sent, ev->s->cfg.events,
				     (now - ev->t0_us) / 1000);
		ev->pend_len = n;
		ev->pend_off = 0;
		ev->due_us += (uint64_t)ev->s->cfg.event_ms * 1000u;
	}
	n = ev->pend_len - ev->pend_off;
	if (n > max)
		n = max;
	memcpy(buf, ev->pending + ev->pend_off, n);
	ev->pend_off += n;
	atomic_fetch_add(&ev->rq->stream_nbytes, n);
	return (ssize_t)n;
}

static enum MHD_Result
serve_events(struct req *rq, struct MHD_Connection *conn)
{
	struct events *ev = calloc(1, sizeof *ev);
	struct MHD_Response *r;

	if (!ev)
		return MHD_NO;
	ev->s = rq->s;
	ev->conn = conn;
	ev->rq = rq;
	r = mhdgz_response_from_callback(rq->s->gz, MHD_SIZE_UNKNOWN, 1024, events_read, ev, free);
	if (!r) {
		free(ev);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	/* Automatic for text/event-stream; said here because a stream of
	 * another type (NDJSON, logs) needs this call to flush per event. */
	(void)mhdgz_response_set_flags(rq->s->gz, r, MHDGZ_RESPONSE_LOW_LATENCY);
	rq->streamed = true;
	return respond(rq, conn, MHD_HTTP_OK, r, 0);
}

/* ------------------------------------------------------------------------ */
/* /stats                                                                   */

static enum MHD_Result
serve_stats(struct req *rq, struct MHD_Connection *conn)
{
	struct server *s = rq->s;
	struct mhdgz_stats st;
	struct MHD_Response *r;
	char *body = NULL;
	size_t len = 0;
	FILE *f;
	unsigned int i;

	struct mhdgz_backend_info bi = { .size = sizeof bi };

	memset(&st, 0, sizeof st);
	st.size = sizeof st;
	if (mhdgz_get_stats(s->gz, &st) != 0 || mhdgz_backend_info(s->cfg.backend, &bi) != 0)
		return respond_error(rq, conn, 500);
	f = open_memstream(&body, &len);
	if (!f)
		return MHD_NO;
	fprintf(f,
		"{\"version\":\"%s\",\"backend\":\"%s\",\"level\":%d,\"responses\":%" PRIu64
		",\"compressed\":%" PRIu64 ",\"reasons\":{",
		mhdgz_version(), bi.name, s->level, st.responses, st.compressed);
	for (i = 0; i < MHDGZ_REASON_COUNT; i++)
		fprintf(f, "%s\"%s\":%" PRIu64, i ? "," : "",
			mhdgz_reason_name((enum mhdgz_reason)i), st.reasons[i]);
	fprintf(f,
		"},\"bytes_in\":%" PRIu64 ",\"bytes_out\":%" PRIu64 ",\"compressions\":%" PRIu64
		",\"failures\":%" PRIu64 ",\"cache_hits\":%" PRIu64 ",\"pool_gets\":%" PRIu64
		",\"pool_misses\":%" PRIu64 ",\"pool_idle\":%" PRIu64 ",\"pool_trims\":%" PRIu64
		",\"padded\":%" PRIu64 ",\"store\":{\"hits\":%" PRIu64 ",\"misses\":%" PRIu64
		",\"evictions\":%" PRIu64 ",\"bytes\":%" PRIu64 "}",
		st.bytes_in, st.bytes_out, st.compressions, st.failures, st.cache_hits,
		st.pool_gets, st.pool_misses, st.pool_idle, st.pool_trims, st.padded, st.store_hits,
		st.store_misses, st.store_evictions, st.store_nbytes);
	/* Per coding: responses sent (which one the clients were given), and
	 * their bytes before and after coding (the demo page's chart). */
	for (unsigned int k = 0; k < 3; k++) {
		static const char *const name[3] = { "coded", "coded_bytes_in", "coded_bytes_out" };
		const uint64_t *v = k == 0   ? st.coded
				    : k == 1 ? st.coded_bytes_in
					     : st.coded_bytes_out;

		fprintf(f, ",\"%s\":{", name[k]);
		for (i = 0; i < MHDGZ_CODING_COUNT; i++)
			fprintf(f, "%s\"%s\":%" PRIu64, i ? "," : "",
				coding_name((enum mhdgz_coding)i), v[i]);
		fputc('}', f);
	}
	fprintf(f,
		",\"dict_hits\":%" PRIu64 ",\"dict_bytes_saved\":%" PRIu64
		",\"server\":{\"requests\":%" PRIu64 ",\"in_flight\":%d,\"connections\":%d}}\n",
		st.dict_hits, st.dict_bytes_saved, (uint64_t)atomic_load(&s->requests),
		atomic_load(&s->in_flight), atomic_load(&s->conns));
	if (fclose(f) != 0) {
		free(body);
		return MHD_NO;
	}
	/* MUST_FREE: the response frees body with free(); if it could not be
	 * made, body is still ours (as with libmicrohttpd). */
	r = mhdgz_response_from_buffer(s->gz, len, body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	return respond(rq, conn, MHD_HTTP_OK, r, len);
}

/* ------------------------------------------------------------------------ */
/* The demo's persistent resources                                          */

int
demo_init(struct server *s)
{
	static const struct {
		const char *path, *type, *text; /* text: NULL for a JSON payload */
		size_t len;
	} table[] = {
		{ "/", "text/html; charset=utf-8", demo_index, sizeof demo_index - 1 },
		{ "/style.css", "text/css; charset=utf-8", demo_css, sizeof demo_css - 1 },
		{ "/app.js", "text/javascript; charset=utf-8", demo_js, sizeof demo_js - 1 },
		{ "/2k.json", "application/json", NULL, PAYLOAD_JSON_2K },
		{ "/20k.json", "application/json", NULL, PAYLOAD_JSON_20K },
		{ "/100k.json", "application/json", NULL, PAYLOAD_JSON_100K },
	};
	size_t i;

	s->ndemos = sizeof table / sizeof table[0];
	s->demos = calloc(s->ndemos, sizeof *s->demos);
	if (!s->demos)
		return -1;
	for (i = 0; i < s->ndemos; i++) {
		struct demo *d = &s->demos[i];

		*d = (struct demo){ .path = table[i].path,
				    .type = table[i].type,
				    .body = (const uint8_t *)table[i].text,
				    .len = table[i].len };
		/* Valid JSON of exactly the benchmark sizes (see payload.h). */
		if (!d->body && payload_json_sized(d->len, &d->json) != d->len)
			return -1;
		if (!d->body)
			d->body = d->json;
		etag_of(d->body, d->len, d->etag, sizeof d->etag);
		d->ok = mhdgz_response_from_buffer(s->gz, d->len, (void *)d->body,
						   MHD_RESPMEM_PERSISTENT);
		if (!d->ok)
			return -1;
		MHD_add_response_header(d->ok, MHD_HTTP_HEADER_CONTENT_TYPE, d->type);
		MHD_add_response_header(d->ok, MHD_HTTP_HEADER_ETAG, d->etag);
		/* Revalidate every time: the ETag makes it cheap. */
		MHD_add_response_header(d->ok, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
	}
	return 0;
}

void
demo_fini(struct server *s)
{
	size_t i;

	for (i = 0; s->demos && i < s->ndemos; i++) {
		if (s->demos[i].ok)
			MHD_destroy_response(s->demos[i].ok);
		free(s->demos[i].json);
	}
	free(s->demos);
	/* The ticker's, once the daemon (whose readers take the lock) is gone. */
	pthread_cond_destroy(&s->tick_cond);
	pthread_mutex_destroy(&s->tick_lock);
}

enum MHD_Result
serve_demo(struct req *rq, struct MHD_Connection *conn, const char *path, const char *method)
{
	struct server *s = rq->s;
	enum MHD_Result dret;
	size_t i;

	if (dict_serve(rq, conn, path, method, &dret))
		return dret;
	if (strcmp(path, "/events") == 0)
		return serve_events(rq, conn);
	if (strcmp(path, "/stats") == 0)
		return serve_stats(rq, conn);
	if (strcmp(path, "/204") == 0) {
		/* No content, for clients' keep-alive sequences (tests/interop.sh). */
		static const char empty[] = "";

		return respond(rq, conn, MHD_HTTP_NO_CONTENT,
			       mhdgz_response_from_buffer(s->gz, 0, (void *)empty,
							  MHD_RESPMEM_PERSISTENT),
			       0);
	}
	for (i = 0; i < s->ndemos; i++) {
		struct demo *d = &s->demos[i];

		if (strcmp(path, d->path) != 0 && !(i == 0 && strcmp(path, "/index.html") == 0))
			continue;
		/* The handler answers If-None-Match and If-Match: a 304 of this
		 * 200, or a 412 without content. */
		rq->preconditions = true;
		return queue(rq, conn, MHD_HTTP_OK, d->ok, d->len);
	}
	return respond_error(rq, conn, MHD_HTTP_NOT_FOUND);
}
