/* SPDX-License-Identifier: MIT */
/*
 * Python lines tables: CPU time, allocated / peak / not-freed bytes, blocked time, I/O bytes
 * and GPU time, each keyed by the innermost Python frame of the program's own code in its
 * stack (function, file, line of the sample), or by its innermost Python frame when every
 * Python frame is a library's; with the native leaf (or, off-CPU, the wait kind) and the
 * library's innermost Python frame ("via") holding most of it. A library's file: the
 * interpreter's own (`<frozen ...>`, `<string>`), one under `lib/pythonX.Y/` (the standard
 * library), `site-packages/` or `dist-packages/` (installed packages).
 */
#ifndef EPROF_ANALYSIS_PYLINES_H
#define EPROF_ANALYSIS_PYLINES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hot.h"
#include "memory.h"

enum py_table {
	PYT_CPU = 0,	   /* CPU ns of the samples */
	PYT_MEMORY,	   /* bytes allocated */
	PYT_MEM_PEAK,	   /* bytes live at the heap's peak */
	PYT_MEM_LEAKED,	   /* bytes not freed by the end */
	PYT_OFFCPU,	   /* blocked ns */
	PYT_IO,		   /* bytes read and written */
	PYT_GPU,	   /* GPU ns of the work launched */
	PYT_N
};

struct py_line {
	uint32_t function, file, line; /* string ids, and the line */
	uint64_t value;		       /* ns or bytes */
	double share;		       /* % of the table's total, with Python frames or not */
	uint32_t leaf;		       /* string id of the leaf function, or (off-CPU) wait kind */
	uint64_t leaf_value;	       /* of value, what is under that leaf */
	uint32_t via;		       /* frame index + 1 of the library's innermost Python frame
					  below the line that holds most of value; 0: none */
	uint64_t via_value;	       /* of value, what went through it */
};

struct py_lines {
	struct py_line *v[PYT_N]; /* each by value, largest first */
	size_t n[PYT_N];
	uint64_t total[PYT_N];	  /* the whole table's, stacks without Python frames included */
};

/*
 * Fills *out from p: samples and events matching f (memory from mem, NULL for none).
 * Returns 0 or -ENOMEM.
 */
int py_lines_analyze(const struct profile *p, const struct sample_filter *f,
		     const struct mem_result *mem, struct py_lines *out);
void py_lines__free(struct py_lines *l);
/* Whether a Python source file is a library's (see above), not the program's own. */
bool py_file_is_library(const char *file);
/* "cpu", "memory", "memory_peak", "memory_not_freed", "offcpu", "io", "gpu" */
const char *py_table_name(enum py_table t);
/* The leaf column of a row: a function name, or off-CPU the wait kind ("lock", "sleep"...) */
const char *py_line_leaf(const struct profile *p, enum py_table t, const struct py_line *r);

#endif
