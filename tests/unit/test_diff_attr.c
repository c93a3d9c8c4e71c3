// SPDX-License-Identifier: MIT
/* eprof diff beyond the function table: attribution, gates, regions, memory, GPU, --per. */
#include "test_util.h"

#include <math.h>

#include "analysis/diff.h"
#include "analysis/diff_gate.h"
#include "analysis/diff_kinds.h"
#include "model/gpu_event.h"

#define MS 1000000.0

struct fn {
	uint32_t main_, a, b, c, leaf, other, l[8];
};

static struct fn fns(struct profile *p)
{
	struct fn f = {test_loc(p, "/bin/app", "main", NULL, 1),
		       test_loc(p, "/bin/app", "caller_a", NULL, 2),
		       test_loc(p, "/bin/app", "caller_b", NULL, 3),
		       test_loc(p, "/bin/app", "caller_c", NULL, 4),
		       test_loc(p, "/bin/app", "leaf", NULL, 5),
		       test_loc(p, "/bin/app", "other", NULL, 6)};
	char name[16];

	for (int i = 0; i < 8; i++) {
		snprintf(name, sizeof(name), "c_leaf%d", i);
		f.l[i] = test_loc(p, "/bin/app", name, NULL, 10 + i);
	}
	return f;
}

static struct profile *new_run(double secs)
{
	struct profile *p = profile__new();
	char end[32];

	profile__set_meta(p, "start_ns", "1000000000");
	snprintf(end, sizeof(end), "%.0f", 1e9 + secs * 1e9);
	profile__set_meta(p, "end_ns", end);
	profile__set_meta(p, "sample_rate", "1000");
	return p;
}

/*
 * caller_a and caller_b both spend their time in leaf (1.2 s each); other runs 0.6 s.
 * NEW: caller_a's work doubles (a_ms), other grows by other_extra ms, each of caller_c's
 * 8 leaves grows by c_extra ms.
 */
static struct profile *callers(int a_ms, int other_extra, int c_extra)
{
	struct profile *p = new_run(4);
	struct fn f = fns(p);

	test_samples(p, 1, 1, "app", a_ms, (uint32_t[]){f.main_, f.a, f.leaf}, 3);
	test_samples(p, 1, 1, "app", 1200, (uint32_t[]){f.main_, f.b, f.leaf}, 3);
	test_samples(p, 1, 1, "app", 600 + other_extra, (uint32_t[]){f.main_, f.other}, 2);
	for (int i = 0; i < 8; i++)
		test_samples(p, 1, 1, "app", 100 + c_extra, (uint32_t[]){f.main_, f.c, f.l[i]}, 3);
	return p;
}

static void attribute(struct profile *b, struct profile *n, struct diff_attr *a)
{
	assert_int_equal(diff_attribute(b, n, (double[]){1, 1}, 5, 0.8, 10, a), 0);
}

static void test_attr_caller_doubles(void **state)
{
	struct profile *b = callers(1200, 0, 0), *n = callers(2400, 0, 0);
	struct diff_attr a;

	attribute(b, n, &a);
	/* exact: 1200 more samples of 1 ms, all of it under caller_a */
	assert_true(fabs(a.growth_s - 1.2) < 1e-9);
	assert_int_equal(a.n, 1);
	assert_string_equal(a.paths[0].path, "main;caller_a;leaf");
	assert_true(fabs(a.paths[0].before_s - 1.2) < 1e-9);
	assert_true(fabs(a.paths[0].after_s - 2.4) < 1e-9);
	assert_true(fabs(a.paths[0].delta_s - 1.2) < 1e-9);
	assert_true(fabs(a.paths[0].share - 1.0) < 1e-9);
	/* the per-path table: the same path first, caller_b's unchanged */
	assert_string_equal(a.top[0].path, "main;caller_a;leaf");
	assert_int_equal(a.ntop, 1);
	diff_attr__free(&a);
	profile__free(b);
	profile__free(n);
}

