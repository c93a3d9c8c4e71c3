// SPDX-License-Identifier: MIT
#include "test_util.h"

#include <math.h>

#include "analysis/diff.h"
#include "cli/cmds.h"

/* main;a x na and main;b x nb samples of 1 ms, over `secs` seconds of wall time. */
static struct profile *run(int na, int nb, int nc, const char *secs)
{
	struct profile *p = profile__new();
	uint32_t m = test_loc(p, "/bin/app", "main", NULL, 1), a = test_loc(p, "/bin/app", "a", NULL, 2),
		 b = test_loc(p, "/bin/app", "b", NULL, 3), c = test_loc(p, "/bin/app", "c", NULL, 4);
	char end[32];

	test_samples(p, 1, 1, "app", na, (uint32_t[]){ m, a }, 2);
	test_samples(p, 1, 1, "app", nb, (uint32_t[]){ m, b }, 2);
	if (nc)
		test_samples(p, 1, 1, "app", nc, (uint32_t[]){ m, c }, 2);
	profile__set_meta(p, "start_ns", "1000000000");
	snprintf(end, sizeof(end), "%.0f", 1e9 + atof(secs) * 1e9);
	profile__set_meta(p, "end_ns", end);
	profile__set_meta(p, "sample_rate", "1000");
	return p;
}

static const struct diff_func *find(const struct diff_result *r, const char *name)
{
	for (size_t i = 0; i < r->n; i++)
		if (!strcmp(r->funcs[i].name, name))
			return &r->funcs[i];
	fail_msg("no %s in the diff", name);
	return NULL;
}

static void test_diff_normalised(void **state)
{
	/* NEW: b went from half of the samples to 3/4; the run took twice as long */
	struct profile *base = run(500, 500, 0, "1"), *new = run(500, 1500, 40, "2");
	struct diff_result r;
	const struct diff_func *a, *b, *c;

	assert_int_equal(diff_profiles(base, new,
				       &(struct diff_opts){ .fail_above = 10, .sort = DIFF_SORT_SHARE },
				       &r),
			 0);
	assert_int_equal(r.run[DIFF_BASE].samples, 1000);
	assert_int_equal(r.run[DIFF_NEW].samples, 2040);
	assert_true(fabs(r.speedup_wall - 0.5) < 1e-9);
	assert_true(fabs(r.speedup_cpu - 1000.0 / 2040) < 1e-9);
	assert_true(r.total_regressed); /* twice the wall time */
	b = find(&r, "b");
	a = find(&r, "a");
	c = find(&r, "c");
	assert_true(fabs(b->self_pct[0] - 50) < 1e-9);
	assert_true(fabs(b->self_pct[1] - 1500.0 / 20.4) < 1e-9);
	/* per second of run time: 500 ms/s before, 750 ms/s after */
	assert_true(fabs(b->self_rate[0] - 500) < 1e-6);
	assert_true(fabs(b->self_rate[1] - 750) < 1e-6);
	assert_true(b->regressed && b->z > 3);
	assert_false(a->regressed);
	assert_true(a->change_pct < 0);
	/* c is new and above the 1% noise floor: a regression of any size */
	assert_true(isinf(c->change_pct) && c->regressed);
	assert_int_equal(r.nregressed, 2);
	/* sorted by how far the share moved: a lost 25.5 points, b gained 23.5 */
	assert_string_equal(r.funcs[0].name, "a");
	assert_string_equal(r.funcs[1].name, "b");
	diff_result__free(&r);
	profile__free(base);
	profile__free(new);
}

static void test_diff_noise_is_not_a_regression(void **state)
{
	/* 20 -> 23 samples of 100: +15% share, but within sampling noise */
	struct profile *base = run(80, 20, 0, "1"), *new = run(77, 23, 0, "1");
	struct diff_result r;

	assert_int_equal(diff_profiles(base, new, &(struct diff_opts){ .fail_above = 10 }, &r), 0);
	assert_true(find(&r, "b")->change_pct > 10);
	assert_false(find(&r, "b")->regressed);
	assert_false(r.total_regressed);
	assert_int_equal(r.nregressed, 0);
	diff_result__free(&r);
	profile__free(base);
	profile__free(new);
}

static void test_diff_flamegraph_scaled(void **state)
{
	struct profile *base = run(100, 100, 0, "1"), *new = run(100, 300, 0, "2");
	struct diff_stacks d;
	int found = 0;

	assert_int_equal(diff_fg_stacks(base, new, &d), 0);
	assert_int_equal(d.base_total, 200);
	assert_int_equal(d.new_total, 400);
	for (size_t i = 0; i < d.n; i++) {
		const struct wstack *s = &d.st[i];

		assert_int_equal(s->n, 3);
		assert_string_equal(s->frames[0].name, "app");
		assert_string_equal(s->frames[1].name, "main");
		/* BASE scaled to NEW's 400 samples: 100 of 200 -> 200 */
		if (!strcmp(s->frames[2].name, "a")) {
			assert_int_equal(s->weight, 100);
			assert_int_equal(s->base, 200);
			found++;
		} else if (!strcmp(s->frames[2].name, "b")) {
			assert_int_equal(s->weight, 300);
			assert_int_equal(s->base, 200);
			found++;
		}
	}
	assert_int_equal(found, 2);
	diff_stacks__free(&d);
	profile__free(base);
	profile__free(new);
}

static void test_diff_args(void **state)
{
	struct diff_cli o;

	assert_int_equal(parse_diff_args(3, (char *[]){ "diff", "a", "b", NULL }, &o), 0);
	assert_string_equal(o.base, "a");
	assert_string_equal(o.new, "b");
	assert_string_equal(o.output, "-");
	assert_false(o.has_fail);
	assert_true(o.min_share == 1.0);
	assert_int_equal(parse_diff_args(8, (char *[]){ "diff", "--flamegraph", "-o", "d.svg",
							 "--fail-above", "5%", "a", "b", NULL },
					 &o),
			 0);
	assert_true(o.flamegraph && o.has_fail && o.fail_above == 5);
	assert_string_equal(o.flamegraph_out, "d.svg");
	assert_int_equal(parse_diff_args(3, (char *[]){ "diff", "--flamegraph", "a", "b", NULL }, &o),
			 -EINVAL);
	assert_int_equal(parse_diff_args(4, (char *[]){ "diff", "--flamegraph", "a", "b", NULL }, &o),
			 0);
	assert_string_equal(o.flamegraph_out, "diff.svg");
	assert_int_equal(parse_diff_args(2, (char *[]){ "diff", "a", NULL }, &o), -EINVAL);
	assert_int_equal(parse_diff_args(5, (char *[]){ "diff", "--fail-above", "x", "a", "b", NULL },
					 &o),
			 -EINVAL);
	assert_int_equal(parse_diff_args(5, (char *[]){ "diff", "--fail-above", "-3", "a", "b", NULL },
					 &o),
			 -EINVAL);
	assert_int_equal(parse_diff_args(2, (char *[]){ "diff", "--help", NULL }, &o), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_diff_normalised),
		cmocka_unit_test(test_diff_noise_is_not_a_regression),
		cmocka_unit_test(test_diff_flamegraph_scaled),
		cmocka_unit_test(test_diff_args),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
