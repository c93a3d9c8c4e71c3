// SPDX-License-Identifier: MIT
/* eprof top's pure parts: arguments, decayed aggregation, callers/callees, batch text. */
#include <math.h>

#include "test_util.h"

#include "cmds.h"
#include "tui/top_model.h"

static int parse(struct top_cli *o, int argc, char **argv)
{
	return parse_top_args(argc, argv, o);
}

static void test_args(void **state)
{
	struct top_cli o;
	char *a1[] = { "top", "-p", "12,34", "-F", "499", "-d", "0.5", "--batch", "-n", "3", NULL };
	char *a2[] = { "top", NULL };
	char *a3[] = { "top", "-p", "1", "-a", NULL };
	char *a4[] = { "top", "-d", "0", NULL };
	char *a5[] = { "top", "--sort", "total", NULL };
	char *a6[] = { "top", "-h", NULL };
	char *a7[] = { "top", "-p", "x", NULL };

	assert_int_equal(parse(&o, 10, a1), 0);
	assert_int_equal(o.rec.npids, 2);
	assert_int_equal(o.rec.pids[1], 34);
	assert_int_equal(o.rec.freq, 499);
	assert_true(o.delay == 0.5 && o.batch && o.iterations == 3 && o.rec.live);
	assert_int_equal(parse(&o, 1, a2), 0);
	assert_true(o.rec.all && o.delay == 1.0 && o.rec.freq == 99);
	assert_int_equal(parse(&o, 4, a3), -EINVAL);
	assert_int_equal(parse(&o, 3, a4), -EINVAL);
	assert_int_equal(parse(&o, 3, a5), 0);
	assert_int_equal(o.sort, TOP_SORT_TOTAL);
	assert_int_equal(parse(&o, 2, a6), 1);
	assert_int_equal(parse(&o, 3, a7), -EINVAL);
}

/* A profile with stacks main->hot (leaf) and main->cold (leaf), symbolized. */
struct fixture {
	struct profile *p;
	uint32_t hot, cold; /* leaf nodes */
};

static uint32_t loc_named(struct profile *p, uint32_t obj, uint64_t addr, const char *name)
{
	int64_t loc = profile__location(p, obj, addr);
	struct frame *f = vec_push(p->frames);

	assert_true(loc > 0 && f);
	f->name = profile__intern(p, name);
	f->module = profile__intern(p, "prog");
	p->locations.v[loc].frame_first = p->frames.n - 1;
	p->locations.v[loc].frame_n = 1;
	return loc;
}

static void fixture_init(struct fixture *fx)
{
	struct profile *p = profile__new();
	int64_t obj;
	uint32_t s1[2], s2[2];

	assert_non_null(p);
	obj = profile__object(p, OBJ_ELF, "/bin/prog", NULL, 0);
	assert_true(obj >= 0);
	s1[0] = s2[0] = loc_named(p, obj, 0x10, "main");
	s1[1] = loc_named(p, obj, 0x20, "hot");
	s2[1] = loc_named(p, obj, 0x30, "cold");
	fx->hot = profile__stack(p, s1, 2);
	fx->cold = profile__stack(p, s2, 2);
	fx->p = p;
}

static void add_samples(struct profile *p, uint32_t stack, int n)
{
	for (int i = 0; i < n; i++) {
		struct sample s = { .ts = 1, .pid = 7, .tid = 7, .stack = stack, .weight = 1 };

		assert_int_equal(profile__add_sample(p, &s), 0);
	}
}

static const struct top_func *find(const struct top_model *m, const struct profile *p,
				   const char *name)
{
	for (size_t i = 0; i < m->funcs.n; i++)
		if (!strcmp(profile__str(p, m->funcs.v[i].name), name))
			return &m->funcs.v[i];
	return NULL;
}

