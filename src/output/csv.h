/* SPDX-License-Identifier: MIT */
/* Hot functions as CSV (RFC 4180): one row per function, for spreadsheets and pandas. */
#ifndef EPROF_CSV_H
#define EPROF_CSV_H

#include "analysis/hot.h"

struct sink;

/* Columns: name,module,self,total,self_pct,total_pct (self/total in samples). */
int csv_write(struct sink *out, struct profile *p, const struct hot_opts *o);

/*
 * Writes one field, quoted when it holds a comma, quote, CR/LF or edge spaces; one that begins
 * with = + - @ tab or CR gets a ' before it (a spreadsheet would evaluate it).
 */
void csv_field(struct sink *out, const char *s);

#endif
