/* mhdgz_twins.h: force-included into libmicrohttpd's own test programs (tests/upstream.sh) to make the two-call change. */
/*
 * tests/upstream.sh compiles each program of libmicrohttpd's
 * src/testcurl with "-include" of this header and one or both of:
 *
 *  - UPSTREAM_MHDGZ: every MHD_create_response_* that has an mhdgz twin
 *    becomes that twin, and MHD_queue_response() becomes
 *    mhdgz_queue_response_ex(), all on one process-wide handler made
 *    with default options (what an application converting gets);
 *  - UPSTREAM_CURL_GZIP: every libcurl easy handle asks for gzip
 *    (CURLOPT_ACCEPT_ENCODING "gzip", so libcurl also decodes it) before
 *    it is performed or added to a multi handle.
 *
 * Constructors without a twin stay libmicrohttpd's own: their responses
 * are queued unchanged by mhdgz (counted untracked). They are
 * MHD_create_response_from_data (deprecated), MHD_create_response_empty,
 * MHD_create_response_from_buffer_static, MHD_create_response_from_buffer_copy
 * and MHD_create_response_for_upgrade. With UPSTREAM_EQUIVALENTS as well,
 * the two buffer constructors of libmicrohttpd 1.0 become
 * mhdgz_response_from_buffer() with the memory mode libmicrohttpd
 * documents as their equivalent (PERSISTENT, MUST_COPY).
 *
 * The header is included before the program's first line, so it first
 * includes the program's configuration header (feature macros such as
 * _GNU_SOURCE must precede the first system header), then the real
 * declarations, and only then defines the function-like macros: a
 * declaration read after them would be rewritten too.
 */
#ifndef UPSTREAM_MHDGZ_TWINS_H
#define UPSTREAM_MHDGZ_TWINS_H

#if defined(__has_include)
#if __has_include("MHD_config.h")
#include "MHD_config.h"
#endif
#endif

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>

#ifdef UPSTREAM_MHDGZ
#include <microhttpd.h>
#include "mhdgz.h"

/*
 * The handler of the whole process: one per program, as an application
 * has one, made on first use (thread-safe) and never freed (a response
 * may outlive the daemon). Weak, so that a program of several files
 * shares one. UPSTREAM_GZ_MIN_NBYTES in the environment sets min_nbytes
 * (e.g. 1 to compress the tests' short bodies too); unset, every option
 * is the library's default.
 */
__attribute__((weak)) struct mhdgz *upstream_gz_handle;
__attribute__((weak)) pthread_once_t upstream_gz_once = PTHREAD_ONCE_INIT;

__attribute__((weak)) void
upstream_gz_make(void)
{
	struct mhdgz_options opts = { .size = sizeof(opts) };
	const char *min = getenv("UPSTREAM_GZ_MIN_NBYTES");
	int err;

	if (min != NULL && *min != '\0')
		opts.min_nbytes = (size_t)strtoull(min, NULL, 10);
	err = mhdgz_new(&opts, &upstream_gz_handle);
	if (err != 0) {
		fprintf(stderr, "mhdgz_twins.h: mhdgz_new: %s\n", mhdgz_strerror(err));
		abort();
	}
}

static inline struct mhdgz *
upstream_gz(void)
{
	pthread_once(&upstream_gz_once, upstream_gz_make);
	return upstream_gz_handle;
}

/*
 * The method for mhdgz_queue_response_ex(): an application passes the
 * method its access handler was given, and so does the macro, by naming
 * "method", the name libmicrohttpd's tests give that parameter. Outside
 * such a function the file-scope NULL below is found instead (mhdgz then
 * treats the request as a GET, as mhdgz_queue_response() does), and a
 * "method" of another type selects NULL too.
 */
static const char *const method __attribute__((unused)) = NULL;
#define UPSTREAM_METHOD                                                                            \
	_Generic((method), const char * : (method), char * : (method), default : (const char *)NULL)

#define MHD_create_response_from_buffer(s, b, m) mhdgz_response_from_buffer(upstream_gz(), s, b, m)
#define MHD_create_response_from_buffer_with_free_callback(s, b, f)                                \
	mhdgz_response_from_buffer_with_free_callback(upstream_gz(), s, b, f)
#define MHD_create_response_from_buffer_with_free_callback_cls(s, b, f, c)                         \
	mhdgz_response_from_buffer_with_free_callback_cls(upstream_gz(), s, b, f, c)
#define MHD_create_response_from_iovec(v, n, f, c)                                                 \
	mhdgz_response_from_iovec(upstream_gz(), v, n, f, c)
#define MHD_create_response_from_callback(s, bs, crc, cls, crfc)                                   \
	mhdgz_response_from_callback(upstream_gz(), s, bs, crc, cls, crfc)
#define MHD_create_response_from_pipe(fd) mhdgz_response_from_pipe(upstream_gz(), fd)
#define MHD_create_response_from_fd(s, fd) mhdgz_response_from_fd(upstream_gz(), s, fd)
#define MHD_create_response_from_fd64(s, fd) mhdgz_response_from_fd64(upstream_gz(), s, fd)
#define MHD_create_response_from_fd_at_offset64(s, fd, o)                                          \
	mhdgz_response_from_fd_at_offset64(upstream_gz(), s, fd, o)
/* microhttpd.h itself usually makes MHD_create_response_from_fd_at_offset
 * a macro calling the _offset64 function, which then expands above;
 * otherwise the same widening here. */
#ifndef MHD_create_response_from_fd_at_offset
#define MHD_create_response_from_fd_at_offset(s, fd, o)                                            \
	mhdgz_response_from_fd_at_offset64(upstream_gz(), s, fd, (uint64_t)(o))
#endif
#ifdef UPSTREAM_EQUIVALENTS
#define MHD_create_response_from_buffer_static(s, b)                                               \
	mhdgz_response_from_buffer(upstream_gz(), s, (void *)(b), MHD_RESPMEM_PERSISTENT)
#define MHD_create_response_from_buffer_copy(s, b)                                                 \
	mhdgz_response_from_buffer(upstream_gz(), s, (void *)(b), MHD_RESPMEM_MUST_COPY)
#endif
#define MHD_queue_response(c, s, r)                                                                \
	mhdgz_queue_response_ex(upstream_gz(), c,                                                  \
				&(struct mhdgz_request){ .size = sizeof(struct mhdgz_request),     \
							 .method = UPSTREAM_METHOD },              \
				s, r, NULL)
#endif /* UPSTREAM_MHDGZ */

#ifdef UPSTREAM_CURL_GZIP
#include <curl/curl.h>

/* Ask for gzip on every transfer: set just before the handle runs, so
 * that a test's own curl_easy_reset() or setopt calls come first. */
static inline CURLcode
upstream_curl_easy_perform(CURL *h)
{
	curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "gzip");
	return curl_easy_perform(h);
}

static inline CURLMcode
upstream_curl_multi_add_handle(CURLM *m, CURL *h)
{
	curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "gzip");
	return curl_multi_add_handle(m, h);
}

#define curl_easy_perform(h) upstream_curl_easy_perform(h)
#define curl_multi_add_handle(m, h) upstream_curl_multi_add_handle(m, h)
#endif /* UPSTREAM_CURL_GZIP */

#endif /* UPSTREAM_MHDGZ_TWINS_H */
