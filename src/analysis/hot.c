// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hot.h"
#include "pygil.h"
#include "util/vec.h"

bool sample_filter__match(const struct sample_filter *f, const struct sample *s)
{
	if (!f)
		return true;
	if ((f->pid && s->pid != f->pid) || (f->tid && s->tid != f->tid))
		return false;
	if ((f->t0 && s->ts < f->t0) || (f->t1 && s->ts > f->t1))
		return false;
	return !f->match || f->match(f->match_arg, s);
}

int stack_counts(const struct profile *p, const struct sample_filter *f, struct stack_counts *out)
{
	out->n = p->stacks.n;
	out->samples = calloc(out->n, sizeof(uint64_t));
	out->weight = calloc(out->n, sizeof(uint64_t));
	if (!out->samples || !out->weight) {
		stack_counts__free(out);
		return -ENOMEM;
	}
	for (size_t i = 0; i < p->samples.n; i++) {
		const struct sample *s = &p->samples.v[i];

		if (!sample_filter__match(f, s) || s->stack >= out->n)
			continue;
		out->samples[s->stack]++;
		out->weight[s->stack] += s->weight;
	}
	return 0;
}

void stack_counts__free(struct stack_counts *c)
{
	free(c->samples);
	free(c->weight);
	c->samples = c->weight = NULL;
}

struct hot_state {
	struct profile *p;
	const struct hot_opts *o;
	struct hmap *index; /* (name, module or file:line key) -> funcs index */
	struct func_stat *funcs;
	size_t n, cap;
	uint32_t *onpath; /* per function: how often it occurs on the path the walk is at */
	size_t cap_onpath;
	/*
	 * A location's function indexes depend on the location alone (by_line keys every frame
	 * by the location's innermost line), so they are looked up once per location:
	 * loc_off[loc] - 1 is where they start in lf, -1 standing for a skipped inlined frame.
	 */
	uint32_t *loc_off;
	int32_t *lf;
	size_t nlf, caplf;
};

static int64_t func_index(struct hot_state *h, const struct frame *f, const struct frame *leaf)
{
	uint32_t name = f->name;
	uint64_t idx, where = f->module;

	if (h->o->by_line && leaf) {
		char buf[1024];
		const char *file = profile__str(h->p, leaf->file), *slash = strrchr(file, '/');

		snprintf(buf, sizeof(buf), "%s (%s:%u)", profile__str(h->p, f->name),
			 *file ? (slash ? slash + 1 : file) : "??", leaf->line);
		name = profile__intern(h->p, buf);
	}
	/* A Python function is one per file: all are in module "python". */
	if (f->kind == FRAME_PYTHON && !h->o->by_line)
		where = 1ULL << 32 | f->file;
	if (hmap__get(h->index, name, where, &idx))
		return idx;
	if (arr_grow(h->funcs, h->cap, h->n + 1) || arr_grow(h->onpath, h->cap_onpath, h->n + 1))
		return -ENOMEM;
	memset(&h->funcs[h->n], 0, sizeof(h->funcs[0]));
	h->funcs[h->n].name = name;
	h->funcs[h->n].module = f->module;
	h->funcs[h->n].kind = f->kind;
	h->funcs[h->n].file = f->kind == FRAME_PYTHON && !h->o->by_line ? f->file : 0;
	h->onpath[h->n] = 0;
	if (hmap__put(h->index, name, where, h->n))
		return -ENOMEM;
	return h->n++;
}

/* Looks up the function indexes of a location's frames once. Returns 0 or -ENOMEM. */
static int loc_funcs(struct hot_state *h, uint32_t loc)
{
	uint32_t nf;
	const struct frame *fr = profile__loc_frames(h->p, loc, &nf);

	if (h->loc_off[loc])
		return 0;
	if (h->nlf + nf >= UINT32_MAX)
		return -ENOMEM;
	if (arr_grow(h->lf, h->caplf, h->nlf + nf))
		return -ENOMEM;
	for (uint32_t k = 0; k < nf; k++) {
		int64_t idx = -1;

		if (!fr[k].inlined || h->o->inlined) {
			/* by_line keys the leaf by its innermost line, callers by their own line. */
			idx = func_index(h, &fr[k], h->o->by_line ? &fr[0] : NULL);
			if (idx < 0)
				return (int)idx;
		}
		h->lf[h->nlf + k] = (int32_t)idx;
	}
	h->loc_off[loc] = (uint32_t)h->nlf + 1;
	h->nlf += nf;
	return 0;
}

