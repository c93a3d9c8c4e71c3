// SPDX-License-Identifier: MIT
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cmds.h"
#include "util/log.h"

static const struct command *const commands[] = {
	&cmd_record, &cmd_report, &cmd_flamegraph, &cmd_trace,
	&cmd_export, &cmd_critical_path, &cmd_diff, &cmd_top, &cmd_cache,
};

static void usage(FILE *f)
{
	fprintf(f, "usage: eprof <command> [options]   (eprof <command> --help for details)\n\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-12s %s\n", commands[i]->name, commands[i]->summary);
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
		const struct command *c = commands[i];

		if (strcmp(argv[1], c->name))
			continue;
		/* Privileges are checked in one place; the kernel has the final word (caps). */
		if ((c->flags & CMD_NEEDS_ROOT) && geteuid() != 0)
			log_info("not root: this needs CAP_BPF and CAP_PERFMON");
		return cmd_main(c, argc - 1, argv + 1);
	}
	log_err("unknown command '%s' (eprof --help lists them)", argv[1]);
	return 2;
}
