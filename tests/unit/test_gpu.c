// SPDX-License-Identifier: MIT
/* GPU: CUPTI record conversion, the launch join, the GPU analysis and the GPU stacks. */
#include "test_util.h"

#include <linux/types.h>

#include "eprof_abi.h"
#include "analysis/findings.h"
#include "analysis/gpu.h"
#include "agent/eprof_gpu_proto.h"
#include "output/report_gpu.h"
#include "output/trace.h"
#include "record/cuda_funcs.h"
#include "decode/gpu_conv.h"
#include "util/hmap.h"
#include "util/sink.h"

/* --- a message builder, as the injection library lays records out ----------------------- */

struct msg {
	_Alignas(8) unsigned char buf[EGPU_MSG_MAX];
	size_t len;
};

static void msg_init(struct msg *m, uint32_t pid)
{
	struct egpu_msg *h = (void *)m->buf;

	memset(m, 0, sizeof(*m));
	h->magic = EGPU_MAGIC;
	h->version = EGPU_VERSION;
	h->pid = pid;
	m->len = sizeof(*h);
}

static void msg_put(struct msg *m, const void *rec, size_t fixed, const char *tail)
{
	size_t tl = tail ? strlen(tail) + 1 : 0, size = fixed + ((tl + 7) & ~(size_t)7);

	memcpy(m->buf + m->len, rec, fixed);
	if (tl)
		memcpy(m->buf + m->len + fixed, tail, tl);
	((struct egpu_rec *)(m->buf + m->len))->size = size;
	m->len += size;
	((struct egpu_msg *)m->buf)->nrec++;
}

/* A kernel name under a new id, as the library sends each name once before its kernels. */
static uint32_t put_name(struct msg *m, const char *name)
{
	static uint32_t next_id = 1;
	struct egpu_name n = {.r = {EGPU_NAME, 0, 0, 0, 0}, .id = next_id++,
			      .name_len = strlen(name) + 1};

	msg_put(m, &n, sizeof(n), name);
	return n.id;
}

static void put_kernel(struct msg *m, const char *name, uint32_t corr, uint64_t start, uint64_t end,
		       uint32_t dev, uint32_t stream)
{
	struct egpu_kernel k = {.r = {EGPU_KERNEL, 0, corr, start, end},
				.device = dev,
				.stream = stream,
				.grid = {8, 2, 1},
				.block = {128, 1, 1},
				.name_id = put_name(m, name)};

	msg_put(m, &k, sizeof(k), NULL);
}

static void put_api(struct msg *m, uint32_t tid, uint32_t corr, uint64_t ts)
{
	struct egpu_api a = {.r = {EGPU_API, 0, corr, ts, ts}, .tid = tid, .cbid = 211};

	msg_put(m, &a, sizeof(a), NULL);
}

static void put_copy(struct msg *m, uint32_t corr, uint64_t start, uint64_t end, uint64_t bytes,
		     uint8_t kind)
{
	struct egpu_memcpy c = {.r = {EGPU_MEMCPY, 0, corr, start, end},
				.stream = 7,
				.copy_kind = kind,
				.bytes = bytes};

	msg_put(m, &c, sizeof(c), NULL);
}

static const struct event *find_kind(const struct profile *p, uint16_t kind, size_t nth)
{
	for (size_t i = 0; i < p->events.n; i++)
		if (p->events.v[i].kind == kind && !nth--)
			return &p->events.v[i];
	return NULL;
}

static void test_conv_records(void **state)
{
	struct profile *p = profile__new();
	struct gpu_conv c;
	struct msg *m = malloc(sizeof(*m));
	const struct event *k, *cp, *a;
	struct egpu_stats s = {.r = {EGPU_STATS, 0, 0, 5, 5}, .dropped = 3, .records = 10};

	assert_non_null(p);
	assert_non_null(m);
	assert_int_equal(gpu_conv_init(&c, p), 0);
	msg_init(m, 42);
	put_kernel(m, "_Z5saxpyifPfS_", 9, 1000, 4000, 1, 13);
	put_copy(m, 10, 5000, 5500, 1 << 20, 2 /* DTOH */);
	put_api(m, 4242, 9, 900);
	msg_put(m, &s, sizeof(s), NULL);
	assert_int_equal(gpu_conv_message(&c, m->buf, m->len, 0), 0);
	assert_int_equal(c.kernels, 1);
	assert_int_equal(c.memcpys, 1);
	assert_int_equal(c.apis, 1);
	assert_int_equal(c.count[GPU_CNT_DROPPED], 3);
	assert_int_equal(c.bad, 0);
	k = find_kind(p, EVK_GPU_KERNEL, 0);
	assert_non_null(k);
	assert_string_equal(profile__str(p, k->name), "saxpy"); /* demangled, no parameters */
	assert_int_equal(k->ts, 1000);
	assert_int_equal(k->dur, 3000);
	assert_int_equal(k->pid, 42);
	assert_int_equal(k->a, (1ULL << 32) | 13);
	assert_int_equal(k->b, (16ULL << 32) | 128);
	assert_int_equal(k->c, 9);
	cp = find_kind(p, EVK_GPU_MEMCPY, 0);
	assert_int_equal(cp->b, 1 << 20);
	assert_int_equal(cp->flags, GPU_COPY_DTOH);
	a = find_kind(p, EVK_CUDA_CORR, 0);
	assert_int_equal(a->tid, 4242);
	assert_int_equal(a->c, 9);
	/* a later stats record counts only the new drops */
	msg_init(m, 42);
	s.dropped = 5;
	msg_put(m, &s, sizeof(s), NULL);
	assert_int_equal(gpu_conv_message(&c, m->buf, m->len, 0), 0);
	assert_int_equal(c.count[GPU_CNT_DROPPED], 5);
	gpu_conv_free(&c);
	profile__free(p);
	free(m);
}

