// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "model/event.h"
#include "memory.h"
#include "util/hmap.h"
#include "util/vec.h"

#define NO_FREE SIZE_MAX

/* ALLOC and FREE events in time order (stable), with each allocation's matching free. */
struct replay {
	uint32_t *order;  /* event indexes */
	size_t n;
	size_t *free_pos; /* per position: where its allocation ends, NO_FREE if never */
	size_t peak_pos;  /* position after which the live heap peaked */
};


static bool is_heap_event(const struct event *e, uint32_t pid)
{
	return (e->kind == EVK_ALLOC || e->kind == EVK_FREE) && (!pid || e->pid == pid);
}

static double calls_of(const struct event *e)
{
	return ev_alloc_size(e) ? (double)ev_alloc_weight(e) / (double)ev_alloc_size(e) : 1.0;
}

static void replay_free(struct replay *rp)
{
	free(rp->order);
	free(rp->free_pos);
}

/* Orders the events and matches frees; fills r's totals when r is not NULL. */
static int replay_build(const struct profile *p, const struct mem_opts *o, struct replay *rp,
			struct mem_result *r)
{
	uint64_t live = 0, peak = 0;
	struct hmap *m = NULL;
	size_t n = 0;

	memset(rp, 0, sizeof(*rp));
	for (size_t i = 0; i < p->events.n; i++)
		n += is_heap_event(&p->events.v[i], o->pid);
	rp->order = malloc((n ? n : 1) * sizeof(*rp->order));
	rp->free_pos = malloc((n ? n : 1) * sizeof(*rp->free_pos));
	m = hmap__new(n / 2 + 16);
	if (!rp->order || !rp->free_pos || !m)
		goto nomem;
	for (size_t i = 0; i < p->events.n; i++)
		if (is_heap_event(&p->events.v[i], o->pid))
			rp->order[rp->n++] = i;
	profile__sort_events(p, rp->order, rp->n);
	for (size_t k = 0; k < rp->n; k++) {
		const struct event *e = &p->events.v[rp->order[k]];
		uint64_t v = 0;

		rp->free_pos[k] = NO_FREE;
		/* The value is position + 1 of the live allocation at (pid, addr); 0 = none. */
		if (hmap__get(m, e->pid, ev_heap_addr(e), &v) && v) {
			const struct event *a = &p->events.v[rp->order[v - 1]];

			/* A free, or an allocation at a live address (its free was lost). */
			rp->free_pos[v - 1] = k;
			live -= ev_alloc_weight(a);
			if (r) {
				r->free_count += calls_of(a);
				if (e->kind == EVK_FREE && e->ts - a->ts <= o->temp_ns) {
					r->temp_bytes += ev_alloc_weight(a);
					r->temp_count += calls_of(a);
				}
			}
			if (hmap__put(m, e->pid, ev_heap_addr(e), 0))
				goto nomem;
		}
		if (e->kind != EVK_ALLOC)
			continue;
		if (hmap__put(m, e->pid, ev_alloc_addr(e), k + 1))
			goto nomem;
		live += ev_alloc_weight(e);
		if (r) {
			r->allocated_bytes += ev_alloc_weight(e);
			r->alloc_count += calls_of(e);
		}
		if (live > peak) {
			peak = live;
			rp->peak_pos = k;
			if (r) {
				r->peak_bytes = live;
				r->peak_ts = e->ts;
			}
		}
	}
	if (r)
		r->end_bytes = live;
	hmap__free(m);
	return 0;
nomem:
	hmap__free(m);
	replay_free(rp);
	return -ENOMEM;
}

static int cmp_bytes(const void *a, const void *b)
{
	const struct mem_group *x = a, *y = b;

	if (x->bytes != y->bytes)
		return x->bytes > y->bytes ? -1 : 1;
	return x->stack < y->stack ? -1 : x->stack > y->stack;
}

static int cmp_count(const void *a, const void *b)
{
	const struct mem_group *x = a, *y = b;

	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	return cmp_bytes(a, b);
}

