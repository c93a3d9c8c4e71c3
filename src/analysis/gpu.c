// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/event.h"
#include "util/hmap.h"
#include "util/vec.h"
#include "gpu.h"

static bool is_gpu_kind(uint16_t k)
{
	return k == EVK_GPU_KERNEL || k == EVK_GPU_MEMCPY || k == EVK_GPU_MEMSET;
}

bool gpu_present(const struct profile *p)
{
	for (size_t i = 0; i < p->events.n; i++) {
		uint16_t k = p->events.v[i].kind;

		if (k == EVK_CUDA_API || is_gpu_kind(k))
			return true;
	}
	return false;
}

uint32_t gpu_launch_kernel_name(const struct profile *p, const struct event *api)
{
	const struct frame *f;
	uint32_t n;

	if (!api->stack2 || api->stack2 >= p->stacks.n)
		return 0;
	f = profile__loc_frames(p, p->stacks.v[api->stack2].loc, &n);
	return n ? f[n - 1].name : 0;
}

/* --- the join ----------------------------------------------------------------------------- */

static const struct profile *sort_p;

static int cmp_api(const void *a, const void *b)
{
	const struct event *x = &sort_p->events.v[*(const uint32_t *)a];
	const struct event *y = &sort_p->events.v[*(const uint32_t *)b];

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	return 0;
}

static bool launches_work(const struct event *e)
{
	unsigned cat = CUDA_API_CAT(e->flags);

	return e->kind == EVK_CUDA_API && !(e->flags & CUDA_API_F_NESTED) &&
	       (cat == CUDA_CAT_LAUNCH || cat == CUDA_CAT_MEMCPY || cat == CUDA_CAT_MEMSET ||
		cat == CUDA_CAT_GRAPH);
}

/*
 * A function name without what varies between the probed symbol and the name CUPTI gives its
 * callback: leading underscores (nvcc 13's __cudaLaunchKernel runs as cudaLaunchKernel) and
 * the _ptsz/_ptds/_vN suffixes. Hashed; 0 for no name.
 */
static uint64_t canon_name(const struct profile *p, uint32_t id)
{
	const char *s = id ? profile__str(p, id) : NULL;
	size_t n;
	uint64_t h = 1469598103934665603ULL;

	if (!s || !*s)
		return 0;
	while (*s == '_')
		s++;
	n = strlen(s);
	for (bool cut = true; cut;) {
		const char *u = n ? memrchr(s, '_', n) : NULL;
		size_t k = u ? (size_t)(u - s) : 0;

		cut = u && ((n - k == 5 && (!memcmp(u, "_ptsz", 5) || !memcmp(u, "_ptds", 5))) ||
			    (n - k > 2 && u[1] == 'v' && strspn(u + 2, "0123456789") >= n - k - 2));
		if (cut)
			n = k;
	}
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
	return h ? h : 1;
}

/*
 * The API call that a CUPTI callback ran inside: the last call of (pid, tid) that queues work
 * and began before the callback (idx sorted by (pid, tid, ts)). A timed call must still be
 * running at the callback. A call seen at entry only has no end: it must have begun at most
 * GPU_ENTRY_JOIN_NS before, be for the same function as the callback, and not yet be claimed by
 * an earlier callback for that function - a launch through code eprof does not probe (a
 * library's own static cudart) is not pinned on the thread's last probed launch.
 */
