// SPDX-License-Identifier: MIT
#include "test_util.h"

#include <linux/stddef.h>
#include <linux/types.h>
#if defined(__x86_64__)
#include <asm/ptrace.h>
#endif
#include <fcntl.h>

#include "eprof_abi.h"
#include "region_pair.h"

#include "analysis/regions.h"
#include "output/report.h"
#include "cli/cmds.h"
#include "record/record.h"
#include "sym/usdt.h"
#include "util/sink.h"

static void add_region(struct profile *p, uint32_t pid, uint32_t tid, const char *name,
		       uint64_t start, uint64_t end)
{
	struct event e = { .kind = EVK_REGION, .ts = start, .dur = end - start, .pid = pid,
			   .tid = tid, .name = profile__intern(p, name) };

	assert_int_equal(profile__add_event(p, &e), 0);
}

static const struct region_node *node(const struct profile *p, const struct region_set *rs,
				      const char *name, const char *parent)
{
	for (size_t i = 0; i < rs->nnodes; i++) {
		const struct region_node *n = &rs->nodes[i];
		const char *pn = n->parent >= 0 ? profile__str(p, rs->nodes[n->parent].name) : NULL;

		if (strcmp(profile__str(p, n->name), name))
			continue;
		if ((!parent && !pn) || (parent && pn && !strcmp(parent, pn)))
			return n;
	}
	return NULL;
}

static void test_stats_percentiles(void **state)
{
	uint64_t d[100];
	struct region_node n = { 0 };

	/* 100..1 shuffled order does not matter: sorted inside. */
	for (int i = 0; i < 100; i++)
		d[i] = 100 - i;
	region_stats(d, 100, &n);
	assert_int_equal(n.count, 100);
	assert_int_equal(n.min_ns, 1);
	assert_int_equal(n.max_ns, 100);
	assert_int_equal(n.p50_ns, 50);
	assert_int_equal(n.p90_ns, 90);
	assert_int_equal(n.p99_ns, 99);
	assert_true(n.mean_ns > 50.49 && n.mean_ns < 50.51);
	assert_true(n.std_ns > 29.0 && n.std_ns < 29.02); /* sample std of 1..100: 29.0115 */

	uint64_t one = 7;
	struct region_node m = { 0 };

	region_stats(&one, 1, &m);
	assert_int_equal(m.p50_ns, 7);
	assert_int_equal(m.p99_ns, 7);
	assert_true(m.std_ns == 0);
}

/*
 * thread 1: A[0,100] { B[10,40] { C[20,30] }, B[50,60] }
 * thread 2: A[0,10], then B[20,25] on its own (top level)
 */
static void test_nesting_self(void **state)
{
	struct profile *p = profile__new();
	struct region_set rs;
	const struct region_node *a, *b, *c, *b2;

	/* Arrival order is end order (events are sent at the end), not start order. */
	add_region(p, 1, 1, "C", 20, 30);
	add_region(p, 1, 1, "B", 10, 40);
	add_region(p, 1, 1, "B", 50, 60);
	add_region(p, 1, 2, "A", 0, 10);
	add_region(p, 1, 1, "A", 0, 100);
	add_region(p, 1, 2, "B", 20, 25);
	assert_int_equal(regions_build(p, NULL, &rs), 0);
	assert_int_equal(rs.nnodes, 4);
	a = node(p, &rs, "A", NULL);
	b = node(p, &rs, "B", "A");
	c = node(p, &rs, "C", "B");
	b2 = node(p, &rs, "B", NULL);
	assert_non_null(a);
	assert_non_null(b);
	assert_non_null(c);
	assert_non_null(b2);
	assert_int_equal(a->count, 2);
	assert_int_equal(a->total_ns, 110);
	assert_int_equal(a->self_ns, 110 - 40);
	assert_int_equal(b->count, 2);
	assert_int_equal(b->total_ns, 40);
	assert_int_equal(b->self_ns, 30);
	assert_int_equal(c->self_ns, 10);
	assert_int_equal(c->depth, 2);
	assert_int_equal(b2->count, 1);
	/* Depth first, biggest first: A, B (under A), C, then B (top). */
	assert_ptr_equal(&rs.nodes[0], a);
	assert_ptr_equal(&rs.nodes[1], b);
	assert_ptr_equal(&rs.nodes[2], c);
	assert_ptr_equal(&rs.nodes[3], b2);
	region_set__free(&rs);

	/* Filters: thread 2 only. */
	struct sample_filter f = { .tid = 2 };

	assert_int_equal(regions_build(p, &f, &rs), 0);
	assert_int_equal(rs.nnodes, 2);
	assert_int_equal(rs.n, 2);
	region_set__free(&rs);
	profile__free(p);
}

