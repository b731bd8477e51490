/* check_e2e.c: end-to-end tests: a real libmicrohttpd daemon on 127.0.0.1 serving through mhdgz, libcurl as the client. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <curl/curl.h>

#include "mhdgz.h"
#include "check_handler.h"
#include "testutil.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* Most response header fields kept per transfer; more fail the check. */
#define EU_MAX_HDRS 48
/* Most body bytes accepted per transfer (a runaway body fails, not hangs). */
#define EU_MAX_BODY (64u * 1024 * 1024)
/* Per-transfer timeout in seconds (CURLOPT_TIMEOUT): a hung server fails. */
#define EU_TIMEOUT_S 60L
/* Request header space on the daemon, bytes: the 64 KiB Accept-Encoding
 * test needs more than libmicrohttpd's 32 KiB default. */
#define EU_CONN_MEMORY (512u * 1024)

/* ===================================================================== */
/*                    Server: routes served through mhdgz                */
/* ===================================================================== */

/* Route flags. */
#define RT_SHARED 0x1u    /* one response made at start, queued for every request */
#define RT_UNTRACKED 0x2u /* MHD_create_response_from_buffer, not mhdgz's */
#define RT_IDENTITY 0x4u  /* mhdgz_response_set_identity() before queueing */
#define RT_PRECOND 0x8u   /* mhdgz_evaluate_preconditions(etag) first: 304 queues
			   * this route's own response with status 304, 412 an
			   * empty response */

/* One URL the test server answers. Strings and body are borrowed. */
struct route {
	const char *path;
	unsigned int status;
	const void *body;
	size_t body_len;
	enum MHD_ResponseMemoryMode mode;
	const char *hdr[41]; /* name, value pairs, NULL-terminated */
	unsigned int flags;  /* RT_* */
	const char *etag;    /* RT_PRECOND: the resource's ETag as the app sets it */
	struct MHD_Response *shared; /* RT_SHARED: made by srv_start */
};

struct srv {
	struct MHD_Daemon *d;
	struct mhdgz *gz;
	uint16_t port;
	struct route *routes;
	size_t nroutes;
	_Atomic unsigned long create_failures; /* mhdgz_response_from_buffer gave NULL */
	_Atomic unsigned long errors;          /* unexpected results in the access handler */
};

static struct MHD_Response *
eu_make(struct srv *s, const struct route *rt)
{
	struct MHD_Response *r = NULL;
	size_t len = rt->body_len;
	uint8_t *tmp;

	if (rt->flags & RT_UNTRACKED) {
		r = MHD_create_response_from_buffer(len, (void *)(uintptr_t)rt->body,
						    MHD_RESPMEM_PERSISTENT);
	} else if (rt->mode == MHD_RESPMEM_PERSISTENT) {
		r = mhdgz_response_from_buffer(s->gz, len, (void *)(uintptr_t)rt->body,
					       MHD_RESPMEM_PERSISTENT);
	} else {
		tmp = malloc(len ? len : 1);
		if (!tmp)
			return NULL;
		if (len)
			memcpy(tmp, rt->body, len);
		r = mhdgz_response_from_buffer(s->gz, len, tmp, rt->mode);
		if (rt->mode == MHD_RESPMEM_MUST_COPY) {
			/* Scribble over our copy: the library must have its own. */
			memset(tmp, 0xA5, len);
			free(tmp);
		}
		/* MUST_FREE: the library owns tmp now, also on failure. */
	}
	if (!r)
		return NULL;
	for (int i = 0; rt->hdr[i]; i += 2)
		if (MHD_add_response_header(r, rt->hdr[i], rt->hdr[i + 1]) != MHD_YES)
			atomic_fetch_add(&s->errors, 1);
	if ((rt->flags & RT_IDENTITY) && mhdgz_response_set_identity(s->gz, r) != 0)
		atomic_fetch_add(&s->errors, 1);
	return r;
}

static enum MHD_Result
eu_plain(struct MHD_Connection *conn, unsigned int status)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
	enum MHD_Result ret;

	if (!r)
		return MHD_NO;
	ret = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result
eu_access(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
	  const char *version, const char *upload, size_t *upload_len, void **req_cls)
{
	static int marker;
	struct srv *s = cls;
	struct route *rt = NULL;
	struct MHD_Response *r;
	unsigned int status;
	enum MHD_Result ret;

	(void)version;
	(void)upload;
	/* First call: headers only. Answering on the second keeps the
	 * connection alive in libmicrohttpd 0.9.75. */
	if (*req_cls != &marker) {
		*req_cls = &marker;
		return MHD_YES;
	}
	if (*upload_len) {
		*upload_len = 0;
		return MHD_YES;
	}
	for (size_t i = 0; i < s->nroutes; i++)
		if (strcmp(s->routes[i].path, url) == 0)
			rt = &s->routes[i];
	if (!rt)
		return eu_plain(conn, 404);
	status = rt->status;
	if (rt->flags & RT_PRECOND) {
		unsigned int pc = mhdgz_evaluate_preconditions(conn, method, rt->etag);

		if (pc == 412) {
			r = mhdgz_response_from_buffer(s->gz, 0, NULL, MHD_RESPMEM_PERSISTENT);
			if (!r) {
				atomic_fetch_add(&s->create_failures, 1);
				return eu_plain(conn, 500);
			}
			ret = mhdgz_queue_response(s->gz, conn, 412, r);
			MHD_destroy_response(r);
			return ret;
		}
		if (pc == 304)
			status = 304;
		else if (pc != 0)
			atomic_fetch_add(&s->errors, 1);
	}
	r = (rt->flags & RT_SHARED) ? rt->shared : eu_make(s, rt);
	if (!r) {
		atomic_fetch_add(&s->create_failures, 1);
		return eu_plain(conn, 500);
	}
	ret = mhdgz_queue_response(s->gz, conn, status, r);
	if (ret != MHD_YES)
		atomic_fetch_add(&s->errors, 1);
	if (!(rt->flags & RT_SHARED))
		MHD_destroy_response(r);
	return ret;
}

static void
srv_stop(struct srv *s)
{
	if (s->d)
		MHD_stop_daemon(s->d);
	s->d = NULL;
	for (size_t i = 0; i < s->nroutes; i++) {
		if (s->routes[i].shared)
			MHD_destroy_response(s->routes[i].shared);
		s->routes[i].shared = NULL;
	}
	mhdgz_free(s->gz);
	s->gz = NULL;
}

/*
 * Start: mhdgz_new(opts), the shared responses, then a daemon on
 * 127.0.0.1 port 0 with MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG
 * | extra_flags. Fails the test on error.
 */
static void
srv_start(struct srv *s, const struct mhdgz_options *opts, struct route *routes, size_t nroutes,
	  unsigned int extra_flags)
{
	struct sockaddr_in sa;
	const union MHD_DaemonInfo *di;
	int rc;

	memset(s, 0, sizeof *s);
	s->routes = routes;
	s->nroutes = nroutes;
	rc = mhdgz_new(opts, &s->gz);
	ck_assert_msg(rc == 0, "mhdgz_new: %s", mhdgz_strerror(rc));
	for (size_t i = 0; i < nroutes; i++) {
		routes[i].shared = NULL;
		if (routes[i].flags & RT_SHARED) {
			routes[i].shared = eu_make(s, &routes[i]);
			ck_assert_msg(routes[i].shared != NULL, "shared response %s",
				      routes[i].path);
		}
	}
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_port = 0;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	s->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG | extra_flags,
				0, NULL, NULL, eu_access, s, MHD_OPTION_SOCK_ADDR, &sa,
				MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)EU_CONN_MEMORY,
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)120, MHD_OPTION_END);
	ck_assert_msg(s->d != NULL, "MHD_start_daemon failed");
	di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
	ck_assert_ptr_nonnull(di);
	s->port = di->port;
	ck_assert_uint_ne(s->port, 0);
}

static struct mhdgz_stats
srv_stats(const struct srv *s)
{
	struct mhdgz_stats st;

	memset(&st, 0, sizeof st);
	st.size = sizeof st;
	ck_assert_int_eq(mhdgz_get_stats(s->gz, &st), 0);
	return st;
}

/* ===================================================================== */
/*                     Client: one keep-alive curl handle                */
/* ===================================================================== */

struct resp {
	CURLcode rc;
	long status;
	long num_connects; /* CURLINFO_NUM_CONNECTS: 0 when the connection was reused */
	uint8_t *body;
	size_t body_len, body_cap;
	int body_overflow;
	size_t nhdr;
	int hdr_overflow;
	char *hdr_name[EU_MAX_HDRS];
	char *hdr_value[EU_MAX_HDRS];
};

static void
resp_clear_hdrs(struct resp *rs)
{
	for (size_t i = 0; i < rs->nhdr; i++) {
		free(rs->hdr_name[i]);
		free(rs->hdr_value[i]);
	}
	rs->nhdr = 0;
	rs->hdr_overflow = 0;
}

static void
resp_free(struct resp *rs)
{
	resp_clear_hdrs(rs);
	free(rs->body);
	memset(rs, 0, sizeof *rs);
}

static int
is_ows(char c)
{
	return c == ' ' || c == '\t';
}

static size_t
cl_header_cb(char *buf, size_t size, size_t n, void *cls)
{
	struct resp *rs = cls;
	size_t len = size * n, nlen, vb, ve;
	const char *colon;

	if (len >= 5 && memcmp(buf, "HTTP/", 5) == 0) {
		/* A new status line (after a 1xx, say): start over. */
		resp_clear_hdrs(rs);
		return len;
	}
	colon = memchr(buf, ':', len);
	if (!colon)
		return len; /* the empty line ending the header */
	if (rs->nhdr == EU_MAX_HDRS) {
		rs->hdr_overflow = 1;
		return len;
	}
	nlen = (size_t)(colon - buf);
	vb = nlen + 1;
	ve = len;
	while (vb < ve && is_ows(buf[vb]))
		vb++;
	while (ve > vb && (is_ows(buf[ve - 1]) || buf[ve - 1] == '\r' || buf[ve - 1] == '\n'))
		ve--;
	rs->hdr_name[rs->nhdr] = strndup(buf, nlen);
	rs->hdr_value[rs->nhdr] = strndup(buf + vb, ve - vb);
	if (!rs->hdr_name[rs->nhdr] || !rs->hdr_value[rs->nhdr]) {
		free(rs->hdr_name[rs->nhdr]);
		free(rs->hdr_value[rs->nhdr]);
		return 0;
	}
	rs->nhdr++;
	return len;
}

static size_t
cl_write_cb(char *buf, size_t size, size_t n, void *cls)
{
	struct resp *rs = cls;
	size_t len = size * n;

	if (rs->body_len + len > EU_MAX_BODY) {
		rs->body_overflow = 1;
		return 0;
	}
	if (rs->body_len + len > rs->body_cap) {
		size_t cap = rs->body_cap ? rs->body_cap : 4096;
		uint8_t *nb;

		while (cap < rs->body_len + len)
			cap *= 2;
		nb = realloc(rs->body, cap);
		if (!nb)
			return 0;
		rs->body = nb;
		rs->body_cap = cap;
	}
	memcpy(rs->body + rs->body_len, buf, len);
	rs->body_len += len;
	return len;
}

static CURL *
cl_new(void)
{
	CURL *h = curl_easy_init();

	ck_assert_ptr_nonnull(h);
	curl_easy_setopt(h, CURLOPT_TIMEOUT, EU_TIMEOUT_S);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_PROXY, "");
	curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	/* We look at the bytes on the wire: curl must not decode them (and
	 * CURLOPT_ACCEPT_ENCODING is never set, so curl sends no
	 * Accept-Encoding of its own). */
	curl_easy_setopt(h, CURLOPT_HTTP_CONTENT_DECODING, 0L);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, cl_header_cb);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, cl_write_cb);
	return h;
}

static void
cl_free(CURL *h)
{
	curl_easy_cleanup(h);
}

/*
 * Perform method ("GET", "HEAD" or "POST" with an empty body) on path,
 * sending the "Name: value" lines of hdrs (NULL-terminated; may be NULL).
 * Fills *rs (release with resp_free). Returns 0 if the transfer completed.
 */
static int
cl_req(CURL *h, uint16_t port, const char *method, const char *path, const char *const *hdrs,
       struct resp *rs)
{
	char url[256];
	struct curl_slist *sl = NULL;

	memset(rs, 0, sizeof *rs);
	snprintf(url, sizeof url, "http://127.0.0.1:%u%s", (unsigned int)port, path);
	for (int i = 0; hdrs && hdrs[i]; i++) {
		struct curl_slist *n = curl_slist_append(sl, hdrs[i]);

		if (!n) {
			curl_slist_free_all(sl);
			rs->rc = CURLE_OUT_OF_MEMORY;
			return -1;
		}
		sl = n;
	}
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, sl);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, rs);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, rs);
	if (strcmp(method, "HEAD") == 0) {
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	} else if (strcmp(method, "POST") == 0) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, 0L);
		curl_easy_setopt(h, CURLOPT_POST, 1L);
	} else {
		curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
	}
	rs->rc = curl_easy_perform(h);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &rs->status);
	curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &rs->num_connects);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
	curl_slist_free_all(sl);
	if (rs->rc != CURLE_OK || rs->body_overflow || rs->hdr_overflow)
		return -1;
	return 0;
}

static const char *
resp_hdr(const struct resp *rs, const char *name)
{
	for (size_t i = 0; i < rs->nhdr; i++)
		if (strcasecmp(rs->hdr_name[i], name) == 0)
			return rs->hdr_value[i];
	return NULL;
}

static int
resp_hdr_count(const struct resp *rs, const char *name)
{
	int n = 0;

	for (size_t i = 0; i < rs->nhdr; i++)
		if (strcasecmp(rs->hdr_name[i], name) == 0)
			n++;
	return n;
}

