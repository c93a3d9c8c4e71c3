/* SPDX-License-Identifier: MIT */
/*
 * eprof top's numbers: per-function self/total samples over the last interval
 * and decayed over past intervals (7/8 per refresh, as perf top does), per
 * thread and per process counts, callers and callees of one function, and the
 * text rendering shared by the batch output and the curses view. Pure: fed a
 * profile whose samples are the last interval's, no BPF or terminal here.
 */
#ifndef EPROF_TOP_MODEL_H
#define EPROF_TOP_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/profile.h"
#include "util/hmap.h"
#include "util/sink.h"

#define TOP_DECAY (7.0 / 8.0)

enum top_sort { TOP_SORT_SELF = 0, TOP_SORT_TOTAL, TOP_SORT_LAST, TOP_SORT_MAX };

struct top_func {
	uint32_t name, module;		/* string ids */
	double self, total;		/* decayed samples */
	uint64_t last_self, last_total; /* samples in the last interval */
	uint32_t stamp;			/* last node counted in total (no double count) */
};

struct top_thread {
	uint32_t pid, tid;
	double samples;	 /* decayed */
	uint64_t last;	 /* last interval */
};

struct top_proc {
	uint32_t pid;
	uint64_t last; /* samples in the last interval */
};

struct top_model {
	double decay;
	double *node_w; /* decayed samples per leaf stack node */
	uint64_t *node_last;
	size_t node_n;
	VEC(struct top_func) funcs;
	VEC(struct top_thread) threads;
	VEC(struct top_proc) procs; /* last interval only */
	struct hmap *func_index;    /* (name, module) -> funcs index */
	struct hmap *thread_index;  /* (tid, 0) -> threads index */
	double total_w;		    /* decayed samples */
	uint64_t last_samples;	    /* samples in the last interval */
	double last_dt;		    /* seconds the last interval lasted */
	uint64_t intervals;
	int view;	 /* enum stack_view (analysis/view.h): the frames counted */
	uint32_t *locs;	 /* scratch of the view: PROFILE_MAX_STACK_DEPTH locations... */
	uint8_t *cls;	 /* ... their classes ... */
	bool *keep;	 /* ... and which the view keeps */
};

struct top_gpu;
struct top_metrics;

struct top_view {
	enum top_sort sort;
	const char *filter; /* substring of function or module; NULL or "" = all */
	bool threads;	    /* per-thread table instead of functions */
	const struct top_gpu *gpu; /* --gpu: the CUDA tables instead of functions (top_gpu.h) */
};

struct top_header {
	const char *targets; /* "pid 1234 (hot3)" or "system-wide" */
	double uptime_s;
	uint64_t lost;
	unsigned freq;
	int ncpus;
	bool paused;
	const struct top_metrics *res; /* the resource line (top_metrics.h), NULL = none */
};

int top_model__init(struct top_model *m);
void top_model__free(struct top_model *m);
/* Folds p->samples (the last interval, dt seconds) into the model and empties p->samples. */
int top_model__update(struct top_model *m, struct profile *p, double dt);

/* Sorted indexes into m->funcs that match v and had samples lately; returns how many. */
size_t top_model__rows(const struct top_model *m, const struct profile *p,
		       const struct top_view *v, uint32_t *out, size_t max);

struct top_edge {
	uint32_t name, module; /* name 0 = "[root]" for callers, "[self]" for callees */
	double w;	       /* decayed samples */
};
/* Callers and callees of funcs[fi], heaviest first; caller frees both arrays. */
int top_model__calls(const struct top_model *m, const struct profile *p, uint32_t fi,
		     struct top_edge **callers, size_t *ncallers, struct top_edge **callees,
		     size_t *ncallees);

/* Header lines then the table (at most max_rows rows), width columns. Returns header lines. */
int top_render(struct sink *out, const struct top_model *m, const struct profile *p,
	       const struct top_header *h, const struct top_view *v, int width, int max_rows);
/* The call view of funcs[fi]: callers above, callees below. */
int top_render_calls(struct sink *out, const struct top_model *m, const struct profile *p,
		     uint32_t fi, int width, int max_rows);
const char *top_sort_name(enum top_sort s);

#endif
