/* SPDX-License-Identifier: MIT */
/*
 * Off-CPU analysis: what kind of wait each EVK_OFFCPU interval is, weighted
 * pseudo-samples for off-CPU and wall-clock flamegraphs, and the summary the
 * report shows.
 */
#ifndef EPROF_OFFCPU_H
#define EPROF_OFFCPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hot.h"

enum wait_kind {
	WAIT_ONCPU = 0,	   /* not a wait: running (critical path segments) */
	WAIT_RUNNABLE = 1, /* ready, waiting for a CPU (CPU contention) */
	WAIT_IO = 2,	   /* uninterruptible: disk I/O */
	WAIT_SLEEP = 3,	   /* interruptible sleep: timers, pipes, sockets, poll */
	WAIT_LOCK = 4,	   /* futex, mutex, rwsem */
	WAIT_OTHER = 5,
	/* Critical path only (GPU edges, src/analysis/critpath_gpu.c): */
	WAIT_GPU_COMPUTE = 6, /* a GPU kernel ran */
	WAIT_GPU_COPY = 7,    /* a GPU copy or set ran */
	WAIT_GPU_LAUNCH = 8,  /* from a launch call to its work starting on an idle stream */
	WAIT_GPU_SYNC = 9, /* a thread in a synchronization call that GPU work does not explain */
	WAIT_KIND_MAX
};
/* The kinds an off-CPU interval can have. */
#define WAIT_OFFCPU_MAX WAIT_GPU_COMPUTE

/* "on-cpu", "runnable", "io", "sleep", "lock", "other", "gpu-compute", "gpu-copy",
 * "gpu-launch", "gpu-sync". */
const char *wait_kind_name(enum wait_kind k);

/* Kind of an EVK_OFFCPU event: from its state, and its kernel stack for locks. */
enum wait_kind offcpu_classify(const struct profile *p, const struct event *e);

/* Time made runnable within [ts, ts+dur]: the wakeup, clamped; the start when preempted. */
uint64_t offcpu_ready_ts(const struct event *e);
/*
 * Blocked-time sampling (record --offcpu-sample-us): the mean in ns (0 when the file has
 * every interval's stacks), and whether the recorder drew again for the wait for a CPU after
 * an unpicked wakeup (files since the draw came: meta offcpu_tail_draw).
 */
struct offcpu_draw {
	double mean;
	bool tail;
};
struct offcpu_draw offcpu_sample_draw(const struct profile *p);
/*
 * What an interval's two parts - blocked until the wakeup, then runnable - count for in
 * stack weights: 1 / P(the part was picked), 0 when not (its time is in the picked ones), 1
 * without sampling. A wakeup draw picks the blocked part with P = 1 - e^(-blocked/mean); with
 * the tail draw the runnable part is picked at the wakeup or by its own draw, P = 1 -
 * e^(-(blocked + runnable)/mean). Totals by kind use every interval as it is.
 */
void offcpu_part_scales(const struct offcpu_draw *d, const struct event *e, double scale[2]);
/* The interval's whole time as stack weights count it: both parts, each by its scale. */
double offcpu_weighted_ns(const struct offcpu_draw *d, const struct event *e);

enum offcpu_weights {
	OFFCPU_W_OFF = 1,  /* blocked intervals, weight = blocked ns */
	OFFCPU_W_WALL = 2, /* CPU samples (weight = CPU ns) and blocked intervals */
	/*
	 * The waker's stack of each interval with one, under the waker's thread, plus a
	 * leaf "[wakes COMM]" naming the woken thread; weight = ns blocked until the wakeup.
	 * The filter selects the woken threads.
	 */
	OFFCPU_W_WAKERS = 3,
};

/*
 * Weighted pseudo-samples, for the flamegraph and folded writers: each
 * blocked interval is its stack plus a leaf frame naming its kind
 * ("[sleep]", "[io]" ...), weighted by its length in ns. Adds the leaf frames
 * and stack nodes to p. *out is malloc'ed.
 */
int offcpu_samples(struct profile *p, enum offcpu_weights w, const struct sample_filter *f,
		   struct sample **out, size_t *n);

/* Number of EVK_OFFCPU events. */
size_t offcpu_count(const struct profile *p);

struct offcpu_stack_stat {
	uint32_t stack;
	uint8_t kind;
	uint64_t count, ns;
};

struct offcpu_summary {
	uint64_t intervals, total_ns;
	uint64_t by_kind[WAIT_KIND_MAX];
	uint64_t wakers_known;		  /* intervals whose waker thread is known */
	struct offcpu_stack_stat *stacks; /* by ns, descending */
	size_t nstacks;
};

int offcpu_summarize(const struct profile *p, const struct sample_filter *f,
		     struct offcpu_summary *s);
void offcpu_summary__free(struct offcpu_summary *s);

#endif
