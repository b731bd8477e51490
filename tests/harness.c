/* harness.c: the one HTTP test harness: a libmicrohttpd daemon on 127.0.0.1, a libcurl client, a raw-socket client, checks. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "hnd_handle.h" /* first: mhdgz.h as the library sees it; the pools */
#include "harness.h"
#include "info.h"
#include "testutil.h"

/* Idle connections are closed by the daemon after this many seconds, so
 * a test that leaves one behind cannot hang MHD_stop_daemon for long. */
#define TH_CONN_TIMEOUT_S 30
/* Request header space on a site's daemon, bytes: the 64 KiB
 * Accept-Encoding test needs more than libmicrohttpd's 32 KiB default. */
#define TH_SITE_CONN_MEMORY (512u * 1024)

const char *const th_h_gzip[] = { "Accept-Encoding: gzip", NULL };

/* ===================================================================== */
/*                               Server                                  */
/* ===================================================================== */

static enum MHD_Result
th_access(void *cls, struct MHD_Connection *c, const char *url, const char *method,
	  const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls)
{
	static int marker;
	struct th_server *s = cls;

	(void)version;
	(void)upload_data;
	/* First call: headers only. Answering on the second keeps the
	 * connection alive in libmicrohttpd 0.9.75. */
	if (*con_cls != &marker) {
		*con_cls = &marker;
		return MHD_YES;
	}
	if (*upload_data_size > 0) {
		*upload_data_size = 0;
		return MHD_YES;
	}
	return s->route(s, c, url, method);
}

struct MHD_Daemon *
th_daemon_start(const struct th_daemon_opts *o, MHD_AccessHandlerCallback access, void *cls,
		MHD_RequestCompletedCallback done, void *done_cls, uint16_t *port_ret)
{
	struct sockaddr_in sa;
	const union MHD_DaemonInfo *di;
	struct MHD_Daemon *d;
	unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | o->mhd_flags;
	unsigned int timeout = o->idle_timeout_s ? o->idle_timeout_s : TH_CONN_TIMEOUT_S;

	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_port = 0;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	/* MHD_OPTION_ARRAY keeps one call whatever subset is set. */
	{
		struct MHD_OptionItem opt[5];
		int n = 0;

		opt[n++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_TIMEOUT, timeout, NULL };
		if (o->pool_threads)
			opt[n++] = (struct MHD_OptionItem){ MHD_OPTION_THREAD_POOL_SIZE,
							    (intptr_t)o->pool_threads, NULL };
		if (o->conn_memory_nbytes)
			opt[n++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_MEMORY_LIMIT,
							    (intptr_t)o->conn_memory_nbytes, NULL };
		if (done)
			opt[n++] = (struct MHD_OptionItem){ MHD_OPTION_NOTIFY_COMPLETED,
							    (intptr_t)done, done_cls };
		opt[n] = (struct MHD_OptionItem){ MHD_OPTION_END, 0, NULL };
		d = MHD_start_daemon(flags, 0, NULL, NULL, access, cls, MHD_OPTION_SOCK_ADDR,
				     (struct sockaddr *)&sa, MHD_OPTION_ARRAY, opt, MHD_OPTION_END);
	}
	ck_assert_msg(d != NULL, "MHD_start_daemon failed");
	di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	ck_assert(di != NULL && di->port != 0);
	*port_ret = di->port;
	return d;
}

void
th_start_ex(struct th_server *s, struct mhdgz *gz, const struct th_daemon_opts *o,
	    th_route_fn route, void *cls)
{
	s->gz = gz;
	s->route = route;
	s->cls = cls;
	s->d = th_daemon_start(o, th_access, s, NULL, NULL, &s->port);
}

void
th_start(struct th_server *s, struct mhdgz *gz, unsigned int threads, th_route_fn route, void *cls)
{
	struct th_daemon_opts o = { .mhd_flags = threads > 0 ? MHD_USE_POLL : MHD_USE_AUTO,
				    .pool_threads = threads };

	th_start_ex(s, gz, &o, route, cls);
}

void
th_stop(struct th_server *s)
{
	if (s->d) {
		MHD_stop_daemon(s->d);
		s->d = NULL;
	}
}

struct mhdgz_options
th_opts(void)
{
	struct mhdgz_options o;

	memset(&o, 0, sizeof o);
	o.size = sizeof o;
	return o;
}

struct mhdgz *
th_gz_new(enum mhdgz_backend backend, int level, size_t min_nbytes)
{
	struct mhdgz_options o = th_opts();
	struct mhdgz *gz = NULL;
	int rc;

	o.gzip.backend = backend;
	o.gzip.level = level;
	o.min_nbytes = min_nbytes;
	rc = mhdgz_new(&o, &gz);
	ck_assert_msg(rc == 0, "mhdgz_new(%s, %d): %s", tu_backend_name(backend), level,
		      mhdgz_strerror(rc));
	return gz;
}

/* ---------------- A server answering from a table of routes ---------- */

