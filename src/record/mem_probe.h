/* SPDX-License-Identifier: MIT */
/*
 * Where to put the allocator uprobes: the entry points an ELF file exports
 * and, for each, an offset whose instruction the kernel emulates (a
 * single-stepped first instruction costs ~15x more here) while the
 * argument registers still hold the arguments. No BPF here, so tests can
 * feed it code bytes and fixture ELFs.
 */
#ifndef EPROF_MEM_PROBE_H
#define EPROF_MEM_PROBE_H

#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>

#include "eprof_abi.h"

struct mem_probe_set {
	int n;
	uint64_t offsets[MEM_NFUNCS]; /* file offsets of the probed instructions */
	uint64_t cookies[MEM_NFUNCS]; /* enum mem_func */
	uint32_t skipped[MEM_NFUNCS]; /* bytes skipped at the function start */
	int free_idx;		      /* index of free, -1 if none */
};

extern const char *const mem_func_names[MEM_NFUNCS];

/*
 * Offset in code[0..n) of the first instruction the kernel emulates (push,
 * jcc, jmp, call, nop), reached only through instructions that neither
 * branch nor write a register (test, cmp, endbr64); 0 when the code starts
 * with one or the prefix is not recognised (then the start is probed).
 */
uint32_t mem_probe_offset(const uint8_t *code, size_t n);

/*
 * Reads the allocator functions path defines (dynamic or static symbol
 * table). Aliases (memalign = aligned_alloc) are probed once. Returns 0
 * with set->n == 0 when the file has no malloc+free, or -errno.
 */
int mem_probe_find(const char *path, struct mem_probe_set *set);

#define MEM_PROBE_NAMED_MAX 16

/*
 * File offsets of the functions names[0..n) (n <= MEM_PROBE_NAMED_MAX) that path defines
 * (dynamic or static symbol table), 0 for each it does not. Returns how many it found, or
 * -errno (-EINVAL for n out of range).
 */
int mem_probe_named(const char *path, const char *const *names, int n, uint64_t *offs);

/* Bytes an allocation of size bytes stands for when sampled with mean `mean` (1 = all). */
uint64_t mem_sample_weight(uint64_t size, uint64_t mean);

#endif
