// SPDX-License-Identifier: MIT
/* The SVG flamegraph: well-formed XML, escaping, merging, scale, differential, empty. */
#include "test_util.h"

#include <errno.h>
#include <time.h>

#include "../../flamegraph/fg_internal.h"
#include "../../flamegraph/flamegraph.h"
#include "util/sink.h"

/* --- helpers ------------------------------------------------------------------------- */

struct svg {
	struct sink *sink;
	const char *data;
	size_t len;
};

static void render(struct svg *out, const struct wstack *stacks, size_t n,
		   const struct fg_opts *opts)
{
	out->sink = sink_mem();
	assert_non_null(out->sink);
	assert_int_equal(flamegraph_write_svg(out->sink, stacks, n, opts), 0);
	out->data = sink_mem_data(out->sink, &out->len);
	assert_true(out->len > 0);
	assert_int_equal(strlen(out->data), out->len); /* no NUL inside */
}

static void svg_free(struct svg *out)
{
	assert_int_equal(sink_close(out->sink), 0);
}

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0, len = strlen(needle);

	for (const char *p = strstr(hay, needle); p; p = strstr(p + len, needle))
		n++;
	return n;
}

static bool is_name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '_' || c == ':' || c == '.';
}

/* '&' must start a known entity or a character reference. */
static const char *check_entity(const char *p)
{
	static const char *const ents[] = { "&lt;", "&gt;", "&amp;", "&quot;", "&apos;" };

	for (size_t i = 0; i < 5; i++) {
		if (!strncmp(p, ents[i], strlen(ents[i])))
			return p + strlen(ents[i]);
	}
	if (p[1] != '#')
		return NULL;
	for (p += 2; *p && *p != ';'; p++) {
		if (!is_name_char(*p))
			return NULL;
	}
	return *p == ';' ? p + 1 : NULL;
}

/* Parses "<name attr="v" ...>" at p; returns the end of the tag or NULL. */
static const char *check_tag(const char *p, const char **name, size_t *name_len, bool *empty)
{
	*name = ++p;
	while (is_name_char(*p))
		p++;
	*name_len = p - *name;
	if (!*name_len)
		return NULL;
	for (;;) {
		while (*p == ' ' || *p == '\n' || *p == '\t')
			p++;
		if (*p == '>' || (p[0] == '/' && p[1] == '>')) {
			*empty = *p == '/';
			return p + (*empty ? 2 : 1);
		}
		if (!is_name_char(*p))
			return NULL;
		while (is_name_char(*p))
			p++;
		if (p[0] != '=' || p[1] != '"')
			return NULL;
		for (p += 2; *p != '"'; p++) {
			if (!*p || *p == '<')
				return NULL;
			if (*p == '&') {
				const char *q = check_entity(p);

				if (!q)
					return NULL;
				p = q - 1;
			}
		}
		p++;
	}
}

/*
 * A small well-formedness check of our own, so the test means something
 * where xmllint is missing: balanced tags, quoted attributes, entities, CDATA.
 */
static void assert_well_formed(const char *doc)
{
	const char *stack[512], *p = doc, *name, *e;
	size_t lens[512], depth = 0, roots = 0, len;
	bool empty = false;

	if (!strncmp(p, "<?xml", 5))
		p = strstr(p, "?>") + 2;
	while (*p) {
		if (!strncmp(p, "<![CDATA[", 9)) {
			assert_true(depth > 0);
			p = strstr(p, "]]>");
			assert_non_null(p);
			p += 3;
		} else if (!strncmp(p, "<!--", 4)) {
			p = strstr(p, "-->");
			assert_non_null(p);
			p += 3;
		} else if (p[0] == '<' && p[1] == '/') {
			assert_true(depth > 0);
			depth--;
			assert_memory_equal(p + 2, stack[depth], lens[depth]);
			p += 2 + lens[depth];
			assert_int_equal(*p, '>');
			p++;
		} else if (*p == '<') {
			e = check_tag(p, &name, &len, &empty);
			if (!e)
				fail_msg("malformed tag at %zu: %.60s", (size_t)(p - doc), p);
			if (!depth)
				roots++;
			if (!empty) {
				assert_true(depth < 512);
				stack[depth] = name;
				lens[depth++] = len;
			}
			p = e;
		} else if (*p == '&') {
			e = check_entity(p);
			if (!e)
				fail_msg("bad entity at offset %zu: %.30s", (size_t)(p - doc), p);
			p = e;
		} else {
			if (!depth && *p != '\n' && *p != ' ')
				fail_msg("text outside the root at offset %zu", (size_t)(p - doc));
			assert_false(p[0] == ']' && p[1] == ']' && p[2] == '>');
			p++;
		}
	}
	assert_int_equal(depth, 0);
	assert_int_equal(roots, 1);
}

