// SPDX-License-Identifier: MIT
/* The GPU section of `eprof report` (text) and its "gpu" key (JSON). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "../analysis/gpu.h"
#include "../util/sink.h"
#include "report_gpu.h"

static double pct(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * part / whole : 0;
}

static const char *str_or(const struct profile *p, uint32_t id, const char *dflt)
{
	return id ? profile__str(p, id) : dflt;
}

static void fmt_ns(char *buf, size_t len, uint64_t ns)
{
	if (ns >= 1000000000ULL)
		snprintf(buf, len, "%.2f s", ns / 1e9);
	else if (ns >= 1000000)
		snprintf(buf, len, "%.2f ms", ns / 1e6);
	else if (ns >= 1000)
		snprintf(buf, len, "%.1f us", ns / 1e3);
	else
		snprintf(buf, len, "%" PRIu64 " ns", ns);
}

static void text_device_props(struct sink *out, const struct profile *p,
			      const struct gpu_summary *s)
{
	for (size_t i = 0; i < s->nprops; i++) {
		const struct gpu_device_props *d = &s->props[i];

		sink_printf(out,
			    "# pid %u device %u: %s, %" PRIu64 " SMs, compute capability %" PRIu64
			    ".%" PRIu64 ", %.1f GiB, per SM %" PRIu64 " warps, %" PRIu64
			    " blocks, %" PRIu64 " registers, %" PRIu64 " KiB shared memory\n",
			    d->pid, d->device, str_or(p, d->name, "?"), d->sm_count, d->cc_major,
			    d->cc_minor, d->global_mem / 1073741824.0, d->max_warps_per_sm,
			    d->max_blocks_per_sm, d->max_regs_per_sm, d->max_smem_per_sm / 1024);
	}
}

static void text_devices(struct sink *out, const struct gpu_summary *s)
{
	char b[32], g[32];

	sink_puts(out, "\nGPU devices (busy = kernels, copies and sets on any stream)\n");
	sink_printf(out, "%8s %6s %12s %7s %12s   %s\n", "PID", "Device", "Busy", "Busy%",
		    "Overlap", "Largest idle gaps");
	for (size_t i = 0; i < s->ndevices; i++) {
		const struct gpu_device_stat *d = &s->devices[i];

		fmt_ns(b, sizeof(b), d->busy_ns);
		fmt_ns(g, sizeof(g), d->overlap_ns);
		sink_printf(out, "%8u %6u %12s %6.1f%% %12s  ", d->pid, d->device, b,
			    pct(d->busy_ns, d->window_ns), g);
		for (int j = 0; j < GPU_MAX_GAPS && d->gaps[j]; j++) {
			fmt_ns(g, sizeof(g), d->gaps[j]);
			sink_printf(out, " %s", g);
		}
		sink_puts(out, "\n");
	}
	sink_printf(out, "\n%8s %6s %8s %8s %12s %12s %9s\n", "PID", "Device", "Stream", "Count",
		    "Busy", "Overlapped", "Overlap%");
	for (size_t i = 0; i < s->nstreams; i++) {
		const struct gpu_stream_stat *st = &s->streams[i];

		fmt_ns(b, sizeof(b), st->busy_ns);
		fmt_ns(g, sizeof(g), st->overlap_ns);
		sink_printf(out, "%8u %6u %8u %8" PRIu64 " %12s %12s %8.1f%%\n", st->pid,
			    (uint32_t)(st->dev_stream >> 32), (uint32_t)st->dev_stream, st->count,
			    b, g, pct(st->overlap_ns, st->busy_ns));
	}
	if (s->nstreams)
		sink_puts(out, "# Overlapped: busy while another stream of the same device was busy "
			       "(copies hidden behind compute, concurrent kernels)\n");
}

/* record -p: the CUPTI collector injected and retracted (null when it was not). */
static void json_attach(struct sink *out, const struct profile *p)
{
	static const char *const keys[] = {"gpu_attach_injected", "gpu_attach_retracted",
					   "gpu_attach_kept", "gpu_inject_stop_max_us",
					   "gpu_retract_stop_max_us"};

	if (!profile__meta(p, keys[0])) {
		sink_puts(out, ", \"attach\": null");
		return;
	}
	sink_puts(out, ", \"attach\": {");
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		const char *v = profile__meta(p, keys[i]);

		sink_printf(out, "%s\"%s\": %lld", i ? ", " : "", keys[i] + 4,
			    v ? strtoll(v, NULL, 10) : 0LL);
	}
	sink_puts(out, "}");
}

