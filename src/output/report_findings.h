/* SPDX-License-Identifier: MIT */
/* `eprof report` findings section: bottlenecks with a next step (text, JSON "findings"). */
#ifndef EPROF_REPORT_FINDINGS_H
#define EPROF_REPORT_FINDINGS_H

#include <stdbool.h>

#include "../analysis/hot.h"

struct sink;

/* Runs the rules of analysis/findings.c on the samples f selects (hot: see findings_analyze).
 * 0 or -errno. */
int report_findings(struct sink *out, struct profile *p, const struct sample_filter *f,
		    const struct hot_result *hot, bool json);

#endif
