// SPDX-License-Identifier: MIT
/*
 * record --offcpu: blocked intervals of the target threads with their
 * blocking stack, the wakeup time, the waker and the waker's stack
 * (bpf/offcpu.bpf.h). Each interval becomes one EVK_OFFCPU event; the
 * waker's stack comes in its own ring event before the interval ends and
 * is joined here by (wakee tid, time it went off CPU).
 */
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <linux/types.h>

#include "model/event.h"
#include "eprof_abi.h"
#include "model/offcpu_event.h"
#include "util/expq.h"
#include "util/hmap.h"
#include "util/log.h"
#include "util/vec.h"
#include "events.h"
#include "feature.h"
#include "profile.skel.h"
#include "record.h"

_Static_assert(sizeof(struct ev_offcpu) == 24 + 16 + 8 + 8 + 40, "ev_offcpu layout");
_Static_assert(sizeof(struct ev_offcpu_wake) == 24 + 16 + 40, "ev_offcpu_wake layout");

/* The off-CPU stack copy: blocking stacks sit in a syscall, rarely deep; the copy is per event. */
#define OFFCPU_MAX_STACK_BYTES 8192

struct waker_slot {
	uint64_t off_ts; /* the wakee's interval it belongs to */
	uint32_t node;	 /* waker stack */
};

struct offcpu_rec {
	struct hmap *by_tid; /* wakee tid -> index in slots */
	struct waker_slot *slots;
	size_t nslots, cap;
	uint64_t events, waker_stacks;
};

static bool offcpu_enabled(const struct record_opts *o)
{
	return o->offcpu;
}

/* The BPF side's state and flags as the file stores them (model/offcpu_event.h). */
static uint16_t offcpu_ev_flags(uint32_t state, uint32_t wflags)
{
	static const uint8_t st[] = {
	    [OFFCPU_SLEEP] = OFFEV_SLEEP,
	    [OFFCPU_DISK] = OFFEV_DISK,
	    [OFFCPU_RUNNABLE] = OFFEV_RUNNABLE,
	    [OFFCPU_NEW] = OFFEV_NEW,
	};
	unsigned s = state & OFFCPU_STATE_MASK;

	return (s < sizeof(st) ? st[s] : 0) | (wflags & OFFCPU_F_IRQ_WAKE ? OFFEV_F_IRQ_WAKE : 0) |
	       (wflags & OFFCPU_F_NO_STACK ? OFFEV_F_NO_STACK : 0) |
	       (wflags & OFFCPU_F_UNSAMPLED ? OFFEV_F_UNSAMPLED : 0) |
	       (wflags & OFFCPU_F_FUTEX ? OFFEV_F_FUTEX : 0) |
	       (wflags & OFFCPU_F_TAIL ? OFFEV_F_TAIL : 0);
}

static int note_waker(struct offcpu_rec *st, uint32_t tid, uint64_t off_ts, uint32_t node)
{
	uint64_t idx;

	if (!hmap__get(st->by_tid, tid, 0, &idx)) {
		if (arr_grow(st->slots, st->cap, st->nslots + 1))
			return -ENOMEM;
		idx
 = st->nslots++;
		if (hmap__put(st->by_tid, tid, 0, idx))
			return -ENOMEM;
	}
	st->slots[idx] = (struct waker_slot){off_ts, node};
	return 0;
}

static uint32_t take_waker(struct offcpu_rec *st, uint32_t tid, uint64_t off_ts)
{
	uint64_t idx;

	if (!hmap__get(st->by_tid, tid, 0, &idx) || st->slots[idx].off_ts != off_ts)
		return 0;
	st->slots[idx].off_ts = 0;
	return st->slots[idx].node;
}

static int handle_wake(struct event_ctx *c, struct offcpu_rec *st, const void *data, size_t size)
{
	const struct ev_offcpu_wake *e = data;
	int64_t node;

	if (size < sizeof(*e))
		return -EINVAL;
	node = events_stack(c, &e->h, &e->st, size - sizeof(*e), 0);
	if (node < 0)
		return (int)node;
	events_note_thread(c, e->h.pid, e->h.tid, NULL, e->h.ts);
	return note_waker(st, e->wakee_tid, e->wakee_off_ts, (uint32_t)node);
}

static int handle_offcpu(struct event_ctx *c, struct offcpu_rec *st, const void *data, size_t size)
{
	const struct ev_offcpu *e = data;
	struct event ev = {0};
	int64_t node;

	if (size < sizeof(*e) || e->h.ts < e->off_ts)
		return -EINVAL;
	if (events_before_launch_go(c, e->h.pid, e->off_ts))
		return 0; /* the launched command waiting for eprof's go */
	node = events_stack(c, &e->h, &e->st, size - sizeof(*e), 0);
	if (node < 0)
		return (int)node;
	ev.kind = EVK_OFFCPU;
	ev.ts = e->off_ts;
	ev.dur = e->h.ts - e->off_ts;
	ev.pid = e->h.pid;
	ev.tid = e->h.tid;
	ev.flags = offcpu_ev_flags(e->state, e->wflags);
	ev_set_waker(&ev, e->waker_pid, e->waker_tid, e->wake_ts);
	ev.stack = (uint32_t)node;
	ev.stack2 = e->waker_tid ? take_waker(st, e->h.tid, e->off_ts) : 0;
	st->waker_stacks += ev.stack2 != 0;
	events_note_thread(c, e->h.pid, e->h.tid, NULL, e->h.ts);
	st->events++;
	return profile__add_event(c->p, &ev);
}