static void test_attr_two_causes_and_spread_growth(void **state)
{
	/* +1.2 s under caller_a, +0.4 s in other, +0.8 s spread over caller_c's 8 leaves */
	struct profile *b = callers(1200, 0, 0), *n = callers(2400, 400, 100);
	struct diff_attr a;

	attribute(b, n, &a);
	assert_true(fabs(a.growth_s - 2.4) < 1e-9);
	assert_int_equal(a.n, 3);
	assert_string_equal(a.paths[0].path, "main;caller_a;leaf");
	/* no 5 of caller_c's leaves explain its growth: it is blamed on caller_c */
	assert_string_equal(a.paths[1].path, "main;caller_c");
	assert_true(fabs(a.paths[1].delta_s - 0.8) < 1e-9);
	assert_string_equal(a.paths[2].path, "main;other");
	assert_true(fabs(a.paths[0].share - 0.5) < 1e-9);
	/* 2 paths reach 80%; a third that carries 17% is named too */
	assert_true(fabs(a.explained - 1.0) < 1e-9);
	diff_attr__free(&a);
	profile__free(b);
	profile__free(n);

	/* nothing grew: no path */
	b = callers(1200, 0, 0);
	n = callers(600, 0, 0);
	attribute(b, n, &a);
	assert_int_equal(a.n, 0);
	assert_true(a.growth_s == 0);
	diff_attr__free(&a);
	profile__free(b);
	profile__free(n);
}

static void test_diff_absolute_sort_and_per(void **state)
{
	struct profile *b = callers(1200, 0, 0), *n = callers(2400, 0, 0);
	struct diff_result r;
	struct event e = {.kind = EVK_REGION, .pid = 1, .tid = 1, .dur = 1000};

	/* 2 steps in BASE, 4 in NEW: per step, caller_a's time stays 0.6 s */
	e.name = profile__intern(b, "step");
	for (int i = 0; i < 2; i++, e.ts += 2000)
		assert_int_equal(profile__add_event(b, &e), 0);
	e.name = profile__intern(n, "step");
	for (int i = 0; i < 4; i++, e.ts += 2000)
		assert_int_equal(profile__add_event(n, &e), 0);

	assert_int_equal(diff_profiles(b, n, &(struct diff_opts){.fail_above = INFINITY}, &r), 0);
	/* by the change of inclusive seconds: main and caller_a (+1.2 s), then leaf */
	assert_string_equal(r.funcs[0].name, "caller_a");
	assert_string_equal(r.funcs[1].name, "leaf");
	assert_string_equal(r.funcs[2].name, "main");
	assert_true(fabs(diff_func_s(&r, &r.funcs[0], DIFF_BASE, true) - 1.2) < 1e-9);
	assert_true(fabs(diff_func_s(&r, &r.funcs[0], DIFF_NEW, true) - 2.4) < 1e-9);
	assert_true(fabs(diff_func_s(&r, &r.funcs[0], DIFF_NEW, false)) < 1e-9);
	diff_result__free(&r);

	assert_int_equal(
	    diff_profiles(
		b, n,
		&(struct diff_opts){.fail_above = INFINITY, .sort = DIFF_SORT_SELF, .per = "step"},
		&r),
	    0);
	assert_int_equal(r.run[0].per_count, 2);
	assert_int_equal(r.run[1].per_count, 4);
	/* leaf: 2.4 s / 2 -> 3.6 s / 4 per step */
	assert_string_equal(r.funcs[0].name, "leaf");
	assert_true(fabs(diff_func_s(&r, &r.funcs[0], DIFF_BASE, false) - 1.2) < 1e-9);
	assert_true(fabs(diff_func_s(&r, &r.funcs[0], DIFF_NEW, false) - 0.9) < 1e-9);
	diff_result__free(&r);
	assert_int_equal(
	    diff_profiles(b, n, &(struct diff_opts){.fail_above = INFINITY, .per = "nope"}, &r),
	    -ENOENT);
	profile__free(b);
	profile__free(n);
}

/* --- gates ----------------------------------------------------------------------------------- */

