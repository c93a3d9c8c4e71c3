// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/json.h"
#include "units.h"
#include "util/sink.h"
#include "report.h"
#include "report_gpu.h"
#include "analysis/pygil.h"
#include "report_python.h"
#include "report_regions.h"
#include "report_mem.h"
#include "report_io.h"
#include "report_findings.h"
#include "report_metrics.h"
#include "analysis/findings.h"
#include "analysis/memory.h"
#include "analysis/procs.h"
#include "analysis/pylines.h"
#include "analysis/stacks.h"

static double pct(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * part / whole : 0;
}

static void text_header(struct sink *out, const struct profile *p, const struct report_opts *o,
			const struct profile_summary *s)
{
	char smp[32], lost[32];

	fmt_count(smp, sizeof(smp), s->samples);
	fmt_count(lost, sizeof(lost), s->lost);
	sink_printf(out, "# eprof report: %s\n", o->path ? o->path : "");
	sink_printf(out, "# command:  %s\n", s->command);
	if (profile__meta(p, "rank")) {
		const char *ws = profile__meta(p, "world_size"), *lr = profile__meta(p, "local_rank");
		const char *job = profile__meta(p, "job_id"), *host = profile__meta(p, "hostname");

		sink_printf(out, "# rank:     %s%s%s", profile__meta(p, "rank"), ws ? " of " : "",
			    ws ? ws : "");
		if (lr)
			sink_printf(out, " (local rank %s)", lr);
		sink_printf(out, " on %s", host ? host : "?");
		if (job)
			sink_printf(out, ", job %s", job);
		sink_puts(out, "   (the job's files together: eprof report FILE... or DIR)\n");
	}
	sink_printf(out, "# duration: %.2f s   samples: %s at %u Hz   CPU: %.2f cores", s->duration_s,
		    smp, s->rate, s->cores);
	if (s->ncpus)
		sink_printf(out, " (%.1f%% of %u CPUs)", 100.0 * s->cores / s->ncpus, s->ncpus);
	sink_printf(out, "\n# lost: %s samples   unknown leaf frames: %.1f%%   truncated stacks: %.1f%%",
		    lost, pct(s->unknown_samples, s->samples), pct(s->truncated, s->samples));
	if (p->stats[STAT_KSTACK_ERR] + p->stats[STAT_USTACK_ERR])
		sink_printf(out, "   stack read errors: %" PRIu64,
			    p->stats[STAT_KSTACK_ERR] + p->stats[STAT_USTACK_ERR]);
	sink_puts(out, "\n");
	/* why stacks were cut and how many crossed JIT code: one line of diagnostics */
	if (s->truncated)
		sink_printf(out,
			    "# unwinding stopped early: no CFI %" PRIu64 ", too deep %" PRIu64
			    ", beyond the copied stack %" PRIu64 ", bad frame %" PRIu64,
			    p->stats[STAT_UNWIND_NO_CFI], p->stats[STAT_UNWIND_TOO_DEEP],
			    p->stats[STAT_UNWIND_READ_FAULT], p->stats[STAT_UNWIND_BAD_FRAME]);
	if (p->stats[STAT_UNWIND_SCANNED]) {
		fmt_count(smp, sizeof(smp), p->stats[STAT_UNWIND_SCANNED]);
		sink_printf(out,
			    "%sstacks through code without CFI (JIT), unwound by stack "
			    "scanning: %s",
			    s->truncated ? "   " : "# ", smp);
	}
	if (s->truncated || p->stats[STAT_UNWIND_SCANNED])
		sink_puts(out, "\n");
}

/* A Python function's row says which file: "qualname (file.py)". */
static const char *func_label(const struct profile *p, const struct func_stat *f, char *buf,
			      size_t len)
{
	const char *file = profile__str(p, f->file), *slash = strrchr(file, '/');

	if (!f->file)
		return profile__str(p, f->name);
	snprintf(buf, len, "%s (%s)", profile__str(p, f->name), slash ? slash + 1 : file);
	return buf;
}

static void text_functions(struct sink *out, const struct profile *p, const struct report_opts *o,
			   const struct hot_result *r, unsigned limit)
{
	size_t n = limit && limit < r->n ? limit : r->n;
	char smp[32], name[512];

	sink_printf(out, "\n%7s %7s %9s  %-50s %s\n", "Self%", "Total%", "Samples",
		    o->hot.by_line ? "Function (line)" : "Function", "Module");
	for (size_t i = 0; i < n; i++) {
		const struct func_stat *f = &r->funcs[i];

		fmt_count(smp, sizeof(smp),
			  o->hot.sort == SORT_TOTAL ? f->total : f->self);
		sink_printf(out, "%7.2f %7.2f %9s  %-50s %s\n", pct(f->self, r->samples),
			    pct(f->total, r->samples), smp, func_label(p, f, name, sizeof(name)),
			    profile__str(p, f->module));
	}
	if (n < r->n)
		sink_printf(out, "... %zu more functions (--limit 0 shows all)\n", r->n - n);
}

