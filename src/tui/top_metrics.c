// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "model/event.h"
#include "top_metrics.h"

static struct top_metrics_proc *proc_of(struct top_metrics *t, uint32_t pid)
{
	struct top_metrics_proc *pr;

	for (size_t i = 0; i < t->procs.n; i++)
		if (t->procs.v[i].pid == pid)
			return &t->procs.v[i];
	pr = vec_push(t->procs);
	if (pr)
		pr->pid = pid;
	return pr;
}

static int metric_of(struct top_metrics *t, const struct profile *p, uint32_t name)
{
	for (int m = 0; m < MET_PROC_COUNT; m++)
		if (t->names[m] == name)
			return m;
	for (int m = 0; m < MET_PROC_COUNT; m++) {
		if (!t->names[m] && !strcmp(profile__str(p, name), metric_defs[m].name)) {
			t->names[m] = name;
			return m;
		}
	}
	return -1;
}

int top_metrics__update(struct top_metrics *t, const struct profile *p, double dt)
{
	uint64_t sum[MET_PROC_COUNT] = {0};

	for (size_t i = 0; i < p->events.n; i++) {
		const struct event *e = &p->events.v[i];
		struct top_metrics_proc *pr;
		int m;

		if (e->kind != EVK_COUNTER || !e->pid || (m = metric_of(t, p, e->name)) < 0)
			continue;
		pr = proc_of(t, e->pid);
		if (!pr)
			return -ENOMEM;
		pr->v[m] = ev_counter_value(e);
		t->seen = true;
	}
	for (size_t i = 0; i < t->procs.n; i++)
		for (int m = 0; m < MET_PROC_COUNT; m++)
			sum[m] += t->procs.v[i].v[m];
	for (int m = 0; m < MET_PROC_COUNT; m++) {
		t->rate[m] =
		    t->have_prev && dt > 0 && metric_defs[m].cumulative && sum[m] >= t->prev[m]
			? (sum[m] - t->prev[m]) / dt
			: 0;
		t->prev[m] = sum[m];
	}
	t->rss = sum[MET_RSS_ANON] + sum[MET_RSS_FILE] + sum[MET_RSS_SHMEM];
	t->have_prev = true;
	return 0;
}

void top_metrics__free(struct top_metrics *t)
{
	vec_free(t->procs);
}

static void fmt_rate(char *buf, size_t len, double v)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB"};
	int u = 0;

	while (v >= 1024 && u < 3) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", v, units[u]);
}

void top_metrics__render(struct sink *out, const struct top_metrics *t)
{
	const double *r = t->rate;
	char rss[32], rd[32], wr[32], tx[32], rx[32];

	if (!t->seen)
		return;
	fmt_rate(rss, sizeof(rss), (double)t->rss);
	fmt_rate(rd, sizeof(rd), r[MET_IO_RCHAR]);
	fmt_rate(wr, sizeof(wr), r[MET_IO_WCHAR]);
	fmt_rate(tx, sizeof(tx), r[MET_NET_TCP_TX] + r[MET_NET_UDP_TX] + r[MET_NET_UNIX_TX]);
	fmt_rate(rx, sizeof(rx), r[MET_NET_TCP_RX] + r[MET_NET_UDP_RX] + r[MET_NET_UNIX_RX]);
	sink_printf(out,
		    "Res: user %.2f sys %.2f cores  RSS %s  read %s/s  written %s/s  net %s/s "
		    "out, %s/s in  faults %.0f/s\n",
		    r[MET_CPU_USER] / 1e9, r[MET_CPU_SYS] / 1e9, rss, rd, wr, tx, rx,
		    r[MET_MINFLT] + r[MET_MAJFLT]);
}
