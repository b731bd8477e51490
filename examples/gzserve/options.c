/* options.c: gzserve's command line: --help, each option's parsing and range, exit 2 on anything invalid. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gzserve.h"

/* ------------------------------------------------------------------------ */
/* Options                                                                  */

/* --help: a summary; gzserve(1) is the manual. */
static void
usage(FILE *f)
{
	fprintf(f,
		"Usage: gzserve [OPTION]...\n"
		"A small HTTP server on libmicrohttpd whose responses are compressed by mhdgz.\n"
		"Without --root it serves a built-in demo: / (index page), /2k.json, /20k.json,\n"
		"/100k.json (the benchmark payloads), /events (server-sent events), /stats (the\n"
		"handler's counters), /204, POST /echo (the decoded length and CRC-32 of a body\n"
		"sent identity or gzip) and /dict/ (RFC 9842 dictionaries).\n"
		"\n"
		"  --bind ADDR       IPv4 or IPv6 address to listen on (default 127.0.0.1)\n"
		"  --port N          TCP port, 0-65535 (default 8080; 0 picks a free one);\n"
		"                    'listening on http://ADDR:PORT/' is printed on stdout\n"
		"  --root DIR        serve the files under DIR instead of the demo\n"
		"  --backend NAME    gzip compressor: zlib, libdeflate or isal (default libdeflate)\n"
		"  --level N         level in the backend's range: zlib 1-9, libdeflate 1-12,\n"
		"                    isal 1-4 (default 6, 5, 2)\n"
		"  --min-size BYTES  smaller bodies go uncompressed (default %u)\n"
		"  --types LIST      media types to compress, comma-separated, replacing the\n"
		"                    default list: type/subtype, type/*, */*+suffix\n"
		"  --events N        /events: send N events, 1-1000000 (default 10)\n"
		"  --event-ms MS     /events: milliseconds between events (default 1000)\n"
		"  --threads N       thread pool size, 1-1024 (default: the number of CPUs)\n"
		"  --codings LIST    gzip, zstd, br: the codings offered, in the server's order\n"
		"                    of preference (default zstd,gzip; gzip for gzip alone)\n"
		"  --precompressed   with --root: send FILE.gz, FILE.zst or FILE.br when the\n"
		"                    client accepts that coding, if as new as FILE (a .zst:\n"
		"                    with a window of at most 8 MiB)\n"
		"  --etag POLICY     a compressed response's ETag: weak (default), suffix,\n"
		"                    drop or keep\n"
		"  --length-hiding N BREACH mitigation: pad gzip responses with 1 to N bytes\n"
		"                    (1-%u; libmhdgz's default N is %u)\n"
		"  --no-compress     never compress on the fly\n"
		"  --cache-size BYTES with --root: bytes of coded bodies the library keeps,\n"
		"                    files' by version (default %u; 0: no file versions)\n"
		"  --coder-memory BYTES compressor state of live streams, at most; past it\n"
		"                    a new stream goes uncompressed (default %zu)\n"
		"  --dictionary FILE --dictionary-match PATTERN\n"
		"                    RFC 9842: FILE is a dictionary for paths matching PATTERN\n"
		"                    ('*' any run; repeatable, up to 16); beneath --root,\n"
		"                    FILE's own responses advertise it (Use-As-Dictionary)\n"
		"  --quiet           no access log (one line per request on stderr) and no\n"
		"                    libmicrohttpd messages\n"
		"  --help            this text\n"
		"\n"
		"SIGINT or SIGTERM lets requests in flight finish (up to %d s) and exits 0.\n"
		"Exit status 2: invalid option; 1: cannot start. See gzserve(1).\n",
		MHDGZ_DEFAULT_MIN_NBYTES, MHDGZ_LENGTH_HIDING_MAX_LIMIT,
		MHDGZ_DEFAULT_LENGTH_HIDING_MAX, GZS_CACHE_SIZE_DEFAULT, MHDGZ_DEFAULT_CODER_NBYTES,
		GZS_GRACE_MS / 1000);
}

void
bad_option(const char *fmt, ...)
{
	va_list ap;

	fputs("gzserve: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry 'gzserve --help'.\n", stderr);
	exit(2);
}

