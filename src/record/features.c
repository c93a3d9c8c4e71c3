// SPDX-License-Identifier: MIT
#include <stddef.h>

#include "model/profile.h"
#include "feature.h"

extern const struct feature feature_mem;
extern const struct feature feature_offcpu;
extern const struct feature feature_cuda;
extern const struct feature feature_region;
extern const struct feature feature_python;
extern const struct feature feature_metrics;
extern const struct feature feature_io;

/* One line per feature; each is defined in its own file of src/record/. */
const struct feature *const record_features[] = {
	&feature_mem,
	&feature_offcpu,
	&feature_cuda,
	&feature_region,
	&feature_python,
	&feature_metrics,
	&feature_io,
	NULL,
};

bool feature_next_target(const struct feature_ctx *f, size_t *i, uint32_t *pid)
{
	for (; *i < f->p->procs.n; (*i)++) {
		const struct process *pr = &f->p->procs.v[*i];

		if (!pr->exit_ts && pr->pid) {
			*pid = pr->pid;
			(*i)++;
			return true;
		}
	}
	return false;
}
