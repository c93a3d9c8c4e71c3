// SPDX-License-Identifier: MIT
/* The report's I/O section (record --io): totals and throughput, top stacks by bytes and by
 * time, top files and peers, threads by read time; text and JSON. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report_io.h"
#include "report.h"
#include "units.h"
#include "analysis/io.h"
#include "analysis/stacks.h"
#include "model/io_event.h"
#include "util/json.h"
#include "util/sink.h"

#define STACK_MAX 256
#define TEXT_FRAMES 6
#define NAME_TEXT 40 /* characters of a file name in the stack tables (the file table has 70) */

static const char *name_of(const struct profile *p, uint32_t id)
{
	const char *s = id ? profile__str(p, id) : NULL;

	return s && *s ? s : "?";
}

/* The tail of a long name (the file's own name is its end), padded unless last (pad 0). */
static void text_name(struct sink *out, const char *s, size_t width, bool pad)
{
	size_t n = strlen(s);

	if (n <= width)
		sink_printf(out, "%-*s", pad ? (int)width : 0, s);
	else
		sink_printf(out, "...%s", s + n - (width - 3));
}

static void text_stack(struct sink *out, const struct profile *p, uint32_t stack)
{
	const struct frame *fr[STACK_MAX];
	size_t n = stack_frames_leaf_first(p, stack, fr, STACK_MAX);
	char b[512];

	if (!n)
		sink_puts(out, "[no stack]");
	for (size_t i = 0; i < n && i < TEXT_FRAMES; i++)
		sink_printf(out, "%s%s", i ? " <- " : "",
			    fr[i]->kind == FRAME_PYTHON ? frame_display_name(p, fr[i], b, sizeof(b))
							: name_of(p, fr[i]->name));
	if (n > TEXT_FRAMES)
		sink_puts(out, " <- ...");
	sink_puts(out, "\n");
}

static double rate(uint64_t bytes, uint64_t ns)
{
	return ns ? bytes / (ns / 1e9) : 0;
}

static void text_stacks(struct sink *out, const struct profile *p, const char *title,
			const struct io_group *g, size_t n, unsigned limit)
{
	char b[32], t[32];

	sink_printf(out, "\n%s\n%12s %10s %8s  %-5s  %-*s  %s\n", title, "Bytes", "Time", "Calls",
		    "Dir", NAME_TEXT, "File or peer", "Stack (leaf first)");
	for (size_t i = 0; i < n && (!limit || i < limit); i++) {
		fmt_bytes(b, sizeof(b), g[i].read_bytes + g[i].write_bytes);
		fmt_ns(t, sizeof(t), g[i].read_ns + g[i].write_ns);
		sink_printf(out, "%12s %10s %8" PRIu64 "  %-5s  ", b, t, g[i].calls,
			    g[i].input ? "read" : "write");
		text_name(out, name_of(p, g[i].name), NAME_TEXT, true);
		sink_puts(out, "  ");
		text_stack(out, p, g[i].stack);
	}
	if (limit && n > limit)
		sink_printf(out, "... %zu more (--limit 0 shows all)\n", n - limit);
}

static void text_files(struct sink *out, const struct profile *p, const struct io_result *r,
		       unsigned limit)
{
	char rb[32], wb[32], t[32], th[32];

	sink_printf(out, "\nI/O by file or peer:\n%12s %12s %10s %8s %12s  %-8s %s\n", "Read",
		    "Written", "Time", "Calls", "Rate", "Type", "File or peer");
	for (size_t i = 0; i < r->nfiles && (!limit || i < limit); i++) {
		const struct io_group *g = &r->files[i];

		fmt_bytes(rb, sizeof(rb), g->read_bytes);
		fmt_bytes(wb, sizeof(wb), g->write_bytes);
		fmt_ns(t, sizeof(t), g->read_ns + g->write_ns);
		fmt_bytes(th, sizeof(th), rate(g->read_bytes + g->write_bytes, g->read_ns + g->write_ns));
		sink_printf(out, "%12s %12s %10s %8" PRIu64 " %10s/s  %-8s ", rb, wb, t, g->calls, th,
			    io_type_name(g->type));
		text_name(out, name_of(p, g->name), 70, false);
		sink_puts(out, "\n");
	}
	if (limit && r->nfiles > limit)
		sink_printf(out, "... %zu more (--limit 0 shows all)\n", r->nfiles - limit);
}