/* Also runs xmllint, a strict parser, when it is installed. */
static void assert_valid_xml(const struct svg *s, const char *file)
{
	const char *path = test_path(file);
	static int have_xmllint = -1;
	char cmd[PATH_MAX + 64];
	FILE *f;

	assert_well_formed(s->data);
	if (have_xmllint < 0) {
		have_xmllint = system("command -v xmllint >/dev/null 2>&1") == 0;
		if (!have_xmllint)
			printf("skipped: xmllint checks (xmllint not installed), own checks only\n");
	}
	if (!have_xmllint)
		return;
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(s->data, 1, s->len, f), s->len);
	assert_int_equal(fclose(f), 0);
	snprintf(cmd, sizeof(cmd), "xmllint --noout --nonet --huge '%s'", path);
	assert_int_equal(system(cmd), 0);
	unlink(path);
}

#define FR(n, k) ((struct wstack_frame){ (n), (k) })

/* --- tests ---------------------------------------------------------------------------- */

static void test_empty(void **state)
{
	struct fg_opts o = { .title = "CPU flamegraph", .subtitle = "eprof record -- true" };
	struct svg s;

	render(&s, NULL, 0, &o);
	assert_non_null(strstr(s.data, "no samples"));
	assert_non_null(strstr(s.data, "CPU flamegraph"));
	/* the background and the header and footer bands: no frame */
	assert_int_equal(count(s.data, "<rect"), 3);
	assert_int_equal(count(s.data, "class=\"band\""), 2);
	assert_valid_xml(&s, "empty.svg");
	svg_free(&s);

	/* stacks that weigh nothing are no samples either */
	struct wstack_frame f[] = { FR("main", 0) };
	struct wstack st = { f, 1, 0, 0 };

	render(&s, &st, 1, NULL);
	assert_non_null(strstr(s.data, "no samples"));
	assert_valid_xml(&s, "empty2.svg");
	svg_free(&s);
}

static void test_merge(void **state)
{
	struct wstack_frame a[] = { FR("main", 0), FR("run", 0), FR("parse", 0) };
	struct wstack_frame b[] = { FR("main", 0), FR("run", 0), FR("eval", 0) };
	struct wstack_frame c[] = { FR("main", 0), FR("run", 1) }; /* same name, other kind */
	struct wstack st[] = { { a, 3, 3, 0 }, { b, 3, 2, 0 }, { a, 3, 1, 0 }, { c, 2, 4, 0 } };
	struct svg s;

	render(&s, st, 4, NULL);
	assert_valid_xml(&s, "merge.svg");
	assert_int_equal(count(s.data, "<title>main ("), 1);
	assert_non_null(strstr(s.data, "<title>main (10 samples, 100.00%)"));
	/* two "run" frames: user (6 samples) and kernel (4), never merged */
	assert_int_equal(count(s.data, "<title>run ("), 2);
	assert_non_null(strstr(s.data, "<title>run (6 samples, 60.00%)"));
	assert_non_null(strstr(s.data, "<title>run (4 samples, 40.00%)"));
	/* parse appears in two input stacks: one rect of 4 */
	assert_int_equal(count(s.data, "<title>parse ("), 1);
	assert_non_null(strstr(s.data, "<title>parse (4 samples, 40.00%)"));
	assert_non_null(strstr(s.data, "<title>eval (2 samples, 20.00%)"));
	assert_non_null(strstr(s.data, "<title>all (10 samples, 100.00%)"));
	/* the model for the script: names once each, frames in preorder */
	assert_non_null(
		strstr(s.data, "\"names\":[\"all\",\"eval\",\"main\",\"parse\",\"run\",\"run\"]"));
	assert_non_null(strstr(s.data, "\"kinds\":\"400001\""));
	assert_non_null(strstr(s.data, "Reset Zoom"));
	assert_non_null(strstr(s.data, "id=\"fg-search\""));
	svg_free(&s);
}

