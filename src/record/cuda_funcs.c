// SPDX-License-Identifier: MIT
#include <string.h>

#include <linux/types.h>

#include "eprof_abi.h"
#include "model/gpu_event.h"
#include "cuda_funcs.h"

#define N -1
/* name, category, direction, async, bytes, bytes2, kind, ptr, out, name, shift */
#define LAUNCH(n, fn) { n, CUDA_CAT_LAUNCH, 0, true, N, N, N, fn, N, N, 0 }
#define COPY(n, dir, async, b, k) { n, CUDA_CAT_MEMCPY, dir, async, b, N, k, N, N, N, 0 }
#define SET(n, async, b, sh) { n, CUDA_CAT_MEMSET, 0, async, b, N, N, N, N, N, sh }
#define SYNC(n) { n, CUDA_CAT_SYNC, 0, false, N, N, N, N, N, N, 0 }
#define ALLOC(n, async, out, b) { n, CUDA_CAT_ALLOC, 0, async, b, N, N, N, out, N, 0 }
#define FREE(n, async, p, b) { n, CUDA_CAT_FREE, 0, async, b, N, N, p, N, N, 0 }

const struct cuda_func cuda_funcs[] = {
	/* launches: the runtime's host stub or the driver's function handle */
	LAUNCH("cudaLaunchKernel", 0),
	LAUNCH("cudaLaunchKernel_ptsz", 0),
	/* nvcc 13's <<<>>>: a cudaKernel_t from __cudaGetKernel, not a host stub */
	LAUNCH("__cudaLaunchKernel", 0),
	LAUNCH("__cudaLaunchKernel_ptsz", 0),
	LAUNCH("cudaLaunchCooperativeKernel", 0),
	LAUNCH("cudaLaunchKernelExC", 1),
	LAUNCH("cuLaunchKernel", 0),
	LAUNCH("cuLaunchKernel_ptsz", 0),
	LAUNCH("cuLaunchKernelEx", 1),
	LAUNCH("cuLaunchCooperativeKernel", 0),
	{ "cudaGraphLaunch", CUDA_CAT_GRAPH, 0, true, N, N, N, 0, N, N, 0 },
	{ "cuGraphLaunch", CUDA_CAT_GRAPH, 0, true, N, N, N, 0, N, N, 0 },
	/* copies: cudaMemcpy(dst, src, count, kind) */
	COPY("cudaMemcpy", 0, false, 2, 3),
	COPY("cudaMemcpyAsync", 0, true, 2, 3),
	COPY("cudaMemcpy_ptds", 0, false, 2, 3),
	COPY("cudaMemcpyAsync_ptsz", 0, true, 2, 3),
	COPY("cudaMemcpyToSymbol", GPU_COPY_HTOD, false, 2, 4),
	COPY("cudaMemcpyFromSymbol", GPU_COPY_DTOH, false, 2, 4),
	COPY("cudaMemcpyToSymbolAsync", GPU_COPY_HTOD, true, 2, 4),
	COPY("cudaMemcpyFromSymbolAsync", GPU_COPY_DTOH, true, 2, 4),
	COPY("cudaMemcpyPeer", GPU_COPY_PTOP, false, 4, N),
	COPY("cudaMemcpyPeerAsync", GPU_COPY_PTOP, true, 4, N),
	{ "cudaMemcpy2D", CUDA_CAT_MEMCPY, 0, false, 4, 5, 6, N, N, N, 0 },
	{ "cudaMemcpy2DAsync", CUDA_CAT_MEMCPY, 0, true, 4, 5, 6, N, N, N, 0 },
	COPY("cuMemcpy", 0, false, 2, N),
	COPY("cuMemcpyAsync", 0, true, 2, N),
	COPY("cuMemcpyHtoD_v2", GPU_COPY_HTOD, false, 2, N),
	COPY("cuMemcpyDtoH_v2", GPU_COPY_DTOH, false, 2, N),
	COPY("cuMemcpyDtoD_v2", GPU_COPY_DTOD, false, 2, N),
	COPY("cuMemcpyHtoDAsync_v2", GPU_COPY_HTOD, true, 2, N),
	COPY("cuMemcpyDtoHAsync_v2", GPU_COPY_DTOH, true, 2, N),
	COPY("cuMemcpyDtoDAsync_v2", GPU_COPY_DTOD, true, 2, N),
	COPY("cuMemcpyPeer", GPU_COPY_PTOP, false, 4, N),
	COPY("cuMemcpyPeerAsync", GPU_COPY_PTOP, true, 4, N),
	/* sets: cudaMemset(ptr, value, count); cuMemsetD32(ptr, value, N) sets 4N bytes */
	SET("cudaMemset", false, 2, 0),
	SET("cudaMemsetAsync", true, 2, 0),
	SET("cuMemsetD8_v2", false, 2, 0),
	SET("cuMemsetD16_v2", false, 2, 1),
	SET("cuMemsetD32_v2", false, 2, 2),
	SET("cuMemsetD8Async", true, 2, 0),
	SET("cuMemsetD16Async", true, 2, 1),
	SET("cuMemsetD32Async", true, 2, 2),
	/* synchronization */
	SYNC("cudaDeviceSynchronize"),
	SYNC("cudaStreamSynchronize"),
	SYNC("cudaEventSynchronize"),
	SYNC("cudaStreamWaitEvent"),
	SYNC("cuCtxSynchronize"),
	SYNC("cuStreamSynchronize"),
	SYNC("cuEventSynchronize"),
	SYNC("cuStreamWaitEvent"),
	/* memory: cudaMalloc(void **out, size) */
	ALLOC("cudaMalloc", false, 0, 1),
	ALLOC("cudaMallocAsync", true, 0, 1),
	ALLOC("cudaMallocHost", false, 0, 1),
	ALLOC("cudaMallocManaged", false, 0, 1),
	FREE("cudaFree", false, 0, N),
	FREE("cudaFreeAsync", true, 0, N),
	FREE("cudaFreeHost", false, 0, N),
	ALLOC("cuMemAlloc_v2", false, 0, 1),
	ALLOC("cuMemAllocAsync", true, 0, 1),
	ALLOC("cuMemAllocManaged", false, 0, 1),
	ALLOC("cuMemAllocHost_v2", false, 0, 1),
	FREE("cuMemFree_v2", false, 0, N),
	FREE("cuMemFreeAsync", true, 0, N),
	FREE("cuMemFreeHost", false, 0, N),
	/* virtual memory management (PyTorch's expandable segments) */
	ALLOC("cuMemCreate", false, 0, 1),
	FREE("cuMemRelease", false, 0, N),
	{ "cuMemMap", CUDA_CAT_ALLOC, 0, false, 1, N, N, 0, N, N, 0 },
	FREE("cuMemUnmap", false, 0, 1),
	/* function handles -> kernel names for driver launches */
	{ "cuModuleGetFunction", CUDA_CAT_HANDLE, 0, false, N, N, N, N, 0, 2, 0 },
	{ "cuLibraryGetKernel", CUDA_CAT_HANDLE, 0, false, N, N, N, N, 0, 2, 0 },
	{ "cuKernelGetFunction", CUDA_CAT_HANDLE, 0, false, N, N, N, 1, 0, N, 0 },
	/* __cudaGetKernel(cudaKernel_t *out, const void *host_stub): the stub names the kernel */
	{ "__cudaGetKernel", CUDA_CAT_HANDLE, 0, false, N, N, N, 1, 0, N, 0 },
};
const unsigned cuda_nfuncs = sizeof(cuda_funcs) / sizeof(cuda_funcs[0]);

