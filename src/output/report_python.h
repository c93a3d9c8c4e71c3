/* SPDX-License-Identifier: MIT */
/* `eprof report` Python section: the GIL share of each Python thread (text, JSON "python_gil"). */
#ifndef EPROF_REPORT_PYTHON_H
#define EPROF_REPORT_PYTHON_H

#include "../analysis/hot.h"

struct sink;

/* Text: nothing when no sample carries a GIL marker. Return 0 or -errno. */
int report_python_text(struct sink *out, const struct profile *p, const struct sample_filter *f);
int report_python_json(struct sink *out, const struct profile *p, const struct sample_filter *f);

#endif
