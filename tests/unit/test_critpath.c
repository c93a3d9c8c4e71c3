// SPDX-License-Identifier: MIT
/* The critical-path walk and the off-CPU weights on synthetic events. */
#include "test_util.h"

#include <linux/types.h>
#include <math.h>

#include "analysis/critpath.h"
#include "analysis/offcpu.h"
#include "model/gpu_event.h"
#include "model/offcpu_event.h"
#include "cli/cmds.h"

static void add_offcpu(struct profile *p, uint32_t tid, uint64_t ts, uint64_t end, uint16_t state,
		       uint32_t waker, uint64_t wake)
{
	struct event e = {.kind = EVK_OFFCPU,
			  .pid = 1,
			  .tid = tid,
			  .ts = ts,
			  .dur = end - ts,
			  .flags = state,
			  .a = waker,
			  .b = wake,
			  .c = waker ? 1 : 0};

	assert_int_equal(profile__add_event(p, &e), 0);
}

/*
 * Main thread A (tid 1) runs from 1000, creates B (tid 2) at 1100 and blocks
 * at 1200 until B wakes it at 4900; it runs again at 5000 and exits at 6000.
 * B runs from 1150, is preempted 2000..2500, and wakes A at 4900.
 */
static struct profile *two_threads(void)
{
	struct profile *p = profile__new();
	struct process *pr;

	assert_non_null(p);
	pr = profile__proc(p, 1, true);
	pr->start_ts = 1000;
	pr->exit_ts = 6000;
	profile__thread(p, 1, 1, true);
	profile__thread(p, 1, 2, true);
	profile__set_meta(p, "start_ns", "1000");
	add_offcpu(p, 2, 1100, 1150, OFFEV_NEW, 1, 1100);
	add_offcpu(p, 1, 1200, 5000, OFFEV_SLEEP, 2, 4900);
	add_offcpu(p, 2, 2000, 2500, OFFEV_RUNNABLE, 0, 0);
	return p;
}

static void test_walk_follows_wakeups_and_creation(void **state)
{
	struct profile *p = two_threads();
	struct cp_graph g;
	struct cp_path path;
	uint32_t track;
	uint64_t end;
	int64_t a, b;

	assert_int_equal(critpath_build(p, &g), 0);
	assert_int_equal(critpath_default_end(&g, &track, &end), 0);
	a = critpath_find_track(&g, CP_TRACK_THREAD, 1, 1);
	b = critpath_find_track(&g, CP_TRACK_THREAD, 1, 2);
	assert_true(a >= 0 && b >= 0);
	assert_int_equal(track, a);
	assert_int_equal(end, 6000);
	assert_int_equal(critpath_walk(&g, track, end, 0, &path), 0);
	assert_int_equal(path.total_ns, 5000);
	assert_int_equal(path.start, 1000);
	assert_int_equal(path.by_kind[WAIT_ONCPU], 100 + 850 + 2400 + 1000);
	assert_int_equal(path.by_kind[WAIT_RUNNABLE], 50 + 500 + 100);
	assert_int_equal(path.by_kind[WAIT_SLEEP], 0); /* explained by B */
	/* In time order: A, B (new, running, preempted, running), A. */
	assert_int_equal(path.nsegs, 7);
	assert_int_equal(path.segs[0].track, a);
	assert_int_equal(path.segs[0].start, 1000);
	assert_int_equal(path.segs[0].end, 1100);
	assert_int_equal(path.segs[1].track, b);
	assert_int_equal(path.segs[1].kind, WAIT_RUNNABLE);
	assert_int_equal(path.segs[3].start, 2000);
	assert_int_equal(path.segs[3].kind, WAIT_RUNNABLE);
	assert_int_equal(path.segs[5].track, a);
	assert_int_equal(path.segs[5].start, 4900);
	assert_int_equal(path.segs[6].end, 6000);
	for (size_t i = 1; i < path.nsegs; i++)
		assert_int_equal(path.segs[i].start, path.segs[i - 1].end);
	critpath_path_free(&path);
	critpath_free(&g);
	profile__free(p);
}

