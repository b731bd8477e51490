/* hnd_table.c: the response table (response pointer -> entry) and the lifetime of entries. */
#include <stdlib.h>
#include <unistd.h>

#include "hnd_internal.h"

/* First size of the response table (buckets, power of two). */
#ifndef HND_TABLE_MIN
#define HND_TABLE_MIN 64
#endif

static size_t
table_slot(const struct hnd_table *t, const void *key)
{
	uint64_t h = (uint64_t)(uintptr_t)key * 0x9e3779b97f4a7c15ull;
	return (size_t)(h >> 32) & (t->nbuckets - 1);
}

int
hnd_table_init(struct hnd_table *t)
{
	t->bucket = gz_calloc(HND_TABLE_MIN, sizeof *t->bucket);
	if (!t->bucket)
		return MHDGZ_ENOMEM;
	t->nbuckets = HND_TABLE_MIN;
	t->count = 0;
	if (pthread_mutex_init(&t->lock, NULL) != 0) {
		gz_free(t->bucket);
		return MHDGZ_ENOMEM;
	}
	return 0;
}

void
hnd_table_fini(struct hnd_table *t)
{
	pthread_mutex_destroy(&t->lock);
	gz_free(t->bucket);
	t->bucket = NULL;
}

/* Double the bucket array; on allocation failure keep the old one (longer
 * chains are slower, not wrong). Called with the lock held. */
static void
table_grow(struct hnd_table *t)
{
	size_t i, old_n = t->nbuckets;
	struct hnd_entry **old = t->bucket, **nb = gz_calloc(old_n * 2, sizeof *nb);

	if (!nb)
		return;
	t->bucket = nb;
	t->nbuckets = old_n * 2;
	for (i = 0; i < old_n; i++) {
		struct hnd_entry *e = old[i], *next;
		for (; e; e = next) {
			size_t s = table_slot(t, e->response);
			next = e->next;
			e->next = nb[s];
			nb[s] = e;
		}
	}
	gz_free(old);
}

void
hnd_table_insert(struct hnd_table *t, struct hnd_entry *e)
{
	size_t s;

	pthread_mutex_lock(&t->lock);
	if (t->count >= t->nbuckets)
		table_grow(t);
	s = table_slot(t, e->response);
	e->next = t->bucket[s];
	t->bucket[s] = e;
	t->count++;
	pthread_mutex_unlock(&t->lock);
}

void
hnd_table_remove(struct hnd_table *t, struct hnd_entry *e)
{
	struct hnd_entry **pp;

	pthread_mutex_lock(&t->lock);
	for (pp = &t->bucket[table_slot(t, e->response)]; *pp; pp = &(*pp)->next) {
		if (*pp == e) {
			*pp = e->next;
			t->count--;
			break;
		}
	}
	pthread_mutex_unlock(&t->lock);
}

struct hnd_entry *
hnd_table_lookup(struct hnd_table *t, const struct MHD_Response *r)
{
	struct hnd_entry *e;

	pthread_mutex_lock(&t->lock);
	for (e = t->bucket[table_slot(t, r)]; e; e = e->next)
		if (e->response == r)
			break;
	pthread_mutex_unlock(&t->lock);
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
	hnd_dcz_free(e);
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
	if (pthread_mutex_init(&e->read_lock, NULL) != 0) {
		pthread_mutex_destroy(&e->lock);
		gz_free(e);
		return NULL;
	}
	e->gz = gz;
	hnd_gz_ref(gz);
	e->kind = kind;
	e->fd = -1;
	atomic_init(&e->refs, 1);
	return e;
}
