// SPDX-License-Identifier: MIT
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "flamegraph/flamegraph.h"
#include "analysis/diff.h"
#include "analysis/diff_gate.h"
#include "analysis/diff_job.h"
#include "analysis/diff_kinds.h"
#include "analysis/findings.h"
#include "analysis/ranks.h"
#include "cli/open.h"
#include "cmds.h"
#include "output/diff_report.h"
#include "util/json.h"
#include "util/log.h"
#include "util/sink.h"

#define DIFF_EXIT_REGRESSED 3
#define DIFF_EXIT_USAGE 2
#define ATTR_MAX_PATHS 5 /* the attribution names at most this many call paths */
#define ATTR_COVER 0.8	 /* ... that explain this share of the growth when they can */

static const struct opt_choice diff_sorts[] = {
	{ "total", DIFF_SORT_TOTAL },
	{ "self", DIFF_SORT_SELF },
	{ "share", DIFF_SORT_SHARE },
	{ NULL },
};

static int check_gate(const struct opt *opt, const char *arg)
{
	struct diff_gate g;
	char err[1024];

	(void)opt;
	if (diff_gate_parse(arg, &g, err, sizeof(err))) {
		log_err("%s", err);
		return -EINVAL;
	}
	return 0;
}

static const struct opt diff_opts[] = {
	OPT_FLAG("flamegraph", 0, struct diff_cli, flamegraph,
		 "write a differential flamegraph (NEW's shape; red grew,\n"
		 "blue shrank, by share of samples) to -o (default diff.svg)"),
	OPT_STRING("output", 'o', "FILE", struct diff_cli, output,
		   "the SVG with --flamegraph, else the table (default stdout)"),
	OPT_LIST("gate", 0, "EXPR", struct diff_cli, gates, ngates,
		 "exit 3 when EXPR holds, e.g. 'wall>+5%',\n"
		 "'function:parse.total>+20%', 'region:step.p99>+10%',\n"
		 "'memory.peak>+64MiB', 'gpu.idle>+5pt' (docs/diff.md);\n"
		 "sample-based keys must also beat noise (z > 3); repeatable",
		 .check = check_gate),
	OPT_DOUBLE("fail-above", 0, "PCT", struct diff_cli, fail_above, 0, DBL_MAX,
		   "exit 3 when a function's share of the samples (self), or\n"
		   "the run's wall or CPU time, grew by more than PCT%\n"
		   "(relative: 20% -> 24% is +20%) beyond sampling noise\n"
		   "(z > 3): a CI performance gate",
		   .suffix = "%", .expect = "a percentage, e.g. 5 or 2.5",
		   OPT_ALSO(struct diff_cli, has_fail)),
	OPT_DOUBLE("min-share", 0, "PCT", struct diff_cli, min_share, 0, DBL_MAX,
		   "gate only functions with at least PCT% of the samples in\n"
		   "either run (default 1; smaller ones are noise)",
		   .suffix = "%", .expect = "a percentage, e.g. 5 or 2.5"),
	OPT_STRING("per", 0, "REGION", struct diff_cli, per,
		   "normalise CPU, wall, off-CPU, GPU and allocated volume by\n"
		   "the instances of REGION in each run (per step, per request)"),
	OPT_CHOICE("sort", 0, struct diff_cli, sort, diff_sorts,
		   "functions by the change of their total (inclusive) CPU\n"
		   "seconds (default), self CPU seconds, or self share of\n"
		   "the samples (the share view)"),
	OPT_UINT("limit", 0, "N", struct diff_cli, limit, 0, 10000000,
		 "rows to show (default 30, 0 = all)"),
	OPT_UINT("paths", 0, "N", struct diff_cli, paths, 0, 10000000,
		 "call paths whose self time changed most to show (default 10)"),
	OPT_INT("rank", 0, "N", struct diff_cli, rank, 0, 1 << 30,
		"runs of a multi-rank job: compare rank N's recordings only\n"
		"(the job and rank tables still show every rank)"),
	OPT_FLAG("inline", 0, struct diff_cli, inlined, "count inlined functions on their own"),
	OPT_FLAG("json", 0, struct diff_cli, json, "machine-readable output"),
	OPT_VIEW(struct diff_cli, view),
	OPT_END,
};

static const struct diff_cli diff_defaults = { .limit = 30, .min_share = 1.0, .paths = 10,
					       .rank = -1 };