static void test_conv_malformed(void **state)
{
	struct profile *p = profile__new();
	struct msg *m = malloc(sizeof(*m));
	struct gpu_conv c;
	size_t before;

	assert_int_equal(gpu_conv_init(&c, p), 0);
	msg_init(m, 1);
	((struct egpu_msg *)m->buf)->magic = 0x1234;
	assert_int_equal(gpu_conv_message(&c, m->buf, m->len, 0), -EINVAL);
	msg_init(m, 1);
	((struct egpu_msg *)m->buf)->version = EGPU_VERSION + 1;
	assert_int_equal(gpu_conv_message(&c, m->buf, m->len, 0), -EINVAL);
	/* a record whose size runs past the message */
	msg_init(m, 1);
	put_kernel(m, "k", 1, 0, 10, 0, 0);
	((struct egpu_rec *)(m->buf + sizeof(struct egpu_msg)))->size = 4096;
	assert_int_equal(gpu_conv_message(&c, m->buf, m->len, 0), -EINVAL);
	/* a name whose length lies: the kernel is kept, unnamed, and both are counted bad */
	msg_init(m, 1);
	put_kernel(m, "k", 1, 0, 10, 0, 0);
	((struct egpu_name *)(m->buf + sizeof(struct egpu_msg)))->name_len = 5000;
	before = p->events.n;
	assert_int_equal(gpu_conv_message(&c, m->buf, m->len, 0), 0);
	assert_int_equal(p->events.n, before + 1);
	assert_string_equal(profile__str(p, p->events.v[before].name), "[unnamed kernel]");
	/* more records announced than present */
	msg_init(m, 1);
	put_kernel(m, "k", 1, 0, 10, 0, 0);
	((struct egpu_msg *)m->buf)->nrec = 3;
	assert_int_equal(gpu_conv_message(&c, m->buf, m->len, 0), -EINVAL);
	/* an unknown kind (a newer library) is skipped, not an error */
	msg_init(m, 1);
	{
		struct egpu_rec r = {99, 0, 0, 0, 0};

		msg_put(m, &r, sizeof(r), NULL);
	}
	assert_int_equal(gpu_conv_message(&c, m->buf, m->len, 0), 0);
	assert_int_equal(c.bad, 6);
	assert_int_equal(gpu_conv_message(&c, m->buf, 3, 0), -EINVAL);
	gpu_conv_free(&c);
	profile__free(p);
	free(m);
}

/* --- the join and the analysis on a synthetic profile ---------------------------------------- */

static uint32_t one_frame_stack(struct profile *p, const char *fn)
{
	int64_t loc = profile__special(p, fn);

	assert_true(loc >= 0);
	return (uint32_t)profile__stack_child(p, 0, (uint32_t)loc);
}

static void add_api(struct profile *p, uint32_t tid, const char *fn, unsigned cat, uint64_t ts,
		    uint64_t dur, uint32_t stack, uint64_t bytes, uint64_t addr, uint16_t extra)
{
	struct event e = {.kind = EVK_CUDA_API,
			  .ts = ts,
			  .dur = dur,
			  .pid = 10,
			  .tid = tid,
			  .stack = stack,
			  .name = profile__intern(p, fn),
			  .flags = cat | extra,
			  .b = bytes,
			  .c = addr};

	assert_int_equal(profile__add_event(p, &e), 0);
}

static void add_gpu(struct profile *p, uint16_t kind, const char *name, uint64_t ts, uint64_t dur,
		    uint32_t dev, uint32_t stream, uint64_t corr)
{
	struct event e = {.kind = kind,
			  .ts = ts,
			  .dur = dur,
			  .pid = 10,
			  .name = name ? profile__intern(p, name) : 0,
			  .a = (uint64_t)dev << 32 | stream,
			  .c = corr,
			  .flags = GPU_COPY_HTOD,
			  .b = 4096};

	assert_int_equal(profile__add_event(p, &e), 0);
}

static void add_corr(struct profile *p, uint32_t tid, uint64_t ts, uint64_t corr)
{
	struct event e = {.kind = EVK_CUDA_CORR, .ts = ts, .pid = 10, .tid = tid, .c = corr};

	assert_int_equal(profile__add_event(p, &e), 0);
}

/*
 * Thread 11 launches k1 twice (from "train") and copies once; thread 12
 * launches k2 once (from "eval"). CUPTI's callback times fall inside the
 * uprobe intervals. Device 0: stream 1 runs 100..200 and 300..350; stream 2
 * runs 150..250 (overlap); device 1: 1000..1100. One copy 400..450.
 */
static struct profile *gpu_profile(void)
{
	struct profile *p = profile__new();
	uint32_t train, eval;

	assert_non_null(p);
	train = one_frame_stack(p, "train");
	eval = one_frame_stack(p, "eval");
	profile__set_meta(p, "start_ns", "0");
	profile__set_meta(p, "end_ns", "2000");
	add_api(p, 11, "cudaLaunchKernel", CUDA_CAT_LAUNCH, 50, 10, train, 0, 0, 0);
	add_api(p, 11, "cudaLaunchKernel", CUDA_CAT_LAUNCH, 70, 10, train, 0, 0, 0);
	/* a driver call nested in the runtime's: not a launch of its own */
	add_api(p, 11, "cuLaunchKernel", CUDA_CAT_LAUNCH, 72, 5, train, 0, 0, CUDA_API_F_NESTED);
	add_api(p, 12, "cudaLaunchKernel", CUDA_CAT_LAUNCH, 60, 30, eval, 0, 0, 0);
	add_api(p, 11, "cudaMemcpyAsync", CUDA_CAT_MEMCPY, 90, 5, train, 4096, 0,
		GPU_COPY_HTOD << 4);
	add_api(p, 11, "cudaDeviceSynchronize", CUDA_CAT_SYNC, 500, 700, train, 0, 0, 0);
	add_api(p, 11, "cudaMalloc", CUDA_CAT_ALLOC, 10, 5, train, 1000, 0xa000, 0);
	add_api(p, 11, "cudaMalloc", CUDA_CAT_ALLOC, 20, 5, train, 500, 0xb000, 0);
	add_api(p, 11, "cudaFree", CUDA_CAT_FREE, 30, 5, train, 0, 0xa000, 0);
	add_api(p, 11, "cudaMalloc", CUDA_CAT_ALLOC, 40, 5, train, 300, 0xc000, 0);
	add_api(p, 11, "cudaMalloc", CUDA_CAT_ALLOC, 45, 5, train, 9999, 0xd000, CUDA_API_F_FAILED);
	/* CUPTI: callback times inside the calls; kernels arrive before their corr records */
	add_gpu(p, EVK_GPU_KERNEL, "k1", 100, 100, 0, 1, 1);
	add_gpu(p, EVK_GPU_KERNEL, "k1", 300, 50, 0, 1, 2);
	add_gpu(p, EVK_GPU_KERNEL, "k2", 150, 100, 0, 2, 3);
	add_gpu(p, EVK_GPU_MEMCPY, NULL, 400, 50, 0, 1, 4);
	add_gpu(p, EVK_GPU_KERNEL, "k3", 1000, 100, 1, 5, 99); /* no API record: unjoined */
	add_corr(p, 11, 55, 1);
	add_corr(p, 11, 74, 2);
	add_corr(p, 12, 61, 3);
	add_corr(p, 11, 92, 4);
	add_corr(p, 11, 200, 77); /* outside any call */
	return p;
}

