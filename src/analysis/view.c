// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "view.h"

enum view_class view_loc_class(const struct profile *p, uint32_t loc)
{
	const struct location *l = &p->locations.v[loc];
	uint8_t kind = p->objects.v[l->object].kind;

	if (kind == OBJ_SPECIAL)
		return VC_SPECIAL;
	if (kind == OBJ_PYTHON ||
	    (l->frame_n && p->frames.v[l->frame_first].kind == FRAME_PYTHON)) {
		uint32_t file = l->frame_n ? p->frames.v[l->frame_first].file : 0;

		return file && !strncmp(profile__str(p, file), "<frozen importlib._bootstrap", 28)
			   ? VC_PY_IMPORT
			   : VC_PYTHON;
	}
	if (l->frame_n) {
		/* the innermost frame: an allocator inlined into the loop is still the leaf */
		const char *name = profile__str(p, p->frames.v[l->frame_first].name);

		if (!strncmp(name, "_PyEval", 7) || !strncmp(name, "PyEval_", 7))
			return VC_INTERP;
	}
	return VC_NATIVE;
}

size_t view_select(enum stack_view v, const uint8_t *cls, size_t n, bool *keep)
{
	size_t kept = 0;
	bool leaf_open = true;	/* no Python or native frame seen yet from the leaf side */
	bool py_below = false;	/* a Python frame seen from the leaf side */
	bool has_py = false;	/* a Python frame anywhere: it carries the interpreter's time */

	for (size_t i = 0; i < n && v == VIEW_PYTHON; i++)
		has_py |= cls[i] == VC_PYTHON || cls[i] == VC_PY_IMPORT;
	for (size_t i = n; i-- > 0;) {
		switch (v) {
		case VIEW_PYTHON:
			/* The innermost native frame is the leaf unless a Python frame is below. */
			keep[i] = cls[i] == VC_NATIVE	   ? leaf_open
				  : cls[i] == VC_INTERP	   ? leaf_open && !has_py
				  : cls[i] == VC_PY_IMPORT ? !py_below
							   : true;
			if (cls[i] != VC_SPECIAL)
				leaf_open = false;
			py_below |= cls[i] == VC_PYTHON || cls[i] == VC_PY_IMPORT;
			break;
		case VIEW_NATIVE:
			keep[i] = cls[i] != VC_PYTHON && cls[i] != VC_PY_IMPORT;
			break;
		default:
			keep[i] = true;
		}
		kept += keep[i];
	}
	return kept;
}

size_t view_stack_locs(const struct profile *p, enum stack_view v, uint32_t node, uint32_t *locs,
		       uint8_t *cls, bool *keep)
{
	size_t n = 0, k = 0;

	for (uint32_t x = node; x && n < PROFILE_MAX_STACK_DEPTH; x = p->stacks.v[x].parent)
		n++;
	for (uint32_t x = node, i = n; i; x = p->stacks.v[x].parent) {
		locs[--i] = p->stacks.v[x].loc;
		cls[i] = view_loc_class(p, locs[i]);
	}
	view_select(v, cls, n, keep);
	for (size_t i = 0; i < n; i++)
		if (keep[i])
			locs[k++] = locs[i];
	return k;
}

struct view_state {
	struct profile *p;
	enum stack_view v;
	uint32_t *map; /* old node -> new node + 1, 0 = not yet */
	uint32_t *locs;
	uint8_t *cls;
	bool *keep;
	size_t nold;
};

/* The node of old stack node `node` in the view. */
static int64_t view_node(struct view_state *s, uint32_t node)
{
	size_t k;
	int64_t id;

	if (!node || node >= s->nold)
		return node;
	if (s->map[node])
		return s->map[node] - 1;
	k = view_stack_locs(s->p, s->v, node, s->locs, s->cls, s->keep);
	id = profile__stack(s->p, s->locs, k);
	if (id < 0)
		return id;
	s->map[node] = (uint32_t)id + 1;
	return id;
}

static int view_remap(struct view_state *s, uint32_t *node)
{
	int64_t id = view_node(s, *node);

	if (id < 0)
		return (int)id;
	*node = (uint32_t)id;
	return 0;
}

int profile_apply_view(struct profile *p, enum stack_view v)
{
	struct view_state s = { .p = p, .v = v, .nold = p->stacks.n };
	int err = -ENOMEM;

	if (v == VIEW_MIXED)
		return 0;
	if (p->stacks_base)
		return -EINVAL;
	s.map = calloc(s.nold ? s.nold : 1, sizeof(*s.map));
	s.locs = malloc(PROFILE_MAX_STACK_DEPTH * sizeof(*s.locs));
	s.cls = malloc(PROFILE_MAX_STACK_DEPTH);
	s.keep = malloc(PROFILE_MAX_STACK_DEPTH * sizeof(*s.keep));
	if (!s.map || !s.locs || !s.cls || !s.keep)
		goto out;
	for (size_t i = 0; i < p->samples.n; i++) {
		err = view_remap(&s, &p->samples.v[i].stack);
		if (err)
			goto out;
	}
	for (size_t i = 0; i < p->events.n; i++) {
		err = view_remap(&s, &p->events.v[i].stack);
		err = err ?: view_remap(&s, &p->events.v[i].stack2);
		if (err)
			goto out;
	}
	err = 0;
out:
	free(s.map);
	free(s.locs);
	free(s.cls);
	free(s.keep);
	return err;
}

static const char *const view_names[] = { "mixed", "python", "native" };

int view_parse(const char *s)
{
	for (int i = 0; i < 3; i++)
		if (s && !strcmp(s, view_names[i]))
			return i;
	return -EINVAL;
}

const char *view_name(enum stack_view v)
{
	return (unsigned)v < 3 ? view_names[v] : "?";
}
