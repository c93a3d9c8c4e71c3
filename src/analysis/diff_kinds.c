// SPDX-License-Identifier: MIT
/* Regions, memory, off-CPU, GPU, threads and processes of two runs side by side (diff_kinds.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diff_kinds.h"
#include "gpu.h"
#include "memory.h"
#include "procs.h"
#include "regions.h"
#include "stacks.h"
#include "util/hmap.h"
#include "util/vec.h"

#define LABEL_FRAMES 3 /* a stack's label: its last frames */

static void text_key(const char *s, uint8_t kind, uint64_t *k1, uint64_t *k2)
{
	*k1 = hash_mix64(hash_bytes(s, strlen(s)) + kind);
	*k2 = hash_mix64(*k1 ^ (strlen(s) * 0x9e3779b97f4a7c15ull + kind));
}

/* The row of key (taken: freed here when the row exists), made when missing; NULL: -ENOMEM. */
static struct diff_row *table_row(struct diff_table *t, char *key, uint8_t kind)
{
	uint64_t k1, k2, at;

	if (!key)
		return NULL;
	if (!t->idx && !(t->idx = hmap__new(256)))
		goto fail;
	text_key(key, kind, &k1, &k2);
	if (hmap__get(t->idx, k1, k2, &at)) {
		free(key);
		return &t->v[at];
	}
	if (arr_grow(t->v, t->cap, t->n + 1) || hmap__put(t->idx, k1, k2, t->n))
		goto fail;
	t->v[t->n] = (struct diff_row){.key = key, .label = key, .kind = kind};
	return &t->v[t->n++];
fail:
	free(key);
	return NULL;
}

static int table_add(struct diff_table *t, char *key, uint8_t kind, int side, double v, double n)
{
	struct diff_row *r = table_row(t, key, kind);

	if (!r)
		return -ENOMEM;
	r->present[side] = true;
	r->v[side] += v;
	r->n[side] += n;
	return 0;
}

static int cmp_row(const void *a, const void *b)
{
	const struct diff_row *x = a, *y = b;
	double dx = fabs(x->v[1] - x->v[0]), dy = fabs(y->v[1] - y->v[0]);

	return dx != dy ? (dx < dy ? 1 : -1) : strcmp(x->key, y->key);
}

static void table_sort(struct diff_table *t)
{
	if (t->n)
		qsort(t->v, t->n, sizeof(*t->v), cmp_row);
	hmap__free(t->idx); /* rows moved: find by key from here on */
	t->idx = NULL;
}

static void table_free(struct diff_table *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->v[i].key);
	free(t->v);
	hmap__free(t->idx);
	memset(t, 0, sizeof(*t));
}

const struct diff_row *diff_table_find(const struct diff_table *t, const char *key)
{
	for (size_t i = 0; i < t->n; i++)
		if (!strcmp(t->v[i].key, key))
			return &t->v[i];
	return NULL;
}

/* "a;b;c" of a stack node's functions, root first; its label points at the last frames. */
static char *stack_text(const struct profile *p, uint32_t node, const struct frame **tmp,
			size_t *label_at)
{
	size_t nf = node ? stack_frames(p, node, tmp, STACK_MAX_FRAMES, NULL) : 0, len = 1, pos = 0;
	char *s;

	for (size_t i = 0; i < nf; i++)
		len += strlen(profile__str(p, tmp[i]->name)) + 1;
	if (!nf)
		len += 10;
	s = malloc(len);
	if (!s)
		return NULL;
	*label_at = 0;
	if (!nf)
		pos = (size_t)snprintf(s, len, "[no stack]");
	for (size_t i = 0; i < nf; i++) {
		const char *n = profile__str(p, tmp[i]->name);
		size_t l = strlen(n);

		if (i == (nf > LABEL_FRAMES ? nf - LABEL_FRAMES : 0))
			*label_at = pos;
		memcpy(s + pos, n, l);
		pos += l;
		if (i + 1 < nf)
			s[pos++] = ';';
	}
	s[pos] = 0;
	return s;
}

static int add_stack(struct diff_table *t, const struct profile *p, uint32_t node, uint8_t kind,
		     int side, double v, double n, const struct frame **tmp)
{
	size_t at = 0;
	char *key = stack_text(p, node, tmp, &at);
	struct diff_row *r = table_row(t, key, kind);

	if (!r)
		return -ENOMEM;
	r->label = r->key + at;
	r->present[side] = true;
	r->v[side] += v;
	r->n[side] += n;
	return 0;
}

/* --- regions ----------------------------------------------------------------------------- */

static char *region_path(const struct profile *p, const struct region_set *rs, int32_t i)
{
	char *up = rs->nodes[i].parent >= 0 ? region_path(p, rs, rs->nodes[i].parent) : NULL;
	const char *name = profile__str(p, rs->nodes[i].name);
	size_t len = (up ? strlen(up) + 1 : 0) + strlen(name) + 1;
	char *s = malloc(len);

	if (s)
		snprintf(s, len, "%s%s%s", up ? up : "", up ? "/" : "", name);
	free(up);
	return s;
}

