/* hnd_entry.c: the lifetime of entries, what the library keeps of a response it created, and the reading of their bodies. */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "gz_alloc.h"
#include "hnd_entry.h"
#include "hnd_handle.h"

/* The entry's dcz representations (hnd_dict.c builds them). */
static void
dcz_free(struct hnd_entry *e)
{
	struct hnd_dcz *k = e->dcz, *next;

	for (; k; k = next) {
		next = k->next;
		if (k->rep)
			MHD_destroy_response(k->rep);
		gz_free(k);
	}
	e->dcz = NULL;
}

/* The coded stream e's response carried in place (hnd_stream.c): its
 * response is gone, no reader call follows. */
static void
in_place_fini(struct hnd_entry *e)
{
	struct hnd_stream *st = e->in_place;

	e->in_place = NULL;
	if (st)
		e->in_place_free(st);
}

struct hnd_entry *
hnd_entry_locked(struct mhdgz *gz, const struct MHD_Response *r)
{
	struct hnd_entry *e;

	if (!gz || !r)
		return NULL;
	e = hnd_table_lookup(&gz->table, r);
	if (e)
		pthread_mutex_lock(&e->lock);
	return e;
}

void
hnd_entry_free(struct hnd_entry *e)
{
	struct mhdgz *gz;
	size_t k;

	if (e->stored || e->dcz)
		hnd_store_entry_drop(e);
	for (k = 0; k < GZ_CODING_COUNT; k++) {
		if (e->coded[k].rep)
			MHD_destroy_response(e->coded[k].rep);
		if (e->coded[k].rep_304)
			MHD_destroy_response(e->coded[k].rep_304);
	}
	if (e->rep_304_identity)
		MHD_destroy_response(e->rep_304_identity);
	dcz_free(e);
	in_place_fini(e);
	if (e->fields)
		MHD_destroy_response(e->fields);
	if (e->sendfile_rep)
		MHD_destroy_response(e->sendfile_rep);
	free(e->owned_libc); /* the caller's MUST_FREE buffer (check-style: libc) */
	gz_free(e->owned_gz);
	if (e->body_free)
		e->body_free(e->body_free_cls);
	if (e->kind == HND_CALLBACK && e->crfc)
		e->crfc(e->crc_cls);
	if ((e->kind == HND_FD || e->kind == HND_PIPE) && e->fd >= 0)
		close(e->fd);
	if (e->kind == HND_CALLBACK || e->kind == HND_PIPE)
		pthread_mutex_destroy(&e->read_lock);
	pthread_mutex_destroy(&e->lock);
	gz = e->gz;
	gz_free(e);
	hnd_gz_unref(gz); /* last: may free the handle */
}

void
hnd_entry_unref(struct hnd_entry *e)
{
	if (atomic_fetch_sub(&e->refs, 1) == 1)
		hnd_entry_free(e);
}

/* libmicrohttpd's free callback of a tracked response: its last reference
 * is gone, and its address may be reused by the next response. */
void
hnd_entry_release(void *cls)
{
	struct hnd_entry *e = cls;

	if (e->response) /* NULL if MHD_create_* itself failed */
		hnd_table_remove(&e->gz->table, e);
	/* No reader call follows: a coded stream in the response goes now,
	 * and its compressor with it. */
	in_place_fini(e);
	hnd_entry_unref(e);
}

/* A new entry holding one reference (the response's). */
struct hnd_entry *
hnd_entry_new(struct mhdgz *gz, enum hnd_kind kind)
{
	struct hnd_entry *e = gz_calloc(1, sizeof *e);

	if (!e)
		return NULL;
	if (pthread_mutex_init(&e->lock, NULL) != 0) {
		gz_free(e);
		return NULL;
	}
	/* Only readers of the application's (a callback, a pipe) take
	 * read_lock: a buffer or file response, one per request in most
	 * servers, does not pay for it. */
	if ((kind == HND_CALLBACK || kind == HND_PIPE) &&
	    pthread_mutex_init(&e->read_lock, NULL) != 0) {
		pthread_mutex_destroy(&e->lock);
		gz_free(e);
		return NULL;
	}
	e->gz = gz;
	hnd_gz_ref(gz);
	e->kind = kind;
	e->fd = -1;
	atomic_init(&e->refs, 1);
	atomic_init(&e->te_chunked, false);
	return e;
}

/* The application's reader at pos. libmicrohttpd never runs one
 * response's reader on two threads at once (it holds the response's mutex
 * around the call); streams of one entry keep that promise, so a reader
 * with state (a FILE * it seeks, say) works as it did before. Returns what
 * the reader returned. */
ssize_t
hnd_callback_read(struct hnd_entry *e, uint64_t pos, char *buf, size_t max)
{
	ssize_t n;

	pthread_mutex_lock(&e->read_lock);
	n = e->crc(e->crc_cls, pos, buf, max);
	pthread_mutex_unlock(&e->read_lock);
	return n;
}

/* Read the source at pos into buf: the user's reader, the pipe or the
 * file (hnd_entry.h). */
ssize_t
hnd_source_read(struct hnd_entry *e, int fd, uint64_t pos, char *buf, size_t max)
{
	ssize_t n;

	if (e->body_len != MHD_SIZE_UNKNOWN) {
		if (pos >= e->body_len)
			return MHD_CONTENT_READER_END_OF_STREAM;
		if (max > e->body_len - pos)
			max = (size_t)(e->body_len - pos);
	}
	if (e->kind == HND_PIPE) {
		/* A pipe is read once, in order: pos is where it stands. */
		pthread_mutex_lock(&e->read_lock);
		do
			n = read(e->fd, buf, max);
		while (n < 0 && errno == EINTR);
		pthread_mutex_unlock(&e->read_lock);
		if (n == 0)
			return MHD_CONTENT_READER_END_OF_STREAM;
		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK
				       ? 0
				       : MHD_CONTENT_READER_END_WITH_ERROR;
		return n;
	}
	if (e->kind == HND_CALLBACK) {
		n = hnd_callback_read(e, pos, buf, max);
		/* Ending before the announced size: the application's own
		 * response ends there complete (last chunk, trailer) when it
		 * frames itself as chunked (its own Transfer-Encoding: chunked);
		 * otherwise its body is cut short and the connection closed, so
		 * a coded stream (which has no length to fall short of) ends
		 * with an error, never a complete-looking short body. */
		if (n == MHD_CONTENT_READER_END_OF_STREAM && e->body_len != MHD_SIZE_UNKNOWN &&
		    !atomic_load(&e->te_chunked))
			return MHD_CONTENT_READER_END_WITH_ERROR;
		return n;
	}
	do
		n = pread(fd, buf, max, (off_t)(e->offset + pos));
	while (n < 0 && errno == EINTR);
	/* A file shorter than promised cannot be completed: error, not a
	 * silently truncated body. */
	if (n <= 0)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	return n;
}
