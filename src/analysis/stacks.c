// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>

#include "stacks.h"

static int cmp_collapsed(const void *a, const void *b)
{
	const struct collapsed *x = a, *y = b;

	if (x->comm != y->comm)
		return x->comm < y->comm ? -1 : 1;
	return x->node < y->node ? -1 : x->node > y->node;
}

int collapse_stacks(const struct profile *p, const struct sample_filter *f, struct collapsed **out,
		    size_t *n)
{
	struct hmap *idx = hmap__new(4096);
	struct collapsed *v = NULL;
	size_t cnt = 0, cap = 0;

	if (!idx)
		return -ENOMEM;
	for (size_t i = 0; i < p->samples.n; i++) {
		const struct sample *s = &p->samples.v[i];
		const struct thread *t;
		uint32_t comm = 0;
		uint64_t k;

		if (!sample_filter__match(f, s))
			continue;
		t = profile__thread((struct profile *)p, s->pid, s->tid, false);
		if (t)
			comm = t->comm;
		if (!hmap__get(idx, comm, s->stack, &k)) {
			if (cnt == cap) {
				struct collapsed *nv = realloc(v, (cap = cap ? cap * 2 : 1024) * sizeof(*nv));

				if (!nv)
					goto nomem;
				v = nv;
			}
			v[cnt] = (struct collapsed){ .comm = comm, .node = s->stack };
			k = cnt++;
			if (hmap__put(idx, comm, s->stack, k))
				goto nomem;
		}
		v[k].samples++;
		v[k].weight += s->weight;
	}
	hmap__free(idx);
	if (cnt)
		qsort(v, cnt, sizeof(*v), cmp_collapsed);
	*out = v;
	*n = cnt;
	return 0;
nomem:
	hmap__free(idx);
	free(v);
	return -ENOMEM;
}

size_t stack_frames(const struct profile *p, uint32_t node, const struct frame **out, size_t max,
		    size_t *total)
{
	size_t n = 0, pos;

	for (uint32_t s = node; s; s = p->stacks.v[s].parent) {
		uint32_t nf;

		profile__loc_frames(p, p->stacks.v[s].loc, &nf);
		n += nf;
	}
	if (total)
		*total = n;
	if (n > max)
		n = max;
	/* Fill from the end: the leaf location's innermost frame is last. */
	pos = n;
	for (uint32_t s = node; s && pos; s = p->stacks.v[s].parent) {
		uint32_t nf;
		const struct frame *fr = profile__loc_frames(p, p->stacks.v[s].loc, &nf);

		for (uint32_t k = 0; k < nf && pos; k++)
			out[--pos] = &fr[k];
	}
	/* When cut by max, the root side is dropped and the rest moved down. */
	if (pos) {
		for (size_t i = 0; i + pos < n; i++)
			out[i] = out[i + pos];
		n -= pos;
	}
	return n;
}