static void test_decay(void **state)
{
	struct fixture fx;
	struct top_model m;
	struct top_view v = { 0 };
	uint32_t rows[8];

	fixture_init(&fx);
	assert_int_equal(top_model__init(&m), 0);
	add_samples(fx.p, fx.hot, 80);
	add_samples(fx.p, fx.cold, 20);
	assert_int_equal(top_model__update(&m, fx.p, 1.0), 0);
	assert_int_equal(fx.p->samples.n, 0);
	assert_true(find(&m, fx.p, "hot")->self == 80 && find(&m, fx.p, "main")->total == 100);
	/* Next interval only cold: hot decays by 7/8, cold leads the last interval. */
	add_samples(fx.p, fx.cold, 100);
	assert_int_equal(top_model__update(&m, fx.p, 1.0), 0);
	assert_true(fabs(find(&m, fx.p, "hot")->self - 70.0) < 1e-9);
	assert_true(fabs(find(&m, fx.p, "cold")->self - 117.5) < 1e-9);
	assert_int_equal(find(&m, fx.p, "hot")->last_self, 0);
	assert_int_equal(find(&m, fx.p, "cold")->last_self, 100);
	assert_int_equal(m.last_samples, 100);
	assert_int_equal(top_model__rows(&m, fx.p, &v, rows, 8), 3);
	assert_string_equal(profile__str(fx.p, m.funcs.v[rows[0]].name), "cold");
	v.sort = TOP_SORT_TOTAL;
	top_model__rows(&m, fx.p, &v, rows, 8);
	assert_string_equal(profile__str(fx.p, m.funcs.v[rows[0]].name), "main");
	v.filter = "ho";
	assert_int_equal(top_model__rows(&m, fx.p, &v, rows, 8), 1);
	assert_int_equal(m.threads.n, 1);
	assert_int_equal(m.procs.n, 1);
	top_model__free(&m);
	profile__free(fx.p);
}

static void test_calls_and_render(void **state)
{
	struct fixture fx;
	struct top_model m;
	struct top_view v = { 0 };
	struct top_header h = { .targets = "pid 7 (prog)", .uptime_s = 2, .freq = 99, .ncpus = 2 };
	struct top_edge *up, *down;
	size_t nup, ndown;
	struct sink *out;
	const char *text;
	uint64_t mi;

	fixture_init(&fx);
	assert_int_equal(top_model__init(&m), 0);
	add_samples(fx.p, fx.hot, 60);
	add_samples(fx.p, fx.cold, 40);
	assert_int_equal(top_model__update(&m, fx.p, 1.0), 0);
	assert_true(hmap__get(m.func_index, profile__intern(fx.p, "main"),
			      profile__intern(fx.p, "prog"), &mi));
	assert_int_equal(top_model__calls(&m, fx.p, mi, &up, &nup, &down, &ndown), 0);
	assert_int_equal(nup, 1);
	assert_int_equal(up[0].name, 0); /* [root] */
	assert_int_equal(ndown, 2);
	assert_string_equal(profile__str(fx.p, down[0].name), "hot");
	assert_true(down[0].w == 60);
	free(up);
	free(down);

	out = sink_mem();
	assert_int_equal(top_render(out, &m, fx.p, &h, &v, 100, 10), 4);
	text = sink_mem_data(out, NULL);
	assert_non_null(strstr(text, "eprof top - pid 7 (prog)"));
	assert_non_null(strstr(text, "samples: 100/s"));
	/* The hottest self function is the table's first row. */
	assert_non_null(strstr(text, "Function"));
	assert_non_null(strstr(strstr(text, "Function"), "\n  60.00  "));
	assert_true(strstr(text, " hot ") < strstr(text, " cold "));
	assert_int_equal(sink_close(out), 0);

	out = sink_mem();
	assert_int_equal(top_render_calls(out, &m, fx.p, mi, 100, 20), 0);
	text = sink_mem_data(out, NULL);
	assert_non_null(strstr(text, "[root]"));
	assert_non_null(strstr(text, "60.00%  hot"));
	assert_int_equal(sink_close(out), 0);
	top_model__free(&m);
	profile__free(fx.p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_args),
		cmocka_unit_test(test_decay),
		cmocka_unit_test(test_calls_and_render),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
