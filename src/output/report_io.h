/* SPDX-License-Identifier: MIT */
/* The report's I/O section (record --io, docs/io.md). */
#ifndef EPROF_REPORT_IO_H
#define EPROF_REPORT_IO_H

struct profile;
struct sample_filter;
struct sink;

/* Nothing when the record has no I/O data; 0 or -errno. */
int report_io_text(struct sink *out, const struct profile *p, const struct sample_filter *f,
		   unsigned limit);
int report_io_json(struct sink *out, const struct profile *p, const struct sample_filter *f,
		   unsigned limit);

#endif
