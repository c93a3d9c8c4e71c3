// SPDX-License-Identifier: MIT
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report_metrics.h"
#include "units.h"
#include "util/json.h"
#include "util/sink.h"

/* NVML's clock event (throttle) reason bits, in bit order. */
static const char *const throttle_names[] = {
    "idle",	     "application clocks", "power cap",	       "hardware slowdown",
    "sync boost",    "software thermal",   "hardware thermal", "power brake",
    "display clock",
};
#define NTHROTTLE (sizeof(throttle_names) / sizeof(throttle_names[0]))

const char *metrics_throttle_names(uint64_t mask, char *buf, size_t len)
{
	size_t o = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < 64 && o < len; i++) {
		if (!(mask & (1ULL << i)))
			continue;
		if (i < NTHROTTLE)
			o += snprintf(buf + o, len - o, "%s%s", o ? ", " : "", throttle_names[i]);
		else
			o += snprintf(buf + o, len - o, "%sbit %zu", o ? ", " : "", i);
	}
	return buf;
}

void metrics_fmt_bytes(char *buf, size_t len, double v)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	int u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", v, units[u]);
}

static double mean_of(const struct metric_stat *s)
{
	return s->t_last > s->t_first ? s->area / (double)(s->t_last - s->t_first)
				      : (double)s->last;
}

static double carbon_of(double carbon)
{
	return carbon > 0 ? carbon : METRICS_DEFAULT_CARBON_G_PER_KWH;
}

static const char *energy_reason(const struct metrics_result *r)
{
	if (!r->energy_source)
		return "the record has no energy figures";
	if (!strcmp(r->energy_source, "none"))
		return "no RAPL energy counter on this machine: no readable powercap zone or perf "
		       "power event";
	return "the RAPL counters read 0 over the whole record: the machine (a VM?) passes no "
	       "energy counter through";
}

static bool energy_available(const struct metrics_result *r)
{
	return r->cpu_joules > 0 || r->gpu_joules > 0;
}

static void text_energy(struct sink *out, const struct metrics_result *r, double carbon)
{
	double total = r->cpu_joules + r->gpu_joules;

	sink_puts(out, "# energy:   ");
	if (!energy_available(r)) {
		sink_printf(out, "not available: %s%s\n", energy_reason(r),
			    r->ngpus ? "; the GPUs report none" : "");
		return;
	}
	if (r->cpu_joules > 0) {
		sink_printf(out, "CPU %.1f J (", r->cpu_joules);
		for (size_t i = 0; i < r->nzones; i++)
			sink_printf(out, "%s%s %.1f J", i ? ", " : "", r->zones[i].name,
				    r->zones[i].joules);
		sink_puts(out, ")   ");
	} else {
		sink_printf(out, "CPU not available: %s\n#            ", energy_reason(r));
	}
	if (r->ngpus)
		sink_printf(out, "GPU %.1f J   ", r->gpu_joules);
	sink_printf(out, "total %.1f J%s = %.4f kWh\n", total,
		    r->cpu_joules > 0 ? "" : " (GPUs only)", total / 3.6e6);
	sink_printf(out, "# carbon:   ~%.2f g CO2 (an estimate: %.4f kWh x %.0f g/kWh%s)\n",
		    total / 3.6e6 * carbon_of(carbon), total / 3.6e6, carbon_of(carbon),
		    carbon > 0 ? ", --carbon-intensity" : ", world average; --carbon-intensity");
}

static int cmp_joules(const void *a, const void *b)
{
	const struct metrics_region_energy *x = a, *y = b;

	return x->joules < y->joules ? 1 : x->joules > y->joules ? -1 : 0;
}

/* Regions by energy, largest first; n 0 when there are none or no energy. */
static struct metrics_region_energy *region_energy(const struct profile *p,
						   const struct metrics_result *r, size_t *n)
{
	struct metrics_region_energy *v = NULL;

	*n = 0;
	if (!energy_available(r) || metrics_energy_by_region(p, &v, n))
		return NULL;
	if (*n)
		qsort(v, *n, sizeof(*v), cmp_joules);
	return v;
}

