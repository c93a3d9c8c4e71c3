// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pygil.h"
#include "pylines.h"
#include "stacks.h"
#include "util/vec.h"

static int cmp_collapsed(const void *a, const void *b)
{
	const struct collapsed *x = a, *y = b;

	if (x->comm != y->comm)
		return x->comm < y->comm ? -1 : 1;
	return x->node < y->node ? -1 : x->node > y->node;
}

struct trie_builder {
	const struct profile *p;
	bool lines;
	struct collapsed_set *c;
	struct hmap *idx;     /* (parent << 32 | name, module << 32 | fileline) -> node */
	struct hmap *fileline; /* (file, line) -> small id */
	uint32_t *of_stack;   /* address stack node -> symbolic node, 0 = not yet */
	const uint8_t *gil;   /* GIL mark of each stack node's root (NULL: none in the file) */
	size_t cap;
	enum stack_view view; /* not VIEW_MIXED: scratch of view_stack_locs() below */
	uint32_t *locs;
	uint8_t *cls;
	bool *keep;
};

const char *frame_display_name(const struct profile *p, const struct frame *f, char *buf,
			       size_t len)
{
	const char *name = profile__str(p, f->name), *file, *slash;

	if (f->kind != FRAME_PYTHON || !f->file || !len)
		return name;
	file = profile__str(p, f->file);
	slash = strrchr(file, '/');
	snprintf(buf, len, "%s (%s:%u)", name, slash ? slash + 1 : file, f->line);
	return buf;
}

static int64_t trie_child(struct trie_builder *b, uint32_t parent, uint32_t frame)
{
	const struct frame *f = &b->p->frames.v[frame];
	uint64_t fl = 0, id;

	/* A Python frame is named by its line (frame_display_name): one node per line. */
	if ((b->lines || f->kind == FRAME_PYTHON) && (f->file || f->line)) {
		if (!hmap__get(b->fileline, f->file, f->line, &fl)) {
			fl = hmap__count(b->fileline) + 1;
			if (hmap__put(b->fileline, f->file, f->line, fl))
				return -ENOMEM;
		}
	}
	if (hmap__get(b->idx, (uint64_t)parent << 32 | f->name, (uint64_t)f->module << 32 | fl, &id))
		return id;
	if (arr_grow(b->c->nodes, b->cap, b->c->nnodes + 1))
		return -ENOMEM;
	id = b->c->nnodes++;
	b->c->nodes[id] = (struct sym_node){ parent, frame, b->c->nodes[parent].depth + 1 };
	if (hmap__put(b->idx, (uint64_t)parent << 32 | f->name, (uint64_t)f->module << 32 | fl, id))
		return -ENOMEM;
	return id;
}

/* Symbolic node of an address stack node; parents first, memoized. */
static int64_t trie_of_stack(struct trie_builder *b, uint32_t node)
{
	uint32_t chain[1024], n = 0;
	int64_t sn = 0;

	if (!node)
		return 0;
	/*
	 * Walk up to the nearest mapped ancestor, 1,024 nodes at a time: a deeper unmapped part
	 * is mapped first by a call for the node above the chunk (one call per 1,024 levels).
	 */
	for (uint32_t s = node; s && !b->of_stack[s] && n < 1024; s = b->p->stacks.v[s].parent)
		chain[n++] = s;
	if (!n)
		return b->of_stack[node];
	if (b->p->stacks.v[chain[n - 1]].parent) {
		uint32_t up = b->p->stacks.v[chain[n - 1]].parent;

		sn = b->of_stack[up] ? b->of_stack[up] : trie_of_stack(b, up);
		if (sn < 0)
			return sn;
	}
	while (n--) {
		uint32_t nf, loc = b->p->stacks.v[chain[n]].loc;
		const struct location *l = &b->p->locations.v[loc];

		/* A root [GIL] / [no GIL] mark is the group's GIL state, not a frame. */
		if (b->gil && b->gil[chain[n]] && !b->p->stacks.v[chain[n]].parent)
			continue;
		profile__loc_frames(b->p, loc, &nf);
		/* A location's frames are leaf first: the outer (real) function comes first here. */
		for (uint32_t k = nf; k-- > 0;) {
			sn = trie_child(b, (uint32_t)sn, l->frame_first + k);
			if (sn < 0)
				return sn;
		}
		b->of_stack[chain[n]] = (uint32_t)sn;
	}
	return sn;
}

