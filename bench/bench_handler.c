/* bench_handler.c: the GzipHandler S/P benchmarks (make bench): the rows, the options and main; output in Go's benchmark format. */
/*
 * Rows line up with Go gziphandler's BenchmarkGzipHandler_S2k ... P100k and
 * with tools that read Go's format (benchstat):
 *
 *   BenchmarkGzipHandler_S20k/libdeflate/level=6-2  12000  98765 ns/op
 *       207.40 MB/s  5343 out-B/op  412 B/op  3 allocs/op
 *
 * What one op is, per row family (NAME_{S,P}{2k,20k,100k}/BACKEND/level=L):
 *
 *  GzipHandler  Exactly what one request costs the handler, without sockets:
 *               mhdgz_response_from_buffer(body, MHD_RESPMEM_PERSISTENT),
 *               MHD_add_response_header(Content-Type: application/json),
 *               the selection (hnd_select(), what mhdgz_queue_response_ex()
 *               runs) for a request carrying "Accept-Encoding: gzip"
 *               (negotiation, the decision, Vary merged into the
 *               response, a compressor from the compressor pool, compression,
 *               the gzip variant built with its headers), then
 *               MHD_destroy_response(), which destroys the variant too.
 *               mhdgz_queue_response_ex() is that selection followed by
 *               MHD_queue_response(); the latter only takes a reference, so
 *               it is left out with the socket. A fresh response per op
 *               means the response cache never hits (checked: every op must
 *               be a compression). Handler options are the defaults apart
 *               from backend and level.
 *  Raw          The floor the handler adds to: the backend's compress() call
 *               alone (src/gz_backend.h) into a preallocated buffer of
 *               gz_bound() bytes, one compressor per thread.
 *  Cached       One response (per thread) created once and selected again and
 *               again: every op is a cache hit returning the same variant.
 *  Unpooled     GzipHandler with MHDGZ_F_NO_POOL: a compressor is created and
 *               freed in every op, showing what the compressor pool buys.
 *  Padded       GzipHandler with MHDGZ_F_LENGTH_HIDING (BREACH length
 *               hiding, the default padding.max_nbytes): the HMAC-SHA256 of
 *               the body and the padded copy, against GzipHandler; out-B/op
 *               includes the padding (mean about half the maximum).
 *  Stream       (--full) One request through a real daemon on 127.0.0.1 and a
 *               keep-alive client, socket included (a stream's body is
 *               produced only as libmicrohttpd sends it):
 *               mhdgz_response_from_callback(MHD_SIZE_UNKNOWN, 4 KiB
 *               blocks) with Content-Type application/json and a reader
 *               that fills every buffer from the payload, queued with
 *               mhdgz_queue_response_ex(), read to its last chunk.
 *               out-B/op is the gzip member (chunk framing excluded);
 *               chunks/op how many chunks carried it (bh_stream.c).
 *  RawSmallWindow  zlib only, 2k: the raw call on a stream whose windowBits
 *               and memLevel are sized to the body as nginx does
 *               (nginx_params()); the small-body proposal, against Raw.
 *
 * S = one thread. P = N threads (--cpu; default the number of online CPUs)
 * sharing one handler (Raw: one compressor each); ns/op = wall time / total
 * ops. The "-N" suffix is Go's GOMAXPROCS: the online CPUs for S rows, the
 * thread count for P rows.
 *
 * Columns: MB/s is input (identity) bytes per second (10^6); out-B/op the
 * compressed body size; B/op and allocs/op count every allocation in the
 * process during the timed loop (malloc, calloc, realloc, memalign, ...
 * are interposed in bh_alloc.c and forwarded to glibc), like Go's
 * -benchmem.
 *
 * Method: every configuration's output is verified once before anything is
 * timed (handler rows through a real libmicrohttpd daemon on 127.0.0.1 and
 * mhdgz_queue_response, so the bytes a client gets are inflated with zlib
 * and compared with the input; Raw rows by inflating the compress()
 * output). Each configuration is calibrated like Go's testing package (N
 * grows until a run lasts --benchtime), then the --count passes run every
 * configuration in turn (interleaved, so drift hits all alike) and the
 * medians are printed.
 *
 * The program prints measurements only: after Go's columns each row adds
 * cpu-ns/op (process CPU time per op, which other work on the machine
 * disturbs less than wall time), mhdgz-allocs/op and mhdgz-B/op (the share
 * of the allocations that went through mhdgz's allocator). Comparisons
 * between rows and the pass/fail targets are bench/verdict.sh's, over this
 * output. Files: bench.h (shared types, and which file calls which),
 * bh_common.c (the shared state, out, die, nginx_params), bh_alloc.c
 * (allocation counting), bh_runner.c (timed runs), bh_verify.c
 * (verification), bh_stream.c, bh_events.c and bh_dict.c (the Stream,
 * EventStream and dict rows), this file (the rows, options and main).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "payload.h"

/* Default --benchtime in seconds when none is given. */
#ifndef BH_DEFAULT_BENCHTIME
#define BH_DEFAULT_BENCHTIME 1.0
#endif

