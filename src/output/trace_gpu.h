/* SPDX-License-Identifier: MIT */
/* The GPU source of `eprof trace` (see trace_gpu.c). */
#ifndef EPROF_TRACE_GPU_H
#define EPROF_TRACE_GPU_H

#include "trace.h"

int trace_source_gpu(struct trace_writer *w, const struct profile *p, const struct trace_opts *o,
		     struct trace_stats *st);

#endif
