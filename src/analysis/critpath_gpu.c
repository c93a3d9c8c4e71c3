// SPDX-License-Identifier: MIT
/*
 * GPU edges of the critical-path graph: streams as tracks that run kernels and
 * copies, launch edges CPU -> stream, stream order, and synchronization edges
 * stream -> CPU (critpath.h, docs/offcpu.md).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "model/event.h"
#include "critpath.h"
#include "gpu.h"
#include "util/vec.h"

/* CUPTI's CUpti_ActivitySynchronizationType for cudaStreamSynchronize. */
#define CUPTI_SYNC_STREAM 3

static bool is_gpu_op(uint16_t k)
{
	return k == EVK_GPU_KERNEL || k == EVK_GPU_MEMCPY || k == EVK_GPU_MEMSET;
}

static int add_op(struct cp_track *t, const struct cp_gpu_op *op)
{
	struct cp_gpu_op *n = arr_push(t->ops, t->nops, t->opcap);


	if (!n)
		return -ENOMEM;
	*n = *op;
	cp_track_seen(t, op->start, op->end);
	return 0;
}

static int cmp_op(const void *a, const void *b)
{
	const struct cp_gpu_op *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->end < y->end ? -1 : x->end > y->end;
}

/* A stream track per (pid, device << 32 | stream); its ops by start. */
static int add_streams(const struct profile *p, struct cp_graph *g, const uint32_t *launch)
{
	struct hmap *idx = hmap__new(64);
	uint32_t next = 1;
	int err = 0;

	if (!idx)
		return -ENOMEM;
	for (size_t i = 0; i < p->events.n && !err; i++) {
		const struct event *e = &p->events.v[i];
		const struct event *api =
		    launch[i] != GPU_NO_LAUNCH ? &p->events.v[launch[i]] : NULL;
		struct cp_gpu_op op = {e->ts, e->ts + e->dur, (uint32_t)i, api ? api->stack : 0,
				       e->kind == EVK_GPU_KERNEL ? WAIT_GPU_COMPUTE
								 : WAIT_GPU_COPY};
		uint64_t t;

		if (!is_gpu_op(e->kind))
			continue;
		if (!hmap__get(idx, e->pid, ev_gpu_dev_stream(e), &t)) {
			int64_t n = critpath_add_track(g, CP_TRACK_GPU_STREAM, e->pid, next++);

			if (n < 0 || hmap__put(idx, e->pid, ev_gpu_dev_stream(e), (uint64_t)n)) {
				err = -ENOMEM;
				break;
			}
			t = (uint64_t)n;
			g->tracks[t].gpu_stream = ev_gpu_dev_stream(e);
		}
		err = add_op(&g->tracks[t], &op);
	}
	hmap__free(idx);
	for (size_t i = 0; i < g->ntracks; i++)
		if (g->tracks[i].nops > 1)
			qsort(g->tracks[i].ops, g->tracks[i].nops, sizeof(struct cp_gpu_op),
			      cmp_op);
	return err;
}

/*
 * The idle gap before each op: ended by its launch when the launch came after the stream's
 * previous op ended (or for the first op); by stream order otherwise (no edge: the gap is
 * the GPU's own latency, counted as launch overhead).
 */
static int add_launch_waits(const struct profile *p, struct cp_graph *g, uint32_t tr,
			    const uint32_t *launch)
{
	for (size_t k = 0; k < g->tracks[tr].nops; k++) {
		const struct cp_gpu_op *op = &g->tracks[tr].ops[k];
		uint64_t prev = k ? g->tracks[tr].ops[k - 1].end : 0;
		uint32_t li = launch[op->event];
		const struct event *api = li != GPU_NO_LAUNCH ? &p->events.v[li] : NULL;
		struct cp_wait w = {prev, prev, op->start, -1, op->stack, WAIT_GPU_LAUNCH};
		int64_t from;
		int err;

		if (api && (!k || api->ts >= prev)) {
			from = critpath_add_track(g, CP_TRACK_THREAD, api->pid, api->tid);
			if (from < 0)
				return (int)from;
			op = &g->tracks[tr].ops[k]; /* tracks may have moved */
			cp_track_seen(&g->tracks[from], api->ts, api->ts + api->dur);
			w.ready = api->ts < op->start ? api->ts : op->start;
			if (!k)
				w.start = w.ready;
			w.edge =
			    critpath_add_edge(g, &(struct cp_edge){(uint32_t)from, w.ready, tr,
								   w.ready, CP_EDGE_GPU_LAUNCH});
			if (w.edge < 0)
				return (int)w.edge;
		} else if (!api) {
			w.kind = WAIT_OTHER; /* nothing known started it */
		}
		if (w.end <= w.start)
			continue;
		err = critpath_add_wait(g, tr, &w);
		if (err)
			return err;
	}
	return 0;
}

