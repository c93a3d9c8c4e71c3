// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "report_mem.h"
#include "report.h"
#include "units.h"
#include "analysis/memory.h"
#include "analysis/stacks.h"
#include "util/hmap.h"
#include "util/json.h"
#include "util/sink.h"
#include "util/strtab.h"

#define TEXT_FRAMES 6

bool report_mem_present(const struct profile *p)
{
	return profile__meta(p, "mem_sample_bytes") != NULL;
}

/* One-line stack: the leaf side, and the first Python frame when there is one (stacks.h). */
static const char *stack_label(const struct profile *p, uint32_t stack, char *buf, size_t len)
{
	const struct frame *fr[TEXT_FRAMES];
	bool more;
	size_t gap, n = stack_shown_frames(p, stack, fr, TEXT_FRAMES, &gap, &more), at = 0;
	char b[512];

	if (!n)
		return "[no stack]";
	buf[0] = 0;
	for (size_t i = 0; i < n && at < len; i++)
		at += snprintf(buf + at, len - at, "%s%s", !i ? "" : gap == i ? " <- ... <- " : " <- ",
			       frame_display_name(p, fr[i], b, sizeof(b)));
	if (more && at < len)
		snprintf(buf + at, len - at, " <- ...");
	return buf;
}

/* A table row: the stacks that read the same in it, merged. */
struct mem_row {
	uint32_t label; /* string id in the table's own strtab */
	uint64_t bytes;
	double count, age_bytes; /* age_bytes: age (s) x bytes, summed */
	size_t variants;
};

static int cmp_row_bytes(const void *a, const void *b)
{
	const struct mem_row *x = a, *y = b;

	return x->bytes != y->bytes ? (x->bytes > y->bytes ? -1 : 1) : (x->label > y->label);
}

static int cmp_row_count(const void *a, const void *b)
{
	const struct mem_row *x = a, *y = b;

	return x->count != y->count ? (x->count > y->count ? -1 : 1) : (x->label > y->label);
}

/*
 * The rows of groups g[0..n) by their printed stack, largest first (by calls for the churn
 * table). Returns how many, or -ENOMEM; *out and *labels are the caller's to free.
 */
static ssize_t merge_rows(const struct profile *p, const struct mem_result *r,
			  const struct mem_group *g, size_t n, bool by_calls, struct mem_row **out,
			  struct strtab **labels)
{
	struct hmap *idx = hmap__new(n ? n : 1);
	struct mem_row *v = calloc(n ? n : 1, sizeof(*v));
	size_t k = 0;
	char buf[2048];

	*labels = strtab__new();
	if (!idx || !v || !*labels) {
		hmap__free(idx);
		free(v);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		uint32_t id = strtab__intern(*labels, stack_label(p, g[i].stack, buf, sizeof(buf)));
		uint64_t at;

		if (!hmap__get(idx, id, 0, &at)) {
			at = k++;
			v[at].label = id;
			if (!id || hmap__put(idx, id, 0, at))
				break; /* out of memory: the rows so far */
		}
		v[at].bytes += g[i].bytes;
		v[at].count += g[i].count;
		v[at].age_bytes += mem_group_age_s(r, &g[i]) * g[i].bytes;
		v[at].variants++;
	}
	hmap__free(idx);
	qsort(v, k, sizeof(*v), by_calls ? cmp_row_count : cmp_row_bytes);
	*out = v;
	return k;
}

