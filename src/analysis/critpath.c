// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <string.h>

#include <linux/types.h>

#include "model/event.h"
#include "model/offcpu_event.h"
#include "critpath.h"
#include "gpu.h"
#include "stacks.h"
#include "util/vec.h"

#define CP_MAX_STEPS 50000000ULL
#define CP_MAX_FRAMES 1024

int64_t critpath_find_track(const struct cp_graph *g, uint8_t kind, uint32_t pid, uint32_t tid)
{
	uint64_t v;

	if (!g->track_idx || !hmap__get(g->track_idx, kind, (uint64_t)pid << 32 | tid, &v))
		return -ENOENT;
	return (int64_t)v;
}

int64_t critpath_add_track(struct cp_graph *g, uint8_t kind, uint32_t pid, uint32_t tid)
{
	int64_t t = critpath_find_track(g, kind, pid, tid);
	struct cp_track *tr;

	if (t >= 0)
		return t;
	if (!g->track_idx && !(g->track_idx = hmap__new(64)))
		return -ENOMEM;
	tr = arr_push(g->tracks, g->ntracks, g->cap);
	if (!tr)
		return -ENOMEM;
	tr->kind = kind;
	tr->pid = pid;
	tr->tid = tid;
	tr->t_first = UINT64_MAX;
	if (hmap__put(g->track_idx, kind, (uint64_t)pid << 32 | tid, g->ntracks - 1))
		return -ENOMEM;
	return (int64_t)g->ntracks - 1;
}

int64_t critpath_add_edge(struct cp_graph *g, const struct cp_edge *e)
{
	struct cp_edge *n = arr_push(g->edges, g->nedges, g->ecap);

	if (!n)
		return -ENOMEM;
	*n = *e;
	return (int64_t)g->nedges - 1;
}

int critpath_add_wait(struct cp_graph *g, uint32_t track, const struct cp_wait *w)
{
	struct cp_track *t = &g->tracks[track];

	struct cp_wait *n = arr_push(t->waits, t->nwaits, t->cap);

	if (!n)
		return -ENOMEM;
	*n = *w;
	cp_track_seen(t, w->start, w->end);
	return 0;
}

