// SPDX-License-Identifier: MIT
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmds.h"
#include "output/trace.h"
#include "util/log.h"

/* Above this, Perfetto UI and chrome://tracing get slow or run out of memory. */
#define TRACE_WARN_BYTES (200ull * 1000 * 1000)

static const struct opt trace_opts[] = {
	OPT_STRING("output", 'o', "FILE", struct trace_cli, output,
		   "default trace.json (\"-\" for stdout)"),
	OPT_GROUP(struct trace_cli, range, cli_range_opts),
	OPT_GROUP(struct trace_cli, filter, cli_filter_opts),
	OPT_FLAG("no-counters", 0, struct trace_cli, no_counters,
		 "leave out the CPU utilization tracks"),
	OPT_JOB_SELECT(struct trace_cli, more),
	OPT_VIEW(struct trace_cli, view),
	OPT_END,
};

static const struct trace_cli trace_defaults = {
	.input = "eprof.data", .output = "trace.json", .more.rank = -1
};

static int trace_run(struct cmd_ctx *c)
{
	struct trace_cli *o = c->opts;
	struct trace_opts to = { .filter = o->filter, .no_counters = o->no_counters };
	struct trace_stats *st = calloc(1, sizeof(*st));

	if (!st) {
		log_err("out of memory");
		return 1;
	}
	c->state = st;
	c->state_free = free;
	time_range_apply(&o->range, c->in[0], &to.filter);
	return cmd_output(c) ? trace_write(c->out, c->in[0], &to, st) : 1;
}

static int trace_after(struct cmd_ctx *c)
{
	const struct trace_cli *o = c->opts;
	const struct trace_stats *st = c->state;

	if (strcmp(o->output, "-"))
		fprintf(stderr,
			"eprof: trace written to %s: %.1f MB, %llu slices from %llu samples of "
			"%llu threads\n",
			o->output, st->bytes / 1e6, (unsigned long long)st->slices,
			(unsigned long long)st->samples, (unsigned long long)st->threads);
	if (!st->samples)
		log_warn("no samples in the trace (filtered out, or an empty record)");
	if (st->bytes > TRACE_WARN_BYTES)
		log_warn("%s is %.0f MB: trace viewers struggle beyond 200 MB; pick a window with "
			 "--time-range START:END (seconds from the start)",
			 o->output, st->bytes / 1e6);
	return 0;
}

const struct command cmd_trace = {
	.name = "trace",
	.summary = "timeline as Chrome/Perfetto trace JSON",
	.usage = "[FILE...|DIR|GLOB] [options]     (FILE defaults to eprof.data)",
	.about = "Chrome Trace Event JSON: open it in ui.perfetto.dev, chrome://tracing or "
		 "speedscope.\nSeveral recordings of a job's ranks: one timeline, clocks aligned, "
		 "a process group per rank.\n",
	CMD_OPTIONS(trace_opts, trace_defaults),
	CMD_JOB_READER(struct trace_cli, more, CMD_JOB_MERGE | CMD_VIEW),
	.view = offsetof(struct trace_cli, view),
	.run = trace_run,
	.after = trace_after,
};

int parse_trace_args(int argc, char **argv, struct trace_cli *o)
{
	return cmd_parse(&cmd_trace, argc, argv, o);
}