static struct bh_cfg **bh_cfgs_tail = &bh_cfgs;
static struct bh_handler *bh_handlers;

/* A browser's Accept-Encoding (Chromium, Firefox), for the default rows. */
#define BH_AE_BROWSER "gzip, deflate, br, zstd"

/* The handler of a row: its coding alone (be, level), or with ae (the
 * default rows) every option at its default and requests sending ae. */
static struct bh_handler *
handler_get(enum bh_kind kind, const struct gz_backend *be, int level, const char *ae)
{
	struct bh_handler *h;
	struct mhdgz_options o;
	int rc;

	for (h = bh_handlers; h; h = h->next)
		if (h->kind == kind && h->be == be && h->level == level &&
		    h->deflt == (ae != NULL) && (!ae || strcmp(h->ae, ae) == 0))
			return h;
	memset(&o, 0, sizeof o);
	o.size = sizeof o;
	if (ae) {
		/* mhdgz_new's defaults, as an application that sets nothing. */
	} else if (be->coding != GZ_CODING_GZIP) {
		/* zstd or br alone, at the level; gzip's defaults beside. */
		o.codings = gz_coding_name(be->coding);
		if (be->coding == GZ_CODING_ZSTD)
			o.zstd.level = level;
		else
			o.br.level = level;
	} else {
		o.gzip.backend = (enum mhdgz_backend)be->id; /* GZ_ID_* are the public values */
		o.gzip.level = level;
		o.codings = "gzip"; /* the gzip rows: gzip alone */
	}
	o.flags = kind == K_UNPOOLED ? MHDGZ_F_NO_POOL
		  : kind == K_PADDED ? MHDGZ_F_LENGTH_HIDING
				     : 0;
	/* A fixed key: the padding of each payload, so out-B/op, is the same
	 * from run to run. */
	o.padding.key = "mhdgz bench length hiding key";
	o.padding.key_nbytes = 29;
	h = calloc(1, sizeof *h);
	if (!h)
		die("out of memory");
	h->kind = kind;
	h->be = be;
	h->level = level;
	h->coding = h->ae = gz_coding_name(be->coding);
	rc = mhdgz_new(&o, &h->gz);
	if (rc < 0)
		die("mhdgz_new(%s, %d): %s", be->name, level, mhdgz_strerror(rc));
	if (ae) {
		/* What the default handler chooses for ae: its first coding
		 * that ae names (a browser's: all of them), else gzip. */
		h->ae = ae;
		h->deflt = true;
		h->coding = strcmp(ae, BH_AE_BROWSER) == 0 ? gz_coding_name(h->gz->policy.order[0])
							   : "gzip";
	}
	h->next = bh_handlers;
	bh_handlers = h;
	return h;
}

static bool
filter_ok(const char *name)
{
	return !bh_opt.have_filter || regexec(&bh_opt.filter, name, 0, NULL, 0) == 0;
}

/* Add the rows of one (kind, backend, level, size): S, then P per --cpu;
 * with ae (NULL otherwise), the default handler's rows for a client
 * sending ae, named .../default/client=LABEL. */
