// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "analysis/ranks.h"
#include "analysis/regions.h"
#include "cmds.h"
#include "output/report_job.h"
#include "util/log.h"
#include "util/sink.h"

static const struct opt_choice sorts[] = {
	{ "self", SORT_SELF }, { "total", SORT_TOTAL }, { NULL }
};

static const struct opt report_opts[] = {
	OPT_CHOICE("sort", 0, struct report_cli, r.hot.sort, sorts,
		   "order of the function table (default self)"),
	OPT_UINT("limit", 0, "N", struct report_cli, r.limit, 0, 10000000,
		 "rows to show (default 30, 0 = all; a third in each memory table)"),
	OPT_FLAG("threads", 0, struct report_cli, r.threads, "per-thread breakdown"),
	OPT_FLAG("lines", 0, struct report_cli, r.hot.by_line,
		 "per source line instead of per function"),
	OPT_FLAG("inline", 0, struct report_cli, r.hot.inlined,
		 "count inlined functions as functions of their own"),
	OPT_GROUP(struct report_cli, r.hot.filter, cli_filter_opts),
	OPT_STRING("region", 0, "NAME", struct report_cli, region,
		   "only samples inside that region (as named in the regions table)"),
	OPT_DOUBLE("carbon-intensity", 0, "G_PER_KWH", struct report_cli, r.carbon_g_per_kwh, 0,
		   1e5, "grams of CO2 per kWh for the carbon estimate (default 445,\n"
			"the world average: docs/metrics.md)",
		   .above = true, .expect = "grams per kWh > 0"),
	OPT_FLAG("json", 0, struct report_cli, r.json,
		 "machine-readable output (schema in docs/json-schema.md)"),
	OPT_STRING("output", 'o', "FILE", struct report_cli, output,
		   "write to FILE instead of stdout"),
	OPT_VIEW(struct report_cli, view),
	OPT_END,
};

static const struct report_cli report_defaults = {
	.input = "eprof.data", .output = "-", .r.limit = 30
};

static int report_finish(void *opts, int npos, char **pos)
{
	struct report_cli *o = opts;

	o->r.path = o->input;
	return 0;
}

/* Several recordings of one job: ranks, collectives, waits, the straggler. */
static int report_job(struct cmd_ctx *c)
{
	struct report_cli *o = c->opts;
	struct job_summary s;
	int err;

	if (o->region) {
		log_err("report: --region takes one recording, not %zu", c->njob);
		return 2;
	}
	err = job_analyze(c->job, c->job_paths, c->njob, &s);
	if (err) {
		log_err("failed to analyse the job's recordings: %s", strerror(-err));
		return 1;
	}
	c->text_out = !o->r.json;
	err = cmd_output(c) ? report_job_write(c->out, &s, o->r.json) : 1;
	job_summary_free(&s);
	return err;
}

static int report_run(struct cmd_ctx *c)
{
	struct report_cli *o = c->opts;
	struct region_ranges *ranges = NULL;
	char title[512];
	int err;

	if (c->njob)
		return report_job(c);

	if (o->region && region_filter_apply(c->in[0], o->region, &o->r.hot.filter, &ranges))
		return 1;
	if (o->region) {
		snprintf(title, sizeof(title), "%s (samples inside region '%s')", o->input,
			 o->region);
		o->r.path = title;
	}
	c->text_out = !o->r.json;
	err = cmd_output(c) ? report_write(c->out, c->in[0], &o->r) : 1;
	region_ranges__free(ranges);
	return err;
}

const struct command cmd_report = {
	.name = "report",
	.summary = "hot functions, threads and counters of a recording",
	.usage = "[FILE...|DIR|GLOB] [options]     (FILE defaults to eprof.data)",
	.about = "Several recordings (files, a directory of them, a glob) of one job's ranks: a\n"
		 "per-rank table, the collectives matched across ranks, waits and the straggler\n"
		 "(docs/distributed.md).\n",
	CMD_OPTIONS(report_opts, report_defaults),
	CMD_JOB_READER(struct report_cli, more, CMD_VIEW),
	.view = offsetof(struct report_cli, view),
	.finish = report_finish,
	.run = report_run,
};

int parse_report_args(int argc, char **argv, struct report_cli *o)
{
	return cmd_parse(&cmd_report, argc, argv, o);
}
