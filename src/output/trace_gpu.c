// SPDX-License-Identifier: MIT
/*
 * GPU data in `eprof trace`: CUDA API calls as slices on a "CUDA API" track
 * next to each calling thread, a GPU process per target process with one
 * track per device and stream (kernels, copies, sets), a flow arrow from
 * each launch to the work it queued, and a GPU-memory counter.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/event.h"
#include "analysis/gpu.h"
#include "util/hmap.h"
#include "trace.h"
#include "trace_gpu.h"

#define API_TID_BIT 0x40000000u /* pseudo thread of a thread's CUDA API track */
#define GPU_PID_BIT 0x40000000u /* pseudo process of a process's GPU tracks */

static bool in_window(const struct trace_opts *o, const struct event *e)
{
	const struct sample_filter *f = &o->filter;

	if (f->pid && e->pid != f->pid)
		return false;
	if (f->t0 && e->ts + e->dur < f->t0)
		return false;
	return !f->t1 || e->ts <= f->t1;
}

static const struct profile *sort_p;

static int cmp_ts(const void *a, const void *b)
{
	const struct event *x = &sort_p->events.v[*(const uint32_t *)a];
	const struct event *y = &sort_p->events.v[*(const uint32_t *)b];

	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	return (x->dur < y->dur) - (x->dur > y->dur); /* longer (parent) first */
}

static uint32_t gpu_tid(uint64_t dev_stream)
{
	return (uint32_t)(dev_stream >> 32) << 20 | ((uint32_t)dev_stream & 0xfffff);
}

static void name_tracks(struct trace_writer *w, const struct profile *p, const struct event *e,
			struct hmap *named)
{
	char buf[96];
	uint64_t one;

	if (e->kind == EVK_CUDA_API) {
		if (hmap__get(named, e->pid, (uint64_t)e->tid | 1ULL << 40, &one))
			return;
		hmap__put(named, e->pid, (uint64_t)e->tid | 1ULL << 40, 1);
		snprintf(buf, sizeof(buf), "%u CUDA API", e->tid);
		trace_thread_name(w, e->pid, e->tid | API_TID_BIT, buf);
		return;
	}
	if (!hmap__get(named, e->pid, 1ULL << 41, &one)) {
		hmap__put(named, e->pid, 1ULL << 41, 1);
		snprintf(buf, sizeof(buf), "GPU (pid %u)", e->pid);
		trace_process_name(w, e->pid | GPU_PID_BIT, buf);
		trace_process_sort_index(w, e->pid | GPU_PID_BIT, 1000);
	}
	if (hmap__get(named, e->pid, ev_gpu_dev_stream(e) | 1ULL << 42, &one))
		return;
	hmap__put(named, e->pid, ev_gpu_dev_stream(e) | 1ULL << 42, 1);
	snprintf(buf, sizeof(buf), "GPU %u stream %u", ev_gpu_device(e), ev_gpu_stream(e));
	trace_thread_name(w, e->pid | GPU_PID_BIT, gpu_tid(ev_gpu_dev_stream(e)), buf);
}

static void api_slice(struct trace_writer *w, const struct profile *p, const struct event *e)
{
	uint32_t kn = gpu_launch_kernel_name(p, e);
	char name[512];
	struct json a;

	trace_args(&a);
	json_kv_i64(&a, "result", ev_api_result(e));
	json_kv_u64(&a, "bytes", ev_api_bytes(e));
	/* a launch names its kernel: "cudaLaunchKernel: saxpy" */
	snprintf(name, sizeof(name), "%s%s%s", profile__str(p, e->name), kn ? ": " : "",
		 kn ? profile__str(p, kn) : "");
	trace_complete(w, e->pid, e->tid | API_TID_BIT, e->ts, e->dur, name, "cuda",
		       trace_args_text(&a));
}

static void gpu_slice(struct trace_writer *w, const struct profile *p, const struct event *e)
{
	char name[64];
	const char *n = name;
	struct json a;

	trace_args(&a);
	json_kv_u64(&a, "correlation", ev_gpu_corr(e));
	if (e->kind == EVK_GPU_KERNEL) {
		n = profile__str(p, e->name);
		json_kv_u64(&a, "blocks", ev_kernel_blocks(e));
		json_kv_u64(&a, "threads_per_block", ev_kernel_threads(e));
	} else {
		snprintf(name, sizeof(name), "%s %s",
			 e->kind == EVK_GPU_MEMSET ? "memset" : "memcpy",
			 e->kind == EVK_GPU_MEMSET ? "" : gpu_copy_dir_name(e->flags & 0xf));
		json_kv_u64(&a, "bytes", ev_copy_bytes(e));
	}
	trace_complete(w, e->pid | GPU_PID_BIT, gpu_tid(ev_gpu_dev_stream(e)), e->ts, e->dur, n, "gpu",
		       trace_args_text(&a));
}