static int diff_finish(void *opts, int npos, char **pos)
{
	struct diff_cli *o = opts;

	if (o->flamegraph) {
		o->flamegraph_out = o->output ? o->output : "diff.svg";
		o->output = "-";
	} else if (!o->output) {
		o->output = "-";
	}
	return 0;
}

static void fmt_change(char *buf, size_t len, const struct diff_func *f)
{
	if (isinf(f->change_pct))
		snprintf(buf, len, "new");
	else if (!f->self[DIFF_NEW] && f->self[DIFF_BASE])
		snprintf(buf, len, "gone");
	else
		snprintf(buf, len, "%+.1f%%", f->change_pct);
}

/* The share view (--sort share): shares of the samples and CPU ms per second of run time. */
static void write_share_table(struct sink *out, const struct diff_cli *o,
			      const struct diff_result *r)
{
	size_t rows = o->limit && o->limit < r->n ? o->limit : r->n;
	char ch[32];

	sink_printf(out, "\n  %-32s %-18s %-24s\n", "Self % of samples", "Self CPU ms/s",
		    "Total % of samples");
	sink_printf(out, "%7s %7s %8s %8s %8s %8s %7s %7s %8s  %-40s %s\n", "base", "new", "delta",
		    "change", "base", "new", "base", "new", "delta", "Function", "Module");
	for (size_t i = 0; i < rows; i++) {
		const struct diff_func *f = &r->funcs[i];

		fmt_change(ch, sizeof(ch), f);
		sink_printf(out,
			    "%7.2f %7.2f %+8.2f %8s %8.1f %8.1f %7.2f %7.2f %+8.2f  %-40s %s%s\n",
			    f->self_pct[0], f->self_pct[1], f->self_pct[1] - f->self_pct[0], ch,
			    f->self_rate[0], f->self_rate[1], f->total_pct[0], f->total_pct[1],
			    f->total_pct[1] - f->total_pct[0], f->name, f->module,
			    o->has_fail && f->regressed ? "   << regressed" : "");
	}
}

/* Absolute CPU seconds, self and inclusive, before -> after. */
static void write_abs_table(struct sink *out, const struct diff_cli *o, const struct diff_result *r)
{
	size_t rows = o->limit && o->limit < r->n ? o->limit : r->n;
	char ch[32];

	sink_printf(out, "\nFunctions (CPU seconds%s; by the change of their %s time, --sort)\n",
		    o->per ? " per region instance" : "",
		    o->sort == DIFF_SORT_SELF ? "self" : "total");
	sink_printf(out, "  %-30s %-30s\n", "Self CPU s", "Total CPU s");
	sink_printf(out, "%9s %9s %10s %9s %9s %10s %8s  %-40s %s\n", "base", "new", "delta",
		    "base", "new", "delta", "total", "Function", "Module");
	for (size_t i = 0; i < rows; i++) {
		const struct diff_func *f = &r->funcs[i];
		double sb = diff_func_s(r, f, 0, false), sn = diff_func_s(r, f, 1, false);
		double tb = diff_func_s(r, f, 0, true), tn = diff_func_s(r, f, 1, true);

		diff_fmt_pct(ch, sizeof(ch), tb, tn);
		sink_printf(out, "%9.3f %9.3f %+10.3f %9.3f %9.3f %+10.3f %8s  %-40s %s%s\n",
			    sb, sn, sn - sb, tb, tn, tn - tb, ch, f->name, f->module,
			    o->has_fail && f->regressed ? "   << regressed" : "");
	}
}

static void write_header(struct sink *out, const struct diff_cli *o, const struct diff_result *r)
{
	const struct diff_run *b = &r->run[DIFF_BASE], *n = &r->run[DIFF_NEW];

	sink_printf(out, "# eprof diff: %s -> %s\n", o->base, o->new);
	sink_printf(out, "# %-5s %10s %10s %10s %6s  %s\n", "", "duration", "samples", "CPU time",
		    "cores", "command");
	for (int s = 0; s < 2; s++) {
		const struct diff_run *x = &r->run[s];

		sink_printf(out, "# %-5s %8.2f s %10" PRIu64 " %8.2f s %6.2f  %s\n",
			    s ? "new" : "base", x->duration_s, x->samples, x->cpu_ns / 1e9,
			    x->duration_s > 0 ? x->cpu_ns / 1e9 / x->duration_s : 0, x->command);
	}
	if (o->per)
		sink_printf(out,
			    "# per instance of region '%s': %" PRIu64 " in base, %" PRIu64
			    " in new; times below are per instance\n",
			    o->per, b->per_count, n->per_count);
	sink_printf(out,
		    "# speedup: wall %.2fx, cpu %.2fx   (BASE time / NEW time: above 1, NEW is "
		    "faster; wall %+.1f%%, CPU %+.1f%%)\n",
		    r->speedup_wall, r->speedup_cpu, r->wall_change_pct, r->cpu_change_pct);
	if (b->rate != n->rate)
		sink_printf(out,
			    "# note: sample rates differ (%u vs %u Hz); the comparison is by "
			    "CPU time and share\n",
			    b->rate, n->rate);
}