static int regions_side(struct diff_kinds *k, struct hmap *idx, size_t *cap,
			const struct profile *p, int side)
{
	struct region_set rs = {0};
	int err = regions_build(p, NULL, &rs);

	for (size_t i = 0; !err && i < rs.nnodes; i++) {
		const struct region_node *n = &rs.nodes[i];
		char *path = region_path(p, &rs, (int32_t)i);
		struct diff_region *d;
		uint64_t k1, k2, at;

		if (!path) {
			err = -ENOMEM;
			break;
		}
		text_key(path, 0, &k1, &k2);
		if (hmap__get(idx, k1, k2, &at)) {
			free(path);
		} else {
			if (arr_grow(k->regions, *cap, k->nregions + 1) ||
			    hmap__put(idx, k1, k2, k->nregions)) {
				free(path);
				err = -ENOMEM;
				break;
			}
			at = k->nregions++;
			k->regions[at] = (struct diff_region){.path = path, .depth = n->depth};
			k->regions[at].name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
		}
		d = &k->regions[at];
		d->present[side] = true;
		d->count[side] = n->count;
		d->mean_ns[side] = n->mean_ns;
		d->p50_ns[side] = (double)n->p50_ns;
		d->p99_ns[side] = (double)n->p99_ns;
		d->max_ns[side] = (double)n->max_ns;
		d->total_ns[side] = (double)n->total_ns;
	}
	region_set__free(&rs);
	return err;
}

const struct diff_region *diff_kinds_region(const struct diff_kinds *k, const char *name)
{
	const struct diff_region *best = NULL;

	for (size_t i = 0; i < k->nregions; i++) {
		const struct diff_region *d = &k->regions[i];

		if (!strcmp(d->path, name))
			return d;
		if (!strcmp(d->name, name) && (!best || d->depth < best->depth))
			best = d;
	}
	return best;
}

/* --- memory, off-CPU ---------------------------------------------------------------------- */

static int memory_side(struct diff_kinds *k, const struct profile *p, int side, double scale,
		       const struct frame **tmp)
{
	struct mem_result m = {0};
	int err = memory_analyze(p, &(struct mem_opts){0}, &m);

	if (err)
		return err;
	k->mem[side] = m.present;
	k->mem_peak[side] = m.peak_bytes;
	k->mem_leaked[side] = m.end_bytes;
	k->mem_leaks[side] = m.leak_count;
	k->rss_peak[side] = m.rss_peak;
	k->mem_allocated[side] = m.allocated_bytes * scale;
	k->mem_allocs[side] = m.alloc_count * scale;
	for (size_t i = 0; !err && i < m.nallocated; i++)
		err = add_stack(&k->mem_stacks, p, m.allocated[i].stack, 0, side,
				m.allocated[i].bytes * scale, m.allocated[i].count * scale, tmp);
	mem_result__free(&m);
	return err;
}

static int offcpu_side(struct diff_kinds *k, const struct profile *p, int side, double scale,
		       const struct frame **tmp)
{
	static const struct sample_filter all;
	struct offcpu_summary s = {0};
	int err = offcpu_summarize(p, &all, &s);

	if (err)
		return err;
	k->off[side] = s.intervals > 0;
	k->off_ns[side] = s.total_ns * scale;
	for (int w = 0; w < WAIT_OFFCPU_MAX; w++)
		k->off_kind_ns[w][side] = s.by_kind[w] * scale;
	for (size_t i = 0; !err && i < s.nstacks; i++)
		err = add_stack(&k->off_stacks, p, s.stacks[i].stack, s.stacks[i].kind, side,
				s.stacks[i].ns * scale, s.stacks[i].count * scale, tmp);
	offcpu_summary__free(&s);
	return err;
}

/* --- GPU ----------------------------------------------------------------------------------- */

static int gpu_side(struct diff_kinds *k, const struct profile *p, int side, double scale)
{
	struct gpu_summary g = {0};
	uint64_t busy = 0, window = 0;
	int err;

	k->gpu[side] = gpu_present(p);
	if (!k->gpu[side])
		return 0;
	err = gpu_analyze(p, &g);
	if (err)
		return err;
	k->gpu_activity[side] = g.have_activity;
	k->kernel_ns[side] = g.kernel_ns * scale;
	k->launches[side] = g.launches * scale;
	for (size_t i = 0; i < g.ndevices; i++) {
		busy += g.devices[i].busy_ns;
		window += g.devices[i].window_ns;
	}
	k->idle_pct[side] = window ? 100.0 - 100.0 * busy / window : 0;
	for (int d = 0; d < GPU_COPY_DIR_MAX; d++) {
		k->copy_bytes[d][side] = g.copies[d].bytes * scale;
		k->copy_ns[d][side] = g.copies[d].total_ns * scale;
		k->copy_count[d][side] = g.copies[d].count * scale;
	}
	for (size_t i = 0; !err && i < g.nkernels; i++)
		err = table_add(&k->kernels, strdup(profile__str(p, g.kernels[i].name)), 0, side,
				g.kernels[i].total_ns * scale, g.kernels[i].count * scale);
	gpu_summary_free(&g);
	return err;
}

