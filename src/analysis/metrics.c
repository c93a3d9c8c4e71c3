// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/event.h"
#include "util/hmap.h"
#include "util/vec.h"
#include "metrics.h"

/* The metric of each counter name id, by a cache of ids seen: -1 other counters. */
struct name_cache {
	uint32_t id[64];
	int m[64];
	size_t n;
};

static int metric_of(const struct profile *p, struct name_cache *c, uint32_t name)
{
	int m;

	for (size_t i = 0; i < c->n; i++)
		if (c->id[i] == name)
			return c->m[i];
	m = metric_by_name(profile__str(p, name));
	if (c->n < 64) {
		c->id[c->n] = name;
		c->m[c->n++] = m;
	}
	return m;
}

static void stat_add(struct metric_stat *s, uint64_t ts, uint64_t v)
{
	if (!s->n) {
		s->first = s->max = v;
		s->t_first = ts;
	} else if (ts >= s->t_last) {
		s->area += (double)s->last * (double)(ts - s->t_last);
	}
	if (!s->n || ts >= s->t_last) {
		s->last = v;
		s->t_last = ts;
	}
	if (ts < s->t_first) {
		s->first = v;
		s->t_first = ts;
	}
	s->max = v > s->max ? v : s->max;
	s->n++;
}

static struct metrics_proc_stat *proc_slot(struct metrics_result *r, size_t *cap, uint32_t pid)
{
	for (size_t i = 0; i < r->nprocs; i++)
		if (r->procs[i].pid == pid)
			return &r->procs[i];
	if (arr_grow(r->procs, *cap, r->nprocs + 1))
		return NULL;
	memset(&r->procs[r->nprocs], 0, sizeof(r->procs[0]));
	r->procs[r->nprocs].pid = pid;
	return &r->procs[r->nprocs++];
}

static struct metrics_zone *zone_slot(const struct profile *p, struct metrics_result *r,
				      size_t *cap, uint32_t idx)
{
	char key[32];

	for (size_t i = 0; i < r->nzones; i++)
		if (r->zones[i].index == idx)
			return &r->zones[i];
	if (arr_grow(r->zones, *cap, r->nzones + 1))
		return NULL;
	memset(&r->zones[r->nzones], 0, sizeof(r->zones[0]));
	r->zones[r->nzones].index = idx;
	snprintf(key, sizeof(key), "energy_zone_%u", idx);
	r->zones[r->nzones].name = profile__meta(p, key) ?: "unknown zone";
	return &r->zones[r->nzones++];
}

static struct metrics_gpu *gpu_slot(const struct profile *p, struct metrics_result *r, size_t *cap,
				    uint32_t idx)
{
	char key[32];

	for (size_t i = 0; i < r->ngpus; i++)
		if (r->gpus[i].index == idx)
			return &r->gpus[i];
	if (arr_grow(r->gpus, *cap, r->ngpus + 1))
		return NULL;
	memset(&r->gpus[r->ngpus], 0, sizeof(r->gpus[0]));
	r->gpus[r->ngpus].index = idx;
	snprintf(key, sizeof(key), "nvml_gpu_%u", idx);
	r->gpus[r->ngpus].name = profile__meta(p, key) ?: "GPU";
	return &r->gpus[r->ngpus++];
}

static struct metrics_thread_stat *thread_slot(struct metrics_result *r, size_t *cap,
					       struct hmap **index, uint32_t pid, uint32_t tid)
{
	uint64_t k;

	if (!*index && !(*index = hmap__new(64)))
		return NULL;
	if (hmap__get(*index, pid, tid, &k))
		return &r->threads[k];
	if (arr_grow(r->threads, *cap, r->nthreads + 1) ||
	    hmap__put(*index, pid, tid, r->nthreads))
		return NULL;
	memset(&r->threads[r->nthreads], 0, sizeof(r->threads[0]));
	r->threads[r->nthreads].pid = pid;
	r->threads[r->nthreads].tid = tid;
	return &r->threads[r->nthreads++];
}

