// SPDX-License-Identifier: MIT
#include <string.h>

#include "collective.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

/*
 * Argument positions from the MPI 4.0 C bindings. MPI_Alltoallv and MPI_Reduce_scatter take
 * counts per rank (an array: no byte count), and communicators past the 8th argument are not
 * read. Nonblocking calls return at once: they are regions but not matched as collectives.
 */
static const struct coll_fn mpi_fns[] = {
	{ "MPI_Allreduce", "MPI_Allreduce", 3, 4, 6, true },
	{ "MPI_Reduce", "MPI_Reduce", 3, 4, 7, true },
	{ "MPI_Bcast", "MPI_Bcast", 2, 3, 5, true },
	{ "MPI_Barrier", "MPI_Barrier", 0, 0, 1, true },
	{ "MPI_Allgather", "MPI_Allgather", 2, 3, 7, true },
	{ "MPI_Allgatherv", "MPI_Allgatherv", 2, 3, 8, true },
	{ "MPI_Alltoall", "MPI_Alltoall", 2, 3, 7, true },
	{ "MPI_Alltoallv", "MPI_Alltoallv", 0, 4, 0, true },
	{ "MPI_Reduce_scatter", "MPI_Reduce_scatter", 0, 4, 6, true },
	{ "MPI_Reduce_scatter_block", "MPI_Reduce_scatter_block", 3, 4, 6, true },
	{ "MPI_Gather", "MPI_Gather", 2, 3, 8, true },
	{ "MPI_Scatter", "MPI_Scatter", 5, 6, 8, true },
	{ "MPI_Iallreduce", "MPI_Iallreduce", 3, 4, 6, false },
	{ "MPI_Ibcast", "MPI_Ibcast", 2, 3, 5, false },
	{ "MPI_Ibarrier", "MPI_Ibarrier", 0, 0, 1, false },
	{ "MPI_Ireduce", "MPI_Ireduce", 3, 4, 7, false },
	{ "MPI_Iallgather", "MPI_Iallgather", 2, 3, 7, false },
	{ "MPI_Send", "MPI_Send", 2, 3, 6, false },
	{ "MPI_Ssend", "MPI_Ssend", 2, 3, 6, false },
	{ "MPI_Recv", "MPI_Recv", 2, 3, 6, false },
	{ "MPI_Isend", "MPI_Isend", 2, 3, 6, false },
	{ "MPI_Irecv", "MPI_Irecv", 2, 3, 6, false },
	{ "MPI_Sendrecv", "MPI_Sendrecv", 2, 3, 0, false },
	{ "MPI_Wait", "MPI_Wait", 0, 0, 0, false },
	{ "MPI_Waitall", "MPI_Waitall", 0, 0, 0, false },
	{ "MPI_Waitany", "MPI_Waitany", 0, 0, 0, false },
	{ "MPI_Waitsome", "MPI_Waitsome", 0, 0, 0, false },
};

/*
 * NCCL 2.x (nccl.h). The calls enqueue work on a CUDA stream and return: their regions are
 * the enqueue, and the ranks' arrivals (call starts) still order the instances.
 */
static const struct coll_fn nccl_fns[] = {
	{ "ncclAllReduce", "ncclAllReduce", 3, 4, 6, true },
	{ "ncclReduceScatter", "ncclReduceScatter", 3, 4, 6, true },
	{ "ncclAllGather", "ncclAllGather", 3, 4, 5, true },
	{ "ncclBroadcast", "ncclBroadcast", 3, 4, 6, true },
	{ "ncclBcast", "ncclBcast", 2, 3, 5, true },
	{ "ncclReduce", "ncclReduce", 3, 4, 7, true },
	{ "ncclSend", "ncclSend", 2, 3, 5, false },
	{ "ncclRecv", "ncclRecv", 2, 3, 5, false },
	{ "ncclGroupStart", "ncclGroupStart", 0, 0, 0, false },
	{ "ncclGroupEnd", "ncclGroupEnd", 0, 0, 0, false },
};

/*
 * gloo's collective entry points (C++, by mangled name), run by PyTorch's gloo process group
 * on its worker threads: from this rank's arrival to the collective's end. Their options
 * objects are opaque here: no byte counts.
 */