/*
 * Symbolic node of an address stack node in a view other than mixed, memoized per node: the
 * view of a stack depends on all of it (its leaf decides which native frame stays), so each
 * node is read whole instead of through its parent's node.
 */
static int64_t trie_of_view(struct trie_builder *b, uint32_t node)
{
	size_t n, i = 0;
	int64_t sn = 0;

	if (!node || b->of_stack[node])
		return node ? b->of_stack[node] : 0;
	n = view_stack_locs(b->p, b->view, node, b->locs, b->cls, b->keep);
	/* A root [GIL] / [no GIL] mark (kept by every view) is the group's GIL state. */
	if (b->gil && b->gil[node] && n)
		i = 1;
	for (; i < n; i++) {
		const struct location *l = &b->p->locations.v[b->locs[i]];
		uint32_t nf;

		profile__loc_frames(b->p, b->locs[i], &nf);
		for (uint32_t k = nf; k-- > 0;) {
			sn = trie_child(b, (uint32_t)sn, l->frame_first + k);
			if (sn < 0)
				return sn;
		}
	}
	b->of_stack[node] = (uint32_t)sn;
	return sn;
}

int collapse_stacks(const struct profile *p, const struct sample_filter *f, bool lines,
		    struct collapsed_set *out)
{
	return collapse_stacks_view(p, f, lines, GIL_ANY, VIEW_MIXED, out);
}

int collapse_stacks_gil(const struct profile *p, const struct sample_filter *f, bool lines,
			enum gil_filter gil, struct collapsed_set *out)
{
	return collapse_stacks_view(p, f, lines, gil, VIEW_MIXED, out);
}

int collapse_stacks_view(const struct profile *p, const struct sample_filter *f, bool lines,
			 enum gil_filter gil, enum stack_view v, struct collapsed_set *out)
{
	struct trie_builder b = { .p = p, .lines = lines, .c = out, .cap = 1024, .view = v };
	struct hmap *groups = hmap__new(4096);
	uint32_t last_tid = 0, comm = 0;
	bool have_last = false, any_gil;
	uint8_t *gil_roots = NULL;
	size_t cap = 0;
	int err = -ENOMEM;

