// SPDX-License-Identifier: MIT
/* Memory counter tracks of `eprof trace`: live heap (from ALLOC/FREE) and RSS per process. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "model/event.h"
#include "trace.h"
#include "analysis/memory.h"
#include "util/hmap.h"
#include "util/vec.h"

#define HEAP_BUCKET_NS 1000000ULL /* at most one point per ms: a 1M-allocation run stays small */

static bool in_window(const struct trace_opts *o, uint64_t ts)
{
	return (!o->filter.t0 || ts >= o->filter.t0) && (!o->filter.t1 || ts <= o->filter.t1);
}

/* One process's live heap points (time order) as a counter track. */
static void heap_track(struct trace_writer *w, const struct trace_opts *o, uint32_t pid,
		       const struct mem_point *pts, size_t n, struct trace_stats *st)
{
	static const char *const series[] = { "bytes" };

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
}

/*
 * The live heap tracks of the processes pids[0..np) (in that order), from one replay of
 * every process's heap events: a pass per process would cost processes x events.
 */
static int heap_tracks(struct trace_writer *w, const struct profile *p, const struct trace_opts *o,
		       const uint32_t *pids, size_t np, struct hmap *rank, struct trace_stats *st)
{
	struct mem_point *pts = NULL, *g = NULL;
	uint32_t *pid_of = NULL;
	size_t n = 0, *start = calloc(np + 1, sizeof(*start));
	int err = -ENOMEM;

	if (!start || memory_timeline_by_pid(p, o->filter.pid, &pts, &pid_of, &n))
		goto out;
	g = malloc((n ? n : 1) * sizeof(*g));
	if (!g)
		goto out;
	/* group the points by process, keeping time order within each */
	for (size_t k = 0; k < n; k++) {
		uint64_t r;

		if (hmap__get(rank, pid_of[k], 0, &r))
			start[r + 1]++;
	}
	for (size_t r = 0; r < np; r++)
		start[r + 1] += start[r];
	for (size_t k = 0; k < n; k++) {
		uint64_t r;

		if (hmap__get(rank, pid_of[k], 0, &r))
			g[start[r]++] = pts[k];
	}
	/* each start moved to the next one's: walk the groups back from the end */
	for (size_t r = np; r-- > 0;)
		start[r + 1] = start[r];
	start[0] = 0;
	for (size_t r = 0; r < np; r++)
		heap_track(w, o, pids[r], g + start[r], start[r + 1] - start[r], st);
	err = 0;
out:
	free(start);
	free(pts);
	free(pid_of);
	free(g);
	return err;
}

int trace_source_mem(struct trace_writer *w, const struct profile *p, const struct trace_opts *o,
		     struct trace_stats *st)
{
	static const char *const series[] = { "bytes" };
	uint32_t *pids = NULL, rss = 0, other = 0;
	struct hmap *rank = hmap__new(64); /* pid -> its place in pids */
	size_t np = 0, cap = 0;
	int err = 0;

	if (!rank)
		return -ENOMEM;
	for (size_t i = 0; i < p->events.n; i++) {
		const struct event *e = &p->events.v[i];
		uint64_t r;
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
			v = ev_counter_value(e);
			trace_counter(w, e->pid, "RSS", e->ts, series, &v, 1);
			st->events++;
			continue;
		}
		if (e->kind != EVK_ALLOC || hmap__get(rank, e->pid, 0, &r))
			continue;
		/* processes in the order of their first allocation in the file */
		if (arr_grow(pids, cap, np + 1)) {
			err = -ENOMEM;
			break;
		}

		if (hmap__put(rank, e->pid, 0, np)) {
			err = -ENOMEM;
			break;
		}
		pids[np++] = e->pid;
	}
	if (!err && np)
		err = heap_tracks(w, p, o, pids, np, rank, st);
	hmap__free(rank);
	free(pids);
	return err;
}
