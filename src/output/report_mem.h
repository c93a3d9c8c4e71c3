/* SPDX-License-Identifier: MIT */
/* The memory section of `eprof report` (text and the JSON key "memory"). */
#ifndef EPROF_REPORT_MEM_H
#define EPROF_REPORT_MEM_H

#include <stdbool.h>

struct mem_result;
struct profile;
struct sink;

/* Whether the record has memory data (made with --mem). */
bool report_mem_present(const struct profile *p);
/*
 * Nothing is written when the profile has no memory data. limit: rows per table, 0 = all.
 * pre: memory_analyze()'s result (1 ms temporaries, every process) when the caller has it,
 * else NULL.
 */
int report_mem_text(struct sink *out, const struct profile *p, const struct mem_result *pre,
		    unsigned limit);
/* Writes ",\n  \"memory\": {...}" (a member of the caller's object), or nothing. */
int report_mem_json(struct sink *out, const struct profile *p, const struct mem_result *pre,
		    unsigned limit);

#endif
