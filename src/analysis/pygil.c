// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/hmap.h"
#include "util/vec.h"
#include "pygil.h"

/* 1 for [GIL], 2 for [no GIL], 0 for any other location; *any: whether there is one. */
static uint8_t *marker_locs(const struct profile *p, bool *any)
{
	uint8_t *kind = calloc(p->locations.n ? p->locations.n : 1, 1);

	*any = false;
	if (!kind)
		return NULL;
	for (size_t i = 0; i < p->locations.n; i++) {
		const struct object *o = &p->objects.v[p->locations.v[i].object];
		const char *name;

		if (o->kind != OBJ_SPECIAL)
			continue;
		name = profile__str(p, o->path);
		if (!strcmp(name, PY_GIL_HELD))
			kind[i] = 1;
		else if (!strcmp(name, PY_GIL_NOT_HELD))
			kind[i] = 2;
		*any |= kind[i] != 0;
	}
	return kind;
}

bool py_gil_marker(const struct profile *p, uint32_t loc)
{
	const struct object *o;
	const char *name;

	if (loc >= p->locations.n)
		return false;
	o = &p->objects.v[p->locations.v[loc].object];
	if (o->kind != OBJ_SPECIAL)
		return false;
	name = profile__str(p, o->path);
	return !strcmp(name, PY_GIL_HELD) || !strcmp(name, PY_GIL_NOT_HELD);
}

uint8_t *py_gil_roots(const struct profile *p, bool *any)
{
	uint8_t *kind = marker_locs(p, any), *root;

	if (!kind)
		return NULL;
	root = calloc(p->stacks.n ? p->stacks.n : 1, 1);
	/* Parents come before their children: one pass in id order. */
	for (size_t i = 1; root && *any && i < p->stacks.n; i++) {
		const struct stack_node *sn = &p->stacks.v[i];

		root[i] = sn->parent && sn->parent < i ? root[sn->parent]
			  : !sn->parent && sn->loc < p->locations.n ? kind[sn->loc]
								     : 0;
	}
	free(kind);
	return root;
}

static int cmp_samples(const void *a, const void *b)
{
	const struct py_gil_thread *x = a, *y = b;

	if (x->samples != y->samples)
		return x->samples < y->samples ? 1 : -1;
	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

int py_gil_stats(const struct profile *p, const struct sample_filter *f, struct py_gil_thread **out,
		 size_t *n)
{
	struct py_gil_thread *v = NULL;
	size_t nv = 0, cap = 0;
	struct hmap *idx = NULL;
	uint8_t *kind, *root = NULL;
	bool any;
	int err = -ENOMEM;

	*out = NULL;
	*n = 0;
	kind = marker_locs(p, &any);
	idx = hmap__new(64);
	if (!kind || !idx)
		goto out;
	/*
	 * The marker is the root, the node at depth 1: one pass in id order (parents come first)
	 * gives every node its root's kind, so no sample walks its stack.
	 */
	if (any) {
		root = malloc((p->stacks.n ? p->stacks.n : 1) * sizeof(*root));
		if (!root)
			goto out;
		for (size_t i = 0; i < p->stacks.n; i++) {
			const struct stack_node *sn = &p->stacks.v[i];

			root[i] = !i ? 0 : sn->parent ? root[sn->parent] : kind[sn->loc];
		}
	}
	/* No marker location, no Python sample: nothing to look at. */
	for (size_t i = 0; any && i < p->samples.n; i++) {
		const struct sample *s = &p->samples.v[i];
		uint64_t at;
		uint8_t k;

		if (!s->stack || (f && !sample_filter__match(f, s)))
			continue;
		k = root[s->stack];
		if (!k)
			continue;
		if (!hmap__get(idx, s->pid, s->tid, &at)) {
			if (!arr_push(v, nv, cap))
				goto out;
			at = nv - 1;

			v[at].pid = s->pid;
			v[at].tid = s->tid;
			if (hmap__put(idx, s->pid, s->tid, at))
				goto out;
		}
		v[at].samples++;
		v[at].held += k == 1;
	}
	if (nv)
		qsort(v, nv, sizeof(*v), cmp_samples);
	*out = nv ? v : NULL;
	*n = nv;
	if (!nv)
		free(v);
	v = NULL;
	err = 0;
out:
	free(v);
	free(root);
	free(kind);
	hmap__free(idx);
	return err;
}