static const struct coll_fn gloo_fns[] = {
	{ "_ZN4gloo9allreduceERKNS_16AllreduceOptionsE", "gloo::allreduce", 0, 0, 0, true },
	{ "_ZN4gloo7barrierERNS_14BarrierOptionsE", "gloo::barrier", 0, 0, 0, true },
	{ "_ZN4gloo9broadcastERNS_16BroadcastOptionsE", "gloo::broadcast", 0, 0, 0, true },
	{ "_ZN4gloo9allgatherERNS_16AllgatherOptionsE", "gloo::allgather", 0, 0, 0, true },
	{ "_ZN4gloo10allgathervERNS_17AllgathervOptionsE", "gloo::allgatherv", 0, 0, 0, true },
	{ "_ZN4gloo6reduceERNS_13ReduceOptionsE", "gloo::reduce", 0, 0, 0, true },
	{ "_ZN4gloo8alltoallERNS_15AlltoallOptionsE", "gloo::alltoall", 0, 0, 0, true },
	{ "_ZN4gloo9alltoallvERNS_16AlltoallvOptionsE", "gloo::alltoallv", 0, 0, 0, true },
	{ "_ZN4gloo6gatherERNS_13GatherOptionsE", "gloo::gather", 0, 0, 0, true },
	{ "_ZN4gloo7scatterERNS_14ScatterOptionsE", "gloo::scatter", 0, 0, 0, true },
};

static bool has_prefix(const char *bn, const char *lib)
{
	size_t n = strlen(lib);

	return !strncmp(bn, lib, n) && (bn[n] == '.' || bn[n] == '\0');
}

enum coll_family coll_family_of(const char *path)
{
	const char *bn = strrchr(path, '/');

	bn = bn ? bn + 1 : path;
	if (has_prefix(bn, "libmpi") || has_prefix(bn, "libmpich"))
		return COLL_MPI;
	if (has_prefix(bn, "libnccl"))
		return COLL_NCCL;
	if (has_prefix(bn, "libgloo"))
		return COLL_GLOO;
	return COLL_NONE;
}

const struct coll_fn *coll_fns(enum coll_family f, size_t *n)
{
	switch (f) {
	case COLL_MPI:
		*n = N(mpi_fns);
		return mpi_fns;
	case COLL_NCCL:
		*n = N(nccl_fns);
		return nccl_fns;
	case COLL_GLOO:
		*n = N(gloo_fns);
		return gloo_fns;
	default:
		*n = 0;
		return NULL;
	}
}

unsigned coll_nccl_type_size(uint64_t type)
{
	/* int8, uint8, int32, uint32, int64, uint64, float16, float32, float64, bfloat16,
	 * float8 e4m3, float8 e5m2 */
	static const unsigned size[] = { 1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1 };

	return type < N(size) ? size[type] : 0;
}

unsigned coll_mpich_type_size(uint64_t type)
{
	/* MPICH handles: kind in bits 30-31 (1 = builtin), a builtin's size in bits 8-15 */
	if (type >> 32 || (type >> 30) != 1)
		return 0;
	return (type >> 8) & 0xff;
}

static const struct {
	const char *sym;
	unsigned size;
} ompi_types[] = {
	{ "ompi_mpi_char", 1 },
	{ "ompi_mpi_signed_char", 1 },
	{ "ompi_mpi_unsigned_char", 1 },
	{ "ompi_mpi_byte", 1 },
	{ "ompi_mpi_short", 2 },
	{ "ompi_mpi_unsigned_short", 2 },
	{ "ompi_mpi_int", 4 },
	{ "ompi_mpi_unsigned", 4 },
	{ "ompi_mpi_long", 8 },
	{ "ompi_mpi_unsigned_long", 8 },
	{ "ompi_mpi_long_long_int", 8 },
	{ "ompi_mpi_unsigned_long_long", 8 },
	{ "ompi_mpi_float", 4 },
	{ "ompi_mpi_double", 8 },
	{ "ompi_mpi_long_double", 16 },
	{ "ompi_mpi_int8_t", 1 },
	{ "ompi_mpi_uint8_t", 1 },
	{ "ompi_mpi_int16_t", 2 },
	{ "ompi_mpi_uint16_t", 2 },
	{ "ompi_mpi_int32_t", 4 },
	{ "ompi_mpi_uint32_t", 4 },
	{ "ompi_mpi_int64_t", 8 },
	{ "ompi_mpi_uint64_t", 8 },
	{ "ompi_mpi_c_bool", 1 },
	{ "ompi_mpi_c_float_complex", 8 },
	{ "ompi_mpi_c_double_complex", 16 },
	{ "ompi_mpi_2int", 8 },
	{ "ompi_mpi_float_int", 8 },
	{ "ompi_mpi_double_int", 12 },
	{ "ompi_mpi_long_int", 12 },
	{ "ompi_mpi_short_int", 6 },
};

size_t coll_ompi_ntypes(void)
{
	return N(ompi_types);
}

const char *coll_ompi_type_sym(size_t i, unsigned *size)
{
	if (i >= N(ompi_types))
		return NULL;
	*size = ompi_types[i].size;
	return ompi_types[i].sym;
}