/* A whole decimal number in [min, max], or exit 2 naming the option. */
static unsigned long long
number_arg(const char *opt, const char *v, unsigned long long min, unsigned long long max)
{
	unsigned long long n;
	char *end;

	errno = 0;
	if (!*v || *v == '-' || *v == '+' || isspace((unsigned char)*v))
		bad_option("%s: '%s' is not a number", opt, v);
	n = strtoull(v, &end, 10);
	if (*end || errno == ERANGE)
		bad_option("%s: '%s' is not a number", opt, v);
	if (n < min || n > max)
		bad_option("%s: %s is out of range (%llu-%llu)", opt, v, min, max);
	return n;
}

/* Split a --types list into a NULL-terminated array; patterns themselves
 * are checked by mhdgz_new(). */
static void
types_arg(struct config *cfg, const char *v)
{
	char *save = NULL, *tok;
	size_t n = 0;

	free(cfg->types_buf);
	free(cfg->types);
	cfg->types_buf = strdup(v);
	/* A pattern and its separator take 2 bytes at least: room enough. */
	cfg->types = malloc((strlen(v) / 2 + 2) * sizeof *cfg->types);
	if (!cfg->types_buf || !cfg->types)
		bad_option("out of memory");
	for (tok = strtok_r(cfg->types_buf, ", \t", &save); tok;
	     tok = strtok_r(NULL, ", \t", &save))
		cfg->types[n++] = tok;
	if (n == 0)
		bad_option("--types: empty list (use --no-compress to compress nothing)");
	cfg->types[n] = NULL;
}

static void
etag_arg(struct config *cfg, const char *v)
{
	if (strcmp(v, "weak") == 0)
		cfg->etag = MHDGZ_ETAG_WEAKEN;
	else if (strcmp(v, "suffix") == 0)
		cfg->etag = MHDGZ_ETAG_SUFFIX;
	else if (strcmp(v, "drop") == 0)
		cfg->etag = MHDGZ_ETAG_DROP;
	else if (strcmp(v, "keep") == 0)
		cfg->etag = MHDGZ_ETAG_KEEP;
	else
		bad_option("--etag: '%s' is not weak, suffix, drop or keep", v);
}

/* --dictionary FILE, each followed by its --dictionary-match PATTERN. */
static void
dict_arg(struct config *cfg, const char *file, const char *match)
{
	if (file) {
		if (cfg->ndict == GZS_DICT_MAX)
			bad_option("--dictionary: at most %d", GZS_DICT_MAX);
		if (cfg->ndict && !cfg->dict_match[cfg->ndict - 1])
			bad_option("--dictionary %s needs a --dictionary-match",
				   cfg->dict_file[cfg->ndict - 1]);
		cfg->dict_file[cfg->ndict++] = file;
		return;
	}
	if (!cfg->ndict || cfg->dict_match[cfg->ndict - 1])
		bad_option("--dictionary-match follows a --dictionary");
	cfg->dict_match[cfg->ndict - 1] = match;
}

/* One option c (its letter in longopts) with its argument v. */
static void
take_option(struct config *cfg, int c, const char *v, const char **level_arg)
{
	int rc;

	switch (c) {
	case 'b':
		cfg->bind = v;
		break;
	case 'p':
		cfg->port = (unsigned int)number_arg("--port", v, 0, 65535);
		break;
	case 'r':
		cfg->root = v;
		break;
	case 'B': /* the names mhdgz_backend_info() gives */
		for (rc = MHDGZ_BACKEND_ZLIB; rc <= MHDGZ_BACKEND_ISAL; rc++) {
			struct mhdgz_backend_info bi = { .size = sizeof bi };

			if (mhdgz_backend_info((enum mhdgz_backend)rc, &bi) == 0 &&
			    strcasecmp(v, bi.name) == 0) {
				if (!bi.available)
					bad_option(
						"--backend: '%s' was not compiled into this libmhdgz",
						v);
				cfg->backend = (enum mhdgz_backend)rc;
				break;
			}
		}
		if (rc > MHDGZ_BACKEND_ISAL)
			bad_option("--backend: '%s' is not zlib, libdeflate or isal", v);
		break;
	case 'l':
		*level_arg = v;
		break;
	case 'm':
		cfg->min_size = (size_t)number_arg("--min-size", v, 0, SIZE_MAX);
		cfg->min_size_set = true;
		break;
	case 't':
		types_arg(cfg, v);
		break;
	case 'T':
		cfg->threads = (unsigned int)number_arg("--threads", v, 1, 1024);
		break;
	case 'e':
		cfg->events = (unsigned int)number_arg("--events", v, 1, 1000000);
		break;
	case 'E':
		cfg->event_ms = (unsigned int)number_arg("--event-ms", v, 0, 3600000);
		break;
	case 'P':
		cfg->precompressed = true;
		break;
	case 'c': /* parsed by mhdgz_new(), once (main.c) */
		cfg->codings = v;
		break;
	case 'g':
		etag_arg(cfg, v);
		break;
	case 'L':
		cfg->length_hiding = (size_t)number_arg("--length-hiding", v, 1,
							MHDGZ_LENGTH_HIDING_MAX_LIMIT);
		break;
	case 'n':
		cfg->no_compress = true;
		break;
	case 'C':
		cfg->cache_size = (size_t)number_arg("--cache-size", v, 0, SIZE_MAX);
		cfg->cache_size_set = true;
		break;
	case 'M':
		cfg->coder_memory = (size_t)number_arg("--coder-memory", v, 1, SIZE_MAX);
		break;
	case 'd':
	case 'D':
		dict_arg(cfg, c == 'd' ? v : NULL, v);
		break;
	case 'q':
		cfg->quiet = true;
		break;
	}
}

