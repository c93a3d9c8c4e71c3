// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/gpu.h"
#include "top_gpu.h"
#include "top_model.h"

int top_gpu__init(struct top_gpu *g)
{
	memset(g, 0, sizeof(*g));
	g->idx = hmap__new(64);
	return g->idx ? 0 : -ENOMEM;
}

void top_gpu__free(struct top_gpu *g)
{
	free(g->rows.v);
	hmap__free(g->idx);
	memset(g, 0, sizeof(*g));
}

static struct top_gpu_row *row(struct top_gpu *g, uint8_t kind, uint32_t name)
{
	struct top_gpu_row *r;
	uint64_t i;

	if (hmap__get(g->idx, kind, name, &i))
		return &g->rows.v[i];
	r = vec_push(g->rows);
	if (!r || hmap__put(g->idx, kind, name, g->rows.n - 1))
		return NULL;
	r->kind = kind;
	r->name = name;
	return r;
}

int top_gpu__update(struct top_gpu *g, struct profile *p, double dt)
{
	for (size_t i = 0; i < g->rows.n; i++) {
		g->rows.v[i].last = g->rows.v[i].last_ns = g->rows.v[i].last_err = 0;
		g->rows.v[i].last_nodur = 0;
	}
	g->last_launches = g->last_sync_ns = g->last_gpu_ns = 0;
	for (size_t i = 0; i < p->events.n; i++) {
		const struct event *e = &p->events.v[i];
		unsigned cat = CUDA_API_CAT(e->flags);
		struct top_gpu_row *r;

		if (e->kind == EVK_GPU_KERNEL) {
			if (!(r = row(g, TOP_GPU_TIME, e->name)))
				return -ENOMEM;
			r->last++;
			r->last_ns += e->dur;
			g->last_gpu_ns += e->dur;
			g->have_gpu = true;
			continue;
		}
		if (e->kind != EVK_CUDA_API)
			continue;
		if (!(r = row(g, TOP_GPU_API, e->name)))
			return -ENOMEM;
		r->last++;
		r->last_ns += e->dur;
		r->last_err += !!(e->flags & CUDA_API_F_FAILED);
		r->last_nodur += !!(e->flags & CUDA_API_F_NODUR);
		if (e->flags & CUDA_API_F_NESTED)
			continue; /* counted as a call, not as a second launch or sync */
		if (cat == CUDA_CAT_SYNC)
			g->last_sync_ns += e->dur;
		if (cat != CUDA_CAT_LAUNCH)
			continue;
		g->last_launches++;
		if (!(r = row(g, TOP_GPU_KERNEL, gpu_launch_kernel_name(p, e))))
			return -ENOMEM;
		r->last++;
	}
	p->events.n = 0;
	for (size_t i = 0; i < g->rows.n; i++) {
		struct top_gpu_row *r = &g->rows.v[i];

		r->total += r->last;
		r->rate = r->rate * TOP_DECAY + (dt > 0 ? r->last / dt : 0) * (1 - TOP_DECAY);
		if (g->last_dt == 0 && dt > 0)
			r->rate = r->last / dt; /* the first interval: nothing to decay from */
	}
	g->last_dt = dt;
	return 0;
}

static int cmp_row(const void *a, const void *b)
{
	const struct top_gpu_row *x = *(const struct top_gpu_row *const *)a,
				 *y = *(const struct top_gpu_row *const *)b;

	if (x->kind == TOP_GPU_TIME && x->last_ns != y->last_ns)
		return x->last_ns < y->last_ns ? 1 : -1;
	if (x->last != y->last)
		return x->last < y->last ? 1 : -1;
	if (x->rate != y->rate)
		return x->rate < y->rate ? 1 : -1;
	return x->name < y->name ? -1 : x->name > y->name;
}

static void cell(struct sink *out, const char *s, int width)
{
	sink_printf(out, "%.*s\n", width > 0 ? width : 1, s);
}

