// SPDX-License-Identifier: MIT
#include "test_util.h"

#include "analysis/hot.h"
#include "analysis/pygil.h"
#include "analysis/stacks.h"
#include "output/folded.h"
#include "output/report.h"
#include "util/sink.h"

/*
 * main -> a -> leaf1       60 samples
 * main -> b -> leaf2       30 samples (thread 2)
 * main -> b                10 samples
 * main -> r -> r -> r       5 samples (recursion: total counted once)
 * main -> c[helper inlined] 5 samples
 */
static struct profile *make(void)
{
	struct profile *p = profile__new();
	uint32_t m = test_loc(p, "/bin/app", "main", NULL, 1), a = test_loc(p, "/bin/app", "a", NULL, 2),
		 b = test_loc(p, "/bin/app", "b", NULL, 3), l1 = test_loc(p, "/lib/x.so", "leaf1", NULL, 4),
		 l2 = test_loc(p, "/lib/x.so", "leaf2", NULL, 5), r1 = test_loc(p, "/bin/app", "r", NULL, 6),
		 r2 = test_loc(p, "/bin/app", "r", NULL, 7), c = test_loc(p, "/bin/app", "c", "helper", 8);

	test_samples(p, 10, 10, "app", 60, (uint32_t[]){ m, a, l1 }, 3);
	test_samples(p, 10, 11, "worker", 30, (uint32_t[]){ m, b, l2 }, 3);
	test_samples(p, 10, 10, "app", 10, (uint32_t[]){ m, b }, 2);
	test_samples(p, 10, 10, "app", 5, (uint32_t[]){ m, r1, r2, r2 }, 4);
	test_samples(p, 10, 10, "app", 5, (uint32_t[]){ m, c }, 2);
	return p;
}

static const struct func_stat *find(const struct profile *p, const struct hot_result *r,
				     const char *name)
{
	for (size_t i = 0; i < r->n; i++)
		if (!strcmp(profile__str(p, r->funcs[i].name), name))
			return &r->funcs[i];
	return NULL;
}

static void test_hot_self_total(void **state)
{
	struct profile *p = make();
	struct hot_opts o = { 0 };
	struct hot_result r;

	assert_int_equal(hot_functions(p, &o, &r), 0);
	assert_int_equal(r.samples, 110);
	assert_string_equal(profile__str(p, r.funcs[0].name), "leaf1");
	assert_int_equal(find(p, &r, "leaf1")->self, 60);
	assert_int_equal(find(p, &r, "main")->total, 110);
	assert_int_equal(find(p, &r, "main")->self, 0);
	assert_int_equal(find(p, &r, "b")->self, 10);
	assert_int_equal(find(p, &r, "b")->total, 40);
	assert_int_equal(find(p, &r, "r")->total, 5); /* not 15 */
	assert_int_equal(find(p, &r, "r")->self, 5);
	/* Inlined frames belong to their function unless asked for. */
	assert_null(find(p, &r, "helper"));
	assert_int_equal(find(p, &r, "c")->self, 5);
	assert_string_equal(profile__str(p, find(p, &r, "leaf1")->module), "x.so");
	hot_result__free(&r);

	o.inlined = true;
	assert_int_equal(hot_functions(p, &o, &r), 0);
	assert_int_equal(find(p, &r, "helper")->self, 5);
	assert_int_equal(find(p, &r, "c")->self, 0);
	assert_int_equal(find(p, &r, "c")->total, 5);
	hot_result__free(&r);

	o.inlined = false;
	o.sort = SORT_TOTAL;
	assert_int_equal(hot_functions(p, &o, &r), 0);
	assert_string_equal(profile__str(p, r.funcs[0].name), "main");
	hot_result__free(&r);

	o.sort = SORT_SELF;
	o.filter.tid = 11;
	assert_int_equal(hot_functions(p, &o, &r), 0);
	assert_int_equal(r.samples, 30);
	assert_string_equal(profile__str(p, r.funcs[0].name), "leaf2");
	hot_result__free(&r);
	profile__free(p);
}

static void test_hot_by_line(void **state)
{
	struct profile *p = make();
	struct hot_opts o = { .by_line = true };
	struct hot_result r;

	assert_int_equal(hot_functions(p, &o, &r), 0);
	assert_string_equal(profile__str(p, r.funcs[0].name), "leaf1 (main.c:14)");
	hot_result__free(&r);
	profile__free(p);
}

static void test_folded(void **state)
{
	struct profile *p = make();
	struct folded_opts o = { 0 };
	struct sink *s = sink_mem();
	const char *out;

	assert_int_equal(folded_write(s, p, &o), 0);
	out = sink_mem_data(s, NULL);
	assert_non_null(strstr(out, "app;main;a;leaf1 60\n"));
	assert_non_null(strstr(out, "worker;main;b;leaf2 30\n"));
	assert_non_null(strstr(out, "app;main;r;r;r 5\n"));
	/* Inline frames are expanded, outer first. */
	assert_non_null(strstr(out, "app;main;c;helper 5\n"));
	sink_close(s);

	s = sink_mem();
	o.lines = true;
	o.no_comm = true;
	assert_int_equal(folded_write(s, p, &o), 0);
	assert_non_null(strstr(sink_mem_data(s, NULL), "main (main.c:11);a (main.c:12);leaf1 (main.c:14) 60\n"));
	sink_close(s);
	profile__free(p);
}

