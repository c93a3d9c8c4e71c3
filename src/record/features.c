// SPDX-License-Identifier: MIT
#include <bpf/libbpf.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

#include "model/profile.h"
#include "util/log.h"
#include "feature.h"
#include "profile.skel.h"

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

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Every map of late is the session's map of the same name (its fd), so nothing is created. */
static int share_maps(const struct profile_bpf *skel, struct profile_bpf *late)
{
	struct bpf_map *m;

	bpf_object__for_each_map(m, late->obj)
	{
		const struct bpf_map *have = bpf_object__find_map_by_name(skel->obj,
									  bpf_map__name(m));
		int err;

		if (!have || bpf_map__fd(have) < 0)
			return -ENOENT;
		err = bpf_map__reuse_fd(m, bpf_map__fd(have));
		if (err)
			return err;
	}
	return 0;
}

struct profile_bpf *feature_load_late(const struct feature_ctx *f, const char *what,
				      void (*pick)(struct profile_bpf *late, void *arg), void *arg)
{
	struct profile_bpf *late;
	struct bpf_program *prog;
	uint64_t t0 = mono_ns();
	int err;

	late = profile_bpf__open();
	if (!late)
		return NULL;
	bpf_object__for_each_program(prog, late->obj)
		bpf_program__set_autoload(prog, false);
	pick(late, arg);
	err = share_maps(f->skel, late);
	if (!err)
		err = profile_bpf__load(late);
	/* the tracepoints among them (the uprobes are attached by the feature) */
	if (!err)
		err = profile_bpf__attach(late);
	if (err) {
		log_warn("failed to load the BPF programs of %s: %s (run with -vv for the verifier "
			 "log)", what, strerror(-err));
		profile_bpf__destroy(late);
		errno = -err;
		return NULL;
	}
	log_debug("%s: BPF programs loaded on first use in %.1f ms", what,
		  (mono_ns() - t0) / 1e6);
	return late;
}
