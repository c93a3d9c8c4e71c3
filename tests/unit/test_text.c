// SPDX-License-Identifier: MIT
/*
 * util's string layer on hostile text (names a target chose: controls, invalid UTF-8,
 * markup): UTF-8 lengths and prefixes, XML text, and JSON strings that sit in a <script>.
 */
#include "test_util.h"
#include "util/json.h"
#include "util/sink.h"
#include "util/utf8.h"

#define FFFD UTF8_REPLACEMENT

static void to_sink(void *ctx, const void *p, size_t n)
{
	sink_write(ctx, p, n);
}

static int json_to_sink(struct sink *s, const char *str, size_t len, unsigned flags)
{
	json_escape_n(str, len, flags, to_sink, s);
	return s->err;
}

/* What an escaper writes for len bytes of s (a string the caller frees). */
static char *escaped(int (*esc)(struct sink *, const char *, size_t, unsigned), const char *s,
		     size_t len, unsigned flags)
{
	struct sink *m = sink_mem();
	char *t;

	assert_int_equal(esc(m, s, len, flags), 0);
	t = strdup(sink_mem_data(m, NULL));
	sink_close(m);
	return t;
}

#define ASSERT_ESC(esc, s, len, flags, want)                                                       \
	do {                                                                                       \
		char *t_ = escaped((esc), (s), (len), (flags));                                    \
		assert_string_equal(t_, (want));                                                   \
		free(t_);                                                                          \
	} while (0)
#define ASSERT_XML(s, len, flags, want) ASSERT_ESC(sink_xml_text, s, len, flags, want)
#define ASSERT_JSON(s, len, flags, want) ASSERT_ESC(json_to_sink, s, len, flags, want)

static void test_utf8_lengths(void **state)
{
	(void)state;
	assert_int_equal(utf8_char_len("a", 1), 1);
	assert_int_equal(utf8_char_len("\xc3\xa9", 2), 2);
	assert_int_equal(utf8_char_len("\xe2\x9c\x93", 3), 3);
	assert_int_equal(utf8_char_len("\xf0\x9f\x94\xa5", 4), 4);
	/* cut by the length given, though the bytes continue */
	assert_int_equal(utf8_char_len("\xe2\x9c\x93", 2), 0);
	assert_int_equal(utf8_char_len("\xf0\x9f\x94\xa5", 3), 0);
	/* overlong, surrogate, past U+10FFFF, a lone continuation byte, 0xff */
	assert_int_equal(utf8_char_len("\xc0\xaf", 2), 0);
	assert_int_equal(utf8_char_len("\xe0\x80\xaf", 3), 0);
	assert_int_equal(utf8_char_len("\xed\xa0\x80", 3), 0);
	assert_int_equal(utf8_char_len("\xf4\x90\x80\x80", 4), 0);
	assert_int_equal(utf8_char_len("\x80", 1), 0);
	assert_int_equal(utf8_char_len("\xff", 1), 0);
	/* a NUL-terminated string stops at its NUL */
	assert_int_equal(utf8_seq_len((const unsigned char *)"\xe2\x9c"), 0);
	assert_int_equal(utf8_seq_len((const unsigned char *)""), 1);
}

static void test_utf8_prefix(void **state)
{
	const char *s = "a\xc3\xa9\xe2\x9c\x93\xff" "b"; /* a, e-acute, check mark, bad byte, b */
	size_t n = strlen(s), chars;

	(void)state;
	assert_int_equal(utf8_prefix(s, n, SIZE_MAX, &chars), n);
	assert_int_equal(chars, 5);
	/* whole sequences only */
	assert_int_equal(utf8_prefix(s, n, 2, &chars), 3);
	assert_int_equal(chars, 2);
	assert_int_equal(utf8_prefix(s, n, 3, NULL), 6);
	assert_int_equal(utf8_prefix(s, n, 4, NULL), 7);
	assert_int_equal(utf8_prefix(s, n, 0, &chars), 0);
	assert_int_equal(chars, 0);
	/* a sequence cut by len counts a character per byte */
	assert_int_equal(utf8_prefix("\xe2\x9c\x93", 2, SIZE_MAX, &chars), 2);
	assert_int_equal(chars, 2);
	/* U+FFFF is one character */
	assert_int_equal(utf8_prefix("\xef\xbf\xbfx", 4, 1, &chars), 3);
}