/* ===================================================================== */
/*        Checks that do not abort (client threads use them too)         */
/* ===================================================================== */

static int
v_fail(char *err, size_t errcap, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errcap, fmt, ap);
	va_end(ap);
	return -1;
}

/* Content-Length present, all digits, equal to want. */
static int
v_content_length(const struct resp *rs, size_t want, char *err, size_t errcap)
{
	const char *cl = resp_hdr(rs, "Content-Length");
	char *end;
	unsigned long long v;

	if (resp_hdr_count(rs, "Content-Length") != 1)
		return v_fail(err, errcap, "%d Content-Length fields",
			      resp_hdr_count(rs, "Content-Length"));
	v = strtoull(cl, &end, 10);
	if (*cl < '0' || *cl > '9' || *end != '\0')
		return v_fail(err, errcap, "bad Content-Length '%s'", cl);
	if (v != (unsigned long long)want)
		return v_fail(err, errcap, "Content-Length %llu, want %zu", v, want);
	return 0;
}

/*
 * Exactly one Vary field, listing Accept-Encoding exactly once
 * (case-insensitive); if strict, besides it exactly the tokens of extra
 * (NULL-terminated; NULL for none), each once.
 */
static int
vary_check(const struct resp *rs, const char *const *extra, int strict, char *err, size_t errcap)
{
	const char *v = resp_hdr(rs, "Vary"), *p;
	int n_ae = 0, n_extra = 0, seen[8] = { 0 };

	if (resp_hdr_count(rs, "Vary") != 1)
		return v_fail(err, errcap, "%d Vary fields (first '%s')",
			      resp_hdr_count(rs, "Vary"), v ? v : "");
	for (int i = 0; extra && extra[i]; i++)
		n_extra++;
	p = v;
	while (*p) {
		const char *b, *e;
		size_t len;
		int found = 0;

		while (*p == ',' || is_ows(*p))
			p++;
		if (!*p)
			break;
		b = p;
		while (*p && *p != ',')
			p++;
		e = p;
		while (e > b && is_ows(e[-1]))
			e--;
		len = (size_t)(e - b);
		if (len == 15 && strncasecmp(b, "Accept-Encoding", 15) == 0) {
			n_ae++;
			continue;
		}
		for (int i = 0; i < n_extra && i < 8; i++) {
			if (strlen(extra[i]) == len && strncasecmp(b, extra[i], len) == 0) {
				seen[i]++;
				found = 1;
			}
		}
		if (!found && strict)
			return v_fail(err, errcap, "Vary '%s': unexpected token '%.*s'", v,
				      (int)len, b);
	}
	if (n_ae != 1)
		return v_fail(err, errcap, "Vary '%s' lists Accept-Encoding %d times", v, n_ae);
	for (int i = 0; i < n_extra && i < 8; i++)
		if (seen[i] != 1)
			return v_fail(err, errcap, "Vary '%s' lists %s %d times", v, extra[i],
				      seen[i]);
	return 0;
}

/* Vary is exactly Accept-Encoding plus the tokens of extra. */
static int
v_vary_ae(const struct resp *rs, const char *const *extra, char *err, size_t errcap)
{
	return vary_check(rs, extra, 1, err, errcap);
}

static int
v_gzip(const struct resp *rs, long want_status, const void *orig, size_t orig_len, char *err,
       size_t errcap)
{
	const char *ce = resp_hdr(rs, "Content-Encoding");
	const char *ar = resp_hdr(rs, "Accept-Ranges");
	uint8_t *out = NULL;
	size_t out_len = 0;

	if (rs->rc != CURLE_OK)
		return v_fail(err, errcap, "transfer: %s", curl_easy_strerror(rs->rc));
	if (rs->status != want_status)
		return v_fail(err, errcap, "status %ld, want %ld", rs->status, want_status);
	if (resp_hdr_count(rs, "Content-Encoding") != 1 || strcmp(ce, "gzip") != 0)
		return v_fail(err, errcap, "%d Content-Encoding fields, first '%s' (want gzip)",
			      resp_hdr_count(rs, "Content-Encoding"), ce ? ce : "(none)");
	if (v_content_length(rs, rs->body_len, err, errcap))
		return -1;
	if (rs->body_len >= orig_len)
		return v_fail(err, errcap, "gzip body %zu bytes, not smaller than %zu",
			      rs->body_len, orig_len);
	if (ar && strcasecmp(ar, "bytes") == 0)
		return v_fail(err, errcap, "Accept-Ranges: bytes on a gzip response");
	if (tu_gunzip(rs->body, rs->body_len, &out, &out_len) != 0)
		return v_fail(err, errcap, "body (%zu bytes) is not one valid gzip member",
			      rs->body_len);
	if (out_len != orig_len || memcmp(out, orig, orig_len) != 0) {
		free(out);
		return v_fail(err, errcap, "gunzipped %zu bytes differ from the %zu original",
			      out_len, orig_len);
	}
	free(out);
	if (tu_check_member(rs->body, rs->body_len, orig, orig_len) != 0)
		return v_fail(err, errcap, "gzip header/trailer not as RFC 1952 and the header say");
	/* Vary: Accept-Encoding once; other tokens are the caller's to check. */
	return vary_check(rs, NULL, 0, err, errcap);
}

static int
v_identity(const struct resp *rs, long want_status, const void *orig, size_t orig_len, char *err,
	   size_t errcap)
{
	if (rs->rc != CURLE_OK)
		return v_fail(err, errcap, "transfer: %s", curl_easy_strerror(rs->rc));
	if (rs->status != want_status)
		return v_fail(err, errcap, "status %ld, want %ld", rs->status, want_status);
	if (resp_hdr_count(rs, "Content-Encoding") != 0)
		return v_fail(err, errcap, "Content-Encoding '%s' on an identity response",
			      resp_hdr(rs, "Content-Encoding"));
	if (v_content_length(rs, orig_len, err, errcap))
		return -1;
	if (rs->body_len != orig_len || (orig_len && memcmp(rs->body, orig, orig_len) != 0))
		return v_fail(err, errcap, "identity body %zu bytes differs from the %zu original",
			      rs->body_len, orig_len);
	return 0;
}

/* No Content-Encoding and not a byte of body (204, 304, HEAD, 412). */
static int
v_no_body(const struct resp *rs, long want_status, char *err, size_t errcap)
{
	if (rs->rc != CURLE_OK)
		return v_fail(err, errcap, "transfer: %s", curl_easy_strerror(rs->rc));
	if (rs->status != want_status)
		return v_fail(err, errcap, "status %ld, want %ld", rs->status, want_status);
	if (resp_hdr_count(rs, "Content-Encoding") != 0)
		return v_fail(err, errcap, "Content-Encoding '%s' on a %ld",
			      resp_hdr(rs, "Content-Encoding"), rs->status);
	if (rs->body_len != 0)
		return v_fail(err, errcap, "%zu body bytes on a %ld", rs->body_len, rs->status);
	return 0;
}

/*
 * A 304 to a gzip-accepting client: no body, and no representation metadata
 * beyond what RFC 9110 15.4.5 lists (no Content-Encoding). Its
 * Content-Length, if any, is checked separately against the 200's.
 */
static int
v_not_modified_gz(const struct resp *rs, char *err, size_t errcap)
{
	return v_no_body(rs, 304, err, errcap);
}

/*
 * A 304 may carry Content-Length only if it equals the length of the
 * content the 200 would have had (RFC 9110 8.6): caches update stored
 * responses from 304s (RFC 9111 4.3.4).
 */
static int
v_304_length(const struct resp *rs, size_t len_200, char *err, size_t errcap)
{
	if (resp_hdr_count(rs, "Content-Length") == 0)
		return 0;
	return v_content_length(rs, len_200, err, errcap);
}

/* The ETag field: exactly one with value want, or none if want is NULL. */
static int
v_etag(const struct resp *rs, const char *want, char *err, size_t errcap)
{
	const char *et = resp_hdr(rs, "ETag");

	if (!want) {
		if (et)
			return v_fail(err, errcap, "ETag '%s', want none", et);
		return 0;
	}
	if (resp_hdr_count(rs, "ETag") != 1 || strcmp(et, want) != 0)
		return v_fail(err, errcap, "%d ETag fields, first '%s', want '%s'",
			      resp_hdr_count(rs, "ETag"), et ? et : "(none)", want);
	return 0;
}

/* A compressible body no sniffer takes for text (PNG signature, NUL runs). */
static void
eu_fill_binary(uint8_t *b, size_t len)
{
	static const uint8_t sig[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };

	for (size_t i = 0; i < len; i++)
		b[i] = (uint8_t)((i % 64) < 48 ? 0 : (i * 7) & 0x0f);
	memcpy(b, sig, len < 8 ? len : 8);
}

/* Shorthands for the tests: every check names its context. */
#define E err, sizeof err
#define OK(ctx, call) ck_assert_msg((call) == 0, "%s: %s", (ctx), err)
#define REQ(h, s, m, p, hd, rs)                                                                    \
	ck_assert_msg(cl_req((h), (s)->port, (m), (p), (hd), (rs)) == 0, "%s %s: transfer %s", (m), \
		      (p), curl_easy_strerror((rs)->rc))

static const char *const H_GZIP[] = { "Accept-Encoding: gzip", NULL };
static const char *const H_NONE[] = { NULL };

static struct mhdgz_options
opts_default(void)
{
	struct mhdgz_options o;

	memset(&o, 0, sizeof o);
	o.size = sizeof o;
	return o;
}

static void
expect_reason_counts(const struct mhdgz_stats *st, const uint64_t want[MHDGZ_REASON_COUNT])
{
	for (int r = 0; r < MHDGZ_REASON_COUNT; r++)
		ck_assert_msg(st->reasons[r] == want[r], "reason %s: want %llu got %llu",
			      mhdgz_reason_name((enum mhdgz_reason)r), (unsigned long long)want[r],
			      (unsigned long long)st->reasons[r]);
}

/* ===================================================================== */
/*                         Decision and headers                          */
/* ===================================================================== */

/* gzip accepted: Content-Encoding, Content-Length, Vary, no Accept-Ranges,
 * headers kept; then identity for a client without Accept-Encoding. */
START_TEST(test_gzip_basic)
{
	uint8_t *body = tu_payload(8192, TU_TEXT, 11);
	struct route rt[] = {
		{ .path = "/t", .status = 200, .body = body, .body_len = 8192,
		  .hdr = { "Content-Type", "text/html; charset=utf-8", "Accept-Ranges", "bytes",
			   "X-Custom", "kept", "Cache-Control", "max-age=60" } },
		{ .path = "/many", .status = 200, .body = body, .body_len = 8192,
		  .hdr = { "Content-Type", "text/plain", "Set-Cookie", "a=1", "X-H0", "v0", "X-H1",
			   "v1", "Set-Cookie", "b=2; Path=/", "X-H2", "v2", "X-H3", "v3", "Link",
			   "</a>; rel=preload", "X-H4", "v4", "X-H5", "v5", "X-H6", "v6", "Link",
			   "</b>; rel=preload", "X-H7", "v7", "X-H8", "v8", "Set-Cookie", "c=3",
			   "X-H9", "v9", "X-H10", "v10", "X-H11", "v11" } },
	};
	struct srv s;
	CURL *h = cl_new();
	struct resp rs;
	struct mhdgz_stats st;
	char err[512];

	srv_start(&s, NULL, rt, N_ELEMS(rt), 0);
	/* Every other header is copied to the gzip variant, repeated fields
	 * (Set-Cookie cannot be combined, RFC 9110 5.3) included. */
	for (int ae = 1; ae >= 0; ae--) {
		REQ(h, &s, "GET", "/many", ae ? H_GZIP : H_NONE, &rs);
		if (ae)
			OK("many", v_gzip(&rs, 200, body, 8192, E));
		else
			OK("many", v_identity(&rs, 200, body, 8192, E));
		ck_assert_int_eq(resp_hdr_count(&rs, "Set-Cookie"), 3);
		ck_assert_int_eq(resp_hdr_count(&rs, "Link"), 2);
		for (size_t i = 0, n = 0; i < rs.nhdr; i++) {
			if (strcasecmp(rs.hdr_name[i], "Set-Cookie") == 0) {
				static const char *const want[] = { "a=1", "b=2; Path=/", "c=3" };

				ck_assert_str_eq(rs.hdr_value[i], want[n]);
				n++;
			}
		}
		for (int i = 0; i < 12; i++) {
			char name[16], val[16];

			snprintf(name, sizeof name, "X-H%d", i);
			snprintf(val, sizeof val, "v%d", i);
			ck_assert_int_eq(resp_hdr_count(&rs, name), 1);
			ck_assert_str_eq(resp_hdr(&rs, name), val);
		}
		resp_free(&rs);
	}
	REQ(h, &s, "GET", "/t", H_GZIP, &rs);
	OK("gzip", v_gzip(&rs, 200, body, 8192, E));
	OK("gzip", v_vary_ae(&rs, NULL, E));
	ck_assert_ptr_null(resp_hdr(&rs, "Accept-Ranges"));
	ck_assert_str_eq(resp_hdr(&rs, "Content-Type"), "text/html; charset=utf-8");
	ck_assert_str_eq(resp_hdr(&rs, "X-Custom"), "kept");
	ck_assert_str_eq(resp_hdr(&rs, "Cache-Control"), "max-age=60");
	resp_free(&rs);

	REQ(h, &s, "GET", "/t", H_NONE, &rs);
	OK("identity", v_identity(&rs, 200, body, 8192, E));
	OK("identity", v_vary_ae(&rs, NULL, E));
	ck_assert_ptr_nonnull(resp_hdr(&rs, "Accept-Ranges"));
	ck_assert_str_eq(resp_hdr(&rs, "Accept-Ranges"), "bytes");
	ck_assert_str_eq(resp_hdr(&rs, "X-Custom"), "kept");
	ck_assert_int_eq(rs.num_connects, 0);
	resp_free(&rs);

	st = srv_stats(&s);
	ck_assert_uint_eq(st.responses, 4);
	ck_assert_uint_eq(st.compressed, 2);
	ck_assert_uint_eq(st.reasons[MHDGZ_COMPRESSED], 2);
	ck_assert_uint_eq(st.reasons[MHDGZ_SKIP_NOT_ACCEPTED], 2);
	ck_assert_uint_eq(s.errors, 0);
	cl_free(h);
	srv_stop(&s);
	free(body);
}
END_TEST

