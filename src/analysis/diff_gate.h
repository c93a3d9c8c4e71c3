/* SPDX-License-Identifier: MIT */
/*
 * CI gates of `eprof diff --gate EXPR`: EXPR is KEY OP THRESHOLD, e.g.
 *   region:train_step.p99>+10%   memory.peak>+64MiB   gpu.idle>+5pt
 *   function:parse_line.total>+20%   wall>+5%   kernel:gemm.mean>+1ms
 * OP is > (the gate fails when the change is above THRESHOLD) or < (below). THRESHOLD is
 * relative with % (of BASE's value), in percentage points with pt (for keys that are
 * percentages), or absolute with the key's unit (ns/us/ms/s; B/KiB/MiB/GiB/kB/MB/GB; a bare
 * number for counts). Sample-based keys (cpu, function:*, thread:*) also need the change to
 * be beyond sampling noise: z > 3 (the counts of samples are Poisson). Two runs of a
 * multi-rank job also have job.wait (all ranks' waits in collectives), job.wall (the longest
 * rank) and rank:N.{wall,cpu,comm,wait,work} (work: wall time outside communication calls).
 */
#ifndef EPROF_DIFF_GATE_H
#define EPROF_DIFF_GATE_H

#include <stdbool.h>
#include <stddef.h>

#include "diff.h"
#include "diff_kinds.h"

enum gate_unit { GATE_UNIT_TIME = 0, GATE_UNIT_BYTES, GATE_UNIT_COUNT, GATE_UNIT_PCT };
enum gate_thr { GATE_REL = 0, GATE_PT, GATE_ABS };

struct diff_gate {
	const char *expr;    /* as given */
	char key[24];	     /* "region", "memory", "wall", ... */
	char name[256];	     /* NAME of function:, region:, kernel:, thread: */
	char field[16];	     /* "p99", "peak", "total", ... ("" for wall, cpu) */
	enum gate_unit unit; /* of the value */
	bool sampled;	     /* tested for noise */
	char op;	     /* '>' or '<' */
	enum gate_thr thr;
	double threshold; /* %, points, or the unit's base (ns, bytes, count) */

	/* evaluation */
	bool known;	      /* the value exists in at least one run */
	double before, after; /* ns, bytes, count or % */
	double change;	      /* as the threshold counts it */
	double z;	      /* sampled keys */
	bool failed;
};

/* The accepted keys, for messages. */
extern const char diff_gate_keys[];

/* 0, or -EINVAL with a one-line reason in err. */
int diff_gate_parse(const char *expr, struct diff_gate *g, char *err, size_t errlen);

/*
 * Evaluates g on the diff; 0, or -ENOENT (reason in err) when what it names is in neither run
 * (a typo in a name).
 */
int diff_gate_eval(struct diff_gate *g, const struct diff_result *r, const struct diff_kinds *k,
		   char *err, size_t errlen);

/* "12.3 ms", "64.0 MiB", "17", "12.5%" of a value in g's unit. */
void diff_gate_fmt(const struct diff_gate *g, double v, char *buf, size_t len);
/* The change as the threshold counts it: "+26.4%", "new", "+5.00 pt", "+64.00 MiB". */
void diff_gate_fmt_change(const struct diff_gate *g, char *buf, size_t len);

#endif
