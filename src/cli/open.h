/* SPDX-License-Identifier: MIT */
#ifndef EPROF_OPEN_H
#define EPROF_OPEN_H

#include <stdbool.h>

#include "model/profile.h"

/*
 * --force: another user's recording is named as one's own (from the paths it lists and this
 * machine's kernel symbols). Off: its frames stay as recorded. Set once by cmd_main.
 */
void profile_open_force(bool force);
/*
 * What every reader command does first: read the file, say in one line what
 * is wrong with it, and symbolize it from its recorded mappings when the
 * recorder died before writing symbols. Returns 0 or -errno (message logged).
 */
int profile_open(const char *path, struct profile **out);

/*
 * The recordings of a job: first and pos[0..npos) are files, directories (their *.data files
 * and FILE.data.PID files, by name) or glob patterns. Opens each (profile_open) into *profs,
 * with its path in *paths; *n of them. Returns 0 or -errno (message logged; nothing open).
 */
int job_open(const char *first, char **pos, int npos, struct profile ***profs, char ***paths,
	     size_t *n);
void job_free(struct profile **profs, char **paths, size_t n);
/*
 * One profile of a job's recordings (analysis/ranks.h puts them on one clock), rank (-1 all)
 * and host (NULL all) selecting which: processes named "rank N (HOST) COMM" and, with
 * rank_root, every thread "HOST/rank N". Each recording merged is freed (profs[i] NULL).
 * Returns 0 or -errno (logged).
 */
int job_merge(struct profile **profs, char *const *paths, size_t n, int rank,
	      const char *host, bool rank_root, struct profile **out);

#endif
