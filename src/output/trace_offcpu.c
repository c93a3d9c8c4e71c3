// SPDX-License-Identifier: MIT
/*
 * Off-CPU data in `eprof trace`: a state track per thread (running, blocked
 * with its reason, runnable) next to its CPU track, flow arrows from the
 * waker to the wakee, and the critical path as a track of its own.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <linux/types.h>

#include "model/event.h"
#include "model/offcpu_event.h"
#include "analysis/critpath.h"
#include "analysis/gpu.h"
#include "util/hmap.h"
#include "trace.h"

/* State tracks are pseudo-threads beside the real one: tids never reach this (pid_max <= 2^22). */
#define STATE_TID(tid) ((tid) | 0x10000000u)
#define CP_PID 0x7ffffff0u

static const struct event *g_ev;

static int cmp_ev(const void *a, const void *b)
{
	const struct event *x = &g_ev[*(const uint32_t *)a], *y = &g_ev[*(const uint32_t *)b];

	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return x->ts < y->ts ? -1 : x->ts > y->ts;
}

static bool in_range(const struct trace_opts *o, uint64_t from, uint64_t to)
{
	return (!o->filter.t0 || to >= o->filter.t0) && (!o->filter.t1 || from <= o->filter.t1);
}

static const char *comm_of(const struct profile *p, uint32_t pid, uint32_t tid, char *buf,
			   size_t len)
{
	const struct thread *t = profile__find_thread(p, pid, tid);
	const struct process *pr = profile__find_proc(p, pid);

	/* A main thread's process name follows exec; its thread name only follows samples. */
	if (pr && pr->comm && tid == pid && *profile__str(p, pr->comm))
		return profile__str(p, pr->comm);
	if (t && t->comm && *profile__str(p, t->comm))
		return profile__str(p, t->comm);
	snprintf(buf, len, "tid %u", tid);
	return buf;
}

/* After a main thread's last wait, it runs until its process exits. */
static void running_tail(struct trace_writer *w, const struct profile *p,
			 const struct trace_opts *o, const struct event *e, uint32_t tid,
			 uint64_t from, struct trace_stats *st)
{
	const struct process *pr = profile__find_proc(p, e->pid);

	if (e->tid != e->pid || !pr || pr->exit_ts <= from || !in_range(o, from, pr->exit_ts))
		return;
	trace_complete(w, e->pid, tid, from, pr->exit_ts - from, "running", "state", NULL);
	st->slices++;
}

static void state_slices(struct trace_writer *w, const struct profile *p,
			 const struct trace_opts *o, const uint32_t *idx, size_t n,
			 struct trace_stats *st)
{
	uint64_t prev_end = 0;
	char name[64], buf[32];
	struct json a;

	for (size_t i = 0; i < n; i++) {
		const struct event *e = &p->events.v[idx[i]];
		uint64_t ready = offcpu_ready_ts(e), end = e->ts + e->dur;
		uint32_t tid = STATE_TID(e->tid);

		if (!i || e->tid != p->events.v[idx[i - 1]].tid) {
			snprintf(name, sizeof(name), "%s (state)",
				 comm_of(p, e->pid, e->tid, buf, sizeof(buf)));
			trace_thread_name(w, e->pid, tid, name);
			trace_thread_sort_index(w, e->pid, tid, (int)(e->tid % 100000) * 2 + 1);
			/* A main thread runs from the start of the record to its first wait. */
			prev_end = e->tid == e->pid ? profile__meta_u64(p, "start_ns", 0) : 0;
		}
		if (prev_end && e->ts > prev_end && in_range(o, prev_end, e->ts)) {
			trace_complete(w, e->pid, tid, prev_end, e->ts - prev_end, "running",
				       "state", NULL);
			st->slices++;
		}
		if (in_range(o, e->ts, end)) {
			snprintf(name, sizeof(name), "blocked: %s",
				 wait_kind_name(offcpu_classify(p, e)));
			trace_args(&a);
			json_kv_u64(&a, "waker_tid", ev_off_waker_tid(e));
			json_kv_bool(&a, "irq_wakeup", e->flags & OFFEV_F_IRQ_WAKE);
			trace_args_text(&a);
			if (ready > e->ts && (e->flags & OFFEV_STATE_MASK) != OFFEV_NEW)
				trace_complete(w, e->pid, tid, e->ts, ready - e->ts, name, "state",
					       json_text(&a));
			if (end > ready)
				trace_complete(w, e->pid, tid, ready, end - ready,
					       (e->flags & OFFEV_STATE_MASK) == OFFEV_NEW
						   ? "new thread"
						   : "runnable",
					       "state", json_text(&a));
			st->slices += 2;
		}
		prev_end = end;
		if (i + 1 == n || p->events.v[idx[i + 1]].tid != e->tid)
			running_tail(w, p, o, e, tid, prev_end, st);
	}
}

