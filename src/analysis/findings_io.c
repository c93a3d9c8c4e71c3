// SPDX-License-Identifier: MIT
/* Findings from I/O by stack (record --io): a thread that spends most of its time in reads. */
#include <stdlib.h>

#include "findings_rules.h"
#include "io.h"

/*
 * A thread whose reads (and receives) take most of its time span, first to last I/O call or
 * CPU sample, is waiting for its input: a data-loading worker reading shards, a consumer on a
 * pipe. Terminals are left out (a program waiting for its user is not slow input).
 */
void rule_io(struct rule_ctx *c)
{
	struct io_result r;

	if (!io_present(c->p))
		return;
	if (io_analyze(c->p, c->f, &r)) {
		c->err = -ENOMEM;
		return;
	}
	for (size_t i = 0; i < r.nthreads; i++) {
		const struct io_thread *t = &r.threads[i];
		uint64_t span = t->last_ts > t->first_ts ? t->last_ts - t->first_ts : 0;
		double share = span ? (double)t->read_ns / span : 0, whole;
		const char *where;
		struct finding *f;
		char what[160];

		if (t->read_ns < SLOW_INPUT_MIN_NS || share < SLOW_INPUT_SHARE)
			continue;
		if (t->top_name && !strncmp(str(c, t->top_name), "/dev/pts/", 9))
			continue;
		whole = c->end > c->start ? (double)t->read_ns / (c->end - c->start) : share;
		where = t->top_stack ? rule_own_frame(c, t->top_stack) : NULL;
		snprintf(what, sizeof(what), "%.60s%s%.60s", t->top_name ? str(c, t->top_name) : "?",
			 where ? " from " : "", where ? where : "");
		f = add(c, "slow-input", share >= 0.8 ? FINDING_MEDIUM : FINDING_LOW, whole);
		if (!f)
			break;
		say(f->what, "thread %.16s (tid %u) spent %.0f%% of its %.2f s in reads: %.2f s for "
			     "%.2f MiB (%.1f MiB/s while reading), the longest on %s",
		    t->comm ? str(c, t->comm) : "?", t->tid, 100 * share, span / 1e9,
		    t->read_ns / 1e9, t->read_bytes / 1048576.0,
		    t->read_ns ? t->read_bytes / 1048576.0 / (t->read_ns / 1e9) : 0.0, what);
		say(f->advice, "its input is the bottleneck: read ahead or in parallel (more DataLoader "
			       "workers, prefetch_factor, a reader thread), use larger reads, or keep "
			       "the data in memory or on faster storage; `eprof flamegraph --io-time` "
			       "shows the reading stacks");
	}
	io_result__free(&r);
}
