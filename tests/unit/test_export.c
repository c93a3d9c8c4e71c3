// SPDX-License-Identifier: MIT
#include "test_util.h"

#include "cli/cmds.h"
#include "output/csv.h"
#include "output/html.h"
#include "util/esc.h"
#include "util/sha256.h"
#include "util/sink.h"

static struct profile *make(void)
{
	struct profile *p = profile__new();
	uint32_t m = test_loc(p, "/bin/app", "main", NULL, 1),
		 t = test_loc(p, "/bin/app", "std::map<int, \"q\">::find", NULL, 2),
		 h = test_loc(p, "/bin/app", "<script>alert(1)</script>", NULL, 3);

	test_samples(p, 5, 5, "app", 30, (uint32_t[]){ m, t }, 2);
	test_samples(p, 5, 6, "io&work", 10, (uint32_t[]){ m, h }, 2);
	profile__set_meta(p, "command", "/bin/app <x>");
	profile__set_meta(p, "start_time", "1700000000");
	return p;
}

static char *render(int (*fn)(struct sink *, struct profile *, const void *), struct profile *p,
		    const void *o)
{
	struct sink *s = sink_mem();
	size_t len;
	char *out;

	assert_int_equal(fn(s, p, o), 0);
	out = strdup(sink_mem_data(s, &len));
	assert_int_equal(sink_close(s), 0);
	return out;
}

static int csv_fn(struct sink *s, struct profile *p, const void *o)
{
	return csv_write(s, p, o);
}

static int html_fn(struct sink *s, struct profile *p, const void *o)
{
	return html_write(s, p, o);
}

static void test_csv(void **state)
{
	struct profile *p = make();
	struct hot_opts o = { 0 };
	char *t = render(csv_fn, p, &o);

	assert_true(!strncmp(t, "name,module,self,total,self_pct,total_pct\r\n", 43));
	/* RFC 4180: a field with a comma or quote is quoted, quotes doubled */
	assert_non_null(strstr(t, "\r\n\"std::map<int, \"\"q\"\">::find\",app,30,30,75.0000,75.0000\r\n"));
	assert_non_null(strstr(t, "\r\nmain,app,0,40,0.0000,100.0000\r\n"));
	free(t);
	o.filter.tid = 6;
	t = render(csv_fn, p, &o);
	assert_null(strstr(t, "std::map"));
	free(t);
	profile__free(p);
}

static void test_html(void **state)
{
	struct profile *p = make();
	struct html_opts o = { .path = "run.data" };
	char *t = render(html_fn, p, &o);

	assert_true(!strncmp(t, "<!DOCTYPE html>", 15));
	assert_non_null(strstr(t, "<title>eprof: /bin/app &lt;x&gt;</title>"));
	/* every section, the inline SVG (no XML declaration) and its data */
	assert_non_null(strstr(t, "<section id=\"summary\">"));
	assert_non_null(strstr(t, "<section id=\"flamegraph\">"));
	assert_non_null(strstr(t, "<section id=\"functions\">"));
	assert_non_null(strstr(t, "<section id=\"threads\">"));
	assert_non_null(strstr(t, "<div class=\"fg\">\n<svg "));
	assert_null(strstr(t, "<?xml"));
	assert_non_null(strstr(t, "id=\"fg-data\""));
	assert_non_null(strstr(t, "<table class=\"sortable\" id=\"functions-table\">"));
	/* names are escaped, never markup */
	assert_null(strstr(t, "<script>alert(1)"));
	assert_non_null(strstr(t, "&lt;script&gt;alert(1)&lt;/script&gt;"));
	assert_non_null(strstr(t, "<td class=\"fn\">io&amp;work</td>"));
	assert_non_null(strstr(t, "<dd>2023-11-14 22:13:20 UTC on ? (?)</dd>"));
	/* self-contained: nothing is fetched (http:// only in XML namespace names) */
	for (const char *u = strstr(t, "http://"); u; u = strstr(u + 1, "http://"))
		assert_true(!strncmp(u, "http://www.w3.org/", 18));
	assert_null(strstr(t, "https://"));
	assert_null(strstr(t, " src="));
	assert_true(strstr(t, "</html>\n") == t + strlen(t) - 8);
	/* 40 samples: too few for any finding */
	assert_non_null(strstr(t, "<section id=\"findings\">"));
	assert_non_null(strstr(t, "None above the thresholds"));
	free(t);
	/* 70 samples, 40 of them in the escaped name: a hot-function finding, escaped too */
	test_samples(p, 5, 6, "io&work", 30, (uint32_t[]){ test_loc(p, "/bin/app", "main", NULL, 1),
							 test_loc(p, "/bin/app", "<script>alert(1)</script>", NULL, 3) }, 2);
	t = render(html_fn, p, &o);
	assert_non_null(strstr(t, "<table class=\"sortable\" id=\"findings-table\">"));
	assert_non_null(strstr(t, "<td class=\"fn\">hot-function</td>"));
	assert_non_null(strstr(t, "&lt;script&gt;alert(1)&lt;/script&gt; (app) runs 57.1% of the CPU"));
	assert_null(strstr(t, "<script>alert(1)"));
	free(t);
	profile__free(p);
}

