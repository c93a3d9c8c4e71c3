/* SPDX-License-Identifier: MIT */
/*
 * The recordings of one job's ranks together: who they are, one clock for all of them, the
 * collective calls matched across ranks (instance k of an operation on a communicator on
 * every rank), how long each rank waited in them for the last one to arrive, and the rank
 * that arrives last (the straggler) with what it ran meanwhile.
 *
 * Clocks: each file keeps a CLOCK_MONOTONIC/CLOCK_REALTIME pair (record/job.c); a file's
 * times go onto the job's timeline through its realtime offset. Ranks on another host than
 * the first rank are then corrected by the median gap between the ends of their matched
 * blocking collectives and the first rank's (a collective ends at nearly the same moment on
 * every rank), and the size of that correction is said.
 */
#ifndef EPROF_RANKS_H
#define EPROF_RANKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/profile.h"

struct rank_info {
	const struct profile *p;
	const char *path;
	int rank, local_rank, world_size; /* -1: not recorded */
	const char *host, *job_id, *command;
	bool has_clock;		/* the file has a realtime mapping */
	int64_t offset_ns;	/* monotonic ts + offset_ns = ns on the job's clock (the first
				   rank's monotonic clock) */
	int64_t correction_ns;	/* the part of offset_ns from matching collective ends */
	double wall_s, cpu_s;
	double comm_s;		/* in communication calls (outermost ones) */
	double wait_s;		/* in matched collectives after arriving, until the last arrival */
	uint64_t colls;		/* collective calls */
	uint64_t last;		/* matched instances where this rank arrived last */
};

/* One collective operation (by name) over the matched instances. */
struct coll_op {
	uint32_t name; /* string id in the first rank's profile */
	const char *label;
	uint64_t instances; /* matched on every rank */
	double wait_s;	    /* summed over ranks */
	double max_spread_s; /* the largest last-minus-first arrival of one instance */
	uint64_t bytes;	     /* per instance on the first rank (0 unknown) */
};

struct job_summary {
	struct rank_info *ranks; /* sorted by rank (unknown ranks last, by path) */
	size_t n;
	int world_size;		 /* as the files say (-1 when they do not) */
	int *missing;		 /* ranks below world_size with no file */
	size_t nmissing;
	bool mixed_jobs;	 /* job ids differ */
	bool duplicate_ranks;	 /* two files claim one rank */
	bool mixed_hosts;
	struct coll_op *ops;
	size_t nops;
	uint64_t matched;	 /* collective instances matched across every rank */
	uint64_t unmatched;	 /* instances some rank lacks (its file ended early, a mismatch) */
	double wait_s;		 /* all ranks' waits */
	/* the straggler: the rank that arrives last most often */
	int straggler;		 /* index into ranks, -1 none */
	double straggler_share;	 /* of the matched instances it arrived last at */
	double others_wait_s;	 /* the other ranks' waits at those instances */
	char straggler_func[256]; /* its hottest function while the others waited ("" none) */
	double straggler_func_share; /* of its samples in those intervals */
	uint64_t straggler_samples;
	void *priv; /* the matched instances, for job_path */
};

/* A stretch of the job's critical path: a rank computing, or in a collective. */
struct job_seg {
	size_t rank;	/* index into job_summary.ranks */
	int64_t t0, t1; /* ns on the job's clock (the first rank's monotonic) */
	const char *coll; /* in this collective (name), or NULL: computing */
	uint64_t seq;	  /* its instance number (1, 2...) */
};

struct job_rank_path {
	double compute_s, comm_s; /* on the path */
	char func[256];		  /* its hottest function in its compute stretches ("" none) */
	double func_share;	  /* of its samples in them */
};

/*
 * The job's critical path across ranks: from the rank that ends last back to its start, the
 * rank computes until its previous collective; a collective is on the path from its last
 * arrival, and before that the path is the last-arriving rank's work (its arrival is when
 * the others could go on).
 */
struct job_path {
	struct job_seg *segs; /* latest first */
	size_t nsegs;
	int64_t t0, t1;	      /* the path's start and end */
	struct job_rank_path *ranks; /* per job_summary.ranks */
};

int job_path(const struct job_summary *s, struct job_path *out);
void job_path_free(struct job_path *p);

/* ranks: n profiles (paths for messages). Returns 0 or -ENOMEM. */
int job_analyze(struct profile *const *profs, char *const *paths, size_t n,
		struct job_summary *out);
void job_summary_free(struct job_summary *s);
/* The rank's label: "rank 2 (host)", or its file when it has no rank. */
void rank_label(const struct rank_info *r, char *buf, size_t len);

#endif
