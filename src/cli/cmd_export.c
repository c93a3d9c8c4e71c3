// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cmds.h"
#include "output/csv.h"
#include "output/folded.h"
#include "cli/open.h"
#include "output/html.h"
#include "output/html_diff.h"
#include "output/pprof.h"
#include "output/report.h"
#include "util/log.h"
#include "util/sink.h"

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

static const struct opt_choice export_formats[] = {
	{ "pprof", EXPORT_PPROF }, { "folded", EXPORT_FOLDED }, { "json", EXPORT_JSON },
	{ "csv", EXPORT_CSV },	   { "html", EXPORT_HTML },	{ NULL },
};

static const struct opt export_opts[] = {
	OPT_CHOICE("format", 'f', struct export_cli, format, export_formats,
		   "pprof   profile.proto, gzipped (go tool pprof, pprof UI)\n"
		   "folded  comm;root;...;leaf COUNT (flamegraph.pl, speedscope)\n"
		   "json    the whole report (schema: docs/json-schema.md)\n"
		   "csv     one row per function (spreadsheets, pandas)\n"
		   "html    self-contained report with the flamegraph\n"
		   "(default: from the -o extension: .pb.gz .pprof .folded .json\n"
		   ".csv .html)",
		   .arg = "FORMAT"),
	OPT_STRING("output", 'o', "OUT", struct export_cli, output,
		   "default profile.pb.gz for pprof, report.html for html,\n"
		   "stdout for the others"),
	OPT_FLAG("lines", 0, struct export_cli, lines, "folded: add (file:line) to frames"),
	OPT_STRING("diff", 0, "BASE", struct export_cli, diff_base,
		   "html: the comparison of BASE with FILE, as eprof diff BASE\n"
		   "FILE shows it, with the differential flamegraph"),
	OPT_GROUP(struct export_cli, range, cli_range_opts),
	OPT_GROUP(struct export_cli, filter, cli_filter_opts),
	OPT_VIEW(struct export_cli, view),
	OPT_END,
};

static const struct export_cli export_defaults = { .input = "eprof.data" };

static int export_finish(void *opts, int npos, char **pos)
{
	struct export_cli *o = opts;

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
	if (o->diff_base && o->format != EXPORT_HTML) {
		log_err("export: --diff makes an HTML page: add --format html");
		return -EINVAL;
	}
	if (o->diff_base && (o->filter.pid || o->filter.tid || o->filter.t0 || o->filter.t1 ||
			     o->range.has_from || o->range.has_to)) {
		log_err("export: --diff compares whole runs: no --pid, --tid or time range");
		return -EINVAL;
	}
	if (o->format == EXPORT_PPROF && !strcmp(o->output, "-") && isatty(STDOUT_FILENO)) {
		log_err("export: pprof is binary; write it to a file with -o profile.pb.gz");
		return -EINVAL;
	}
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

/* --diff BASE: the comparison page, NEW being the command's input. */
static int export_diff(struct cmd_ctx *c)
{
	const struct export_cli *o = c->opts;
	struct profile *base = NULL;
	int err;

	if (profile_open(o->diff_base, &base))
		return 1;
	err = cmd_output(c) ? html_diff_write(c->out, base, c->in[0],
					      &(struct html_diff_opts){ .base_path = o->diff_base,
									.new_path = o->input })
			    : 1;
	profile__free(base);
	return err;
}

static int export_run(struct cmd_ctx *c)
{
	const struct export_cli *o = c->opts;
	struct sample_filter f = o->filter;

	if (o->diff_base)
		return export_diff(c);

	time_range_apply(&o->range, c->in[0], &f);
	return cmd_output(c) ? export_write(c->out, c->in[0], o, &f) : 1;
}

static int export_after(struct cmd_ctx *c)
{
	const struct export_cli *o = c->opts;

	if (strcmp(o->output, "-"))
		fprintf(stderr, "eprof: %s written to %s\n", export_formats[o->format - 1].name,
			o->output);
	return 0;
}

const struct command cmd_export = {
	.name = "export",
	.summary = "pprof, folded, JSON, CSV or a self-contained HTML report",
	.usage = "[FILE] --format FORMAT [-o OUT] [options]   (FILE: eprof.data)",
	CMD_OPTIONS(export_opts, export_defaults),
	.flags = CMD_OUTPUT | CMD_VIEW,
	.ninputs = 1,
	.input = { offsetof(struct export_cli, input) },
	.output = offsetof(struct export_cli, output),
	.view = offsetof(struct export_cli, view),
	.finish = export_finish,
	.run = export_run,
	.after = export_after,
};

int parse_export_args(int argc, char **argv, struct export_cli *o)
{
	return cmd_parse(&cmd_export, argc, argv, o);
}
