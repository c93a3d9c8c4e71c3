// SPDX-License-Identifier: MIT
/* eprof diff's sections beyond the function table, as text and JSON (diff_report.h). */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "diff_report.h"
#include "units.h"

#define STACK_ROWS 10 /* rows of the per-stack tables, at most */

static size_t rows_of(const struct diff_report *d, size_t n, size_t cap)
{
	size_t r = d->limit && d->limit < n ? d->limit : n;

	return cap && r > cap ? cap : r;
}

void diff_fmt_pct(char *buf, size_t len, double b, double n)
{
	if (b == n)
		snprintf(buf, len, "=");
	else if (b <= 0)
		snprintf(buf, len, "new");
	else if (n <= 0)
		snprintf(buf, len, "gone");
	else
		snprintf(buf, len, "%+.1f%%", 100.0 * (n - b) / b);
}

/* --- text ------------------------------------------------------------------------------------ */

void diff_text_attribution(struct sink *out, const struct diff_report *d)
{
	const struct diff_attr *a = d->a;

	if (a->growth_s <= 0 || !a->n) {
		sink_printf(out,
			    "\nRegression explained by: nothing grew (CPU time by call path)\n");
		return;
	}
	sink_printf(out,
		    "\nRegression explained by (CPU time%s by call path: %zu path%s explain%s "
		    "%.0f%% of +%.3f s)\n",
		    d->per ? " per region instance" : "", a->n, a->n == 1 ? "" : "s",
		    a->n == 1 ? "s" : "", 100 * a->explained, a->growth_s);
	sink_printf(out, "%10s %10s %10s %7s  %s\n", "base s", "new s", "delta s", "share",
		    "Call path (root;...;leaf)");
	for (size_t i = 0; i < a->n; i++) {
		const struct diff_path *p = &a->paths[i];

		sink_printf(out, "%10.3f %10.3f %+10.3f %6.1f%%  %s\n", p->before_s, p->after_s,
			    p->delta_s, 100 * p->share, p->path);
	}
}

void diff_text_paths(struct sink *out, const struct diff_report *d)
{
	const struct diff_attr *a = d->a;

	if (!a->ntop)
		return;
	sink_printf(out, "\nCall paths whose self CPU time changed most (CPU s%s)\n",
		    d->per ? " per region instance" : "");
	sink_printf(out, "%10s %10s %10s %10s %10s  %s\n", "self base", "self new", "delta",
		    "total base", "total new", "Call path");
	for (size_t i = 0; i < a->ntop; i++) {
		const struct diff_path *p = &a->top[i];

		sink_printf(out, "%10.3f %10.3f %+10.3f %10.3f %10.3f  %s\n", p->self_before_s,
			    p->self_after_s, p->self_after_s - p->self_before_s, p->before_s,
			    p->after_s, p->path);
	}
}

static void text_regions(struct sink *out, const struct diff_report *d)
{
	const struct diff_kinds *k = d->k;
	char c[24];

	if (!k->nregions)
		return;
	sink_printf(out, "\nRegions (wall ms per instance%s)\n",
		    d->per ? "; counts not normalised" : "");
	sink_printf(out, "%9s %9s %10s %10s %10s %10s %10s %10s %10s %10s %8s  %s\n", "count b",
		    "count n", "mean b", "mean n", "p50 b", "p50 n", "p99 b", "p99 n", "max b",
		    "max n", "p99", "Region");
	for (size_t i = 0; i < rows_of(d, k->nregions, 0); i++) {
		const struct diff_region *r = &k->regions[i];

		diff_fmt_pct(c, sizeof(c), r->p99_ns[0], r->p99_ns[1]);
		sink_printf(out,
			    "%9" PRIu64 " %9" PRIu64
			    " %10.3f %10.3f %10.3f %10.3f %10.3f %10.3f %10.3f %10.3f %8s  %*s%s\n",
			    r->count[0], r->count[1], r->mean_ns[0] / 1e6, r->mean_ns[1] / 1e6,
			    r->p50_ns[0] / 1e6, r->p50_ns[1] / 1e6, r->p99_ns[0] / 1e6,
			    r->p99_ns[1] / 1e6, r->max_ns[0] / 1e6, r->max_ns[1] / 1e6, c,
			    2 * (int)r->depth, "", r->name);
	}
}

static void text_line(struct sink *out, const char *what, const char *b, const char *n,
		      const char *delta, const char *pct)
{
	sink_printf(out, "  %-24s %14s %14s %14s %9s\n", what, b, n, delta, pct);
}