static void test_layout(void **state)
{
	struct wstack_frame a[] = { FR("a", 0), FR("b", 0) };
	struct wstack_frame c[] = { FR("c", 0) };
	struct wstack st[] = { { a, 2, 50, 0 }, { c, 1, 50, 0 } };
	struct fg_opts o = { .width = 220, .inverted = true };
	struct svg s;

	/* widths are clamped to at least 300 px: 280 px of plot */
	render(&s, st, 2, &o);
	assert_non_null(strstr(s.data, "width=\"300\""));
	/* icicle: the root row is right under the header */
	assert_non_null(strstr(s.data, "<rect x=\"10.0\" y=\"70\" width=\"280.0\""));
	assert_non_null(strstr(s.data, "<rect x=\"10.0\" y=\"86\" width=\"140.0\""));
	assert_non_null(strstr(s.data, "<rect x=\"150.0\" y=\"86\" width=\"140.0\""));
	assert_non_null(strstr(s.data, "<rect x=\"10.0\" y=\"102\" width=\"140.0\""));
	svg_free(&s);

	o.inverted = false;
	render(&s, st, 2, &o);
	/* flame: root at the bottom; 3 rows from y=70 */
	assert_non_null(strstr(s.data, "<rect x=\"10.0\" y=\"102\" width=\"280.0\""));
	assert_non_null(strstr(s.data, "<rect x=\"10.0\" y=\"70\" width=\"140.0\""));
	svg_free(&s);
}

static void test_escaping(void **state)
{
	const char *tmpl = "std::map<std::string, std::vector<int>>::operator[](\"k\" & 'v')";
	struct wstack_frame f[] = { FR("main", 0), FR(tmpl, 0), FR("a<b>&c\"d'e", 1),
				FR("bad\xff\xfe utf8 \x01 ctl \xe2\x82", 2),
				FR("caf\xc3\xa9 \xe2\x9c\x93", 0) };
	struct fg_opts o = { .title = "<script>alert(1)</script> & \"co\"",
			     .subtitle = "eprof record -- ./a.out 'x' < in > out" };
	struct wstack st = { f, 5, 7, 0 };
	struct svg s;

	render(&s, &st, 1, &o);
	assert_valid_xml(&s, "escape.svg");
	assert_null(strstr(s.data, "<script>alert"));
	assert_null(strstr(s.data, "std::vector<int>"));
	assert_null(strstr(s.data, "\xff"));
	assert_non_null(
		strstr(s.data, "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;co&quot;"));
	assert_non_null(strstr(s.data, "std::map&lt;std::string, std::vector&lt;int&gt;&gt;"
					"::operator[](&quot;k&quot; &amp; &#39;v&#39;)"));
	assert_non_null(strstr(s.data, "a&lt;b&gt;&amp;c&quot;d&#39;e"));
	/* invalid UTF-8 and control characters become U+FFFD, valid UTF-8 stays */
	assert_non_null(strstr(s.data, "bad\xef\xbf\xbd\xef\xbf\xbd utf8 \xef\xbf\xbd ctl"));
	assert_non_null(strstr(s.data, "caf\xc3\xa9 \xe2\x9c\x93"));
	/* in the JSON model, markup characters are \u escapes */
	assert_non_null(strstr(s.data, "\"a\\u003cb\\u003e\\u0026c\\\"d'e\""));
	svg_free(&s);
}

/* Missing names, unknown kinds, a 5000-character C++ name, "]]>" in a name. */
static void test_odd_names(void **state)
{
	char *huge = malloc(5001);
	struct wstack_frame f[] = { FR(NULL, 0), FR("", 0), FR("x]]>y", 77), FR(huge, 0) };
	struct wstack st[] = { { f, 4, 5, 0 }, { f, 2, 5, 0 } };
	struct svg s;
	const char *p;

	assert_non_null(huge);
	memset(huge, 'T', 5000);
	huge[5000] = '\0';
	render(&s, st, 2, NULL);
	assert_valid_xml(&s, "odd.svg");
	/* NULL and "" both read "[unknown]" */
	assert_int_equal(count(s.data, "<title>[unknown] (10 samples, 100.00%)"), 2);
	assert_non_null(strstr(s.data, "<title>x]]&gt;y (5 samples, 50.00%)"));
	assert_non_null(strstr(s.data, "\"x]]\\u003ey\""));
	/* names sort bytewise; an unknown kind is drawn as "unknown" (3) */
	assert_non_null(strstr(s.data, "\"kinds\":\"4003\""));
	/* the long name is cut where it is stored */
	p = strstr(s.data, "TTTT");
	assert_non_null(p);
	assert_true(strspn(p, "T") <= 2048);
	svg_free(&s);
	free(huge);
}

