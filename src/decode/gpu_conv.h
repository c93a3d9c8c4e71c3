/* SPDX-License-Identifier: MIT */
/* Turns messages of the CUPTI injection library (src/agent/eprof_gpu_proto.h) into events. */
#ifndef EPROF_GPU_CONV_H
#define EPROF_GPU_CONV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct profile;
struct hmap;

/* The counters of EGPU_STATS, each the sum over processes of their latest figure. */
enum gpu_conv_count {
	GPU_CNT_DROPPED,  /* records the injection library could not deliver */
	GPU_CNT_ZERO,	  /* records with a zero start or end (work in flight), dropped */
	GPU_CNT_INVERTED, /* records with end before start, dropped */
	GPU_CNT_FOREIGN,  /* records on another clock (another CUPTI user), dropped */
	GPU_CNT_BUF_ERR,  /* activity buffers whose reading stopped on an error */
	GPU_CNT_MAX
};

struct gpu_conv {
	struct profile *p;
	struct hmap *names;    /* raw kernel name string id -> demangled name string id */
	struct hmap *name_ids; /* (pid, EGPU_NAME id) -> kernel name string id */
	struct hmap *cb_names; /* (pid, domain << 32 | cbid) -> function name string id */
	uint64_t kernels, memcpys, memsets, apis, syncs, devices;
	uint64_t bad; /* malformed messages or records */
	uint64_t count[GPU_CNT_MAX];
	struct hmap *stats_by_pid; /* (pid, counter) -> latest figure */
	/* EGPU_INFO: the libcupti of the first process that reported one; processes by status */
	uint32_t cupti_version, built_version;
	char cupti_path[256];
	uint64_t status_procs[16]; /* by enum egpu_status (the recorder adds injection failures) */
	/* attach mode */
	struct hmap *own_tids; /* (pid, tid) of the collector's threads: their CUDA calls are eprof's */
	struct hmap *bye;      /* pid -> GPU_BYE_* of the collector's EGPU_BYE */
};

#define GPU_BYE_SEEN (1u << 16)
#define GPU_BYE_KEEP (1u << 8) /* low byte: how CUPTI was finalized (0: not) */

/* Thread ids of processes in other pid namespaces, as this process sees them. */
struct gpu_ns_tids {
	struct hmap *map;      /* (pid, tid in the process's namespace) -> tid here, 0: gone */
	const char *proc_root; /* "/proc" (tests: another) */
};

int gpu_conv_init(struct gpu_conv *c, struct profile *p);
/* Whether a thread of pid is one of the collector's own (its CUDA calls are not the program's). */
bool gpu_conv_own_thread(const struct gpu_conv *c, uint32_t pid, uint32_t tid);
void gpu_conv_free(struct gpu_conv *c);
/*
 * Converts one message. peer_pid is the sender's pid as this process sees it (SO_PEERCRED;
 * 0: unknown): it replaces the message's, which is that of the sender's pid namespace.
 * Returns 0, -EINVAL for a malformed one (counted), -ENOMEM.
 */
int gpu_conv_message(struct gpu_conv *c, const void *buf, size_t len, uint32_t peer_pid);

/*
 * A message from a process in another pid namespace (peer_pid differs from the message's
 * pid): rewrites the thread ids of its API records in place to this namespace's, through
 * /proc/PID/task/TID/status (NSpid). Done as messages arrive, while the sender still runs.
 * Thread ids that cannot be found become 0 (not joined).
 */
void gpu_ns_map_tids(struct gpu_ns_tids *t, void *buf, size_t len, uint32_t peer_pid);
int gpu_ns_tids_init(struct gpu_ns_tids *t);
void gpu_ns_tids_free(struct gpu_ns_tids *t);

#endif
