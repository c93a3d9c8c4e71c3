// SPDX-License-Identifier: MIT
/*
 * Resource metric counter tracks of `eprof trace` (docs/metrics.md): per process, CPU in
 * cores, RSS by kind, and the rates of faults, context switches, I/O and network bytes; per
 * GPU (a pseudo process of its own), utilisation, memory, power, temperature and clocks; the
 * machine's power from its energy counters; the CPU of the busiest threads in their process.
 *
 * The recorder writes a reading only when it changed, and closes a flat step with the reading
 * that last found it unchanged: a running total's growth is spread over the time between two
 * points (metrics_gap_limit for files without the closing points).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/metrics.h"
#include "trace.h"

#define GPU_METRICS_PID 0x50000000u /* + device: the pseudo process of a GPU's tracks */
#define ENERGY_PID 0x50001000u	    /* the machine's power */
#define TRACE_THREAD_TRACKS 16	    /* threads with a CPU track, the busiest */

static bool in_window(const struct trace_opts *o, uint64_t ts)
{
	return (!o->filter.t0 || ts >= o->filter.t0) && (!o->filter.t1 || ts <= o->filter.t1);
}

static void put(struct trace_writer *w, const struct trace_opts *o, uint32_t pid, const char *track,
		uint64_t ts, double v, struct trace_stats *st)
{
	static const char *const series[] = {"value"};

	if (!in_window(o, ts))
		return;
	trace_counter(w, pid, track, ts, series, &v, 1);
	st->events++;
}

/* A level as it is read (scale: divisor of the value). */
static int level_track(struct trace_writer *w, const struct profile *p, const struct trace_opts *o,
		       int m, uint32_t pid, uint32_t index, uint32_t tpid, const char *track,
		       double scale, bool skip_zero, struct trace_stats *st)
{
	struct metric_point *pts;
	size_t n, nonzero = 0;
	int err = metrics_series(p, m, pid, index, &pts, &n);

	for (size_t i = 0; !err && i < n; i++)
		nonzero += pts[i].v != 0;
	if (skip_zero && !nonzero)
		n = 0;
	for (size_t i = 0; !err && i < n; i++)
		put(w, o, tpid, track, pts[i].ts, pts[i].v / scale, st);
	free(pts);
	return err;
}

/*
 * Points of a running total as a rate per second (scale: divisor), the growth between two
 * points spread over the time in between, or the last interval of a longer gap in older files
 * (interval: metrics_gap_limit).
 */
static void rate_points(struct trace_writer *w, const struct trace_opts *o, uint32_t tpid,
			const char *track, const struct metric_point *pts, size_t n, double scale,
			uint64_t interval, struct trace_stats *st)
{
	size_t from = 0;

	put(w, o, tpid, track, pts[0].ts, 0, st);
	for (size_t i = 1; i < n; i++) {
		uint64_t gap = pts[i].ts - pts[from].ts, span, start;
		double d;

		/*
		 * A reading closely followed by another (the final figures at exit just after a
		 * poll, a late poll) ends no interval of its own: /proc counts CPU in 10 ms
		 * ticks, and one tick over a 4 ms interval read as 2.5 cores for one thread.
		 */
		if (interval && i + 1 < n && (pts[i + 1].ts - pts[i].ts) * 4 < interval)
			continue;
		span = interval && gap * 2 > interval * 3 ? interval : gap;
		d = pts[i].v >= pts[from].v ? (double)(pts[i].v - pts[from].v) : 0;
		start = pts[from].ts;
		from = i;
		if (!span)
			continue;
		if (span < gap)
			put(w, o, tpid, track, start, 0, st);
		put(w, o, tpid, track, pts[i].ts - span, d / scale * 1e9 / (double)span, st);
	}
	put(w, o, tpid, track, pts[n - 1].ts, 0, st);
}