/* R[0,100] { R[10,90] { R[20,80] { X[30,40] } } }: one R node, X under it. */
static void test_recursion(void **state)
{
	struct profile *p = profile__new();
	struct region_set rs;
	const struct region_node *r, *x;

	add_region(p, 5, 5, "X", 30, 40);
	add_region(p, 5, 5, "R", 20, 80);
	add_region(p, 5, 5, "R", 10, 90);
	add_region(p, 5, 5, "R", 0, 100);
	assert_int_equal(regions_build(p, NULL, &rs), 0);
	assert_int_equal(rs.nnodes, 2);
	r = node(p, &rs, "R", NULL);
	x = node(p, &rs, "X", "R");
	assert_non_null(r);
	assert_non_null(x);
	assert_int_equal(r->count, 3);
	assert_int_equal(r->total_ns, 100); /* the outermost call only */
	assert_int_equal(r->self_ns, 20 + 20 + 50);
	assert_int_equal(r->min_ns, 60);
	assert_int_equal(r->max_ns, 100);
	assert_int_equal(x->count, 1);
	assert_int_equal(x->depth, 1);
	region_set__free(&rs);
	profile__free(p);
}

static void test_instance_and_ranges(void **state)
{
	struct profile *p = profile__new();
	struct region_span sp;
	struct region_ranges *rr;

	add_region(p, 1, 1, "step", 300, 400);
	add_region(p, 1, 2, "step", 100, 200);
	add_region(p, 1, 1, "step", 120, 150); /* thread 1 */
	add_region(p, 1, 1, "step", 130, 140); /* recursive inside it */
	add_region(p, 1, 1, "other", 0, 1000);
	assert_int_equal(regions_count(p, "step"), 4);
	assert_int_equal(regions_instance(p, "step", 0, &sp), 0);
	assert_int_equal(sp.tid, 2);
	assert_int_equal(sp.start, 100);
	assert_int_equal(sp.end, 200);
	assert_int_equal(regions_instance(p, "step", 1, &sp), 0);
	assert_int_equal(sp.start, 120);
	assert_int_equal(regions_instance(p, "step", -1, &sp), 0);
	assert_int_equal(sp.start, 300);
	assert_int_equal(sp.end, 400);
	assert_int_equal(regions_instance(p, "step", 4, &sp), -ENOENT);
	assert_int_equal(regions_instance(p, "step", -5, &sp), -ENOENT);
	assert_int_equal(regions_instance(p, "none", 0, &sp), -ENOENT);

	rr = region_ranges__new(p, "step");
	assert_non_null(rr);
	assert_int_equal(region_ranges__n(rr), 3); /* the recursive one merged */
	struct {
		uint32_t tid;
		uint64_t ts;
		bool in;
	} cases[] = {
		{ 1, 119, false }, { 1, 120, true }, { 1, 135, true }, { 1, 150, true },
		{ 1, 151, false }, { 2, 150, true }, { 2, 250, false }, { 1, 350, true },
		{ 3, 350, false }, { 1, 401, false }, { 0, 0, false },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct sample s = { .ts = cases[i].ts, .tid = cases[i].tid, .pid = 1 };

		assert_int_equal(region_ranges__match(rr, &s), cases[i].in);
	}
	/* Through the common sample filter. */
	struct sample_filter f = { .match = region_ranges__match, .match_arg = rr };
	struct sample s = { .ts = 135, .tid = 1 };

	assert_true(sample_filter__match(&f, &s));
	s.ts = 160;
	assert_false(sample_filter__match(&f, &s));
	region_ranges__free(rr);
	profile__free(p);
}