static void text_bytes_line(struct sink *out, const char *what, double b, double n)
{
	char x[3][32], p[24];

	fmt_bytes_kib(x[0], sizeof(x[0]), b, 1);
	fmt_bytes_kib(x[1], sizeof(x[1]), n, 1);
	fmt_bytes_kib(x[2] + 1, sizeof(x[2]) - 1, n - b, 1);
	x[2][0] = n >= b ? '+' : ' ';
	diff_fmt_pct(p, sizeof(p), b, n);
	text_line(out, what, x[0], x[1], x[2], p);
}

static void text_num_line(struct sink *out, const char *what, double b, double n, double div,
			  const char *fmt, const char *dfmt)
{
	char x[3][32], p[24];

	snprintf(x[0], sizeof(x[0]), fmt, b / div);
	snprintf(x[1], sizeof(x[1]), fmt, n / div);
	snprintf(x[2], sizeof(x[2]), dfmt, (n - b) / div);
	diff_fmt_pct(p, sizeof(p), b, n);
	text_line(out, what, x[0], x[1], x[2], p);
}

static void text_table(struct sink *out, const struct diff_report *d, const struct diff_table *t,
		       bool bytes, bool kinds, const char *unit)
{
	char x[3][32], p[24];

	sink_printf(out, "  %14s %14s %14s %9s  %s\n", unit, "", "delta", "", "");
	for (size_t i = 0; i < rows_of(d, t->n, STACK_ROWS); i++) {
		const struct diff_row *r = &t->v[i];

		if (bytes) {
			fmt_bytes_kib(x[0], sizeof(x[0]), r->v[0], 1);
			fmt_bytes_kib(x[1], sizeof(x[1]), r->v[1], 1);
			fmt_bytes_kib(x[2] + 1, sizeof(x[2]) - 1, r->v[1] - r->v[0], 1);
			x[2][0] = r->v[1] >= r->v[0] ? '+' : ' ';
		} else {
			snprintf(x[0], sizeof(x[0]), "%.3f", r->v[0] / 1e9);
			snprintf(x[1], sizeof(x[1]), "%.3f", r->v[1] / 1e9);
			snprintf(x[2], sizeof(x[2]), "%+.3f", (r->v[1] - r->v[0]) / 1e9);
		}
		diff_fmt_pct(p, sizeof(p), r->v[0], r->v[1]);
		sink_printf(out, "  %14s %14s %14s %9s  %s%s%s%s\n", x[0], x[1], x[2], p,
			    kinds ? "[" : "", kinds ? wait_kind_name(r->kind) : "",
			    kinds ? "] " : "", r->label);
	}
	if (rows_of(d, t->n, STACK_ROWS) < t->n)
		sink_printf(out, "  ... %zu more\n", t->n - rows_of(d, t->n, STACK_ROWS));
}

/* A kind recorded in one run only is not compared: says so, returns true. */
static bool one_side(struct sink *out, const char *what, const bool have[2], const char *how)
{
	if (have[0] == have[1])
		return !have[0];
	sink_printf(out, "\n%s: recorded in %s only, not compared (record both runs with %s)\n",
		    what, have[0] ? "base" : "new", how);
	return true;
}

static void text_memory(struct sink *out, const struct diff_report *d)
{
	const struct diff_kinds *k = d->k;

	if (one_side(out, "Memory", k->mem, "--mem"))
		return;
	sink_printf(out, "\nMemory (heap; allocated%s)\n",
		    d->per ? " per region instance" : " over the run");
	text_line(out, "", "base", "new", "delta", "");
	text_bytes_line(out, "peak heap", k->mem_peak[0], k->mem_peak[1]);
	text_bytes_line(out, "leaked (live at end)", k->mem_leaked[0], k->mem_leaked[1]);
	text_bytes_line(out, "allocated", k->mem_allocated[0], k->mem_allocated[1]);
	text_num_line(out, "allocations", k->mem_allocs[0], k->mem_allocs[1], 1, "%.6g", "%+.6g");
	if (k->rss_peak[0] || k->rss_peak[1])
		text_bytes_line(out, "peak RSS", k->rss_peak[0], k->rss_peak[1]);
	if (k->mem_stacks.n) {
		sink_printf(out, "\n  Allocated bytes by stack (leaf side)\n");
		text_table(out, d, &k->mem_stacks, true, false, "base");
	}
}