/* What the GPU figures lack, and why: nothing left out silently. */
static void text_quality(struct sink *out, const struct profile *p, const struct gpu_summary *s)
{
	const uint64_t *st = p->stats;
	const char *ver = profile__meta(p, "cupti_version"), *path = profile__meta(p, "cupti_path");
	const char *why = profile__meta(p, "gpu_not_recorded");

	if (st[STAT_CUDA_NOSTACK] || st[STAT_CUDA_LOST] || st[STAT_CUDA_STALE])
		sink_printf(out,
			    "# launches without stack (rate limit) %" PRIu64
			    ", CUDA events lost %" PRIu64 " (%" PRIu64
			    " calls untracked), calls whose return was never seen %" PRIu64 "\n",
			    st[STAT_CUDA_NOSTACK], st[STAT_CUDA_LOST], st[STAT_CUDA_UNTRACKED],
			    st[STAT_CUDA_STALE]);
	if (st[STAT_GPU_RECORDS_LOST] || st[STAT_GPU_ZERO_TIME] || st[STAT_GPU_INVERTED_TIME] ||
	    st[STAT_GPU_FOREIGN_CLOCK] || st[STAT_GPU_BUFFER_ERRORS] || st[STAT_GPU_BAD_RECORDS])
		sink_printf(out,
			    "# GPU records dropped: %" PRIu64 " still in flight (zero times), %" PRIu64
			    " with end before start, %" PRIu64 " on another tool's clock, %" PRIu64
			    " lost in delivery, %" PRIu64 " malformed; %" PRIu64
			    " CUPTI buffers ended on an error\n",
			    st[STAT_GPU_ZERO_TIME], st[STAT_GPU_INVERTED_TIME],
			    st[STAT_GPU_FOREIGN_CLOCK], st[STAT_GPU_RECORDS_LOST],
			    st[STAT_GPU_BAD_RECORDS], st[STAT_GPU_BUFFER_ERRORS]);
	if (why)
		sink_printf(out, "# GPU activity not recorded in %s\n", why);
	if (profile__meta(p, "gpu_attach_injected"))
		sink_printf(out,
			    "# CUPTI collector injected into %s process(es) (a thread stopped %.2f ms "
			    "at most), retracted from %s (%.2f ms at most), %s left loaded\n",
			    profile__meta(p, "gpu_attach_injected"),
			    atof(profile__meta(p, "gpu_inject_stop_max_us") ?: "0") / 1000,
			    profile__meta(p, "gpu_attach_retracted") ?: "0",
			    atof(profile__meta(p, "gpu_retract_stop_max_us") ?: "0") / 1000,
			    profile__meta(p, "gpu_attach_kept") ?: "0");
	if (s->before_attach)
		sink_printf(out,
			    "# %" PRIu64 " kernels were launched before the collector attached: no "
			    "launch stack ([launched before attach])\n",
			    s->before_attach);
	if (ver)
		sink_printf(out, "# libcupti %s%s%s\n", ver, path ? ": " : "", path ? path : "");
	if (s->joined_mismatch)
		sink_printf(out,
			    "# %" PRIu64 " of %" PRIu64
			    " joined kernels were matched to a launch that named another kernel\n",
			    s->joined_mismatch, s->joined_checked);
}

