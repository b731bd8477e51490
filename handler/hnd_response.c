/* hnd_response.c: the response constructors and setters of the public API. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gz_alloc.h"
#include "hnd_plan.h"
#include "hnd_entry.h"
#include "hnd_handle.h"
#include "hnd_stream.h"

/* Read block in bytes of a file response's own reader (libmicrohttpd
 * allocates and zeroes it with every response: a file server makes one per
 * request). Only the fallback reads through it (hnd_select queues a
 * sendfile or coded response in its place), so a small block costs a few
 * more reads there and saves zeroing HND_FD_BLOCK bytes per request. */
#ifndef HND_FD_SELF_BLOCK
#define HND_FD_SELF_BLOCK 4096
#endif

MHDGZ_API struct MHD_Response *
mhdgz_response_from_buffer(struct mhdgz *gz, size_t size, void *buffer,
			   enum MHD_ResponseMemoryMode mode)
{
	struct hnd_entry *e = NULL;
	struct MHD_Response *r;

	if (!gz || (size > 0 && !buffer))
		goto fail;
	if (mode != MHD_RESPMEM_PERSISTENT && mode != MHD_RESPMEM_MUST_COPY &&
	    mode != MHD_RESPMEM_MUST_FREE)
		goto fail;
	e = hnd_entry_new(gz, HND_BUFFER);
	if (!e)
		goto fail;
	e->body_len = size;
	if (mode == MHD_RESPMEM_MUST_COPY && size > 0) {
		e->owned_gz = gz_malloc(size);
		if (!e->owned_gz)
			goto fail;
		memcpy(e->owned_gz, buffer, size);
		e->body = e->owned_gz;
	} else {
		e->body = buffer;
	}
	/* The response reads the body from the entry's copy (or the caller's
	 * persistent buffer); the free callback releases both together. */
	r = MHD_create_response_from_buffer_with_free_callback_cls(size, (void *)e->body,
								   hnd_entry_release, e);
	if (!r)
		goto fail;
	/* Ownership of a MUST_FREE buffer passes only with success, exactly
	 * as with libmicrohttpd: on failure the caller still owns it. */
	if (mode == MHD_RESPMEM_MUST_FREE)
		e->owned_libc = buffer;
	e->response = r;
	hnd_table_insert(&gz->table, e);
	return r;
fail:
	if (e)
		hnd_entry_free(e);
	return NULL;
}

/* A buffer response over body (the caller's until the response is made:
 * then crfc(crfc_cls) runs when the response is freed). NULL on failure,
 * without calling crfc. */
static struct MHD_Response *
buffer_with_free(struct mhdgz *gz, size_t size, const void *body, void *owned_gz,
		 MHD_ContentReaderFreeCallback crfc, void *crfc_cls)
{
	struct hnd_entry *e;
	struct MHD_Response *r;

	if (!gz || (size > 0 && !body))
		return NULL;
	e = hnd_entry_new(gz, HND_BUFFER);
	if (!e)
		return NULL;
	e->body_len = size;
	e->body = body;
	r = MHD_create_response_from_buffer_with_free_callback_cls(size, (void *)body,
								   hnd_entry_release, e);
	if (!r) {
		hnd_entry_free(e);
		return NULL;
	}
	e->owned_gz = owned_gz;
	e->body_free = crfc;
	e->body_free_cls = crfc_cls;
	e->response = r;
	hnd_table_insert(&gz->table, e);
	return r;
}

#if MHD_VERSION >= 0x01000000
/* mhdgz_response_empty's head-only responses are told apart by the
 * decision under HAVE_MHD_HEAD_ONLY (configure: microhttpd.h declares
 * MHD_create_response_empty and MHD_RF_HEAD_ONLY_RESPONSE), so the twins
 * exist only where it is defined. */
#ifndef HAVE_MHD_HEAD_ONLY
#error "microhttpd.h says libmicrohttpd 1.0 but configure found no head-only responses"
#endif

MHDGZ_API struct MHD_Response *
mhdgz_response_from_buffer_static(struct mhdgz *gz, size_t size, const void *buffer)
{
	/* Borrowed like a MHD_RESPMEM_PERSISTENT body: neither libmicrohttpd
	 * (a buffer response over it) nor the entry copies or frees it. */
	return buffer_with_free(gz, size, buffer, NULL, NULL, NULL);
}

MHDGZ_API struct MHD_Response *
mhdgz_response_from_buffer_copy(struct mhdgz *gz, size_t size, const void *buffer)
{
	struct MHD_Response *r;
	uint8_t *copy = NULL;

	if (!gz || (size > 0 && !buffer))
		return NULL;
	if (size > 0) {
		copy = gz_malloc(size);
		if (!copy)
			return NULL;
		memcpy(copy, buffer, size);
	}
	/* The entry owns the copy (owned_gz), freed with it. */
	r = buffer_with_free(gz, size, copy, copy, NULL, NULL);
	if (!r)
		gz_free(copy);
	return r;
}

