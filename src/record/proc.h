/* SPDX-License-Identifier: MIT */
/*
 * Process tracker: the executable mappings of every target process, read
 * from /proc/PID/maps at attach, at exec and when a pc lands in no known
 * mapping (dlopen). Each mapped file is opened once and the handle kept, so
 * a process that exits (or a binary replaced on disk) is still symbolized.
 */
#ifndef EPROF_PROC_H
#define EPROF_PROC_H

#include <stdbool.h>
#include <stdint.h>

#include "model/profile.h"

struct cfi_table;
struct unwind_span;
struct hmap;
struct proc_tracker;

struct tracker_opts {
	const char *proc_root; /* "/proc", for tests */
	bool want_cfi;	       /* load CFI tables for DWARF unwinding */
	size_t cfi_budget;     /* bytes of CFI tables kept before evicting (0: 40 MiB) */
};

struct proc_tracker *proc_tracker__new(struct profile *p, const struct tracker_opts *opts);
void proc_tracker__free(struct proc_tracker *t);

/* (Re)reads /proc/PID/maps. Returns 0, or -ESRCH when the process is gone. */
int proc_tracker__scan(struct proc_tracker *t, uint32_t pid, uint64_t now_ns);
/*
 * A forked child: read its maps, or when it is already gone (a fork storm of
 * short-lived children), take its parent's: fork copies the address space.
 */
int proc_tracker__fork(struct proc_tracker *t, uint32_t ppid, uint32_t pid, uint64_t now_ns);
/* exec replaced the address space: forget the old mappings, scan anew. */
int proc_tracker__exec(struct proc_tracker *t, uint32_t pid, uint64_t now_ns);
/* The second reading of the maps of processes that exec'd 10 ms ago or more: each poll. */
void proc_tracker__poll(struct proc_tracker *t);
/* The process exited: keep its mappings (samples still in flight), stop rescanning. */
void proc_tracker__exit(struct proc_tracker *t, uint32_t pid);

/* Start time of a process (clock ticks since boot, field 22 of /proc/PID/stat); 0 if gone. */
uint64_t proc_start_ticks(uint32_t pid);
/*
 * Calls fn for every process in /proc but eprof itself; with seen (keys: pid and start
 * time, so a pid used again is a new process), only for those it does not hold yet, which
 * are added. 0, or -ENOMEM.
 */
int proc_for_each(struct hmap *seen, void (*fn)(uint32_t pid, void *arg), void *arg);
/*
 * The descendants of roots that exist now (children, their children, ...), read from the
 * ppid of every process in proc_root ("/proc" when NULL), skip (eprof itself) and its
 * descendants left out: *out (malloc'd, breadth first, roots not included) and *nout.
 * 0, or -errno.
 */
int proc_descendants(const char *proc_root, const uint32_t *roots, size_t nroots, uint32_t skip,
		     uint32_t **out, size_t *nout);
/* Frees the maps of processes that exited more than a few seconds before now_ns. */
void proc_tracker__gc(struct proc_tracker *t, uint64_t now_ns);
/* Frees every unwind table (built again if needed): symbolization at the end needs the room. */
void proc_tracker__drop_cfi(struct proc_tracker *t);
/* Bytes of unwind tables held now, and how many were dropped to stay in budget. */
void proc_tracker__cfi_stats(const struct proc_tracker *t, size_t *bytes, uint64_t *evictions);

/*
 * Location id of a user pc in pid. is_return: pc is a return address (the
 * caller's frame): the location is pc-1 so it names the call, not the next
 * instruction. Returns 0 or -errno; unmapped pcs get an [unknown] location.
 */
int proc_tracker__location(struct proc_tracker *t, uint32_t pid, uint64_t pc, bool is_return,
			   uint32_t *loc, uint64_t now_ns);

/*
 * True when pc lies in a file mapping of pid as last read: no read of the maps on a miss,
 * for values that may be data pointers (a CUDA launch's cudaKernel_t), not code.
 */
bool proc_tracker__file_mapped(struct proc_tracker *t, uint32_t pid, uint64_t pc);

/* For the unwinder: CFI table and bias of the object that maps pc. */
bool proc_tracker__find_cfi(struct proc_tracker *t, uint32_t pid, uint64_t pc,
			    const struct cfi_table **table, uint64_t *bias, uint64_t now_ns);

/*
 * For stack scanning, per stack word: the executable mapping holding addr or
 * the gap around it, from the maps known now (never read again here).
 */
void proc_tracker__span(struct proc_tracker *t, uint32_t pid, uint64_t addr,
			struct unwind_span *out);
/* Start of pid's executable mapping holding addr (a mapping_start_fn: ctx is the tracker). */
bool proc_tracker__mapping_start(void *tracker, uint32_t pid, uint64_t addr, uint64_t *start);
/*
 * The len (at most 16) code bytes just below pc in an executable file mapping:
 * from the file, or the process's memory when the file could not be opened.
 * Cached. False for anonymous memory or when unreadable.
 */
bool proc_tracker__code_before(struct proc_tracker *t, uint32_t pid, uint64_t pc, uint8_t *buf,
			       size_t len);

/*
 * True when pc lies in the entry stub (ELF e_entry) of its object: the
 * outermost frame of a process, even where the stub's CFI does not say so
 * (Debian's ld.so).
 */
bool proc_tracker__at_entry(struct proc_tracker *t, uint32_t pid, uint64_t pc, uint64_t ts);

/* A path that opens profile object obj now ("/proc/self/fd/N"), or NULL. */
const char *proc_tracker__object_path(struct proc_tracker *t, uint32_t obj);

/* Number of pids tracked and of distinct files opened. */
void proc_tracker__counts(const struct proc_tracker *t, uint32_t *pids, uint32_t *files);

#endif