static struct MHD_Response *
site_make(struct th_site *s, const struct th_route *rt)
{
	struct MHD_Response *r = NULL;
	size_t len = rt->body_len;
	uint8_t *tmp;

	if (rt->flags & TH_RT_UNTRACKED) {
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
		/* MUST_FREE: the response owns tmp now; on failure, as with
		 * libmicrohttpd, we still do. */
		if (!r && rt->mode == MHD_RESPMEM_MUST_FREE)
			free(tmp);
	}
	if (!r)
		return NULL;
	for (int i = 0; rt->hdr[i]; i += 2)
		if (MHD_add_response_header(r, rt->hdr[i], rt->hdr[i + 1]) != MHD_YES)
			atomic_fetch_add(&s->errors, 1);
	if ((rt->flags & TH_RT_IDENTITY) &&
	    mhdgz_response_set_flags(s->gz, r, MHDGZ_RESPONSE_IDENTITY) != 0)
		atomic_fetch_add(&s->errors, 1);
	if ((rt->flags & TH_RT_UNCACHED) && mhdgz_response_set_uncached(s->gz, r) != 0)
		atomic_fetch_add(&s->errors, 1);
	return r;
}

static enum MHD_Result
site_plain(struct MHD_Connection *conn, unsigned int status)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
	enum MHD_Result ret;

	if (!r)
		return MHD_NO;
	ret = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return ret;
}

