// SPDX-License-Identifier: MIT
/*
 * The HTML export's resource section (docs/metrics.md): the report's metric lines and
 * time-series charts as inline SVG (no script, no network): CPU, RSS, I/O, network, faults,
 * the busiest threads' CPU, and per GPU its utilisation and power.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/metrics.h"
#include "util/sink.h"
#include "html.h"
#include "report_metrics.h"

#define CHART_W 720
#define CHART_H 150
#define PAD_L 60
#define PAD_B 20
#define MAX_BINS 600
#define MAX_SERIES 4

static const char *const colours[MAX_SERIES] = {"#1565c0", "#c62828", "#2e7d32", "#ef6c00"};

struct chart {
	const char *title, *unit;
	const char *label[MAX_SERIES];
	double *v[MAX_SERIES]; /* nbins values each */
	size_t nseries;
};

/* The top of the y axis in a few characters (the unit is in the caption): 620k, 0.176, 1.01. */
static void axis_label(char *buf, size_t len, double v)
{
	if (v >= 1e9)
		snprintf(buf, len, "%.3gG", v / 1e9);
	else if (v >= 1e6)
		snprintf(buf, len, "%.3gM", v / 1e6);
	else if (v >= 1e4)
		snprintf(buf, len, "%.3gk", v / 1e3);
	else
		snprintf(buf, len, "%.3g", v);
}

static void chart_svg(struct sink *out, const struct chart *c, size_t nbins, double secs)
{
	char top[32];
	double max = 0;
	int pw = CHART_W - PAD_L - 10, ph = CHART_H - PAD_B - 10;

	for (size_t s = 0; s < c->nseries; s++)
		for (size_t b = 0; b < nbins; b++)
			max = c->v[s][b] > max ? c->v[s][b] : max;
	sink_puts(out, "<figure class=\"chart\"><figcaption>");
	sink_xml_str(out, c->title);
	sink_puts(out, " (");
	sink_xml_str(out, c->unit);
	sink_puts(out, ")");
	for (size_t s = 0; s < c->nseries; s++) {
		/* labels carry thread names: the target's to choose */
		sink_printf(out, " <span style=\"color:%s\">&#9632; ", colours[s]);
		sink_xml_str(out, c->label[s]);
		sink_puts(out, "</span>");
	}
	sink_printf(out,
		    "</figcaption>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
		    "height=\"%d\" role=\"img\" aria-label=\"",
		    CHART_W, CHART_H);
	sink_xml_str(out, c->title);
	sink_puts(out, "\">\n");
	sink_printf(out,
		    "<rect x=\"%d\" y=\"10\" width=\"%d\" height=\"%d\" fill=\"#fff\" "
		    "stroke=\"#ccc\"/>\n",
		    PAD_L, pw, ph);
	axis_label(top, sizeof(top), max);
	sink_printf(out,
		    "<text x=\"%d\" y=\"20\" text-anchor=\"end\" font-size=\"11\">%s</text>\n",
		    PAD_L - 4, top);
	sink_printf(out, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\" font-size=\"11\">0</text>\n",
		    PAD_L - 4, 10 + ph);
	sink_printf(out, "<text x=\"%d\" y=\"%d\" font-size=\"11\">0 s</text>\n", PAD_L,
		    CHART_H - 4);
	sink_printf(out,
		    "<text x=\"%d\" y=\"%d\" text-anchor=\"end\" font-size=\"11\">%.1f s</text>\n",
		    PAD_L + pw, CHART_H - 4, secs);
	for (size_t s = 0; s < c->nseries; s++) {
		sink_printf(out,
			    "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"",
			    colours[s]);
		for (size_t b = 0; b < nbins; b++) {
			double x = PAD_L + (nbins > 1 ? (double)pw * b / (nbins - 1) : 0);
			double y = 10 + ph - (max > 0 ? ph * c->v[s][b] / max : 0);

			sink_printf(out, "%s%.1f,%.1f", b ? " " : "", x, y);
		}
		sink_puts(out, "\"/>\n");
	}
	sink_puts(out, "</svg></figure>\n");
}

