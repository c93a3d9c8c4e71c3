// SPDX-License-Identifier: MIT
/* The merged call tree of two runs and the attribution of growth to call paths (diff.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "diff.h"
#include "hot.h"
#include "pygil.h"
#include "util/hmap.h"
#include "util/vec.h"

struct mnode {
	uint32_t parent;	 /* 0: the virtual root */
	uint32_t child, next;	 /* first child, next sibling (0: none) */
	uint32_t name, module;	 /* ids into mtree.str */
	double self[2], incl[2]; /* CPU seconds, normalised */
};

struct mtree {
	struct mnode *v; /* v[0] is the virtual root */
	size_t n, cap;
	/* (parent, name, module) -> node: open addressing over node ids (0 = empty), the key
	 * read back from v: 4 bytes a slot for the millions of paths of big files */
	uint32_t *slot;
	size_t nslot; /* a power of two, at least twice n */
	uint64_t seed;
	/* the names of both runs, each text once: one id for the same text in either file */
	const char **str;
	bool *str_new; /* str[i] is NEW's text */
	size_t nstr, strcap, strnewcap;
	struct hmap *stridx;
	/* diff_program() of BASE and NEW, while BASE is added; then NEW's twice (no rename) */
	char prog[2][64];
	int side; /* the run being added */
};

static double grow(const struct mnode *m)
{
	return m->incl[DIFF_NEW] - m->incl[DIFF_BASE];
}

/*
 * The id of a name (len bytes of s matter: diff_name_len()) in the tree's names; NEW's text
 * is the one shown when both runs have it. -ENOMEM.
 */
static int64_t mtree_str(struct mtree *t, const char *s, size_t len, bool shown)
{
	uint64_t h = hash_bytes(s, len), at;

	if (hmap__get(t->stridx, h, len, &at)) {
		/* NEW's, and of its names the shortest ("f" rather than "f.part.0") */
		if (shown && (!t->str_new[at] || strlen(s) < strlen(t->str[at]))) {
			t->str[at] = s;
			t->str_new[at] = true;
		}
		return (int64_t)at;
	}
	if (arr_grow(t->str, t->strcap, t->nstr + 1) ||
	    arr_grow(t->str_new, t->strnewcap, t->nstr + 1) ||
	    hmap__put(t->stridx, h, len, t->nstr))
		return -ENOMEM;
	t->str_new[t->nstr] = shown;
	t->str[t->nstr] = s;
	return (int64_t)t->nstr++;
}

static size_t node_slot(const struct mtree *t, uint32_t parent, uint32_t name, uint32_t module)
{
	uint64_t h = hash_mix64(((uint64_t)parent << 32 | name) ^ t->seed);

	return hash_mix64(h ^ ((uint64_t)module * 0x9e3779b97f4a7c15ull)) & (t->nslot - 1);
}

static int slots_resize(struct mtree *t, size_t want)
{
	size_t n = 1024;

	while (n < 2 * want)
		n <<= 1;
	if (n <= t->nslot)
		return 0;
	free(t->slot);
	t->slot = calloc(n, sizeof(*t->slot));
	if (!t->slot)
		return -ENOMEM;
	t->nslot = n;
	for (uint32_t i = 1; i < t->n; i++) {
		size_t k = node_slot(t, t->v[i].parent, t->v[i].name, t->v[i].module);

		while (t->slot[k])
			k = (k + 1) & (t->nslot - 1);
		t->slot[k] = i;
	}
	return 0;
}

static int64_t mtree_node(struct mtree *t, uint32_t parent, uint32_t name, uint32_t module)
{
	size_t k;

	if (2 * (t->n + 1) > t->nslot && slots_resize(t, 2 * t->n + 2))
		return -ENOMEM;
	for (k = node_slot(t, parent, name, module); t->slot[k]; k = (k + 1) & (t->nslot - 1)) {
		const struct mnode *m = &t->v[t->slot[k]];

		if (m->parent == parent && m->name == name && m->module == module)
			return t->slot[k];
	}
	if (t->n >= UINT32_MAX || arr_grow(t->v, t->cap, t->n + 1))
		return -ENOMEM;
	t->v[t->n] = (struct mnode){.parent = parent, .name = name, .module = module};
	t->slot[k] = (uint32_t)t->n;
	return (int64_t)t->n++;
}

/* The tree's (name, module) ids of each frame of p, as the frames are met: [2 * frame]. */
static int frame_ids(struct mtree *t, const struct profile *p, uint32_t frame, uint32_t *ids)
{
	const struct frame *f = &p->frames.v[frame];
	int64_t n, m;

	if (ids[2 * frame] != UINT32_MAX)
		return 0;
	const char *name = profile__str(p, f->name);
	const char *mod = diff_rename(t->prog[0], t->prog[1], profile__str(p, f->module));

	n = mtree_str(t, name, diff_name_len(name), t->side == DIFF_NEW);
	m = n < 0 ? n : mtree_str(t, mod, strlen(mod), t->side == DIFF_NEW);
	if (m < 0)
		return (int)m;
	ids[2 * frame] = (uint32_t)n;
	ids[2 * frame + 1] = (uint32_t)m;
	return 0;
}

