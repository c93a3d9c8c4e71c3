/* SPDX-License-Identifier: MIT */
/* The memory section of `eprof report` (text and the JSON key "memory"). */
#ifndef EPROF_REPORT_MEM_H
#define EPROF_REPORT_MEM_H

#include <stdbool.h>

struct profile;
struct sink;

/* Nothing is written when the profile has no memory data. limit: rows per table, 0 = all. */
int report_mem_text(struct sink *out, const struct profile *p, unsigned limit);
/* Writes ",\n  \"memory\": {...}" (a member of the caller's object), or nothing. */
int report_mem_json(struct sink *out, const struct profile *p, unsigned limit);

#endif