/* Accumulator indexed by stack node, compacted into a sorted list by finish_groups. */
static void add_group(struct mem_group *g, const struct event *e, uint64_t start)
{
	double calls = calls_of(e);

	if (!g->bytes && !g->count)
		g->first_ts = e->ts;
	g->stack = e->stack;
	g->bytes += ev_alloc_weight(e);
	g->count += calls;
	g->ts_sum += calls * (double)(e->ts > start ? e->ts - start : 0);
	if (e->ts < g->first_ts)
		g->first_ts = e->ts;
}

static int finish_groups(struct mem_group *acc, size_t nacc, struct mem_group **out, size_t *n,
			 int (*cmp)(const void *, const void *))
{
	size_t k = 0;

	for (size_t i = 0; i < nacc; i++)
		k += acc[i].count > 0;
	*out = malloc((k ? k : 1) * sizeof(**out));
	if (!*out)
		return -ENOMEM;
	*n = 0;
	for (size_t i = 0; i < nacc; i++)
		if (acc[i].count > 0)
			(*out)[(*n)++] = acc[i];
	qsort(*out, *n, sizeof(**out), cmp);
	return 0;
}

/*
 * Anonymous mappings live now: ranges keyed by (pid, start), never overlapping within
 * a process, in a treap (a search tree balanced by random priorities) so that mapping
 * and unmapping cost O(log n) in any order: the kernel places mappings top-down, so a
 * sorted array would shift on nearly every mmap (quadratic in the live mappings).
 * Nodes live in one array; freed ones are reused.
 */
#define RNIL UINT32_MAX

struct rnode {
	uint64_t start, end;
	uint32_t pid, prio;
	uint32_t l, r;
};

struct range_set {
	struct rnode *v;
	uint32_t n, root, free_list; /* free nodes chained through .l */
	size_t cap;
	uint64_t prng;
};

static void range_set_init(struct range_set *rs)
{
	*rs = (struct range_set){ .root = RNIL, .free_list = RNIL, .prng = hmap__seed() };
}

static bool rkey_less(const struct rnode *x, uint32_t pid, uint64_t start)
{
	return x->pid < pid || (x->pid == pid && x->start < start);
}

/* Splits t into the nodes keyed below (pid, start) and the rest. */
static void rsplit(struct range_set *rs, uint32_t t, uint32_t pid, uint64_t start, uint32_t *lo,
		   uint32_t *hi)
{
	if (t == RNIL) {
		*lo = *hi = RNIL;
	} else if (rkey_less(&rs->v[t], pid, start)) {
		rsplit(rs, rs->v[t].r, pid, start, &rs->v[t].r, hi);
		*lo = t;
	} else {
		rsplit(rs, rs->v[t].l, pid, start, lo, &rs->v[t].l);
		*hi = t;
	}
}

/* Joins two treaps, every key of a below every key of b. */
static uint32_t rmerge(struct range_set *rs, uint32_t a, uint32_t b)
{
	if (a == RNIL)
		return b;
	if (b == RNIL)
		return a;
	if (rs->v[a].prio > rs->v[b].prio) {
		rs->v[a].r = rmerge(rs, rs->v[a].r, b);
		return a;
	}
	rs->v[b].l = rmerge(rs, a, rs->v[b].l);
	return b;
}

/* Adds [s, e) of pid, which overlaps no live range of pid; -ENOMEM loses it. */
static int range_add(struct range_set *rs, uint32_t pid, uint64_t s, uint64_t e)
{
	uint32_t x, lo, hi;

	if (rs->free_list != RNIL) {
		x = rs->free_list;
		rs->free_list = rs->v[x].l;
	} else {
		if (rs->n + 1 >= RNIL || arr_grow(rs->v, rs->cap, rs->n + 1))
			return -ENOMEM;
		x = rs->n++;

	}
	rs->prng = rs->prng * 6364136223846793005ULL + 1442695040888963407ULL;
	rs->v[x] = (struct rnode){ .start = s, .end = e, .pid = pid,
				   .prio = (uint32_t)(rs->prng >> 32), .l = RNIL, .r = RNIL };
	rsplit(rs, rs->root, pid, s, &lo, &hi);
	rs->root = rmerge(rs, rmerge(rs, lo, x), hi);
	return 0;
}

