/* SPDX-License-Identifier: MIT */
/*
 * I/O by stack (record --io): the EVK_IO events of a profile summed by calling stack and
 * file, by file or peer, and by thread; and turned into weighted pseudo-samples for the
 * flamegraph and folded writers.
 */
#ifndef EPROF_ANALYSIS_IO_H
#define EPROF_ANALYSIS_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hot.h"

/* Calls of one stack on one file in one direction, or of one file (stack 0) in both. */
struct io_group {
	uint32_t stack; /* leaf node; 0 = no stack (over --io-stack-rate) or a file row */
	uint32_t name;	/* the file or peer (string id) */
	uint8_t type;	/* enum io_ev_type */
	bool input;	/* stack rows: reads and receives (else writes and sends) */
	uint64_t calls;
	uint64_t read_bytes, write_bytes;
	uint64_t read_ns, write_ns;
	uint64_t first_ts, last_ts; /* first call's start, last call's end */
};

struct io_thread {
	uint32_t pid, tid;
	uint32_t comm; /* thread name (string id) */
	uint64_t calls, read_calls;
	uint64_t read_bytes, write_bytes, read_ns, write_ns;
	uint64_t first_ts, last_ts; /* the thread's first and last I/O or CPU sample */
	uint32_t top_name;	    /* the file it spent the most read time on */
	uint32_t top_stack;	    /* the stack of that time */
	uint64_t top_ns;
};

struct io_result {
	bool present; /* the record was made with --io */
	uint64_t calls, read_calls, write_calls, no_stack;
	uint64_t read_bytes, write_bytes, read_ns, write_ns;
	uint64_t start_ns, end_ns; /* the record's span */
	struct io_group *by_bytes; /* stack rows, most bytes first */
	struct io_group *by_time;  /* the same rows, most time first */
	size_t nstacks;
	struct io_group *files; /* file rows, most bytes first */
	size_t nfiles;
	struct io_thread *threads; /* most read time first */
	size_t nthreads;
};

/* Sums the I/O calls f lets through (pid, tid, time window of their start). 0 or -ENOMEM. */
int io_analyze(const struct profile *p, const struct sample_filter *f, struct io_result *r);
void io_result__free(struct io_result *r);
bool io_present(const struct profile *p);

enum io_weight { IO_WEIGHT_BYTES = 0, IO_WEIGHT_TIME = 1 };

/*
 * Replaces the CPU samples with one pseudo-sample per I/O call f lets through, weighted by
 * its bytes or its time in ns, on its calling stack with a leaf frame "[read] FILE" (the
 * direction and the file or peer). -ENOENT when the record has no I/O calls.
 */
int io_to_samples(struct profile *p, enum io_weight w, const struct sample_filter *f);

#endif