static void text_offcpu(struct sink *out, const struct diff_report *d)
{
	const struct diff_kinds *k = d->k;

	if (one_side(out, "Off-CPU", k->off, "--offcpu"))
		return;
	sink_printf(out, "\nOff-CPU (blocked wall seconds%s)\n",
		    d->per ? " per region instance" : "");
	text_line(out, "", "base", "new", "delta", "");
	text_num_line(out, "blocked, all kinds", k->off_ns[0], k->off_ns[1], 1e9, "%.3f", "%+.3f");
	for (int w = WAIT_RUNNABLE; w < WAIT_OFFCPU_MAX; w++)
		if (k->off_kind_ns[w][0] || k->off_kind_ns[w][1])
			text_num_line(out, wait_kind_name(w), k->off_kind_ns[w][0],
				      k->off_kind_ns[w][1], 1e9, "%.3f", "%+.3f");
	if (k->off_stacks.n) {
		sink_printf(out, "\n  Blocked seconds by stack (leaf side)\n");
		text_table(out, d, &k->off_stacks, false, true, "base s");
	}
}

static void text_gpu(struct sink *out, const struct diff_report *d)
{
	static const char *const dir[GPU_COPY_DIR_MAX] = {
	    "copies ?", "copies HtoD", "copies DtoH", "copies DtoD", "copies HtoH", "copies PtoP"};
	const struct diff_kinds *k = d->k;
	char name[48];

	if (one_side(out, "GPU", k->gpu, "CUDA tracing on"))
		return;
	sink_printf(out, "\nGPU\n");
	text_line(out, "", "base", "new", "delta", "");
	if (k->gpu_activity[0] || k->gpu_activity[1]) {
		text_num_line(out, "kernel time (s)", k->kernel_ns[0], k->kernel_ns[1], 1e9, "%.6f",
			      "%+.6f");
		text_num_line(out, "idle (% of the window)", k->idle_pct[0], k->idle_pct[1], 1,
			      "%.2f", "%+.2f pt");
	}
	text_num_line(out, "launches", k->launches[0], k->launches[1], 1, "%.0f", "%+.0f");
	for (int c = 0; c < GPU_COPY_DIR_MAX; c++) {
		if (!k->copy_count[c][0] && !k->copy_count[c][1])
			continue;
		snprintf(name, sizeof(name), "%s (count)", dir[c]);
		text_num_line(out, name, k->copy_count[c][0], k->copy_count[c][1], 1, "%.0f",
			      "%+.0f");
		snprintf(name, sizeof(name), "%s (bytes)", dir[c]);
		text_bytes_line(out, name, k->copy_bytes[c][0], k->copy_bytes[c][1]);
	}
	if (k->kernels.n) {
		sink_printf(out, "\n  %10s %10s %12s %12s %9s  %s\n", "runs b", "runs n",
			    "mean ms b", "mean ms n", "time", "Kernel");
		for (size_t i = 0; i < rows_of(d, k->kernels.n, STACK_ROWS); i++) {
			const struct diff_row *r = &k->kernels.v[i];
			char p[24];

			diff_fmt_pct(p, sizeof(p), r->v[0], r->v[1]);
			sink_printf(out, "  %10.0f %10.0f %12.4f %12.4f %9s  %s\n", r->n[0],
				    r->n[1], r->n[0] > 0 ? r->v[0] / r->n[0] / 1e6 : 0,
				    r->n[1] > 0 ? r->v[1] / r->n[1] / 1e6 : 0, p, r->key);
		}
	}
}

static void text_tasks(struct sink *out, const struct diff_report *d, const struct diff_table *t,
		       const char *title)
{
	if (t->n < 2 && !(t->n == 1 && (!t->v[0].present[0] || !t->v[0].present[1])))
		return; /* one thread in both: the totals above say it all */
	sink_printf(out, "\n%s (CPU s%s)\n", title, d->per ? " per region instance" : "");
	text_table(out, d, t, false, false, "base s");
}

void diff_text_kinds(struct sink *out, const struct diff_report *d)
{
	text_regions(out, d);
	text_memory(out, d);
	text_offcpu(out, d);
	text_gpu(out, d);
	text_tasks(out, d, &d->k->threads, "Threads by name");
	text_tasks(out, d, &d->k->procs, "Processes by name");
}

void diff_text_gates(struct sink *out, const struct diff_report *d)
{
	char b[32], n[32], ch[32];

	if (!d->ngates)
		return;
	sink_printf(out, "\nGates\n");
	for (size_t i = 0; i < d->ngates; i++) {
		const struct diff_gate *g = &d->gates[i];

		diff_gate_fmt(g, g->before, b, sizeof(b));
		diff_gate_fmt(g, g->after, n, sizeof(n));
		diff_gate_fmt_change(g, ch, sizeof(ch));
		sink_printf(out, "  %-4s  %-40s %s -> %s (%s)", g->failed ? "FAIL" : "ok", g->expr,
			    b, n, ch);
		if (g->sampled)
			sink_printf(out, ", z = %.1f", g->z);
		sink_printf(out, "\n");
	}
}

