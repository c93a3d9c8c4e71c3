// SPDX-License-Identifier: MIT
/* Callers/callees of a function, and the text of eprof top's screen (batch and curses). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/procs.h"
#include "analysis/pygil.h"
#include "top_gpu.h"
#include "top_metrics.h"
#include "top_model.h"

#define MAX_DEPTH 512

/* Non-inlined frames of a stack, leaf first. */
static size_t stack_frames(const struct profile *p, uint32_t node, const struct frame **out)
{
	size_t n = 0;

	for (; node && n < MAX_DEPTH; node = p->stacks.v[node].parent) {
		uint32_t nf;
		const struct frame *fr = profile__loc_frames(p, p->stacks.v[node].loc, &nf);

		if (!p->stacks.v[node].parent && py_gil_marker(p, p->stacks.v[node].loc))
			break; /* the GIL mark of a Python sample: no caller */
		for (uint32_t k = 0; k < nf && n < MAX_DEPTH; k++)
			if (!fr[k].inlined)
				out[n++] = &fr[k];
	}
	return n;
}

static int add_edge(struct top_edge **v, size_t *n, const struct frame *f, double w)
{
	uint32_t name = f ? f->name : 0, module = f ? f->module : 0;
	struct top_edge *nv;

	for (size_t i = 0; i < *n; i++) {
		if ((*v)[i].name == name && (*v)[i].module == module) {
			(*v)[i].w += w;
			return 0;
		}
	}
	nv = realloc(*v, (*n + 1) * sizeof(**v));
	if (!nv)
		return -ENOMEM;
	*v = nv;
	nv[(*n)++] = (struct top_edge){ .name = name, .module = module, .w = w };
	return 0;
}

static int cmp_edge(const void *a, const void *b)
{
	const struct top_edge *x = a, *y = b;

	return x->w < y->w ? 1 : x->w > y->w ? -1 : 0;
}

int top_model__calls(const struct top_model *m, const struct profile *p, uint32_t fi,
		     struct top_edge **callers, size_t *ncallers, struct top_edge **callees,
		     size_t *ncallees)
{
	const struct frame **fr = malloc(MAX_DEPTH * sizeof(*fr));
	const struct top_func *tf = &m->funcs.v[fi];
	int err = fr ? 0 : -ENOMEM;

	*callers = *callees = NULL;
	*ncallers = *ncallees = 0;
	for (size_t node = 1; !err && node < m->node_n; node++) {
		size_t n, i;

		if (m->node_w[node] <= 0)
			continue;
		n = stack_frames(p, node, fr);
		/* The innermost call of the function: recursion is counted once. */
		for (i = 0; i < n; i++)
			if (fr[i]->name == tf->name && fr[i]->module == tf->module)
				break;
		if (i == n)
			continue;
		err = add_edge(callers, ncallers, i + 1 < n ? fr[i + 1] : NULL, m->node_w[node]);
		if (!err)
			err = add_edge(callees, ncallees, i ? fr[i - 1] : NULL, m->node_w[node]);
	}
	free(fr);
	if (err) {
		free(*callers);
		free(*callees);
		*callers = *callees = NULL;
		return err;
	}
	qsort(*callers, *ncallers, sizeof(**callers), cmp_edge);
	qsort(*callees, *ncallees, sizeof(**callees), cmp_edge);
	return 0;
}

static double pct(double part, double whole)
{
	return whole > 0 ? 100.0 * part / whole : 0;
}

