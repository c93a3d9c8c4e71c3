/* SPDX-License-Identifier: MIT */
#ifndef EPROF_RECORD_H
#define EPROF_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "events.h"

#define RECORD_MAX_PIDS 1024

struct record_opts {
	uint32_t pids[RECORD_MAX_PIDS];
	size_t npids;
	bool all;
	char **argv; /* command to launch (points into the caller's argv) */
	unsigned freq;
	double duration; /* seconds, 0 = until stopped */
	const char *output;
	enum callgraph_mode callgraph;
	uint32_t snapshot_bytes; /* user stack copied per sample for DWARF unwinding */
	uint32_t ringbuf_mb;
	bool no_kernel;
	bool quiet;
	int verbose;
};

/* Fills opts from argv (after "record"). Returns 0, 1 for --help, or -EINVAL (message printed). */
int parse_record_args(int argc, char **argv, struct record_opts *opts);
void record_usage(FILE *f);

/* Runs a whole record; returns the process exit status for main(). */
int record_run(const struct record_opts *opts);

#endif
