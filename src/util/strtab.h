/* SPDX-License-Identifier: MIT */
/* Interned strings with dense ids; id 0 is always the empty string. */
#ifndef EPROF_STRTAB_H
#define EPROF_STRTAB_H

#include <stddef.h>
#include <stdint.h>

struct strtab;

struct strtab *strtab__new(void);
void strtab__free(struct strtab *t);
/* Returns the id of s, adding it if new; returns UINT32_MAX on ENOMEM. */
uint32_t strtab__intern(struct strtab *t, const char *s);
uint32_t strtab__intern_len(struct strtab *t, const char *s, size_t len);
/* Returns "" for an id out of range: readers never crash on a bad id. */
const char *strtab__get(const struct strtab *t, uint32_t id);
uint32_t strtab__count(const struct strtab *t);

#endif
