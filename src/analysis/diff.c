// SPDX-License-Identifier: MIT
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diff.h"
#include "hot.h"
#include "regions.h"
#include "summary.h"
#include "stacks.h"
#include "util/vec.h"

#define DIFF_DEPTH 4096

size_t diff_name_len(const char *name)
{
	static const char *const sfx[] = {".constprop.", ".isra.", ".part.", ".cold", ".lto_priv."};
	size_t len = strlen(name);

	for (size_t i = 0; i < sizeof(sfx) / sizeof(sfx[0]); i++) {
		const char *at = strstr(name, sfx[i]);

		/* a suffix, not the start of the name: "f.part.0", "f.constprop.0.isra.0" */
		if (at && at > name && (size_t)(at - name) < len)
			len = (size_t)(at - name);
	}
	return len;
}

void diff_program(const struct profile *p, char *buf, size_t len)
{
	const char *cmd = profile__meta(p, "command"), *end, *base;

	buf[0] = 0;
	if (!cmd || *cmd == '[' || !len) /* [system-wide] */
		return;
	end = cmd + strcspn(cmd, " ");
	base = cmd;
	for (const char *c = cmd; c < end; c++)
		if (*c == '/')
			base = c + 1;
	snprintf(buf, len, "%.*s", (int)(end - base), base);
}

const char *diff_rename(const char *prog_base, const char *prog_new, const char *s)
{
	if (!*prog_base || !*prog_new || !strcmp(prog_base, prog_new))
		return s;
	/* a thread's name is the program's cut to 15 bytes (TASK_COMM_LEN) */
	if (!strcmp(s, prog_base) || (strlen(s) == 15 && !strncmp(s, prog_base, 15)))
		return prog_new;
	return s;
}

static void fill_run(struct profile *p, struct diff_run *r)
{
	struct profile_summary s;

	profile_summarize(p, NULL, &s);
	r->command = s.command;
	r->duration_s = s.duration_s;
	r->samples = s.samples;
	r->cpu_ns = s.weight;
	r->rate = s.rate;
}

static double rate_ms(uint64_t ns, double duration_s)
{
	return duration_s > 0 ? ns / 1e6 / duration_s : 0;
}

static void func_key(const char *name, size_t nlen, const char *module, uint64_t *k1, uint64_t *k2)
{
	*k1 = hash_mix64(hash_bytes(name, nlen) + nlen);
	*k2 = hash_mix64(hash_bytes(module, strlen(module)) ^ *k1 * 0x9e3779b97f4a7c15ull);
}

static int put_func(struct diff_result *r, size_t *cap, const char *name, const char *module,
		    uint8_t kind, size_t *at)
{
	if (arr_grow(r->funcs, *cap, r->n + 1))
		return -ENOMEM;
	memset(&r->funcs[r->n], 0, sizeof(r->funcs[0]));
	r->funcs[r->n].name = name;
	r->funcs[r->n].module = module;
	r->funcs[r->n].kind = kind;
	*at = r->n++;
	return 0;
}

static void set_side(struct diff_func *d, const struct func_stat *f, int side)
{
	d->self[side] = f->self;
	d->total[side] = f->total;
	d->self_ns[side] = f->self_ns;
	d->total_ns[side] = f->total_ns;
}

/*
 * The table: NEW's functions by (name, module) text, then BASE's matched to them by the same
 * text, and those left by their name without GCC's clone suffixes (diff_name_len) to a NEW
 * function that no BASE function matched exactly; BASE's program module is NEW's
 * (diff_rename). Functions of one run are never merged (f and f.part.0 overlap in time).
 */
