/* SPDX-License-Identifier: MIT */
/*
 * The profile model: what `record` builds and every reader analyses.
 *
 * Tables are append-only with dense u32 ids so the file format can write
 * them incrementally (a chunk holds the entries added since the last one).
 *
 *  strings   interned, id 0 is ""
 *  objects   a binary or address space: ELF file (path + build-id), the
 *            kernel, a JIT perf map (per pid), the vDSO, anonymous memory
 *  locations (object, address): for ELF objects the address is a FILE OFFSET
 *            so the same code in two processes is one location; for the
 *            kernel and JIT maps it is the absolute address
 *  frames    symbolic frames of a location (function, file, line), leaf
 *            first, inline frames expanded; filled by symbolization
 *  stacks    a trie of locations, root first; node 0 is the empty root; a
 *            sample points at its leaf node
 *  samples   (time, pid, tid, cpu, stack, weight in ns)
 */
#ifndef EPROF_PROFILE_H
#define EPROF_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/hmap.h"
#include "util/strtab.h"
#include "util/vec.h"

enum object_kind {
	OBJ_ELF = 0,	 /* a mapped ELF file */
	OBJ_KERNEL = 1,	 /* kernel text and modules, addresses from kallsyms */
	OBJ_PERFMAP = 2, /* JIT code named in /tmp/perf-PID.map */
	OBJ_VDSO = 3,	 /* the vDSO image */
	OBJ_ANON = 4,	 /* anonymous or unmapped memory: never symbolized */
	OBJ_SPECIAL = 5, /* synthetic frames: [truncated], [lost] ... */
	OBJ_PYTHON = 6,	 /* Python functions: addr is an id per (function, file, line) */
	OBJ_KIND_MAX
};

enum frame_kind {
	FRAME_USER = 0,
	FRAME_KERNEL = 1,
	FRAME_JIT = 2,
	FRAME_UNKNOWN = 3,
	FRAME_SPECIAL = 4,
	FRAME_PYTHON = 5, /* a Python function: name = qualified name, file and line of the code */
};

struct object {
	uint32_t path;	   /* string id: file path as the target saw it, or "[kernel.kallsyms]" */
	uint32_t build_id; /* string id: lower-case hex, or 0 */
	uint32_t pid;	   /* owning pid for per-process objects (perf map), else 0 */
	uint8_t kind;	   /* enum object_kind */
};

struct location {
	uint32_t object;
	uint64_t addr;
	uint32_t frame_first; /* index into profile.frames, valid when frame_n > 0 */
	uint32_t frame_n;     /* 0 until symbolized */
};

struct frame {
	uint32_t name;	 /* string id: demangled function name without parameters */
	uint32_t module; /* string id: file name of the binary ("libc.so.6", "[kernel]") */
	uint32_t file;	 /* string id: source file, or 0 */
	uint32_t line;	 /* 0 when unknown */
	uint8_t kind;	 /* enum frame_kind */
	uint8_t inlined; /* 1 when this frame was inlined into the next (outer) one */
};

/*
 * Locations in one stack. The recorder writes at most ~770 (512 unwound user
 * frames, 128 Python frames, 127 kernel frames and markers); the reader
 * rejects deeper stacks as corruption and analyses that walk stacks rely on
 * the bound.
 */
#define PROFILE_MAX_STACK_DEPTH 2048

struct stack_node {
	uint32_t parent; /* node id, 0 for a root-level frame */
	uint32_t loc;	 /* location id */
	uint32_t depth;	 /* 1 for a root-level frame */
};

struct sample {
	uint64_t ts; /* CLOCK_MONOTONIC ns */
	uint32_t pid, tid, cpu;
	uint32_t stack; /* leaf node id; 0 = empty stack */
	uint64_t weight; /* ns of CPU time this sample stands for */
};

/*
 * Everything that is not a CPU sample: one table of typed events, so memory,
 * off-CPU, regions, counters and GPU activity share one encoding. What a, b,
 * c, name, stack2 and flags mean depends on kind (see docs/file-format.md).
 */