/* A 1,500-deep stack folds whole, root first (symbolic nodes are built 1,024 levels a time). */
static void test_folded_deep_stack(void **state)
{
	struct profile *p = profile__new();
	struct folded_opts o = { .no_comm = true };
	uint32_t locs[1500];
	struct sink *s = sink_mem();
	const char *out;
	char name[16];
	size_t semis = 0;

	(void)state;
	for (uint32_t i = 0; i < 1500; i++) {
		snprintf(name, sizeof(name), "f%u", i);
		locs[i] = test_loc(p, "/bin/app", name, NULL, i + 1);
	}
	test_samples(p, 1, 1, "deep", 2, locs, 1500);
	test_samples(p, 1, 1, "deep", 1, locs, 1200); /* a prefix, mapped on the way already */
	assert_int_equal(folded_write(s, p, &o), 0);
	out = sink_mem_data(s, NULL);
	assert_true(!strncmp(out, "f0;f1;f2;", 9));
	assert_non_null(strstr(out, ";f1023;f1024;"));
	assert_non_null(strstr(out, ";f1499 2\n"));
	assert_non_null(strstr(out, ";f1199 1\n"));
	for (const char *line = out; *line; line = strchr(line, '\n') + 1) {
		const char *end = strchr(line, '\n');

		semis = 0;
		for (const char *c = line; c < end; c++)
			semis += *c == ';';
		assert_true(!strncmp(line, "f0;f1;f2;", 9));
		assert_int_equal(semis, end[-1] == '2' ? 1499 : 1199);
	}
	sink_close(s);
	profile__free(p);
}

static void test_report_json_and_text(void **state)
{
	struct profile *p = make();
	struct report_opts o = { .limit = 3, .json = true, .threads = true };
	struct sink *s = sink_mem();
	const char *out;

	profile__set_meta(p, "command", "app \"quoted\"");
	assert_int_equal(report_write(s, p, &o), 0);
	out = sink_mem_data(s, NULL);
	assert_non_null(strstr(out, "\"samples\": 110"));
	assert_non_null(strstr(out, "\"command\": \"app \\\"quoted\\\"\""));
	assert_non_null(strstr(out, "{\"name\": \"leaf1\", \"module\": \"x.so\", \"kind\": \"user\", \"self\": 60, \"total\": 60, \"self_pct\": 54.5455"));
	assert_non_null(strstr(out, "\"threads\": ["));
	assert_non_null(strstr(out, "\"tid\": 11, \"comm\": \"worker\", \"samples\": 30"));
	sink_close(s);

	s = sink_mem();
	o.json = false;
	assert_int_equal(report_write(s, p, &o), 0);
	out = sink_mem_data(s, NULL);
	assert_non_null(strstr(out, "samples: 110"));
	assert_non_null(strstr(out, "  54.55   54.55        60  leaf1"));
	assert_non_null(strstr(out, "more functions"));
	sink_close(s);
	profile__free(p);
}

static void test_stack_frames_cut(void **state)
{
	struct profile *p = make();
	const struct frame *f[2];
	size_t total;
	uint32_t node = p->samples.v[0].stack;
	size_t n = stack_frames(p, node, f, 2, &total);

	assert_int_equal(total, 3);
	assert_int_equal(n, 2);
	/* The leaf side is kept when the buffer is short. */
	assert_string_equal(profile__str(p, f[1]->name), "leaf1");
	assert_string_equal(profile__str(p, f[0]->name), "a");
	profile__free(p);
}

/*
 * stacks_truncated (one pass) against stack_truncated (a walk to the root) on every node of
 * random tries whose roots and second levels mix [truncated], [GIL] / [no GIL] and functions.
 */
static void test_stacks_truncated_model(void **state)
{
	uint64_t rng = 7;
	size_t cuts = 0, gil_cuts = 0;

	(void)state;
	for (int round = 0; round < 200; round++) {
		struct profile *p = profile__new();
		uint32_t locs[6];
		uint8_t *cut;

		locs[0] = (uint32_t)profile__special(p, "[truncated]");
		locs[1] = (uint32_t)profile__special(p, PY_GIL_HELD);
		locs[2] = (uint32_t)profile__special(p, PY_GIL_NOT_HELD);
		locs[3] = test_loc(p, "/bin/app", "main", NULL, 1);
		locs[4] = test_loc(p, "/bin/app", "f", NULL, 2);
		locs[5] = test_loc(p, "/bin/app", "g", NULL, 3);
		for (int k = 0; k < 20; k++) {
			uint32_t path[5];
			size_t n;

			rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
			n = 1 + (rng >> 40) % 5;
			for (size_t j = 0; j < n; j++)
				path[j] = locs[(rng >> (8 + 3 * j)) % 6];
			test_samples(p, 1, 1, "t", 1, path, n);
		}
		cut = stacks_truncated(p);
		assert_non_null(cut);
		assert_false(cut[0]);
		for (uint32_t i = 0; i < p->stacks.n; i++) {
			uint32_t root = i, below = 0;

			assert_int_equal(cut[i], stack_truncated(p, i));
			while (p->stacks.v[root].parent) {
				below = root;
				root = p->stacks.v[root].parent;
			}
			cuts += cut[i];
			gil_cuts += cut[i] && root != i && below && py_gil_marker(p, p->stacks.v[root].loc);
		}
		free(cut);
		profile__free(p);
	}
	assert_true(cuts > 100 && gil_cuts > 20); /* both kinds of cut were exercised */
}

