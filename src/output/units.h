/* SPDX-License-Identifier: MIT */
/* Numbers for people: durations and byte counts with a unit. */
#ifndef EPROF_UNITS_H
#define EPROF_UNITS_H

#include <stddef.h>
#include <stdint.h>

/* "1.23 s", "4.56 ms", "7.8 us", "12 ns" */
void fmt_ns(char *buf, size_t len, uint64_t ns);
/*
 * The same for a duration with a fraction (a mean), with us_decimals decimals in
 * microseconds ("7.85 us" with 2); fmt_ns is fmt_dur(ns, 1). Returns buf.
 */
const char *fmt_dur(char *buf, size_t len, double ns, int us_decimals);
/* "1,234,567" */
void fmt_count(char *buf, size_t len, uint64_t v);
/* "512 B", "1.50 KiB", "2.00 MiB" ... up to TiB; negative ones too: "-1.50 KiB" */
void fmt_bytes(char *buf, size_t len, double v);
/* The same with kib_decimals decimals in KiB ("1.5 KiB" with 1); returns buf. */
const char *fmt_bytes_kib(char *buf, size_t len, double v, int kib_decimals);

#endif
