// SPDX-License-Identifier: MIT
/* The streaming Chrome trace event writer (trace.h) on the JSON writer: one event per line. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/json.h"
#include "util/sink.h"
#include "trace.h"

struct trace_writer {
	struct json j; /* compact, one event per line */
	uint64_t events;
};

size_t trace_fmt_us(char *buf, uint64_t ns)
{
	size_t n = json_fmt_u64(buf, ns / 1000);
	unsigned frac = ns % 1000;

	if (frac) {
		buf[n++] = '.';
		buf[n++] = (char)('0' + frac / 100);
		frac %= 100;
		if (frac) {
			buf[n++] = (char)('0' + frac / 10);
			if (frac % 10)
				buf[n++] = (char)('0' + frac % 10);
		}
	}
	buf[n] = '\0';
	return n;
}

struct trace_writer *trace_writer__new(struct sink *out)
{
	struct trace_writer *w = calloc(1, sizeof(*w));

	if (!w) {
		errno = ENOMEM;
		return NULL;
	}
	json_init(&w->j, out, JSON_COMPACT);
	json_obj(&w->j);
	json_arr_open(&w->j, -1, "traceEvents");
	return w;
}

int trace_writer__finish(struct trace_writer *w, const char *const *meta)
{
	struct json *j = &w->j;
	int err;

	json_arr_close(j, 0);
	json_break(j, 0);
	json_kv_str(j, "displayTimeUnit", "ms");
	if (meta) {
		json_obj_open(j, 0, "otherData");
		for (; meta[0]; meta += 2)
			json_kv_str(j, meta[0], meta[1]);
		json_obj_end(j);
	}
	json_obj_end(j);
	err = json_flush(j);
	free(w);
	return err;
}

uint64_t trace_writer__events(const struct trace_writer *w)
{
	return w->events;
}

uint64_t trace_writer__bytes(const struct trace_writer *w)
{
	return json_bytes(&w->j);
}

int trace_writer__error(const struct trace_writer *w)
{
	return w->j.err ? w->j.err : w->j.out->err;
}

/* Starts an event: '{"ph":"X","pid":1' */
static void head(struct trace_writer *w, const char *ph, uint32_t pid)
{
	w->events++;
	json_obj_open(&w->j, 0, NULL);
	json_kv_str(&w->j, "ph", ph);
	json_kv_u64(&w->j, "pid", pid);
}

static void us(struct trace_writer *w, const char *key, uint64_t ns)
{
	char b[32];

	json_key(&w->j, key);
	json_raw(&w->j, b, trace_fmt_us(b, ns));
}

static void meta_event(struct trace_writer *w, uint32_t pid, const uint32_t *tid, const char *what,
		       const char *key, const char *str, const int *num)
{
	head(w, "M", pid);
	if (tid)
		json_kv_u64(&w->j, "tid", *tid);
	json_kv_str(&w->j, "name", what);
	json_obj_open(&w->j, -1, "args");
	if (str)
		json_kv_str(&w->j, key, str);
	else
		json_kv_i64(&w->j, key, *num);
	json_obj_end(&w->j);
	json_obj_end(&w->j);
}

void trace_process_name(struct trace_writer *w, uint32_t pid, const char *name)
{
	meta_event(w, pid, NULL, "process_name", "name", name, NULL);
}

void trace_process_labels(struct trace_writer *w, uint32_t pid, const char *labels)
{
	meta_event(w, pid, NULL, "process_labels", "labels", labels, NULL);
}

void trace_process_sort_index(struct trace_writer *w, uint32_t pid, int index)
{
	meta_event(w, pid, NULL, "process_sort_index", "sort_index", NULL, &index);
}

void trace_thread_name(struct trace_writer *w, uint32_t pid, uint32_t tid, const char *name)
{
	meta_event(w, pid, &tid, "thread_name", "name", name, NULL);
}

void trace_thread_sort_index(struct trace_writer *w, uint32_t pid, uint32_t tid, int index)
{
	meta_event(w, pid, &tid, "thread_sort_index", "sort_index", NULL, &index);
}

static void tail(struct trace_writer *w, const char *name, const char *cat, const char *args)
{
	json_kv_str(&w->j, "name", name ? name : "");
	if (cat)
		json_kv_str(&w->j, "cat", cat);
	if (args && *args) {
		json_key(&w->j, "args");
		json_raw(&w->j, args, strlen(args));
	}
	json_obj_end(&w->j);
}

static void thread_ts(struct trace_writer *w, uint32_t tid, uint64_t ts_ns)
{
	json_kv_u64(&w->j, "tid", tid);
	us(w, "ts", ts_ns);
}

void trace_complete(struct trace_writer *w, uint32_t pid, uint32_t tid, uint64_t ts_ns,
		    uint64_t dur_ns, const char *name, const char *cat, const char *args_json)
{
	head(w, "X", pid);
	thread_ts(w, tid, ts_ns);
	us(w, "dur", dur_ns);
	tail(w, name, cat, args_json);
}

void trace_begin(struct trace_writer *w, uint32_t pid, uint32_t tid, uint64_t ts_ns,
		 const char *name, const char *cat, const char *args_json)
{
	head(w, "B", pid);
	thread_ts(w, tid, ts_ns);
	tail(w, name, cat, args_json);
}

void trace_end(struct trace_writer *w, uint32_t pid, uint32_t tid, uint64_t ts_ns)
{
	head(w, "E", pid);
	thread_ts(w, tid, ts_ns);
	json_obj_end(&w->j);
}

void trace_counter(struct trace_writer *w, uint32_t pid, const char *name, uint64_t ts_ns,
		   const char *const *series, const double *values, size_t n)
{
	head(w, "C", pid);
	us(w, "ts", ts_ns);
	json_kv_str(&w->j, "name", name);
	json_obj_open(&w->j, -1, "args");
	for (size_t i = 0; i < n; i++) {
		json_key(&w->j, series[i]);
		json_g(&w->j, isfinite(values[i]) ? values[i] : 0, 6);
	}
	json_obj_end(&w->j);
	json_obj_end(&w->j);
}

void trace_instant(struct trace_writer *w, uint32_t pid, uint32_t tid, uint64_t ts_ns,
		   const char *name, char scope, const char *args_json)
{
	char s[2] = {scope, '\0'};

	head(w, "i", pid);
	thread_ts(w, tid, ts_ns);
	json_kv_str(&w->j, "s", s);
	tail(w, name, NULL, args_json);
}

void trace_flow(struct trace_writer *w, char phase, uint64_t id, uint32_t pid, uint32_t tid,
		uint64_t ts_ns, const char *name, const char *cat)
{
	char ph[2] = {phase, '\0'};

	head(w, ph, pid);
	thread_ts(w, tid, ts_ns);
	json_kv_u64(&w->j, "id", id);
	if (phase == 'f' || phase == 't')
		json_kv_str(&w->j, "bp", "e");
	tail(w, name, cat ? cat : "flow", NULL);
}

void trace_event_text(struct trace_writer *w, const void *text, size_t len)
{
	w->events++;
	json_break(&w->j, 0);
	json_raw(&w->j, text, len);
}

void trace_event_more(struct trace_writer *w, const void *text, size_t len)
{
	json_put(&w->j, text, len);
}