/* A running total as a rate; skip_zero: no track for a total that never moved. */
static int rate_track(struct trace_writer *w, const struct profile *p, const struct trace_opts *o,
		      int m, uint32_t pid, uint32_t index, uint32_t tpid, const char *track,
		      double scale, uint64_t interval, bool skip_zero, struct trace_stats *st)
{
	struct metric_point *pts;
	size_t n;
	int err = metrics_series(p, m, pid, index, &pts, &n);

	if (!err && n >= 2 && !(skip_zero && pts[n - 1].v == pts[0].v))
		rate_points(w, o, tpid, track, pts, n, scale, interval, st);
	free(pts);
	return err;
}

/*
 * A thread's CPU (user + system) in cores: the two running totals are written each when it
 * changed, so their sum is taken at every reading of either.
 */
static int thread_cpu_track(struct trace_writer *w, const struct profile *p,
			    const struct trace_opts *o, const struct metrics_thread_stat *t,
			    uint64_t interval, struct trace_stats *st)
{
	struct metric_point *u, *s, *sum = NULL;
	size_t nu, ns, n = 0, i = 0, k = 0;
	uint64_t cu = 0, cs = 0;
	char track[96];
	int err = metrics_series(p, MET_T_CPU_USER, t->pid, t->tid, &u, &nu);

	if (err)
		return err;
	err = metrics_series(p, MET_T_CPU_SYS, t->pid, t->tid, &s, &ns);
	if (!err && !(sum = malloc((nu + ns + 1) * sizeof(*sum))))
		err = -ENOMEM;
	while (!err && (i < nu || k < ns)) {
		uint64_t ts = i < nu && (k >= ns || u[i].ts <= s[k].ts) ? u[i].ts : s[k].ts;

		for (; i < nu && u[i].ts == ts; i++)
			cu = u[i].v;
		for (; k < ns && s[k].ts == ts; k++)
			cs = s[k].v;
		sum[n++] = (struct metric_point){ts, cu + cs};
	}
	snprintf(track, sizeof(track), "Thread CPU (cores): %s %u",
		 t->comm ? profile__str(p, t->comm) : "thread", t->tid);
	if (!err && n >= 2)
		rate_points(w, o, t->pid, track, sum, n, 1e9, interval, st);
	free(u);
	free(s);
	free(sum);
	return err;
}

struct track_def {
	int m;
	const char *name;
	double scale;
	bool rate, skip_zero;
};

static const struct track_def proc_tracks[] = {
    {MET_CPU_USER, "CPU user (cores)", 1e9, true, false},
    {MET_CPU_SYS, "CPU system (cores)", 1e9, true, false},
    {MET_RSS_ANON, "RSS anonymous (MiB)", 1048576, false, false},
    {MET_RSS_FILE, "RSS file (MiB)", 1048576, false, false},
    {MET_RSS_SHMEM, "RSS shmem (MiB)", 1048576, false, true},
    {MET_MINFLT, "Minor faults/s", 1, true, true},
    {MET_MAJFLT, "Major faults/s", 1, true, true},
    {MET_NVCSW, "Voluntary switches/s", 1, true, true},
    {MET_NIVCSW, "Involuntary switches/s", 1, true, true},
    {MET_IO_RCHAR, "Read MiB/s (syscalls)", 1048576, true, true},
    {MET_IO_WCHAR, "Written MiB/s (syscalls)", 1048576, true, true},
    {MET_IO_READ_BYTES, "Disk read MiB/s", 1048576, true, true},
    {MET_IO_WRITE_BYTES, "Disk written MiB/s", 1048576, true, true},
    {MET_NET_TCP_TX, "TCP sent MiB/s", 1048576, true, true},
    {MET_NET_TCP_RX, "TCP received MiB/s", 1048576, true, true},
    {MET_NET_UDP_TX, "UDP sent MiB/s", 1048576, true, true},
    {MET_NET_UDP_RX, "UDP received MiB/s", 1048576, true, true},
    {MET_NET_UNIX_TX, "Unix socket sent MiB/s", 1048576, true, true},
    {MET_NET_UNIX_RX, "Unix socket received MiB/s", 1048576, true, true},
};