static int add_funcs(struct diff_result *r, struct profile *base, struct profile *new)
{
	const struct hot_result *hb = &r->hot[DIFF_BASE], *hn = &r->hot[DIFF_NEW];
	struct hmap *exact = hmap__new(hn->n + hb->n + 1), *clone = hmap__new(hn->n + 1);
	bool *done = calloc(hb->n + 1, sizeof(*done));
	size_t cap = 0, at;
	uint64_t k1, k2, v;
	int err = exact && clone && done ? 0 : -ENOMEM;

	for (size_t i = 0; !err && i < hn->n; i++) {
		const struct func_stat *f = &hn->funcs[i];
		const char *name = profile__str(new, f->name), *mod = profile__str(new, f->module);

		err = put_func(r, &cap, name, mod, f->kind, &at);
		if (err)
			break;
		set_side(&r->funcs[at], f, DIFF_NEW);
		func_key(name, strlen(name), mod, &k1, &k2);
		err = err ?: hmap__put(exact, k1, k2, at);
		func_key(name, diff_name_len(name), mod, &k1, &k2);
		if (!err && !hmap__get(clone, k1, k2, &v))
			err = hmap__put(clone, k1, k2, at);
	}
	/* BASE: exact matches first, so that a clone match never takes an exact one's place */
	for (int pass = 0; !err && pass < 3; pass++) {
		for (size_t i = 0; !err && i < hb->n; i++) {
			const struct func_stat *f = &hb->funcs[i];
			const char *name = profile__str(base, f->name);
			const char *mod =
			    diff_rename(r->prog[0], r->prog[1], profile__str(base, f->module));
			bool found;

			if (done[i])
				continue;
			func_key(name, pass == 1 ? diff_name_len(name) : strlen(name), mod, &k1,
				 &k2);
			found = pass < 2 && hmap__get(pass ? clone : exact, k1, k2, &v) &&
				!r->funcs[v].total[DIFF_BASE] && !r->funcs[v].self[DIFF_BASE];
			if (pass < 2 && !found)
				continue;
			if (pass == 2) /* gone: a row of its own */
				err = put_func(r, &cap, name, mod, f->kind, &at);
			else
				at = v;
			if (!err)
				set_side(&r->funcs[at], f, DIFF_BASE);
			done[i] = true;
		}
	}
	free(done);
	hmap__free(exact);
	hmap__free(clone);
	return err;
}

static double abs_delta(const struct diff_func *f)
{
	return fabs(f->self_pct[DIFF_NEW] - f->self_pct[DIFF_BASE]);
}

/* Two-proportion z statistic of the self share's growth (pooled variance). */
static double share_z(const struct diff_func *f, uint64_t nb, uint64_t nn)
{
	double pb, pn, pool, se;

	if (!nb || !nn)
		return 0;
	pb = (double)f->self[DIFF_BASE] / nb;
	pn = (double)f->self[DIFF_NEW] / nn;
	pool = (double)(f->self[DIFF_BASE] + f->self[DIFF_NEW]) / (nb + nn);
	se = sqrt(pool * (1 - pool) * (1.0 / nb + 1.0 / nn));
	return se > 0 ? (pn - pb) / se : 0;
}

double diff_func_s(const struct diff_result *r, const struct diff_func *f, int s, bool total)
{
	return (total ? f->total_ns[s] : f->self_ns[s]) * r->run[s].scale / 1e9;
}

/* qsort has no argument: the run being sorted (one sort at a time, in one thread) */
static const struct diff_result *sort_r;
static enum diff_sort sort_by;

static double sort_key(const struct diff_func *f)
{
	if (sort_by == DIFF_SORT_SHARE)
		return abs_delta(f);
	/* in ns: exact for integral weights, so equal changes tie and sort by name */
	bool t = sort_by == DIFF_SORT_TOTAL;

	return fabs((double)(t ? f->total_ns[1] : f->self_ns[1]) * sort_r->run[1].scale -
		    (double)(t ? f->total_ns[0] : f->self_ns[0]) * sort_r->run[0].scale);
}

static int cmp_delta(const void *a, const void *b)
{
	const struct diff_func *x = a, *y = b;
	double dx = sort_key(x), dy = sort_key(y);

	if (dx != dy)
		return dx < dy ? 1 : -1;
	return strcmp(x->name, y->name);
}