/* Frees the nodes of t, adding up the bytes of each below e; *tail_end: the end of one past e. */
static uint64_t rdrop(struct range_set *rs, uint32_t t, uint64_t e, uint64_t *tail_end)
{
	uint64_t bytes = 0;

	while (t != RNIL) {
		struct rnode *n = &rs->v[t];
		uint32_t next = n->r;

		bytes += rdrop(rs, n->l, e, tail_end);
		if (n->end > e) {
			*tail_end = n->end;
			bytes += e - n->start;
		} else {
			bytes += n->end - n->start;
		}
		n->l = rs->free_list;
		rs->free_list = t;
		t = next;
	}
	return bytes;
}

/* Removes [s, e) of pid; returns the bytes that were mapped there. */
static uint64_t range_remove(struct range_set *rs, uint32_t pid, uint64_t s, uint64_t e)
{
	uint64_t removed = 0, tail_end = 0;
	uint32_t lo, mid, hi, t;

	if (e <= s)
		return 0;
	rsplit(rs, rs->root, pid, s, &lo, &hi);
	/* the range starting below s may reach into [s, e) */
	for (t = lo; t != RNIL && rs->v[t].r != RNIL;)
		t = rs->v[t].r;
	if (t != RNIL && rs->v[t].pid == pid && rs->v[t].end > s) {
		struct rnode *n = &rs->v[t];

		removed = (n->end < e ? n->end : e) - s;
		if (n->end > e) /* a hole in the middle: the right part stays */
			tail_end = n->end;
		n->end = s;
	}
	rsplit(rs, hi, pid, e, &mid, &hi);
	removed += rdrop(rs, mid, e, &tail_end);
	rs->root = rmerge(rs, lo, hi);
	/* out of memory: the right part is lost, and no longer counted as mapped */
	if (tail_end && range_add(rs, pid, e, tail_end))
		removed += tail_end - e;
	return removed;
}

/* The end of a mapping of len bytes at a: whole pages, saturated (a file may say anything). */
static uint64_t map_end(uint64_t a, uint64_t len)
{
	len = len > UINT64_MAX - 4095 ? UINT64_MAX & ~(uint64_t)4095 : (len + 4095) & ~(uint64_t)4095;
	return a > UINT64_MAX - len ? UINT64_MAX : a + len;
}

struct pid_exit {
	uint64_t ts;
	uint32_t pid;
};

static int cmp_exit(const void *a, const void *b)
{
	const struct pid_exit *x = a, *y = b;

	return x->ts < y->ts ? -1 : x->ts > y->ts;
}

/* A process exited: its mappings and its break go with it. */
static void mapping_exit(struct range_set *rs, struct hmap *grow, uint32_t pid, uint64_t *mapped,
			 int64_t *brk)
{
	uint64_t g = 0;

	*mapped -= range_remove(rs, pid, 0, UINT64_MAX);
	if (hmap__get(grow, pid, 0, &g)) {
		*brk -= (int64_t)g;
		hmap__put(grow, pid, 0, 0);
	}
}

/*
 * Anonymous mappings and the program break over time, in event order: the live
 * anonymous mapped bytes (mmap minus munmap, mremap moving them) and the growth of
 * each process's break past the first value seen, summed over the processes alive.
 */
