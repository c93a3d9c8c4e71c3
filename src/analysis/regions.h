/* SPDX-License-Identifier: MIT */
/*
 * Timed regions (EVK_REGION events): nesting per thread, a tree of region
 * names (children under parents, recursion folded into its outermost
 * instance), per-node statistics, instance lookup and per-thread time
 * ranges for restricting samples to the inside of a region.
 */
#ifndef EPROF_REGIONS_H
#define EPROF_REGIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hot.h"

struct region_inst {
	uint64_t start, end;
	uint32_t pid, tid, name;
	int32_t parent;	   /* enclosing instance on the same thread, -1 for none */
	uint32_t node;	   /* index into region_set.nodes */
	uint32_t depth;	   /* enclosing instances on the same thread, 0 for none */
	uint64_t child_ns; /* time inside direct child regions */
	bool open;	   /* still open when the record stopped */
	bool sampled;	   /* seen by sampling (--region py:): times within a period */
	bool recursive;	   /* an enclosing instance has the same name */
	bool collective;   /* a collective matched across ranks (MPI, NCCL, gloo) */
	bool comm_call;	   /* a communication call (MPI, NCCL, gloo) */
	uint32_t comm;	   /* ... its communicator number, 0: none */
	uint64_t bytes;	   /* ... and its bytes (0 unknown) */
	uint64_t seq;	   /* ... its number among its process's calls of that name and
			      communicator (1, 2...): call k of every rank is one instance */
};

struct region_node {
	uint32_t name;	/* string id */
	int32_t parent; /* node index, -1 at the top */
	uint32_t depth; /* 0 at the top */
	uint64_t count;	   /* instances, recursive ones included */
	uint64_t total_ns; /* sum over instances not inside another of the same node */
	uint64_t self_ns;  /* total minus time in child regions */
	uint64_t min_ns, max_ns, p50_ns, p90_ns, p99_ns; /* of the instances' durations */
	double mean_ns, std_ns;
	uint64_t open; /* instances cut by the end of the record */
	uint64_t sampled; /* instances seen by sampling: counts and times estimated */
};

struct region_set {
	struct region_inst *inst; /* by thread, then start */
	size_t n;
	struct region_node *nodes; /* depth-first: parents first, siblings by total desc */
	size_t nnodes;
};

/* Instances matching f (pid, tid; start inside the time window). Returns 0 or -errno. */
int regions_build(const struct profile *p, const struct sample_filter *f, struct region_set *out);
void region_set__free(struct region_set *s);

/* Statistics of a list of durations (sorted in place). */
void region_stats(uint64_t *durs, size_t n, struct region_node *out);

struct region_span {
	uint32_t pid, tid;
	uint64_t start, end;
};
/*
 * Instance n of region name, all threads, ordered by start time: n = 0 the
 * first, n < 0 from the end (-1 the last). Returns 0, -ENOENT or -ENOMEM.
 */
int regions_instance(const struct profile *p, const char *name, long n, struct region_span *out);
/* Number of instances of name. */
size_t regions_count(const struct profile *p, const char *name);

/* The time ranges of a region name on each thread (nested instances merged). */
struct region_ranges;
struct region_ranges *region_ranges__new(const struct profile *p, const char *name);
void region_ranges__free(struct region_ranges *r);
size_t region_ranges__n(const struct region_ranges *r);
/* For sample_filter.match: is the sample inside a range of its thread? */
bool region_ranges__match(const void *r, const struct sample *s);

#endif
