/* SPDX-License-Identifier: MIT */
/*
 * The GIL share of Python threads: samples of a thread of a CPython process
 * carry a root frame [GIL] or [no GIL] (src/record/events.c) saying whether
 * the thread held the GIL when it was sampled.
 */
#ifndef EPROF_ANALYSIS_PYGIL_H
#define EPROF_ANALYSIS_PYGIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/profile.h"
#include "hot.h"

/* Whether location loc is a [GIL] / [no GIL] marker. */
bool py_gil_marker(const struct profile *p, uint32_t loc);

/*
 * The GIL mark of every stack node's root: 1 [GIL], 2 [no GIL], 0 none (calloc'd, stacks.n
 * entries; NULL for -ENOMEM). *any: whether the profile has marks at all.
 */
uint8_t *py_gil_roots(const struct profile *p, bool *any);

struct py_gil_thread {
	uint32_t pid, tid;
	uint64_t samples; /* samples with a GIL marker */
	uint64_t held;	  /* ... with [GIL] */
};

/*
 * One entry per thread with marked samples matching f, by samples (most
 * first). *out is NULL and *n 0 when there are none. Returns 0 or -ENOMEM.
 */
int py_gil_stats(const struct profile *p, const struct sample_filter *f, struct py_gil_thread **out,
		 size_t *n);

#endif