static uint32_t find_call(const struct profile *p, const uint32_t *idx, size_t n,
			  const struct event *corr, struct hmap *claimed)
{
	size_t lo = 0, hi = n;
	const struct event *e;
	uint64_t cn, one;

	while (lo < hi) { /* first entry > (pid, tid, ts) */
		size_t mid = lo + (hi - lo) / 2;

		e = &p->events.v[idx[mid]];
		if (e->pid < corr->pid || (e->pid == corr->pid && e->tid < corr->tid) ||
		    (e->pid == corr->pid && e->tid == corr->tid && e->ts <= corr->ts))
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return GPU_NO_LAUNCH;
	e = &p->events.v[idx[lo - 1]];
	if (e->pid != corr->pid || e->tid != corr->tid)
		return GPU_NO_LAUNCH;
	if (!(e->flags & CUDA_API_F_NODUR))
		return corr->ts <= e->ts + e->dur ? idx[lo - 1] : GPU_NO_LAUNCH;
	if (corr->ts - e->ts > GPU_ENTRY_JOIN_NS)
		return GPU_NO_LAUNCH;
	cn = canon_name(p, corr->name);
	if (cn && cn != canon_name(p, e->name))
		return GPU_NO_LAUNCH;
	if (hmap__get(claimed, idx[lo - 1], cn, &one))
		return GPU_NO_LAUNCH;
	return hmap__put(claimed, idx[lo - 1], cn, 1) ? GPU_NO_LAUNCH : idx[lo - 1];
}

static bool is_corr(const struct event *e)
{
	return e->kind == EVK_CUDA_CORR;
}

int gpu_join(const struct profile *p, uint32_t **launch)
{
	uint32_t *out = malloc((p->events.n + 1) * sizeof(*out)), *idx = NULL, *corrs = NULL;
	struct hmap *by_corr = hmap__new(1024), *claimed = hmap__new(1024);
	size_t n = 0, nc = 0;
	int err = -ENOMEM;

	if (!out || !by_corr || !claimed)
		goto out;
	for (size_t i = 0; i < p->events.n; i++)
		out[i] = GPU_NO_LAUNCH;
	idx = malloc((p->events.n + 1) * sizeof(*idx));
	corrs = malloc((p->events.n + 1) * sizeof(*corrs));
	if (!idx || !corrs)
		goto out;
	for (size_t i = 0; i < p->events.n; i++) {
		if (launches_work(&p->events.v[i]))
			idx[n++] = i;
		else if (is_corr(&p->events.v[i]))
			corrs[nc++] = i;
	}
	sort_p = p;
	qsort(idx, n, sizeof(*idx), cmp_api);
	/* callbacks in time order per thread: the first one after a call claims it */
	qsort(corrs, nc, sizeof(*corrs), cmp_api);
	for (size_t i = 0; i < nc; i++) {
		const struct event *e = &p->events.v[corrs[i]];
		uint64_t have;
		uint32_t call;

		/* runtime and driver callbacks of one call can share a correlation id */
		if (hmap__get(by_corr, e->pid, ev_gpu_corr(e), &have))
			continue;
		call = find_call(p, idx, n, e, claimed);
		if (call != GPU_NO_LAUNCH && hmap__put(by_corr, e->pid, ev_gpu_corr(e), call))
			goto out;
	}
	for (size_t i = 0; i < p->events.n; i++) {
		const struct event *e = &p->events.v[i];
		uint64_t call;

		if (is_gpu_kind(e->kind) && ev_gpu_corr(e) &&
		    hmap__get(by_corr, e->pid, ev_gpu_corr(e), &call))
			out[i] = (uint32_t)call;
	}
	*launch = out;
	out = NULL;
	err = 0;
out:
	free(out);
	free(idx);
	free(corrs);
	hmap__free(by_corr);
	hmap__free(claimed);
	return err;
}

/* --- aggregation -------------------------------------------------------------------------- */

struct acc {
	struct hmap *api, *kern, *stream, *dev, *mem, *launched, *cfg;
	size_t capi, ckern, cstream, cdev, claunched, ccfg;
	const struct gpu_device_props *last; /* the device of the previous kernel */
};

static int add_launched(struct gpu_summary *s, struct acc *a, uint32_t name, uint64_t dur,
			bool timed)
{
	struct gpu_kernel_stat *k;
	uint64_t i;

	if (!hmap__get(a->launched, name, 0, &i)) {
		if (arr_grow(s->launched, a->claunched, s->nlaunched + 1))
			return -ENOMEM;
		i = s->nlaunched++;
		memset(&s->launched[i], 0, sizeof(s->launched[i]));
		s->launched[i].name = name;
		s->launched[i].min_ns = UINT64_MAX;
		if (hmap__put(a->launched, name, 0, i))
			return -ENOMEM;
	}
	k = &s->launched[i];
	k->count++;
	if (!timed)
		return 0;
	k->timed++;
	k->total_ns += dur;
	if (dur < k->min_ns)
		k->min_ns = dur;
	if (dur > k->max_ns)
		k->max_ns = dur;
	return 0;
}

static int add_api(const struct profile *p, struct gpu_summary *s, struct acc *a,
		   const struct event *e)
{
	struct gpu_api_stat *st;
	unsigned cat = CUDA_API_CAT(e->flags);
	uint64_t i;

	if (!hmap__get(a->api, e->name, 0, &i)) {
		if (arr_grow(s->api, a->capi, s->napi + 1))
			return -ENOMEM;
		i = s->napi++;
		memset(&s->api[i], 0, sizeof(s->api[i]));
		s->api[i].name = e->name;
		s->api[i].cat = cat;
		if (hmap__put(a->api, e->name, 0, i))
			return -ENOMEM;
	}
	st = &s->api[i];
	st->count++;
	st->total_ns += e->dur;
	if (e->dur > st->max_ns)
		st->max_ns = e->dur;
	if (e->flags & CUDA_API_F_FAILED) {
		st->errors++;
		st->last_error = ev_api_result(e);
	}
	st->bytes += ev_api_bytes(e);
	if (e->flags & CUDA_API_F_NESTED)
		return 0; /* time and bytes already in the outer call */
	s->api_calls++;
	if (cat == CUDA_CAT_LAUNCH || cat == CUDA_CAT_GRAPH) {
		uint32_t kn = gpu_launch_kernel_name(p, e);
		bool timed = !(e->flags & CUDA_API_F_NODUR);

		s->launches++;
		s->launches_timed += timed;
		s->launch_ns += e->dur;
		if (cat == CUDA_CAT_LAUNCH)
			return add_launched(s, a, kn, e->dur, timed); /* 0: unnamed */
	} else if (cat == CUDA_CAT_SYNC) {
		s->sync_calls++;
		s->sync_ns += e->dur;
	} else if (cat == CUDA_CAT_MEMCPY) {
		struct gpu_copy_stat *c = &s->copies[CUDA_API_DIR(e->flags) % GPU_COPY_DIR_MAX];

		c->api_count++;
		c->api_bytes += ev_api_bytes(e);
		c->api_ns += e->dur;
	}
	return 0;
}

/* GPU memory from cudaMalloc & co: live bytes per (pid, address), peak and never freed. */
static int track_mem(struct gpu_summary *s, struct acc *a, const struct profile *p,
		     const struct event *e)
{
	unsigned cat = CUDA_API_CAT(e->flags);
	const char *fn = profile__str(p, e->name);
	uint64_t sz;

	if ((e->flags & (CUDA_API_F_FAILED | CUDA_API_F_NESTED)) || !ev_api_addr(e))
		return 0;
	if (!strcmp(fn, "cuMemMap") || !strcmp(fn, "cuMemUnmap") || strstr(fn, "Host"))
		return 0; /* mapping moves no memory; pinned host memory is not GPU memory */
	if (cat == CUDA_CAT_ALLOC) {
		if (hmap__get(a->mem, e->pid, ev_api_addr(e), &sz) && sz)
			return 0; /* seen twice (a missed free): keep the first */
		s->mem_live += ev_api_bytes(e);
		s->mem_live_allocs++;
		if (s->mem_live > s->mem_peak)
			s->mem_peak = s->mem_live;
		return hmap__put(a->mem, e->pid, ev_api_addr(e), ev_api_bytes(e) ? ev_api_bytes(e) : 1);
	}
	if (cat == CUDA_CAT_FREE && hmap__get(a->mem, e->pid, ev_api_addr(e), &sz) && sz) {
		s->mem_live -= sz == 1 ? 0 : sz;
		s->mem_live_allocs--;
		return hmap__put(a->mem, e->pid, ev_api_addr(e), 0);
	}
	return 0;
}

/*
 * The launch configuration of a kernel event (flags = registers per thread, tid = shared
 * memory per block: docs/file-format.md). Configurations beyond what any GPU allows (they
 * would not fit the key) are kept as one entry with no figure.
 */
static int add_config(struct gpu_summary *s, struct acc *a, const struct event *e)
{
	uint32_t dev = ev_gpu_device(e), threads = ev_kernel_threads(e), regs = ev_kernel_regs(e);
	uint32_t smem = ev_kernel_smem(e);
	struct gpu_kernel_config *c;
	uint64_t i;

	if (threads > 0xffff || smem > 0xffffff || dev > 0xff)
		regs = threads = smem = dev = 0;
	if (!hmap__get(a->cfg, (uint64_t)e->name << 32 | e->pid,
		       (uint64_t)dev << 56 | (uint64_t)smem << 32 | regs << 16 | threads, &i)) {
		const struct gpu_device_props *d = a->last;

		if (arr_grow(s->configs, a->ccfg, s->nconfigs + 1))
			return -ENOMEM;
		i = s->nconfigs++;
		c = &s->configs[i];
		*c = (struct gpu_kernel_config){.name = e->name, .pid = e->pid, .device = dev,
						.threads = threads, .regs = regs, .smem = smem};
		if (!d || d->pid != e->pid || d->device != dev)
			d = a->last = gpu_device_find(s->props, s->nprops, e->pid, dev);
		c->occ_known = !gpu_occupancy(d, threads, regs, smem, &c->occ);
		if (hmap__put(a->cfg, (uint64_t)e->name << 32 | e->pid,
			      (uint64_t)dev << 56 | (uint64_t)smem << 32 | regs << 16 | threads, i))
			return -ENOMEM;
	}
	c = &s->configs[i];
	c->count++;
	c->total_ns += e->dur;
	return 0;
}

static int add_kernel(struct gpu_summary *s, struct acc *a, const struct event *e)
{
	struct gpu_kernel_stat *k;
	uint64_t i;

	if (!hmap__get(a->kern, e->name, 0, &i)) {
		if (arr_grow(s->kernels, a->ckern, s->nkernels + 1))
			return -ENOMEM;
		i = s->nkernels++;
		memset(&s->kernels[i], 0, sizeof(s->kernels[i]));
		s->kernels[i].name = e->name;
		s->kernels[i].min_ns = UINT64_MAX;
		if (hmap__put(a->kern, e->name, 0, i))
			return -ENOMEM;
	}
	k = &s->kernels[i];
	k->count++;
	k->timed++;
	k->total_ns += e->dur;
	if (e->dur < k->min_ns)
		k->min_ns = e->dur;
	if (e->dur > k->max_ns)
		k->max_ns = e->dur;
	s->kernel_ns += e->dur;
	return add_config(s, a, e);
}

static int cmp_config(const void *a, const void *b)
{
	const struct gpu_kernel_config *x = a, *y = b;

	if (x->name != y->name)
		return x->name < y->name ? -1 : 1;
	if (x->total_ns != y->total_ns)
		return x->total_ns < y->total_ns ? 1 : -1;
	return (x->count < y->count) - (x->count > y->count);
}

/*
 * Per kernel: the occupancy of its configurations weighted by their GPU time (by their
 * launches when none took any), and the limiter of the one with the most time. No figure
 * when a configuration has none: part of the kernel's time would be left out silently.
 */
static void kernel_occupancy(struct gpu_summary *s, struct acc *a)
{
	if (s->nconfigs)
		qsort(s->configs, s->nconfigs, sizeof(*s->configs), cmp_config);
	for (size_t i = 0; i < s->nconfigs;) {
		struct gpu_kernel_stat *k;
		double sum = 0, w = 0;
		bool known = true, by_time;
		uint64_t ki;
		size_t j;

		for (j = i; j < s->nconfigs && s->configs[j].name == s->configs[i].name; j++)
			;
		if (!hmap__get(a->kern, s->configs[i].name, 0, &ki)) {
			i = j;
			continue;
		}
		k = &s->kernels[ki];
		k->cfg_first = i;
		k->ncfg = j - i;
		by_time = k->total_ns > 0;
		for (size_t c = i; c < j; c++) {
			const struct gpu_kernel_config *cf = &s->configs[c];
			double cw = by_time ? (double)cf->total_ns : (double)cf->count;

			known &= cf->occ_known;
			sum += cf->occ.occupancy * cw;
			w += cw;
		}
		k->occ_known = known && w > 0;
		k->occupancy = k->occ_known ? sum / w : 0;
		k->limiter = k->occ_known ? s->configs[i].occ.limiter : GPU_OCC_UNKNOWN;
		i = j;
	}
}

struct ival {
	uint64_t start, end;
	uint32_t pid, dev;
	uint64_t ds;
};

static int cmp_ival(const void *a, const void *b)
{
	const struct ival *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->ds != y->ds)
		return x->ds < y->ds ? -1 : 1;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return 0;
}

