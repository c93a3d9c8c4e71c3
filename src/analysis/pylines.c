// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "model/event.h"
#include "model/io_event.h"
#include "util/hmap.h"
#include "util/vec.h"
#include "gpu.h"
#include "offcpu.h"
#include "pylines.h"

struct pl_build {
	const struct profile *p;
	struct py_lines *out;
	uint32_t *inner;     /* stack node -> frame index + 1 of its innermost Python frame */
	struct hmap *rows;   /* (function << 32 | file, table << 32 | line) -> row */
	struct hmap *leaves; /* (table << 32 | row, leaf) -> value under that leaf */
	size_t cap[PYT_N];
};

static const char *const table_names[PYT_N] = { "cpu", "memory", "memory_peak",
						"memory_not_freed", "offcpu", "io", "gpu" };

const char *py_table_name(enum py_table t)
{
	return (unsigned)t < PYT_N ? table_names[t] : "?";
}

const char *py_line_leaf(const struct profile *p, enum py_table t, const struct py_line *r)
{
	if (t == PYT_OFFCPU)
		return wait_kind_name(r->leaf);
	return r->leaf ? profile__str(p, r->leaf) : "";
}

/* Innermost Python frame of every stack node, in one pass: parents come before children. */
static uint32_t *innermost_python(const struct profile *p)
{
	uint32_t *in = calloc(p->stacks.n ? p->stacks.n : 1, sizeof(*in));

	if (!in)
		return NULL;
	for (uint32_t i = 1; i < p->stacks.n; i++) {
		const struct stack_node *s = &p->stacks.v[i];
		const struct location *l = &p->locations.v[s->loc];

		if (l->frame_n && p->frames.v[l->frame_first].kind == FRAME_PYTHON)
			in[i] = l->frame_first + 1;
		else if (s->parent < i)
			in[i] = in[s->parent];
	}
	return in;
}

/* The native leaf of a stack: its innermost frame unless Python or synthetic. */
static uint32_t native_leaf_of(const struct profile *p, uint32_t node)
{
	uint32_t nf;
	const struct frame *f;

	if (!node || node >= p->stacks.n)
		return 0;
	f = profile__loc_frames(p, p->stacks.v[node].loc, &nf);
	return nf && f->kind != FRAME_PYTHON && f->kind != FRAME_SPECIAL ? f->name : 0;
}

static int add(struct pl_build *b, enum py_table t, uint32_t stack, uint64_t value, uint32_t leaf)
{
	const struct frame *f;
	struct py_line *r;
	uint64_t idx, lv = 0;

	b->out->total[t] += value;
	if (!stack || stack >= b->p->stacks.n || !b->inner[stack] || !value)
		return 0;
	f = &b->p->frames.v[b->inner[stack] - 1];
	if (!hmap__get(b->rows, (uint64_t)f->name << 32 | f->file, (uint64_t)t << 32 | f->line,
		       &idx)) {
		idx = b->out->n[t];
		if (arr_grow(b->out->v[t], b->cap[t], idx + 1) ||
		    hmap__put(b->rows, (uint64_t)f->name << 32 | f->file,
			      (uint64_t)t << 32 | f->line, idx))
			return -ENOMEM;
		b->out->v[t][idx] = (struct py_line){ .function = f->name, .file = f->file,
						      .line = f->line };
		b->out->n[t]++;
	}
	r = &b->out->v[t][idx];
	r->value += value;
	if (!leaf) /* a Python leaf: the row's own code */
		return 0;
	hmap__get(b->leaves, (uint64_t)t << 32 | idx, leaf, &lv);
	lv += value;
	if (hmap__put(b->leaves, (uint64_t)t << 32 | idx, leaf, lv))
		return -ENOMEM;
	if (lv > r->leaf_value) {
		r->leaf_value = lv;
		r->leaf = leaf;
	}
	return 0;
}