#define UNMAPPED UINT32_MAX

/*
 * The tree node of address stack node `node` of p (map[]: those done so far): the frames of
 * its locations root first, inline frames expanded (outer before inner), unsymbolized
 * locations and a root [GIL] / [no GIL] mark skipped, as the flamegraph shows stacks.
 */
static int64_t map_stack(struct mtree *t, const struct profile *p, uint32_t node, uint32_t *map,
			 uint32_t *ids, uint32_t **chain, size_t *cap)
{
	size_t n = 0;
	int64_t cur = 0;
	uint32_t s;

	for (s = node; s && map[s] == UNMAPPED; s = p->stacks.v[s].parent) {
		if (arr_grow(*chain, *cap, n + 1))
			return -ENOMEM;
		(*chain)[n++] = s;
	}
	if (s)
		cur = map[s];
	while (n--) {
		uint32_t c = (*chain)[n], loc = p->stacks.v[c].loc, nf;
		const struct frame *f = profile__loc_frames(p, loc, &nf);

		if (!p->stacks.v[c].parent && py_gil_marker(p, loc))
			nf = 0;
		for (uint32_t k = nf; k-- > 0;) {
			uint32_t fi = (uint32_t)(f - p->frames.v) + k;
			int err = frame_ids(t, p, fi, ids);

			cur =
			    err ? err : mtree_node(t, (uint32_t)cur, ids[2 * fi], ids[2 * fi + 1]);
			if (cur < 0)
				return cur;
		}
		map[c] = (uint32_t)cur;
	}
	return cur;
}

/* Adds one run's CPU time, self at each path, into the tree. */
static int mtree_add(struct mtree *t, const struct profile *p, double scale, int side)
{
	struct stack_counts sc = {0};
	size_t nframes = p->frames.n ? p->frames.n : 1, ccap = 0;
	uint32_t *map = NULL, *ids = NULL, *chain = NULL;
	int err = stack_counts(p, NULL, &sc);

	if (err)
		return err;
	map = malloc((sc.n ? sc.n : 1) * sizeof(*map));
	ids = malloc(nframes * 2 * sizeof(*ids));
	err = map && ids ? 0 : -ENOMEM;
	if (!err) {
		memset(map, 0xff, (sc.n ? sc.n : 1) * sizeof(*map));
		memset(ids, 0xff, nframes * 2 * sizeof(*ids));
	}
	for (size_t i = 1; !err && i < sc.n; i++) {
		int64_t m;

		if (!sc.weight[i])
			continue;
		m = map_stack(t, p, (uint32_t)i, map, ids, &chain, &ccap);
		if (m < 0)
			err = (int)m;
		else
			t->v[m].self[side] += sc.weight[i] * scale / 1e9;
	}
	free(chain);
	free(ids);
	free(map);
	stack_counts__free(&sc);
	return err;
}

/* Inclusive time and child lists; children always come after their parent. */
static void mtree_finish(struct mtree *t)
{
	for (size_t i = 0; i < t->n; i++)
		for (int s = 0; s < 2; s++)
			t->v[i].incl[s] = t->v[i].self[s];
	for (size_t i = t->n; i-- > 1;) {
		struct mnode *m = &t->v[i], *up = &t->v[m->parent];

		for (int s = 0; s < 2; s++)
			up->incl[s] += m->incl[s];
		m->next = up->child;
		up->child = (uint32_t)i;
	}
}

static int path_of(const struct mtree *t, uint32_t id, struct diff_path *out)
{
	const struct mnode *m = &t->v[id];
	size_t len = 0, pos;

	for (uint32_t i = id; i; i = t->v[i].parent)
		len += strlen(t->str[t->v[i].name]) + 1;
	out->path = malloc(len ? len : 1);
	if (!out->path)
		return -ENOMEM;
	pos = len ? len - 1 : 0;
	out->path[pos] = 0;
	for (uint32_t i = id; i; i = t->v[i].parent) {
		size_t l = strlen(t->str[t->v[i].name]);

		pos -= l;
		memcpy(out->path + pos, t->str[t->v[i].name], l);
		if (pos)
			out->path[--pos] = ';';
	}
	out->leaf = t->str[m->name];
	out->before_s = m->incl[DIFF_BASE];
	out->after_s = m->incl[DIFF_NEW];
	out->self_before_s = m->self[DIFF_BASE];
	out->self_after_s = m->self[DIFF_NEW];
	out->delta_s = grow(m);
	return 0;
}

