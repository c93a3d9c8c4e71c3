/* SPDX-License-Identifier: MIT */
/*
 * Typed access to the events of a profile. A struct event (profile.h) stores every kind in
 * the same slots (a, b, c, flags, tid...), as the file does; what a slot means depends on the
 * kind. Readers and writers go through these accessors and constructors instead of the raw
 * slots, so the meaning of a slot is written once, here. The file format (docs/file-format.md)
 * is unchanged: these are views of it.
 */
#ifndef EPROF_EVENT_H
#define EPROF_EVENT_H

#include <assert.h>
#include <stdbool.h>
#include <stdint.h>

#include "gpu_event.h"
#include "profile.h"

#define EV_IS(e, k) assert((e)->kind == (k))
#define EV_IS_GPU_WORK(e)                                                                          \
	assert((e)->kind == EVK_GPU_KERNEL || (e)->kind == EVK_GPU_MEMCPY ||                       \
	       (e)->kind == EVK_GPU_MEMSET || (e)->kind == EVK_GPU_SYNC)

/* --- counters and losses --- */

static inline uint64_t ev_counter_value(const struct event *e)
{
	EV_IS(e, EVK_COUNTER);
	return e->b;
}

/*
 * The zone or device a machine-wide counter belongs to (pid 0): a RAPL zone for energy_uj, an
 * NVML device for the gpu_* counters (model/metrics.h). 0 for a process's counters.
 */
static inline uint32_t ev_counter_index(const struct event *e)
{
	EV_IS(e, EVK_COUNTER);
	return e->tid;
}

static inline uint64_t ev_lost_samples(const struct event *e)
{
	EV_IS(e, EVK_LOST);
	return e->b;
}

static inline uint64_t ev_lost_events(const struct event *e)
{
	EV_IS(e, EVK_LOST);
	return e->c;
}

/* --- memory --- */

/* EVK_ALLOC: address, size, and the bytes it stands for (sampled allocations weigh more). */
static inline uint64_t ev_alloc_addr(const struct event *e)
{
	EV_IS(e, EVK_ALLOC);
	return e->a;
}

static inline uint64_t ev_alloc_size(const struct event *e)
{
	EV_IS(e, EVK_ALLOC);
	return e->b;
}

static inline uint64_t ev_alloc_weight(const struct event *e)
{
	EV_IS(e, EVK_ALLOC);
	return e->c;
}

static inline uint64_t ev_free_addr(const struct event *e)
{
	EV_IS(e, EVK_FREE);
	return e->a;
}

/* The address of an allocation or a free: what pairs them. */
static inline uint64_t ev_heap_addr(const struct event *e)
{
	assert(e->kind == EVK_ALLOC || e->kind == EVK_FREE);
	return e->a;
}

/* EVK_MMAP / EVK_MUNMAP: the range. */
static inline uint64_t ev_map_addr(const struct event *e)
{
	assert(e->kind == EVK_MMAP || e->kind == EVK_MUNMAP);
	return e->a;
}

static inline uint64_t ev_map_len(const struct event *e)
{
	assert(e->kind == EVK_MMAP || e->kind == EVK_MUNMAP);
	return e->b;
}

/* EVK_BRK: the program break before and after. */
static inline uint64_t ev_brk_before(const struct event *e)
{
	EV_IS(e, EVK_BRK);
	return e->a;
}

static inline uint64_t ev_brk_after(const struct event *e)
{
	EV_IS(e, EVK_BRK);
	return e->b;
}

/* --- off-CPU and regions --- */

/* EVK_OFFCPU: who woke the thread (tid 0: unknown) and when. flags: offcpu_event.h. */
static inline uint32_t ev_off_waker_tid(const struct event *e)
{
	EV_IS(e, EVK_OFFCPU);
	return (uint32_t)e->a;
}

static inline uint32_t ev_off_waker_pid(const struct event *e)
{
	EV_IS(e, EVK_OFFCPU);
	return (uint32_t)e->c;
}

static inline uint64_t ev_off_wake_ts(const struct event *e)
{
	EV_IS(e, EVK_OFFCPU);
	return e->b;
}

static inline uint32_t ev_region_depth(const struct event *e)
{
	EV_IS(e, EVK_REGION);
	return (uint32_t)e->a;
}

/* A communication call's bytes (count x datatype size; 0 unknown). */
static inline uint64_t ev_region_bytes(const struct event *e)
{
	EV_IS(e, EVK_REGION);
	return e->b;
}