/* Without a known waker, the wait stays on the path as its own kind. */
static void test_walk_unexplained_wait(void **state)
{
	struct profile *p = profile__new();
	struct cp_graph g;
	struct cp_path path;
	struct process *pr;

	pr = profile__proc(p, 1, true);
	pr->start_ts = 1;
	pr->exit_ts = 10000;
	profile__set_meta(p, "start_ns", "1");
	add_offcpu(p, 1, 1000, 9000, OFFEV_DISK, 0, 8000);
	assert_int_equal(critpath_build(p, &g), 0);
	assert_int_equal(critpath_walk(&g, 0, 10000, 1, &path), 0);
	assert_int_equal(path.by_kind[WAIT_IO], 7000);
	assert_int_equal(path.by_kind[WAIT_RUNNABLE], 1000);
	assert_int_equal(path.by_kind[WAIT_ONCPU], 999 + 1000);
	critpath_path_free(&path);
	critpath_free(&g);
	profile__free(p);
}

/*
 * Preemptions without stacks (time sampling left them out) count for the user frames of
 * the nearest CPU sample in the same stretch of work (only preemptions between); a sleep
 * ends a stretch, and a sleep's own wait for a CPU is not guessed.
 */
static void test_preemption_without_stack_names_the_running_code(void **state)
{
	struct profile *p = profile__new();
	uint32_t main_l, work_l, other_l, kern_l;
	int64_t kobj, work, other, full;
	struct sample sm = {.ts = 1500, .pid = 1, .tid = 1, .weight = 1};
	struct cp_graph g;
	struct cp_path path;
	struct process *pr;
	uint64_t on_work = 0, on_other = 0, unknown = 0;

	(void)state;
	pr = profile__proc(p, 1, true);
	pr->start_ts = 1000;
	pr->exit_ts = 9000;
	profile__set_meta(p, "start_ns", "1000");
	main_l = test_loc(p, "/usr/bin/app", "main", NULL, 0x10);
	work_l = test_loc(p, "/usr/bin/app", "cpu_work", NULL, 0x20);
	other_l = test_loc(p, "/usr/bin/app", "other", NULL, 0x30);
	kobj = profile__object(p, OBJ_KERNEL, "[kernel.kallsyms]", "", 0);
	kern_l = (uint32_t)profile__location(p, kobj, 0xffffffff81000000ULL);
	work = profile__stack(p, (uint32_t[]){main_l, work_l}, 2);
	full = profile__stack(p, (uint32_t[]){main_l, work_l, kern_l}, 3);
	other = profile__stack(p, (uint32_t[]){main_l, other_l}, 2);
	assert_true(work > 0 && full > work && other > full);
	sm.stack = (uint32_t)full; /* a sample taken in an interrupt: its kernel frames on top */
	assert_int_equal(profile__add_sample(p, &sm), 0);
	sm.ts = 7500;
	sm.stack = (uint32_t)other;
	assert_int_equal(profile__add_sample(p, &sm), 0);
	add_offcpu(p, 1, 2000, 2800, OFFEV_RUNNABLE, 0, 0); /* the sample at 1500 just before */
	add_offcpu(p, 1, 4000, 4500, OFFEV_RUNNABLE, 0, 0); /* a preemption since: still it */
	add_offcpu(p, 1, 6000, 7000, OFFEV_SLEEP, 0, 6500);  /* its wait for a CPU: unknown */
	add_offcpu(p, 1, 8000, 8200, OFFEV_RUNNABLE, 0, 0); /* 7500: the sleep ended the stretch */
	assert_int_equal(critpath_build(p, &g), 0);
	assert_int_equal(critpath_walk(&g, 0, 9000, 0, &path), 0);
	assert_int_equal(path.by_kind[WAIT_RUNNABLE], 800 + 500 + 500 + 200);
	for (size_t i = 0; i < path.nattr; i++) {
		if (path.attr[i].kind != WAIT_RUNNABLE)
			continue;
		if (path.attr[i].stack == (uint32_t)work)
			on_work += path.attr[i].ns;
		else if (path.attr[i].stack == (uint32_t)other)
			on_other += path.attr[i].ns;
		else if (!path.attr[i].stack)
			unknown += path.attr[i].ns;
		else
			fail_msg("runnable time on stack %u", path.attr[i].stack);
	}
	assert_int_equal(on_work, 800 + 500);
	assert_int_equal(on_other, 200);
	assert_int_equal(unknown, 500);
	critpath_path_free(&path);
	critpath_free(&g);
	profile__free(p);
}

