/* SPDX-License-Identifier: MIT */
/*
 * What the flags of the GPU event kinds (EVK_CUDA_API .. EVK_CUDA_CORR in
 * profile.h) mean; shared by the recorder and the readers.
 */
#ifndef EPROF_GPU_EVENT_H
#define EPROF_GPU_EVENT_H

/* EVK_CUDA_API flags bits 0-3: what the function does. */
enum cuda_category {
	CUDA_CAT_OTHER = 0,
	CUDA_CAT_LAUNCH = 1,
	CUDA_CAT_MEMCPY = 2,
	CUDA_CAT_MEMSET = 3,
	CUDA_CAT_SYNC = 4,
	CUDA_CAT_ALLOC = 5,  /* c = address allocated (mapped for cuMemMap) */
	CUDA_CAT_FREE = 6,   /* c = address freed (unmapped for cuMemUnmap) */
	CUDA_CAT_HANDLE = 7, /* cuModuleGetFunction & co */
	CUDA_CAT_GRAPH = 8,  /* graph launches */
};

/* EVK_CUDA_API flags bits 4-7 and EVK_GPU_MEMCPY flags bits 0-3: copy direction. */
enum gpu_copy_dir {
	GPU_COPY_UNKNOWN = 0,
	GPU_COPY_HTOD = 1,
	GPU_COPY_DTOH = 2,
	GPU_COPY_DTOD = 3,
	GPU_COPY_HTOH = 4,
	GPU_COPY_PTOP = 5, /* peer to peer */
	GPU_COPY_DIR_MAX
};

#define CUDA_API_CAT(flags) ((flags) & 0xf)
#define CUDA_API_DIR(flags) (((flags) >> 4) & 0xf)
#define CUDA_API_F_NESTED (1u << 8)  /* inside another traced CUDA call: not counted twice */
#define CUDA_API_F_NOSTACK (1u << 9) /* stack left out by --cuda-stack-rate */
#define CUDA_API_F_ASYNC (1u << 10)
#define CUDA_API_F_FAILED (1u << 11) /* result != 0 */
#define CUDA_API_F_NODUR (1u << 12)  /* launch seen at entry only: dur and result unknown (0) */

/*
 * EVK_GPU_KERNEL flags: bits 0-14 the registers per thread of the launch (0: not recorded);
 * bit 15: launched before the CUPTI collector attached (record -p), so no launch can be
 * joined to it.
 */
#define GPU_KERNEL_REGS_MAX 0x7fffu
#define GPU_KERNEL_REGS(flags) ((flags) & GPU_KERNEL_REGS_MAX)
#define GPU_KERNEL_F_BEFORE_ATTACH (1u << 15)

/*
 * EVK_GPU_DEVATTR names: the device limits CUPTI reports (CUpti_ActivityDevice5), one event
 * each. Readers ignore names they do not know, so limits can be added.
 */
#define GPU_ATTR_LIST(X)                                                                           \
	X(sm_count, "sm_count")                                                                    \
	X(warp_size, "warp_size")                                                                  \
	X(max_warps_per_sm, "max_warps_per_sm")                                                    \
	X(max_blocks_per_sm, "max_blocks_per_sm")                                                  \
	X(max_threads_per_block, "max_threads_per_block")                                          \
	X(max_regs_per_sm, "max_regs_per_sm")                                                      \
	X(max_regs_per_block, "max_regs_per_block")                                                \
	X(max_smem_per_sm, "max_smem_per_sm")                                                      \
	X(max_smem_per_block, "max_smem_per_block")                                                \
	X(cc_major, "cc_major")                                                                    \
	X(cc_minor, "cc_minor")                                                                    \
	X(global_mem, "global_mem_bytes")

static inline const char *gpu_copy_dir_name(unsigned d)
{
	static const char *const n[] = { "unknown", "HtoD", "DtoH", "DtoD", "HtoH", "PtoP" };

	return d < GPU_COPY_DIR_MAX ? n[d] : "unknown";
}

#endif