static int cmp_wait(const void *a, const void *b)
{
	const struct cp_wait *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

static const struct sample *g_cp_samples;

static int cmp_sample_idx(const void *a, const void *b)
{
	uint64_t x = g_cp_samples[*(const uint32_t *)a].ts,
		 y = g_cp_samples[*(const uint32_t *)b].ts;

	return x < y ? -1 : x > y;
}

int critpath_finalize(struct cp_graph *g)
{
	for (size_t i = 0; i < g->ntracks; i++) {
		struct cp_track *t = &g->tracks[i];

		if (t->nwaits > 1)
			qsort(t->waits, t->nwaits, sizeof(*t->waits), cmp_wait);
		if (t->nsamples > 1 && g->p) {
			g_cp_samples = g->p->samples.v;
			qsort(t->samples, t->nsamples, sizeof(*t->samples), cmp_sample_idx);
		}
		if (t->t_first == UINT64_MAX)
			t->t_first = t->t_last;
	}
	return 0;
}

static int add_samples(const struct profile *p, struct cp_graph *g)
{
	size_t *count;

	for (size_t i = 0; i < p->samples.n; i++) {
		const struct sample *s = &p->samples.v[i];
		int64_t t = critpath_add_track(g, CP_TRACK_THREAD, s->pid, s->tid);

		if (t < 0)
			return (int)t;
		cp_track_seen(&g->tracks[t], s->ts > s->weight ? s->ts - s->weight : s->ts, s->ts);
		g->tracks[t].nsamples++;
	}
	count = calloc(g->ntracks ? g->ntracks : 1, sizeof(*count));
	if (!count)
		return -ENOMEM;
	for (size_t i = 0; i < g->ntracks; i++) {
		g->tracks[i].samples = malloc((g->tracks[i].nsamples + 1) * sizeof(uint32_t));
		if (!g->tracks[i].samples) {
			free(count);
			return -ENOMEM;
		}
	}
	for (size_t i = 0; i < p->samples.n; i++) {
		int64_t t = critpath_find_track(g, CP_TRACK_THREAD, p->samples.v[i].pid,
						p->samples.v[i].tid);

		g->tracks[t].samples[count[t]++] = (uint32_t)i;
	}
	free(count);
	return 0;
}

static int add_offcpu(const struct profile *p, struct cp_graph *g)
{
	/* Tracks first, so a waker seen only later in the table is known. */
	for (size_t i = 0; i < p->events.n; i++) {
		const struct event *e = &p->events.v[i];

		if (e->kind == EVK_OFFCPU &&
		    critpath_add_track(g, CP_TRACK_THREAD, e->pid, e->tid) < 0)
			return -ENOMEM;
	}
	for (size_t i = 0; i < p->events.n; i++) {
		const struct event *e = &p->events.v[i];
		struct cp_wait w = {
		    .start = e->ts, .end = e->ts + e->dur, .edge = -1, .stack = e->stack};
		int64_t t, from;
		int err;

		if (e->kind != EVK_OFFCPU)
			continue;
		t = critpath_find_track(g, CP_TRACK_THREAD, e->pid, e->tid);
		w.ready = offcpu_ready_ts(e);
		w.kind = offcpu_classify(p, e);
		from = ev_off_waker_tid(e) ? critpath_find_track(g, CP_TRACK_THREAD,
								  ev_off_waker_pid(e),
								  ev_off_waker_tid(e))
					   : -1;
		if (from >= 0 && from != t) {
			struct cp_edge ed = {(uint32_t)from, w.ready, (uint32_t)t, w.ready,
					     (e->flags & OFFEV_STATE_MASK) == OFFEV_NEW
						 ? CP_EDGE_CREATE
						 : CP_EDGE_WAKEUP};

			w.edge = critpath_add_edge(g, &ed);
			if (w.edge < 0)
				return (int)w.edge;
			/* The waker was alive then, whatever else is known of it. */
			cp_track_seen(&g->tracks[from], w.ready, w.ready);
		}
		err = critpath_add_wait(g, (uint32_t)t, &w);
		if (err)
			return err;
	}
	return 0;
}

int critpath_build(const struct profile *p, struct cp_graph *g)
{
	int err;

	memset(g, 0, sizeof(*g));
	g->p = p;
	err = add_samples(p, g);
	if (!err)
		err = add_offcpu(p, g);
	if (!err)
		err = critpath_add_gpu(p, g);
	if (err) {
		critpath_free(g);
		return err;
	}
	for (size_t i = 0; i < p->procs.n; i++) {
		const struct process *pr = &p->procs.v[i];
		int64_t t = critpath_find_track(g, CP_TRACK_THREAD, pr->pid, pr->pid);

		if (t >= 0 && pr->exit_ts)
			cp_track_seen(&g->tracks[t], g->tracks[t].t_first, pr->exit_ts);
		/* A main thread lives from its process's start (launch or attach). */
		if (t >= 0 && pr->start_ts)
			cp_track_seen(&g->tracks[t], pr->start_ts, g->tracks[t].t_last);
	}
	critpath_finalize(g);
	g->t_start = profile__meta_u64(p, "start_ns", 0);
	g->t_end = profile__meta_u64(p, "end_ns", 0);
	for (size_t i = 0; i < g->ntracks; i++) {
		if (!g->t_start || g->tracks[i].t_first < g->t_start)
			g->t_start = g->tracks[i].t_first;
		if (g->tracks[i].t_last > g->t_end)
			g->t_end = g->tracks[i].t_last;
	}
	return 0;
}

void critpath_free(struct cp_graph *g)
{
	for (size_t i = 0; i < g->ntracks; i++) {
		free(g->tracks[i].waits);
		free(g->tracks[i].samples);
		free(g->tracks[i].ops);
	}
	free(g->tracks);
	free(g->edges);
	hmap__free(g->track_idx);
	memset(g, 0, sizeof(*g));
}

int critpath_default_end(const struct cp_graph *g, uint32_t *track, uint64_t *ts)
{
	const struct profile *p = g->p;
	int64_t best = -1;
	uint64_t best_ts = 0;

	/* The launched command: the first process of the recording that exited. */
	for (size_t i = 0; p && i < p->procs.n; i++) {
		const struct process *pr = &p->procs.v[i];
		int64_t t = critpath_find_track(g, CP_TRACK_THREAD, pr->pid, pr->pid);

		if (t >= 0 && pr->exit_ts) {
			best = t;
			best_ts = pr->exit_ts;
			break;
		}
	}
	if (best < 0) {
		for (size_t i = 0; i < g->ntracks; i++) {
			if (g->tracks[i].kind != CP_TRACK_THREAD)
				continue; /* a path ends on a thread */
			if (g->tracks[i].t_last > best_ts || best < 0) {
				best = (int64_t)i;
				best_ts = g->tracks[i].t_last;
			}
		}
	}
	if (best < 0)
		return -ENOENT;
	*track = (uint32_t)best;
	*ts = best_ts;
	return 0;
}

/* Index of the last wait of t starting before ts, or -1. */
static ssize_t last_wait_before(const struct cp_track *t, uint64_t ts)
{
	size_t lo = 0, hi = t->nwaits;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (t->waits[mid].start < ts)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (ssize_t)lo - 1;
}

static int push_seg(struct cp_path *path, size_t *cap, uint32_t track, uint64_t start, uint64_t end,
		    uint8_t kind, uint32_t stack, uint32_t gpu_event)
{
	if (end <= start)
		return 0;
	if (arr_grow(path->segs, *cap, path->nsegs + 1))
		return -ENOMEM;
	path->segs[path->nsegs++] = (struct cp_segment){track, start, end, kind, stack, gpu_event};
	path->by_kind[kind] += end - start;
	path->total_ns += end - start;
	return 0;
}

/*
 * The running time [from, to) of a track, latest first: a thread's is on-cpu; a GPU stream's
 * is the kernels and copies it ran (any hole between them, which its waits should cover, is
 * "other").
 */
static int push_run(const struct cp_graph *g, struct cp_path *path, size_t *cap, uint32_t tr,
		    uint64_t from, uint64_t to)
{
	const struct cp_track *t = &g->tracks[tr];
	size_t lo = 0, hi = t->nops;
	int err = 0;

	if (t->kind != CP_TRACK_GPU_STREAM)
		return push_seg(path, cap, tr, from, to, WAIT_ONCPU, 0, 0);
	while (lo < hi) { /* ops starting before `to` */
		size_t mid = (lo + hi) / 2;

		if (t->ops[mid].start < to)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t k = lo; k-- > 0 && to > from && !err;) {
		const struct cp_gpu_op *op = &t->ops[k];
		uint64_t s = op->start > from ? op->start : from;

		if (op->end < to) {
			uint64_t hole = op->end > from ? op->end : from;

			err = push_seg(path, cap, tr, hole, to, WAIT_OTHER, 0, 0);
			to = hole;
			if (to <= from)
				break;
		}
		err = err ?: push_seg(path, cap, tr, s, to, op->kind, op->stack, op->event + 1);
		to = s;
	}
	if (!err && to > from)
		err = push_seg(path, cap, tr, from, to, WAIT_OTHER, 0, 0);
	return err;
}

/* Edges a walk follows from a wait's very start: a thread's creation, a stream's first launch. */
static bool edge_at_start(const struct cp_graph *g, const struct cp_wait *w)
{
	return w->edge >= 0 && (g->edges[w->edge].kind == CP_EDGE_CREATE ||
				g->edges[w->edge].kind == CP_EDGE_GPU_LAUNCH);
}

/* Walks backwards; segments come out latest first and are reversed at the end. */
static int walk(const struct cp_graph *g, uint32_t tr, uint64_t t, uint64_t start,
		struct cp_path *path)
{
	size_t cap = 0;
	unsigned stalls = 0;
	int err = 0;

	for (uint64_t step = 0; t > start && step < CP_MAX_STEPS && !err; step++) {
		const struct cp_track *trk = &g->tracks[tr];
		ssize_t wi = last_wait_before(trk, t);
		const struct cp_wait *w = wi >= 0 ? &trk->waits[wi] : NULL;
		uint64_t lo = w ? w->end : trk->t_first, ready, bstart;

		if (lo < t) {
			uint64_t from = lo > start ? lo : start;

			err = push_run(g, path, &cap, tr, from, t);
			t = from;
			stalls = 0;
			if (!w || t <= start)
				break; /* the track's beginning, with nothing known before it */
		}
		if (!w)
			break;
		/* t lies in (w->start, w->end]: runnable from ready, blocked before. */
		ready = w->ready < w->start ? w->start : w->ready > t ? t : w->ready;
		if (ready < start)
			ready = start;
		if (ready < t) {
			/* After the wakeup: CPU contention; for GPU waits, their own kind. */
			uint8_t rk = w->kind == WAIT_GPU_LAUNCH || w->kind == WAIT_GPU_SYNC
					 ? w->kind
					 : WAIT_RUNNABLE;

			err = err ? err : push_seg(path, &cap, tr, ready, t, rk, w->stack, 0);
			t = ready;
			stalls = 0;
		}
		bstart = w->start > start ? w->start : start;
		if (t <= bstart && !edge_at_start(g, w))
			continue;
		if (w->edge >= 0 && stalls < 4) {
			const struct cp_edge *e = &g->edges[w->edge];

			if (e->from_ts <= t && e->from_ts > start && e->from_track != tr) {
				tr = e->from_track;
				stalls += e->from_ts == t;
				t = e->from_ts;
				continue;
			}
		}
		if (t <= bstart)
			continue;
		err = err ? err : push_seg(path, &cap, tr, bstart, t, w->kind, w->stack, 0);
		t = bstart;
		stalls = 0;
	}
	path->start = t;
	return err;
}

/* A stack's user part: kernel frames at its leaf end are those of a switch or an interrupt. */
static uint32_t user_part(const struct profile *p, uint32_t node)
{
	node = node < p->stacks.n ? node : 0;
	while (node &&
	       p->objects.v[p->locations.v[p->stacks.v[node].loc].object].kind == OBJ_KERNEL)
		node = p->stacks.v[node].parent;
	return node;
}

/*
 * A running segment no sample fell in (short, or a low rate): it counts for
 * the stack the thread had when it stopped running at the segment's end
 * (the wait that starts there), or for "[on-cpu]" when none is known.
 */
static uint32_t stack_at_end(const struct profile *p, const struct cp_track *t,
			     const struct cp_segment *s)
{
	ssize_t wi = last_wait_before(t, s->end + 1);

	if (wi < 0 || t->waits[wi].start != s->end)
		return 0;
	return user_part(p, t->waits[wi].stack);
}

/* A wait that is a preemption: ready from its start (no wakeup), the thread still at work. */
static bool is_preemption(const struct cp_wait *w)
{
	return w->kind == WAIT_RUNNABLE && w->ready <= w->start;
}

/* Whether the waits between indexes a and b (both excluded) are preemptions (a few at most). */
static bool only_preemptions(const struct cp_track *t, ssize_t a, ssize_t b)
{
	if (b - a > 64)
		return false;
	for (ssize_t k = a + 1; k < b; k++)
		if (!is_preemption(&t->waits[k]))
			return false;
	return true;
}

/*
 * A preemption without stacks (time sampling left it out, or the thread was
 * switched out again before its user stack was read) counts for the user part of
 * the nearest CPU sample of the same stretch of work: before or after it, with only
 * preemptions between (a block or a sleep ends the stretch). Preemption does not move
 * the thread, so that sample is the best evidence of where it was; on a busy machine
 * most of a CPU-bound thread's time on the path is such preemptions, and "[runnable]"
 * alone would hide whose work waited. None in the stretch: unknown, as before.
 */
static uint32_t stack_near_preemption(const struct profile *p, const struct cp_track *t,
				      const struct cp_segment *s)
{
	ssize_t wi = last_wait_before(t, s->end), j;
	const struct cp_wait *w;
	size_t lo = 0, hi = t->nsamples;
	uint64_t before = 0, after = 0;
	uint32_t bs = 0, as = 0;

	if (wi < 0 || !is_preemption(&t->waits[wi]))
		return 0;
	w = &t->waits[wi];
	while (lo < hi) { /* samples up to the wait's start */
		size_t mid = (lo + hi) / 2;

		if (p->samples.v[t->samples[mid]].ts <= w->start)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo) {
		const struct sample *sm = &p->samples.v[t->samples[lo - 1]];

		j = last_wait_before(t, sm->ts);
		if (only_preemptions(t, j, wi)) {
			before = w->start - sm->ts;
			bs = user_part(p, sm->stack);
		}
	}
	for (hi = lo; hi < t->nsamples && p->samples.v[t->samples[hi]].ts < w->end; hi++)
		;
	if (hi < t->nsamples) {
		const struct sample *sm = &p->samples.v[t->samples[hi]];

		j = last_wait_before(t, sm->ts);
		if (only_preemptions(t, wi, j + 1)) {
			after = sm->ts - w->end;
			as = user_part(p, sm->stack);
		}
	}
	if (bs && as)
		return before <= after ? bs : as;
	return bs ? bs : as;
}

static int attribute(const struct cp_graph *g, struct cp_path *path)
{
	const struct profile *p = g->p;
	size_t cap = 0;

	for (size_t i = 0; i < path->nsegs; i++) {
		const struct cp_segment *s = &path->segs[i];
		const struct cp_track *t = &g->tracks[s->track];
		uint64_t len = s->end - s->start, wsum = 0;
		size_t lo = 0, hi = t->nsamples, need;

		/* First sample after s->start. */
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;

			if (p->samples.v[t->samples[mid]].ts <= s->start)
				lo = mid + 1;
			else
				hi = mid;
		}
		for (hi = lo; s->kind == WAIT_ONCPU && hi < t->nsamples &&
			      p->samples.v[t->samples[hi]].ts <= s->end;
		     hi++)
			wsum += p->samples.v[t->samples[hi]].weight
				    ? p->samples.v[t->samples[hi]].weight
				    : 1;
		need = wsum ? hi - lo : 1;
		if (arr_grow(path->attr, cap, path->nattr + need))
			return -ENOMEM;

		if (!wsum) {
			/* GPU work is the process's: its main thread names it in flamegraphs */
			path->attr[path->nattr++] = (struct cp_attr){
			    t->pid,
			    t->kind == CP_TRACK_GPU_STREAM ? t->pid : t->tid,
			    s->kind == WAIT_ONCPU ? stack_at_end(p, t, s)
			    : s->kind == WAIT_RUNNABLE && !s->stack && t->kind != CP_TRACK_GPU_STREAM
				? stack_near_preemption(p, t, s)
				: s->stack,
			    s->kind,
			    len,
			    s->gpu_event};
			continue;
		}
		/* The segment's length spread over its samples by weight; rounding goes to the
		 * last. */
		for (size_t k = lo, left = len; k < hi; k++) {
			const struct sample *sm = &p->samples.v[t->samples[k]];
			uint64_t ns =
			    k + 1 == hi
				? left
				: (uint64_t)((double)len * (sm->weight ? sm->weight : 1) / wsum);

			if (ns > left)
				ns = left;
			left -= ns;
			path->attr[path->nattr++] =
			    (struct cp_attr){t->pid, t->tid, sm->stack, WAIT_ONCPU, ns, 0};
		}
	}
	return 0;
}