static void text_region_energy(struct sink *out, const struct profile *p,
			       const struct metrics_result *r, unsigned limit)
{
	size_t n;
	struct metrics_region_energy *v = region_energy(p, r, &n);

	for (size_t i = 0; i < n && (!limit || i < limit); i++)
		sink_printf(out, "%s%s %.1f J (%" PRIu64 " calls, %.2f s)",
			    i ? ", " : "# energy by region: ", profile__str(p, v[i].name),
			    v[i].joules, v[i].calls, v[i].ns / 1e9);
	if (n)
		sink_puts(out, "\n");
	free(v);
}

static void text_gpus(struct sink *out, const struct metrics_result *r)
{
	char used[32], tot[32], thr[256];

	for (size_t i = 0; i < r->ngpus; i++) {
		const struct metrics_gpu *g = &r->gpus[i];

		metrics_fmt_bytes(used, sizeof(used), (double)g->m[MET_GPU_MEM_USED].max);
		metrics_fmt_bytes(tot, sizeof(tot), (double)g->m[MET_GPU_MEM_TOTAL].last);
		sink_printf(out,
			    "# GPU %u:    %s   SM %.0f%% mean (%" PRIu64 "%% peak)   memory %.0f%% "
			    "busy, %s of %s peak   power %.0f W mean (%.0f W peak)   %" PRIu64
			    " C peak   SM clock %" PRIu64 " MHz peak\n",
			    g->index, g->name, mean_of(&g->m[MET_GPU_UTIL]), g->m[MET_GPU_UTIL].max,
			    mean_of(&g->m[MET_GPU_MEM_UTIL]), used, tot,
			    mean_of(&g->m[MET_GPU_POWER_MW]) / 1e3,
			    g->m[MET_GPU_POWER_MW].max / 1e3, g->m[MET_GPU_TEMP_C].max,
			    g->m[MET_GPU_SM_CLOCK].max);
		/* idle alone is no slowdown worth a line */
		if (g->throttle_any & ~1ULL)
			sink_printf(
			    out, "#            clocks held back by: %s\n",
			    metrics_throttle_names(g->throttle_any & ~1ULL, thr, sizeof(thr)));
	}
}

static uint64_t net_tx(const uint64_t *t)
{
	return t[MET_NET_TCP_TX] + t[MET_NET_UDP_TX] + t[MET_NET_UNIX_TX];
}

static uint64_t net_rx(const uint64_t *t)
{
	return t[MET_NET_TCP_RX] + t[MET_NET_UDP_RX] + t[MET_NET_UNIX_RX];
}

static void text_procs(struct sink *out, const struct profile *p, const struct metrics_result *r,
		       unsigned limit)
{
	char peak[32], rd[32], wr[32], tx[32], rx[32];

	sink_printf(out, "\n%8s  %-16s %9s %9s %10s %10s %10s %10s %10s\n", "PID", "Process",
		    "User s", "Sys s", "RSS peak", "Read", "Written", "Net sent", "Net recv");
	for (size_t i = 0; i < r->nprocs && (!limit || i < limit); i++) {
		const struct metrics_proc_stat *ps = &r->procs[i];
		uint64_t t[MET_PROC_COUNT];

		for (int m = 0; m < MET_PROC_COUNT; m++)
			t[m] = metric_delta(&ps->m[m]);
		metrics_fmt_bytes(peak, sizeof(peak), (double)ps->m[MET_RSS_PEAK].max);
		metrics_fmt_bytes(rd, sizeof(rd), (double)t[MET_IO_RCHAR]);
		metrics_fmt_bytes(wr, sizeof(wr), (double)t[MET_IO_WCHAR]);
		metrics_fmt_bytes(tx, sizeof(tx), (double)net_tx(t));
		metrics_fmt_bytes(rx, sizeof(rx), (double)net_rx(t));
		if (!ps->m[MET_NET_TCP_TX].n) /* not counted (-a has no BPF counters) */
			snprintf(tx, sizeof(tx), "-"), snprintf(rx, sizeof(rx), "-");
		sink_printf(out, "%8u  %-16.16s %9.2f %9.2f %10s %10s %10s %10s %10s\n", ps->pid,
			    ps->comm ? profile__str(p, ps->comm) : "?", t[MET_CPU_USER] / 1e9,
			    t[MET_CPU_SYS] / 1e9, peak, rd, wr, tx, rx);
	}
	if (limit && r->nprocs > limit)
		sink_printf(out, "... %zu more processes (--limit 0 shows all)\n",
			    r->nprocs - limit);
}

