// SPDX-License-Identifier: MIT
#include "test_util.h"

#include "cli/options.h"
#include "cli/cmds.h"
#include "record/record.h"
#include "util/sink.h"

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
	/* several recordings: the first is the input, the others the job's */
	assert_int_equal(PARSE(parse_report_args, &o, "report", "a", "b", "c"), 0);
	assert_string_equal(o.input, "a");
	assert_int_equal(o.more.npos, 2);
	assert_string_equal(o.more.pos[1], "c");
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

/* Every kind of table entry, over a struct of fields of every width. */
struct sub {
	uint32_t id;
	bool seen;
};

struct all_kinds {
	bool flag, also;
	int mode;
	uint8_t small;
	uint32_t mid;
	uint64_t big;
	int verbose;
	long signed_n;
	double ratio, pct;
	const char *name;
	int colour;
	const char *items[3];
	size_t nitems;
	struct sub sub;
	unsigned calls;
	uint64_t opt_bytes;
};

static const struct opt_choice colours[] = { { "red", 7 }, { "green", 9 }, { NULL } };

static int no_x(const struct opt *o, const char *arg)
{
	return strchr(arg, 'x') ? -EINVAL : 0;
}

static int count_calls(const struct opt *o, const char *arg, void *field)
{
	struct all_kinds *k = field;

	k->calls += arg ? atoi(arg) : 1;
	return arg && !strcmp(arg, "0") ? -EINVAL : 0;
}

static const struct opt sub_opts[] = {
	OPT_UINT("id", 0, "N", struct sub, id, 1, 99, "an id", OPT_ALSO(struct sub, seen)),
	OPT_END,
};

#define K struct all_kinds
static const struct opt kinds[] = {
	OPT_FLAG("flag", 'f', K, flag, "a flag"),
	OPT_SET("fast", 0, K, mode, 2, "mode 2"),
	OPT_SET("slow", 0, K, mode, 0, "mode 0"),
	OPT_COUNT("verbose", 'v', K, verbose, "more"),
	OPT_UINT("small", 's', "N", K, small, 1, 200, "u8", OPT_ALSO(K, also)),
	OPT_UINT("mid", 0, "N", K, mid, 0, 4000000000u, "u32"),
	OPT_UINT("big", 0, "N", K, big, 0, UINT64_MAX, "u64"),
	OPT_INT("signed", 0, "N", K, signed_n, -5, 5, "signed"),
	OPT_DOUBLE("ratio", 0, "R", K, ratio, 0, 1, "a ratio above 0", .above = true),
	OPT_DOUBLE("pct", 0, "PCT", K, pct, 0, DBL_MAX, "a percentage", .suffix = "%"),
	OPT_STRING("name", 'n', "NAME", K, name, "a name"),
	OPT_CHOICE("colour", 0, K, colour, colours, "a colour"),
	OPT_LIST("item", 0, "ITEM", K, items, nitems, "repeatable, no x", .check = no_x),
	OPT_GROUP(K, sub, sub_opts),
	OPT_FUNC("call", 0, "N", count_calls, "a handler"),
	OPT_UINT("bytes", 0, "B", K, opt_bytes, 1, 1000, "optional", .optional = true, .val = 512),
	OPT_END,
};
#undef K

static int parse_kinds(int argc, char **argv, struct all_kinds *k)
{
	int first;
	int err;

	memset(k, 0, sizeof(*k));
	err = opt_parse(kinds, 0, "test", argc, argv, k, &first);
	return err ? err : argc - first; /* the number of positionals */
}

#define KPARSE(k, ...) parse_kinds(ARGC(__VA_ARGS__), ARGV(__VA_ARGS__), k)

static void test_opt_table_kinds(void **state)
{
	struct all_kinds k;

	assert_int_equal(opt_table_check(kinds), 0);
	assert_int_equal(KPARSE(&k, "t", "-f", "--fast", "-vv", "--verbose", "-s", "200", "--mid",
				"4000000000", "--big", "18446744073709551615", "--signed", "-5",
				"--ratio", "0.5", "--pct", "2.5%", "-n", "x", "--colour", "green",
				"--item", "a", "pos", "--item", "b", "--id", "42", "--call", "3",
				"--bytes"),
			 1);
	assert_true(k.flag && k.also);
	assert_int_equal(k.mode, 2);
	assert_int_equal(k.verbose, 3);
	assert_int_equal(k.small, 200);
	assert_int_equal(k.mid, 4000000000u);
	assert_true(k.big == UINT64_MAX);
	assert_int_equal(k.signed_n, -5);
	assert_true(k.ratio == 0.5 && k.pct == 2.5);
	assert_string_equal(k.name, "x");
	assert_int_equal(k.colour, 9);
	assert_int_equal(k.nitems, 2);
	assert_string_equal(k.items[1], "b");
	assert_true(k.sub.id == 42 && k.sub.seen);
	assert_int_equal(k.calls, 3);
	assert_int_equal(k.opt_bytes, 512); /* omitted: .val */
	assert_int_equal(KPARSE(&k, "t", "--bytes=7", "--slow"), 0);
	assert_int_equal(k.opt_bytes, 7);
	assert_int_equal(k.mode, 0);
	assert_false(k.also || k.sub.seen);
	assert_int_equal(KPARSE(&k, "t", "-h"), 1);
	assert_int_equal(KPARSE(&k, "t", "--help"), 1);
}

