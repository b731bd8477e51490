/* bh_alloc.c: process-wide allocation counting for the bench: it defines malloc and friends, counts, and forwards to glibc. */
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
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* reallocarray, memalign, valloc */
#endif
#include "config.h"

#include <errno.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "bench.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define BA_INTERPOSE 0 /* the sanitizer owns malloc: no counting */
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) ||                         \
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

const bool ba_counting = BA_INTERPOSE;

struct ba_slot {
	_Atomic uint64_t v[4]; /* struct ba_counts, in order */
	atomic_int used;
} __attribute__((aligned(64)));

static struct ba_slot ba_slot[BA_SLOTS];
static struct ba_slot ba_shared;  /* atomic adds */
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
void
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

void
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

int
ba_install_mhdgz(void)
{
	static const struct mhdgz_allocator alloc = {
		.size = sizeof alloc,
		.malloc_fn = ba_gz_malloc,
		.free_fn = ba_gz_free,
		.cls = NULL,
	};

	return mhdgz_set_allocator(&alloc);
}