/* A cycle of wakeups at one instant must end, not spin. */
static void test_walk_terminates_on_cycles(void **state)
{
	struct profile *p = profile__new();
	struct cp_graph g;
	struct cp_path path;

	profile__set_meta(p, "start_ns", "100");
	add_offcpu(p, 1, 200, 1000, OFFEV_SLEEP, 2, 500);
	add_offcpu(p, 2, 200, 1000, OFFEV_SLEEP, 1, 500);
	assert_int_equal(critpath_build(p, &g), 0);
	assert_int_equal(critpath_walk(&g, 0, 1000, 0, &path), 0);
	assert_true(path.total_ns <= 900);
	critpath_path_free(&path);
	critpath_free(&g);
	profile__free(p);
}

static void test_offcpu_weights(void **state)
{
	struct profile *p = two_threads();
	struct sample s = {.ts = 3000, .pid = 1, .tid = 2, .weight = 700};
	struct sample_filter f = {0};
	struct sample *v;
	size_t n;
	uint64_t off = 0, wall = 0;

	assert_int_equal(profile__add_sample(p, &s), 0);
	assert_int_equal(offcpu_samples(p, OFFCPU_W_OFF, &f, &v, &n), 0);
	assert_int_equal(n, 4); /* A's wait: blocked, then runnable */
	for (size_t i = 0; i < n; i++)
		off += v[i].weight;
	free(v);
	assert_int_equal(off, 50 + 3800 + 500);
	assert_int_equal(offcpu_samples(p, OFFCPU_W_WALL, &f, &v, &n), 0);
	assert_int_equal(n, 5);
	for (size_t i = 0; i < n; i++)
		wall += v[i].weight;
	free(v);
	assert_int_equal(wall, off + 700);
	assert_int_equal(offcpu_classify(p, &p->events.v[1]), WAIT_SLEEP);
	assert_int_equal(offcpu_classify(p, &p->events.v[2]), WAIT_RUNNABLE);
	assert_int_equal(offcpu_ready_ts(&p->events.v[1]), 4900);
	assert_int_equal(offcpu_ready_ts(&p->events.v[2]), 2000);
	profile__free(p);
}

/* Events of other kinds beside sampled off-CPU intervals are passed over, not read as waits. */
/* The time sampling's weights per part: what the recorder's draws make unbiased. */
static void test_offcpu_part_scales(void **state)
{
	const double mean = 1000;
	struct offcpu_draw tail = {mean, true}, old = {mean, false}, none = {0, false};
	/* blocked 1000..1300, woken at 1300, running again at 2300 */
	struct event sleep = {.kind = EVK_OFFCPU, .ts = 1000, .dur = 1300, .flags = OFFEV_SLEEP,
			      .b = 1300};
	struct event pre = {.kind = EVK_OFFCPU, .ts = 1000, .dur = 500, .flags = OFFEV_RUNNABLE};
	double sc[2];

	(void)state;
	offcpu_part_scales(&tail, &sleep, sc);
	assert_float_equal(sc[0], 1 / -expm1(-300.0 / mean), 1e-9); /* the wakeup's draw */
	assert_float_equal(sc[1], 1 / -expm1(-1300.0 / mean), 1e-9); /* either draw */
	sleep.flags |= OFFEV_F_TAIL; /* picked by the second draw only */
	offcpu_part_scales(&tail, &sleep, sc);
	assert_float_equal(sc[0], 0, 0);
	assert_float_equal(sc[1], 1 / -expm1(-1300.0 / mean), 1e-9);
	sleep.flags = OFFEV_SLEEP;
	offcpu_part_scales(&old, &sleep, sc); /* a file from before the tail draw */
	assert_float_equal(sc[0], 1 / -expm1(-300.0 / mean), 1e-9);
	assert_float_equal(sc[1], sc[0], 0);
	offcpu_part_scales(&tail, &pre, sc); /* one draw on the whole preemption */
	assert_float_equal(sc[0], 1 / -expm1(-500.0 / mean), 1e-9);
	assert_float_equal(sc[1], sc[0], 0);
	sleep.flags |= OFFEV_F_UNSAMPLED;
	offcpu_part_scales(&tail, &sleep, sc);
	assert_true(sc[0] == 0 && sc[1] == 0);
	offcpu_part_scales(&none, &sleep, sc); /* no sampling: every interval as it is */
	assert_true(sc[0] == 1 && sc[1] == 1);
}

