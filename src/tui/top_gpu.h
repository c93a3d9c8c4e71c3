/* SPDX-License-Identifier: MIT */
/*
 * eprof top --gpu: the targets' GPU kernels of the last interval, with their GPU time (the
 * CUPTI collector injected into the running processes), and their CUDA API calls (uprobes):
 * launches per kernel and calls, time and failures per CUDA function, with a decayed rate as
 * in the function table. Pure: fed a profile whose events are the last interval's.
 */
#ifndef EPROF_TOP_GPU_H
#define EPROF_TOP_GPU_H

#include <stdbool.h>
#include <stdint.h>

#include "model/profile.h"
#include "util/sink.h"

enum top_gpu_kind {
	TOP_GPU_KERNEL = 0, /* launches of one kernel */
	TOP_GPU_API = 1,    /* calls of one CUDA function */
	TOP_GPU_TIME = 2,   /* GPU time of one kernel (CUPTI) */
};

struct top_gpu_row {
	uint32_t name; /* string id: the kernel, or the function; 0 = an unnamed kernel */
	uint8_t kind;  /* enum top_gpu_kind */
	uint64_t last; /* launches or calls in the last interval */
	uint64_t last_ns, last_err; /* API rows: ns in the calls that ended, failures; time
				     * rows: GPU ns */
	uint64_t last_nodur;	    /* API rows: launches seen at entry only (no time, no result) */
	uint64_t total;		    /* since the start */
	double rate;		    /* per second, decayed */
};

struct top_gpu {
	VEC(struct top_gpu_row) rows;
	struct hmap *idx; /* (kind, name) -> rows index */
	uint64_t last_launches, last_sync_ns;
	uint64_t last_gpu_ns; /* kernels' GPU time in the last interval (CUPTI) */
	bool have_gpu;	      /* CUPTI records came */
	double last_dt;
};

int top_gpu__init(struct top_gpu *g);
void top_gpu__free(struct top_gpu *g);
/*
 * Folds the EVK_CUDA_API and EVK_GPU_KERNEL events of p (the last interval, dt seconds) in;
 * empties p->events.
 */
int top_gpu__update(struct top_gpu *g, struct profile *p, double dt);
/*
 * The GPU time table (when CUPTI records came), the launch table, then the function table:
 * at most max_rows rows in all.
 */
int top_gpu__render(struct sink *out, const struct top_gpu *g, const struct profile *p, int width,
		    int max_rows);

#endif