/* --- JSON ------------------------------------------------------------------------------------- */

static void json_fin(struct json *j, const char *key, double v, int dec)
{
	if (isfinite(v))
		json_kv_f(j, key, v, dec);
	else
		json_kv_null(j, key);
}

static void json_path(struct json *j, const struct diff_path *p, bool share)
{
	json_obj_open(j, 4, NULL);
	json_kv_str(j, "path", p->path);
	json_kv_str(j, "leaf", p->leaf);
	json_kv_f(j, "before_s", p->before_s, 6);
	json_kv_f(j, "after_s", p->after_s, 6);
	json_kv_f(j, "delta_s", p->delta_s, 6);
	json_kv_f(j, "self_before_s", p->self_before_s, 6);
	json_kv_f(j, "self_after_s", p->self_after_s, 6);
	if (share)
		json_kv_f(j, "share", p->share, 4);
	json_obj_end(j);
}

void diff_json_attribution(struct json *j, const struct diff_report *d)
{
	json_obj_open(j, 2, "attribution");
	json_kv_f(j, "growth_s", d->a->growth_s, 6);
	json_kv_f(j, "explained", d->a->explained, 4);
	json_arr_open(j, 4, "paths");
	for (size_t i = 0; i < d->a->n; i++)
		json_path(j, &d->a->paths[i], true);
	json_arr_close(j, d->a->n ? 2 : -1);
	json_obj_end(j);
}

void diff_json_paths(struct json *j, const struct diff_report *d)
{
	json_arr_open(j, 2, "paths");
	for (size_t i = 0; i < d->a->ntop; i++)
		json_path(j, &d->a->top[i], false);
	json_arr_close(j, d->a->ntop ? 2 : -1);
}

static void json_pair(struct json *j, const char *key, double b, double n, int dec)
{
	json_obj_open(j, -1, key);
	json_fin(j, "base", b, dec);
	json_fin(j, "new", n, dec);
	json_obj_end(j);
}

static void json_regions(struct json *j, const struct diff_report *d)
{
	const struct diff_kinds *k = d->k;

	json_arr_open(j, 2, "regions");
	for (size_t i = 0; i < k->nregions; i++) {
		const struct diff_region *r = &k->regions[i];

		json_obj_open(j, 4, NULL);
		json_kv_str(j, "path", r->path);
		json_kv_str(j, "name", r->name);
		json_kv_u64(j, "depth", r->depth);
		json_pair(j, "count", (double)r->count[0], (double)r->count[1], 0);
		json_pair(j, "mean_ns", r->mean_ns[0], r->mean_ns[1], 0);
		json_pair(j, "p50_ns", r->p50_ns[0], r->p50_ns[1], 0);
		json_pair(j, "p99_ns", r->p99_ns[0], r->p99_ns[1], 0);
		json_pair(j, "max_ns", r->max_ns[0], r->max_ns[1], 0);
		json_pair(j, "total_ns", r->total_ns[0], r->total_ns[1], 0);
		json_obj_end(j);
	}
	json_arr_close(j, k->nregions ? 2 : -1);
}

static void json_rows(struct json *j, const char *key, const struct diff_table *t, const char *v,
		      const char *n, bool kinds, size_t max, int indent)
{
	size_t rows = max && max < t->n ? max : t->n;

	json_arr_open(j, indent, key);
	for (size_t i = 0; i < rows; i++) {
		const struct diff_row *r = &t->v[i];

		json_obj_open(j, indent + 2, NULL);
		json_kv_str(j, "key", r->key);
		if (kinds)
			json_kv_str(j, "kind", wait_kind_name(r->kind));
		json_pair(j, v, r->v[0], r->v[1], 0);
		json_pair(j, n, r->n[0], r->n[1], 3);
		json_obj_end(j);
	}
	json_arr_close(j, rows ? indent : -1);
}

