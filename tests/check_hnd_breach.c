/* check_hnd_breach.c: e2e tests of BREACH length hiding: the attack with and without padding, padded bodies of every kind decoded, keys, options and stats. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hnd_handle.h" /* mhdgz.h, and hnd_select(): first, as the library sees it */
#include "hnd_queue.h"

#include "check_suites.h"
#include "info.h"
#include "harness.h"
#include "testutil.h"

/* The attack: BR_TRIALS secrets, BR_GUESSES candidate tokens each (the
 * right one among them), one request per candidate. */
#define BR_TRIALS 200
#define BR_GUESSES 64
#define BR_TOKEN_LEN 16
/* The most trials (5 %) in which the right guess may be the unique
 * shortest response with padding on; at least as many trials (95 %) in
 * which it must be without (the test can fail: the attack works). */
#define BR_MAX_HITS (BR_TRIALS / 20)

static const char br_alphabet[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* A fixed key: the trials are reproducible. */
static const uint8_t br_key[32] = "mhdgz breach test key 0123456789";

/* xorshift64: the secrets and wrong guesses, reproducible. */
static uint64_t
br_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void
br_token(uint64_t *seed, char *tok)
{
	for (int i = 0; i < BR_TOKEN_LEN; i++)
		tok[i] = br_alphabet[br_rand(seed) % 64];
	tok[BR_TOKEN_LEN] = 0;
}

/* The secret of trial t. */
static void
br_secret(unsigned int t, char *tok)
{
	uint64_t seed = 0x9e3779b97f4a7c15ull ^ ((uint64_t)t + 1) * 0x100000001b3ull;

	br_token(&seed, tok);
}

/*
 * The victim's page: an account page with a secret token in a link and a
 * search box reflecting the attacker's query, both in one compressed body
 * (the BREACH setting). The reflected text is what the attacker's request
 * put in the URL; the page is about 2.5 KB. Returns its length.
 */
static size_t
br_page(char *buf, size_t cap, const char *secret, const char *guess)
{
	int n = snprintf(buf, cap,
			 "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
			 "<title>Your account</title>\n<link rel=\"stylesheet\" href=\"/s.css\">"
			 "</head>\n<body>\n<header><nav><a href=\"/\">Home</a> <a href=\"/orders\">"
			 "Orders</a> <a href=\"/help\">Help</a></nav></header>\n<main>\n"
			 "<h1>Account settings</h1>\n<p>Change your e-mail address, your "
			 "password and how we reach you. Changes take effect at once; we send a "
			 "confirmation to the old and the new address.</p>\n"
			 "<ul class=\"links\">\n<li><a href=\"/account/email?csrf_token=%s\">"
			 "Change e-mail</a></li>\n<li><a href=\"/account/password\">Change "
			 "password</a></li>\n<li><a href=\"/account/close\">Close the account"
			 "</a></li>\n</ul>\n<form action=\"/search\" method=\"get\">\n<label "
			 "for=\"q\">Search the help pages</label>\n<input id=\"q\" name=\"q\" "
			 "type=\"search\">\n</form>\n<p class=\"result\">No help page matches "
			 "<b>csrf_token=%s</b>. Try fewer words, or browse the topics below.</p>\n"
			 "<h2>Topics</h2>\n<ol>\n<li>Orders, delivery and returns: when your "
			 "parcel leaves, where it is, how to send it back.</li>\n<li>Payment: "
			 "cards, invoices, refunds and the currencies we accept.</li>\n<li>"
			 "Security: two-step sign-in, sessions on other devices, what to do "
			 "when you did not sign in yourself.</li>\n<li>Privacy: the data we "
			 "keep, for how long, and how to get a copy of it.</li>\n</ol>\n"
			 "<p>Still stuck? Write to us from the contact page; we answer within "
			 "one working day, in the language you write in.</p>\n</main>\n<footer>"
			 "<p>Example Shop, 1 Market Street. Prices include VAT. Terms of sale, "
			 "privacy notice and cookie settings are linked from every page.</p>"
			 "</footer>\n</body></html>\n",
			 secret, guess);

	ck_assert(n > 0 && (size_t)n < cap);
	return (size_t)n;
}

/* The site: GET /t<trial>/<guess> answers trial's page reflecting guess;
 * a fresh response per request, as an application builds it. */
static enum MHD_Result
br_route(struct th_server *s, struct MHD_Connection *c, const char *url, const char *method)
{
	char secret[BR_TOKEN_LEN + 1], page[4096];
	unsigned int t = 0;
	const char *guess;
	struct MHD_Response *r;
	enum MHD_Result ret;
	size_t len;

	ck_assert(sscanf(url, "/t%u/", &t) == 1);
	guess = strchr(url + 1, '/') + 1;
	br_secret(t, secret);
	len = br_page(page, sizeof page, secret, guess);
	r = mhdgz_response_from_buffer(s->gz, len, page, MHD_RESPMEM_MUST_COPY);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", "text/html; charset=utf-8");
	ret = mhdgz_queue_response_ex(s->gz, c, TU_REQ(method), MHD_HTTP_OK, r, NULL);
	MHD_destroy_response(r);
	return ret;
}

static struct mhdgz *
br_gz_new(unsigned int flags, size_t max, const void *key, size_t key_nbytes)
{
	struct mhdgz_options o = th_opts();
	struct mhdgz *gz = NULL;

	o.flags = flags;
	o.padding.max_nbytes = max;
	o.padding.key = key;
	o.padding.key_nbytes = key_nbytes;
	ck_assert_int_eq(mhdgz_new(&o, &gz), 0);
	return gz;
}

/* The padding of a gzip member: 0 for none (FLG 0), else the bytes of its
 * FCOMMENT field (spaces and the NUL); -1 if the header is neither. */
static long
br_padding(const uint8_t *b, size_t len)
{
	size_t i;

	if (len < 18 || b[0] != 0x1f || b[1] != 0x8b || b[2] != 8)
		return -1;
	if (b[3] == 0)
		return 0;
	if (b[3] != 0x10)
		return -1;
	for (i = 10; i < len && b[i] == ' '; i++)
		;
	return i < len && b[i] == 0 ? (long)(i - 10 + 1) : -1;
}

/*
 * The attack as a BREACH attacker runs it: _i 0 without padding, 1 with the
 * default padding (MHDGZ_DEFAULT_LENGTH_HIDING_MAX). For each of
 * BR_TRIALS secrets the attacker requests the page reflecting each of
 * BR_GUESSES candidate tokens (the right one and 63 random wrong ones)
 * and takes the shortest response as the secret. The statistic is the
 * number of trials in which the right token gives the unique shortest
 * body: that is the attacker's success rate with one request per guess,
 * which is all that repeating requests gives (the same page always has
 * the same length). Random guessing would succeed in 1/64 of trials;
 * without padding the attack succeeds in (nearly) all, and the test
 * checks that it does, so that it can fail; with padding it must succeed
 * in at most 5 %. Every padded body is decoded with zlib and compared
 * byte for byte with the page.
 */
START_TEST(test_attack)
{
	bool pad = _i == 1;
	struct mhdgz *gz = br_gz_new(pad ? MHDGZ_F_LENGTH_HIDING : 0, 0, br_key, sizeof br_key);
	struct th_server s = { 0 };
	CURL *h = th_curl_new();
	struct th_reply r = { 0 };
	unsigned int hits = 0, ties = 0, t;
	uint64_t rank_sum = 0, seed = 12345, pad_min = UINT64_MAX, pad_max = 0;
	int64_t gap_sum = 0; /* shortest wrong guess minus the right one, bytes */
	struct mhdgz_stats st;

	th_start(&s, gz, 0, br_route, NULL);
	for (t = 0; t < BR_TRIALS; t++) {
		char secret[BR_TOKEN_LEN + 1], guess[BR_TOKEN_LEN + 1], path[64], page[4096];
		size_t len[BR_GUESSES], right;
		unsigned int shorter = 0, equal = 0;

		br_secret(t, secret);
		right = (size_t)(br_rand(&seed) % BR_GUESSES);
		for (size_t g = 0; g < BR_GUESSES; g++) {
			uint8_t *dec = NULL;
			size_t dec_len = 0, plen;
			long padding;

			if (g == right)
				memcpy(guess, secret, sizeof guess);
			else
				br_token(&seed, guess);
			snprintf(path, sizeof path, "/t%u/%s", t, guess);
			TH_REQ(h, &s, TH_GZIP, path, NULL, &r);
			ck_assert_int_eq(r.status, 200);
			ck_assert_str_eq(th_header(&r, "Content-Encoding", NULL), "gzip");
			plen = br_page(page, sizeof page, secret, guess);
			ck_assert_int_eq(tu_gunzip(r.body, r.body_len, &dec, &dec_len), 0);
			ck_assert_uint_eq(dec_len, plen);
			ck_assert_int_eq(memcmp(dec, page, plen), 0);
			free(dec);
			padding = br_padding(r.body, r.body_len);
			if (pad) {
				ck_assert_int_ge(padding, 1);
				ck_assert_int_le(padding, MHDGZ_DEFAULT_LENGTH_HIDING_MAX);
				pad_min = (uint64_t)padding < pad_min ? (uint64_t)padding : pad_min;
				pad_max = (uint64_t)padding > pad_max ? (uint64_t)padding : pad_max;
			} else {
				ck_assert_int_eq(padding, 0);
			}
			len[g] = r.body_len;
			th_reply_free(&r);
		}
		size_t min_wrong = SIZE_MAX;

		for (size_t g = 0; g < BR_GUESSES; g++) {
			if (g != right && len[g] < min_wrong)
				min_wrong = len[g];
			shorter += g != right && len[g] < len[right];
			equal += g != right && len[g] == len[right];
		}
		hits += shorter == 0 && equal == 0;
		ties += shorter == 0 && equal > 0;
		rank_sum += shorter;
		gap_sum += (int64_t)min_wrong - (int64_t)len[right];
	}
	fprintf(stderr,
		"breach %s: right guess the unique shortest in %u of %u trials, tied shortest "
		"in %u, mean number of shorter wrong guesses %.1f of %u, mean lead over the "
		"shortest wrong guess %.1f bytes%s",
		pad ? "padded" : "unpadded", hits, BR_TRIALS, ties, (double)rank_sum / BR_TRIALS,
		BR_GUESSES - 1, (double)gap_sum / BR_TRIALS, pad ? "" : "\n");
	if (pad)
		fprintf(stderr, ", padding seen %" PRIu64 "..%" PRIu64 " bytes\n", pad_min,
			pad_max);
	if (pad) {
		ck_assert_uint_le(hits, BR_MAX_HITS);
		/* The padding spans its range, so it is not a constant offset. */
		ck_assert_uint_le(pad_min, 16);
		ck_assert_uint_ge(pad_max, MHDGZ_DEFAULT_LENGTH_HIDING_MAX - 16);
	} else {
		ck_assert_uint_ge(hits, BR_TRIALS - BR_MAX_HITS);
	}
	st = th_stats(gz);
	ck_assert_uint_eq(st.compressed, BR_TRIALS * BR_GUESSES);
	ck_assert_uint_eq(st.padded, pad ? BR_TRIALS * BR_GUESSES : 0);
	ck_assert_uint_eq(st.failures, 0);
	th_stop(&s);
	curl_easy_cleanup(h);
	mhdgz_free(gz);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Every kind of body, padded                                             */

enum br_kind { BR_BUFFER, BR_FILE, BR_BIG_FILE, BR_CALLBACK, BR_UNKNOWN, BR_PIPE, BR_LOW_LATENCY };

struct br_fix {
	enum br_kind kind;
	const uint8_t *body;
	size_t len;
	int fd; /* BR_FILE, BR_BIG_FILE: the file, reopened per request */
	struct th_src src;
	int setting; /* 0: the handle's; 1 on; -1 off (MHDGZ_RESPONSE_LENGTH_HIDING, _NO_LENGTH_HIDING) */
};

/* A writer thread feeding a pipe response. */
struct br_pipe {
	int fd;
	const uint8_t *body;
	size_t len;
};

static void *
br_pipe_writer(void *cls)
{
	struct br_pipe *p = cls;
	size_t off = 0;

	while (off < p->len) {
		ssize_t n = write(p->fd, p->body + off, p->len - off > 4096 ? 4096 : p->len - off);

		if (n <= 0)
			break;
		off += (size_t)n;
	}
	close(p->fd);
	free(p);
	return NULL;
}

static enum MHD_Result
br_kind_route(struct th_server *s, struct MHD_Connection *c, const char *url, const char *method)
{
	struct br_fix *f = s->cls;
	struct MHD_Response *r = NULL;
	enum MHD_Result ret;

	(void)url;
	switch (f->kind) {
	case BR_BUFFER:
		r = mhdgz_response_from_buffer(s->gz, f->len, (void *)f->body,
					       MHD_RESPMEM_PERSISTENT);
		break;
	case BR_FILE:
	case BR_BIG_FILE: {
		char path[64];
		int fd;

		snprintf(path, sizeof path, "/proc/self/fd/%d", f->fd);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		ck_assert_int_ge(fd, 0);
		r = mhdgz_response_from_fd(s->gz, f->len, fd);
		break;
	}
	case BR_CALLBACK:
	case BR_UNKNOWN:
	case BR_LOW_LATENCY:
		r = mhdgz_response_from_callback(s->gz,
						 f->kind == BR_CALLBACK ? f->len : MHD_SIZE_UNKNOWN,
						 4096, th_src_read, &f->src, NULL);
		break;
	case BR_PIPE: {
		int p[2];
		pthread_t th;
		struct br_pipe *w = malloc(sizeof *w);

		ck_assert(w && pipe(p) == 0);
		*w = (struct br_pipe){ .fd = p[1], .body = f->body, .len = f->len };
		ck_assert_int_eq(pthread_create(&th, NULL, br_pipe_writer, w), 0);
		pthread_detach(th);
		r = mhdgz_response_from_pipe(s->gz, p[0]);
		break;
	}
	}
	if (!r)
		return MHD_NO;
	if (f->setting || f->kind == BR_LOW_LATENCY)
		ck_assert_int_eq(mhdgz_response_set_flags(
					 s->gz, r,
					 (f->kind == BR_LOW_LATENCY ? MHDGZ_RESPONSE_LOW_LATENCY
								    : 0) |
						 (f->setting > 0   ? MHDGZ_RESPONSE_LENGTH_HIDING
						  : f->setting < 0 ? MHDGZ_RESPONSE_NO_LENGTH_HIDING
								   : 0)),
				 0);
	MHD_add_response_header(r, "Content-Type", "text/html");
	MHD_add_response_header(r, "ETag", "\"b1\"");
	ret = mhdgz_queue_response_ex(s->gz, c, TU_REQ(method), MHD_HTTP_OK, r, NULL);
	MHD_destroy_response(r);
	return ret;
}

/*
 * _i: enum br_kind. Padding on for the handle (max 300): two GETs give
 * the same bytes (the same body, the same padding; a paced stream, an
 * application's reader or a pipe, whose sync flushes fall where its
 * reads are late, the same padding), decoded by
 * zlib to the body, with a comment of 1..300 bytes; a HEAD states the GET's length
 * where it is known (whole bodies, files); a response set off is not
 * padded and one set on under a handle without the flag is. Stats count
 * every padded response.
 */
START_TEST(test_kinds)
{
	enum br_kind kind = (enum br_kind)_i;
	size_t len = kind == BR_BIG_FILE ? 1536 * 1024 : 90000;
	uint8_t *body = tu_payload(len, TU_TEXT, 77 + (uint32_t)_i);
	struct br_fix f = { .kind = kind, .body = body, .len = len, .fd = -1 };
	struct mhdgz *gz = br_gz_new(MHDGZ_F_LENGTH_HIDING, 300, NULL, 0);
	struct mhdgz *gz_off = br_gz_new(0, 300, NULL, 0);
	struct th_server s = { 0 };
	CURL *h = th_curl_new();
	struct th_reply r = { 0 };
	uint8_t *first = NULL, *dec = NULL;
	size_t first_len = 0, dec_len = 0;
	long padding;
	struct mhdgz_stats st;
	uint64_t want_padded = 0;
	char num[32];

	f.src = (struct th_src){ .data = body, .len = len, .chunk = 1000 };
	if (kind == BR_FILE || kind == BR_BIG_FILE) {
		f.len = kind == BR_FILE ? 60000 : len;
		f.fd = th_temp_file(body, f.len);
	}
	th_start(&s, gz, 0, br_kind_route, &f);
	for (int i = 0; i < 2; i++) {
		TH_REQ(h, &s, TH_GZIP, "/", NULL, &r);
		ck_assert_int_eq(r.status, 200);
		ck_assert_str_eq(th_header(&r, "Content-Encoding", NULL), "gzip");
		ck_assert_int_eq(tu_gunzip(r.body, r.body_len, &dec, &dec_len), 0);
		ck_assert_uint_eq(dec_len, f.len);
		ck_assert_int_eq(memcmp(dec, body, f.len), 0);
		free(dec);
		padding = br_padding(r.body, r.body_len);
		ck_assert_int_ge(padding, 1);
		ck_assert_int_le(padding, 300);
		want_padded++;
		if (i == 0) {
			first = r.body;
			first_len = r.body_len;
			r.body = NULL;
		} else if (kind == BR_CALLBACK || kind == BR_UNKNOWN || kind == BR_PIPE) {
			/* An application's reader or a pipe is paced
			 * (gz_stream.c): a reader call or a client read later
			 * than 20 ms (a writer thread that stalls, a loaded
			 * machine, a sanitizer) moves a sync flush, so its
			 * coded bytes may differ between two GETs; the
			 * padding, keyed on the same content, may not. */
			ck_assert_int_eq(padding, br_padding(first, first_len));
		} else {
			ck_assert_uint_eq(r.body_len, first_len);
			ck_assert_int_eq(memcmp(r.body, first, first_len), 0);
		}
		th_reply_free(&r);
		f.src.frees = 0;
	}
	if (kind == BR_BUFFER || kind == BR_FILE || kind == BR_BIG_FILE) {
		snprintf(num, sizeof num, "%zu", first_len);
		TH_REQ(h, &s, TH_GZIP | TH_HEAD, "/", NULL, &r);
		ck_assert_str_eq(th_header(&r, "Content-Length", NULL), num);
		th_reply_free(&r);
		want_padded++;
	}
	/* Off for this response: no padding, the handle's flag notwithstanding. */
	f.setting = -1;
	TH_REQ(h, &s, TH_GZIP, "/", NULL, &r);
	ck_assert_int_eq(br_padding(r.body, r.body_len), 0);
	ck_assert_int_eq(tu_verify_member(r.body, r.body_len, body, f.len), 0);
	ck_assert_uint_lt(r.body_len, first_len);
	th_reply_free(&r);
	st = th_stats(gz);
	ck_assert_uint_eq(st.padded, want_padded);
	ck_assert_uint_eq(st.failures, 0);
	th_stop(&s);

	/* On for this response under a handle without the flag; a new key
	 * (per handle) pads the same body independently. */
	f.setting = 1;
	th_start(&s, gz_off, 0, br_kind_route, &f);
	TH_REQ(h, &s, TH_GZIP, "/", NULL, &r);
	padding = br_padding(r.body, r.body_len);
	ck_assert_int_ge(padding, 1);
	ck_assert_int_le(padding, 300);
	ck_assert_int_eq(tu_gunzip(r.body, r.body_len, &dec, &dec_len), 0);
	ck_assert_int_eq(memcmp(dec, body, f.len), 0);
	free(dec);
	th_reply_free(&r);
	f.setting = 0;
	TH_REQ(h, &s, TH_GZIP, "/", NULL, &r);
	ck_assert_int_eq(br_padding(r.body, r.body_len), 0);
	th_reply_free(&r);
	st = th_stats(gz_off);
	ck_assert_uint_eq(st.padded, 1);
	th_stop(&s);
	curl_easy_cleanup(h);
	mhdgz_free(gz);
	mhdgz_free(gz_off);
	if (f.fd >= 0)
		close(f.fd);
	free(first);
	free(body);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Options and keys                                                       */

/* The gzip length of body under gz, through the selection a queue runs
 * (hnd_select, no daemon). */
static size_t
br_select_len(struct mhdgz *gz, const uint8_t *body, size_t len)
{
	static const char *const ae_gzip[] = { "gzip" };
	struct MHD_Response *r = mhdgz_response_from_buffer(gz, len, (void *)body,
							    MHD_RESPMEM_PERSISTENT);
	struct hnd_request rq = { .head = false };
	struct hnd_result res;
	struct MHD_Response *q = NULL;

	ck_assert_ptr_nonnull(r);
	MHD_add_response_header(r, "Content-Type", "text/html");
	hnd_accept_parse(ae_gzip, 1, &rq.acc);
	ck_assert_int_eq(hnd_select(gz, &rq, 200, r, &q, &res), 0);
	ck_assert_int_eq(res.reason, MHDGZ_COMPRESSED);
	MHD_destroy_response(r);
	return (size_t)res.coded_nbytes;
}

START_TEST(test_options)
{
	struct mhdgz_options o = th_opts();
	struct mhdgz *gz = NULL, *a, *b, *c;
	uint8_t key2[32];
	unsigned int same_ab = 0, same_ac = 0;

	o.flags = MHDGZ_F_LENGTH_HIDING;
	o.padding.max_nbytes = MHDGZ_LENGTH_HIDING_MAX_LIMIT + 1;
	ck_assert_int_eq(mhdgz_new(&o, &gz), MHDGZ_EINVAL);
	o.padding.max_nbytes = MHDGZ_LENGTH_HIDING_MAX_LIMIT;
	o.padding.key = br_key;
	o.padding.key_nbytes = MHDGZ_LENGTH_HIDING_KEY_MIN - 1;
	ck_assert_int_eq(mhdgz_new(&o, &gz), MHDGZ_EINVAL);
	o.padding.key_nbytes = MHDGZ_LENGTH_HIDING_KEY_MAX + 1;
	ck_assert_int_eq(mhdgz_new(&o, &gz), MHDGZ_EINVAL);
	ck_assert_ptr_null(gz);
	ck_assert_int_eq(mhdgz_response_set_flags(NULL, NULL,
						  (1) ? MHDGZ_RESPONSE_LENGTH_HIDING
						      : MHDGZ_RESPONSE_NO_LENGTH_HIDING),
			 MHDGZ_EINVAL);

	/* Two handles with one key (two processes) pad alike; another key
	 * pads independently. */
	memcpy(key2, br_key, sizeof key2);
	key2[0] ^= 1;
	a = br_gz_new(MHDGZ_F_LENGTH_HIDING, 0, br_key, sizeof br_key);
	b = br_gz_new(MHDGZ_F_LENGTH_HIDING, 0, br_key, sizeof br_key);
	c = br_gz_new(MHDGZ_F_LENGTH_HIDING, 0, key2, sizeof key2);
	for (uint32_t i = 0; i < 16; i++) {
		uint8_t *body = tu_payload(4000, TU_TEXT, 500 + i);
		size_t la = br_select_len(a, body, 4000);

		same_ab += la == br_select_len(b, body, 4000);
		same_ac += la == br_select_len(c, body, 4000);
		free(body);
	}
	ck_assert_uint_eq(same_ab, 16);
	ck_assert_uint_le(same_ac, 4);
	mhdgz_free(a);
	mhdgz_free(b);
	mhdgz_free(c);
}
END_TEST

/* One selection of a fresh 4,000-byte text response for Accept-Encoding
 * ae; length hiding per response when set is 1 or -1 (0: the handle's). */
static struct hnd_result
br_select_coding(struct mhdgz *gz, const char *ae, int set)
{
	const char *const lines[] = { ae };
	uint8_t *body = tu_payload(4000, TU_TEXT, 77);
	struct MHD_Response *r = mhdgz_response_from_buffer(gz, 4000, body, MHD_RESPMEM_MUST_COPY);
	struct hnd_request rq = { .head = false };
	struct hnd_result res;
	struct MHD_Response *q = NULL;
	int release;

	ck_assert_ptr_nonnull(r);
	MHD_add_response_header(r, "Content-Type", "text/html");
	if (set)
		ck_assert_int_eq(
			mhdgz_response_set_flags(gz, r,
						 (set > 0) ? MHDGZ_RESPONSE_LENGTH_HIDING
							   : MHDGZ_RESPONSE_NO_LENGTH_HIDING),
			0);
	hnd_accept_parse(lines, 1, &rq.acc);
	release = hnd_select(gz, &rq, 200, r, &q, &res);
	if (release)
		MHD_destroy_response(q);
	MHD_destroy_response(r);
	free(body);
	return res;
}

/* Length hiding pads gzip only, so a response that asks for it is never
 * sent zstd, br or dcz (unpadded): the other codings count as refused,
 * whatever the client's q-values and the handle's order. */
START_TEST(test_codings)
{
	struct mhdgz_options o = th_opts();
	struct mhdgz *gz = NULL;
	struct hnd_result res;
	struct mhdgz_stats st;

	if (!tu_coding_available(MHDGZ_CODING_ZSTD) || !tu_coding_available(MHDGZ_CODING_BR))
		return; /* built without them: nothing to refuse */
	o.codings = "zstd, br, gzip";
	o.flags = MHDGZ_F_LENGTH_HIDING;
	ck_assert_int_eq(mhdgz_new(&o, &gz), 0);
	res = br_select_coding(gz, "zstd, br, gzip", 0);
	ck_assert_int_eq(res.reason, MHDGZ_COMPRESSED);
	ck_assert_int_eq(res.coding, GZ_CODING_GZIP);
	res = br_select_coding(gz, "zstd, br;q=0.9, gzip;q=0.1", 0);
	ck_assert_int_eq(res.coding, GZ_CODING_GZIP);
	res = br_select_coding(gz, "zstd, br", 0);
	ck_assert_int_eq(res.reason, MHDGZ_SKIP_NOT_ACCEPTED);
	res = br_select_coding(gz, "*", 0);
	ck_assert_int_eq(res.coding, GZ_CODING_GZIP);
	/* Turned off for one response: the handle's order again. */
	res = br_select_coding(gz, "zstd, br, gzip", -1);
	ck_assert_int_eq(res.reason, MHDGZ_COMPRESSED);
	ck_assert_int_eq(res.coding, GZ_CODING_ZSTD);
	st = th_stats(gz);
	ck_assert_uint_eq(st.padded, 3);
	ck_assert_uint_eq(st.coded[MHDGZ_CODING_GZIP], 3);
	ck_assert_uint_eq(st.coded[MHDGZ_CODING_ZSTD], 1);
	mhdgz_free(gz);
	/* Off on the handle, on for one response. */
	o.flags = 0;
	ck_assert_int_eq(mhdgz_new(&o, &gz), 0);
	res = br_select_coding(gz, "br, zstd, gzip", 1);
	ck_assert_int_eq(res.coding, GZ_CODING_GZIP);
	res = br_select_coding(gz, "br, zstd, gzip", 0);
	ck_assert_int_eq(res.coding, GZ_CODING_ZSTD);
	ck_assert_uint_eq(th_stats(gz).padded, 1);
	mhdgz_free(gz);
}
END_TEST

struct ck_case
hnd_breach_case(void)
{
	return (struct ck_case){ "breach",
				 CK_CASE_TIMEOUT,
				 { { test_kinds, BR_BUFFER, BR_LOW_LATENCY + 1 },
				   { test_options, 0, 0 },
				   { test_codings, 0, 0 } } };
}

/* The attack itself, 2 x 200 trials x 64 requests: a case of its own so
 * that make valgrind can leave it out (the same paths as test_kinds, for
 * minutes under memcheck). */
struct ck_case
hnd_breach_attack_case(void)
{
	return (struct ck_case){ "breach-attack", CK_CASE_TIMEOUT, { { test_attack, 0, 2 } } };
}
