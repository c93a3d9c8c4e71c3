// SPDX-License-Identifier: MIT
#include <inttypes.h>
#include <string.h>

#include "util/sink.h"
#include "csv.h"

void csv_field(struct sink *out, const char *s)
{
	size_t len = strlen(s);
	bool quote = len && (s[0] == ' ' || s[len - 1] == ' ');
	/* A cell a spreadsheet would take for a formula: a function name from a target. */
	bool formula = len && strchr("=+-@\t\r", s[0]);

	quote = quote || strpbrk(s, ",\"\r\n");
	if (!quote) {
		if (formula)
			sink_puts(out, "'");
		sink_write(out, s, len);
		return;
	}
	sink_puts(out, formula ? "\"'" : "\"");
	for (const char *run = s, *q;; run = q + 1) {
		q = strchr(run, '"');
		if (!q) {
			sink_puts(out, run);
			break;
		}
		sink_write(out, run, q - run + 1);
		sink_puts(out, "\"");
	}
	sink_puts(out, "\"");
}

int csv_write(struct sink *out, struct profile *p, const struct hot_opts *o)
{
	struct hot_result r;
	int err = hot_functions(p, o, &r);

	if (err)
		return err;
	sink_puts(out, "name,module,self,total,self_pct,total_pct\r\n");
	for (size_t i = 0; i < r.n && !out->err; i++) {
		const struct func_stat *f = &r.funcs[i];

		csv_field(out, profile__str(p, f->name));
		sink_puts(out, ",");
		csv_field(out, profile__str(p, f->module));
		sink_printf(out, ",%" PRIu64 ",%" PRIu64 ",%.4f,%.4f\r\n", f->self, f->total,
			    r.samples ? 100.0 * f->self / r.samples : 0.0,
			    r.samples ? 100.0 * f->total / r.samples : 0.0);
	}
	hot_result__free(&r);
	return out->err;
}