/*
 * thread_stats' hottest function per thread against a hot_functions pass filtered to the
 * thread (and to a time window): random small profiles, where ties on self samples (broken
 * by total, then name) are common; recursion and inlined callees included.
 */
static void test_thread_tops_random(void **state)
{
	static const char *const names[] = { "f0", "f1", "f2", "f3", "f4", "f5", "f6", "f7" };
	uint64_t rng = 99;
	size_t ties = 0;

	(void)state;
	for (int round = 0; round < 300; round++) {
		struct profile *p = profile__new();
		uint32_t locs[10];
		struct sample_filter f = { 0 };

		for (int i = 0; i < 10; i++)
			locs[i] = test_loc(p, "/bin/app", names[i % 8], i == 3 || i == 8 ? "inl" : NULL,
					   (uint64_t)i + 1);
		for (int k = 0; k < 12; k++) {
			uint32_t path[6];
			size_t n;

			rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
			n = 1 + (rng >> 40) % 6;
			for (size_t j = 0; j < n; j++)
				path[j] = locs[(rng >> (8 + 3 * j)) % 10];
			test_samples(p, 7, 100 + (uint32_t)((rng >> 60) % 4), "t",
				     1 + (int)((rng >> 50) % 3), path, n);
		}
		if (round % 2) { /* a window over the middle of the samples */
			f.t0 = p->samples.v[p->samples.n / 4].ts;
			f.t1 = p->samples.v[p->samples.n * 3 / 4].ts;
		}

		struct thread_stat *t;
		size_t nt;

		assert_int_equal(thread_stats(p, &f, &t, &nt), 0);
		for (size_t i = 0; i < nt; i++) {
			struct hot_opts o = { .filter = f };
			struct hot_result r;

			o.filter.tid = t[i].tid;
			assert_int_equal(hot_functions(p, &o, &r), 0);
			assert_true(r.n > 0);
			ties += r.n > 1 && r.funcs[1].self == r.funcs[0].self;
			assert_string_equal(profile__str(p, t[i].top_func),
					    profile__str(p, r.funcs[0].name));
			assert_int_equal(t[i].top_self, r.funcs[0].self);
			hot_result__free(&r);
		}
		free(t);
		profile__free(p);
	}
	assert_true(ties > 100); /* the tie-breaking was exercised */

	/*
	 * 200 functions tied with two self samples each (more than the 64 a walk compares at
	 * once); one of the two is called from another of them, some callers more often.
	 */
	{
		struct profile *p = profile__new();
		struct sample_filter f = { 0 };
		struct thread_stat *t;
		struct hot_opts o = { 0 };
		struct hot_result r;
		uint32_t root = test_loc(p, "/bin/app", "main", NULL, 1000), g[200];
		char name[16];
		size_t nt;

		for (uint32_t i = 0; i < 200; i++) {
			snprintf(name, sizeof(name), "g%u", 199 - i);
			g[i] = test_loc(p, "/bin/app", name, NULL, i + 1);
		}
		for (uint32_t i = 0; i < 200; i++) {
			test_samples(p, 3, 3, "t", 1, (uint32_t[]){ root, g[i] }, 2);
			test_samples(p, 3, 3, "t", 1, (uint32_t[]){ root, g[(i * 7 + 3) % 13], g[i] }, 3);
		}
		assert_int_equal(thread_stats(p, &f, &t, &nt), 0);
		assert_int_equal(nt, 1);
		o.filter.tid = 3;
		assert_int_equal(hot_functions(p, &o, &r), 0);
		assert_string_equal(profile__str(p, t[0].top_func), profile__str(p, r.funcs[0].name));
		assert_int_equal(t[0].top_self, r.funcs[0].self);
		free(t);
		assert_int_equal(thread_stats(p, NULL, &t, &nt), 0); /* no filter at all */
		assert_string_equal(profile__str(p, t[0].top_func), profile__str(p, r.funcs[0].name));
		hot_result__free(&r);
		free(t);
		profile__free(p);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hot_self_total),
		cmocka_unit_test(test_hot_by_line),
		cmocka_unit_test(test_folded),
		cmocka_unit_test(test_folded_deep_stack),
		cmocka_unit_test(test_report_json_and_text),
		cmocka_unit_test(test_stack_frames_cut),
		cmocka_unit_test(test_stacks_truncated_model),
		cmocka_unit_test(test_thread_tops_random),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