static void text_kernels(struct sink *out, const struct profile *p, const struct gpu_summary *s,
			 unsigned limit)
{
	char t[32], mean[32], mn[32], mx[32];

	sink_printf(out,
		    "\nGPU kernels (%" PRIu64 " of %" PRIu64
		    " activities matched to a launch stack)\n",
		    s->joined, s->gpu_events);
	sink_printf(out, "%8s %12s %7s %11s %11s %11s %15s  %s\n", "Count", "Total", "GPU%", "Mean",
		    "Min", "Max", "Occupancy", "Kernel");
	for (size_t i = 0; i < s->nkernels && (!limit || i < limit); i++) {
		const struct gpu_kernel_stat *k = &s->kernels[i];
		char occ[32];

		fmt_ns(t, sizeof(t), k->total_ns);
		fmt_ns(mean, sizeof(mean), k->timed ? k->total_ns / k->timed : 0);
		fmt_ns(mn, sizeof(mn), k->timed ? k->min_ns : 0);
		fmt_ns(mx, sizeof(mx), k->max_ns);
		if (k->occ_known)
			snprintf(occ, sizeof(occ), "%.0f%% %s%s", 100 * k->occupancy,
				 gpu_occ_limiter_name(k->limiter), k->ncfg > 1 ? "*" : "");
		else
			snprintf(occ, sizeof(occ), "-");
		sink_printf(out, "%8" PRIu64 " %12s %6.1f%% %11s %11s %11s %15s  %s\n", k->count, t,
			    pct(k->total_ns, s->kernel_ns), mean, mn, mx, occ,
			    str_or(p, k->name, "[unnamed]"));
	}
	sink_puts(out, "# Occupancy: theoretical, from the launch configuration and the device limits,"
		       " with the limit reached first;\n#   * several configurations: weighted by GPU"
		       " time, the limit of the longest; - no device limits or configuration\n");
}

static void text_copies(struct sink *out, const struct gpu_summary *s)
{
	char t[32];

	sink_printf(out, "\n%-8s %8s %14s %12s %9s %10s %14s %12s\n", "Copies", "GPU n",
		    "GPU bytes", "GPU time", "GB/s", "API calls", "API bytes", "API time");
	for (int d = 0; d < GPU_COPY_DIR_MAX; d++) {
		const struct gpu_copy_stat *c = &s->copies[d];
		char at[32];

		if (!c->count && !c->api_count)
			continue;
		fmt_ns(t, sizeof(t), c->total_ns);
		fmt_ns(at, sizeof(at), c->api_ns);
		sink_printf(out,
			    "%-8s %8" PRIu64 " %14" PRIu64 " %12s %9.2f %10" PRIu64 " %14" PRIu64
			    " %12s\n",
			    gpu_copy_dir_name(d), c->count, c->bytes, t,
			    c->total_ns ? (double)c->bytes / c->total_ns : 0.0, c->api_count,
			    c->api_bytes, at);
	}
}

static void text_api(struct sink *out, const struct profile *p, const struct gpu_summary *s,
		     unsigned limit)
{
	char t[32], mx[32], l[32];

	if (s->nlaunched) {
		sink_printf(out, "\n%8s %12s  %s\n", "Launches", "CPU time",
			    "Kernel (launch side)");
		for (size_t i = 0; i < s->nlaunched && (!limit || i < limit); i++) {
			fmt_ns(l, sizeof(l), s->launched[i].total_ns);
			sink_printf(out, "%8" PRIu64 " %12s  %s\n", s->launched[i].count, l,
				    str_or(p, s->launched[i].name, "[unknown kernel]"));
		}
	}
	sink_printf(out, "\n%8s %12s %11s %8s %12s  %s\n", "Calls", "Total", "Max", "Failed",
		    "Bytes", "CUDA API function");
	for (size_t i = 0; i < s->napi && (!limit || i < limit); i++) {
		const struct gpu_api_stat *a = &s->api[i];

		fmt_ns(t, sizeof(t), a->total_ns);
		fmt_ns(mx, sizeof(mx), a->max_ns);
		sink_printf(out, "%8" PRIu64 " %12s %11s %8" PRIu64 " %12" PRIu64 "  %s", a->count,
			    t, mx, a->errors, a->bytes, profile__str(p, a->name));
		if (a->errors)
			sink_printf(out, "  (error %" PRId64 ")", a->last_error);
		sink_puts(out, "\n");
	}
}

