// SPDX-License-Identifier: MIT
/*
 * The GIL state of Python samples in the graphs: the [GIL] / [no GIL] mark at the root of a
 * sample's stack is no frame of the flamegraph, folded stacks, function table or top; it
 * becomes the colour (held share per frame) and the --gil filter.
 */
#include "test_util.h"

#include "../../flamegraph/fg_internal.h"
#include "../../flamegraph/flamegraph.h"
#include "analysis/hot.h"
#include "analysis/stacks.h"
#include "output/folded.h"
#include "tui/top_model.h"
#include "util/sink.h"

/*
 * Thread 1 (spin): 6 samples main->spin with the GIL, 2 without. Thread 2 (crunch): 4
 * samples main->crunch without it. Thread 3 (native, no marks): 3 samples main->io.
 */
static struct profile *gil_profile(void)
{
	struct profile *p = profile__new();
	uint32_t held, free_, main_, spin, crunch, io;

	assert_non_null(p);
	held = (uint32_t)profile__special(p, PY_GIL_HELD);
	free_ = (uint32_t)profile__special(p, PY_GIL_NOT_HELD);
	main_ = test_loc(p, "/usr/bin/python3", "main", NULL, 0x10);
	spin = test_loc(p, "/usr/bin/python3", "spin", NULL, 0x20);
	crunch = test_loc(p, "/usr/bin/python3", "crunch", NULL, 0x30);
	io = test_loc(p, "/usr/bin/python3", "io", NULL, 0x40);
	test_samples(p, 7, 1, "python3", 6, (uint32_t[]){ held, main_, spin }, 3);
	test_samples(p, 7, 1, "python3", 2, (uint32_t[]){ free_, main_, spin }, 3);
	test_samples(p, 7, 2, "python3", 4, (uint32_t[]){ free_, main_, crunch }, 3);
	test_samples(p, 7, 3, "python3", 3, (uint32_t[]){ main_, io }, 2);
	return p;
}

static const struct collapsed *group_of(const struct collapsed_set *c, const struct profile *p,
					const char *leaf)
{
	for (size_t i = 0; i < c->n; i++) {
		const struct frame *f[8];
		size_t n = collapsed_frames(c, p, c->v[i].node, f, 8, NULL);

		if (n && !strcmp(profile__str(p, f[n - 1]->name), leaf))
			return &c->v[i];
	}
	return NULL;
}

static void test_collapse(void **state)
{
	struct profile *p = gil_profile();
	struct collapsed_set c;
	const struct collapsed *g;
	const struct frame *f[8];

	(void)state;
	assert_int_equal(collapse_stacks(p, NULL, false, &c), 0);
	/* one group per stack: the marks no longer split spin in two */
	assert_int_equal(c.n, 3);
	g = group_of(&c, p, "spin");
	assert_non_null(g);
	assert_int_equal(g->samples, 8);
	assert_int_equal(g->gil_samples[0], 6);
	assert_int_equal(g->gil_samples[1], 2);
	assert_int_equal(g->gil_weight[0], 6000000);
	/* the root frame is main, not the mark */
	assert_int_equal(collapsed_frames(&c, p, g->node, f, 8, NULL), 2);
	assert_string_equal(profile__str(p, f[0]->name), "main");
	g = group_of(&c, p, "io");
	assert_int_equal(g->samples, 3);
	assert_int_equal(g->gil_samples[0] + g->gil_samples[1], 0);
	collapsed_set__free(&c);

	/* the filter keeps the Python samples of one state only */
	assert_int_equal(collapse_stacks_gil(p, NULL, false, GIL_HELD, &c), 0);
	assert_int_equal(c.n, 1);
	assert_int_equal(group_of(&c, p, "spin")->samples, 6);
	collapsed_set__free(&c);
	assert_int_equal(collapse_stacks_gil(p, NULL, false, GIL_NOT_HELD, &c), 0);
	assert_int_equal(c.n, 2);
	assert_int_equal(group_of(&c, p, "spin")->samples, 2);
	assert_int_equal(group_of(&c, p, "crunch")->samples, 4);
	assert_null(group_of(&c, p, "io"));
	collapsed_set__free(&c);
	profile__free(p);
}