/* Queue a response made for this request (or the route's shared one). */
static enum MHD_Result
site_queue(struct th_site *s, struct MHD_Connection *conn, const char *method,
	   const struct th_route *rt, struct MHD_Response *r, unsigned int status)
{
	struct mhdgz_request req = { .size = sizeof req,
				     .method = method,
				     .flags = rt && (rt->flags & TH_RT_PRECOND)
						      ? MHDGZ_REQUEST_PRECONDITIONS
						      : 0 };
	enum MHD_Result ret;

	if (!r) {
		atomic_fetch_add(&s->create_failures, 1);
		return site_plain(conn, 500);
	}
	ret = mhdgz_queue_response_ex(s->gz, conn, &req, status, r, NULL);
	if (ret != MHD_YES)
		atomic_fetch_add(&s->errors, 1);
	if (!rt || !(rt->flags & TH_RT_SHARED))
		MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result
site_route(struct th_server *srv, struct MHD_Connection *conn, const char *url, const char *method)
{
	struct th_site *s = srv->cls;
	struct th_route *rt = NULL;
	unsigned int status;

	for (size_t i = 0; i < s->nroutes; i++)
		if (strcmp(s->routes[i].path, url) == 0)
			rt = &s->routes[i];
	if (!rt)
		return site_plain(conn, 404);
	status = rt->status;
	return site_queue(s, conn, method, rt,
			  (rt->flags & TH_RT_SHARED) ? rt->shared : site_make(s, rt), status);
}

void
th_site_start(struct th_site *s, const struct mhdgz_options *opts, struct th_route *routes,
	      size_t nroutes, unsigned int extra_mhd_flags)
{
	struct th_daemon_opts o = { .mhd_flags = MHD_USE_ERROR_LOG | extra_mhd_flags,
				    .conn_memory_nbytes = TH_SITE_CONN_MEMORY,
				    .idle_timeout_s = 120 };
	int rc;

	memset(s, 0, sizeof *s);
	s->routes = routes;
	s->nroutes = nroutes;
	rc = mhdgz_new(opts, &s->gz);
	ck_assert_msg(rc == 0, "mhdgz_new: %s", mhdgz_strerror(rc));
	for (size_t i = 0; i < nroutes; i++) {
		routes[i].shared = NULL;
		if (routes[i].flags & TH_RT_SHARED) {
			routes[i].shared = site_make(s, &routes[i]);
			ck_assert_msg(routes[i].shared != NULL, "shared response %s",
				      routes[i].path);
		}
	}
	th_start_ex(&s->srv, s->gz, &o, site_route, s);
	s->port = s->srv.port;
}

void
th_site_stop(struct th_site *s)
{
	th_stop(&s->srv);
	for (size_t i = 0; i < s->nroutes; i++) {
		if (s->routes[i].shared)
			MHD_destroy_response(s->routes[i].shared);
		s->routes[i].shared = NULL;
	}
	mhdgz_free(s->gz);
	s->gz = NULL;
}

void
th_site_done(struct th_site *s, CURL *h, void *body)
{
	curl_easy_cleanup(h);
	th_site_stop(s);
	free(body);
}

/* ===================================================================== */
/*                               Client                                  */
/* ===================================================================== */

static bool
is_ows(char c)
{
	return c == ' ' || c == '\t';
}

static size_t
th_write_cb(char *p, size_t size, size_t nmemb, void *cls)
{
	struct th_reply *r = cls;
	size_t n = size * nmemb;

	r->writes++;
	if (r->discard) {
		r->body_len += n;
		if (r->on_data)
			r->on_data(r, (const uint8_t *)p, n);
		return n;
	}
	if (r->body_len + n > TH_MAX_BODY) {
		r->body_overflow = true;
		return 0;
	}
	if (r->body_len + n > r->body_cap) {
		size_t cap = r->body_cap ? r->body_cap : 64 * 1024;
		uint8_t *nb;

		while (cap < r->body_len + n)
			cap *= 2;
		nb = realloc(r->body, cap);
		if (!nb)
			return 0;
		r->body = nb;
		r->body_cap = cap;
	}
	memcpy(r->body + r->body_len, p, n);
	r->body_len += n;
	if (r->on_data)
		r->on_data(r, (const uint8_t *)p, n);
	if (r->abort_after > 0 && r->body_len >= r->abort_after)
		return 0; /* CURLE_WRITE_ERROR: libcurl closes the connection */
	return n;
}

static void
clear_hdrs(struct th_reply *r)
{
	for (unsigned int i = 0; i < r->nhdr; i++) {
		free(r->hdr_name[i]);
		free(r->hdr_value[i]);
	}
	r->nhdr = 0;
	r->hdr_overflow = false;
}

static size_t
th_header_cb(char *buf, size_t size, size_t n, void *cls)
{
	struct th_reply *r = cls;
	size_t len = size * n, nlen, vb, ve;
	const char *colon;

	if (len >= 5 && memcmp(buf, "HTTP/", 5) == 0) {
		/* A new status line (after a 1xx, say): start over. */
		clear_hdrs(r);
		return len;
	}
	colon = memchr(buf, ':', len);
	if (!colon)
		return len; /* the empty line ending the header */
	if (r->nhdr == TH_MAX_HDRS) {
		r->hdr_overflow = true;
		return len;
	}
	nlen = (size_t)(colon - buf);
	vb = nlen + 1;
	ve = len;
	while (vb < ve && is_ows(buf[vb]))
		vb++;
	while (ve > vb && (is_ows(buf[ve - 1]) || buf[ve - 1] == '\r' || buf[ve - 1] == '\n'))
		ve--;
	r->hdr_name[r->nhdr] = strndup(buf, nlen);
	r->hdr_value[r->nhdr] = strndup(buf + vb, ve - vb);
	if (!r->hdr_name[r->nhdr] || !r->hdr_value[r->nhdr]) {
		free(r->hdr_name[r->nhdr]);
		free(r->hdr_value[r->nhdr]);
		return 0;
	}
	r->nhdr++;
	return len;
}

void
th_reply_init(struct th_reply *r)
{
	memset(r, 0, sizeof *r);
}

void
th_reply_free(struct th_reply *r)
{
	clear_hdrs(r);
	free(r->body);
	memset(r, 0, sizeof *r);
}

CURL *
th_curl_new(void)
{
	CURL *h = curl_easy_init();

	ck_assert_ptr_nonnull(h);
	return h;
}

void
th_curl_prepare(CURL *h, uint16_t port, const char *path, unsigned int flags, struct th_reply *r)
{
	char url[256];

	r->rc = CURLE_FAILED_INIT;
	r->status = 0;
	r->num_connects = -1;
	r->body_len = 0;
	r->body_overflow = false;
	r->writes = 0;
	clear_hdrs(r);
	/* Options go, the connection cache stays (keep-alive). */
	curl_easy_reset(h);
	snprintf(url, sizeof url, "http://127.0.0.1:%u%s", (unsigned int)port, path);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS,
			 r->timeout_ms ? (long)r->timeout_ms : TH_CURL_TIMEOUT_S * 1000L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
	curl_easy_setopt(h, CURLOPT_PROXY, "");
	curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
	/* The bytes on the wire unless asked: curl must not decode them. */
	curl_easy_setopt(h, CURLOPT_HTTP_CONTENT_DECODING, (flags & TH_DECODE) ? 1L : 0L);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, th_write_cb);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, th_header_cb);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, r);
	if (flags & TH_DECODE)
		curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "gzip");
	if (flags & TH_HEAD) {
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	} else if (flags & TH_POST) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, r->upload ? r->upload : "");
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->upload_len);
		curl_easy_setopt(h, CURLOPT_POST, 1L);
		if (r->expect_100_ms)
			curl_easy_setopt(h, CURLOPT_EXPECT_100_TIMEOUT_MS, (long)r->expect_100_ms);
	}
	if (flags & TH_RAW)
		curl_easy_setopt(h, CURLOPT_HTTP_TRANSFER_DECODING, 0L);
	curl_easy_setopt(h, CURLOPT_HTTP_VERSION,
			 (flags & TH_HTTP10) ? (long)CURL_HTTP_VERSION_1_0
					     : (long)CURL_HTTP_VERSION_1_1);
	if (flags & TH_FRESH) {
		curl_easy_setopt(h, CURLOPT_FRESH_CONNECT, 1L);
		curl_easy_setopt(h, CURLOPT_FORBID_REUSE, 1L);
	}
}