static int mapping_replay(const struct profile *p, const struct mem_opts *o, struct mem_result *r)
{
	struct range_set rs;
	struct hmap *grow = hmap__new(16); /* pid -> its break's growth (int64 bits) */
	struct pid_exit *ex = malloc((p->procs.n ? p->procs.n : 1) * sizeof(*ex));
	uint32_t *idx = malloc((p->events.n ? p->events.n : 1) * sizeof(*idx));
	uint64_t mapped = 0, moved = 0;
	size_t n = 0, nex = 0, kx = 0;
	int64_t brk = 0;

	range_set_init(&rs);
	if (!idx || !grow || !ex) {
		free(idx);
		free(ex);
		hmap__free(grow);
		return -ENOMEM;
	}
	for (size_t i = 0; i < p->events.n; i++) {
		uint16_t k = p->events.v[i].kind;

		if ((k == EVK_MMAP || k == EVK_MUNMAP || k == EVK_BRK) &&
		    (!o->pid || p->events.v[i].pid == o->pid))
			idx[n++] = i;
	}
	profile__sort_events(p, idx, n);
	for (size_t i = 0; i < p->procs.n; i++)
		if (p->procs.v[i].exit_ts && (!o->pid || p->procs.v[i].pid == o->pid))
			ex[nex++] = (struct pid_exit){ p->procs.v[i].exit_ts, p->procs.v[i].pid };
	qsort(ex, nex, sizeof(*ex), cmp_exit);
	for (size_t k = 0; k < n; k++) {
		const struct event *e = &p->events.v[idx[k]];
		uint64_t end = 0, was, g = 0;

		for (; kx < nex && ex[kx].ts < e->ts; kx++)
			mapping_exit(&rs, grow, ex[kx].pid, &mapped, &brk);
		switch (e->kind) {
		case EVK_MMAP:
			/* the new place of an mremap counts only if the old one was anonymous */
			if ((e->flags & MEM_F_REMAP) && !moved)
				break;
			moved = 0;
			end = map_end(ev_map_addr(e), ev_map_len(e));
			if (!(e->flags & MEM_F_REMAP))
				r->mmap_bytes += ev_map_len(e);
			mapped -= range_remove(&rs, e->pid, ev_map_addr(e), end); /* MAP_FIXED */
			if (end == ev_map_addr(e) || range_add(&rs, e->pid, ev_map_addr(e), end))
				break;
			mapped += end - ev_map_addr(e);
			break;
		case EVK_MUNMAP:
			end = map_end(ev_map_addr(e), ev_map_len(e));
			was = range_remove(&rs, e->pid, ev_map_addr(e), end);
			mapped -= was;
			if (e->flags & MEM_F_REMAP)
				moved = was;
			else
				r->munmap_bytes += was;
			break;
		case EVK_BRK:
			hmap__get(grow, e->pid, 0, &g);
			g = (uint64_t)((int64_t)g + (int64_t)(ev_brk_after(e) - ev_brk_before(e)));
			hmap__put(grow, e->pid, 0, g);
			brk += (int64_t)(ev_brk_after(e) - ev_brk_before(e));
			break;
		}
		if (mapped > r->mapped_peak) {
			r->mapped_peak = mapped;
			r->mapped_peak_ts = e->ts;
		}
		if (brk > 0 && (uint64_t)brk > r->brk_peak) {
			r->brk_peak = brk;
			r->brk_peak_ts = e->ts;
		}
	}
	for (; kx < nex; kx++)
		mapping_exit(&rs, grow, ex[kx].pid, &mapped, &brk);
	r->mapped_end = mapped;
	r->brk_end = brk > 0 ? brk : 0;
	free(rs.v);
	free(idx);
	free(ex);
	hmap__free(grow);
	return 0;
}

static void other_events(const struct profile *p, const struct mem_opts *o, struct mem_result *r)
{
	uint32_t rss = 0, other = 0;

	for (size_t i = 0; i < p->events.n; i++) {
		const struct event *e = &p->events.v[i];

		if (o->pid && e->pid != o->pid)
			continue;
		if (e->kind == EVK_COUNTER && e->name != other) {
			if (e->name != rss) {
				if (strcmp(profile__str(p, e->name), "rss_bytes")) {
					other = e->name;
					continue;
				}
				rss = e->name;
			}
			if (ev_counter_value(e) > r->rss_peak) {
				r->rss_peak = ev_counter_value(e);
				r->rss_peak_ts = e->ts;
			}
		}
		if (e->kind == EVK_ALLOC)
			r->present = true;
	}
}