int critpath_walk(const struct cp_graph *g, uint32_t track, uint64_t end, uint64_t start,
		  struct cp_path *out)
{
	int err;

	memset(out, 0, sizeof(*out));
	if (track >= g->ntracks)
		return -EINVAL;
	if (!start)
		start = g->t_start;
	out->end = end;
	err = walk(g, track, end, start, out);
	if (!err) {
		for (size_t i = 0, j = out->nsegs; i + 1 < j; i++, j--) {
			struct cp_segment tmp = out->segs[i];

			out->segs[i] = out->segs[j - 1];
			out->segs[j - 1] = tmp;
		}
		err = attribute(g, out);
	}
	if (err)
		critpath_path_free(out);
	return err;
}

void critpath_path_free(struct cp_path *path)
{
	free(path->segs);
	free(path->attr);
	memset(path, 0, sizeof(*path));
}

static int64_t kind_leaf(struct profile *p, uint8_t kind)
{
	char name[32];

	snprintf(name, sizeof(name), "[%s]", wait_kind_name(kind));
	return profile__special(p, name);
}

/*
 * Stack node of an attribution: a wait's stack gets a leaf naming the wait; GPU work is
 * its launch stack with the leaf "[gpu] KERNEL", as in `flamegraph --gpu`.
 */
