// SPDX-License-Identifier: MIT
/* util/json (the JSON writer) and util/vec (growable arrays). */
#include <math.h>

#include "test_util.h"
#include "util/json.h"
#include "util/sink.h"
#include "util/vec.h"

/* The text a sequence of writer calls makes on a memory sink; the caller frees it. */
#define WRITE(flags, calls)                                                                        \
	({                                                                                         \
		struct sink *s_ = sink_mem();                                                      \
		struct json j_;                                                                    \
		struct json *j = &j_;                                                              \
		char *t_;                                                                          \
                                                                                                   \
		json_init(j, s_, (flags));                                                         \
		calls;                                                                             \
		assert_int_equal(json_flush(j), 0);                                                \
		t_ = strdup(sink_mem_data(s_, NULL));                                              \
		assert_int_equal(sink_close(s_), 0);                                               \
		t_;                                                                                \
	})

static void check(char *got, const char *want)
{
	assert_string_equal(got, want);
	free(got);
}

/* One string value, escaped, in a buffer-only writer. */
static const char *str_of(struct json *j, const char *s)
{
	json_init(j, NULL, 0);
	json_str(j, s);
	assert_int_equal(json_flush(j), 0);
	return json_text(j);
}

static void test_escaping(void **state)
{
	struct json j;

	assert_string_equal(str_of(&j, "plain"), "\"plain\"");
	assert_string_equal(str_of(&j, ""), "\"\"");
	assert_string_equal(str_of(&j, "q\"b\\s/"), "\"q\\\"b\\\\s/\"");
	assert_string_equal(str_of(&j, "\n\r\t"), "\"\\n\\r\\t\"");
	assert_string_equal(str_of(&j, "\x01\x1f\x7f"), "\"\\u0001\\u001f\x7f\"");
	json_init(&j, NULL, 0);
	json_str(&j, NULL);
	assert_string_equal(json_text(&j), "null");
}

