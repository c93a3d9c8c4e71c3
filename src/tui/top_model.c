// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/pygil.h"
#include "analysis/view.h"
#include "top_model.h"

#define PRUNE_W 0.01 /* decayed weight below which a stack is forgotten */

int top_model__init(struct top_model *m)
{
	memset(m, 0, sizeof(*m));
	m->decay = TOP_DECAY;
	m->func_index = hmap__new(256);
	m->thread_index = hmap__new(64);
	m->locs = malloc(PROFILE_MAX_STACK_DEPTH * sizeof(*m->locs));
	m->cls = malloc(PROFILE_MAX_STACK_DEPTH);
	m->keep = malloc(PROFILE_MAX_STACK_DEPTH * sizeof(*m->keep));
	if (!m->func_index || !m->thread_index || !m->locs || !m->cls || !m->keep) {
		top_model__free(m);
		return -ENOMEM;
	}
	return 0;
}

void top_model__free(struct top_model *m)
{
	free(m->node_w);
	free(m->node_last);
	free(m->funcs.v);
	free(m->threads.v);
	free(m->procs.v);
	hmap__free(m->func_index);
	hmap__free(m->thread_index);
	free(m->locs);
	free(m->cls);
	free(m->keep);
	memset(m, 0, sizeof(*m));
}

static int grow_nodes(struct top_model *m, size_t n)
{
	double *w;
	uint64_t *l;

	if (n <= m->node_n)
		return 0;
	w = realloc(m->node_w, n * sizeof(*w));
	if (w)
		m->node_w = w;
	l = realloc(m->node_last, n * sizeof(*l));
	if (l)
		m->node_last = l;
	if (!w || !l)
		return -ENOMEM;
	memset(w + m->node_n, 0, (n - m->node_n) * sizeof(*w));
	memset(l + m->node_n, 0, (n - m->node_n) * sizeof(*l));
	m->node_n = n;
	return 0;
}

static int64_t func_index(struct top_model *m, const struct frame *f)
{
	struct top_func *tf;
	uint64_t idx;

	if (hmap__get(m->func_index, f->name, f->module, &idx))
		return idx;
	tf = vec_push(m->funcs);
	if (!tf || hmap__put(m->func_index, f->name, f->module, m->funcs.n - 1))
		return -ENOMEM;
	tf->name = f->name;
	tf->module = f->module;
	tf->stamp = UINT32_MAX;
	return m->funcs.n - 1;
}

/* Counts the frames of one location of a stack (leaf side first). */
static int count_loc(struct top_model *m, const struct profile *p, uint32_t loc, uint32_t node,
		     bool *leaf_done)
{
	double w = m->node_w[node];
	uint64_t last = m->node_last[node];
	uint32_t nf;
	const struct frame *fr = profile__loc_frames(p, loc, &nf);

	for (uint32_t k = 0; k < nf; k++) {
		struct top_func *tf;
		int64_t idx;

		if (fr[k].inlined)
			continue;
		idx = func_index(m, &fr[k]);
		if (idx < 0)
			return (int)idx;
		tf = &m->funcs.v[idx];
		if (!*leaf_done) {
			tf->self += w;
			tf->last_self += last;
			*leaf_done = true;
		}
		if (tf->stamp != node) {
			tf->stamp = node;
			tf->total += w;
			tf->last_total += last;
		}
	}
	return 0;
}

/* Self for the leaf function, total once per distinct function of the stack (in the view). */
static int count_node(struct top_model *m, const struct profile *p, uint32_t node)
{
	bool leaf_done = false;
	size_t n;
	int err = 0;

	n = view_stack_locs(p, m->view, node, m->locs, m->cls, m->keep);
	while (n-- && !err) {
		/* a Python sample's root [GIL] / [no GIL] mark: a state, not a function */
		if (!n && py_gil_marker(p, m->locs[n]))
			break;
		err = count_loc(m, p, m->locs[n], node, &leaf_done);
	}
	return err;
}

static int count_thread(struct top_model *m, const struct sample *s)
{
	struct top_thread *t;
	uint64_t idx;

	if (!hmap__get(m->thread_index, s->tid, 0, &idx)) {
		t = vec_push(m->threads);
		if (!t || hmap__put(m->thread_index, s->tid, 0, m->threads.n - 1))
			return -ENOMEM;
		idx = m->threads.n - 1;
	}
	t = &m->threads.v[idx];
	t->pid = s->pid;
	t->tid = s->tid;
	t->samples += 1;
	t->last++;
	return 0;
}

