// SPDX-License-Identifier: MIT
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmds.h"
#include "util/log.h"

static const struct cmd commands[] = {
	{ "record", cmd_record, CMD_NEEDS_ROOT, "sample CPU stacks of a command, processes or the system" },
	{ "report", cmd_report, 0, "hot functions, threads and counters of a recording" },
	{ "flamegraph", cmd_flamegraph, 0, "interactive SVG flamegraph or folded stacks" },
	{ "trace", cmd_trace, 0, "timeline as Chrome/Perfetto trace JSON" },
	{ "export", cmd_export, 0, "pprof, folded, JSON, CSV or a self-contained HTML report" },
	{ "critical-path", cmd_critical_path, 0, "the chain of work and waits that decided the run's length" },
	{ "diff", cmd_diff, 0, "compare two recordings; differential flamegraph; CI gate" },
	{ "top", cmd_top, CMD_NEEDS_ROOT, "live view of the hottest functions of processes or the system" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: eprof <command> [options]   (eprof <command> --help for details)\n\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\neprof %s — files are read and written as eprof.data by default\n",
		EPROF_VERSION);
}

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") ||
	    !strcmp(argv[1], "help")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
		printf("eprof %s\n", EPROF_VERSION);
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		const struct cmd *c = &commands[i];

		if (strcmp(argv[1], c->name))
			continue;
		/* Privileges are checked in one place; the kernel has the final word (caps). */
		if ((c->flags & CMD_NEEDS_ROOT) && geteuid() != 0 && !getenv("EPROF_NO_ROOT_CHECK"))
			log_info("not root: this needs CAP_BPF and CAP_PERFMON");
		return c->fn(argc - 1, argv + 1);
	}
	log_err("unknown command '%s' (eprof --help lists them)", argv[1]);
	return 2;
}