static void test_units(void **state)
{
	struct wstack_frame a[] = { FR("alloc", 0) }, b[] = { FR("spin", 1) };
	struct wstack st[] = { { a, 1, 1500000, 0 }, { b, 1, 2500000, 0 } };
	struct fg_opts o = { .unit = "ns" };
	struct svg s;

	render(&s, st, 2, &o);
	assert_non_null(strstr(s.data, "<title>alloc (1.50 ms, 37.50%)"));
	assert_non_null(strstr(s.data, "<title>spin (2.50 ms, 62.50%)"));
	assert_non_null(strstr(s.data, "<title>all (4.00 ms, 100.00%)"));
	/* the model stores weights divided by their gcd */
	assert_non_null(strstr(s.data, "\"scale\":500000"));
	svg_free(&s);

	st[0].weight = 1500000000ULL;
	st[1].weight = 25000;
	render(&s, st, 2, &o);
	assert_non_null(strstr(s.data, "<title>alloc (1.50 s, "));
	svg_free(&s);

	st[0].weight = 3 << 20;
	st[1].weight = 5 << 19;
	o.unit = "bytes";
	render(&s, st, 2, &o);
	assert_non_null(strstr(s.data, "<title>alloc (3.00 MiB, "));
	assert_non_null(strstr(s.data, "<title>spin (2.50 MiB, "));
	assert_non_null(strstr(s.data, "<title>all (5.50 MiB, "));
	svg_free(&s);

	st[0].weight = 700;
	st[1].weight = 300ULL << 30;
	render(&s, st, 2, &o);
	assert_non_null(strstr(s.data, "<title>spin (300 GiB, "));
	assert_non_null(strstr(s.data, "\"alloc\""));
	svg_free(&s);

	st[0].weight = 1234567;
	st[1].weight = 1;
	o.unit = NULL;
	render(&s, st, 2, &o);
	assert_non_null(strstr(s.data, "<title>alloc (1,234,567 samples, "));
	assert_non_null(strstr(s.data, "<title>all (1,234,568 samples, 100.00%)"));
	svg_free(&s);
}

static void test_colors(void **state)
{
	struct wstack_frame a[] = { FR("main", 0),	      FR("work", 0),
				FR("sys_read", 1),    FR("Interpreter::run", 2),
				FR("[unknown]", 3), FR("[truncated]", 4) };
	struct wstack st = { a, 6, 100, 0 };
	struct svg s1, s2;
	const char *p1, *p2;

	render(&s1, &st, 1, NULL);
	st.n = 2; /* another graph: "main" and "work" keep their colours */
	st.weight = 7;
	render(&s2, &st, 1, NULL);
	p1 = strstr(s1.data, "<title>work (");
	p2 = strstr(s2.data, "<title>work (");
	assert_non_null(p1);
	assert_non_null(p2);
	p1 = strstr(p1, "fill=\"#");
	p2 = strstr(p2, "fill=\"#");
	assert_memory_equal(p1, p2, 14);
	/* kinds: warm user frame (red dominant), green JIT, grey unknown */
	p1 = strstr(strstr(s1.data, "<title>Interpreter::run ("), "fill=\"#") + 7;
	{
		unsigned rgb = strtoul(p1, NULL, 16);

		unsigned g = (rgb >> 8) & 0xff;

		assert_true(g > (rgb >> 16) && g > (rgb & 0xff));
	}
	p1 = strstr(strstr(s1.data, "<title>work ("), "fill=\"#") + 7;
	{
		unsigned rgb = strtoul(p1, NULL, 16);

		assert_true((rgb >> 16) > ((rgb >> 8) & 0xff) && (rgb >> 16) > (rgb & 0xff));
	}
	svg_free(&s1);
	svg_free(&s2);
}

static void test_differential(void **state)
{
	struct wstack_frame grew[] = { FR("main", 0), FR("hot", 0) };
	struct wstack_frame shrank[] = { FR("main", 0), FR("cold", 0) };
	struct wstack_frame same[] = { FR("main", 0), FR("flat", 0) };
	struct wstack_frame gone[] = { FR("main", 0), FR("gone", 0) };
	struct wstack st[] = { { grew, 2, 300, 100 }, { shrank, 2, 100, 300 },
				 { same, 2, 200, 200 }, { gone, 2, 0, 50 } };
	struct fg_opts o = { .differential = true };
	struct svg s;
	const char *p;

	render(&s, st, 4, &o);
	assert_valid_xml(&s, "diff.svg");
	assert_non_null(strstr(s.data, "class=\"eprof-fg diff\""));
	assert_non_null(strstr(s.data, "<title>hot (300 samples, 50.00%; base 100 samples, "
					"delta +200 samples (+200.00%))"));
	assert_non_null(strstr(s.data, "<title>cold (100 samples, 16.67%; base 300 samples, "
					"delta -200 samples (-66.67%))"));
	assert_non_null(strstr(s.data, "<title>main (600 samples, 100.00%; base 650 samples"));
	/* colours: red grew, blue shrank, white unchanged */
	p = strstr(strstr(s.data, "<title>hot ("), "fill=\"#");
	assert_memory_equal(p, "fill=\"#e", 8);
	p = strstr(strstr(s.data, "<title>cold ("), "fill=\"#");
	assert_true(p[7] <= '9' && p[11] >= 'a'); /* little red, much blue */
	p = strstr(strstr(s.data, "<title>flat ("), "fill=\"#");
	assert_memory_equal(p, "fill=\"#ffffff\"", 14);
	/* a frame with no weight now has no width: not drawn, but its base counts */
	assert_null(strstr(s.data, "<title>gone ("));
	assert_non_null(strstr(s.data, "\"baseTotal\":650"));
	assert_non_null(strstr(s.data, "\"nf\":6"));
	assert_non_null(strstr(s.data, "grew"));
	svg_free(&s);
}