static void test_offcpu_other_events(void **state)
{
	struct profile *p = two_threads();
	struct event r = {.kind = EVK_REGION, .pid = 1, .tid = 1, .ts = 1500, .dur = 100};
	struct sample_filter f = {0};
	struct sample *v;
	size_t n;

	(void)state;
	profile__set_meta(p, "offcpu_sample_ns", "1000000"); /* sampled: weights scaled */
	r.name = profile__intern(p, "step");
	assert_int_equal(profile__add_event(p, &r), 0);
	assert_int_equal(offcpu_samples(p, OFFCPU_W_OFF, &f, &v, &n), 0);
	assert_int_equal(n, 4); /* the intervals only */
	free(v);
	assert_int_equal(offcpu_samples(p, OFFCPU_W_WAKERS, &f, &v, &n), 0);
	assert_int_equal(n, 0);
	free(v);
	profile__free(p);
}

/* --wakers: each wait with a waker stack, on that stack, weighted until its wakeup. */
static void test_waker_weights(void **state)
{
	struct profile *p = two_threads();
	struct sample_filter f = {0};
	struct thread *t = profile__thread(p, 1, 1, false);
	int64_t l = profile__special(p, "waker_fn");
	struct sample *v;
	size_t n;

	(void)state;
	t->comm = profile__intern(p, "mainthread");
	assert_true(l > 0);
	/* B woke A at 4900 from waker_fn: A blocked from 1200, so 3700 ns until the wakeup. */
	p->events.v[1].stack2 = (uint32_t)profile__stack_child(p, 0, (uint32_t)l);
	assert_int_equal(offcpu_samples(p, OFFCPU_W_WAKERS, &f, &v, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(v[0].weight, 3700);
	assert_int_equal(v[0].tid, 2); /* under the waker's thread */
	assert_int_equal(p->stacks.v[p->stacks.v[v[0].stack].parent].loc,
			 p->stacks.v[p->events.v[1].stack2].loc);
	{
		uint32_t nf;
		const struct frame *fr = profile__loc_frames(p, p->stacks.v[v[0].stack].loc, &nf);

		assert_int_equal(nf, 1);
		assert_string_equal(profile__str(p, fr[0].name), "[wakes mainthread]");
	}
	free(v);
	/* The filter picks the woken threads: B was never woken with a stack. */
	f.tid = 2;
	assert_int_equal(offcpu_samples(p, OFFCPU_W_WAKERS, &f, &v, &n), 0);
	assert_int_equal(n, 0);
	free(v);
	profile__free(p);
}

/* --- GPU edges ------------------------------------------------------------------------------ */

static void add_api(struct profile *p, const char *fn, unsigned cat, uint64_t ts, uint64_t dur,
		    uint64_t corr)
{
	struct event e = {.kind = EVK_CUDA_API, .pid = 1, .tid = 1, .ts = ts, .dur = dur,
			  .flags = cat, .name = profile__intern(p, fn)};
	struct event c = {.kind = EVK_CUDA_CORR, .pid = 1, .tid = 1, .ts = ts + dur / 2, .c = corr};

	assert_int_equal(profile__add_event(p, &e), 0);
	if (corr)
		assert_int_equal(profile__add_event(p, &c), 0);
}

static void add_op(struct profile *p, uint16_t kind, const char *name, uint32_t stream,
		   uint64_t start, uint64_t end, uint64_t corr)
{
	struct event e = {.kind = kind, .pid = 1, .tid = 1, .ts = start, .dur = end - start,
			  .a = stream, .c = corr, .name = name ? profile__intern(p, name) : 0,
			  .flags = kind == EVK_GPU_MEMCPY ? GPU_COPY_HTOD : 0};

	assert_int_equal(profile__add_event(p, &e), 0);
}

static struct profile *gpu_proc(uint64_t exit_ts)
{
	struct profile *p = profile__new();
	struct process *pr;

	assert_non_null(p);
	pr = profile__proc(p, 1, true);
	pr->start_ts = 1000;
	pr->exit_ts = exit_ts;
	profile__set_meta(p, "start_ns", "1000");
	return p;
}

static void walk_default(struct profile *p, struct cp_graph *g, struct cp_path *path)
{
	uint32_t track;
	uint64_t end;

	assert_int_equal(critpath_build(p, g), 0);
	assert_int_equal(critpath_default_end(g, &track, &end), 0);
	assert_int_equal(critpath_walk(g, track, end, 0, path), 0);
	for (size_t i = 1; i < path->nsegs; i++)
		assert_int_equal(path->segs[i].start, path->segs[i - 1].end);
}

/*
 * Thread 1 runs 1000..2000, launches K1 (runs 2300..5300) and K2 (queued behind it,
 * 5300..6300) on stream 7 and a copy on stream 0, then waits in cuCtxSynchronize
 * 3000..6500 (blocked off CPU 3100..6450 inside it), runs on and exits at 10000.
 */
static void test_gpu_launch_stream_order_sync(void **state)
{
	struct profile *p = gpu_proc(10000);
	struct cp_graph g;
	struct cp_path path;
	struct cp_func *f;
	size_t nf;
	bool k1 = false;

	add_api(p, "cuLaunchKernel", CUDA_CAT_LAUNCH, 2000, 100, 1);
	add_api(p, "cuLaunchKernel", CUDA_CAT_LAUNCH, 2500, 100, 2);
	add_api(p, "cuMemcpyHtoDAsync_v2", CUDA_CAT_MEMCPY, 2700, 100, 3);
	add_api(p, "cuCtxSynchronize", CUDA_CAT_SYNC, 3000, 3500, 0);
	add_op(p, EVK_GPU_KERNEL, "K1", 7, 2300, 5300, 1);
	add_op(p, EVK_GPU_KERNEL, "K2", 7, 5300, 6300, 2);
	add_op(p, EVK_GPU_MEMCPY, NULL, 0, 2900, 3400, 3);
	add_offcpu(p, 1, 3100, 6450, OFFEV_SLEEP, 0, 6440);
	walk_default(p, &g, &path);
	assert_int_equal(path.total_ns, 9000);
	assert_int_equal(path.by_kind[WAIT_ONCPU], 1000 + 3500);
	assert_int_equal(path.by_kind[WAIT_GPU_LAUNCH], 300);
	assert_int_equal(path.by_kind[WAIT_GPU_COMPUTE], 4000);
	assert_int_equal(path.by_kind[WAIT_GPU_SYNC], 200);
	assert_int_equal(path.by_kind[WAIT_GPU_COPY], 0); /* the copy ended before K2 */
	assert_int_equal(path.by_kind[WAIT_SLEEP] + path.by_kind[WAIT_RUNNABLE], 0);
	assert_int_equal(path.nsegs, 6);
	assert_int_equal(g.tracks[path.segs[2].track].kind, CP_TRACK_GPU_STREAM);
	assert_int_equal(g.tracks[path.segs[2].track].gpu_stream, 7);
	assert_int_equal(path.segs[2].kind, WAIT_GPU_COMPUTE);
	assert_string_equal(profile__str(p, p->events.v[path.segs[2].gpu_event - 1].name), "K1");
	assert_int_equal(path.segs[3].start, 5300);
	/* GPU time counts for "[gpu] KERNEL" on the launch stack */
	assert_int_equal(critpath_functions(p, &path, &f, &nf), 0);
	for (size_t i = 0; i < nf; i++)
		if (!strcmp(profile__str(p, f[i].name), "[gpu] K1")) {
			assert_int_equal(f[i].ns, 3000);
			k1 = true;
		}
	assert_true(k1);
	free(f);
	critpath_path_free(&path);
	critpath_free(&g);
	profile__free(p);
}

/*
 * An idle stream: a copy launched at 3200, after K1 ended at 3000, starts at 3400: the
 * path goes from the copy to its launch, not to K1.
 */
static void test_gpu_idle_gap_is_launch(void **state)
{
	struct profile *p = gpu_proc(4500);
	struct cp_graph g;
	struct cp_path path;

	add_api(p, "cudaLaunchKernel", CUDA_CAT_LAUNCH, 1500, 50, 1);
	add_api(p, "cudaDeviceSynchronize", CUDA_CAT_SYNC, 1600, 1500, 0);
	add_api(p, "cudaMemcpyAsync", CUDA_CAT_MEMCPY, 3200, 100, 2);
	add_api(p, "cudaDeviceSynchronize", CUDA_CAT_SYNC, 3300, 700, 0);
	add_op(p, EVK_GPU_KERNEL, "K1", 7, 2000, 3000, 1);
	add_op(p, EVK_GPU_MEMCPY, NULL, 7, 3400, 3900, 2);
	walk_default(p, &g, &path);
	assert_int_equal(path.total_ns, 3500);
	assert_int_equal(path.by_kind[WAIT_ONCPU], 500 + 100 + 500);
	assert_int_equal(path.by_kind[WAIT_GPU_COMPUTE], 1000);
	assert_int_equal(path.by_kind[WAIT_GPU_COPY], 500);
	assert_int_equal(path.by_kind[WAIT_GPU_LAUNCH], 500 + 200);
	assert_int_equal(path.by_kind[WAIT_GPU_SYNC], 100 + 100);
	critpath_path_free(&path);
	critpath_free(&g);
	profile__free(p);
}

/*
 * cudaStreamSynchronize of stream 13: CUPTI's record of it names the stream, so the wait
 * ends with stream 13's op (3000), not with stream 7's (3020), which ends later.
 */
static void test_gpu_stream_sync_names_its_stream(void **state)
{
	for (int with_record = 0; with_record < 2; with_record++) {
		struct profile *p = gpu_proc(4000);
		struct event rec = {.kind = EVK_GPU_SYNC, .pid = 1, .ts = 2510, .dur = 530,
				    .a = 1ULL << 32 | 13, .b = 3};
		struct cp_graph g;
		struct cp_path path;
		size_t k;

		add_api(p, "cuLaunchKernel", CUDA_CAT_LAUNCH, 1500, 50, 1);
		add_api(p, "cuLaunchKernel", CUDA_CAT_LAUNCH, 1600, 50, 2);
		add_api(p, "cudaStreamSynchronize", CUDA_CAT_SYNC, 2500, 550, 0);
		add_op(p, EVK_GPU_KERNEL, "on7", 7, 2000, 3020, 1);
		add_op(p, EVK_GPU_KERNEL, "on13", 13, 2000, 3000, 2);
		if (with_record)
			assert_int_equal(profile__add_event(p, &rec), 0);
		walk_default(p, &g, &path);
		for (k = 0; k < path.nsegs && path.segs[k].kind != WAIT_GPU_COMPUTE; k++)
			;
		assert_true(k < path.nsegs);
		assert_int_equal(g.tracks[path.segs[k].track].gpu_stream, with_record ? 13 : 7);
		assert_int_equal(path.by_kind[WAIT_GPU_SYNC], with_record ? 50 : 30);
		assert_int_equal(path.total_ns, 3000);
		critpath_path_free(&path);
		critpath_free(&g);
		profile__free(p);
	}
}

/*
 * Which op ends each synchronization wait, against a brute-force search on random
 * profiles: four streams (0 and 0xffffffff among them) on a coarse time grid, so ends tie
 * across streams; stream synchronizations with and without CUPTI's record of the stream,
 * and context synchronizations. The latest op ending inside the call wins, ties to the
 * later track; a named stream's sync takes only that stream's ops, or none.
 */
static void test_gpu_sync_target_model(void **state)
{
	static const uint32_t streams[] = { 0, 7, 13, 0xffffffffu };
	uint64_t rng = 11;
	size_t named = 0, found = 0, none = 0;

	(void)state;
	for (int round = 0; round < 150; round++) {
		struct profile *p = gpu_proc(200000);
		struct cp_graph g;
		uint64_t t = 1000;
		struct { uint64_t ts, dur; int64_t stream; } calls[12];
		size_t ncalls = 0;

		for (int si = 0; si < 4; si++) { /* ops per stream, never overlapping */
			uint64_t at = 1000;

			for (int k = 0; k < 15; k++) {
				rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
				at += 100 * (1 + (rng >> 40) % 40);
				if (at > 150000)
					break;
				add_op(p, EVK_GPU_KERNEL, "k", streams[si], at - 100 * (1 + (rng >> 50) % 3 / 2), at, 0);
			}
		}
		while (ncalls < 12) {
			rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
			t += 100 * (1 + (rng >> 40) % 30);
			calls[ncalls].ts = t;
			calls[ncalls].dur = 100 * (1 + (rng >> 46) % 40);
			calls[ncalls].stream = (rng >> 56) % 3 == 0 ? -2 /* context */ :
					       (rng >> 56) % 3 == 1 ? -1 /* no record */ :
					       (int64_t)streams[(rng >> 60) % 4];
			t += calls[ncalls].dur;
			add_api(p, calls[ncalls].stream == -2 ? "cuCtxSynchronize" : "cudaStreamSynchronize",
				CUDA_CAT_SYNC, calls[ncalls].ts, calls[ncalls].dur, 0);
			if (calls[ncalls].stream >= 0) {
				struct event rec = { .kind = EVK_GPU_SYNC, .pid = 1, .ts = calls[ncalls].ts + 1,
						     .dur = calls[ncalls].dur - 2,
						     .a = 1ULL << 32 | (uint64_t)calls[ncalls].stream, .b = 3 };

				assert_int_equal(profile__add_event(p, &rec), 0);
			}
			ncalls++;
		}
		assert_int_equal(critpath_build(p, &g), 0);
		for (size_t c = 0; c < ncalls; c++) {
			uint64_t lo = calls[c].ts, hi = lo + calls[c].dur, best_end = 0;
			int64_t best_track = -1, thr = critpath_find_track(&g, CP_TRACK_THREAD, 1, 1);
			const struct cp_wait *w = NULL;

			for (size_t i = 0; i < g.ntracks; i++) {
				const struct cp_track *tr = &g.tracks[i];

				if (tr->kind != CP_TRACK_GPU_STREAM ||
				    (calls[c].stream >= 0 && (uint32_t)tr->gpu_stream != (uint32_t)calls[c].stream))
					continue;
				for (size_t j = 0; j < tr->nops; j++)
					if (tr->ops[j].end > lo && tr->ops[j].end <= hi &&
					    (tr->ops[j].end > best_end ||
					     (tr->ops[j].end == best_end && (int64_t)i > best_track))) {
						best_end = tr->ops[j].end;
						best_track = (int64_t)i;
					}
			}
			assert_true(thr >= 0);
			for (size_t i = 0; i < g.tracks[thr].nwaits; i++)
				if (g.tracks[thr].waits[i].kind == WAIT_GPU_SYNC &&
				    g.tracks[thr].waits[i].start == lo)
					w = &g.tracks[thr].waits[i];
			assert_non_null(w);
			assert_int_equal(w->end, hi);
			named += calls[c].stream >= 0;
			if (best_track < 0) {
				none++;
				assert_int_equal(w->edge, -1);
				assert_int_equal(w->ready, lo);
				continue;
			}
			found++;
			assert_true(w->edge >= 0);
			assert_int_equal(g.edges[w->edge].kind, CP_EDGE_GPU_SYNC);
			assert_int_equal(g.edges[w->edge].from_track, best_track);
			assert_int_equal(g.edges[w->edge].from_ts, best_end);
			assert_int_equal(w->ready, best_end);
		}
		critpath_free(&g);
		profile__free(p);
	}
	assert_true(named > 500 && found > 500 && none > 50);
}

/* A synchronization no GPU work explains (no CUPTI data) stays on the path as gpu-sync. */
static void test_gpu_sync_without_activity(void **state)
{
	struct profile *p = gpu_proc(5000);
	struct cp_graph g;
	struct cp_path path;

	add_api(p, "cudaDeviceSynchronize", CUDA_CAT_SYNC, 2000, 1000, 0);
	add_api(p, "cudaStreamWaitEvent", CUDA_CAT_SYNC, 3500, 500, 0); /* no CPU wait */
	walk_default(p, &g, &path);
	assert_int_equal(path.by_kind[WAIT_GPU_SYNC], 1000);
	assert_int_equal(path.by_kind[WAIT_ONCPU], 3000);
	critpath_path_free(&path);
	critpath_free(&g);
	profile__free(p);
}

static void test_cli(void **state)
{
	char *rec[] = { "record", "--offcpu-min-us", "50", "--offcpu-stack-rate", "0", "--", "true",
			NULL };
	char *rec2[] = { "record", "--offcpu", "-p", "1", NULL };
	char *bad[] = { "record", "--offcpu-min-us", "-1", "--", "true", NULL };
	char *cp[] = { "critical-path", "x.eprof", "--json", "--segments", "--tid", "7",
		       "--end", "1.5", NULL };
	char *fg[] = { "flamegraph", "--wall", NULL };
	char *fgw[] = { "flamegraph", "--wakers", "--tid", "3", NULL };
	struct record_opts o;
	struct critpath_cli c;
	struct flamegraph_cli f;

	assert_int_equal(parse_record_args(7, rec, &o), 0);
	assert_true(o.offcpu);
	assert_int_equal(o.offcpu_min_us, 50);
	assert_int_equal(o.offcpu_stack_rate, 0);
	assert_int_equal(parse_record_args(4, rec2, &o), 0);
	assert_true(o.offcpu);
	assert_int_equal(o.offcpu_min_us, 10);
	assert_int_equal(o.offcpu_stack_rate, 2000);
	assert_int_equal(parse_record_args(5, bad, &o), -EINVAL);
	assert_int_equal(parse_critpath_args(8, cp, &c), 0);
	assert_string_equal(c.input, "x.eprof");
	assert_true(c.json && c.segments);
	assert_int_equal(c.tid, 7);
	assert_true(c.end_s > 1.49 && c.end_s < 1.51);
	assert_int_equal(parse_flamegraph_args(2, fg, &f), 0);
	assert_int_equal(f.weights, FG_WALL);
	assert_int_equal(parse_flamegraph_args(4, fgw, &f), 0);
	assert_int_equal(f.weights, FG_WAKERS);
	assert_int_equal(f.filter.tid, 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_walk_follows_wakeups_and_creation),
	    cmocka_unit_test(test_walk_unexplained_wait),
	    cmocka_unit_test(test_preemption_without_stack_names_the_running_code),
	    cmocka_unit_test(test_walk_terminates_on_cycles),
	    cmocka_unit_test(test_offcpu_weights),
	    cmocka_unit_test(test_offcpu_part_scales),
	    cmocka_unit_test(test_offcpu_other_events),
	    cmocka_unit_test(test_waker_weights),
	    cmocka_unit_test(test_gpu_launch_stream_order_sync),
	    cmocka_unit_test(test_gpu_idle_gap_is_launch),
	    cmocka_unit_test(test_gpu_stream_sync_names_its_stream),
	    cmocka_unit_test(test_gpu_sync_target_model),
	    cmocka_unit_test(test_gpu_sync_without_activity),
	    cmocka_unit_test(test_cli),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
