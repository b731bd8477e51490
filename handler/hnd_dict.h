/* hnd_dict.h: compression dictionaries (RFC 9842): registration, matching and dcz representations. */
#ifndef HND_DICT_H
#define HND_DICT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nettle/sha2.h>


struct mhdgz;
struct hnd_entry;
struct hnd_facts;

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

/* Free the handle's dictionaries (mhdgz_free, no other thread left). */
void hnd_dicts_free(struct mhdgz *gz);
/* Whether the Vary a response gets must name something it does not yet
 * (Accept-Encoding, and Available-Dictionary when f->dict_vary), and the
 * tokens to add (NULL: nothing). */
const char *hnd_vary_token(const struct hnd_facts *f);
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

#endif /* HND_DICT_H */
