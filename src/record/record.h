/* SPDX-License-Identifier: MIT */
#ifndef EPROF_RECORD_H
#define EPROF_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "events.h"

#define RECORD_MAX_PIDS 1024
#define RECORD_MAX_REGIONS 64 /* --region and --usdt options, each */

struct record_opts {
	uint32_t pids[RECORD_MAX_PIDS];
	size_t npids;
	bool all;
	char **argv; /* command to launch (points into the caller's argv) */
	const char *user; /* --user: the command runs as this user (its uid, gid, groups) */
	bool run_as;	  /* user resolved: run_uid, run_gid */
	uint32_t run_uid, run_gid;
	unsigned freq;
	double duration; /* seconds, 0 = until stopped */
	const char *output;
	enum callgraph_mode callgraph;
	uint32_t snapshot_bytes; /* user stack copied per sample for DWARF unwinding */
	uint32_t ringbuf_mb;
	bool no_kernel;
	bool quiet;
	bool no_cache; /* --no-cache: no build-id cache (util/bidcache.h, docs/cache.md) */
	int verbose;
	int cuda;		  /* CUDA API uprobes and CUPTI: -1 auto (default), 0 off, 1 on */
	uint32_t cuda_stack_rate; /* launch stacks per second per thread */
	bool no_python; /* no Python frames (src/record/python.c) */
	bool no_children; /* only the listed PIDs / the command: no descendants, no forks followed */
	bool no_inject;	  /* -p/-a: no CUPTI collector injected (CUDA API uprobes only) */
	uint64_t mem_sample; /* --mem: mean bytes between sampled allocations (1 = all), 0 = off */
	bool live; /* eprof top: no output file, fast symbolization (no lines, no debuginfod) */
	bool offcpu;		 /* --offcpu: blocked intervals, wakeups */
	uint32_t offcpu_min_us; /* --offcpu-min-us: shorter blocked intervals are not recorded */
	uint32_t offcpu_stack_rate; /* --offcpu-stack-rate: intervals/s/CPU with stacks, 0 = all */
	uint32_t offcpu_sample_us;  /* --offcpu-sample-us: mean of the blocked-time sampling, 0 = all */
	/* regions (src/record/region.c): BIN:SYMBOL / BIN:0xADDR and BIN:PROVIDER:NAME */
	const char *regions[RECORD_MAX_REGIONS];
	size_t nregions;
	const char *usdts[RECORD_MAX_REGIONS];
	size_t nusdts;
	bool no_auto_regions; /* no EPROF_REGION_* / NVTX probes unless asked for */
	/* resource metrics (src/record/metrics.c, docs/metrics.md) */
	bool no_metrics;
	uint32_t metrics_interval_ms; /* 0: the default, 100 */
	/* I/O by stack (src/record/io.c, docs/io.md) */
	bool io;
	uint32_t io_stack_rate; /* --io-stack-rate: calls/s/CPU with stacks, 0 = all */
};

/* Runs a whole record; returns the process exit status for main(). */
int record_run(const struct record_opts *opts);

/*
 * A live session (eprof top): setup and attach as record does, without an output file; the
 * caller polls, symbolizes new locations and consumes p->samples itself.
 */
struct session;
struct live_stats {
	uint64_t samples, lost; /* since the start */
	uint64_t start_ns, now_ns; /* CLOCK_MONOTONIC */
	int ncpus;
	const char *stop_reason; /* set once live_poll() returned 1 */
};

/* o must outlive the session. Errors are printed; returns 0 or -errno. */
int live_open(const struct record_opts *o, struct session **out);
/* Reads samples for up to 50 ms. Returns 0, 1 when the session should stop, or -errno. */
int live_poll(struct session *s);
struct profile *live_profile(struct session *s);
/* Symbolizes the locations added since the last call (the symbolizer caches per object). */
int live_symbolize(struct session *s);
void live_stats(struct session *s, struct live_stats *st);
void live_close(struct session *s);

#endif
