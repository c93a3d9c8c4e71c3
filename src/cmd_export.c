// SPDX-License-Identifier: MIT
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmds.h"
#include "cli/open.h"
#include "output/csv.h"
#include "output/folded.h"
#include "output/html.h"
#include "output/pprof.h"
#include "output/report.h"
#include "util/cli.h"
#include "util/log.h"
#include "util/sink.h"

static void export_usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: eprof export [FILE] --format FORMAT [-o OUT] [options]   (FILE: eprof.data)\n"
	    "  -f, --format FORMAT   pprof   profile.proto, gzipped (go tool pprof, pprof UI)\n"
	    "                        folded  comm;root;...;leaf COUNT (flamegraph.pl, speedscope)\n"
	    "                        json    the whole report (schema: docs/json-schema.md)\n"
	    "                        csv     one row per function (spreadsheets, pandas)\n"
	    "                        html    self-contained report with the flamegraph\n"
	    "                        (default: from the -o extension: .pb.gz .pprof .folded .json\n"
	    "                        .csv .html)\n"
	    "  -o, --output OUT      default profile.pb.gz for pprof, report.html for html,\n"
	    "                        stdout for the others\n"
	    "      --lines           folded: add (file:line) to frames\n"
	    "      --time-range S:E  only seconds S to E from the start of the record\n"
	    "      --pid PID, --tid TID  only these samples\n");
}

static const struct {
	const char *name;
	enum export_format f;
} formats[] = {
    {"pprof", EXPORT_PPROF}, {"folded", EXPORT_FOLDED}, {"json", EXPORT_JSON},
    {"csv", EXPORT_CSV},     {"html", EXPORT_HTML},
};

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && !strcmp(s + a - b, suffix);
}

static enum export_format format_of_path(const char *path)
{
	static const struct {
		const char *ext;
		enum export_format f;
	} exts[] = {
	    {".pb.gz", EXPORT_PPROF},	{".pprof", EXPORT_PPROF}, {".pb", EXPORT_PPROF},
	    {".folded", EXPORT_FOLDED}, {".json", EXPORT_JSON},	  {".csv", EXPORT_CSV},
	    {".html", EXPORT_HTML},	{".htm", EXPORT_HTML},
	};

	for (size_t i = 0; path && i < sizeof(exts) / sizeof(exts[0]); i++)
		if (ends_with(path, exts[i].ext))
			return exts[i].f;
	return EXPORT_NONE;
}

enum { E_PID = 256, E_TID, E_RANGE, E_LINES };

static int export_opt(int c, const char *arg, void *opts)
{
	struct export_cli *o = opts;

	switch (c) {
	case 'o':
		o->output = arg;
		return 0;
	case 'f':
		for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
			if (!strcmp(arg, formats[i].name)) {
				o->format = formats[i].f;
				return 0;
			}
		}
		log_err("invalid --format '%s': use pprof, folded, json, csv or html", arg);
		return -EINVAL;
	case E_PID:
		return parse_u32_arg("--pid", arg, 1, 0x7fffffff, &o->filter.pid);
	case E_TID:
		return parse_u32_arg("--tid", arg, 1, 0x7fffffff, &o->filter.tid);
	case E_RANGE:
		return parse_time_range(arg, &o->range);
	case E_LINES:
		o->lines = true;
		return 0;
	}
	return -EINVAL;
}

int parse_export_args(int argc, char **argv, struct export_cli *o)
{
	static const struct option longopts[] = {
	    {"format", required_argument, NULL, 'f'},
	    {"output", required_argument, NULL, 'o'},
	    {"pid", required_argument, NULL, E_PID},
	    {"tid", required_argument, NULL, E_TID},
	    {"time-range", required_argument, NULL, E_RANGE},
	    {"lines", no_argument, NULL, E_LINES},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	static const struct cli_spec spec = { "export", "f:o:h", longopts, export_opt };
	const char *pos[1];
	int npos, err;

	memset(o, 0, sizeof(*o));
	o->input = "eprof.data";
	err = cli_parse(&spec, argc, argv, o, pos, 1, &npos);
	if (err)
		return err;
	if (npos)
		o->input = pos[0];
	if (!o->format)
		o->format = format_of_path(o->output);
	if (!o->format) {
		log_err("export: which format? --format pprof|folded|json|csv|html "
			"(or an -o name ending in .pb.gz, .folded, .json, .csv or .html)");
		return -EINVAL;
	}
	if (!o->output)
		o->output = o->format == EXPORT_PPROF  ? "profile.pb.gz"
			    : o->format == EXPORT_HTML ? "report.html"
						       : "-";
	return 0;
}

static int export_write(struct sink *out, struct profile *p, const struct export_cli *o,
			const struct sample_filter *f)
{
	switch (o->format) {
	case EXPORT_PPROF:
		return pprof_write(out, p, &(struct pprof_opts){.filter = *f});
	case EXPORT_FOLDED:
		return folded_write(out, p, &(struct folded_opts){.filter = *f, .lines = o->lines});
	case EXPORT_JSON: {
		struct report_opts r = {.hot = {.filter = *f},
					.limit = 0,
					.threads = true,
					.json = true,
					.path = o->input};

		return report_write(out, p, &r);
	}
	case EXPORT_CSV:
		return csv_write(out, p, &(struct hot_opts){.filter = *f});
	case EXPORT_HTML:
		return html_write(out, p, &(struct html_opts){.filter = *f, .path = o->input});
	default:
		return -EINVAL;
	}
}

int cmd_export(int argc, char **argv)
{
	struct export_cli o;
	struct sample_filter f;
	struct profile *p = NULL;
	struct sink *out;
	int err;

	err = parse_export_args(argc, argv, &o);
	if (err == 1) {
		export_usage(stdout);
		return 0;
	}
	if (err)
		return 2;
	if (o.format == EXPORT_PPROF && !strcmp(o.output, "-") && isatty(STDOUT_FILENO)) {
		log_err("export: pprof is binary; write it to a file with -o profile.pb.gz");
		return 2;
	}
	if (profile_open(o.input, &p))
		return 1;
	f = o.filter;
	time_range_apply(&o.range, p, &f);
	out = sink_open(o.output, 0644);
	if (!out) {
		log_err("failed to open '%s': %s", o.output, strerror(errno));
		profile__free(p);
		return 1;
	}
	err = export_write(out, p, &o, &f);
	err = sink_close(out) ?: err;
	profile__free(p);
	if (err) {
		log_err("failed to write '%s': %s", o.output, strerror(-err));
		return 1;
	}
	if (strcmp(o.output, "-"))
		fprintf(stderr, "eprof: %s written to %s\n", formats[o.format - 1].name, o.output);
	return 0;
}