struct grid {
	const struct profile *p;
	uint64_t t0, dt;
	size_t nbins;
	double *scratch;
};

/* Sum of metrics ms[0..n) (all processes) per bin, scaled: rates per second when per_s. */
static int series(struct grid *g, const int *ms, size_t n, uint32_t index, double scale, bool per_s,
		  double *out)
{
	for (size_t b = 0; b < g->nbins; b++)
		out[b] = 0;
	for (size_t i = 0; i < n; i++) {
		int err = metrics_grid(g->p, ms[i], 0, index, g->t0, g->dt, g->nbins, g->scratch);

		if (err)
			return err;
		for (size_t b = 0; b < g->nbins; b++)
			out[b] += g->scratch[b] / scale / (per_s ? g->dt / 1e9 : 1);
	}
	return 0;
}

static bool any(const double *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] != 0)
			return true;
	return false;
}

struct series_def {
	const char *label;
	int m[3];
	size_t n;
};

struct chart_def {
	const char *title, *unit;
	double scale;
	bool per_s, gpu;
	struct series_def s[MAX_SERIES];
	size_t ns;
};

static const struct chart_def charts[] = {
    {"CPU",
     "cores",
     1e9,
     true,
     false,
     {{"user", {MET_CPU_USER}, 1}, {"system", {MET_CPU_SYS}, 1}},
     2},
    {"RSS",
     "MiB",
     1048576,
     false,
     false,
     {{"anonymous", {MET_RSS_ANON}, 1}, {"file", {MET_RSS_FILE}, 1}, {"shmem", {MET_RSS_SHMEM}, 1}},
     3},
    {"I/O",
     "MiB/s",
     1048576,
     true,
     false,
     {{"read (syscalls)", {MET_IO_RCHAR}, 1},
      {"written (syscalls)", {MET_IO_WCHAR}, 1},
      {"disk read", {MET_IO_READ_BYTES}, 1},
      {"disk written", {MET_IO_WRITE_BYTES}, 1}},
     4},
    {"Network",
     "MiB/s",
     1048576,
     true,
     false,
     {{"sent", {MET_NET_TCP_TX, MET_NET_UDP_TX, MET_NET_UNIX_TX}, 3},
      {"received", {MET_NET_TCP_RX, MET_NET_UDP_RX, MET_NET_UNIX_RX}, 3}},
     2},
    {"Page faults",
     "/s",
     1,
     true,
     false,
     {{"minor", {MET_MINFLT}, 1}, {"major", {MET_MAJFLT}, 1}},
     2},
    {"utilisation",
     "%",
     1,
     false,
     true,
     {{"SM", {MET_GPU_UTIL}, 1}, {"memory", {MET_GPU_MEM_UTIL}, 1}},
     2},
    {"power", "W", 1000, false, true, {{"power", {MET_GPU_POWER_MW}, 1}}, 1},
    {"memory used", "MiB", 1048576, false, true, {{"used", {MET_GPU_MEM_USED}, 1}}, 1},
};

static int one_chart(struct sink *out, struct grid *g, const struct chart_def *d, uint32_t index,
		     const char *title, double secs)
{
	struct chart c = {.title = title, .unit = d->unit};
	double *buf = calloc(MAX_SERIES * g->nbins, sizeof(double));
	int err = buf ? 0 : -ENOMEM;

	for (size_t s = 0; s < d->ns && !err; s++) {
		double *v = buf + c.nseries * g->nbins;

		err = series(g, d->s[s].m, d->s[s].n, index, d->scale, d->per_s, v);
		/* a series that stayed at 0 (no shared memory, no major fault) is left out */
		if (!err && (any(v, g->nbins) || s == 0)) {
			c.label[c.nseries] = d->s[s].label;
			c.v[c.nseries++] = v;
		}
	}
	if (!err)
		chart_svg(out, &c, g->nbins, secs);
	free(buf);
	return err;
}

