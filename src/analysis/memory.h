/* SPDX-License-Identifier: MIT */
/*
 * Memory analysis of the ALLOC/FREE events of a profile: live heap over
 * time, its peak and the stacks holding it then, bytes and calls per
 * allocating stack, temporary allocations and leaks. Sampled allocations
 * carry the bytes they stand for (event.c), so every total here is an
 * estimate of the whole heap, exact with --mem=1.
 */
#ifndef EPROF_MEMORY_H
#define EPROF_MEMORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/profile.h"

struct mem_opts {
	uint64_t temp_ns; /* freed within this long of allocation: temporary (default 1 ms) */
	uint32_t pid;	  /* 0 = every process */
};

struct mem_group {
	uint32_t stack;	     /* stack node of the allocating call */
	uint64_t bytes;	     /* estimated bytes */
	double count;	     /* estimated calls */
	uint64_t first_ts;   /* oldest allocation of the group */
	double ts_sum;	     /* sum of (ts - start) * calls, for the mean age */
};

struct mem_result {
	bool present;		 /* the profile has allocation events */
	uint64_t start_ns, end_ns;
	uint64_t allocated_bytes;
	double alloc_count, free_count;
	uint64_t peak_bytes, peak_ts;
	uint64_t end_bytes;	 /* live at the end: leaked */
	double leak_count;
	uint64_t temp_bytes;
	double temp_count;
	uint64_t rss_peak, rss_peak_ts;
	uint64_t mmap_bytes, munmap_bytes; /* anonymous mmap calls, not part of the heap figures */
	/* Anonymous mappings live (mmap/munmap/mremap, page-rounded) and brk growth, peak + end. */
	uint64_t mapped_peak, mapped_peak_ts, mapped_end;
	uint64_t brk_peak, brk_peak_ts, brk_end;
	uint64_t sample_bytes;		   /* mean of the byte sampling, 1 = every allocation */
	/* Each sorted by bytes, largest first (by_count: by calls). */
	struct mem_group *allocated, *by_count, *at_peak, *leaks, *temps;
	size_t nallocated, nat_peak, nleaks, ntemps;
};

int memory_analyze(const struct profile *p, const struct mem_opts *o, struct mem_result *r);
void mem_result__free(struct mem_result *r);

/* Mean age at the end of the run of a leak group, in seconds. */
double mem_group_age_s(const struct mem_result *r, const struct mem_group *g);

/* The live heap after each change, for counter tracks: (ts, bytes) pairs in time order. */
struct mem_point {
	uint64_t ts;
	uint64_t bytes;
};
int memory_timeline(const struct profile *p, uint32_t pid, struct mem_point **out, size_t *n);
/*
 * The same in one pass for every process (or pid alone): each point is the live heap of the
 * process of its event, pid_of[k] (free() it too). Time order, processes interleaved.
 */
int memory_timeline_by_pid(const struct profile *p, uint32_t pid, struct mem_point **out,
			   uint32_t **pid_of, size_t *n);

enum mem_view {
	MEM_VIEW_ALLOCATED = 0, /* bytes allocated per stack */
	MEM_VIEW_PEAK,		/* bytes live at the peak */
	MEM_VIEW_LEAKS,		/* bytes never freed */
};

/*
 * Replaces p's samples with one per allocation of the view, weighted by
 * bytes, so the CPU flamegraph and folded writers draw memory. Returns 0 or
 * -errno (-ENOENT: no allocation events).
 */
int memory_to_samples(struct profile *p, enum mem_view view);

#endif