static void
add_rows_ae(enum bh_kind kind, const struct gz_backend *be, int level, int size_idx, bool with_p,
	    const char *ae, const char *label)
{
	int t, nthreads[1 + BH_MAX_CPUS], n = 0;

	if (bh_body_len[size_idx] == 0)
		return;
	nthreads[n++] = 0;
	if (with_p)
		for (t = 0; t < bh_opt.ncpus; t++)
			nthreads[n++] = bh_opt.cpus[t];
	for (t = 0; t < n; t++) {
		struct bh_cfg *c = calloc(1, sizeof *c);
		if (!c)
			die("out of memory");
		c->kind = kind;
		c->be = be;
		c->level = level;
		c->size_idx = size_idx;
		c->threads = nthreads[t];
		if (ae)
			snprintf(c->name, sizeof c->name, "Benchmark%s_%s%s/default/client=%s",
				 bh_kind_name[kind], nthreads[t] ? "P" : "S",
				 bh_size_name[size_idx], label);
		else
			snprintf(c->name, sizeof c->name, "Benchmark%s_%s%s/%s/level=%d",
				 bh_kind_name[kind], nthreads[t] ? "P" : "S",
				 bh_size_name[size_idx], be->name, level);
		if (!filter_ok(c->name)) {
			free(c);
			continue;
		}
		if (kind != K_RAW && kind != K_SMALLWIN && kind != K_PLAIN)
			c->h = handler_get(kind, be, level, ae);
		*bh_cfgs_tail = c;
		bh_cfgs_tail = &c->next;
	}
}

static void
add_rows(enum bh_kind kind, const struct gz_backend *be, int level, int size_idx, bool with_p)
{
	add_rows_ae(kind, be, level, size_idx, with_p, NULL, NULL);
}

/* Levels of the full matrix: 1, 4, 5, 6, 7, 9 and 12 where the backend
 * has them (5: between gzhttp's default and ours, see bench-compare);
 * every level of a backend with at most four (ISA-L's 1-4). */
static int
full_levels(const struct gz_backend *be, int *lv)
{
	static const int want[] = { 1, 4, 5, 6, 7, 9, 12 };
	int n = 0, l;
	size_t i;

	if (be->level_max - be->level_min < 4) {
		for (l = be->level_min; l <= be->level_max; l++)
			lv[n++] = l;
		return n;
	}
	for (i = 0; i < sizeof want / sizeof want[0]; i++)
		if (want[i] >= be->level_min && want[i] <= be->level_max)
			lv[n++] = want[i];
	return n;
}

/*
 * The row set. Default (make bench): every backend at its default level
 * plus zlib 6 and libdeflate 6, for the Handler and Raw families, S and P;
 * Cached for the default backend; Padded S for it; Unpooled S for each
 * backend's default.
 * Full (make bench-full): every backend x full_levels for Handler and Raw,
 * S and P; Cached and Unpooled as in the default set; Stream S and P for
 * the default backend. RawSmallWindow S for
 * zlib where nginx_params() shrinks the window (the 2k rows).
 */
