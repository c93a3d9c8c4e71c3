// SPDX-License-Identifier: MIT
/* The HTML page of eprof diff (html_diff.h). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flamegraph/flamegraph.h"
#include "analysis/diff.h"
#include "analysis/diff_kinds.h"
#include "util/sink.h"
#include "diff_report.h"
#include "html.h"
#include "html_diff.h"

#define HTML_DIFF_ROWS 1000
#define ATTR_MAX_PATHS 5
#define ATTR_COVER 0.8
#define TOP_PATHS 50

struct page {
	struct diff_result r;
	struct diff_attr a;
	struct diff_kinds k;
};

static void esc(struct sink *out, const char *s)
{
	sink_xml_str(out, s ? s : "");
}

static void num(struct sink *out, double v, const char *fmt)
{
	char buf[64];

	snprintf(buf, sizeof(buf), fmt, v);
	html_cell_num(out, v, buf);
}

static void section(struct sink *out, const char *id, const char *title)
{
	sink_printf(out, "<section id=\"%s\"><h2>", id);
	esc(out, title);
	sink_puts(out, "</h2>\n");
}

static void summary(struct sink *out, const struct html_diff_opts *o, const struct page *pg)
{
	static const char *const h[] = {"run", "file", "duration s", "samples", "CPU s", "command"};
	const struct diff_result *r = &pg->r;

	section(out, "summary", "Runs");
	html_table_begin(out, "runs", h, "ssnnns", 6);
	for (int s = 0; s < 2; s++) {
		const struct diff_run *x = &r->run[s];

		sink_puts(out, "<tr>");
		html_cell_text(out, s ? "new" : "base");
		html_cell_text(out, s ? o->new_path : o->base_path);
		num(out, x->duration_s, "%.3f");
		num(out, (double)x->samples, "%.0f");
		num(out, x->cpu_ns / 1e9, "%.3f");
		html_cell_text(out, x->command ? x->command : "");
		sink_puts(out, "</tr>\n");
	}
	html_table_end(out);
	sink_printf(out,
		    "<p>Speedup (BASE time / NEW time: above 1, NEW is faster): wall %.2fx, CPU "
		    "%.2fx &mdash; wall %+.1f%%, CPU %+.1f%%.</p>\n</section>\n",
		    r->speedup_wall, r->speedup_cpu, r->wall_change_pct, r->cpu_change_pct);
}

static void path_rows(struct sink *out, const char *id, const struct diff_path *p, size_t n,
		      bool share)
{
	static const char *const h[] = {"base s", "new s", "delta s", "share of growth",
					"call path (root;...;leaf)"};
	static const char *const ht[] = {"self base s",	 "self new s",
					 "self delta s", "total base s",
					 "total new s",	 "call path (root;...;leaf)"};

	if (share)
		html_table_begin(out, id, h, "nnnns", 5);
	else
		html_table_begin(out, id, ht, "nnnnns", 6);
	for (size_t i = 0; i < n; i++) {
		sink_puts(out, "<tr>");
		if (share) {
			num(out, p[i].before_s, "%.3f");
			num(out, p[i].after_s, "%.3f");
			num(out, p[i].delta_s, "%+.3f");
			num(out, 100 * p[i].share, "%.1f%%");
		} else {
			num(out, p[i].self_before_s, "%.3f");
			num(out, p[i].self_after_s, "%.3f");
			num(out, p[i].self_after_s - p[i].self_before_s, "%+.3f");
			num(out, p[i].before_s, "%.3f");
			num(out, p[i].after_s, "%.3f");
		}
		html_cell_text(out, p[i].path);
		sink_puts(out, "</tr>\n");
	}
	html_table_end(out);
}

static void attribution(struct sink *out, const struct page *pg)
{
	section(out, "explained", "Regression explained by");
	if (pg->a.growth_s <= 0 || !pg->a.n) {
		sink_puts(out, "<p class=\"note\">Nothing grew: no CPU time to explain.</p>\n");
	} else {
		sink_printf(out,
			    "<p>%zu call path%s explain%s %.0f%% of the growth of CPU time "
			    "(+%.3f s): each path's growth that no smaller set of its callees "
			    "explains.</p>\n",
			    pg->a.n, pg->a.n == 1 ? "" : "s", pg->a.n == 1 ? "s" : "",
			    100 * pg->a.explained, pg->a.growth_s);
		path_rows(out, "attribution", pg->a.paths, pg->a.n, true);
	}
	sink_puts(out, "</section>\n");
}

static int flamegraph(struct sink *out, const struct html_diff_opts *o, struct profile *base,
		      struct profile *new)
{
	struct diff_stacks d;
	struct sink *svg = sink_mem();
	char sub[512];
	const char *data;
	size_t len;
	int err = svg ? diff_fg_stacks(base, new, &d) : -ENOMEM;

	if (err) {
		if (svg)
			sink_close(svg);
		return err;
	}
	snprintf(sub, sizeof(sub),
		 "%s vs %s: widths are NEW's samples, colours the change in share", o->new_path,
		 o->base_path);
	err = flamegraph_write_svg(svg, d.st, d.n,
				   &(struct fg_opts){.title = "Differential CPU flamegraph",
						     .subtitle = sub,
						     .unit = "samples",
						     .width = 1200,
						     .differential = true});
	if (!err) {
		data = sink_mem_data(svg, &len);
		if (!strncmp(data, "<?xml", 5) && strchr(data, '\n'))
			data = strchr(data, '\n') + 1;
		section(out, "flamegraph", "Differential flamegraph");
		sink_puts(out, "<p class=\"note\">NEW's stacks; red grew, blue shrank (by share of "
			       "the samples). Click a frame to zoom.</p>\n<div class=\"fg\">\n");
		sink_puts(out, data);
		sink_puts(out, "</div>\n</section>\n");
	}
	sink_close(svg);
	diff_stacks__free(&d);
	return err;
}

static void functions(struct sink *out, const struct html_diff_opts *o, const struct page *pg)
{
	static const char *const h[] = {"self base s",	"self new s",  "self delta s",
					"total base s", "total new s", "total delta s",
					"function",	"module"};
	const struct diff_result *r = &pg->r;
	size_t rows = o->limit ? o->limit : HTML_DIFF_ROWS;

	rows = rows < r->n ? rows : r->n;
	section(out, "functions", "Functions (CPU seconds)");
	html_table_begin(out, "functions-table", h, "nnnnnnss", 8);
	for (size_t i = 0; i < rows; i++) {
		const struct diff_func *f = &r->funcs[i];
		double sb = diff_func_s(r, f, 0, false), sn = diff_func_s(r, f, 1, false);
		double tb = diff_func_s(r, f, 0, true), tn = diff_func_s(r, f, 1, true);

		sink_puts(out, "<tr>");
		num(out, sb, "%.3f");
		num(out, sn, "%.3f");
		num(out, sn - sb, "%+.3f");
		num(out, tb, "%.3f");
		num(out, tn, "%.3f");
		num(out, tn - tb, "%+.3f");
		html_cell_text(out, f->name);
		html_cell_text(out, f->module);
		sink_puts(out, "</tr>\n");
	}
	html_table_end(out);
	if (rows < r->n)
		sink_printf(out,
			    "<p class=\"note\">%zu more functions (eprof diff --limit 0).</p>\n",
			    r->n - rows);
	sink_puts(out, "</section>\n");
}

/* Regions, memory, off-CPU, GPU, threads: the text of eprof diff, preformatted. */
static int kinds(struct sink *out, const struct page *pg)
{
	struct diff_report d = {.r = &pg->r, .a = &pg->a, .k = &pg->k, .limit = 30};
	struct sink *txt = sink_mem();
	const char *data;
	size_t len;

	if (!txt)
		return -ENOMEM;
	diff_text_kinds(txt, &d);
	data = sink_mem_data(txt, &len);
	section(out, "kinds", "Regions, memory, off-CPU, GPU, threads, processes");
	if (!len) {
		sink_puts(out, "<p class=\"note\">no data besides CPU samples</p>\n");
	} else {
		sink_puts(out, "<pre>");
		esc(out, data);
		sink_puts(out, "</pre>\n");
	}
	sink_puts(out, "</section>\n");
	sink_close(txt);
	return 0;
}

