/* SPDX-License-Identifier: MIT */
/*
 * Resource metrics (record's default time series, docs/metrics.md): EVK_COUNTER events whose
 * name is one of the names below. The recorder writes them, every reader knows them from this
 * table: what each measures, its unit, and whether it is a running total (a delta over the
 * record is the difference of two readings) or a level (RSS, a temperature).
 *
 * Scope says which pid/tid an event carries: a process's counters have its pid and tid 0;
 * machine-wide ones pid 0 and, for energy zones and GPUs, the zone or device index in tid
 * (ev_counter_index() in event.h); a thread's (thread_*) its process's pid and its tid.
 */
#ifndef EPROF_METRICS_H
#define EPROF_METRICS_H

#include <stdbool.h>
#include <stdint.h>

enum metric_scope {
	MSCOPE_PROCESS = 0, /* pid = the process */
	MSCOPE_ENERGY = 1,  /* pid 0, tid = RAPL zone index (meta energy_zone_N names it) */
	MSCOPE_GPU = 2,	    /* pid 0, tid = NVML device index (meta nvml_gpu_N names it) */
	MSCOPE_THREAD = 3,  /* pid = the process, tid = the thread */
};

enum metric_id {
	/* per process: /proc/PID/stat, status and io, and bpf/metrics.bpf.h */
	MET_CPU_USER = 0,
	MET_CPU_SYS,
	MET_RSS_ANON,
	MET_RSS_FILE,
	MET_RSS_SHMEM,
	MET_RSS_PEAK,
	MET_MINFLT,
	MET_MAJFLT,
	MET_NVCSW,
	MET_NIVCSW,
	MET_IO_RCHAR,
	MET_IO_WCHAR,
	MET_IO_READ_BYTES,
	MET_IO_WRITE_BYTES,
	MET_NET_TCP_TX,
	MET_NET_TCP_RX,
	MET_NET_UDP_TX,
	MET_NET_UDP_RX,
	MET_NET_UNIX_TX,
	MET_NET_UNIX_RX,
	MET_THREADS,
	MET_PROC_COUNT, /* the per-process ones end here */
	/* RAPL (powercap) */
	MET_ENERGY_UJ = MET_PROC_COUNT,
	/* NVML, per GPU */
	MET_GPU_UTIL,
	MET_GPU_MEM_UTIL,
	MET_GPU_MEM_USED,
	MET_GPU_MEM_TOTAL,
	MET_GPU_POWER_MW,
	MET_GPU_ENERGY_MJ,
	MET_GPU_TEMP_C,
	MET_GPU_SM_CLOCK,
	MET_GPU_MEM_CLOCK,
	MET_GPU_THROTTLE,
	MET_GPU_PCIE_TX,
	MET_GPU_PCIE_RX,
	/* per thread: the task's own counters (bpf/metrics.bpf.h), names prefixed thread_ */
	MET_T_CPU_USER,
	MET_T_FIRST = MET_T_CPU_USER,
	MET_T_CPU_SYS,
	MET_T_MINFLT,
	MET_T_MAJFLT,
	MET_T_NVCSW,
	MET_T_NIVCSW,
	MET_T_IO_RCHAR,
	MET_T_IO_WCHAR,
	MET_T_IO_READ_BYTES,
	MET_T_IO_WRITE_BYTES,
	MET_T_NET_TX,
	MET_T_NET_RX,
	MET_COUNT
};

#define MET_T_COUNT (MET_COUNT - MET_T_FIRST)

struct metric_def {
	const char *name;  /* the counter's name in the file */
	const char *unit;  /* ns, bytes, count, uJ, pct, mW, mJ, C, MHz, mask, KBps */
	uint8_t scope;	   /* enum metric_scope */
	bool cumulative;   /* a running total; else a level */
	const char *label; /* a few words for tables and charts */
};

extern const struct metric_def metric_defs[MET_COUNT];

/* The metric of a counter name, or -1 for other counters (rss_bytes of --mem ...). */
int metric_by_name(const char *name);

/*
 * A thread's CPU time split into user and system (thread_cpu_user_ns, thread_cpu_sys_ns):
 * its exact run time (sum_exec_runtime, ns) in the ratio of the tick-based utime and stime.
 *
 * Between readings neither part goes down (the kernel's cputime_adjust rule), and a thread
 * with no tick yet is not split at all: on a busy machine a thread can run 100 ms between
 * ticks, and the kernel's "no tick: all user" would be kept against every later tick. At
 * the thread's final reading (final: it exited, or the recording ends) the split is the
 * ratio of all its ticks, what getrusage(RUSAGE_THREAD) says when read once at the end:
 * the earlier readings weighed their few ticks more, so one part may step down there.
 * user + sys is the run time at every reading, so a CPU total stays exact and
 * non-decreasing; a reader that takes a part alone must allow that one step.
 */
struct cpu_split {
	uint64_t user, sys;
};

void cpu_split_update(struct cpu_split *c, uint64_t utime, uint64_t stime, uint64_t rtime,
		      bool final);

#endif
