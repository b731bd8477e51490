/* check_core.h: the Check suites linked into the core test binary (tests/check_core). */
#ifndef CHECK_CORE_H
#define CHECK_CORE_H

#include <check.h>

Suite *backend_suite(void); /* tests/check_backend.c: one-shot round trips, levels, ENOSPC */
Suite *stream_suite(void);  /* tests/check_stream.c: streaming, sync flushes, tiny windows */
Suite *alloc_suite(void);   /* tests/check_alloc.c: allocator hook, fault injection */
Suite *pool_suite(void);    /* tests/check_pool.c: the compressor pool */

#endif /* CHECK_CORE_H */