static void test_gate_parse(void **state)
{
	struct diff_gate g;
	char err[1024];

	assert_int_equal(diff_gate_parse("region:train_step.p99>+10%", &g, err, sizeof(err)), 0);
	assert_string_equal(g.key, "region");
	assert_string_equal(g.name, "train_step");
	assert_string_equal(g.field, "p99");
	assert_true(g.op == '>' && g.thr == GATE_REL && g.threshold == 10 && !g.sampled);
	assert_int_equal(diff_gate_parse("memory.peak>+64MiB", &g, err, sizeof(err)), 0);
	assert_true(g.thr == GATE_ABS && g.threshold == 64.0 * 1048576 &&
		    g.unit == GATE_UNIT_BYTES);
	assert_int_equal(diff_gate_parse("gpu.idle>+5pt", &g, err, sizeof(err)), 0);
	assert_true(g.thr == GATE_PT && g.threshold == 5);
	assert_int_equal(diff_gate_parse("function:parse_line.total>+20%", &g, err, sizeof(err)),
			 0);
	assert_true(g.sampled && !strcmp(g.name, "parse_line") && !strcmp(g.field, "total"));
	assert_int_equal(diff_gate_parse("wall>+5%", &g, err, sizeof(err)), 0);
	assert_int_equal(diff_gate_parse("cpu<-250ms", &g, err, sizeof(err)), 0);
	assert_true(g.op == '<' && g.threshold == -250e6 && g.sampled);
	/* names with dots and angle brackets: the last dot, the last operator */
	assert_int_equal(
	    diff_gate_parse("function:std::vector<int>::at.self>+1%", &g, err, sizeof(err)), 0);
	assert_string_equal(g.name, "std::vector<int>::at");
	assert_int_equal(diff_gate_parse("kernel:Trainer.step.mean>+1ms", &g, err, sizeof(err)), 0);
	assert_string_equal(g.name, "Trainer.step");
	assert_true(g.threshold == 1e6);

	/* typos: one line naming the accepted keys */
	assert_int_equal(diff_gate_parse("regoin:x.p99>+10%", &g, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "unknown key"));
	assert_non_null(strstr(err, "accepted: wall, cpu, function:NAME.{self,total}"));
	assert_null(strchr(err, '\n'));
	assert_int_equal(diff_gate_parse("region:x.p98>+10%", &g, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "unknown field"));
	assert_int_equal(diff_gate_parse("memory.peak>+64", &g, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "needs a unit"));
	assert_int_equal(diff_gate_parse("wall>+5pt", &g, err, sizeof(err)), -EINVAL);
	assert_int_equal(diff_gate_parse("wall>+5MiB", &g, err, sizeof(err)), -EINVAL);
	assert_int_equal(diff_gate_parse("wall=5%", &g, err, sizeof(err)), -EINVAL);
	assert_int_equal(diff_gate_parse("wall>+5%%", &g, err, sizeof(err)), -EINVAL);
	assert_int_equal(diff_gate_parse("region.p99>+5%", &g, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "needs a name"));
	assert_int_equal(diff_gate_parse("function:f>+5%", &g, err, sizeof(err)), -EINVAL);
	assert_int_equal(diff_gate_parse(">+5%", &g, err, sizeof(err)), -EINVAL);
}

static int gate(struct profile *b, struct profile *n, const char *expr, struct diff_gate *g)
{
	struct diff_result r;
	struct diff_kinds k;
	char err[512];
	int rc;

	assert_int_equal(diff_profiles(b, n, &(struct diff_opts){.fail_above = INFINITY}, &r), 0);
	assert_int_equal(diff_kinds(b, n, &r, &k), 0);
	assert_int_equal(diff_gate_parse(expr, g, err, sizeof(err)), 0);
	rc = diff_gate_eval(g, &r, &k, err, sizeof(err));
	diff_kinds__free(&k);
	diff_result__free(&r);
	return rc;
}

static uint64_t rng = 12345;

static double rnd01(void)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (rng >> 11) * (1.0 / 9007199254740992.0);
}

/* n samples drawn from one program: 50% leaf under caller_a, 30% caller_b, 20% other. */
static struct profile *draw(int n)
{
	struct profile *p = new_run(2);
	struct fn f = fns(p);
	int k[3] = {0};

	for (int i = 0; i < n; i++) {
		double u = rnd01();

		k[u < 0.5 ? 0 : u < 0.8 ? 1 : 2]++;
	}
	test_samples(p, 1, 1, "app", k[0], (uint32_t[]){f.main_, f.a, f.leaf}, 3);
	test_samples(p, 1, 1, "app", k[1], (uint32_t[]){f.main_, f.b, f.leaf}, 3);
	test_samples(p, 1, 1, "app", k[2], (uint32_t[]){f.main_, f.other}, 2);
	return p;
}