static void test_join(void **state)
{
	struct profile *p = gpu_profile();
	uint32_t *launch = NULL;
	size_t joined = 0;

	assert_int_equal(gpu_join(p, &launch), 0);
	for (size_t i = 0; i < p->events.n; i++) {
		const struct event *e = &p->events.v[i], *api;

		if (e->kind != EVK_GPU_KERNEL && e->kind != EVK_GPU_MEMCPY)
			continue;
		if (e->c == 99) {
			assert_int_equal(launch[i], GPU_NO_LAUNCH);
			continue;
		}
		assert_int_not_equal(launch[i], GPU_NO_LAUNCH);
		api = &p->events.v[launch[i]];
		joined++;
		assert_false(api->flags & CUDA_API_F_NESTED);
		switch (e->c) {
		case 1:
			assert_int_equal(api->ts, 50);
			break;
		case 2:
			assert_int_equal(api->ts, 70);
			break;
		case 3:
			assert_int_equal(api->tid, 12);
			break;
		case 4:
			assert_string_equal(profile__str(p, api->name), "cudaMemcpyAsync");
			break;
		}
	}
	assert_int_equal(joined, 4);
	free(launch);
	profile__free(p);
}

/*
 * Launches seen at entry only (no duration): a callback after a launch's start belongs to
 * the thread's last launch before it; the summary counts them but times only the others.
 */
static void test_join_entry_only_launches(void **state)
{
	struct profile *p = profile__new();
	uint32_t train = one_frame_stack(p, "train"), *launch = NULL;
	struct gpu_summary s;

	add_api(p, 11, "cudaLaunchKernel", CUDA_CAT_LAUNCH, 50, 20, train, 0, 0, 0);
	add_api(p, 11, "cudaLaunchKernel", CUDA_CAT_LAUNCH, 100, 0, 0, 0, 0,
		CUDA_API_F_NODUR | CUDA_API_F_NOSTACK);
	add_api(p, 11, "cuLaunchKernel", CUDA_CAT_LAUNCH, 101, 0, 0, 0, 0,
		CUDA_API_F_NODUR | CUDA_API_F_NESTED);
	add_api(p, 11, "cudaLaunchKernel", CUDA_CAT_LAUNCH, 200, 0, 0, 0, 0, CUDA_API_F_NODUR);
	add_gpu(p, EVK_GPU_KERNEL, "k1", 300, 10, 0, 1, 1);
	add_gpu(p, EVK_GPU_KERNEL, "k1", 310, 10, 0, 1, 2);
	add_gpu(p, EVK_GPU_KERNEL, "k1", 320, 10, 0, 1, 3);
	add_gpu(p, EVK_GPU_KERNEL, "k1", 330, 10, 0, 1, 4);
	add_corr(p, 11, 60, 1);	 /* inside the timed launch */
	add_corr(p, 11, 102, 2); /* after the entry-only one (and its nested driver call) */
	add_corr(p, 11, 250, 3); /* after the last */
	add_corr(p, 11, 80, 4);	 /* after the timed launch ended: no launch */
	assert_int_equal(gpu_join(p, &launch), 0);
	assert_int_equal(p->events.v[launch[4]].ts, 50);
	assert_int_equal(p->events.v[launch[5]].ts, 100);
	assert_int_equal(p->events.v[launch[6]].ts, 200);
	assert_int_equal(launch[7], GPU_NO_LAUNCH);
	free(launch);
	assert_int_equal(gpu_analyze(p, &s), 0);
	assert_int_equal(s.launches, 3);
	assert_int_equal(s.launches_timed, 1);
	assert_int_equal(s.launch_ns, 20);
	assert_int_equal(s.nlaunched, 1);
	assert_int_equal(s.launched[0].count, 3);
	assert_int_equal(s.launched[0].timed, 1);
	assert_int_equal(s.launched[0].min_ns, 20);
	gpu_summary_free(&s);
	profile__free(p);
}

static const struct gpu_kernel_stat *kstat(const struct gpu_summary *s, const struct profile *p,
					   const char *name)
{
	for (size_t i = 0; i < s->nkernels; i++)
		if (!strcmp(profile__str(p, s->kernels[i].name), name))
			return &s->kernels[i];
	return NULL;
}

static void test_analyze(void **state)
{
	struct profile *p = gpu_profile();
	const struct gpu_kernel_stat *k;
	struct gpu_summary s;

	assert_int_equal(gpu_analyze(p, &s), 0);
	assert_true(s.have_activity);
	k = kstat(&s, p, "k1");
	assert_non_null(k);
	assert_int_equal(k->count, 2);
	assert_int_equal(k->total_ns, 150);
	assert_int_equal(k->min_ns, 50);
	assert_int_equal(k->max_ns, 100);
	assert_string_equal(profile__str(p, s.kernels[0].name), "k1"); /* by total */
	assert_int_equal(s.kernel_ns, 350);
	assert_int_equal(s.gpu_events, 5);
	assert_int_equal(s.joined, 4);
	/* 3 top-level launches; the nested driver call is counted as a call, not a launch */
	assert_int_equal(s.launches, 3);
	assert_int_equal(s.sync_calls, 1);
	assert_int_equal(s.sync_ns, 700);
	/* devices: 0 busy 100..250 + 300..350 + 400..450 = 250, gaps 50 and 50; 1 busy 100 */
	assert_int_equal(s.ndevices, 2);
	assert_int_equal(s.devices[0].device, 0);
	assert_int_equal(s.devices[0].busy_ns, 250);
	assert_int_equal(s.devices[0].window_ns, 2000);
	assert_int_equal(s.devices[0].gaps[0], 50);
	assert_int_equal(s.devices[0].gaps[1], 50);
	assert_int_equal(s.devices[0].gaps[2], 0);
	assert_int_equal(s.devices[1].busy_ns, 100);
	/* streams 1 and 2 of device 0 ran 150..200 together */
	assert_int_equal(s.devices[0].overlap_ns, 50);
	assert_int_equal(s.devices[1].overlap_ns, 0);
	/* streams (0,1): 100+50+50; (0,2): 100; (1,5): 100 */
	assert_int_equal(s.nstreams, 3);
	assert_int_equal(s.streams[0].busy_ns, 200);
	assert_int_equal(s.streams[0].count, 3);
	assert_int_equal(s.streams[1].busy_ns, 100);
	/* each of them ran 50 of its time alongside the other; device 1 has one stream */
	assert_int_equal(s.streams[0].overlap_ns, 50);
	assert_int_equal(s.streams[1].overlap_ns, 50);
	assert_int_equal(s.streams[2].overlap_ns, 0);
	/* copies: GPU side and API side */
	assert_int_equal(s.copies[GPU_COPY_HTOD].count, 1);
	assert_int_equal(s.copies[GPU_COPY_HTOD].bytes, 4096);
	assert_int_equal(s.copies[GPU_COPY_HTOD].api_count, 1);
	/* memory: 1000 + 500 - 1000 + 300 -> peak 1500, 800 never freed in 2; the failed call adds
	 * nothing */
	assert_int_equal(s.mem_peak, 1500);
	assert_int_equal(s.mem_live, 800);
	assert_int_equal(s.mem_live_allocs, 2);
	gpu_summary_free(&s);
	profile__free(p);
}