static void text_table(struct sink *out, const struct profile *p, const struct mem_result *r,
		       const char *title, const struct mem_group *g, size_t n, unsigned limit,
		       bool age)
{
	struct strtab *labels = NULL;
	struct mem_row *v = NULL;
	ssize_t k;
	char b[32];

	/* the title in the columns' line: five tables cost a line less each */
	sink_printf(out, "\n%12s %10s %s %s by stack (leaf first)\n", "Bytes", "Calls",
		    age ? "  Age(s)" : "", title);
	if (!n) {
		sink_puts(out, "  (none)\n");
		return;
	}
	k = merge_rows(p, r, g, n, g == r->by_count, &v, &labels);
	if (k < 0) {
		sink_puts(out, "  (out of memory)\n");
		return;
	}
	for (ssize_t i = 0; i < k && (!limit || i < limit); i++) {
		fmt_bytes(b, sizeof(b), v[i].bytes);
		sink_printf(out, "%12s %10.0f ", b, v[i].count);
		if (age)
			sink_printf(out, "%8.2f ", v[i].bytes ? v[i].age_bytes / v[i].bytes : 0.0);
		sink_puts(out, strtab__get(labels, v[i].label));
		if (v[i].variants > 1)
			sink_printf(out, "   (%zu stacks)", v[i].variants);
		sink_puts(out, "\n");
	}
	if (limit && k > limit)
		sink_printf(out, "... %zd more stacks (--limit 0 shows all)\n", k - (ssize_t)limit);
	free(v);
	strtab__free(labels);
}

/*
 * The caller's analysis, or a fresh one (then *own is set: free it); 1 when the record has
 * no memory data (nothing to show).
 */
static int analysis(const struct profile *p, const struct mem_result *pre, struct mem_result *r,
		    bool *own)
{
	struct mem_opts o = { .temp_ns = 1000000 };

	if (!report_mem_present(p))
		return 1;
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

	err = analysis(p, pre, &r, &own);
	if (err)
		return err > 0 ? 0 : err;
	t0 = r.start_ns;
	fmt_bytes(a, sizeof(a), r.allocated_bytes);
	fmt_bytes(pk, sizeof(pk), r.peak_bytes);
	fmt_bytes(lk, sizeof(lk), r.end_bytes);
	fmt_bytes(tp, sizeof(tp), r.temp_bytes);
	fmt_bytes(rss, sizeof(rss), r.rss_peak);
	sink_puts(out, "\n# memory: ");
	if (r.sample_bytes <= 1)
		sink_puts(out, "every allocation recorded");
	else
		sink_printf(out,
			    "one sample per %" PRIu64 " bytes allocated on average (estimates)",
			    r.sample_bytes);
	sink_printf(
	    out,
	    "   allocator calls seen %" PRIu64 ", events lost %" PRIu64 ", untracked %" PRIu64 "\n",
	    p->stats[STAT_MEM_CALLS], p->stats[STAT_MEM_LOST], p->stats[STAT_MEM_UNTRACKED]);
	sink_printf(out, "#   allocated %s in %.0f calls, freed %.0f calls\n", a, r.alloc_count,
		    r.free_count);
	sink_printf(out, "#   peak live heap %s at %.3f s; RSS peak %s at %.3f s\n", pk,
		    r.peak_bytes ? (r.peak_ts - t0) / 1e9 : 0.0, rss,
		    r.rss_peak ? (r.rss_peak_ts - t0) / 1e9 : 0.0);
	sink_printf(out,
		    "#   not freed at the end %s in %.0f blocks; temporaries (freed within 1 ms) "
		    "%s in %.0f calls\n",
		    lk, r.leak_count, tp, r.temp_count);
	fmt_bytes(a, sizeof(a), r.mapped_peak);
	fmt_bytes(pk, sizeof(pk), r.mmap_bytes);
	sink_printf(out, "#   anonymous mappings (mmap, mremap, munmap) peak %s live at %.3f s, %s "
			 "mapped in all", a, r.mapped_peak ? (r.mapped_peak_ts - t0) / 1e9 : 0.0, pk);
	fmt_bytes(a, sizeof(a), r.brk_peak);
	sink_printf(out, "; brk heap peak +%s\n", a);
	text_table(out, p, &r, "Live at the peak", r.at_peak, r.nat_peak, limit, false);
	text_table(out, p, &r, "Not freed by the end (leaks)", r.leaks, r.nleaks, limit, true);
	text_table(out, p, &r, "Allocated", r.allocated, r.nallocated, limit, false);
	text_table(out, p, &r, "Allocation calls (churn)", r.by_count, r.nallocated, limit, false);
	text_table(out, p, &r, "Temporary allocations (freed within 1 ms)", r.temps, r.ntemps,
		   limit, false);
	if (own)
		mem_result__free(&r);
	return out->err;
}

