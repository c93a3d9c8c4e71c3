// SPDX-License-Identifier: MIT
/*
 * A record that is one rank of a job: its place in the job from the launcher's environment
 * (torchrun, mpirun, srun), output names with %r and friends, and the clock mapping that lets
 * files of several hosts be put on one time line (docs/distributed.md).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "model/profile.h"
#include "util/log.h"
#include "job.h"

/* The first of these set in the environment, else NULL. */
static const char *first_env(const char *const *names)
{
	for (; *names; names++) {
		const char *v = getenv(*names);

		if (v && *v)
			return v;
	}
	return NULL;
}

static const char *const rank_env[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK",
				       "SLURM_PROCID", NULL};
static const char *const local_env[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
					"MPI_LOCALRANKID", "SLURM_LOCALID", NULL};
static const char *const size_env[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
				       "SLURM_NTASKS", NULL};
static const char *const job_env[] = {"SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", NULL};

void job_info_read(struct job_info *j)
{
	memset(j, 0, sizeof(*j));
	j->rank = first_env(rank_env);
	j->local_rank = first_env(local_env);
	j->world_size = first_env(size_env);
	j->job_id = first_env(job_env);
	if (gethostname(j->host, sizeof(j->host) - 1))
		snprintf(j->host, sizeof(j->host), "unknown");
	j->start = time(NULL);
}

/* Appends s to out; false when it does not fit. */
static bool put(char *out, size_t len, size_t *o, const char *s)
{
	size_t n = strlen(s);

	if (*o + n >= len)
		return false;
	memcpy(out + *o, s, n);
	*o += n;
	out[*o] = '\0';
	return true;
}

int job_output_path(const char *pattern, const struct job_info *j, char *out, size_t len)
{
	size_t o = 0;

	out[0] = '\0';
	for (const char *p = pattern; *p; p++) {
		char tmp[64];
		const char *v;

		if (*p != '%') {
			char c[2] = {*p, 0};

			if (!put(out, len, &o, c))
				goto too_long;
			continue;
		}
		switch (*++p) {
		case 'r':
			v = j->rank;
			if (!v) {
				log_err("output name '%s': %%r needs a rank, and none of RANK, "
					"OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK, SLURM_PROCID is set",
					pattern);
				return -EINVAL;
			}
			break;
		case 'l':
			v = j->local_rank;
			if (!v) {
				log_err("output name '%s': %%l needs a local rank, and none of LOCAL_RANK, "
					"OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, SLURM_LOCALID is set",
					pattern);
				return -EINVAL;
			}
			break;
		case 'j':
			v = j->job_id;
			if (!v) {
				log_err("output name '%s': %%j needs a job id, and neither SLURM_JOB_ID "
					"nor TORCHELASTIC_RUN_ID is set",
					pattern);
				return -EINVAL;
			}
			break;
		case 'h':
			v = j->host;
			break;
		case 'p':
			snprintf(tmp, sizeof(tmp), "%d", (int)getpid());
			v = tmp;
			break;
		case 't': {
			struct tm tm;

			gmtime_r(&j->start, &tm);
			strftime(tmp, sizeof(tmp), "%Y%m%dT%H%M%SZ", &tm);
			v = tmp;
			break;
		}
		case '%':
			v = "%";
			break;
		default:
			log_err("output name '%s': unknown %%%c (use %%r %%l %%h %%p %%j %%t or %%%%)",
				pattern, *p ? *p : ' ');
			return -EINVAL;
		}
		if (strchr(v, '/') && *p != '%') {
			log_err("output name '%s': %%%c is '%s', which holds a '/'", pattern, *p, v);
			return -EINVAL;
		}
		if (!put(out, len, &o, v))
			goto too_long;
	}
	return 0;
too_long:
	log_err("output name '%s' is too long once expanded", pattern);
	return -ENAMETOOLONG;
}

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void job_clock_pair(struct clock_pair *c)
{
	const char *skew;

	c->error_ns = UINT64_MAX;
	/* A realtime read between two monotonic reads: the tightest of several brackets wins. */
	for (int i = 0; i < 9; i++) {
		uint64_t m0 = clock_ns(CLOCK_MONOTONIC), r = clock_ns(CLOCK_REALTIME),
			 m1 = clock_ns(CLOCK_MONOTONIC);

		if (m1 - m0 < c->error_ns) {
			c->error_ns = m1 - m0;
			c->mono_ns = m0 + (m1 - m0) / 2;
			c->real_ns = r;
		}
	}
	/* a host whose realtime clock is off, simulated (tests of the alignment across hosts) */
	skew = getenv("EPROF_CLOCK_SKEW_NS");
	if (skew && *skew)
		c->real_ns += (uint64_t)strtoll(skew, NULL, 10);
}

static void meta_u64(struct profile *p, const char *key, uint64_t v)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%" PRIu64, v);
	profile__set_meta(p, key, buf);
}

void job_meta(struct profile *p, const struct job_info *j, const struct clock_pair *c)
{
	if (j->rank)
		profile__set_meta(p, "rank", j->rank);
	if (j->local_rank)
		profile__set_meta(p, "local_rank", j->local_rank);
	if (j->world_size)
		profile__set_meta(p, "world_size", j->world_size);
	if (j->job_id)
		profile__set_meta(p, "job_id", j->job_id);
	meta_u64(p, "clock_realtime_ns", c->real_ns);
	meta_u64(p, "clock_monotonic_ns", c->mono_ns);
	meta_u64(p, "clock_pair_error_ns", c->error_ns);
}