static void test_export_args(void **state)
{
	struct export_cli o;

	assert_int_equal(parse_export_args(3, (char *[]){ "export", "--format", "pprof", NULL }, &o), 0);
	assert_int_equal(o.format, EXPORT_PPROF);
	assert_string_equal(o.output, "profile.pb.gz");
	assert_string_equal(o.input, "eprof.data");
	assert_int_equal(parse_export_args(4, (char *[]){ "export", "x.data", "-o", "r.html", NULL }, &o),
			 0);
	assert_int_equal(o.format, EXPORT_HTML);
	assert_string_equal(o.input, "x.data");
	assert_int_equal(parse_export_args(3, (char *[]){ "export", "-o", "p.pb.gz", NULL }, &o), 0);
	assert_int_equal(o.format, EXPORT_PPROF);
	assert_int_equal(parse_export_args(3, (char *[]){ "export", "-f", "csv", NULL }, &o), 0);
	assert_int_equal(o.format, EXPORT_CSV);
	assert_string_equal(o.output, "-");
	assert_int_equal(parse_export_args(3, (char *[]){ "export", "-f", "html", NULL }, &o), 0);
	assert_string_equal(o.output, "report.html");
	assert_int_equal(parse_export_args(5, (char *[]){ "export", "-f", "folded", "--time-range",
							   "1:2", NULL },
					   &o),
			 0);
	assert_int_equal(o.format, EXPORT_FOLDED);
	assert_true(o.range.has_from && o.range.has_to);
	/* a format is needed: explicit or from the output's name */
	assert_int_equal(parse_export_args(1, (char *[]){ "export", NULL }, &o), -EINVAL);
	assert_int_equal(parse_export_args(3, (char *[]){ "export", "-o", "out.txt", NULL }, &o),
			 -EINVAL);
	assert_int_equal(parse_export_args(3, (char *[]){ "export", "-f", "xml", NULL }, &o), -EINVAL);
	assert_int_equal(parse_export_args(2, (char *[]){ "export", "--help", NULL }, &o), 1);
}

static char *csv_of(const char *cell)
{
	struct sink *s = sink_mem();
	char *out;

	csv_field(s, cell);
	out = strdup(sink_mem_data(s, NULL));
	sink_close(s);
	return out;
}

/* A name a spreadsheet would evaluate gets a leading quote; others stay as they are. */
static void test_csv_formulas(void **state)
{
	static const char *const cases[][2] = {
		{ "=SUM(A1)", "'=SUM(A1)" }, { "+1", "'+1" },	   { "-1", "'-1" },
		{ "@x", "'@x" },	     { "\tx", "'\tx" },	   { "=a,b", "\"'=a,b\"" },
		{ "main", "main" },	     { "a=b", "a=b" },	   { "", "" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *got = csv_of(cases[i][0]);

		assert_string_equal(got, cases[i][1]);
		free(got);
	}
}

/* Control bytes as \xNN, UTF-8 kept, C1 controls in either form escaped, split input joined. */
static void test_esc_ctl(void **state)
{
	static const char *const cases[][2] = {
		{ "plain é €\n", "plain é €\n" },
		{ "\x1b]52;c;eA==\x07", "\\x1b]52;c;eA==\\x07" },
		{ "a\tb\rc\x7f", "a\\x09b\\x0dc\\x7f" },
		{ "\xc2\x9b" "31m", "\\xc2\\x9b31m" },
		{ "\x9b" "31m\xff", "\\x9b31m\\xff" },
	};
	struct sink *mem, *text;
	char *s;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		s = esc_ctl_str(cases[i][0]);
		assert_string_equal(s, cases[i][1]);
		free(s);
	}
	/* "€" written in two pieces through a text sink stays one character */
	mem = sink_mem();
	text = sink_text(mem);
	sink_write(text, "x\xe2\x82", 3);
	sink_write(text, "\xac\x1b", 2);
	assert_string_equal(sink_mem_data(mem, NULL), "x€\\x1b");
	assert_int_equal(sink_close(text), 0);
}

static void test_sha256(void **state)
{
	struct sha256 c;
	uint8_t d[32];
	char b64[45];

	(void)state;
	sha256_init(&c);
	sha256_update(&c, "abc", 3);
	sha256_final(&c, d);
	sha256_base64(d, b64);
	/* FIPS 180-4's example: ba7816bf 8f01cfea ... f20015ad */
	assert_string_equal(b64, "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_csv),
		cmocka_unit_test(test_html),
		cmocka_unit_test(test_export_args),
		cmocka_unit_test(test_csv_formulas),
		cmocka_unit_test(test_esc_ctl),
		cmocka_unit_test(test_sha256),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