static void test_xml_text(void **state)
{
	const char *tag = "<img src=x onerror=\"alert('1')\"> & co";

	(void)state;
	ASSERT_XML(tag, strlen(tag), 0,
		   "&lt;img src=x onerror=&quot;alert(&#39;1&#39;)&quot;&gt; &amp; co");
	/* controls XML forbids, invalid UTF-8 and non-characters: U+FFFD each */
	ASSERT_XML("\x1b]0;x\x07|\r", 8, 0, FFFD "]0;x" FFFD "|" FFFD);
	ASSERT_XML("bad\xff\xfe\xed\xa0\x80", 8, 0, "bad" FFFD FFFD FFFD FFFD FFFD);
	ASSERT_XML("\xef\xbf\xbf\xef\xbf\xbe\xef\xbf\xbd", 9, 0, FFFD FFFD FFFD);
	/* valid UTF-8 stays, DEL and C1 controls too (XML 1.0 allows them) */
	ASSERT_XML("caf\xc3\xa9 \xe2\x9c\x93 \x7f\xc2\x85", 13, 0,
		   "caf\xc3\xa9 \xe2\x9c\x93 \x7f\xc2\x85");
	/* newlines and tabs: kept (a <pre>), or spaces for one line (a label, a title) */
	ASSERT_XML("a\nb\tc", 5, 0, "a\nb\tc");
	ASSERT_XML("a\nb\tc", 5, SINK_XML_LINE, "a b c");
	/* only len bytes: a sequence cut there is invalid, a NUL before it is a control */
	ASSERT_XML("x\xe2\x9c\x93", 3, 0, "x" FFFD FFFD);
	ASSERT_XML("a\0b", 3, 0, "a" FFFD "b");
	ASSERT_XML("", 0, 0, "");
}

static void test_json_for_scripts(void **state)
{
	struct json j;

	(void)state;
	/* markup cannot end the <script> or the CDATA section the string sits in */
	ASSERT_JSON("</script><!--]]>&", 17, JSON_SCRIPT,
		    "\\u003c/script\\u003e\\u003c!--]]\\u003e\\u0026");
	ASSERT_JSON("</script>&", 10, 0, "</script>&");
	/* nor a character XML forbids; other JSON escapes as ever */
	ASSERT_JSON("\xef\xbf\xbe\xef\xbf\xbf", 6, JSON_SCRIPT, "\\ufffe\\uffff");
	ASSERT_JSON("\xef\xbf\xbe", 3, 0, "\xef\xbf\xbe");
	ASSERT_JSON("\x1b]0;\"\\\n\t\r", 9, JSON_SCRIPT, "\\u001b]0;\\\"\\\\\\n\\t\\r");
	ASSERT_JSON("bad\xff\xe2\x9c", 6, JSON_SCRIPT, "bad\\ufffd\\ufffd\\ufffd");
	ASSERT_JSON("caf\xc3\xa9", 5, JSON_SCRIPT, "caf\xc3\xa9");
	/* len bytes, a NUL among them */
	ASSERT_JSON("a\0b", 3, 0, "a\\u0000b");
	ASSERT_JSON("abc", 2, 0, "ab");
	/* the writer: keys and values, whole or in parts */
	json_init(&j, NULL, JSON_SCRIPT | JSON_COMPACT);
	json_obj(&j);
	json_kv_str(&j, "<k>", "</script>");
	json_key(&j, "v");
	json_str_begin(&j);
	json_str_add(&j, "a<");
	json_str_add(&j, "/b>");
	json_str_end(&j);
	json_obj_end(&j);
	assert_string_equal(json_text(&j), "{\"\\u003ck\\u003e\":\"\\u003c/script\\u003e\","
					   "\"v\":\"a\\u003c/b\\u003e\"}");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_utf8_lengths),
		cmocka_unit_test(test_utf8_prefix),
		cmocka_unit_test(test_xml_text),
		cmocka_unit_test(test_json_for_scripts),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