/* The busiest threads' CPU (user + system), one line each. */
static int thread_chart(struct sink *out, struct grid *g, const struct profile *p,
			const struct metrics_result *r, double secs)
{
	static const int cpu[] = {MET_T_CPU_USER, MET_T_CPU_SYS};
	struct chart c = {.title = "CPU of the busiest threads", .unit = "cores"};
	char label[MAX_SERIES][48];
	double *buf = calloc(MAX_SERIES * g->nbins, sizeof(double));
	int err = buf ? 0 : -ENOMEM;

	for (size_t i = 0; i < r->nthreads && c.nseries < MAX_SERIES && !err; i++) {
		const struct metrics_thread_stat *t = &r->threads[i];
		double *v = buf + c.nseries * g->nbins;

		if (!t->cpu_ns)
			break;
		for (size_t k = 0; k < 2 && !err; k++) {
			err = metrics_grid(p, cpu[k], t->pid, t->tid, g->t0, g->dt, g->nbins,
					   g->scratch);
			for (size_t b = 0; !err && b < g->nbins; b++)
				v[b] += g->scratch[b] / 1e9 / (g->dt / 1e9);
		}
		snprintf(label[c.nseries], sizeof(label[0]), "%s %u",
			 t->comm ? profile__str(p, t->comm) : "thread", t->tid);
		c.label[c.nseries] = label[c.nseries];
		c.v[c.nseries++] = v;
	}
	if (!err && c.nseries)
		chart_svg(out, &c, g->nbins, secs);
	free(buf);
	return err;
}

int html_metrics_section(struct sink *out, const struct profile *p)
{
	struct metrics_result r;
	struct grid g = {.p = p};
	uint64_t start = profile__meta_u64(p, "start_ns", 0),
		 end = profile__meta_u64(p, "end_ns", 0);
	uint64_t interval;
	struct sink *txt;
	const char *data;
	char title[160];
	int err = metrics_analyze(p, 0, &r);

	if (err)
		return err;
	if (!r.present || !start || end <= start) {
		metrics_result__free(&r);
		return -ENODATA;
	}
	txt = sink_mem();
	if (!txt) {
		metrics_result__free(&r);
		return -ENOMEM;
	}
	report_metrics_text(txt, p, &r, 0, 20);
	data = sink_mem_data(txt, NULL);
	sink_puts(out, "<pre class=\"report\">");
	sink_xml_str(out, data ? data : "");
	sink_puts(out, "</pre>\n");
	sink_close(txt);
	interval = r.interval_ms * 1000000ULL;
	g.t0 = start;
	g.dt = interval;
	while ((end - start) / g.dt > MAX_BINS)
		g.dt += interval;
	g.nbins = (end - start + g.dt - 1) / g.dt;
	g.scratch = calloc(g.nbins ? g.nbins : 1, sizeof(double));
	if (!g.scratch) {
		metrics_result__free(&r);
		return -ENOMEM;
	}
	for (size_t i = 0; i < sizeof(charts) / sizeof(charts[0]) && !err; i++) {
		if (!charts[i].gpu) {
			if (r.nprocs)
				err = one_chart(out, &g, &charts[i], 0, charts[i].title,
						(end - start) / 1e9);
			continue;
		}
		for (size_t d = 0; d < r.ngpus && !err; d++) {
			snprintf(title, sizeof(title), "GPU %u (%s) %s", r.gpus[d].index,
				 r.gpus[d].name, charts[i].title);
			err = one_chart(out, &g, &charts[i], r.gpus[d].index, title,
					(end - start) / 1e9);
		}
	}
	if (!err && r.nthreads > 1)
		err = thread_chart(out, &g, p, &r, (end - start) / 1e9);
	free(g.scratch);
	metrics_result__free(&r);
	return err;
}