/* --- scale ---------------------------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* Skewed pick in [0, n): hot functions are picked far more often. */
static unsigned skewed(unsigned n)
{
	double r = (rnd() >> 11) * (1.0 / 9007199254740992.0);

	return (unsigned)(r * r * r * n);
}

#define N_NAMES 3000
#define N_STACKS 100000

struct big_input {
	char *names[N_NAMES];
	struct wstack_frame *frames;
	struct wstack *stacks;
	char (*leaf)[2][32];
};

static void big_input_make(struct big_input *in)
{
	static const char *const ns[] = { "app", "std", "net::http", "db::sql", "util" };
	size_t k = 0;

	for (unsigned i = 0; i < N_NAMES; i++) {
		assert_true(asprintf(&in->names[i], "%s::Worker%u<T%u>::step_%u", ns[i % 5], i / 50,
				     i % 7, i) > 0);
	}
	in->frames = calloc((size_t)N_STACKS * 42, sizeof(*in->frames));
	in->stacks = calloc(N_STACKS, sizeof(*in->stacks));
	in->leaf = calloc(N_STACKS, sizeof(*in->leaf));
	assert_non_null(in->frames);
	assert_non_null(in->stacks);
	assert_non_null(in->leaf);
	for (unsigned i = 0; i < N_STACKS; i++) {
		unsigned depth = 10 + rnd() % 31; /* 10..40, two of them the unique leaf pair */
		struct wstack_frame *f = &in->frames[k];

		for (unsigned d = 0; d + 2 < depth; d++) {
			unsigned id = (skewed(N_NAMES / 4) * 4 + d) % N_NAMES;

			unsigned kind = d + 3 >= depth && id % 3 == 0 ? 1 : id % 11 == 0 ? 2 : 0;

			f[d] = FR(in->names[id], kind);
		}
		/* the last two frames make every stack unique */
		snprintf(in->leaf[i][0], 32, "leaf_group_%u", i / 400);
		snprintf(in->leaf[i][1], 32, "leaf_%u", i % 400);
		f[depth - 2] = FR(in->leaf[i][0], 0);
		f[depth - 1] = FR(in->leaf[i][1], 0);
		in->stacks[i] = (struct wstack){ f, depth, 1 + skewed(1000), 0 };
		k += depth;
	}
}

static void big_input_free(struct big_input *in)
{
	for (unsigned i = 0; i < N_NAMES; i++)
		free(in->names[i]);
	free(in->frames);
	free(in->stacks);
	free(in->leaf);
}

/* CPU time, not wall time: a loaded machine (CI's neighbours) must not fail the bound. */
static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * Dense: 1000 services of 100 stacks each, all 40 deep, so about 39,000
 * frames are a pixel wide or more: the cap on drawn frames must hold.
 */
static void big_input_dense(struct big_input *in)
{
	size_t k = 0;

	for (unsigned i = 0; i < N_STACKS; i++) {
		struct wstack_frame *f = &in->frames[k];

		snprintf(in->leaf[i][0], 32, "service_%u", i % 1000);
		snprintf(in->leaf[i][1], 32, "leaf_%u", i / 1000);
		f[0] = FR(in->leaf[i][0], 0);
		for (unsigned d = 1; d < 39; d++)
			f[d] = FR(in->names[d * 50 + i % 1000 % 7], d > 30);
		f[39] = FR(in->leaf[i][1], 0);
		in->stacks[i] = (struct wstack){ f, 40, 1, 0 };
		k += 40;
	}
}

static void save_demo(const struct svg *s, const char *name)
{
	const char *dir = getenv("FG_DEMO_DIR");
	char path[PATH_MAX];
	FILE *f;

	if (!dir)
		return;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(s->data, 1, s->len, f), s->len);
	assert_int_equal(fclose(f), 0);
}

