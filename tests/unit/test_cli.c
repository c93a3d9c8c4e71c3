// SPDX-License-Identifier: MIT
#include "test_util.h"

#include "cmds.h"
#include "record/record.h"

#define ARGV(...) ((char *[]){ __VA_ARGS__, NULL })
#define ARGC(...) ((int)(sizeof((char *[]){ __VA_ARGS__ }) / sizeof(char *)))
#define PARSE(fn, o, ...) fn(ARGC(__VA_ARGS__), ARGV(__VA_ARGS__), o)

static void test_record_args(void **state)
{
	struct record_opts o;

	assert_int_equal(PARSE(parse_record_args, &o, "record", "-p", "12,34", "-F", "999", "-d", "2.5"), 0);
	assert_int_equal(o.npids, 2);
	assert_int_equal(o.pids[1], 34);
	assert_int_equal(o.freq, 999);
	assert_true(o.duration == 2.5);
	assert_string_equal(o.output, "eprof.data");
	assert_int_equal(o.callgraph, CG_AUTO);

	assert_int_equal(PARSE(parse_record_args, &o, "record", "-o", "x.data", "-g", "fp", "--", "ls", "-l"), 0);
	assert_string_equal(o.argv[0], "ls");
	assert_string_equal(o.argv[1], "-l");
	assert_int_equal(o.callgraph, CG_FP);
	/* The command's own flags are not eprof's. */
	assert_int_equal(PARSE(parse_record_args, &o, "record", "sleep", "-d", "1"), 0);
	assert_string_equal(o.argv[1], "-d");
	assert_true(o.duration == 0);

	assert_int_equal(PARSE(parse_record_args, &o, "record", "-a", "-F", "10000"), 0);
	assert_true(o.all);
	assert_false(o.no_children);
	assert_int_equal(PARSE(parse_record_args, &o, "record", "-p", "7", "--no-children"), 0);
	assert_true(o.no_children);
	assert_int_equal(PARSE(parse_record_args, &o, "record", "--no-children", "--", "ls"), 0);
	assert_true(o.no_children);
	assert_int_equal(PARSE(parse_record_args, &o, "record", "--help"), 1);
}

static void test_record_bad_args(void **state)
{
	struct record_opts o;

	assert_int_equal(PARSE(parse_record_args, &o, "record"), -EINVAL);
	assert_int_equal(PARSE(parse_record_args, &o, "record", "-p", "1", "-a"), -EINVAL);
	assert_int_equal(PARSE(parse_record_args, &o, "record", "-p", "abc"), -EINVAL);
	assert_int_equal(PARSE(parse_record_args, &o, "record", "-p", "0"), -EINVAL);
	assert_int_equal(PARSE(parse_record_args, &o, "record", "-p", "1", "-F", "0"), -EINVAL);
	assert_int_equal(PARSE(parse_record_args, &o, "record", "-p", "1", "-F", "200000"), -EINVAL);
	assert_int_equal(PARSE(parse_record_args, &o, "record", "-p", "1", "-d", "-1"), -EINVAL);
	assert_int_equal(PARSE(parse_record_args, &o, "record", "-p", "1", "-g", "lbr"), -EINVAL);
	assert_int_equal(PARSE(parse_record_args, &o, "record", "-p", "1", "--bogus"), -EINVAL);
	assert_int_equal(PARSE(parse_record_args, &o, "record", "-p"), -EINVAL);
	/* -a has no children to leave out */
	assert_int_equal(PARSE(parse_record_args, &o, "record", "-a", "--no-children"), -EINVAL);
}

static void test_report_args(void **state)
{
	struct report_cli o;

	assert_int_equal(PARSE(parse_report_args, &o, "report"), 0);
	assert_string_equal(o.input, "eprof.data");
	assert_int_equal(o.r.limit, 30);
	assert_int_equal(PARSE(parse_report_args, &o, "report", "x.data", "--sort", "total", "--json",
			       "--threads", "--lines", "--tid", "7", "--limit", "0"), 0);
	assert_string_equal(o.input, "x.data");
	assert_int_equal(o.r.hot.sort, SORT_TOTAL);
	assert_true(o.r.json && o.r.threads && o.r.hot.by_line);
	assert_int_equal(o.r.hot.filter.tid, 7);
	assert_int_equal(o.r.limit, 0);
	assert_int_equal(PARSE(parse_report_args, &o, "report", "--sort", "name"), -EINVAL);
	assert_int_equal(PARSE(parse_report_args, &o, "report", "a", "b"), -EINVAL);
	assert_int_equal(PARSE(parse_report_args, &o, "report", "--limit", "x"), -EINVAL);
}

static void test_flamegraph_args(void **state)
{
	struct flamegraph_cli o;

	assert_int_equal(PARSE(parse_flamegraph_args, &o, "flamegraph"), 0);
	assert_string_equal(o.output, "flamegraph.svg");
	assert_int_equal(PARSE(parse_flamegraph_args, &o, "flamegraph", "--folded"), 0);
	assert_string_equal(o.output, "-");
	assert_int_equal(PARSE(parse_flamegraph_args, &o, "flamegraph", "in.data", "-o", "f.svg",
			       "--lines", "--width", "1900"), 0);
	assert_string_equal(o.input, "in.data");
	assert_string_equal(o.output, "f.svg");
	assert_int_equal(o.width, 1900);
	assert_int_equal(PARSE(parse_flamegraph_args, &o, "flamegraph", "--width", "5"), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_record_args),
		cmocka_unit_test(test_record_bad_args),
		cmocka_unit_test(test_report_args),
		cmocka_unit_test(test_flamegraph_args),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
