// SPDX-License-Identifier: MIT
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/hmap.h"
#include "util/vec.h"
#include "model/event.h"
#include "regions.h"

static bool inst_match(const struct sample_filter *f, const struct event *e)
{
	if (!f)
		return true;
	if ((f->pid && e->pid != f->pid) || (f->tid && e->tid != f->tid))
		return false;
	return !((f->t0 && e->ts < f->t0) || (f->t1 && e->ts > f->t1));
}

/* Thread, then start; an enclosing region (longer) before the regions it encloses. */
static int cmp_inst(const void *a, const void *b)
{
	const struct region_inst *x = a, *y = b;

	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if (x->end != y->end)
		return x->end > y->end ? -1 : 1;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static uint64_t nearest_rank(const uint64_t *v, size_t n, double pct)
{
	size_t k = (size_t)ceil(pct / 100.0 * n);

	return v[k ? k - 1 : 0];
}

void region_stats(uint64_t *d, size_t n, struct region_node *o)
{
	double sum = 0, sq = 0;

	o->count = n;
	if (!n)
		return;
	qsort(d, n, sizeof(*d), cmp_u64);
	for (size_t i = 0; i < n; i++)
		sum += d[i];
	o->mean_ns = sum / n;
	for (size_t i = 0; i < n; i++)
		sq += (d[i] - o->mean_ns) * (d[i] - o->mean_ns);
	o->std_ns = n > 1 ? sqrt(sq / (n - 1)) : 0;
	o->min_ns = d[0];
	o->max_ns = d[n - 1];
	o->p50_ns = nearest_rank(d, n, 50);
	o->p90_ns = nearest_rank(d, n, 90);
	o->p99_ns = nearest_rank(d, n, 99);
}

static const struct region_set *seq_set;

static int cmp_start(const void *a, const void *b)
{
	const struct region_inst *x = &seq_set->inst[*(const uint32_t *)a];
	const struct region_inst *y = &seq_set->inst[*(const uint32_t *)b];

	return x->start < y->start ? -1 : x->start > y->start;
}

/* Communication calls numbered 1, 2... per process, name and communicator, by start. */
static int number_calls(struct region_set *s)
{
	uint32_t *ord = malloc((s->n + 1) * sizeof(*ord));
	struct hmap *next = hmap__new(16);
	size_t n = 0;

	if (!ord || !next) {
		free(ord);
		hmap__free(next);
		return -ENOMEM;
	}
	for (size_t i = 0; i < s->n; i++)
		if (s->inst[i].comm_call)
			ord[n++] = (uint32_t)i;
	seq_set = s;
	qsort(ord, n, sizeof(*ord), cmp_start);
	for (size_t i = 0; i < n; i++) {
		struct region_inst *r = &s->inst[ord[i]];
		uint64_t k1 = (uint64_t)r->pid << 32 | r->name, seq = 0;

		hmap__get(next, k1, r->comm, &seq);
		r->seq = ++seq;
		if (hmap__put(next, k1, r->comm, seq)) {
			n = 0;
			break;
		}
	}
	free(ord);
	hmap__free(next);
	return 0;
}

static int collect(const struct profile *p, const struct sample_filter *f, struct region_set *s)
{
	size_t n = 0;

	for (size_t i = 0; i < p->events.n; i++)
		n += p->events.v[i].kind == EVK_REGION && inst_match(f, &p->events.v[i]);
	s->inst = calloc(n ? n : 1, sizeof(*s->inst));
	if (!s->inst)
		return -ENOMEM;
	for (size_t i = 0; i < p->events.n; i++) {
		const struct event *e = &p->events.v[i];
		struct region_inst *r;

		if (e->kind != EVK_REGION || !inst_match(f, e))
			continue;
		r = &s->inst[s->n++];
		r->start = e->ts;
		r->end = e->ts + e->dur;
		r->pid = e->pid;
		r->tid = e->tid;
		r->name = e->name;
		r->open = e->flags & EVF_REGION_OPEN;
		r->sampled = e->flags & EVF_REGION_SAMPLED;
		r->collective = e->flags & EVF_REGION_COLL;
		r->comm_call = e->flags & EVF_REGION_COMM;
		r->comm = ev_region_comm(e);
		r->bytes = ev_region_bytes(e);
	}
	qsort(s->inst, s->n, sizeof(*s->inst), cmp_inst);
	return number_calls(s);
}

/*
 * Pops the top of the parent stack. top maps a name to 1 + the topmost stack entry of that
 * name; same[] chains each entry to the one below it, so popping restores the previous one.
 */
static int stack_pop(struct region_set *s, const int32_t *stack, size_t *sp, struct hmap *top,
		     const int32_t *same)
{
	int32_t j = stack[--*sp];

	return hmap__put(top, s->inst[j].name, 0, (uint64_t)(same[j] + 1));
}

/*
 * Parents by time containment on each thread: the recorded depth may miss lost regions.
 * Also finds each instance's nearest enclosing instance of the same name (same[], -1 for
 * none): the open stack is the ancestor chain, and walking it per instance would cost the
 * nesting depth each time (deep recursion with many children is quadratic).
 */
static int link_parents(struct region_set *s, int32_t *same)
{
	int32_t *stack = malloc((s->n ? s->n : 1) * sizeof(*stack));
	struct hmap *top = hmap__new(64);
	size_t sp = 0;
	int err = -ENOMEM;

	if (!stack || !top)
		goto out;
	for (size_t i = 0; i < s->n; i++) {
		struct region_inst *r = &s->inst[i];
		uint64_t v = 0;

		if (i && s->inst[i - 1].tid != r->tid)
			while (sp)
				if (stack_pop(s, stack, &sp, top, same))
					goto out;
		while (sp && s->inst[stack[sp - 1]].end < r->end)
			if (stack_pop(s, stack, &sp, top, same))
				goto out;
		r->parent = sp ? stack[sp - 1] : -1;
		r->depth = sp;
		if (r->parent >= 0)
			s->inst[r->parent].child_ns += r->end - r->start;
		hmap__get(top, r->name, 0, &v);
		same[i] = (int32_t)v - 1;
		if (hmap__put(top, r->name, 0, i + 1))
			goto out;
		stack[sp++] = (int32_t)i;
	}
	err = 0;
out:
	hmap__free(top);
	free(stack);
	return err;
}

static int node_get(struct region_set *s, struct hmap *idx, size_t *cap, int32_t parent,
		    uint32_t name, uint32_t *out)
{
	uint64_t v;

	if (hmap__get(idx, (uint64_t)(parent + 1), name, &v)) {
		*out = v;
		return 0;
	}
	if (arr_grow(s->nodes, *cap, s->nnodes + 1))
		return -ENOMEM;
	memset(&s->nodes[s->nnodes], 0, sizeof(s->nodes[0]));

	s->nodes[s->nnodes].name = name;
	s->nodes[s->nnodes].parent = parent;
	s->nodes[s->nnodes].depth = parent >= 0 ? s->nodes[parent].depth + 1 : 0;
	if (hmap__put(idx, (uint64_t)(parent + 1), name, s->nnodes))
		return -ENOMEM;
	*out = s->nnodes++;
	return 0;
}

/* Nodes keyed by (parent node, name); an instance inside one of its own name joins that node. */
static int assign_nodes(struct region_set *s, const int32_t *same)
{
	struct hmap *idx = hmap__new(64);
	size_t cap = 0;
	int err = 0;

	if (!idx)
		return -ENOMEM;
	for (size_t i = 0; i < s->n && !err; i++) {
		struct region_inst *r = &s->inst[i];
		int32_t a = same[i];

		if (a >= 0) {
			r->recursive = true;
			r->node = s->inst[a].node;
		} else {
			int32_t pn = r->parent >= 0 ? (int32_t)s->inst[r->parent].node : -1;

			err = node_get(s, idx, &cap, pn, r->name, &r->node);
		}
	}
	hmap__free(idx);
	return err;
}

static int node_stats(struct region_set *s)
{
	size_t *off = calloc(s->nnodes + 1, sizeof(*off));
	uint64_t *durs = malloc((s->n ? s->n : 1) * sizeof(*durs));
	size_t *fill = calloc(s->nnodes + 1, sizeof(*fill));
	int err = -ENOMEM;

	if (!off || !durs || !fill)
		goto out;
	for (size_t i = 0; i < s->n; i++)
		off[s->inst[i].node + 1]++;
	for (size_t k = 0; k < s->nnodes; k++)
		off[k + 1] += off[k];
	for (size_t i = 0; i < s->n; i++) {
		const struct region_inst *r = &s->inst[i];
		struct region_node *nd = &s->nodes[r->node];
		uint64_t dur = r->end - r->start;

		durs[off[r->node] + fill[r->node]++] = dur;
		if (!r->recursive)
			nd->total_ns += dur;
		nd->self_ns += dur > r->child_ns ? dur - r->child_ns : 0;
		nd->open += r->open;
		nd->sampled += r->sampled;
	}
	for (size_t k = 0; k < s->nnodes; k++)
		region_stats(durs + off[k], off[k + 1] - off[k], &s->nodes[k]);
	err = 0;
out:
	free(off);
	free(durs);
	free(fill);
	return err;
}

/* Depth-first order, siblings by total time; instance node indexes follow. */
static const struct region_node *g_nodes;

static int cmp_sibling(const void *a, const void *b)
{
	const struct region_node *x = &g_nodes[*(const uint32_t *)a];
	const struct region_node *y = &g_nodes[*(const uint32_t *)b];

	if (x->parent != y->parent)
		return x->parent < y->parent ? -1 : 1;
	if (x->total_ns != y->total_ns)
		return x->total_ns > y->total_ns ? -1 : 1;
	return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

static int order_nodes(struct region_set *s)
{
	size_t n = s->nnodes, sp = 0, k = 0;
	uint32_t *by = malloc((n + 1) * sizeof(*by)), *stack = malloc((n + 1) * sizeof(*stack));
	uint32_t *newid = malloc((n + 1) * sizeof(*newid));
	size_t *first = calloc(n + 2, sizeof(*first)); /* children of node p: by[first[p+1]..] */
	struct region_node *out = malloc((n + 1) * sizeof(*out));
	int err = -ENOMEM;

	if (!by || !stack || !newid || !first || !out)
		goto done;
	for (size_t i = 0; i < n; i++)
		by[i] = i;
	g_nodes = s->nodes;
	qsort(by, n, sizeof(*by), cmp_sibling);
	/* by is grouped by parent (-1 first): index where each parent's children start. */
	for (size_t i = 0; i < n; i++)
		first[s->nodes[i].parent + 2]++;
	for (size_t i = 1; i < n + 2; i++)
		first[i] += first[i - 1];
	/* Push children in reverse so the biggest pops first. */
	for (size_t i = first[1]; i-- > first[0];)
		stack[sp++] = by[i];
	while (sp) {
		uint32_t id = stack[--sp];

		newid[id] = k;
		out[k++] = s->nodes[id];
		for (size_t i = first[id + 2]; i-- > first[id + 1];)
			stack[sp++] = by[i];
	}
	for (size_t i = 0; i < k; i++)
		if (out[i].parent >= 0)
			out[i].parent = newid[out[i].parent];
	for (size_t i = 0; i < s->n; i++)
		s->inst[i].node = newid[s->inst[i].node];
	free(s->nodes);
	s->nodes = out;
	out = NULL;
	err = 0;
done:
	free(by);
	free(stack);
	free(newid);
	free(first);
	free(out);
	return err;
}

int regions_build(const struct profile *p, const struct sample_filter *f, struct region_set *out)
{
	int32_t *same = NULL;
	int err;

	memset(out, 0, sizeof(*out));
	err = collect(p, f, out);
	if (!err && !(same = malloc((out->n ? out->n : 1) * sizeof(*same))))
		err = -ENOMEM;
	if (!err)
		err = link_parents(out, same);
	if (!err)
		err = assign_nodes(out, same);
	free(same);
	if (!err)
		err = node_stats(out);
	if (!err && out->nnodes)
		err = order_nodes(out);
	if (err)
		region_set__free(out);
	return err;
}

void region_set__free(struct region_set *s)
{
	free(s->inst);
	free(s->nodes);
	memset(s, 0, sizeof(*s));
}

/* Instances of name, by start time (then thread). */
static struct region_span *spans_of(const struct profile *p, const char *name, size_t *n)
{
	uint32_t id = 0;
	struct region_span *v;
	size_t k = 0;

	*n = 0;
	for (size_t i = 0; i < p->events.n; i++) {
		const struct event *e = &p->events.v[i];

		if (e->kind != EVK_REGION)
			continue;
		if ((id && e->name == id) || (!id && !strcmp(profile__str(p, e->name), name))) {
			id = e->name;
			k++;
		}
	}
	v = malloc((k ? k : 1) * sizeof(*v));
	if (!v)
		return NULL;
	for (size_t i = 0; i < p->events.n && k; i++) {
		const struct event *e = &p->events.v[i];

		if (e->kind == EVK_REGION && e->name == id)
			v[(*n)++] = (struct region_span){ e->pid, e->tid, e->ts, e->ts + e->dur };
	}
	return v;
}

static int cmp_span_start(const void *a, const void *b)
{
	const struct region_span *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return x->end > y->end ? -1 : x->end < y->end;
}

int regions_instance(const struct profile *p, const char *name, long n, struct region_span *out)
{
	size_t cnt;
	struct region_span *v = spans_of(p, name, &cnt);
	long idx = n < 0 ? (long)cnt + n : n;

	if (!v)
		return -ENOMEM;
	if (idx < 0 || (size_t)idx >= cnt) {
		free(v);
		return -ENOENT;
	}
	qsort(v, cnt, sizeof(*v), cmp_span_start);
	*out = v[idx];
	free(v);
	return 0;
}

size_t regions_count(const struct profile *p, const char *name)
{
	size_t n;

	free(spans_of(p, name, &n));
	return n;
}

struct region_ranges {
	struct region_span *v; /* by thread, then start; disjoint per thread */
	size_t n;
};

static int cmp_span_tid(const void *a, const void *b)
{
	const struct region_span *x = a, *y = b;

	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return x->start < y->start ? -1 : x->start > y->start;
}

struct region_ranges *region_ranges__new(const struct profile *p, const char *name)
{
	struct region_ranges *r = calloc(1, sizeof(*r));
	size_t n, k = 0;

	if (!r)
		return NULL;
	r->v = spans_of(p, name, &n);
	if (!r->v) {
		free(r);
		return NULL;
	}
	qsort(r->v, n, sizeof(*r->v), cmp_span_tid);
	/* Merge recursive (nested) and touching instances of a thread into one range. */
	for (size_t i = 0; i < n; i++) {
		if (k && r->v[k - 1].tid == r->v[i].tid && r->v[i].start <= r->v[k - 1].end) {
			if (r->v[i].end > r->v[k - 1].end)
				r->v[k - 1].end = r->v[i].end;
			continue;
		}
		r->v[k++] = r->v[i];
	}
	r->n = k;
	return r;
}

void region_ranges__free(struct region_ranges *r)
{
	if (!r)
		return;
	free(r->v);
	free(r);
}

size_t region_ranges__n(const struct region_ranges *r)
{
	return r ? r->n : 0;
}

bool region_ranges__match(const void *arg, const struct sample *s)
{
	const struct region_ranges *r = arg;
	size_t lo = 0, hi = r->n;

	/* The last range of the thread starting at or before the sample. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct region_span *m = &r->v[mid];

		if (m->tid < s->tid || (m->tid == s->tid && m->start <= s->ts))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo && r->v[lo - 1].tid == s->tid && s->ts <= r->v[lo - 1].end;
}