static void json_side(struct json *j, const char *key, const struct diff_result *r,
		      const struct diff_func *f, int s)
{
	json_obj_open(j, -1, key);
	json_kv_f(j, "self_s", diff_func_s(r, f, s, false), 6);
	json_kv_f(j, "total_s", diff_func_s(r, f, s, true), 6);
	json_kv_u64(j, "self", f->self[s]);
	json_kv_u64(j, "total", f->total[s]);
	json_kv_u64(j, "self_ns", f->self_ns[s]);
	json_kv_u64(j, "total_ns", f->total_ns[s]);
	json_kv_f(j, "self_pct", f->self_pct[s], 4);
	json_kv_f(j, "total_pct", f->total_pct[s], 4);
	json_kv_f(j, "self_ms_per_s", f->self_rate[s], 4);
	json_kv_f(j, "total_ms_per_s", f->total_rate[s], 4);
	json_obj_end(j);
}

static void json_run(struct json *j, const char *key, const char *file, const struct diff_run *x)
{
	json_obj_open(j, 2, key);
	json_kv_str(j, "file", file);
	json_kv_str(j, "command", x->command ? x->command : "");
	json_kv_f(j, "duration_s", x->duration_s, 6);
	json_kv_u64(j, "samples", x->samples);
	json_kv_u64(j, "cpu_ns", x->cpu_ns);
	json_kv_u64(j, "sample_rate", x->rate);
	if (x->per_count)
		json_kv_u64(j, "per_count", x->per_count);
	json_obj_end(j);
}

static void write_json(struct json *j, const struct diff_cli *o, const struct diff_report *d)
{
	const struct diff_result *r = d->r;
	size_t rows = o->limit && o->limit < r->n ? o->limit : r->n;

	json_obj(j);
	json_break(j, 2);
	json_kv_u64(j, "version", 2);
	diff_json_attribution(j, d);
	if (o->per)
		json_kv_str(j, "per", o->per);
	else
		json_kv_null(j, "per");
	json_run(j, "base", o->base, &r->run[DIFF_BASE]);
	json_run(j, "new", o->new, &r->run[DIFF_NEW]);
	json_obj_open(j, 2, "speedup");
	json_kv_f(j, "wall", r->speedup_wall, 4);
	json_kv_f(j, "cpu", r->speedup_cpu, 4);
	json_obj_end(j);
	json_kv_f(j, "wall_change_pct", r->wall_change_pct, 4);
	json_kv_f(j, "cpu_change_pct", r->cpu_change_pct, 4);
	if (o->has_fail) {
		json_break(j, 2);
		json_kv_f(j, "fail_above", o->fail_above, 4);
		json_kv_f(j, "min_share", o->min_share, 4);
		json_kv_bool(j, "total_regressed", r->total_regressed);
		json_kv_u64(j, "regressed_functions", r->nregressed);
	}
	json_arr_open(j, 2, "functions");
	for (size_t i = 0; i < rows; i++) {
		const struct diff_func *f = &r->funcs[i];

		json_obj_open(j, 4, NULL);
		json_kv_str(j, "name", f->name ? f->name : "");
		json_kv_str(j, "module", f->module ? f->module : "");
		json_side(j, "base", r, f, DIFF_BASE);
		json_side(j, "new", r, f, DIFF_NEW);
		json_kv_f(j, "self_delta_s",
			  diff_func_s(r, f, DIFF_NEW, false) - diff_func_s(r, f, DIFF_BASE, false),
			  6);
		json_kv_f(j, "total_delta_s",
			  diff_func_s(r, f, DIFF_NEW, true) - diff_func_s(r, f, DIFF_BASE, true),
			  6);
		if (isinf(f->change_pct)) {
			json_kv_null(j, "change_pct");
			json_kv_bool(j, "appeared", true);
		} else {
			json_kv_f(j, "change_pct", f->change_pct, 4);
		}
		json_kv_f(j, "z", f->z, 3);
		if (o->has_fail)
			json_kv_bool(j, "regressed", f->regressed);
		json_obj_end(j);
	}
	json_arr_close(j, rows ? 2 : -1);
	diff_json_paths(j, d);
	diff_json_kinds(j, d);
	diff_json_job(j, d);
	diff_json_gates(j, d);
}