static void test_utf8_repair(void **state)
{
	struct json j;

	/* valid sequences of 2, 3 and 4 bytes pass as they are */
	assert_string_equal(str_of(&j, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x94\xa5"),
			    "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x94\xa5\"");
	/* a stray continuation byte, a lone lead byte, a cut sequence at the end */
	assert_string_equal(str_of(&j, "a\x80z"), "\"a\\ufffdz\"");
	assert_string_equal(str_of(&j, "\xff"), "\"\\ufffd\"");
	assert_string_equal(str_of(&j, "x\xe2\x82"), "\"x\\ufffd\\ufffd\"");
	/* overlong, surrogate, beyond U+10FFFF: each byte replaced */
	assert_string_equal(str_of(&j, "\xc0\xaf"), "\"\\ufffd\\ufffd\"");
	assert_string_equal(str_of(&j, "\xed\xa0\x80"), "\"\\ufffd\\ufffd\\ufffd\"");
	assert_string_equal(str_of(&j, "\xf4\x90\x80\x80"), "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");
}

static void test_nesting_and_commas(void **state)
{
	check(WRITE(0, {
		      json_obj(j);
		      json_kv_u64(j, "a", 1);
		      json_key(j, "b");
		      json_arr(j);
		      json_u64(j, 2);
		      json_obj(j);
		      json_obj_end(j);
		      json_arr(j);
		      json_arr_end(j);
		      json_null(j);
		      json_arr_end(j);
		      json_kv_bool(j, "c", false);
		      json_obj_end(j);
	      }),
	      "{\"a\": 1, \"b\": [2, {}, [], null], \"c\": false}\n");
	check(WRITE(JSON_COMPACT, {
		      json_obj(j);
		      json_kv_str(j, "k", "v");
		      json_key(j, "o");
		      json_obj(j);
		      json_kv_bool(j, "t", true);
		      json_kv_null(j, "n");
		      json_obj_end(j);
		      json_obj_end(j);
	      }),
	      "{\"k\":\"v\",\"o\":{\"t\":true,\"n\":null}}\n");
	/* a top-level scalar is a document too */
	check(WRITE(0, json_u64(j, 7)), "7");
}

static void test_breaks(void **state)
{
	/* the report's layout: members of the top level on lines of their own, elements too */
	check(WRITE(0, {
		      json_obj(j);
		      json_break(j, 2);
		      json_kv_u64(j, "version", 1);
		      json_kv_str(j, "x", "y");
		      json_break(j, 2);
		      json_key(j, "list");
		      json_arr(j);
		      for (int i = 0; i < 2; i++) {
			      json_break(j, 4);
			      json_obj(j);
			      json_kv_i64(j, "i", -i);
			      json_obj_end(j);
		      }
		      json_break(j, 2);
		      json_arr_end(j);
		      json_key(j, "empty");
		      json_arr(j);
		      json_break(j, 2);
		      json_arr_end(j);
		      json_break(j, 0);
		      json_obj_end(j);
	      }),
	      "{\n  \"version\": 1, \"x\": \"y\",\n  \"list\": [\n    {\"i\": 0},\n    {\"i\": -1}\n"
	      "  ], \"empty\": [\n  ]\n}\n");
	/* the trace's layout: one compact event per line */
	check(WRITE(JSON_COMPACT, {
		      json_obj(j);
		      json_key(j, "e");
		      json_arr(j);
		      json_break(j, 0);
		      json_raw(j, "{\"a\":", 5);
		      json_put(j, "1}", 2);
		      json_break(j, 0);
		      json_obj(j);
		      json_obj_end(j);
		      json_break(j, 0);
		      json_arr_end(j);
		      json_obj_end(j);
	      }),
	      "{\"e\":[\n{\"a\":1},\n{}\n]}\n");
	/* the same with the open and close calls that take the break and the key */
	check(WRITE(0, {
		      json_obj_open(j, -1, NULL);
		      json_arr_open(j, 2, "list");
		      json_obj_open(j, 4, NULL);
		      json_obj_close(j, -1);
		      json_arr_close(j, 2);
		      json_obj_open(j, 2, "o");
		      json_arr_open(j, -1, "e");
		      json_arr_close(j, -1);
		      json_obj_close(j, 2);
		      json_obj_close(j, 0);
	      }),
	      "{\n  \"list\": [\n    {}\n  ],\n  \"o\": {\"e\": []\n  }\n}\n");
	/* a wide indent */
	check(WRITE(0, {
		      json_arr(j);
		      json_break(j, 40);
		      json_u64(j, 1);
		      json_arr_end(j);
	      }),
	      "[\n                                        1]\n");
}

static void test_numbers(void **state)
{
	check(WRITE(0, {
		      json_arr(j);
		      json_u64(j, 0);
		      json_u64(j, UINT64_MAX);
		      json_i64(j, INT64_MIN);
		      json_f(j, 1.0 / 3, 4);
		      json_f(j, 2.5, 0);
		      json_f(j, -0.0, 2);
		      json_g(j, 1234567.0, 6);
		      json_g(j, 0.5, 6);
		      json_f(j, INFINITY, 2);
		      json_f(j, -INFINITY, 2);
		      json_g(j, NAN, 6);
		      json_arr_end(j);
	      }),
	      "[0, 18446744073709551615, -9223372036854775808, 0.3333, 2, -0.00, 1.23457e+06, "
	      "0.5, null, null, null]\n");
	/* %f of a huge number: more digits than the writer's scratch space */
	{
		char *t = WRITE(0, json_f(j, 1e300, 1)), want[400];

		snprintf(want, sizeof(want), "%.1f", 1e300);
		assert_int_equal(strlen(want), 303);
		assert_string_equal(t, want);
		free(t);
	}
}

static void test_string_in_parts(void **state)
{
	check(WRITE(0, {
		      json_obj(j);
		      json_key(j, "stack");
		      json_str_begin(j);
		      json_str_add(j, "a\"");
		      json_str_add(j, " <- ");
		      json_str_add(j, "\xff");
		      json_str_end(j);
		      json_obj_end(j);
	      }),
	      "{\"stack\": \"a\\\" <- \\ufffd\"}\n");
}

/* A section written by a second writer continues the first one's object. */
static void test_members(void **state)
{
	struct sink *s = sink_mem();
	struct json a, b;

	json_init(&a, s, 0);
	json_obj(&a);
	json_kv_u64(&a, "x", 1);
	assert_int_equal(json_flush(&a), 0);
	json_init_members(&b, s, 0);
	json_break(&b, 2);
	json_kv_u64(&b, "y", 2);
	json_kv_str(&b, "z", "w");
	assert_int_equal(json_flush(&b), 0);
	json_obj_end(&a);
	assert_int_equal(json_flush(&a), 0);
	assert_string_equal(sink_mem_data(s, NULL), "{\"x\": 1,\n  \"y\": 2, \"z\": \"w\"}\n");
	assert_int_equal(json_bytes(&a), 7 + 2); /* {"x": 1 and }\n */
	assert_int_equal(sink_close(s), 0);
}

static void test_misuse(void **state)
{
	struct json j;
	char big[2 * JSON_BUF];

	/* a value in an object without a key, a key in an array, a close of the wrong kind */
	json_init(&j, NULL, 0);
	json_obj(&j);
	json_u64(&j, 1);
	assert_int_equal(json_flush(&j), -EINVAL);
	assert_string_equal(json_text(&j), "");
	json_init(&j, NULL, 0);
	json_arr(&j);
	json_key(&j, "k");
	assert_int_equal(json_flush(&j), -EINVAL);
	json_init(&j, NULL, 0);
	json_arr(&j);
	json_obj_end(&j);
	assert_int_equal(json_flush(&j), -EINVAL);
	json_init(&j, NULL, 0);
	json_obj(&j);
	json_key(&j, "k");
	json_key(&j, "l");
	assert_int_equal(json_flush(&j), -EINVAL);
	/* two top-level values */
	json_init(&j, NULL, 0);
	json_u64(&j, 1);
	json_u64(&j, 2);
	assert_int_equal(json_flush(&j), -EINVAL);
	/* too deep */
	json_init(&j, NULL, 0);
	for (int i = 0; i < JSON_MAX_DEPTH + 1; i++)
		json_arr(&j);
	assert_int_equal(json_flush(&j), -EINVAL);
	/* a buffer-only writer that runs out of room */
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	json_init(&j, NULL, 0);
	json_str(&j, big);
	assert_int_equal(json_flush(&j), -ENOSPC);
}

/* Output much larger than the buffer reaches the sink whole and in order. */
static void test_large_output(void **state)
{
	struct sink *s = sink_mem();
	struct json j;
	char name[3000], big[JSON_BUF + 100];
	size_t len, want;
	const char *t;

	memset(name, 'n', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	memset(big, 'b', sizeof(big));
	json_init(&j, s, JSON_COMPACT);
	json_arr(&j);
	for (int i = 0; i < 1000; i++) {
		json_u64(&j, i);
		json_str(&j, name);
	}
	json_raw(&j, big, sizeof(big)); /* more than the buffer holds: written straight through */
	json_arr_end(&j);
	assert_int_equal(json_flush(&j), 0);
	t = sink_mem_data(s, &len);
	assert_int_equal(len, json_bytes(&j));
	want = 1 + sizeof(big) + 2; /* [, the raw value, ] and the newline */
	for (int i = 0; i < 1000; i++)
		want += snprintf(name, 16, "%d", i) + 1 + 3001 + 1; /* i,"nnn", */
	assert_int_equal(len, want);
	assert_memory_equal(t, "[0,\"nnn", 7);
	assert_non_null(strstr(t, ",999,\"nnn"));
	assert_memory_equal(t + len - sizeof(big) - 5, "n\",bb", 5);
	assert_memory_equal(t + len - 3, "b]\n", 3);
	assert_int_equal(sink_close(s), 0);
}

static void to_sink(void *ctx, const void *p, size_t n)
{
	sink_write(ctx, p, n);
}

static void test_escape_callback(void **state)
{
	struct sink *s = sink_mem();

	json_escape("a\"\x02\xc3", to_sink, s);
	assert_string_equal(sink_mem_data(s, NULL), "a\\\"\\u0002\\ufffd");
	assert_int_equal(sink_close(s), 0);
}

static void test_vec(void **state)
{
	VEC(uint32_t) v = { 0 };
	uint64_t *a = NULL;
	size_t n = 0, cap = 0;

	for (uint32_t i = 0; i < 1000; i++) {
		uint32_t *e = vec_push(v);

		assert_non_null(e);
		assert_int_equal(*e, 0); /* zeroed */
		*e = i;
	}
	assert_int_equal(v.n, 1000);
	assert_true(v.cap >= 1000 && v.cap < 2000);
	for (uint32_t i = 0; i < 1000; i++)
		assert_int_equal(v.v[i], i);
	assert_int_equal(vec_reserve(v, 5000), 0);
	assert_int_equal(v.cap, 5000);
	assert_int_equal(vec_grow(v, 100), 0); /* already room: nothing moves */
	assert_int_equal(v.cap, 5000);
	vec_free(v);
	assert_null(v.v);
	assert_int_equal(v.n + v.cap, 0);

	assert_int_equal(arr_grow(a, cap, 3), 0);
	assert_int_equal(cap, 16);
	assert_int_equal(arr_grow(a, cap, 100), 0);
	assert_int_equal(cap, 128);
	for (n = 0; n < 100; n++)
		a[n] = n;
	assert_non_null(arr_push(a, n, cap));
	assert_int_equal(n, 101);
	assert_int_equal(a[100], 0);
	assert_int_equal(a[99], 99);
	/* a size that cannot be allocated fails and leaves the array as it was */
	assert_int_equal(arr_grow(a, cap, SIZE_MAX / 2), -ENOMEM);
	assert_int_equal(cap, 128);
	assert_int_equal(a[99], 99);
	free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_escaping),      cmocka_unit_test(test_utf8_repair),
		cmocka_unit_test(test_nesting_and_commas), cmocka_unit_test(test_breaks),
		cmocka_unit_test(test_numbers),	      cmocka_unit_test(test_string_in_parts),
		cmocka_unit_test(test_members),	      cmocka_unit_test(test_misuse),
		cmocka_unit_test(test_large_output),  cmocka_unit_test(test_escape_callback),
		cmocka_unit_test(test_vec),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
