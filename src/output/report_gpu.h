/* SPDX-License-Identifier: MIT */
/* The GPU section of `eprof report`; both write nothing when the profile has no CUDA events. */
#ifndef EPROF_REPORT_GPU_H
#define EPROF_REPORT_GPU_H

struct sink;
struct profile;

int report_gpu_text(struct sink *out, const struct profile *p, unsigned limit);
/* Writes ",\n  \"gpu\": {...}" inside the report's top-level object. */
int report_gpu_json(struct sink *out, const struct profile *p);

#endif
