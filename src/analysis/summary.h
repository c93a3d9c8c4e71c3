/* SPDX-License-Identifier: MIT */
/* The summary every report starts with: command, duration, samples, CPU use, data quality. */
#ifndef EPROF_SUMMARY_H
#define EPROF_SUMMARY_H

#include <stdint.h>

#include "model/profile.h"
#include "hot.h"

struct profile_summary {
	const char *command;
	double duration_s;
	uint64_t samples, weight;
	unsigned rate, ncpus;
	double cores;	       /* CPU time / wall time */
	uint64_t lost;	       /* samples lost in the ring buffer */
	uint64_t truncated;    /* samples whose stack is marked [truncated] */
	uint64_t unknown_samples; /* samples whose leaf frame is unnamed */
};

/* The samples that pass f (NULL: all). */
void profile_summarize(const struct profile *p, const struct sample_filter *f,
		       struct profile_summary *s);

#endif
