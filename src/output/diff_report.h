/* SPDX-License-Identifier: MIT */
/*
 * The sections of `eprof diff` beyond the function table, as text and as JSON members:
 * the attribution ("the regression is explained by"), the call paths whose self time
 * changed most, regions, memory, off-CPU, GPU, threads, processes, the gates, and for two
 * runs of a multi-rank job the ranks and collectives compared (diff_job_report.c).
 */
#ifndef EPROF_OUTPUT_DIFF_REPORT_H
#define EPROF_OUTPUT_DIFF_REPORT_H

#include <stddef.h>

#include "analysis/diff.h"
#include "analysis/diff_gate.h"
#include "analysis/diff_job.h"
#include "analysis/diff_kinds.h"
#include "util/json.h"
#include "util/sink.h"

struct diff_report {
	const struct diff_result *r;
	const struct diff_attr *a;
	const struct diff_kinds *k;
	const struct diff_gate *gates;
	size_t ngates;
	const char *per; /* --per REGION, or NULL */
	unsigned limit;	 /* rows of each table (0 = all) */
};

void diff_text_attribution(struct sink *out, const struct diff_report *d);
void diff_text_paths(struct sink *out, const struct diff_report *d);
/* Regions, memory, off-CPU, GPU, threads, processes: the kinds either run has. */
void diff_text_kinds(struct sink *out, const struct diff_report *d);
void diff_text_gates(struct sink *out, const struct diff_report *d);
/* Two runs of a multi-rank job (d->k->job): the job, rank by rank, the collectives. */
void diff_text_job(struct sink *out, const struct diff_report *d);

/* Members of the open top-level object. */
void diff_json_attribution(struct json *j, const struct diff_report *d);
void diff_json_paths(struct json *j, const struct diff_report *d);
void diff_json_kinds(struct json *j, const struct diff_report *d);
void diff_json_gates(struct json *j, const struct diff_report *d);
/* "job": the same as diff_text_job, or null for two single recordings. */
void diff_json_job(struct json *j, const struct diff_report *d);

/* "+12.3%", "new", "gone", "=" of a change from b to n. */
void diff_fmt_pct(char *buf, size_t len, double b, double n);

#endif
