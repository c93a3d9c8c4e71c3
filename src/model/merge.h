/* SPDX-License-Identifier: MIT */
/*
 * Several recordings into one profile (the ranks of a job, for one flamegraph or one
 * timeline): every table of src appended to dst, its strings, objects, frames, locations and
 * stacks re-interned, its times moved onto dst's clock, and its processes and threads given
 * new ids so that two hosts' pid 1234 stay apart.
 */
#ifndef EPROF_MERGE_H
#define EPROF_MERGE_H

#include <stdint.h>

#include "profile.h"

struct merge_opts {
	int64_t ts_shift;	   /* added to every time of src */
	uint32_t id_base;	   /* src's pids and tids become id_base + 1, + 2 ... */
	const char *proc_prefix;   /* prepended to its process names ("rank 2 (host) "), or NULL */
	const char *thread_name;   /* every thread of src named so (a flamegraph's root), or NULL */
};

/* Returns 0 or -errno (dst is then partly extended: free it). *next_id gets the last id used. */
int profile_merge(struct profile *dst, const struct profile *src, const struct merge_opts *o,
		  uint32_t *next_id);

#endif