MHDGZ_API struct MHD_Response *
mhdgz_response_empty(struct mhdgz *gz, enum MHD_ResponseFlags flags)
{
	struct MHD_Response *r;

	/* libmicrohttpd documents MHD_create_response_empty(flags) as a
	 * zero-size buffer response plus MHD_set_response_options(flags): made
	 * that way here so that the entry's free callback rides on it, and the
	 * flags go through mhdgz_response_set_options, recorded in the entry
	 * as for any response (test_empty_flags_recorded). */
	r = buffer_with_free(gz, 0, NULL, NULL, NULL, NULL);
	if (r && flags != MHD_RF_NONE && mhdgz_response_set_options(gz, r, flags) != 0) {
		MHD_destroy_response(r); /* the entry leaves with it */
		return NULL;
	}
	return r;
}
#endif /* MHD_VERSION >= 0x01000000 */

MHDGZ_API struct MHD_Response *
mhdgz_response_from_buffer_with_free_callback(struct mhdgz *gz, size_t size, void *buffer,
					      MHD_ContentReaderFreeCallback crfc)
{
	return buffer_with_free(gz, size, buffer, NULL, crfc, buffer);
}

MHDGZ_API struct MHD_Response *
mhdgz_response_from_buffer_with_free_callback_cls(struct mhdgz *gz, size_t size, void *buffer,
						  MHD_ContentReaderFreeCallback crfc,
						  void *crfc_cls)
{
	return buffer_with_free(gz, size, buffer, NULL, crfc, crfc_cls);
}

MHDGZ_API struct MHD_Response *
mhdgz_response_from_iovec(struct mhdgz *gz, const struct MHD_IoVec *iov, unsigned int iovcnt,
			  MHD_ContentReaderFreeCallback free_cb, void *cls)
{
	struct MHD_Response *r;
	size_t total = 0, off = 0;
	unsigned int i;
	uint8_t *copy;

	if (!gz || (iovcnt > 0 && !iov) || iovcnt > INT_MAX)
		return NULL;
	for (i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len > 0 && !iov[i].iov_base)
			return NULL;
		if (iov[i].iov_len > SIZE_MAX - total)
			return NULL;
		total += iov[i].iov_len;
	}
	/* Gathered into one buffer: the whole-body path compresses and sniffs
	 * contiguous bytes. The application's elements are not read again;
	 * free_cb still runs when the response is freed, as libmicrohttpd
	 * would run it. */
	copy = gz_malloc(total ? total : 1);
	if (!copy)
		return NULL;
	for (i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len)
			memcpy(copy + off, iov[i].iov_base, iov[i].iov_len);
		off += iov[i].iov_len;
	}
	r = buffer_with_free(gz, total, copy, copy, free_cb, cls);
	if (!r)
		gz_free(copy);
	return r;
}

MHDGZ_API struct MHD_Response *
mhdgz_response_from_pipe(struct mhdgz *gz, int fd)
{
	struct hnd_entry *e;
	struct MHD_Response *r;

	if (!gz || fd < 0)
		return NULL;
	e = hnd_entry_new(gz, HND_PIPE);
	if (!e)
		return NULL;
	e->body_len = MHD_SIZE_UNKNOWN;
	e->block_size = HND_FD_BLOCK;
	e->fd = fd;
	r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, HND_FD_BLOCK, hnd_entry_read, e,
					      hnd_entry_release);
	if (!r) {
		e->fd = -1; /* still the caller's, as with libmicrohttpd */
		hnd_entry_free(e);
		return NULL;
	}
	e->response = r;
	hnd_table_insert(&gz->table, e);
	return r;
}

MHDGZ_API struct MHD_Response *
mhdgz_response_from_callback(struct mhdgz *gz, uint64_t size, size_t block_size,
			     MHD_ContentReaderCallback crc, void *crc_cls,
			     MHD_ContentReaderFreeCallback crfc)
{
	struct hnd_entry *e;
	struct MHD_Response *r;

	if (!gz || !crc || block_size == 0)
		return NULL;
	e = hnd_entry_new(gz, HND_CALLBACK);
	if (!e)
		return NULL;
	e->body_len = size;
	e->crc = crc;
	e->crc_cls = crc_cls;
	e->block_size = block_size;
	/* Our reader forwards to the user's, so the free callback gets the
	 * entry; the user's crfc runs when the entry's last reference goes. */
	r = MHD_create_response_from_callback(size, block_size, hnd_entry_read, e,
					      hnd_entry_release);
	if (!r) {
		hnd_entry_free(e); /* crfc not set yet: not called, as documented */
		return NULL;
	}
	e->crfc = crfc;
	e->response = r;
	hnd_table_insert(&gz->table, e);
	return r;
}

