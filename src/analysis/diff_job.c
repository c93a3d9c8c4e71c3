// SPDX-License-Identifier: MIT
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diff.h"
#include "diff_job.h"
#include "hot.h"

/* A function of one rank's run: its name and self CPU ns. */
struct fn {
	const char *name;
	uint64_t ns;
};

static int cmp_fn(const void *a, const void *b)
{
	return strcmp(((const struct fn *)a)->name, ((const struct fn *)b)->name);
}

/* The functions of p by name (sorted), self CPU ns summed over modules of one name. */
static int rank_funcs(const struct profile *p, struct fn **out, size_t *n)
{
	/* hot_functions interns strings only with by_line: p stays as it is */
	struct hot_opts ho = { .sort = SORT_SELF };
	struct hot_result hr;
	struct fn *v;
	size_t k = 0;
	int err = hot_functions((struct profile *)p, &ho, &hr);

	if (err)
		return err;
	v = malloc((hr.n ? hr.n : 1) * sizeof(*v));
	if (!v) {
		hot_result__free(&hr);
		return -ENOMEM;
	}
	for (size_t i = 0; i < hr.n; i++)
		if (hr.funcs[i].self_ns)
			v[k++] = (struct fn){ profile__str(p, hr.funcs[i].name), hr.funcs[i].self_ns };
	hot_result__free(&hr);
	qsort(v, k, sizeof(*v), cmp_fn);
	/* one row per name */
	*n = 0;
	for (size_t i = 0; i < k; i++) {
		if (*n && !strcmp(v[*n - 1].name, v[i].name))
			v[*n - 1].ns += v[i].ns;
		else
			v[(*n)++] = v[i];
	}
	*out = v;
	return 0;
}

/* The function of the pair whose self CPU time changed most. */
static int top_change(struct diff_rank *d, const struct profile *a, const struct profile *b)
{
	struct fn *fa = NULL, *fb = NULL;
	size_t na = 0, nb = 0, i = 0, j = 0;
	double best = 0;
	int err = rank_funcs(a, &fa, &na) ?: rank_funcs(b, &fb, &nb);

	while (!err && (i < na || j < nb)) {
		int c = i == na ? 1 : j == nb ? -1 : strcmp(fa[i].name, fb[j].name);
		double s0 = c <= 0 ? fa[i].ns / 1e9 : 0, s1 = c >= 0 ? fb[j].ns / 1e9 : 0;
		const char *name = c <= 0 ? fa[i].name : fb[j].name;

		if (fabs(s1 - s0) > best) {
			best = fabs(s1 - s0);
			snprintf(d->func, sizeof(d->func), "%s", name);
			d->func_s[0] = s0;
			d->func_s[1] = s1;
		}
		i += c <= 0;
		j += c >= 0;
	}
	free(fa);
	free(fb);
	return err;
}

/* The call path that explains the rank's growth of CPU time, else the largest self change. */
static int rank_change(struct diff_rank *d, const struct profile *a, const struct profile *b)
{
	static const double unscaled[2] = { 1, 1 };
	struct diff_attr at;
	int err = diff_attribute(a, b, unscaled, 1, 0.8, 0, &at);

	if (err)
		return err;
	if (at.n && at.paths[0].delta_s > 0 && at.paths[0].leaf) {
		snprintf(d->func, sizeof(d->func), "%s", at.paths[0].leaf);
		d->func_s[0] = at.paths[0].before_s;
		d->func_s[1] = at.paths[0].after_s;
		diff_attr__free(&at);
		return 0;
	}
	diff_attr__free(&at);
	d->func_self = true;
	return top_change(d, a, b);
}

static void run_of(struct diff_job_run *r, const struct job_summary *s)
{
	r->recordings = s->n;
	r->world_size = s->world_size;
	r->wait_s = s->wait_s;
	r->matched = s->matched;
	for (size_t i = 0; i < s->n; i++)
		if (s->ranks[i].wall_s > r->wall_s)
			r->wall_s = s->ranks[i].wall_s;
	r->straggler = -1;
	if (s->straggler >= 0) {
		r->straggler = s->ranks[s->straggler].rank;
		rank_label(&s->ranks[s->straggler], r->straggler_label, sizeof(r->straggler_label));
		r->straggler_share = s->straggler_share;
		snprintf(r->straggler_func, sizeof(r->straggler_func), "%s", s->straggler_func);
	}
}