/* A thread that neither ran (under 5 ms) nor moved a byte: a row nobody reads. */
static bool thread_idle(const struct metrics_thread_stat *t)
{
	static const int bytes[] = {MET_T_IO_RCHAR, MET_T_IO_WCHAR, MET_T_NET_TX, MET_T_NET_RX};

	if (metrics_thread_delta(t, MET_T_CPU_USER) + metrics_thread_delta(t, MET_T_CPU_SYS) >=
	    5000000)
		return false;
	for (size_t i = 0; i < sizeof(bytes) / sizeof(bytes[0]); i++)
		if (metrics_thread_delta(t, bytes[i]))
			return false;
	return true;
}

/* The threads, busiest first: their own CPU, switches, faults and bytes; idle ones left out
 * unless every row is asked for. */
static void text_threads(struct sink *out, const struct profile *p, const struct metrics_result *r,
			 unsigned limit)
{
	size_t n = r->nthreads, shown = limit && limit < 10 ? limit : 10, printed = 0;
	char rd[32], wr[32], tx[32], rx[32], vol[32], inv[32], flt[32];

	if (!limit)
		shown = n;
	sink_printf(out, "\n%8s %8s  %-16s %8s %8s %9s %9s %9s %10s %10s %10s %10s\n", "TID", "PID",
		    "Thread", "User s", "Sys s", "Vol sw", "Invol sw", "Min flt", "Read", "Written",
		    "Net sent", "Net recv");
	for (size_t i = 0; i < n && printed < shown; i++) {
		const struct metrics_thread_stat *t = &r->threads[i];

		if (limit && thread_idle(t))
			continue; /* counted in "more" */
		printed++;
		metrics_fmt_bytes(rd, sizeof(rd), (double)metrics_thread_delta(t, MET_T_IO_RCHAR));
		metrics_fmt_bytes(wr, sizeof(wr), (double)metrics_thread_delta(t, MET_T_IO_WCHAR));
		metrics_fmt_bytes(tx, sizeof(tx), (double)metrics_thread_delta(t, MET_T_NET_TX));
		metrics_fmt_bytes(rx, sizeof(rx), (double)metrics_thread_delta(t, MET_T_NET_RX));
		fmt_count(vol, sizeof(vol), metrics_thread_delta(t, MET_T_NVCSW));
		fmt_count(inv, sizeof(inv), metrics_thread_delta(t, MET_T_NIVCSW));
		fmt_count(flt, sizeof(flt), metrics_thread_delta(t, MET_T_MINFLT));
		sink_printf(out, "%8u %8u  %-16.16s %8.2f %8.2f %9s %9s %9s %10s %10s %10s %10s\n",
			    t->tid, t->pid, t->comm ? profile__str(p, t->comm) : "?",
			    metrics_thread_delta(t, MET_T_CPU_USER) / 1e9,
			    metrics_thread_delta(t, MET_T_CPU_SYS) / 1e9, vol, inv, flt, rd, wr, tx,
			    rx);
	}
	if (n > printed)
		sink_printf(out, "... %zu more threads (--limit 0 shows all)\n", n - printed);
}