/*
 * Three streams of device 0: s1 0..100 and 200..300, s2 50..150, s3 100..120 (s3 starts as
 * s1 ends: back to back is not overlap). s1 overlaps 50..100 (50), s2 50..120 (70), s3
 * 100..120 (20); the device: 200 + 100 + 20 busy in 250 of union, 70 beyond it.
 */
static void test_stream_overlap(void **state)
{
	struct profile *p = profile__new();
	struct gpu_summary s;

	assert_non_null(p);
	add_gpu(p, EVK_GPU_KERNEL, "a", 0, 100, 0, 1, 1);
	add_gpu(p, EVK_GPU_KERNEL, "a", 200, 100, 0, 1, 2);
	add_gpu(p, EVK_GPU_MEMCPY, NULL, 50, 100, 0, 2, 3);
	add_gpu(p, EVK_GPU_KERNEL, "b", 100, 20, 0, 3, 4);
	assert_int_equal(gpu_analyze(p, &s), 0);
	assert_int_equal(s.nstreams, 3);
	assert_int_equal(s.devices[0].busy_ns, 250);
	assert_int_equal(s.devices[0].overlap_ns, 70);
	assert_int_equal(s.streams[0].overlap_ns, 50);
	assert_int_equal(s.streams[1].overlap_ns, 70);
	assert_int_equal(s.streams[2].overlap_ns, 20);
	gpu_summary_free(&s);
	profile__free(p);
}

/* Uprobes only (no CUPTI, no GPU): the CPU side alone, every table but the API one empty. */
static void test_analyze_api_only(void **state)
{
	struct profile *p = profile__new();
	struct sink *out = sink_mem();
	struct gpu_summary s;
	const char *txt;
	size_t len;

	add_api(p, 11, "cudaMalloc", CUDA_CAT_ALLOC, 10, 5, 0, 64, 0, CUDA_API_F_FAILED);
	p->events.v[0].a = 35;
	assert_int_equal(gpu_analyze(p, &s), 0);
	assert_false(s.have_activity);
	assert_int_equal(s.nkernels + s.ndevices + s.nstreams + s.nlaunched, 0);
	assert_int_equal(s.napi, 1);
	assert_int_equal(s.api[0].errors, 1);
	assert_int_equal(s.api[0].last_error, 35);
	assert_int_equal(s.mem_peak, 0); /* a failed allocation allocates nothing */
	gpu_summary_free(&s);
	assert_int_equal(report_gpu_text(out, p, 0), 0);
	txt = sink_mem_data(out, &len);
	assert_non_null(strstr(txt, "no GPU activity records"));
	assert_non_null(strstr(txt, "(error 35)"));
	sink_close(out);
	assert_int_equal(gpu_to_samples(p, GPU_WEIGHT_GPU_NS), 0);
	profile__free(p);
}

static void test_gpu_samples(void **state)
{
	struct profile *p = gpu_profile();
	uint64_t train_k1 = 0, eval_k2 = 0, none_k3 = 0, copy = 0;

	assert_int_equal(gpu_to_samples(p, GPU_WEIGHT_GPU_NS), 5);
	for (size_t i = 0; i < p->samples.n; i++) {
		const struct sample *s = &p->samples.v[i];
		const struct stack_node *leaf = &p->stacks.v[s->stack];
		const struct stack_node *parent = &p->stacks.v[leaf->parent];
		uint32_t n;
		const char *ln = profile__str(p, profile__loc_frames(p, leaf->loc, &n)[0].name);
		const char *pn = profile__str(p, profile__loc_frames(p, parent->loc, &n)[0].name);

		if (!strcmp(ln, "[gpu] k1") && !strcmp(pn, "train"))
			train_k1 += s->weight;
		else if (!strcmp(ln, "[gpu] k2") && !strcmp(pn, "eval"))
			eval_k2 += s->weight;
		else if (!strcmp(ln, "[gpu] k3") && !strcmp(pn, "[no launch stack]"))
			none_k3 += s->weight;
		else if (!strcmp(ln, "[gpu] memcpy HtoD") && !strcmp(pn, "train"))
			copy += s->weight;
		else
			fail_msg("unexpected stack %s <- %s", ln, pn);
	}
	assert_int_equal(train_k1, 150);
	assert_int_equal(eval_k2, 100);
	assert_int_equal(none_k3, 100);
	assert_int_equal(copy, 50);
	profile__free(p);
	p = gpu_profile();
	/* API time: every top-level call, the nested one left out */
	assert_int_equal(gpu_to_samples(p, GPU_WEIGHT_API_NS), 10);
	profile__free(p);
}

/*
 * Attach mode: a kernel record flagged "before attach" (and one of the 72 bytes older
 * libraries send), the collector's thread, a note, its goodbye; the unjoined flagged kernel
 * is [launched before attach] in the GPU flamegraph, counted apart in the summary.
 */
