// SPDX-License-Identifier: MIT
#include "report_findings.h"

#include <string.h>

#include "analysis/findings.h"
#include "util/json.h"
#include "util/sink.h"

static int write_json(struct sink *out, const struct findings *fs)
{
	struct json j;

	json_init_members(&j, out, 0);
	json_arr_open(&j, 2, "findings");
	for (size_t i = 0; i < fs->n; i++) {
		json_obj_open(&j, 4, NULL);
		json_kv_str(&j, "id", fs->v[i].id);
		json_kv_str(&j, "severity", finding_severity_name(fs->v[i].severity));
		json_kv_f(&j, "impact", fs->v[i].impact, 4);
		json_kv_str(&j, "what", fs->v[i].what);
		json_kv_str(&j, "advice", fs->v[i].advice);
		json_obj_end(&j);
	}
	json_arr_close(&j, fs->n ? 2 : -1); /* [] when empty */
	return json_flush(&j);
}

int report_findings(struct sink *out, struct profile *p, const struct sample_filter *f,
		    const struct findings_pre *pre, bool json)
{
	struct findings fs;
	int err = findings_analyze(p, f, pre, &fs);

	if (err)
		return err;
	if (json) {
		err = write_json(out, &fs);
	} else if (!fs.n) {
		sink_puts(out, "\nFindings: none above the thresholds (docs/findings.md lists the "
			       "rules)\n");
	} else {
		/*
		 * Per rule, the most severe few: one rule per region can make thousands. There are
		 * 27 rules; one past the table's size would be listed without the cap.
		 */
		struct rule_count { const char *id; size_t n; } seen[128];
		size_t nseen = 0;

		sink_puts(out, "\nFindings (most severe first; docs/findings.md lists the rules)\n");
		for (size_t i = 0; i < fs.n; i++) {
			size_t k = 0;

			while (k < nseen && strcmp(seen[k].id, fs.v[i].id))
				k++;
			if (k == nseen && nseen < sizeof(seen) / sizeof(seen[0]))
				seen[nseen++] = (struct rule_count){ fs.v[i].id, 0 };
			if (k < nseen && seen[k].n++ >= FINDINGS_TEXT_PER_RULE)
				continue;
			sink_printf(out, "  %-6s  %-19s %s\n  %-6s  %-19s -> %s\n",
				    finding_severity_name(fs.v[i].severity), fs.v[i].id,
				    fs.v[i].what, "", "", fs.v[i].advice);
		}
		for (size_t k = 0; k < nseen; k++)
			if (seen[k].n > FINDINGS_TEXT_PER_RULE)
				sink_printf(out, "  %-6s  %-19s and %zu more (--json lists every finding)\n",
					    "...", seen[k].id, seen[k].n - FINDINGS_TEXT_PER_RULE);
	}
	findings__free(&fs);
	return err ? err : out->err;
}