/* Vary merged into the application's Vary: one field, no duplicates, for
 * per-request and shared responses, gzip and identity alike. */
START_TEST(test_vary_merge)
{
	uint8_t *body = tu_payload(6000, TU_TEXT, 12);
	struct route rt[] = {
		{ .path = "/o", .status = 200, .body = body, .body_len = 6000,
		  .hdr = { "Content-Type", "text/plain", "Vary", "Origin" } },
		{ .path = "/so", .status = 200, .body = body, .body_len = 6000,
		  .hdr = { "Content-Type", "text/plain", "Vary", "Origin" }, .flags = RT_SHARED },
		{ .path = "/ae", .status = 200, .body = body, .body_len = 6000,
		  .hdr = { "Content-Type", "text/plain", "Vary", "accept-encoding" } },
		{ .path = "/sae", .status = 200, .body = body, .body_len = 6000,
		  .hdr = { "Content-Type", "text/plain", "Vary", "accept-encoding" },
		  .flags = RT_SHARED },
		{ .path = "/two", .status = 200, .body = body, .body_len = 6000,
		  .hdr = { "Content-Type", "text/plain", "Vary", "Origin, Cookie" } },
		{ .path = "/mix", .status = 200, .body = body, .body_len = 6000,
		  .hdr = { "Content-Type", "text/plain", "Vary", "Origin, ACCEPT-ENCODING" } },
		{ .path = "/lines", .status = 200, .body = body, .body_len = 6000,
		  .hdr = { "Content-Type", "text/plain", "Vary", "Origin", "Vary", "Cookie" } },
	};
	static const char *const origin[] = { "Origin", NULL };
	static const char *const origin_cookie[] = { "Origin", "Cookie", NULL };
	static const struct {
		const char *path;
		const char *const *extra;
	} cases[] = {
		{ "/o", origin }, { "/so", origin }, { "/ae", NULL },
		{ "/sae", NULL }, { "/two", origin_cookie }, { "/mix", origin },
		{ "/lines", origin_cookie }, /* two Vary lines become one field */
	};
	struct srv s;
	CURL *h = cl_new();
	struct resp rs;
	char err[512], ctx[128];

	srv_start(&s, NULL, rt, N_ELEMS(rt), 0);
	for (size_t i = 0; i < N_ELEMS(cases); i++) {
		/* gzip, identity, gzip, identity: the shared ones must not grow. */
		for (int n = 0; n < 4; n++) {
			int gz = (n % 2) == 0;

			snprintf(ctx, sizeof ctx, "%s %s #%d", cases[i].path, gz ? "gzip" : "identity",
				 n);
			REQ(h, &s, "GET", cases[i].path, gz ? H_GZIP : H_NONE, &rs);
			if (gz)
				OK(ctx, v_gzip(&rs, 200, body, 6000, E));
			else
				OK(ctx, v_identity(&rs, 200, body, 6000, E));
			OK(ctx, v_vary_ae(&rs, cases[i].extra, E));
			resp_free(&rs);
		}
	}
	ck_assert_uint_eq(s.errors, 0);
	cl_free(h);
	srv_stop(&s);
	free(body);
}
END_TEST

/* ETag policies (loop: WEAKEN, SUFFIX, DROP, KEEP); weak ETags stay as they are. */
START_TEST(test_etag_policy)
{
	static const char *const want_strong[] = { "W/\"abc\"", "\"abc-gzip\"", NULL, "\"abc\"" };
	uint8_t *body = tu_payload(5000, TU_JSON, 13);
	struct route rt[] = {
		{ .path = "/s", .status = 200, .body = body, .body_len = 5000,
		  .hdr = { "Content-Type", "application/json", "ETag", "\"abc\"" } },
		{ .path = "/ss", .status = 200, .body = body, .body_len = 5000,
		  .hdr = { "Content-Type", "application/json", "ETag", "\"abc\"" },
		  .flags = RT_SHARED },
		{ .path = "/w", .status = 200, .body = body, .body_len = 5000,
		  .hdr = { "Content-Type", "application/json", "ETag", "W/\"abc\"" } },
		{ .path = "/long", .status = 200, .body = body, .body_len = 5000,
		  .hdr = { "Content-Type", "application/json", "ETag", "\"x\"" } },
	};
	struct mhdgz_options o = opts_default();
	struct srv s;
	CURL *h = cl_new();
	struct resp rs;
	char err[512], ctx[128];

	o.etag_policy = (enum mhdgz_etag_policy)_i;
	srv_start(&s, &o, rt, N_ELEMS(rt), 0);
	/* Long ETags: 200 characters are rewritten exactly; 3000 are rewritten
	 * exactly or (an implementation limit: dropping a validator is safe)
	 * left out of the gzip variant, but never truncated or mangled. */
	for (int t = 0; t < 2; t++) {
		static char tag[3003], want[3010];
		size_t n = t ? 3000 : 200;

		memset(tag + 1, 'q', n);
		tag[0] = tag[n + 1] = '"';
		tag[n + 2] = '\0';
		rt[3].hdr[3] = tag;
		if (_i == MHDGZ_ETAG_WEAKEN)
			snprintf(want, sizeof want, "W/%s", tag);
		else if (_i == MHDGZ_ETAG_SUFFIX)
			snprintf(want, sizeof want, "\"%.*s-gzip\"", (int)n, tag + 1);
		else
			snprintf(want, sizeof want, "%s", tag);
		srv_stop(&s);
		srv_start(&s, &o, rt, N_ELEMS(rt), 0);
		snprintf(ctx, sizeof ctx, "policy %d, %zu-character ETag", _i, n);
		REQ(h, &s, "GET", "/long", H_GZIP, &rs);
		OK(ctx, v_gzip(&rs, 200, body, 5000, E));
		if (_i == MHDGZ_ETAG_DROP || (t == 1 && resp_hdr(&rs, "ETag") == NULL))
			OK(ctx, v_etag(&rs, NULL, E));
		else
			OK(ctx, v_etag(&rs, want, E));
		resp_free(&rs);
		REQ(h, &s, "GET", "/long", H_NONE, &rs);
		OK(ctx, v_etag(&rs, tag, E));
		resp_free(&rs);
	}
	for (int n = 0; n < 2; n++) {
		for (int p = 0; p < 2; p++) {
			const char *path = p ? "/ss" : "/s";

			snprintf(ctx, sizeof ctx, "policy %d %s gzip #%d", _i, path, n);
			REQ(h, &s, "GET", path, H_GZIP, &rs);
			OK(ctx, v_gzip(&rs, 200, body, 5000, E));
			OK(ctx, v_etag(&rs, want_strong[_i], E));
			resp_free(&rs);
			snprintf(ctx, sizeof ctx, "policy %d %s identity #%d", _i, path, n);
			REQ(h, &s, "GET", path, H_NONE, &rs);
			OK(ctx, v_identity(&rs, 200, body, 5000, E));
			OK(ctx, v_etag(&rs, "\"abc\"", E));
			resp_free(&rs);
		}
		if (_i != MHDGZ_ETAG_DROP) {
			snprintf(ctx, sizeof ctx, "policy %d weak gzip", _i);
			REQ(h, &s, "GET", "/w", H_GZIP, &rs);
			OK(ctx, v_gzip(&rs, 200, body, 5000, E));
			OK(ctx, v_etag(&rs, "W/\"abc\"", E));
			resp_free(&rs);
		}
		snprintf(ctx, sizeof ctx, "policy %d weak identity", _i);
		REQ(h, &s, "GET", "/w", H_NONE, &rs);
		OK(ctx, v_identity(&rs, 200, body, 5000, E));
		OK(ctx, v_etag(&rs, "W/\"abc\"", E));
		resp_free(&rs);
	}
	cl_free(h);
	srv_stop(&s);
	free(body);
}
END_TEST

/* Clients that do not accept gzip get the identity body, with Vary. */
START_TEST(test_not_accepted)
{
	static const char *const aes[][3] = {
		{ NULL },
		{ "Accept-Encoding: identity", NULL },
		{ "Accept-Encoding: br, deflate", NULL },
		{ "Accept-Encoding: gzip;q=0", NULL },
		{ "Accept-Encoding: *;q=0", NULL },
		{ "Accept-Encoding: gzip;q=0, *", NULL },
		{ "Accept-Encoding: identity;q=1, x-gzip;q=0", NULL },
		{ "Accept-Encoding: deflate", "Accept-Encoding: gzip;q=0", NULL },
		{ "Accept-Encoding:", NULL },
	};
	uint8_t *body = tu_payload(9000, TU_TEXT, 14);
	struct route rt[] = {
		{ .path = "/t", .status = 200, .body = body, .body_len = 9000,
		  .hdr = { "Content-Type", "text/plain" } },
	};
	struct srv s;
	CURL *h = cl_new();
	struct resp rs;
	struct mhdgz_stats st;
	char err[512], ctx[128];

	srv_start(&s, NULL, rt, N_ELEMS(rt), 0);
	for (size_t i = 0; i < N_ELEMS(aes); i++) {
		snprintf(ctx, sizeof ctx, "'%s' '%s'", aes[i][0] ? aes[i][0] : "(none)",
			 aes[i][0] && aes[i][1] ? aes[i][1] : "");
		REQ(h, &s, "GET", "/t", aes[i], &rs);
		OK(ctx, v_identity(&rs, 200, body, 9000, E));
		OK(ctx, v_vary_ae(&rs, NULL, E));
		resp_free(&rs);
	}
	st = srv_stats(&s);
	ck_assert_uint_eq(st.reasons[MHDGZ_SKIP_NOT_ACCEPTED], N_ELEMS(aes));
	ck_assert_uint_eq(st.compressed, 0);
	cl_free(h);
	srv_stop(&s);
	free(body);
}
END_TEST

/* 204 and 304 carry neither Content-Encoding nor body, and the connection
 * stays usable for the next request. */
START_TEST(test_no_content_statuses)
{
	uint8_t *body = tu_payload(4096, TU_TEXT, 15);
	struct route rt[] = {
		{ .path = "/t", .status = 200, .body = body, .body_len = 4096,
		  .hdr = { "Content-Type", "text/plain" } },
		{ .path = "/204", .status = 204, .body = body, .body_len = 4096,
		  .hdr = { "Content-Type", "text/plain" } },
		{ .path = "/204e", .status = 204, .body = NULL, .body_len = 0 },
		{ .path = "/304", .status = 304, .body = body, .body_len = 4096,
		  .hdr = { "Content-Type", "text/plain", "ETag", "\"n\"" } },
		{ .path = "/304s", .status = 304, .body = body, .body_len = 4096,
		  .hdr = { "Content-Type", "text/plain" }, .flags = RT_SHARED },
		{ .path = "/e", .status = 200, .body = NULL, .body_len = 0,
		  .hdr = { "Content-Type", "text/plain" } },
	};
	static const char *const seq[] = { "/204", "/204e", "/304", "/304s", "/e", "/304s" };
	struct srv s;
	CURL *h = cl_new();
	struct resp rs;
	char err[512], ctx[128];

	srv_start(&s, NULL, rt, N_ELEMS(rt), 0);
	REQ(h, &s, "GET", "/t", H_GZIP, &rs);
	OK("first", v_gzip(&rs, 200, body, 4096, E));
	resp_free(&rs);
	for (size_t i = 0; i < N_ELEMS(seq); i++) {
		long want = strcmp(seq[i], "/e") == 0 ? 200 : (seq[i][1] == '2' ? 204 : 304);

		snprintf(ctx, sizeof ctx, "%s", seq[i]);
		REQ(h, &s, "GET", seq[i], H_GZIP, &rs);
		OK(ctx, want == 304 ? v_not_modified_gz(&rs, E) : v_no_body(&rs, want, E));
		ck_assert_msg(rs.num_connects == 0, "%s: new connection", ctx);
		resp_free(&rs);
		snprintf(ctx, sizeof ctx, "request after %s", seq[i]);
		REQ(h, &s, "GET", "/t", H_GZIP, &rs);
		OK(ctx, v_gzip(&rs, 200, body, 4096, E));
		ck_assert_msg(rs.num_connects == 0, "%s: new connection", ctx);
		resp_free(&rs);
	}
	ck_assert_uint_eq(s.errors, 0);
	cl_free(h);
	srv_stop(&s);
	free(body);
}
END_TEST

/*
 * Conditional requests (default policy, loop 0: per-request responses,
 * 1: one shared response): the application evaluates the validators with
 * mhdgz_evaluate_preconditions() and queues its response with 304. The 304
 * carries the Vary and the ETag the 200 would carry (RFC 9110 15.4.5):
 * W/"abc" for a gzip client, "abc" for the others; and no Content-Length
 * other than that of the 200's content (RFC 9110 8.6).
 */