static void test_gate_identical_runs_never_fire(void **state)
{
	static const char *const gates[] = {
	    "function:caller_a.total>+2%",
	    "function:caller_b.self>+0%",
	    "function:other.total>+1%",
	    "function:leaf.self>+1%",
	    "cpu>+1%",
	    "wall>+1%",
	    "thread:app.cpu>+1%",
	};
	struct diff_gate g;
	int moved = 0;

	/* 20 pairs of runs of one program (2000 samples each: their counts differ by noise) */
	for (int rep = 0; rep < 20; rep++) {
		struct profile *b = draw(2000), *n = draw(2000 + (int)(rnd01() * 100) - 50);

		for (size_t i = 0; i < sizeof(gates) / sizeof(gates[0]); i++) {
			assert_int_equal(gate(b, n, gates[i], &g), 0);
			assert_false(g.failed);
			moved += g.change > 1; /* the noise is there: only z stops it */
		}
		profile__free(b);
		profile__free(n);
	}
	assert_true(moved > 10);
}

static void test_gate_function_regression_fires(void **state)
{
	struct profile *b = callers(1200, 0, 0), *n = callers(2400, 0, 0);
	struct diff_gate g;

	assert_int_equal(gate(b, n, "function:caller_a.total>+20%", &g), 0);
	assert_true(g.failed && g.z > 3);
	assert_true(fabs(g.before - 1.2e9) < 1 && fabs(g.after - 2.4e9) < 1);
	assert_int_equal(gate(b, n, "function:caller_b.total>+20%", &g), 0);
	assert_false(g.failed);
	assert_int_equal(gate(b, n, "function:caller_a.total>+150%", &g), 0);
	assert_false(g.failed);
	assert_int_equal(gate(b, n, "cpu>+1s", &g), 0);
	assert_true(g.failed);
	assert_int_equal(gate(b, n, "function:nope.total>+20%", &g), -ENOENT);
	assert_int_equal(gate(b, n, "memory.peak>+1MiB", &g), -ENOENT);
	profile__free(b);
	profile__free(n);
}

/* --- regions, memory, GPU ------------------------------------------------------------------- */

static void add_steps(struct profile *p, int n, double ms, uint64_t *ts)
{
	struct event e = {.kind = EVK_REGION, .pid = 1, .tid = 1, .dur = (uint64_t)(ms * MS)};

	e.name = profile__intern(p, "train_step");
	for (int i = 0; i < n; i++) {
		e.ts = *ts;
		*ts += e.dur + 1000;
		assert_int_equal(profile__add_event(p, &e), 0);
	}
}

static void test_region_p99_regresses_mean_does_not(void **state)
{
	struct profile *b = callers(1200, 0, 0), *n = callers(1200, 0, 0);
	uint64_t tb = 2000000000, tn = 2000000000;
	struct diff_gate g;

	add_steps(b, 100, 10, &tb);
	/* NEW: most steps a little faster, 3 of 100 stall to 30 ms */
	add_steps(n, 97, 9.5, &tn);
	add_steps(n, 3, 30, &tn);
	assert_int_equal(gate(b, n, "region:train_step.p99>+10%", &g), 0);
	assert_true(g.failed);
	assert_true(fabs(g.before - 10 * MS) < 1 && fabs(g.after - 30 * MS) < 1);
	assert_int_equal(gate(b, n, "region:train_step.mean>+10%", &g), 0);
	assert_false(g.failed);
	assert_true(fabs(g.after - 10.115 * MS) < 1);
	assert_int_equal(gate(b, n, "region:train_step.p50>+0%", &g), 0);
	assert_false(g.failed);
	assert_int_equal(gate(b, n, "region:train_step.count>+0", &g), 0);
	assert_false(g.failed);
	assert_int_equal(gate(b, n, "region:nope.p99>+10%", &g), -ENOENT);
	profile__free(b);
	profile__free(n);
}

static void mem_ev(struct profile *p, uint16_t kind, uint64_t ts, uint64_t addr, uint64_t size,
		   uint32_t stack)
{
	struct event e = {.ts = ts,
			  .pid = 1,
			  .tid = 1,
			  .kind = kind,
			  .a = addr,
			  .b = size,
			  .c = kind == EVK_ALLOC ? size : 0,
			  .stack = stack};

	assert_int_equal(profile__add_event(p, &e), 0);
}

/* 1 MiB allocated and freed 10 times; NEW also holds `extra` bytes from one more stack. */
static struct profile *mem_run(uint64_t extra)
{
	struct profile *p = callers(1200, 0, 0);
	struct fn f = fns(p);
	uint32_t s1 = profile__stack(p, (uint32_t[]){f.main_, f.a}, 2);
	uint32_t s2 = profile__stack(p, (uint32_t[]){f.main_, f.other}, 2);