static void test_folded_and_functions(void **state)
{
	struct profile *p = gil_profile();
	struct folded_opts fo = { .gil = GIL_ANY };
	struct hot_opts ho = { .sort = SORT_TOTAL };
	struct hot_result r;
	struct sink *s = sink_mem();
	const char *text;

	(void)state;
	assert_int_equal(folded_write(s, p, &fo), 0);
	text = sink_mem_data(s, NULL);
	assert_non_null(strstr(text, "python3;main;spin 8\n"));
	assert_non_null(strstr(text, "python3;main;crunch 4\n"));
	assert_null(strstr(text, "GIL"));
	sink_close(s);
	s = sink_mem();
	fo.gil = GIL_NOT_HELD;
	assert_int_equal(folded_write(s, p, &fo), 0);
	text = sink_mem_data(s, NULL);
	assert_non_null(strstr(text, "python3;main;spin 2\n"));
	assert_null(strstr(text, "io"));
	sink_close(s);

	/* no [GIL] row in the function table, even sorted by total */
	assert_int_equal(hot_functions(p, &ho, &r), 0);
	assert_int_equal(r.n, 4);
	assert_string_equal(profile__str(p, r.funcs[0].name), "main");
	assert_int_equal(r.funcs[0].total, 15);
	for (size_t i = 0; i < r.n; i++)
		assert_null(strstr(profile__str(p, r.funcs[i].name), "GIL"));
	hot_result__free(&r);
	profile__free(p);
}

static void test_top_skips_marks(void **state)
{
	struct profile *p = gil_profile();
	struct top_model m;

	(void)state;
	assert_int_equal(top_model__init(&m), 0);
	assert_int_equal(top_model__update(&m, p, 1.0), 0);
	assert_int_equal(m.funcs.n, 4);
	for (size_t i = 0; i < m.funcs.n; i++)
		assert_null(strstr(profile__str(p, m.funcs.v[i].name), "GIL"));
	top_model__free(&m);
	profile__free(p);
}

/* The SVG: GIL weights per frame in the data, the static picture coloured by them on request. */
static void test_svg_gil(void **state)
{
	struct wstack_frame spin[] = { { "main", 0 }, { "spin", 5 } };
	struct wstack_frame io[] = { { "main", 0 }, { "io", 0 } };
	struct wstack st[] = {
		{ .frames = spin, .n = 2, .weight = 8, .gil_held = 6, .gil_free = 2 },
		{ .frames = io, .n = 2, .weight = 4 },
	};
	struct fg_opts o = { .title = "t", .gil_colors = true };
	struct sink *s;
	const char *text, *p;
	char fill[32];

	(void)state;
	s = sink_mem();
	assert_int_equal(flamegraph_write_svg(s, st, 2, NULL), 0);
	text = sink_mem_data(s, NULL);
	/* depth, name, gap, weight, self, held, not held */
	assert_non_null(strstr(text, "\"gil\":1,\"gilColors\":0"));
	assert_non_null(strstr(text, "\"nf\":7"));
	/* weights / scale 2: the root 12 with 6 held and 2 not held */
	assert_non_null(strstr(text, "\"scale\":2"));
	assert_non_null(strstr(text, "\"frames\":[0,0,0,6,0,3,1,1,"));
	assert_non_null(strstr(text, "id=\"fg-gil\""));
	assert_non_null(strstr(text, "id=\"fg-legend-gil\" class=\"legend\" display=\"none\""));
	sink_close(s);

	s = sink_mem();
	assert_int_equal(flamegraph_write_svg(s, st, 2, &o), 0);
	text = sink_mem_data(s, NULL);
	assert_non_null(strstr(text, "class=\"eprof-fg gil\""));
	assert_non_null(strstr(text, "\"gilColors\":1"));
	snprintf(fill, sizeof(fill), "fill=\"#%06x\"", fg_gil_rgb(6, 2));
	p = strstr(text, "<title>spin (8 samples");
	assert_non_null(p);
	assert_true(!strncmp(strstr(p, "fill=\""), fill, strlen(fill)));
	snprintf(fill, sizeof(fill), "fill=\"#%06x\"", fg_gil_rgb(0, 0));
	p = strstr(text, "<title>io (4 samples");
	assert_true(!strncmp(strstr(p, "fill=\""), fill, strlen(fill)));
	sink_close(s);

	/* the colour runs from blue (not held) through sand to orange (held) */
	assert_int_equal(fg_gil_rgb(0, 5), 0x4292d6);
	assert_int_equal(fg_gil_rgb(5, 5), 0xece2be);
	assert_int_equal(fg_gil_rgb(5, 0), 0xec7024);
	assert_int_equal(fg_gil_rgb(0, 0), 0xdadada);

	/* without GIL weights: no columns, no control */
	st[0].gil_held = st[0].gil_free = 0;
	s = sink_mem();
	assert_int_equal(flamegraph_write_svg(s, st, 2, &o), 0);
	text = sink_mem_data(s, NULL);
	assert_non_null(strstr(text, "\"nf\":5"));
	assert_null(strstr(text, "id=\"fg-gil\""));
	assert_non_null(strstr(text, "class=\"eprof-fg\""));
	sink_close(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_collapse),
		cmocka_unit_test(test_folded_and_functions),
		cmocka_unit_test(test_top_skips_marks),
		cmocka_unit_test(test_svg_gil),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
