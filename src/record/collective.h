/* SPDX-License-Identifier: MIT */
/*
 * Communication calls timed as regions when a target maps an MPI, NCCL or gloo library:
 * which functions, where their count, datatype and communicator arguments are, and the
 * bytes a (count, datatype) pair stands for. Pure tables and arithmetic: region.c attaches
 * the probes and tests read the tables.
 */
#ifndef EPROF_COLLECTIVE_H
#define EPROF_COLLECTIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum coll_family {
	COLL_NONE = -1,
	COLL_MPI = 0,	/* libmpi.so (Open MPI), libmpich.so (MPICH) */
	COLL_NCCL = 1,	/* libnccl.so */
	COLL_GLOO = 2,	/* libgloo.so (PyTorch's gloo process group) */
};

struct coll_fn {
	const char *sym;  /* the symbol probed */
	const char *name; /* the region's name */
	/* argument positions (1-based, 0 none) of the element count, datatype, communicator */
	uint8_t count, type, comm;
	bool collective; /* every rank of the communicator calls it: matched across ranks */
};

/* The family of a library by its file name, or COLL_NONE. */
enum coll_family coll_family_of(const char *path);
/* The functions probed for a family (n entries). */
const struct coll_fn *coll_fns(enum coll_family f, size_t *n);
/* An NCCL datatype's size in bytes (ncclDataType_t), 0 when unknown. */
unsigned coll_nccl_type_size(uint64_t type);
/* An MPICH builtin datatype handle's size in bytes (encoded in the handle), 0 otherwise. */
unsigned coll_mpich_type_size(uint64_t type);
/* Open MPI's predefined datatype objects: symbol i's name and its element size. */
size_t coll_ompi_ntypes(void);
const char *coll_ompi_type_sym(size_t i, unsigned *size);

#endif