/*
 * Creates the functions of every stack with samples in the order a walk of each stack from
 * its leaf creates them (ties in the sort keep that order). Above a node seen before, every
 * function exists already, so each node is looked at once.
 */
static int create_funcs(struct hot_state *h, const struct stack_counts *c, uint8_t *seen)
{
	for (size_t i = 1; i < c->n; i++) {
		if (!c->samples[i])
			continue;
		for (uint32_t n = (uint32_t)i; n && !seen[n]; n = h->p->stacks.v[n].parent) {
			int err = loc_funcs(h, h->p->stacks.v[n].loc);

			seen[n] = 1;
			if (err)
				return err;
		}
	}
	return 0;
}

/* The function indexes of a node's location, looked up by loc_funcs. */
static const int32_t *node_funcs(const struct hot_state *h, uint32_t node, uint32_t *nf)
{
	uint32_t loc = h->p->stacks.v[node].loc;

	*nf = h->p->locations.v[loc].frame_n;
	return &h->lf[h->loc_off[loc] - 1];
}

struct hot_walk {
	uint64_t *sub_s, *sub_w; /* samples and weight of a node's subtree */
	uint32_t *start, *kids;	 /* children of node n: kids[start[n]..start[n + 1]) */
	uint32_t *cur, *stk;	 /* the depth-first walk: child cursor per node, path */
	int32_t *self;		 /* per path level: the innermost function counted at it */
};

static void hot_walk__free(struct hot_walk *w)
{
	free(w->sub_s);
	free(w->sub_w);
	free(w->start);
	free(w->kids);
	free(w->cur);
	free(w->stk);
	free(w->self);
}

/* Subtree sums (parents precede children) and the children of nodes with samples below. */
static int hot_walk__init(struct hot_walk *w, const struct profile *p, const struct stack_counts *c)
{
	size_t n = c->n;

	w->sub_s = malloc(n * sizeof(*w->sub_s));
	w->sub_w = malloc(n * sizeof(*w->sub_w));
	w->start = calloc(n + 2, sizeof(*w->start));
	w->kids = malloc(n * sizeof(*w->kids));
	w->cur = malloc(n * sizeof(*w->cur));
	w->stk = malloc((n + 1) * sizeof(*w->stk));
	w->self = malloc((n + 1) * sizeof(*w->self));
	if (!w->sub_s || !w->sub_w || !w->start || !w->kids || !w->cur || !w->stk || !w->self)
		return -ENOMEM;
	memcpy(w->sub_s, c->samples, n * sizeof(*w->sub_s));
	memcpy(w->sub_w, c->weight, n * sizeof(*w->sub_w));
	for (size_t i = n; i-- > 1;) {
		uint32_t parent = p->stacks.v[i].parent;

		w->sub_s[parent] += w->sub_s[i];
		w->sub_w[parent] += w->sub_w[i];
		if (w->sub_s[i])
			w->start[parent + 2]++;
	}
	/* Counts sit one slot ahead so that filling moves each start to its final place. */
	for (size_t i = 2; i < n + 2; i++)
		w->start[i] += w->start[i - 1];
	for (size_t i = 1; i < n; i++)
		if (w->sub_s[i])
			w->kids[w->start[p->stacks.v[i].parent + 1]++] = (uint32_t)i;
	for (size_t i = 0; i < n; i++)
		w->cur[i] = w->start[i];
	return 0;
}

/*
 * Self and total in one depth-first walk of the trie instead of a walk per stack: a function
 * gets the samples of the subtree of each node where it occurs and does not occur above,
 * which is once per stack that holds it, however often recursion repeats it.
 */