static void
build_rows(void)
{
	const struct gz_backend *be, *dflt;
	int lv[16], nlv, s, i, b, l;

	dflt = gz_backend_default();
	for (s = 0; s < BH_NSIZES; s++) {
		for (b = 0; gz_backends[b]; b++) {
			be = gz_backends[b];
			if (bh_opt.full) {
				nlv = full_levels(be, lv);
			} else {
				nlv = 0;
				lv[nlv++] = be->level_default;
				/* The zlib-6 / libdeflate-6 comparison. */
				if (be->level_default != 6 && 6 >= be->level_min &&
				    6 <= be->level_max &&
				    (strcmp(be->name, "zlib") == 0 ||
				     strcmp(be->name, "libdeflate") == 0))
					lv[nlv++] = 6;
			}
			for (i = 0; i < nlv; i++) {
				int wb, ml;
				add_rows(K_HANDLER, be, lv[i], s, true);
				add_rows(K_RAW, be, lv[i], s, true);
				/* The small-body proposal, where it changes anything. */
				if (strcmp(be->name, "zlib") == 0 &&
				    nginx_params(bh_body_len[s], &wb, &ml))
					add_rows(K_SMALLWIN, be, lv[i], s, false);
			}
		}
		if (dflt) {
			/* The default handler as clients see it: a browser
			 * (zstd where built) and a gzip-only client. */
			add_rows_ae(K_HANDLER, dflt, dflt->level_default, s, true, BH_AE_BROWSER,
				    "browser");
			add_rows_ae(K_HANDLER, dflt, dflt->level_default, s, true, "gzip", "gzip");
			add_rows(K_CACHED, dflt, dflt->level_default, s, true);
			/* What a client without gzip costs, beside libmicrohttpd alone. */
			add_rows(K_IDENTITY, dflt, dflt->level_default, s, true);
			add_rows(K_PLAIN, dflt, dflt->level_default, s, true);
			/* What length hiding costs, beside GzipHandler S. */
			add_rows(K_PADDED, dflt, dflt->level_default, s, false);
			/* A bulk stream of unknown size, chunked (libdeflate's
			 * streams are zlib's at the same level). Full set only:
			 * its six rows add about 12 s at make bench's flags. */
			if (bh_opt.full)
				add_rows(K_STREAM, dflt, dflt->level_default, s, true);
		}
		for (b = 0; gz_backends[b]; b++) {
			be = gz_backends[b];
			l = be->level_default;
			add_rows(K_UNPOOLED, be, l, s, be == dflt);
		}
		/* zstd and brotli beside gzip: the levels where one
		 * can beat libdeflate 6 on time, on size, or both. */
		for (b = 0; gz_coding_backends[b]; b++) {
			/* zstd 1-5: the default level's neighbours. */
			static const int zl[] = { 1, 2, 3, 4, 5, 6 }, bl[] = { 1, 4, 5 };
			const int nzl = (int)(sizeof zl / sizeof zl[0]);

			be = gz_coding_backends[b];
			if (bh_opt.full) {
				nlv = full_levels(be, lv);
			} else {
				const int *src = be->coding == GZ_CODING_ZSTD ? zl : bl;

				int n = be->coding == GZ_CODING_ZSTD ? nzl : 3;

				for (nlv = 0; nlv < n; nlv++)
					lv[nlv] = src[nlv];
			}
			for (i = 0; i < nlv; i++) {
				add_rows(K_HANDLER, be, lv[i], s, true);
				add_rows(K_RAW, be, lv[i], s, true);
			}
		}
	}
}

/* ======================================================================== */
/* Options and main                                                         */
/* ======================================================================== */

static void
usage(FILE *f)
{
	fputs("usage: bench_handler [options]\n"
	      "  --benchtime T   time per run, e.g. 1s, 0.2s, 500ms; or Nx for N iterations\n"
	      "                  (default 1s)\n"
	      "  --count N       passes over all rows; the median is reported (default 1)\n"
	      "  --filter RE     only rows whose name matches the POSIX extended regex RE\n"
	      "  --cpu LIST      thread counts for the P rows, e.g. 1,2,4 (default: online CPUs)\n"
	      "  --payload FILE  use FILE's first 2048/20480/102400 bytes instead of the\n"
	      "                  generated JSON document\n"
	      "  --full          the whole matrix (every backend x level), as make bench-full\n"
	      "  --out FILE      also write the output to FILE\n"
	      "  -v              progress on stderr\n",
	      f);
}

static void
parse_benchtime(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	bh_opt.benchtime_s = 0;
	bh_opt.benchtime_n = 0;
	if (end == s || v <= 0)
		die("bad --benchtime %s", s);
	if (strcmp(end, "x") == 0)
		bh_opt.benchtime_n = (uint64_t)v;
	else if (strcmp(end, "s") == 0 || *end == '\0')
		bh_opt.benchtime_s = v;
	else if (strcmp(end, "ms") == 0)
		bh_opt.benchtime_s = v / 1e3;
	else
		die("bad --benchtime %s (use 1s, 200ms or 100x)", s);
}