static void test_conv_attach_records(void **state)
{
	struct profile *p = profile__new();
	struct gpu_conv c;
	struct msg *m = malloc(sizeof(*m));
	struct egpu_kernel k = {.r = {EGPU_KERNEL, 0, 3, 1000, 2000}, .flags = EGPU_KF_BEFORE_ATTACH};
	struct egpu_thread t = {.r = {EGPU_THREAD, 0, 0, 5, 5}, .tid = 777};
	struct egpu_bye b = {.r = {EGPU_BYE, 0, 0, 9, 9}, .finalized = 2, .keep = 0};
	struct egpu_note n = {.r = {EGPU_NOTE, 0, 0, 6, 6}, .warn = 0, .text_len = 6};
	const struct event *e;
	struct gpu_summary sum;
	uint64_t v = 0, before = 0, other = 0;

	assert_non_null(p);
	assert_non_null(m);
	assert_int_equal(gpu_conv_init(&c, p), 0);
	msg_init(m, 42);
	k.name_id = put_name(m, "late_k");
	k.regs = 40;
	msg_put(m, &k, sizeof(k), NULL);
	k.r.corr = 4;
	k.r.start = 3000;
	k.r.end = 4000;
	msg_put(m, &k, offsetof(struct egpu_kernel, flags), NULL); /* an older library's */
	msg_put(m, &t, sizeof(t), NULL);
	msg_put(m, &n, sizeof(n), "hello");
	msg_put(m, &b, sizeof(b), NULL);
	assert_int_equal(gpu_conv_message(&c, m->buf, m->len, 0), 0);
	assert_int_equal(c.bad, 0);
	assert_int_equal(c.kernels, 2);
	e = find_kind(p, EVK_GPU_KERNEL, 0);
	assert_true(e->flags & GPU_KERNEL_F_BEFORE_ATTACH);
	assert_int_equal(GPU_KERNEL_REGS(e->flags), 40);
	e = find_kind(p, EVK_GPU_KERNEL, 1);
	assert_false(e->flags & GPU_KERNEL_F_BEFORE_ATTACH);
	assert_int_equal(GPU_KERNEL_REGS(e->flags), 40);
	assert_true(gpu_conv_own_thread(&c, 42, 777));
	assert_false(gpu_conv_own_thread(&c, 42, 778));
	assert_true(hmap__get(c.bye, 42, 0, &v));
	assert_int_equal(v, GPU_BYE_SEEN | 2);
	assert_int_equal(gpu_analyze(p, &sum), 0);
	assert_int_equal(sum.before_attach, 1);
	assert_int_equal(sum.joined, 0);
	assert_int_equal(sum.kernels[0].count, 2);
	gpu_summary_free(&sum);
	assert_int_equal(gpu_to_samples(p, GPU_WEIGHT_GPU_NS), 2);
	for (size_t i = 0; i < p->samples.n; i++) {
		const struct stack_node *leaf = &p->stacks.v[p->samples.v[i].stack];
		const struct stack_node *parent = &p->stacks.v[leaf->parent];
		uint32_t nf;
		const char *pn = profile__str(p, profile__loc_frames(p, parent->loc, &nf)[0].name);

		if (!strcmp(pn, "[launched before attach]"))
			before += p->samples.v[i].weight;
		else if (!strcmp(pn, "[no launch stack]"))
			other += p->samples.v[i].weight;
	}
	assert_int_equal(before, 1000);
	assert_int_equal(other, 1000);
	gpu_conv_free(&c);
	free(m);
	profile__free(p);
}

/* A fake /proc/PID/task/TID/status whose NSpid line ends with the thread's id inside. */
static void fake_task(const char *root, uint32_t pid, uint32_t tid, uint32_t nstid)
{
	char path[PATH_MAX + 96];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%u", root, pid);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/%u/task", root, pid);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/%u/task/%u", root, pid, tid);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/%u/task/%u/status", root, pid, tid);
	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "Name:\tapp\nNSpid:\t%u\t%u\n", tid, nstid);
	fclose(f);
}

static void gone_task(const char *root, uint32_t pid, uint32_t tid)
{
	char path[PATH_MAX + 96];

	snprintf(path, sizeof(path), "%s/%u/task/%u/status", root, pid, tid);
	assert_int_equal(unlink(path), 0);
	snprintf(path, sizeof(path), "%s/%u/task/%u", root, pid, tid);
	assert_int_equal(rmdir(path), 0);
}

/* The API record's thread id after mapping one message whose pid reads msg_pid. */
static uint32_t mapped_api_tid(struct gpu_ns_tids *t, uint32_t msg_pid, uint32_t peer,
			       uint32_t nstid, uint32_t flags)
{
	struct msg *m = malloc(sizeof(*m));
	struct egpu_api a = {.r = {EGPU_API, 0, 7, 10, 10}, .tid = nstid, .flags = flags};
	uint32_t tid;

	assert_non_null(m);
	msg_init(m, msg_pid);
	msg_put(m, &a, sizeof(a), NULL);
	gpu_ns_map_tids(t, m->buf, m->len, peer);
	memcpy(&a, m->buf + sizeof(struct egpu_msg), sizeof(a));
	tid = a.tid;
	free(m);
	return tid;
}

/*
 * A container's thread ids: mapped through NSpid while the thread runs, still mapped once it
 * has exited (its last records come at exit), and looked up again at a thread's first call (the
 * library's EGPU_API_F_FIRST) because a new thread may have the exited one's id.
 */
static void test_ns_tids(void **state)
{
	char *root = strdup(test_path("nsproc"));
	struct gpu_ns_tids t;

	assert_non_null(root);
	mkdir(root, 0755);
	fake_task(root, 5000, 5000, 1);
	fake_task(root, 5000, 5001, 2);
	assert_int_equal(gpu_ns_tids_init(&t), 0);
	t.proc_root = root;
	assert_int_equal(mapped_api_tid(&t, 1, 5000, 2, EGPU_API_F_FIRST), 5001);
	assert_int_equal(mapped_api_tid(&t, 1, 5000, 1, 0), 5000);
	gone_task(root, 5000, 5001);
	assert_int_equal(mapped_api_tid(&t, 1, 5000, 2, 0), 5001); /* exited: still known */
	fake_task(root, 5000, 5007, 2);				/* a new thread, the same id inside */
	assert_int_equal(mapped_api_tid(&t, 1, 5000, 2, 0), 5001);
	assert_int_equal(mapped_api_tid(&t, 1, 5000, 2, EGPU_API_F_FIRST), 5007);
	assert_int_equal(mapped_api_tid(&t, 1, 5000, 2, 0), 5007);
	assert_int_equal(mapped_api_tid(&t, 1, 5000, 9, EGPU_API_F_FIRST), 0); /* no such thread */
	/* the recorder's own namespace (the message's pid is the peer's): left as it is */
	assert_int_equal(mapped_api_tid(&t, 5000, 5000, 2, 0), 2);
	gpu_ns_tids_free(&t);
	free(root);
}

static void test_report_json(void **state)
{
	struct profile *p = gpu_profile();
	struct sink *s = sink_mem();
	const char *out;
	size_t len;

	assert_int_equal(report_gpu_json(s, p), 0);
	out = sink_mem_data(s, &len);
	assert_non_null(strstr(out, "\"gpu\": {"));
	assert_non_null(
	    strstr(out, "{\"name\": \"k1\", \"count\": 2, \"total_ns\": 150, \"mean_ns\": 75"));
	assert_non_null(strstr(out, "\"mem_never_freed_bytes\": 800"));
	assert_non_null(strstr(out, "\"busy_ns\": 250"));
	sink_close(s);
	/* no GPU events: no key at all */
	s = sink_mem();
	profile__free(p);
	p = profile__new();
	assert_int_equal(report_gpu_json(s, p), 0);
	sink_mem_data(s, &len);
	assert_int_equal(len, 0);
	sink_close(s);
	profile__free(p);
}