static void count_walk(struct hot_state *h, const struct stack_counts *c, struct hot_walk *w)
{
	size_t top = 1;

	w->stk[0] = 0;
	w->self[0] = -1;
	while (top) {
		uint32_t n = w->stk[top - 1], m, nf;
		const int32_t *lf;

		if (w->cur[n] == w->start[n + 1]) {
			/* Leaving n: its functions are no longer on the path. */
			if (n) {
				lf = node_funcs(h, n, &nf);
				for (uint32_t k = 0; k < nf; k++)
					if (lf[k] >= 0)
						h->onpath[lf[k]]--;
			}
			top--;
			continue;
		}
		m = w->kids[w->cur[n]++];
		lf = node_funcs(h, m, &nf);
		w->self[top] = w->self[top - 1];
		for (uint32_t k = nf; k-- > 0;) {
			if (lf[k] < 0)
				continue;
			w->self[top] = lf[k];
			if (!h->onpath[lf[k]]++) {
				h->funcs[lf[k]].total += w->sub_s[m];
				h->funcs[lf[k]].total_ns += w->sub_w[m];
			}
		}
		if (c->samples[m] && w->self[top] >= 0) {
			h->funcs[w->self[top]].self += c->samples[m];
			h->funcs[w->self[top]].self_ns += c->weight[m];
		}
		w->stk[top++] = m;
	}
}

/*
 * A Python sample's root [GIL] / [no GIL] mark is the thread's state, not a function: it has
 * its own table (report_python.c), and would otherwise top --sort total.
 */
static void drop_gil_marks(const struct profile *p, struct hot_state *h)
{
	size_t n = 0;

	for (size_t i = 0; i < h->n; i++) {
		const char *name = profile__str(p, h->funcs[i].name);

		if (h->funcs[i].kind == FRAME_SPECIAL &&
		    (!strcmp(name, PY_GIL_HELD) || !strcmp(name, PY_GIL_NOT_HELD)))
			continue;
		h->funcs[n++] = h->funcs[i];
	}
	h->n = n;
}

static int cmp_self(const void *a, const void *b)
{
	const struct func_stat *x = a, *y = b;

	if (x->self != y->self)
		return x->self < y->self ? 1 : -1;
	if (x->total != y->total)
		return x->total < y->total ? 1 : -1;
	return x->name < y->name ? -1 : x->name > y->name;
}

static int cmp_total(const void *a, const void *b)
{
	const struct func_stat *x = a, *y = b;

	if (x->total != y->total)
		return x->total < y->total ? 1 : -1;
	return cmp_self(a, b);
}

int hot_functions(struct profile *p, const struct hot_opts *o, struct hot_result *out)
{
	struct hot_state h = { .p = p, .o = o };
	struct hot_walk w = { 0 };
	struct stack_counts c;
	uint8_t *seen = NULL;
	int err;

	memset(out, 0, sizeof(*out));
	err = stack_counts(p, &o->filter, &c);
	if (err)
		return err;
	err = -ENOMEM;
	h.index = hmap__new(1024);
	h.loc_off = calloc(p->locations.n ? p->locations.n : 1, sizeof(*h.loc_off));
	h.caplf = 1024;
	h.lf = malloc(h.caplf * sizeof(*h.lf));
	seen = calloc(c.n ? c.n : 1, 1);
	if (!h.index || !h.loc_off || !h.lf || !seen)
		goto out;
	for (size_t i = 0; i < c.n; i++) {
		out->samples += c.samples[i];
		out->weight += c.weight[i];
	}
	err = create_funcs(&h, &c, seen);
	if (err)
		goto out;
	if (c.n) {
		err = hot_walk__init(&w, p, &c);
		if (err)
			goto out;
		count_walk(&h, &c, &w);
	}
	drop_gil_marks(p, &h);
	if (h.n)
		qsort(h.funcs, h.n, sizeof(*h.funcs), o->sort == SORT_TOTAL ? cmp_total : cmp_self);
	out->funcs = h.funcs;
	out->n = h.n;
	h.funcs = NULL;
out:
	hot_walk__free(&w);
	free(seen);
	free(h.funcs);
	free(h.onpath);
	free(h.loc_off);
	free(h.lf);
	hmap__free(h.index);
	stack_counts__free(&c);
	return err;
}

void hot_result__free(struct hot_result *r)
{
	free(r->funcs);
	r->funcs = NULL;
	r->n = 0;
}