START_TEST(test_conditional)
{
	uint8_t *body = tu_payload(8192, TU_TEXT, 16);
	struct route rt[] = {
		{ .path = "/r", .status = 200, .body = body, .body_len = 8192,
		  .hdr = { "Content-Type", "text/plain", "ETag", "\"abc\"" },
		  .flags = RT_PRECOND | (_i ? RT_SHARED : 0), .etag = "\"abc\"" },
		{ .path = "/n", .status = 200, .body = body, .body_len = 8192,
		  .hdr = { "Content-Type", "text/plain" }, .flags = RT_PRECOND, .etag = NULL },
	};
	static const char *const inm_weak_gz[] = { "Accept-Encoding: gzip",
						   "If-None-Match: W/\"abc\"", NULL };
	static const char *const inm_strong_gz[] = { "Accept-Encoding: gzip",
						     "If-None-Match: \"abc\"", NULL };
	static const char *const inm_strong[] = { "If-None-Match: \"abc\"", NULL };
	static const char *const inm_other_gz[] = { "Accept-Encoding: gzip",
						    "If-None-Match: \"x\", \"y\"", NULL };
	static const char *const inm_star_gz[] = { "Accept-Encoding: gzip", "If-None-Match: *",
						   NULL };
	static const char *const im_ok_gz[] = { "Accept-Encoding: gzip", "If-Match: \"abc\"",
						NULL };
	static const char *const im_weak_gz[] = { "Accept-Encoding: gzip", "If-Match: W/\"abc\"",
						  NULL };
	static const char *const im_bad_gz[] = { "Accept-Encoding: gzip", "If-Match: \"zzz\"",
						 NULL };
	static const char *const inm_post[] = { "If-None-Match: \"abc\"", NULL };
	static const char *const im_bad_inm_gz[] = { "Accept-Encoding: gzip",
						     "If-Match: \"zzz\"", "If-None-Match: \"abc\"",
						     NULL };
	static const char *const im_ok_inm_gz[] = { "Accept-Encoding: gzip",
						    "If-Match: \"abc\"", "If-None-Match: \"abc\"",
						    NULL };
	static const char *const im_star_gz[] = { "Accept-Encoding: gzip", "If-Match: *", NULL };
	struct srv s;
	CURL *h = cl_new();
	struct resp rs;
	char err[512];
	size_t gz_len = 0;

	srv_start(&s, NULL, rt, N_ELEMS(rt), 0);
	REQ(h, &s, "GET", "/r", H_GZIP, &rs);
	OK("200 gzip", v_gzip(&rs, 200, body, 8192, E));
	OK("200 gzip", v_etag(&rs, "W/\"abc\"", E));
	gz_len = rs.body_len;
	resp_free(&rs);

	REQ(h, &s, "GET", "/r", inm_weak_gz, &rs);
	OK("304 gzip", v_not_modified_gz(&rs, E));
	OK("304 gzip", v_304_length(&rs, gz_len, E));
	OK("304 gzip", v_vary_ae(&rs, NULL, E));
	OK("304 gzip", v_etag(&rs, "W/\"abc\"", E));
	ck_assert_int_eq(rs.num_connects, 0);
	resp_free(&rs);

	REQ(h, &s, "GET", "/r", inm_strong_gz, &rs);
	OK("304 gzip (strong INM)", v_not_modified_gz(&rs, E));
	OK("304 gzip (strong INM)", v_304_length(&rs, gz_len, E));
	OK("304 gzip (strong INM)", v_etag(&rs, "W/\"abc\"", E));
	resp_free(&rs);

	REQ(h, &s, "HEAD", "/r", inm_weak_gz, &rs);
	OK("HEAD 304", v_not_modified_gz(&rs, E));
	OK("HEAD 304", v_304_length(&rs, gz_len, E));
	OK("HEAD 304", v_etag(&rs, "W/\"abc\"", E));
	resp_free(&rs);

	REQ(h, &s, "GET", "/r", inm_star_gz, &rs);
	OK("304 *", v_not_modified_gz(&rs, E));
	OK("304 *", v_304_length(&rs, gz_len, E));
	resp_free(&rs);

	REQ(h, &s, "GET", "/r", H_GZIP, &rs);
	OK("200 gzip after 304", v_gzip(&rs, 200, body, 8192, E));
	OK("200 gzip after 304", v_etag(&rs, "W/\"abc\"", E));
	ck_assert_int_eq(rs.num_connects, 0);
	resp_free(&rs);

	REQ(h, &s, "GET", "/r", inm_strong, &rs);
	OK("304 identity", v_no_body(&rs, 304, E));
	OK("304 identity", v_304_length(&rs, (size_t)8192, E));
	OK("304 identity", v_vary_ae(&rs, NULL, E));
	OK("304 identity", v_etag(&rs, "\"abc\"", E));
	resp_free(&rs);

	REQ(h, &s, "GET", "/r", H_NONE, &rs);
	OK("200 identity after 304", v_identity(&rs, 200, body, 8192, E));
	OK("200 identity after 304", v_etag(&rs, "\"abc\"", E));
	OK("200 identity after 304", v_vary_ae(&rs, NULL, E));
	resp_free(&rs);

	REQ(h, &s, "GET", "/r", inm_other_gz, &rs);
	OK("INM other", v_gzip(&rs, 200, body, 8192, E));
	resp_free(&rs);

	REQ(h, &s, "GET", "/r", im_ok_gz, &rs);
	OK("If-Match ok", v_gzip(&rs, 200, body, 8192, E));
	resp_free(&rs);

	REQ(h, &s, "GET", "/r", im_weak_gz, &rs);
	OK("If-Match weak", v_no_body(&rs, 412, E));
	resp_free(&rs);

	REQ(h, &s, "GET", "/r", im_bad_gz, &rs);
	OK("If-Match other", v_no_body(&rs, 412, E));
	resp_free(&rs);

	/* If-None-Match on POST: 412, not 304 (RFC 9110 13.1.2). */
	REQ(h, &s, "POST", "/r", inm_post, &rs);
	OK("POST INM", v_no_body(&rs, 412, E));
	resp_free(&rs);

	/* If-Match is evaluated first (RFC 9110 13.2.2 step 1). */
	REQ(h, &s, "GET", "/r", im_bad_inm_gz, &rs);
	OK("If-Match fails before If-None-Match", v_no_body(&rs, 412, E));
	resp_free(&rs);
	REQ(h, &s, "GET", "/r", im_ok_inm_gz, &rs);
	OK("If-Match passes, If-None-Match matches", v_not_modified_gz(&rs, E));
	resp_free(&rs);
	REQ(h, &s, "GET", "/r", im_star_gz, &rs);
	OK("If-Match *", v_gzip(&rs, 200, body, 8192, E));
	resp_free(&rs);

	/* A resource without an ETag: only "*" matches. */
	REQ(h, &s, "GET", "/n", inm_star_gz, &rs);
	OK("no ETag, INM *", v_not_modified_gz(&rs, E));
	resp_free(&rs);
	REQ(h, &s, "GET", "/n", inm_strong_gz, &rs);
	OK("no ETag, INM tag", v_gzip(&rs, 200, body, 8192, E));
	resp_free(&rs);
	REQ(h, &s, "GET", "/n", im_ok_gz, &rs);
	OK("no ETag, If-Match tag", v_no_body(&rs, 412, E));
	resp_free(&rs);
	REQ(h, &s, "GET", "/n", im_star_gz, &rs);
	OK("no ETag, If-Match *", v_gzip(&rs, 200, body, 8192, E));
	resp_free(&rs);

	REQ(h, &s, "GET", "/r", H_GZIP, &rs);
	OK("200 gzip at the end", v_gzip(&rs, 200, body, 8192, E));
	ck_assert_int_eq(rs.num_connects, 0);
	resp_free(&rs);
	ck_assert_uint_eq(s.errors, 0);
	cl_free(h);
	srv_stop(&s);
	free(body);
}
END_TEST

/* MHDGZ_ETAG_SUFFIX: "abc-gzip" on gzip responses, and the validators
 * carrying it still give 304 and 412 correctly. */
START_TEST(test_conditional_suffix)
{
	uint8_t *body = tu_payload(8192, TU_TEXT, 17);
	struct route rt[] = {
		{ .path = "/r", .status = 200, .body = body, .body_len = 8192,
		  .hdr = { "Content-Type", "text/plain", "ETag", "\"abc\"" },
		  .flags = RT_PRECOND | (_i ? RT_SHARED : 0), .etag = "\"abc\"" },
	};
	static const char *const inm_sfx_gz[] = { "Accept-Encoding: gzip",
						  "If-None-Match: \"abc-gzip\"", NULL };
	static const char *const inm_sfx[] = { "If-None-Match: \"abc-gzip\"", NULL };
	static const char *const inm_plain_gz[] = { "Accept-Encoding: gzip",
						    "If-None-Match: \"abc\"", NULL };
	static const char *const im_sfx_gz[] = { "Accept-Encoding: gzip",
						 "If-Match: \"abc-gzip\"", NULL };
	static const char *const im_plain_gz[] = { "Accept-Encoding: gzip", "If-Match: \"abc\"",
						   NULL };
	static const char *const im_bad_gz[] = { "Accept-Encoding: gzip",
						 "If-Match: \"zzz-gzip\"", NULL };
	struct mhdgz_options o = opts_default();
	struct srv s;
	CURL *h = cl_new();
	struct resp rs;
	char err[512];
	size_t gz_len = 0;

	o.etag_policy = MHDGZ_ETAG_SUFFIX;
	srv_start(&s, &o, rt, N_ELEMS(rt), 0);
	REQ(h, &s, "GET", "/r", H_GZIP, &rs);
	OK("200 gzip", v_gzip(&rs, 200, body, 8192, E));
	OK("200 gzip", v_etag(&rs, "\"abc-gzip\"", E));
	gz_len = rs.body_len;
	resp_free(&rs);

	REQ(h, &s, "GET", "/r", inm_sfx_gz, &rs);
	OK("304 suffix", v_not_modified_gz(&rs, E));
	OK("304 suffix", v_304_length(&rs, gz_len, E));
	OK("304 suffix", v_vary_ae(&rs, NULL, E));
	OK("304 suffix", v_etag(&rs, "\"abc-gzip\"", E));
	resp_free(&rs);

	REQ(h, &s, "GET", "/r", inm_plain_gz, &rs);
	OK("304 plain tag, gzip client", v_not_modified_gz(&rs, E));
	OK("304 plain tag, gzip client", v_304_length(&rs, gz_len, E));
	OK("304 plain tag, gzip client", v_etag(&rs, "\"abc-gzip\"", E));
	resp_free(&rs);

	REQ(h, &s, "GET", "/r", inm_sfx, &rs);
	OK("304 identity client", v_no_body(&rs, 304, E));
	OK("304 identity client", v_304_length(&rs, (size_t)8192, E));
	OK("304 identity client", v_etag(&rs, "\"abc\"", E));
	OK("304 identity client", v_vary_ae(&rs, NULL, E));
	resp_free(&rs);

	REQ(h, &s, "GET", "/r", im_sfx_gz, &rs);
	OK("If-Match suffix", v_gzip(&rs, 200, body, 8192, E));
	OK("If-Match suffix", v_etag(&rs, "\"abc-gzip\"", E));
	resp_free(&rs);

	REQ(h, &s, "GET", "/r", im_plain_gz, &rs);
	OK("If-Match plain", v_gzip(&rs, 200, body, 8192, E));
	resp_free(&rs);

	REQ(h, &s, "GET", "/r", im_bad_gz, &rs);
	OK("If-Match other", v_no_body(&rs, 412, E));
	resp_free(&rs);

	REQ(h, &s, "GET", "/r", H_NONE, &rs);
	OK("identity", v_identity(&rs, 200, body, 8192, E));
	OK("identity", v_etag(&rs, "\"abc\"", E));
	ck_assert_int_eq(rs.num_connects, 0);
	resp_free(&rs);
	cl_free(h);
	srv_stop(&s);
	free(body);
}
END_TEST

static void
expect_same_header(const struct resp *a, const struct resp *b, const char *name)
{
	const char *va = resp_hdr(a, name), *vb = resp_hdr(b, name);

	ck_assert_msg(resp_hdr_count(a, name) == resp_hdr_count(b, name),
		      "%s: %d fields on GET, %d on HEAD", name, resp_hdr_count(a, name),
		      resp_hdr_count(b, name));
	ck_assert_msg((va == NULL) == (vb == NULL) && (!va || strcmp(va, vb) == 0),
		      "%s: GET '%s', HEAD '%s'", name, va ? va : "(none)", vb ? vb : "(none)");
}

/* HEAD gets exactly the headers GET gets, and no body (loop: per-request,
 * shared with HEAD first). */
START_TEST(test_head)
{
	static const char *const names[] = { "Content-Encoding", "Vary", "ETag", "Content-Length",
					     "Content-Type", "Accept-Ranges" };
	uint8_t *body = tu_payload(20000, TU_TEXT, 18);
	struct route rt[] = {
		{ .path = "/t", .status = 200, .body = body, .body_len = 20000,
		  .hdr = { "Content-Type", "text/css", "ETag", "\"h1\"", "Accept-Ranges", "bytes" },
		  .flags = _i ? RT_SHARED : 0 },
	};
	struct srv s;
	CURL *h = cl_new();
	struct resp head, get;
	char err[512];

	srv_start(&s, NULL, rt, N_ELEMS(rt), 0);
	for (int ae = 1; ae >= 0; ae--) {
		REQ(h, &s, "HEAD", "/t", ae ? H_GZIP : H_NONE, &head);
		ck_assert_int_eq(head.status, 200);
		ck_assert_uint_eq(head.body_len, 0);
		REQ(h, &s, "GET", "/t", ae ? H_GZIP : H_NONE, &get);
		ck_assert_int_eq(get.num_connects, 0);
		if (ae)
			OK("GET gzip", v_gzip(&get, 200, body, 20000, E));
		else
			OK("GET identity", v_identity(&get, 200, body, 20000, E));
		for (size_t i = 0; i < N_ELEMS(names); i++)
			expect_same_header(&get, &head, names[i]);
		resp_free(&head);
		resp_free(&get);
		/* And a HEAD after the GET, then a GET on the same connection. */
		REQ(h, &s, "HEAD", "/t", ae ? H_GZIP : H_NONE, &head);
		ck_assert_uint_eq(head.body_len, 0);
		ck_assert_int_eq(head.num_connects, 0);
		resp_free(&head);
		REQ(h, &s, "GET", "/t", ae ? H_GZIP : H_NONE, &get);
		ck_assert_int_eq(get.num_connects, 0);
		if (ae)
			OK("GET gzip after HEAD", v_gzip(&get, 200, body, 20000, E));
		else
			OK("GET identity after HEAD", v_identity(&get, 200, body, 20000, E));
		resp_free(&get);
	}
	cl_free(h);
	srv_stop(&s);
	free(body);
}
END_TEST