void report_metrics_text(struct sink *out, const struct profile *p, const struct metrics_result *r,
			 double carbon, unsigned limit)
{
	const uint64_t *t = r->total;
	char a[32], b[32], c[32], d[32], e[32], f[32], g[32];
	double cpu = (t[MET_CPU_USER] + t[MET_CPU_SYS]) / 1e9;

	if (!r->present)
		return;
	if (r->scope && !strcmp(r->scope, "system")) {
		const char *most = profile__meta(p, "metrics_system_procs");

		if (r->nprocs)
			sink_printf(out,
				    "# metrics:  wall %.2f s   (a system-wide record: the %zu busiest "
				    "processes by CPU samples, at most %s at once, each from when it "
				    "was first seen busy; every %" PRIu64 " ms)\n",
				    r->wall_s, r->nprocs, most ? most : "?", r->interval_ms);
		else
			sink_printf(out,
				    "# metrics:  wall %.2f s   (a system-wide record: no per-process "
				    "figures; energy and GPUs every %" PRIu64 " ms)\n",
				    r->wall_s, r->interval_ms);
		text_energy(out, r, carbon);
		text_gpus(out, r);
		if (r->nprocs)
			text_procs(out, p, r, limit);
		return;
	}
	/* one process: the kernel's high-water mark, exact; several: their sum at its largest */
	metrics_fmt_bytes(a, sizeof(a), (double)(r->nprocs == 1 ? r->rss_peak : r->rss_peak_all));
	metrics_fmt_bytes(b, sizeof(b), (double)r->rss_final);
	sink_printf(out, "# metrics:  wall %.2f s   CPU user %.2f s   sys %.2f s", r->wall_s,
		    t[MET_CPU_USER] / 1e9, t[MET_CPU_SYS] / 1e9);
	if (cpu > 0)
		sink_printf(out, " (%.0f%% sys)", 100.0 * t[MET_CPU_SYS] / 1e9 / cpu);
	if (r->nprocs)
		sink_printf(out, "   RSS peak %s   final %s", a, b);
	sink_printf(out, "   (%zu process%s, every %" PRIu64 " ms)\n", r->nprocs,
		    r->nprocs == 1 ? "" : "es", r->interval_ms);
	if (r->nprocs) {
		metrics_fmt_bytes(a, sizeof(a), (double)t[MET_IO_READ_BYTES]);
		metrics_fmt_bytes(b, sizeof(b), (double)t[MET_IO_RCHAR]);
		metrics_fmt_bytes(c, sizeof(c), (double)t[MET_IO_WRITE_BYTES]);
		metrics_fmt_bytes(d, sizeof(d), (double)t[MET_IO_WCHAR]);
		metrics_fmt_bytes(e, sizeof(e), (double)net_tx(t));
		metrics_fmt_bytes(f, sizeof(f), (double)net_rx(t));
		sink_printf(out,
			    "# I/O:      disk read %s, written %s   syscalls read %s, written %s"
			    "   network sent %s, received %s\n",
			    a, c, b, d, e, f);
		fmt_count(a, sizeof(a), t[MET_MINFLT]);
		fmt_count(b, sizeof(b), t[MET_MAJFLT]);
		fmt_count(c, sizeof(c), t[MET_NVCSW]);
		fmt_count(d, sizeof(d), t[MET_NIVCSW]);
		fmt_count(g, sizeof(g), t[MET_THREADS]);
		sink_printf(out,
			    "# faults:   minor %s   major %s   context switches: voluntary %s, "
			    "involuntary %s   threads (peak) %s\n",
			    a, b, c, d, g);
	}
	text_energy(out, r, carbon);
	text_region_energy(out, p, r, limit ? 5 : 0);
	text_gpus(out, r);
	if (r->nprocs > 1)
		text_procs(out, p, r, limit);
	if (r->nthreads > 1)
		text_threads(out, p, r, limit);
}

/* A metric never read (no BPF counters under -a) is null, not 0. */
static bool metric_seen(const struct metrics_result *r, int m)
{
	for (size_t i = 0; i < r->nprocs; i++)
		if (r->procs[i].m[m].n)
			return true;
	return !r->nprocs;
}

static void json_totals(struct json *j, const uint64_t *t, const struct metrics_result *r,
			const struct metrics_proc_stat *ps)
{
	for (int m = 0; m < MET_PROC_COUNT; m++) {
		if (!metric_defs[m].cumulative)
			continue;
		if (ps ? ps->m[m].n : metric_seen(r, m))
			json_kv_u64(j, metric_defs[m].name, t[m]);
		else
			json_kv_null(j, metric_defs[m].name);
	}
}