CURLcode
th_fetch_ex(CURL *h, uint16_t port, const char *path, unsigned int flags, const char *const *hdrs,
	    struct th_reply *r)
{
	CURL *own = NULL;
	struct curl_slist *hl = NULL;
	char line[256];

	if (!h) {
		own = h = curl_easy_init();
		if (!h) {
			r->rc = CURLE_FAILED_INIT;
			return r->rc;
		}
	}
	th_curl_prepare(h, port, path, flags, r);
	if (r->accept_encoding) {
		snprintf(line, sizeof line, "Accept-Encoding: %s", r->accept_encoding);
		hl = curl_slist_append(hl, line);
	} else if (flags & TH_GZIP) {
		hl = curl_slist_append(hl, "Accept-Encoding: gzip");
	}
	for (int i = 0; hdrs && hdrs[i]; i++) {
		struct curl_slist *nl = curl_slist_append(hl, hdrs[i]);

		if (!nl) {
			curl_slist_free_all(hl);
			hl = NULL;
			r->rc = CURLE_OUT_OF_MEMORY;
			goto out;
		}
		hl = nl;
	}
	if (hl)
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
	r->rc = curl_easy_perform(h);
	th_reply_info(h, r);
	if (hl) {
		/* The handle must not keep a pointer to the freed list. */
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
		curl_slist_free_all(hl);
	}
out:
	if (own)
		curl_easy_cleanup(own);
	return r->rc;
}

void
th_reply_info(CURL *h, struct th_reply *r)
{
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
	curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &r->num_connects);
}

CURLcode
th_fetch(CURL *h, uint16_t port, const char *path, unsigned int flags, struct th_reply *r)
{
	return th_fetch_ex(h, port, path, flags, NULL, r);
}

const char *
th_header(const struct th_reply *r, const char *name, unsigned int *count_ret)
{
	const char *first = NULL;
	unsigned int count = 0;

	for (unsigned int i = 0; i < r->nhdr; i++) {
		if (strcasecmp(r->hdr_name[i], name) != 0)
			continue;
		if (!first)
			first = r->hdr_value[i];
		count++;
	}
	if (count_ret)
		*count_ret = count;
	return first;
}

int
th_hdr_count(const struct th_reply *r, const char *name)
{
	unsigned int n;

	th_header(r, name, &n);
	return (int)n;
}

bool
th_has_token(const char *list, const char *token)
{
	size_t tl = strlen(token);
	const char *p = list;

	while (p && *p) {
		while (*p == ',' || is_ows(*p))
			p++;
		if (strncasecmp(p, token, tl) == 0 &&
		    (p[tl] == '\0' || p[tl] == ',' || is_ows(p[tl])))
			return true;
		p += strcspn(p, ",");
	}
	return false;
}

int
th_dechunk(const uint8_t *raw, size_t len, uint8_t **out, size_t *out_len, size_t *nchunks,
	   bool *empty_early)
{
	size_t i = 0, olen = 0, n = 0;
	uint8_t *o = malloc(len ? len : 1);

	*empty_early = false;
	if (!o)
		return -1;
	for (;;) {
		uint64_t sz = 0;
		size_t digits = 0;

		while (i < len) {
			int c = raw[i], v;

			if (c >= '0' && c <= '9')
				v = c - '0';
			else if (c >= 'a' && c <= 'f')
				v = c - 'a' + 10;
			else if (c >= 'A' && c <= 'F')
				v = c - 'A' + 10;
			else
				break;
			if (sz > (UINT64_MAX >> 4))
				goto bad;
			sz = sz * 16 + (uint64_t)v;
			digits++;
			i++;
		}
		if (digits == 0)
			goto bad;
		/* Skip chunk extensions up to CRLF. */
		while (i < len && raw[i] != '\r')
			i++;
		if (i + 1 >= len || raw[i + 1] != '\n')
			goto bad;
		i += 2;
		if (sz == 0) {
			/* Last chunk: trailer fields ("name: value" lines), then
			 * an empty line that ends the body, exactly. A line
			 * without ':' is a chunk after a zero chunk that came
			 * too early. */
			while (!(len - i == 2 && raw[i] == '\r' && raw[i + 1] == '\n')) {
				const uint8_t *eol = i < len ? memchr(raw + i, '\r', len - i)
							     : NULL;

				if (!eol || !memchr(raw + i, ':', (size_t)(eol - (raw + i)))) {
					*empty_early = true;
					goto bad;
				}
				i = (size_t)(eol - raw);
				if (i + 1 >= len || raw[i + 1] != '\n')
					goto bad;
				i += 2;
			}
			break;
		}
		if (sz > len - i || len - i - sz < 2)
			goto bad;
		memcpy(o + olen, raw + i, (size_t)sz);
		olen += (size_t)sz;
		i += (size_t)sz;
		if (raw[i] != '\r' || raw[i + 1] != '\n')
			goto bad;
		i += 2;
		n++;
	}
	*out = o;
	*out_len = olen;
	*nchunks = n;
	return 0;
bad:
	free(o);
	return -1;
}

