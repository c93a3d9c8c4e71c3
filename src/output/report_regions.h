/* SPDX-License-Identifier: MIT */
/* `eprof report` regions section (text table and the JSON key "regions"). */
#ifndef EPROF_REPORT_REGIONS_H
#define EPROF_REPORT_REGIONS_H

#include "analysis/hot.h"

struct sink;

/* Nothing when the profile has no regions. Return 0 or -errno. The text shows the first
 * limit children of each node (0 = all), then how many rows it left out. */
int report_regions_text(struct sink *out, const struct profile *p, const struct sample_filter *f,
			unsigned limit);
int report_regions_json(struct sink *out, const struct profile *p, const struct sample_filter *f);

#endif
