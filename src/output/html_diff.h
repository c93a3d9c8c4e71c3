/* SPDX-License-Identifier: MIT */
/*
 * The HTML page of a comparison (eprof export --format html --diff BASE NEW): what eprof
 * diff prints (the attribution first, functions in CPU seconds, call paths, regions, memory,
 * off-CPU, GPU, threads), with the differential flamegraph inlined and sortable tables.
 * Self-contained: no network resources.
 */
#ifndef EPROF_HTML_DIFF_H
#define EPROF_HTML_DIFF_H

#include "model/profile.h"

struct sink;

struct html_diff_opts {
	const char *base_path, *new_path; /* shown in the header */
	unsigned limit;			  /* function rows, 0 = 1000 */
};

/* Returns 0 or -errno. */
int html_diff_write(struct sink *out, struct profile *base, struct profile *new,
		    const struct html_diff_opts *o);

#endif