/* qsort over node ids by a value of the tree: no argument, so a file-level pointer */
static const struct mtree *sort_t;

static int cmp_growth(const void *a, const void *b)
{
	double x = grow(&sort_t->v[*(const uint32_t *)a]),
	       y = grow(&sort_t->v[*(const uint32_t *)b]);

	return x != y ? (x < y ? 1 : -1) : (int)(*(const uint32_t *)a - *(const uint32_t *)b);
}

static double self_change(const struct mnode *m)
{
	return fabs(m->self[DIFF_NEW] - m->self[DIFF_BASE]);
}

static int cmp_self_change(const void *a, const void *b)
{
	double x = self_change(&sort_t->v[*(const uint32_t *)a]);
	double y = self_change(&sort_t->v[*(const uint32_t *)b]);

	return x != y ? (x < y ? 1 : -1) : (int)(*(const uint32_t *)a - *(const uint32_t *)b);
}

/*
 * The parts of node v's growth, largest first, into parts[]: its children that grew, and
 * itself (id v) for its self time that grew. Returns how many.
 */
static size_t growth_parts(const struct mtree *t, uint32_t v, uint32_t *parts)
{
	const struct mnode *m = &t->v[v];
	size_t n = 0;

	for (uint32_t c = m->child; c; c = t->v[c].next)
		if (grow(&t->v[c]) > 0)
			parts[n++] = c;
	sort_t = t;
	qsort(parts, n, sizeof(*parts), cmp_growth);
	/* the self part, in its place by size */
	if (v && m->self[DIFF_NEW] - m->self[DIFF_BASE] > 0) {
		double sg = m->self[DIFF_NEW] - m->self[DIFF_BASE];
		size_t k = 0;

		while (k < n && grow(&t->v[parts[k]]) >= sg)
			k++;
		memmove(parts + k + 1, parts + k, (n - k) * sizeof(*parts));
		parts[k] = v;
		n++;
	}
	return n;
}

static double part_growth(const struct mtree *t, uint32_t v, uint32_t part)
{
	const struct mnode *m = &t->v[part];

	return part == v ? m->self[DIFF_NEW] - m->self[DIFF_BASE] : grow(m);
}

/*
 * After the cover is reached with fewer than ATTR_MIN paths: the largest parts left out on
 * the way (disjoint from the chosen ones) that carry at least ATTR_MIN_SHARE of the growth,
 * each followed down while a single callee carries `cover` of its growth.
 */
#define ATTR_MIN 3
#define ATTR_MIN_SHARE 0.05

static void add_dropped(const struct mtree *t, uint32_t *dropped, size_t nd, unsigned max,
			double cover, double total, uint32_t *sel, size_t *n)
{
	sort_t = t;
	qsort(dropped, nd, sizeof(*dropped), cmp_growth);
	for (size_t i = 0; i < nd && *n < ATTR_MIN && *n < max; i++) {
		uint32_t v = dropped[i];

		if (grow(&t->v[v]) < ATTR_MIN_SHARE * total)
			continue;
		/* down while one callee carries the cover of its growth */
		for (;;) {
			uint32_t best = 0;

			for (uint32_t c = t->v[v].child; c; c = t->v[c].next)
				if (!best || grow(&t->v[c]) > grow(&t->v[best]))
					best = c;
			if (!best || grow(&t->v[best]) < cover * grow(&t->v[v]))
				break;
			v = best;
		}
		sel[(*n)++] = v;
	}
}

/* The refinement described in diff.h: chosen node ids into sel (at most max). */
static int attribute(const struct mtree *t, unsigned max, double cover, double total, uint32_t *sel,
		     size_t *nsel)
{
	uint32_t *parts = malloc((t->n + 1) * sizeof(*parts));
	uint32_t *dropped = malloc((t->n + 1) * sizeof(*dropped));
	size_t nd = 0;
	bool *final = calloc(t->n, sizeof(*final));
	double covered = total; /* the virtual root stands for all of it */
	size_t n = 1;
	int err = parts && final && dropped ? 0 : -ENOMEM;

	sel[0] = 0;
	while (!err) {
		size_t best = n, np, take = 0;
		double need, sum = 0, g;

		for (size_t i = 0; i < n; i++)
			if (!final[sel[i]] &&
			    (best == n || (sel[i] ? grow(&t->v[sel[i]]) : total) >
					      (sel[best] ? grow(&t->v[sel[best]]) : total)))
				best = i;
		if (best == n)
			break;
		g = sel[best] ? grow(&t->v[sel[best]]) : total;
		np = growth_parts(t, sel[best], parts);
		need = cover * total - (covered - g);
		while (take < np && (take == 0 || sum < need))
			sum += part_growth(t, sel[best], parts[take++]);
		if (sel[best] && (!np || n - 1 + take > max || sum < need)) {
			final[sel[best]] = true;
			continue;
		}
		if (!sel[best] && n - 1 + take > max) { /* the top: at most max of its parts */
			take = max - (n - 1);
			sum = 0;
			for (size_t k = 0; k < take; k++)
				sum += part_growth(t, 0, parts[k]);
		}
		for (size_t k = 0; k < take && sel[best]; k++)
			if (parts[k] == sel[best]) { /* its own time: the node is the answer */
				take = 0;
				break;
			}
		if (!take) {
			final[sel[best]] = true;
			continue;
		}
		for (size_t k = take; k < np; k++)
			if (parts[k] != sel[best])
				dropped[nd++] = parts[k];
		covered += sum - g;
		sel[best] = parts[0];
		for (size_t k = 1; k < take; k++)
			sel[n++] = parts[k];
	}
	if (!err && !(n == 1 && !sel[0]))
		add_dropped(t, dropped, nd, max, cover, total, sel, &n);
	*nsel = err ? 0 : n;
	free(dropped);
	free(parts);
	free(final);
	return err;
}