static void check_large(struct big_input *in, const char *what, const char *file)
{
	struct fg_opts o = { .title = "100,000 unique stacks", .subtitle = what };
	struct svg s;
	size_t rects, texts;
	double t0, dt;

	t0 = now();
	render(&s, in->stacks, N_STACKS, &o);
	dt = now() - t0;
	rects = count(s.data, "<rect");
	texts = count(s.data, "<text");
	printf("100k %s stacks: %.3f CPU s, %zu rects, %zu texts, %zu bytes (%.2f MiB)\n", what, dt,
	       rects, texts, s.len, s.len / 1048576.0);
	/* a guard against a blow-up, generous for sanitizer builds (an optimized build takes a
	 * fraction); 5.04 s of wall time under load once, so it is CPU time */
	assert_true(dt < 5.0);
	assert_true(rects <= 30000 + 20);
	assert_true(s.len < 6u << 20);
	assert_valid_xml(&s, file);
	save_demo(&s, file);
	svg_free(&s);
}

static void test_large(void **state)
{
	struct big_input in;

	big_input_make(&in);
	check_large(&in, "random", "fg_large.svg");
	big_input_dense(&in);
	check_large(&in, "dense", "fg_dense.svg");
	big_input_free(&in);
}

/* A deep, narrow input: one long chain with many tiny branches. */
static void test_deep(void **state)
{
	enum { DEPTH = 3000, N = 2000 };
	struct wstack_frame *chain = calloc(DEPTH, sizeof(*chain));
	struct wstack *st = calloc(N, sizeof(*st));
	char (*names)[16] = calloc(DEPTH, sizeof(*names));
	struct svg s;

	assert_non_null(chain);
	assert_non_null(st);
	assert_non_null(names);
	for (unsigned i = 0; i < DEPTH; i++) {
		snprintf(names[i], sizeof(names[i]), "rec_%u", i);
		chain[i] = FR(names[i], 0);
	}
	for (unsigned i = 0; i < N; i++)
		st[i] = (struct wstack){ chain, 1 + (i * 7919u) % DEPTH, 1, 0 };
	render(&s, st, N, NULL);
	assert_valid_xml(&s, "deep.svg");
	printf("deep chain: %zu rects, %zu bytes\n", count(s.data, "<rect"), s.len);
	svg_free(&s);
	free(chain);
	free(st);
	free(names);
}

/* A small but realistic graph for looking at in a browser (FG_DEMO_DIR=/tmp). */
static void test_demo(void **state)
{
#define SRV "U:_start;U:__libc_start_main;U:main;U:run_server;"
#define HANDLE SRV "U:http::Server::handle(Request&);"
#define WORKER "U:worker_thread;U:std::thread::_State_impl<...>::_M_run;U:Pool::run_task;"
#define KWRITE "K:entry_SYSCALL_64;K:do_syscall_64;K:ksys_write;K:vfs_write;"
	/* frames "kind:name" (User, Kernel, Jit, unknown (X), Special), weight, base */
	static const struct {
		const char *frames;
		unsigned w;
		unsigned base;
	} demo[] = {
		{ HANDLE "U:json::parse<std::map<std::string, Value>>(const char*)", 420, 300 },
		{ HANDLE "U:Router::dispatch;U:handlers::search;U:Index::lookup;U:memcmp",
		  380, 420 },
		{ HANDLE "U:Router::dispatch;U:handlers::search;J:Interpreter::eval;"
			 "J:LuaJIT trace 17", 260, 100 },
		{ HANDLE "U:write_response;U:__write;" KWRITE "K:sock_write_iter;K:tcp_sendmsg",
		  310, 330 },
		{ SRV "U:epoll_wait;K:entry_SYSCALL_64;K:do_syscall_64;K:__x64_sys_epoll_wait;"
		      "K:schedule", 150, 150 },
		{ "U:_start;U:__libc_start_main;U:main;U:load_config;U:yaml::Parser::parse;"
		  "U:malloc;U:_int_malloc", 90, 160 },
		{ SRV "U:gc::collect;U:gc::mark;X:[unknown]", 70, 20 },
		{ "S:[lost samples]", 12, 12 },
		{ WORKER "U:compress_block;U:deflate_slow;U:longest_match", 330, 210 },
		{ WORKER "U:compress_block;U:crc32_z", 140, 150 },
	};
	struct wstack_frame frames[64 * 10];
	struct wstack st[10];
	char *bufs[10];
	size_t k = 0;

	for (unsigned i = 0; i < 10; i++) {
		char *tok, *save = NULL;

		bufs[i] = strdup(demo[i].frames);
		assert_non_null(bufs[i]);
		st[i] = (struct wstack){ &frames[k], 0, demo[i].w, demo[i].base };
		for (tok = strtok_r(bufs[i], ";", &save); tok; tok = strtok_r(NULL, ";", &save)) {
			const char *kinds = "UKJXS";

			frames[k++] = FR(tok + 2, strchr(kinds, tok[0]) - kinds);
			st[i].n++;
		}
	}
	for (int pass = 0; pass < 3; pass++) {
		static const char *const files[] = { "fg_demo.svg", "fg_demo_diff.svg",
						     "fg_demo_inverted.svg" };
		struct fg_opts o = { .title = pass == 2 ? "CPU icicle graph" : "CPU flamegraph",
				     .subtitle = "eprof record -F 999 -- ./server --port 8080",
				     .unit = pass == 2 ? "ns" : NULL,
				     .differential = pass == 1,
				     .inverted = pass == 2 };
		struct svg s;

		render(&s, st, 10, &o);
		assert_valid_xml(&s, files[pass]);
		save_demo(&s, files[pass]);
		svg_free(&s);
	}
	for (unsigned i = 0; i < 10; i++)
		free(bufs[i]);
}

