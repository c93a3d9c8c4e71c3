/* SPDX-License-Identifier: MIT */
/* The report of a job's recordings together: ranks, collectives, waits, the straggler. */
#ifndef EPROF_REPORT_JOB_H
#define EPROF_REPORT_JOB_H

#include <stdbool.h>
#include <stddef.h>

struct job_path;
struct job_summary;
struct sink;

int report_job_write(struct sink *out, const struct job_summary *s, bool json);
/* The straggler finding's sentence (s->straggler >= 0). */
void straggler_text(const struct job_summary *s, char *buf, size_t len);

/* The critical path across ranks (analysis/ranks.h: job_path). */
int report_job_path(struct sink *out, const struct job_summary *s, const struct job_path *p,
		    bool json, bool segments);

#endif
