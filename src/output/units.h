/* SPDX-License-Identifier: MIT */
/* Numbers for people: durations and byte counts with a unit. */
#ifndef EPROF_UNITS_H
#define EPROF_UNITS_H

#include <stddef.h>
#include <stdint.h>

/* "1.23 s", "4.56 ms", "7.8 us", "12 ns" */
void fmt_ns(char *buf, size_t len, uint64_t ns);
/* "1,234,567" */
void fmt_count(char *buf, size_t len, uint64_t v);
/* "512 B", "1.50 KiB", "2.00 MiB" ... */
void fmt_bytes(char *buf, size_t len, double v);

#endif
