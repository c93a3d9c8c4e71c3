/* SPDX-License-Identifier: MIT */
/* `eprof report`: text and JSON renderings of a profile's summary and hot functions. */
#ifndef EPROF_REPORT_H
#define EPROF_REPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "analysis/hot.h"
#include "analysis/summary.h"

struct json;
struct sink;

struct report_opts {
	struct hot_opts hot;
	unsigned limit; /* rows, 0 = all */
	bool threads;
	bool json;
	const char *path; /* shown in the header */
	double carbon_g_per_kwh; /* --carbon-intensity, 0 = the default (docs/metrics.md) */
};

int report_write(struct sink *out, struct profile *p, const struct report_opts *o);
/* A section's "stack": [leaf, caller, ...] member, "?" for a frame without a name. */
void report_json_stack(struct json *j, const struct profile *p, uint32_t stack);
/* Off-CPU section (report_offcpu.c): nothing when the record has no off-CPU data. */
int report_offcpu(struct sink *out, const struct profile *p, const struct report_opts *o);

#endif
