// SPDX-License-Identifier: MIT
/*
 * Regions in `eprof trace`: one slice per region instance, nested as they
 * nested, on a track of their own next to each thread's CPU slices (those
 * follow samples, regions follow probes; one track cannot nest both).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "analysis/regions.h"
#include "trace.h"

int trace_source_regions(struct trace_writer *w, const struct profile *p,
			 const struct trace_opts *o, struct trace_stats *st)
{
	struct sample_filter f = o->filter;
	struct region_set rs;
	char name[64];
	struct json a;
	uint32_t *depth;
	int err;

	f.match = NULL;
	err = regions_build(p, &f, &rs);
	if (err)
		return err;
	/* parents come before their children: one pass gives every depth */
	depth = malloc((rs.n ? rs.n : 1) * sizeof(*depth));
	if (!depth) {
		region_set__free(&rs);
		return -ENOMEM;
	}
	for (size_t i = 0; i < rs.n; i++) {
		const struct region_inst *r = &rs.inst[i];
		uint32_t track = TRACE_REGION_TID(r->tid);

		if (!i || rs.inst[i - 1].tid != r->tid) {
			const struct thread *t =
				profile__find_thread(p, r->pid, r->tid);

			snprintf(name, sizeof(name), "%s %u regions",
				 t ? profile__str(p, t->comm) : "thread", r->tid);
			trace_thread_name(w, r->pid, track, name);
		}
		depth[i] = r->parent >= 0 && (size_t)r->parent < i ? depth[r->parent] + 1 : 0;
		trace_args(&a);
		json_kv_u64(&a, "depth", depth[i]);
		json_kv_u64(&a, "tid", r->tid);
		if (r->open)
			json_kv_bool(&a, "open_at_end", true);
		if (r->sampled)
			json_kv_bool(&a, "sampled", true);
		if (r->comm_call) {
			json_kv_u64(&a, "communicator", r->comm);
			json_kv_u64(&a, "seq", r->seq);
			json_kv_u64(&a, "bytes", r->bytes);
			json_kv_bool(&a, "collective", r->collective);
		}
		trace_complete(w, r->pid, track, r->start, r->end - r->start,
			       profile__str(p, r->name), "region", trace_args_text(&a));
		st->slices++;
	}
	free(depth);
	region_set__free(&rs);
	return 0;
}