/* GPU memory from cudaMalloc & co over time, per process. */
static void memory_counter(struct trace_writer *w, const struct profile *p, const uint32_t *ord,
			   size_t n, struct hmap *live)
{
	static const char *const series[] = {"bytes"};
	struct hmap *tot = hmap__new(16);

	for (size_t i = 0; tot && i < n; i++) {
		const struct event *e = &p->events.v[ord[i]];
		unsigned cat = CUDA_API_CAT(e->flags);
		const char *fn;
		uint64_t sz = 0, t = 0;
		double v;

		if (e->kind != EVK_CUDA_API ||
		    (e->flags & (CUDA_API_F_FAILED | CUDA_API_F_NESTED)) || !ev_api_addr(e) ||
		    (cat != CUDA_CAT_ALLOC && cat != CUDA_CAT_FREE))
			continue;
		fn = profile__str(p, e->name);
		if (!strcmp(fn, "cuMemMap") || !strcmp(fn, "cuMemUnmap") || strstr(fn, "Host"))
			continue;
		hmap__get(tot, e->pid, 0, &t);
		if (cat == CUDA_CAT_ALLOC) {
			hmap__put(live, e->pid, ev_api_addr(e), ev_api_bytes(e));
			t += ev_api_bytes(e);
		} else if (hmap__get(live, e->pid, ev_api_addr(e), &sz)) {
			hmap__put(live, e->pid, ev_api_addr(e), 0);
			t -= sz;
		} else {
			continue;
		}
		hmap__put(tot, e->pid, 0, t);
		v = (double)t;
		trace_counter(w, e->pid, "GPU memory", e->ts + e->dur, series, &v, 1);
	}
	hmap__free(tot);
}

int trace_source_gpu(struct trace_writer *w, const struct profile *p, const struct trace_opts *o,
		     struct trace_stats *st)
{
	uint32_t *ord = NULL, *launch = NULL;
	struct hmap *named = NULL, *live = NULL;
	uint64_t flow = 0;
	size_t n = 0;
	int err = -ENOMEM;

	if (!gpu_present(p))
		return 0;
	ord = malloc((p->events.n + 1) * sizeof(*ord));
	named = hmap__new(64);
	live = hmap__new(256);
	if (!ord || !named || !live || gpu_join(p, &launch))
		goto out;
	for (size_t i = 0; i < p->events.n; i++) {
		const struct event *e = &p->events.v[i];

		if ((e->kind == EVK_CUDA_API && !(e->flags & CUDA_API_F_NESTED)) ||
		    e->kind == EVK_GPU_KERNEL || e->kind == EVK_GPU_MEMCPY ||
		    e->kind == EVK_GPU_MEMSET)
			if (in_window(o, e))
				ord[n++] = i;
	}
	sort_p = p;
	qsort(ord, n, sizeof(*ord), cmp_ts);
	for (size_t i = 0; i < n; i++) {
		const struct event *e = &p->events.v[ord[i]];

		name_tracks(w, p, e, named);
		if (e->kind == EVK_CUDA_API) {
			api_slice(w, p, e);
		} else {
			gpu_slice(w, p, e);
		}
		st->slices++;
	}
	/* Arrows after the slices: each binds to the slice enclosing its end's time. */
	for (size_t i = 0; i < n; i++) {
		const struct event *e = &p->events.v[ord[i]], *api;

		if (e->kind == EVK_CUDA_API || launch[ord[i]] == GPU_NO_LAUNCH)
			continue;
		api = &p->events.v[launch[ord[i]]];
		flow++;
		trace_flow(w, 's', flow, api->pid, api->tid | API_TID_BIT, api->ts + api->dur / 2,
			   "launch", "gpu");
		trace_flow(w, 'f', flow, e->pid | GPU_PID_BIT, gpu_tid(ev_gpu_dev_stream(e)), e->ts + e->dur / 2,
			   "launch", "gpu");
	}
	memory_counter(w, p, ord, n, live);
	err = 0;
out:
	free(ord);
	free(launch);
	hmap__free(named);
	hmap__free(live);
	return err;
}
