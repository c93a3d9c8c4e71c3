// SPDX-License-Identifier: MIT
/* Findings from allocations: leaks, a heap still growing at the end, allocation churn. */
#include <stdlib.h>

#include "findings_rules.h"
#include "memory.h"

/*
 * A record that ends with its processes alive cannot call anything a leak; a live heap
 * still climbing through the record's second half, and at its peak at the end, is the sign
 * of one (or of an unbounded cache) worth a look.
 */
static void rule_heap_growth(struct rule_ctx *c, const struct mem_result *r)
{
	struct mem_point *pts;
	uint64_t mid_ts, mid = 0, end;
	size_t n;
	struct finding *f;
	const char *where;

	if (r->end_ns <= r->start_ns || memory_timeline(c->p, 0, &pts, &n)) {
		c->err = r->end_ns <= r->start_ns ? c->err : -ENOMEM;
		return;
	}
	mid_ts = r->start_ns + (r->end_ns - r->start_ns) / 2;
	for (size_t i = 0; i < n && pts[i].ts <= mid_ts; i++)
		mid = pts[i].bytes;
	end = n ? pts[n - 1].bytes : 0;
	free(pts);
	if (end < mid + GROWTH_BYTES || end < (1 + GROWTH_SHARE) * mid || end * 10 < r->peak_bytes * 9)
		return;
	where = r->nleaks ? rule_own_frame(c, r->leaks[0].stack) : NULL;
	f = add(c, "heap-growth", FINDING_LOW, r->peak_bytes ? (double)(end - mid) / r->peak_bytes : 0);
	if (!f)
		return;
	say(f->what, "the live heap grew from %.2f MiB midway to %.2f MiB at the end of the record, "
		     "its peak%s%.120s", mid / 1048576.0, end / 1048576.0,
	    where ? "; the most still held from " : "", where ? where : "");
	say(f->advice, "a heap that keeps growing is a leak or an unbounded cache: record longer "
		       "to confirm; `eprof flamegraph --mem leaks` shows what holds it");
}

void rule_memory(struct rule_ctx *c)
{
	struct mem_opts o = {.temp_ns = 1000000, .pid = c->f ? c->f->pid : 0};
	struct mem_result r;
	struct finding *f;
	double secs;

	if (c->mem)
		r = *c->mem;
	else if (memory_analyze(c->p, &o, &r)) {
		c->err = -ENOMEM;
		return;
	}
	if (!r.present)
		goto out;
	if (c->exited && (r.end_bytes >= LEAK_BYTES ||
			  (r.end_bytes >= LEAK_MIN_BYTES &&
			   r.end_bytes >= LEAK_PEAK_SHARE * r.peak_bytes)) &&
	    (f = add(c, "memory-leak", r.end_bytes >= LEAK_BYTES ? FINDING_MEDIUM : FINDING_LOW,
		     r.peak_bytes ? (double)r.end_bytes / r.peak_bytes : 0))) {
		const char *where = r.nleaks ? rule_own_frame(c, r.leaks[0].stack) : NULL;

		say(f->what, "%.2f MiB in %.0f blocks were never freed before the process exited%s%.120s",
		    r.end_bytes / 1048576.0, r.leak_count, where ? ", the most from " : "",
		    where ? where : "");
		say(f->advice, "`eprof flamegraph --mem leaks` shows every leaking stack; free them, "
			       "or bound the cache that holds them");
	}
	if (!c->exited)
		rule_heap_growth(c, &r);
	secs = r.end_ns > r.start_ns ? (r.end_ns - r.start_ns) / 1e9 : 0;
	if (secs > 0 && r.temp_count / secs > CHURN_RATE && r.temp_count * 2 > r.alloc_count &&
	    (f = add(c, "allocation-churn", r.temp_count / secs > 10 * CHURN_RATE ? FINDING_MEDIUM
										 : FINDING_LOW,
		     r.alloc_count ? r.temp_count / r.alloc_count : 0))) {
		const char *where = r.ntemps ? rule_own_frame(c, r.temps[0].stack) : NULL;

		say(f->what, "%.0f allocations per second were freed within 1 ms (%.0f%% of all)%s%.120s",
		    r.temp_count / secs, 100.0 * r.temp_count / r.alloc_count,
		    where ? ", the most from " : "", where ? where : "");
		say(f->advice, "reuse the buffer or object across iterations (reserve(), a pool, an "
			       "arena) instead of allocating it each time");
	}
out:
	if (!c->mem)
		mem_result__free(&r);
}