static int cmp_ival_dev(const void *a, const void *b)
{
	const struct ival *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return 0;
}

static void note_gap(struct gpu_device_stat *d, uint64_t gap, uint64_t at)
{
	for (int i = 0; i < GPU_MAX_GAPS; i++) {
		if (gap > d->gaps[i]) {
			memmove(&d->gaps[i + 1], &d->gaps[i], (GPU_MAX_GAPS - 1 - i) * 8);
			memmove(&d->gap_at[i + 1], &d->gap_at[i], (GPU_MAX_GAPS - 1 - i) * 8);
			d->gaps[i] = gap;
			d->gap_at[i] = at;
			return;
		}
	}
}

/* A start (+1) or an end (-1) of a stream's interval, for the overlap sweep. */
struct edge {
	uint64_t ts;
	int32_t delta;
	uint32_t stream; /* index in s->streams */
};

static int cmp_edge(const void *a, const void *b)
{
	const struct edge *x = a, *y = b;

	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	return x->delta - y->delta; /* ends first: back-to-back work does not overlap */
}

static size_t stream_index(const struct gpu_summary *s, uint32_t pid, uint64_t ds)
{
	size_t lo = 0, hi = s->nstreams;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		const struct gpu_stream_stat *st = &s->streams[mid];

		if (st->pid < pid || (st->pid == pid && st->dev_stream < ds))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * Per stream, the part of its busy time during which another stream of the same device
 * (and process) was busy: a sweep over the starts and ends of the device's intervals
 * iv[0..n), counting how many of its streams are busy. Streams: [first, last).
 */
static int stream_overlap(struct gpu_summary *s, const struct ival *iv, size_t n, size_t first,
			  size_t last)
{
	size_t nstreams = last - first, busy = 0, ne = 0;
	struct edge *e = malloc(2 * n * sizeof(*e));
	uint32_t *depth = calloc(nstreams ? nstreams : 1, sizeof(*depth));
	uint64_t *mark = malloc((nstreams ? nstreams : 1) * sizeof(*mark)), shared = 0;

	if (!e || !depth || !mark) {
		free(e);
		free(depth);
		free(mark);
		return -ENOMEM;
	}
	for (size_t k = 0; k < n; k++) {
		uint32_t idx = (uint32_t)(stream_index(s, iv[k].pid, iv[k].ds) - first);

		if (iv[k].end <= iv[k].start)
			continue; /* empty, or an end that wrapped (a hostile file) */
		e[ne++] = (struct edge){ iv[k].start, 1, idx };
		e[ne++] = (struct edge){ iv[k].end, -1, idx };
	}
	qsort(e, ne, sizeof(*e), cmp_edge);
	/*
	 * shared: the time so far with two or more streams busy. A stream's overlap is what
	 * shared grew by between the edges where it became busy and idle (mark: shared then),
	 * so an edge costs O(1) however many streams the device has.
	 */
	for (size_t k = 0; k < ne; k++) {
		uint32_t m = e[k].stream;

		if (k && busy >= 2 && e[k].ts > e[k - 1].ts)
			shared += e[k].ts - e[k - 1].ts;
		if (m >= nstreams)
			continue;
		if (e[k].delta > 0 && depth[m]++ == 0) {
			busy++;
			mark[m] = shared;
		} else if (e[k].delta < 0 && depth[m] && --depth[m] == 0) {
			busy--;
			s->streams[first + m].overlap_ns += shared - mark[m];
		}
	}
	free(e);
	free(depth);
	free(mark);
	return 0;
}

/* Busy time as the union of intervals, per stream (sorted by stream) and per device. */
static int busy_times(const struct profile *p, struct gpu_summary *s, struct ival *iv, size_t n,
		      struct acc *a)
{
	uint64_t wstart = profile__meta_u64(p, "start_ns", 0),
		 wend = profile__meta_u64(p, "end_ns", 0);
	size_t i = 0;

	qsort(iv, n, sizeof(*iv), cmp_ival);
	while (i < n) {
		struct gpu_stream_stat *st;
		uint64_t end = 0;
		size_t j;

		if (arr_grow(s->streams, a->cstream, s->nstreams + 1))
			return -ENOMEM;
		st = &s->streams[s->nstreams++];
		memset(st, 0, sizeof(*st));
		st->pid = iv[i].pid;
		st->dev_stream = iv[i].ds;
		for (j = i; j < n && iv[j].pid == iv[i].pid && iv[j].ds == iv[i].ds; j++) {
			uint64_t b = iv[j].start > end ? iv[j].start : end;

			st->count++;
			if (iv[j].end > b)
				st->busy_ns += iv[j].end - b;
			if (iv[j].end > end)
				end = iv[j].end;
		}
		i = j;
	}
	qsort(iv, n, sizeof(*iv), cmp_ival_dev);
	for (i = 0; i < n;) {
		struct gpu_device_stat *d;
		uint64_t end = 0;
		size_t j;

		if (arr_grow(s->devices, a->cdev, s->ndevices + 1))
			return -ENOMEM;
		d = &s->devices[s->ndevices++];
		memset(d, 0, sizeof(*d));
		d->pid = iv[i].pid;
		d->device = iv[i].dev;
		d->first_ns = iv[i].start;
		for (j = i; j < n && iv[j].pid == iv[i].pid && iv[j].dev == iv[i].dev; j++) {
			uint64_t b = iv[j].start > end ? iv[j].start : end;

			if (end && iv[j].start > end)
				note_gap(d, iv[j].start - end, end);
			if (iv[j].end > b)
				d->busy_ns += iv[j].end - b;
			if (iv[j].end > end)
				end = iv[j].end;
		}
		d->last_ns = end;
		d->window_ns = wend > wstart && wstart <= d->first_ns ? wend - wstart
								      : d->last_ns - d->first_ns;
		if (d->window_ns < d->busy_ns)
			d->window_ns = d->busy_ns;
		/* the device's streams are contiguous in s->streams (sorted by pid, device, stream) */
		size_t first = stream_index(s, d->pid, (uint64_t)d->device << 32), last = first;

		for (; last < s->nstreams && s->streams[last].pid == d->pid &&
		       (s->streams[last].dev_stream >> 32) == d->device;
		     last++)
			d->overlap_ns += s->streams[last].busy_ns;
		d->overlap_ns = d->overlap_ns > d->busy_ns ? d->overlap_ns - d->busy_ns : 0;
		if (d->overlap_ns) {
			int err = stream_overlap(s, iv + i, j - i, first, last);

			if (err)
				return err;
		}
		i = j;
	}
	return 0;
}

static int cmp_api_total(const void *a, const void *b)
{
	const struct gpu_api_stat *x = a, *y = b;

	return x->total_ns != y->total_ns ? (x->total_ns < y->total_ns ? 1 : -1)
					  : (x->count < y->count) - (x->count > y->count);
}

static int cmp_kernel_total(const void *a, const void *b)
{
	const struct gpu_kernel_stat *x = a, *y = b;

	return x->total_ns != y->total_ns ? (x->total_ns < y->total_ns ? 1 : -1)
					  : (x->count < y->count) - (x->count > y->count);
}

static int analyze_events(const struct profile *p, struct gpu_summary *s, struct acc *a,
			  struct ival *iv, size_t *niv, uint32_t *order)
{
	size_t norder = 0;
	int err;

	for (size_t i = 0; i < p->events.n; i++) {
		const struct event *e = &p->events.v[i];

		if (e->kind == EVK_CUDA_API) {
			err = add_api(p, s, a, e);
			if (err)
				return err;
			order[norder++] = i;
		} else if (is_gpu_kind(e->kind)) {
			s->have_activity = true;
			s->gpu_events++;
			iv[*niv] = (struct ival){e->ts, e->ts + e->dur, e->pid, ev_gpu_device(e),
						 ev_gpu_dev_stream(e)};
			(*niv)++;
			if (e->kind == EVK_GPU_KERNEL) {
				err = add_kernel(s, a, e);
			} else if (e->kind == EVK_GPU_MEMCPY) {
				struct gpu_copy_stat *c =
				    &s->copies[(ev_copy_dir(e) & 0xf) % GPU_COPY_DIR_MAX];

				c->count++;
				c->bytes += ev_copy_bytes(e);
				c->total_ns += e->dur;
				err = 0;
			}
			if (err)
				return err;
		}
	}
	/* Memory in time order: the recorder appends events per ring read, not sorted. */
	profile__sort_events(p, order, norder);
	for (size_t i = 0; i < norder; i++) {
		err = track_mem(s, a, p, &p->events.v[order[i]]);
		if (err)
			return err;
	}
	return 0;
}

/*
 * Joined activities, and a check of the join where both sides name the kernel: the launch
 * call's kernel (its host stub or function handle) against the kernel CUPTI ran.
 */
/* A kernel name the recorder could read only in part ends with an ellipsis. */
static bool name_cut(const char *s)
{
	size_t n = strlen(s);

	return n >= 3 && !strcmp(s + n - 3, "\u2026");
}

static void count_joined(const struct profile *p, struct gpu_summary *s, const uint32_t *launch)
{
	for (size_t i = 0; i < p->events.n; i++) {
		const struct event *e = &p->events.v[i];
		uint32_t kn;

		if (launch[i] == GPU_NO_LAUNCH) {
			s->before_attach += e->kind == EVK_GPU_KERNEL && ev_kernel_before_attach(e);
			continue;
		}
		s->joined++;
		if (e->kind != EVK_GPU_KERNEL)
			continue;
		kn = gpu_launch_kernel_name(p, &p->events.v[launch[i]]);
		if (!kn || !e->name || profile__str(p, kn)[0] == '[' || name_cut(profile__str(p, kn)))
			continue; /* a graph launch, a launch whose kernel has no name or a cut one */
		s->joined_checked++;
		s->joined_mismatch += strcmp(profile__str(p, kn), profile__str(p, e->name)) != 0;
	}
}

int gpu_analyze(const struct profile *p, struct gpu_summary *s)
{
	struct acc a = {0};
	struct ival *iv = malloc((p->events.n + 1) * sizeof(*iv));
	uint32_t *order = malloc((p->events.n + 1) * sizeof(*order)), *launch = NULL;
	size_t niv = 0;
	int err = -ENOMEM;

	memset(s, 0, sizeof(*s));
	a.api = hmap__new(64);
	a.kern = hmap__new(256);
	a.mem = hmap__new(256);
	a.launched = hmap__new(64);
	a.cfg = hmap__new(256);
	if (!iv || !order || !a.api || !a.kern || !a.mem || !a.launched || !a.cfg)
		goto out;
	err = gpu_devices_load(p, &s->props, &s->nprops);
	if (!err)
		err = analyze_events(p, s, &a, iv, &niv, order);
	if (!err)
		kernel_occupancy(s, &a);
	if (!err)
		err = busy_times(p, s, iv, niv, &a);
	if (!err && s->have_activity)
		err = gpu_join(p, &launch);
	if (!err && launch)
		count_joined(p, s, launch);
	if (!err) { /* qsort wants a non-NULL base even for 0 elements */
		if (s->napi)
			qsort(s->api, s->napi, sizeof(*s->api), cmp_api_total);
		if (s->nkernels)
			qsort(s->kernels, s->nkernels, sizeof(*s->kernels), cmp_kernel_total);
		if (s->nlaunched)
			qsort(s->launched, s->nlaunched, sizeof(*s->launched), cmp_kernel_total);
	}
out:
	if (err)
		gpu_summary_free(s);
	free(launch);
	free(iv);
	free(order);
	hmap__free(a.api);
	hmap__free(a.kern);
	hmap__free(a.mem);
	hmap__free(a.launched);
	hmap__free(a.cfg);
	return err;
}

void gpu_summary_free(struct gpu_summary *s)
{
	free(s->api);
	free(s->kernels);
	free(s->streams);
	free(s->devices);
	free(s->launched);
	free(s->configs);
	free(s->props);
	s->configs = NULL;
	s->props = NULL;
	s->nconfigs = s->nprops = 0;
	s->launched = NULL;
	s->nlaunched = 0;
	s->api = NULL;
	s->kernels = NULL;
	s->streams = NULL;
	s->devices = NULL;
	s->napi = s->nkernels = s->nstreams = s->ndevices = 0;
}

/* --- GPU time as samples for the stack readers ------------------------------------------- */

static int64_t leaf_on(struct profile *p, uint32_t stack, const char *prefix, const char *name)
{
	char buf[1100];
	int64_t loc;

	snprintf(buf, sizeof(buf), "%s %s", prefix, name && *name ? name : "[unnamed]");
	loc = profile__special(p, buf);
	if (loc < 0)
		return loc;
	return profile__stack_child(p, stack, (uint32_t)loc);
}

const char *gpu_activity_name(const struct profile *p, const struct event *e, char *buf, size_t len)
{
	if (e->kind == EVK_GPU_KERNEL)
		return *profile__str(p, e->name) ? profile__str(p, e->name) : "[unnamed]";
	snprintf(buf, len, "%s %s", e->kind == EVK_GPU_MEMSET ? "memset" : "memcpy",
		 e->kind == EVK_GPU_MEMSET ? "" : gpu_copy_dir_name(e->flags & 0xf));
	return buf;
}

int64_t gpu_to_samples(struct profile *p, enum gpu_weight w)
{
	uint32_t *launch = NULL;
	struct sample *v;
	size_t n = 0;
	int64_t err = 0, none = 0, before = 0;
	char buf[64];

	v = calloc(p->events.n + 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	if (w == GPU_WEIGHT_GPU_NS && gpu_join(p, &launch)) {
		free(v);
		return -ENOMEM;
	}
	for (size_t i = 0; i < p->events.n && err >= 0; i++) {
		const struct event *e = &p->events.v[i];
		const struct event *api = NULL;
		uint32_t base;

		if (w == GPU_WEIGHT_API_NS) {
			if (e->kind != EVK_CUDA_API || (e->flags & CUDA_API_F_NESTED))
				continue;
			err = leaf_on(p, e->stack, "[cuda]", profile__str(p, e->name));
			if (err > 0)
				v[n++] = (struct sample){e->ts, e->pid,	       e->tid,
							 0,	(uint32_t)err, e->dur ? e->dur : 1};
			continue;
		}
		if (!is_gpu_kind(e->kind))
			continue;
		if (launch[i] != GPU_NO_LAUNCH)
			api = &p->events.v[launch[i]];
		if (api && api->stack) {
			base = api->stack;
		} else if (!api && e->kind == EVK_GPU_KERNEL && ev_kernel_before_attach(e)) {
			/* record -p: launched before the collector attached (no API record) */
			if (!before)
				before = profile__special(p, "[launched before attach]");
			if (before < 0) {
				err = before;
				break;
			}
			base = (uint32_t)profile__stack_child(p, 0, (uint32_t)before);
		} else {
			if (!none)
				none = profile__special(p, "[no launch stack]");
			if (none < 0) {
				err = none;
				break;
			}
			base = (uint32_t)profile__stack_child(p, 0, (uint32_t)none);
		}
		err = leaf_on(p, base, "[gpu]", gpu_activity_name(p, e, buf, sizeof(buf)));
		if (err > 0)
			v[n++] = (struct sample){e->ts, e->pid,	       api ? api->tid : e->pid,
						 0,	(uint32_t)err, e->dur ? e->dur : 1};
	}
	free(launch);
	if (err < 0) {
		free(v);
		return err;
	}
	free(p->samples.v);
	p->samples.v = v;
	p->samples.n = n;
	p->samples.cap = p->events.n + 1;
	return (int64_t)n;
}
