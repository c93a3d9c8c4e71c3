// SPDX-License-Identifier: MIT
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <linux/types.h>

#include "model/event.h"
#include "model/offcpu_event.h"
#include "offcpu.h"
#include "util/vec.h"

const char *wait_kind_name(enum wait_kind k)
{
	static const char *const names[WAIT_KIND_MAX] = {
	    "on-cpu", "runnable",    "io",	 "sleep",      "lock",
	    "other",  "gpu-compute", "gpu-copy", "gpu-launch", "gpu-sync"};

	return (unsigned)k < WAIT_KIND_MAX ? names[k] : "other";
}

static bool lock_frame(const char *name)
{
	return !strncmp(name, "futex_", 6) || !strncmp(name, "__futex", 7) ||
	       strstr(name, "mutex_lock") || strstr(name, "rwsem_down") ||
	       !strncmp(name, "do_futex", 8);
}

/* Whether a kernel frame of the stack is a lock wait (futex, mutex, rwsem). */
static bool stack_is_lock(const struct profile *p, uint32_t node)
{
	int depth = 0;

	for (uint32_t s = node; s && s < p->stacks.n && depth < 64;
	     s = p->stacks.v[s].parent, depth++) {
		uint32_t nf;
		const struct frame *fr = profile__loc_frames(p, p->stacks.v[s].loc, &nf);

		for (uint32_t k = 0; k < nf; k++) {
			if (fr[k].kind != FRAME_KERNEL)
				return false; /* kernel frames are the leaf side */
			if (lock_frame(profile__str(p, fr[k].name)))
				return true;
		}
	}
	return false;
}

enum wait_kind offcpu_classify(const struct profile *p, const struct event *e)
{
	switch (e->flags & OFFEV_STATE_MASK) {
	case OFFEV_RUNNABLE:
	case OFFEV_NEW:
		return WAIT_RUNNABLE;
	case OFFEV_DISK:
		return stack_is_lock(p, e->stack) ? WAIT_LOCK : WAIT_IO;
	case OFFEV_SLEEP:
		/* A futex wait is a lock even without a stack (the time sampling left it out). */
		return (e->flags & OFFEV_F_FUTEX) || stack_is_lock(p, e->stack) ? WAIT_LOCK
										  : WAIT_SLEEP;
	default:
		return WAIT_OTHER;
	}
}

struct offcpu_draw offcpu_sample_draw(const struct profile *p)
{
	return (struct offcpu_draw){(double)profile__meta_u64(p, "offcpu_sample_ns", 0),
				    profile__meta_u64(p, "offcpu_tail_draw", 0) == 1};
}

static double inv_pick(double d, double mean)
{
	double pick = d > 0 ? -expm1(-d / mean) : 1;

	return pick > 0 ? 1 / pick : 1;
}

void offcpu_part_scales(const struct offcpu_draw *d, const struct event *e, double scale[2])
{
	uint64_t ready = offcpu_ready_ts(e), end = e->ts + e->dur;
	unsigned state = e->flags & OFFEV_STATE_MASK;

	scale[0] = scale[1] = 1;
	if (d->mean <= 0 || state == OFFEV_NEW)
		return;
	scale[0] = scale[1] = 0;
	if (e->flags & OFFEV_F_UNSAMPLED)
		return;
	/* The draw BPF made: at the wakeup on the time blocked when one was seen, else at the
	 * switch back in on the whole interval (a preemption, a wakeup not seen). */
	if (state != OFFEV_RUNNABLE && ev_off_wake_ts(e) >= e->ts && ev_off_wake_ts(e) <= end) {
		scale[0] = e->flags & OFFEV_F_TAIL ? 0 : inv_pick((double)(ready - e->ts), d->mean);
		scale[1] = d->tail ? inv_pick((double)e->dur, d->mean) : scale[0];
		return;
	}
	scale[0] = scale[1] = inv_pick((double)e->dur, d->mean);
}

double offcpu_weighted_ns(const struct offcpu_draw *d, const struct event *e)
{
	uint64_t ready = offcpu_ready_ts(e);
	double sc[2];

	offcpu_part_scales(d, e, sc);
	return (double)(ready - e->ts) * sc[0] + (double)(e->ts + e->dur - ready) * sc[1];
}

