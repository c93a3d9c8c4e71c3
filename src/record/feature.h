/* SPDX-License-Identifier: MIT */
/*
 * Record features beyond CPU sampling (memory, off-CPU, regions, CUDA,
 * Python) plug into the session through this table. Each feature owns its
 * BPF programs (a header included by bpf/profile.bpf.c, programs autoloaded
 * only when the feature is on), its event kinds (enum eprof_event_kind) and
 * its decoder, which turns ring-buffer events into struct event rows of the
 * profile (src/model/profile.h).
 *
 * Order of calls in a record:
 *   configure  before the BPF object is loaded: set autoload, rodata, map
 *              sizes; setenv() for a launched command (it is forked after)
 *   attach     after load, the ring buffer and the target PIDs are in
 *              place and before sampling starts and a launched command execs
 *   poll       every loop iteration (~50 ms): probe new mappings, read
 *              counters; now is CLOCK_MONOTONIC ns
 *   child_exit the launched command exited, before it is reaped (optional)
 *   finish     after sampling stopped and the last ring-buffer read, before
 *              the final flush and symbolization: detach the feature's own
 *              probes, read what they left in the ring (ring_buffer__consume
 *              is done by the caller before: a feature that detaches later
 *              reads its leftovers with f->consume), copy BPF
 *              counters into p->stats, emit what is still pending
 *   destroy    always, on every path: detach what attach made, free state
 */
#ifndef EPROF_FEATURE_H
#define EPROF_FEATURE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct record_opts;
struct profile;
struct profile_bpf;
struct event_ctx;
struct proc_tracker;
struct rusage;
struct mapwatch;

struct feature_ctx {
	const struct record_opts *o;
	struct profile *p;
	struct profile_bpf *skel;
	struct event_ctx *ev;
	struct proc_tracker *tracker;
	pid_t child;	    /* launched command (stopped before exec until sampling starts), or 0 */
	int ncpus;	    /* possible CPUs (size of per-CPU map values) */
	uint64_t start_ns;  /* set before attach */
	/* Whose code mappings changed (record/mapwatch.h); NULL: assume everyone's did. */
	struct mapwatch *maps;
	/* Sum over CPUs of a BPF stats counter (enum eprof_bpf_stat). */
	uint64_t (*bpf_stat)(struct feature_ctx *f, int idx);
	/* Reads everything waiting in the ring buffer now (after detaching in finish). */
	int (*consume)(struct feature_ctx *f);
	void *session;
};

struct feature {
	const char *name;
	/*
	 * The hash maps only this feature's programs fill (NULL-terminated, or NULL): one entry
	 * each when the feature is off, as the programs that look them up still load.
	 */
	const char *const *maps;
	bool (*enabled)(const struct record_opts *o);
	int (*configure)(struct feature_ctx *f, void **state);
	int (*attach)(struct feature_ctx *f, void *state);
	int (*poll)(struct feature_ctx *f, void *state, uint64_t now);
	/*
	 * The launched command exited and is a zombie still: /proc has its final figures; ru
	 * is what the kernel gives a waiter (getrusage RUSAGE_BOTH: ru_maxrss its peak RSS).
	 */
	void (*child_exit)(struct feature_ctx *f, void *state, uint32_t pid, uint64_t now,
			   const struct rusage *ru);
	int (*finish)(struct feature_ctx *f, void *state);
	void (*destroy)(struct feature_ctx *f, void *state);
};

/* NULL-terminated, in src/record/features.c. */
extern const struct feature *const record_features[];

/*
 * The live target processes, one per call (start with *i = 0): from the recorder's process
 * table, which add_target, the forks and the exits keep. Walking the BPF target map instead
 * costs a scan of its 65,536 buckets at the end of every walk (~100-300 us).
 */
bool feature_next_target(const struct feature_ctx *f, size_t *i, uint32_t *pid);

/*
 * Programs loaded when a feature first needs them (a CUDA library or a region probe found in
 * a target), not at start-up: a new instance of the BPF object that shares every map of the
 * session's (the same fds: targets, ring buffer, .rodata, .bss), with only the programs that
 * pick() switches on (bpf_program__set_autoload, expected attach types). Its tracepoint
 * programs are attached; uprobes are the feature's to attach. what names the feature in
 * messages. NULL with errno set (and a warning) on failure; free with profile_bpf__destroy.
 */
struct profile_bpf *feature_load_late(const struct feature_ctx *f, const char *what,
				      void (*pick)(struct profile_bpf *late, void *arg), void *arg);

#endif
