/* gz_alloc.c: the one internal allocator: a process-wide hook, a live-block count, zlib routing. */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#ifdef HAVE_MALLOC_TRIM
#include <malloc.h>
#endif
#include <stdbool.h>
#include <string.h>

#include "gz_error.h"
#include "gz_alloc.h"
#include "gz_backend.h"

/*
 * The hook is a plain struct, not an atomic pointer: gz_alloc_set_hook()
 * is documented as not thread-safe with any other call, and it refuses to
 * switch while a block is live, so every block is freed by the functions
 * that allocated it.
 */
struct gz_hook {
	void *(*malloc_fn)(size_t nbytes, void *cls);
	void (*free_fn)(void *ptr, void *cls);
	void *cls;
};

static void *
gz_libc_malloc(size_t nbytes, void *cls)
{
	(void)cls;
	return malloc(nbytes);
}

static void
gz_libc_free(void *ptr, void *cls)
{
	(void)cls;
	free(ptr);
}

static const struct gz_hook gz_hook_libc = {
	.malloc_fn = gz_libc_malloc,
	.free_fn = gz_libc_free,
	.cls = NULL,
};

static struct gz_hook gz_hook = {
	.malloc_fn = gz_libc_malloc,
	.free_fn = gz_libc_free,
	.cls = NULL,
};

void
gz_alloc_release_unused(void)
{
#ifdef HAVE_MALLOC_TRIM
	/* Without this, glibc keeps the freed compressors' pages: allocations
	 * of their size come from the heap (the dynamic mmap threshold rises
	 * past them after the first free), and only the top of a heap is
	 * returned by free() itself. */
	if (gz_hook.malloc_fn == gz_libc_malloc)
		malloc_trim(0);
#endif
}

/*
 * Blocks handed out by gz_malloc and not yet given to gz_free, striped: one
 * counter shared by every thread was a cache line that each allocation and
 * free on every CPU pulled over (four times per compressed response). A
 * thread counts in its own stripe; a block freed by another thread than
 * the one that allocated it leaves +1 in one stripe and -1 in another, so
 * only the sum means anything. Larger GZ_LIVE_STRIPES: fewer threads share
 * a line; each 64 bytes of static memory.
 */
#ifndef GZ_LIVE_STRIPES
#define GZ_LIVE_STRIPES 8
#endif

struct gz_live_stripe {
	_Atomic int64_t n;
} __attribute__((aligned(64)));

static struct gz_live_stripe gz_live[GZ_LIVE_STRIPES];
static _Thread_local unsigned int gz_live_id = ~0u;
static atomic_uint gz_live_next;

/* The calling thread's stripe: assigned round-robin at its first use. */
static _Atomic int64_t *
gz_live_mine(void)
{
	if (gz_live_id == ~0u)
		gz_live_id = atomic_fetch_add(&gz_live_next, 1) % GZ_LIVE_STRIPES;
	return &gz_live[gz_live_id].n;
}

static pthread_once_t gz_alloc_route_once = PTHREAD_ONCE_INIT;

/* The calling thread's meter (gz_alloc_meter_start): its blocks and
 * their sizes as asked (so the figure is the same on every run), their
 * live sum and its peak; thread-local, touched only while on. A block
 * past GZ_METER_BLOCKS stays counted when freed (an upper bound). Whether
 * it is on is apart, small, for the check in every gz_malloc. */
#ifndef GZ_METER_BLOCKS
#define GZ_METER_BLOCKS 256
#endif
static _Thread_local bool gz_meter_on;
static _Thread_local struct {
	uint64_t live, peak;
	unsigned int n;
	struct {
		void *p;
		size_t nbytes;
	} b[GZ_METER_BLOCKS];
} gz_meter;

void
gz_alloc_meter_start(void)
{
	gz_meter_on = true;
	gz_meter.live = gz_meter.peak = 0;
	gz_meter.n = 0;
}

uint64_t
gz_alloc_meter_stop(void)
{
	gz_meter_on = false;
	return gz_meter.peak;
}

static void
gz_meter_add(void *p, size_t nbytes)
{
	gz_meter.live += nbytes;
	if (gz_meter.live > gz_meter.peak)
		gz_meter.peak = gz_meter.live;
	if (gz_meter.n < GZ_METER_BLOCKS)
		gz_meter.b[gz_meter.n++] = (__typeof__(gz_meter.b[0])){ p, nbytes };
}