static double span_share(const struct io_thread *t)
{
	return t->last_ts > t->first_ts ? (double)t->read_ns / (t->last_ts - t->first_ts) : 0;
}

static void text_threads(struct sink *out, const struct profile *p, const struct io_result *r,
			 unsigned limit)
{
	char rb[32], wb[32], t[32];

	sink_printf(out, "\nI/O by thread (by time in reads):\n%8s %8s  %-16s %12s %12s %10s %7s  %s\n",
		    "PID", "TID", "Thread", "Read", "Written", "Read time", "Span%",
		    "Read the longest");
	for (size_t i = 0; i < r->nthreads && (!limit || i < limit); i++) {
		const struct io_thread *h = &r->threads[i];

		fmt_bytes(rb, sizeof(rb), h->read_bytes);
		fmt_bytes(wb, sizeof(wb), h->write_bytes);
		fmt_ns(t, sizeof(t), h->read_ns);
		sink_printf(out, "%8u %8u  %-16.16s %12s %12s %10s %6.1f%%  %s\n", h->pid, h->tid,
			    name_of(p, h->comm), rb, wb, t, 100.0 * span_share(h),
			    h->top_name ? name_of(p, h->top_name) : "-");
	}
	if (limit && r->nthreads > limit)
		sink_printf(out, "... %zu more (--limit 0 shows all)\n", r->nthreads - limit);
}

int report_io_text(struct sink *out, const struct profile *p, const struct sample_filter *f,
		   unsigned limit)
{
	struct io_result r;
	char rb[32], wb[32], rt[32], wt[32], rr[32], wr[32], c[32];
	double secs;
	int err;

	if (!io_present(p))
		return 0;
	err = io_analyze(p, f, &r);
	if (err)
		return err;
	secs = r.end_ns > r.start_ns ? (r.end_ns - r.start_ns) / 1e9 : 0;
	fmt_count(c, sizeof(c), r.calls);
	fmt_bytes(rb, sizeof(rb), r.read_bytes);
	fmt_bytes(wb, sizeof(wb), r.write_bytes);
	fmt_ns(rt, sizeof(rt), r.read_ns);
	fmt_ns(wt, sizeof(wt), r.write_ns);
	fmt_bytes(rr, sizeof(rr), secs ? r.read_bytes / secs : 0);
	fmt_bytes(wr, sizeof(wr), secs ? r.write_bytes / secs : 0);
	sink_printf(out, "\n# I/O by stack (record --io): %s calls   read %s in %s   written %s in %s\n",
		    c, rb, rt, wb, wt);
	sink_printf(out, "#   throughput over the record: %s/s in, %s/s out", rr, wr);
	fmt_bytes(rr, sizeof(rr), rate(r.read_bytes, r.read_ns));
	fmt_bytes(wr, sizeof(wr), rate(r.write_bytes, r.write_ns));
	sink_printf(out, "   while in the calls: %s/s in, %s/s out\n", rr, wr);
	sink_printf(out, "#   calls without a stack (over --io-stack-rate): %" PRIu64
			 "   failed calls (not recorded): %" PRIu64 "   lost: %" PRIu64 "\n",
		    r.no_stack, p->stats[STAT_IO_ERRORS], p->stats[STAT_IO_LOST]);
	if (r.calls) {
		text_stacks(out, p, "I/O by stack, most bytes first:", r.by_bytes, r.nstacks, limit);
		text_stacks(out, p, "I/O by stack, most time first:", r.by_time, r.nstacks, limit);
		text_files(out, p, &r, limit);
		text_threads(out, p, &r, limit);
	}
	io_result__free(&r);
	return out->err;
}

