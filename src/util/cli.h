/* SPDX-License-Identifier: MIT */
/* The option loop every reader subcommand shares: getopt_long, then positional arguments. */
#ifndef EPROF_CLI_H
#define EPROF_CLI_H

#include <getopt.h>

struct cli_spec {
	const char *cmd;	       /* "report": prefixes every message */
	const char *shortopts;	       /* must include "h" */
	const struct option *longopts; /* must include { "help", no_argument, NULL, 'h' } */
	int (*opt)(int c, const char *arg, void *opts); /* one option; 0 or -EINVAL (logged) */
};

/*
 * Parses argv[1..] (argv[0] is the subcommand). Positional arguments go to
 * pos[0..max_pos); *npos gets their count. Returns 0, 1 for --help, or
 * -EINVAL after one logged line.
 */
int cli_parse(const struct cli_spec *spec, int argc, char **argv, void *opts, const char **pos,
	      int max_pos, int *npos);

#endif