static void json_procs(struct json *j, const struct profile *p, const struct metrics_result *r)
{
	json_arr_open(j, 4, "processes");
	for (size_t i = 0; i < r->nprocs; i++) {
		const struct metrics_proc_stat *ps = &r->procs[i];
		uint64_t t[MET_PROC_COUNT];

		for (int m = 0; m < MET_PROC_COUNT; m++)
			t[m] = metric_delta(&ps->m[m]);
		json_obj_open(j, 6, NULL);
		json_kv_u64(j, "pid", ps->pid);
		json_kv_str(j, "comm", ps->comm ? profile__str(p, ps->comm) : "");
		json_totals(j, t, r, ps);
		json_kv_u64(j, "rss_peak_bytes", ps->m[MET_RSS_PEAK].max);
		json_kv_u64(j, "rss_final_bytes", ps->rss_final);
		json_kv_u64(j, "rss_anon_peak_bytes", ps->m[MET_RSS_ANON].max);
		json_kv_u64(j, "rss_file_peak_bytes", ps->m[MET_RSS_FILE].max);
		json_kv_u64(j, "rss_shmem_peak_bytes", ps->m[MET_RSS_SHMEM].max);
		json_kv_u64(j, "threads_peak", ps->m[MET_THREADS].max);
		json_kv_u64(j, "readings", ps->m[MET_CPU_USER].n);
		json_obj_end(j);
	}
	json_arr_close(j, 4);
}

static void json_threads(struct json *j, const struct profile *p, const struct metrics_result *r)
{
	json_arr_open(j, 4, "threads");
	for (size_t i = 0; i < r->nthreads; i++) {
		const struct metrics_thread_stat *t = &r->threads[i];

		json_obj_open(j, 6, NULL);
		json_kv_u64(j, "pid", t->pid);
		json_kv_u64(j, "tid", t->tid);
		json_kv_str(j, "comm", t->comm ? profile__str(p, t->comm) : "");
		for (int m = MET_T_FIRST; m < MET_COUNT; m++)
			/* the process table's names, without the thread_ prefix */
			json_kv_u64(j, metric_defs[m].name + strlen("thread_"),
				    metrics_thread_delta(t, m));
		json_kv_u64(j, "readings", t->m[0].n);
		json_obj_end(j);
	}
	json_arr_close(j, 4);
}

static void json_energy(struct json *j, const struct profile *p, const struct metrics_result *r,
			double carbon)
{
	struct metrics_region_energy *v;
	size_t n;

	double total = r->cpu_joules + r->gpu_joules;

	json_obj_open(j, 4, "energy");
	json_kv_bool(j, "available", energy_available(r));
	json_kv_str(j, "source", r->energy_source ? r->energy_source : "none");
	if (!energy_available(r)) {
		json_kv_str(j, "reason", energy_reason(r));
		json_obj_end(j);
		return;
	}
	json_kv_f(j, "cpu_joules", r->cpu_joules, 3);
	json_kv_f(j, "gpu_joules", r->gpu_joules, 3);
	json_kv_f(j, "total_joules", total, 3);
	json_arr_open(j, 6, "zones");
	for (size_t i = 0; i < r->nzones; i++) {
		json_obj_open(j, 8, NULL);
		json_kv_str(j, "name", r->zones[i].name);
		json_kv_f(j, "joules", r->zones[i].joules, 3);
		json_obj_end(j);
	}
	json_arr_close(j, 6);
	json_kv_f(j, "carbon_g_estimate", total / 3.6e6 * carbon_of(carbon), 4);
	json_kv_f(j, "carbon_intensity_g_per_kwh", carbon_of(carbon), 1);
	v = region_energy(p, r, &n);
	json_arr_open(j, 6, "regions");
	for (size_t i = 0; i < n; i++) {
		json_obj_open(j, 8, NULL);
		json_kv_str(j, "name", profile__str(p, v[i].name));
		json_kv_u64(j, "calls", v[i].calls);
		json_kv_u64(j, "ns", v[i].ns);
		json_kv_f(j, "joules", v[i].joules, 3);
		json_obj_end(j);
	}
	json_arr_close(j, 6);
	free(v);
	json_obj_end(j);
}

