// SPDX-License-Identifier: MIT
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report_mem.h"
#include "../analysis/memory.h"
#include "../analysis/stacks.h"
#include "../util/sink.h"

#define STACK_MAX 256
#define TEXT_FRAMES 6

bool report_mem_present(const struct profile *p)
{
	return profile__meta(p, "mem_sample_bytes") != NULL;
}

static void fmt_bytes(char *buf, size_t len, double v)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	int u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, u ? "%.2f %s" : "%.0f %s", v, units[u]);
}

/* Frames of a stack, leaf first; returns how many (at most max). */
static size_t leaf_first(const struct profile *p, uint32_t stack, const struct frame **fr,
			 size_t max)
{
	size_t n = stack && stack < p->stacks.n ? stack_frames(p, stack, fr, max, NULL) : 0;

	for (size_t i = 0; i < n / 2; i++) {
		const struct frame *t = fr[i];

		fr[i] = fr[n - 1 - i];
		fr[n - 1 - i] = t;
	}
	return n;
}

static void text_stack(struct sink *out, const struct profile *p, uint32_t stack)
{
	const struct frame *fr[STACK_MAX];
	size_t n = leaf_first(p, stack, fr, STACK_MAX);

	if (!n)
		sink_puts(out, "[no stack]");
	for (size_t i = 0; i < n && i < TEXT_FRAMES; i++)
		sink_printf(out, "%s%s", i ? " <- " : "", profile__str(p, fr[i]->name));
	if (n > TEXT_FRAMES)
		sink_puts(out, " <- ...");
	sink_puts(out, "\n");
}

static void text_table(struct sink *out, const struct profile *p, const struct mem_result *r,
		       const char *title, const struct mem_group *g, size_t n, unsigned limit,
		       bool age)
{
	char b[32];

	sink_printf(out, "\n%s\n", title);
	if (!n) {
		sink_puts(out, "  (none)\n");
		return;
	}
	sink_printf(out, "%12s %10s %s %s\n", "Bytes", "Calls", age ? "  Age(s)" : "",
		    "Stack (leaf first)");
	for (size_t i = 0; i < n && (!limit || i < limit); i++) {
		fmt_bytes(b, sizeof(b), g[i].bytes);
		sink_printf(out, "%12s %10.0f ", b, g[i].count);
		if (age)
			sink_printf(out, "%8.2f ", mem_group_age_s(r, &g[i]));
		text_stack(out, p, g[i].stack);
	}
	if (limit && n > limit)
		sink_printf(out, "... %zu more stacks (--limit 0 shows all)\n", n - limit);
}

/* The caller's analysis, or a fresh one (then *own is set: free it). */
static int analysis(const struct profile *p, const struct mem_result *pre, struct mem_result *r,
		    bool *own)
{
	struct mem_opts o = { .temp_ns = 1000000 };

	*own = !pre;
	if (pre) {
		*r = *pre;
		return 0;
	}
	return memory_analyze(p, &o, r);
}

int report_mem_text(struct sink *out, const struct profile *p, const struct mem_result *pre,
		    unsigned limit)
{
	struct mem_result r;
	char a[32], pk[32], lk[32], tp[32], rss[32];
	double t0;
	bool own;
	int err;

	if (!report_mem_present(p))
		return 0;
	err = analysis(p, pre, &r, &own);
	if (err)
		return err;
	t0 = r.start_ns;
	fmt_bytes(a, sizeof(a), r.allocated_bytes);
	fmt_bytes(pk, sizeof(pk), r.peak_bytes);
	fmt_bytes(lk, sizeof(lk), r.end_bytes);
	fmt_bytes(tp, sizeof(tp), r.temp_bytes);
	fmt_bytes(rss, sizeof(rss), r.rss_peak);
	sink_puts(out, "\n# memory: ");
	if (r.sample_bytes <= 1)
		sink_puts(out, "every allocation recorded\n");
	else
		sink_printf(out, "one sample per %" PRIu64 " bytes allocated on average (estimates)\n",
			    r.sample_bytes);
	sink_printf(out, "#   allocated %s in %.0f calls, freed %.0f calls\n", a, r.alloc_count,
		    r.free_count);
	sink_printf(out, "#   peak live heap %s at %.3f s\n", pk,
		    r.peak_bytes ? (r.peak_ts - t0) / 1e9 : 0.0);
	sink_printf(out, "#   not freed at the end %s in %.0f blocks; temporaries (freed within 1 ms) "
			 "%s in %.0f calls\n", lk, r.leak_count, tp, r.temp_count);
	sink_printf(out, "#   RSS peak %s at %.3f s", rss,
		    r.rss_peak ? (r.rss_peak_ts - t0) / 1e9 : 0.0);
	sink_puts(out, "\n");
	fmt_bytes(a, sizeof(a), r.mapped_peak);
	fmt_bytes(pk, sizeof(pk), r.mmap_bytes);
	sink_printf(out, "#   anonymous mappings (mmap, mremap, munmap) peak %s live at %.3f s, %s "
			 "mapped in all", a, r.mapped_peak ? (r.mapped_peak_ts - t0) / 1e9 : 0.0, pk);
	fmt_bytes(a, sizeof(a), r.brk_peak);
	sink_printf(out, "; brk heap peak +%s\n", a);
	sink_printf(out,
		    "#   allocator calls seen %" PRIu64 ", events lost %" PRIu64
		    ", untracked %" PRIu64 "\n",
		    p->stats[STAT_MEM_CALLS], p->stats[STAT_MEM_LOST], p->stats[STAT_MEM_UNTRACKED]);
	text_table(out, p, &r, "Live at the peak:", r.at_peak, r.nat_peak, limit, false);
	text_table(out, p, &r, "Not freed by the end (leaks):", r.leaks, r.nleaks, limit, true);
	text_table(out, p, &r, "Allocated by stack:", r.allocated, r.nallocated, limit, false);
	text_table(out, p, &r, "Allocation calls by stack (churn):", r.by_count, r.nallocated,
		   limit, false);
	text_table(out, p, &r, "Temporary allocations (freed within 1 ms):", r.temps, r.ntemps,
		   limit, false);
	if (own)
		mem_result__free(&r);
	return out->err;
}

