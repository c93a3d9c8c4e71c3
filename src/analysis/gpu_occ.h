/* SPDX-License-Identifier: MIT */
/*
 * Theoretical occupancy of a kernel launch configuration: how many warps an SM can hold at
 * once for that block size, register count and shared memory, over the most it can hold.
 * The device limits come from the EVK_GPU_DEVICE / EVK_GPU_DEVATTR events the recorder wrote
 * from CUPTI's device records; without them there is no figure. docs/gpu.md, "Occupancy".
 */
#ifndef EPROF_ANALYSIS_GPU_OCC_H
#define EPROF_ANALYSIS_GPU_OCC_H

#include <stddef.h>
#include <stdint.h>

#include "model/gpu_event.h"
#include "model/profile.h"

/* One device of one process; a limit of 0 was not reported. */
struct gpu_device_props {
	uint32_t pid, device;
	uint32_t name; /* string id, 0 = none */
#define X(field, key) uint64_t field;
	GPU_ATTR_LIST(X)
#undef X
};

enum gpu_occ_limiter {
	GPU_OCC_UNKNOWN = 0,
	GPU_OCC_WARPS,	/* warps per SM: the block size alone */
	GPU_OCC_REGS,	/* registers per SM */
	GPU_OCC_SMEM,	/* shared memory per SM */
	GPU_OCC_BLOCKS, /* blocks per SM */
	GPU_OCC_LIMITER_MAX
};

struct gpu_occupancy {
	uint32_t blocks;	       /* active blocks per SM */
	uint32_t warps;		       /* active warps per SM */
	uint32_t by[GPU_OCC_LIMITER_MAX]; /* blocks per SM each limit allows (index: limiter) */
	double occupancy;	       /* warps / max warps per SM, 0..1 */
	enum gpu_occ_limiter limiter;  /* the limit that allows the fewest blocks */
};

/* "warps", "registers", "shared", "blocks" or "-". */
const char *gpu_occ_limiter_name(enum gpu_occ_limiter l);

/*
 * Occupancy of blocks of `threads` threads using `regs` registers per thread and `smem` bytes
 * of shared memory per block (static + dynamic) on device d. Returns 0, or -ENODATA when a
 * limit it needs is unknown (d NULL, a limit 0, threads or regs 0): no figure then.
 */
int gpu_occupancy(const struct gpu_device_props *d, uint32_t threads, uint32_t regs, uint32_t smem,
		  struct gpu_occupancy *o);

/* The devices the profile's events describe (later events win). *v is malloc'd. 0 or -ENOMEM. */
int gpu_devices_load(const struct profile *p, struct gpu_device_props **v, size_t *n);
/* The entry of (pid, device), or NULL. */
const struct gpu_device_props *gpu_device_find(const struct gpu_device_props *v, size_t n,
					       uint32_t pid, uint32_t device);

#endif