int report_gpu_text(struct sink *out, const struct profile *p, unsigned limit)
{
	struct gpu_summary s;
	char sync[32], launch[32];
	int err;

	if (!gpu_present(p))
		return 0;
	err = gpu_analyze(p, &s);
	if (err)
		return err;
	fmt_ns(sync, sizeof(sync), s.sync_ns);
	fmt_ns(launch, sizeof(launch), s.launch_ns);
	sink_printf(out,
		    "\n# GPU: %" PRIu64 " CUDA API calls, %" PRIu64 " launches (%s in the %" PRIu64
		    " timed launch calls), "
		    "%" PRIu64 " sync calls blocked %s\n",
		    s.api_calls, s.launches, launch, s.launches_timed, s.sync_calls, sync);
	sink_printf(out,
		    "# GPU memory (cudaMalloc & co): peak %" PRIu64 " bytes, never freed %" PRIu64
		    " bytes in %" PRIu64 " allocations\n",
		    s.mem_peak, s.mem_live, s.mem_live_allocs);
	text_quality(out, p, &s);
	if (s.have_activity) {
		text_devices(out, &s);
		text_device_props(out, p, &s);
		text_kernels(out, p, &s, limit);
	} else {
		sink_puts(
		    out, "# no GPU activity records (CUPTI): only the CPU side of CUDA is shown\n");
	}
	text_copies(out, &s);
	text_api(out, p, &s, limit);
	gpu_summary_free(&s);
	return out->err;
}

static void json_name(struct sink *out, const struct profile *p, uint32_t id, const char *dflt)
{
	sink_puts(out, "\"name\": \"");
	sink_json_str(out, str_or(p, id, dflt));
	sink_puts(out, "\"");
}

static void json_occ(struct sink *out, bool known, double occ, unsigned limiter)
{
	if (known)
		sink_printf(out, ", \"occupancy\": %.4f, \"occupancy_limiter\": \"%s\"", occ,
			    gpu_occ_limiter_name(limiter));
	else
		sink_puts(out, ", \"occupancy\": null, \"occupancy_limiter\": null");
}

/* The launch configurations of a GPU kernel, with their occupancy. */
static void json_configs(struct sink *out, const struct gpu_summary *s,
			 const struct gpu_kernel_stat *k)
{
	sink_puts(out, ", \"configs\": [");
	for (size_t c = k->cfg_first; c < k->cfg_first + k->ncfg; c++) {
		const struct gpu_kernel_config *cf = &s->configs[c];

		sink_printf(out,
			    "%s{\"pid\": %u, \"device\": %u, \"threads_per_block\": %u"
			    ", \"registers_per_thread\": %u, \"shared_bytes_per_block\": %u"
			    ", \"count\": %" PRIu64 ", \"total_ns\": %" PRIu64,
			    c > k->cfg_first ? ", " : "", cf->pid, cf->device, cf->threads, cf->regs,
			    cf->smem, cf->count, cf->total_ns);
		json_occ(out, cf->occ_known, cf->occ.occupancy, cf->occ.limiter);
		if (cf->occ_known)
			sink_printf(out, ", \"blocks_per_sm\": %u, \"warps_per_sm\": %u",
				    cf->occ.blocks, cf->occ.warps);
		sink_puts(out, "}");
	}
	sink_puts(out, "]");
}