static void json_stack(struct sink *out, const struct profile *p, uint32_t stack)
{
	const struct frame *fr[STACK_MAX];
	size_t n = leaf_first(p, stack, fr, STACK_MAX);

	sink_puts(out, "\"stack\": [");
	for (size_t i = 0; i < n; i++) {
		sink_puts(out, i ? ", \"" : "\"");
		sink_json_str(out, profile__str(p, fr[i]->name));
		sink_puts(out, "\"");
	}
	sink_puts(out, "]");
}

static void json_groups(struct sink *out, const struct profile *p, const struct mem_result *r,
			const char *key, const struct mem_group *g, size_t n, unsigned limit,
			bool age)
{
	sink_printf(out, ",\n    \"%s\": [", key);
	for (size_t i = 0; i < n && (!limit || i < limit); i++) {
		sink_printf(out, "%s{\"bytes\": %" PRIu64 ", \"count\": %.0f, ", i ? ",\n      " :
			    "\n      ", g[i].bytes, g[i].count);
		if (age)
			sink_printf(out, "\"age_s\": %.6f, \"oldest_s\": %.6f, ",
				    mem_group_age_s(r, &g[i]),
				    r->end_ns > g[i].first_ts ? (r->end_ns - g[i].first_ts) / 1e9
							      : 0.0);
		json_stack(out, p, g[i].stack);
		sink_puts(out, "}");
	}
	sink_puts(out, "]");
}

int report_mem_json(struct sink *out, const struct profile *p, const struct mem_result *pre,
		    unsigned limit)
{
	struct mem_result r;
	bool own;
	int err;

	if (!report_mem_present(p))
		return 0;
	err = analysis(p, pre, &r, &own);
	if (err)
		return err;
	sink_printf(out,
		    ",\n  \"memory\": {\"sample_bytes\": %" PRIu64 ", \"allocated_bytes\": %" PRIu64
		    ", \"alloc_count\": %.0f, \"free_count\": %.0f"
		    ", \"peak_bytes\": %" PRIu64 ", \"peak_time_s\": %.6f"
		    ", \"leaked_bytes\": %" PRIu64 ", \"leaked_count\": %.0f"
		    ", \"temporary_bytes\": %" PRIu64 ", \"temporary_count\": %.0f"
		    ", \"rss_peak_bytes\": %" PRIu64 ", \"mmap_bytes\": %" PRIu64
		    ", \"mapped_peak_bytes\": %" PRIu64 ", \"mapped_end_bytes\": %" PRIu64
		    ", \"brk_peak_bytes\": %" PRIu64 ", \"brk_end_bytes\": %" PRIu64
		    ", \"calls_seen\": %" PRIu64 ", \"events_lost\": %" PRIu64,
		    r.sample_bytes, r.allocated_bytes, r.alloc_count, r.free_count, r.peak_bytes,
		    r.peak_bytes ? (r.peak_ts - r.start_ns) / 1e9 : 0.0, r.end_bytes, r.leak_count,
		    r.temp_bytes, r.temp_count, r.rss_peak, r.mmap_bytes, r.mapped_peak, r.mapped_end,
		    r.brk_peak, r.brk_end, p->stats[STAT_MEM_CALLS],
		    p->stats[STAT_MEM_LOST]);
	json_groups(out, p, &r, "leaks", r.leaks, r.nleaks, limit, true);
	json_groups(out, p, &r, "peak_stacks", r.at_peak, r.nat_peak, limit, false);
	json_groups(out, p, &r, "allocated", r.allocated, r.nallocated, limit, false);
	json_groups(out, p, &r, "churn", r.by_count, r.nallocated, limit, false);
	json_groups(out, p, &r, "temporary", r.temps, r.ntemps, limit, false);
	sink_puts(out, "\n  }");
	if (own)
		mem_result__free(&r);
	return out->err;
}