static void test_opt_table_errors(void **state)
{
	struct all_kinds k;

	/* each out of its range, malformed, or unknown: one logged line, -EINVAL */
	assert_int_equal(KPARSE(&k, "t", "-s", "0"), -EINVAL);
	assert_int_equal(KPARSE(&k, "t", "-s", "201"), -EINVAL);
	assert_int_equal(KPARSE(&k, "t", "-s", "-1"), -EINVAL);
	assert_int_equal(KPARSE(&k, "t", "--mid", "4000000001"), -EINVAL);
	assert_int_equal(KPARSE(&k, "t", "--big", "18446744073709551616"), -EINVAL);
	assert_int_equal(KPARSE(&k, "t", "--signed", "6"), -EINVAL);
	assert_int_equal(KPARSE(&k, "t", "--signed", "1x"), -EINVAL);
	assert_int_equal(KPARSE(&k, "t", "--ratio", "0"), -EINVAL); /* above 0, not 0 */
	assert_int_equal(KPARSE(&k, "t", "--ratio", "1.01"), -EINVAL);
	assert_int_equal(KPARSE(&k, "t", "--ratio", "nan"), -EINVAL);
	assert_int_equal(KPARSE(&k, "t", "--pct", "2%%"), -EINVAL);
	assert_int_equal(KPARSE(&k, "t", "--pct", "%"), -EINVAL);
	assert_int_equal(KPARSE(&k, "t", "--colour", "blue"), -EINVAL);
	assert_int_equal(KPARSE(&k, "t", "--item", "x1"), -EINVAL); /* the check refuses it */
	assert_int_equal(KPARSE(&k, "t", "--item", "a", "--item", "b", "--item", "c", "--item",
				"d"),
			 -EINVAL); /* 3 at most */
	assert_int_equal(KPARSE(&k, "t", "--id", "100"), -EINVAL);
	assert_int_equal(KPARSE(&k, "t", "--call", "0"), -EINVAL);
	assert_int_equal(KPARSE(&k, "t", "--bytes=0"), -EINVAL);
	assert_int_equal(KPARSE(&k, "t", "--bogus"), -EINVAL);
	assert_int_equal(KPARSE(&k, "t", "-n"), -EINVAL);
	assert_int_equal(KPARSE(&k, "t", "-x"), -EINVAL);
	assert_int_equal(KPARSE(&k, "t", "--flag=1"), -EINVAL);
}

static void test_opt_in_order(void **state)
{
	struct all_kinds k;
	char **argv = ARGV("t", "-f", "cmd", "-v", "--name", "n");
	int first;

	memset(&k, 0, sizeof(k));
	assert_int_equal(opt_parse(kinds, OPT_IN_ORDER, "t", 6, argv, &k, &first), 0);
	assert_int_equal(first, 2);
	assert_true(k.flag);
	assert_int_equal(k.verbose, 0); /* cmd's own -v */
	/* without it, options after positionals are still options */
	argv = ARGV("t", "-f", "cmd", "-v", "--name", "n");
	assert_int_equal(parse_kinds(6, argv, &k), 1);
	assert_int_equal(k.verbose, 1);
}

static void test_opt_table_check(void **state)
{
	static const struct opt dup_name[] = {
		OPT_FLAG("a", 0, struct all_kinds, flag, "x"),
		OPT_FLAG("a", 0, struct all_kinds, also, "y"),
		OPT_END,
	};
	static const struct opt dup_short[] = {
		OPT_FLAG("a", 'q', struct all_kinds, flag, "x"),
		OPT_FLAG("b", 'q', struct all_kinds, also, "y"),
		OPT_END,
	};
	static const struct opt too_wide[] = {
		OPT_UINT("a", 0, "N", struct all_kinds, small, 0, 256, "x"),
		OPT_END,
	};
	static const struct opt help_taken[] = {
		OPT_FLAG("help", 0, struct all_kinds, flag, "x"),
		OPT_END,
	};
	const struct command *cmds[] = { &cmd_record, &cmd_report, &cmd_flamegraph, &cmd_trace,
					 &cmd_export, &cmd_critical_path, &cmd_diff, &cmd_top,
					 &cmd_cache };

	assert_int_equal(opt_table_check(dup_name), -EINVAL);
	assert_int_equal(opt_table_check(dup_short), -EINVAL);
	assert_int_equal(opt_table_check(too_wide), -EINVAL);
	assert_int_equal(opt_table_check(help_taken), -EINVAL);
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		assert_int_equal(opt_table_check(cmds[i]->opts), 0);
}