/* s: the GPU kernels get occupancy and configs; NULL for the launch side. */
static void json_kernels(struct sink *out, const struct profile *p, const char *key,
			 const struct gpu_kernel_stat *k, size_t n, const char *dflt,
			 uint64_t total, const struct gpu_summary *s)
{
	sink_printf(out, ",\n    \"%s\": [", key);
	for (size_t i = 0; i < n; i++) {
		sink_puts(out, i ? ",\n      {" : "\n      {");
		json_name(out, p, k[i].name, dflt);
		sink_printf(out,
			    ", \"count\": %" PRIu64 ", \"total_ns\": %" PRIu64
			    ", \"mean_ns\": %" PRIu64 ", \"min_ns\": %" PRIu64
			    ", \"max_ns\": %" PRIu64 ", \"share_pct\": %.2f",
			    k[i].count, k[i].total_ns, k[i].timed ? k[i].total_ns / k[i].timed : 0,
			    k[i].timed ? k[i].min_ns : 0, k[i].max_ns, pct(k[i].total_ns, total));
		if (s) {
			json_occ(out, k[i].occ_known, k[i].occupancy, k[i].limiter);
			json_configs(out, s, &k[i]);
		}
		sink_puts(out, "}");
	}
	sink_puts(out, "]");
}

static void json_devices(struct sink *out, const struct gpu_summary *s)
{
	sink_puts(out, ",\n    \"devices\": [");
	for (size_t i = 0; i < s->ndevices; i++) {
		const struct gpu_device_stat *d = &s->devices[i];

		sink_printf(out,
			    "%s{\"pid\": %u, \"device\": %u, \"busy_ns\": %" PRIu64
			    ", \"window_ns\": %" PRIu64
			    ", \"busy_pct\": %.2f, \"overlap_ns\": %" PRIu64
			    ", \"idle_gaps_ns\": [",
			    i ? ",\n      " : "\n      ", d->pid, d->device, d->busy_ns,
			    d->window_ns, pct(d->busy_ns, d->window_ns), d->overlap_ns);
		for (int j = 0; j < GPU_MAX_GAPS && d->gaps[j]; j++)
			sink_printf(out, "%s%" PRIu64, j ? ", " : "", d->gaps[j]);
		sink_puts(out, "]}");
	}
	sink_puts(out, "]");
	sink_puts(out, ",\n    \"streams\": [");
	for (size_t i = 0; i < s->nstreams; i++) {
		const struct gpu_stream_stat *st = &s->streams[i];

		sink_printf(out,
			    "%s{\"pid\": %u, \"device\": %u, \"stream\": %u, \"count\": %" PRIu64
			    ", \"busy_ns\": %" PRIu64 ", \"overlap_ns\": %" PRIu64 "}",
			    i ? ",\n      " : "\n      ", st->pid, (uint32_t)(st->dev_stream >> 32),
			    (uint32_t)st->dev_stream, st->count, st->busy_ns, st->overlap_ns);
	}
	sink_puts(out, "]");
}

static void json_device_props(struct sink *out, const struct profile *p,
			      const struct gpu_summary *s)
{
	sink_puts(out, ",\n    \"device_props\": [");
	for (size_t i = 0; i < s->nprops; i++) {
		const struct gpu_device_props *d = &s->props[i];

		sink_printf(out, "%s{\"pid\": %u, \"device\": %u, ", i ? ",\n      " : "\n      ",
			    d->pid, d->device);
		json_name(out, p, d->name, "");
#define X(field, key) sink_printf(out, ", \"" key "\": %" PRIu64, d->field);
		GPU_ATTR_LIST(X)
#undef X
		sink_puts(out, "}");
	}
	sink_puts(out, "]");
}

