// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "flamegraph/flamegraph.h"
#include "svg.h"
#include "analysis/procs.h"
#include "analysis/stacks.h"
#include "util/sha256.h"
#include "util/sink.h"
#include "html.h"
#include "report.h"
#include "analysis/findings.h"
#include "analysis/memory.h"
#include "report_gpu.h"
#include "report_io.h"
#include "report_mem.h"
#include "report_python.h"
#include "report_regions.h"

#define HTML_FUNC_ROWS 1000

static const char html_css[] =
    "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:0;color:#1d1d1f;"
    "background:#fafafa}\n"
    "header{background:#263238;color:#eceff1;padding:14px 24px}\n"
    "header h1{margin:0;font-size:20px;font-weight:600}\n"
    "header .cmd{font-family:ui-monospace,monospace;color:#b0bec5;margin:4px 0 0;"
    "word-break:break-all}\n"
    "nav{padding:6px 24px;background:#eceff1;border-bottom:1px solid #cfd8dc}\n"
    "nav a{margin-right:16px;color:#37474f;text-decoration:none}\n"
    "section{padding:8px 24px 16px}\n"
    "h2{font-size:17px;border-bottom:1px solid #ddd;padding-bottom:4px}\n"
    "dl.summary{display:grid;grid-template-columns:max-content auto;gap:2px 16px;margin:0}\n"
    "dl.summary dt{color:#555}dl.summary dd{margin:0;font-variant-numeric:tabular-nums}\n"
    /* a tall graph scrolls in a box one screen high (flamegraph.js opens it at the root) */
    ".fg{overflow:auto;max-height:calc(100vh - 110px);border:1px solid #ddd;background:#fff}\n"
    ".fg svg{display:block}\n"
    "table{border-collapse:collapse;font-variant-numeric:tabular-nums}\n"
    "th,td{padding:3px 10px;border-bottom:1px solid #eee;text-align:left}\n"
    "td.n,th.n{text-align:right}\n"
    "th{cursor:pointer;user-select:none;background:#f0f0f0;position:sticky;top:0}\n"
    "th[aria-sort=ascending]::after{content:' \\25B2'}\n"
    "th[aria-sort=descending]::after{content:' \\25BC'}\n"
    "td.fn{font-family:ui-monospace,monospace;max-width:60em;overflow-wrap:anywhere}\n"
    ".note{color:#666}\n#js-errors{color:#b00020;white-space:pre-wrap}\n"
    "footer{padding:12px 24px;color:#888;font-size:12px}\n"
    "figure.chart{margin:8px 0 12px}figure.chart figcaption{font-size:13px;color:#333}\n";

/* Sortable tables: click a header to sort by it, again to reverse. */
static const char html_js[] =
    "(function(){'use strict';\n"
    "function key(td,num){if(!td)return num?-Infinity:'';"
    "if(num){var v=parseFloat(td.getAttribute('data-v'));return isNaN(v)?-Infinity:v;}"
    "return td.textContent.toLowerCase();}\n"
    "function sortBy(table,th,col){var num=th.getAttribute('data-type')==='n';"
    "var desc=th.getAttribute('aria-sort')!=='descending';"
    "if(!num&&!th.hasAttribute('aria-sort'))desc=false;"
    "var ths=table.tHead.rows[0].cells;for(var i=0;i<ths.length;i++)ths[i].removeAttribute("
    "'aria-sort');"
    "th.setAttribute('aria-sort',desc?'descending':'ascending');"
    "var body=table.tBodies[0],rows=Array.prototype.slice.call(body.rows);"
    "rows.sort(function(a,b){var x=key(a.cells[col],num),y=key(b.cells[col],num);"
    "var r=x<y?-1:x>y?1:0;return desc?-r:r;});"
    "for(var k=0;k<rows.length;k++)body.appendChild(rows[k]);}\n"
    "var tables=document.querySelectorAll('table.sortable');"
    "Array.prototype.forEach.call(tables,function(t){"
    "Array.prototype.forEach.call(t.tHead.rows[0].cells,function(th,col){"
    "th.addEventListener('click',function(){sortBy(t,th,col);});});});\n"
    "document.body.setAttribute('data-ready','1');})();\n";

const char *html_style(void)
{
	return html_css;
}

const char *html_script(void)
{
	return html_js;
}

/* 'sha256-...' of the text prefix + body, as a CSP source list names a script. */
static void csp_hash(struct sink *out, const char *prefix, const char *body, size_t len)
{
	struct sha256 c;
	uint8_t d[32];
	char b64[45];

	sha256_init(&c);
	sha256_update(&c, prefix, strlen(prefix));
	sha256_update(&c, body, len);
	sha256_final(&c, d);
	sha256_base64(d, b64);
	sink_printf(out, " 'sha256-%s'", b64);
}

