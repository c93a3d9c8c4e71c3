/* SPDX-License-Identifier: MIT */
/*
 * Which processes' code mappings may have changed since a feature last read their
 * /proc/PID/maps. A PyTorch process has ~1,700 lines of maps, and each full read costs the
 * recorder ~4 ms of kernel and parsing time; four features (regions, CUDA, Python, memory) used
 * to re-read them on timers whatever happened.
 *
 * The kernel reports every new executable mapping (mmap with PROT_EXEC, mprotect adding it,
 * exec) as a PERF_RECORD_MMAP on a dummy software event opened with attr.mmap, and every new
 * process as a PERF_RECORD_FORK: one such event per CPU, system-wide, read by the session
 * before the features poll. A process's generation counts those records; a feature asks
 * whether it moved since its own last look. Whatever makes the count unreliable (a lost
 * record, the pid table full, perf events refused) makes every process "changed": the
 * features then read the maps on their timers as before, never less.
 */
#ifndef EPROF_RECORD_MAPWATCH_H
#define EPROF_RECORD_MAPWATCH_H

#include <stdbool.h>
#include <stdint.h>

struct mapwatch;

/* Who asks: each keeps its own "last looked" per process. */
enum mapwatch_user {
	MAPWATCH_REGION = 1,
	MAPWATCH_CUDA,
	MAPWATCH_PYTHON,
	MAPWATCH_MEM,
	MAPWATCH_USERS
};

/*
 * One dummy event per possible CPU (ncpus), each with a ring of ring_pages pages (a power
 * of two). NULL with errno set when the kernel refuses; callers then go on without one
 * (mapwatch_changed(NULL, ...) is always true).
 */
struct mapwatch *mapwatch_open(int ncpus, unsigned ring_pages);
void mapwatch_close(struct mapwatch *mw);

/* Reads what the rings hold now. */
void mapwatch_poll(struct mapwatch *mw);

/*
 * Whether pid's code mappings may differ from when who last got true for it (the first ask
 * for a pid is true). Call mapwatch_poll first, then read the maps after a true answer: a
 * mapping the kernel reported is already in /proc/PID/maps.
 */
bool mapwatch_changed(struct mapwatch *mw, enum mapwatch_user who, uint32_t pid);

/* Records read and times the counts were reset (a lost record, the table full). */
struct mapwatch_stats {
	uint64_t records, resets;
};
void mapwatch_stats(const struct mapwatch *mw, struct mapwatch_stats *out);

#endif