static void
parse_cpus(const char *s)
{
	char *dup = strdup(s), *tok, *save = NULL;

	bh_opt.ncpus = 0;
	for (tok = strtok_r(dup, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int n = atoi(tok);
		if (n < 1 || n > 64 || bh_opt.ncpus == BH_MAX_CPUS)
			die("bad --cpu %s", s);
		bh_opt.cpus[bh_opt.ncpus++] = n;
	}
	free(dup);
	if (bh_opt.ncpus == 0)
		die("bad --cpu %s", s);
}

static void
load_payload(void)
{
	int s;

	if (!bh_opt.payload) {
		for (s = 0; s < BH_NSIZES; s++) {
			bh_body_len[s] = payload_json_sized(bh_size[s], &bh_body[s]);
			if (bh_body_len[s] != bh_size[s])
				die("payload_json_sized(%zu) failed", bh_size[s]);
		}
		return;
	}
	{
		FILE *f = fopen(bh_opt.payload, "rb");
		uint8_t *all;
		size_t len;
		if (!f)
			die("%s: %s", bh_opt.payload, strerror(errno));
		all = malloc(bh_size[BH_NSIZES - 1]);
		if (!all)
			die("out of memory");
		len = fread(all, 1, bh_size[BH_NSIZES - 1], f);
		fclose(f);
		for (s = 0; s < BH_NSIZES; s++) {
			if (len < bh_size[s]) {
				fprintf(stderr, "%s: %zu bytes, too short for the %s rows\n",
					bh_opt.payload, len, bh_size_name[s]);
				continue;
			}
			bh_body[s] = malloc(bh_size[s]);
			if (!bh_body[s])
				die("out of memory");
			memcpy(bh_body[s], all, bh_size[s]);
			bh_body_len[s] = bh_size[s];
		}
		free(all);
	}
}

/* The load average (other work on the machine inflates wall times). */
static void
print_loadavg(const char *label)
{
	double la[3];

	if (getloadavg(la, 3) == 3)
		out("%s: %.2f %.2f %.2f (%d CPUs online)\n", label, la[0], la[1], la[2],
		    bh_online_cpus);
}

static void
print_header(void)
{
	char model[256] = "unknown";
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[512];
	int b, s, wb, ml;

	if (f) {
		while (fgets(line, sizeof line, f))
			if (strncmp(line, "model name", 10) == 0) {
				char *v = strchr(line, ':');
				if (v) {
					v += 2;
					v[strcspn(v, "\n")] = '\0';
					snprintf(model, sizeof model, "%s", v);
				}
				break;
			}
		fclose(f);
	}
	out("goos: linux\ngoarch: %s\npkg: libmhdgz/bench\ncpu: %s\n",
#if defined(__x86_64__)
	    "amd64",
#elif defined(__aarch64__)
	    "arm64",
#else
	    "unknown",
#endif
	    model);
	out("mhdgz: %s\nlibmicrohttpd: %s\nzlib: %s\n", mhdgz_version(), MHD_get_version(),
	    zlibVersion());
	out("backends:");
	for (b = 0; gz_backends[b]; b++)
		out(" %s", gz_backends[b]->name);
	for (b = 0; gz_coding_backends[b]; b++)
		out(" %s", gz_coding_backends[b]->name);
	out("\ndefault-backend: %s\ndefault-levels:", gz_backend_default()->name);
	for (b = 0; gz_backends[b]; b++)
		out(" %s=%d", gz_backends[b]->name, gz_backends[b]->level_default);
	for (b = 0; gz_coding_backends[b]; b++)
		out(" %s=%d", gz_coding_backends[b]->name, gz_coding_backends[b]->level_default);
	out("\nncpu: %d\n", bh_online_cpus);
	for (s = 0; s < BH_NSIZES; s++)
		if (bh_body_len[s] && nginx_params(bh_body_len[s], &wb, &ml))
			out("smallwindow-%s: windowBits=%d memLevel=%d\n", bh_size_name[s], wb, ml);
	out("payload: %s\n",
	    bh_opt.payload ? bh_opt.payload : "generated JSON (examples/payload/payload.c)");
	if (bh_opt.benchtime_n)
		out("benchtime: %llux\n", (unsigned long long)bh_opt.benchtime_n);
	else
		out("benchtime: %gs\n", bh_opt.benchtime_s);
	out("count: %d\n", bh_opt.count);
	print_loadavg("loadavg");
	if (!ba_counting)
		out("note: built with a sanitizer: allocations are not counted (B/op and "
		    "allocs/op read 0)\n");
}

int
main(int argc, char **argv)
{
	struct bh_cfg *c;
	int i, rc;

	bh_opt.benchtime_s = BH_DEFAULT_BENCHTIME;
	bh_opt.count = 1;
	bh_online_cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (bh_online_cpus < 1)
		bh_online_cpus = 1;
	bh_opt.cpus[0] = bh_online_cpus > 64 ? 64 : bh_online_cpus;
	bh_opt.ncpus = 1;

	for (i = 1; i < argc; i++) {
		char key[32];
		const char *a = argv[i], *v, *eq = strchr(a, '=');

		/* --opt value or --opt=value */
		if (strncmp(a, "--", 2) == 0 && eq && (size_t)(eq - a) < sizeof key) {
			memcpy(key, a, (size_t)(eq - a));
			key[eq - a] = '\0';
			a = key;
			v = eq + 1;
		} else {
			v = NULL;
		}
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage(stdout);
			return 0;
		} else if (strcmp(a, "--full") == 0) {
			bh_opt.full = true;
			continue;
		} else if (strcmp(a, "-v") == 0) {
			bh_opt.verbose = true;
			continue;
		}
		if (!v) {
			if (i + 1 >= argc) {
				usage(stderr);
				return 2;
			}
			v = argv[++i];
		}
		if (strcmp(a, "--benchtime") == 0) {
			parse_benchtime(v);
		} else if (strcmp(a, "--count") == 0) {
			bh_opt.count = atoi(v);
			if (bh_opt.count < 1 || bh_opt.count > BH_MAX_COUNT)
				die("bad --count %s (1-%d)", v, BH_MAX_COUNT);
		} else if (strcmp(a, "--filter") == 0) {
			if (regcomp(&bh_opt.filter, v, REG_EXTENDED | REG_NOSUB) != 0)
				die("bad --filter regex %s", v);
			bh_opt.have_filter = true;
		} else if (strcmp(a, "--cpu") == 0) {
			parse_cpus(v);
		} else if (strcmp(a, "--payload") == 0) {
			bh_opt.payload = v;
		} else if (strcmp(a, "--out") == 0) {
			bh_opt.out = v;
		} else {
			usage(stderr);
			return 2;
		}
	}

	/* Before any mhdgz allocation: mhdgz refuses to switch allocators while
	 * a block of the old one is live. */
	rc = ba_install_mhdgz();
	if (rc < 0)
		die("mhdgz_set_allocator: %s", mhdgz_strerror(rc));
	if (bh_opt.out) {
		bh_out_file = fopen(bh_opt.out, "w");
		if (!bh_out_file)
			die("%s: %s", bh_opt.out, strerror(errno));
	}
	load_payload();
	build_rows();
	print_header();
	if (bh_cfgs) {
		bh_verify_all();
		bh_run_all();
	}
	bh_events_all();
	bh_dict_rows();
	print_loadavg("\n# loadavg at the end");
	fflush(stdout);
	if (bh_out_file)
		fclose(bh_out_file);

	while (bh_cfgs) {
		c = bh_cfgs;
		bh_cfgs = c->next;
		free(c);
	}
	while (bh_handlers) {
		struct bh_handler *h = bh_handlers;
		bh_handlers = h->next;
		mhdgz_free(h->gz);
		free(h);
	}
	for (i = 0; i < BH_NSIZES; i++)
		free(bh_body[i]);
	if (bh_opt.have_filter)
		regfree(&bh_opt.filter);
	return 0;
}