static int write_flamegraph(const struct diff_cli *o, const struct profile *base,
			    const struct profile *new)
{
	struct diff_stacks d;
	char sub[512];
	struct sink *out;
	int err = diff_fg_stacks(base, new, &d);

	if (err)
		return err;
	snprintf(sub, sizeof(sub),
		 "%s vs %s: widths are NEW's samples, colours the change in share", o->new,
		 o->base);
	out = sink_open(o->flamegraph_out, 0);
	if (!out) {
		err = errno ? -errno : -EIO;
		diff_stacks__free(&d);
		return err;
	}
	err = flamegraph_write_svg(out, d.st, d.n,
				   &(struct fg_opts){.title = "Differential CPU flamegraph",
						     .subtitle = sub,
						     .unit = "samples",
						     .differential = true});
	err = sink_close(out) ?: err;
	diff_stacks__free(&d);
	return err;
}

static void json_finding(struct json *j, const struct finding_change *ch, const char *status)
{
	const struct finding *f = ch->new ? ch->new : ch->base;

	json_obj_open(j, 4, NULL);
	json_kv_str(j, "id", f->id);
	json_kv_str(j, "status", status);
	json_kv_str(j, "severity", finding_severity_name(f->severity));
	if (ch->base)
		json_kv_f(j, "impact_base", ch->base->impact, 4);
	else
		json_kv_null(j, "impact_base");
	if (ch->new)
		json_kv_f(j, "impact_new", ch->new->impact, 4);
	else
		json_kv_null(j, "impact_new");
	json_kv_str(j, "what", f->what);
	json_obj_end(j);
}

/* The findings of both runs side by side: appeared, still there, gone. j: as JSON. */
static int write_findings(struct sink *out, struct json *j, struct profile *base,
			  struct profile *new, const struct diff_cli *o,
			  const struct diff_result *r)
{
	static const struct sample_filter all;
	struct findings fb, fn = { 0 };
	struct finding_change *ch = NULL;
	/* the function tables diff made already, unless --inline split them differently */
	struct findings_pre pb = { .hot = o->inlined ? NULL : &r->hot[0] };
	struct findings_pre pn = { .hot = o->inlined ? NULL : &r->hot[1] };
	size_t n = 0;
	int err = findings_analyze(base, &all, &pb, &fb);

	err = err ?: findings_analyze(new, &all, &pn, &fn);
	err = err ?: findings_compare(&fb, &fn, &ch, &n);
	if (err)
		goto out;
	if (j) {
		json_arr_open(j, 2, "findings");
	} else {
		sink_printf(out, "\nFindings (docs/findings.md)%s\n", n ? "" : ": none in either run");
	}
	for (size_t i = 0; i < n; i++) {
		const struct finding *f = ch[i].new ? ch[i].new : ch[i].base;
		const char *st = !ch[i].base ? "new" : !ch[i].new ? "gone" : "both";

		if (j) {
			json_finding(j, &ch[i], st);
		} else {
			sink_printf(out, "  %-5s %-6s  %-19s %s%s\n", st,
				    finding_severity_name(f->severity), f->id, f->what,
				    ch[i].new ? "" : "   (base)");
			if (ch[i].base && ch[i].new)
				sink_printf(out, "  %-5s %-6s  %-19s impact %.1f%% -> %.1f%%\n", "", "", "",
					    100 * ch[i].base->impact, 100 * ch[i].new->impact);
		}
	}
	if (j)
		json_arr_close(j, n ? 2 : -1); /* [] when empty */
out:
	free(ch);
	findings__free(&fb);
	findings__free(&fn);
	return err;
}

struct diff_state {
	struct diff_result r;
	struct diff_attr a;
	struct diff_kinds k;
	struct diff_job job; /* two runs of a multi-rank job */
	bool has_job;
	struct diff_gate gates[DIFF_MAX_GATES];
	size_t ngates;
};