enum event_kind {
	EVK_COUNTER = 1,   /* name = counter, b = value at ts (pid 0: global) */
	EVK_LOST = 2,	   /* b samples, c other events lost in [ts - dur, ts] */
	/* memory (--mem) */
	EVK_ALLOC = 16,	   /* a = address, b = size, c = bytes this event stands for (sampling) */
	EVK_FREE = 17,	   /* a = address of a recorded allocation */
	EVK_MMAP = 18,	   /* a = address, b = length; flags MEM_F_REMAP: new place of an mremap */
	EVK_MUNMAP = 19,   /* a = address, b = length; flags MEM_F_REMAP: old place of an mremap */
	EVK_BRK = 20,	   /* a = program break before, b = after */
	/* wall-clock (--offcpu) */
	EVK_OFFCPU = 32,   /* ts..ts+dur blocked; flags = state; a = waker tid; b = wakeup ts;
			      c = waker pid; stack = blocking stack; stack2 = waker stack */
	EVK_REGION = 33,   /* ts..ts+dur; name = region; a = nesting depth (0 = outermost);
			      communication calls (EVF_REGION_COMM): b = bytes (0 unknown),
			      c = communicator (1, 2... in the order the process first used
			      them; 0 none) */
	EVK_IO = 34,	   /* --io: one read/write-like call, ts..ts+dur; name = the file or peer;
			      a = bytes; b = fd; flags = call and file type (model/io_event.h);
			      stack = the caller's user stack */
	/* GPU (CUDA API and CUPTI) */
	EVK_CUDA_API = 48, /* name = function; dur; a = result; b = bytes; c = address (alloc/free) */
	EVK_GPU_KERNEL = 49, /* name = kernel; a = device<<32|stream; b = blocks<<32|threads per
				block; c = correlation id; flags = registers per thread;
				tid = shared memory bytes per block (0, 0: not recorded) */
	EVK_GPU_MEMCPY = 50, /* b = bytes; flags = direction; a = device<<32|stream; c = correlation */
	EVK_GPU_MEMSET = 51, /* b = bytes; a = device<<32|stream; c = correlation id */
	EVK_CUDA_CORR = 52,  /* CUPTI saw API call c (correlation id) on tid at ts */
	EVK_GPU_SYNC = 53,   /* CUPTI synchronization: ts..ts+dur; a = device<<32|stream */
	EVK_GPU_DEVICE = 54, /* a device of process pid: name = its name, a = device id */
	EVK_GPU_DEVATTR = 55, /* one limit of device a of process pid: name = limit, b = value */
	EVK_KIND_MAX = 64,
};

/* Names of the root marker frames of Python samples: the sampled thread held the GIL or not. */
#define PY_GIL_HELD "[GIL]"
#define PY_GIL_NOT_HELD "[no GIL]"

/*
 * JIT code without a perf map is one frame per mapping: "[jit] MODULE" after the
 * module seen calling into it, else this prefix and the mapping's start address.
 */
#define JIT_ANON_PREFIX "[jit] anon@"

/* flags of EVK_REGION */
#define EVF_REGION_OPEN 1 /* still open when the record stopped: dur runs to the stop */
#define EVF_REGION_SAMPLED 2 /* seen by sampling (--region py:): times within a period */
/* a collective (MPI, NCCL, gloo) every rank of a communicator enters: matched across ranks */
#define EVF_REGION_COLL 4
/* a communication call (MPI, NCCL, gloo): b = bytes, c = communicator */
#define EVF_REGION_COMM 8

/* EVK_MMAP / EVK_MUNMAP flags: the pair written for one mremap (unmap first). */
#define MEM_F_REMAP 0x1

struct event {
	uint64_t ts;  /* CLOCK_MONOTONIC ns (start for intervals) */
	uint64_t dur; /* ns, 0 for instants */
	uint32_t pid, tid;
	uint32_t stack, stack2; /* stack nodes, 0 = none */
	uint32_t name;		/* string id, 0 = none */
	uint16_t kind;		/* enum event_kind */
	uint16_t flags;
	uint64_t a, b, c;
};

struct process {
	uint32_t pid, ppid;
	uint32_t comm;	  /* string id */
	uint32_t cmdline; /* string id, args separated by spaces */
	uint64_t start_ts, exit_ts; /* 0 when unknown / still running */
	int32_t exit_code;
};

struct thread {
	uint32_t pid, tid;
	uint32_t comm; /* latest name */
};

struct mapping {
	uint32_t pid;
	uint64_t start, end, pgoff;
	uint32_t object;
	uint64_t ts; /* when it was seen */
};