	memset(out, 0, sizeof(*out));
	b.idx = hmap__new(4096);
	b.fileline = hmap__new(256);
	b.of_stack = calloc(p->stacks.n ? p->stacks.n : 1, sizeof(uint32_t));
	out->nodes = malloc(b.cap * sizeof(*out->nodes));
	gil_roots = py_gil_roots(p, &any_gil);
	if (v != VIEW_MIXED) {
		b.locs = malloc(PROFILE_MAX_STACK_DEPTH * sizeof(*b.locs));
		b.cls = malloc(PROFILE_MAX_STACK_DEPTH);
		b.keep = malloc(PROFILE_MAX_STACK_DEPTH * sizeof(*b.keep));
		if (!b.locs || !b.cls || !b.keep)
			goto out;
	}
	if (!groups || !b.idx || !b.fileline || !b.of_stack || !out->nodes || !gil_roots)
		goto out;
	b.gil = any_gil ? gil_roots : NULL;
	out->nnodes = 1;
	out->nodes[0] = (struct sym_node){ 0, 0, 0 };
	for (size_t i = 0; i < p->samples.n; i++) {
		const struct sample *s = &p->samples.v[i];
		const struct thread *t;
		uint8_t mark;
		int64_t sn;
		uint64_t k;

		if (!sample_filter__match(f, s) || s->stack >= p->stacks.n)
			continue;
		mark = gil_roots[s->stack]; /* 0 none, 1 [GIL], 2 [no GIL] */
		if (gil != GIL_ANY && mark != (gil == GIL_HELD ? 1 : 2))
			continue;
		sn = v == VIEW_MIXED ? trie_of_stack(&b, s->stack) : trie_of_view(&b, s->stack);
		if (sn < 0)
			goto out;
		/* Samples come in runs per thread: look its name up once per run. */
		if (s->tid != last_tid || !have_last) {
			t = profile__find_thread(p, s->pid, s->tid);
			comm = t ? t->comm : 0;
			last_tid = s->tid;
			have_last = true;
		}
		if (!hmap__get(groups, comm, sn, &k)) {
			if (arr_grow(out->v, cap, out->n + 1))
				goto out;
			out->v[out->n] = (struct collapsed){ .comm = comm, .node = sn };

			k = out->n++;
			if (hmap__put(groups, comm, sn, k))
				goto out;
		}
		out->v[k].samples++;
		out->v[k].weight += s->weight;
		if (mark) {
			out->v[k].gil_samples[mark - 1]++;
			out->v[k].gil_weight[mark - 1] += s->weight;
		}
	}
	if (out->n)
		qsort(out->v, out->n, sizeof(*out->v), cmp_collapsed);
	err = 0;
out:
	free(b.locs);
	free(b.cls);
	free(b.keep);
	free(gil_roots);
	hmap__free(groups);
	hmap__free(b.idx);
	hmap__free(b.fileline);
	free(b.of_stack);
	if (err)
		collapsed_set__free(out);
	return err;
}

void collapsed_set__free(struct collapsed_set *c)
{
	free(c->v);
	free(c->nodes);
	memset(c, 0, sizeof(*c));
}

size_t collapsed_frames(const struct collapsed_set *c, const struct profile *p, uint32_t node,
			const struct frame **out, size_t max, size_t *total)
{
	size_t n = c->nodes[node].depth, keep = n > max ? max : n, i = keep;

	if (total)
		*total = n;
	/* Keep the leaf side when max is short: the walk stops there, not at the root. */
	for (uint32_t s = node; i; s = c->nodes[s].parent)
		out[--i] = &p->frames.v[c->nodes[s].frame];
	return keep;
}

size_t stack_frames(const struct profile *p, uint32_t node, const struct frame **out, size_t max,
		    size_t *total)
{
	size_t n = 0;

	/* Leaf first, so that a walk cut by max has kept the leaf side; reversed below. */
	for (uint32_t s = node; s && n < max; s = p->stacks.v[s].parent) {
		uint32_t nf;
		const struct frame *fr = profile__loc_frames(p, p->stacks.v[s].loc, &nf);

		for (uint32_t k = 0; k < nf && n < max; k++)
			out[n++] = &fr[k];
	}
	for (size_t i = 0; i < n / 2; i++) {
		const struct frame *t = out[i];

		out[i] = out[n - 1 - i];
		out[n - 1 - i] = t;
	}
	/* Only a caller that asks for the depth pays for a walk of the whole stack. */
	if (total) {
		*total = 0;
		for (uint32_t s = node; s; s = p->stacks.v[s].parent)
			*total += p->locations.v[p->stacks.v[s].loc].frame_n;
	}
	return n;
}

size_t stack_frames_leaf_first(const struct profile *p, uint32_t node, const struct frame **out,
			       size_t max)
{
	size_t n = node && node < p->stacks.n ? stack_frames(p, node, out, max, NULL) : 0;

	for (size_t i = 0; i < n / 2; i++) {
		const struct frame *t = out[i];

		out[i] = out[n - 1 - i];
		out[n - 1 - i] = t;
	}
	return n;
}

