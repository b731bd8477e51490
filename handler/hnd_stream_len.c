/* hnd_stream_len.c: the coded length of a file's stream without sending it, for HEAD and 304 (RFC 9110 sections 9.3.2 and 8.6). */
#include <string.h>

#include "hnd_stats.h"
#include "hnd_plan.h"
#include "hnd_entry.h"
#include "hnd_store.h"
#include "hnd_handle.h"
#include "hnd_stream.h"
#include "hnd_pad.h"
#include "gz_stream.h"

/* A pump's source reading an entry directly (HEAD: no libmicrohttpd
 * connection reads it). A reader with no data now ends the count: the
 * length cannot be known without waiting. */
struct count_src {
	struct hnd_entry *e;
	struct gz_pump *pump;
	bool stalled;
	struct hnd_pad_ctx *pc; /* length hiding: keyed as the GET's stream is; or NULL */
};

static ssize_t
count_source(void *cls, uint8_t *buf, size_t max)
{
	struct count_src *cs = cls;
	ssize_t n = hnd_source_read(cs->e, cs->e->fd, cs->pump->in_total, (char *)buf, max);

	if (n == MHD_CONTENT_READER_END_OF_STREAM)
		return GZ_SOURCE_END;
	if (n == 0)
		cs->stalled = true;
	if (n <= 0)
		return GZ_SOURCE_ERROR;
	if (cs->pc)
		hnd_pad_update(cs->pc, buf, (size_t)n);
	return n;
}

/* The length by compressing: what hnd_gzip_stream_length() does on a miss. */
static int
stream_length(struct mhdgz *gz, struct hnd_entry *e, const char *etag, bool low_latency,
	      enum gz_coding coding, uint64_t *len_ret)
{
	struct gz_pump pump;
	struct hnd_pad_ctx pc;
	struct count_src cs = { .e = e, .pump = &pump };
	uint8_t out[HND_FD_BLOCK / 2];
	uint64_t total = 0;
	bool end = false;
	int rc;

	if (e->body_len == MHD_SIZE_UNKNOWN || e->body_len > HND_HEAD_LENGTH_MAX)
		return MHDGZ_ENOTSUP;
	/* The same input block and flush policy as a GET's stream, so the
	 * same bytes: libmicrohttpd's buffer size only cuts them differently. */
	/* A HEAD never runs the application's reader (it may be costly or
	 * have effects); only a file is read to learn the length. */
	if (e->kind != HND_FD)
		return MHDGZ_ENOTSUP;
	/* The pool the stream itself would use: same settings, same bytes. */
	rc = gz_pump_init(&pump, hnd_stream_pool(gz, coding, low_latency),
			  e->kind == HND_CALLBACK ? e->block_size : HND_FD_BLOCK,
			  low_latency ? GZ_PUMP_LOW_LATENCY : 0);
	if (rc < 0)
		return rc;
	if (hnd_padded(gz, e, coding)) { /* a file: keyed on its first bytes, as a GET's stream */
		hnd_pad_begin(gz, HND_PAD_STREAM, etag, HND_PAD_KEY_NBYTES, &pc);
		cs.pc = &pc;
	}
	/* Bounded: every round consumes input or writes output, and the
	 * input is at most body_len bytes. */
	while (!end) {
		ssize_t n = gz_pump_read(&pump, count_source, &cs, out, sizeof out, &end);

		if (n < 0) {
			rc = cs.stalled ? MHDGZ_EBUSY : MHDGZ_EBACKEND;
			break;
		}
		total += (uint64_t)n;
	}
	gz_pump_fini(&pump);
	if (!end)
		return rc;
	/* The pad as a GET's stream adds it (a backend header that cannot
	 * take one is not: none of this library's backends writes one). */
	*len_ret = total + (cs.pc ? hnd_pad_end(gz, &pc) : 0);
	return 0;
}

int
hnd_gzip_stream_length(struct mhdgz *gz, struct hnd_entry *e, const char *etag, bool low_latency,
		       enum gz_coding coding, uint64_t *len_ret)
{
	enum hnd_store_mode mode = low_latency ? HND_SM_STREAM_LL : HND_SM_STREAM;
	struct hnd_store_key version;
	bool versioned;
	int rc;

	/* Only a file gives the same bytes every time: known for this
	 * response (the file as it was at the first count, as for a body
	 * compressed whole), its file version or its strong ETag. */
	if (e->kind == HND_FD && hnd_coded_len_known(gz, e, etag, coding, mode, len_ret))
		return 0;
	versioned = hnd_store_entry_version(gz, e, &version); /* before the count reads it */
	rc = stream_length(gz, e, etag, low_latency, coding, len_ret);
	if (rc == 0) {
		hnd_count(gz, HND_C_COMPRESSIONS, 1);
		hnd_store_entry_put(gz, e, etag, coding, mode, NULL, *len_ret,
				    versioned ? &version : NULL);
	}
	return rc;
}