/*
 * GPU ops of all streams by (pid, end, track), to find what a synchronization waited for;
 * a second copy by (pid, stream, end, track) for a synchronization of one stream.
 */
struct op_ref {
	uint32_t pid, track;
	uint64_t stream; /* 0 in the first copy (all streams), else as synced_stream gives it */
	uint64_t end;
};

static int cmp_ref(const void *a, const void *b)
{
	const struct op_ref *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->stream != y->stream)
		return x->stream < y->stream ? -1 : 1;
	if (x->end != y->end)
		return x->end < y->end ? -1 : 1;
	return x->track < y->track ? -1 : x->track > y->track;
}

/* Last ref of (pid, stream) ending in (from, to], or NULL. */
static const struct op_ref *last_end(const struct op_ref *v, size_t n, uint32_t pid,
				     uint64_t stream, uint64_t from, uint64_t to)
{
	size_t lo = 0, hi = n;

	while (lo < hi) { /* first ref > (pid, stream, to) */
		size_t mid = (lo + hi) / 2;

		if (v[mid].pid < pid ||
		    (v[mid].pid == pid &&
		     (v[mid].stream < stream || (v[mid].stream == stream && v[mid].end <= to))))
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo || v[lo - 1].pid != pid || v[lo - 1].stream != stream || v[lo - 1].end <= from)
		return NULL;
	return &v[lo - 1];
}

/* CUPTI's stream synchronization records by (pid, ts), as event indexes. */
struct syncs {
	const struct profile *p;
	uint32_t *v;
	size_t n;
};

static const struct profile *g_sort_p;

static int cmp_sync(const void *a, const void *b)
{
	const struct event *x = &g_sort_p->events.v[*(const uint32_t *)a],
			   *y = &g_sort_p->events.v[*(const uint32_t *)b];

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->ts < y->ts ? -1 : x->ts > y->ts;
}

static int syncs_init(const struct profile *p, struct syncs *s)
{
	s->p = p;
	s->n = 0;
	s->v = malloc((p->events.n + 1) * sizeof(*s->v));
	if (!s->v)
		return -ENOMEM;
	for (size_t i = 0; i < p->events.n; i++)
		if (p->events.v[i].kind == EVK_GPU_SYNC &&
		    ev_sync_type(&p->events.v[i]) == CUPTI_SYNC_STREAM)
			s->v[s->n++] = (uint32_t)i;
	g_sort_p = p;
	if (s->n > 1)
		qsort(s->v, s->n, sizeof(*s->v), cmp_sync);
	return 0;
}

/* The stream a cudaStreamSynchronize waited on, from CUPTI's record of it; 0 when unknown. */
static uint64_t synced_stream(const struct syncs *s, const struct event *call)
{
	size_t lo = 0, hi = s->n;
	const struct event *e;

	while (lo < hi) { /* first record >= (pid, ts) */
		size_t mid = (lo + hi) / 2;
		const struct event *m = &s->p->events.v[s->v[mid]];

		if (m->pid < call->pid || (m->pid == call->pid && m->ts < call->ts))
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == s->n)
		return 0;
	e = &s->p->events.v[s->v[lo]];
	if (e->pid != call->pid || e->ts + e->dur > call->ts + call->dur)
		return 0;
	return 1ULL << 32 | ev_gpu_stream(e); /* non-zero for stream 0 too */
}

static bool is_cpu_sync(const struct profile *p, const struct event *e)
{
	return e->kind == EVK_CUDA_API && CUDA_API_CAT(e->flags) == CUDA_CAT_SYNC &&
	       !(e->flags & CUDA_API_F_NESTED) && e->dur &&
	       !strstr(profile__str(p, e->name), "WaitEvent"); /* queues a wait, no CPU block */
}

/* The op that ended a synchronization call: the last to end inside it. */
static const struct op_ref *sync_target(const struct profile *p, const struct event *e,
					const struct op_ref *refs, const struct op_ref *by_stream,
					size_t nrefs, const struct syncs *syncs)
{
	const struct op_ref *r = last_end(refs, nrefs, e->pid, 0, e->ts, e->ts + e->dur);
	uint64_t stream;

	if (!r || !strstr(profile__str(p, e->name), "StreamSynchronize") ||
	    !(stream = synced_stream(syncs, e)))
		return r;
	/* Only that stream: the latest of its ops ending inside the call. */
	return last_end(by_stream, nrefs, e->pid, stream, e->ts, e->ts + e->dur);
}

