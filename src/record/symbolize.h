/* SPDX-License-Identifier: MIT */
/* Fills the frames of every unsymbolized location of a profile. */
#ifndef EPROF_SYMBOLIZE_H
#define EPROF_SYMBOLIZE_H

#include <stdint.h>

#include "../model/profile.h"

struct symbolizer;

/* Returns a path that opens object obj now, or NULL to use the recorded path. */
typedef const char *(*object_path_fn)(void *ctx, uint32_t obj);

struct symbolize_stats {
	uint64_t locations, named, unknown;
	uint64_t objects_missing; /* recorded path gone or build-id changed */
};

int symbolize_profile(struct profile *p, struct symbolizer *sym, object_path_fn path_fn, void *ctx,
		      struct symbolize_stats *st);

#endif