static void json_groups(struct json *j, const struct profile *p, const struct mem_result *r,
			const char *key, const struct mem_group *g, size_t n, unsigned limit,
			bool age)
{
	json_arr_open(j, 4, key);
	for (size_t i = 0; i < n && (!limit || i < limit); i++) {
		json_obj_open(j, 6, NULL);
		json_kv_u64(j, "bytes", g[i].bytes);
		json_kv_f(j, "count", g[i].count, 0);
		if (age) {
			json_kv_f(j, "age_s", mem_group_age_s(r, &g[i]), 6);
			json_kv_f(j, "oldest_s",
				  r->end_ns > g[i].first_ts ? (r->end_ns - g[i].first_ts) / 1e9 : 0.0,
				  6);
		}
		report_json_stack(j, p, g[i].stack);
		json_obj_end(j);
	}
	json_arr_end(j);
}

static void json_totals(struct json *j, const struct profile *p, const struct mem_result *r)
{
	json_kv_u64(j, "sample_bytes", r->sample_bytes);
	json_kv_u64(j, "allocated_bytes", r->allocated_bytes);
	json_kv_f(j, "alloc_count", r->alloc_count, 0);
	json_kv_f(j, "free_count", r->free_count, 0);
	json_kv_u64(j, "peak_bytes", r->peak_bytes);
	json_kv_f(j, "peak_time_s", r->peak_bytes ? (r->peak_ts - r->start_ns) / 1e9 : 0.0, 6);
	json_kv_u64(j, "leaked_bytes", r->end_bytes);
	json_kv_f(j, "leaked_count", r->leak_count, 0);
	json_kv_u64(j, "temporary_bytes", r->temp_bytes);
	json_kv_f(j, "temporary_count", r->temp_count, 0);
	json_kv_u64(j, "rss_peak_bytes", r->rss_peak);
	json_kv_u64(j, "mmap_bytes", r->mmap_bytes);
	json_kv_u64(j, "mapped_peak_bytes", r->mapped_peak);
	json_kv_u64(j, "mapped_end_bytes", r->mapped_end);
	json_kv_u64(j, "brk_peak_bytes", r->brk_peak);
	json_kv_u64(j, "brk_end_bytes", r->brk_end);
	json_kv_u64(j, "calls_seen", p->stats[STAT_MEM_CALLS]);
	json_kv_u64(j, "events_lost", p->stats[STAT_MEM_LOST]);
}

int report_mem_json(struct sink *out, const struct profile *p, const struct mem_result *pre,
		    unsigned limit)
{
	struct mem_result r;
	struct json j;
	bool own;
	int err;

	err = analysis(p, pre, &r, &own);
	if (err)
		return err > 0 ? 0 : err;
	json_init_members(&j, out, 0);
	json_obj_open(&j, 2, "memory");
	json_totals(&j, p, &r);
	json_groups(&j, p, &r, "leaks", r.leaks, r.nleaks, limit, true);
	json_groups(&j, p, &r, "peak_stacks", r.at_peak, r.nat_peak, limit, false);
	json_groups(&j, p, &r, "allocated", r.allocated, r.nallocated, limit, false);
	json_groups(&j, p, &r, "churn", r.by_count, r.nallocated, limit, false);
	json_groups(&j, p, &r, "temporary", r.temps, r.ntemps, limit, false);
	json_obj_close(&j, 2);
	if (own)
		mem_result__free(&r);
	return json_flush(&j);
}
