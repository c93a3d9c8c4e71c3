/* SPDX-License-Identifier: MIT */
/* A record as one rank of a job: the launcher's environment, output names, clock mapping. */
#ifndef EPROF_JOB_H
#define EPROF_JOB_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

struct profile;

struct job_info {
	const char *rank, *local_rank, *world_size, *job_id; /* NULL: not under a launcher */
	char host[256];
	time_t start;
};

/* A CLOCK_MONOTONIC instant and the CLOCK_REALTIME read with it, within error_ns. */
struct clock_pair {
	uint64_t mono_ns, real_ns, error_ns;
};

/* From RANK / OMPI_COMM_WORLD_RANK / PMI_RANK / PMIX_RANK / SLURM_PROCID and friends. */
void job_info_read(struct job_info *j);
/*
 * Expands %r (rank), %l (local rank), %h (host), %p (pid), %j (job id), %t (start time,
 * UTC) and %% in an output name. Returns 0, or -EINVAL / -ENAMETOOLONG after one logged line
 * (a %r with no rank in the environment is an error, not an empty name).
 */
int job_output_path(const char *pattern, const struct job_info *j, char *out, size_t len);
/* The tightest of several (monotonic, realtime) read pairs. */
void job_clock_pair(struct clock_pair *c);
/* rank, local_rank, world_size, job_id and the clock pair in the file's metadata. */
void job_meta(struct profile *p, const struct job_info *j, const struct clock_pair *c);

#endif
