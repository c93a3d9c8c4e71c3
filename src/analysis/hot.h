/* SPDX-License-Identifier: MIT */
/* Hot functions: self and total per function (or per source line), and per-thread totals. */
#ifndef EPROF_HOT_H
#define EPROF_HOT_H

#include <stdbool.h>
#include <stdint.h>

#include "model/profile.h"

struct sample_filter {
	uint32_t pid, tid; /* 0 = any */
	uint64_t t0, t1;   /* CLOCK_MONOTONIC window, 0 = open */
	/* Optional further test (inside a region, on the critical path); NULL = none. */
	bool (*match)(const void *arg, const struct sample *s);
	const void *match_arg;
};

bool sample_filter__match(const struct sample_filter *f, const struct sample *s);

struct func_stat {
	uint32_t name;	 /* string id; with by_line: "func (file:line)" */
	uint32_t module; /* string id */
	uint32_t file;	 /* string id: a Python function's file (two files' `forward` are two) */
	uint8_t kind;	 /* enum frame_kind */
	uint64_t self, total;	    /* samples */
	uint64_t self_ns, total_ns; /* weight */
};

enum hot_sort { SORT_SELF = 0, SORT_TOTAL = 1 };

struct hot_opts {
	struct sample_filter filter;
	bool by_line;
	bool inlined; /* count inlined functions as functions of their own */
	enum hot_sort sort;
};

struct hot_result {
	struct func_stat *funcs;
	size_t n;
	uint64_t samples, weight; /* of the samples that passed the filter */
};

/* Note: by_line interns new strings into p. */
int hot_functions(struct profile *p, const struct hot_opts *o, struct hot_result *out);
void hot_result__free(struct hot_result *r);

/* Per-leaf-node sample counts and weights: the common first step of every analysis. */
struct stack_counts {
	uint64_t *samples; /* indexed by stack node id */
	uint64_t *weight;
	size_t n;
};
int stack_counts(const struct profile *p, const struct sample_filter *f, struct stack_counts *out);
void stack_counts__free(struct stack_counts *c);

struct thread_stat {
	uint32_t pid, tid, comm;
	uint64_t samples, weight;
	uint32_t top_func; /* string id of the hottest self function */
	uint64_t top_self;
};

int thread_stats(const struct profile *p, const struct sample_filter *f, struct thread_stat **out,
		 size_t *n);

#endif
