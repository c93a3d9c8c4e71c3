/* SPDX-License-Identifier: MIT */
/*
 * The data kinds besides CPU samples, compared between two runs with the analyses the
 * report uses (regions.h, memory.h, offcpu.h, gpu.h, hot.h, procs.h): regions, memory,
 * off-CPU time, GPU work, threads and processes. Rows are matched by text (region name
 * path, function names of a stack, kernel name, thread name, process name), since ids
 * differ between files. Flows (time, bytes allocated, launches) are multiplied by each
 * run's scale (--per); states (peaks, leaks, idle %, region durations) are not.
 */
#ifndef EPROF_DIFF_KINDS_H
#define EPROF_DIFF_KINDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "diff.h"
#include "offcpu.h"
#include "model/gpu_event.h"

struct diff_job;

/* One matched row: v is the main value (ns or bytes), n a count, in BASE [0] and NEW [1]. */
struct diff_row {
	char *key;	   /* the text rows are matched by */
	const char *label; /* what the table shows: the key, or its leaf side */
	uint8_t kind;	   /* off-CPU stacks: enum wait_kind */
	bool present[2];
	double v[2], n[2];
};

struct diff_table {
	struct diff_row *v; /* by |v[1] - v[0]|, largest first */
	size_t n, cap;
	struct hmap *idx;
};

/* A region node of both runs, matched by its name path ("epoch/train_step"). */
struct diff_region {
	char *path;
	const char *name; /* the last name of the path */
	uint32_t depth;
	bool present[2];
	uint64_t count[2];
	double mean_ns[2], p50_ns[2], p99_ns[2], max_ns[2], total_ns[2];
};

struct diff_kinds {
	struct diff_region *regions; /* BASE's tree order, then NEW's new nodes */
	size_t nregions;

	bool mem[2]; /* allocation events recorded */
	uint64_t mem_peak[2], mem_leaked[2], rss_peak[2];
	double mem_allocated[2], mem_allocs[2], mem_leaks[2]; /* allocated: scaled */
	struct diff_table mem_stacks; /* bytes allocated (v) and calls (n) by stack */

	bool off[2]; /* off-CPU intervals recorded */
	double off_ns[2], off_kind_ns[WAIT_OFFCPU_MAX][2];
	struct diff_table off_stacks; /* blocked ns (v), intervals (n) by stack and kind */

	bool gpu[2];	      /* CUDA or GPU events */
	bool gpu_activity[2]; /* CUPTI records (kernel times, idle) */
	double kernel_ns[2], launches[2];
	double idle_pct[2]; /* 100 - busy / window over the devices */
	double copy_bytes[GPU_COPY_DIR_MAX][2], copy_ns[GPU_COPY_DIR_MAX][2],
	    copy_count[GPU_COPY_DIR_MAX][2];
	struct diff_table kernels; /* GPU ns (v), runs (n) by kernel name */

	struct diff_table threads; /* CPU ns (v), samples (n) by thread name */
	struct diff_table procs;   /* CPU ns (v), samples (n) by process name */

	/* two runs of a multi-rank job: rank by rank (set by the caller; not freed here) */
	const struct diff_job *job;
};

int diff_kinds(struct profile *base, struct profile *new, const struct diff_result *r,
	       struct diff_kinds *out);
void diff_kinds__free(struct diff_kinds *k);

/* The region row of a name: a whole path, else the shallowest node with that last name. */
const struct diff_region *diff_kinds_region(const struct diff_kinds *k, const char *name);
/* The row of a table by its key, or NULL. */
const struct diff_row *diff_table_find(const struct diff_table *t, const char *key);

#endif
