/* SPDX-License-Identifier: MIT */
/* Stacks as users see them: per (thread name, stack) totals, frames root first. */
#ifndef EPROF_STACKS_H
#define EPROF_STACKS_H

#include <stddef.h>
#include <stdint.h>

#include "hot.h"

struct collapsed {
	uint32_t comm; /* thread name string id */
	uint32_t node; /* leaf stack node */
	uint64_t samples, weight;
};

/* Groups samples by (thread name, stack), sorted by name then node. */
int collapse_stacks(const struct profile *p, const struct sample_filter *f, struct collapsed **out,
		    size_t *n);

/*
 * Frames of a stack node, ROOT first, inline frames expanded (outer before
 * inner). Returns the number of frames written (at most max); *total gets
 * the full count so callers can size a buffer.
 */
size_t stack_frames(const struct profile *p, uint32_t node, const struct frame **out, size_t max,
		    size_t *total);

#endif