void html_csp(struct sink *out)
{
	size_t fg_len;
	const char *fg = flamegraph_script(&fg_len);

	sink_puts(out, "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
		       "style-src 'unsafe-inline'; img-src data:; script-src");
	csp_hash(out, "", HTML_ERR_SCRIPT, strlen(HTML_ERR_SCRIPT));
	csp_hash(out, "\n", html_js, strlen(html_js));
	csp_hash(out, "\n", fg, fg_len);
	sink_puts(out, "\">\n");
}

static void esc(struct sink *out, const char *s)
{
	sink_xml_str(out, s ? s : "");
}

void html_table_begin(struct sink *out, const char *id, const char *const *headers,
		      const char *types, size_t ncols)
{
	sink_puts(out, "<table class=\"sortable\" id=\"");
	esc(out, id);
	sink_puts(out, "\"><thead><tr>");
	for (size_t i = 0; i < ncols; i++) {
		bool num = types[i] == 'n';

		sink_printf(out, "<th%s data-type=\"%c\">", num ? " class=\"n\"" : "",
			    num ? 'n' : 's');
		esc(out, headers[i]);
		sink_puts(out, "</th>");
	}
	sink_puts(out, "</tr></thead>\n<tbody>\n");
}

void html_cell_text(struct sink *out, const char *text)
{
	sink_puts(out, "<td class=\"fn\">");
	esc(out, text);
	sink_puts(out, "</td>");
}

void html_cell_num(struct sink *out, double sort_value, const char *shown)
{
	sink_printf(out, "<td class=\"n\" data-v=\"%.17g\">", sort_value);
	esc(out, shown);
	sink_puts(out, "</td>");
}

void html_table_end(struct sink *out)
{
	sink_puts(out, "</tbody></table>\n");
}

static double pct(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * part / whole : 0;
}

