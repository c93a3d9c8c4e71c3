// SPDX-License-Identifier: MIT
/* Bottleneck rules on synthetic profiles: each fires above its threshold, not below. */
#include "test_util.h"

#include "analysis/findings.h"
#include "analysis/regions.h"
#include "model/offcpu_event.h"
#include "output/report_findings.h"
#include "util/sink.h"

static uint32_t loc_kind(struct profile *p, const char *module, const char *func, uint64_t addr,
			 uint8_t kind)
{
	uint32_t loc = test_loc(p, module, func, NULL, addr);

	p->frames.v[p->locations.v[loc].frame_first].kind = kind;
	return loc;
}

static const struct finding *find(const struct findings *fs, const char *id)
{
	for (size_t i = 0; i < fs->n; i++)
		if (!strcmp(fs->v[i].id, id))
			return &fs->v[i];
	return NULL;
}

static struct profile *spread(int nfuncs, int each)
{
	struct profile *p = profile__new();
	uint32_t m = test_loc(p, "/bin/app", "main", NULL, 1);

	assert_non_null(p);
	for (int i = 0; i < nfuncs; i++) {
		char name[16];

		snprintf(name, sizeof(name), "f%d", i);
		test_samples(p, 10, 10, "app", each,
			     (uint32_t[]){ m, test_loc(p, "/bin/app", name, NULL, 10 + i) }, 2);
	}
	return p;
}

static void test_quiet_profile_has_none(void **state)
{
	struct profile *p = spread(10, 10); /* 10% each: no rule's threshold */
	struct sample_filter f = { 0 };
	struct findings fs;
	struct sink *out = sink_mem();
	size_t len;

	(void)state;
	assert_int_equal(findings_analyze(p, &f, NULL, &fs), 0);
	assert_int_equal(fs.n, 0);
	findings__free(&fs);
	assert_int_equal(report_findings(out, p, &f, NULL, false), 0);
	assert_non_null(strstr(sink_mem_data(out, &len), "Findings: none above the thresholds"));
	sink_close(out);
	out = sink_mem();
	assert_int_equal(report_findings(out, p, &f, NULL, true), 0);
	assert_string_equal(sink_mem_data(out, &len), ",\n  \"findings\": []");
	sink_close(out);
	profile__free(p);
}

