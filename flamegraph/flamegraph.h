/* SPDX-License-Identifier: MIT */
/* Interactive SVG flamegraph renderer (our own): zoom, search, tooltips. */
#ifndef EPROF_FLAMEGRAPH_H
#define EPROF_FLAMEGRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analysis/wstack.h"

struct sink;

struct fg_opts {
	const char *title;	/* "CPU flamegraph" */
	const char *subtitle;	/* e.g. the command line; may be NULL */
	const char *unit;	/* "samples", "ns", "bytes": how the tooltip prints weights */
	unsigned width;		/* px, default 1200 */
	bool differential;	/* colour by (weight - base): red grew, blue shrank */
	bool inverted;		/* icicle graph: the root at the top, callees below */
	bool gil_colors;	/* open coloured by the GIL share (needs gil_held/gil_free) */
};

/*
 * The text of the SVG's one script that runs (inside CDATA, after a newline): the HTML
 * export names its hash in its Content-Security-Policy.
 */
const char *flamegraph_script(size_t *len);

/* Merges stacks into a tree and writes a self-contained SVG. Returns 0 or -errno. */
int flamegraph_write_svg(struct sink *out, const struct wstack *stacks, size_t n,
			 const struct fg_opts *opts);

/* One view of the same samples (python, mixed, native: analysis/view.h), for the viewer. */
struct fg_view {
	const char *name; /* the control's label */
	const struct wstack *stacks;
	size_t n;
};

/*
 * The same SVG holding several views of the same samples, a control of the viewer switching
 * between them: the static picture and the first drawing are views[open]'s; the views share
 * one table of names. One view writes what flamegraph_write_svg() does.
 */
int flamegraph_write_svg_views(struct sink *out, const struct fg_view *views, size_t nviews,
			       size_t open, const struct fg_opts *opts);

#endif
