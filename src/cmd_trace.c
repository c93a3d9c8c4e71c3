// SPDX-License-Identifier: MIT
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cmds.h"
#include "cli/open.h"
#include "output/trace.h"
#include "util/cli.h"
#include "util/log.h"
#include "util/sink.h"

/* Above this, Perfetto UI and chrome://tracing get slow or run out of memory. */
#define TRACE_WARN_BYTES (200ull * 1000 * 1000)

static void trace_usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: eprof trace [FILE] [options]     (FILE defaults to eprof.data)\n"
	    "Chrome Trace Event JSON: open it in ui.perfetto.dev, chrome://tracing or speedscope.\n"
	    "  -o, --output FILE        default trace.json (\"-\" for stdout)\n"
	    "      --time-range S:E     only seconds S to E from the start of the record\n"
	    "                           (either side may be empty: 2.5:  :10)\n"
	    "      --pid PID, --tid TID only these samples\n"
	    "      --no-counters        leave out the CPU utilization tracks\n");
}

static int parse_seconds(const char *s, size_t len, double *out)
{
	char buf[64], *end;

	if (len >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, len);
	buf[len] = '\0';
	errno = 0;
	*out = strtod(buf, &end);
	if (errno || end == buf || *end || !isfinite(*out) || *out < 0)
		return -EINVAL;
	return 0;
}

int parse_time_range(const char *arg, struct time_range *r)
{
	const char *colon = strchr(arg, ':');

	memset(r, 0, sizeof(*r));
	if (!colon || (colon == arg && !colon[1]))
		goto bad;
	if (colon > arg) {
		if (parse_seconds(arg, colon - arg, &r->from_s))
			goto bad;
		r->has_from = true;
	}
	if (colon[1]) {
		if (parse_seconds(colon + 1, strlen(colon + 1), &r->to_s))
			goto bad;
		r->has_to = true;
	}
	if (r->has_from && r->has_to && r->to_s <= r->from_s)
		goto bad;
	return 0;
bad:
	log_err("invalid --time-range '%s' (expected START:END in seconds from the start, "
		"e.g. 2.5:4, 3: or :10)",
		arg);
	return -EINVAL;
}

void time_range_apply(const struct time_range *r, const struct profile *p, struct sample_filter *f)
{
	uint64_t start = profile__meta_u64(p, "start_ns", 0);

	if (!r->has_from && !r->has_to)
		return;
	if (!start) {
		start = UINT64_MAX;
		for (size_t i = 0; i < p->samples.n; i++)
			if (p->samples.v[i].ts < start)
				start = p->samples.v[i].ts;
		if (start == UINT64_MAX)
			start = 0;
	}
	if (r->has_from)
		f->t0 = start + (uint64_t)llround(r->from_s * 1e9);
	if (r->has_to)
		f->t1 = start + (uint64_t)llround(r->to_s * 1e9);
	/* 0 means "open" in the filter: a window starting at time 0 starts at 1 ns */
	if (r->has_from && !f->t0)
		f->t0 = 1;
}

enum { T_PID = 256, T_TID, T_RANGE, T_NOCNT };

static int trace_opt(int c, const char *arg, void *opts)
{
	struct trace_cli *o = opts;

	switch (c) {
	case 'o':
		o->output = arg;
		return 0;
	case T_PID:
		return parse_u32_arg("--pid", arg, 1, 0x7fffffff, &o->filter.pid);
	case T_TID:
		return parse_u32_arg("--tid", arg, 1, 0x7fffffff, &o->filter.tid);
	case T_RANGE:
		return parse_time_range(arg, &o->range);
	case T_NOCNT:
		o->no_counters = true;
		return 0;
	}
	return -EINVAL;
}

int parse_trace_args(int argc, char **argv, struct trace_cli *o)
{
	static const struct option longopts[] = {
	    {"output", required_argument, NULL, 'o'},
	    {"pid", required_argument, NULL, T_PID},
	    {"tid", required_argument, NULL, T_TID},
	    {"time-range", required_argument, NULL, T_RANGE},
	    {"no-counters", no_argument, NULL, T_NOCNT},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	static const struct cli_spec spec = { "trace", "o:h", longopts, trace_opt };
	const char *pos[1];
	int npos, err;

	memset(o, 0, sizeof(*o));
	o->input = "eprof.data";
	o->output = "trace.json";
	err = cli_parse(&spec, argc, argv, o, pos, 1, &npos);
	if (err)
		return err;
	if (npos)
		o->input = pos[0];
	return 0;
}

int cmd_trace(int argc, char **argv)
{
	struct trace_cli o;
	struct trace_opts to = {0};
	struct trace_stats st;
	struct profile *p = NULL;
	struct sink *out;
	int err;

	err = parse_trace_args(argc, argv, &o);
	if (err == 1) {
		trace_usage(stdout);
		return 0;
	}
	if (err)
		return 2;
	if (profile_open(o.input, &p))
		return 1;
	to.filter = o.filter;
	to.no_counters = o.no_counters;
	time_range_apply(&o.range, p, &to.filter);
	out = sink_open(o.output, 0644);
	if (!out) {
		log_err("failed to open '%s': %s", o.output, strerror(errno));
		profile__free(p);
		return 1;
	}
	err = trace_write(out, p, &to, &st);
	err = sink_close(out) ?: err;
	profile__free(p);
	if (err) {
		log_err("failed to write '%s': %s", o.output, strerror(-err));
		return 1;
	}
	if (strcmp(o.output, "-"))
		fprintf(
		    stderr,
		    "eprof: trace written to %s: %.1f MB, %llu slices from %llu samples of %llu "
		    "threads\n",
		    o.output, st.bytes / 1e6, (unsigned long long)st.slices,
		    (unsigned long long)st.samples, (unsigned long long)st.threads);
	if (!st.samples)
		log_warn("no samples in the trace (filtered out, or an empty record)");
	if (st.bytes > TRACE_WARN_BYTES)
		log_warn("%s is %.0f MB: trace viewers struggle beyond 200 MB; pick a window with "
			 "--time-range START:END (seconds from the start)",
			 o.output, st.bytes / 1e6);
	return 0;
}
