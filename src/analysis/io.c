// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io.h"
#include "model/io_event.h"
#include "util/hmap.h"
#include "util/vec.h"

bool io_present(const struct profile *p)
{
	return profile__meta(p, "io") != NULL;
}

static bool io_match(const struct sample_filter *f, const struct event *e)
{
	struct sample_filter g = *f;
	struct sample s = { .ts = e->ts, .pid = e->pid, .tid = e->tid, .stack = e->stack };

	g.match = NULL; /* regions and paths select CPU samples */
	return sample_filter__match(&g, &s);
}

static void group_add(struct io_group *g, const struct event *e, bool input)
{
	uint64_t bytes = ev_io_bytes(e);

	if (!g->calls || e->ts < g->first_ts)
		g->first_ts = e->ts;
	if (e->ts + e->dur > g->last_ts)
		g->last_ts = e->ts + e->dur;
	g->calls++;
	if (input) {
		g->read_bytes += bytes;
		g->read_ns += e->dur;
	} else {
		g->write_bytes += bytes;
		g->write_ns += e->dur;
	}
}

/* The row of key (k1, k2) in *v (created zeroed); NULL on -ENOMEM. */
static struct io_group *row(struct hmap *idx, struct io_group **v, size_t *n, size_t *cap,
			    uint64_t k1, uint64_t k2)
{
	uint64_t i;

	if (hmap__get(idx, k1, k2, &i))
		return &(*v)[i];
	if (arr_grow(*v, *cap, *n + 1) || hmap__put(idx, k1, k2, *n))
		return NULL;
	memset(&(*v)[*n], 0, sizeof(**v));
	return &(*v)[(*n)++];
}

static struct io_thread *thread_row(struct hmap *idx, struct io_result *r, size_t *cap,
				    uint32_t pid, uint32_t tid)
{
	uint64_t i;

	if (hmap__get(idx, pid, tid, &i))
		return &r->threads[i];
	if (arr_grow(r->threads, *cap, r->nthreads + 1) || hmap__put(idx, pid, tid, r->nthreads))
		return NULL;
	memset(&r->threads[r->nthreads], 0, sizeof(*r->threads));
	r->threads[r->nthreads].pid = pid;
	r->threads[r->nthreads].tid = tid;
	return &r->threads[r->nthreads++];
}

static uint64_t g_bytes(const struct io_group *g)
{
	return g->read_bytes + g->write_bytes;
}

static uint64_t g_ns(const struct io_group *g)
{
	return g->read_ns + g->write_ns;
}

static int cmp_bytes(const void *a, const void *b)
{
	const struct io_group *x = a, *y = b;

	if (g_bytes(x) != g_bytes(y))
		return g_bytes(x) > g_bytes(y) ? -1 : 1;
	if (g_ns(x) != g_ns(y))
		return g_ns(x) > g_ns(y) ? -1 : 1;
	return x->stack != y->stack ? (x->stack < y->stack ? -1 : 1) : (x->name > y->name) - (x->name < y->name);
}

static int cmp_time(const void *a, const void *b)
{
	const struct io_group *x = a, *y = b;

	if (g_ns(x) != g_ns(y))
		return g_ns(x) > g_ns(y) ? -1 : 1;
	return cmp_bytes(a, b);
}

static int cmp_thread(const void *a, const void *b)
{
	const struct io_thread *x = a, *y = b;

	if (x->read_ns != y->read_ns)
		return x->read_ns > y->read_ns ? -1 : 1;
	return x->tid != y->tid ? (x->tid < y->tid ? -1 : 1) : 0;
}

/*
 * Per thread: its time span (first to last I/O call or CPU sample, so a thread that reads
 * for a second and then computes for ten is not "mostly reading") and the file it read
 * the longest, with the stack of that time.
 */
static int thread_spans(const struct profile *p, const struct sample_filter *f,
			struct io_result *r, struct hmap *tidx)
{
	struct hmap *top = hmap__new(64); /* (tid, name) -> read ns; then (tid, name<<32) stack ns */

