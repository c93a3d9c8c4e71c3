// SPDX-License-Identifier: MIT
/* Findings from CUDA and the GPU: idle devices, failing calls, short kernels, synchronization,
 * low occupancy, small copies, device memory never freed. */
#include "findings_rules.h"
#include "gpu.h"

static void rule_gpu_devices(struct rule_ctx *c, const struct gpu_summary *s)
{
	for (size_t i = 0; i < s->ndevices; i++) {
		const struct gpu_device_stat *d = &s->devices[i];
		uint64_t span, inside, outside;
		double idle;
		struct finding *f;

		if (d->window_ns < GPU_MIN_WINDOW || d->busy_ns > d->window_ns)
			continue;
		idle = 1.0 - (double)d->busy_ns / d->window_ns;
		if (idle <= GPU_IDLE_SHARE || !(f = add(c, "gpu-idle", sev_of(idle), idle)))
			continue;
		span = d->last_ns > d->first_ns ? d->last_ns - d->first_ns : 0;
		span = span < d->window_ns ? span : d->window_ns;
		inside = span > d->busy_ns ? span - d->busy_ns : 0;
		outside = d->window_ns - span;
		say(f->what, "GPU %u (pid %u) was idle %.1f%% of %.3f s: %.3f s between its first and "
			     "last work (longest gap %.3f ms), %.3f s before or after",
		    d->device, d->pid, 100 * idle, d->window_ns / 1e9, inside / 1e9, d->gaps[0] / 1e6,
		    outside / 1e9);
		if (outside > inside)
			say(f->advice, "most idle time is outside the GPU phase (start-up, loading, "
				       "shutdown): shorten or overlap it, or record the steady state "
				       "only (attach with -p, -d)");
		else
			say(f->advice, "the GPU waits for the CPU: prepare input in the background "
				       "(DataLoader num_workers, pin_memory=True, non_blocking copies) "
				       "and look at the CPU flamegraph of the gaps (`eprof trace`)");
	}
}

/* What a few common CUDA error codes mean (the same numbers in the runtime and driver APIs). */
static const char *cuda_error_meaning(int64_t e)
{
	switch (e) {
	case 1: return "invalid value";
	case 2: return "out of memory";
	case 3: return "initialization error";
	case 35: return "driver older than the runtime";
	case 100: return "no CUDA-capable device";
	case 101: return "invalid device";
	case 700: return "illegal memory access";
	default: return NULL;
	}
}

/* CUDA calls that returned an error: the function that failed most, and what its code says. */
static void rule_cuda_errors(struct rule_ctx *c, const struct gpu_summary *s)
{
	const struct gpu_api_stat *top = NULL;
	uint64_t errors = 0, calls = 0;
	const char *meaning;
	struct finding *f;

	for (size_t i = 0; i < s->napi; i++) {
		errors += s->api[i].errors;
		calls += s->api[i].count;
		if (s->api[i].errors && (!top || s->api[i].errors > top->errors))
			top = &s->api[i];
	}
	if (!top || !(f = add(c, "cuda-errors", FINDING_MEDIUM, calls ? (double)errors / calls : 0)))
		return;
	meaning = cuda_error_meaning(top->last_error);
	say(f->what, "%llu of %llu CUDA calls failed; %.80s failed %llu times (error %lld%s%s)",
	    (unsigned long long)errors, (unsigned long long)calls, str(c, top->name),
	    (unsigned long long)top->errors, (long long)top->last_error, meaning ? ": " : "",
	    meaning ? meaning : "");
	if (top->last_error == 100 || top->last_error == 35 || top->last_error == 3)
		say(f->advice, "the program ran without a usable GPU: check the driver "
			       "(nvidia-smi) and CUDA_VISIBLE_DEVICES");
	else if (top->last_error == 2)
		say(f->advice, "device memory ran out: smaller batches, free cached blocks, or "
			       "look at the GPU memory counter in `eprof trace`");
	else
		say(f->advice, "the failing calls' stacks are in `eprof flamegraph --cuda-api`; "
			       "the program may be checking none of these results");
}

/* Kernels so short that launching them costs more than running them. */
static void rule_launch_bound(struct rule_ctx *c, const struct gpu_summary *s)
{
	uint64_t kernels = 0;
	struct finding *f;

	for (size_t i = 0; i < s->nkernels; i++)
		kernels += s->kernels[i].count;
	if (kernels < LAUNCH_MIN || s->kernel_ns / kernels >= LAUNCH_SHORT_NS ||
	    !(f = add(c, "launch-bound", FINDING_MEDIUM, 0.10)))
		return;
	say(f->what, "%llu kernels ran %.1f us each on average", (unsigned long long)kernels,
	    s->kernel_ns / 1e3 / kernels);
	if (s->launches_timed)
		snprintf(f->what + strlen(f->what), sizeof(f->what) - strlen(f->what),
			 "; a launch call took %.1f us of CPU", s->launch_ns / 1e3 / s->launches_timed);
	say(f->advice, "kernels this short cost more to launch than to run: fuse them "
		       "(torch.compile, fused ops) or capture the loop in a CUDA graph");
}