static bool key_better(const struct fg_node *a, const struct fg_key *bar)
{
	return fg_key_worse(*bar, (struct fg_key){ a->w, a->depth });
}

static int cmp_keys(const void *a, const void *b)
{
	const struct fg_key *x = a, *y = b;

	return fg_key_worse(*x, *y) ? 1 : fg_key_worse(*y, *x) ? -1 : 0;
}

/*
 * The streaming build drops subtrees early; it must keep exactly what a
 * naive selection over the full tree keeps, at the same positions.
 */
static void check_pruned(const struct fg_tree *full, const struct fg_tree *t, size_t max)
{
	struct fg_key *keys = calloc(full->n_nodes, sizeof(*keys)), bar = { 0 };
	uint32_t *map = calloc(full->n_nodes, sizeof(*map));
	size_t k = 0;

	assert_non_null(keys);
	assert_non_null(map);
	for (size_t i = 1; i < full->n_nodes; i++)
		keys[i - 1] = (struct fg_key){ full->nodes[i].w, full->nodes[i].depth };
	qsort(keys, full->n_nodes - 1, sizeof(*keys), cmp_keys);
	if (full->n_nodes - 1 > max)
		bar = keys[max];
	for (size_t i = 0; i < full->n_nodes; i++) {
		const struct fg_node *a = &full->nodes[i], *b;

		if (i && !key_better(a, &bar))
			continue;
		assert_true(k < t->n_nodes);
		b = &t->nodes[k];
		map[i] = k++;
		assert_int_equal(a->x, b->x);
		assert_int_equal(a->w, b->w);
		assert_int_equal(a->self, b->self);
		assert_int_equal(a->base, b->base);
		assert_int_equal(a->depth, b->depth);
		assert_int_equal(a->name, b->name);
		assert_int_equal(map[a->parent], b->parent);
	}
	assert_int_equal(k, t->n_nodes);
	assert_true(t->n_nodes <= max + 1);
	free(keys);
	free(map);
}

static void test_tree_prune(void **state)
{
	static const char *const names[] = { "a", "b", "c", "d", "e", "f" };
	enum { N = 3000, MAXD = 9 };
	struct wstack_frame *frames = calloc(N * MAXD, sizeof(*frames));
	struct wstack *st = calloc(N, sizeof(*st));
	static const size_t maxes[] = { 1, 7, 50, 400, 2000 };
	struct fg_tree full, t;

	assert_non_null(frames);
	assert_non_null(st);
	for (unsigned i = 0; i < N; i++) {
		struct wstack_frame *f = &frames[i * MAXD];
		unsigned n = 1 + rnd() % MAXD;

		for (unsigned d = 0; d < n; d++)
			f[d] = FR(names[skewed(6)], rnd() % 4 == 0);
		st[i] = (struct wstack){ f, n, rnd() % 6, rnd() % 4 };
	}
	assert_int_equal(fg_tree_build(&full, st, N, 0), 0);
	assert_true(full.n_nodes > 2000);
	for (size_t m = 0; m < sizeof(maxes) / sizeof(maxes[0]); m++) {
		assert_int_equal(fg_tree_build(&t, st, N, maxes[m]), 0);
		assert_int_equal(t.total, full.total);
		assert_int_equal(t.base_total, full.base_total);
		check_pruned(&full, &t, maxes[m]);
		fg_tree_free(&t);
	}
	/* the root's children tile it: positions add up */
	for (size_t i = 1, next = 0; i < full.n_nodes; i++) {
		if (full.nodes[i].depth != 1)
			continue;
		assert_int_equal(full.nodes[i].x, next);
		next += full.nodes[i].w;
	}
	fg_tree_free(&full);
	free(frames);
	free(st);
}

extern const unsigned char asset_flamegraph_js[];
extern const unsigned char asset_flamegraph_css[];

