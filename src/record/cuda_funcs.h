/* SPDX-License-Identifier: MIT */
/* The CUDA runtime and driver functions eprof traces, and where their arguments are. */
#ifndef EPROF_CUDA_FUNCS_H
#define EPROF_CUDA_FUNCS_H

#include <stdbool.h>
#include <stdint.h>

struct cuda_func {
	const char *name;
	uint8_t cat;	  /* enum cuda_category */
	uint8_t dir;	  /* enum gpu_copy_dir fixed by the function, or 0 */
	bool async;
	int8_t bytes, bytes2, kind, ptr, out, name_arg; /* argument index, -1 = none */
	uint8_t shift;	  /* bytes <<= shift (cuMemsetD16/D32) */
};

extern const struct cuda_func cuda_funcs[];
extern const unsigned cuda_nfuncs;

/* Index of a function by exact symbol name, or -1. */
int cuda_func_find(const char *name);
/* A runtime (cuda*, __cuda*) function, not a driver (cu*) one. */
bool cuda_func_runtime(const struct cuda_func *f);
/* The BPF attach cookie of function i (eprof_abi.h layout). */
uint64_t cuda_func_cookie(unsigned i);
/* Direction of a copy from a cudaMemcpyKind argument value. */
unsigned cuda_memcpy_kind_dir(uint32_t kind);

#endif