static int text_threads(struct sink *out, const struct profile *p, const struct report_opts *o,
			uint64_t total)
{
	struct thread_stat *t;
	size_t n;
	int err = thread_stats(p, &o->hot.filter, &t, &n);

	if (err)
		return err;
	sink_printf(out, "\n%8s %8s  %-16s %9s %7s  %s\n", "PID", "TID", "Thread", "Samples", "%",
		    "Hottest function (self samples)");
	for (size_t i = 0; i < n && (!o->limit || i < o->limit); i++)
		sink_printf(out, "%8u %8u  %-16s %9" PRIu64 " %7.2f  %s (%" PRIu64 ")\n", t[i].pid,
			    t[i].tid, profile__str(p, t[i].comm), t[i].samples,
			    pct(t[i].samples, total), profile__str(p, t[i].top_func), t[i].top_self);
	free(t);
	return 0;
}

#define CMD_TEXT_MAX 110 /* characters of a command line in the text table; JSON has all */

/*
 * Processes with their command lines: with --threads, and whenever the record holds several
 * (a job's workers or ranks), which comm alone does not tell apart.
 */
static int text_processes(struct sink *out, const struct profile *p, const struct report_opts *o,
			  uint64_t total)
{
	struct proc_stat *v;
	size_t n;
	char buf[64];
	int err = process_stats(p, &o->hot.filter, &v, &n);

	if (err)
		return err;
	if (n && (o->threads || n > 1)) {
		sink_printf(out, "\n%8s %8s %9s %7s %8s  %s\n", "PID", "PPID", "Samples", "%",
			    "Threads", "Command");
		for (size_t i = 0; i < n && (!o->limit || i < o->limit); i++) {
			const char *cmd = proc_command(p, &v[i], buf, sizeof(buf));
			size_t len = strlen(cmd);

			sink_printf(out, "%8u %8u %9" PRIu64 " %7.2f %8u  %.*s%s\n", v[i].pid,
				    v[i].ppid, v[i].samples, pct(v[i].samples, total), v[i].threads,
				    (int)(len > CMD_TEXT_MAX ? CMD_TEXT_MAX - 3 : len), cmd,
				    len > CMD_TEXT_MAX ? "..." : "");
		}
		if (o->limit && n > o->limit)
			sink_printf(out, "... %zu more processes (--limit 0 shows all)\n",
				    n - o->limit);
	}
	free(v);
	return 0;
}

#define REPORT_STACK_MAX 256 /* frames of a section's stack in JSON */

void report_json_stack(struct json *j, const struct profile *p, uint32_t stack)
{
	const struct frame *fr[REPORT_STACK_MAX];
	size_t n = stack_frames_leaf_first(p, stack, fr, REPORT_STACK_MAX);

	json_arr_open(j, -1, "stack");
	for (size_t i = 0; i < n; i++) {
		const char *s = fr[i]->name ? profile__str(p, fr[i]->name) : NULL;

		json_str(j, s && *s ? s : "?");
	}
	json_arr_end(j);
}

static const char *kind_name(uint8_t kind)
{
	static const char *const names[] = { "user", "kernel", "jit", "unknown", "special", "python" };

	return kind < 6 ? names[kind] : "unknown";
}

static void json_functions(struct json *j, const struct profile *p, const struct report_opts *o,
			   const struct hot_result *r)
{
	size_t n = o->limit && o->limit < r->n ? o->limit : r->n;

	json_arr_open(j, 2, "functions");
	for (size_t i = 0; i < n; i++) {
		const struct func_stat *f = &r->funcs[i];

		json_obj_open(j, 4, NULL);
		json_kv_str(j, "name", profile__str(p, f->name));
		json_kv_str(j, "module", profile__str(p, f->module));
		json_kv_str(j, "kind", kind_name(f->kind));
		json_kv_u64(j, "self", f->self);
		json_kv_u64(j, "total", f->total);
		json_kv_f(j, "self_pct", pct(f->self, r->samples), 4);
		json_kv_f(j, "total_pct", pct(f->total, r->samples), 4);
		json_kv_u64(j, "self_ns", f->self_ns);
		json_kv_u64(j, "total_ns", f->total_ns);
		json_obj_end(j);
	}
	json_arr_close(j, 2);
}