static int count_proc(struct top_model *m, uint32_t pid)
{
	struct top_proc *pr;

	for (size_t i = 0; i < m->procs.n; i++) {
		if (m->procs.v[i].pid == pid) {
			m->procs.v[i].last++;
			return 0;
		}
	}
	pr = vec_push(m->procs);
	if (!pr)
		return -ENOMEM;
	pr->pid = pid;
	pr->last = 1;
	return 0;
}

static int cmp_proc(const void *a, const void *b)
{
	const struct top_proc *x = a, *y = b;

	if (x->last != y->last)
		return x->last < y->last ? 1 : -1;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

static void decay_all(struct top_model *m)
{
	for (size_t i = 0; i < m->node_n; i++) {
		m->node_w[i] *= m->decay;
		if (m->node_w[i] < PRUNE_W)
			m->node_w[i] = 0;
		m->node_last[i] = 0;
	}
	for (size_t i = 0; i < m->threads.n; i++) {
		m->threads.v[i].samples *= m->decay;
		m->threads.v[i].last = 0;
	}
	for (size_t i = 0; i < m->funcs.n; i++) {
		struct top_func *f = &m->funcs.v[i];

		f->self = f->total = 0;
		f->last_self = f->last_total = 0;
		f->stamp = UINT32_MAX;
	}
	m->total_w *= m->decay;
	m->procs.n = 0;
}

int top_model__update(struct top_model *m, struct profile *p, double dt)
{
	int err = grow_nodes(m, p->stacks.n);

	if (err)
		return err;
	decay_all(m);
	for (size_t i = 0; i < p->samples.n; i++) {
		const struct sample *s = &p->samples.v[i];

		if (s->stack < m->node_n) {
			m->node_w[s->stack] += 1;
			m->node_last[s->stack]++;
		}
		err = count_thread(m, s);
		if (!err)
			err = count_proc(m, s->pid);
		if (err)
			return err;
	}
	m->last_samples = p->samples.n;
	m->total_w += p->samples.n;
	m->last_dt = dt;
	m->intervals++;
	p->samples.n = 0;
	if (m->procs.n) /* no sample yet: no array either (qsort's NULL is undefined) */
		qsort(m->procs.v, m->procs.n, sizeof(*m->procs.v), cmp_proc);
	/* Functions are recounted from the decayed stacks: callers/callees stay consistent. */
	for (size_t n = 1; n < m->node_n; n++) {
		if (m->node_w[n] > 0 && (err = count_node(m, p, n)))
			return err;
	}
	return 0;
}

static bool func_matches(const struct profile *p, const struct top_func *f, const char *filter)
{
	if (!filter || !*filter)
		return true;
	return strstr(profile__str(p, f->name), filter) ||
	       strstr(profile__str(p, f->module), filter);
}

/* qsort has no context argument: the sort key is passed through this. */
static __thread const struct top_model *sort_m;
static __thread enum top_sort sort_key;

static double key_of(const struct top_func *f)
{
	switch (sort_key) {
	case TOP_SORT_TOTAL:
		return f->total;
	case TOP_SORT_LAST:
		return f->last_self;
	default:
		return f->self;
	}
}

static int cmp_rows(const void *a, const void *b)
{
	const struct top_func *x = &sort_m->funcs.v[*(const uint32_t *)a];
	const struct top_func *y = &sort_m->funcs.v[*(const uint32_t *)b];
	double kx = key_of(x), ky = key_of(y);

	if (kx != ky)
		return kx < ky ? 1 : -1;
	if (x->total != y->total)
		return x->total < y->total ? 1 : -1;
	return x->name < y->name ? -1 : x->name > y->name;
}

size_t top_model__rows(const struct top_model *m, const struct profile *p,
		       const struct top_view *v, uint32_t *out, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < m->funcs.n && n < max; i++) {
		const struct top_func *f = &m->funcs.v[i];

		if (f->total < 0.05 && !f->last_total)
			continue;
		if (func_matches(p, f, v->filter))
			out[n++] = i;
	}
	sort_m = m;
	sort_key = v->sort;
	qsort(out, n, sizeof(*out), cmp_rows);
	return n;
}

const char *top_sort_name(enum top_sort s)
{
	static const char *const names[TOP_SORT_MAX] = { "self", "total", "last" };

	return s < TOP_SORT_MAX ? names[s] : "?";
}