static int header_cpu(struct sink *out, const struct top_model *m, const struct profile *p,
		      const struct top_header *h)
{
	double per_core = h->freq * (m->last_dt > 0 ? m->last_dt : 1);
	size_t shown = 0;

	/* procs are sorted busiest first by top_model__update(). */
	sink_puts(out, "CPU:");
	for (size_t i = 0; i < m->procs.n && shown < 5; i++, shown++) {
		const struct top_proc *pr = &m->procs.v[i];
		const struct process *proc = profile__find_proc(p, pr->pid);
		char name[32];

		/* "python3 train.py": the workers of a job share comm, not always argv */
		proc_command_short(proc && proc->cmdline ? profile__str(p, proc->cmdline) : "", name,
				   sizeof(name));
		if (!*name)
			snprintf(name, sizeof(name), "%s", proc ? profile__str(p, proc->comm) : "?");
		sink_printf(out, "  %s[%u] %.2f cores", name, pr->pid, pr->last / per_core);
	}
	if (!m->procs.n)
		sink_puts(out, "  (no samples)");
	if (m->procs.n > shown)
		sink_printf(out, "  +%zu more", m->procs.n - shown);
	return sink_puts(out, "\n");
}

static int render_header(struct sink *out, const struct top_model *m, const struct profile *p,
			 const struct top_header *h, const struct top_view *v)
{
	double rate = m->last_dt > 0 ? m->last_samples / m->last_dt : 0;

	sink_printf(out, "eprof top - %s  up %.1f s  %d CPUs  %u Hz%s\n", h->targets, h->uptime_s,
		    h->ncpus, h->freq, h->paused ? "  [paused]" : "");
	sink_printf(out, "samples: %.0f/s  lost: %" PRIu64 "  sort: %s%s%s%s\n", rate, h->lost,
		    top_sort_name(v->sort), v->filter && *v->filter ? "  filter: " : "",
		    v->filter ? v->filter : "", v->threads ? "  [threads]" : "");
	header_cpu(out, m, p, h);
	if (h->res)
		top_metrics__render(out, h->res);
	return sink_puts(out, "\n");
}

static void put_cell(struct sink *out, const char *s, int w)
{
	int len = strlen(s);

	if (len > w && w > 1) {
		sink_write(out, s, w - 1);
		sink_puts(out, "+");
	} else {
		sink_printf(out, "%-*s", w, s);
	}
}

static int render_funcs(struct sink *out, const struct top_model *m, const struct profile *p,
			const struct top_view *v, int width, int max_rows)
{
	uint32_t *rows = malloc((m->funcs.n + 1) * sizeof(*rows));
	int fw = width - 34 - 20 - 1;
	size_t n;

	if (!rows)
		return -ENOMEM;
	if (fw > 60)
		fw = 60;
	if (fw < 20)
		fw = 20;
	n = top_model__rows(m, p, v, rows, m->funcs.n);
	sink_printf(out, "  Self%%  Total%%   Last%%  Samples  %-*s Module\n", fw, "Function");
	for (size_t i = 0; i < n && (int)i < max_rows; i++) {
		const struct top_func *f = &m->funcs.v[rows[i]];

		sink_printf(out, "%7.2f %7.2f %7.2f %8" PRIu64 "  ", pct(f->self, m->total_w),
			    pct(f->total, m->total_w), pct(f->last_self, m->last_samples),
			    f->last_self);
		put_cell(out, profile__str(p, f->name), fw);
		sink_puts(out, " ");
		sink_printf(out, "%s\n", profile__str(p, f->module));
	}
	free(rows);
	return out->err;
}

/* The processes of the last interval with their command lines, busiest first; rows used. */
static int render_procs(struct sink *out, const struct top_model *m, const struct profile *p,
			double per_core, int width, int max_rows)
{
	int shown = 0, cw = width - 36 > 20 ? width - 36 : 20;

	sink_puts(out, "     PID     PPID    CPU%  Command\n");
	for (size_t i = 0; i < m->procs.n && shown < max_rows; i++, shown++) {
		const struct top_proc *tp = &m->procs.v[i];
		const struct process *pr = profile__find_proc(p, tp->pid);
		struct proc_stat ps = { .pid = tp->pid };
		const char *cmd;
		char buf[64];

		if (pr) {
			ps.ppid = pr->ppid;
			ps.comm = pr->comm;
			ps.cmdline = pr->cmdline;
		}
		sink_printf(out, "%8u %8u  %6.1f  ", tp->pid, ps.ppid, pct(tp->last, per_core));
		cmd = proc_command(p, &ps, buf, sizeof(buf));
		/* the last column: cut, not padded */
		if ((int)strlen(cmd) > cw)
			sink_printf(out, "%.*s+\n", cw - 1, cmd);
		else
			sink_printf(out, "%s\n", cmd);
	}
	return shown + 1;
}