	profile__set_meta(p, "mem_sample_bytes", "1");
	for (int i = 0; i < 10; i++) {
		mem_ev(p, EVK_ALLOC, 1000000000 + i * 1000, 0x1000, 1 << 20, s1);
		mem_ev(p, EVK_FREE, 1000000000 + i * 1000 + 500, 0x1000, 1 << 20, 0);
	}
	if (extra) {
		mem_ev(p, EVK_ALLOC, 1000000000 + 100, 0x900000, extra, s2);
		mem_ev(p, EVK_FREE, 1000000000 + 20000, 0x900000, extra, 0);
	}
	return p;
}

static void test_memory_peak_grows_known_amount(void **state)
{
	struct profile *b = mem_run(0), *n = mem_run(64ull << 20);
	struct diff_result r;
	struct diff_kinds k;
	struct diff_gate g;
	const struct diff_row *row;

	assert_int_equal(diff_profiles(b, n, &(struct diff_opts){.fail_above = INFINITY}, &r), 0);
	assert_int_equal(diff_kinds(b, n, &r, &k), 0);
	assert_true(k.mem[0] && k.mem[1]);
	assert_int_equal(k.mem_peak[0], 1 << 20);
	assert_int_equal(k.mem_peak[1] - k.mem_peak[0], 64ull << 20);
	assert_int_equal(k.mem_leaked[1], 0);
	/* allocated by stack: the new stack first (largest change) */
	row = &k.mem_stacks.v[0];
	assert_string_equal(row->key, "main;other");
	assert_false(row->present[0]);
	assert_true(row->v[1] == 64.0 * 1048576);
	diff_kinds__free(&k);
	diff_result__free(&r);
	assert_int_equal(gate(b, n, "memory.peak>+63MiB", &g), 0);
	assert_true(g.failed);
	assert_int_equal(gate(b, n, "memory.peak>+65MiB", &g), 0);
	assert_false(g.failed);
	assert_int_equal(gate(b, n, "memory.leaked>+0B", &g), 0);
	assert_false(g.failed);
	profile__free(b);
	profile__free(n);
}

static void add_kernel(struct profile *p, const char *name, uint64_t ts, uint64_t dur)
{
	struct event e = {.kind = EVK_GPU_KERNEL,
			  .ts = ts,
			  .dur = dur,
			  .pid = 1,
			  .name = profile__intern(p, name),
			  .a = 1};

	assert_int_equal(profile__add_event(p, &e), 0);
}

/* 10 runs of gemm (dur_us each) and 10 of relu (50 us), one every ms. */
static struct profile *gpu_run(uint64_t gemm_us)
{
	struct profile *p = callers(1200, 0, 0);

	for (int i = 0; i < 10; i++) {
		add_kernel(p, "gemm", 1000000000 + i * 1000000ull, gemm_us * 1000);
		add_kernel(p, "relu", 1000000000 + i * 1000000ull + 500000, 50000);
	}
	return p;
}

static void test_gpu_kernel_twice_slower(void **state)
{
	struct profile *b = gpu_run(200), *n = gpu_run(400);
	struct diff_result r;
	struct diff_kinds k;
	struct diff_gate g;

	assert_int_equal(diff_profiles(b, n, &(struct diff_opts){.fail_above = INFINITY}, &r), 0);
	assert_int_equal(diff_kinds(b, n, &r, &k), 0);
	assert_true(k.gpu_activity[0] && k.gpu_activity[1]);
	assert_string_equal(k.kernels.v[0].key, "gemm");
	assert_true(k.kernels.v[0].v[0] == 2e6 && k.kernels.v[0].v[1] == 4e6);
	assert_true(k.kernels.v[0].n[0] == 10 && k.kernels.v[0].n[1] == 10);
	assert_true(k.kernel_ns[1] - k.kernel_ns[0] == 2e6);
	assert_true(k.idle_pct[1] < k.idle_pct[0]); /* busier */
	diff_kinds__free(&k);
	diff_result__free(&r);
	assert_int_equal(gate(b, n, "kernel:gemm.mean>+50%", &g), 0);
	assert_true(g.failed && fabs(g.change - 100) < 1e-9);
	assert_int_equal(gate(b, n, "kernel:relu.mean>+1%", &g), 0);
	assert_false(g.failed);
	assert_int_equal(gate(b, n, "gpu.idle<-0pt", &g), 0);
	assert_true(g.failed);
	assert_int_equal(gate(b, n, "gpu.idle>+0pt", &g), 0);
	assert_false(g.failed);
	profile__free(b);
	profile__free(n);
}