/* A communication call's communicator: 1, 2... in the order its process first used them. */
static inline uint32_t ev_region_comm(const struct event *e)
{
	EV_IS(e, EVK_REGION);
	return (uint32_t)e->c;
}

/* --- CUDA API calls (uprobes) --- */

static inline int64_t ev_api_result(const struct event *e)
{
	EV_IS(e, EVK_CUDA_API);
	return (int64_t)e->a;
}

static inline uint64_t ev_api_bytes(const struct event *e)
{
	EV_IS(e, EVK_CUDA_API);
	return e->b;
}

/* The address an allocation call returned or a free was given. */
static inline uint64_t ev_api_addr(const struct event *e)
{
	EV_IS(e, EVK_CUDA_API);
	return e->c;
}

/* --- GPU work (CUPTI): kernels, copies, sets, synchronizations --- */

/*
 * device << 32 | stream: one key for a stream of a device (for a synchronization, CUPTI gives
 * the context in place of the device).
 */
static inline uint64_t ev_gpu_dev_stream(const struct event *e)
{
	EV_IS_GPU_WORK(e);
	return e->a;
}

static inline uint32_t ev_gpu_device(const struct event *e)
{
	EV_IS_GPU_WORK(e);
	return (uint32_t)(e->a >> 32);
}

static inline uint32_t ev_gpu_stream(const struct event *e)
{
	EV_IS_GPU_WORK(e);
	return (uint32_t)e->a;
}

/* The CUPTI correlation id that joins GPU work to the API call that queued it. */
static inline uint32_t ev_gpu_corr(const struct event *e)
{
	assert(e->kind == EVK_GPU_KERNEL || e->kind == EVK_GPU_MEMCPY ||
	       e->kind == EVK_GPU_MEMSET || e->kind == EVK_CUDA_CORR);
	return (uint32_t)e->c;
}

static inline uint64_t ev_kernel_blocks(const struct event *e)
{
	EV_IS(e, EVK_GPU_KERNEL);
	return e->b >> 32;
}

static inline uint32_t ev_kernel_threads(const struct event *e)
{
	EV_IS(e, EVK_GPU_KERNEL);
	return (uint32_t)e->b;
}

/* Registers per thread and shared memory per block; 0: not recorded. */
static inline uint32_t ev_kernel_regs(const struct event *e)
{
	EV_IS(e, EVK_GPU_KERNEL);
	return GPU_KERNEL_REGS(e->flags);
}

/* Launched before the CUPTI collector attached (record -p): no launch call to join to. */
static inline bool ev_kernel_before_attach(const struct event *e)
{
	EV_IS(e, EVK_GPU_KERNEL);
	return e->flags & GPU_KERNEL_F_BEFORE_ATTACH;
}

static inline uint32_t ev_kernel_smem(const struct event *e)
{
	EV_IS(e, EVK_GPU_KERNEL);
	return e->tid;
}

/* EVK_GPU_MEMCPY / EVK_GPU_MEMSET: bytes; a copy's direction is enum gpu_copy_dir. */
static inline uint64_t ev_copy_bytes(const struct event *e)
{
	assert(e->kind == EVK_GPU_MEMCPY || e->kind == EVK_GPU_MEMSET);
	return e->b;
}

static inline unsigned ev_copy_dir(const struct event *e)
{
	EV_IS(e, EVK_GPU_MEMCPY);
	return e->flags;
}

/* EVK_CUDA_CORR: the callback's id and domain (CUPTI's numbering). */
static inline uint32_t ev_corr_cbid(const struct event *e)
{
	EV_IS(e, EVK_CUDA_CORR);
	return (uint32_t)e->a;
}

static inline uint32_t ev_corr_domain(const struct event *e)
{
	EV_IS(e, EVK_CUDA_CORR);
	return (uint32_t)e->b;
}

/* EVK_GPU_SYNC: CUPTI's synchronization type (CUpti_ActivitySynchronizationType). */
static inline uint64_t ev_sync_type(const struct event *e)
{
	EV_IS(e, EVK_GPU_SYNC);
	return e->b;
}

/* EVK_GPU_DEVICE / EVK_GPU_DEVATTR: the device id (past 32 bits: a malformed file), and a
 * limit's value. */
static inline uint64_t ev_device_id(const struct event *e)
{
	assert(e->kind == EVK_GPU_DEVICE || e->kind == EVK_GPU_DEVATTR);
	return e->a;
}

static inline uint64_t ev_devattr_value(const struct event *e)
{
	EV_IS(e, EVK_GPU_DEVATTR);
	return e->b;
}