static int cmp_thread(const void *a, const void *b)
{
	const struct thread_stat *x = a, *y = b;

	if (x->samples != y->samples)
		return x->samples < y->samples ? 1 : -1;
	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

/*
 * Thread tops: per thread (of the first 64) and function, the self samples; per thread and
 * leaf node, the samples, for the totals that break a tie.
 */
struct tf_entry {
	uint32_t slot;
	int32_t fn;
	uint64_t self, total;
};

struct tf_leaf {
	uint32_t node, next; /* next leaf of the same thread + 1, 0 = none */
	uint64_t samples;
};

struct tf_state {
	struct hot_state h;
	VEC(struct tf_entry) e;
	VEC(struct tf_leaf) l;
	uint32_t *head;		/* per slot: its first leaf + 1 */
	struct hmap *eix, *lix; /* (slot, fn) -> e index, (slot, node) -> l index */
	/* tie breaking: candidate bit + 1 per function, per node the candidates on its path */
	uint8_t *bit;
	uint64_t *mask;
	uint32_t *mask_epoch, epoch, *path;
};

/* Counts a sample of thread slot whose innermost counted function is fn, at leaf node. */
static int tf_add(struct tf_state *t, uint32_t slot, int32_t fn, uint32_t node)
{
	uint64_t i;

	if (!hmap__get(t->eix, slot, (uint32_t)fn, &i)) {
		struct tf_entry *n = vec_push(t->e);

		if (!n)
			return -ENOMEM;
		i = t->e.n - 1;
		*n = (struct tf_entry){ .slot = slot, .fn = fn };
		if (hmap__put(t->eix, slot, (uint32_t)fn, i))
			return -ENOMEM;
	}
	t->e.v[i].self++;
	if (!hmap__get(t->lix, slot, node, &i)) {
		struct tf_leaf *n = t->l.n < UINT32_MAX - 1 ? vec_push(t->l) : NULL;

		if (!n)
			return -ENOMEM;
		i = t->l.n - 1;
		*n = (struct tf_leaf){ .node = node, .next = t->head[slot] };
		t->head[slot] = (uint32_t)i + 1;
		if (hmap__put(t->lix, slot, node, i))
			return -ENOMEM;
	}
	t->l.v[i].samples++;
	return 0;
}

/* The candidates (bits) among the functions on the path from the root to node, memoized. */
static uint64_t tf_path_mask(struct tf_state *t, uint32_t node)
{
	const struct profile *p = t->h.p;
	size_t depth = 0;
	uint64_t m = 0;

	while (node && t->mask_epoch[node] != t->epoch) {
		t->path[depth++] = node;
		node = p->stacks.v[node].parent;
	}
	if (node)
		m = t->mask[node];
	while (depth) {
		uint32_t n = t->path[--depth], nf;
		const int32_t *lf = node_funcs(&t->h, n, &nf);

		for (uint32_t k = 0; k < nf; k++)
			if (lf[k] >= 0 && t->bit[lf[k]])
				m |= 1ULL << (t->bit[lf[k]] - 1);
		t->mask[n] = m;
		t->mask_epoch[n] = t->epoch;
	}
	return m;
}

/*
 * Totals of the functions cand[0..nc) (e indexes, at most 64: a bit each) of thread slot:
 * the samples of each of its stacks whose path holds the function, counted once per path.
 */
static void tf_totals(struct tf_state *t, uint32_t slot, const uint32_t *cand, size_t nc)
{
	for (size_t k = 0; k < nc; k++)
		t->bit[t->e.v[cand[k]].fn] = (uint8_t)(k + 1);
	if (!++t->epoch) {
		memset(t->mask_epoch, 0, t->h.p->stacks.n * sizeof(*t->mask_epoch));
		t->epoch = 1;
	}
	for (uint32_t i = t->head[slot]; i; i = t->l.v[i - 1].next) {
		const struct tf_leaf *l = &t->l.v[i - 1];

		for (uint64_t m = tf_path_mask(t, l->node); m; m &= m - 1)
			t->e.v[cand[__builtin_ctzll(m)]].total += l->samples;
	}
	for (size_t k = 0; k < nc; k++)
		t->bit[t->e.v[cand[k]].fn] = 0;
}

/* Whether x ranks above y as a thread's hottest function (cmp_self's order, then module). */
static bool tf_better(const struct tf_state *t, const struct tf_entry *x, const struct tf_entry *y)
{
	const struct func_stat *fx = &t->h.funcs[x->fn], *fy = &t->h.funcs[y->fn];

	if (x->self != y->self)
		return x->self > y->self;
	if (x->total != y->total)
		return x->total > y->total;
	if (fx->name != fy->name)
		return fx->name < fy->name;
	return fx->module < fy->module;
}

/*
 * The first place of a thread where many functions tie (a thread whose every sample is in a
 * function of its own): one hot_functions pass filtered to the thread, as cmp_self ranks.
 */
static int tf_fallback(const struct profile *p, const struct sample_filter *f, struct thread_stat *v)
{
	struct hot_opts o = { 0 };
	struct hot_result r;
	const struct func_stat *b = NULL;
	int err;

	if (f)
		o.filter = *f;
	o.filter.tid = v->tid;
	err = hot_functions((struct profile *)p, &o, &r);
	if (err)
		return err;
	for (size_t i = 0; i < r.n; i++) {
		const struct func_stat *x = &r.funcs[i];

		if (!b || x->self > b->self ||
		    (x->self == b->self &&
		     (x->total > b->total ||
		      (x->total == b->total &&
		       (x->name < b->name || (x->name == b->name && x->module < b->module))))))
			b = x;
	}
	if (b && b->self) {
		v->top_func = b->name;
		v->top_self = b->self;
	}
	hot_result__free(&r);
	return 0;
}

static int tf_break_ties(struct tf_state *t, const struct sample_filter *f, struct thread_stat *v,
			 size_t nt, size_t *best)
{
	uint32_t *cand = malloc(t->e.n * sizeof(*cand));
	int err = 0;

	t->bit = calloc(t->h.n ? t->h.n : 1, 1);
	t->mask = malloc(t->h.p->stacks.n * sizeof(*t->mask));
	t->mask_epoch = calloc(t->h.p->stacks.n, sizeof(*t->mask_epoch));
	t->path = malloc(t->h.p->stacks.n * sizeof(*t->path));
	if (!cand || !t->bit || !t->mask || !t->mask_epoch || !t->path) {
		free(cand);
		return -ENOMEM;
	}
	for (uint32_t s = 0; s < nt && !err; s++) {
		size_t nc = 0;

		if (best[s] == SIZE_MAX)
			continue;
		for (size_t i = 0; i < t->e.n; i++)
			if (t->e.v[i].slot == s && t->e.v[i].self == t->e.v[best[s]].self)
				cand[nc++] = (uint32_t)i;
		if (nc < 2)
			continue;
		if (nc > 64) { /* a walk per 64 candidates would cost candidates x stacks */
			err = tf_fallback(t->h.p, f, &v[s]);
			best[s] = SIZE_MAX;
			continue;
		}
		tf_totals(t, s, cand, nc);
		for (size_t k = 0; k < nc; k++)
			if (tf_better(t, &t->e.v[cand[k]], &t->e.v[best[s]]))
				best[s] = cand[k];
	}
	free(cand);
	return err;
}

/*
 * The hottest self function of each of the first nt threads of v, over the samples that
 * pass f, as a hot_functions pass filtered to the thread would rank them (self, then total,
 * then name), in one pass over the samples: the innermost counted function of every stack
 * node is found once (parents precede children), and totals are computed only for the
 * functions tied for a thread's first place, over the nodes of that thread's stacks.
 */
static int thread_tops(const struct profile *p, const struct sample_filter *f,
		       struct thread_stat *v, size_t nt)
{
	struct hot_opts o = { 0 };
	struct tf_state t = { .h = { .p = (struct profile *)p, .o = &o } };
	struct hmap *slots = hmap__new(nt);
	int32_t *selfn = malloc((p->stacks.n ? p->stacks.n : 1) * sizeof(*selfn));
	size_t *best = malloc((nt ? nt : 1) * sizeof(*best));
	bool tie = false;
	int err = -ENOMEM;

	t.h.index = hmap__new(1024);
	t.h.loc_off = calloc(p->locations.n ? p->locations.n : 1, sizeof(*t.h.loc_off));
	t.h.caplf = 1024;
	t.h.lf = malloc(t.h.caplf * sizeof(*t.h.lf));
	t.head = calloc(nt ? nt : 1, sizeof(*t.head));
	t.eix = hmap__new(1024);
	t.lix = hmap__new(1024);
	if (!slots || !selfn || !best || !t.h.index || !t.h.loc_off || !t.h.lf || !t.head || !t.eix ||
	    !t.lix)
		goto out;
	for (size_t i = 0; i < nt; i++) {
		best[i] = SIZE_MAX;
		if (hmap__put(slots, v[i].tid, 0, i))
			goto out;
	}
	if (p->stacks.n)
		selfn[0] = -1;
	for (size_t n = 1; n < p->stacks.n; n++) {
		uint32_t nf;
		const int32_t *lf;

		err = loc_funcs(&t.h, p->stacks.v[n].loc);
		if (err)
			goto out;
		lf = node_funcs(&t.h, (uint32_t)n, &nf);
		selfn[n] = selfn[p->stacks.v[n].parent];
		for (uint32_t k = nf; k-- > 0;)
			if (lf[k] >= 0)
				selfn[n] = lf[k];
	}
	err = -ENOMEM;
	for (size_t i = 0; i < p->samples.n; i++) {
		const struct sample *s = &p->samples.v[i];
		uint64_t slot;

		if (s->stack >= p->stacks.n || selfn[s->stack] < 0 ||
		    !hmap__get(slots, s->tid, 0, &slot) || !sample_filter__match(f, s))
			continue;
		if (tf_add(&t, (uint32_t)slot, selfn[s->stack], s->stack))
			goto out;
	}
	for (size_t i = 0; i < t.e.n; i++) {
		size_t *b = &best[t.e.v[i].slot];

		if (*b != SIZE_MAX && t.e.v[i].self == t.e.v[*b].self)
			tie = true;
		else if (*b == SIZE_MAX || t.e.v[i].self > t.e.v[*b].self)
			*b = i;
	}
	if (tie && tf_break_ties(&t, f, v, nt, best))
		goto out;
	for (size_t s = 0; s < nt; s++)
		if (best[s] != SIZE_MAX) {
			v[s].top_func = t.h.funcs[t.e.v[best[s]].fn].name;
			v[s].top_self = t.e.v[best[s]].self;
		}
	err = 0;
out:
	free(best);
	free(selfn);
	free(t.e.v);
	free(t.l.v);
	free(t.head);
	free(t.bit);
	free(t.mask);
	free(t.mask_epoch);
	free(t.path);
	hmap__free(t.eix);
	hmap__free(t.lix);
	hmap__free(slots);
	free(t.h.funcs);
	free(t.h.onpath);
	free(t.h.loc_off);
	free(t.h.lf);
	hmap__free(t.h.index);
	return err;
}

int thread_stats(const struct profile *p, const struct sample_filter *f, struct thread_stat **out,
		 size_t *n)
{
	struct hmap *idx = hmap__new(64);
	struct thread_stat *v = NULL;
	size_t cnt = 0, cap = 0;

	if (!idx)
		return -ENOMEM;
	for (size_t i = 0; i < p->samples.n; i++) {
		const struct sample *s = &p->samples.v[i];
		uint64_t k;

		if (!sample_filter__match(f, s))
			continue;
		if (!hmap__get(idx, s->tid, 0, &k)) {
			const struct thread *t = profile__find_thread(p, s->pid, s->tid);

			if (arr_grow(v, cap, cnt + 1))
				goto nomem;
			memset(&v[cnt], 0, sizeof(v[0]));

			v[cnt].pid = s->pid;
			v[cnt].tid = s->tid;
			v[cnt].comm = t ? t->comm : 0;
			k = cnt++;
			if (hmap__put(idx, s->tid, 0, k))
				goto nomem;
		}
		v[k].samples++;
		v[k].weight += s->weight;
	}
	hmap__free(idx);
	if (cnt)
		qsort(v, cnt, sizeof(*v), cmp_thread);
	if (cnt && thread_tops(p, f, v, cnt < 64 ? cnt : 64)) {
		free(v);
		return -ENOMEM;
	}
	*out = v;
	*n = cnt;
	return 0;
nomem:
	hmap__free(idx);
	free(v);
	return -ENOMEM;
}