/* The pairing code the BPF programs run (bpf/region_pair.h). */
static void test_pair_rules(void **state)
{
	struct region_tstate *t = calloc(1, sizeof(*t));
	struct region_slot *s;
	__u32 dropped;

	assert_non_null(t);
	/* f { g { f } }: ends close the innermost of their own pair. */
	assert_non_null(region_push(t, 10, 1));
	assert_non_null(region_push(t, 20, 2));
	s = region_push(t, 30, 1);
	assert_non_null(s);
	assert_int_equal(t->depth, 3);
	assert_int_equal(region_pop(t, 1, &dropped), 2);
	assert_int_equal(dropped, 0);
	assert_int_equal(t->s[2].start, 30); /* the popped slot stays readable */
	assert_int_equal(region_pop(t, 2, &dropped), 1);
	assert_int_equal(region_pop(t, 1, &dropped), 0);
	assert_int_equal(t->depth, 0);
	/* An end with nothing open changes nothing. */
	assert_int_equal(region_pop(t, 1, &dropped), -2);
	assert_int_equal(t->depth, 0);

	/*
	 * A function region (pair 1) around an NVTX push (pair 3) that is never
	 * popped (an exception): the function's end forgets the push.
	 */
	region_push(t, 100, 1);
	region_push(t, 110, 3);
	region_push(t, 120, 3);
	assert_int_equal(region_pop(t, 1, &dropped), 0);
	assert_int_equal(dropped, 2);
	assert_int_equal(t->depth, 0);
	/* NVTX pops pair LIFO with pushes of the same pair, across other pairs' ends. */
	region_push(t, 200, 3);
	region_push(t, 210, 4);
	assert_int_equal(region_pop(t, 3, &dropped), 0);
	assert_int_equal(dropped, 1);

	/* Deeper than the stack: begins counted, the same number of ends absorbed first. */
	memset(t, 0, sizeof(*t));
	for (int i = 0; i < EPROF_REGION_DEPTH; i++)
		assert_non_null(region_push(t, i, 7));
	assert_null(region_push(t, 99, 7));
	assert_null(region_push(t, 100, 7));
	assert_int_equal(t->overflow, 2);
	assert_int_equal(region_pop(t, 7, &dropped), -1);
	assert_int_equal(region_pop(t, 7, &dropped), -1);
	assert_int_equal(region_pop(t, 7, &dropped), EPROF_REGION_DEPTH - 1);
	assert_int_equal(t->s[EPROF_REGION_DEPTH - 1].start, EPROF_REGION_DEPTH - 1);
	free(t);
}

static void test_usdt_args(void **state)
{
	struct usdt_arg a;

#if defined(__x86_64__)
	assert_int_equal(usdt_arg_parse("8@%rdi", 0, &a), 0);
	assert_int_equal(a.size, 8);
	assert_false(a.deref);
	assert_int_equal(a.reg_off, offsetof(struct pt_regs, rdi));
	assert_int_equal(usdt_arg_parse("-4@%esi 8@-24(%rbp)", 1, &a), 0);
	assert_true(a.deref);
	assert_int_equal(a.off, -24);
	assert_int_equal(a.reg_off, offsetof(struct pt_regs, rbp));
	assert_int_equal(usdt_arg_parse("-4@%esi 8@-24(%rbp)", 0, &a), 0);
	assert_int_equal(a.size, -4);
	assert_int_equal(a.reg_off, offsetof(struct pt_regs, rsi));
	assert_int_equal(usdt_arg_parse("8@%r12", 0, &a), 0);
	assert_int_equal(a.reg_off, offsetof(struct pt_regs, r12));
	assert_int_equal(usdt_arg_parse("8@(%rax)", 0, &a), 0);
	assert_true(a.deref);
	assert_int_equal(a.off, 0);
	assert_int_equal(usdt_arg_parse("4@$42", 0, &a), 0);
	assert_true(a.is_const);
	assert_int_equal(a.off, 42);
	assert_int_equal(usdt_arg_parse("8@%xyz", 0, &a), -EINVAL);
#endif
	assert_int_equal(usdt_arg_parse("8@%rdi", 1, &a), -ENOENT);
	assert_int_equal(usdt_arg_parse("", 0, &a), -ENOENT);
	assert_int_equal(usdt_arg_parse("garbage", 0, &a), -EINVAL);
}