static int report_gate(const struct diff_cli *o, const struct diff_state *st)
{
	const struct diff_result *r = &st->r;
	size_t failed = 0;

	for (size_t i = 0; i < st->ngates; i++) {
		const struct diff_gate *g = &st->gates[i];
		char b[32], n[32], ch[40];

		if (!g->failed)
			continue;
		failed++;
		diff_gate_fmt(g, g->before, b, sizeof(b));
		diff_gate_fmt(g, g->after, n, sizeof(n));
		diff_gate_fmt_change(g, ch, sizeof(ch));
		log_err("gate failed: %s: %s -> %s (%s)", g->expr, b, n, ch);
		if (g->sampled)
			log_err("  beyond sampling noise: z = %.1f", g->z);
	}
	if (o->has_fail && (r->nregressed || r->total_regressed)) {
		for (size_t i = 0; i < r->n; i++) {
			const struct diff_func *f = &r->funcs[i];
			char ch[32];

			if (!f->regressed)
				continue;
			fmt_change(ch, sizeof(ch), f);
			log_err("regression: %s (%s) self share %s: %.2f%% -> %.2f%% of samples "
				"(%.1f -> %.1f CPU ms/s, z = %.1f)",
				f->name, f->module, ch, f->self_pct[0], f->self_pct[1],
				f->self_rate[0], f->self_rate[1], f->z);
		}
		if (r->total_regressed)
			log_err("regression: the run took %+.1f%% wall time and %+.1f%% CPU time",
				r->wall_change_pct, r->cpu_change_pct);
		log_err("diff: regressed by more than %.1f%% (--fail-above): exit status 3",
			o->fail_above);
		return DIFF_EXIT_REGRESSED;
	}
	if (failed) {
		log_err("diff: %zu of %zu gates failed: exit status 3", failed, st->ngates);
		return DIFF_EXIT_REGRESSED;
	}
	return 0;
}

static void state_free(void *p)
{
	struct diff_state *st = p;

	if (!st)
		return;
	diff_result__free(&st->r);
	diff_attr__free(&st->a);
	diff_kinds__free(&st->k);
	diff_job__free(&st->job);
	free(st);
}

/*
 * Either input a job's recordings (a directory, a glob): both runs analysed as jobs and
 * compared rank by rank (a single recording is a job of one), then each merged into one
 * profile (--rank: that rank's only) for the comparison of functions and paths. 0, or an
 * exit status.
 */
static int open_jobs(struct cmd_ctx *c, struct diff_state *st)
{
	const struct diff_cli *o = c->opts;
	struct job_summary js[2] = { 0 };
	const char *names[2] = { o->base, o->new };
	int err = 0, s;

	if (c->side[0].n <= 1 && c->side[1].n <= 1) {
		if (o->rank < 0)
			return 0;
		log_err("--rank: BASE and NEW are single recordings; give each run's directory "
			"(or glob) of rank recordings");
		return DIFF_EXIT_USAGE;
	}
	for (s = 0; !err && s < 2; s++) {
		char *one = (char *)names[s];

		if (c->side[s].n)
			err = job_analyze(c->side[s].profs, c->side[s].paths, c->side[s].n, &js[s]);
		else
			err = job_analyze(&c->in[s], &one, 1, &js[s]);
	}
	err = err ?: diff_job(&js[0], &js[1], &st->job);
	job_summary_free(&js[0]);
	job_summary_free(&js[1]);
	if (err) {
		log_err("failed to compare the jobs '%s' and '%s': %s", o->base, o->new,
			strerror(-err));
		return 1;
	}
	st->has_job = true;
	for (s = 0; s < 2; s++) {
		struct job_side *sd = &c->side[s];

		if (sd->n && job_merge(sd->profs, sd->paths, sd->n, o->rank, NULL, false, &c->in[s]))
			return 1;
	}
	return 0;
}

