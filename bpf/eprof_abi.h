/* SPDX-License-Identifier: MIT */
/*
 * The one ABI header shared by BPF programs and userspace: event layouts in
 * the ring buffer. Only __u8..__u64 here; userspace checks sizes with
 * _Static_assert in src/record/events.c.
 */
#ifndef EPROF_ABI_H
#define EPROF_ABI_H

#ifndef EPROF_MAX_STACK
#define EPROF_MAX_STACK 127 /* kernel.perf_event_max_stack default */
#endif
#ifndef EPROF_MAX_SNAPSHOT
#define EPROF_MAX_SNAPSHOT (64 * 1024) /* largest user stack copy for DWARF unwinding */
#endif
#define EPROF_SCRATCH_SLOTS 4 /* scratch buffers per CPU (bpf/common.bpf.h) */
#ifndef EPROF_TASK_COMM_LEN
#define EPROF_TASK_COMM_LEN 16
#endif
#ifndef EPROF_PATH_LEN
#define EPROF_PATH_LEN 256
#endif

enum eprof_event_kind {
	EV_SAMPLE = 1,
	EV_FORK = 2,
	EV_EXEC = 3,
	EV_EXIT = 4,
	EV_LOST = 5,	      /* reserved */
	/* memory (bpf/mem.bpf.h): 16..31 */
	EV_MEM_FIRST = 16,
	EV_MEM_ALLOC = 16,  /* struct ev_mem_alloc */
	EV_MEM_FREE = 17,   /* struct ev_mem_free */
	EV_MEM_MMAP = 18,   /* struct ev_mem_map */
	EV_MEM_MUNMAP = 19, /* struct ev_mem_map */
	EV_MEM_LAST = 31,
	/* off-CPU and wakeups (bpf/offcpu.bpf.h): 32..39 */
	EV_OFFCPU_FIRST = 32,
	/* regions: uprobe pairs, USDT, NVTX (bpf/region.bpf.h): 40..47 */
	EV_REGION_FIRST = 40,
	/* CUDA API (bpf/cuda.bpf.h): 48..63 */
	EV_CUDA_FIRST = 48,
	/* Python frames (bpf/python.bpf.h): 64..71 */
	EV_PY_FIRST = 64,
};

/* Common header of every event: size covers the whole event, header included. */
struct ev_hdr {
	__u32 size;
	__u16 kind;
	__u16 flags;
	__u32 pid; /* tgid */
	__u32 tid;
	__u64 ts; /* CLOCK_MONOTONIC ns (bpf_ktime_get_ns) */
};

/* Flags in ev_hdr.flags of every event that carries a struct ev_stack (bits 0-7). */
enum ev_stack_flags {
	SAMPLE_F_USER_REGS = 1 << 0,   /* user_ip/sp/bp are valid */
	SAMPLE_F_IN_KERNEL = 1 << 1,   /* the CPU was in kernel mode */
	SAMPLE_F_SNAP_TRUNC = 1 << 2,  /* snapshot stopped at its size limit, not at a fault */
};
/* Bits 8-15 of ev_hdr.flags are free for each event kind. */

/*
 * The stack part of an event, always its LAST member: right after it come
 * __u64 ips[kstack_n + ustack_n] (kernel first, each leaf first), then
 * stack_len bytes copied from user_sp upwards when DWARF unwinding is on
 * (ustack_n is then 0: userspace unwinds). Filled by capture_stack() in
 * bpf/common.bpf.h, decoded by events_stack() in src/record/events.c.
 */
struct ev_stack {
	__u64 user_ip, user_sp, user_bp;
	__u16 kstack_n, ustack_n;
	__s32 kstack_err, ustack_err; /* negative errno from bpf_get_stack, or 0 */
	__u32 stack_len;
};

/* A CPU sample. */
struct ev_sample {
	struct ev_hdr h;
	__u64 period; /* ns of CPU this sample stands for */
	__u32 cpu;
	__u32 pad;
	char comm[EPROF_TASK_COMM_LEN];
	struct ev_stack st;
};

struct ev_fork {
	struct ev_hdr h; /* pid/tid: the child */
	__u32 ppid;
	__u32 pad;
	char comm[EPROF_TASK_COMM_LEN];
};

struct ev_exec {
	struct ev_hdr h;
	__u32 old_tid;
	__u32 pad;
	char comm[EPROF_TASK_COMM_LEN];
	char filename[EPROF_PATH_LEN];
};

struct ev_exit {
	struct ev_hdr h;
	__s32 exit_code; /* wait status style: code << 8 | signal */
	__u32 group_dead;
	char comm[EPROF_TASK_COMM_LEN];
};

/*
 * Memory: a sampled allocation, sent from the allocator's return with the
 * caller's stack (the leaf is the return address into the caller).
 */
struct ev_mem_alloc {
	struct ev_hdr h;
	__u64 addr;
	__u64 size;
	__u32 func; /* enum mem_func */
	__u32 pad;
	struct ev_stack st;
};

/* A free (or realloc) of an address recorded by an ev_mem_alloc. */
struct ev_mem_free {
	struct ev_hdr h;
	__u64 addr;
	__u64 size; /* size recorded at allocation */
};

/* An anonymous mmap or a munmap of a target. */
struct ev_mem_map {
	struct ev_hdr h;
	__u64 addr;
	__u64 len;
};

/* The allocator entry points, as the uprobe cookie. */
enum mem_func {
	MEM_MALLOC = 0,
	MEM_CALLOC,
	MEM_REALLOC,
	MEM_REALLOCARRAY,
	MEM_POSIX_MEMALIGN,
	MEM_ALIGNED_ALLOC,
	MEM_MEMALIGN,
	MEM_VALLOC,
	MEM_PVALLOC,
	MEM_FREE,
	MEM_NFUNCS,
};

/* Indexes of the per-CPU stats array: every failure in BPF is counted here. */
enum eprof_bpf_stat {
	BSTAT_SAMPLES = 0,     /* samples of target tasks seen */
	BSTAT_RB_FULL,	       /* sample dropped: ring buffer full */
	BSTAT_KSTACK_ERR,      /* bpf_get_stack (kernel) failed */
	BSTAT_USTACK_ERR,      /* bpf_get_stack (user) failed */
	BSTAT_SNAP_FAULT,      /* user stack snapshot could not be read at all */
	BSTAT_EVENT_RB_FULL,   /* fork/exec/exit event dropped */
	BSTAT_TARGETS_FULL,    /* a forked child could not be added to the target set */
	/* Features add their counters below, each in its own block. */
	/* memory (bpf/mem.bpf.h) */
	BSTAT_MEM_CALLS,      /* allocation calls seen */
	BSTAT_MEM_SAMPLED,    /* allocations sampled */
	BSTAT_MEM_FREES,      /* frees of sampled allocations matched */
	BSTAT_MEM_RB_FULL,    /* memory event dropped: ring buffer full */
	BSTAT_MEM_LIVE_FULL,  /* sampled allocation not tracked: live map full */
	BSTAT_MEM_DUP,	      /* nested allocator call returned an address already recorded */
	BSTAT_MAX
};

#endif