	if (!top)
		return -ENOMEM;
	for (size_t i = 0; i < p->samples.n; i++) {
		const struct sample *s = &p->samples.v[i];
		uint64_t k;
		struct io_thread *t;

		if (!hmap__get(tidx, s->pid, s->tid, &k) || !sample_filter__match(f, s))
			continue;
		t = &r->threads[k];
		if (s->ts < t->first_ts)
			t->first_ts = s->ts;
		if (s->ts > t->last_ts)
			t->last_ts = s->ts;
	}
	for (size_t i = 0; i < p->events.n; i++) {
		const struct event *e = &p->events.v[i];
		uint64_t k, ns = 0;
		struct io_thread *t;

		if (e->kind != EVK_IO || !io_call_is_read(IOEV_CALL(e->flags)) || !io_match(f, e) ||
		    !hmap__get(tidx, e->pid, e->tid, &k))
			continue;
		t = &r->threads[k];
		hmap__get(top, e->tid, e->name, &ns);
		ns += e->dur;
		if (hmap__put(top, e->tid, e->name, ns)) {
			hmap__free(top);
			return -ENOMEM;
		}
		if (ns > t->top_ns) {
			t->top_ns = ns;
			t->top_name = e->name;
			t->top_stack = e->stack;
		}
	}
	hmap__free(top);
	return 0;
}

static int collect(const struct profile *p, const struct sample_filter *f, struct io_result *r,
		   struct hmap *sidx, struct hmap *fidx, struct hmap *tidx)
{
	size_t scap = 0, fcap = 0, tcap = 0;

	for (size_t i = 0; i < p->events.n; i++) {
		const struct event *e = &p->events.v[i];
		bool input;
		struct io_group *g, *fg;
		struct io_thread *t;

		if (e->kind != EVK_IO || !io_match(f, e))
			continue;
		input = io_call_is_read(IOEV_CALL(e->flags));
		g = row(sidx, &r->by_bytes, &r->nstacks, &scap, (uint64_t)e->stack << 1 | input,
			e->name);
		fg = g ? row(fidx, &r->files, &r->nfiles, &fcap, e->name, 0) : NULL;
		t = fg ? thread_row(tidx, r, &tcap, e->pid, e->tid) : NULL;
		if (!t)
			return -ENOMEM;
		g->stack = e->stack;
		g->name = fg->name = e->name;
		g->type = fg->type = IOEV_TYPE(e->flags);
		g->input = input;
		group_add(g, e, input);
		group_add(fg, e, input);
		if (!t->calls || e->ts < t->first_ts)
			t->first_ts = e->ts;
		if (e->ts + e->dur > t->last_ts)
			t->last_ts = e->ts + e->dur;
		t->calls++;
		r->calls++;
		r->no_stack += (e->flags & IOEV_F_NO_STACK) != 0;
		if (input) {
			t->read_calls++;
			t->read_bytes += ev_io_bytes(e);
			t->read_ns += e->dur;
			r->read_calls++;
			r->read_bytes += ev_io_bytes(e);
			r->read_ns += e->dur;
		} else {
			t->write_bytes += ev_io_bytes(e);
			t->write_ns += e->dur;
			r->write_calls++;
			r->write_bytes += ev_io_bytes(e);
			r->write_ns += e->dur;
		}
	}
	return 0;
}