static void judge(struct diff_result *r, const struct diff_opts *o)
{
	double min_share = o->min_share > 0 ? o->min_share : 1.0;

	for (size_t i = 0; i < r->n; i++) {
		struct diff_func *f = &r->funcs[i];

		for (int s = 0; s < 2; s++) {
			uint64_t n = r->run[s].samples;

			f->self_pct[s] = n ? 100.0 * f->self[s] / n : 0;
			f->total_pct[s] = n ? 100.0 * f->total[s] / n : 0;
			f->self_rate[s] = rate_ms(f->self_ns[s], r->run[s].duration_s);
			f->total_rate[s] = rate_ms(f->total_ns[s], r->run[s].duration_s);
		}
		if (f->self_pct[DIFF_BASE] > 0)
			f->change_pct = 100.0 * (f->self_pct[DIFF_NEW] - f->self_pct[DIFF_BASE]) /
					f->self_pct[DIFF_BASE];
		else
			f->change_pct = f->self_pct[DIFF_NEW] > 0 ? INFINITY : 0;
		f->z = share_z(f, r->run[DIFF_BASE].samples, r->run[DIFF_NEW].samples);
		f->gated =
		    f->self_pct[DIFF_BASE] >= min_share || f->self_pct[DIFF_NEW] >= min_share;
		f->regressed = f->gated && f->change_pct > o->fail_above && f->z > 3;
		r->nregressed += f->regressed;
	}
}

int diff_profiles(struct profile *base, struct profile *new, const struct diff_opts *o,
		  struct diff_result *out)
{
	struct hot_opts ho = {.inlined = o->inlined};
	struct hot_result *h = out->hot;
	struct diff_run *b = &out->run[DIFF_BASE], *n = &out->run[DIFF_NEW];
	double bw, nw, bc, nc;
	int err = -ENOMEM;

	memset(out, 0, sizeof(*out));
	fill_run(base, b);
	fill_run(new, n);
	diff_program(base, out->prog[0], sizeof(out->prog[0]));
	diff_program(new, out->prog[1], sizeof(out->prog[1]));
	b->scale = n->scale = 1;
	if (o->per) {
		b->per_count = regions_count(base, o->per);
		n->per_count = regions_count(new, o->per);
		if (!b->per_count || !n->per_count) {
			err = -ENOENT;
			goto out;
		}
		b->scale = 1.0 / b->per_count;
		n->scale = 1.0 / n->per_count;
	}
	err = hot_functions(base, &ho, &h[0]);
	if (!err)
		err = hot_functions(new, &ho, &h[1]);
	if (!err)
		err = add_funcs(out, base, new);
	if (err)
		goto out;
	judge(out, o);
	sort_r = out;
	sort_by = o->sort;
	if (out->n)
		qsort(out->funcs, out->n, sizeof(*out->funcs), cmp_delta);
	/* per unit of work with --per: wall and CPU time per region instance */
	bw = b->duration_s * b->scale;
	nw = n->duration_s * n->scale;
	bc = b->cpu_ns * b->scale;
	nc = n->cpu_ns * n->scale;
	out->speedup_wall = nw > 0 ? bw / nw : 0;
	out->speedup_cpu = nc > 0 ? bc / nc : 0;
	out->wall_change_pct = bw > 0 ? 100.0 * (nw - bw) / bw : 0;
	out->cpu_change_pct = bc > 0 ? 100.0 * (nc - bc) / bc : 0;
	out->total_regressed =
	    out->wall_change_pct > o->fail_above || out->cpu_change_pct > o->fail_above;
out:
	if (err)
		diff_result__free(out);
	return err;
}

void diff_result__free(struct diff_result *r)
{
	hot_result__free(&r->hot[0]);
	hot_result__free(&r->hot[1]);
	free(r->funcs);
	r->funcs = NULL;
	r->n = 0;
}

/* --- differential flamegraph ------------------------------------------------------ */

