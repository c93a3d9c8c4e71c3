/* SPDX-License-Identifier: MIT */
/* `eprof report` findings section: bottlenecks with a next step (text, JSON "findings"). */
#ifndef EPROF_REPORT_FINDINGS_H
#define EPROF_REPORT_FINDINGS_H

#include <stdbool.h>

#include "analysis/hot.h"

struct sink;

struct findings_pre;

/* The text lists this many findings of one rule (the most severe), then how many more. */
#define FINDINGS_TEXT_PER_RULE 5

/* Runs the rules of analysis/findings.c on the samples f selects (pre: see
 * findings_analyze). 0 or -errno. */
int report_findings(struct sink *out, struct profile *p, const struct sample_filter *f,
		    const struct findings_pre *pre, bool json);

#endif
