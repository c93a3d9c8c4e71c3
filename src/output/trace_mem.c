// SPDX-License-Identifier: MIT
/* Memory counter tracks of `eprof trace`: live heap (from ALLOC/FREE) and RSS per process. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"
#include "../analysis/memory.h"

#define HEAP_BUCKET_NS 1000000ULL /* at most one point per ms: a 1M-allocation run stays small */

static bool in_window(const struct trace_opts *o, uint64_t ts)
{
	return (!o->filter.t0 || ts >= o->filter.t0) && (!o->filter.t1 || ts <= o->filter.t1);
}

static int heap_track(struct trace_writer *w, const struct profile *p, const struct trace_opts *o,
		      uint32_t pid, struct trace_stats *st)
{
	static const char *const series[] = { "bytes" };
	struct mem_point *pts;
	size_t n;
	int err = memory_timeline(p, pid, &pts, &n);

	if (err)
		return err;
	for (size_t i = 0; i < n; i++) {
		uint64_t bucket = pts[i].ts / HEAP_BUCKET_NS, max = pts[i].bytes;
		double v;

		/* The largest value of each bucket, so the peak shows. */
		while (i + 1 < n && pts[i + 1].ts / HEAP_BUCKET_NS == bucket)
			max = pts[++i].bytes > max ? pts[i].bytes : max;
		if (!in_window(o, pts[i].ts))
			continue;
		v = max;
		trace_counter(w, pid, "Live heap", bucket * HEAP_BUCKET_NS, series, &v, 1);
		if (i + 1 == n && pts[i].bytes != max) {
			v = pts[i].bytes;
			trace_counter(w, pid, "Live heap", pts[i].ts, series, &v, 1);
		}
		st->events++;
	}
	free(pts);
	return 0;
}

int trace_source_mem(struct trace_writer *w, const struct profile *p, const struct trace_opts *o,
		     struct trace_stats *st)
{
	static const char *const series[] = { "bytes" };
	uint32_t *pids = NULL, rss = 0, other = 0;
	size_t np = 0;
	int err = 0;

	for (size_t i = 0; i < p->events.n; i++) {
		const struct event *e = &p->events.v[i];
		bool seen = false;
		double v;

		if (o->filter.pid && e->pid != o->filter.pid)
			continue;
		if (e->kind == EVK_COUNTER && e->name != other && in_window(o, e->ts)) {
			if (e->name != rss) {
				if (strcmp(profile__str(p, e->name), "rss_bytes")) {
					other = e->name;
					continue;
				}
				rss = e->name;
			}
			v = e->b;
			trace_counter(w, e->pid, "RSS", e->ts, series, &v, 1);
			st->events++;
			continue;
		}
		if (e->kind != EVK_ALLOC)
			continue;
		for (size_t k = 0; k < np && !seen; k++)
			seen = pids[k] == e->pid;
		if (!seen) {
			uint32_t *n = realloc(pids, (np + 1) * sizeof(*n));

			if (!n) {
				free(pids);
				return -ENOMEM;
			}
			pids = n;
			pids[np++] = e->pid;
		}
	}
	for (size_t k = 0; k < np && !err; k++)
		err = heap_track(w, p, o, pids[k], st);
	free(pids);
	return err;
}
