/* SPDX-License-Identifier: MIT */
/*
 * Chrome Trace Event JSON, as Perfetto UI, chrome://tracing and speedscope read it.
 *
 * Two layers:
 *  - trace_writer: a streaming event writer (tracks, slices, counters, instants,
 *    flow arrows) on the JSON writer, one event per line. Events go straight to
 *    the sink through its fixed buffer, so memory stays flat whatever the output
 *    size. Timestamps are CLOCK_MONOTONIC nanoseconds in, microseconds (3
 *    decimals) out.
 *  - trace_write(): a profile's timeline. Each kind of data is one "source"
 *    (CPU slices, CPU utilisation counters, lost-sample markers; later memory,
 *    GPU and regions) that emits through the writer; see trace_sources in trace.c.
 */
#ifndef EPROF_TRACE_H
#define EPROF_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analysis/hot.h"
#include "util/json.h"

struct sink;
struct trace_writer;

/* Starts the JSON document; NULL with errno on ENOMEM. */
struct trace_writer *trace_writer__new(struct sink *out);
/*
 * Ends the document (otherData holds meta: key, value, key, value, ..., NULL; or none when
 * meta is NULL), flushes and frees the writer. Returns the first error of the writer or sink.
 */
int trace_writer__finish(struct trace_writer *w, const char *const *meta);
uint64_t trace_writer__events(const struct trace_writer *w);
uint64_t trace_writer__bytes(const struct trace_writer *w);
/* The first error of the writer or its sink, 0 while all is well. */
int trace_writer__error(const struct trace_writer *w);

/* Track metadata ("M" events). */
void trace_process_name(struct trace_writer *w, uint32_t pid, const char *name);
void trace_process_labels(struct trace_writer *w, uint32_t pid, const char *labels);
void trace_process_sort_index(struct trace_writer *w, uint32_t pid, int index);
void trace_thread_name(struct trace_writer *w, uint32_t pid, uint32_t tid, const char *name);
void trace_thread_sort_index(struct trace_writer *w, uint32_t pid, uint32_t tid, int index);

/*
 * An event's arguments (args_json below), built with the JSON writer:
 *
 *	struct json a;
 *
 *	trace_args(&a);
 *	json_kv_u64(&a, "bytes", n);
 *	trace_complete(w, ..., trace_args_text(&a));
 */
static inline void trace_args(struct json *a)
{
	json_init(a, NULL, JSON_COMPACT);
	json_obj(a);
}

static inline const char *trace_args_text(struct json *a)
{
	json_obj_end(a);
	return json_text(a);
}

/*
 * Slices on a thread track. args_json is NULL or a JSON object text ("{...}").
 * Nested slices of one thread must be written parent first (a child that
 * starts with its parent comes after it), which is what viewers expect.
 */
void trace_complete(struct trace_writer *w, uint32_t pid, uint32_t tid, uint64_t ts_ns,
		    uint64_t dur_ns, const char *name, const char *cat, const char *args_json);
void trace_begin(struct trace_writer *w, uint32_t pid, uint32_t tid, uint64_t ts_ns,
		 const char *name, const char *cat, const char *args_json);
void trace_end(struct trace_writer *w, uint32_t pid, uint32_t tid, uint64_t ts_ns);

/* A counter track of a process: one value per series name at ts. */
void trace_counter(struct trace_writer *w, uint32_t pid, const char *name, uint64_t ts_ns,
		   const char *const *series, const double *values, size_t n);

/* Instant events; scope 'g' (global), 'p' (process) or 't' (thread). */
void trace_instant(struct trace_writer *w, uint32_t pid, uint32_t tid, uint64_t ts_ns,
		   const char *name, char scope, const char *args_json);

/*
 * Flow arrows between slices: phase 's' starts flow id at the slice enclosing
 * ts on (pid, tid), 't' continues it, 'f' ends it (bound to the enclosing slice).
 */
void trace_flow(struct trace_writer *w, char phase, uint64_t id, uint32_t pid, uint32_t tid,
		uint64_t ts_ns, const char *name, const char *cat);

/*
 * An event the caller renders itself as JSON text, starting with its '{': written in pieces,
 * trace_event_text() first, then trace_event_more() for each piece after it. For events
 * made of parts rendered once and repeated (CPU slices).
 */
void trace_event_text(struct trace_writer *w, const void *text, size_t len);
void trace_event_more(struct trace_writer *w, const void *text, size_t len);

struct trace_opts {
	struct sample_filter filter;
	bool no_counters; /* leave out the CPU utilisation tracks */
	uint32_t max_slices; /* CPU slices at most (0: 2,097,152, about 200 MB of JSON) */
};

struct trace_stats {
	uint64_t events, bytes;
	uint64_t slices, samples, threads;
};

/* Writes the profile's timeline as one JSON document. Returns 0 or -errno. */
int trace_write(struct sink *out, const struct profile *p, const struct trace_opts *o,
		struct trace_stats *st);

/* One kind of timeline data; trace.c holds the list. */
struct trace_source {
	const char *name;
	int (*emit)(struct trace_writer *w, const struct profile *p, const struct trace_opts *o,
		    struct trace_stats *st);
};

/* CPU slices and CPU utilisation counters (trace_cpu.c). */
int trace_source_cpu(struct trace_writer *w, const struct profile *p, const struct trace_opts *o,
		     struct trace_stats *st);
/* Off-CPU state tracks, wakeup flows and the critical path (trace_offcpu.c). */
int trace_source_offcpu(struct trace_writer *w, const struct profile *p, const struct trace_opts *o,
			struct trace_stats *st);
/* Regions (src/output/trace_regions.c): slices on a track of their own per thread. */
#define TRACE_REGION_TID(tid) ((uint32_t)(tid) | 0x40000000u)
int trace_source_regions(struct trace_writer *w, const struct profile *p,
			 const struct trace_opts *o, struct trace_stats *st);
/* Memory counter tracks: live heap and RSS per process (src/output/trace_mem.c). */
int trace_source_mem(struct trace_writer *w, const struct profile *p, const struct trace_opts *o,
		     struct trace_stats *st);

/* I/O calls (record --io): slices on a track of their own per thread (src/output/trace_io.c). */
int trace_source_io(struct trace_writer *w, const struct profile *p, const struct trace_opts *o,
		    struct trace_stats *st);

/* Resource metric counter tracks per process, GPU and energy zone (src/output/trace_metrics.c). */
int trace_source_metrics(struct trace_writer *w, const struct profile *p,
			 const struct trace_opts *o, struct trace_stats *st);

/* Formats ns as microseconds with up to 3 decimals; returns the length (buf >= 32). */
size_t trace_fmt_us(char *buf, uint64_t ns);

#endif