size_t stack_pick_shown(const struct profile *p, const struct frame **all, size_t n,
			const struct frame **out, size_t max, size_t *gap, bool *more)
{
	const struct frame *fr[1024];
	size_t m = 0, py = 0, k, caller;

	/* a name repeated by consecutive frames (overloads, inlined copies) is read once */
	for (size_t i = 0; i < n && m < 1024; i++)
		if (!m || all[i]->kind == FRAME_PYTHON || all[i]->name != fr[m - 1]->name ||
		    all[i]->kind != fr[m - 1]->kind)
			fr[m++] = all[i];
	n = m;
	*gap = 0;
	/* the innermost Python frame of the program's own code, else the innermost Python frame */
	while (py < n && (fr[py]->kind != FRAME_PYTHON ||
			  py_file_is_library(fr[py]->file ? profile__str(p, fr[py]->file) : NULL)))
		py++;
	if (py == n)
		for (py = 0; py < n && fr[py]->kind != FRAME_PYTHON;)
			py++;
	if (py < max || py == n || max < 3) {
		k = n < max ? n : max;
		memcpy(out, fr, k * sizeof(*out));
		*more = n > k;
		return k;
	}
	/* A Python user's line: the native leaf side, then the Python frame that led there and
	 * its Python caller (the interpreter's frames between them say nothing to its user). */
	memcpy(out, fr, (max - 2) * sizeof(*out));
	out[max - 2] = fr[py];
	k = max - 1;
	for (caller = py + 1; caller < n && fr[caller]->kind != FRAME_PYTHON;)
		caller++;
	if (caller == n)
		caller = py + 1;
	if (caller < n)
		out[k++] = fr[caller];
	*more = caller + 1 < n;
	*gap = max - 2;
	return k;
}

size_t stack_shown_frames(const struct profile *p, uint32_t node, const struct frame **out,
			  size_t max, size_t *gap, bool *more)
{
	const struct frame *fr[1024];
	size_t n = stack_frames_leaf_first(p, node, fr, 1024);

	return stack_pick_shown(p, fr, n, out, max, gap, more);
}

static uint32_t parent_of(const struct profile *p, uint32_t node)
{
	return p->stacks.v[node].parent < node ? p->stacks.v[node].parent : 0;
}

static bool loc_special(const struct profile *p, uint32_t loc)
{
	return p->objects.v[p->locations.v[loc].object].kind == OBJ_SPECIAL;
}

bool stack_truncated(const struct profile *p, uint32_t node)
{
	uint32_t root = node, below = 0;

	while (root && p->stacks.v[root].parent) {
		below = root;
		root = p->stacks.v[root].parent;
	}
	/* A Python sample's [GIL] / [no GIL] root is no sign of a cut stack: look below it. */
	if (root && py_gil_marker(p, p->stacks.v[root].loc))
		root = below;
	return root && loc_special(p, p->stacks.v[root].loc);
}

uint8_t *stacks_truncated(const struct profile *p)
{
	uint8_t *cut = calloc(p->stacks.n ? p->stacks.n : 1, 1);

	if (!cut)
		return NULL;
	/* Parents precede children (the reader checks parent < id): one pass, no walks. */
	for (uint32_t i = 1; i < p->stacks.n; i++) {
		uint32_t par = parent_of(p, i), loc = p->stacks.v[i].loc;

		if (!par) /* a root: a [GIL] marker is no cut */
			cut[i] = !py_gil_marker(p, loc) && loc_special(p, loc);
		else if (!parent_of(p, par) && py_gil_marker(p, p->stacks.v[par].loc))
			cut[i] = loc_special(p, loc); /* the node below a root [GIL] marker */
		else
			cut[i] = cut[par];
	}
	return cut;
}

bool stack_leaf_unknown(const struct profile *p, uint32_t node)
{
	uint32_t n;
	const struct frame *f;

	if (!node)
		return false;
	f = profile__loc_frames(p, p->stacks.v[node].loc, &n);
	return !n || f[0].kind == FRAME_UNKNOWN;
}
