// SPDX-License-Identifier: MIT
/*
 * The Python section of `eprof report`: how often each Python thread held the GIL, and time,
 * memory, waits, I/O and GPU work by Python line.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "analysis/pygil.h"
#include "analysis/pylines.h"
#include "analysis/stacks.h"
#include "util/json.h"
#include "util/sink.h"
#include "report_python.h"
#include "units.h"

static const char *thread_name(const struct profile *p, uint32_t pid, uint32_t tid)
{
	const struct thread *t = profile__find_thread(p, pid, tid);

	return t ? profile__str(p, t->comm) : "";
}

static double share(uint64_t a, uint64_t b)
{
	return b ? 100.0 * a / b : 0.0;
}

int report_python_text(struct sink *out, const struct profile *p, const struct sample_filter *f)
{
	struct py_gil_thread *t;
	size_t n;
	int err = py_gil_stats(p, f, &t, &n);

	if (err || !n)
		return err;
	sink_printf(out, "\n%8s %8s  %-16s %9s %9s\n", "PID", "TID", "Python thread", "Samples",
		    "GIL held");
	for (size_t i = 0; i < n; i++)
		sink_printf(out, "%8u %8u  %-16s %9" PRIu64 " %8.1f%%\n", t[i].pid, t[i].tid,
			    thread_name(p, t[i].pid, t[i].tid), t[i].samples,
			    share(t[i].held, t[i].samples));
	sink_puts(out, "# GIL held: share of the thread's samples taken while it held the GIL "
		       "(samples without a readable GIL not counted)\n");
	free(t);
	return 0;
}

int report_python_json(struct sink *out, const struct profile *p, const struct sample_filter *f)
{
	struct py_gil_thread *t;
	struct json j;
	size_t n;
	int err = py_gil_stats(p, f, &t, &n);

	if (err)
		return err;
	json_init_members(&j, out, 0);
	json_arr_open(&j, 2, "python_gil");
	for (size_t i = 0; i < n; i++) {
		json_obj_open(&j, 4, NULL);
		json_kv_u64(&j, "pid", t[i].pid);
		json_kv_u64(&j, "tid", t[i].tid);
		json_kv_str(&j, "comm", thread_name(p, t[i].pid, t[i].tid));
		json_kv_u64(&j, "samples", t[i].samples);
		json_kv_u64(&j, "gil_held", t[i].held);
		json_kv_f(&j, "gil_held_pct", share(t[i].held, t[i].samples), 2);
		json_obj_end(&j);
	}
	json_arr_close(&j, n ? 2 : -1); /* [] when empty */
	free(t);
	return json_flush(&j);
}

static const char *const table_titles[PYT_N] = {
	"CPU time", "memory allocated", "memory live at the peak", "memory not freed by the end",
	"blocked time (off-CPU)", "I/O bytes", "GPU time of the work launched",
};

static bool table_in_bytes(enum py_table t)
{
	return t == PYT_MEMORY || t == PYT_MEM_PEAK || t == PYT_MEM_LEAKED || t == PYT_IO;
}

/* "qualname (file.py:LINE)", as the stacks name the frame. */
static const char *line_name(const struct profile *p, const struct py_line *r, char *buf,
			     size_t len)
{
	struct frame f = { .name = r->function, .file = r->file, .line = r->line,
			   .kind = FRAME_PYTHON };

	return frame_display_name(p, &f, buf, len);
}

/* The row's "via": the library's Python frame below the line that holds most of it, or NULL. */
static const char *via_name(const struct profile *p, const struct py_line *r, char *buf,
			    size_t len)
{
	return r->via ? frame_display_name(p, &p->frames.v[r->via - 1], buf, len) : NULL;
}

/* One table: its title in the header's line, so that five tables cost one line less each. */
static void text_table(struct sink *out, const struct profile *p, const struct py_lines *l,
		       enum py_table t, unsigned limit)
{
	char v[32], name[512], via[512], title[128];

	snprintf(title, sizeof(title), "Python lines: %s", table_titles[t]);
	sink_printf(out, "\n%8s %11s  %-50s %s\n", "Share%", table_in_bytes(t) ? "Bytes" : "Time",
		    title, t == PYT_OFFCPU ? "Wait (most)" : "Leaf (most)");
	for (size_t i = 0; i < l->n[t] && (!limit || i < limit); i++) {
		const struct py_line *r = &l->v[t][i];

		if (table_in_bytes(t))
			fmt_bytes(v, sizeof(v), r->value);
		else
			fmt_ns(v, sizeof(v), r->value);
		const char *through = via_name(p, r, via, sizeof(via));

		sink_printf(out, "%8.2f %11s  %-50s %s%s%s\n", r->share, v,
			    line_name(p, r, name, sizeof(name)), py_line_leaf(p, t, r),
			    through ? (*py_line_leaf(p, t, r) ? ", via " : "via ") : "",
			    through ? through : "");
	}
	if (limit && l->n[t] > limit)
		sink_printf(out, "... %zu more lines (--limit 0 shows all)\n", l->n[t] - limit);
}

void report_py_lines_write(struct sink *out, const struct profile *p, const struct py_lines *l,
			   unsigned limit)
{
	bool any = false;

	/* Seven tables after the function table: a few lines each keep the report short. */
	limit = limit && limit < 5 ? limit : 5;
	for (int t = 0; t < PYT_N; t++)
		if (l->n[t]) {
			text_table(out, p, l, t, limit);
			any = true;
		}
	if (any)
		sink_puts(out, "# Python lines: each stack counts for its innermost line of the "
			       "program's own code (else its innermost Python line)\n");
}

int report_py_lines_text(struct sink *out, const struct profile *p, const struct sample_filter *f,
			 const struct mem_result *mem, unsigned limit)
{
	struct py_lines l;
	int err = py_lines_analyze(p, f, mem, &l);

	if (err)
		return err;
	report_py_lines_write(out, p, &l, limit);
	py_lines__free(&l);
	return 0;
}

int report_py_lines_json(struct sink *out, const struct profile *p, const struct sample_filter *f,
			 const struct mem_result *mem)
{
	struct py_lines l;
	struct json j;
	char name[512];
	int err = py_lines_analyze(p, f, mem, &l);

	if (err)
		return err;
	json_init_members(&j, out, 0);
	json_obj_open(&j, 2, "python_lines");
	for (int t = 0; t < PYT_N; t++) {
		json_arr_open(&j, 4, py_table_name(t));
		for (size_t i = 0; i < l.n[t]; i++) {
			const struct py_line *r = &l.v[t][i];

			json_obj_open(&j, 6, NULL);
			json_kv_str(&j, "function", profile__str(p, r->function));
			json_kv_str(&j, "file", profile__str(p, r->file));
			json_kv_u64(&j, "line", r->line);
			json_kv_u64(&j, "value", r->value);
			json_kv_f(&j, "share", r->share, 2);
			json_kv_str(&j, "leaf", py_line_leaf(p, t, r));
			if (r->via)
				json_kv_str(&j, "via", via_name(p, r, name, sizeof(name)));
			else
				json_kv_null(&j, "via");
			json_obj_end(&j);
		}
		json_arr_close(&j, l.n[t] ? 4 : -1);
	}
	json_obj_close(&j, 2);
	py_lines__free(&l);
	return json_flush(&j);
}
