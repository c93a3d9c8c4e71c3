/* SPDX-License-Identifier: MIT */
/*
 * Findings: the bottlenecks a profile shows, each with the figures that show
 * it and a concrete next step. Rules read the analyses the report already
 * makes (hot functions, off-CPU kinds, memory, GPU) and fire above fixed
 * thresholds (docs/findings.md lists them); nothing is guessed beyond what
 * the recording holds.
 */
#ifndef EPROF_FINDINGS_H
#define EPROF_FINDINGS_H

#include <stddef.h>

#include "hot.h"

enum finding_severity { FINDING_LOW = 0, FINDING_MEDIUM = 1, FINDING_HIGH = 2 };

struct finding {
	const char *id; /* stable, for scripts: "cpu-contention", "gpu-idle", ... */
	enum finding_severity severity;
	/* Share of the run the finding concerns (time, samples or GPU time), 0..1: the order. */
	double impact;
	char what[384];	  /* the evidence, one line with figures */
	char advice[384]; /* what to do, one line */
};

struct findings {
	struct finding *v; /* most severe first, then by impact */
	size_t n;
};

struct mem_result;

/* What the caller has computed already for the same samples, to reuse (each may be NULL). */
struct findings_pre {
	const struct hot_result *hot; /* hot_functions() per function: not by line, inline
				       * frames not split */
	const struct mem_result *mem; /* memory_analyze() with 1 ms temporaries, all processes */
};

/* Runs every rule on the samples f lets through (and the whole file's events). pre may be
 * NULL. 0 or -ENOMEM. */
int findings_analyze(struct profile *p, const struct sample_filter *f,
		     const struct findings_pre *pre, struct findings *out);
void findings__free(struct findings *fs);
/*
 * Pairs the findings of two runs by id (the k-th of an id in one with the k-th in the
 * other): those only in new (base NULL) first, then those in both, then those only in base
 * (new NULL), each group in its run's order. *out is malloc'd. 0 or -ENOMEM.
 */
struct finding_change {
	const struct finding *base, *new;
};
int findings_compare(const struct findings *base, const struct findings *new,
		     struct finding_change **out, size_t *n);

/* "low", "medium", "high". */
const char *finding_severity_name(enum finding_severity s);

#endif