/* Responses that are never compressed: 206, Content-Range, an existing
 * Content-Encoding, Cache-Control: no-transform. Headers untouched. */
START_TEST(test_never_compressed)
{
	uint8_t *body = tu_payload(8192, TU_TEXT, 19);
	struct route rt[] = {
		{ .path = "/206", .status = 206, .body = body, .body_len = 8192,
		  .hdr = { "Content-Type", "text/plain", "Content-Range", "bytes 0-8191/20000" } },
		{ .path = "/cr", .status = 200, .body = body, .body_len = 8192,
		  .hdr = { "Content-Type", "text/plain", "Content-Range", "bytes 0-8191/8192" } },
		{ .path = "/br", .status = 200, .body = body, .body_len = 8192,
		  .hdr = { "Content-Type", "text/plain", "Content-Encoding", "br" } },
		{ .path = "/nt", .status = 200, .body = body, .body_len = 8192,
		  .hdr = { "Content-Type", "text/plain", "Cache-Control", "no-transform" } },
		{ .path = "/nt2", .status = 200, .body = body, .body_len = 8192,
		  .hdr = { "Content-Type", "text/plain", "Cache-Control",
			   "public, No-Transform, max-age=10" } },
	};
	struct srv s;
	CURL *h = cl_new();
	struct resp rs;
	struct mhdgz_stats st;
	char err[512];
	uint64_t want[MHDGZ_REASON_COUNT] = { 0 };

	srv_start(&s, NULL, rt, N_ELEMS(rt), 0);
	REQ(h, &s, "GET", "/206", H_GZIP, &rs);
	OK("206", v_identity(&rs, 206, body, 8192, E));
	ck_assert_str_eq(resp_hdr(&rs, "Content-Range"), "bytes 0-8191/20000");
	resp_free(&rs);
	REQ(h, &s, "GET", "/cr", H_GZIP, &rs);
	OK("Content-Range", v_identity(&rs, 200, body, 8192, E));
	resp_free(&rs);

	/* The application's own coding: bytes and header as it set them. */
	REQ(h, &s, "GET", "/br", H_GZIP, &rs);
	ck_assert_int_eq(rs.status, 200);
	ck_assert_int_eq(resp_hdr_count(&rs, "Content-Encoding"), 1);
	ck_assert_str_eq(resp_hdr(&rs, "Content-Encoding"), "br");
	ck_assert_uint_eq(rs.body_len, 8192);
	ck_assert_mem_eq(rs.body, body, 8192);
	OK("br", v_content_length(&rs, 8192, E));
	resp_free(&rs);

	REQ(h, &s, "GET", "/nt", H_GZIP, &rs);
	OK("no-transform", v_identity(&rs, 200, body, 8192, E));
	ck_assert_str_eq(resp_hdr(&rs, "Cache-Control"), "no-transform");
	resp_free(&rs);
	REQ(h, &s, "GET", "/nt2", H_GZIP, &rs);
	OK("no-transform in a list", v_identity(&rs, 200, body, 8192, E));
	resp_free(&rs);

	st = srv_stats(&s);
	want[MHDGZ_SKIP_RANGE] = 2;
	want[MHDGZ_SKIP_ENCODED] = 1;
	want[MHDGZ_SKIP_NO_TRANSFORM] = 2;
	expect_reason_counts(&st, want);
	cl_free(h);
	srv_stop(&s);
	free(body);
}
END_TEST

/* min_size: the default 1024, and a configured one; below it identity with Vary. */
START_TEST(test_min_size)
{
	uint8_t *text = tu_payload(1024, TU_TEXT, 20);
	uint8_t rep[200];
	struct route rt[] = {
		{ .path = "/1023", .status = 200, .body = text, .body_len = 1023,
		  .hdr = { "Content-Type", "text/plain" } },
		{ .path = "/1024", .status = 200, .body = text, .body_len = 1024,
		  .hdr = { "Content-Type", "text/plain" } },
		{ .path = "/99", .status = 200, .body = rep, .body_len = 99,
		  .hdr = { "Content-Type", "text/plain" } },
		{ .path = "/100", .status = 200, .body = rep, .body_len = 100,
		  .hdr = { "Content-Type", "text/plain" } },
	};
	struct mhdgz_options o = opts_default();
	struct srv s;
	CURL *h = cl_new();
	struct resp rs;
	char err[512];

	memset(rep, 'a', sizeof rep);
	srv_start(&s, NULL, rt, N_ELEMS(rt), 0);
	REQ(h, &s, "GET", "/1023", H_GZIP, &rs);
	OK("1023", v_identity(&rs, 200, text, 1023, E));
	OK("1023", v_vary_ae(&rs, NULL, E));
	resp_free(&rs);
	REQ(h, &s, "GET", "/1024", H_GZIP, &rs);
	OK("1024", v_gzip(&rs, 200, text, 1024, E));
	resp_free(&rs);
	REQ(h, &s, "GET", "/100", H_GZIP, &rs);
	OK("100 default", v_identity(&rs, 200, rep, 100, E));
	OK("100 default", v_vary_ae(&rs, NULL, E));
	resp_free(&rs);
	ck_assert_uint_eq(srv_stats(&s).reasons[MHDGZ_SKIP_SMALL], 2);
	srv_stop(&s);

	o.min_nbytes = 100;
	srv_start(&s, &o, rt, N_ELEMS(rt), 0);
	REQ(h, &s, "GET", "/99", H_GZIP, &rs);
	OK("99", v_identity(&rs, 200, rep, 99, E));
	OK("99", v_vary_ae(&rs, NULL, E));
	resp_free(&rs);
	REQ(h, &s, "GET", "/100", H_GZIP, &rs);
	OK("100", v_gzip(&rs, 200, rep, 100, E));
	resp_free(&rs);
	REQ(h, &s, "GET", "/1023", H_GZIP, &rs);
	OK("1023 min 100", v_gzip(&rs, 200, text, 1023, E));
	resp_free(&rs);
	srv_stop(&s);
	cl_free(h);
	free(text);
}
END_TEST

/* Random bytes do not shrink: the original goes out. */
START_TEST(test_incompressible)
{
	uint8_t *body = tu_payload(16384, TU_RANDOM, 21);
	struct route rt[] = {
		{ .path = "/r", .status = 200, .body = body, .body_len = 16384,
		  .hdr = { "Content-Type", "text/plain" } },
		{ .path = "/rs", .status = 200, .body = body, .body_len = 16384,
		  .hdr = { "Content-Type", "text/plain" }, .flags = RT_SHARED },
	};
	struct srv s;
	CURL *h = cl_new();
	struct resp rs;
	struct mhdgz_stats st;
	char err[512];

	srv_start(&s, NULL, rt, N_ELEMS(rt), 0);
	for (int i = 0; i < 3; i++) {
		REQ(h, &s, "GET", i ? "/rs" : "/r", H_GZIP, &rs);
		OK("random", v_identity(&rs, 200, body, 16384, E));
		resp_free(&rs);
	}
	st = srv_stats(&s);
	ck_assert_uint_eq(st.reasons[MHDGZ_SKIP_NOT_SMALLER], 3);
	ck_assert_uint_eq(st.compressed, 0);
	ck_assert_uint_eq(st.failures, 0);
	cl_free(h);
	srv_stop(&s);
	free(body);
}
END_TEST

struct type_case {
	const char *type; /* NULL: no Content-Type */
	int gzip;
};

static void
run_type_cases(const struct mhdgz_options *o, const struct type_case *tc, size_t n)
{
	uint8_t *body = tu_payload(8192, TU_TEXT, 22);
	struct route *rt = calloc(n, sizeof *rt);
	char(*paths)[32] = calloc(n, sizeof *paths);
	struct srv s;
	CURL *h = cl_new();
	struct resp rs;
	char err[512], ctx[160];

	ck_assert_ptr_nonnull(rt);
	ck_assert_ptr_nonnull(paths);
	for (size_t i = 0; i < n; i++) {
		snprintf(paths[i], sizeof paths[i], "/ct/%zu", i);
		rt[i].path = paths[i];
		rt[i].status = 200;
		rt[i].body = body;
		rt[i].body_len = 8192;
		rt[i].hdr[0] = "Content-Type";
		rt[i].hdr[1] = tc[i].type;
	}
	srv_start(&s, o, rt, n, 0);
	for (size_t i = 0; i < n; i++) {
		snprintf(ctx, sizeof ctx, "Content-Type '%s' (want %s)", tc[i].type,
			 tc[i].gzip ? "gzip" : "identity");
		REQ(h, &s, "GET", paths[i], H_GZIP, &rs);
		if (tc[i].gzip)
			OK(ctx, v_gzip(&rs, 200, body, 8192, E));
		else
			OK(ctx, v_identity(&rs, 200, body, 8192, E));
		ck_assert_str_eq(resp_hdr(&rs, "Content-Type"), tc[i].type);
		resp_free(&rs);
	}
	ck_assert_uint_eq(s.errors, 0);
	cl_free(h);
	srv_stop(&s);
	free(paths);
	free(rt);
	free(body);
}

/* The default lists: parameters and case ignored. */
START_TEST(test_content_types_default)
{
	static const struct type_case tc[] = {
		{ "text/html; charset=utf-8", 1 },
		{ "text/plain", 1 },
		{ "text/css", 1 },
		{ "text/csv", 1 },
		{ "TEXT/HTML", 1 },
		{ "Text/Plain;Charset=UTF-8", 1 },
		{ "APPLICATION/JSON", 1 },
		{ "application/json; charset=utf-8", 1 },
		{ "application/vnd.api+json", 1 },
		{ "application/problem+json", 1 },
		{ "application/javascript", 1 },
		{ "application/xml", 1 },
		{ "application/atom+xml", 1 },
		{ "image/svg+xml", 1 },
		{ "application/wasm", 1 },
		{ "image/png", 0 },
		{ "IMAGE/PNG", 0 },
		{ "image/jpeg", 0 },
		{ "image/webp", 0 },
		{ "image/avif", 0 },
		{ "audio/mpeg", 0 },
		{ "video/mp4", 0 },
		{ "video/MP4; codecs=\"avc1\"", 0 },
		{ "application/zip", 0 },
		{ "application/gzip", 0 },
		{ "application/zstd", 0 },
		{ "font/woff2", 0 },
		{ "text/html;charset=utf-8", 1 },
		{ "application/json ; charset=utf-8", 1 },
		{ "application/octet-stream", 0 }, /* not text-like: not on the allow list */
	};

	run_type_cases(NULL, tc, N_ELEMS(tc));
}
END_TEST

/* Replaced lists with wildcards; the skip list is checked first. */
START_TEST(test_content_types_custom)
{
	static const char *const compress[] = { "text/*", "*/*+json", "application/x-custom",
						NULL };
	static const char *const skip[] = { "text/csv", "application/problem+json", NULL };
	static const struct type_case tc[] = {
		{ "text/plain", 1 },
		{ "TEXT/Markdown; charset=x", 1 },
		{ "text/csv", 0 },
		{ "text/CSV; header=present", 0 },
		{ "application/vnd.api+json", 1 },
		{ "application/problem+json", 0 },
		{ "application/x-custom", 1 },
		{ "application/x-custom2", 0 },
		{ "application/json", 0 }, /* not in the replaced list */
		{ "application/javascript", 0 },
		{ "image/svg+xml", 0 },
		{ "image/png", 0 },
	};
	static const char *const all[] = { "*/*", NULL };
	static const struct type_case tc3[] = {
		{ "application/octet-stream", 1 }, { "text/x-foo", 1 },  { "application/x-bar", 1 },
		{ "image/png", 0 },                { "video/mp4", 0 },   { "application/zip", 0 },
	};
	static const char *const skip_images[] = { "image/*", NULL };
	static const struct type_case tc2[] = {
		{ "image/svg+xml", 0 }, { "text/html", 1 },  { "application/json", 1 },
		{ "image/png", 0 },     { "video/mp4", 0 }, { "application/zip", 0 },
	};
	struct mhdgz_options o = opts_default();

	o.compress_types = compress;
	o.skip_types = skip;
	run_type_cases(&o, tc, N_ELEMS(tc));
	o = opts_default();
	o.skip_types = skip_images;
	run_type_cases(&o, tc2, N_ELEMS(tc2));
	/* Everything except the default skip list. */
	o = opts_default();
	o.compress_types = all;
	run_type_cases(&o, tc3, N_ELEMS(tc3));
}
END_TEST