/* One program built by two compilers: its binary's name and GCC's clone suffixes differ. */
static struct profile *build_of(const char *exe, const char *work_fn, int n, bool split)
{
	struct profile *p = new_run(1);
	char path[64], cmd[64];
	uint32_t m, w, part;

	snprintf(path, sizeof(path), "/tmp/%s", exe);
	snprintf(cmd, sizeof(cmd), "./%s 3", exe);
	profile__set_meta(p, "command", cmd);
	m = test_loc(p, path, "main", NULL, 1);
	w = test_loc(p, path, work_fn, NULL, 2);
	test_samples(p, 1, 1, exe, n, (uint32_t[]){m, w}, 2);
	if (split) { /* f and f.part.0 in one run: two functions */
		part = test_loc(p, path, "work.part.0", NULL, 3);
		test_samples(p, 1, 1, exe, 10, (uint32_t[]){m, w, part}, 3);
	}
	return p;
}

static void test_two_builds_match(void **state)
{
	struct profile *b = build_of("app-gcc12", "work.constprop.0", 100, false);
	struct profile *n = build_of("app-gcc13", "work", 300, true);
	struct diff_result r;
	struct diff_kinds k;
	struct diff_attr a;
	char prog[64];
	bool seen_work = false, seen_part = false;

	diff_program(b, prog, sizeof(prog));
	assert_string_equal(prog, "app-gcc12");
	assert_int_equal(diff_name_len("work.constprop.0"), 4);
	assert_int_equal(diff_name_len("work.part.0"), 4);
	assert_int_equal(diff_name_len(".part.0"), 7);
	assert_int_equal(diff_name_len("work"), 4);
	assert_int_equal(diff_profiles(b, n, &(struct diff_opts){.fail_above = INFINITY}, &r), 0);
	for (size_t i = 0; i < r.n; i++) {
		const struct diff_func *f = &r.funcs[i];

		/* main is one row: BASE's module app-gcc12 is read as app-gcc13 */
		if (!strcmp(f->name, "main"))
			assert_true(f->total[0] == 100 && f->total[1] == 310 &&
				    !strcmp(f->module, "app-gcc13"));
		if (!strcmp(f->name, "work")) { /* work.constprop.0 in BASE */
			assert_true(f->self[0] == 100 && f->self[1] == 300);
			seen_work = true;
		}
		if (!strcmp(f->name, "work.part.0")) { /* NEW only: not merged into work */
			assert_true(f->total[0] == 0 && f->total[1] == 10);
			seen_part = true;
		}
		assert_string_not_equal(f->name, "work.constprop.0");
	}
	assert_true(seen_work && seen_part);
	assert_int_equal(diff_kinds(b, n, &r, &k), 0);
	assert_int_equal(k.threads.n, 1); /* the main threads app-gcc12 and app-gcc13 */
	diff_kinds__free(&k);
	diff_result__free(&r);
	attribute(b, n, &a);
	assert_int_equal(a.n, 1);
	assert_string_equal(a.paths[0].path, "main;work");
	assert_true(fabs(a.paths[0].before_s - 0.1) < 1e-9 &&
		    fabs(a.paths[0].after_s - 0.31) < 1e-9);
	diff_attr__free(&a);
	profile__free(b);
	profile__free(n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_attr_caller_doubles),
	    cmocka_unit_test(test_attr_two_causes_and_spread_growth),
	    cmocka_unit_test(test_diff_absolute_sort_and_per),
	    cmocka_unit_test(test_gate_parse),
	    cmocka_unit_test(test_gate_identical_runs_never_fire),
	    cmocka_unit_test(test_gate_function_regression_fires),
	    cmocka_unit_test(test_region_p99_regresses_mean_does_not),
	    cmocka_unit_test(test_memory_peak_grows_known_amount),
	    cmocka_unit_test(test_gpu_kernel_twice_slower),
	    cmocka_unit_test(test_two_builds_match),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
