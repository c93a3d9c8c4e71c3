/* SPDX-License-Identifier: MIT */
/*
 * Resource metrics of a record (docs/metrics.md): the EVK_COUNTER series named in
 * model/metrics.h, per process and per device, reduced to what the report, --json, the trace
 * and the HTML export show. A running total's figure is its last reading minus its first
 * (a process started during the record opens its series at 0); a level keeps its first,
 * last, peak and mean.
 */
#ifndef EPROF_ANALYSIS_METRICS_H
#define EPROF_ANALYSIS_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/metrics.h"
#include "model/profile.h"

/* One series reduced: readings seen, first/last values and times, peak, time-weighted mean. */
struct metric_stat {
	uint64_t n;
	uint64_t first, last, max;
	uint64_t t_first, t_last;
	double area; /* value x ns, step function (levels): mean = area / (t_last - t_first) */
};

struct metrics_proc_stat {
	uint32_t pid;
	uint32_t comm; /* string id, 0 unknown */
	struct metric_stat m[MET_PROC_COUNT];
	uint64_t rss_peak_sum; /* largest anon+file+shmem reading */
	uint64_t rss_now;      /* anon+file+shmem now, while replaying */
	uint64_t rss_final;    /* the last reading while it ran (gone: the recorder writes 0) */
};

/* A thread's own running totals (thread_* counters), indexed by metric - MET_T_FIRST. */
struct metrics_thread_stat {
	uint32_t pid, tid;
	uint32_t comm; /* string id (the thread's name), 0 unknown */
	struct metric_stat m[MET_T_COUNT];
	uint64_t cpu_ns; /* user + system over the record */
};

static inline uint64_t metrics_thread_delta(const struct metrics_thread_stat *t, int m)
{
	const struct metric_stat *s = &t->m[m - MET_T_FIRST];

	return s->n ? s->last - (s->first <= s->last ? s->first : s->last) : 0;
}

struct metrics_zone {
	uint32_t index;
	const char *name; /* "package-0 intel-rapl:0" */
	struct metric_stat energy;
	double joules;
};

struct metrics_gpu {
	uint32_t index;
	const char *name;
	struct metric_stat m[MET_COUNT]; /* MET_GPU_* used */
	uint64_t throttle_any;		 /* OR of every throttle reading */
	double joules;			 /* energy counter delta, else the mean power x time */
};

struct metrics_result {
	bool present; /* the record has resource metrics */
	uint64_t interval_ms;
	const char *scope; /* "process" or "system" */
	double wall_s;
	struct metrics_proc_stat *procs; /* by pid */
	size_t nprocs;
	/* over the processes: running totals summed, levels: the largest (peak) and sum (final) */
	uint64_t total[MET_PROC_COUNT];
	uint64_t rss_peak;     /* the largest VmHWM of a process */
	uint64_t rss_peak_all; /* the largest RSS of all the processes together (readings) */
	uint64_t rss_final;    /* sum over the processes of their last RSS while they ran */
	/* per thread (files that have them), busiest (CPU) first */
	struct metrics_thread_stat *threads;
	size_t nthreads;
	struct metrics_zone *zones;
	size_t nzones;
	const char *energy_source; /* "rapl-powercap", "none", NULL (not recorded) */
	double cpu_joules;	   /* sum over zones, 0 when none */
	struct metrics_gpu *gpus;
	size_t ngpus;
	double gpu_joules;
};

/* pid 0: every process. Returns 0 or -ENOMEM; r->present false when the record has none. */
int metrics_analyze(const struct profile *p, uint32_t pid, struct metrics_result *r);
void metrics_result__free(struct metrics_result *r);

/* The delta of a running total, or the last value of a level. */
static inline uint64_t metric_delta(const struct metric_stat *s)
{
	return s->n ? s->last - (s->first <= s->last ? s->first : s->last) : 0;
}

/* Joules of the energy counters within [t0, t1] (interpolated); -1 when there are none. */
double metrics_energy_between(const struct profile *p, uint64_t t0, uint64_t t1);

/*
 * The machine's energy (RAPL zones and GPUs) while each region ran, per region name, summed
 * over its calls: calls that overlap (on several threads) each count the whole machine's.
 * None (n 0) without energy counters. Returns 0 or -ENOMEM.
 */
struct metrics_region_energy {
	uint32_t name; /* string id */
	uint64_t calls, ns;
	double joules;
};
int metrics_energy_by_region(const struct profile *p, struct metrics_region_energy **out,
			     size_t *n);

/* A counter's readings in time order: for the trace and the charts. */
struct metric_point {
	uint64_t ts, v;
};
/* The points of metric m of pid (device/zone index for machine-wide ones). */
int metrics_series(const struct profile *p, int m, uint32_t pid, uint32_t index,
		   struct metric_point **out, size_t *n);

/*
 * Metric m on a time grid: out[k] for the bin (t0 + k*dt, t0 + (k+1)*dt]. A level: its value
 * at the bin's end, summed over the processes (pid 0: all; machine-wide metrics: the zone or
 * device index; a thread's (thread_*): pid and its tid in index). A running total: what it grew by within the bin, summed (a process's first
 * reading counts from itself, so a process attached mid-way adds no spike). Returns 0 or
 * -ENOMEM.
 */
int metrics_grid(const struct profile *p, int m, uint32_t pid, uint32_t index, uint64_t t0,
		 uint64_t dt, size_t nbins, double *out);

/*
 * A running total grew between two of its points: readings come every interval, give or take
 * the poll's jitter, and the growth is spread over the time in between. The recorder writes a
 * value only when it changed; since meta metrics_steps "closed" it also writes the old value
 * at the last reading that found it unchanged, so the growth is always after it: this returns
 * 0 then. For older files it returns the interval: a gap over 1.5 intervals means readings
 * that found no change, and the growth is put in the last interval before the point.
 */
uint64_t metrics_gap_limit(const struct profile *p);

/* gCO2 per kWh used when --carbon-intensity is not given (docs/metrics.md says where from). */
#define METRICS_DEFAULT_CARBON_G_PER_KWH 445.0

#endif
