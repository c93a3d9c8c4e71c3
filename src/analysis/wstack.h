/* SPDX-License-Identifier: MIT */
/*
 * A weighted stack: the view of a profile's stacks that analyses hand to the stack writers
 * (the SVG and HTML flamegraphs), resolved to frame labels, so a writer needs no profile.
 */
#ifndef EPROF_WSTACK_H
#define EPROF_WSTACK_H

#include <stdint.h>

struct wstack_frame {
	const char *name; /* frame label (function name, maybe with " (file:line)") */
	uint8_t kind;	  /* enum frame_kind from model/profile.h: user, kernel, jit, unknown, special */
	const char *file; /* NULL, or a line more for the tooltip (a Python frame's source file) */
};

struct wstack {
	const struct wstack_frame *frames; /* ROOT first */
	uint32_t n;
	uint64_t weight; /* samples, ns or bytes */
	uint64_t base;	 /* differential mode: the same stack's weight in the base profile */
	/* Of weight, what Python threads ran holding the GIL and not holding it (0, 0: no data) */
	uint64_t gil_held, gil_free;
};

#endif