/* 35% memcpy, 20% allocator, 45% one function of the program's own. */
static void test_cpu_classes(void **state)
{
	struct profile *p = profile__new();
	uint32_t m = test_loc(p, "/bin/app", "main", NULL, 1);
	uint32_t cp = test_loc(p, "/lib/libc.so.6", "__memcpy_avx_unaligned_erms", NULL, 2);
	uint32_t ma = test_loc(p, "/lib/libc.so.6", "_int_malloc", NULL, 3);
	uint32_t fr = test_loc(p, "/lib/libc.so.6", "__GI___libc_free", NULL, 4);
	uint32_t work = test_loc(p, "/bin/app", "compute", NULL, 5);
	struct sample_filter f = { 0 };
	struct findings fs;
	const struct finding *x;
	struct sink *out = sink_mem();
	const char *txt;
	size_t len;

	(void)state;
	test_samples(p, 10, 10, "app", 35, (uint32_t[]){ m, work, cp }, 3);
	test_samples(p, 10, 10, "app", 15, (uint32_t[]){ m, ma }, 2);
	test_samples(p, 10, 10, "app", 5, (uint32_t[]){ m, fr }, 2);
	test_samples(p, 10, 10, "app", 45, (uint32_t[]){ m, work }, 2);
	assert_int_equal(findings_analyze(p, &f, NULL, &fs), 0);
	assert_int_equal(fs.n, 3);
	/* most severe first */
	assert_string_equal(fs.v[0].id, "memory-copies");
	assert_int_equal(fs.v[0].severity, FINDING_HIGH);
	assert_true(fs.v[0].impact > 0.349 && fs.v[0].impact < 0.351);
	assert_non_null(strstr(fs.v[0].what, "35.0% of the CPU samples copy"));
	assert_non_null(strstr(fs.v[0].what, "__memcpy_avx_unaligned_erms"));
	x = find(&fs, "allocator");
	assert_non_null(x);
	assert_int_equal(x->severity, FINDING_MEDIUM);
	assert_non_null(strstr(x->what, "20.0%"));
	assert_non_null(strstr(x->what, "_int_malloc"));
	x = find(&fs, "hot-function");
	assert_non_null(x);
	assert_int_equal(x->severity, FINDING_LOW);
	assert_non_null(strstr(x->what, "compute (app) runs 45.0%"));
	assert_ptr_equal(x, &fs.v[2]);
	/* given the caller's hot functions of the same samples, in either order (the report's
	 * --sort self or total): the same findings */
	for (int sort = SORT_SELF; sort <= SORT_TOTAL; sort++) {
		struct hot_opts ho = { .sort = sort };
		struct hot_result hr;
		struct findings again;

		assert_int_equal(hot_functions(p, &ho, &hr), 0);
		assert_int_equal(findings_analyze(p, &f, &(struct findings_pre){ .hot = &hr }, &again), 0);
		assert_int_equal(again.n, fs.n);
		for (size_t i = 0; i < fs.n; i++) {
			assert_string_equal(again.v[i].id, fs.v[i].id);
			assert_string_equal(again.v[i].what, fs.v[i].what);
		}
		findings__free(&again);
		hot_result__free(&hr);
	}
	findings__free(&fs);

	/* The same through the report section, filtered to another thread: nothing. */
	f.tid = 99;
	assert_int_equal(report_findings(out, p, &f, NULL, false), 0);
	txt = sink_mem_data(out, &len);
	assert_non_null(strstr(txt, "none above"));
	sink_close(out);
	f.tid = 0;
	out = sink_mem();
	assert_int_equal(report_findings(out, p, &f, NULL, true), 0);
	txt = sink_mem_data(out, &len);
	assert_non_null(strstr(txt, "{\"id\": \"memory-copies\", \"severity\": \"high\", "
				    "\"impact\": 0.3500, \"what\": \""));
	sink_close(out);
	profile__free(p);
}

/* Kernel time, mostly under page faults; then the same share under a system call. */
static void test_kernel_time(void **state)
{
	struct profile *p = profile__new();
	uint32_t m = test_loc(p, "/bin/app", "main", NULL, 1);
	uint32_t work = test_loc(p, "/bin/app", "work", NULL, 2);
	uint32_t pf = loc_kind(p, "[kernel.kallsyms]", "exc_page_fault", 3, FRAME_KERNEL);
	uint32_t mm = loc_kind(p, "[kernel.kallsyms]", "handle_mm_fault", 4, FRAME_KERNEL);
	uint32_t clr = loc_kind(p, "[kernel.kallsyms]", "clear_page_erms", 5, FRAME_KERNEL);
	uint32_t sys = loc_kind(p, "[kernel.kallsyms]", "__x64_sys_write", 6, FRAME_KERNEL);
	uint32_t cpy = loc_kind(p, "[kernel.kallsyms]", "copy_user_generic", 7, FRAME_KERNEL);
	struct sample_filter f = { 0 };
	struct findings fs;
	const struct finding *x;

	(void)state;
	test_samples(p, 10, 10, "app", 40, (uint32_t[]){ m, work, pf, mm, clr }, 5);
	test_samples(p, 10, 10, "app", 60, (uint32_t[]){ m, work }, 2);
	assert_int_equal(findings_analyze(p, &f, NULL, &fs), 0);
	x = find(&fs, "kernel-time");
	assert_non_null(x);
	assert_non_null(strstr(x->what, "40.0% of the CPU samples are in the kernel, 40.0% under "
					"page faults"));
	assert_non_null(strstr(x->advice, "MAP_POPULATE"));
	/* the hottest self function is the program's: not the kernel's */
	x = find(&fs, "hot-function");
	assert_non_null(x);
	assert_non_null(strstr(x->what, "work (app)"));
	findings__free(&fs);

	test_samples(p, 10, 10, "app", 100, (uint32_t[]){ m, sys, cpy }, 3);
	assert_int_equal(findings_analyze(p, &f, NULL, &fs), 0);
	x = find(&fs, "kernel-time");
	assert_non_null(x);
	assert_non_null(strstr(x->what, "70.0% of the CPU samples are in the kernel, the most "
					"entered from main, under __x64_sys_write"));
	assert_non_null(strstr(x->advice, "system calls"));
	findings__free(&fs);

	/* through a libc wrapper: the wrapper and the program's frame under it */
	{
		uint32_t wr = test_loc(p, "/lib/libc.so.6", "write", NULL, 8);

		test_samples(p, 10, 10, "app", 200, (uint32_t[]){ m, work, wr, cpy }, 4);
	}
	assert_int_equal(findings_analyze(p, &f, NULL, &fs), 0);
	x = find(&fs, "kernel-time");
	assert_non_null(x);
	assert_non_null(strstr(x->what, "the most entered from write in work"));
	findings__free(&fs);
	profile__free(p);
}

