/* dict.c: gzserve's RFC 9842 compression dictionaries: --dictionary files, and the /dict/ demo (v1 of a script as the dictionary, v2 as dcz). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gzserve.h"

struct dict_demo {
	char *v1, *v2; /* the two versions of the script */
	size_t len, len2;
	struct MHD_Response *page, *r1, *r2;
};

static const char dict_page[] =
	"<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>mhdgz: dcz demo</title>\n"
	"</head><body><h1>Compression dictionary transport (RFC 9842)</h1>\n"
	"<p>v1 of a script is fetched and kept as a dictionary (Use-As-Dictionary);\n"
	"then v2 is fetched: a browser that supports dcz sends v1's SHA-256 as\n"
	"Available-Dictionary and receives v2 as dcz, a delta against v1.</p>\n"
	"<pre id=\"out\">loading...</pre>\n<script>\n"
	"async function size(u, run) {\n"
	"  const r = await fetch(u); const t = await r.text();\n"
	"  if (run) (0, eval)(t); /* v2 runs: appVersion becomes 2 */\n"
	"  await new Promise(f => setTimeout(f, 100));\n"
	"  const e = performance.getEntriesByName(new URL(u, location).href).pop();\n"
	"  return u + ': ' + t.length + ' bytes, ' + (e ? e.encodedBodySize : '?') +\n"
	"    ' on the wire' + (run ? ', ran: appVersion ' + globalThis.appVersion : '');\n}\n"
	"(async () => {\n"
	"  const a = await size('/dict/app.v1.js');\n"
	"  await new Promise(f => setTimeout(f, 500));\n"
	"  const b = await size('/dict/app.v2.js', true);\n"
	"  const st = await (await fetch('/stats')).json();\n"
	"  document.getElementById('out').textContent = a + '\\n' + b +\n"
	"    '\\nserver: dict_hits ' + st.dict_hits + ', bytes saved vs zstd ' +\n"
	"    st.dict_bytes_saved;\n"
	"})();\n</script></body></html>\n";

/* A script of about 40 KB; v2 changes a number every few lines. */
static char *
make_script(int version, size_t *len_ret)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	int i;

	if (!f)
		return NULL;
	fprintf(f, "/* app.js version %d: the mhdgz dcz demo */\n", version);
	for (i = 0; i < 600; i++)
		fprintf(f,
			"function widget%d(el) { el.dataset.widget = '%d'; return el.querySelector"
			"('.w%d') || null; }\n",
			i, version == 2 && i % 50 == 0 ? i * 7 : i, i);
	fprintf(f, "globalThis.appVersion = %d;\n", version);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	*len_ret = len;
	return buf;
}

static int
add_file(struct server *s, size_t i, const char *file, const char *match)
{
	struct mhdgz_dictionary_options o = { .size = sizeof o, .match = match };
	FILE *f = fopen(file, "rb");
	char *buf = NULL;
	long n;
	int rc;

	if (!f || fstat(fileno(f), &s->dict_st[i]) != 0 || fseek(f, 0, SEEK_END) != 0 ||
	    (n = ftell(f)) <= 0 || fseek(f, 0, SEEK_SET) != 0 || !(buf = malloc((size_t)n)) ||
	    fread(buf, 1, (size_t)n, f) != (size_t)n) {
		fprintf(stderr, "gzserve: --dictionary %s: cannot read it (or it is empty)\n",
			file);
		if (f)
			fclose(f);
		free(buf);
		return -1;
	}
	fclose(f);
	rc = mhdgz_dictionary_add(s->gz, buf, (size_t)n, &o, &s->dicts[i]);
	free(buf); /* copied */
	if (rc != 0) {
		fprintf(stderr, "gzserve: --dictionary %s --dictionary-match %s: %s\n", file, match,
			mhdgz_strerror(rc));
		return -1;
	}
	return 0;
}

/* A --dictionary FILE beneath --root is advertised on its own responses
 * (files.c): that is how a browser learns it (RFC 9842 section 2.1). */