static void json_group(struct json *j, const struct profile *p, const struct io_group *g,
		       bool stack)
{
	json_obj_open(j, 6, NULL);
	json_kv_str(j, "file", name_of(p, g->name));
	json_kv_str(j, "type", io_type_name(g->type));
	if (stack)
		json_kv_str(j, "direction", g->input ? "read" : "write");
	json_kv_u64(j, "calls", g->calls);
	json_kv_u64(j, "bytes", g->read_bytes + g->write_bytes);
	json_kv_u64(j, "ns", g->read_ns + g->write_ns);
	json_kv_u64(j, "read_bytes", g->read_bytes);
	json_kv_u64(j, "write_bytes", g->write_bytes);
	json_kv_u64(j, "read_ns", g->read_ns);
	json_kv_u64(j, "write_ns", g->write_ns);
	if (stack)
		report_json_stack(j, p, g->stack);
	json_obj_end(j);
}

static void json_groups(struct json *j, const struct profile *p, const char *key,
			const struct io_group *g, size_t n, unsigned limit, bool stack)
{
	json_arr_open(j, 4, key);
	for (size_t i = 0; i < n && (!limit || i < limit); i++)
		json_group(j, p, &g[i], stack);
	json_arr_end(j);
}

static void json_threads(struct json *j, const struct profile *p, const struct io_result *r,
			 unsigned limit)
{
	json_arr_open(j, 4, "threads");
	for (size_t i = 0; i < r->nthreads && (!limit || i < limit); i++) {
		const struct io_thread *t = &r->threads[i];

		json_obj_open(j, 6, NULL);
		json_kv_u64(j, "pid", t->pid);
		json_kv_u64(j, "tid", t->tid);
		json_kv_str(j, "comm", t->comm ? profile__str(p, t->comm) : "");
		json_kv_u64(j, "calls", t->calls);
		json_kv_u64(j, "read_bytes", t->read_bytes);
		json_kv_u64(j, "write_bytes", t->write_bytes);
		json_kv_u64(j, "read_ns", t->read_ns);
		json_kv_u64(j, "write_ns", t->write_ns);
		json_kv_u64(j, "span_ns", t->last_ts > t->first_ts ? t->last_ts - t->first_ts : 0);
		json_kv_f(j, "read_share", span_share(t), 4);
		json_kv_str(j, "top_read_file", t->top_name ? name_of(p, t->top_name) : "");
		json_obj_end(j);
	}
	json_arr_end(j);
}

int report_io_json(struct sink *out, const struct profile *p, const struct sample_filter *f,
		   unsigned limit)
{
	struct io_result r;
	struct json j;
	double secs;
	int err;

	if (!io_present(p))
		return 0;
	err = io_analyze(p, f, &r);
	if (err)
		return err;
	secs = r.end_ns > r.start_ns ? (r.end_ns - r.start_ns) / 1e9 : 0;
	json_init_members(&j, out, 0);
	json_obj_open(&j, 2, "io");
	json_kv_u64(&j, "calls", r.calls);
	json_kv_u64(&j, "read_calls", r.read_calls);
	json_kv_u64(&j, "write_calls", r.write_calls);
	json_kv_u64(&j, "read_bytes", r.read_bytes);
	json_kv_u64(&j, "write_bytes", r.write_bytes);
	json_kv_u64(&j, "read_ns", r.read_ns);
	json_kv_u64(&j, "write_ns", r.write_ns);
	json_kv_f(&j, "read_bytes_per_s", secs ? r.read_bytes / secs : 0, 1);
	json_kv_f(&j, "write_bytes_per_s", secs ? r.write_bytes / secs : 0, 1);
	json_kv_u64(&j, "calls_without_stack", r.no_stack);
	json_kv_u64(&j, "failed_calls", p->stats[STAT_IO_ERRORS]);
	json_kv_u64(&j, "events_lost", p->stats[STAT_IO_LOST]);
	json_groups(&j, p, "by_bytes", r.by_bytes, r.nstacks, limit, true);
	json_groups(&j, p, "by_time", r.by_time, r.nstacks, limit, true);
	json_groups(&j, p, "files", r.files, r.nfiles, limit, false);
	json_threads(&j, p, &r, limit);
	json_obj_close(&j, 2);
	io_result__free(&r);
	return json_flush(&j);
}