static void test_data_quality(void **state)
{
	struct profile *p = spread(10, 8);
	uint32_t m = test_loc(p, "/bin/app", "main", NULL, 1);
	uint32_t unk = loc_kind(p, "/opt/x/libstripped.so", "[unknown]", 50, FRAME_UNKNOWN);
	int64_t trunc = profile__special(p, "[truncated]");
	struct sample_filter f = { 0 };
	struct findings fs;
	const struct finding *x;

	(void)state;
	assert_true(trunc > 0);
	test_samples(p, 10, 10, "app", 20, (uint32_t[]){ m, unk }, 2);
	assert_int_equal(findings_analyze(p, &f, NULL, &fs), 0);
	x = find(&fs, "unknown-code");
	assert_non_null(x); /* 20 of 100 */
	assert_non_null(strstr(x->what, "20.0% of samples end in code with no name, most in "
					"/opt/x/libstripped.so"));
	assert_non_null(strstr(x->advice, "debug symbols of /opt/x/libstripped.so"));
	assert_null(find(&fs, "lost-samples"));
	assert_null(find(&fs, "truncated-stacks"));
	findings__free(&fs);

	/* unnamed code is unknown-code's, never the hot function */
	test_samples(p, 10, 10, "app", 40, (uint32_t[]){ m, unk }, 2);
	assert_int_equal(findings_analyze(p, &f, NULL, &fs), 0);
	assert_non_null(find(&fs, "unknown-code"));
	assert_null(find(&fs, "hot-function"));
	findings__free(&fs);

	/* 1 lost in 141: under 1%; 5 in 155 (with 10 more samples): over */
	p->stats[STAT_SAMPLES_LOST] = 1;
	assert_int_equal(findings_analyze(p, &f, NULL, &fs), 0);
	assert_null(find(&fs, "lost-samples"));
	findings__free(&fs);
	p->stats[STAT_SAMPLES_LOST] = 5;
	p->stats[STAT_MEM_LOST] = 3;
	p->stats[STAT_UNWIND_NO_CFI] = 9;
	test_samples(p, 10, 10, "app", 10, (uint32_t[]){ (uint32_t)trunc, m }, 2);
	assert_int_equal(findings_analyze(p, &f, NULL, &fs), 0);
	x = find(&fs, "lost-samples");
	assert_non_null(x);
	assert_non_null(strstr(x->what, "5 samples (3.2%) were lost"));
	x = find(&fs, "lost-events");
	assert_non_null(x);
	assert_non_null(strstr(x->what, "3 events"));
	x = find(&fs, "truncated-stacks");
	assert_non_null(x); /* 10 of 150 */
	assert_non_null(strstr(x->what, "6.7% of stacks stop early (no CFI 9"));
	assert_non_null(strstr(x->advice, "-fasynchronous-unwind-tables"));
	findings__free(&fs);
	profile__free(p);
}

/* Too few samples for any CPU rule: a 10-sample run is no evidence. */
static void test_few_samples(void **state)
{
	struct profile *p = spread(1, 10);
	struct sample_filter f = { 0 };
	struct findings fs;

	(void)state;
	assert_int_equal(findings_analyze(p, &f, NULL, &fs), 0);
	assert_int_equal(fs.n, 0);
	findings__free(&fs);
	profile__free(p);
}

/* Python: the innermost Python function takes its native callees' samples; the interpreter's
 * own functions are no hot-function finding; CPython's allocator gets Python advice. */
