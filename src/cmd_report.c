// SPDX-License-Identifier: MIT
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/regions.h"
#include "cmds.h"
#include "cli/open.h"
#include "util/cli.h"
#include "util/log.h"
#include "util/sink.h"

static void report_usage(FILE *f)
{
	fprintf(f, "usage: eprof report [FILE] [options]     (FILE defaults to eprof.data)\n"
		   "      --sort self|total   order of the function table (default self)\n"
		   "      --limit N           rows to show (default 30, 0 = all)\n"
		   "      --threads           per-thread breakdown\n"
		   "      --lines             per source line instead of per function\n"
		   "      --inline            count inlined functions as functions of their own\n"
		   "      --pid PID, --tid TID  only these samples\n"
		   "      --region NAME       only samples inside that region (as named in the regions table)\n"
		   "      --json              machine-readable output (schema in docs/json-schema.md)\n"
		   "  -o, --output FILE       write to FILE instead of stdout\n");
}

int parse_u32_arg(const char *opt, const char *arg, unsigned long min, unsigned long max,
		  unsigned *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(arg, &end, 10);
	if (errno || end == arg || *end || *arg == '-' || v < min || v > max) {
		log_err("invalid %s '%s' (expected %lu..%lu)", opt, arg, min, max);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

enum { R_SORT = 256, R_LIMIT, R_THREADS, R_LINES, R_INLINE, R_PID, R_TID, R_JSON, R_REGION };

static int report_opt(int c, const char *arg, void *opts)
{
	struct report_cli *o = opts;

	switch (c) {
	case R_SORT:
		if (!strcmp(arg, "self"))
			o->r.hot.sort = SORT_SELF;
		else if (!strcmp(arg, "total"))
			o->r.hot.sort = SORT_TOTAL;
		else {
			log_err("invalid --sort '%s': use self or total", arg);
			return -EINVAL;
		}
		return 0;
	case R_LIMIT:
		return parse_u32_arg("--limit", arg, 0, 10000000, &o->r.limit);
	case R_THREADS:
		o->r.threads = true;
		return 0;
	case R_LINES:
		o->r.hot.by_line = true;
		return 0;
	case R_INLINE:
		o->r.hot.inlined = true;
		return 0;
	case R_PID:
		return parse_u32_arg("--pid", arg, 1, 0x7fffffff, &o->r.hot.filter.pid);
	case R_TID:
		return parse_u32_arg("--tid", arg, 1, 0x7fffffff, &o->r.hot.filter.tid);
	case R_JSON:
		o->r.json = true;
		return 0;
	case R_REGION:
		o->region = arg;
		return 0;
	case 'o':
		o->output = arg;
		return 0;
	}
	return -EINVAL;
}

int parse_report_args(int argc, char **argv, struct report_cli *o)
{
	static const struct option longopts[] = {
		{ "sort", required_argument, NULL, R_SORT },
		{ "limit", required_argument, NULL, R_LIMIT },
		{ "threads", no_argument, NULL, R_THREADS },
		{ "lines", no_argument, NULL, R_LINES },
		{ "inline", no_argument, NULL, R_INLINE },
		{ "pid", required_argument, NULL, R_PID },
		{ "tid", required_argument, NULL, R_TID },
		{ "json", no_argument, NULL, R_JSON },
		{ "region", required_argument, NULL, R_REGION },
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	static const struct cli_spec spec = { "report", "o:h", longopts, report_opt };
	const char *pos[1];
	int npos, err;

	memset(o, 0, sizeof(*o));
	o->input = "eprof.data";
	o->output = "-";
	o->r.limit = 30;
	err = cli_parse(&spec, argc, argv, o, pos, 1, &npos);
	if (err)
		return err;
	if (npos)
		o->input = pos[0];
	o->r.path = o->input;
	return 0;
}

int cmd_report(int argc, char **argv)
{
	struct report_cli o;
	struct region_ranges *ranges = NULL;
	char title[512];
	struct profile *p = NULL;
	struct sink *out;
	int err;

	err = parse_report_args(argc, argv, &o);
	if (err == 1) {
		report_usage(stdout);
		return 0;
	}
	if (err)
		return 2;
	if (profile_open(o.input, &p))
		return 1;
	if (o.region && region_filter_apply(p, o.region, &o.r.hot.filter, &ranges)) {
		profile__free(p);
		return 1;
	}
	if (o.region) {
		snprintf(title, sizeof(title), "%s (samples inside region '%s')", o.input, o.region);
		o.r.path = title;
	}
	out = sink_open(o.output, 0644);
	if (!out) {
		log_err("failed to open '%s': %s", o.output, strerror(errno));
		region_ranges__free(ranges);
		profile__free(p);
		return 1;
	}
	err = report_write(out, p, &o.r);
	err = sink_close(out) ?: err;
	region_ranges__free(ranges);
	profile__free(p);
	if (err) {
		log_err("failed to write the report: %s", strerror(-err));
		return 1;
	}
	return 0;
}

int region_filter_apply(const struct profile *p, const char *name, struct sample_filter *f,
			struct region_ranges **ranges)
{
	*ranges = region_ranges__new(p, name);
	if (!*ranges) {
		log_err("out of memory");
		return -ENOMEM;
	}
	if (!region_ranges__n(*ranges)) {
		log_err("no region named '%s' in this profile (eprof report lists them)", name);
		region_ranges__free(*ranges);
		*ranges = NULL;
		return -ENOENT;
	}
	f->match = region_ranges__match;
	f->match_arg = *ranges;
	return 0;
}