/* Waker -> wakee arrows, between state tracks (the waker's running slice encloses the wakeup). */
static void wake_flows(struct trace_writer *w, const struct profile *p, const struct trace_opts *o,
		       struct hmap *has_track)
{
	uint64_t v;

	for (size_t i = 0; i < p->events.n; i++) {
		const struct event *e = &p->events.v[i];

		uint64_t wake;

		if (e->kind != EVK_OFFCPU)
			continue;
		wake = ev_off_wake_ts(e);
		if (!ev_off_waker_tid(e) || !wake || !in_range(o, wake, wake))
			continue;
		if (!hmap__get(has_track, ev_off_waker_tid(e), 0, &v))
			continue;
		trace_flow(w, 's', i + 1, ev_off_waker_pid(e), STATE_TID(ev_off_waker_tid(e)), wake,
			   "wakeup", "wakeup");
		trace_flow(w, 'f', i + 1, e->pid, STATE_TID(e->tid), wake, "wakeup", "wakeup");
	}
}

static int critical_path_track(struct trace_writer *w, const struct profile *p,
			       const struct trace_opts *o, struct trace_stats *st)
{
	struct cp_graph g;
	struct cp_path path;
	uint32_t track;
	uint64_t end;
	char name[96], buf[32];
	int err = critpath_build(p, &g);

	if (err)
		return err;
	if (critpath_default_end(&g, &track, &end) || critpath_walk(&g, track, end, 0, &path)) {
		critpath_free(&g);
		return 0;
	}
	trace_process_name(w, CP_PID, "critical path");
	trace_process_sort_index(w, CP_PID, -1);
	trace_thread_name(w, CP_PID, CP_PID, "critical path");
	for (size_t i = 0; i < path.nsegs; i++) {
		const struct cp_segment *s = &path.segs[i];
		const struct cp_track *t = &g.tracks[s->track];
		struct json a;

		if (!in_range(o, s->start, s->end))
			continue;
		if (t->kind == CP_TRACK_GPU_STREAM) {
			char op[64];
			const char *what =
			    s->gpu_event && s->gpu_event <= p->events.n
				? gpu_activity_name(p, &p->events.v[s->gpu_event - 1], op,
						    sizeof(op))
				: "";

			snprintf(name, sizeof(name), "GPU %u stream %u: %s%s%.40s",
				 (uint32_t)(t->gpu_stream >> 32), (uint32_t)t->gpu_stream,
				 wait_kind_name(s->kind), *what ? " " : "", what);
			trace_args(&a);
			json_kv_u64(&a, "pid", t->pid);
			json_kv_u64(&a, "gpu_stream", (uint32_t)t->gpu_stream);
		} else {
			snprintf(name, sizeof(name), "%s: %s",
				 comm_of(p, t->pid, t->tid, buf, sizeof(buf)),
				 wait_kind_name(s->kind));
			trace_args(&a);
			json_kv_u64(&a, "pid", t->pid);
			json_kv_u64(&a, "tid", t->tid);
		}
		trace_complete(w, CP_PID, CP_PID, s->start, s->end - s->start, name,
			       "critical_path", trace_args_text(&a));
		st->slices++;
	}
	critpath_path_free(&path);
	critpath_free(&g);
	return 0;
}

int trace_source_offcpu(struct trace_writer *w, const struct profile *p, const struct trace_opts *o,
			struct trace_stats *st)
{
	uint32_t *idx;
	struct hmap *has_track;
	size_t n = 0;
	int err;

	bool gpu = false;

	for (size_t i = 0; i < p->events.n; i++) {
		n += p->events.v[i].kind == EVK_OFFCPU;
		gpu |= p->events.v[i].kind == EVK_GPU_KERNEL ||
		       p->events.v[i].kind == EVK_GPU_MEMCPY ||
		       p->events.v[i].kind == EVK_GPU_MEMSET;
	}
	if (!n) /* GPU work alone still has a critical path: through launches and syncs */
		return gpu ? critical_path_track(w, p, o, st) : 0;
	idx = malloc(n * sizeof(*idx));
	has_track = hmap__new(64);
	if (!idx || !has_track) {
		free(idx);
		hmap__free(has_track);
		return -ENOMEM;
	}
	n = 0;
	for (size_t i = 0; i < p->events.n; i++) {
		const struct event *e = &p->events.v[i];

		if (e->kind != EVK_OFFCPU || (o->filter.pid && e->pid != o->filter.pid) ||
		    (o->filter.tid && e->tid != o->filter.tid))
			continue;
		idx[n++] = (uint32_t)i;
		if (hmap__put(has_track, e->tid, 0, 1)) {
			err = -ENOMEM;
			goto out;
		}
	}
	g_ev = p->events.v;
	qsort(idx, n, sizeof(*idx), cmp_ev);
	state_slices(w, p, o, idx, n, st);
	wake_flows(w, p, o, has_track);
	err = critical_path_track(w, p, o, st);
out:
	free(idx);
	hmap__free(has_track);
	return err;
}