static int64_t attr_node(struct profile *p, const struct cp_attr *a)
{
	uint32_t base = a->stack < p->stacks.n ? a->stack : 0;
	int64_t leaf;

	if (a->kind == WAIT_ONCPU && a->stack)
		return a->stack;
	if ((a->kind == WAIT_GPU_COMPUTE || a->kind == WAIT_GPU_COPY) && a->gpu_event &&
	    a->gpu_event <= p->events.n) {
		char buf[1100], nb[64];

		snprintf(buf, sizeof(buf), "[gpu] %s",
			 gpu_activity_name(p, &p->events.v[a->gpu_event - 1], nb, sizeof(nb)));
		leaf = profile__special(p, buf);
		return leaf < 0 ? leaf : profile__stack_child(p, base, (uint32_t)leaf);
	}
	leaf = kind_leaf(p, a->kind);
	if (leaf < 0)
		return leaf;
	return profile__stack_child(p, a->stack < p->stacks.n ? a->stack : 0, (uint32_t)leaf);
}

int critpath_samples(struct profile *p, const struct cp_path *path, struct sample **out, size_t *n)
{
	struct sample *v = malloc((path->nattr ? path->nattr : 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < path->nattr; i++) {
		int64_t node = attr_node(p, &path->attr[i]);

		if (node < 0) {
			free(v);
			return (int)node;
		}
		v[i] = (struct sample){.ts = path->start,
				       .pid = path->attr[i].pid,
				       .tid = path->attr[i].tid,
				       .stack = (uint32_t)node,
				       .weight = path->attr[i].ns};
	}
	*out = v;
	*n = path->nattr;
	return 0;
}

static int cmp_func(const void *a, const void *b)
{
	const struct cp_func *x = a, *y = b;

	if (x->ns != y->ns)
		return x->ns < y->ns ? 1 : -1;
	return x->name < y->name ? -1 : x->name > y->name;
}

int critpath_functions(struct profile *p, const struct cp_path *path, struct cp_func **out,
		       size_t *n)
{
	const struct frame **fr = malloc(CP_MAX_FRAMES * sizeof(*fr));
	struct hmap *idx = hmap__new(1024);
	struct cp_func *v = NULL;
	size_t *seen = NULL, nv = 0, cap = 0, seen_cap = 0;
	int err = -ENOMEM;

	if (!fr || !idx)
		goto out;
	for (size_t i = 0; i < path->nattr; i++) {
		int64_t node = attr_node(p, &path->attr[i]);
		size_t nf;

		if (node < 0) {
			err = (int)node;
			goto out;
		}
		nf = stack_frames(p, (uint32_t)node, fr, CP_MAX_FRAMES, NULL);
		for (size_t k = 0; k < nf; k++) {
			uint64_t j;

			if (!hmap__get(idx, fr[k]->name, fr[k]->module, &j)) {
				if (arr_grow(v, cap, nv + 1) || arr_grow(seen, seen_cap, nv + 1))
					goto out;
				j = nv++;

				v[j] = (struct cp_func){fr[k]->name, fr[k]->module, 0};
				seen[j] = SIZE_MAX;
				if (hmap__put(idx, fr[k]->name, fr[k]->module, j))
					goto out;
			}
			/* Inclusive: a function twice in one stack (recursion) counts once. */
			if (seen[j] == i)
				continue;
			seen[j] = i;
			v[j].ns += path->attr[i].ns;
		}
	}
	if (nv)
		qsort(v, nv, sizeof(*v), cmp_func);
	*out = v;
	*n = nv;
	v = NULL;
	err = 0;
out:
	free(v);
	free(seen);
	free(fr);
	hmap__free(idx);
	return err;
}
