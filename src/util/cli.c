// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stddef.h>

#include "cli.h"
#include "log.h"

int cli_parse(const struct cli_spec *spec, int argc, char **argv, void *opts, const char **pos,
	      int max_pos, int *npos)
{
	int c;

	optind = 0; /* 0, not 1: glibc then resets its internal state between parses */
	opterr = 0;
	while ((c = getopt_long(argc, argv, spec->shortopts, spec->longopts, NULL)) != -1) {
		if (c == 'h')
			return 1;
		if (c == '?' || c == ':') {
			log_err("%s: unknown option or missing argument '%s' (see eprof %s --help)",
				spec->cmd, argv[optind - 1], spec->cmd);
			return -EINVAL;
		}
		if (spec->opt(c, optarg, opts))
			return -EINVAL;
	}
	*npos = 0;
	while (optind < argc) {
		if (*npos == max_pos) {
			log_err("%s: unexpected argument '%s'", spec->cmd, argv[optind]);
			return -EINVAL;
		}
		pos[(*npos)++] = argv[optind++];
	}
	return 0;
}