int io_analyze(const struct profile *p, const struct sample_filter *f, struct io_result *r)
{
	struct sample_filter none = { 0 };
	struct hmap *sidx = hmap__new(256), *fidx = hmap__new(64), *tidx = hmap__new(64);
	int err = -ENOMEM;

	memset(r, 0, sizeof(*r));
	if (!f)
		f = &none;
	r->present = io_present(p);
	r->start_ns = profile__meta_u64(p, "start_ns", 0);
	r->end_ns = profile__meta_u64(p, "end_ns", 0);
	if (!sidx || !fidx || !tidx)
		goto out;
	err = collect(p, f, r, sidx, fidx, tidx);
	if (!err)
		err = thread_spans(p, f, r, tidx);
	if (!err && r->nstacks) {
		r->by_time = malloc(r->nstacks * sizeof(*r->by_time));
		if (!r->by_time) {
			err = -ENOMEM;
			goto out;
		}
		qsort(r->by_bytes, r->nstacks, sizeof(*r->by_bytes), cmp_bytes);
		memcpy(r->by_time, r->by_bytes, r->nstacks * sizeof(*r->by_time));
		qsort(r->by_time, r->nstacks, sizeof(*r->by_time), cmp_time);
	}
	if (!err && r->nfiles)
		qsort(r->files, r->nfiles, sizeof(*r->files), cmp_bytes);
	for (size_t i = 0; !err && i < r->nthreads; i++) {
		const struct thread *t = profile__find_thread(p, r->threads[i].pid, r->threads[i].tid);

		r->threads[i].comm = t ? t->comm : 0;
	}
	if (!err && r->nthreads)
		qsort(r->threads, r->nthreads, sizeof(*r->threads), cmp_thread);
out:
	hmap__free(sidx);
	hmap__free(fidx);
	hmap__free(tidx);
	if (err)
		io_result__free(r);
	return err;
}

void io_result__free(struct io_result *r)
{
	free(r->by_bytes);
	free(r->by_time);
	free(r->files);
	free(r->threads);
	r->by_bytes = r->by_time = r->files = NULL;
	r->threads = NULL;
	r->nstacks = r->nfiles = r->nthreads = 0;
}

/* "[read] /path": the leaf frame of a call in the I/O flamegraph. */
static int64_t leaf_node(struct profile *p, struct hmap *cache, const struct event *e)
{
	bool input = io_call_is_read(IOEV_CALL(e->flags));
	uint64_t node;
	char label[600];
	int64_t loc, n;

	if (hmap__get(cache, (uint64_t)e->stack << 1 | input, e->name, &node))
		return (int64_t)node;
	snprintf(label, sizeof(label), "[%s] %.500s", input ? "read" : "write",
		 e->name ? profile__str(p, e->name) : "?");
	loc = profile__special(p, label);
	if (loc < 0)
		return loc;
	n = profile__stack_child(p, e->stack, (uint32_t)loc);
	if (n < 0 || hmap__put(cache, (uint64_t)e->stack << 1 | input, e->name, (uint64_t)n))
		return n < 0 ? n : -ENOMEM;
	return n;
}

int io_to_samples(struct profile *p, enum io_weight w, const struct sample_filter *f)
{
	struct sample_filter none = { 0 };
	struct hmap *cache = hmap__new(256);
	struct sample *v = NULL;
	size_t n = 0, cap = 0, any = 0;

	if (!cache)
		return -ENOMEM;
	if (!f)
		f = &none;
	for (size_t i = 0; i < p->events.n; i++) {
		const struct event e = p->events.v[i];
		int64_t node;

		if (e.kind != EVK_IO)
			continue;
		any++;
		if (!io_match(f, &e) || e.stack >= p->stacks.n)
			continue;
		node = leaf_node(p, cache, &e);
		if (node < 0 || arr_grow(v, cap, n + 1)) {
			hmap__free(cache);
			free(v);
			return node < 0 ? (int)node : -ENOMEM;
		}
		v[n++] = (struct sample){ .ts = e.ts, .pid = e.pid, .tid = e.tid,
					  .stack = (uint32_t)node,
					  .weight = w == IO_WEIGHT_TIME ? e.dur : ev_io_bytes(&e) };
	}
	hmap__free(cache);
	if (!any) {
		free(v);
		return -ENOENT;
	}
	free(p->samples.v);
	p->samples.v = v;
	p->samples.n = n;
	p->samples.cap = cap;
	return 0;
}