/* No Content-Type: a text-like body is compressed, a binary one is not. */
START_TEST(test_sniff)
{
	uint8_t *text = tu_payload(8192, TU_TEXT, 23);
	uint8_t *json = tu_payload(8192, TU_JSON, 23);
	uint8_t *bin = malloc(8192);
	static const char html[] =
		"<!DOCTYPE html>\n<html><head><title>t</title></head><body>"
		"<p>hello hello hello hello hello hello hello hello hello hello</p>"
		"<p>hello hello hello hello hello hello hello hello hello hello</p>"
		"<p>hello hello hello hello hello hello hello hello hello hello</p>"
		"<p>hello hello hello hello hello hello hello hello hello hello</p>"
		"<p>hello hello hello hello hello hello hello hello hello hello</p>"
		"<p>hello hello hello hello hello hello hello hello hello hello</p>"
		"<p>hello hello hello hello hello hello hello hello hello hello</p>"
		"<p>hello hello hello hello hello hello hello hello hello hello</p>"
		"<p>hello hello hello hello hello hello hello hello hello hello</p>"
		"<p>hello hello hello hello hello hello hello hello hello hello</p>"
		"<p>hello hello hello hello hello hello hello hello hello hello</p>"
		"<p>hello hello hello hello hello hello hello hello hello hello</p>"
		"<p>hello hello hello hello hello hello hello hello hello hello</p>"
		"<p>hello hello hello hello hello hello hello hello hello hello</p>"
		"<p>hello hello hello hello hello hello hello hello hello hello</p>"
		"<p>hello hello hello hello hello hello hello hello hello hello</p>"
		"<p>hello hello hello hello hello hello hello hello hello hello</p>"
		"</body></html>\n";
	struct route rt[] = {
		{ .path = "/text", .status = 200, .body = text, .body_len = 8192 },
		{ .path = "/json", .status = 200, .body = json, .body_len = 8192 },
		{ .path = "/html", .status = 200, .body = html, .body_len = sizeof html - 1 },
		{ .path = "/bin", .status = 200, .body = bin, .body_len = 8192 },
	};
	struct srv s;
	CURL *h = cl_new();
	struct resp rs;
	struct mhdgz_stats st;
	char err[512];

	ck_assert_ptr_nonnull(bin);
	eu_fill_binary(bin, 8192);
	srv_start(&s, NULL, rt, N_ELEMS(rt), 0);
	REQ(h, &s, "GET", "/text", H_GZIP, &rs);
	OK("text", v_gzip(&rs, 200, text, 8192, E));
	resp_free(&rs);
	REQ(h, &s, "GET", "/json", H_GZIP, &rs);
	OK("json", v_gzip(&rs, 200, json, 8192, E));
	resp_free(&rs);
	REQ(h, &s, "GET", "/html", H_GZIP, &rs);
	OK("html", v_gzip(&rs, 200, html, sizeof html - 1, E));
	resp_free(&rs);
	REQ(h, &s, "GET", "/bin", H_GZIP, &rs);
	OK("binary", v_identity(&rs, 200, bin, 8192, E));
	resp_free(&rs);
	st = srv_stats(&s);
	ck_assert_uint_eq(st.reasons[MHDGZ_COMPRESSED], 3);
	ck_assert_uint_eq(st.reasons[MHDGZ_SKIP_TYPE], 1);
	cl_free(h);
	srv_stop(&s);
	free(text);
	free(json);
	free(bin);
}
END_TEST

/* mhdgz_response_set_identity(): identity, unchanged, no Vary. */
START_TEST(test_opt_out)
{
	uint8_t *body = tu_payload(8192, TU_TEXT, 24);
	struct route rt[] = {
		{ .path = "/o", .status = 200, .body = body, .body_len = 8192,
		  .hdr = { "Content-Type", "text/plain", "ETag", "\"o\"" }, .flags = RT_IDENTITY },
		{ .path = "/os", .status = 200, .body = body, .body_len = 8192,
		  .hdr = { "Content-Type", "text/plain" }, .flags = RT_IDENTITY | RT_SHARED },
	};
	struct srv s;
	CURL *h = cl_new();
	struct resp rs;
	char err[512];

	srv_start(&s, NULL, rt, N_ELEMS(rt), 0);
	for (int i = 0; i < 4; i++) {
		REQ(h, &s, "GET", (i & 1) ? "/os" : "/o", i < 2 ? H_GZIP : H_NONE, &rs);
		OK("opt-out", v_identity(&rs, 200, body, 8192, E));
		ck_assert_msg(resp_hdr(&rs, "Vary") == NULL, "opt-out: Vary '%s'",
			      resp_hdr(&rs, "Vary"));
		if (!(i & 1))
			OK("opt-out", v_etag(&rs, "\"o\"", E));
		resp_free(&rs);
	}
	ck_assert_uint_eq(srv_stats(&s).reasons[MHDGZ_SKIP_OPT_OUT], 4);
	ck_assert_uint_eq(s.errors, 0);
	cl_free(h);
	srv_stop(&s);
	free(body);
}
END_TEST

/* A response not created by mhdgz is queued unchanged. */
START_TEST(test_untracked)
{
	uint8_t *body = tu_payload(8192, TU_TEXT, 25);
	struct route rt[] = {
		{ .path = "/u", .status = 200, .body = body, .body_len = 8192,
		  .hdr = { "Content-Type", "text/plain", "ETag", "\"u\"" }, .flags = RT_UNTRACKED },
	};
	struct srv s;
	CURL *h = cl_new();
	struct resp rs;
	char err[512];

	srv_start(&s, NULL, rt, N_ELEMS(rt), 0);
	REQ(h, &s, "GET", "/u", H_GZIP, &rs);
	OK("untracked", v_identity(&rs, 200, body, 8192, E));
	OK("untracked", v_etag(&rs, "\"u\"", E));
	ck_assert_msg(resp_hdr(&rs, "Vary") == NULL, "untracked: Vary '%s'", resp_hdr(&rs, "Vary"));
	resp_free(&rs);
	ck_assert_uint_eq(srv_stats(&s).reasons[MHDGZ_SKIP_UNTRACKED], 1);
	ck_assert_uint_eq(srv_stats(&s).responses, 1);
	cl_free(h);
	srv_stop(&s);
	free(body);
}
END_TEST

/* One response, queued 1,000 times on one keep-alive connection: one compression. */
START_TEST(test_shared_1000)
{
	enum { N = 1000, LEN = 32768 };
	uint8_t *body = tu_payload(LEN, TU_JSON, 26);
	struct route rt[] = {
		{ .path = "/s", .status = 200, .body = body, .body_len = LEN,
		  .hdr = { "Content-Type", "application/json" }, .flags = RT_SHARED },
	};
	struct srv s;
	CURL *h = cl_new();
	struct resp rs;
	struct mhdgz_stats st;
	char err[512], ctx[64];
	size_t gz_len = 0;

	srv_start(&s, NULL, rt, N_ELEMS(rt), 0);
	for (int i = 0; i < N; i++) {
		snprintf(ctx, sizeof ctx, "request %d", i);
		REQ(h, &s, "GET", "/s", H_GZIP, &rs);
		OK(ctx, v_gzip(&rs, 200, body, LEN, E));
		if (i == 0)
			gz_len = rs.body_len;
		ck_assert_msg(rs.body_len == gz_len, "%s: %zu bytes, first was %zu", ctx,
			      rs.body_len, gz_len);
		if (i > 0)
			ck_assert_msg(rs.num_connects == 0, "%s: new connection", ctx);
		resp_free(&rs);
	}
	st = srv_stats(&s);
	ck_assert_uint_eq(st.responses, N);
	ck_assert_uint_eq(st.compressions, 1);
	ck_assert_uint_eq(st.cache_hits, N - 1);
	ck_assert_uint_eq(st.compressed, N);
	ck_assert_uint_eq(st.reasons[MHDGZ_COMPRESSED], N);
	ck_assert_uint_eq(st.bytes_in, (uint64_t)N * LEN);
	ck_assert_uint_eq(st.bytes_out, (uint64_t)N * gz_len);
	ck_assert_uint_eq(st.failures, 0);
	cl_free(h);
	srv_stop(&s);
	free(body);
}
END_TEST

/* MHD_RESPMEM_PERSISTENT, MUST_COPY and MUST_FREE, per-request and shared (loop over modes). */
START_TEST(test_memory_modes)
{
	static const enum MHD_ResponseMemoryMode modes[] = {
		MHD_RESPMEM_PERSISTENT, MHD_RESPMEM_MUST_COPY, MHD_RESPMEM_MUST_FREE
	};
	uint8_t *body = tu_payload(10000, TU_TEXT, 27);
	uint8_t *small = tu_payload(500, TU_TEXT, 28);
	struct route rt[] = {
		{ .path = "/m", .status = 200, .body = body, .body_len = 10000, .mode = modes[_i],
		  .hdr = { "Content-Type", "text/plain" } },
		{ .path = "/ms", .status = 200, .body = body, .body_len = 10000, .mode = modes[_i],
		  .hdr = { "Content-Type", "text/plain" }, .flags = RT_SHARED },
		{ .path = "/small", .status = 200, .body = small, .body_len = 500,
		  .mode = modes[_i], .hdr = { "Content-Type", "text/plain" } },
		{ .path = "/empty", .status = 200, .body = NULL, .body_len = 0, .mode = modes[_i],
		  .hdr = { "Content-Type", "text/plain" } },
	};
	struct srv s;
	CURL *h = cl_new();
	struct resp rs;
	char err[512], ctx[64];

	srv_start(&s, NULL, rt, N_ELEMS(rt), 0);
	for (int n = 0; n < 3; n++) {
		for (int p = 0; p < 2; p++) {
			const char *path = p ? "/ms" : "/m";

			snprintf(ctx, sizeof ctx, "mode %d %s gzip", _i, path);
			REQ(h, &s, "GET", path, H_GZIP, &rs);
			OK(ctx, v_gzip(&rs, 200, body, 10000, E));
			resp_free(&rs);
			snprintf(ctx, sizeof ctx, "mode %d %s identity", _i, path);
			REQ(h, &s, "GET", path, H_NONE, &rs);
			OK(ctx, v_identity(&rs, 200, body, 10000, E));
			resp_free(&rs);
		}
		REQ(h, &s, "GET", "/small", H_GZIP, &rs);
		OK("small", v_identity(&rs, 200, small, 500, E));
		resp_free(&rs);
		REQ(h, &s, "GET", "/empty", H_GZIP, &rs);
		OK("empty", v_identity(&rs, 200, "", 0, E));
		resp_free(&rs);
	}
	ck_assert_uint_eq(srv_stats(&s).reasons[MHDGZ_SKIP_EMPTY], 3);
	ck_assert_uint_eq(s.errors, 0);
	cl_free(h);
	srv_stop(&s);
	free(body);
	free(small);
}
END_TEST

/* Awkward and malformed Accept-Encoding fields on the wire. */
START_TEST(test_bad_accept_encoding)
{
	size_t clen = 64 * 1024;
	char *commas = malloc(clen + 32);
	uint8_t *body = tu_payload(8192, TU_TEXT, 29);
	struct route rt[] = {
		{ .path = "/t", .status = 200, .body = body, .body_len = 8192,
		  .hdr = { "Content-Type", "text/plain" } },
	};
	struct {
		const char *h[3];
		int gzip;
	} cases[] = {
		{ { NULL }, 0 }, /* [0]: 64 KiB of commas, filled in below */
		{ { "Accept-Encoding: gzip;q=abc" }, 0 },
		{ { "Accept-Encoding: gzip;q=-1" }, 0 },
		{ { "Accept-Encoding: gzip;q=1.0001" }, 0 },
		{ { "Accept-Encoding: gzip;q=0.0001" }, 0 },
		{ { "Accept-Encoding: gzip;q=2" }, 0 },
		{ { "Accept-Encoding: gzip;q=abc, *;q=0.2" }, 1 },
		{ { "Accept-Encoding:\tgzip\t;\tq=0.5\t" }, 1 },
		{ { "Accept-Encoding: \t , ,\tgzip\t, ," }, 1 },
		{ { "Accept-Encoding: GZIP;Q=1" }, 1 },
		{ { "Accept-Encoding: x-gzip" }, 1 },
		{ { "Accept-Encoding: *" }, 1 },
		{ { "Accept-Encoding: deflate", "Accept-Encoding: gzip;q=0.5" }, 1 },
		{ { "Accept-Encoding: gzip;q=0", "Accept-Encoding: *" }, 0 },
		{ { "Accept-Encoding: br;q=1, identity;q=0.5" }, 0 },
		{ { "Accept-Encoding: ;;;,,;q=;=;" }, 0 },
	};
	struct srv s;
	CURL *h = cl_new();
	struct resp rs;
	char err[512], ctx[160];

	ck_assert_ptr_nonnull(commas);
	strcpy(commas, "Accept-Encoding: ");
	memset(commas + 17, ',', clen);
	commas[17 + clen] = '\0';
	cases[0].h[0] = commas;
	srv_start(&s, NULL, rt, N_ELEMS(rt), 0);
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < N_ELEMS(cases); i++) {
			snprintf(ctx, sizeof ctx, "case %zu '%.60s' '%.40s'", i, cases[i].h[0],
				 cases[i].h[1] ? cases[i].h[1] : "");
			REQ(h, &s, "GET", "/t", cases[i].h, &rs);
			if (cases[i].gzip)
				OK(ctx, v_gzip(&rs, 200, body, 8192, E));
			else
				OK(ctx, v_identity(&rs, 200, body, 8192, E));
			OK(ctx, v_vary_ae(&rs, NULL, E));
			resp_free(&rs);
		}
	}
	cl_free(h);
	srv_stop(&s);
	free(body);
	free(commas);
}
END_TEST

