// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/sink.h"
#include "report.h"
#include "report_gpu.h"
#include "../analysis/pygil.h"
#include "report_python.h"
#include "report_regions.h"
#include "report_mem.h"
#include "report_findings.h"
#include "../analysis/findings.h"
#include "../analysis/memory.h"
#include "../analysis/procs.h"
#include "../analysis/stacks.h"

static double pct(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * part / whole : 0;
}

static void fmt_count(char *buf, size_t len, uint64_t v)
{
	char tmp[32];
	int n = snprintf(tmp, sizeof(tmp), "%" PRIu64, v), o = 0;

	for (int i = 0; i < n && (size_t)o < len - 1; i++) {
		if (i && (n - i) % 3 == 0 && (size_t)o < len - 2)
			buf[o++] = ',';
		buf[o++] = tmp[i];
	}
	buf[o] = '\0';
}

static void text_header(struct sink *out, const struct profile *p, const struct report_opts *o,
			const struct profile_summary *s)
{
	char smp[32], lost[32];

	fmt_count(smp, sizeof(smp), s->samples);
	fmt_count(lost, sizeof(lost), s->lost);
	sink_printf(out, "# eprof report: %s\n", o->path ? o->path : "");
	sink_printf(out, "# command:  %s\n", s->command);
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
	if (s->truncated)
		sink_printf(out,
			    "# unwinding stopped early: no CFI %" PRIu64 ", too deep %" PRIu64
			    ", beyond the copied stack %" PRIu64 ", bad frame %" PRIu64 "\n",
			    p->stats[STAT_UNWIND_NO_CFI], p->stats[STAT_UNWIND_TOO_DEEP],
			    p->stats[STAT_UNWIND_READ_FAULT], p->stats[STAT_UNWIND_BAD_FRAME]);
	if (p->stats[STAT_UNWIND_SCANNED]) {
		fmt_count(smp, sizeof(smp), p->stats[STAT_UNWIND_SCANNED]);
		sink_printf(out, "# stacks through code without CFI (JIT), unwound by stack scanning: %s\n",
			    smp);
	}
}