/* What no single option can tell: options that need another, and the
 * level's range, which depends on the backend whichever came first. */
static void
check_options(struct config *cfg, const char *level_arg)
{

	if (cfg->ndict && !cfg->dict_match[cfg->ndict - 1])
		bad_option("--dictionary %s needs a --dictionary-match",
			   cfg->dict_file[cfg->ndict - 1]);
	if (cfg->precompressed && !cfg->root)
		bad_option("--precompressed needs --root");
	/* It acts on file responses only: in the demo it would do nothing. */
	if (cfg->cache_size_set && !cfg->root)
		bad_option("--cache-size needs --root");
	if (level_arg) {
		struct mhdgz_backend_info bi = { .size = sizeof bi };

		if (mhdgz_backend_info(cfg->backend, &bi) != 0 || !bi.available)
			bad_option("--backend: not available");
		cfg->level = (int)number_arg("--level", level_arg, (unsigned long long)bi.level_min,
					     (unsigned long long)bi.level_max);
		cfg->level_set = true;
	}
}

void
parse_options(int argc, char **argv, struct config *cfg)
{
	/* Long options only: each letter names its option in take_option(),
	 * and no short option is accepted (the optstring is empty). */
	static const struct option longopts[] = {
		{ "bind", required_argument, NULL, 'b' },
		{ "port", required_argument, NULL, 'p' },
		{ "root", required_argument, NULL, 'r' },
		{ "backend", required_argument, NULL, 'B' },
		{ "level", required_argument, NULL, 'l' },
		{ "min-size", required_argument, NULL, 'm' },
		{ "types", required_argument, NULL, 't' },
		{ "threads", required_argument, NULL, 'T' },
		{ "events", required_argument, NULL, 'e' },
		{ "event-ms", required_argument, NULL, 'E' },
		{ "precompressed", no_argument, NULL, 'P' },
		{ "codings", required_argument, NULL, 'c' },
		{ "etag", required_argument, NULL, 'g' },
		{ "length-hiding", required_argument, NULL, 'L' },
		{ "no-compress", no_argument, NULL, 'n' },
		{ "cache-size", required_argument, NULL, 'C' },
		{ "coder-memory", required_argument, NULL, 'M' },
		{ "dictionary", required_argument, NULL, 'd' },
		{ "dictionary-match", required_argument, NULL, 'D' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *level_arg = NULL;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int c;

	cfg->bind = "127.0.0.1";
	cfg->port = 8080;
	cfg->backend = MHDGZ_BACKEND_DEFAULT;
	cfg->threads = ncpu > 0 ? (unsigned int)(ncpu > 1024 ? 1024 : ncpu) : 1;
	cfg->etag = MHDGZ_ETAG_WEAKEN;
	cfg->cache_size = GZS_CACHE_SIZE_DEFAULT;
	cfg->events = GZS_EVENTS;
	cfg->event_ms = GZS_EVENT_MS;
	opterr = 0; /* our own messages, and exit 2 */
	while ((c = getopt_long(argc, argv, ":", longopts, NULL)) != -1) {
		if (c == 'h') {
			usage(stdout);
			exit(0);
		}
		if (c == ':')
			bad_option("%s needs a value", argv[optind - 1]);
		if (c == '?') {
			if (optopt)
				bad_option("unknown option '-%c'", optopt);
			bad_option("unknown option '%s'", argv[optind - 1]);
		}
		take_option(cfg, c, optarg, &level_arg);
	}
	if (optind < argc)
		bad_option("unexpected argument '%s'", argv[optind]);
	check_options(cfg, level_arg);
}
