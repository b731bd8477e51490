/* stream_util.c: daemon, libcurl and body-source helpers for the streaming end-to-end tests. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <check.h>

#include "stream_util.h"

/* Idle connections are closed by the daemon after this many seconds, so
 * a test that leaves one behind cannot hang MHD_stop_daemon for long. */
#define SU_CONN_TIMEOUT_S 30

/* ===================================================================== */
/*                               Server                                  */
/* ===================================================================== */

static enum MHD_Result
su_access(void *cls, struct MHD_Connection *c, const char *url, const char *method,
	  const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls)
{
	static int marker;
	struct su_server *s = cls;

	(void)version;
	(void)upload_data;
	if (*con_cls == NULL) {
		/* First call: headers only. Answer on the next. */
		*con_cls = &marker;
		return MHD_YES;
	}
	if (*upload_data_size > 0) {
		*upload_data_size = 0;
		return MHD_YES;
	}
	return s->route(s, c, url, method);
}

void
su_start(struct su_server *s, struct mhdgz *gz, unsigned int threads, su_route_fn route,
	 void *cls)
{
	struct sockaddr_in sa;
	const union MHD_DaemonInfo *di;
	unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | (threads > 0 ? MHD_USE_POLL : MHD_USE_AUTO);

	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_port = 0;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	s->gz = gz;
	s->route = route;
	s->cls = cls;
	if (threads > 0)
		s->d = MHD_start_daemon(flags, 0, NULL, NULL, su_access, s, MHD_OPTION_SOCK_ADDR,
					(struct sockaddr *)&sa, MHD_OPTION_CONNECTION_TIMEOUT,
					(unsigned int)SU_CONN_TIMEOUT_S, MHD_OPTION_THREAD_POOL_SIZE,
					threads, MHD_OPTION_END);
	else
		s->d = MHD_start_daemon(flags, 0, NULL, NULL, su_access, s, MHD_OPTION_SOCK_ADDR,
					(struct sockaddr *)&sa, MHD_OPTION_CONNECTION_TIMEOUT,
					(unsigned int)SU_CONN_TIMEOUT_S, MHD_OPTION_END);
	ck_assert_msg(s->d != NULL, "MHD_start_daemon failed");
	di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
	ck_assert(di != NULL && di->port != 0);
	s->port = di->port;
}

void
su_stop(struct su_server *s)
{
	if (s->d) {
		MHD_stop_daemon(s->d);
		s->d = NULL;
	}
}

struct mhdgz *
su_gz_new(enum mhdgz_backend backend, int level, size_t min_size)
{
	struct mhdgz_options o;
	struct mhdgz *gz = NULL;
	int rc;

	memset(&o, 0, sizeof o);
	o.size = sizeof o;
	o.backend = backend;
	o.level = level;
	o.min_nbytes = min_size;
	rc = mhdgz_new(&o, &gz);
	ck_assert_msg(rc == 0, "mhdgz_new(%s, %d): %s", mhdgz_backend_name(backend), level,
		      mhdgz_strerror(rc));
	return gz;
}

/* ===================================================================== */
/*                               Client                                  */
/* ===================================================================== */

