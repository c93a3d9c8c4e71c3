/* SPDX-License-Identifier: MIT */
/* `eprof report`: text and JSON renderings of a profile's summary and hot functions. */
#ifndef EPROF_REPORT_H
#define EPROF_REPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "../analysis/hot.h"

struct sink;

struct report_opts {
	struct hot_opts hot;
	unsigned limit; /* rows, 0 = all */
	bool threads;
	bool json;
	const char *path; /* shown in the header */
};

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

void profile_summarize(const struct profile *p, const struct sample_filter *f,
		       struct profile_summary *s);
int report_write(struct sink *out, struct profile *p, const struct report_opts *o);
/* Off-CPU section (report_offcpu.c): nothing when the record has no off-CPU data. */
int report_offcpu(struct sink *out, const struct profile *p, const struct report_opts *o);

#endif
