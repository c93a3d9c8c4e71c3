// SPDX-License-Identifier: MIT
/*
 * I/O calls in `eprof trace` (record --io): one slice per call, "read FILE" or "write FILE",
 * on a track of its own next to each thread's CPU slices, with its bytes and fd.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "analysis/io.h"
#include "model/io_event.h"
#include "util/hmap.h"
#include "trace.h"

#define IO_TID(tid) ((uint32_t)(tid) | 0x20000000u)

int trace_source_io(struct trace_writer *w, const struct profile *p, const struct trace_opts *o,
		    struct trace_stats *st)
{
	struct hmap *named;
	char name[600];
	struct json a;

	if (!io_present(p))
		return 0;
	named = hmap__new(16);
	if (!named)
		return -ENOMEM;
	for (size_t i = 0; i < p->events.n; i++) {
		const struct event *e = &p->events.v[i];
		struct sample s = { .ts = e->ts, .pid = e->pid, .tid = e->tid };
		struct sample_filter f = o->filter;
		uint64_t seen;
		unsigned call;

		f.match = NULL;
		if (e->kind != EVK_IO || !sample_filter__match(&f, &s))
			continue;
		if (!hmap__get(named, e->pid, e->tid, &seen)) {
			const struct thread *t = profile__find_thread(p, e->pid, e->tid);

			if (hmap__put(named, e->pid, e->tid, 1)) {
				hmap__free(named);
				return -ENOMEM;
			}
			snprintf(name, sizeof(name), "%s %u I/O", t ? profile__str(p, t->comm) : "thread",
				 e->tid);
			trace_thread_name(w, e->pid, IO_TID(e->tid), name);
		}
		call = IOEV_CALL(e->flags);
		snprintf(name, sizeof(name), "%s %.500s", io_call_is_read(call) ? "read" : "write",
			 e->name ? profile__str(p, e->name) : "?");
		trace_args(&a);
		json_kv_u64(&a, "bytes", ev_io_bytes(e));
		json_kv_u64(&a, "fd", ev_io_fd(e));
		json_kv_str(&a, "call", io_call_name(call));
		json_kv_str(&a, "type", io_type_name(IOEV_TYPE(e->flags)));
		trace_complete(w, e->pid, IO_TID(e->tid), e->ts, e->dur, name, "io",
			       trace_args_text(&a));
		st->slices++;
	}
	hmap__free(named);
	return 0;
}