int cuda_func_find(const char *name)
{
	for (unsigned i = 0; i < cuda_nfuncs; i++)
		if (!strcmp(cuda_funcs[i].name, name))
			return (int)i;
	return -1;
}

static uint64_t arg_bits(int8_t a, int shift)
{
	return (uint64_t)(a < 0 ? CUDA_ARG_NONE : (unsigned)a) << shift;
}

bool cuda_func_runtime(const struct cuda_func *f)
{
	const char *n = f->name;

	while (*n == '_')
		n++;
	return !strncmp(n, "cuda", 4);
}

uint64_t cuda_func_cookie(unsigned i)
{
	const struct cuda_func *f = &cuda_funcs[i];
	uint64_t cls = f->cat == CUDA_CAT_LAUNCH ? CUDA_CL_LAUNCH
		       : f->cat == CUDA_CAT_HANDLE ? CUDA_CL_HANDLE
						   : CUDA_CL_OTHER;

	return (uint64_t)i | cls << 16 | arg_bits(f->bytes, CUDA_CK_BYTES) |
	       arg_bits(f->bytes2, CUDA_CK_BYTES2) | arg_bits(f->kind, CUDA_CK_KIND) |
	       arg_bits(f->ptr, CUDA_CK_PTR) | arg_bits(f->out, CUDA_CK_OUT) |
	       arg_bits(f->name_arg, CUDA_CK_NAME) | (uint64_t)f->shift << CUDA_CK_SHIFT |
	       (cuda_func_runtime(f) ? CUDA_CK_RUNTIME : 0);
}

unsigned cuda_memcpy_kind_dir(uint32_t kind)
{
	/* cudaMemcpyHostToHost 0, HostToDevice 1, DeviceToHost 2, DeviceToDevice 3, Default 4 */
	switch (kind) {
	case 0: return GPU_COPY_HTOH;
	case 1: return GPU_COPY_HTOD;
	case 2: return GPU_COPY_DTOH;
	case 3: return GPU_COPY_DTOD;
	default: return GPU_COPY_UNKNOWN;
	}
}
