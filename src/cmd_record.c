// SPDX-License-Identifier: MIT
#include <stdio.h>

#include "cmds.h"
#include "record/record.h"

int cmd_record(int argc, char **argv)
{
	struct record_opts o;
	int err = parse_record_args(argc, argv, &o);

	if (err == 1) {
		record_usage(stdout);
		return 0;
	}
	if (err)
		return 2;
	return record_run(&o);
}
