/* gz_alloc.h: the one internal allocator, routed into zlib, libdeflate and ISA-L state. */
#ifndef GZ_ALLOC_H
#define GZ_ALLOC_H

#include <stddef.h>
#include <stdint.h>

/*
 * Every allocation made by mhdgz (and, through zalloc, libdeflate's
 * per-compressor options or, on libdeflate older than 1.19, its
 * process-wide libdeflate_set_memory_allocator, by the compression
 * libraries on our behalf) goes through gz_malloc/gz_free. gz_alloc_set_hook (the public
 * mhdgz_set_allocator) replaces the underlying functions process-wide;
 * tests use it to count allocations and to make the k-th one fail.
 *
 * gz_malloc returns NULL on failure (or for a failure injected by the hook);
 * callers must check. gz_free(NULL) is a no-op.
 */
void *gz_malloc(size_t nbytes);

/* The thread-locals of the library keep the default TLS model of a shared
 * library, never initial-exec: one initial-exec access marks the library
 * DF_STATIC_TLS, and a dlopen()ed library so marked needs its whole TLS
 * block (gz_alloc.c's 4 KiB meter and mhdgz_strerror's detail too) in the
 * few hundred bytes of static TLS glibc keeps spare, which it does not fit:
 * dlopen() fails with "cannot allocate memory in static TLS block". */

void *gz_calloc(size_t count, size_t nbytes);
void gz_free(void *ptr);
char *gz_strndup(const char *s, size_t len);

/* zlib's zalloc/zfree signatures, forwarding to gz_malloc/gz_free. */
void *gz_zalloc(void *opaque, unsigned int items, unsigned int size);
void gz_zfree(void *opaque, void *ptr);

/* The (opaque, size) / (opaque, ptr) allocator pair of libzstd's
 * ZSTD_customMem and libbrotli's brotli_alloc_func/brotli_free_func,
 * forwarding to gz_malloc/gz_free (opaque unused). */
void *gz_opaque_malloc(void *opaque, size_t nbytes);
void gz_opaque_free(void *opaque, void *ptr);
/* Give free heap pages back to the kernel after a bulk release (the pool's
 * trim): glibc's malloc_trim(0) when the default allocator is in use and
 * malloc_trim exists, else nothing (an application allocator manages its
 * own memory). Thread-safe; costs a walk of the heap, so call it rarely. */
void gz_alloc_release_unused(void);

/* Number of blocks currently allocated through gz_malloc (process-wide):
 * exact while no other thread allocates or frees; while one does, the sum
 * of per-thread counts read at slightly different moments. */
int64_t gz_alloc_live(void);

/* A meter of the calling thread's allocations: from gz_alloc_meter_start
 * to gz_alloc_meter_stop, the bytes (as asked) of the blocks it allocated
 * through gz_malloc and has not freed, and stop returns their peak.
 * Blocks freed on other threads are not seen. */
void gz_alloc_meter_start(void);
uint64_t gz_alloc_meter_stop(void);

/*
 * Replace the underlying functions process-wide; malloc_fn and free_fn
 * both NULL restores malloc/free. The first non-NULL hook also routes the
 * process-wide allocator of any backend library that has no per-object one
 * (libdeflate older than 1.19) through gz_malloc/gz_free, for the rest of
 * the process. Returns GZ_OK,
 * GZ_EINVAL if exactly one function is NULL, GZ_EBUSY while a block made
 * through the current functions is live. Not thread-safe with any other
 * core call.
 */
int gz_alloc_set_hook(void *(*malloc_fn)(size_t nbytes, void *cls),
		      void (*free_fn)(void *ptr, void *cls), void *cls);

#endif /* GZ_ALLOC_H */
