// SPDX-License-Identifier: MIT
/* `eprof trace`: a profile's timeline, one source of events after the other. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "model/event.h"
#include "util/json.h"
#include "util/sink.h"
#include "trace.h"
#include "trace_gpu.h"

/*
 * Ring-buffer drops: one global instant per flush interval that saw drops
 * (EVK_LOST, placed at the interval's end, args say its length). Files from
 * before EVK_LOST existed get one marker at the end with the totals.
 */
static int source_lost(struct trace_writer *w, const struct profile *p, const struct trace_opts *o,
		       struct trace_stats *st)
{
	uint64_t lost = p->stats[STAT_SAMPLES_LOST], evlost = p->stats[STAT_EVENTS_LOST];
	uint64_t end = profile__meta_u64(p, "end_ns", 0);
	uint32_t pid = 0;
	bool timed = false;
	struct json a;

	for (size_t i = 0; i < p->events.n; i++) {
		const struct event *e = &p->events.v[i];

		if (e->kind != EVK_LOST)
			continue;
		timed = true;
		if ((o->filter.t0 && e->ts < o->filter.t0) || (o->filter.t1 && e->ts - e->dur > o->filter.t1))
			continue;
		trace_args(&a);
		json_kv_u64(&a, "samples_lost", ev_lost_samples(e));
		json_kv_u64(&a, "events_lost", ev_lost_events(e));
		json_kv_f(&a, "interval_ms", e->dur / 1e6, 1);
		json_kv_str(&a, "where", "ring buffer full in this interval");
		trace_instant(w, 0, 0, e->ts, "samples lost (ring buffer full)", 'g',
			      trace_args_text(&a));
	}
	if (timed || (!lost && !evlost))
		return 0;
	for (size_t i = 0; i < p->samples.n; i++) {
		if (!end || p->samples.v[i].ts > end)
			end = p->samples.v[i].ts;
		if (!pid)
			pid = p->samples.v[i].pid;
	}
	if (o->filter.t1 && end > o->filter.t1)
		end = o->filter.t1;
	trace_args(&a);
	json_kv_u64(&a, "samples_lost", lost);
	json_kv_u64(&a, "events_lost", evlost);
	json_kv_str(&a, "where", "ring buffer full; this recording has no drop times");
	trace_instant(w, pid, pid, end, "samples lost (ring buffer full)", 'g', trace_args_text(&a));
	return 0;
}

/* The sources, in the order their events are written. */
static const struct trace_source trace_sources[] = {
    {"cpu", trace_source_cpu},
    {"lost", source_lost},
    {"offcpu", trace_source_offcpu},
    {"gpu", trace_source_gpu},
    {"regions", trace_source_regions},
    {"memory", trace_source_mem},
    {"io", trace_source_io},
    {"metrics", trace_source_metrics},
};

/* otherData: key, value, ..., NULL; the keys of the profile's metadata it does not have left out */
static void meta_pairs(const struct profile *p, const char **kv)
{
	static const char *const keys[] = {"command", "hostname",   "kernel",	   "start_ns",
					   "end_ns",  "start_time", "sample_rate", "eprof_version"};
	size_t n = 0;

	kv[n++] = "producer";
	kv[n++] = "eprof";
	kv[n++] = "clock";
	kv[n++] = "CLOCK_MONOTONIC";
	kv[n++] = "ts_unit";
	kv[n++] = "us";
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		const char *v = profile__meta(p, keys[i]);

		if (!v)
			continue;
		kv[n++] = keys[i];
		kv[n++] = v;
	}
	kv[n] = NULL;
}

int trace_write(struct sink *out, const struct profile *p, const struct trace_opts *o,
		struct trace_stats *st)
{
	struct trace_stats local;
	struct trace_writer *w;
	const char *meta[2 * 11 + 1];
	int err = 0, ferr;

	if (!st)
		st = &local;
	memset(st, 0, sizeof(*st));
	w = trace_writer__new(out);
	if (!w)
		return -ENOMEM;
	for (size_t i = 0; i < sizeof(trace_sources) / sizeof(trace_sources[0]) && !err; i++)
		err = trace_sources[i].emit(w, p, o, st);
	st->events = trace_writer__events(w);
	meta_pairs(p, meta);
	ferr = trace_writer__finish(w, meta);
	st->bytes = out->bytes;
	return err ? err : ferr;
}