static void test_python(void **state)
{
	struct profile *p = profile__new();
	uint32_t m = test_loc(p, "/usr/bin/python3.12", "main", NULL, 1);
	uint32_t ev = test_loc(p, "/usr/lib/libpython3.12.so.1.0", "_PyEval_EvalFrameDefault",
			       NULL, 2);
	uint32_t step = loc_kind(p, "[python]", "train_step", 3, FRAME_PYTHON);
	uint32_t load = loc_kind(p, "[python]", "load", 4, FRAME_PYTHON);
	uint32_t pm = test_loc(p, "/usr/lib/libpython3.12.so.1.0", "_PyObject_Malloc", NULL, 5);
	uint32_t add = test_loc(p, "/usr/lib/libpython3.12.so.1.0", "PyLong_Add", NULL, 6);
	uint32_t nat = test_loc(p, "/opt/ext.so", "compute", NULL, 7);
	struct sample_filter f = { 0 };
	struct findings fs;
	const struct finding *x;

	(void)state;
	p->frames.v[p->locations.v[step].frame_first].file = profile__intern(p, "train.py");
	p->frames.v[p->locations.v[load].frame_first].file = profile__intern(p, "data.py");
	p->stats[STAT_PY_SAMPLES] = 70;
	test_samples(p, 10, 10, "python3", 40, (uint32_t[]){ m, ev, step, pm }, 4);
	test_samples(p, 10, 10, "python3", 30, (uint32_t[]){ m, ev, load, add }, 4);
	test_samples(p, 10, 11, "worker", 30, (uint32_t[]){ m, nat }, 2);
	assert_int_equal(findings_analyze(p, &f, NULL, &fs), 0);
	x = find(&fs, "hot-python-function");
	assert_non_null(x);
	assert_non_null(strstr(x->what, "Python function train_step (train.py) and the native code "
					"it calls run 40.0%"));
	x = find(&fs, "allocator");
	assert_non_null(x);
	assert_non_null(strstr(x->advice, "NumPy"));
	x = find(&fs, "hot-function"); /* _PyObject_Malloc is the allocator, PyLong_Add the
					* interpreter's: the hottest other is the extension's */
	assert_non_null(x);
	assert_non_null(strstr(x->what, "compute (ext.so) runs 30.0%"));
	findings__free(&fs);
	profile__free(p);
}

static void add_offcpu(struct profile *p, uint32_t stack, uint64_t ts, uint64_t dur, uint16_t flags)
{
	struct event e = { .kind = EVK_OFFCPU, .ts = ts, .dur = dur, .pid = 10, .tid = 10,
			   .flags = flags, .stack = stack };

	assert_int_equal(profile__add_event(p, &e), 0);
}

/*
 * A mutex-bound thread: 1 s on the CPU, 0.5 s acquiring the lock. Its lock share is a third of
 * the time it was not waiting for a CPU, with or without 3 s of waiting for one besides (an
 * overloaded machine): runnable time counts for cpu-contention, not against the lock's share.
 */
static void test_lock_share_without_cpu_waits(void **state)
{
	for (int loaded = 0; loaded < 2; loaded++) {
		struct profile *p = profile__new();
		uint32_t m = test_loc(p, "/bin/app", "main", NULL, 1),
			 work = test_loc(p, "/bin/app", "run_locked", NULL, 2),
			 take = test_loc(p, "/bin/app", "take_lock", NULL, 3),
			 lk = test_loc(p, "/usr/lib/libc.so.6", "pthread_mutex_lock", NULL, 4);
		int64_t lock_stack = profile__stack(p, (uint32_t[]){ m, work, take, lk }, 4),
			run_stack = profile__stack(p, (uint32_t[]){ m, work }, 2);
		struct sample_filter f = { 0 };
		const struct finding *x;
		struct findings fs;

		(void)state;
		assert_true(lock_stack > 0 && run_stack > 0);
		test_samples(p, 10, 10, "app", 1000, (uint32_t[]){ m, work }, 2);
		for (int i = 0; i < 5; i++)
			add_offcpu(p, lock_stack, 2000000000ULL + i * 200000000ULL, 100000000ULL,
				   OFFEV_SLEEP | OFFEV_F_FUTEX);
		for (int i = 0; loaded && i < 30; i++)
			add_offcpu(p, run_stack, 4000000000ULL + i * 200000000ULL, 100000000ULL,
				   OFFEV_RUNNABLE);
		assert_int_equal(findings_analyze(p, &f, NULL, &fs), 0);
		x = find(&fs, "lock-contention");
		assert_non_null(x);
		assert_true(x->impact > 0.33 && x->impact < 0.34);
		assert_non_null(strstr(x->what, "take_lock"));
		assert_true(!find(&fs, "cpu-contention") == !loaded);
		findings__free(&fs);
		profile__free(p);
	}
}

