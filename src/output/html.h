/* SPDX-License-Identifier: MIT */
/*
 * One self-contained HTML report (no network): summary, the interactive
 * flamegraph inlined as SVG, top functions and threads in tables sortable by
 * column. Other kinds of data (memory, regions, GPU) add a section each to
 * html_sections[] in html.c.
 */
#ifndef EPROF_HTML_H
#define EPROF_HTML_H

#include "analysis/hot.h"

struct sink;

struct html_opts {
	struct sample_filter filter;
	const char *path; /* the record's file name, shown in the header */
	unsigned limit;	  /* function rows, 0 = default (1000) */
};

int html_write(struct sink *out, struct profile *p, const struct html_opts *o);

/* The report's stylesheet and its table-sorting script, for other pages (html_diff.c). */
/* The inline script of the head: shows script errors in the page. */
#define HTML_ERR_SCRIPT                                                                     \
	"window.addEventListener('error',function(e){var d="                                \
	"document.getElementById('js-errors');if(d)d.textContent+=e.message+'\\n';});"
/*
 * The Content-Security-Policy of a report (a <meta> for the head, before any script): no
 * network, and no script but eprof's own, named by their hashes (HTML_ERR_SCRIPT, the
 * report's, the flamegraph's), so that a name that got through unescaped still cannot run.
 */
void html_csp(struct sink *out);
const char *html_style(void);
const char *html_script(void);

/* A section of the report: writes its body (inside <section>) or returns -ENODATA to be left out.
 */
struct html_section {
	const char *id, *title;
	int (*write)(struct sink *out, struct profile *p, const struct html_opts *o);
};

/* Helpers for sections: a sortable table. Cells are escaped text; num cells sort numerically. */
void html_table_begin(struct sink *out, const char *id, const char *const *headers,
		      const char *types /* one of 'n' (number) or 's' per column */, size_t ncols);
void html_cell_text(struct sink *out, const char *text);
void html_cell_num(struct sink *out, double sort_value, const char *shown);
void html_table_end(struct sink *out);

/* The resource metrics section (html_metrics.c): -ENODATA when the record has none. */
int html_metrics_section(struct sink *out, const struct profile *p);

#endif
