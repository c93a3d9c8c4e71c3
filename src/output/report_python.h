/* SPDX-License-Identifier: MIT */
/*
 * `eprof report` Python section: the GIL share of each Python thread (text, JSON "python_gil"),
 * and the Python lines tables (JSON "python_lines").
 */
#ifndef EPROF_REPORT_PYTHON_H
#define EPROF_REPORT_PYTHON_H

#include "analysis/hot.h"

struct sink;

/* Text: nothing when no sample carries a GIL marker. Return 0 or -errno. */
int report_python_text(struct sink *out, const struct profile *p, const struct sample_filter *f);
int report_python_json(struct sink *out, const struct profile *p, const struct sample_filter *f);

struct mem_result;
/*
 * The Python lines tables (analysis/pylines.h): text, at most 5 rows each (fewer with a lower
 * limit), nothing for a table without Python frames; JSON "python_lines" (arrays cpu, memory,
 * memory_peak, memory_not_freed, offcpu, io, gpu), every row. mem: the memory analysis, or
 * NULL.
 */
int report_py_lines_text(struct sink *out, const struct profile *p, const struct sample_filter *f,
			 const struct mem_result *mem, unsigned limit);
struct py_lines;
/* The text tables of an analysis already made (report_write decides other sections by it). */
void report_py_lines_write(struct sink *out, const struct profile *p, const struct py_lines *l,
			   unsigned limit);
int report_py_lines_json(struct sink *out, const struct profile *p, const struct sample_filter *f,
			 const struct mem_result *mem);

#endif