static void add_region(struct profile *p, uint32_t tid, const char *name, uint64_t start,
		       uint64_t dur)
{
	struct event e = { .kind = EVK_REGION, .ts = start, .dur = dur, .pid = 1, .tid = tid,
			   .name = profile__intern(p, name) };

	assert_int_equal(profile__add_event(p, &e), 0);
}

/* 100 steps of 10 ms on two threads, 3 of them 80 ms: a tail; "flat" has none. */
static void test_region_tail(void **state)
{
	struct profile *p = profile__new();
	struct sample_filter f = { 0 };
	struct region_span sp;
	struct findings fs;
	const struct finding *x;
	uint64_t t = 1000000;

	(void)state;
	for (int i = 0; i < 100; i++) {
		uint64_t d = i == 40 || i == 41 || i == 77 ? (i == 77 ? 90000000 : 80000000)
							   : 10000000;

		add_region(p, 1 + i % 2, "step", t, d);
		add_region(p, 3, "flat", t, 5000000 + 1000 * (i % 7));
		t += d + 1000;
	}
	assert_int_equal(findings_analyze(p, &f, NULL, &fs), 0);
	assert_int_equal(fs.n, 1);
	x = &fs.v[0];
	assert_string_equal(x->id, "region-tail");
	assert_non_null(strstr(x->what, "region step: p99 "));
	assert_non_null(strstr(x->what, "median of 10.000 ms over 100 instances; the slowest, "
					"number 77, took 90.000 ms"));
	assert_non_null(strstr(x->advice, "--region step --instance 77"));
	/* the number is the one critical-path takes */
	assert_int_equal(regions_instance(p, "step", 77, &sp), 0);
	assert_int_equal(sp.end - sp.start, 90000000);
	findings__free(&fs);
	profile__free(p);
}

/* Pairing two runs' findings by id and rank: appeared, both, gone. */
static void test_compare(void **state)
{
	struct finding b[3] = { { .id = "a" }, { .id = "b" }, { .id = "b" } };
	struct finding n[2] = { { .id = "b" }, { .id = "c" } };
	struct findings fb = { b, 3 }, fn = { n, 2 }, none = { NULL, 0 };
	struct finding_change *ch;
	size_t k;

	(void)state;
	assert_int_equal(findings_compare(&fb, &fn, &ch, &k), 0);
	assert_int_equal(k, 4);
	assert_null(ch[0].base);
	assert_ptr_equal(ch[0].new, &n[1]); /* c: new */
	assert_ptr_equal(ch[1].base, &b[1]); /* the first b with the only b */
	assert_ptr_equal(ch[1].new, &n[0]);
	assert_ptr_equal(ch[2].base, &b[0]); /* a: gone */
	assert_null(ch[2].new);
	assert_ptr_equal(ch[3].base, &b[2]); /* the second b: gone */
	assert_null(ch[3].new);
	free(ch);
	assert_int_equal(findings_compare(&none, &none, &ch, &k), 0);
	assert_int_equal(k, 0);
	free(ch);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_quiet_profile_has_none),
		cmocka_unit_test(test_cpu_classes),
		cmocka_unit_test(test_kernel_time),
		cmocka_unit_test(test_data_quality),
		cmocka_unit_test(test_few_samples),
		cmocka_unit_test(test_compare),
		cmocka_unit_test(test_python),
	    cmocka_unit_test(test_lock_share_without_cpu_waits),
		cmocka_unit_test(test_region_tail),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