static void json_copies_api(struct sink *out, const struct profile *p, const struct gpu_summary *s)
{
	bool first = true;

	sink_puts(out, ",\n    \"memcpy\": [");
	for (int d = 0; d < GPU_COPY_DIR_MAX; d++) {
		const struct gpu_copy_stat *c = &s->copies[d];

		if (!c->count && !c->api_count)
			continue;
		sink_printf(out,
			    "%s{\"direction\": \"%s\", \"count\": %" PRIu64 ", \"bytes\": %" PRIu64
			    ", \"total_ns\": %" PRIu64 ", \"api_count\": %" PRIu64
			    ", \"api_bytes\": %" PRIu64 ", \"api_ns\": %" PRIu64 "}",
			    first ? "\n      " : ",\n      ", gpu_copy_dir_name(d), c->count,
			    c->bytes, c->total_ns, c->api_count, c->api_bytes, c->api_ns);
		first = false;
	}
	sink_puts(out, "]");
	sink_puts(out, ",\n    \"api\": [");
	for (size_t i = 0; i < s->napi; i++) {
		const struct gpu_api_stat *a = &s->api[i];

		sink_puts(out, i ? ",\n      {" : "\n      {");
		json_name(out, p, a->name, "");
		sink_printf(out,
			    ", \"count\": %" PRIu64 ", \"total_ns\": %" PRIu64
			    ", \"max_ns\": %" PRIu64 ", \"errors\": %" PRIu64
			    ", \"last_error\": %" PRId64 ", \"bytes\": %" PRIu64 "}",
			    a->count, a->total_ns, a->max_ns, a->errors, a->last_error, a->bytes);
	}
	sink_puts(out, "]");
}

int report_gpu_json(struct sink *out, const struct profile *p)
{
	struct gpu_summary s;
	int err;

	if (!gpu_present(p))
		return 0;
	err = gpu_analyze(p, &s);
	if (err)
		return err;
	sink_printf(out,
		    ",\n  \"gpu\": {\"api_calls\": %" PRIu64 ", \"launches\": %" PRIu64
		    ", \"launch_ns\": %" PRIu64 ", \"launches_timed\": %" PRIu64
		    ", \"sync_calls\": %" PRIu64 ", \"sync_ns\": %" PRIu64
		    ", \"kernel_ns\": %" PRIu64 ", \"activities\": %" PRIu64
		    ", \"activities_with_launch_stack\": %" PRIu64 ", \"mem_peak_bytes\": %" PRIu64
		    ", \"mem_never_freed_bytes\": %" PRIu64
		    ", \"mem_never_freed_allocs\": %" PRIu64,
		    s.api_calls, s.launches, s.launch_ns, s.launches_timed, s.sync_calls, s.sync_ns,
		    s.kernel_ns, s.gpu_events, s.joined, s.mem_peak, s.mem_live, s.mem_live_allocs);
	sink_printf(out,
		    ", \"activities_launch_name_checked\": %" PRIu64
		    ", \"activities_launch_name_mismatch\": %" PRIu64
		    ", \"activities_before_attach\": %" PRIu64,
		    s.joined_checked, s.joined_mismatch, s.before_attach);
	json_attach(out, p);
	{
		static const char *const keys[] = {"cupti_version", "cupti_path",
						   "gpu_not_recorded"};

		for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
			const char *v = profile__meta(p, keys[i]);

			sink_printf(out, ", \"%s\": ", strcmp(keys[i], "gpu_not_recorded")
							     ? keys[i]
							     : "not_recorded");
			if (v) {
				sink_puts(out, "\"");
				sink_json_str(out, v);
				sink_puts(out, "\"");
			} else {
				sink_puts(out, "null");
			}
		}
	}
	json_kernels(out, p, "kernels", s.kernels, s.nkernels, "[unnamed]", s.kernel_ns, &s);
	json_kernels(out, p, "launched_kernels", s.launched, s.nlaunched, "[unknown kernel]",
		     s.launch_ns, NULL);
	json_device_props(out, p, &s);
	json_devices(out, &s);
	json_copies_api(out, p, &s);
	sink_puts(out, "}");
	gpu_summary_free(&s);
	return out->err;
}