static int top_paths(const struct mtree *t, size_t ntop, struct diff_attr *out)
{
	uint32_t *ids = malloc(t->n * sizeof(*ids));
	size_t n = 0;

	if (!ids)
		return -ENOMEM;
	for (uint32_t i = 1; i < t->n; i++)
		if (self_change(&t->v[i]) > 0)
			ids[n++] = i;
	sort_t = t;
	qsort(ids, n, sizeof(*ids), cmp_self_change);
	n = n < ntop ? n : ntop;
	out->top = calloc(n ? n : 1, sizeof(*out->top));
	if (!out->top) {
		free(ids);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		if (path_of(t, ids[i], &out->top[i])) {
			free(ids);
			return -ENOMEM;
		}
		out->ntop++;
	}
	free(ids);
	return 0;
}

int diff_attribute(const struct profile *base, const struct profile *new, const double scale[2],
		   unsigned max_paths, double cover, size_t ntop, struct diff_attr *out)
{
	struct mtree t = {0};
	uint32_t *sel = NULL;
	size_t nsel = 0;
	double total = 0;
	int err = -ENOMEM;

	memset(out, 0, sizeof(*out));
	/* sized for the larger file's stack nodes: paths at most, each growth a rehash */
	t.seed = hmap__seed();
	t.stridx = hmap__new(4096);
	if (!t.stridx || mtree_str(&t, "", 0, false) != 0 ||
	    arr_grow(t.v, t.cap,
		     (base->stacks.n > new->stacks.n ? base->stacks.n : new->stacks.n) + 1))
		goto out;
	t.v[t.n++] = (struct mnode){0}; /* the virtual root */
	if (slots_resize(&t, t.cap / 2))
		goto out;
	diff_program(base, t.prog[0], sizeof(t.prog[0]));
	diff_program(new, t.prog[1], sizeof(t.prog[1]));
	t.side = DIFF_BASE;
	err = mtree_add(&t, base, scale[DIFF_BASE], DIFF_BASE);
	memcpy(t.prog[0], t.prog[1], sizeof(t.prog[0]));
	t.side = DIFF_NEW;
	err = err ?: mtree_add(&t, new, scale[DIFF_NEW], DIFF_NEW);
	if (err)
		goto out;
	mtree_finish(&t);
	err = top_paths(&t, ntop, out);
	if (err)
		goto out;
	for (uint32_t c = t.v[0].child; c; c = t.v[c].next)
		total += grow(&t.v[c]) > 0 ? grow(&t.v[c]) : 0;
	out->growth_s = total;
	if (total <= 0 || !max_paths)
		goto out;
	err = -ENOMEM;
	sel = malloc((max_paths + 1) * sizeof(*sel));
	if (!sel)
		goto out;
	err = attribute(&t, max_paths, cover, total, sel, &nsel);
	if (err || (nsel == 1 && !sel[0]))
		goto out;
	sort_t = &t;
	qsort(sel, nsel, sizeof(*sel), cmp_growth);
	out->paths = calloc(nsel, sizeof(*out->paths));
	if (!out->paths) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < nsel && !err; i++) {
		err = path_of(&t, sel[i], &out->paths[i]);
		if (err)
			break;
		out->paths[i].share = out->paths[i].delta_s / total;
		out->explained += out->paths[i].share;
		out->n++;
	}
out:
	free(sel);
	free(t.v);
	free(t.str);
	free(t.str_new);
	free(t.slot);
	hmap__free(t.stridx);
	if (err)
		diff_attr__free(out);
	return err;
}

void diff_attr__free(struct diff_attr *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->paths[i].path);
	for (size_t i = 0; i < a->ntop; i++)
		free(a->top[i].path);
	free(a->paths);
	free(a->top);
	memset(a, 0, sizeof(*a));
}