static size_t
su_write_cb(char *p, size_t size, size_t nmemb, void *cls)
{
	struct su_reply *r = cls;
	size_t n = size * nmemb;

	r->writes++;
	if (r->discard) {
		r->body_len += n;
		if (r->on_data)
			r->on_data(r, (const uint8_t *)p, n);
		return n;
	}
	if (r->body_len + n > SU_MAX_BODY)
		return 0;
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

static size_t
su_header_cb(char *p, size_t size, size_t nmemb, void *cls)
{
	struct su_reply *r = cls;
	size_t n = size * nmemb, len = n;

	if (n >= 5 && memcmp(p, "HTTP/", 5) == 0)
		r->nhdr = 0; /* a new status line (after 1xx): start over */
	while (len > 0 && (p[len - 1] == '\r' || p[len - 1] == '\n'))
		len--;
	if (len == 0 || memchr(p, ':', len) == NULL)
		return n;
	if (r->nhdr >= SU_MAX_HDRS || len >= sizeof r->hdr[0]) {
		r->hdr_overflow = true;
		return n;
	}
	memcpy(r->hdr[r->nhdr], p, len);
	r->hdr[r->nhdr][len] = '\0';
	r->nhdr++;
	return n;
}

void
su_reply_init(struct su_reply *r)
{
	memset(r, 0, sizeof *r);
}

void
su_reply_free(struct su_reply *r)
{
	free(r->body);
	r->body = NULL;
	r->body_len = r->body_cap = 0;
}

CURLcode
su_fetch(CURL *h, uint16_t port, const char *path, unsigned int flags, struct su_reply *r)
{
	CURL *own = NULL;
	struct curl_slist *hl = NULL;
	char url[256];

	r->rc = CURLE_FAILED_INIT;
	r->status = 0;
	r->body_len = 0;
	r->nhdr = 0;
	r->hdr_overflow = false;
	r->writes = 0;
	if (!h) {
		own = h = curl_easy_init();
		if (!h)
			return r->rc;
	} else {
		curl_easy_reset(h);
	}
	snprintf(url, sizeof url, "http://127.0.0.1:%u%s", (unsigned int)port, path);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT, SU_CURL_TIMEOUT_S);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, su_write_cb);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, su_header_cb);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, r);
	if (r->accept_encoding) {
		char line[256];

		snprintf(line, sizeof line, "Accept-Encoding: %s", r->accept_encoding);
		hl = curl_slist_append(hl, line);
	} else if (flags & SU_GZIP) {
		hl = curl_slist_append(hl, "Accept-Encoding: gzip");
	}
	if (hl)
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
	if (flags & SU_DECODE)
		curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "gzip");
	if (flags & SU_HEAD)
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	if (flags & SU_RAW)
		curl_easy_setopt(h, CURLOPT_HTTP_TRANSFER_DECODING, 0L);
	if (flags & SU_HTTP10)
		curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_0);
	r->rc = curl_easy_perform(h);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
	if (hl) {
		/* The handle must not keep a pointer to the freed list. */
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
		curl_slist_free_all(hl);
	}
	if (own)
		curl_easy_cleanup(own);
	return r->rc;
}

const char *
su_header(const struct su_reply *r, const char *name, unsigned int *count_ret)
{
	const char *first = NULL;
	size_t nl = strlen(name);
	unsigned int i, count = 0;

	for (i = 0; i < r->nhdr; i++) {
		const char *v;

		if (strncasecmp(r->hdr[i], name, nl) != 0 || r->hdr[i][nl] != ':')
			continue;
		count++;
		if (first)
			continue;
		v = r->hdr[i] + nl + 1;
		while (*v == ' ' || *v == '\t')
			v++;
		first = v;
	}
	if (count_ret)
		*count_ret = count;
	return first;
}

int
su_dechunk(const uint8_t *raw, size_t len, uint8_t **out, size_t *out_len, size_t *nchunks,
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
			/* Last chunk: an empty trailer section ends the body. */
			if (len - i == 2 && raw[i] == '\r' && raw[i + 1] == '\n')
				break;
			/* Either trailer fields follow, or a zero chunk came too
			 * early (more chunks after it). */
			*empty_early = true;
			goto bad;
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
/*                             Utilities                                 */
/* ===================================================================== */

uint64_t
su_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

bool
su_wait(bool (*pred)(void *cls), void *cls, unsigned int timeout_ms)
{
	uint64_t end = su_now_ms() + timeout_ms;
	struct timespec ts = {.tv_sec = 0, .tv_nsec = 5 * 1000 * 1000};

	for (;;) {
		if (pred(cls))
			return true;
		if (su_now_ms() >= end)
			return pred(cls);
		nanosleep(&ts, NULL);
	}
}

struct mhdgz_stats
su_stats(struct mhdgz *gz)
{
	struct mhdgz_stats st;

	memset(&st, 0, sizeof st);
	st.size = sizeof st;
	ck_assert_int_eq(mhdgz_get_stats(gz, &st), 0);
	return st;
}

bool
su_pool_all_back(struct mhdgz *gz)
{
	struct mhdgz_stats st = su_stats(gz);

	if (st.pool_idle == st.pool_misses)
		return true;
	return st.pool_idle == 0 && st.pool_misses == st.pool_gets;
}

uint64_t
su_rss_kib(void)
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
su_temp_file(const void *data, size_t len)
{
	char path[] = "/tmp/mhdgz-streamXXXXXX";
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

/* ===================================================================== */
/*                    A body source for content readers                  */
/* ===================================================================== */

ssize_t
su_src_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct su_src *s = cls;
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
su_src_free(void *cls)
{
	struct su_src *s = cls;

	atomic_fetch_add(&s->frees, 1);
}
