// SPDX-License-Identifier: MIT
/* The GPU section of `eprof report` (text) and its "gpu" key (JSON). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "analysis/gpu.h"
#include "units.h"
#include "util/json.h"
#include "util/sink.h"
#include "report_gpu.h"

static double pct(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * part / whole : 0;
}

static const char *str_or(const struct profile *p, uint32_t id, const char *dflt)
{
	return id ? profile__str(p, id) : dflt;
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
static void json_attach(struct json *j, const struct profile *p)
{
	static const char *const keys[] = {"gpu_attach_injected", "gpu_attach_retracted",
					   "gpu_attach_kept", "gpu_inject_stop_max_us",
					   "gpu_retract_stop_max_us"};

	if (!profile__meta(p, keys[0])) {
		json_kv_null(j, "attach");
		return;
	}
	json_obj_open(j, -1, "attach");
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		const char *v = profile__meta(p, keys[i]);

		json_kv_i64(j, keys[i] + 4, v ? strtoll(v, NULL, 10) : 0LL);
	}
	json_obj_end(j);
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

static void json_occ(struct json *j, bool known, double occ, unsigned limiter)
{
	if (known) {
		json_kv_f(j, "occupancy", occ, 4);
		json_kv_str(j, "occupancy_limiter", gpu_occ_limiter_name(limiter));
	} else {
		json_kv_null(j, "occupancy");
		json_kv_null(j, "occupancy_limiter");
	}
}

/* The launch configurations of a GPU kernel, with their occupancy. */
static void json_configs(struct json *j, const struct gpu_summary *s,
			 const struct gpu_kernel_stat *k)
{
	json_arr_open(j, -1, "configs");
	for (size_t c = k->cfg_first; c < k->cfg_first + k->ncfg; c++) {
		const struct gpu_kernel_config *cf = &s->configs[c];

		json_obj(j);
		json_kv_u64(j, "pid", cf->pid);
		json_kv_u64(j, "device", cf->device);
		json_kv_u64(j, "threads_per_block", cf->threads);
		json_kv_u64(j, "registers_per_thread", cf->regs);
		json_kv_u64(j, "shared_bytes_per_block", cf->smem);
		json_kv_u64(j, "count", cf->count);
		json_kv_u64(j, "total_ns", cf->total_ns);
		json_occ(j, cf->occ_known, cf->occ.occupancy, cf->occ.limiter);
		if (cf->occ_known) {
			json_kv_u64(j, "blocks_per_sm", cf->occ.blocks);
			json_kv_u64(j, "warps_per_sm", cf->occ.warps);
		}
		json_obj_end(j);
	}
	json_arr_end(j);
}

/* s: the GPU kernels get occupancy and configs; NULL for the launch side. */
static void json_kernels(struct json *j, const struct profile *p, const char *key,
			 const struct gpu_kernel_stat *k, size_t n, const char *dflt,
			 uint64_t total, const struct gpu_summary *s)
{
	json_arr_open(j, 4, key);
	for (size_t i = 0; i < n; i++) {
		json_obj_open(j, 6, NULL);
		json_kv_str(j, "name", str_or(p, k[i].name, dflt));
		json_kv_u64(j, "count", k[i].count);
		json_kv_u64(j, "total_ns", k[i].total_ns);
		json_kv_u64(j, "mean_ns", k[i].timed ? k[i].total_ns / k[i].timed : 0);
		json_kv_u64(j, "min_ns", k[i].timed ? k[i].min_ns : 0);
		json_kv_u64(j, "max_ns", k[i].max_ns);
		json_kv_f(j, "share_pct", pct(k[i].total_ns, total), 2);
		if (s) {
			json_occ(j, k[i].occ_known, k[i].occupancy, k[i].limiter);
			json_configs(j, s, &k[i]);
		}
		json_obj_end(j);
	}
	json_arr_end(j);
}

static void json_devices(struct json *j, const struct gpu_summary *s)
{
	json_arr_open(j, 4, "devices");
	for (size_t i = 0; i < s->ndevices; i++) {
		const struct gpu_device_stat *d = &s->devices[i];

		json_obj_open(j, 6, NULL);
		json_kv_u64(j, "pid", d->pid);
		json_kv_u64(j, "device", d->device);
		json_kv_u64(j, "busy_ns", d->busy_ns);
		json_kv_u64(j, "window_ns", d->window_ns);
		json_kv_f(j, "busy_pct", pct(d->busy_ns, d->window_ns), 2);
		json_kv_u64(j, "overlap_ns", d->overlap_ns);
		json_arr_open(j, -1, "idle_gaps_ns");
		for (int g = 0; g < GPU_MAX_GAPS && d->gaps[g]; g++)
			json_u64(j, d->gaps[g]);
		json_arr_end(j);
		json_obj_end(j);
	}
	json_arr_end(j);
	json_arr_open(j, 4, "streams");
	for (size_t i = 0; i < s->nstreams; i++) {
		const struct gpu_stream_stat *st = &s->streams[i];

		json_obj_open(j, 6, NULL);
		json_kv_u64(j, "pid", st->pid);
		json_kv_u64(j, "device", (uint32_t)(st->dev_stream >> 32));
		json_kv_u64(j, "stream", (uint32_t)st->dev_stream);
		json_kv_u64(j, "count", st->count);
		json_kv_u64(j, "busy_ns", st->busy_ns);
		json_kv_u64(j, "overlap_ns", st->overlap_ns);
		json_obj_end(j);
	}
	json_arr_end(j);
}

