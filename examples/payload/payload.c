/* payload.c: generator of the deterministic JSON payload (API-like order records). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "payload.h"

/* Every record is drawn from its own generator, seeded from its index, so
 * a record's bytes do not depend on how many came before it or on how its
 * note was cut. */
#define PL_SEED 0x6d6864677a2d7631ull /* "mhdgz-v1" */

/* The natural note is 0..PL_NOTE_MAX bytes. */
#define PL_NOTE_MAX 96

static const char pl_head[] = "{\"object\":\"list\",\"url\":\"/v1/orders\",\"has_more\":false,"
			      "\"data\":[";
static const char pl_tail[] = "]}";

/* splitmix64: tiny, fast, and the same on every platform. */
static uint64_t
pl_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static unsigned int
pl_below(uint64_t *s, unsigned int n)
{
	return (unsigned int)(pl_next(s) % n);
}

#define PL_PICK(s, arr) ((arr)[pl_below((s), sizeof(arr) / sizeof((arr)[0]))])

/* Names as displayed (some non-ASCII, as real customer data has) and as
 * they appear in e-mail addresses. */
static const char *const pl_first[][2] = {
	{ "Alice", "alice" },   { "Bruno", "bruno" },       { "Chen", "chen" },
	{ "Dana", "dana" },     { "Emil", "emil" },         { "Fatima", "fatima" },
	{ "Grace", "grace" },   { "Hiroshi", "hiroshi" },   { "Inès", "ines" },
	{ "José", "jose" },     { "Kateřina", "katerina" }, { "Liam", "liam" },
	{ "Mia", "mia" },       { "Noah", "noah" },         { "Olga", "olga" },
	{ "Priya", "priya" },   { "Quentin", "quentin" },   { "Rosa", "rosa" },
	{ "Søren", "soren" },   { "Tomás", "tomas" },       { "Uma", "uma" },
	{ "Viktor", "viktor" }, { "Wen", "wen" },           { "Yusuf", "yusuf" },
	{ "Zoë", "zoe" },       { "Łukasz", "lukasz" },
};

static const char *const pl_last[][2] = {
	{ "Anderson", "anderson" }, { "Becker", "becker" },     { "Costa", "costa" },
	{ "Dubois", "dubois" },     { "Eriksen", "eriksen" },   { "Fischer", "fischer" },
	{ "García", "garcia" },     { "Horvat", "horvat" },     { "Ivanova", "ivanova" },
	{ "Jensen", "jensen" },     { "Kowalski", "kowalski" }, { "Larsen", "larsen" },
	{ "Müller", "muller" },     { "Nakamura", "nakamura" }, { "O'Brien", "obrien" },
	{ "Petrov", "petrov" },     { "Rossi", "rossi" },       { "Schmidt", "schmidt" },
	{ "Tanaka", "tanaka" },     { "Novak", "novak" },       { "Wang", "wang" },
	{ "Yilmaz", "yilmaz" },
};

static const char *const pl_domains[] = {
	"example.com", "example.org", "example.net", "mail.example.com", "shop.example.de",
};

static const char *const pl_countries[][2] = {
	{ "DE", "Berlin" }, { "FR", "Lyon" },    { "US", "Portland" }, { "JP", "Osaka" },
	{ "BR", "Recife" }, { "PL", "Kraków" },  { "DK", "Aarhus" },   { "IN", "Pune" },
	{ "IT", "Torino" }, { "ES", "Sevilla" }, { "CZ", "Brno" },     { "CA", "Halifax" },
};

static const char *const pl_streets[] = {
	"Main Street",  "Station Road",  "Hauptstraße", "Rue de la Paix", "Oak Avenue",
	"Harbour Lane", "Market Square", "Church Road", "Via Roma",       "Mill Lane",
};

static const char *const pl_status[] = {
	"pending",   "paid",      "paid",     "shipped",   "shipped",
	"delivered", "delivered", "refunded", "cancelled",
};

static const char *const pl_shipping[] = { "standard", "express", "pickup", "economy" };

static const char *const pl_currency[] = { "eur", "usd", "eur", "gbp", "jpy" };

static const char *const pl_products[] = {
	"Wireless Mouse",
	"Mechanical Keyboard",
	"USB-C Cable (2 m)",
	"Laptop Stand",
	"Noise-Cancelling Headphones",
	"27\\\" Monitor",
	"Webcam HD",
	"Desk Lamp",
	"Ergonomic Chair",
	"Notebook A5",
	"Fountain Pen",
	"Coffee Beans 1 kg",
	"Water Bottle",
	"Backpack 20 L",
	"Phone Case",
	"Charger 65 W",
};

