// SPDX-License-Identifier: MIT
/* The regions section of `eprof report`: a tree of region names with timing statistics. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/regions.h"
#include "util/json.h"
#include "util/sink.h"
#include "report_regions.h"
#include "units.h"

static void text_row(struct sink *out, const struct profile *p, const struct region_node *n)
{
	double v[] = { n->total_ns, n->self_ns, n->mean_ns, n->std_ns, n->min_ns,
		       n->max_ns,   n->p50_ns,	n->p90_ns,  n->p99_ns };
	char name[96], b[32];
	int ind = n->depth < 12 ? 2 * n->depth : 24;

	snprintf(name, sizeof(name), "%*s%s", ind, "", profile__str(p, n->name));
	sink_printf(out, "%-32s %8" PRIu64, name, n->count);
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		sink_printf(out, " %10s", fmt_dur(b, sizeof(b), v[i], 2));
	if (n->open)
		sink_printf(out, "  (%" PRIu64 " open at the end)", n->open);
	if (n->sampled)
		sink_puts(out, "  (sampled)");
	sink_puts(out, "\n");
}

int report_regions_text(struct sink *out, const struct profile *p, const struct sample_filter *f,
			unsigned limit)
{
	struct region_set rs;
	int err = regions_build(p, f, &rs);
	uint32_t *kids = NULL; /* per node + 1: children seen so far (0: the top level) */
	uint8_t *shown = NULL;
	size_t hidden = 0;

	if (err)
		return err;
	if (rs.nnodes && limit) {
		kids = calloc(rs.nnodes + 1, sizeof(*kids));
		shown = malloc(rs.nnodes);
		if (!kids || !shown) {
			free(kids);
			free(shown);
			region_set__free(&rs);
			return -ENOMEM;
		}
	}
	if (rs.nnodes) {
		sink_printf(out, "\n%-32s %8s %10s %10s %10s %10s %10s %10s %10s %10s %10s\n",
			    "Region", "Count", "Total", "Self", "Mean", "Std", "Min", "Max", "P50",
			    "P90", "P99");
		bool sampled = false;

		for (size_t i = 0; i < rs.nnodes; i++) {
			int32_t up = rs.nodes[i].parent;

			/* depth-first, siblings by total: a node's first children are its largest */
			if (limit) {
				shown[i] = (up < 0 || shown[up]) && kids[up + 1]++ < limit;
				if (!shown[i]) {
					hidden++;
					continue;
				}
			}
			text_row(out, p, &rs.nodes[i]);
			sampled |= rs.nodes[i].sampled != 0;
		}
		if (hidden)
			sink_printf(out, "... %zu more regions (--limit 0 shows all)\n", hidden);
		if (sampled)
			sink_puts(out, "# (sampled): Python calls seen by sampling (--region py:): "
				       "calls shorter than a sampling period are missed or merged, "
				       "times are within about one period\n");
		if (p->stats[STAT_REGIONS_LOST] || p->stats[STAT_REGIONS_UNMATCHED])
			sink_printf(out,
				    "# regions lost: %" PRIu64
				    " (ring buffer full or nested too deep), unmatched begins/ends: %" PRIu64
				    "\n",
				    p->stats[STAT_REGIONS_LOST], p->stats[STAT_REGIONS_UNMATCHED]);
	}
	free(kids);
	free(shown);
	region_set__free(&rs);
	return 0;
}

int report_regions_json(struct sink *out, const struct profile *p, const struct sample_filter *f)
{
	struct region_set rs;
	struct json j;
	int err = regions_build(p, f, &rs);

	if (err)
		return err;
	json_init_members(&j, out, 0);
	json_arr_open(&j, 2, "regions");
	for (size_t i = 0; i < rs.nnodes; i++) {
		const struct region_node *n = &rs.nodes[i];

		json_obj_open(&j, 4, NULL);
		json_kv_str(&j, "name", profile__str(p, n->name));
		json_kv_str(&j, "parent",
			    n->parent >= 0 ? profile__str(p, rs.nodes[n->parent].name) : NULL);
		json_kv_u64(&j, "depth", n->depth);
		json_kv_u64(&j, "count", n->count);
		json_kv_u64(&j, "total_ns", n->total_ns);
		json_kv_u64(&j, "self_ns", n->self_ns);
		json_kv_f(&j, "mean_ns", n->mean_ns, 0);
		json_kv_f(&j, "std_ns", n->std_ns, 0);
		json_kv_u64(&j, "min_ns", n->min_ns);
		json_kv_u64(&j, "max_ns", n->max_ns);
		json_kv_u64(&j, "p50_ns", n->p50_ns);
		json_kv_u64(&j, "p90_ns", n->p90_ns);
		json_kv_u64(&j, "p99_ns", n->p99_ns);
		json_kv_u64(&j, "open", n->open);
		json_kv_u64(&j, "sampled", n->sampled);
		json_obj_end(&j);
	}
	json_arr_close(&j, rs.nnodes ? 2 : -1); /* [] when empty */
	region_set__free(&rs);
	return json_flush(&j);
}