static int table(struct sink *out, const struct top_gpu *g, const struct profile *p, uint8_t kind,
		 int width, int max_rows)
{
	const struct top_gpu_row **v = malloc((g->rows.n + 1) * sizeof(*v));
	double dt = g->last_dt > 0 ? g->last_dt : 1;
	size_t n = 0;

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < g->rows.n; i++)
		if (g->rows.v[i].kind == kind && (g->rows.v[i].last || g->rows.v[i].rate >= 0.05))
			v[n++] = &g->rows.v[i];
	qsort(v, n, sizeof(*v), cmp_row);
	if (kind == TOP_GPU_TIME)
		sink_printf(out, "%10s %10s %10s %10s  %s\n", "GPU%", "Mean us", "Last", "Total",
			    "GPU kernel time (CUPTI)");
	else if (kind == TOP_GPU_KERNEL)
		sink_printf(out, "%10s %10s %10s %10s  %s\n", "Launch/s", "Last", "Avg/s", "Total",
			    "Kernel");
	else
		sink_printf(out, "%10s %10s %10s %10s  %s\n", "Calls/s", "Time%", "Fails", "Total",
			    "CUDA function");
	for (size_t i = 0; i < n && (int)i < max_rows; i++) {
		const struct top_gpu_row *r = v[i];
		const char *name = r->name ? profile__str(p, r->name) : "[unknown kernel]";

		if (kind == TOP_GPU_TIME)
			sink_printf(out, "%9.1f%% %10.1f %10llu %10llu  ",
				    100.0 * r->last_ns / (dt * 1e9),
				    r->last ? r->last_ns / 1e3 / r->last : 0.0,
				    (unsigned long long)r->last, (unsigned long long)r->total);
		else if (kind == TOP_GPU_KERNEL)
			sink_printf(out, "%10.1f %10llu %10.1f %10llu  ", r->last / dt,
				    (unsigned long long)r->last, r->rate,
				    (unsigned long long)r->total);
		else if (r->last && r->last_nodur == r->last) /* seen at entry: no time or result */
			sink_printf(out, "%10.1f %10s %10s %10llu  ", r->last / dt, "-", "-",
				    (unsigned long long)r->total);
		else
			sink_printf(out, "%10.1f %9.1f%% %10llu %10llu  ", r->last / dt,
				    100.0 * r->last_ns / (dt * 1e9),
				    (unsigned long long)r->last_err, (unsigned long long)r->total);
		cell(out, name, width - 46);
	}
	if (!n)
		sink_puts(out, kind == TOP_GPU_KERNEL ? "  (no launches yet)\n"
			       : kind == TOP_GPU_TIME ? "  (no kernel ran in the interval)\n"
						      : "  (no CUDA calls yet)\n");
	free(v);
	return 0;
}

int top_gpu__render(struct sink *out, const struct top_gpu *g, const struct profile *p, int width,
		    int max_rows)
{
	double dt = g->last_dt > 0 ? g->last_dt : 1;
	int parts = g->have_gpu ? 3 : 2, half = max_rows > 8 ? (max_rows - 5) / parts : 2, err = 0;

	sink_printf(out,
		    "CUDA (uprobes): %.1f launches/s, %.1f%% of the interval in synchronization "
		    "calls\n",
		    g->last_launches / dt, 100.0 * g->last_sync_ns / (dt * 1e9));
	if (g->have_gpu) {
		sink_printf(out, "GPU (CUPTI): kernels ran %.1f%% of the interval (summed over "
				 "streams)\n\n",
			    100.0 * g->last_gpu_ns / (dt * 1e9));
		err = table(out, g, p, TOP_GPU_TIME, width, half);
		sink_puts(out, "\n");
	} else {
		sink_puts(out, "\n");
	}
	if (!err)
		err = table(out, g, p, TOP_GPU_KERNEL, width, half);
	if (!err) {
		sink_puts(out, "\n");
		err = table(out, g, p, TOP_GPU_API, width, half);
	}
	return err ? err : out->err;
}