MHDGZ_API struct MHD_Response *
mhdgz_response_from_fd_at_offset64(struct mhdgz *gz, uint64_t size, int fd, uint64_t offset)
{
	struct hnd_entry *e = NULL;
	struct MHD_Response *r;

	if (!gz || fd < 0 || size == MHD_SIZE_UNKNOWN || offset > (uint64_t)INT64_MAX ||
	    size > (uint64_t)INT64_MAX - offset)
		goto fail;
	e = hnd_entry_new(gz, HND_FD);
	if (!e)
		goto fail;
	e->body_len = size;
	e->fd = fd;
	e->offset = offset;
	/* The tracked response reads the file itself (pread) so its lifetime is
	 * visible to us; identity queues use a buffer response of the file read
	 * at queue time (small files) or an fd response of libmicrohttpd's
	 * (sendfile) on a duplicate of fd (hnd_file_identity), and coded
	 * queues responses of their own: it is read itself only when the
	 * duplicate cannot be had. libmicrohttpd callocs its block with it,
	 * per response, so it is small. */
	r = MHD_create_response_from_callback(size, HND_FD_SELF_BLOCK, hnd_entry_read, e,
					      hnd_entry_release);
	if (!r)
		goto fail;
	e->response = r;
	hnd_table_insert(&gz->table, e);
	return r;
fail:
	/* As with libmicrohttpd, the descriptor passes to the response only
	 * with success: on failure the caller still owns it. */
	if (e) {
		e->fd = -1;
		hnd_entry_free(e);
	}
	return NULL;
}

MHDGZ_API struct MHD_Response *
mhdgz_response_from_fd(struct mhdgz *gz, size_t size, int fd)
{
	return mhdgz_response_from_fd_at_offset64(gz, size, fd, 0);
}

MHDGZ_API struct MHD_Response *
mhdgz_response_from_fd64(struct mhdgz *gz, uint64_t size, int fd)
{
	return mhdgz_response_from_fd_at_offset64(gz, size, fd, 0);
}

MHDGZ_API int
mhdgz_response_set_flags(struct mhdgz *gz, struct MHD_Response *response, unsigned int flags)
{
	const unsigned int both = MHDGZ_RESPONSE_LENGTH_HIDING | MHDGZ_RESPONSE_NO_LENGTH_HIDING;
	struct hnd_entry *e;
	bool opt_out, low_latency;
	int8_t length_hiding;

	if ((flags & ~(MHDGZ_RESPONSE_IDENTITY | both | MHDGZ_RESPONSE_LOW_LATENCY)) ||
	    (flags & both) == both)
		return MHDGZ_EINVAL;
	e = hnd_entry_locked(gz, response);
	if (!e)
		return MHDGZ_EINVAL;
	if ((flags & MHDGZ_RESPONSE_LOW_LATENCY) && e->kind == HND_BUFFER) {
		pthread_mutex_unlock(&e->lock);
		return MHDGZ_EINVAL;
	}
	opt_out = (flags & MHDGZ_RESPONSE_IDENTITY) != 0;
	length_hiding = (flags & MHDGZ_RESPONSE_LENGTH_HIDING)      ? 1
			: (flags & MHDGZ_RESPONSE_NO_LENGTH_HIDING) ? -1
								    : 0;
	low_latency = (flags & MHDGZ_RESPONSE_LOW_LATENCY) != 0;
	/* Queued, its variants and streams follow the flags it has: those
	 * same flags again are a no-op (a response reused for many requests,
	 * set up the same way each time), other ones are refused. */
	if (e->queued) {
		bool same = e->opt_out == opt_out && e->length_hiding == length_hiding &&
			    e->low_latency == low_latency;

		pthread_mutex_unlock(&e->lock);
		return same ? 0 : MHDGZ_EBUSY;
	}
	e->opt_out = opt_out;
	e->length_hiding = length_hiding;
	e->low_latency = low_latency;
	pthread_mutex_unlock(&e->lock);
	return 0;
}

MHDGZ_API int
mhdgz_response_set_options(struct mhdgz *gz, struct MHD_Response *response,
			   enum MHD_ResponseFlags flags)
{
	struct hnd_entry *e = hnd_entry_locked(gz, response);
	int rc = 0;

	if (!e)
		return MHDGZ_EINVAL;
	if (MHD_set_response_options(response, flags, MHD_RO_END) == MHD_YES)
		e->mhd_flags = flags;
	else
		rc = MHDGZ_EMHD;
	pthread_mutex_unlock(&e->lock);
	return rc;
}