static bool event_match(const struct sample_filter *f, const struct event *e)
{
	struct sample s = { .ts = e->ts, .pid = e->pid, .tid = e->tid, .stack = e->stack };
	struct sample_filter g = f ? *f : (struct sample_filter){ 0 };

	g.match = NULL; /* regions and paths select CPU samples */
	return sample_filter__match(&g, &s);
}

static int add_events(struct pl_build *b, const struct sample_filter *f)
{
	const struct profile *p = b->p;
	struct offcpu_draw draw = offcpu_sample_draw(p);
	uint32_t *launch = NULL;
	int err = gpu_join(p, &launch);

	for (size_t i = 0; i < p->events.n && !err; i++) {
		const struct event *e = &p->events.v[i];
		/* GPU work is the launching thread's: its own tid slot means something else */
		const struct event *who =
		    launch && launch[i] != GPU_NO_LAUNCH ? &p->events.v[launch[i]] : e;

		if (!event_match(f, who))
			continue;
		if (e->kind == EVK_OFFCPU)
			err = add(b, PYT_OFFCPU, e->stack, offcpu_weighted_ns(&draw, e),
				  offcpu_classify(p, e));
		else if (e->kind == EVK_IO)
			err = add(b, PYT_IO, e->stack, ev_io_bytes(e), native_leaf_of(p, e->stack));
		else if (who != e)
			err = add(b, PYT_GPU, who->stack, e->dur, native_leaf_of(p, who->stack));
	}
	free(launch);
	return err;
}

static int add_memory(struct pl_build *b, const struct mem_result *m)
{
	static const enum py_table tables[] = { PYT_MEMORY, PYT_MEM_PEAK, PYT_MEM_LEAKED };
	const struct mem_group *groups[] = { m->allocated, m->at_peak, m->leaks };
	const size_t n[] = { m->nallocated, m->nat_peak, m->nleaks };
	int err = 0;

	for (size_t k = 0; k < 3; k++)
		for (size_t i = 0; i < n[k] && !err; i++)
			err = add(b, tables[k], groups[k][i].stack, groups[k][i].bytes,
				  native_leaf_of(b->p, groups[k][i].stack));
	return err;
}

static int cmp_line(const void *a, const void *b)
{
	const struct py_line *x = a, *y = b;

	if (x->value != y->value)
		return x->value > y->value ? -1 : 1;
	if (x->file != y->file)
		return x->file < y->file ? -1 : 1;
	return x->line < y->line ? -1 : x->line > y->line;
}

int py_lines_analyze(const struct profile *p, const struct sample_filter *f,
		     const struct mem_result *mem, struct py_lines *out)
{
	struct pl_build b = { .p = p, .out = out };
	int err = -ENOMEM;

	memset(out, 0, sizeof(*out));
	b.inner = innermost_python(p);
	b.rows = hmap__new(256);
	b.leaves = hmap__new(256);
	if (!b.inner || !b.rows || !b.leaves)
		goto out;
	err = 0;
	for (size_t i = 0; i < p->samples.n && !err; i++) {
		const struct sample *s = &p->samples.v[i];

		if (sample_filter__match(f, s))
			err = add(&b, PYT_CPU, s->stack, s->weight, native_leaf_of(p, s->stack));
	}
	if (!err && mem && mem->present)
		err = add_memory(&b, mem);
	err = err ?: add_events(&b, f);
	for (int t = 0; t < PYT_N && !err; t++) {
		for (size_t i = 0; i < out->n[t]; i++)
			out->v[t][i].share = 100.0 * out->v[t][i].value / out->total[t];
		if (out->n[t])
			qsort(out->v[t], out->n[t], sizeof(*out->v[t]), cmp_line);
	}
out:
	free(b.inner);
	hmap__free(b.rows);
	hmap__free(b.leaves);
	if (err)
		py_lines__free(out);
	return err;
}

void py_lines__free(struct py_lines *l)
{
	for (int t = 0; t < PYT_N; t++)
		free(l->v[t]);
	memset(l, 0, sizeof(*l));
}