static int json_threads(struct json *j, const struct profile *p, const struct report_opts *o)
{
	struct thread_stat *t;
	size_t n;
	int err = thread_stats(p, &o->hot.filter, &t, &n);

	if (err)
		return err;
	json_arr_open(j, 2, "threads");
	for (size_t i = 0; i < n; i++) {
		json_obj_open(j, 4, NULL);
		json_kv_u64(j, "pid", t[i].pid);
		json_kv_u64(j, "tid", t[i].tid);
		json_kv_str(j, "comm", profile__str(p, t[i].comm));
		json_kv_u64(j, "samples", t[i].samples);
		json_kv_u64(j, "cpu_ns", t[i].weight);
		json_kv_str(j, "top_function", profile__str(p, t[i].top_func));
		json_obj_end(j);
	}
	json_arr_close(j, 2);
	free(t);
	return 0;
}

static int json_processes(struct json *j, const struct profile *p, const struct report_opts *o)
{
	struct proc_stat *v;
	size_t n;
	char buf[64];
	int err = process_stats(p, &o->hot.filter, &v, &n);

	if (err)
		return err;
	json_arr_open(j, 2, "processes");
	for (size_t i = 0; i < n; i++) {
		json_obj_open(j, 4, NULL);
		json_kv_u64(j, "pid", v[i].pid);
		json_kv_u64(j, "ppid", v[i].ppid);
		json_kv_str(j, "comm", v[i].comm ? profile__str(p, v[i].comm) : "");
		json_kv_str(j, "cmdline", v[i].cmdline ? profile__str(p, v[i].cmdline) : "");
		json_kv_str(j, "command", proc_command(p, &v[i], buf, sizeof(buf)));
		json_kv_u64(j, "samples", v[i].samples);
		json_kv_u64(j, "cpu_ns", v[i].weight);
		json_kv_u64(j, "threads", v[i].threads);
		json_obj_end(j);
	}
	json_arr_close(j, 2);
	free(v);
	return 0;
}

/* One rank of a job (record under a launcher): its place, or null. */
static void json_job(struct json *j, const struct profile *p)
{
	static const char *const keys[] = { "rank", "local_rank", "world_size" };
	const char *job = profile__meta(p, "job_id");

	if (!profile__meta(p, "rank")) {
		json_kv_null(j, "job");
		return;
	}
	json_obj_open(j, -1, "job");
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		const char *v = profile__meta(p, keys[i]);

		if (v)
			json_kv_i64(j, keys[i], strtoll(v, NULL, 10));
		else
			json_kv_null(j, keys[i]);
	}
	json_kv_str(j, "job_id", job);
	json_obj_end(j);
}

static void json_summary(struct json *j, const struct profile *p, const struct profile_summary *s)
{
	const char *host = profile__meta(p, "hostname"), *kernel = profile__meta(p, "kernel");

	json_break(j, 2);
	json_kv_u64(j, "version", 1);
	json_kv_str(j, "command", s->command);
	json_kv_str(j, "hostname", host ? host : "");
	json_kv_str(j, "kernel", kernel ? kernel : "");
	json_job(j, p);
	json_break(j, 2);
	json_kv_f(j, "duration_s", s->duration_s, 6);
	json_kv_u64(j, "samples", s->samples);
	json_kv_u64(j, "sample_rate", s->rate);
	json_kv_u64(j, "cpu_ns", s->weight);
	json_kv_f(j, "cpu_cores", s->cores, 4);
	json_kv_u64(j, "lost", s->lost);
	json_kv_u64(j, "truncated_samples", s->truncated);
	json_kv_u64(j, "unknown_leaf_samples", s->unknown_samples);
	json_obj_open(j, 2, "stats");
	for (int i = 0; i < STAT_MAX; i++)
		json_kv_u64(j, profile_stat_names[i], p->stats[i]);
	json_obj_end(j);
}

