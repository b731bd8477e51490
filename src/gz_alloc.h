/* gz_alloc.h: the one internal allocator, routed into zlib, libdeflate and ISA-L state. */
#ifndef GZ_ALLOC_H
#define GZ_ALLOC_H

#include <stddef.h>
#include <stdint.h>

/*
 * Every allocation made by mhdgz (and, through zalloc and
 * libdeflate_set_memory_allocator, by the compression libraries on our behalf)
 * goes through gz_malloc/gz_free. The public hook (mhdgz_set_allocator)
 * replaces the underlying functions process-wide; tests use it to count
 * allocations and to make the k-th one fail.
 *
 * gz_malloc returns NULL on failure (or for a failure injected by the hook);
 * callers must check. gz_free(NULL) is a no-op.
 */
void *gz_malloc(size_t nbytes);
void *gz_calloc(size_t count, size_t nbytes);
void gz_free(void *ptr);
char *gz_strndup(const char *s, size_t len);

/* zlib's zalloc/zfree signatures, forwarding to gz_malloc/gz_free. */
void *gz_zalloc(void *opaque, unsigned int items, unsigned int size);
void gz_zfree(void *opaque, void *ptr);

/* Number of blocks currently allocated through gz_malloc (process-wide). */
int64_t gz_alloc_live(void);

/* Point libdeflate at gz_malloc/gz_free. Idempotent and thread-safe (run once). */
void gz_alloc_init(void);

#endif /* GZ_ALLOC_H */
