/* hnd_dict.h: compression dictionaries (RFC 9842): registration, matching and dcz representations. */
#ifndef HND_DICT_H
#define HND_DICT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nettle/sha2.h>

#include "hnd_plan.h"

struct mhdgz;
struct hnd_entry;

struct gz_zdict;

/* A registered dictionary (the public handle type): immutable once
 * published on the handle's list. */
struct mhdgz_dictionary {
	struct mhdgz_dictionary *next;
	struct gz_zdict *zd; /* digested for the handle's zstd level, shared */
	uint8_t hash[SHA256_DIGEST_SIZE];
	size_t nbytes;
	char *match; /* the URL pattern: '/' first, '*' wildcards */
	char *id;    /* its sf-string form ("\"id\""), or NULL */
	char *field; /* the Use-As-Dictionary value */
};

/* Does url (NULL: no) match the pattern of a registered dictionary? Then
 * the response could be dcz, and its Vary names Available-Dictionary. */
bool hnd_dict_url_matches(struct mhdgz *gz, const char *url);
/* Free the handle's dictionaries (mhdgz_free, no other thread left). */
void hnd_dicts_free(struct mhdgz *gz);
/* Free an entry's dcz representations (entry free). */
void hnd_dcz_free(struct hnd_entry *e);
/* Whether the Vary a response gets must name something it does not yet
 * (Accept-Encoding, and Available-Dictionary when f->dict_vary), and the
 * tokens to add (NULL: nothing). */
const char *hnd_vary_token(const struct hnd_facts *f);
/*
 * The dictionary a dcz response to this request would be coded against
 * (part of the plan, hnd_plan), if every RFC 9842 condition the request
 * and the fields show holds: dcz accepted in acc (explicitly, q not below
 * the ordinary choice's, not below an explicit identity), an
 * Available-Dictionary naming a registered dictionary whose pattern
 * matches rq->url (and whose id matches a Dictionary-ID sent), a whole
 * body of at least min_nbytes. d is the ordinary decision (MHDGZ_COMPRESSED
 * or MHDGZ_SKIP_NOT_ACCEPTED; or a 304's MHDGZ_SKIP_STATUS). NULL: none.
 */
const struct mhdgz_dictionary *hnd_dcz_plan(const struct mhdgz *gz, const struct hnd_request *rq,
					    const struct hnd_accept *acc,
					    const struct hnd_decision *d, const struct hnd_facts *f,
					    bool whole, uint64_t body_len);
/*
 * The dcz representation of e against dict, cached per dictionary (built
 * again with no_cache or for an uncached entry): true with *v_ret (the
 * entry's, not a reference for the caller) and its body length in
 * *len_ret; with is_304 *v_ret is the 304 of that dcz 200, its ETag and
 * length, a reference for the caller (*release_ret true). false when dcz
 * does not make the body smaller or on a failure: the plan without the
 * dictionary stands. Counts its compressions, cache hits, failures,
 * dictionary hits and bytes saved. e->lock held.
 */
bool hnd_dcz_build(struct mhdgz *gz, struct hnd_entry *e, const struct mhdgz_dictionary *dict,
		   bool is_304, bool no_cache, const struct hnd_facts *f,
		   struct MHD_Response **v_ret, uint64_t *len_ret, bool *release_ret);
/* Match a request path against a dictionary pattern (the subset of
 * URLPattern pathname syntax hnd_dict.c accepts: literal characters and
 * '*', any run of characters). Exposed for the tests. */
bool hnd_dict_match(const char *pattern, const char *path);
/* Parse an Available-Dictionary value (RFC 8941 byte sequence, ":b64:")
 * into a SHA-256; false when malformed or not 32 bytes. */
bool hnd_dict_parse_hash(const char *value, uint8_t hash[SHA256_DIGEST_SIZE]);

#endif /* HND_DICT_H */
