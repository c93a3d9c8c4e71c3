/* SPDX-License-Identifier: MIT */
/*
 * Comparing two recordings of the same program (BASE and NEW).
 *
 * Runs differ in length and sample rate, so functions are compared
 * normalised two ways: per second of run time (CPU ms the function burned
 * per wall second: "rate") and per sample (share of the run's samples). The
 * overall speedup compares wall time and CPU time.
 *
 * A function "regressed by X%" when its share of the samples grew by X%
 * relative to BASE (20% -> 24% is +20%): shares do not move when a run is
 * longer, or gets fewer CPUs on a busy machine, while the per-second rate
 * does. Sampling noise is not a regression: the growth must also be beyond
 * 3 standard deviations of the two shares (a two-proportion z-test), and
 * functions under min_share % of the samples in both runs are not gated.
 * A program that got slower everywhere keeps its shares: the total (wall
 * and CPU time) is gated too.
 */
#ifndef EPROF_DIFF_H
#define EPROF_DIFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hot.h"
#include "wstack.h"
#include "model/profile.h"

enum { DIFF_BASE = 0, DIFF_NEW = 1 };

struct diff_run {
	const char *command;
	double duration_s;
	uint64_t samples, cpu_ns;
	unsigned rate;
	/* --per REGION: the region's instances in this run, and 1 / that (else 1): every flow
	 * (CPU, wall, off-CPU, GPU and allocated volume) is multiplied by scale */
	uint64_t per_count;
	double scale;
};

struct diff_func {
	const char *name, *module; /* strings of NEW's profile, or BASE's when gone */
	uint8_t kind;
	uint64_t self[2], total[2];	    /* samples, [DIFF_BASE] and [DIFF_NEW] */
	uint64_t self_ns[2], total_ns[2];   /* CPU ns */
	double self_pct[2], total_pct[2];   /* share of the run's samples, % */
	double self_rate[2], total_rate[2]; /* CPU ms per second of run time */
	double change_pct;		    /* relative change of self_pct, %; +inf when new */
	double z;			    /* significance of the share's change */
	bool gated;			    /* at least min_share % in either run */
	bool regressed;			    /* gated and change_pct > fail_above */
};

enum diff_sort {
	DIFF_SORT_TOTAL = 0, /* |change of inclusive CPU seconds| */
	DIFF_SORT_SELF = 1,  /* |change of self CPU seconds| */
	DIFF_SORT_SHARE = 2, /* |change of self share of the samples| (the share view) */
};

struct diff_opts {
	bool inlined;	   /* count inlined functions on their own */
	double min_share;  /* %, default 1 when 0 */
	double fail_above; /* %, regressions above this count */
	enum diff_sort sort;
	const char *per; /* region name: normalise by its instance count, or NULL */
};

struct diff_result {
	struct diff_run run[2];
	struct diff_func *funcs; /* sorted by opts.sort, largest change first */
	size_t n;
	double speedup_wall, speedup_cpu;	/* BASE / NEW: above 1, NEW is faster */
	double wall_change_pct, cpu_change_pct; /* NEW against BASE, % */
	bool total_regressed;			/* wall or CPU time grew more than fail_above */
	size_t nregressed;			/* functions that regressed */
	/* hot_functions() of each run, kept for findings_pre (without opts.inlined) */
	struct hot_result hot[2];
	char prog[2][64]; /* diff_program() of each run */
};

/*
 * The file name of the run's program: the recorded command's first word without its
 * directory ("wl_gcc" of "./wl_gcc 2"), at most len - 1 bytes; "" when unknown.
 *
 * Two builds of one program often differ in the binary's name (app-gcc12, app-gcc13): when
 * the two runs' programs differ, BASE's program name is read as NEW's wherever it names the
 * program's module (functions, call paths) or its main thread (threads, processes), so the
 * same code matches.
 */
void diff_program(const struct profile *p, char *buf, size_t len);
/* s as NEW knows it: prog_new when s is prog_base (or its 15-byte thread-name cut) and the
 * programs differ, else s. */
const char *diff_rename(const char *prog_base, const char *prog_new, const char *s);

/*
 * How much of a function's name the runs are matched by: without the suffixes GCC gives the
 * clones it makes (".constprop.0", ".isra.0", ".part.0", ".cold", ".lto_priv.0"), which come
 * and go with compiler versions and flags for the same source function.
 */
size_t diff_name_len(const char *name);

/* Returns 0, -ENOMEM, or -ENOENT when opts.per names a region absent from a run. */
int diff_profiles(struct profile *base, struct profile *new, const struct diff_opts *o,
		  struct diff_result *out);
void diff_result__free(struct diff_result *r);
/* CPU seconds of a function in run s, normalised (--per): self or inclusive. */
double diff_func_s(const struct diff_result *r, const struct diff_func *f, int s, bool total);

/*
 * Attribution: "the regression is explained by". The call stacks of both runs are merged
 * into one tree of call paths (function name and module at each level, threads merged),
 * each path with its CPU time in both runs, normalised (scale). The total growth is
 * the sum of the positive inclusive growth of the top-level paths. Starting at the top,
 * a path is replaced by the parts that carry its growth (its children that grew, largest
 * first, as few as keep the chosen paths' growth at or above `cover` of the total) as
 * long as at most max_paths paths are chosen: a path stays when its growth is its own
 * (self time that grew) or is spread over more children than the budget allows, i.e.
 * the growth of a path that no smaller set of its children explains is blamed on it.
 */
struct diff_path {
	char *path;		  /* "main;caller;leaf", root first */
	const char *leaf;	  /* its last function */
	double before_s, after_s; /* inclusive CPU seconds, normalised */
	double self_before_s, self_after_s;
	double delta_s; /* after - before */
	double share;	/* of the total growth, 0..1 */
};

struct diff_attr {
	struct diff_path *paths; /* by delta_s, largest first */
	size_t n;
	double growth_s;  /* the total growth (0 when nothing grew) */
	double explained; /* the chosen paths' share of it */
	/* the call paths whose self time changed most (|delta|): the per-path table */
	struct diff_path *top;
	size_t ntop;
};

int diff_attribute(const struct profile *base, const struct profile *new, const double scale[2],
		   unsigned max_paths, double cover, size_t ntop, struct diff_attr *out);
void diff_attr__free(struct diff_attr *a);

/*
 * Differential flamegraph input: NEW's stacks (thread name root, then
 * functions) with, as base, BASE's samples of the same stack scaled by
 * NEW's total / BASE's total so that runs of different length compare by share.
 */
struct diff_stacks {
	struct wstack *st;
	size_t n;
	struct wstack_frame *frames;
	uint64_t base_total, new_total; /* samples */
};
int diff_fg_stacks(const struct profile *base, const struct profile *new, struct diff_stacks *out);
void diff_stacks__free(struct diff_stacks *d);

#endif