/* Debian's libc carries stapsdt notes (provider libc): a real file to parse. */
static void test_usdt_notes_libc(void **state)
{
	const char *paths[] = { "/lib/x86_64-linux-gnu/libc.so.6",
				"/lib/aarch64-linux-gnu/libc.so.6", "/usr/lib64/libc.so.6" };
	struct usdt_note *notes = NULL;
	int fd = -1, n, found = 0;

	for (size_t i = 0; i < 3 && fd < 0; i++)
		fd = open(paths[i], O_RDONLY);
	if (fd < 0)
		skip();
	n = usdt_notes_read(fd, &notes);
	assert_true(n >= 0);
	for (int i = 0; i < n; i++) {
		if (strcmp(notes[i].provider, "libc"))
			continue;
		found++;
		assert_true(notes[i].pc_off > 0);
		assert_true(notes[i].name[0]);
	}
	if (n)
		assert_true(found > 0);
	free(notes);
	uint64_t vaddr, off;

	assert_int_equal(elf_func_lookup(fd, "malloc", &vaddr, &off), 0);
	assert_true(off > 0);
	assert_int_equal(elf_func_lookup(fd, "no_such_function_xyz", &vaddr, &off), -ENOENT);
	close(fd);
}

static void test_record_args(void **state)
{
	struct record_opts o;
	char *ok[] = { "record", "--region", "./app:work", "--region", "libfoo:0x1234", "--usdt",
		       "/bin/x:prov:step", "--no-auto-regions", "--", "true", NULL };
	char *bad1[] = { "record", "--region", "nocolon", "--", "true", NULL };
	char *bad2[] = { "record", "--usdt", "bin:name", "--", "true", NULL };
	char *bad3[] = { "record", "--region", ":sym", "--", "true", NULL };
	char *py[] = { "record", "--region", "py:train.Trainer.step", "--", "true", NULL };
	char *pybad[] = { "record", "--region", "py:a..b", "--", "true", NULL };
	char *pybad2[] = { "record", "--region", "py:step(", "--", "true", NULL };

	assert_int_equal(parse_record_args(10, ok, &o), 0);
	assert_int_equal(o.nregions, 2);
	assert_string_equal(o.regions[1], "libfoo:0x1234");
	assert_int_equal(o.nusdts, 1);
	assert_true(o.no_auto_regions);
	assert_int_equal(parse_record_args(5, bad1, &o), -EINVAL);
	assert_int_equal(parse_record_args(5, bad2, &o), -EINVAL);
	assert_int_equal(parse_record_args(5, bad3, &o), -EINVAL);
	assert_int_equal(parse_record_args(5, py, &o), 0);
	assert_string_equal(o.regions[0], "py:train.Trainer.step");
	assert_int_equal(parse_record_args(5, pybad, &o), -EINVAL);
	assert_int_equal(parse_record_args(5, pybad2, &o), -EINVAL);
}

static void test_reader_args(void **state)
{
	struct report_cli r;
	struct flamegraph_cli f;
	char *ra[] = { "report", "x.data", "--region", "step", NULL };
	char *fa[] = { "flamegraph", "--region", "fwd", "--folded", NULL };

	assert_int_equal(parse_report_args(4, ra, &r), 0);
	assert_string_equal(r.region, "step");
	assert_string_equal(r.input, "x.data");
	assert_int_equal(parse_flamegraph_args(4, fa, &f), 0);
	assert_string_equal(f.region, "fwd");
	assert_true(f.folded);
}