static void page_begin(struct sink *out, const struct html_diff_opts *o)
{
	static const char *const nav[][2] = {
	    {"summary", "Runs"},	{"explained", "Explained by"}, {"flamegraph", "Flamegraph"},
	    {"functions", "Functions"}, {"paths", "Call paths"},       {"kinds", "Other data"},
	};

	sink_puts(out, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
		       "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
		       "<meta name=\"generator\" content=\"eprof " EPROF_VERSION "\">\n");
	html_csp(out);
	sink_puts(out, "<title>eprof diff: ");
	esc(out, o->base_path);
	sink_puts(out, " &#8594; ");
	esc(out, o->new_path);
	sink_puts(out, "</title>\n<style>\n");
	sink_puts(out, html_style());
	sink_puts(out,
		  "pre{font:12px/1.35 ui-monospace,monospace;overflow:auto}\n</style>\n"
		  "<script>" HTML_ERR_SCRIPT "</script>\n</head>\n<body>\n"
		  "<header><h1>eprof diff</h1><p class=\"cmd\">");
	esc(out, o->base_path);
	sink_puts(out, " &#8594; ");
	esc(out, o->new_path);
	sink_puts(out, "</p></header>\n<nav>");
	for (size_t i = 0; i < sizeof(nav) / sizeof(nav[0]); i++)
		sink_printf(out, "<a href=\"#%s\">%s</a>", nav[i][0], nav[i][1]);
	sink_puts(out, "</nav>\n<div id=\"js-errors\"></div>\n");
}

int html_diff_write(struct sink *out, struct profile *base, struct profile *new,
		    const struct html_diff_opts *o)
{
	struct page *pg = calloc(1, sizeof(*pg));
	int err;

	if (!pg)
		return -ENOMEM;
	err = diff_profiles(base, new, &(struct diff_opts){.fail_above = INFINITY}, &pg->r);
	err = err
		  ?: diff_attribute(base, new, (double[]){1, 1}, ATTR_MAX_PATHS, ATTR_COVER,
				    TOP_PATHS, &pg->a);
	err = err ?: diff_kinds(base, new, &pg->r, &pg->k);
	if (err)
		goto out;
	page_begin(out, o);
	summary(out, o, pg);
	attribution(out, pg);
	err = flamegraph(out, o, base, new);
	if (err)
		goto out;
	functions(out, o, pg);
	section(out, "paths", "Call paths whose self CPU time changed most");
	path_rows(out, "paths-table", pg->a.top, pg->a.ntop, false);
	sink_puts(out, "</section>\n");
	err = kinds(out, pg);
	sink_puts(out, "<footer>eprof " EPROF_VERSION " &middot; self-contained page: no network "
		       "access needed</footer>\n<script>\n");
	sink_puts(out, html_script());
	sink_puts(out, "</script>\n</body></html>\n");
	err = err ?: out->err;
out:
	diff_result__free(&pg->r);
	diff_attr__free(&pg->a);
	diff_kinds__free(&pg->k);
	free(pg);
	return err;
}