/* The comparison, the attribution, the other kinds, the gates: 0, or an exit status. */
static int analyze(struct cmd_ctx *c, struct diff_state *st)
{
	const struct diff_cli *o = c->opts;
	struct profile *base = c->in[0], *new = c->in[1];
	double scale[2];
	char msg[1024];
	int err;

	err = diff_profiles(base, new,
			    &(struct diff_opts){.inlined = o->inlined,
						.min_share = o->min_share,
						.fail_above = o->has_fail ? o->fail_above : INFINITY,
						.sort = (enum diff_sort)o->sort,
						.per = o->per},
			    &st->r);
	if (err == -ENOENT) {
		log_err("--per '%s': no instance of that region in %s (%" PRIu64
			" in base, %" PRIu64 " in new); record it with --region or EPROF_REGION_*",
			o->per, !st->r.run[0].per_count ? o->base : o->new, st->r.run[0].per_count,
			st->r.run[1].per_count);
		return DIFF_EXIT_USAGE;
	}
	scale[0] = st->r.run[0].scale;
	scale[1] = st->r.run[1].scale;
	err = err ?: diff_attribute(base, new, scale, ATTR_MAX_PATHS, ATTR_COVER, o->paths, &st->a);
	err = err ?: diff_kinds(base, new, &st->r, &st->k);
	st->k.job = st->has_job ? &st->job : NULL;
	if (err) {
		log_err("failed to compare '%s' and '%s': %s", o->base, o->new, strerror(-err));
		return 1;
	}
	for (size_t i = 0; i < o->ngates; i++) {
		struct diff_gate *g = &st->gates[st->ngates];

		if (diff_gate_parse(o->gates[i], g, msg, sizeof(msg)) ||
		    diff_gate_eval(g, &st->r, &st->k, msg, sizeof(msg))) {
			log_err("%s", msg);
			return DIFF_EXIT_USAGE;
		}
		st->ngates++;
	}
	return 0;
}

static int diff_run(struct cmd_ctx *c)
{
	const struct diff_cli *o = c->opts;
	struct diff_state *st = calloc(1, sizeof(*st));
	struct diff_report d;
	int err;

	if (!st) {
		log_err("out of memory");
		return 1;
	}
	c->state = st;
	c->state_free = state_free;
	err = open_jobs(c, st) ?: analyze(c, st);
	if (err)
		return err;
	d = (struct diff_report){ .r = &st->r, .a = &st->a, .k = &st->k, .gates = st->gates,
				  .ngates = st->ngates, .per = o->per, .limit = o->limit };
	c->text_out = !o->json;
	if (!cmd_output(c))
		return 1;
	if (o->json) {
		struct json j;

		json_init(&j, c->out, 0);
		write_json(&j, o, &d);
		err = write_findings(c->out, &j, c->in[0], c->in[1], o, &st->r);
		json_obj_close(&j, 0);
		return json_flush(&j) ?: err;
	}
	write_header(c->out, o, &st->r);
	diff_text_job(c->out, &d);
	diff_text_attribution(c->out, &d);
	if (o->sort == DIFF_SORT_SHARE)
		write_share_table(c->out, o, &st->r);
	else
		write_abs_table(c->out, o, &st->r);
	if (o->limit && o->limit < st->r.n)
		sink_printf(c->out, "... %zu more functions (--limit 0 shows all)\n",
			    st->r.n - o->limit);
	diff_text_paths(c->out, &d);
	diff_text_kinds(c->out, &d);
	err = write_findings(c->out, NULL, c->in[0], c->in[1], o, &st->r);
	diff_text_gates(c->out, &d);
	return err;
}

/* Once the table is out: the differential flamegraph, then the CI gate's exit status. */
static int diff_after(struct cmd_ctx *c)
{
	const struct diff_cli *o = c->opts;
	int err;

	if (o->flamegraph) {
		err = write_flamegraph(o, c->in[0], c->in[1]);
		if (err) {
			log_err("failed to write '%s': %s", o->flamegraph_out, strerror(-err));
			return 1;
		}
		fprintf(stderr, "eprof: differential flamegraph written to %s\n", o->flamegraph_out);
	}
	return report_gate(o, c->state);
}

const struct command cmd_diff = {
	.name = "diff",
	.summary = "compare two recordings; differential flamegraph; CI gate",
	.usage = "BASE NEW [options]",
	.about = "What got slower and why: the call paths that explain the growth of CPU time\n"
		 "first, then functions in CPU seconds (self and total), the call paths whose\n"
		 "self time changed most, regions, memory, off-CPU, GPU, threads and processes\n"
		 "of both runs, their findings, and the gates (--gate, --fail-above).\n"
		 "BASE and NEW may each be a job's recordings (a directory, or a quoted glob):\n"
		 "the job is then compared rank by rank, its collectives and stragglers too.\n",
	CMD_OPTIONS(diff_opts, diff_defaults),
	.flags = CMD_OUTPUT | CMD_JOB_PAIR | CMD_VIEW,
	.view = offsetof(struct diff_cli, view),
	.ninputs = 2,
	.input = { offsetof(struct diff_cli, base), offsetof(struct diff_cli, new) },
	.output = offsetof(struct diff_cli, output),
	.finish = diff_finish,
	.run = diff_run,
	.after = diff_after,
};

int parse_diff_args(int argc, char **argv, struct diff_cli *o)
{
	return cmd_parse(&cmd_diff, argc, argv, o);
}