static void side_of(struct diff_rank *d, int side, const struct rank_info *r)
{
	d->in[side] = true;
	d->wall_s[side] = r->wall_s;
	d->cpu_s[side] = r->cpu_s;
	d->comm_s[side] = r->comm_s;
	d->wait_s[side] = r->wait_s;
	d->colls[side] = r->colls;
	d->last[side] = r->last;
	rank_label(r, d->label, sizeof(d->label));
}

/* BASE's rank i pairs with NEW's rank of the same number, else the one at the same place. */
static const struct rank_info *pair_of(const struct job_summary *new, const struct rank_info *r,
				       size_t i)
{
	if (r->rank >= 0) {
		for (size_t k = 0; k < new->n; k++)
			if (new->ranks[k].rank == r->rank)
				return &new->ranks[k];
		return NULL;
	}
	return i < new->n && new->ranks[i].rank < 0 ? &new->ranks[i] : NULL;
}

static int pair_ranks(struct diff_job *d, const struct job_summary *base,
		      const struct job_summary *new)
{
	bool *used = calloc(new->n + 1, sizeof(*used));
	int err = 0;

	d->ranks = calloc(base->n + new->n + 1, sizeof(*d->ranks));
	if (!used || !d->ranks) {
		free(used);
		return -ENOMEM;
	}
	for (size_t i = 0; !err && i < base->n; i++) {
		const struct rank_info *a = &base->ranks[i], *b = pair_of(new, a, i);
		struct diff_rank *r = &d->ranks[d->n++];

		r->rank = a->rank;
		side_of(r, 0, a);
		if (!b)
			continue;
		used[b - new->ranks] = true;
		side_of(r, 1, b);
		if (a->p && b->p)
			err = rank_change(r, a->p, b->p);
	}
	for (size_t k = 0; k < new->n; k++) {
		if (used[k])
			continue;
		d->ranks[d->n].rank = new->ranks[k].rank;
		side_of(&d->ranks[d->n++], 1, &new->ranks[k]);
	}
	free(used);
	return err;
}

static struct diff_coll *coll_row(struct diff_job *d, const char *name)
{
	for (size_t i = 0; i < d->ncolls; i++)
		if (!strcmp(d->colls[i].name, name))
			return &d->colls[i];
	snprintf(d->colls[d->ncolls].name, sizeof(d->colls[0].name), "%s", name);
	return &d->colls[d->ncolls++];
}

static int cmp_coll(const void *a, const void *b)
{
	const struct diff_coll *x = a, *y = b;
	double dx = fabs(x->wait_s[1] - x->wait_s[0]), dy = fabs(y->wait_s[1] - y->wait_s[0]);

	if (dx != dy)
		return dx > dy ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int pair_colls(struct diff_job *d, const struct job_summary *s[2])
{
	d->colls = calloc(s[0]->nops + s[1]->nops + 1, sizeof(*d->colls));
	if (!d->colls)
		return -ENOMEM;
	for (int side = 0; side < 2; side++)
		for (size_t i = 0; i < s[side]->nops; i++) {
			const struct coll_op *op = &s[side]->ops[i];
			struct diff_coll *c = coll_row(d, op->label ? op->label : "?");

			c->instances[side] = op->instances;
			c->wait_s[side] = op->wait_s;
			c->max_spread_s[side] = op->max_spread_s;
			c->bytes[side] = op->bytes;
		}
	qsort(d->colls, d->ncolls, sizeof(*d->colls), cmp_coll);
	return 0;
}

int diff_job(const struct job_summary *base, const struct job_summary *new, struct diff_job *out)
{
	const struct job_summary *s[2] = { base, new };
	double grew = 0;
	int err;

	memset(out, 0, sizeof(*out));
	run_of(&out->run[0], base);
	run_of(&out->run[1], new);
	err = pair_ranks(out, base, new) ?: pair_colls(out, s);
	if (err) {
		diff_job__free(out);
		return err;
	}
	out->slowest = -1;
	for (size_t i = 0; i < out->n; i++) {
		const struct diff_rank *r = &out->ranks[i];

		double work = (r->wall_s[1] - r->comm_s[1]) - (r->wall_s[0] - r->comm_s[0]);

		if (r->in[0] && r->in[1] && work > grew) {
			grew = work;
			out->slowest = (long)i;
		}
	}
	return 0;
}

void diff_job__free(struct diff_job *d)
{
	free(d->ranks);
	free(d->colls);
	memset(d, 0, sizeof(*d));
}

const struct diff_rank *diff_job_rank(const struct diff_job *d, int n)
{
	for (size_t i = 0; d && i < d->n; i++)
		if (d->ranks[i].rank == n)
			return &d->ranks[i];
	return NULL;
}