/* ===================================================================== */
/*                          Raw-socket client                            */
/* ===================================================================== */

int
th_raw_connect(uint16_t port)
{
	struct sockaddr_in sa;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	ck_assert_msg(fd >= 0, "socket: %s", strerror(errno));
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_port = htons(port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_msg(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0, "connect: %s",
		      strerror(errno));
	return fd;
}

void
th_raw_send(int fd, const void *req, size_t len)
{
	size_t off = 0;

	while (off < len) {
		ssize_t n = send(fd, (const char *)req + off, len - off, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		ck_assert_msg(n > 0, "send: %s", strerror(errno));
		off += (size_t)n;
	}
}

/* The deadlines of one th_raw_read_response: the next byte is due by
 * next, which each byte that comes moves to idle_ms later, never past
 * hard. */
struct raw_clock {
	uint64_t next, hard;
	unsigned int idle_ms;
};

/* Wait for fd to be readable by the clock: 0, or -1 past the deadline. */
static int
raw_wait(int fd, const struct raw_clock *ck)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	uint64_t now = th_now_ms();

	if (now >= ck->next || poll(&pfd, 1, (int)(ck->next - now)) != 1)
		return -1;
	return 0;
}

/* Bytes came: the next is due idle_ms from now. */
static void
raw_progress(struct raw_clock *ck)
{
	uint64_t next = th_now_ms() + ck->idle_ms;

	ck->next = next < ck->hard ? next : ck->hard;
}

/* Read one byte into resp (one at a time: not a byte of the next response
 * may be taken). 1: a byte, 0: peer closed, -1: error or deadline. */
static int
raw_byte(int fd, struct raw_clock *ck, struct th_raw_response *resp)
{
	ssize_t n;

	if (raw_wait(fd, ck) != 0)
		return -1;
	if (resp->len % 4096 == 0) {
		uint8_t *nb = realloc(resp->bytes, resp->len + 4096);

		if (!nb)
			return -1;
		resp->bytes = nb;
	}
	n = recv(fd, resp->bytes + resp->len, 1, 0);
	if (n < 0)
		return -1;
	if (n == 0)
		return 0;
	resp->len++;
	raw_progress(ck);
	return 1;
}

/* Read exactly n more bytes into resp, as many per call as are due (a
 * counted body: not a byte of the next response can be among them).
 * 0, or -1 on close, error or deadline. */
static int
raw_exact(int fd, struct raw_clock *ck, struct th_raw_response *resp, size_t n)
{
	uint8_t *nb = realloc(resp->bytes, resp->len + n + 4096 - (resp->len + n) % 4096);

	if (!nb)
		return -1;
	resp->bytes = nb;
	while (n > 0) {
		ssize_t got;

		if (raw_wait(fd, ck) != 0)
			return -1;
		got = recv(fd, resp->bytes + resp->len, n, 0);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return -1;
		resp->len += (size_t)got;
		n -= (size_t)got;
		raw_progress(ck);
	}
	return 0;
}

/* Read until the bytes read end with the line terminator CRLF. */
static int
raw_line(int fd, struct raw_clock *ck, struct th_raw_response *resp)
{
	for (;;) {
		int rc = raw_byte(fd, ck, resp);

		if (rc != 1)
			return -1;
		if (resp->len >= 2 && resp->bytes[resp->len - 2] == '\r' &&
		    resp->bytes[resp->len - 1] == '\n')
			return 0;
	}
}

const char *
th_raw_header(const struct th_raw_response *resp, const char *name, size_t *len_ret)
{
	const char *p = (const char *)resp->bytes, *end = p + resp->head_len;
	size_t nl = strlen(name);

	/* Skip the status line; then one field per CRLF-terminated line. */
	p = memchr(p, '\n', (size_t)(end - p));
	while (p && ++p < end) {
		const char *eol = memchr(p, '\r', (size_t)(end - p));

		if (!eol || eol == p)
			break;
		if ((size_t)(eol - p) > nl && p[nl] == ':' && strncasecmp(p, name, nl) == 0) {
			const char *v = p + nl + 1, *ve = eol;

			while (v < ve && is_ows(*v))
				v++;
			while (ve > v && is_ows(ve[-1]))
				ve--;
			*len_ret = (size_t)(ve - v);
			return v;
		}
		p = eol + 1;
	}
	return NULL;
}

int
th_raw_read_response(int fd, bool head, unsigned int timeout_ms, struct th_raw_response *resp)
{
	uint64_t t0 = th_now_ms();
	struct raw_clock clock = { .next = t0 + timeout_ms,
				   .hard = t0 + (uint64_t)timeout_ms * TH_RAW_HARD_FACTOR,
				   .idle_ms = timeout_ms };
	struct raw_clock *ck = &clock;
	const char *te, *cl;
	size_t vlen;

	memset(resp, 0, sizeof *resp);
	/* The head: lines up to an empty one. */
	do {
		size_t start = resp->len;

		if (raw_line(fd, ck, resp) != 0)
			return -1;
		if (resp->len - start == 2)
			break;
	} while (1);
	resp->head_len = resp->body_off = resp->len;
	if (resp->len < 12 || memcmp(resp->bytes, "HTTP/1.", 7) != 0)
		return -1;
	resp->status = atoi((const char *)resp->bytes + 9);
	if (head || resp->status / 100 == 1 || resp->status == 204 || resp->status == 304)
		return 0;
	te = th_raw_header(resp, "Transfer-Encoding", &vlen);
	if (te && vlen == 7 && strncasecmp(te, "chunked", 7) == 0) {
		resp->chunked = true;
		for (;;) {
			size_t start = resp->len;
			unsigned long long sz;

			if (raw_line(fd, ck, resp) != 0)
				return -1;
			sz = strtoull((const char *)resp->bytes + start, NULL, 16);
			if (sz == 0)
				break;
			if (sz > TH_MAX_BODY || raw_exact(fd, ck, resp, (size_t)sz + 2) != 0)
				return -1;
		}
		/* Trailer fields, up to the empty line. */
		for (;;) {
			size_t start = resp->len;

			if (raw_line(fd, ck, resp) != 0)
				return -1;
			if (resp->len - start == 2)
				return 0;
		}
	}
	cl = th_raw_header(resp, "Content-Length", &vlen);
	if (cl) {
		unsigned long long want = strtoull(cl, NULL, 10);

		if (want > TH_MAX_BODY)
			return -1;
		return want ? raw_exact(fd, ck, resp, (size_t)want) : 0;
	}
	/* Delimited by the close. */
	for (;;) {
		int rc = raw_byte(fd, ck, resp);

		if (rc == 0)
			return 0;
		if (rc < 0)
			return -1;
	}
}

void
th_raw_response_free(struct th_raw_response *resp)
{
	free(resp->bytes);
	memset(resp, 0, sizeof *resp);
}

void
th_raw_expect_field(const struct th_raw_response *resp, const char *name, const char *want,
		    const char *ctx)
{
	size_t len = 0;
	const char *v = th_raw_header(resp, name, &len);

	if (!want) {
		ck_assert_msg(v == NULL, "%s: %s '%.*s', want none", ctx, name, (int)len, v);
		return;
	}
	ck_assert_msg(v && len == strlen(want) && strncmp(v, want, len) == 0,
		      "%s: %s '%.*s', want '%s'", ctx, name, v ? (int)len : 6, v ? v : "(none)",
		      want);
}

int
th_raw_field_count(const struct th_raw_response *resp, const char *name)
{
	const char *p = (const char *)resp->bytes, *end = p + resp->head_len;
	size_t nl = strlen(name);
	int n = 0;

	p = memchr(p, '\n', (size_t)(end - p));
	while (p && ++p < end) {
		const char *eol = memchr(p, '\r', (size_t)(end - p));

		if (!eol || eol == p)
			break;
		if ((size_t)(eol - p) > nl && p[nl] == ':' && strncasecmp(p, name, nl) == 0)
			n++;
		p = eol + 1;
	}
	return n;
}

void
th_raw_expect_idle(int fd, unsigned int wait_ms, const char *ctx)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	char c;
	int rc = poll(&pfd, 1, (int)wait_ms);
	ssize_t n = rc == 1 ? recv(fd, &c, 1, MSG_PEEK) : -1;

	ck_assert_msg(rc == 0, "%s: after the last response: %s", ctx,
		      n == 0  ? "the connection was closed"
		      : n > 0 ? "stray bytes"
			      : "poll error");
}