static void json_memory(struct json *j, const struct diff_report *d)
{
	const struct diff_kinds *k = d->k;

	if (!k->mem[0] || !k->mem[1]) { /* compared only when both runs have it */
		json_kv_null(j, "memory");
		return;
	}
	json_obj_open(j, 2, "memory");
	json_pair(j, "peak_bytes", (double)k->mem_peak[0], (double)k->mem_peak[1], 0);
	json_pair(j, "leaked_bytes", (double)k->mem_leaked[0], (double)k->mem_leaked[1], 0);
	json_pair(j, "leaks", k->mem_leaks[0], k->mem_leaks[1], 1);
	json_pair(j, "allocated_bytes", k->mem_allocated[0], k->mem_allocated[1], 0);
	json_pair(j, "allocations", k->mem_allocs[0], k->mem_allocs[1], 1);
	json_pair(j, "rss_peak_bytes", (double)k->rss_peak[0], (double)k->rss_peak[1], 0);
	json_rows(j, "by_stack", &k->mem_stacks, "bytes", "calls", false, d->limit, 4);
	json_obj_end(j);
}

static void json_offcpu(struct json *j, const struct diff_report *d)
{
	const struct diff_kinds *k = d->k;

	if (!k->off[0] || !k->off[1]) {
		json_kv_null(j, "offcpu");
		return;
	}
	json_obj_open(j, 2, "offcpu");
	json_pair(j, "total_ns", k->off_ns[0], k->off_ns[1], 0);
	json_obj_open(j, 4, "by_kind_ns");
	for (int w = WAIT_RUNNABLE; w < WAIT_OFFCPU_MAX; w++)
		json_pair(j, wait_kind_name(w), k->off_kind_ns[w][0], k->off_kind_ns[w][1], 0);
	json_obj_end(j);
	json_rows(j, "by_stack", &k->off_stacks, "ns", "intervals", true, d->limit, 4);
	json_obj_end(j);
}

static void json_gpu(struct json *j, const struct diff_report *d)
{
	static const char *const dir[GPU_COPY_DIR_MAX] = {"unknown", "htod", "dtoh",
							  "dtod",    "htoh", "ptop"};
	const struct diff_kinds *k = d->k;

	if (!k->gpu[0] || !k->gpu[1]) {
		json_kv_null(j, "gpu");
		return;
	}
	json_obj_open(j, 2, "gpu");
	json_pair(j, "kernel_ns", k->kernel_ns[0], k->kernel_ns[1], 0);
	if (k->gpu_activity[0] || k->gpu_activity[1])
		json_pair(j, "idle_pct", k->idle_pct[0], k->idle_pct[1], 3);
	else
		json_kv_null(j, "idle_pct");
	json_pair(j, "launches", k->launches[0], k->launches[1], 1);
	json_obj_open(j, 4, "copies");
	for (int c = 0; c < GPU_COPY_DIR_MAX; c++) {
		if (!k->copy_count[c][0] && !k->copy_count[c][1])
			continue;
		json_obj_open(j, 6, dir[c]);
		json_pair(j, "count", k->copy_count[c][0], k->copy_count[c][1], 1);
		json_pair(j, "bytes", k->copy_bytes[c][0], k->copy_bytes[c][1], 0);
		json_pair(j, "ns", k->copy_ns[c][0], k->copy_ns[c][1], 0);
		json_obj_end(j);
	}
	json_obj_end(j);
	json_rows(j, "kernels", &k->kernels, "ns", "count", false, 0, 4);
	json_obj_end(j);
}

void diff_json_kinds(struct json *j, const struct diff_report *d)
{
	json_regions(j, d);
	json_memory(j, d);
	json_offcpu(j, d);
	json_gpu(j, d);
	json_rows(j, "threads", &d->k->threads, "cpu_ns", "samples", false, d->limit, 2);
	json_rows(j, "processes", &d->k->procs, "cpu_ns", "samples", false, d->limit, 2);
}

void diff_json_gates(struct json *j, const struct diff_report *d)
{
	static const char *const units[] = {"ns", "bytes", "count", "pct"};
	static const char *const thr[] = {"pct", "pt", "abs"};

	json_arr_open(j, 2, "gates");
	for (size_t i = 0; i < d->ngates; i++) {
		const struct diff_gate *g = &d->gates[i];

		json_obj_open(j, 4, NULL);
		json_kv_str(j, "expr", g->expr);
		json_kv_bool(j, "failed", g->failed);
		json_kv_str(j, "unit", units[g->unit]);
		json_kv_f(j, "before", g->before, 3);
		json_kv_f(j, "after", g->after, 3);
		json_kv_str(j, "threshold_kind", thr[g->thr]);
		json_kv_f(j, "threshold", g->threshold, 3);
		json_fin(j, "change", g->change, 4);
		if (g->sampled)
			json_kv_f(j, "z", g->z, 3);
		json_obj_end(j);
	}
	json_arr_close(j, d->ngates ? 2 : -1);
}
