// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "model/event.h"
#include "model/io_event.h"
#include "util/hmap.h"
#include "util/strtab.h"
#include "util/vec.h"
#include "gpu.h"
#include "offcpu.h"
#include "pylines.h"

struct pl_build {
	const struct profile *p;
	struct py_lines *out;
	uint32_t *inner;     /* stack node -> frame index + 1 of the frame its row is keyed by */
	uint32_t *via;	     /* stack node -> frame index + 1 of a library frame below it, 0 */
	struct hmap *rows;   /* (function << 32 | file, table << 32 | line) -> row */
	struct hmap *leaves; /* (table << 32 | row, leaf) -> value under that leaf */
	struct hmap *vias;   /* (table << 32 | row, via frame) -> value through it */
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

bool py_file_is_library(const char *file)
{
	const char *s;

	if (!file || !*file || *file == '<')
		return true;
	if (strstr(file, "/site-packages/") || strstr(file, "/dist-packages/"))
		return true;
	for (s = file; (s = strstr(s, "/python")); s++) /* .../lib/python3.11/, lib64 too */
		if (s - file >= 4 && (!strncmp(s - 4, "/lib", 4) || (s - file >= 6 &&
		    !strncmp(s - 6, "/lib64", 6))) && s[7] >= '0' && s[7] <= '9')
			return true;
	return false;
}

/*
 * For every stack node, in one pass (parents come before children): the frame its row is
 * keyed by (the innermost Python frame of the program's own code, else the innermost Python
 * frame) into b->inner, and the innermost Python frame when that is a library's below the
 * program's own into b->via. lib caches py_file_is_library per string (0: not yet, 1: no,
 * 2: yes).
 */
static int innermost_python(struct pl_build *b)
{
	const struct profile *p = b->p;
	size_t n = p->stacks.n ? p->stacks.n : 1;
	uint32_t *any = calloc(n, sizeof(*any)), *own = calloc(n, sizeof(*own));
	uint32_t nstr = strtab__count(p->strs);
	uint8_t *lib = calloc(nstr ? nstr : 1, 1);
	int err = -ENOMEM;

	b->inner = calloc(n, sizeof(*b->inner));
	b->via = calloc(n, sizeof(*b->via));
	if (!any || !own || !lib || !b->inner || !b->via)
		goto out;
	for (uint32_t i = 1; i < p->stacks.n; i++) {
		const struct stack_node *s = &p->stacks.v[i];
		const struct location *l = &p->locations.v[s->loc];
		uint32_t up = s->parent < i ? s->parent : 0;

		any[i] = any[up];
		own[i] = own[up];
		if (l->frame_n && p->frames.v[l->frame_first].kind == FRAME_PYTHON) {
			uint32_t file = p->frames.v[l->frame_first].file;

			if (file < nstr && !lib[file])
				lib[file] = py_file_is_library(profile__str(p, file)) ? 2 : 1;
			any[i] = l->frame_first + 1;
			if (file < nstr && lib[file] == 1)
				own[i] = l->frame_first + 1;
		}
		b->inner[i] = own[i] ? own[i] : any[i];
		b->via[i] = own[i] && any[i] != own[i] ? any[i] : 0;
	}
	err = 0;
out:
	free(any);
	free(own);
	free(lib);
	return err;
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

/* Adds value to (table, row idx)'s share of `what` in m, and makes `what` the row's own most. */
static int add_most(struct hmap *m, enum py_table t, uint64_t idx, uint32_t what, uint64_t value,
		    uint32_t *most, uint64_t *most_value)
{
	uint64_t v = 0;

	hmap__get(m, (uint64_t)t << 32 | idx, what, &v);
	v += value;
	if (hmap__put(m, (uint64_t)t << 32 | idx, what, v))
		return -ENOMEM;
	if (v > *most_value) {
		*most_value = v;
		*most = what;
	}
	return 0;
}

static int add(struct pl_build *b, enum py_table t, uint32_t stack, uint64_t value, uint32_t leaf)
{
	const struct frame *f;
	struct py_line *r;
	uint64_t idx;

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
	if (b->via[stack] &&
	    add_most(b->vias, t, idx, b->via[stack], value, &r->via, &r->via_value))
		return -ENOMEM;
	if (!leaf) /* a Python leaf: the row's own code */
		return 0;
	return add_most(b->leaves, t, idx, leaf, value, &r->leaf, &r->leaf_value);
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
	b.rows = hmap__new(256);
	b.leaves = hmap__new(256);
	b.vias = hmap__new(256);
	if (innermost_python(&b) || !b.rows || !b.leaves || !b.vias)
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
	free(b.via);
	hmap__free(b.rows);
	hmap__free(b.leaves);
	hmap__free(b.vias);
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
