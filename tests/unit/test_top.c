// SPDX-License-Identifier: MIT
/* eprof top's pure parts: arguments, decayed aggregation, callers/callees, batch text. */
#include <math.h>

#include "test_util.h"

#include "cli/cmds.h"
#include "model/gpu_event.h"
#include "tui/top_gpu.h"
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
	assert_false(o.rec.no_python);
	{
		char *np[] = { "top", "--no-python", NULL };

		assert_int_equal(parse(&o, 2, np), 0);
		assert_true(o.rec.no_python && o.rec.all);
	}
	assert_int_equal(parse(&o, 4, a3), -EINVAL);
	assert_int_equal(parse(&o, 3, a4), -EINVAL);
	assert_int_equal(parse(&o, 3, a5), 0);
	assert_int_equal(o.sort, TOP_SORT_TOTAL);
	assert_int_equal(parse(&o, 2, a6), 1);
	assert_int_equal(parse(&o, 3, a7), -EINVAL);
	{
		char *g1[] = { "top", "--gpu", "-p", "5", NULL };
		char *g2[] = { "top", "--gpu", NULL };

		assert_int_equal(parse(&o, 4, g1), 0);
		assert_true(o.gpu && o.rec.cuda == 1 && o.rec.cuda_stack_rate == 0);
		assert_int_equal(parse(&o, 2, g2), -EINVAL); /* CUDA libraries need targets */
	}
	{
		char *c1[] = { "top", "-p", "5", "--no-children", NULL };
		char *c2[] = { "top", "--no-children", NULL };

		assert_int_equal(parse(&o, 4, c1), 0);
		assert_true(o.rec.no_children);
		assert_int_equal(parse(&o, 2, c2), -EINVAL); /* nothing listed to limit to */
	}
}

static void add_cuda(struct profile *p, const char *fn, unsigned flags, uint64_t dur)
{
	struct event e = { .kind = EVK_CUDA_API, .pid = 7, .tid = 7, .ts = 1, .dur = dur,
			   .flags = flags, .name = profile__intern(p, fn) };

	assert_int_equal(profile__add_event(p, &e), 0);
}

/* Two intervals of CUDA calls: per-kernel launches, per-function calls, time and failures. */
static void test_gpu_tables(void **state)
{
	struct profile *p = profile__new();
	struct top_gpu g;
	struct sink *out;
	const char *text, *k;

	assert_int_equal(top_gpu__init(&g), 0);
	for (int i = 0; i < 30; i++)
		add_cuda(p, "cudaLaunchKernel", CUDA_CAT_LAUNCH | CUDA_API_F_NODUR, 0);
	add_cuda(p, "cuLaunchKernel", CUDA_CAT_LAUNCH | CUDA_API_F_NESTED | CUDA_API_F_NODUR, 0);
	for (int i = 0; i < 3; i++)
		add_cuda(p, "cudaDeviceSynchronize", CUDA_CAT_SYNC | CUDA_API_F_FAILED, 100000000);
	assert_int_equal(top_gpu__update(&g, p, 0.5), 0);
	assert_int_equal(p->events.n, 0);
	assert_int_equal(g.last_launches, 30); /* the nested driver launch is no second one */
	assert_int_equal(g.last_sync_ns, 300000000);
	for (int i = 0; i < 10; i++)
		add_cuda(p, "cudaLaunchKernel", CUDA_CAT_LAUNCH, 1000);
	assert_int_equal(top_gpu__update(&g, p, 1.0), 0);
	assert_int_equal(g.last_launches, 10);
	out = sink_mem();
	assert_int_equal(top_gpu__render(out, &g, p, 100, 20), 0);
	text = sink_mem_data(out, NULL);
	assert_non_null(strstr(text, "10.0 launches/s"));
	/* the unnamed kernel: 10 in the last interval, 40 in all; 60/s decayed by 7/8 plus 10/s
	 * by 1/8 */
	k = strstr(text, "Kernel\n");
	assert_non_null(k);
	assert_non_null(strstr(k, "      10.0         10       53.8         40  [unknown kernel]"));
	assert_non_null(strstr(text, "cudaLaunchKernel"));
	/* the syncs had no call in the last interval but still show while their rate decays */
	assert_non_null(strstr(text, "cudaDeviceSynchronize"));
	assert_int_equal(sink_close(out), 0);
	top_gpu__free(&g);
	profile__free(p);
}