static void rule_sync_wait(struct rule_ctx *c, const struct gpu_summary *s, uint64_t wall)
{
	double sh = wall ? (double)s->sync_ns / wall : 0;
	const struct gpu_api_stat *top = NULL;
	struct finding *f;

	if (sh <= SYNC_SHARE || !(f = add(c, "gpu-sync-wait", sev_of(sh), sh)))
		return;
	for (size_t i = 0; i < s->napi; i++)
		if (s->api[i].cat == CUDA_CAT_SYNC && (!top || s->api[i].total_ns > top->total_ns))
			top = &s->api[i];
	say(f->what, "CPU threads spent %.3f s (%.1f%% of the run) in %llu synchronization "
		     "calls%s%.80s", s->sync_ns / 1e9, 100 * sh, (unsigned long long)s->sync_calls,
	    top ? ", the most in " : "", top ? str(c, top->name) : "");
	say(f->advice, "take host synchronizations out of the loop (.item(), .cpu(), printing "
		       "tensors, cudaDeviceSynchronize); wait on events only where the result "
		       "is needed");
}

/* Kernels with a large share of GPU time and a low theoretical occupancy, one finding each. */
static void rule_occupancy(struct rule_ctx *c, const struct gpu_summary *s)
{
	for (size_t i = 0; i < s->nkernels && s->kernel_ns; i++) {
		const struct gpu_kernel_stat *k = &s->kernels[i];
		double sh = (double)k->total_ns / s->kernel_ns;
		struct finding *f;

		if (sh < OCC_SHARE || !k->occ_known || k->occupancy > OCC_LOW + 1e-9)
			continue;
		if (!(f = add(c, "low-occupancy", FINDING_LOW, sh)))
			break;
		say(f->what, "kernel %.120s (%.1f%% of GPU time) has %.0f%% theoretical occupancy, "
			     "limited by %s", str(c, k->name), 100 * sh, 100 * k->occupancy,
		    gpu_occ_limiter_name(k->limiter));
		if (k->limiter == GPU_OCC_REGS)
			say(f->advice, "cap its registers per thread (__launch_bounds__, -maxrregcount)"
				       " if it is latency-bound");
		else if (k->limiter == GPU_OCC_SMEM)
			say(f->advice, "use less shared memory per block (smaller tiles) if it is "
				       "latency-bound");
		else
			say(f->advice, "launch larger blocks (128-256 threads) so more warps fit "
				       "on an SM");
	}
}

/* Many small host-device copies, per direction. */
static void rule_small_copies(struct rule_ctx *c, const struct gpu_summary *s, uint64_t wall)
{
	for (int d = GPU_COPY_HTOD; d <= GPU_COPY_DTOH; d++) {
		const struct gpu_copy_stat *cp = &s->copies[d];
		uint64_t n = cp->count ? cp->count : cp->api_count;
		uint64_t b = cp->count ? cp->bytes : cp->api_bytes;
		struct finding *f;

		if (n < COPY_MIN || b / n >= COPY_SMALL)
			continue;
		f = add(c, "small-copies", FINDING_LOW, wall ? (double)cp->total_ns / wall : 0);
		if (!f)
			break;
		say(f->what, "%llu %s copies of %.1f KiB on average", (unsigned long long)n,
		    d == GPU_COPY_HTOD ? "host-to-device" : "device-to-host", b / 1024.0 / n);
		say(f->advice, "each copy pays a fixed latency: batch them into larger transfers "
			       "(one pinned staging buffer, torch.cat before .to())");
	}
}

void rule_gpu(struct rule_ctx *c)
{
	struct gpu_summary s;
	uint64_t wall = c->end > c->start ? c->end - c->start : 0;
	struct finding *f;

	if (!gpu_present(c->p))
		return;
	if (gpu_analyze(c->p, &s)) {
		c->err = -ENOMEM;
		return;
	}
	rule_gpu_devices(c, &s);
	rule_cuda_errors(c, &s);
	rule_launch_bound(c, &s);
	rule_sync_wait(c, &s, wall);
	rule_occupancy(c, &s);
	rule_small_copies(c, &s, wall);
	if (c->exited && s.mem_live >= LEAK_BYTES && (f = add(c, "gpu-memory-leak", FINDING_LOW, 0))) {
		say(f->what, "%.2f MiB of device memory in %llu allocations was never freed before "
			     "the process exited", s.mem_live / 1048576.0,
		    (unsigned long long)s.mem_live_allocs);
		say(f->advice, "free it (cudaFree) or keep it in a caching allocator meant to hold it");
	}
	gpu_summary_free(&s);
}
