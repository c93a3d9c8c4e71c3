/* SPDX-License-Identifier: MIT */
/* Fills the frames of every unsymbolized location of a profile. */
#ifndef EPROF_SYMBOLIZE_H
#define EPROF_SYMBOLIZE_H

#include <stdbool.h>
#include <stdint.h>

#include "model/profile.h"

struct symbolizer;

/* Returns a path that opens object obj now, or NULL to use the recorded path. */
typedef const char *(*object_path_fn)(void *ctx, uint32_t obj);

struct symbolize_stats {
	uint64_t locations, named, unknown;
	uint64_t objects_missing; /* recorded path gone or build-id changed */
};

int symbolize_profile(struct profile *p, struct symbolizer *sym, object_path_fn path_fn, void *ctx,
		      struct symbolize_stats *st);

/*
 * Start of the executable mapping of process pid that holds addr: code a perf
 * map does not name is one row per mapping. False when unknown.
 */
typedef bool (*mapping_start_fn)(void *ctx, uint32_t pid, uint64_t addr, uint64_t *start);

struct symbolize_src {
	object_path_fn path;	       /* NULL: the recorded paths */
	mapping_start_fn mapping_start; /* NULL: the profile's mapping rows */
	void *ctx;
};

/* symbolize_profile with the recorder's view of the processes. */
int symbolize_profile_src(struct profile *p, struct symbolizer *sym,
			  const struct symbolize_src *src, struct symbolize_stats *st);

#endif