/* Exact counters after a known sequence of requests. */
START_TEST(test_stats_sequence)
{
	uint8_t *text = tu_payload(5000, TU_TEXT, 30);
	uint8_t *rnd = tu_payload(6000, TU_RANDOM, 30);
	struct route rt[] = {
		{ .path = "/g", .status = 200, .body = text, .body_len = 5000,
		  .hdr = { "Content-Type", "text/plain" } },
		{ .path = "/sm", .status = 200, .body = text, .body_len = 500,
		  .hdr = { "Content-Type", "text/plain" } },
		{ .path = "/png", .status = 200, .body = text, .body_len = 4000,
		  .hdr = { "Content-Type", "image/png" } },
		{ .path = "/nt", .status = 200, .body = text, .body_len = 4000,
		  .hdr = { "Content-Type", "text/plain", "Cache-Control", "no-transform" } },
		{ .path = "/rnd", .status = 200, .body = rnd, .body_len = 6000,
		  .hdr = { "Content-Type", "text/plain" } },
		{ .path = "/204", .status = 204, .body = NULL, .body_len = 0 },
		{ .path = "/br", .status = 200, .body = text, .body_len = 3000,
		  .hdr = { "Content-Type", "text/plain", "Content-Encoding", "br" } },
		{ .path = "/206", .status = 206, .body = text, .body_len = 3000,
		  .hdr = { "Content-Type", "text/plain", "Content-Range", "bytes 0-2999/5000" } },
		{ .path = "/opt", .status = 200, .body = text, .body_len = 3000,
		  .hdr = { "Content-Type", "text/plain" }, .flags = RT_IDENTITY },
		{ .path = "/u", .status = 200, .body = text, .body_len = 3000,
		  .hdr = { "Content-Type", "text/plain" }, .flags = RT_UNTRACKED },
		{ .path = "/e", .status = 200, .body = NULL, .body_len = 0,
		  .hdr = { "Content-Type", "text/plain" } },
	};
	static const struct {
		const char *path;
		int ae;
		enum mhdgz_reason why;
	} seq[] = {
		{ "/g", 1, MHDGZ_COMPRESSED },
		{ "/g", 1, MHDGZ_COMPRESSED },
		{ "/g", 1, MHDGZ_COMPRESSED },
		{ "/g", 0, MHDGZ_SKIP_NOT_ACCEPTED },
		{ "/g", 0, MHDGZ_SKIP_NOT_ACCEPTED },
		{ "/sm", 1, MHDGZ_SKIP_SMALL },
		{ "/png", 1, MHDGZ_SKIP_TYPE },
		{ "/nt", 1, MHDGZ_SKIP_NO_TRANSFORM },
		{ "/rnd", 1, MHDGZ_SKIP_NOT_SMALLER },
		{ "/204", 1, MHDGZ_SKIP_STATUS },
		{ "/br", 1, MHDGZ_SKIP_ENCODED },
		{ "/206", 1, MHDGZ_SKIP_RANGE },
		{ "/opt", 1, MHDGZ_SKIP_OPT_OUT },
		{ "/u", 1, MHDGZ_SKIP_UNTRACKED },
		{ "/e", 1, MHDGZ_SKIP_EMPTY },
	};
	struct srv s;
	CURL *h = cl_new();
	struct resp rs;
	struct mhdgz_stats st;
	uint64_t want[MHDGZ_REASON_COUNT] = { 0 };
	uint64_t in = 0, out = 0;

	srv_start(&s, NULL, rt, N_ELEMS(rt), 0);
	for (size_t i = 0; i < N_ELEMS(seq); i++) {
		REQ(h, &s, "GET", seq[i].path, seq[i].ae ? H_GZIP : H_NONE, &rs);
		want[seq[i].why]++;
		st = srv_stats(&s);
		expect_reason_counts(&st, want);
		ck_assert_uint_eq(st.responses, i + 1);
		resp_free(&rs);
	}
	st = srv_stats(&s);
	ck_assert_uint_eq(st.compressed, 3);
	ck_assert_uint_eq(st.cache_hits, 0);
	ck_assert_uint_eq(st.failures, 0);
	/* Three gzip bodies built; the random one may count as a fourth
	 * (built, then discarded as not smaller): the header leaves it open. */
	ck_assert_msg(st.compressions == 3 || st.compressions == 4, "compressions %llu",
		      (unsigned long long)st.compressions);
	srv_stop(&s);

	/* Bytes, on a sequence where their meaning is unambiguous. */
	srv_start(&s, NULL, rt, N_ELEMS(rt), 0);
	for (int i = 0; i < 4; i++) {
		REQ(h, &s, "GET", "/g", (i & 1) ? H_NONE : H_GZIP, &rs);
		in += 5000;
		out += rs.body_len;
		resp_free(&rs);
	}
	st = srv_stats(&s);
	ck_assert_uint_eq(st.bytes_in, in);
	ck_assert_uint_eq(st.bytes_out, out);
	ck_assert_uint_eq(st.compressions, 2);
	srv_stop(&s);
	cl_free(h);
	free(text);
	free(rnd);
}
END_TEST

/*
 * Allocation failures during requests (loop: backend and pooled/unpooled
 * x PERSISTENT/MUST_COPY/MUST_FREE). The counting allocator is installed
 * while nothing is live, then re-armed before each request so that its
 * k-th allocation fails, for k = 1, 2, ... until a request completes
 * without reaching the k-th allocation. Every response must be the exact
 * identity body or gzip that decodes to it (or a 500 from the application
 * when creating the response itself failed); the counters must say so;
 * nothing may leak.
 */
START_TEST(test_faults)
{
	static const enum MHD_ResponseMemoryMode modes[] = {
		MHD_RESPMEM_PERSISTENT, MHD_RESPMEM_MUST_COPY, MHD_RESPMEM_MUST_FREE
	};
	uint8_t *body = tu_payload(30000, TU_TEXT, 31);
	struct route rt[] = {
		{ .path = "/f", .status = 200, .body = body, .body_len = 30000,
		  .mode = modes[_i % 3], .hdr = { "Content-Type", "text/plain", "ETag", "\"f\"" } },
	};
	struct mhdgz_options o = opts_default();
	struct srv s;
	CURL *h = cl_new();
	struct resp rs;
	struct mhdgz_stats st0, st1;
	char err[512], ctx[64];
	uint64_t k, fired_count = 0, errors = 0;
	static const struct {
		enum mhdgz_backend be;
		unsigned int flags;
	} cfg[] = {
		{ MHDGZ_BACKEND_DEFAULT, 0 }, { MHDGZ_BACKEND_DEFAULT, MHDGZ_F_NO_POOL },
		{ MHDGZ_BACKEND_ZLIB, 0 },    { MHDGZ_BACKEND_ZLIB, MHDGZ_F_NO_POOL },
		{ MHDGZ_BACKEND_ISAL, MHDGZ_F_NO_POOL },
	};

	if (!mhdgz_backend_available(cfg[_i / 3].be)) {
		cl_free(h);
		free(body);
		return;
	}
	o.backend = cfg[_i / 3].be;
	o.flags = cfg[_i / 3].flags;
	tu_alloc_install(0);
	srv_start(&s, &o, rt, N_ELEMS(rt), 0);
	for (k = 1; k <= 2000; k++) {
		unsigned long cf0 = s.create_failures;
		int fired;

		snprintf(ctx, sizeof ctx, "k=%llu", (unsigned long long)k);
		st0 = srv_stats(&s);
		tu_alloc_fail_at(k);
		REQ(h, &s, "GET", "/f", H_GZIP, &rs);
		fired = tu_alloc_failed();
		tu_alloc_fail_at(0);
		st1 = srv_stats(&s);
		fired_count += fired != 0;
		if (s.create_failures != cf0) {
			ck_assert_msg(fired, "%s: creation failed without an injected failure", ctx);
			ck_assert_int_eq(rs.status, 500);
			ck_assert_uint_eq(st1.responses, st0.responses);
		} else if (resp_hdr(&rs, "Content-Encoding")) {
			OK(ctx, v_gzip(&rs, 200, body, 30000, E));
			OK(ctx, v_etag(&rs, "W/\"f\"", E));
			ck_assert_uint_eq(st1.responses, st0.responses + 1);
			ck_assert_uint_eq(st1.compressed, st0.compressed + 1);
			ck_assert_uint_eq(st1.reasons[MHDGZ_COMPRESSED],
					  st0.reasons[MHDGZ_COMPRESSED] + 1);
			ck_assert_uint_eq(st1.failures, st0.failures);
		} else {
			OK(ctx, v_identity(&rs, 200, body, 30000, E));
			OK(ctx, v_etag(&rs, "\"f\"", E));
			ck_assert_msg(fired, "%s: identity without an injected failure", ctx);
			ck_assert_uint_eq(st1.responses, st0.responses + 1);
			ck_assert_uint_eq(st1.reasons[MHDGZ_SKIP_ERROR],
					  st0.reasons[MHDGZ_SKIP_ERROR] + 1);
			ck_assert_uint_eq(st1.failures, st0.failures + 1);
			errors++;
		}
		resp_free(&rs);
		if (!fired)
			break;
	}
	ck_assert_msg(k <= 2000, "still failing after 2000 allocations per request");
	ck_assert_msg(fired_count > 0, "no injected failure fired");
	ck_assert_msg(errors > 0 || s.create_failures > 0, "no failure was observable");
	st1 = srv_stats(&s);
	ck_assert_uint_eq(st1.failures, st1.reasons[MHDGZ_SKIP_ERROR]);
	ck_assert_uint_eq(st1.reasons[MHDGZ_SKIP_ERROR], errors);
	/* After the storm, a normal request still compresses. */
	REQ(h, &s, "GET", "/f", H_GZIP, &rs);
	OK("after", v_gzip(&rs, 200, body, 30000, E));
	resp_free(&rs);
	ck_assert_uint_eq(s.errors, 0);
	cl_free(h);
	srv_stop(&s);
	ck_assert_msg(tu_alloc_live() == 0, "%lld blocks leaked", (long long)tu_alloc_live());
	tu_alloc_uninstall();
	free(body);
}
END_TEST

/* Header names as the application happens to spell them: matching is
 * case-insensitive (RFC 9110 5.1), values of case-insensitive tokens too. */
START_TEST(test_header_case)
{
	uint8_t *body = tu_payload(8192, TU_TEXT, 33);
	struct route rt[] = {
		{ .path = "/lc", .status = 200, .body = body, .body_len = 8192,
		  .hdr = { "content-type", "text/plain", "etag", "\"lc\"", "vary", "origin",
			   "accept-ranges", "bytes" } },
		{ .path = "/nt", .status = 200, .body = body, .body_len = 8192,
		  .hdr = { "content-type", "text/plain", "cache-control", "NO-TRANSFORM" } },
		{ .path = "/ce", .status = 200, .body = body, .body_len = 8192,
		  .hdr = { "content-type", "text/plain", "content-encoding", "br" } },
		{ .path = "/cr", .status = 200, .body = body, .body_len = 8192,
		  .hdr = { "content-type", "text/plain", "content-range", "bytes 0-8191/9000" } },
		{ .path = "/png", .status = 200, .body = body, .body_len = 8192,
		  .hdr = { "CONTENT-TYPE", "IMAGE/PNG" } },
	};
	static const char *const origin[] = { "origin", NULL };
	struct srv s;
	CURL *h = cl_new();
	struct resp rs;
	struct mhdgz_stats st;
	char err[512];
	uint64_t want[MHDGZ_REASON_COUNT] = { 0 };

	srv_start(&s, NULL, rt, N_ELEMS(rt), 0);
	REQ(h, &s, "GET", "/lc", H_GZIP, &rs);
	OK("lowercase", v_gzip(&rs, 200, body, 8192, E));
	OK("lowercase", v_etag(&rs, "W/\"lc\"", E));
	OK("lowercase", v_vary_ae(&rs, origin, E));
	ck_assert_ptr_null(resp_hdr(&rs, "Accept-Ranges"));
	resp_free(&rs);
	REQ(h, &s, "GET", "/nt", H_GZIP, &rs);
	OK("no-transform", v_identity(&rs, 200, body, 8192, E));
	resp_free(&rs);
	REQ(h, &s, "GET", "/ce", H_GZIP, &rs);
	ck_assert_int_eq(resp_hdr_count(&rs, "Content-Encoding"), 1);
	ck_assert_str_eq(resp_hdr(&rs, "Content-Encoding"), "br");
	ck_assert_uint_eq(rs.body_len, 8192);
	resp_free(&rs);
	REQ(h, &s, "GET", "/cr", H_GZIP, &rs);
	OK("content-range", v_identity(&rs, 200, body, 8192, E));
	resp_free(&rs);
	REQ(h, &s, "GET", "/png", H_GZIP, &rs);
	OK("png", v_identity(&rs, 200, body, 8192, E));
	resp_free(&rs);
	st = srv_stats(&s);
	want[MHDGZ_COMPRESSED] = 1;
	want[MHDGZ_SKIP_NO_TRANSFORM] = 1;
	want[MHDGZ_SKIP_ENCODED] = 1;
	want[MHDGZ_SKIP_RANGE] = 1;
	want[MHDGZ_SKIP_TYPE] = 1;
	expect_reason_counts(&st, want);
	ck_assert_uint_eq(s.errors, 0);
	cl_free(h);
	srv_stop(&s);
	free(body);
}
END_TEST

/* Every backend at its edge and default levels x sizes, per-request and
 * shared: each gzip body decodes to the original (loop over configs). */
static const struct {
	enum mhdgz_backend be;
	int level;
	unsigned int flags;
} be_cfg[] = {
	{ MHDGZ_BACKEND_ZLIB, 1, 0 },       { MHDGZ_BACKEND_ZLIB, 6, 0 },
	{ MHDGZ_BACKEND_ZLIB, 9, MHDGZ_F_NO_POOL },
	{ MHDGZ_BACKEND_LIBDEFLATE, 1, 0 }, { MHDGZ_BACKEND_LIBDEFLATE, 6, 0 },
	{ MHDGZ_BACKEND_LIBDEFLATE, 12, MHDGZ_F_NO_POOL },
	{ MHDGZ_BACKEND_ISAL, 1, 0 }, { MHDGZ_BACKEND_ISAL, 2, 0 },
	{ MHDGZ_BACKEND_ISAL, 4, MHDGZ_F_NO_POOL },
};