uint64_t offcpu_ready_ts(const struct event *e)
{
	uint64_t end = e->ts + e->dur;

	if ((e->flags & OFFEV_STATE_MASK) == OFFEV_RUNNABLE)
		return e->ts;
	if (!ev_off_wake_ts(e) || ev_off_wake_ts(e) > end)
		return end;
	return ev_off_wake_ts(e) < e->ts ? e->ts : ev_off_wake_ts(e);
}

size_t offcpu_count(const struct profile *p)
{
	size_t n = 0;

	for (size_t i = 0; i < p->events.n; i++)
		n += p->events.v[i].kind == EVK_OFFCPU;
	return n;
}

static bool event_match(const struct sample_filter *f, const struct event *e)
{
	if (f->pid && e->pid != f->pid)
		return false;
	if (f->tid && e->tid != f->tid)
		return false;
	if (f->t0 && e->ts + e->dur < f->t0)
		return false;
	if (f->t1 && e->ts > f->t1)
		return false;
	return true;
}

/* OFFCPU_W_WAKERS: v has room for every interval; takes it over. */
static int waker_samples(struct profile *p, const struct sample_filter *f, struct sample *v,
			 struct sample **out, size_t *n)
{
	struct offcpu_draw draw = offcpu_sample_draw(p);
	char name[64];
	size_t k = 0;

	for (size_t i = 0; i < p->events.n; i++) {
		const struct event e = p->events.v[i];
		const struct thread *t;
		double scale[2];
		uint64_t ns;
		int64_t leaf, node;

		/* the kind first: the other kinds' fields are not an interval's */
		if (e.kind != EVK_OFFCPU || !e.stack2 || e.stack2 >= p->stacks.n ||
		    !event_match(f, &e))
			continue;
		offcpu_part_scales(&draw, &e, scale);
		if (scale[0] == 0) /* the waker stands for the blocked part: picked with it */
			continue;
		ns = (uint64_t)llround((offcpu_ready_ts(&e) - e.ts) * scale[0]);
		if (!ns)
			continue;
		t = profile__thread(p, e.pid, e.tid, false);
		snprintf(name, sizeof(name), "[wakes %s]",
			 t && t->comm && *profile__str(p, t->comm) ? profile__str(p, t->comm)
								   : "?");
		leaf = profile__special(p, name);
		node = leaf < 0 ? leaf : profile__stack_child(p, e.stack2, (uint32_t)leaf);
		if (node < 0) {
			free(v);
			return (int)node;
		}
		v[k++] = (struct sample){.ts = ev_off_wake_ts(&e),
					 .pid = ev_off_waker_pid(&e),
					 .tid = ev_off_waker_tid(&e),
					 .stack = (uint32_t)node,
					 .weight = ns};
	}
	*out = v;
	*n = k;
	return 0;
}

int offcpu_samples(struct profile *p, enum offcpu_weights w, const struct sample_filter *f,
		   struct sample **out, size_t *n)
{
	int64_t leaf[WAIT_OFFCPU_MAX];
	size_t cap = 2 * offcpu_count(p) + (w == OFFCPU_W_WALL ? p->samples.n : 0), k = 0;
	struct sample *v = malloc((cap ? cap : 1) * sizeof(*v));
	char name[32];

	if (!v)
		return -ENOMEM;
	int64_t nostack = profile__special(p, "[stack not captured]");

	if (nostack < 0) {
		free(v);
		return (int)nostack;
	}
	nostack = profile__stack_child(p, 0, (uint32_t)nostack);
	if (nostack < 0) {
		free(v);
		return (int)nostack;
	}
	for (int i = 0; i < WAIT_OFFCPU_MAX; i++) {
		snprintf(name, sizeof(name), "[%s]", wait_kind_name(i));
		leaf[i] = profile__special(p, name);
		if (leaf[i] < 0) {
			free(v);
			return (int)leaf[i];
		}
	}
	if (w == OFFCPU_W_WAKERS)
		return waker_samples(p, f, v, out, n);
	if (w == OFFCPU_W_WALL)
		for (size_t i = 0; i < p->samples.n; i++)
			if (sample_filter__match(f, &p->samples.v[i]))
				v[k++] = p->samples.v[i];
	struct offcpu_draw draw = offcpu_sample_draw(p);

