/* SPDX-License-Identifier: MIT */
/*
 * GPU analysis of a loaded profile: CUDA API calls (uprobes), GPU activity
 * (CUPTI), and the join between them: a GPU kernel or copy carries a CUPTI
 * correlation id; an EVK_CUDA_CORR event says on which thread and when CUPTI
 * saw the API call with that id; the EVK_CUDA_API event of that thread
 * whose [ts, ts + dur] holds that time is the launch, and its stack is the
 * CPU stack the GPU time is charged to.
 */
#ifndef EPROF_ANALYSIS_GPU_H
#define EPROF_ANALYSIS_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/gpu_event.h"
#include "model/profile.h"
#include "gpu_occ.h"

#define GPU_NO_LAUNCH UINT32_MAX
/* A launch seen at entry only is joined to a CUPTI callback at most this much later. */
#define GPU_ENTRY_JOIN_NS 10000000ULL
#define GPU_MAX_GAPS 3

struct gpu_api_stat {
	uint32_t name; /* string id of the function */
	uint8_t cat;   /* enum cuda_category */
	uint64_t count, total_ns, max_ns, errors, bytes;
	int64_t last_error; /* a failing call's result, 0 when none failed */
};

struct gpu_kernel_stat {
	uint32_t name;
	uint64_t count, total_ns, min_ns, max_ns;
	uint64_t timed; /* entries with a duration (launches seen at entry only have none) */
	/*
	 * GPU kernels only: theoretical occupancy, GPU-time-weighted over the kernel's launch
	 * configurations (launch-weighted when they took no time); occ_known false when any
	 * configuration has no figure. limiter: that of the configuration with the most time.
	 */
	bool occ_known;
	double occupancy;
	uint8_t limiter;	     /* enum gpu_occ_limiter */
	size_t cfg_first, ncfg;	     /* its entries in gpu_summary.configs */
};

/* One launch configuration of a kernel on one device of one process. */
struct gpu_kernel_config {
	uint32_t name; /* kernel */
	uint32_t pid, device;
	uint32_t threads, regs, smem; /* per block; regs per thread; regs 0: not recorded */
	uint64_t count, total_ns;
	bool occ_known;
	struct gpu_occupancy occ;
};

struct gpu_copy_stat {
	uint64_t count, bytes, total_ns; /* GPU time (CUPTI) */
	uint64_t api_count, api_bytes, api_ns; /* CPU side (uprobes) */
};

struct gpu_stream_stat {
	uint32_t pid;
	uint64_t dev_stream; /* device << 32 | stream */
	uint64_t count, busy_ns;
	uint64_t overlap_ns; /* of busy_ns, the time another stream of its device was busy too */
};

struct gpu_device_stat {
	uint32_t pid, device;
	uint64_t first_ns, last_ns; /* activity span */
	uint64_t busy_ns;	    /* union of kernel, copy and set intervals */
	uint64_t overlap_ns;	    /* sum of its streams' busy time minus busy_ns: work run concurrently */
	uint64_t window_ns;	    /* the record's span (or the activity span) */
	uint64_t gaps[GPU_MAX_GAPS], gap_at[GPU_MAX_GAPS]; /* largest idle gaps, longest first */
};

struct gpu_summary {
	struct gpu_api_stat *api;
	size_t napi;
	struct gpu_kernel_stat *kernels;
	size_t nkernels;
	struct gpu_kernel_config *configs; /* grouped by kernel (kernels[i].cfg_first), most time first */
	size_t nconfigs;
	struct gpu_device_props *props; /* device limits (CUPTI device records) */
	size_t nprops;
	struct gpu_stream_stat *streams;
	size_t nstreams;
	struct gpu_device_stat *devices;
	size_t ndevices;
	struct gpu_kernel_stat *launched; /* launches per kernel name, CPU side (API time) */
	size_t nlaunched;
	struct gpu_copy_stat copies[GPU_COPY_DIR_MAX];
	uint64_t api_calls, launches, launch_ns;
	uint64_t launches_timed;      /* launches with a duration: their return was probed */
	uint64_t sync_calls, sync_ns; /* CPU time blocked in synchronization calls */
	uint64_t kernel_ns;	      /* sum of kernel durations */
	uint64_t gpu_events, joined;  /* GPU activities, and those with a launch stack */
	/* joined kernels whose launch named its kernel, and of those the ones that named another */
	uint64_t joined_checked, joined_mismatch;
	uint64_t before_attach; /* record -p: kernels launched before the collector attached */
	uint64_t mem_peak, mem_live, mem_live_allocs; /* bytes from cudaMalloc & co */
	bool have_activity;			       /* CUPTI records present */
};

/* Returns 0 or -ENOMEM. Sorted: api and kernels by total time, streams/devices by id. */
int gpu_analyze(const struct profile *p, struct gpu_summary *s);
void gpu_summary_free(struct gpu_summary *s);
/* True when the profile has any CUDA or GPU event. */
bool gpu_present(const struct profile *p);

/*
 * For every event i of p (p->events.n entries), launch[i] is the index of
 * the EVK_CUDA_API event that launched it (kernels, copies, sets), or
 * GPU_NO_LAUNCH. Returns 0 or -ENOMEM; *launch is malloc'd.
 */
int gpu_join(const struct profile *p, uint32_t **launch);

enum gpu_weight {
	GPU_WEIGHT_GPU_NS = 0, /* kernels, copies and sets: GPU ns on the launching CPU stack */
	GPU_WEIGHT_API_NS = 1, /* CUDA API calls: ns in the call on the calling stack */
};

/*
 * Replaces p->samples with one sample per GPU activity (or API call), so
 * every stack reader (flamegraph, folded) shows them: stack = the CPU stack
 * plus a synthetic leaf "[gpu] KERNEL" ("[cuda] FUNCTION"), weight = ns.
 * Returns the number of samples made, or -ENOMEM.
 */
int64_t gpu_to_samples(struct profile *p, enum gpu_weight w);

/* "KERNEL", "memcpy HtoD", "memset " of a kernel, copy or set event (buf for the latter). */
const char *gpu_activity_name(const struct profile *p, const struct event *e, char *buf,
			      size_t len);

/* Kernel name of a launch API event (from its host stub or function handle), or 0. */
uint32_t gpu_launch_kernel_name(const struct profile *p, const struct event *api);

#endif