/* --- setters (the recorder, the converters, the tests): each kind's slots filled in one place --- */

static inline void ev_set_kernel_before_attach(struct event *e)
{
	EV_IS(e, EVK_GPU_KERNEL);
	e->flags |= GPU_KERNEL_F_BEFORE_ATTACH;
}

static inline void ev_set_counter(struct event *e, uint64_t value)
{
	EV_IS(e, EVK_COUNTER);
	e->b = value;
}

/* A machine-wide counter of zone or device index (see ev_counter_index). */
static inline void ev_set_counter_at(struct event *e, uint32_t index, uint64_t value)
{
	EV_IS(e, EVK_COUNTER);
	e->tid = index;
	e->b = value;
}

static inline void ev_set_lost(struct event *e, uint64_t samples, uint64_t events)
{
	EV_IS(e, EVK_LOST);
	e->b = samples;
	e->c = events;
}

/* EVK_ALLOC (weight: the bytes it stands for) or EVK_FREE (weight unused). */
static inline void ev_set_heap(struct event *e, uint64_t addr, uint64_t size, uint64_t weight)
{
	assert(e->kind == EVK_ALLOC || e->kind == EVK_FREE);
	e->a = addr;
	e->b = size;
	e->c = weight;
}

static inline void ev_set_map(struct event *e, uint64_t addr, uint64_t len)
{
	assert(e->kind == EVK_MMAP || e->kind == EVK_MUNMAP);
	e->a = addr;
	e->b = len;
}

static inline void ev_set_brk(struct event *e, uint64_t before, uint64_t after)
{
	EV_IS(e, EVK_BRK);
	e->a = before;
	e->b = after;
}

static inline void ev_set_waker(struct event *e, uint32_t pid, uint32_t tid, uint64_t wake_ts)
{
	EV_IS(e, EVK_OFFCPU);
	e->a = tid;
	e->b = wake_ts;
	e->c = pid;
}

static inline void ev_set_region_depth(struct event *e, uint32_t depth)
{
	EV_IS(e, EVK_REGION);
	e->a = depth;
}

static inline void ev_set_region_comm(struct event *e, uint64_t bytes, uint32_t comm)
{
	EV_IS(e, EVK_REGION);
	e->b = bytes;
	e->c = comm;
}

static inline void ev_set_api(struct event *e, int64_t result, uint64_t bytes, uint64_t addr)
{
	EV_IS(e, EVK_CUDA_API);
	e->a = (uint64_t)result;
	e->b = bytes;
	e->c = addr;
}

/* Where GPU work ran, and the correlation id that joins it to its API call. */
static inline void ev_set_gpu_place(struct event *e, uint32_t device, uint32_t stream,
				    uint32_t corr)
{
	EV_IS_GPU_WORK(e);
	e->a = (uint64_t)device << 32 | stream;
	e->c = corr;
}

/* A kernel's launch configuration; regs or smem 0: not recorded. Other flag bits are kept. */
static inline void ev_set_kernel_config(struct event *e, uint64_t blocks, uint32_t threads,
					uint32_t regs, uint32_t smem)
{
	EV_IS(e, EVK_GPU_KERNEL);
	e->b = blocks << 32 | threads;
	e->flags = (uint16_t)((e->flags & ~GPU_KERNEL_REGS_MAX) |
			      (regs > GPU_KERNEL_REGS_MAX ? GPU_KERNEL_REGS_MAX : regs));
	e->tid = smem;
}

static inline void ev_set_copy(struct event *e, uint64_t bytes, unsigned dir)
{
	assert(e->kind == EVK_GPU_MEMCPY || e->kind == EVK_GPU_MEMSET);
	e->b = bytes;
	if (e->kind == EVK_GPU_MEMCPY)
		e->flags = (uint16_t)dir;
}

static inline void ev_set_sync_type(struct event *e, uint64_t type)
{
	EV_IS(e, EVK_GPU_SYNC);
	e->b = type;
}

static inline void ev_set_corr(struct event *e, uint32_t corr, uint32_t cbid, uint32_t domain)
{
	EV_IS(e, EVK_CUDA_CORR);
	e->c = corr;
	e->a = cbid;
	e->b = domain;
}

static inline void ev_set_device(struct event *e, uint32_t device, uint64_t value)
{
	assert(e->kind == EVK_GPU_DEVICE || e->kind == EVK_GPU_DEVATTR);
	e->a = device;
	e->b = value;
}

#endif