/* Counters: nothing is lost silently. Index names in profile_stat_names[]. */
enum profile_stat {
	STAT_SAMPLES_LOST = 0,	  /* ring buffer full in BPF */
	STAT_KSTACK_ERR,	  /* kernel stack could not be read */
	STAT_USTACK_ERR,	  /* user stack could not be read */
	STAT_UNWIND_NO_CFI,	  /* DWARF unwinding stopped: no CFI for a pc */
	STAT_UNWIND_TOO_DEEP,	  /* stack deeper than the limit */
	STAT_UNWIND_READ_FAULT,	  /* a frame lay outside the captured stack */
	STAT_UNWIND_BAD_FRAME,	  /* CFI gave an impossible CFA/return address */
	STAT_UNKNOWN_FRAMES,	  /* locations that could not be symbolized (counted per sample frame) */
	STAT_UNMAPPED_ADDR,	  /* user pc in no known mapping */
	STAT_EVENTS_LOST,	  /* non-sample events lost */
	STAT_DECODE_ERR,	  /* malformed events from BPF */
	/* off-CPU (--offcpu) */
	STAT_OFFCPU_SEEN,	  /* blocked intervals of target threads that ended */
	STAT_OFFCPU_SHORT,	  /* ... shorter than --offcpu-min-us, not recorded */
	STAT_OFFCPU_LOST,	  /* off-CPU or waker events dropped (ring buffer full) */
	STAT_OFFCPU_NO_STACK,	  /* intervals recorded without stacks (over --offcpu-stack-rate) */
	/* CUDA (uprobes and CUPTI) */
	STAT_CUDA_CALLS,	  /* CUDA API calls seen by the uprobes */
	STAT_CUDA_NOSTACK,	  /* CUDA launches recorded without a stack (--cuda-stack-rate) */
	STAT_CUDA_LOST,		  /* CUDA API events lost (ring buffer or in-flight map full) */
	STAT_GPU_RECORDS_LOST,	  /* CUPTI records the injection library could not deliver */
	STAT_GPU_BAD_RECORDS,	  /* malformed CUPTI messages or records */
	/* regions */
	STAT_REGIONS_LOST,	  /* regions not recorded: ring buffer full, nested too deep */
	STAT_REGIONS_UNMATCHED,	  /* region ends without a begin, begins never ended */
	/* python (src/record/python.c) */
	STAT_PY_SAMPLES,	  /* samples with Python frames */
	STAT_PY_NO_TSTATE,	  /* samples of a Python process from a thread with no known tstate */
	STAT_PY_READ_ERR,	  /* an interpreter frame could not be read in BPF */
	STAT_PY_TRUNC,		  /* Python stacks deeper than the 64-frame limit */
	STAT_PY_UNKNOWN,	  /* Python frames whose code object could not be read */
	/* memory (--mem) */
	STAT_MEM_CALLS,		  /* allocation calls seen by the uprobes */
	STAT_MEM_LOST,		  /* allocation/free events lost (ring buffer full) */
	STAT_MEM_UNTRACKED,	  /* sampled allocations the live map could not hold */
	STAT_OFFCPU_UNSAMPLED,	  /* intervals without stacks: not picked by --offcpu-sample-us */
	STAT_CUDA_UNTRACKED,	  /* CUDA calls not recorded: nested too deep, no per-thread state */
	STAT_CUDA_STALE,	  /* pending CUDA calls dropped: their return was never seen */
	STAT_GPU_ZERO_TIME,	  /* CUPTI records with a zero start or end (in flight): dropped */
	STAT_GPU_INVERTED_TIME,	  /* CUPTI records with end before start: dropped */
	STAT_GPU_FOREIGN_CLOCK,	  /* CUPTI records on another tool's clock: dropped */
	STAT_GPU_BUFFER_ERRORS,	  /* CUPTI activity buffers whose reading stopped on an error */
	STAT_UNWIND_SCANNED,	  /* stacks crossing code without CFI by scanning the stack */
	/* I/O by stack (--io) */
	STAT_IO_CALLS,		  /* I/O calls of targets that returned >= 0 */
	STAT_IO_LOST,		  /* I/O or file events lost (ring buffer full, no thread state) */
	STAT_IO_NO_STACK,	  /* I/O calls recorded without a stack (over --io-stack-rate) */
	STAT_IO_ERRORS,		  /* I/O calls that failed: not recorded */
	STAT_MAX
};
extern const char *const profile_stat_names[STAT_MAX];

struct meta_kv {
	uint32_t key, value; /* string ids */
};

struct profile {
	struct strtab *strs;
	VEC(struct object) objects;
	VEC(struct location) locations;
	VEC(struct frame) frames;
	VEC(struct stack_node) stacks;
	VEC(struct sample) samples;
	VEC(struct event) events; /* sorted by nothing: writers append in arrival order */
	VEC(struct process) procs;
	VEC(struct thread) threads;
	VEC(struct mapping) mappings;
	VEC(struct meta_kv) meta;
	uint64_t stats[STAT_MAX];