/* top --gpu with CUPTI records (record -p injects the collector): GPU time per kernel. */
static void test_gpu_time_table(void **state)
{
	struct profile *p = profile__new();
	struct top_gpu g;
	struct sink *out;
	const char *text, *t;

	assert_int_equal(top_gpu__init(&g), 0);
	for (int i = 0; i < 40; i++) {
		struct event e = {.kind = EVK_GPU_KERNEL, .pid = 7, .ts = 10 + i,
				  .dur = i < 30 ? 20000 : 100000,
				  .name = profile__intern(p, i < 30 ? "small_k" : "big_k")};

		assert_int_equal(profile__add_event(p, &e), 0);
	}
	assert_int_equal(top_gpu__update(&g, p, 0.5), 0);
	assert_true(g.have_gpu);
	assert_int_equal(g.last_gpu_ns, 30 * 20000 + 10 * 100000);
	out = sink_mem();
	assert_int_equal(top_gpu__render(out, &g, p, 100, 30), 0);
	text = sink_mem_data(out, NULL);
	/* 1.6 ms of kernels in 0.5 s: 0.32%; big_k first (most GPU time), 100 us each */
	assert_non_null(strstr(text, "kernels ran 0.3% of the interval"));
	t = strstr(text, "GPU kernel time (CUPTI)\n");
	assert_non_null(t);
	assert_non_null(strstr(t, "      0.2%      100.0         10         10  big_k\n"
				  "      0.1%       20.0         30         30  small_k\n"));
	assert_int_equal(sink_close(out), 0);
	top_gpu__free(&g);
	profile__free(p);
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

/* A job and its worker (same comm): the header and the thread view tell them by argv. */
static void test_processes_by_command(void **state)
{
	struct fixture fx;
	struct top_model m;
	struct top_view v = { .threads = true };
	struct top_header h = { .targets = "pid 7 (python3)", .uptime_s = 2, .freq = 100, .ncpus = 2 };
	struct process *job, *worker;
	struct sink *out;
	const char *text, *procs;

	fixture_init(&fx);
	job = profile__proc(fx.p, 7, true);
	job->comm = profile__intern(fx.p, "python3");
	job->ppid = 1;
	job->cmdline = profile__intern(fx.p, "/usr/bin/python3 /srv/job/train.py --epochs 3");
	worker = profile__proc(fx.p, 8, true);
	worker->comm = job->comm;
	worker->ppid = 7;
	worker->cmdline = profile__intern(fx.p, "/usr/bin/python3 -c from multiprocessing import x");
	add_samples(fx.p, fx.hot, 60);
	for (int i = 0; i < 30; i++) {
		struct sample s = { .ts = 1, .pid = 8, .tid = 9, .stack = fx.cold, .weight = 1 };

		assert_int_equal(profile__add_sample(fx.p, &s), 0);
	}
	assert_int_equal(top_model__init(&m), 0);
	assert_int_equal(top_model__update(&m, fx.p, 1.0), 0);
	out = sink_mem();
	assert_int_equal(top_render(out, &m, fx.p, &h, &v, 120, 20), 4);
	text = sink_mem_data(out, NULL);
	/* header: short names, busiest first */
	assert_non_null(strstr(text, "CPU:  python3 train.py --epochs[7] 0.60 cores  python3 -c "
				     "from[8] 0.30 cores"));
	/* the process rows: pid, ppid, CPU%, the whole command line; then the threads */
	procs = strstr(text, "Command\n");
	assert_non_null(procs);
	assert_non_null(strstr(procs, "       7        1    60.0  /usr/bin/python3 /srv/job/train.py "
				      "--epochs 3"));
	assert_non_null(strstr(procs, "       8        7    30.0  /usr/bin/python3 -c from "
				      "multiprocessing import x"));
	assert_true(strstr(procs, "TID") > strstr(procs, "multiprocessing"));
	assert_int_equal(sink_close(out), 0);
	top_model__free(&m);
	profile__free(fx.p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_args),
		cmocka_unit_test(test_processes_by_command),
		cmocka_unit_test(test_decay),
		cmocka_unit_test(test_calls_and_render),
		cmocka_unit_test(test_gpu_tables),
		cmocka_unit_test(test_gpu_time_table),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