static void json_gpus(struct json *j, const struct metrics_result *r)
{
	char thr[256];

	json_arr_open(j, 4, "gpus");
	for (size_t i = 0; i < r->ngpus; i++) {
		const struct metrics_gpu *g = &r->gpus[i];

		json_obj_open(j, 6, NULL);
		json_kv_u64(j, "index", g->index);
		json_kv_str(j, "name", g->name);
		json_kv_f(j, "sm_util_mean_pct", mean_of(&g->m[MET_GPU_UTIL]), 1);
		json_kv_u64(j, "sm_util_max_pct", g->m[MET_GPU_UTIL].max);
		json_kv_f(j, "mem_util_mean_pct", mean_of(&g->m[MET_GPU_MEM_UTIL]), 1);
		json_kv_u64(j, "mem_used_max_bytes", g->m[MET_GPU_MEM_USED].max);
		json_kv_u64(j, "mem_total_bytes", g->m[MET_GPU_MEM_TOTAL].last);
		json_kv_f(j, "power_mean_w", mean_of(&g->m[MET_GPU_POWER_MW]) / 1e3, 3);
		json_kv_f(j, "power_max_w", g->m[MET_GPU_POWER_MW].max / 1e3, 3);
		json_kv_f(j, "energy_joules", g->joules, 3);
		json_kv_u64(j, "temp_max_c", g->m[MET_GPU_TEMP_C].max);
		json_kv_u64(j, "sm_clock_max_mhz", g->m[MET_GPU_SM_CLOCK].max);
		json_kv_u64(j, "mem_clock_max_mhz", g->m[MET_GPU_MEM_CLOCK].max);
		/* boards without PCIe counters have none: no figure rather than a 0 */
		if (g->m[MET_GPU_PCIE_TX].n)
			json_kv_f(j, "pcie_tx_mean_kbps", mean_of(&g->m[MET_GPU_PCIE_TX]), 1);
		if (g->m[MET_GPU_PCIE_RX].n)
			json_kv_f(j, "pcie_rx_mean_kbps", mean_of(&g->m[MET_GPU_PCIE_RX]), 1);
		json_kv_u64(j, "throttle_reasons_mask", g->throttle_any);
		json_kv_str(j, "throttle_reasons",
			    metrics_throttle_names(g->throttle_any, thr, sizeof(thr)));
		json_kv_u64(j, "readings", g->m[MET_GPU_UTIL].n);
		json_obj_end(j);
	}
	json_arr_close(j, 4);
}

int report_metrics_json(struct sink *out, const struct profile *p, const struct metrics_result *r,
			double carbon)
{
	struct json j;

	if (!r->present)
		return 0;
	json_init_members(&j, out, 0);
	json_obj_open(&j, 2, "metrics");
	json_kv_u64(&j, "interval_ms", r->interval_ms);
	json_kv_str(&j, "scope", r->scope ? r->scope : "process");
	json_kv_f(&j, "wall_s", r->wall_s, 6);
	/* what the readings cost the recorder (its thread's CPU time in them) */
	json_kv_u64(&j, "collection_cpu_ns", profile__meta_u64(p, "metrics_cpu_ns", 0));
	json_break(&j, 4);
	json_totals(&j, r->total, r, NULL);
	json_kv_u64(&j, "rss_peak_bytes", r->nprocs == 1 ? r->rss_peak : r->rss_peak_all);
	json_kv_u64(&j, "rss_peak_process_bytes", r->rss_peak);
	json_kv_u64(&j, "rss_final_bytes", r->rss_final);
	json_procs(&j, p, r);
	json_threads(&j, p, r);
	json_energy(&j, p, r, carbon);
	json_gpus(&j, r);
	json_obj_close(&j, 2);
	return json_flush(&j);
}