static void json_device_props(struct json *j, const struct profile *p,
			      const struct gpu_summary *s)
{
	json_arr_open(j, 4, "device_props");
	for (size_t i = 0; i < s->nprops; i++) {
		const struct gpu_device_props *d = &s->props[i];

		json_obj_open(j, 6, NULL);
		json_kv_u64(j, "pid", d->pid);
		json_kv_u64(j, "device", d->device);
		json_kv_str(j, "name", str_or(p, d->name, ""));
#define X(field, key) json_kv_u64(j, key, d->field);
		GPU_ATTR_LIST(X)
#undef X
		json_obj_end(j);
	}
	json_arr_end(j);
}

static void json_copies_api(struct json *j, const struct profile *p, const struct gpu_summary *s)
{
	json_arr_open(j, 4, "memcpy");
	for (int d = 0; d < GPU_COPY_DIR_MAX; d++) {
		const struct gpu_copy_stat *c = &s->copies[d];

		if (!c->count && !c->api_count)
			continue;
		json_obj_open(j, 6, NULL);
		json_kv_str(j, "direction", gpu_copy_dir_name(d));
		json_kv_u64(j, "count", c->count);
		json_kv_u64(j, "bytes", c->bytes);
		json_kv_u64(j, "total_ns", c->total_ns);
		json_kv_u64(j, "api_count", c->api_count);
		json_kv_u64(j, "api_bytes", c->api_bytes);
		json_kv_u64(j, "api_ns", c->api_ns);
		json_obj_end(j);
	}
	json_arr_end(j);
	json_arr_open(j, 4, "api");
	for (size_t i = 0; i < s->napi; i++) {
		const struct gpu_api_stat *a = &s->api[i];

		json_obj_open(j, 6, NULL);
		json_kv_str(j, "name", str_or(p, a->name, ""));
		json_kv_u64(j, "count", a->count);
		json_kv_u64(j, "total_ns", a->total_ns);
		json_kv_u64(j, "max_ns", a->max_ns);
		json_kv_u64(j, "errors", a->errors);
		json_kv_i64(j, "last_error", a->last_error);
		json_kv_u64(j, "bytes", a->bytes);
		json_obj_end(j);
	}
	json_arr_end(j);
}

static void json_totals(struct json *j, const struct profile *p, const struct gpu_summary *s)
{
	json_kv_u64(j, "api_calls", s->api_calls);
	json_kv_u64(j, "launches", s->launches);
	json_kv_u64(j, "launch_ns", s->launch_ns);
	json_kv_u64(j, "launches_timed", s->launches_timed);
	json_kv_u64(j, "sync_calls", s->sync_calls);
	json_kv_u64(j, "sync_ns", s->sync_ns);
	json_kv_u64(j, "kernel_ns", s->kernel_ns);
	json_kv_u64(j, "activities", s->gpu_events);
	json_kv_u64(j, "activities_with_launch_stack", s->joined);
	json_kv_u64(j, "mem_peak_bytes", s->mem_peak);
	json_kv_u64(j, "mem_never_freed_bytes", s->mem_live);
	json_kv_u64(j, "mem_never_freed_allocs", s->mem_live_allocs);
	json_kv_u64(j, "activities_launch_name_checked", s->joined_checked);
	json_kv_u64(j, "activities_launch_name_mismatch", s->joined_mismatch);
	json_kv_u64(j, "activities_before_attach", s->before_attach);
	json_attach(j, p);
	json_kv_str(j, "cupti_version", profile__meta(p, "cupti_version"));
	json_kv_str(j, "cupti_path", profile__meta(p, "cupti_path"));
	json_kv_str(j, "not_recorded", profile__meta(p, "gpu_not_recorded"));
}

int report_gpu_json(struct sink *out, const struct profile *p)
{
	struct gpu_summary s;
	struct json j;
	int err;

	if (!gpu_present(p))
		return 0;
	err = gpu_analyze(p, &s);
	if (err)
		return err;
	json_init_members(&j, out, 0);
	json_obj_open(&j, 2, "gpu");
	json_totals(&j, p, &s);
	json_kernels(&j, p, "kernels", s.kernels, s.nkernels, "[unnamed]", s.kernel_ns, &s);
	json_kernels(&j, p, "launched_kernels", s.launched, s.nlaunched, "[unknown kernel]",
		     s.launch_ns, NULL);
	json_device_props(&j, p, &s);
	json_devices(&j, &s);
	json_copies_api(&j, p, &s);
	json_obj_end(&j);
	gpu_summary_free(&s);
	return json_flush(&j);
}