static char *help_of(const struct opt *table)
{
	struct sink *s = sink_mem();
	char *text;

	assert_non_null(s);
	assert_int_equal(opt_help(table, s), 0);
	text = strdup(sink_mem_data(s, NULL));
	sink_close(s);
	return text;
}

static void test_opt_help(void **state)
{
	static const struct opt t[] = {
		OPT_FLAG("flag", 'f', struct all_kinds, flag, "a flag"),
		OPT_CHOICE("colour", 0, struct all_kinds, colour, colours, "line one\nline two"),
		OPT_UINT("bytes", 0, "B", struct all_kinds, opt_bytes, 1, 9, "optional",
			 .optional = true, .val = 5),
		OPT_STRING("a-rather-long-name", 0, "VALUE", struct all_kinds, name, "wrapped"),
		OPT_GROUP(struct all_kinds, sub, sub_opts),
		OPT_END,
	};
	char *h = help_of(t);

	assert_string_equal(h, "  -f, --flag              a flag\n"
			       "      --colour red|green  line one\n"
			       "                          line two\n"
			       "      --bytes[=B]         optional\n"
			       "      --a-rather-long-name VALUE\n"
			       "                          wrapped\n"
			       "      --id N              an id\n"
			       "  -h, --help              this help\n");
	free(h);
}

/* The usage block of each command's page (docs/commands/NAME.md) is its --help, to the letter. */
static void test_docs_have_each_help(void **state)
{
	const struct command *cmds[] = { &cmd_record, &cmd_report, &cmd_flamegraph, &cmd_trace,
					 &cmd_export, &cmd_critical_path, &cmd_diff, &cmd_top,
					 &cmd_cache };

	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		struct sink *s = sink_mem(), *block = sink_mem();
		char path[512], *page = calloc(1, 1 << 20);
		const char *h, *line;
		FILE *f;
		size_t n;

		snprintf(path, sizeof(path), TEST_SRC_DIR "/../docs/commands/%s.md", cmds[i]->name);
		f = fopen(path, "r");
		if (!f)
			fail_msg("%s: cannot open", path);
		assert_non_null(page);
		n = fread(page, 1, (1 << 20) - 1, f);
		fclose(f);
		assert_true(n > 0);
		assert_int_equal(cmd_help(cmds[i], s), 0);
		h = sink_mem_data(s, NULL);
		for (line = h; *line;) {
			const char *nl = strchr(line, '\n');
			size_t len = nl ? (size_t)(nl - line) : strlen(line);

			sink_printf(block, len ? "    %.*s\n" : "%.*s\n", (int)len, line);
			line += len + (nl != NULL);
		}
		if (!strstr(page, sink_mem_data(block, NULL)))
			fail_msg("%s lacks 'eprof %s --help' as an indented block:\n%s", path,
				 cmds[i]->name, sink_mem_data(block, NULL));
		sink_close(s);
		sink_close(block);
		free(page);
	}
}

static void test_inputs_and_positionals(void **state)
{
	struct diff_cli d;
	struct top_cli t;
	struct trace_cli tr;

	assert_int_equal(PARSE(parse_diff_args, &d, "diff", "a"), -EINVAL);
	assert_int_equal(PARSE(parse_diff_args, &d, "diff", "a", "b", "c"), -EINVAL);
	assert_int_equal(PARSE(parse_diff_args, &d, "diff", "--json", "a", "b"), 0);
	assert_string_equal(d.new, "b");
	assert_int_equal(PARSE(parse_top_args, &t, "top", "x"), -EINVAL);
	assert_int_equal(PARSE(parse_top_args, &t, "top", "-p", "3,4", "--gpu"), 0);
	assert_int_equal(t.rec.npids, 2);
	assert_true(t.gpu && t.rec.cuda == 1 && t.rec.cuda_stack_rate == 0 && !t.rec.all);
	/* the shared filter options land in each command's own filter */
	assert_int_equal(PARSE(parse_trace_args, &tr, "trace", "--pid", "5", "--time-range", "1:"),
			 0);
	assert_int_equal(tr.filter.pid, 5);
	assert_true(tr.range.has_from && !tr.range.has_to);
	assert_int_equal(PARSE(parse_trace_args, &tr, "trace", "--pid", "0"), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_record_args),
		cmocka_unit_test(test_record_bad_args),
		cmocka_unit_test(test_report_args),
		cmocka_unit_test(test_flamegraph_args),
		cmocka_unit_test(test_opt_table_kinds),
		cmocka_unit_test(test_opt_table_errors),
		cmocka_unit_test(test_opt_in_order),
		cmocka_unit_test(test_opt_table_check),
		cmocka_unit_test(test_opt_help),
		cmocka_unit_test(test_docs_have_each_help),
		cmocka_unit_test(test_inputs_and_positionals),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
