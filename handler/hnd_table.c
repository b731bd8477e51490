/* hnd_table.c: the response table (response pointer -> entry), 16 shards with a lock each. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gz_alloc.h"
#include "hnd_entry.h"

/* First size of each shard of the response table (buckets, power of two). */
#ifndef HND_TABLE_MIN
#define HND_TABLE_MIN 8
#endif

static uint64_t
table_hash(const void *key)
{
	return (uint64_t)(uintptr_t)key * 0x9e3779b97f4a7c15ull;
}

static struct hnd_table_shard *
table_shard(struct hnd_table *t, const void *key)
{
	return &t->shard[table_hash(key) >> 56 & (HND_TABLE_SHARDS - 1)];
}

static size_t
table_slot(const struct hnd_table_shard *sh, const void *key)
{
	return (size_t)(table_hash(key) >> 24) & (sh->nbuckets - 1);
}

int
hnd_table_init(struct hnd_table *t)
{
	size_t i;

	memset(t, 0, sizeof *t);
	for (i = 0; i < HND_TABLE_SHARDS; i++) {
		struct hnd_table_shard *sh = &t->shard[i];

		sh->bucket = gz_calloc(HND_TABLE_MIN, sizeof *sh->bucket);
		if (!sh->bucket)
			goto fail;
		if (pthread_mutex_init(&sh->lock, NULL) != 0) {
			gz_free(sh->bucket);
			sh->bucket = NULL;
			goto fail;
		}
		sh->nbuckets = HND_TABLE_MIN;
	}
	t->ready = true;
	return 0;
fail:
	while (i-- > 0) {
		pthread_mutex_destroy(&t->shard[i].lock);
		gz_free(t->shard[i].bucket);
	}
	return MHDGZ_ENOMEM;
}

void
hnd_table_fini(struct hnd_table *t)
{
	size_t i;

	if (!t->ready)
		return;
	for (i = 0; i < HND_TABLE_SHARDS; i++) {
		pthread_mutex_destroy(&t->shard[i].lock);
		gz_free(t->shard[i].bucket);
		t->shard[i].bucket = NULL;
	}
	t->ready = false;
}

/* Move a shard's entries into nb, its new bucket array of n (twice the
 * old); the old array is returned for the caller to free. Called with the
 * shard's lock held. */
static struct hnd_entry **
table_rehash(struct hnd_table_shard *sh, struct hnd_entry **nb, size_t n)
{
	size_t i, old_n = sh->nbuckets;
	struct hnd_entry **old = sh->bucket;

	sh->bucket = nb;
	sh->nbuckets = n;
	for (i = 0; i < old_n; i++) {
		struct hnd_entry *e = old[i], *next;
		for (; e; e = next) {
			size_t s = table_slot(sh, e->response);
			next = e->next;
			e->next = nb[s];
			nb[s] = e;
		}
	}
	return old;
}

/* A shard's lock is held for pointer moves only: a larger bucket array is
 * allocated, and the old one freed, without it. (A spin lock saved about
 * 150 instructions per response, but with threads outnumbering the CPUs a
 * preempted holder left the others spinning: twice the time with 8
 * threads on 2 CPUs.) */
void
hnd_table_insert(struct hnd_table *t, struct hnd_entry *e)
{
	struct hnd_table_shard *sh = table_shard(t, e->response);
	struct hnd_entry **spare = NULL;
	size_t s;

	pthread_mutex_lock(&sh->lock);
	while (sh->count >= sh->nbuckets) {
		size_t n = sh->nbuckets * 2;
		struct hnd_entry **nb;

		pthread_mutex_unlock(&sh->lock);
		gz_free(spare);
		spare = NULL;
		nb = gz_calloc(n, sizeof *nb);
		pthread_mutex_lock(&sh->lock);
		if (!nb)
			break; /* the old array stays: longer chains are slower, not wrong */
		if (sh->nbuckets * 2 != n)
			spare = nb; /* another insert grew it meanwhile */
		else
			spare = table_rehash(sh, nb, n);
	}
	s = table_slot(sh, e->response);
	e->next = sh->bucket[s];
	sh->bucket[s] = e;
	sh->count++;
	pthread_mutex_unlock(&sh->lock);
	gz_free(spare);
}

void
hnd_table_remove(struct hnd_table *t, struct hnd_entry *e)
{
	struct hnd_table_shard *sh = table_shard(t, e->response);
	struct hnd_entry **pp;

	pthread_mutex_lock(&sh->lock);
	for (pp = &sh->bucket[table_slot(sh, e->response)]; *pp; pp = &(*pp)->next) {
		if (*pp == e) {
			*pp = e->next;
			sh->count--;
			break;
		}
	}
	pthread_mutex_unlock(&sh->lock);
}

struct hnd_entry *
hnd_table_lookup(struct hnd_table *t, const struct MHD_Response *r)
{
	struct hnd_table_shard *sh = table_shard(t, r);
	struct hnd_entry *e;

	pthread_mutex_lock(&sh->lock);
	for (e = sh->bucket[table_slot(sh, r)]; e; e = e->next)
		if (e->response == r)
			break;
	pthread_mutex_unlock(&sh->lock);
	return e;
}

size_t
hnd_table_count(struct hnd_table *t)
{
	size_t i, n = 0;

	for (i = 0; i < HND_TABLE_SHARDS; i++) {
		pthread_mutex_lock(&t->shard[i].lock);
		n += t->shard[i].count;
		pthread_mutex_unlock(&t->shard[i].lock);
	}
	return n;
}
