/* SPDX-License-Identifier: MIT */
/*
 * What libeprof_mem.so (src/agent/eprof_mem.c) and the recorder (src/record/mem.c) agree
 * on: the environment that configures the interposer, and its two marker functions, on
 * which the recorder puts uprobes. docs/memory.md.
 */
#ifndef EPROF_MEM_PROTO_H
#define EPROF_MEM_PROTO_H

/* Mean bytes between samples (decimal); 1: every allocation. Absent or 0: inert. */
#define EMEM_ENV_SAMPLE "EPROF_MEM_SAMPLE"

/*
 * void eprof_mem_hit_alloc(void *ptr, size_t size, unsigned func, unsigned long calls):
 * a sampled allocation (ptr NULL: only a count), called after the allocator returned.
 * func is enum mem_func of bpf/eprof_abi.h (same values below); calls is the number of
 * allocator calls this thread made since its last hit (the recorder's "calls seen").
 */
#define EMEM_HIT_ALLOC "eprof_mem_hit_alloc"
/* void eprof_mem_hit_free(void *ptr): a sampled block being freed, called before the free. */
#define EMEM_HIT_FREE "eprof_mem_hit_free"
/*
 * void eprof_mem_hit_frees(const struct emem_free *v, unsigned long n): every-call mode
 * (EPROF_MEM_SAMPLE=1): n frees (n <= EMEM_FREE_BATCH) a thread made, each with the
 * CLOCK_MONOTONIC time taken before the block went back to the allocator. A thread's frees
 * are sent in batches (when its batch is full, when it exits, at the process's exit and at
 * the retract), not one trap each; the reader orders every event by time.
 */
#define EMEM_HIT_FREES "eprof_mem_hit_frees"
#define EMEM_FREE_BATCH 128

struct emem_free {
	unsigned long long addr;
	unsigned long long ns; /* CLOCK_MONOTONIC, as bpf_ktime_get_ns */
};

/*
 * Attach mode: eprof's injector loads the library from a memfd of this name and calls
 * int eprof_mem_attach(struct emem_attach_arg *) (0, or -errno); at the end
 * int eprof_mem_retract(uint64_t) restores what it patched (returns how many entries) and
 * leaves the library loaded, inert; -EBUSY when a lock it needs stayed taken 100 ms (it
 * never waits longer): eprof calls it again, in another thread.
 */
#define EMEM_MEMFD "eprof-mem"
#define EMEM_ATTACH "eprof_mem_attach"
#define EMEM_RETRACT "eprof_mem_retract"

struct emem_attach_arg {
	unsigned long long mean; /* bytes between samples; 1: every allocation */
	char sock[64];		 /* every-call mode: EMEM_ENV_SOCK's path, or empty */
	/*
	 * Every-call mode under -p: this process's end of a socket pair the injector made in
	 * it, or -1. It is the channel (no name to reach: any mount namespace); sock, when
	 * set, is for the children it forks. The library owns it: closed when it refuses.
	 */
	int chan_fd;
	unsigned pad;
};

enum emem_func {
	EMEM_MALLOC = 0,
	EMEM_CALLOC,
	EMEM_REALLOC,
	EMEM_REALLOCARRAY,
	EMEM_POSIX_MEMALIGN,
	EMEM_ALIGNED_ALLOC,
	EMEM_MEMALIGN,
	EMEM_VALLOC,
	EMEM_PVALLOC,
};

/*
 * Every-call mode through a channel (EPROF_MEM_SAMPLE=1 and EMEM_ENV_SOCK set): no trap per
 * call. The library connects to the recorder's unix socket (SOCK_SEQPACKET: each
 * message arrives whole, in order, and a send blocks while the recorder's queue is full, so
 * nothing is dropped) and sends messages of at most EMEM_MSG_MAX bytes:
 *   EMEM_MSG_RECS   a thread's records (struct emem_rec), in the order it made the calls
 *   EMEM_MSG_STACK  a new stack: id, leaf-first return addresses, unwound in the process;
 *                   sent before any record that uses the id (ids are per connection)
 *   EMEM_MSG_END    the retract (attach mode): nothing more comes on this connection
 *   EMEM_MSG_SYNC   the process's exit: the recorder answers one byte once it decoded
 *                   everything before it (its stacks are named while the maps are there)
 * and the recorder sends the library one message: EMEM_MSG_PYLAYOUT, the interpreter layout
 * (struct py_proc of bpf/eprof_abi.h) once it found CPython in the process; the library then
 * appends the thread's Python frames to each stack, as bpf/python.bpf.h does.
 * A forked child opens its own connection; exec starts a new one.
 */
/* The recorder's socket: /tmp/eprof-mem-PID-XXXXXX/sock, in a 0700 directory of the user's */
#define EMEM_ENV_SOCK "EPROF_MEM_SOCK"
#define EMEM_MSG_MAX 4096
#define EMEM_MSG_MAGIC 0x4d454d45u /* "EMEM" */
#define EMEM_STACK_MAX 127	   /* native frames in one stack message */
#define EMEM_PY_MAX 128		   /* Python frames (PY_MAX_FRAMES) */
#define EMEM_STACK_TRUNC 1	   /* emem_stack.flags: the unwind stopped before the root */
#define EMEM_STACK_PY_TRUNC 2	   /* emem_stack.flags: Python frames beyond EMEM_PY_MAX */

enum emem_msg_kind {
	EMEM_MSG_RECS = 1,
	EMEM_MSG_STACK = 2,
	EMEM_MSG_END = 3,
	EMEM_MSG_SYNC = 4,
	EMEM_MSG_PYLAYOUT = 5, /* recorder -> library */
};
enum emem_op { EMEM_OP_ALLOC = 1, EMEM_OP_FREE = 2 };

struct emem_msg {
	unsigned int magic;
	unsigned short kind; /* enum emem_msg_kind */
	unsigned short n;    /* records, or frames */
	unsigned int pid, tid;
};

struct emem_rec {
	unsigned long long ptr;
	unsigned long long ns;	 /* CLOCK_MONOTONIC */
	unsigned long long size; /* allocations */
	unsigned int stack;	 /* allocations: stack id (0: none) */
	unsigned char op;	 /* enum emem_op */
	unsigned char func;	 /* enum emem_func */
	unsigned short pad;
};

struct emem_stack {
	unsigned int id;
	unsigned short flags; /* EMEM_STACK_TRUNC, EMEM_STACK_PY_TRUNC */
	unsigned short npy;   /* Python frames */
	unsigned long long ns;
	/*
	 * then unsigned long long ips[n], leaf first: the caller of malloc first; then npy
	 * (code | entry bit, instr) pairs, leaf first (struct py_frame_rec)
	 */
};

#define EMEM_RECS_PER_MSG ((EMEM_MSG_MAX - sizeof(struct emem_msg)) / sizeof(struct emem_rec))

#endif