/* --- threads, processes ------------------------------------------------------------------- */

struct tid_sum {
	uint32_t pid, tid;
	uint64_t samples, weight;
};

/* CPU time per thread in one pass over the samples (thread_stats also finds each thread's
 * hottest function, which costs a walk of every stack). */
static int thread_sums(const struct profile *p, struct tid_sum **out, size_t *n)
{
	struct hmap *idx = hmap__new(64);
	size_t cap = 0;
	int err = idx ? 0 : -ENOMEM;

	*out = NULL;
	*n = 0;
	for (size_t i = 0; !err && i < p->samples.n; i++) {
		const struct sample *s = &p->samples.v[i];
		uint64_t at;

		if (!hmap__get(idx, s->pid, s->tid, &at)) {
			if (arr_grow(*out, cap, *n + 1) || hmap__put(idx, s->pid, s->tid, *n)) {
				err = -ENOMEM;
				break;
			}
			at = (*n)++;
			(*out)[at] = (struct tid_sum){.pid = s->pid, .tid = s->tid};
		}
		(*out)[at].samples++;
		(*out)[at].weight += s->weight;
	}
	hmap__free(idx);
	return err;
}

static int tasks_side(struct diff_kinds *k, struct profile *p, int side, double scale,
		      const char (*prog)[64])
{
	struct tid_sum *ts = NULL;
	struct proc_stat *ps = NULL;
	size_t nt = 0, np = 0;
	char buf[64];
	int err = thread_sums(p, &ts, &nt);

	err = err ?: process_stats(p, &(struct sample_filter){0}, &ps, &np);
	/* by thread name: tids differ between runs (threads of one name merge) */
	for (size_t i = 0; !err && i < nt; i++) {
		const struct thread *t = profile__thread(p, ts[i].pid, ts[i].tid, false);
		const char *c = t ? profile__str(p, t->comm) : "";

		if (side == DIFF_BASE)
			c = diff_rename(prog[0], prog[1], c);
		err = table_add(&k->threads, strdup(*c ? c : "[unknown]"), 0, side,
				ts[i].weight * scale, ts[i].samples * scale);
	}
	/* by process name: pids and arguments differ between runs (workers of one name merge) */
	for (size_t i = 0; !err && i < np; i++) {
		const char *c = ps[i].comm ? profile__str(p, ps[i].comm) : "";

		if (side == DIFF_BASE)
			c = diff_rename(prog[0], prog[1], c);
		err =
		    table_add(&k->procs, strdup(*c ? c : proc_command(p, &ps[i], buf, sizeof(buf))),
			      0, side, ps[i].weight * scale, ps[i].samples * scale);
	}
	free(ts);
	free(ps);
	return err;
}

int diff_kinds(struct profile *base, struct profile *new, const struct diff_result *r,
	       struct diff_kinds *out)
{
	struct profile *p[2] = {base, new};
	const struct frame **tmp = malloc(STACK_MAX_FRAMES * sizeof(*tmp));
	struct hmap *ridx = hmap__new(64);
	size_t rcap = 0;
	int err = tmp && ridx ? 0 : -ENOMEM;

	memset(out, 0, sizeof(*out));
	for (int s = 0; s < 2 && !err; s++) {
		double scale = r->run[s].scale;

		err = regions_side(out, ridx, &rcap, p[s], s);
		err = err ?: memory_side(out, p[s], s, scale, tmp);
		err = err ?: offcpu_side(out, p[s], s, scale, tmp);
		err = err ?: gpu_side(out, p[s], s, scale);
		err = err ?: tasks_side(out, p[s], s, scale, r->prog);
	}
	table_sort(&out->mem_stacks);
	table_sort(&out->off_stacks);
	table_sort(&out->kernels);
	table_sort(&out->threads);
	table_sort(&out->procs);
	free(tmp);
	hmap__free(ridx);
	if (err)
		diff_kinds__free(out);
	return err;
}

void diff_kinds__free(struct diff_kinds *k)
{
	for (size_t i = 0; i < k->nregions; i++)
		free(k->regions[i].path);
	free(k->regions);
	table_free(&k->mem_stacks);
	table_free(&k->off_stacks);
	table_free(&k->kernels);
	table_free(&k->threads);
	table_free(&k->procs);
	memset(k, 0, sizeof(*k));
}
