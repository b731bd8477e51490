/* hnd_entry.c: the lifetime of entries, what the library keeps of a response it created. */
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
