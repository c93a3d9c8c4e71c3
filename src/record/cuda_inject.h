/* SPDX-License-Identifier: MIT */
/*
 * record -p / -a / top --gpu -p: eprof's CUPTI collector injected into the running processes
 * that map the CUDA driver, and retracted at the end (src/inject/inject.h does the ptrace
 * work; this module decides when, keeps what each process's injection gave, and does the
 * work on a thread of its own so the record's loop never waits on a target).
 */
#ifndef EPROF_CUDA_INJECT_H
#define EPROF_CUDA_INJECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cuda_inject;

struct cuda_inject_opts {
	const char *lib;     /* libeprof_cupti.so */
	bool verbose;	     /* the collector sends its information lines too */
	unsigned timeout_ms; /* one injection or retraction (0: 5000) */
};

/* One finished injection, for the caller (cuda_inject__take). */
struct cuda_inject_done {
	uint32_t pid;
	int chan_fd;	   /* eprof's end of the collector's channel (the caller owns it); -1 */
	uint32_t status;   /* enum egpu_status: EGPU_ST_OK or why it failed */
	char msg[320];	   /* failed: the injector's one line */
	double stopped_ms; /* how long the borrowed thread was away from its own code */
	uint32_t tid;
};

struct cuda_inject_summary {
	uint32_t injected, failed, retracted, kept; /* processes */
	double inject_stop_max_ms, retract_stop_max_ms, inject_stop_sum_ms, retract_stop_sum_ms;
};

struct cuda_inject *cuda_inject__new(const struct cuda_inject_opts *o);
void cuda_inject__free(struct cuda_inject *ci);
/*
 * Process pid maps the CUDA driver: inject the collector unless that was done (or tried)
 * already for this process. Cheap when nothing is new.
 */
void cuda_inject__want(struct cuda_inject *ci, uint32_t pid);
/* Injections finished since the last call, at most max. */
size_t cuda_inject__take(struct cuda_inject *ci, struct cuda_inject_done *out, size_t max);
/* The collector of pid closed its channel (the process exited or exec'd). */
void cuda_inject__gone(struct cuda_inject *ci, uint32_t pid);
/* Waits (at most timeout_ms) until no injection is queued or running. */
void cuda_inject__settle(struct cuda_inject *ci, unsigned timeout_ms);
/* The pids whose collector is active (channel handed over, not retracted): up to max. */
size_t cuda_inject__active(struct cuda_inject *ci, uint32_t *pids, size_t max);
/*
 * Unloads the collector of every active process (keep: those that must stay loaded, by
 * pid, from their EGPU_BYE; their retraction is still called). Waits at most timeout_ms.
 * Errors are logged, one line per process.
 */
void cuda_inject__retract_all(struct cuda_inject *ci, bool (*keep)(void *arg, uint32_t pid),
			      void *arg, unsigned timeout_ms);
void cuda_inject__summary(struct cuda_inject *ci, struct cuda_inject_summary *s);

/*
 * A libcupti of the CUDA install pid uses, as that process sees the path (the collector
 * tries it when the process has none loaded): next to its libcudart, in the toolkit's
 * extras/CUPTI, or in the pip wheel's cuda_cupti. False when none is found.
 */
bool cuda_inject_cupti_hint(uint32_t pid, char *out, size_t len);

#endif
