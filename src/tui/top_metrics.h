/* SPDX-License-Identifier: MIT */
/*
 * eprof top's resource line (docs/metrics.md): the watched processes' CPU user/system, RSS,
 * I/O and network rates over the last interval, from the record's metric counters.
 */
#ifndef EPROF_TOP_METRICS_H
#define EPROF_TOP_METRICS_H

#include <stdbool.h>
#include <stdint.h>

#include "model/metrics.h"
#include "model/profile.h"
#include "util/sink.h"
#include "util/vec.h"

struct top_metrics_proc {
	uint32_t pid;
	uint64_t v[MET_PROC_COUNT]; /* the latest reading of each */
};

struct top_metrics {
	VEC(struct top_metrics_proc) procs;
	uint32_t names[MET_PROC_COUNT]; /* string ids once seen, 0 unknown yet */
	uint64_t prev[MET_PROC_COUNT];	/* the sums over processes at the last update */
	double rate[MET_PROC_COUNT];	/* per second over the last interval (running totals) */
	uint64_t rss;			/* anon + file + shmem, summed */
	bool seen, have_prev;
};

/* Folds the counter events of p (the last interval, dt seconds) in; leaves p->events. */
int top_metrics__update(struct top_metrics *t, const struct profile *p, double dt);
void top_metrics__free(struct top_metrics *t);
/* One header line; nothing when the record has no metrics. */
void top_metrics__render(struct sink *out, const struct top_metrics *t);

#endif