/* The assets are embedded in CDATA sections, which "]]>" would end early. */
/* Several views of the same samples: one table of names, each view's frames, a control. */
static void test_views(void **state)
{
	struct wstack_frame a[] = { FR("main", 0), FR("eval", 0), FR("step (t.py:3)", 5),
				    FR("gemm", 0) };
	struct wstack_frame b[] = { FR("main", 0), FR("step (t.py:3)", 5), FR("gemm", 0) };
	struct wstack_frame c[] = { FR("main", 0), FR("eval", 0), FR("gemm", 0) };
	struct wstack sa = { a, 4, 3, 0 }, sb = { b, 3, 3, 0 }, sc = { c, 3, 3, 0 };
	struct fg_view v[] = { { "py<&>", &sb, 1 }, { "mixed", &sa, 1 }, { "native", &sc, 1 } };
	struct sink *one = sink_mem(), *same = sink_mem();
	struct svg s;

	(void)state;
	s.sink = sink_mem();
	assert_int_equal(flamegraph_write_svg_views(s.sink, v, 3, 1, NULL), 0);
	s.data = sink_mem_data(s.sink, &s.len);
	assert_valid_xml(&s, "views.svg");
	/* every name once, in the order of one tree's */
	assert_non_null(strstr(s.data, "\"names\":[\"all\",\"eval\",\"gemm\",\"main\","
					"\"step (t.py:3)\"]"));
	assert_non_null(strstr(s.data, "\"kinds\":\"40005\""));
	/* the open view's frames at the top, the others' in "views": names by index */
	assert_non_null(strstr(s.data, "\"frames\":[0,0,0,1,0,1,3,0,1,0,2,1,0,1,0,3,4,0,1,0,4,2,0,"
					"1,1]"));
	assert_non_null(strstr(s.data, "\"view\":\"mixed\""));
	assert_non_null(strstr(s.data, "\"views\":[{\"name\":\"py\\u003c\\u0026\\u003e\",\"total\":3,"
					"\"scale\":3,\"rows\":"));
	assert_non_null(strstr(s.data, "{\"name\":\"mixed\"},"));
	assert_non_null(strstr(s.data, "\"frames\":[0,0,0,1,0,1,3,0,1,0,2,4,0,1,0,3,2,0,1,1]"));
	/* the control names each view, the open one marked */
	assert_non_null(strstr(s.data, "data-view=\"0\">py&lt;&amp;&gt;</tspan>"));
	assert_non_null(strstr(s.data, "<tspan class=\"ctl small on\" data-view=\"1\">mixed<"));
	svg_free(&s);

	/* one view is the one-tree file */
	assert_int_equal(flamegraph_write_svg_views(one, &v[1], 1, 0, NULL), 0);
	assert_int_equal(flamegraph_write_svg(same, &sa, 1, NULL), 0);
	assert_string_equal(sink_mem_data(one, NULL), sink_mem_data(same, NULL));
	assert_null(strstr(sink_mem_data(one, NULL), "\"views\""));
	assert_int_equal(flamegraph_write_svg_views(one, v, 3, 3, NULL), -EINVAL);
	assert_int_equal(flamegraph_write_svg_views(one, NULL, 0, 0, NULL), -EINVAL);
	sink_close(one);
	sink_close(same);
}

static void test_assets(void **state)
{
	assert_null(strstr((const char *)asset_flamegraph_js, "]]>"));
	assert_null(strstr((const char *)asset_flamegraph_css, "]]>"));
	assert_non_null(strstr((const char *)asset_flamegraph_js, "SPDX-License-Identifier: MIT"));
}

static void test_errors(void **state)
{
	struct sink *s = sink_mem();
	struct wstack st = { NULL, 3, 1, 0 };

	assert_int_equal(flamegraph_write_svg(NULL, NULL, 0, NULL), -EINVAL);
	assert_int_equal(flamegraph_write_svg(s, NULL, 1, NULL), -EINVAL);
	assert_int_equal(flamegraph_write_svg(s, &st, 1, NULL), -EINVAL);
	sink_close(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty),	    cmocka_unit_test(test_merge),
		cmocka_unit_test(test_layout),	    cmocka_unit_test(test_escaping),
		cmocka_unit_test(test_odd_names),
		cmocka_unit_test(test_units),	    cmocka_unit_test(test_colors),
		cmocka_unit_test(test_differential), cmocka_unit_test(test_large),
		cmocka_unit_test(test_deep),	    cmocka_unit_test(test_demo),
		cmocka_unit_test(test_tree_prune), cmocka_unit_test(test_assets),
		cmocka_unit_test(test_errors),	    cmocka_unit_test(test_views),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