/* The report object; each section of it (off-CPU, GPU, ...) adds its members on out. */
static int write_json(struct sink *out, struct profile *p, const struct report_opts *o,
		      const struct profile_summary *s, const struct hot_result *r,
		      const struct findings_pre *pre, const struct sample_filter *rf,
		      const struct metrics_result *met)
{
	struct json j;
	int err;

	json_init(&j, out, 0);
	json_obj(&j);
	json_summary(&j, p, s);
	json_functions(&j, p, o, r);
	err = json_processes(&j, p, o);
	if (!err && o->threads)
		err = json_threads(&j, p, o);
	err = json_flush(&j) ?: err;
	err = err ?: report_offcpu(out, p, o);
	err = err ?: report_gpu_json(out, p);
	err = err ?: report_regions_json(out, p, rf);
	err = err ?: report_python_json(out, p, &o->hot.filter);
	err = err ?: report_py_lines_json(out, p, &o->hot.filter, pre->mem);
	err = err ?: report_mem_json(out, p, pre->mem, o->limit);
	err = err ?: report_io_json(out, p, &o->hot.filter, o->limit);
	err = err ?: report_metrics_json(out, p, met, o->carbon_g_per_kwh);
	err = err ?: report_findings(out, p, &o->hot.filter, pre, true);
	json_obj_close(&j, 0);
	return json_flush(&j) ?: err;
}

/*
 * Row budgets of the text: where the Python lines tables answer "which line", the tables they
 * summarize are secondary and get fewer rows (the function table half the limit, the five
 * memory tables by stack a tenth, the blocking stacks five); without them, the usual rows.
 */
static unsigned rows(unsigned limit, bool secondary, unsigned div_secondary, unsigned div)
{
	unsigned d = secondary ? div_secondary : div;

	return limit ? (limit + d - 1) / d : 0;
}

static int write_text(struct sink *out, struct profile *p, const struct report_opts *o,
		      const struct profile_summary *s, const struct hot_result *r,
		      const struct findings_pre *pre, const struct sample_filter *rf,
		      const struct metrics_result *met)
{
	struct report_opts off = *o;
	struct py_lines pyl;
	int err = py_lines_analyze(p, &o->hot.filter, pre->mem, &pyl);

	if (err)
		return err;
	text_header(out, p, o, s);
	report_metrics_text(out, p, met, o->carbon_g_per_kwh, o->limit);
	if (!s->samples)
		sink_puts(out, "\nno samples (was the target idle, or filtered out?)\n");
	else
		text_functions(out, p, o, r, rows(o->limit, pyl.n[PYT_CPU], 2, 1));
	if (s->samples)
		err = text_processes(out, p, o, s->samples);
	if (!err && o->threads && s->samples)
		err = text_threads(out, p, o, s->samples);
	off.limit = o->limit && pyl.n[PYT_OFFCPU] ? 5 : o->limit;
	err = err ?: report_offcpu(out, p, &off);
	err = err ?: report_gpu_text(out, p, o->limit);
	err = err ?: report_regions_text(out, p, rf, o->limit);
	err = err ?: report_python_text(out, p, &o->hot.filter);
	if (!err)
		report_py_lines_write(out, p, &pyl, o->limit);
	/* five tables of one-line stacks in a row: a third of the limit each (10 rows) */
	err = err ?: report_mem_text(out, p, pre->mem, rows(o->limit, pyl.n[PYT_MEMORY], 10, 3));
	err = err ?: report_io_text(out, p, &o->hot.filter, o->limit);
	err = err ?: report_findings(out, p, &o->hot.filter, pre, false);
	py_lines__free(&pyl);
	return err;
}

int report_write(struct sink *out, struct profile *p, const struct report_opts *o)
{
	struct sample_filter rf = o->hot.filter;
	struct profile_summary s;
	struct hot_result r;
	struct mem_result mem;
	struct findings_pre pre = { 0 };
	struct metrics_result met;
	bool have_mem = false;
	int err;

	/* Regions are not samples: --region restricts samples, not the regions table. */
	rf.match = NULL;

	profile_summarize(p, &o->hot.filter, &s);
	err = metrics_analyze(p, o->hot.filter.pid, &met);
	if (err)
		return err;
	err = hot_functions(p, &o->hot, &r);
	if (err) {
		metrics_result__free(&met);
		return err;
	}
	/* The findings reuse the function table (unless by line or with inline frames split)
	 * and the memory analysis of the memory section. */
	pre.hot = o->hot.by_line || o->hot.inlined ? NULL : &r;
	if (report_mem_present(p)) {
		err = memory_analyze(
		    p, &(struct mem_opts){.temp_ns = 1000000, .pid = o->hot.filter.pid}, &mem);
		if (err) {
			hot_result__free(&r);
			metrics_result__free(&met);
			return err;
		}
		have_mem = true;
		pre.mem = &mem;
	}
	if (o->json)
		err = write_json(out, p, o, &s, &r, &pre, &rf, &met);
	else
		err = write_text(out, p, o, &s, &r, &pre, &rf, &met);
	hot_result__free(&r);
	metrics_result__free(&met);
	if (have_mem)
		mem_result__free(&mem);
	return err ? err : out->err;
}
