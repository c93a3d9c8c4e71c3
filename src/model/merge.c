// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "event.h"
#include "merge.h"

struct merge {
	struct profile *dst;
	const struct profile *src;
	const struct merge_opts *o;
	struct hmap *ids; /* src pid/tid -> new id */
	uint32_t next, last_src, last_dst;
	uint32_t *objs, *locs, *stacks;
	int err;
};

static uint32_t str(struct merge *m, uint32_t id)
{
	uint32_t r;

	if (!id)
		return 0;
	r = profile__intern(m->dst, profile__str(m->src, id));
	if (!r)
		m->err = -ENOMEM;
	return r;
}

/* A pid or tid of src on dst (0 stays 0: unknown). */
static uint32_t id_of(struct merge *m, uint32_t id)
{
	uint64_t v;

	if (!id)
		return 0;
	if (id == m->last_src) /* samples come in runs of one thread */
		return m->last_dst;
	if (hmap__get(m->ids, id, 0, &v)) {
		m->last_src = id;
		m->last_dst = (uint32_t)v;
		return (uint32_t)v;
	}
	v = m->o->id_base + ++m->next;
	if (hmap__put(m->ids, id, 0, v))
		m->err = -ENOMEM;
	return (uint32_t)v;
}

static uint64_t ts(struct merge *m, uint64_t t)
{
	return t ? t + (uint64_t)m->o->ts_shift : 0; /* modulo 2^64: a wild time stays wild */
}

static void merge_code(struct merge *m)
{
	const struct profile *s = m->src;
	struct profile *d = m->dst;

	for (size_t i = 1; i < s->objects.n && !m->err; i++) {
		const struct object *ob = &s->objects.v[i];
		int64_t id = profile__object(d, ob->kind, profile__str(s, ob->path),
					     profile__str(s, ob->build_id), id_of(m, ob->pid));

		if (id < 0)
			m->err = (int)id;
		else
			m->objs[i] = (uint32_t)id;
	}
	for (size_t i = 1; i < s->locations.n && !m->err; i++) {
		const struct location *l = &s->locations.v[i];
		int64_t id = profile__location(d, m->objs[l->object], l->addr);

		if (id < 0) {
			m->err = (int)id;
			break;
		}
		m->locs[i] = (uint32_t)id;
		if (d->locations.v[id].frame_n || !l->frame_n)
			continue;
		/* its frames: appended, strings re-interned */
		d->locations.v[id].frame_first = (uint32_t)d->frames.n;
		for (uint32_t k = 0; k < l->frame_n && !m->err; k++) {
			const struct frame *f = &s->frames.v[l->frame_first + k];
			struct frame *g = vec_push(d->frames);

			if (!g) {
				m->err = -ENOMEM;
				break;
			}
			*g = *f;
			g->name = str(m, f->name);
			g->module = str(m, f->module);
			g->file = str(m, f->file);
		}
		d->locations.v[id].frame_n = l->frame_n;
	}
	/* a node's parent comes before it: ids grow from the root */
	for (size_t i = 1; i < s->stacks.n && !m->err; i++) {
		const struct stack_node *n = &s->stacks.v[i];
		int64_t id = profile__stack_child(d, n->parent ? m->stacks[n->parent] : 0,
						  m->locs[n->loc]);

		if (id < 0)
			m->err = (int)id;
		else
			m->stacks[i] = (uint32_t)id;
	}
}

static void merge_tasks(struct merge *m)
{
	const struct profile *s = m->src;
	struct profile *d = m->dst;
	char name[512];

	for (size_t i = 0; i < s->procs.n && !m->err; i++) {
		const struct process *pr = &s->procs.v[i];
		struct process *q = profile__proc(d, id_of(m, pr->pid), true);

		if (!q) {
			m->err = -ENOMEM;
			break;
		}
		q->ppid = profile__proc((struct profile *)s, pr->ppid, false) ? id_of(m, pr->ppid) : 0;
		snprintf(name, sizeof(name), "%s%s", m->o->proc_prefix ? m->o->proc_prefix : "",
			 profile__str(s, pr->comm));
		q->comm = profile__intern(d, name);
		q->cmdline = str(m, pr->cmdline);
		q->start_ts = ts(m, pr->start_ts);
		q->exit_ts = ts(m, pr->exit_ts);
		q->exit_code = pr->exit_code;
	}
	for (size_t i = 0; i < s->threads.n && !m->err; i++) {
		const struct thread *t = &s->threads.v[i];
		struct thread *u = profile__thread(d, id_of(m, t->pid), id_of(m, t->tid), true);

		if (!u) {
			m->err = -ENOMEM;
			break;
		}
		u->comm = m->o->thread_name ? profile__intern(d, m->o->thread_name) : str(m, t->comm);
	}
	for (size_t i = 0; i < s->mappings.n && !m->err; i++) {
		struct mapping mp = s->mappings.v[i];

		mp.pid = id_of(m, mp.pid);
		mp.object = m->objs[mp.object];
		mp.ts = ts(m, mp.ts);
		m->err = profile__add_mapping(d, &mp);
	}
}

static void merge_data(struct merge *m)
{
	const struct profile *s = m->src;
	struct profile *d = m->dst;

	for (size_t i = 0; i < s->samples.n && !m->err; i++) {
		struct sample x = s->samples.v[i];

		x.ts = ts(m, x.ts);
		x.pid = id_of(m, x.pid);
		x.tid = id_of(m, x.tid);
		x.stack = m->stacks[x.stack];
		m->err = profile__add_sample(d, &x);
	}
	for (size_t i = 0; i < s->events.n && !m->err; i++) {
		struct event e = s->events.v[i];

		e.ts = ts(m, e.ts);
		e.pid = id_of(m, e.pid);
		/* a GPU kernel's tid slot holds its shared memory, not a thread */
		if (e.kind != EVK_GPU_KERNEL)
			e.tid = id_of(m, e.tid);
		e.stack = m->stacks[e.stack];
		e.stack2 = m->stacks[e.stack2];
		e.name = str(m, e.name);
		if (e.kind == EVK_OFFCPU)
			ev_set_waker(&e, id_of(m, ev_off_waker_pid(&e)), id_of(m, ev_off_waker_tid(&e)),
				     ts(m, ev_off_wake_ts(&e)));
		m->err = profile__add_event(d, &e);
	}
	for (int i = 0; i < STAT_MAX; i++)
		d->stats[i] += s->stats[i];
}

int profile_merge(struct profile *dst, const struct profile *src, const struct merge_opts *o,
		  uint32_t *next_id)
{
	struct merge m = { .dst = dst, .src = src, .o = o };

	m.ids = hmap__new(64);
	m.objs = calloc(src->objects.n + 1, sizeof(*m.objs));
	m.locs = calloc(src->locations.n + 1, sizeof(*m.locs));
	m.stacks = calloc(src->stacks.n + 1, sizeof(*m.stacks));
	if (!m.ids || !m.objs || !m.locs || !m.stacks)
		m.err = -ENOMEM;
	if (!m.err)
		merge_code(&m);
	if (!m.err)
		merge_tasks(&m);
	if (!m.err)
		merge_data(&m);
	*next_id = o->id_base + m.next;
	hmap__free(m.ids);
	free(m.objs);
	free(m.locs);
	free(m.stacks);
	return m.err;
}