static int add_sync_waits(const struct profile *p, struct cp_graph *g, uint8_t *has_sync)
{
	struct syncs syncs;
	struct op_ref *refs, *by_stream;
	size_t n = 0, k = 0;
	int err = syncs_init(p, &syncs);

	if (err)
		return err;

	for (size_t i = 0; i < g->ntracks; i++)
		n += g->tracks[i].nops;
	refs = malloc((n + 1) * sizeof(*refs));
	by_stream = malloc((n + 1) * sizeof(*by_stream));
	if (!refs || !by_stream) {
		free(refs);
		free(by_stream);
		free(syncs.v);
		return -ENOMEM;
	}
	for (size_t i = 0; i < g->ntracks; i++)
		for (size_t j = 0; j < g->tracks[i].nops; j++, k++) {
			refs[k] = (struct op_ref){g->tracks[i].pid, (uint32_t)i, 0,
						  g->tracks[i].ops[j].end};
			by_stream[k] = refs[k];
			by_stream[k].stream = 1ULL << 32 | (uint32_t)g->tracks[i].gpu_stream;
		}
	qsort(refs, n, sizeof(*refs), cmp_ref);
	qsort(by_stream, n, sizeof(*by_stream), cmp_ref);
	for (size_t i = 0; i < p->events.n && !err; i++) {
		const struct event *e = &p->events.v[i];
		const struct op_ref *r;
		struct cp_wait w;
		int64_t t;

		if (!is_cpu_sync(p, e))
			continue;
		t = critpath_add_track(g, CP_TRACK_THREAD, e->pid, e->tid);
		if (t < 0) {
			err = (int)t;
			break;
		}
		r = sync_target(p, e, refs, by_stream, n, &syncs);
		w = (struct cp_wait){e->ts, r ? r->end : e->ts, e->ts + e->dur,
				     -1,    e->stack,		WAIT_GPU_SYNC};
		if (r) {
			w.edge =
			    critpath_add_edge(g, &(struct cp_edge){r->track, r->end, (uint32_t)t,
								   r->end, CP_EDGE_GPU_SYNC});
			if (w.edge < 0)
				err = (int)w.edge;
		}
		has_sync[t] = 1;
		err = err ?: critpath_add_wait(g, (uint32_t)t, &w);
	}
	free(refs);
	free(by_stream);
	free(syncs.v);
	return err;
}

static int cmp_wait_start(const void *a, const void *b)
{
	const struct cp_wait *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/*
 * A thread blocked inside a synchronization call (a futex, a poll on the driver) was woken
 * by whatever the driver does when the GPU is done: the synchronization wait explains that
 * time better. Off-CPU waits inside one are dropped, those across its edges cut back.
 */
static void sync_over_offcpu(struct cp_track *t)
{
	struct cp_wait *sync = malloc((t->nwaits + 1) * sizeof(*sync)), *v = t->waits;
	size_t ns = 0, n = 0, k = 0;

	if (!sync)
		return; /* overlapping waits stay: the walk copes, less precisely */
	for (size_t i = 0; i < t->nwaits; i++)
		if (v[i].kind == WAIT_GPU_SYNC)
			sync[ns++] = v[i];
	qsort(sync, ns, sizeof(*sync), cmp_wait_start);
	qsort(v, t->nwaits, sizeof(*v), cmp_wait_start);
	for (size_t i = 0; i < t->nwaits; i++) {
		struct cp_wait w = v[i];

		if (w.kind != WAIT_GPU_SYNC) {
			while (k < ns && sync[k].end <= w.start)
				k++;
			if (k < ns && sync[k].start < w.end) {
				if (sync[k].start > w.start)
					w.end = sync[k].start;
				else if (sync[k].end < w.end)
					w.start = sync[k].end;
				else
					continue;
				if (w.ready < w.start)
					w.ready = w.start;
				if (w.ready > w.end)
					w.ready = w.end;
			}
		}
		v[n++] = w;
	}
	t->nwaits = n;
	free(sync);
}

int critpath_add_gpu(const struct profile *p, struct cp_graph *g)
{
	uint32_t *launch = NULL;
	uint8_t *has_sync = NULL;
	bool any = false;
	size_t nthreads;
	int err;

	for (size_t i = 0; i < p->events.n && !any; i++)
		any = p->events.v[i].kind == EVK_CUDA_API || is_gpu_op(p->events.v[i].kind);
	if (!any)
		return 0;
	err = gpu_join(p, &launch);
	if (!err)
		err = add_streams(p, g, launch);
	for (size_t i = 0, n = g->ntracks; i < n && !err; i++)
		if (g->tracks[i].kind == CP_TRACK_GPU_STREAM)
			err = add_launch_waits(p, g, (uint32_t)i, launch);
	/* One flag per track, threads included: every sync call may add one. */
	nthreads = g->ntracks;
	for (size_t i = 0; i < p->events.n; i++)
		nthreads += p->events.v[i].kind == EVK_CUDA_API;
	if (!err && !(has_sync = calloc(nthreads + 1, 1)))
		err = -ENOMEM;
	if (!err)
		err = add_sync_waits(p, g, has_sync);
	for (size_t i = 0; i < g->ntracks && !err; i++)
		if (has_sync[i])
			sync_over_offcpu(&g->tracks[i]);
	free(has_sync);
	free(launch);
	return err;
}
