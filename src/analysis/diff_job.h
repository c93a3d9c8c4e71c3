/* SPDX-License-Identifier: MIT */
/*
 * Two runs of a multi-rank job compared rank by rank (eprof diff BASEDIR NEWDIR): which rank
 * got slower, what it ran more of, and what that cost the others in waits. Ranks are paired
 * by their rank number (by their place in the sorted list when the files have none); each
 * pair's own CPU profiles are compared for the function whose self CPU time changed most.
 * The collectives are paired by name, the straggler of each run is said.
 */
#ifndef EPROF_DIFF_JOB_H
#define EPROF_DIFF_JOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ranks.h"

struct diff_rank {
	int rank;	     /* -1: the files have none (paired by place) */
	char label[320];     /* "rank 2 (host)" of NEW, else of BASE */
	bool in[2];	     /* a recording of this rank in BASE / NEW */
	double wall_s[2], cpu_s[2], comm_s[2], wait_s[2];
	uint64_t colls[2], last[2]; /* collective calls; instances it arrived last at */
	/*
	 * Where its CPU time grew (both runs have the rank): the leaf of the call path that
	 * explains its growth (diff_attribute with one path: the deepest one that carries most
	 * of it), inclusive CPU seconds; when nothing grew, its function whose self CPU time
	 * changed most (func_self).
	 */
	char func[256];
	double func_s[2];
	bool func_self;
};

struct diff_coll {
	char name[128];
	uint64_t instances[2];
	double wait_s[2];	/* summed over ranks */
	double max_spread_s[2]; /* the largest last-minus-first arrival of one instance */
	uint64_t bytes[2];	/* per instance (0 unknown) */
};

struct diff_job_run {
	size_t recordings;
	int world_size;
	double wall_s;	   /* the longest rank's wall time */
	double wait_s;	   /* all ranks' waits in matched collectives */
	uint64_t matched;  /* collective instances matched across the ranks */
	int straggler;	   /* its rank number (-1 none, or a rank without number) */
	char straggler_label[320];
	double straggler_share;
	char straggler_func[256];
};

struct diff_job {
	struct diff_job_run run[2];
	struct diff_rank *ranks; /* by rank */
	size_t n;
	struct diff_coll *colls; /* by |change of the waits|, largest first */
	size_t ncolls;
	/*
	 * The rank whose work (wall time outside communication calls) grew most: in a job that
	 * meets in collectives, the others wait for it (index into ranks, -1 none grew).
	 */
	long slowest;
};

/*
 * The job summaries of both runs (job_analyze); their rank_info.p profiles must be alive
 * (each rank pair's functions are compared). 0 or -ENOMEM.
 */
int diff_job(const struct job_summary *base, const struct job_summary *new, struct diff_job *out);
void diff_job__free(struct diff_job *d);
/* The rank row of rank number n, or NULL. */
const struct diff_rank *diff_job_rank(const struct diff_job *d, int n);

#endif