	for (size_t i = 0; i < p->events.n; i++) {
		const struct event e = p->events.v[i];
		double scale[2];
		int64_t node;

		if (e.kind != EVK_OFFCPU || !event_match(f, &e))
			continue;
		offcpu_part_scales(&draw, &e, scale);
		if (scale[0] == 0 && scale[1] == 0)
			continue;
		uint64_t ready = offcpu_ready_ts(&e), end = e.ts + e.dur;
		/* Blocked until the wakeup, then waiting for a CPU: two weights, two leaves. */
		const uint64_t part[2] = {(uint64_t)llround((ready - e.ts) * scale[0]),
					  (uint64_t)llround((end - ready) * scale[1])};
		const int kind[2] = {offcpu_classify(p, &e), WAIT_RUNNABLE};

		for (int j = 0; j < 2; j++) {
			if (!part[j])
				continue;
			/* Over the stack budget: its time still shows, under a frame that says so.
			 */
			node = profile__stack_child(
			    p,
			    e.stack && e.stack < p->stacks.n
				? e.stack
				: (e.flags & OFFEV_F_NO_STACK ? (uint32_t)nostack : 0),
			    (uint32_t)leaf[kind[j]]);
			if (node < 0) {
				free(v);
				return (int)node;
			}
			v[k++] = (struct sample){.ts = end,
						 .pid = e.pid,
						 .tid = e.tid,
						 .stack = (uint32_t)node,
						 .weight = part[j]};
		}
	}
	*out = v;
	*n = k;
	return 0;
}

static int cmp_stack_stat(const void *a, const void *b)
{
	const struct offcpu_stack_stat *x = a, *y = b;

	if (x->ns != y->ns)
		return x->ns < y->ns ? 1 : -1;
	return x->stack < y->stack ? -1 : x->stack > y->stack;
}

int offcpu_summarize(const struct profile *p, const struct sample_filter *f,
		     struct offcpu_summary *s)
{
	struct hmap *idx = hmap__new(256);
	struct offcpu_draw draw = offcpu_sample_draw(p);
	size_t cap = 0;

	memset(s, 0, sizeof(*s));
	if (!idx)
		return -ENOMEM;
	for (size_t i = 0; i < p->events.n; i++) {
		const struct event *e = &p->events.v[i];
		enum wait_kind k;
		double w;
		uint64_t j;

		if (e->kind != EVK_OFFCPU || !event_match(f, e))
			continue;
		k = offcpu_classify(p, e);
		s->intervals++;
		s->total_ns += e->dur;
		/* The wait after the wakeup is CPU contention, whatever the thread waited for. */
		s->by_kind[k] += offcpu_ready_ts(e) - e->ts;
		s->by_kind[WAIT_RUNNABLE] += e->ts + e->dur - offcpu_ready_ts(e);
		s->wakers_known += ev_off_waker_tid(e) != 0;
		/* The stacks table: blocked time by stack, sampled intervals scaled (see above). */
		w = offcpu_weighted_ns(&draw, e);
		if (w <= 0) /* not picked: its time is in the picked ones */
			continue;
		if (!hmap__get(idx, e->stack, k, &j)) {
			if (arr_grow(s->stacks, cap, s->nstacks + 1))
				goto nomem;
			j = s->nstacks++;

			s->stacks[j] = (struct offcpu_stack_stat){.stack = e->stack, .kind = k};
			if (hmap__put(idx, e->stack, k, j))
				goto nomem;
		}
		s->stacks[j].count++;
		s->stacks[j].ns += (uint64_t)llround(w);
	}
	if (s->nstacks)
		qsort(s->stacks, s->nstacks, sizeof(*s->stacks), cmp_stack_stat);
	hmap__free(idx);
	return 0;
nomem:
	hmap__free(idx);
	offcpu_summary__free(s);
	return -ENOMEM;
}

void offcpu_summary__free(struct offcpu_summary *s)
{
	free(s->stacks);
	memset(s, 0, sizeof(*s));
}