static int offcpu_decode(struct event_ctx *c, void *arg, const void *data, size_t size)
{
	const struct ev_hdr *h = data;

	if (h->kind == EV_OFFCPU)
		return handle_offcpu(c, arg, data, size);
	if (h->kind == EV_OFFCPU_WAKE)
		return handle_wake(c, arg, data, size);
	return -EINVAL;
}

static int offcpu_configure(struct feature_ctx *f, void **state)
{
	struct profile_bpf *skel = f->skel;
	struct bpf_program *progs[] = {
	    skel->progs.offcpu_irq_entry,     skel->progs.offcpu_irq_exit,
	    skel->progs.offcpu_softirq_entry, skel->progs.offcpu_softirq_exit,
	    skel->progs.offcpu_hrtimer_entry, skel->progs.offcpu_hrtimer_exit,
	    skel->progs.offcpu_switch,	      skel->progs.offcpu_wakeup_new,
	    skel->progs.offcpu_waking,	      skel->progs.offcpu_rseq,
	};
	struct offcpu_rec *st = calloc(1, sizeof(*st));
	uint32_t bytes = f->o->callgraph == CG_FP ? 0 : f->o->snapshot_bytes;
	int err;

	if (!st)
		return -ENOMEM;
	*state = st;
	st->by_tid = hmap__new(256);
	if (!st->by_tid)
		return -ENOMEM;
	for (size_t i = 0; i < sizeof(progs) / sizeof(progs[0]); i++)
		bpf_program__set_autoload(progs[i], true);
	skel->rodata->offcpu_min_ns = (uint64_t)f->o->offcpu_min_us * 1000;
	skel->rodata->offcpu_stack_rate = f->o->offcpu_stack_rate;
	skel->rodata->offcpu_sample_ns = (uint64_t)f->o->offcpu_sample_us * 1000;
	if (f->o->offcpu_sample_us) {
		char buf[32];

		exp_quantiles((uint64_t *)skel->rodata->offcpu_exp_table,
			      sizeof(skel->rodata->offcpu_exp_table) /
				  sizeof(skel->rodata->offcpu_exp_table[0]),
			      f->o->offcpu_sample_us * 1000.0);
		snprintf(buf, sizeof(buf), "%llu",
			 (unsigned long long)f->o->offcpu_sample_us * 1000);
		profile__set_meta(f->p, "offcpu_sample_ns", buf);
		/* the runnable part has its own draw (OFFCPU_F_TAIL): the reader weighs it so */
		profile__set_meta(f->p, "offcpu_tail_draw", "1");
	}
	skel->rodata->offcpu_stack_bytes =
	    bytes > OFFCPU_MAX_STACK_BYTES ? OFFCPU_MAX_STACK_BYTES : bytes;
	err = events_add_handler(f->ev, EV_OFFCPU_FIRST, EV_OFFCPU_LAST, offcpu_decode, st);
	return err;
}

static int offcpu_finish(struct feature_ctx *f, void *state)
{
	struct offcpu_rec *st = state;
	struct profile *p = f->p;

	f->consume(f);
	p->stats[STAT_OFFCPU_SEEN] = f->bpf_stat(f, BSTAT_OFFCPU_SEEN);
	p->stats[STAT_OFFCPU_SHORT] = f->bpf_stat(f, BSTAT_OFFCPU_SHORT);
	p->stats[STAT_OFFCPU_NO_STACK] = f->bpf_stat(f, BSTAT_OFFCPU_NO_STACK);
	p->stats[STAT_OFFCPU_UNSAMPLED] = f->bpf_stat(f, BSTAT_OFFCPU_UNSAMPLED);
	p->stats[STAT_OFFCPU_LOST] =
	    f->bpf_stat(f, BSTAT_OFFCPU_RB_FULL) + f->bpf_stat(f, BSTAT_OFFCPU_NO_STORAGE);
	log_info("off-CPU: %llu intervals recorded (%llu without stacks by the time sampling, %llu "
		 "over the rate, %llu with a waker stack), %llu shorter than %u us skipped, %llu lost",
		 (unsigned long long)st->events, (unsigned long long)p->stats[STAT_OFFCPU_UNSAMPLED],
		 (unsigned long long)p->stats[STAT_OFFCPU_NO_STACK],
		 (unsigned long long)st->waker_stacks,
		 (unsigned long long)p->stats[STAT_OFFCPU_SHORT], f->o->offcpu_min_us,
		 (unsigned long long)p->stats[STAT_OFFCPU_LOST]);
	return 0;
}

static void offcpu_destroy(struct feature_ctx *f, void *state)
{
	struct offcpu_rec *st = state;

	if (!st)
		return;
	hmap__free(st->by_tid);
	free(st->slots);
	free(st);
}

const struct feature feature_offcpu = {
    .name = "offcpu",
    .enabled = offcpu_enabled,
    .configure = offcpu_configure,
    .finish = offcpu_finish,
    .destroy = offcpu_destroy,
};