START_TEST(test_backends)
{
	static const size_t sizes[] = { 1024, 65536 + 7, 1024 * 1024 + 3 };
	uint8_t *bodies[N_ELEMS(sizes)];
	struct route rt[2 * N_ELEMS(sizes)];
	char paths[2 * N_ELEMS(sizes)][32];
	struct mhdgz_options o = opts_default();
	struct srv s;
	CURL *h;
	struct resp rs;
	char err[512], ctx[128];

	if (!mhdgz_backend_available(be_cfg[_i].be))
		return;
	o.backend = be_cfg[_i].be;
	o.level = be_cfg[_i].level;
	o.flags = be_cfg[_i].flags;
	memset(rt, 0, sizeof rt);
	for (size_t i = 0; i < N_ELEMS(sizes); i++) {
		bodies[i] = tu_payload(sizes[i], (i & 1) ? TU_JSON : TU_TEXT, (uint32_t)(40 + i));
		for (int sh = 0; sh < 2; sh++) {
			struct route *r = &rt[2 * i + (size_t)sh];

			snprintf(paths[2 * i + (size_t)sh], sizeof paths[0], "/b/%zu/%d", i, sh);
			r->path = paths[2 * i + (size_t)sh];
			r->status = 200;
			r->body = bodies[i];
			r->body_len = sizes[i];
			r->hdr[0] = "Content-Type";
			r->hdr[1] = (i & 1) ? "application/json" : "text/plain";
			r->flags = sh ? RT_SHARED : 0;
		}
	}
	srv_start(&s, &o, rt, N_ELEMS(rt), 0);
	h = cl_new();
	for (int n = 0; n < 2; n++) {
		for (size_t i = 0; i < N_ELEMS(rt); i++) {
			snprintf(ctx, sizeof ctx, "%s level %d %s #%d", mhdgz_backend_name(o.backend),
				 o.level, rt[i].path, n);
			REQ(h, &s, "GET", rt[i].path, H_GZIP, &rs);
			OK(ctx, v_gzip(&rs, 200, rt[i].body, rt[i].body_len, E));
			resp_free(&rs);
		}
	}
	ck_assert_uint_eq(srv_stats(&s).failures, 0);
	cl_free(h);
	srv_stop(&s);
	for (size_t i = 0; i < N_ELEMS(sizes); i++)
		free(bodies[i]);
}
END_TEST

/* ===================================================================== */
/*                      Eight client threads at once                     */
/* ===================================================================== */

enum { TH_THREADS = 8, TH_REQS = 200, TH_KINDS = 9 };

struct th_ctx {
	struct srv *s;
	int id;
	const uint8_t *text, *json, *small;
	size_t shared_gz_len;
	uint64_t kinds[TH_KINDS];
	int failed;
	char err[512];
};

static void *
th_client(void *arg)
{
	struct th_ctx *c = arg;
	static const char *const inm_gz[] = { "Accept-Encoding: gzip", "If-None-Match: W/\"p\"",
					      NULL };
	CURL *h = curl_easy_init();
	struct resp rs;

	if (!h) {
		snprintf(c->err, sizeof c->err, "curl_easy_init");
		c->failed = 1;
		return NULL;
	}
	curl_easy_setopt(h, CURLOPT_TIMEOUT, EU_TIMEOUT_S);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_PROXY, "");
	curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(h, CURLOPT_HTTP_CONTENT_DECODING, 0L);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, cl_header_cb);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, cl_write_cb);
	/* First, all threads at once on a shared response nobody has
	 * compressed yet (the variant is built under contention). */
	cl_req(h, c->s->port, "GET", "/race", H_GZIP, &rs);
	if (v_gzip(&rs, 200, c->json, 24000, c->err, sizeof c->err) != 0)
		c->failed = 1;
	resp_free(&rs);
	for (int i = 0; i < TH_REQS && !c->failed; i++) {
		int kind = (i + c->id) % TH_KINDS, rc = 0;
		char e[400] = "";

		c->kinds[kind]++;
		switch (kind) {
		case 0: /* per-request gzip */
			cl_req(h, c->s->port, "GET", "/t", H_GZIP, &rs);
			rc = v_gzip(&rs, 200, c->text, 12000, e, sizeof e);
			break;
		case 1: /* per-request identity */
			cl_req(h, c->s->port, "GET", "/t", H_NONE, &rs);
			rc = v_identity(&rs, 200, c->text, 12000, e, sizeof e);
			if (!rc)
				rc = v_vary_ae(&rs, NULL, e, sizeof e);
			break;
		case 2: /* shared gzip */
			cl_req(h, c->s->port, "GET", "/s", H_GZIP, &rs);
			rc = v_gzip(&rs, 200, c->json, 24000, e, sizeof e);
			break;
		case 3: /* shared HEAD */
			cl_req(h, c->s->port, "HEAD", "/s", H_GZIP, &rs);
			rc = rs.rc != CURLE_OK || rs.status != 200 || rs.body_len != 0 ||
			     !resp_hdr(&rs, "Content-Encoding") ||
			     v_content_length(&rs, c->shared_gz_len, e, sizeof e) != 0;
			if (rc && !e[0])
				snprintf(e, sizeof e, "HEAD: rc %d status %ld body %zu CE %s",
					 (int)rs.rc, rs.status, rs.body_len,
					 resp_hdr(&rs, "Content-Encoding") ? "yes" : "no");
			break;
		case 4: /* type not compressed */
			cl_req(h, c->s->port, "GET", "/png", H_GZIP, &rs);
			rc = v_identity(&rs, 200, c->text, 12000, e, sizeof e);
			break;
		case 5: /* small */
			cl_req(h, c->s->port, "GET", "/small", H_GZIP, &rs);
			rc = v_identity(&rs, 200, c->small, 300, e, sizeof e);
			break;
		case 6: /* conditional: 304 */
			cl_req(h, c->s->port, "GET", "/p", inm_gz, &rs);
			rc = v_not_modified_gz(&rs, e, sizeof e);
			break;
		case 7: /* MUST_COPY gzip */
			cl_req(h, c->s->port, "GET", "/c", H_GZIP, &rs);
			rc = v_gzip(&rs, 200, c->text, 12000, e, sizeof e);
			break;
		default: /* MUST_FREE gzip */
			cl_req(h, c->s->port, "GET", "/f", H_GZIP, &rs);
			rc = v_gzip(&rs, 200, c->json, 24000, e, sizeof e);
			break;
		}
		if (rc) {
			snprintf(c->err, sizeof c->err, "thread %d request %d kind %d: %s", c->id, i,
				 kind, e);
			c->failed = 1;
		}
		resp_free(&rs);
	}
	curl_easy_cleanup(h);
	return NULL;
}

START_TEST(test_threads)
{
	uint8_t *text = tu_payload(12000, TU_TEXT, 32);
	uint8_t *json = tu_payload(24000, TU_JSON, 32);
	uint8_t *small = tu_payload(300, TU_TEXT, 32);
	struct route rt[] = {
		{ .path = "/t", .status = 200, .body = text, .body_len = 12000,
		  .hdr = { "Content-Type", "text/plain" } },
		{ .path = "/s", .status = 200, .body = json, .body_len = 24000,
		  .hdr = { "Content-Type", "application/json", "ETag", "\"s\"" },
		  .flags = RT_SHARED },
		{ .path = "/png", .status = 200, .body = text, .body_len = 12000,
		  .hdr = { "Content-Type", "image/png" } },
		{ .path = "/small", .status = 200, .body = small, .body_len = 300,
		  .hdr = { "Content-Type", "text/plain" } },
		{ .path = "/p", .status = 200, .body = text, .body_len = 12000,
		  .hdr = { "Content-Type", "text/plain", "ETag", "\"p\"" }, .flags = RT_PRECOND,
		  .etag = "\"p\"" },
		{ .path = "/c", .status = 200, .body = text, .body_len = 12000,
		  .mode = MHD_RESPMEM_MUST_COPY, .hdr = { "Content-Type", "text/plain" } },
		{ .path = "/f", .status = 200, .body = json, .body_len = 24000,
		  .mode = MHD_RESPMEM_MUST_FREE, .hdr = { "Content-Type", "application/json" } },
		{ .path = "/race", .status = 200, .body = json, .body_len = 24000,
		  .hdr = { "Content-Type", "application/json" }, .flags = RT_SHARED },
	};
	struct th_ctx ctx[TH_THREADS];
	pthread_t tid[TH_THREADS];
	struct srv s;
	CURL *h = cl_new();
	struct resp rs;
	struct mhdgz_stats st;
	uint64_t kinds[TH_KINDS] = { 0 }, want[MHDGZ_REASON_COUNT] = { 0 }, total;
	char err[512];
	size_t gz_len;

	/* Thread per connection: mhdgz is called from 8 threads at once. */
	srv_start(&s, NULL, rt, N_ELEMS(rt), MHD_USE_THREAD_PER_CONNECTION);
	/* Build the shared variant first, so the counters below are exact. */
	REQ(h, &s, "GET", "/s", H_GZIP, &rs);
	OK("prefetch", v_gzip(&rs, 200, json, 24000, E));
	gz_len = rs.body_len;
	resp_free(&rs);
	cl_free(h);
	for (int i = 0; i < TH_THREADS; i++) {
		memset(&ctx[i], 0, sizeof ctx[i]);
		ctx[i].s = &s;
		ctx[i].id = i;
		ctx[i].text = text;
		ctx[i].json = json;
		ctx[i].small = small;
		ctx[i].shared_gz_len = gz_len;
		ck_assert_int_eq(pthread_create(&tid[i], NULL, th_client, &ctx[i]), 0);
	}
	for (int i = 0; i < TH_THREADS; i++)
		pthread_join(tid[i], NULL);
	for (int i = 0; i < TH_THREADS; i++) {
		ck_assert_msg(!ctx[i].failed, "%s", ctx[i].err);
		for (int k = 0; k < TH_KINDS; k++)
			kinds[k] += ctx[i].kinds[k];
	}
	total = 0;
	for (int k = 0; k < TH_KINDS; k++)
		total += kinds[k];
	ck_assert_uint_eq(total, TH_THREADS * TH_REQS);
	/* prefetch + /race + the gzip kinds */
	want[MHDGZ_COMPRESSED] =
		1 + TH_THREADS + kinds[0] + kinds[2] + kinds[3] + kinds[7] + kinds[8];
	want[MHDGZ_SKIP_NOT_ACCEPTED] = kinds[1];
	want[MHDGZ_SKIP_TYPE] = kinds[4];
	want[MHDGZ_SKIP_SMALL] = kinds[5];
	want[MHDGZ_SKIP_STATUS] = kinds[6];
	st = srv_stats(&s);
	expect_reason_counts(&st, want);
	ck_assert_uint_eq(st.responses, total + 1 + TH_THREADS);
	ck_assert_uint_eq(st.compressed, want[MHDGZ_COMPRESSED]);
	/* /race is built once, or (if racing builds are allowed) up to once
	 * per thread; everything else is exact. A 304 of a fresh response
	 * with its body (kind 6) builds the gzip variant for the 200's
	 * Content-Length (libmicrohttpd 0.9.75 always sends one on a 304). */
	ck_assert_uint_ge(st.compressions, 2 + kinds[0] + kinds[6] + kinds[7] + kinds[8]);
	ck_assert_uint_le(st.compressions,
			  1 + TH_THREADS + kinds[0] + kinds[6] + kinds[7] + kinds[8]);
	ck_assert_uint_ge(st.cache_hits, kinds[2] + kinds[3]);
	ck_assert_uint_le(st.cache_hits, kinds[2] + kinds[3] + TH_THREADS - 1);
	ck_assert_uint_eq(st.failures, 0);
	ck_assert_uint_eq(s.errors, 0);
	srv_stop(&s);
	free(text);
	free(json);
	free(small);
}
END_TEST

Suite *
e2e_suite(void)
{
	Suite *s = suite_create("e2e");
	TCase *tc;

	tc = tcase_create("headers");
	tcase_set_timeout(tc, TH_TIMEOUT);
	tcase_add_test(tc, test_gzip_basic);
	tcase_add_test(tc, test_vary_merge);
	tcase_add_loop_test(tc, test_etag_policy, 0, 4);
	tcase_add_test(tc, test_not_accepted);
	tcase_add_test(tc, test_no_content_statuses);
	tcase_add_loop_test(tc, test_conditional, 0, 2);
	tcase_add_loop_test(tc, test_conditional_suffix, 0, 2);
	tcase_add_loop_test(tc, test_head, 0, 2);
	suite_add_tcase(s, tc);

	tc = tcase_create("decision");
	tcase_set_timeout(tc, TH_TIMEOUT);
	tcase_add_test(tc, test_never_compressed);
	tcase_add_test(tc, test_min_size);
	tcase_add_test(tc, test_incompressible);
	tcase_add_test(tc, test_content_types_default);
	tcase_add_test(tc, test_content_types_custom);
	tcase_add_test(tc, test_sniff);
	tcase_add_test(tc, test_opt_out);
	tcase_add_test(tc, test_untracked);
	tcase_add_test(tc, test_bad_accept_encoding);
	tcase_add_test(tc, test_header_case);
	tcase_add_loop_test(tc, test_backends, 0, (int)N_ELEMS(be_cfg));
	suite_add_tcase(s, tc);

	tc = tcase_create("lifecycle");
	tcase_set_timeout(tc, TH_TIMEOUT);
	tcase_add_test(tc, test_shared_1000);
	tcase_add_loop_test(tc, test_memory_modes, 0, 3);
	tcase_add_test(tc, test_stats_sequence);
	tcase_add_loop_test(tc, test_faults, 0, 15);
	tcase_add_test(tc, test_threads);
	suite_add_tcase(s, tc);
	return s;
}