int memory_analyze(const struct profile *p, const struct mem_opts *opts, struct mem_result *r)
{
	struct mem_opts o = *opts;
	struct mem_group *acc[4] = { NULL };
	size_t ns = p->stacks.n + 1;
	struct replay rp;
	int err = -ENOMEM;

	memset(r, 0, sizeof(*r));
	if (!o.temp_ns)
		o.temp_ns = 1000000;
	r->sample_bytes = profile__meta_u64(p, "mem_sample_bytes", 1);
	r->start_ns = profile__meta_u64(p, "start_ns", 0);
	r->end_ns = profile__meta_u64(p, "end_ns", 0);
	other_events(p, &o, r);
	if (mapping_replay(p, &o, r))
		return -ENOMEM;
	if (replay_build(p, &o, &rp, r))
		return -ENOMEM;
	for (size_t k = 0; k < rp.n; k++) {
		uint64_t ts = p->events.v[rp.order[k]].ts;

		if (!r->start_ns || ts < r->start_ns)
			r->start_ns = ts;
		if (ts > r->end_ns)
			r->end_ns = ts;
	}
	if (!rp.n) { /* no allocation: no groups (and no pass over every stack node) */
		err = 0;
		goto out;
	}
	for (int i = 0; i < 4; i++) {
		acc[i] = calloc(ns, sizeof(*acc[i]));
		if (!acc[i])
			goto out;
	}
	for (size_t k = 0; k < rp.n; k++) {
		const struct event *e = &p->events.v[rp.order[k]];
		size_t s = e->stack < ns ? e->stack : 0;

		if (e->kind != EVK_ALLOC)
			continue;
		add_group(&acc[0][s], e, r->start_ns);
		if (k <= rp.peak_pos && rp.free_pos[k] > rp.peak_pos && r->peak_bytes)
			add_group(&acc[1][s], e, r->start_ns);
		if (rp.free_pos[k] == NO_FREE) {
			add_group(&acc[2][s], e, r->start_ns);
			r->leak_count += calls_of(e);
		} else {
			const struct event *f = &p->events.v[rp.order[rp.free_pos[k]]];

			if (f->kind == EVK_FREE && f->ts - e->ts <= o.temp_ns)
				add_group(&acc[3][s], e, r->start_ns);
		}
	}
	if (finish_groups(acc[0], ns, &r->allocated, &r->nallocated, cmp_bytes) ||
	    finish_groups(acc[0], ns, &r->by_count, &r->nallocated, cmp_count) ||
	    finish_groups(acc[1], ns, &r->at_peak, &r->nat_peak, cmp_bytes) ||
	    finish_groups(acc[2], ns, &r->leaks, &r->nleaks, cmp_bytes) ||
	    finish_groups(acc[3], ns, &r->temps, &r->ntemps, cmp_bytes))
		goto out;
	err = 0;
out:
	for (int i = 0; i < 4; i++)
		free(acc[i]);
	replay_free(&rp);
	if (err)
		mem_result__free(r);
	return err;
}

void mem_result__free(struct mem_result *r)
{
	free(r->allocated);
	free(r->by_count);
	free(r->at_peak);
	free(r->leaks);
	free(r->temps);
	r->allocated = r->by_count = r->at_peak = r->leaks = r->temps = NULL;
	r->nallocated = r->nat_peak = r->nleaks = r->ntemps = 0;
}

double mem_group_age_s(const struct mem_result *r, const struct mem_group *g)
{
	double mean_ts;

	if (g->count <= 0)
		return 0;
	mean_ts = g->ts_sum / g->count + (double)r->start_ns;
	return mean_ts < (double)r->end_ns ? ((double)r->end_ns - mean_ts) / 1e9 : 0;
}