static void text_functions(struct sink *out, const struct profile *p, const struct report_opts *o,
			   const struct hot_result *r)
{
	size_t n = o->limit && o->limit < r->n ? o->limit : r->n;
	char smp[32];

	sink_printf(out, "\n%7s %7s %9s  %-50s %s\n", "Self%", "Total%", "Samples",
		    o->hot.by_line ? "Function (line)" : "Function", "Module");
	for (size_t i = 0; i < n; i++) {
		const struct func_stat *f = &r->funcs[i];

		fmt_count(smp, sizeof(smp),
			  o->hot.sort == SORT_TOTAL ? f->total : f->self);
		sink_printf(out, "%7.2f %7.2f %9s  %-50s %s\n", pct(f->self, r->samples),
			    pct(f->total, r->samples), smp, profile__str(p, f->name),
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

static void json_kv_str(struct sink *out, const char *k, const char *v, bool comma)
{
	sink_printf(out, "%s\"%s\": \"", comma ? ", " : "", k);
	sink_json_str(out, v ? v : "");
	sink_puts(out, "\"");
}

static const char *kind_name(uint8_t kind)
{
	static const char *const names[] = { "user", "kernel", "jit", "unknown", "special", "python" };

	return kind < 6 ? names[kind] : "unknown";
}

static void json_functions(struct sink *out, const struct profile *p, const struct report_opts *o,
			   const struct hot_result *r)
{
	size_t n = o->limit && o->limit < r->n ? o->limit : r->n;

	sink_puts(out, ",\n  \"functions\": [");
	for (size_t i = 0; i < n; i++) {
		const struct func_stat *f = &r->funcs[i];

		sink_puts(out, i ? ",\n    {" : "\n    {");
		json_kv_str(out, "name", profile__str(p, f->name), false);
		json_kv_str(out, "module", profile__str(p, f->module), true);
		json_kv_str(out, "kind", kind_name(f->kind), true);
		sink_printf(out,
			    ", \"self\": %" PRIu64 ", \"total\": %" PRIu64
			    ", \"self_pct\": %.4f, \"total_pct\": %.4f, \"self_ns\": %" PRIu64
			    ", \"total_ns\": %" PRIu64 "}",
			    f->self, f->total, pct(f->self, r->samples), pct(f->total, r->samples),
			    f->self_ns, f->total_ns);
	}
	sink_puts(out, "\n  ]");
}

static int json_threads(struct sink *out, const struct profile *p, const struct report_opts *o)
{
	struct thread_stat *t;
	size_t n;
	int err = thread_stats(p, &o->hot.filter, &t, &n);

	if (err)
		return err;
	sink_puts(out, ",\n  \"threads\": [");
	for (size_t i = 0; i < n; i++) {
		sink_printf(out, "%s{\"pid\": %u, \"tid\": %u", i ? ",\n    " : "\n    ", t[i].pid,
			    t[i].tid);
		json_kv_str(out, "comm", profile__str(p, t[i].comm), true);
		sink_printf(out, ", \"samples\": %" PRIu64 ", \"cpu_ns\": %" PRIu64, t[i].samples,
			    t[i].weight);
		json_kv_str(out, "top_function", profile__str(p, t[i].top_func), true);
		sink_puts(out, "}");
	}
	sink_puts(out, "\n  ]");
	free(t);
	return 0;
}

static int json_processes(struct sink *out, const struct profile *p, const struct report_opts *o)
{
	struct proc_stat *v;
	size_t n;
	char buf[64];
	int err = process_stats(p, &o->hot.filter, &v, &n);

	if (err)
		return err;
	sink_puts(out, ",\n  \"processes\": [");
	for (size_t i = 0; i < n; i++) {
		sink_printf(out, "%s{\"pid\": %u, \"ppid\": %u", i ? ",\n    " : "\n    ", v[i].pid,
			    v[i].ppid);
		json_kv_str(out, "comm", v[i].comm ? profile__str(p, v[i].comm) : "", true);
		json_kv_str(out, "cmdline", v[i].cmdline ? profile__str(p, v[i].cmdline) : "", true);
		json_kv_str(out, "command", proc_command(p, &v[i], buf, sizeof(buf)), true);
		sink_printf(out,
			    ", \"samples\": %" PRIu64 ", \"cpu_ns\": %" PRIu64 ", \"threads\": %u}",
			    v[i].samples, v[i].weight, v[i].threads);
	}
	sink_puts(out, "\n  ]");
	free(v);
	return 0;
}

static void json_summary(struct sink *out, const struct profile *p, const struct profile_summary *s)
{
	sink_puts(out, "{\n  \"version\": 1");
	json_kv_str(out, "command", s->command, true);
	json_kv_str(out, "hostname", profile__meta(p, "hostname"), true);
	json_kv_str(out, "kernel", profile__meta(p, "kernel"), true);
	sink_printf(out,
		    ",\n  \"duration_s\": %.6f, \"samples\": %" PRIu64 ", \"sample_rate\": %u"
		    ", \"cpu_ns\": %" PRIu64 ", \"cpu_cores\": %.4f, \"lost\": %" PRIu64
		    ", \"truncated_samples\": %" PRIu64 ", \"unknown_leaf_samples\": %" PRIu64,
		    s->duration_s, s->samples, s->rate, s->weight, s->cores, s->lost, s->truncated,
		    s->unknown_samples);
	sink_puts(out, ",\n  \"stats\": {");
	for (int i = 0; i < STAT_MAX; i++)
		sink_printf(out, "%s\"%s\": %" PRIu64, i ? ", " : "", profile_stat_names[i],
			    p->stats[i]);
	sink_puts(out, "}");
}

int report_write(struct sink *out, struct profile *p, const struct report_opts *o)
{
	struct sample_filter rf = o->hot.filter;
	struct profile_summary s;
	struct hot_result r;
	struct mem_result mem;
	struct findings_pre pre = { 0 };
	bool have_mem = false;
	int err;

	/* Regions are not samples: --region restricts samples, not the regions table. */
	rf.match = NULL;

	profile_summarize(p, &o->hot.filter, &s);
	err = hot_functions(p, &o->hot, &r);
	if (err)
		return err;
	/* The findings reuse the function table (unless by line or with inline frames split)
	 * and the memory analysis of the memory section. */
	pre.hot = o->hot.by_line || o->hot.inlined ? NULL : &r;
	if (report_mem_present(p)) {
		err = memory_analyze(p, &(struct mem_opts){ .temp_ns = 1000000 }, &mem);
		if (err) {
			hot_result__free(&r);
			return err;
		}
		have_mem = true;
		pre.mem = &mem;
	}
	if (o->json) {
		json_summary(out, p, &s);
		json_functions(out, p, o, &r);
		err = json_processes(out, p, o);
		if (!err && o->threads)
			err = json_threads(out, p, o);
		err = err ? err : report_offcpu(out, p, o);
		if (!err)
			err = report_gpu_json(out, p);
		if (!err)
			err = report_regions_json(out, p, &rf);
		if (!err)
			err = report_python_json(out, p, &o->hot.filter);
		err = err ?: report_mem_json(out, p, pre.mem, o->limit);
		err = err ?: report_findings(out, p, &o->hot.filter, &pre, true);
		sink_puts(out, "\n}\n");
	} else {
		text_header(out, p, o, &s);
		if (!s.samples)
			sink_puts(out, "\nno samples (was the target idle, or filtered out?)\n");
		else
			text_functions(out, p, o, &r);
		if (s.samples)
			err = text_processes(out, p, o, s.samples);
		if (!err && o->threads && s.samples)
			err = text_threads(out, p, o, s.samples);
		err = err ? err : report_offcpu(out, p, o);
		if (!err)
			err = report_gpu_text(out, p, o->limit);
		if (!err)
			err = report_regions_text(out, p, &rf, o->limit);
		if (!err)
			err = report_python_text(out, p, &o->hot.filter);
		err = err ?: report_mem_text(out, p, pre.mem, o->limit);
		err = err ?: report_findings(out, p, &o->hot.filter, &pre, false);
	}
	hot_result__free(&r);
	if (have_mem)
		mem_result__free(&mem);
	return err ? err : out->err;
}