const struct mhdgz_dictionary *
dict_of_file(const struct server *s, const struct stat *st)
{
	for (size_t i = 0; i < s->cfg.ndict; i++) {
		const struct stat *d = &s->dict_st[i];

		if (s->dicts[i] && d->st_dev == st->st_dev && d->st_ino == st->st_ino &&
		    d->st_size == st->st_size && d->st_mtim.tv_sec == st->st_mtim.tv_sec &&
		    d->st_mtim.tv_nsec == st->st_mtim.tv_nsec)
			return s->dicts[i];
	}
	return NULL;
}

int
dict_init(struct server *s)
{
	struct mhdgz_dictionary_options o = { .size = sizeof o, .match = "/dict/app.*.js" };
	struct mhdgz_coding_info zi = { .size = sizeof zi };
	struct dict_demo *dd;
	size_t i;

	for (i = 0; i < s->cfg.ndict; i++)
		if (add_file(s, i, s->cfg.dict_file[i], s->cfg.dict_match[i]) != 0)
			return -1;
	if (s->cfg.root || mhdgz_coding_info(NULL, MHDGZ_CODING_ZSTD, &zi) != 0 || !zi.available)
		return 0; /* the demo is demo mode's, and needs zstd */
	dd = calloc(1, sizeof *dd);
	if (!dd)
		goto nomem;
	s->dict_demo = dd;
	dd->v1 = make_script(1, &dd->len);
	dd->v2 = make_script(2, &dd->len2);
	if (!dd->v1 || !dd->v2)
		goto nomem;
	dd->page = mhdgz_response_from_buffer(s->gz, sizeof dict_page - 1, (void *)dict_page,
					      MHD_RESPMEM_PERSISTENT);
	dd->r1 = mhdgz_response_from_buffer(s->gz, dd->len, dd->v1, MHD_RESPMEM_PERSISTENT);
	dd->r2 = mhdgz_response_from_buffer(s->gz, dd->len2, dd->v2, MHD_RESPMEM_PERSISTENT);
	if (!dd->page || !dd->r1 || !dd->r2 ||
	    MHD_add_response_header(dd->page, "Content-Type", "text/html; charset=utf-8") !=
		    MHD_YES ||
	    MHD_add_response_header(dd->r1, "Content-Type", "text/javascript") != MHD_YES ||
	    MHD_add_response_header(dd->r2, "Content-Type", "text/javascript") != MHD_YES ||
	    /* A dictionary is kept only while fresh. */
	    MHD_add_response_header(dd->r1, "Cache-Control", "max-age=3600") != MHD_YES ||
	    /* v1's body is the dictionary, and v1 says so (Use-As-Dictionary) */
	    mhdgz_dictionary_add_response(s->gz, dd->r1, &o, NULL) != 0)
		goto nomem;
	return 0;
nomem:
	fprintf(stderr, "gzserve: out of memory\n");
	return -1;
}

void
dict_fini(struct server *s)
{
	struct dict_demo *dd = s->dict_demo;

	if (!dd)
		return;
	if (dd->page)
		MHD_destroy_response(dd->page);
	if (dd->r1)
		MHD_destroy_response(dd->r1);
	if (dd->r2)
		MHD_destroy_response(dd->r2);
	free(dd->v1);
	free(dd->v2);
	free(dd);
	s->dict_demo = NULL;
}

bool
dict_serve(struct req *rq, struct MHD_Connection *conn, const char *path, const char *method,
	   enum MHD_Result *ret)
{
	struct dict_demo *dd = rq->s->dict_demo;

	(void)method;
	if (!dd)
		return false;
	if (strcmp(path, "/dict/") == 0)
		*ret = queue(rq, conn, MHD_HTTP_OK, dd->page, sizeof dict_page - 1);
	else if (strcmp(path, "/dict/app.v1.js") == 0)
		*ret = queue(rq, conn, MHD_HTTP_OK, dd->r1, dd->len);
	else if (strcmp(path, "/dict/app.v2.js") == 0)
		*ret = queue(rq, conn, MHD_HTTP_OK, dd->r2, dd->len2);
	else
		return false;
	return true;
}
