/* hnd_repr.h: representations: coded bodies, the responses built on them, identity files and 304s. */
#ifndef HND_REPR_H
#define HND_REPR_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nettle/base64.h>
#include <nettle/sha2.h>

#include "hnd_headers.h"
#include "hnd_plan.h"

struct mhdgz;
struct hnd_entry;

/*
 * A compressed body, shared by reference: the gzip variant and the 304
 * variant (which libmicrohttpd sends without it, but whose size gives the
 * 304 the 200's Content-Length) point at the same bytes.
 */
struct hnd_body {
	atomic_uint refs;
	size_t len; /* bytes at data */
	uint8_t data[];
};


/* A body holding a copy of data[0..len) (data NULL: len bytes for the caller
 * to fill), one reference; NULL without memory. */
struct hnd_body *hnd_body_new(const void *data, size_t len);
void hnd_body_unref(void *cls);
/* A buffer response of body b (one reference passes in; NULL for none) with
 * r's fields as rep says. 0 or MHDGZ_E*. */
int hnd_build_response(struct mhdgz *gz, struct MHD_Response *r, const struct hnd_facts *f,
		       struct hnd_body *b, enum hnd_rep rep, struct MHD_Response **ret);
/*
 * A response of header fields only, for HEAD or a 304: r's fields as rep
 * says, no content, the length of the 200 it stands for: size bytes (its
 * Content-Length), or MHD_SIZE_UNKNOWN for a body whose length is known
 * only once it is generated, then no length. With libmicrohttpd 1.0
 * (HAVE_MHD_HEAD_ONLY) a head-only response that keeps the connection
 * unless the application's flags make its own 200 close-delimited; with
 * 0.9.75, an unknown length also means Connection: close, because 0.9.75
 * writes a chunked body's last chunk even after HEAD or 304 headers and
 * sends a Content-Length with every other 304. NULL on failure.
 */
struct MHD_Response *hnd_fields_response(struct mhdgz *gz, struct MHD_Response *r,
					 const struct hnd_facts *f, uint64_t size,
					 enum hnd_rep rep);
/* The gzip representation of a whole-body entry, built or reused: returns
 * MHDGZ_COMPRESSED and *v_ret, or why not (NOT_SMALLER, ERROR). With
 * no_cache it is built afresh (and then kept); for an uncached entry it is
 * built for this queue alone and not kept: *fresh_ret is then true and the
 * caller owns the reference to *v_ret; else the entry keeps it. e->lock
 * held. */
enum mhdgz_reason hnd_gzip_representation(struct mhdgz *gz, struct hnd_entry *e,
					  const struct hnd_facts *f, bool no_cache,
					  struct MHD_Response **v_ret, bool *fresh_ret);
/* The coded length of a whole body in f->coding, known without compressing:
 * remembered under its strong ETag (hnd_memo.c), or, for an uncached
 * buffer response (an immutable body), from its last compression. true
 * and *len_ret (HND_MEMO_NOT_SMALLER: not smaller), or false. e->lock
 * held. */
bool hnd_coded_len_known(struct mhdgz *gz, const struct hnd_entry *e, const struct hnd_facts *f,
			 uint64_t *len_ret);
/* Files up to this many bytes are sent to an identity GET from memory
 * (read per queue) rather than with sendfile(): header and body then go in
 * one sendmsg, and no descriptor is duplicated (hnd_file_identity). Served
 * by gzserve on loopback, 2k and 20k gain 30 % and 10-20 % requests/s;
 * at 100k the two copies cost what the second segment saves (bench/README.md,
 * make bench-e2e), and the buffer is held while the response is sent. */
#ifndef HND_FD_INLINE_MAX
#define HND_FD_INLINE_MAX (64u * 1024u)
#endif
/* The identity response of a file entry; NULL on failure. A small file's
 * GET gets a response of its own (*fresh_ret true: drop the reference after
 * queueing); otherwise the cached sendfile response. e->lock held. */
struct MHD_Response *hnd_file_identity(struct mhdgz *gz, struct hnd_entry *e,
				       const struct hnd_facts *f, bool head, bool *fresh_ret);
/* The response to queue for a 304 (hnd_conditional.c); gzip_client: the
 * decision's gzip_304; d200: the plan's decision for the 200 it stands
 * for. NULL on failure. *fresh_ret true: made for this queue alone (an uncached
 * entry's), the caller releases it; else the entry keeps it. e->lock
 * held. */
struct hnd_decision;
struct MHD_Response *hnd_not_modified(struct mhdgz *gz, struct hnd_entry *e,
				      const struct hnd_facts *f, const struct hnd_decision *d200,
				      bool gzip_client, bool *fresh_ret);

/* hnd_variants.c: the RFC 9530 Content-Digest value "sha-256=:<base64>:"
 * of what ctx has hashed, NUL-terminated in field (ctx is reset). */
#define HND_CONTENT_DIGEST_MAX (sizeof "sha-256=::" + BASE64_ENCODE_RAW_LENGTH(SHA256_DIGEST_SIZE))
void hnd_content_digest_value(struct sha256_ctx *ctx, char field[HND_CONTENT_DIGEST_MAX]);

/* RFC 9110 section 13.2.2 for a request against the response's ETag (NULL:
 * none) and Last-Modified field (NULL: none): 0 to proceed, 304 (GET and
 * HEAD) or 412. Pinned by test_preconditions_412 and test_preconditions_304
 * (check_hnd_fidelity.c). */
unsigned int hnd_preconditions(struct MHD_Connection *connection, bool get_or_head,
			       const char *etag, const char *last_modified);

#endif /* HND_REPR_H */