static const char *const pl_tags[] = {
	"gift",         "priority",   "wholesale", "repeat-customer", "first-order", "fragile",
	"subscription", "promo-2024", "b2b",       "international",
};

/* Words of the free-text note. */
static const char *const pl_words[] = {
	"please",   "deliver", "to",      "the",      "back",      "door",     "after",
	"5pm",      "call",    "on",      "arrival",  "leave",     "with",     "neighbour",
	"at",       "number",  "gift",    "wrap",     "if",        "possible", "no",
	"invoice",  "in",      "parcel",  "customer", "asked",     "for",      "faster",
	"shipping", "address", "updated", "by",       "support",   "ticket",   "order",
	"was",      "split",   "into",    "two",      "shipments", "ring",     "bell",
	"twice",    "fragile", "handle",  "care",
};

/* A bounded string builder; writes past cap are counted, not stored. */
struct pl_buf {
	char *p;
	size_t len, cap;
};

static void
pl_put(struct pl_buf *b, const char *s, size_t n)
{
	if (b->len + n <= b->cap)
		memcpy(b->p + b->len, s, n);
	b->len += n;
}

static void
pl_puts(struct pl_buf *b, const char *s)
{
	pl_put(b, s, strlen(s));
}

__attribute__((format(printf, 2, 3))) static void
pl_printf(struct pl_buf *b, const char *fmt, ...)
{
	char tmp[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof tmp, fmt, ap);
	va_end(ap);
	if (n > 0)
		pl_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* An ISO 8601 UTC timestamp from seconds since 2024-01-01, without gmtime()
 * so the output cannot depend on the C library. */
static void
pl_time(struct pl_buf *b, const char *key, uint64_t secs)
{
	static const unsigned int mdays[12] = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	unsigned int day = (unsigned int)(secs / 86400), month = 0;

	day %= 366; /* stays inside 2024, a leap year */
	while (day >= mdays[month])
		day -= mdays[month++];
	pl_printf(b, "\"%s\":\"2024-%02u-%02uT%02u:%02u:%02uZ\"", key, month + 1, day + 1,
		  (unsigned int)(secs / 3600 % 24), (unsigned int)(secs / 60 % 60),
		  (unsigned int)(secs % 60));
}

/* The note: words from the record's own word generator, cut at exactly len
 * bytes (the words are ASCII, so any cut is valid UTF-8 and valid JSON). */
static void
pl_note(struct pl_buf *b, uint64_t seed, size_t len)
{
	uint64_t s = seed;
	size_t done = 0;

	pl_puts(b, "\"note\":\"");
	while (done < len) {
		const char *w = PL_PICK(&s, pl_words);
		size_t n = strlen(w);

		if (done > 0) {
			pl_put(b, " ", 1);
			if (++done == len)
				break;
		}
		if (n > len - done)
			n = len - done;
		pl_put(b, w, n);
		done += n;
	}
	pl_puts(b, "\"}");
}

/*
 * Record i. note_len < 0 gives the note its natural length; otherwise the
 * note is exactly note_len bytes. Returns the record's length in bytes
 * (also when it did not fit in b).
 */
static size_t
pl_record(struct pl_buf *b, uint64_t i, long note_len)
{
	uint64_t s = PL_SEED ^ (i * 0xd1342543de82ef95ull);
	size_t start = b->len;
	unsigned int k, nitems, ntags, first, last, country, amount = 0;
	uint64_t created;
	uint64_t r1 = pl_next(&s), r2 = pl_next(&s);
	long natural = (long)pl_below(&s, PL_NOTE_MAX + 1);
	uint64_t note_seed = pl_next(&s);

	first = pl_below(&s, sizeof pl_first / sizeof pl_first[0]);
	last = pl_below(&s, sizeof pl_last / sizeof pl_last[0]);
	country = pl_below(&s, sizeof pl_countries / sizeof pl_countries[0]);
	created = i * 3517 + pl_below(&s, 3000);

	pl_printf(b, "{\"id\":\"ord_%06llu\",", (unsigned long long)(100000 + i));
	pl_printf(b, "\"uuid\":\"%08x-%04x-4%03x-%04x-%012llx\",", (unsigned int)(r1 >> 32),
		  (unsigned int)(r1 >> 16) & 0xffff, (unsigned int)r1 & 0xfff,
		  0x8000 | ((unsigned int)(r2 >> 48) & 0x3fff),
		  (unsigned long long)(r2 & 0xffffffffffffull));
	pl_printf(b, "\"object\":\"order\",\"status\":\"%s\",", PL_PICK(&s, pl_status));
	pl_time(b, "created_at", created);
	pl_puts(b, ",");
	pl_time(b, "updated_at", created + pl_below(&s, 200000));
	pl_printf(b,
		  ",\"customer\":{\"id\":\"cus_%05u\",\"name\":\"%s %s\","
		  "\"email\":\"%s.%s@%s\",\"country\":\"%s\",\"vip\":%s},",
		  10000 + pl_below(&s, 90000), pl_first[first][0], pl_last[last][0],
		  pl_first[first][1], pl_last[last][1], PL_PICK(&s, pl_domains),
		  pl_countries[country][0], pl_below(&s, 5) == 0 ? "true" : "false");
	pl_puts(b, "\"items\":[");
	nitems = 1 + pl_below(&s, 3);
	for (k = 0; k < nitems; k++) {
		unsigned int qty = 1 + pl_below(&s, 3), price = 199 + pl_below(&s, 30000);

		amount += qty * price;
		pl_printf(b,
			  "%s{\"sku\":\"SKU-%05u\",\"name\":\"%s\",\"quantity\":%u,"
			  "\"unit_amount\":%u}",
			  k ? "," : "", pl_below(&s, 100000), PL_PICK(&s, pl_products), qty, price);
	}
	pl_printf(b, "],\"amount_total\":%u,\"currency\":\"%s\",\"tags\":[", amount,
		  PL_PICK(&s, pl_currency));
	ntags = pl_below(&s, 4);
	for (k = 0; k < ntags; k++)
		pl_printf(b, "%s\"%s\"", k ? "," : "", PL_PICK(&s, pl_tags));
	pl_printf(b,
		  "],\"shipping\":{\"method\":\"%s\",\"address\":{\"line1\":\"%u %s\","
		  "\"city\":\"%s\",\"postal_code\":\"%05u\"}},",
		  PL_PICK(&s, pl_shipping), 1 + pl_below(&s, 250), PL_PICK(&s, pl_streets),
		  pl_countries[country][1], pl_below(&s, 100000));
	pl_note(b, note_seed, (size_t)(note_len < 0 ? natural : note_len));
	return b->len - start;
}

/* Length of record i with a note of note_len bytes, without storing it. */
static size_t
pl_record_len(uint64_t i, long note_len)
{
	struct pl_buf probe = { .p = NULL, .len = 0, .cap = 0 };

	return pl_record(&probe, i, note_len);
}

size_t
payload_json_sized(size_t nbytes, uint8_t **buf_ret)
{
	struct pl_buf b;
	uint64_t i = 0;
	size_t fixed, room;

	if (!buf_ret || nbytes < PAYLOAD_JSON_MIN_NBYTES)
		return 0;
	b.p = malloc(nbytes);
	if (!b.p)
		return 0;
	b.len = 0;
	b.cap = nbytes;
	pl_puts(&b, pl_head);
	/* Whole records while the next one still fits after them with an empty
	 * note: that one, its note cut to fill the gap, ends the document. */
	for (;;) {
		size_t sep = i ? 1 : 0;
		size_t natural = pl_record_len(i, -1);
		size_t next_min = pl_record_len(i + 1, 0);

		if (b.len + sep + natural + 1 + next_min + sizeof pl_tail - 1 > nbytes)
			break;
		pl_put(&b, ",", sep);
		pl_record(&b, i, -1);
		i++;
	}
	if (i)
		pl_put(&b, ",", 1);
	fixed = pl_record_len(i, 0);
	room = nbytes - b.len - (sizeof pl_tail - 1);
	if (fixed > room) { /* only when nbytes cannot hold even record 0 */
		free(b.p);
		return 0;
	}
	pl_record(&b, i, (long)(room - fixed));
	pl_puts(&b, pl_tail);
	if (b.len != nbytes) { /* cannot happen; never hand out a short buffer */
		free(b.p);
		return 0;
	}
	*buf_ret = (uint8_t *)b.p;
	return nbytes;
}

size_t
payload_json(uint8_t **buf_ret)
{
	return payload_json_sized(PAYLOAD_JSON_NBYTES, buf_ret);
}