static int render_threads(struct sink *out, const struct top_model *m, const struct profile *p,
			  const struct top_header *h, int width, int max_rows)
{
	double per_core = h->freq * (m->last_dt > 0 ? m->last_dt : 1);
	int shown = 0;

	/* a few process rows (with the command lines), then the threads */
	if (m->procs.n && max_rows > 8) {
		int pr = (int)m->procs.n < max_rows / 3 ? (int)m->procs.n : max_rows / 3;

		max_rows -= render_procs(out, m, p, per_core, width, pr) + 1;
		sink_puts(out, "\n");
	}
	sink_puts(out, "     PID      TID  Thread            CPU%   Decayed%  Samples\n");
	for (size_t i = 0; i < m->threads.n && shown < max_rows; i++) {
		const struct top_thread *t = &m->threads.v[i];
		const struct thread *th = profile__find_thread(p, t->pid, t->tid);

		if (t->samples < 0.05)
			continue;
		sink_printf(out, "%8u %8u  %-16.16s %6.1f %9.2f %8" PRIu64 "\n", t->pid, t->tid,
			    th ? profile__str(p, th->comm) : "?", pct(t->last, per_core),
			    pct(t->samples, m->total_w), t->last);
		shown++;
	}
	return out->err;
}

int top_render(struct sink *out, const struct top_model *m, const struct profile *p,
	       const struct top_header *h, const struct top_view *v, int width, int max_rows)
{
	int err;

	render_header(out, m, p, h, v);
	if (v->gpu)
		err = top_gpu__render(out, v->gpu, p, width, max_rows);
	else if (v->threads)
		err = render_threads(out, m, p, h, width, max_rows);
	else
		err = render_funcs(out, m, p, v, width, max_rows);
	/* header lines before the table's title */
	return err ? err : 4 + (h->res && h->res->seen);
}

static void render_edges(struct sink *out, const struct profile *p, const struct top_edge *e,
			 size_t n, double whole, const char *none, int width, int max_rows)
{
	for (size_t i = 0; i < n && (int)i < max_rows; i++) {
		sink_printf(out, "  %7.2f%%  ", pct(e[i].w, whole));
		put_cell(out, e[i].name ? profile__str(p, e[i].name) : none, width - 34);
		sink_printf(out, " %s\n", e[i].name ? profile__str(p, e[i].module) : "");
	}
}

int top_render_calls(struct sink *out, const struct top_model *m, const struct profile *p,
		     uint32_t fi, int width, int max_rows)
{
	const struct top_func *f = &m->funcs.v[fi];
	struct top_edge *up, *down;
	size_t nup, ndown;
	int err, half = max_rows > 8 ? (max_rows - 6) / 2 : 2;

	err = top_model__calls(m, p, fi, &up, &nup, &down, &ndown);
	if (err)
		return err;
	sink_printf(out, "%s (%s): self %.2f%%  total %.2f%%\n\n", profile__str(p, f->name),
		    profile__str(p, f->module), pct(f->self, m->total_w),
		    pct(f->total, m->total_w));
	sink_puts(out, "Callers (share of this function's total):\n");
	render_edges(out, p, up, nup, f->total, "[root]", width, half);
	sink_puts(out, "\nCallees:\n");
	render_edges(out, p, down, ndown, f->total, "[self]", width, half);
	free(up);
	free(down);
	return out->err;
}
