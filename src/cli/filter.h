/* SPDX-License-Identifier: MIT */
/*
 * The sample selection the reader commands share: --pid and --tid (report, flamegraph,
 * trace, export), --time-range (trace, export), and --region NAME applied once the
 * profile is open (report, flamegraph).
 */
#ifndef EPROF_CLI_FILTER_H
#define EPROF_CLI_FILTER_H

#include <stdbool.h>

#include "analysis/hot.h"
#include "options.h"

struct profile;
struct region_ranges;

/* --pid PID, --tid TID, over a struct sample_filter (OPT_GROUP). */
extern const struct opt cli_filter_opts[];
/* --time-range START:END, over a struct time_range (OPT_GROUP). */
extern const struct opt cli_range_opts[];

/* --time-range START:END in seconds from the start of the record; either side may be empty. */
struct time_range {
	bool has_from, has_to;
	double from_s, to_s;
};
int parse_time_range(const char *arg, struct time_range *r);
/* Sets f->t0/t1 (CLOCK_MONOTONIC ns) from r and the record's start. */
void time_range_apply(const struct time_range *r, const struct profile *p, struct sample_filter *f);

/*
 * --region NAME: sets f->match to the inside of that region's instances (per
 * thread). *ranges is to be freed with region_ranges__free. 0, or -ENOENT
 * (logged) when the profile has no such region.
 */
int region_filter_apply(const struct profile *p, const char *name, struct sample_filter *f,
			struct region_ranges **ranges);

#endif
