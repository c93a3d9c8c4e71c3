/* SPDX-License-Identifier: MIT */
#ifndef EPROF_FOLDED_H
#define EPROF_FOLDED_H

#include <stdbool.h>

#include "analysis/hot.h"
#include "analysis/stacks.h"

struct sink;

struct folded_opts {
	struct sample_filter filter;
	bool lines;	/* append " (file:line)" to frames with a source line */
	bool weight_ns; /* counts are CPU ns instead of samples */
	bool no_comm;	/* omit the thread name root frame */
	enum gil_filter gil; /* only Python samples with / without the GIL (GIL_ANY: all) */
	enum stack_view view; /* the stacks read in this view (the profile is not changed) */
};

/* Writes "comm;root;...;leaf COUNT" lines, one per unique stack. */
int folded_write(struct sink *out, const struct profile *p, const struct folded_opts *o);

/* The label of a frame as folded/flamegraph show it; buf may be used. */
const char *frame_label(const struct profile *p, const struct frame *f, bool lines, char *buf,
			size_t len);

#endif
