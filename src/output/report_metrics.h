/* SPDX-License-Identifier: MIT */
/* The resource metrics of `eprof report` (docs/metrics.md): header lines and the JSON "metrics". */
#ifndef EPROF_REPORT_METRICS_H
#define EPROF_REPORT_METRICS_H

#include "analysis/metrics.h"

struct sink;

/* carbon: gCO2 per kWh for the estimate, 0 = METRICS_DEFAULT_CARBON_G_PER_KWH. */
void report_metrics_text(struct sink *out, const struct profile *p, const struct metrics_result *r,
			 double carbon, unsigned limit);
int report_metrics_json(struct sink *out, const struct profile *p, const struct metrics_result *r,
			double carbon);
/* The names of the set bits of an NVML throttle-reason mask, ", "-separated, into buf. */
const char *metrics_throttle_names(uint64_t mask, char *buf, size_t len);
/* "12.3 MiB" */
void metrics_fmt_bytes(char *buf, size_t len, double v);

#endif
