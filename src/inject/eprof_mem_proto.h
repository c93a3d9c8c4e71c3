/* SPDX-License-Identifier: MIT */
/*
 * What libeprof_mem.so (src/inject/eprof_mem.c) and the recorder (src/record/mem.c) agree
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
 * leaves the library loaded, inert.
 */
#define EMEM_MEMFD "eprof-mem"
#define EMEM_ATTACH "eprof_mem_attach"
#define EMEM_RETRACT "eprof_mem_retract"

struct emem_attach_arg {
	unsigned long long mean; /* bytes between samples; 1: every allocation */
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

#endif