static void dd(struct sink *out, const char *term, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void dd(struct sink *out, const char *term, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	sink_puts(out, "<dt>");
	esc(out, term);
	sink_puts(out, "</dt><dd>");
	esc(out, buf);
	sink_puts(out, "</dd>\n");
}

static void recorded_at(const struct profile *p, char *buf, size_t len)
{
	const char *v = profile__meta(p, "start_time");
	char *end;
	time_t t;
	struct tm tm;

	snprintf(buf, len, "%s", v ? v : "?");
	if (!v)
		return;
	t = (time_t)strtoll(v, &end, 10);
	if (*end || !gmtime_r(&t, &tm))
		return;
	strftime(buf, len, "%Y-%m-%d %H:%M:%S UTC", &tm);
}

static int section_summary(struct sink *out, struct profile *p, const struct html_opts *o)
{
	struct profile_summary s;
	char when[64];

	profile_summarize(p, &o->filter, &s);
	recorded_at(p, when, sizeof(when));
	sink_puts(out, "<dl class=\"summary\">\n");
	dd(out, "File", "%s", o->path ? o->path : "");
	dd(out, "Command", "%s", s.command);
	dd(out, "Recorded", "%s on %s (%s)", when, profile__meta(p, "hostname") ?: "?",
	   profile__meta(p, "kernel") ?: "?");
	dd(out, "Duration", "%.2f s", s.duration_s);
	dd(out, "Samples", "%" PRIu64 " at %u Hz", s.samples, s.rate);
	if (s.ncpus)
		dd(out, "CPU", "%.2f cores (%.1f%% of %u CPUs)", s.cores, 100.0 * s.cores / s.ncpus,
		   s.ncpus);
	else
		dd(out, "CPU", "%.2f cores", s.cores);
	dd(out, "Lost samples", "%" PRIu64, s.lost);
	dd(out, "Unknown leaf frames", "%.1f%%", pct(s.unknown_samples, s.samples));
	dd(out, "Truncated stacks", "%.1f%%", pct(s.truncated, s.samples));
	sink_puts(out, "</dl>\n");
	return out->err;
}

/*
 * The CPU flamegraph, as `eprof flamegraph` writes it (frames labelled alike: a Python frame
 * reads "qualname (file.py:LINE)"); the page's view is the profile's own, already applied.
 */
static int section_flamegraph(struct sink *out, struct profile *p, const struct html_opts *o)
{
	struct svg_opts so = {.stacks = {.filter = o->filter},
			      .fg = {.title = "CPU flamegraph",
				     .subtitle = profile__meta(p, "command"),
				     .unit = "samples",
				     .width = 1200}};
	struct sink *svg = sink_mem();
	const char *data;
	size_t len;
	int err = -ENOMEM;

	if (!svg)
		return err;
	err = flamegraph_svg_write(svg, p, &so);
	if (err)
		goto out;
	data = sink_mem_data(svg, &len);
	/* inline SVG in HTML: drop the XML declaration */
	if (!strncmp(data, "<?xml", 5) && strchr(data, '\n'))
		data = strchr(data, '\n') + 1;
	sink_puts(out, "<p class=\"note\">Click a frame to zoom, Ctrl+F or the search box to "
		       "highlight functions.</p>\n<div class=\"fg\">\n");
	sink_puts(out, data);
	sink_puts(out, "</div>\n");
	err = out->err;
out:
	sink_close(svg);
	return err;
}

static const char *kind_name(uint8_t kind)
{
	static const char *const names[] = {"user", "kernel", "jit", "unknown", "special", "python"};

	return kind < 6 ? names[kind] : "unknown";
}

static int section_functions(struct sink *out, struct profile *p, const struct html_opts *o)
{
	static const char *const hdr[] = {"Self %",	 "Total %",  "Self",   "Total",
					  "Self CPU ms", "Function", "Module", "Kind"};
	struct hot_opts ho = {.filter = o->filter};
	struct hot_result r;
	size_t limit = o->limit ? o->limit : HTML_FUNC_ROWS;
	char b[64];
	int err = hot_functions(p, &ho, &r);

	if (err)
		return err;
	html_table_begin(out, "functions-table", hdr, "nnnnnsss", 8);
	for (size_t i = 0; i < r.n && i < limit; i++) {
		const struct func_stat *f = &r.funcs[i];

		sink_puts(out, "<tr>");
		snprintf(b, sizeof(b), "%.2f", pct(f->self, r.samples));
		html_cell_num(out, pct(f->self, r.samples), b);
		snprintf(b, sizeof(b), "%.2f", pct(f->total, r.samples));
		html_cell_num(out, pct(f->total, r.samples), b);
		snprintf(b, sizeof(b), "%" PRIu64, f->self);
		html_cell_num(out, (double)f->self, b);
		snprintf(b, sizeof(b), "%" PRIu64, f->total);
		html_cell_num(out, (double)f->total, b);
		snprintf(b, sizeof(b), "%.1f", f->self_ns / 1e6);
		html_cell_num(out, f->self_ns / 1e6, b);
		html_cell_text(out, profile__str(p, f->name));
		html_cell_text(out, profile__str(p, f->module));
		html_cell_text(out, kind_name(f->kind));
		sink_puts(out, "</tr>\n");
	}
	html_table_end(out);
	if (r.n > limit)
		sink_printf(out,
			    "<p class=\"note\">%zu more functions: <code>eprof report --limit 0"
			    "</code> lists them all.</p>\n",
			    r.n - limit);
	hot_result__free(&r);
	return out->err;
}

static int section_threads(struct sink *out, struct profile *p, const struct html_opts *o)
{
	static const char *const hdr[] = {
	    "PID", "TID", "Thread", "Samples", "%", "CPU ms", "Hottest function (self)"};
	struct thread_stat *t;
	uint64_t total = 0;
	size_t n;
	char b[64];
	int err = thread_stats(p, &o->filter, &t, &n);

	if (err)
		return err;
	for (size_t i = 0; i < n; i++)
		total += t[i].samples;
	html_table_begin(out, "threads-table", hdr, "nnsnnns", 7);
	for (size_t i = 0; i < n; i++) {
		sink_puts(out, "<tr>");
		snprintf(b, sizeof(b), "%u", t[i].pid);
		html_cell_num(out, t[i].pid, b);
		snprintf(b, sizeof(b), "%u", t[i].tid);
		html_cell_num(out, t[i].tid, b);
		html_cell_text(out, profile__str(p, t[i].comm));
		snprintf(b, sizeof(b), "%" PRIu64, t[i].samples);
		html_cell_num(out, (double)t[i].samples, b);
		snprintf(b, sizeof(b), "%.2f", pct(t[i].samples, total));
		html_cell_num(out, pct(t[i].samples, total), b);
		snprintf(b, sizeof(b), "%.1f", t[i].weight / 1e6);
		html_cell_num(out, t[i].weight / 1e6, b);
		snprintf(b, sizeof(b), " (%" PRIu64 ")", t[i].top_self);
		sink_puts(out, "<td class=\"fn\">");
		esc(out, profile__str(p, t[i].top_func));
		esc(out, t[i].top_func ? b : "");
		sink_puts(out, "</td></tr>\n");
	}
	html_table_end(out);
	free(t);
	return out->err;
}

static int section_processes(struct sink *out, struct profile *p, const struct html_opts *o)
{
	static const char *const hdr[] = {"PID", "PPID", "Samples", "%", "CPU ms", "Threads",
					  "Command"};
	struct proc_stat *v;
	uint64_t total = 0;
	size_t n;
	char b[64];
	int err = process_stats(p, &o->filter, &v, &n);

	if (err)
		return err;
	if (!n)
		return -ENODATA;
	for (size_t i = 0; i < n; i++)
		total += v[i].samples;
	html_table_begin(out, "processes-table", hdr, "nnnnnns", 7);
	for (size_t i = 0; i < n; i++) {
		sink_puts(out, "<tr>");
		snprintf(b, sizeof(b), "%u", v[i].pid);
		html_cell_num(out, v[i].pid, b);
		snprintf(b, sizeof(b), "%u", v[i].ppid);
		html_cell_num(out, v[i].ppid, b);
		snprintf(b, sizeof(b), "%" PRIu64, v[i].samples);
		html_cell_num(out, (double)v[i].samples, b);
		snprintf(b, sizeof(b), "%.2f", pct(v[i].samples, total));
		html_cell_num(out, pct(v[i].samples, total), b);
		snprintf(b, sizeof(b), "%.1f", v[i].weight / 1e6);
		html_cell_num(out, v[i].weight / 1e6, b);
		snprintf(b, sizeof(b), "%u", v[i].threads);
		html_cell_num(out, v[i].threads, b);
		html_cell_text(out, proc_command(p, &v[i], b, sizeof(b)));
		sink_puts(out, "</tr>\n");
	}
	html_table_end(out);
	free(v);
	return out->err;
}

enum feature_section { FS_MEMORY, FS_OFFCPU, FS_REGIONS, FS_GPU, FS_IO, FS_PYTHON };

/* The memory analysis of the filter's process (every process without --pid), or 1 if none. */
static int mem_analysis(const struct profile *p, const struct sample_filter *f,
			struct mem_result *mem)
{
	if (!report_mem_present(p))
		return 1;
	return memory_analyze(p, &(struct mem_opts){.temp_ns = 1000000, .pid = f->pid}, mem);
}

/*
 * The memory, off-CPU, region, GPU, I/O and Python lines sections as `eprof report` prints
 * them (a preformatted block), for the page's --pid/--tid filter as the report applies it:
 * one rendering for both, and "no data" when the record has none.
 */
static int section_feature(struct sink *out, struct profile *p, const struct sample_filter *f,
			   enum feature_section which)
{
	struct report_opts ro = {.limit = 20, .hot = {.filter = *f}};
	struct sink *txt = sink_mem();
	struct mem_result mem;
	const char *data;
	size_t len = 0;
	int err = 0, have_mem = 0;

	if (!txt)
		return -ENOMEM;
	if (which == FS_MEMORY || which == FS_PYTHON) {
		have_mem = mem_analysis(p, f, &mem);
		if (have_mem < 0) {
			sink_close(txt);
			return have_mem;
		}
		have_mem = !have_mem;
	}
	switch (which) {
	case FS_MEMORY:
		err = have_mem ? report_mem_text(txt, p, &mem, 20) : 0; /* none: no data */
		break;
	case FS_OFFCPU:
		err = report_offcpu(txt, p, &ro);
		break;
	case FS_REGIONS:
		err = report_regions_text(txt, p, f, 0);
		break;
	case FS_IO:
		err = report_io_text(txt, p, f, 20);
		break;
	case FS_PYTHON:
		err = report_py_lines_text(txt, p, f, have_mem ? &mem : NULL, 20);
		break;
	default:
		err = report_gpu_text(txt, p, 20);
		break;
	}
	if (have_mem)
		mem_result__free(&mem);
	data = err || txt->err ? NULL : sink_mem_data(txt, &len);
	while (data && len && (data[0] == '\n'))
		data++, len--;
	if (!err && !txt->err && len) {
		sink_puts(out, "<pre class=\"report\">");
		esc(out, data);
		sink_puts(out, "</pre>\n");
	} else if (!err) {
		err = txt->err ? txt->err : -ENODATA;
	}
	sink_close(txt);
	return err;
}

static int section_python(struct sink *out, struct profile *p, const struct html_opts *o)
{
	return section_feature(out, p, &o->filter, FS_PYTHON);
}

static int section_memory(struct sink *out, struct profile *p, const struct html_opts *o)
{
	return section_feature(out, p, &o->filter, FS_MEMORY);
}

static int section_offcpu(struct sink *out, struct profile *p, const struct html_opts *o)
{
	return section_feature(out, p, &o->filter, FS_OFFCPU);
}

static int section_regions(struct sink *out, struct profile *p, const struct html_opts *o)
{
	return section_feature(out, p, &o->filter, FS_REGIONS);
}

static int section_gpu(struct sink *out, struct profile *p, const struct html_opts *o)
{
	return section_feature(out, p, &o->filter, FS_GPU);
}

static int section_io(struct sink *out, struct profile *p, const struct html_opts *o)
{
	return section_feature(out, p, &o->filter, FS_IO);
}

/* The report's findings (analysis/findings.c) as a table, most severe first. */
static int section_findings(struct sink *out, struct profile *p, const struct html_opts *o)
{
	static const char *const hdr[] = {"Severity", "Finding", "What the record shows",
					  "Next step"};
	struct findings fs;
	int err = findings_analyze(p, &o->filter, NULL, &fs);

	if (err)
		return err;
	if (!fs.n) {
		sink_puts(out, "<p class=\"note\">None above the thresholds (docs/findings.md lists "
			       "the rules).</p>\n");
		return out->err;
	}
	html_table_begin(out, "findings-table", hdr, "ssss", 4);
	for (size_t i = 0; i < fs.n; i++) {
		sink_puts(out, "<tr>");
		html_cell_text(out, finding_severity_name(fs.v[i].severity));
		html_cell_text(out, fs.v[i].id);
		html_cell_text(out, fs.v[i].what);
		html_cell_text(out, fs.v[i].advice);
		sink_puts(out, "</tr>\n");
	}
	html_table_end(out);
	findings__free(&fs);
	return out->err;
}

static int section_metrics(struct sink *out, struct profile *p, const struct html_opts *o)
{
	(void)o;
	return html_metrics_section(out, p);
}

static const struct html_section html_sections[] = {
    {"summary", "Summary", section_summary},
    {"findings", "Findings", section_findings},
    {"resources", "Resources", section_metrics},
    {"flamegraph", "CPU flamegraph", section_flamegraph},
    {"functions", "Top functions", section_functions},
    {"python", "Python lines", section_python},
    {"processes", "Processes", section_processes},
    {"threads", "Threads", section_threads},
    {"memory", "Memory", section_memory},
    {"offcpu", "Off-CPU time", section_offcpu},
    {"io", "I/O by stack", section_io},
    {"regions", "Regions", section_regions},
    {"gpu", "GPU", section_gpu},
};
#define NSECTIONS (sizeof(html_sections) / sizeof(html_sections[0]))

int html_write(struct sink *out, struct profile *p, const struct html_opts *o)
{
	const char *cmd = profile__meta(p, "command");
	int err = 0;

	sink_puts(out,
		  "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
		  "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
		  "<meta name=\"generator\" content=\"eprof " EPROF_VERSION "\">\n");
	html_csp(out);
	sink_puts(out, "<title>eprof: ");
	esc(out, cmd ? cmd : o->path);
	sink_puts(out, "</title>\n<style>\n");
	sink_puts(out, html_css);
	sink_puts(out,
		  "</style>\n<script>" HTML_ERR_SCRIPT "</script>\n</head>\n<body>\n"
		  "<header><h1>eprof report</h1><p class=\"cmd\">");
	esc(out, cmd ? cmd : "");
	sink_puts(out, "</p></header>\n<nav>");
	for (size_t i = 0; i < NSECTIONS; i++) {
		sink_printf(out, "<a href=\"#%s\">", html_sections[i].id);
		esc(out, html_sections[i].title);
		sink_puts(out, "</a>");
	}
	sink_puts(out, "</nav>\n<div id=\"js-errors\"></div>\n");
	for (size_t i = 0; i < NSECTIONS && !err; i++) {
		sink_printf(out, "<section id=\"%s\"><h2>", html_sections[i].id);
		esc(out, html_sections[i].title);
		sink_puts(out, "</h2>\n");
		err = html_sections[i].write(out, p, o);
		if (err == -ENODATA) {
			sink_puts(out, "<p class=\"note\">no data</p>\n");
			err = 0;
		}
		sink_puts(out, "</section>\n");
	}
	sink_puts(out, "<footer>eprof " EPROF_VERSION " &middot; self-contained report: no network "
		       "access needed</footer>\n<script>\n");
	sink_puts(out, html_js);
	sink_puts(out, "</script>\n</body></html>\n");
	return err ? err : out->err;
}