static void
gz_meter_sub(void *p)
{
	for (unsigned int k = gz_meter.n; k-- > 0;)
		if (gz_meter.b[k].p == p) {
			gz_meter.live -= gz_meter.b[k].nbytes;
			gz_meter.b[k] = gz_meter.b[--gz_meter.n];
			return;
		}
}

void *
gz_malloc(size_t nbytes)
{
	void *p;

	/* malloc(0) may legitimately return NULL; ask for one byte so that NULL
	 * always means failure to our callers (and to zlib and libdeflate). */
	p = gz_hook.malloc_fn(nbytes ? nbytes : 1, gz_hook.cls);
	if (p) {
		atomic_fetch_add_explicit(gz_live_mine(), 1, memory_order_relaxed);
		if (gz_meter_on)
			gz_meter_add(p, nbytes);
	}
	return p;
}

void *
gz_calloc(size_t count, size_t nbytes)
{
	void *p;

	if (nbytes && count > SIZE_MAX / nbytes)
		return NULL;
	p = gz_malloc(count * nbytes);
	if (p)
		memset(p, 0, count * nbytes);
	return p;
}

void
gz_free(void *ptr)
{
	if (!ptr)
		return;
	atomic_fetch_sub_explicit(gz_live_mine(), 1, memory_order_relaxed);
	if (gz_meter_on)
		gz_meter_sub(ptr);
	gz_hook.free_fn(ptr, gz_hook.cls);
}

char *
gz_strndup(const char *s, size_t len)
{
	char *d;

	/* strndup semantics: at most len bytes, stopping at a NUL. */
	len = strnlen(s, len);
	if (len == SIZE_MAX)
		return NULL;
	d = gz_malloc(len + 1);
	if (!d)
		return NULL;
	memcpy(d, s, len);
	d[len] = '\0';
	return d;
}

void *
gz_zalloc(void *opaque, unsigned int items, unsigned int size)
{
	(void)opaque;
	/* Only reachable with a 32-bit size_t, but zlib trusts us to check. */
	if (size && (size_t)items > SIZE_MAX / size)
		return NULL;
	return gz_malloc((size_t)items * size);
}

void
gz_zfree(void *opaque, void *ptr)
{
	(void)opaque;
	gz_free(ptr);
}

void *
gz_opaque_malloc(void *opaque, size_t nbytes)
{
	(void)opaque;
	return gz_malloc(nbytes);
}

void
gz_opaque_free(void *opaque, void *ptr)
{
	(void)opaque;
	gz_free(ptr);
}

int64_t
gz_alloc_live(void)
{
	int64_t n = 0;
	unsigned int i;

	for (i = 0; i < GZ_LIVE_STRIPES; i++)
		n += atomic_load_explicit(&gz_live[i].n, memory_order_relaxed);
	return n;
}

/* Backends whose library has only a process-wide allocator (libdeflate
 * before 1.19, without libdeflate_alloc_compressor_ex) are routed through
 * gz_malloc/gz_free once, the first time a hook other than malloc/free is
 * installed, and never by default: an application that uses such a
 * library itself keeps its own allocator unless it asks for ours. A
 * library with a per-object allocator is given gz_malloc/gz_free per
 * object by its backend, and has no global_alloc_init. */
static void
gz_alloc_route_backends(void)
{
	size_t i;

	for (i = 0; gz_backends[i]; i++)
		if (gz_backends[i]->global_alloc_init)
			gz_backends[i]->global_alloc_init(gz_malloc, gz_free);
}

int
gz_alloc_set_hook(void *(*malloc_fn)(size_t nbytes, void *cls),
		  void (*free_fn)(void *ptr, void *cls), void *cls)
{
	if ((malloc_fn == NULL) != (free_fn == NULL))
		return GZ_EINVAL;
	/* A block must go back to the allocator that made it. */
	if (gz_alloc_live() != 0)
		return GZ_EBUSY;
	if (malloc_fn) {
		(void)pthread_once(&gz_alloc_route_once, gz_alloc_route_backends);
		gz_hook.malloc_fn = malloc_fn;
		gz_hook.free_fn = free_fn;
		gz_hook.cls = cls;
	} else {
		gz_hook = gz_hook_libc;
	}
	return GZ_OK;
}
