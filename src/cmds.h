/* SPDX-License-Identifier: MIT */
/* The subcommand table and each subcommand's pure argument parser. */
#ifndef EPROF_CMDS_H
#define EPROF_CMDS_H

#include <stdbool.h>
#include <stdio.h>

#include "analysis/hot.h"
#include "output/report.h"

enum cmd_flags {
	CMD_NEEDS_ROOT = 1 << 0, /* BPF and perf events: checked once in main() */
};

struct cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	unsigned flags;
	const char *summary;
};

int cmd_record(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_flamegraph(int argc, char **argv);

struct report_cli {
	struct report_opts r;
	const char *input;
	const char *output;
};

struct flamegraph_cli {
	const char *input, *output, *title;
	struct sample_filter filter;
	bool folded, lines, inverted, weight_ns, no_comm;
	unsigned width;
};

/* Return 0, 1 for --help, -EINVAL on a bad argument (message printed). */
int parse_report_args(int argc, char **argv, struct report_cli *o);
int parse_flamegraph_args(int argc, char **argv, struct flamegraph_cli *o);

/* Common option parsing helpers. */
int parse_u32_arg(const char *opt, const char *arg, unsigned long min, unsigned long max,
		  unsigned *out);

#endif
