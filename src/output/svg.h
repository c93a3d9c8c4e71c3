/* SPDX-License-Identifier: MIT */
/* `eprof flamegraph`'s SVG: a profile's stacks through the renderer of flamegraph/. */
#ifndef EPROF_SVG_H
#define EPROF_SVG_H

#include "flamegraph/flamegraph.h"
#include "folded.h"

struct svg_opts {
	struct folded_opts stacks; /* which samples, how frames are labelled and weighed, view */
	struct fg_opts fg;	   /* title, unit, width, orientation */
	/*
	 * Stacks with Python frames: the python, mixed and native views all in the file, the
	 * viewer switching between them, opening on stacks.view. Without: that view alone.
	 */
	bool all_views;
};

int flamegraph_svg_write(struct sink *out, const struct profile *p, const struct svg_opts *o);

#endif