static int cmp_thread(const void *a, const void *b)
{
	const struct metrics_thread_stat *x = a, *y = b;

	if (x->cpu_ns != y->cpu_ns)
		return x->cpu_ns > y->cpu_ns ? -1 : 1;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

static int cmp_proc(const void *a, const void *b)
{
	const struct metrics_proc_stat *x = a, *y = b;

	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

static void finish_totals(const struct profile *p, struct metrics_result *r)
{
	for (size_t i = 0; i < r->nprocs; i++) {
		struct metrics_proc_stat *ps = &r->procs[i];
		const struct process *pr = profile__proc((struct profile *)p, ps->pid, false);

		ps->comm = pr ? pr->comm : 0;
		for (int m = 0; m < MET_PROC_COUNT; m++)
			if (metric_defs[m].cumulative)
				r->total[m] += metric_delta(&ps->m[m]);
		if (ps->m[MET_RSS_PEAK].max > r->rss_peak)
			r->rss_peak = ps->m[MET_RSS_PEAK].max;
		r->rss_final += ps->rss_final;
		r->total[MET_THREADS] += ps->m[MET_THREADS].max;
	}
	for (size_t i = 0; i < r->nzones; i++) {
		r->zones[i].joules = metric_delta(&r->zones[i].energy) / 1e6;
		r->cpu_joules += r->zones[i].joules;
	}
	for (size_t i = 0; i < r->ngpus; i++) {
		struct metrics_gpu *g = &r->gpus[i];
		const struct metric_stat *pw = &g->m[MET_GPU_POWER_MW];

		if (g->m[MET_GPU_ENERGY_MJ].n > 1)
			g->joules = metric_delta(&g->m[MET_GPU_ENERGY_MJ]) / 1e3;
		else if (pw->n > 1)
			g->joules = pw->area / 1e3 / 1e9;
		r->gpu_joules += g->joules;
	}
	if (r->nprocs)
		qsort(r->procs, r->nprocs, sizeof(r->procs[0]), cmp_proc);
	for (size_t i = 0; i < r->nthreads; i++) {
		struct metrics_thread_stat *t = &r->threads[i];
		const struct thread *th = profile__find_thread(p, t->pid, t->tid);

		t->comm = th ? th->comm : 0;
		t->cpu_ns = metrics_thread_delta(t, MET_T_CPU_USER) +
			    metrics_thread_delta(t, MET_T_CPU_SYS);
	}
	if (r->nthreads)
		qsort(r->threads, r->nthreads, sizeof(r->threads[0]), cmp_thread);
}

int metrics_analyze(const struct profile *p, uint32_t pid, struct metrics_result *r)
{
	size_t cap = 0, zcap = 0, gcap = 0, tcap = 0;
	struct hmap *tindex = NULL;
	struct name_cache nc = {0};
	uint32_t *idx = NULL;
	uint64_t all_rss = 0;
	size_t n = 0;

	memset(r, 0, sizeof(*r));
	r->interval_ms = profile__meta_u64(p, "metrics_interval_ms", 0);
	r->scope = profile__meta(p, "metrics_scope");
	r->energy_source = profile__meta(p, "energy_source");
	r->present = r->interval_ms > 0;
	r->wall_s = (profile__meta_u64(p, "end_ns", 0) - profile__meta_u64(p, "start_ns", 0)) / 1e9;
	if (!r->present)
		return 0;
	/* events in time order: the step-function areas need it */
	idx = malloc((p->events.n ? p->events.n : 1) * sizeof(*idx));
	if (!idx)
		return -ENOMEM;
	for (size_t i = 0; i < p->events.n; i++)
		if (p->events.v[i].kind == EVK_COUNTER)
			idx[n++] = (uint32_t)i;
	profile__sort_events(p, idx, n);
	for (size_t k = 0; k < n; k++) {
		const struct event *e = &p->events.v[idx[k]];
		int m = metric_of(p, &nc, e->name);

		if (m < 0)
			continue;
		if (metric_defs[m].scope == MSCOPE_PROCESS) {
			struct metrics_proc_stat *ps;

			if (pid && e->pid != pid)
				continue;
			ps = proc_slot(r, &cap, e->pid);
			if (!ps)
				goto nomem;
			stat_add(&ps->m[m], e->ts, ev_counter_value(e));
			if (m == MET_RSS_ANON || m == MET_RSS_FILE || m == MET_RSS_SHMEM) {
				uint64_t sum = ps->m[MET_RSS_ANON].last + ps->m[MET_RSS_FILE].last +
					       ps->m[MET_RSS_SHMEM].last;

				/* the processes' RSS together, as it moves */
				all_rss += sum - ps->rss_now;
				ps->rss_now = sum;
				if (sum)
					ps->rss_final = sum;
				ps->rss_peak_sum = sum > ps->rss_peak_sum ? sum : ps->rss_peak_sum;
				r->rss_peak_all =
				    all_rss > r->rss_peak_all ? all_rss : r->rss_peak_all;
			}
		} else if (metric_defs[m].scope == MSCOPE_THREAD) {
			struct metrics_thread_stat *t;

			if (pid && e->pid != pid)
				continue;
			t = thread_slot(r, &tcap, &tindex, e->pid, e->tid);
			if (!t)
				goto nomem;
			stat_add(&t->m[m - MET_T_FIRST], e->ts, ev_counter_value(e));
		} else if (metric_defs[m].scope == MSCOPE_ENERGY) {
			struct metrics_zone *z = zone_slot(p, r, &zcap, ev_counter_index(e));

			if (!z)
				goto nomem;
			stat_add(&z->energy, e->ts, ev_counter_value(e));
		} else {
			struct metrics_gpu *g = gpu_slot(p, r, &gcap, ev_counter_index(e));

			if (!g)
				goto nomem;
			stat_add(&g->m[m], e->ts, ev_counter_value(e));
			if (m == MET_GPU_THROTTLE)
				g->throttle_any |= ev_counter_value(e);
		}
	}
	free(idx);
	hmap__free(tindex);
	finish_totals(p, r);
	return 0;
nomem:
	free(idx);
	hmap__free(tindex);
	metrics_result__free(r);
	return -ENOMEM;
}

void metrics_result__free(struct metrics_result *r)
{
	free(r->procs);
	free(r->threads);
	free(r->zones);
	free(r->gpus);
	r->threads = NULL;
	r->nthreads = 0;
	r->procs = NULL;
	r->zones = NULL;
	r->gpus = NULL;
	r->nprocs = r->nzones = r->ngpus = 0;
}

int metrics_series(const struct profile *p, int m, uint32_t pid, uint32_t index,
		   struct metric_point **out, size_t *n)
{
	uint32_t name = 0, *idx;
	struct metric_point *pts;
	size_t k = 0;

	*out = NULL;
	*n = 0;
	for (size_t i = 0; i < p->events.n && !name; i++) {
		const struct event *e = &p->events.v[i];

		if (e->kind == EVK_COUNTER &&
		    !strcmp(profile__str(p, e->name), metric_defs[m].name))
			name = e->name;
	}
	if (!name)
		return 0;
	idx = malloc(p->events.n * sizeof(*idx));
	if (!idx)
		return -ENOMEM;
	for (size_t i = 0; i < p->events.n; i++) {
		const struct event *e = &p->events.v[i];

		if (e->kind == EVK_COUNTER && e->name == name && e->pid == pid &&
		    ev_counter_index(e) == index)
			idx[k++] = (uint32_t)i;
	}
	profile__sort_events(p, idx, k);
	pts = malloc((k ? k : 1) * sizeof(*pts));
	if (!pts) {
		free(idx);
		return -ENOMEM;
	}
	for (size_t i = 0; i < k; i++) {
		pts[i].ts = p->events.v[idx[i]].ts;
		pts[i].v = ev_counter_value(&p->events.v[idx[i]]);
	}
	free(idx);
	*out = pts;
	*n = k;
	return 0;
}

/* Interpolated value of a running total at t from its points (clamped at the ends). */
static double value_at(const struct metric_point *pts, size_t n, uint64_t t)
{
	size_t lo = 0, hi = n;

	if (t <= pts[0].ts)
		return (double)pts[0].v;
	if (t >= pts[n - 1].ts)
		return (double)pts[n - 1].v;
	while (hi - lo > 1) {
		size_t mid = (lo + hi) / 2;

		if (pts[mid].ts <= t)
			lo = mid;
		else
			hi = mid;
	}
	if (hi >= n || pts[hi].ts == pts[lo].ts)
		return (double)pts[lo].v;
	return pts[lo].v + (double)(pts[hi].v - pts[lo].v) * (double)(t - pts[lo].ts) /
			       (double)(pts[hi].ts - pts[lo].ts);
}

/* Every energy series (RAPL zones in uJ, GPU counters in mJ) as points, with its unit. */
struct energy_series {
	struct metric_point *pts;
	size_t n;
	double per_joule;
};

static int energy_series(const struct profile *p, struct energy_series **out, size_t *nout)
{
	static const struct {
		int m;
		double per_joule;
	} kinds[] = {{MET_ENERGY_UJ, 1e6}, {MET_GPU_ENERGY_MJ, 1e3}};
	struct energy_series *v = NULL;
	size_t n = 0, cap = 0;

	for (size_t k = 0; k < 2; k++) {
		for (uint32_t i = 0; i < 256; i++) {
			struct metric_point *pts;
			size_t np;

			if (metrics_series(p, kinds[k].m, 0, i, &pts, &np))
				goto nomem;
			if (!np) {
				free(pts);
				break;
			}
			if (arr_grow(v, cap, n + 1)) {
				free(pts);
				goto nomem;
			}
			v[n++] = (struct energy_series){pts, np, kinds[k].per_joule};
		}
	}
	*out = v;
	*nout = n;
	return 0;
nomem:
	for (size_t i = 0; i < n; i++)
		free(v[i].pts);
	free(v);
	return -ENOMEM;
}

static double series_between(const struct energy_series *v, size_t n, uint64_t t0, uint64_t t1)
{
	double j = 0;

	for (size_t i = 0; i < n; i++)
		j += (value_at(v[i].pts, v[i].n, t1) - value_at(v[i].pts, v[i].n, t0)) /
		     v[i].per_joule;
	return j;
}

double metrics_energy_between(const struct profile *p, uint64_t t0, uint64_t t1)
{
	struct energy_series *v;
	size_t n;
	double j;

	if (energy_series(p, &v, &n) || !n)
		return -1;
	j = series_between(v, n, t0, t1);
	for (size_t i = 0; i < n; i++)
		free(v[i].pts);
	free(v);
	return j;
}

int metrics_energy_by_region(const struct profile *p, struct metrics_region_energy **out,
			     size_t *nout)
{
	struct metrics_region_energy *r = NULL;
	struct energy_series *v;
	size_t n, nr = 0, cap = 0;

	*out = NULL;
	*nout = 0;
	if (energy_series(p, &v, &n))
		return -ENOMEM;
	for (size_t i = 0; n && i < p->events.n; i++) {
		const struct event *e = &p->events.v[i];
		size_t k;

		if (e->kind != EVK_REGION)
			continue;
		for (k = 0; k < nr && r[k].name != e->name; k++)
			;
		if (k == nr) {
			if (arr_grow(r, cap, nr + 1))
				break;
			r[nr++] = (struct metrics_region_energy){e->name, 0, 0, 0};
		}
		r[k].calls++;
		r[k].ns += e->dur;
		r[k].joules += series_between(v, n, e->ts, e->ts + e->dur);
	}
	for (size_t i = 0; i < n; i++)
		free(v[i].pts);
	free(v);
	*out = r;
	*nout = nr;
	return 0;
}

uint64_t metrics_gap_limit(const struct profile *p)
{
	const char *steps = profile__meta(p, "metrics_steps");

	if (steps && !strcmp(steps, "closed"))
		return 0;
	return profile__meta_u64(p, "metrics_interval_ms", 0) * 1000000ULL;
}

struct grid_proc {
	uint32_t pid;
	uint64_t v, ts;
};

/*
 * Adds d, which grew between from and to, to the bins it overlaps, in proportion (a steady
 * rate in between).
 */
static void spread(double *out, uint64_t t0, uint64_t dt, size_t nbins, uint64_t from,
		   uint64_t to, double d)
{
	if (to <= from) {
		if (to > t0 && to - t0 <= dt * nbins)
			out[(to - t0 - 1) / dt] += d;
		return;
	}
	for (uint64_t a = from > t0 ? from : t0; a < to;) {
		size_t b = (a - t0) / dt;
		uint64_t end = t0 + (b + 1) * dt, e = end < to ? end : to;

		if (b >= nbins)
			break;
		out[b] += d * (double)(e - a) / (double)(to - from);
		a = e;
	}
}

int metrics_grid(const struct profile *p, int m, uint32_t pid, uint32_t index, uint64_t t0,
		 uint64_t dt, size_t nbins, double *out)
{
	bool thread = metric_defs[m].scope == MSCOPE_THREAD;
	bool machine = metric_defs[m].scope != MSCOPE_PROCESS && !thread;
	uint64_t interval = metrics_gap_limit(p);
	struct grid_proc *procs = NULL;
	size_t np = 0, cap = 0, n = 0, k = 0;
	uint32_t name = 0, *idx;
	double level = 0;

	for (size_t b = 0; b < nbins; b++)
		out[b] = 0;
	for (size_t i = 0; i < p->events.n && !name; i++) {
		const struct event *e = &p->events.v[i];

		if (e->kind == EVK_COUNTER &&
		    !strcmp(profile__str(p, e->name), metric_defs[m].name))
			name = e->name;
	}
	if (!name || !dt || !nbins)
		return 0;
	idx = malloc(p->events.n * sizeof(*idx));
	if (!idx)
		return -ENOMEM;
	for (size_t i = 0; i < p->events.n; i++) {
		const struct event *e = &p->events.v[i];

		if (e->kind != EVK_COUNTER || e->name != name)
			continue;
		if (thread ? e->pid != pid || e->tid != index
		    : machine ? e->pid || ev_counter_index(e) != index
			      : !e->pid || (pid && e->pid != pid))
			continue;
		idx[n++] = (uint32_t)i;
	}
	profile__sort_events(p, idx, n);
	for (size_t b = 0; b < nbins; b++) {
		uint64_t end = t0 + (b + 1) * dt;

		/* a reading closes its interval: what it shows happened up to it */
		for (; k < n && p->events.v[idx[k]].ts <= end; k++) {
			const struct event *e = &p->events.v[idx[k]];
			uint64_t v = ev_counter_value(e);
			size_t j;

			for (j = 0; j < np && procs[j].pid != e->pid; j++)
				;
			if (j == np) {
				if (arr_grow(procs, cap, np + 1)) {
					free(idx);
					free(procs);
					return -ENOMEM;
				}
				procs[np++] = (struct grid_proc){e->pid, metric_defs[m].cumulative ? v : 0,
								 e->ts};
			}
			if (metric_defs[m].cumulative) {
				/* what it grew by since the last point, spread over the time
				 * in between (metrics_gap_limit) */
				uint64_t gap = e->ts - procs[j].ts;
				uint64_t from = interval && gap * 2 > interval * 3 ? e->ts - interval
										   : procs[j].ts;

				/* a counter that went down was reset, but a thread's CPU part
				 * steps down at its final reading (cpu_split_update) as the other
				 * steps up by as much: that step counts, so the sum is exact */
				if (v >= procs[j].v || m == MET_T_CPU_USER || m == MET_T_CPU_SYS)
					spread(out, t0, dt, nbins, from, e->ts,
					       (double)v - (double)procs[j].v);
			} else {
				level += (double)v - (double)procs[j].v;
			}
			procs[j].v = v;
			procs[j].ts = e->ts;
		}
		if (!metric_defs[m].cumulative)
			out[b] = level;
	}
	free(idx);
	free(procs);
	return 0;
}