static const struct track_def gpu_tracks[] = {
    {MET_GPU_UTIL, "SM utilisation (%)", 1, false, false},
    {MET_GPU_MEM_UTIL, "Memory utilisation (%)", 1, false, false},
    {MET_GPU_MEM_USED, "Memory used (MiB)", 1048576, false, false},
    {MET_GPU_POWER_MW, "Power (W)", 1000, false, false},
    {MET_GPU_TEMP_C, "Temperature (C)", 1, false, false},
    {MET_GPU_SM_CLOCK, "SM clock (MHz)", 1, false, false},
    {MET_GPU_MEM_CLOCK, "Memory clock (MHz)", 1, false, false},
    {MET_GPU_PCIE_TX, "PCIe TX (KB/s)", 1, false, true},
    {MET_GPU_PCIE_RX, "PCIe RX (KB/s)", 1, false, true},
};

static int emit_tracks(struct trace_writer *w, const struct profile *p, const struct trace_opts *o,
		       const struct track_def *t, size_t nt, uint32_t pid, uint32_t index,
		       uint32_t tpid, uint64_t interval, struct trace_stats *st)
{
	int err = 0;

	for (size_t k = 0; k < nt && !err; k++)
		err = t[k].rate ? rate_track(w, p, o, t[k].m, pid, index, tpid, t[k].name,
					     t[k].scale, interval, t[k].skip_zero, st)
				: level_track(w, p, o, t[k].m, pid, index, tpid, t[k].name,
					      t[k].scale, t[k].skip_zero, st);
	return err;
}

int trace_source_metrics(struct trace_writer *w, const struct profile *p,
			 const struct trace_opts *o, struct trace_stats *st)
{
	struct metrics_result r;
	uint64_t interval;
	char name[160];
	int err = metrics_analyze(p, o->filter.pid, &r);

	if (err || !r.present)
		return err;
	interval = metrics_gap_limit(p);
	for (size_t i = 0; i < r.nprocs && !err; i++)
		err =
		    emit_tracks(w, p, o, proc_tracks, sizeof(proc_tracks) / sizeof(proc_tracks[0]),
				r.procs[i].pid, 0, r.procs[i].pid, interval, st);
	/* the busiest threads' CPU, in their process (a one-thread process has its own) */
	for (size_t i = 0, shown = 0; i < r.nthreads && shown < TRACE_THREAD_TRACKS && !err; i++) {
		const struct metrics_thread_stat *t = &r.threads[i];
		const struct metrics_proc_stat *ps = NULL;

		for (size_t k = 0; k < r.nprocs && !ps; k++)
			if (r.procs[k].pid == t->pid)
				ps = &r.procs[k];
		if (!t->cpu_ns || (ps && ps->m[MET_THREADS].max <= 1))
			continue;
		err = thread_cpu_track(w, p, o, t, interval, st);
		shown++;
	}
	for (size_t i = 0; i < r.ngpus && !err && !o->filter.pid; i++) {
		uint32_t tpid = GPU_METRICS_PID + r.gpus[i].index;

		snprintf(name, sizeof(name), "GPU %u: %s (NVML)", r.gpus[i].index, r.gpus[i].name);
		trace_process_name(w, tpid, name);
		trace_process_sort_index(w, tpid, 2000 + (int)r.gpus[i].index);
		err = emit_tracks(w, p, o, gpu_tracks, sizeof(gpu_tracks) / sizeof(gpu_tracks[0]),
				  0, r.gpus[i].index, tpid, interval, st);
	}
	if (!err && r.cpu_joules > 0 && !o->filter.pid) {
		trace_process_name(w, ENERGY_PID, "Energy (RAPL)");
		trace_process_sort_index(w, ENERGY_PID, 3000);
		for (size_t i = 0; i < r.nzones && !err; i++) {
			snprintf(name, sizeof(name), "%s power (W)", r.zones[i].name);
			/* uJ per second / 1e6 = W */
			err = rate_track(w, p, o, MET_ENERGY_UJ, 0, r.zones[i].index, ENERGY_PID,
					 name, 1e6, interval, false, st);
		}
	}
	metrics_result__free(&r);
	return err;
}