static size_t count_str(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

static void test_trace(void **state)
{
	struct profile *p = gpu_profile();
	struct trace_opts o = {0};
	struct sink *s = sink_mem();
	const char *out;
	size_t len;

	assert_int_equal(trace_write(s, p, &o, NULL), 0);
	out = sink_mem_data(s, &len);
	assert_non_null(strstr(out, "\"GPU (pid 10)\""));
	assert_non_null(strstr(out, "\"GPU 0 stream 1\""));
	assert_non_null(strstr(out, "\"GPU 1 stream 5\""));
	assert_non_null(strstr(out, "\"11 CUDA API\""));
	/* 4 joined activities: 4 arrows, each a start and an end */
	assert_int_equal(count_str(out, "\"ph\":\"s\""), 4);
	assert_int_equal(count_str(out, "\"ph\":\"f\""), 4);
	/* memory counter: 1000, 1500, 500, 800 (the failed call leaves no point) */
	assert_int_equal(count_str(out, "\"name\":\"GPU memory\""), 4);
	assert_non_null(strstr(out, "\"bytes\":1500"));
	assert_non_null(strstr(out, "\"bytes\":800"));
	/* the nested driver call is not a slice of its own */
	assert_null(strstr(out, "\"cuLaunchKernel\""));
	sink_close(s);
	profile__free(p);
}

static void test_cookie(void **state)
{
	int i = cuda_func_find("cudaMemcpy2D");
	uint64_t c;

	assert_true(i >= 0);
	c = cuda_func_cookie(i);
	assert_int_equal(CUDA_CK_FUNC(c), i);
	assert_int_equal(CUDA_CK_ARG(c, CUDA_CK_BYTES), 4);
	assert_int_equal(CUDA_CK_ARG(c, CUDA_CK_BYTES2), 5);
	assert_int_equal(CUDA_CK_ARG(c, CUDA_CK_KIND), 6);
	assert_int_equal(CUDA_CK_ARG(c, CUDA_CK_PTR), CUDA_ARG_NONE);
	c = cuda_func_cookie(cuda_func_find("cuModuleGetFunction"));
	assert_int_equal(CUDA_CK_CLASS(c), CUDA_CL_HANDLE);
	assert_int_equal(CUDA_CK_ARG(c, CUDA_CK_OUT), 0);
	assert_int_equal(CUDA_CK_ARG(c, CUDA_CK_NAME), 2);
	c = cuda_func_cookie(cuda_func_find("cuMemsetD32_v2"));
	assert_int_equal(CUDA_CK_ARG(c, CUDA_CK_SHIFT), 2);
	c = cuda_func_cookie(cuda_func_find("cudaLaunchKernel"));
	assert_int_equal(CUDA_CK_CLASS(c), CUDA_CL_LAUNCH);
	assert_int_equal(CUDA_CK_ARG(c, CUDA_CK_PTR), 0);
	assert_true(c & CUDA_CK_RUNTIME);
	assert_false(cuda_func_cookie(cuda_func_find("cuLaunchKernel")) & CUDA_CK_RUNTIME);
	assert_int_equal(cuda_func_find("cudaNoSuchThing"), -1);
	assert_int_equal(cuda_memcpy_kind_dir(1), GPU_COPY_HTOD);
	assert_int_equal(cuda_memcpy_kind_dir(4), GPU_COPY_UNKNOWN);
	assert_true(cuda_nfuncs < 128); /* the recorder's per-object tables */
}

/* --- theoretical occupancy ------------------------------------------------------------- */

/* The limits CUPTI reports for an H100 SXM (compute capability 9.0). */
static const struct gpu_device_props h100 = {
    .sm_count = 132,
    .warp_size = 32,
    .max_warps_per_sm = 64,
    .max_blocks_per_sm = 32,
    .max_threads_per_block = 1024,
    .max_regs_per_sm = 65536,
    .max_regs_per_block = 65536,
    .max_smem_per_sm = 228 * 1024,
    .max_smem_per_block = 227 * 1024,
    .cc_major = 9,
    .cc_minor = 0,
};

static void check_occ(const struct gpu_device_props *d, uint32_t threads, uint32_t regs,
		      uint32_t smem, uint32_t blocks, uint32_t warps, enum gpu_occ_limiter lim)
{
	struct gpu_occupancy o;

	assert_int_equal(gpu_occupancy(d, threads, regs, smem, &o), 0);
	assert_int_equal(o.blocks, blocks);
	assert_int_equal(o.warps, warps);
	assert_int_equal(o.limiter, lim);
	assert_true(o.occupancy > (double)warps / d->max_warps_per_sm - 1e-9 &&
		    o.occupancy < (double)warps / d->max_warps_per_sm + 1e-9);
}

static void test_occupancy(void **state)
{
	struct gpu_device_props d = h100;
	struct gpu_occupancy o;

	/*
	 * 256 threads = 8 warps, 32 registers: 64 / 8 = 8 blocks by warps; 32 * 32 = 1024
	 * registers per warp (a multiple of 256), 65536 / 4 sub-partitions = 16384 / 1024 = 16
	 * warps each, 64 warps = 8 blocks by registers; shared memory 0 + 1 KiB reserved: 228
	 * blocks; 32 by blocks. 8 blocks, 64 warps: 100%, the warps (first of the tie).
	 */
	check_occ(&d, 256, 32, 0, 8, 64, GPU_OCC_WARPS);
	/* 128 registers: 4096 per warp, 16384 / 4096 = 4 warps per sub-partition, 16 warps =
	 * 2 blocks of 8 warps: 16 / 64 = 25%, the registers. */
	check_occ(&d, 256, 128, 0, 2, 16, GPU_OCC_REGS);
	/* 128 threads = 4 warps, 48 KiB: 49152 + 1024 reserved = 50176 (a multiple of 128);
	 * 233472 / 50176 = 4.65: 4 blocks (16 by warps, 16 by registers): 16 warps, 25%. */
	check_occ(&d, 128, 32, 48 * 1024, 4, 16, GPU_OCC_SMEM);
	/* 32 threads = 1 warp: 64 by warps, 64 by registers, 32 by blocks: 32 warps, 50%. */
	check_occ(&d, 32, 32, 0, 32, 32, GPU_OCC_BLOCKS);
	/* 96 threads = 3 warps, 40 registers: 1280 per warp; 16384 / 1280 = 12.8: 12 warps per
	 * sub-partition, 48 warps, 16 blocks (the whole file would give 51 warps, 17 blocks);
	 * 21 by warps: 16 blocks, 48 warps, 75%, the registers. */
	check_occ(&d, 96, 40, 0, 16, 48, GPU_OCC_REGS);
	/* 33 threads take 2 warps: 32 blocks by warps and by blocks: 64 warps, 100%. */
	check_occ(&d, 33, 16, 0, 32, 64, GPU_OCC_WARPS);
	/* 1024 threads of 255 registers: 8160 -> 8192 per warp, 32 warps = 262144 > 65536 per
	 * block: it cannot run, 0%. */
	check_occ(&d, 1024, 255, 0, 0, 0, GPU_OCC_REGS);
	/* compute capability 7.5 (Turing: 32 warps, 16 blocks, 64 KiB): 256 B units, no reserve:
	 * 128 threads, 20000 B -> 20224: 65536 / 20224 = 3 blocks = 12 warps, 37.5%. */
	d.cc_major = 7;
	d.cc_minor = 5;
	d.max_warps_per_sm = 32;
	d.max_blocks_per_sm = 16;
	d.max_smem_per_sm = 64 * 1024;
	check_occ(&d, 128, 32, 20000, 3, 12, GPU_OCC_SMEM);
	/* unknown limits or configuration: no figure */
	assert_int_equal(gpu_occupancy(NULL, 256, 32, 0, &o), -ENODATA);
	assert_int_equal(gpu_occupancy(&h100, 256, 0, 0, &o), -ENODATA); /* registers not recorded */
	d = h100;
	d.max_regs_per_sm = 0;
	assert_int_equal(gpu_occupancy(&d, 256, 32, 0, &o), -ENODATA);
	/* limits from a hostile file: a warp size that wraps the warp count to 0 (which would
	 * divide by zero), registers that wrap the per-warp allocation: no figure, no crash */
	d = h100;
	d.warp_size = UINT64_MAX;
	assert_int_equal(gpu_occupancy(&d, 256, 32, 0, &o), -ENODATA);
	d = h100;
	d.max_regs_per_sm = UINT64_MAX;
	assert_int_equal(gpu_occupancy(&d, 256, 32, 0, &o), -ENODATA);
	assert_int_equal(gpu_occupancy(&h100, 256, UINT32_MAX, 0, &o), -ENODATA);
	assert_string_equal(gpu_occ_limiter_name(GPU_OCC_SMEM), "shared");
	assert_string_equal(gpu_occ_limiter_name(GPU_OCC_UNKNOWN), "-");
}

static void put_device(struct msg *m, uint32_t dev, const char *name)
{
	struct egpu_device d = {.r = {EGPU_DEVICE, 0, 0, 50, 50},
				.device = dev,
				.sm_count = h100.sm_count,
				.warp_size = 32,
				.max_warps_per_sm = 64,
				.max_blocks_per_sm = 32,
				.max_threads_per_block = 1024,
				.max_regs_per_sm = 65536,
				.max_regs_per_block = 65536,
				.max_smem_per_sm = 228 * 1024,
				.max_smem_per_block = 227 * 1024,
				.cc_major = 9,
				.global_mem = 80ULL << 30,
				.name_len = strlen(name) + 1};

	msg_put(m, &d, sizeof(d), name);
}

static void put_kernel_cfg(struct msg *m, const char *name, uint32_t corr, uint64_t start,
			   uint64_t dur, uint32_t dev, uint32_t threads, uint32_t regs,
			   uint32_t smem)
{
	struct egpu_kernel k = {.r = {EGPU_KERNEL, 0, corr, start, start + dur},
				.device = dev,
				.grid = {100, 1, 1},
				.block = {threads, 1, 1},
				.regs = regs,
				.smem = smem,
				.name_id = put_name(m, name)};

	msg_put(m, &k, sizeof(k), NULL);
}

/*
 * Through the recorder's conversion, the analysis and the JSON: kernels of known
 * configurations on an H100-like device 0, one kernel on device 1 whose limits never came.
 */
static void test_occupancy_report(void **state)
{
	struct profile *p = profile__new();
	struct msg *m = malloc(sizeof(*m));
	struct gpu_summary s;
	struct gpu_conv c;
	struct sink *out = sink_mem();
	const struct event *k;
	const char *js;
	size_t len;

	assert_non_null(p);
	assert_non_null(m);
	assert_int_equal(gpu_conv_init(&c, p), 0);
	msg_init(m, 42);
	put_kernel_cfg(m, "full", 1, 100, 1000, 0, 256, 32, 0);
	put_device(m, 0, "Fake H100");
	put_kernel_cfg(m, "smem", 2, 2000, 1000, 0, 128, 32, 48 * 1024);
	/* two configurations: 3 x 1000 ns at 100% and 1 x 5000 ns at 25% (registers):
	 * GPU-time-weighted (3000 * 1 + 5000 * 0.25) / 8000 = 0.53125; by launches it would be
	 * 0.8125. The limiter is that of the 5000 ns. */
	for (int i = 0; i < 3; i++)
		put_kernel_cfg(m, "mixed", 3 + i, 4000 + 1000 * i, 1000, 0, 256, 32, 0);
	put_kernel_cfg(m, "mixed", 6, 8000, 5000, 0, 256, 128, 0);
	put_kernel_cfg(m, "elsewhere", 7, 9000, 1000, 1, 256, 32, 0);
	assert_int_equal(gpu_conv_message(&c, m->buf, m->len, 0), 0);
	assert_int_equal(c.bad, 0);
	assert_int_equal(c.devices, 1);
	k = find_kind(p, EVK_GPU_KERNEL, 1);
	assert_int_equal(k->flags, 32);		/* registers per thread */
	assert_int_equal(k->tid, 48 * 1024);	/* shared memory per block */
	k = find_kind(p, EVK_GPU_DEVICE, 0);
	assert_string_equal(profile__str(p, k->name), "Fake H100");

	assert_int_equal(gpu_analyze(p, &s), 0);
	assert_int_equal(s.nprops, 1);
	assert_int_equal(s.props[0].sm_count, 132);
	assert_int_equal(s.props[0].global_mem, 80ULL << 30);
	for (size_t i = 0; i < s.nkernels; i++) {
		const struct gpu_kernel_stat *ks = &s.kernels[i];
		const char *n = profile__str(p, ks->name);

		if (!strcmp(n, "mixed")) {
			assert_true(ks->occ_known);
			assert_true(ks->occupancy > 0.53124 && ks->occupancy < 0.53126);
			assert_int_equal(ks->limiter, GPU_OCC_REGS);
			assert_int_equal(ks->ncfg, 2);
		} else if (!strcmp(n, "elsewhere")) {
			assert_false(ks->occ_known); /* device 1: no limits, no figure */
		} else {
			assert_true(ks->occ_known);
			assert_int_equal(ks->limiter, !strcmp(n, "full") ? GPU_OCC_WARPS : GPU_OCC_SMEM);
		}
	}
	gpu_summary_free(&s);

	assert_int_equal(report_gpu_json(out, p), 0);
	js = sink_mem_data(out, &len);
	assert_non_null(strstr(js, "\"name\": \"full\", \"count\": 1, \"total_ns\": 1000"));
	assert_non_null(strstr(js, "\"occupancy\": 1.0000, \"occupancy_limiter\": \"warps\""));
	assert_non_null(strstr(js, "\"occupancy\": 0.2500, \"occupancy_limiter\": \"shared\""));
	assert_non_null(strstr(js, "\"occupancy\": 0.5312, \"occupancy_limiter\": \"registers\""));
	assert_non_null(strstr(js, "\"occupancy\": null, \"occupancy_limiter\": null"));
	assert_non_null(strstr(js, "\"registers_per_thread\": 128, \"shared_bytes_per_block\": 0"));
	assert_non_null(strstr(js, "\"name\": \"Fake H100\", \"sm_count\": 132"));
	sink_close(out);
	out = sink_mem();
	assert_int_equal(report_gpu_text(out, p, 0), 0);
	js = sink_mem_data(out, &len);
	assert_non_null(strstr(js, "Occupancy"));
	assert_non_null(strstr(js, "53% registers*  mixed"));
	assert_non_null(strstr(js, "25% shared  smem"));
	assert_non_null(strstr(js, "-  elsewhere"));
	assert_non_null(strstr(js, "device 0: Fake H100, 132 SMs, compute capability 9.0"));
	sink_close(out);
	gpu_conv_free(&c);
	profile__free(p);
	free(m);
}

static const struct finding *finding_of(const struct findings *fs, const char *id)
{
	for (size_t i = 0; i < fs->n; i++)
		if (!strcmp(fs->v[i].id, id))
			return &fs->v[i];
	return NULL;
}

/*
 * GPU findings. A 100 ms record whose GPU ran 10 us: idle; half of that time a kernel at
 * 25% occupancy limited by registers. Then 1,000 kernels of 2 us, 1,000 copies of 4 KiB
 * and 40 ms in cudaDeviceSynchronize: launch-bound, small copies, sync waits.
 */
static void test_findings_gpu(void **state)
{
	struct profile *p = profile__new();
	struct msg *m = malloc(sizeof(*m));
	struct sample_filter f = {0};
	struct findings fs;
	const struct finding *x;
	struct gpu_conv c;

	(void)state;
	assert_non_null(p);
	assert_non_null(m);
	profile__set_meta(p, "start_ns", "0");
	profile__set_meta(p, "end_ns", "100000000");
	assert_int_equal(gpu_conv_init(&c, p), 0);
	msg_init(m, 10);
	put_device(m, 0, "Fake H100");
	put_kernel_cfg(m, "lowreg", 1, 1000, 5000, 0, 256, 128, 0);
	put_kernel_cfg(m, "fine", 2, 7000, 5000, 0, 256, 32, 0);
	assert_int_equal(gpu_conv_message(&c, m->buf, m->len, 0), 0);
	gpu_conv_free(&c);
	assert_int_equal(findings_analyze(p, &f, NULL, &fs), 0);
	x = finding_of(&fs, "gpu-idle");
	assert_non_null(x);
	assert_int_equal(x->severity, FINDING_HIGH);
	assert_non_null(strstr(x->what, "GPU 0 (pid 10) was idle 100.0% of 0.100 s"));
	x = finding_of(&fs, "low-occupancy");
	assert_non_null(x);
	assert_non_null(strstr(x->what, "kernel lowreg (50.0% of GPU time) has 25% theoretical "
					"occupancy, limited by registers"));
	assert_non_null(strstr(x->advice, "__launch_bounds__"));
	assert_null(finding_of(&fs, "launch-bound"));
	assert_null(finding_of(&fs, "gpu-sync-wait"));
	assert_string_equal(fs.v[0].id, "gpu-idle");
	findings__free(&fs);

	for (int i = 0; i < 1000; i++) {
		/* no launch configuration recorded (flags = registers 0): no occupancy figure */
		struct event k = {.kind = EVK_GPU_KERNEL, .ts = 20000 + 10000 * i, .dur = 2000,
				  .pid = 10, .name = profile__intern(p, "tiny"), .a = 1, .c = 100 + i};

		assert_int_equal(profile__add_event(p, &k), 0);
		add_gpu(p, EVK_GPU_MEMCPY, NULL, 25000 + 10000 * i, 1000, 0, 2, 5000 + i);
	}
	add_api(p, 11, "cudaDeviceSynchronize", CUDA_CAT_SYNC, 50000000, 40000000, 0, 0, 0, 0);
	assert_int_equal(findings_analyze(p, &f, NULL, &fs), 0);
	x = finding_of(&fs, "launch-bound");
	assert_non_null(x);
	assert_non_null(strstr(x->what, "1002 kernels ran 2.0 us each on average"));
	x = finding_of(&fs, "gpu-sync-wait");
	assert_non_null(x);
	assert_non_null(strstr(x->what, "CPU threads spent 0.040 s (40.0% of the run) in 1 "
					"synchronization calls, the most in cudaDeviceSynchronize"));
	x = finding_of(&fs, "small-copies");
	assert_non_null(x);
	assert_non_null(strstr(x->what, "1000 host-to-device copies of 4.0 KiB on average"));
	/* 1,002 kernels now: the low-occupancy one has under 10% of GPU time */
	assert_null(finding_of(&fs, "low-occupancy"));
	findings__free(&fs);
	profile__free(p);
	free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_conv_records),
	    cmocka_unit_test(test_conv_malformed),
	    cmocka_unit_test(test_conv_attach_records),
	    cmocka_unit_test(test_join),
	    cmocka_unit_test(test_join_entry_only_launches),
	    cmocka_unit_test(test_analyze),
	    cmocka_unit_test(test_stream_overlap),
	    cmocka_unit_test(test_analyze_api_only),
	    cmocka_unit_test(test_gpu_samples),
	    cmocka_unit_test(test_report_json),
	    cmocka_unit_test(test_trace),
	    cmocka_unit_test(test_cookie),
	    cmocka_unit_test(test_occupancy),
	    cmocka_unit_test(test_occupancy_report),
	    cmocka_unit_test(test_findings_gpu),
	    cmocka_unit_test(test_ns_tids),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