/* The live heap after each heap event: of all processes, or of the event's own (by_pid). */
static int timeline(const struct profile *p, uint32_t pid, bool by_pid, struct mem_point **out,
		    uint32_t **pid_of, size_t *n)
{
	struct mem_opts o = { .temp_ns = 1, .pid = pid };
	struct mem_point *pts;
	struct hmap *lives = NULL; /* by_pid: pid -> its live bytes */
	uint32_t *pids = NULL;
	int64_t *ends;
	struct replay rp;
	uint64_t live = 0;

	*out = NULL;
	*n = 0;
	if (replay_build(p, &o, &rp, NULL))
		return -ENOMEM;
	pts = malloc((rp.n ? rp.n : 1) * sizeof(*pts));
	ends = calloc(rp.n + 1, sizeof(*ends)); /* bytes whose allocation ends at each position */
	if (by_pid) {
		pids = malloc((rp.n ? rp.n : 1) * sizeof(*pids));
		lives = hmap__new(64);
	}
	if (!pts || !ends || (by_pid && (!pids || !lives)))
		goto nomem;
	for (size_t k = 0; k < rp.n; k++) {
		const struct event *e = &p->events.v[rp.order[k]];

		if (e->kind == EVK_ALLOC && rp.free_pos[k] != NO_FREE)
			ends[rp.free_pos[k]] += (int64_t)ev_alloc_weight(e);
	}
	for (size_t k = 0; k < rp.n; k++) {
		const struct event *e = &p->events.v[rp.order[k]];

		/* a block ends at an event of its own process: frees match by (pid, address) */
		if (by_pid) {
			live = 0;
			hmap__get(lives, e->pid, 0, &live);
			pids[k] = e->pid;
		}
		live -= (uint64_t)ends[k];
		if (e->kind == EVK_ALLOC)
			live += ev_alloc_weight(e);
		if (by_pid && hmap__put(lives, e->pid, 0, live))
			goto nomem;
		pts[k] = (struct mem_point){ e->ts, live };
	}
	*out = pts;
	*n = rp.n;
	if (pid_of)
		*pid_of = pids;
	else
		free(pids);
	free(ends);
	hmap__free(lives);
	replay_free(&rp);
	return 0;
nomem:
	free(pts);
	free(pids);
	free(ends);
	hmap__free(lives);
	replay_free(&rp);
	return -ENOMEM;
}

int memory_timeline(const struct profile *p, uint32_t pid, struct mem_point **out, size_t *n)
{
	return timeline(p, pid, false, out, NULL, n);
}

int memory_timeline_by_pid(const struct profile *p, uint32_t pid, struct mem_point **out,
			   uint32_t **pid_of, size_t *n)
{
	return timeline(p, pid, true, out, pid_of, n);
}

int memory_to_samples(struct profile *p, enum mem_view view)
{
	struct mem_opts o = { .temp_ns = 1 };
	struct sample *v;
	struct replay rp;
	size_t n = 0;

	if (replay_build(p, &o, &rp, NULL))
		return -ENOMEM;
	v = malloc((rp.n ? rp.n : 1) * sizeof(*v));
	if (!v) {
		replay_free(&rp);
		return -ENOMEM;
	}
	for (size_t k = 0; k < rp.n; k++) {
		const struct event *e = &p->events.v[rp.order[k]];
		bool keep;

		if (e->kind != EVK_ALLOC)
			continue;
		keep = view == MEM_VIEW_ALLOCATED ||
		       (view == MEM_VIEW_PEAK && k <= rp.peak_pos && rp.free_pos[k] > rp.peak_pos) ||
		       (view == MEM_VIEW_LEAKS && rp.free_pos[k] == NO_FREE);
		if (keep)
			v[n++] = (struct sample){ .ts = e->ts, .pid = e->pid, .tid = e->tid,
						  .stack = e->stack, .weight = ev_alloc_weight(e) };
	}
	replay_free(&rp);
	if (!rp.n) {
		free(v);
		return -ENOENT;
	}
	free(p->samples.v);
	p->samples.v = v;
	p->samples.n = n;
	p->samples.cap = rp.n ? rp.n : 1;
	return 0;
}