static void test_report_regions(void **state)
{
	struct profile *p = profile__new();
	struct report_opts o = { .json = true };
	struct sink *s = sink_mem();
	const char *txt;
	size_t len;

	add_region(p, 1, 1, "child \"q\"", 10, 20);
	add_region(p, 1, 1, "top", 0, 100);
	assert_int_equal(report_write(s, p, &o), 0);
	txt = sink_mem_data(s, &len);
	assert_non_null(strstr(txt, "\"regions\": ["));
	assert_non_null(strstr(txt, "{\"name\": \"top\", \"parent\": null, \"depth\": 0, "
				    "\"count\": 1, \"total_ns\": 100, \"self_ns\": 90"));
	assert_non_null(strstr(txt, "{\"name\": \"child \\\"q\\\"\", \"parent\": \"top\""));
	sink_close(s);

	o.json = false;
	s = sink_mem();
	assert_int_equal(report_write(s, p, &o), 0);
	txt = sink_mem_data(s, &len);
	assert_non_null(strstr(txt, "\ntop "));
	assert_non_null(strstr(txt, "\n  child \"q\" "));
	assert_non_null(strstr(txt, "100 ns"));
	assert_null(strstr(txt, "(sampled)"));
	sink_close(s);

	/* Python regions seen by sampling are marked in both forms. */
	{
		struct event e = { .kind = EVK_REGION, .ts = 200, .dur = 50, .pid = 1, .tid = 1,
				   .name = profile__intern(p, "Trainer.step"),
				   .flags = EVF_REGION_SAMPLED };

		assert_int_equal(profile__add_event(p, &e), 0);
	}
	s = sink_mem();
	assert_int_equal(report_write(s, p, &o), 0);
	txt = sink_mem_data(s, &len);
	assert_non_null(strstr(txt, "\nTrainer.step "));
	assert_non_null(strstr(strstr(txt, "\nTrainer.step "), "(sampled)\n"));
	assert_null(strstr(strstr(txt, "\ntop "), "(sampled)\n  child"));
	assert_non_null(strstr(txt, "# (sampled): Python calls seen by sampling"));
	sink_close(s);
	o.json = true;
	s = sink_mem();
	assert_int_equal(report_write(s, p, &o), 0);
	txt = sink_mem_data(s, &len);
	assert_non_null(strstr(txt, "\"open\": 0, \"sampled\": 1}"));
	assert_non_null(strstr(txt, "\"open\": 0, \"sampled\": 0}"));
	sink_close(s);
	profile__free(p);
}

/*
 * 40 region names, each with a child and a slow tail: the text keeps the --limit largest
 * children per node and 5 findings per rule, saying how many it left out; JSON has all.
 */
static void test_report_limits(void **state)
{
	struct profile *p = profile__new();
	struct report_opts o = { .limit = 30 };
	struct sink *s;
	const char *txt, *at;
	size_t len, n = 0;
	uint64_t t = 0;
	char name[16];

	(void)state;
	for (int k = 0; k < 40; k++) {
		snprintf(name, sizeof(name), "r%02d", k);
		for (int i = 0; i < 20; i++) {
			uint64_t d = (i == 19 ? 100000 : 20000) + (uint64_t)k;

			add_region(p, 1, 1, name, t, t + d);
			add_region(p, 1, 1, "c", t + 10, t + 1010);
			t += d + 100;
		}
	}
	s = sink_mem();
	assert_int_equal(report_write(s, p, &o), 0);
	txt = sink_mem_data(s, &len);
	assert_non_null(strstr(txt, "\nr39 ")); /* the largest totals first */
	assert_non_null(strstr(txt, "\nr10 "));
	assert_null(strstr(txt, "\nr09 "));
	assert_non_null(strstr(strstr(txt, "\nr10 "), "\n  c "));
	assert_non_null(strstr(txt, "\n... 20 more regions (--limit 0 shows all)\n"));
	for (at = txt; (at = strstr(at, "  region-tail  ")); at++)
		n++;
	assert_int_equal(n, 6); /* 5 findings and the line that counts the rest */
	assert_non_null(strstr(txt, "region-tail         and 35 more (--json lists every finding)"));
	sink_close(s);

	o.limit = 0;
	s = sink_mem();
	assert_int_equal(report_write(s, p, &o), 0);
	txt = sink_mem_data(s, &len);
	assert_non_null(strstr(txt, "\nr00 "));
	assert_null(strstr(txt, "more regions"));
	sink_close(s);

	o.json = true;
	s = sink_mem();
	assert_int_equal(report_write(s, p, &o), 0);
	txt = sink_mem_data(s, &len);
	n = 0;
	for (at = txt; (at = strstr(at, "\"id\": \"region-tail\"")); at++)
		n++;
	assert_int_equal(n, 40);
	sink_close(s);
	profile__free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stats_percentiles),
		cmocka_unit_test(test_nesting_self),
		cmocka_unit_test(test_recursion),
		cmocka_unit_test(test_instance_and_ranges),
		cmocka_unit_test(test_pair_rules),
		cmocka_unit_test(test_usdt_args),
		cmocka_unit_test(test_usdt_notes_libc),
		cmocka_unit_test(test_record_args),
		cmocka_unit_test(test_reader_args),
		cmocka_unit_test(test_report_regions),
		cmocka_unit_test(test_report_limits),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
