/* SPDX-License-Identifier: MIT */
/*
 * The record's processes as a table: samples, CPU time and threads per process, with the
 * parent and the command line the file stores for each (a DataLoader worker or an MPI rank
 * is told from the job's main process by its pid, parent and argv, not by comm).
 */
#ifndef EPROF_ANALYSIS_PROCS_H
#define EPROF_ANALYSIS_PROCS_H

#include <stddef.h>
#include <stdint.h>

#include "util/sink.h"
#include "hot.h"

struct proc_stat {
	uint32_t pid, ppid;
	uint32_t comm, cmdline; /* string ids; 0 when the file does not know */
	uint64_t samples, weight;
	uint32_t threads; /* threads with samples */
};

/*
 * One entry per process with samples matching f, most samples first (pid breaks ties).
 * *out is NULL and *n 0 without samples. Returns 0 or -ENOMEM.
 */
int process_stats(const struct profile *p, const struct sample_filter *f, struct proc_stat **out,
		  size_t *n);

/*
 * The command line of a process as the tables show it: its argv, else "[comm]" written into
 * buf, else "?".
 */
const char *proc_command(const struct profile *p, const struct proc_stat *ps, char *buf,
			 size_t len);

/*
 * A short name for narrow places (top's header): the program's base name and the next two
 * words, paths cut to their last part ("python3 train.py --epochs"), at most len - 1 bytes.
 */
void proc_command_short(const char *cmdline, char *buf, size_t len);

#endif