void
th_raw_expect_closed(int fd, unsigned int timeout_ms, const char *ctx)
{
	uint64_t deadline = th_now_ms() + timeout_ms;
	uint8_t buf[256];

	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		uint64_t now = th_now_ms();
		ssize_t n;

		ck_assert_msg(now < deadline && poll(&pfd, 1, (int)(deadline - now)) == 1,
			      "%s: the connection stays open", ctx);
		n = recv(fd, buf, sizeof buf, 0);
		if (n < 0 && errno == EINTR)
			continue;
		ck_assert_msg(n <= 0, "%s: %zd stray bytes before the close: '%.*s'", ctx, n,
			      (int)n, (const char *)buf);
		ck_assert_msg(n == 0, "%s: closed with an error (%s), not a clean close", ctx,
			      strerror(errno));
		return;
	}
}

/* ===================================================================== */
/*                     Checks of buffer responses                        */
/* ===================================================================== */

__attribute__((format(printf, 3, 4))) static int
v_fail(char *err, size_t errcap, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errcap, fmt, ap);
	va_end(ap);
	return -1;
}

int
th_v_content_length(const struct th_reply *r, size_t want, char *err, size_t errcap)
{
	unsigned int n;
	const char *cl = th_header(r, "Content-Length", &n);
	char *end;
	unsigned long long v;

	if (n != 1)
		return v_fail(err, errcap, "%u Content-Length fields", n);
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
vary_check(const struct th_reply *r, const char *const *extra, int strict, char *err, size_t errcap)
{
	unsigned int nv;
	const char *v = th_header(r, "Vary", &nv), *p;
	int n_ae = 0, n_extra = 0, seen[8] = { 0 };

	if (nv != 1)
		return v_fail(err, errcap, "%u Vary fields (first '%s')", nv, v ? v : "");
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

int
th_v_vary_ae(const struct th_reply *r, const char *const *extra, char *err, size_t errcap)
{
	return vary_check(r, extra, 1, err, errcap);
}

/* Transfer and status as wanted. */
static int
v_status(const struct th_reply *r, long want_status, char *err, size_t errcap)
{
	if (r->rc != CURLE_OK)
		return v_fail(err, errcap, "transfer: %s", curl_easy_strerror(r->rc));
	if (r->status != want_status)
		return v_fail(err, errcap, "status %ld, want %ld", r->status, want_status);
	return 0;
}

int
th_v_gzip(const struct th_reply *r, long want_status, const void *orig, size_t orig_len, char *err,
	  size_t errcap)
{
	return th_v_coded(r, "gzip", want_status, orig, orig_len, err, errcap);
}

int
th_v_coded(const struct th_reply *r, const char *coding, long want_status, const void *orig,
	   size_t orig_len, char *err, size_t errcap)
{
	unsigned int nce;
	const char *ce = th_header(r, "Content-Encoding", &nce);
	const char *ar = th_header(r, "Accept-Ranges", NULL);
	uint8_t *out = NULL;
	size_t out_len = 0;

	if (v_status(r, want_status, err, errcap))
		return -1;
	if (nce != 1 || strcmp(ce, coding) != 0)
		return v_fail(err, errcap, "%u Content-Encoding fields, first '%s' (want %s)", nce,
			      ce ? ce : "(none)", coding);
	if (th_v_content_length(r, r->body_len, err, errcap))
		return -1;
	if (r->body_len >= orig_len)
		return v_fail(err, errcap, "%s body %zu bytes, not smaller than %zu", coding,
			      r->body_len, orig_len);
	if (ar && strcasecmp(ar, "bytes") == 0)
		return v_fail(err, errcap, "Accept-Ranges: bytes on a %s response", coding);
	if (tu_decode(coding, r->body, r->body_len, &out, &out_len) != 0)
		return v_fail(err, errcap, "body (%zu bytes) is not one valid %s frame/member",
			      r->body_len, coding);
	if (out_len != orig_len || memcmp(out, orig, orig_len) != 0) {
		free(out);
		return v_fail(err, errcap, "decoded %zu bytes differ from the %zu original",
			      out_len, orig_len);
	}
	free(out);
	if (strcmp(coding, "gzip") == 0 &&
	    tu_check_member(r->body, r->body_len, orig, orig_len) != 0)
		return v_fail(err, errcap,
			      "gzip header/trailer not as RFC 1952 and the header say");
	/* Vary: Accept-Encoding once; other tokens are the caller's to check. */
	return vary_check(r, NULL, 0, err, errcap);
}

int
th_v_identity(const struct th_reply *r, long want_status, const void *orig, size_t orig_len,
	      char *err, size_t errcap)
{
	if (v_status(r, want_status, err, errcap))
		return -1;
	if (th_hdr_count(r, "Content-Encoding") != 0)
		return v_fail(err, errcap, "Content-Encoding '%s' on an identity response",
			      th_header(r, "Content-Encoding", NULL));
	if (th_v_content_length(r, orig_len, err, errcap))
		return -1;
	if (r->body_len != orig_len || (orig_len && memcmp(r->body, orig, orig_len) != 0))
		return v_fail(err, errcap, "identity body %zu bytes differs from the %zu original",
			      r->body_len, orig_len);
	return 0;
}

int
th_v_no_body(const struct th_reply *r, long want_status, char *err, size_t errcap)
{
	if (v_status(r, want_status, err, errcap))
		return -1;
	if (th_hdr_count(r, "Content-Encoding") != 0)
		return v_fail(err, errcap, "Content-Encoding '%s' on a %ld",
			      th_header(r, "Content-Encoding", NULL), r->status);
	if (r->body_len != 0)
		return v_fail(err, errcap, "%zu body bytes on a %ld", r->body_len, r->status);
	return 0;
}

int
th_v_304_length(const struct th_reply *r, size_t len_200, char *err, size_t errcap)
{
	if (th_hdr_count(r, "Content-Length") == 0)
		return 0;
	return th_v_content_length(r, len_200, err, errcap);
}

int
th_v_etag(const struct th_reply *r, const char *want, char *err, size_t errcap)
{
	unsigned int n;
	const char *et = th_header(r, "ETag", &n);

	if (!want) {
		if (et)
			return v_fail(err, errcap, "ETag '%s', want none", et);
		return 0;
	}
	if (n != 1 || strcmp(et, want) != 0)
		return v_fail(err, errcap, "%u ETag fields, first '%s', want '%s'", n,
			      et ? et : "(none)", want);
	return 0;
}

/* ===================================================================== */
/*                             Utilities                                 */
/* ===================================================================== */

uint64_t
th_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

bool
th_wait(bool (*pred)(void *cls), void *cls, unsigned int timeout_ms)
{
	uint64_t end = th_now_ms() + timeout_ms;
	struct timespec ts = { .tv_sec = 0, .tv_nsec = 5 * 1000 * 1000 };

	for (;;) {
		if (pred(cls))
			return true;
		if (th_now_ms() >= end)
			return pred(cls);
		nanosleep(&ts, NULL);
	}
}

struct mhdgz_stats
th_stats(struct mhdgz *gz)
{
	struct mhdgz_stats st;

	memset(&st, 0, sizeof st);
	st.size = sizeof st;
	ck_assert_int_eq(mhdgz_get_stats(gz, &st), 0);
	return st;
}

void
th_expect_reasons(const struct mhdgz_stats *st, const uint64_t want[MHDGZ_REASON_COUNT])
{
	for (int r = 0; r < MHDGZ_REASON_COUNT; r++)
		ck_assert_msg(st->reasons[r] == want[r], "reason %s: want %llu got %llu",
			      mhdgz_reason_name((enum mhdgz_reason)r), (unsigned long long)want[r],
			      (unsigned long long)st->reasons[r]);
}

bool
th_pool_all_back(struct mhdgz *gz)
{
	struct gz_pool *pools[2 * GZ_CODING_COUNT + 1];
	size_t n = 0, i;

	/* Every get of every pool put back: exact with and without pooling
	 * (the public counters cannot tell a compressor checked out from
	 * one freed on its put). */
	for (i = 0; i < GZ_CODING_COUNT; i++) {
		pools[n++] = hnd_pool(gz, (enum gz_coding)i, false);
		pools[n++] = hnd_pool(gz, (enum gz_coding)i, true);
	}
	pools[n++] = gz->event_pool;
	for (i = 0; i < n; i++) {
		struct gz_pool_stats ps;
		size_t j;

		if (!pools[i])
			continue;
		for (j = 0; j < i && pools[j] != pools[i]; j++)
			;
		if (j < i)
			continue; /* gzip's pools are the handle's own, listed once */
		gz_pool_get_stats(pools[i], &ps);
		if (ps.gets != ps.puts)
			return false;
	}
	return true;
}

bool
th_pool_back_pred(void *gz)
{
	return th_pool_all_back(gz);
}

uint64_t
th_rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	unsigned long long kib = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "VmRSS: %llu kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

int
th_temp_file(const void *data, size_t len)
{
	char path[] = "/tmp/mhdgz-testXXXXXX";
	int fd = mkstemp(path);
	size_t off = 0;

	ck_assert_msg(fd >= 0, "mkstemp failed");
	unlink(path);
	while (off < len) {
		ssize_t n = write(fd, (const uint8_t *)data + off, len - off);

		ck_assert_msg(n > 0, "write to temporary file failed");
		off += (size_t)n;
	}
	ck_assert(lseek(fd, 0, SEEK_SET) == 0);
	return fd;
}

void
th_fill_binary(uint8_t *b, size_t len)
{
	static const uint8_t sig[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };

	for (size_t i = 0; i < len; i++)
		b[i] = (uint8_t)((i % 64) < 48 ? 0 : (i * 7) & 0x0f);
	memcpy(b, sig, len < 8 ? len : 8);
}

/* ===================================================================== */
/*                    A body source for content readers                  */
/* ===================================================================== */

ssize_t
th_src_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct th_src *s = cls;
	unsigned int in = atomic_fetch_add(&s->inside, 1) + 1, m;
	size_t n;

	m = atomic_load(&s->max_inside);
	while (in > m && !atomic_compare_exchange_weak(&s->max_inside, &m, in))
		;
	atomic_fetch_add(&s->calls, 1);
	if (atomic_load(&s->frees) > 0)
		atomic_fetch_add(&s->after_free, 1);
	if (pos >= s->len) {
		atomic_fetch_sub(&s->inside, 1);
		return MHD_CONTENT_READER_END_OF_STREAM;
	}
	n = s->chunk < max ? s->chunk : max;
	if (n > s->len - pos)
		n = (size_t)(s->len - pos);
	memcpy(buf, s->data + pos, n);
	atomic_fetch_add(&s->bytes, n);
	atomic_fetch_sub(&s->inside, 1);
	return (ssize_t)n;
}

void
th_src_free(void *cls)
{
	struct th_src *s = cls;

	atomic_fetch_add(&s->frees, 1);
}
