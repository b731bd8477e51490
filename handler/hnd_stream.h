/* hnd_stream.h: coded streams, compressed as they are sent, and the reads of their source. */
#ifndef HND_STREAM_H
#define HND_STREAM_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "gz_backend.h"
#include "hnd_plan.h"

struct mhdgz;
struct hnd_entry;

/* Input buffer of a file stream in bytes: large enough that pread() and the
 * compressor's per-call overhead vanish, small enough to keep a thousand
 * concurrent streams under 32 MiB of input buffers. */
#ifndef HND_FD_BLOCK
#define HND_FD_BLOCK (32 * 1024)
#endif

/* HEAD of a gzip stream of known source size: up to this many source bytes
 * are compressed to learn the Content-Length GET would send; above it the
 * HEAD response has no length (and, with libmicrohttpd 0.9.75, closes the
 * connection), so a HEAD never costs more than this much compression. */
#ifndef HND_HEAD_LENGTH_MAX
#define HND_HEAD_LENGTH_MAX (16 * 1024 * 1024)
#endif

/* hnd_stream.c: the first bytes of a padded stream, read by its reader
 * to key the padding (hnd_pad.c) and sent first. */
struct hnd_prefix {
	uint8_t *buf;
	size_t len;  /* bytes at buf */
	bool eof;    /* the source ended after them */
	bool failed; /* the source reported an error after them */
};
void hnd_prefix_fini(struct hnd_prefix *px);
/* hnd_stream.c: a per-connection stream of a streaming entry in f->coding,
 * as a response of unknown size with the fields of r (the entry's response,
 * facts f) rewritten for the coding. A file's stream remembers its coded
 * length under f->etag (may be NULL) when complete. With digest, a
 * complete stream ends with a Content-Digest trailer of its coded bytes
 * (announced by a Trailer field; sent by libmicrohttpd when the response
 * is chunked). Takes a reference on e. The stream holds charge
 * (hnd_coder_charge) and gives it back with its compressor, or at once on
 * failure. NULL on failure. */
struct MHD_Response *hnd_gzip_stream_new(struct mhdgz *gz, struct hnd_entry *e,
					 struct MHD_Response *r, const struct hnd_facts *f,
					 bool low_latency, bool digest, uint64_t charge);
/* The coded stream in e's own response r (an application's reader of
 * unknown size, never queued yet): its fields rewritten (hnd_rewrite_coded,
 * the originals kept in e->fields) and its reader, hnd_entry_read, now
 * reading the stream (e->in_place), which hnd_entry_release frees with r.
 * charge as hnd_gzip_stream_new's. 0, or a negative error with r as it
 * was. e->lock held. */
int hnd_stream_in_place(struct mhdgz *gz, struct hnd_entry *e, struct MHD_Response *r,
			const struct hnd_facts *f, bool low_latency, bool digest, uint64_t charge);
/* Charge a new stream of coding (low_latency: its event pool) to the
 * budget (struct mhdgz coder_budget): 0 and *charge_ret, the bytes charged
 * (give them back with hnd_coder_uncharge); 1 when they would take the
 * live total past the budget (nothing charged: the stream goes out
 * identity); a negative error when the charge cannot be measured.
 * Thread-safe. */
int hnd_coder_charge(struct mhdgz *gz, enum gz_coding coding, bool low_latency,
		     uint64_t *charge_ret);
void hnd_coder_uncharge(struct mhdgz *gz, uint64_t charge);
/* The identity stream of e's reader in a response of its own, with e's
 * identity fields: for a queue after e's response carries a coded stream
 * in place. NULL on failure. e->lock held. */
struct MHD_Response *hnd_identity_stream(struct mhdgz *gz, struct hnd_entry *e,
					 const struct hnd_facts *f);

/* hnd_stream_len.c: the length in bytes of the gzip stream of a file entry
 * (for HEAD and 304), remembered under its strong etag (may be NULL) or
 * found by compressing the file (counted as a compression). 0, or MHDGZ_E*
 * when it cannot be known: not a file, over HND_HEAD_LENGTH_MAX, a
 * failure. e->lock held. */
int hnd_gzip_stream_length(struct mhdgz *gz, struct hnd_entry *e, const char *etag,
			   bool low_latency, enum gz_coding coding, uint64_t *len_ret);
/* hnd_stream.c: the identity reader of a streaming entry's own response. */
ssize_t hnd_entry_read(void *cls, uint64_t pos, char *buf, size_t max);

#endif /* HND_STREAM_H */
