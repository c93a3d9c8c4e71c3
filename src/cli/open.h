/* SPDX-License-Identifier: MIT */
#ifndef EPROF_OPEN_H
#define EPROF_OPEN_H

#include "../model/profile.h"

/*
 * What every reader command does first: read the file, say in one line what
 * is wrong with it, and symbolize it from its recorded mappings when the
 * recorder died before writing symbols. Returns 0 or -errno (message logged).
 */
int profile_open(const char *path, struct profile **out);

#endif