static const char *comm_label(const struct profile *p, uint32_t comm)
{
	const char *s = profile__str(p, comm);

	return *s ? s : "[unknown]";
}

/* 128-bit key of a symbolic stack by its text: thread name, then functions root first. */
static void stack_key(const struct profile *p, const struct collapsed_set *cs,
		      const struct collapsed *c, const struct frame **tmp, uint64_t *k1,
		      uint64_t *k2)
{
	size_t nf = collapsed_frames(cs, p, c->node, tmp, DIFF_DEPTH, NULL);
	const char *s = comm_label(p, c->comm);
	uint64_t a = 0x243f6a8885a308d3ull, b = 0x13198a2e03707344ull;

	for (size_t i = 0;; i++) {
		uint64_t h = hash_bytes(s, strlen(s));

		a = hash_mix64(a ^ h);
		b = hash_mix64(b + h * 0x9e3779b97f4a7c15ull + i);
		if (i == nf)
			break;
		s = profile__str(p, tmp[i]->name);
	}
	*k1 = a;
	*k2 = b;
}

int diff_fg_stacks(const struct profile *base, const struct profile *new, struct diff_stacks *out)
{
	const struct frame **tmp = malloc(DIFF_DEPTH * sizeof(*tmp));
	struct collapsed_set cb = {0}, cn = {0};
	struct hmap *idx = hmap__new(4096);
	size_t total = 0, pos = 0;
	int err = -ENOMEM;

	memset(out, 0, sizeof(*out));
	if (!tmp || !idx || collapse_stacks(base, NULL, false, &cb) ||
	    collapse_stacks(new, NULL, false, &cn))
		goto out;
	for (size_t i = 0; i < cb.n; i++) {
		uint64_t k1, k2, v = 0;

		stack_key(base, &cb, &cb.v[i], tmp, &k1, &k2);
		hmap__get(idx, k1, k2, &v);
		if (hmap__put(idx, k1, k2, v + cb.v[i].samples))
			goto out;
		out->base_total += cb.v[i].samples;
	}
	for (size_t i = 0; i < cn.n; i++) {
		size_t t;

		collapsed_frames(&cn, new, cn.v[i].node, tmp, 0, &t);
		total += (t < DIFF_DEPTH ? t : DIFF_DEPTH) + 1;
		out->new_total += cn.v[i].samples;
	}
	out->st = calloc(cn.n ? cn.n : 1, sizeof(*out->st));
	out->frames = calloc(total ? total : 1, sizeof(*out->frames));
	if (!out->st || !out->frames)
		goto out;
	for (size_t i = 0; i < cn.n; i++) {
		size_t nf = collapsed_frames(&cn, new, cn.v[i].node, tmp, DIFF_DEPTH, NULL);
		struct wstack *s = &out->st[i];
		uint64_t k1, k2, b = 0;

		s->frames = &out->frames[pos];
		s->weight = cn.v[i].samples;
		out->frames[pos++] =
		    (struct wstack_frame){comm_label(new, cn.v[i].comm), FRAME_SPECIAL};
		for (size_t k = 0; k < nf; k++)
			out->frames[pos++] =
			    (struct wstack_frame){profile__str(new, tmp[k]->name), tmp[k]->kind};
		s->n = (uint32_t)nf + 1;
		stack_key(new, &cn, &cn.v[i], tmp, &k1, &k2);
		hmap__get(idx, k1, k2, &b);
		/* scale BASE to NEW's total: compare shares, not run lengths */
		s->base = out->base_total
			      ? (uint64_t)llround((double)b * out->new_total / out->base_total)
			      : 0;
	}
	out->n = cn.n;
	err = 0;
out:
	free(tmp);
	hmap__free(idx);
	collapsed_set__free(&cb);
	collapsed_set__free(&cn);
	if (err)
		diff_stacks__free(out);
	return err;
}

void diff_stacks__free(struct diff_stacks *d)
{
	free(d->st);
	free(d->frames);
	memset(d, 0, sizeof(*d));
}
