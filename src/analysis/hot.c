// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hot.h"

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
	uint64_t *stamp; /* per function: last stack that counted it in total */
};

static int64_t func_index(struct hot_state *h, const struct frame *f, const struct frame *leaf)
{
	uint32_t name = f->name;
	uint64_t idx;

	if (h->o->by_line && leaf) {
		char buf[1024];
		const char *file = profile__str(h->p, leaf->file), *slash = strrchr(file, '/');

		snprintf(buf, sizeof(buf), "%s (%s:%u)", profile__str(h->p, f->name),
			 *file ? (slash ? slash + 1 : file) : "??", leaf->line);
		name = profile__intern(h->p, buf);
	}
	if (hmap__get(h->index, name, f->module, &idx))
		return idx;
	if (h->n == h->cap) {
		size_t ncap = h->cap ? h->cap * 2 : 256;
		struct func_stat *nf = realloc(h->funcs, ncap * sizeof(*nf));
		uint64_t *ns = realloc(h->stamp, ncap * sizeof(*ns));

		if (nf)
			h->funcs = nf;
		if (ns)
			h->stamp = ns;
		if (!nf || !ns)
			return -ENOMEM;
		h->cap = ncap;
	}
	memset(&h->funcs[h->n], 0, sizeof(h->funcs[0]));
	h->funcs[h->n].name = name;
	h->funcs[h->n].module = f->module;
	h->funcs[h->n].kind = f->kind;
	h->stamp[h->n] = 0;
	if (hmap__put(h->index, name, f->module, h->n))
		return -ENOMEM;
	return h->n++;
}

/* Counts one unique stack: self for its leaf function, total once per distinct function. */
static int count_stack(struct hot_state *h, uint32_t node, uint64_t samples, uint64_t weight)
{
	bool leaf_done = false;

	for (uint32_t n = node; n; n = h->p->stacks.v[n].parent) {
		uint32_t nf;
		const struct frame *fr = profile__loc_frames(h->p, h->p->stacks.v[n].loc, &nf);

		for (uint32_t k = 0; k < nf; k++) {
			const struct frame *f = &fr[k];
			int64_t idx;

			if (f->inlined && !h->o->inlined)
				continue;
			/* by_line keys the leaf by its innermost line, callers by their own line. */
			idx = func_index(h, f, h->o->by_line ? &fr[0] : NULL);
			if (idx < 0)
				return (int)idx;
			if (!leaf_done) {
				h->funcs[idx].self += samples;
				h->funcs[idx].self_ns += weight;
				leaf_done = true;
			}
			if (h->stamp[idx] != node) {
				h->stamp[idx] = node;
				h->funcs[idx].total += samples;
				h->funcs[idx].total_ns += weight;
			}
		}
	}
	return 0;
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
	struct stack_counts c;
	int err;

	memset(out, 0, sizeof(*out));
	err = stack_counts(p, &o->filter, &c);
	if (err)
		return err;
	h.index = hmap__new(1024);
	if (!h.index) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < c.n; i++) {
		if (!c.samples[i])
			continue;
		out->samples += c.samples[i];
		out->weight += c.weight[i];
		/* Stamps use node ids; node 0 (empty stack) has no frames to stamp. */
		err = count_stack(&h, i, c.samples[i], c.weight[i]);
		if (err)
			goto out;
	}
	if (h.n)
		qsort(h.funcs, h.n, sizeof(*h.funcs), o->sort == SORT_TOTAL ? cmp_total : cmp_self);
	out->funcs = h.funcs;
	out->n = h.n;
	h.funcs = NULL;
out:
	free(h.funcs);
	free(h.stamp);
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

/* Hottest self function of one thread: a hot_functions pass filtered to it. */
static void thread_top(const struct profile *p, struct thread_stat *t)
{
	struct hot_opts o = { .filter = { .tid = t->tid } };
	struct hot_result r;

	if (hot_functions((struct profile *)p, &o, &r))
		return;
	if (r.n) {
		t->top_func = r.funcs[0].name;
		t->top_self = r.funcs[0].self;
	}
	hot_result__free(&r);
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
			const struct thread *t = profile__thread((struct profile *)p, s->pid, s->tid, false);

			if (cnt == cap) {
				struct thread_stat *nv = realloc(v, (cap = cap ? cap * 2 : 16) * sizeof(*nv));

				if (!nv)
					goto nomem;
				v = nv;
			}
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
	for (size_t i = 0; i < cnt && i < 64; i++)
		thread_top(p, &v[i]);
	*out = v;
	*n = cnt;
	return 0;
nomem:
	hmap__free(idx);
	free(v);
	return -ENOMEM;
}