	/* lookup indexes (not serialized) */
	struct hmap *obj_index;   /* (path<<32|build_id, pid<<8|kind) -> object id */
	struct hmap *loc_index;   /* (object, addr) -> location id */
	struct hmap *stack_index; /* (parent, loc) -> node id */
	struct hmap *proc_index;  /* pid -> procs index */
	struct hmap *thread_index; /* tid -> threads index */
	struct hmap *meta_index;   /* key string id -> meta index */
	/* Readers never intern locations or stacks: these two indexes are built on first use. */
	bool loc_indexed, stack_indexed;
	/*
	 * Recorder only: stack ids below stacks_base were written and dropped from memory
	 * (profile__forget_stacks); stacks.v[i] holds id stacks_base + i. Always 0 in readers.
	 */
	uint32_t stacks_base;
	/*
	 * The last stacks interned through profile__stack_hint, one per slot (a thread's, say):
	 * a deep stack shares most of its root side with the one before it, whose nodes are
	 * then taken as they are. stack_epoch moves with profile__forget_stacks.
	 */
	struct stack_memo *stack_memo;
	uint64_t stack_epoch;
};

struct profile *profile__new(void);
void profile__free(struct profile *p);

static inline const char *profile__str(const struct profile *p, uint32_t id)
{
	return strtab__get(p->strs, id);
}
uint32_t profile__intern(struct profile *p, const char *s); /* 0 on ENOMEM or "" */

/* Interning of model entities; each returns the id (>= 1 for stacks), or -errno. */
int64_t profile__object(struct profile *p, enum object_kind kind, const char *path,
			const char *build_id, uint32_t pid);
int64_t profile__location(struct profile *p, uint32_t object, uint64_t addr);
/* locs[0] is the ROOT-most location, locs[n-1] the leaf. Returns the leaf node id. */
int64_t profile__stack(struct profile *p, const uint32_t *locs, size_t n);
int64_t profile__stack_child(struct profile *p, uint32_t parent, uint32_t loc);
/*
 * profile__stack, starting from the frames it shares with the last stack of the same hint
 * (any number: a thread id), whose nodes are remembered. The same ids, fewer lookups.
 */
int64_t profile__stack_hint(struct profile *p, uint32_t hint, const uint32_t *locs, size_t n);
/* Ids the stack table has handed out (including dropped ones). */
static inline uint64_t profile__stacks_end(const struct profile *p)
{
	return (uint64_t)p->stacks_base + p->stacks.n;
}
/*
 * Drops every stack node from memory and starts a fresh index: later stacks get new
 * ids even for paths seen before (readers merge them by their frames). The caller
 * must have written every node. Keeps a long record's memory flat when its stacks
 * never stop changing. Returns 0 or -ENOMEM.
 */
int profile__forget_stacks(struct profile *p);
/* Location id of a synthetic frame such as "[truncated]". */
int64_t profile__special(struct profile *p, const char *name);

struct process *profile__proc(struct profile *p, uint32_t pid, bool create);
struct thread *profile__thread(struct profile *p, uint32_t pid, uint32_t tid, bool create);
/* Lookups of readers (NULL when absent): they never create, so a const profile will do. */
static inline const struct process *profile__find_proc(const struct profile *p, uint32_t pid)
{
	return profile__proc((struct profile *)p, pid, false);
}

static inline const struct thread *profile__find_thread(const struct profile *p, uint32_t pid,
							uint32_t tid)
{
	return profile__thread((struct profile *)p, pid, tid, false);
}
int profile__add_sample(struct profile *p, const struct sample *s);
int profile__add_event(struct profile *p, const struct event *e);
int profile__add_mapping(struct profile *p, const struct mapping *m);
/*
 * Drops the processes that exited before `before` (CLOCK_MONOTONIC ns) and their threads
 * from memory, keeping the order of the others, and rebuilds the two indexes. For a
 * recorder that has written them: a long -a record meets thousands of processes. Returns
 * how many processes went, or -ENOMEM (the tables are then unchanged).
 */
int profile__drop_exited(struct profile *p, uint64_t before);
/*
 * Sorts event indexes idx[0..n) by time, ties by index (the order they were added), so
 * analyses replay events as they happened: the ring buffer delivers them per CPU in
 * order but interleaved across CPUs.
 */
void profile__sort_events(const struct profile *p, uint32_t *idx, size_t n);

int profile__set_meta(struct profile *p, const char *key, const char *value);
const char *profile__meta(const struct profile *p, const char *key); /* NULL if unset */
uint64_t profile__meta_u64(const struct profile *p, const char *key, uint64_t dflt);

/* After loading: rebuild the lookup indexes from the tables. */
int profile__reindex(struct profile *p);

/* Frames of a location, leaf (innermost inline) first. n = 0 when unsymbolized. */
static inline const struct frame *profile__loc_frames(const struct profile *p, uint32_t loc,
						      uint32_t *n)
{
	const struct location *l = &p->locations.v[loc];

	*n = l->frame_n;
	return l->frame_n ? &p->frames.v[l->frame_first] : NULL;
}

/* Human-readable module name (file name) of an object. */
const char *profile__object_module(const struct profile *p, uint32_t object);

#endif
