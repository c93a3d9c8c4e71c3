// SPDX-License-Identifier: MIT
/* Findings from timed regions: instances far slower than the median. */
#include <stdlib.h>

#include "findings_rules.h"
#include "regions.h"

struct tail {
	uint64_t excess; /* time over the median, summed over the node's closed instances */
	const struct region_inst *slow; /* the first of the longest of them */
};

struct name_start {
	uint32_t name;
	uint64_t ts;
};

static int cmp_name_start(const void *a, const void *b)
{
	const struct name_start *x = a, *y = b;

	if (x->name != y->name)
		return x->name < y->name ? -1 : 1;
	return x->ts < y->ts ? -1 : x->ts > y->ts;
}

/* Every region event of the profile (no filter, as regions_instance() counts), sorted. */
static struct name_start *name_starts(const struct profile *p, size_t *n)
{
	struct name_start *v;

	*n = 0;
	for (size_t i = 0; i < p->events.n; i++)
		*n += p->events.v[i].kind == EVK_REGION;
	v = malloc((*n ? *n : 1) * sizeof(*v));
	if (!v)
		return NULL;
	*n = 0;
	for (size_t i = 0; i < p->events.n; i++) {
		const struct event *e = &p->events.v[i];

		if (e->kind == EVK_REGION)
			v[(*n)++] = (struct name_start){ e->name, e->ts };
	}
	qsort(v, *n, sizeof(*v), cmp_name_start);
	return v;
}

/* Entries of v before (name, ts). */
static size_t name_start_rank(const struct name_start *v, size_t n, uint32_t name, uint64_t ts)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v[mid].name < name || (v[mid].name == name && v[mid].ts < ts))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * An instance's number as regions_instance() counts: the events of its name that start
 * before it. A sorted list and a binary search rather than a scan of all events per slow
 * region, which is quadratic in a file with many tailed regions.
 */
static uint64_t region_nth(const struct name_start *v, size_t n, const struct region_inst *in)
{
	return name_start_rank(v, n, in->name, in->start) - name_start_rank(v, n, in->name, 0);
}

static bool tail_trips(const struct region_node *nd)
{
	return !nd->sampled && nd->count >= TAIL_MIN_COUNT && nd->p50_ns >= TAIL_MIN_P50 &&
	       nd->p99_ns >= TAIL_RATIO * nd->p50_ns && nd->total_ns;
}

/* One pass over the instances for every node, in instance order so ties keep the first. */
static void region_tails(const struct region_set *rs, struct tail *t)
{
	for (size_t i = 0; i < rs->n; i++) {
		const struct region_inst *in = &rs->inst[i];
		uint64_t d = in->end - in->start, p50 = rs->nodes[in->node].p50_ns;
		struct tail *tn = &t[in->node];

		if (in->open)
			continue;
		tn->excess += d > p50 ? d - p50 : 0;
		if (!tn->slow || d > tn->slow->end - tn->slow->start)
			tn->slow = in;
	}
}

/* Returns -ENOMEM when the finding could not be added. */
static int tail_finding(struct rule_ctx *c, const struct region_node *nd, const struct tail *t,
			uint64_t nth)
{
	double sh = (double)t->excess / nd->total_ns;
	struct finding *f;

	if (sh > 1)
		sh = 1;
	f = add(c, "region-tail", sh >= 0.3 ? FINDING_MEDIUM : FINDING_LOW, sh);
	if (!f)
		return -ENOMEM;
	say(f->what, "region %.120s: p99 %.3f ms against a median of %.3f ms over %llu "
		     "instances; the slowest, number %llu, took %.3f ms",
	    str(c, nd->name), nd->p99_ns / 1e6, nd->p50_ns / 1e6, (unsigned long long)nd->count,
	    (unsigned long long)nth, (t->slow->end - t->slow->start) / 1e6);
	say(f->advice, "look at what the slow ones did: `eprof critical-path --region %.80s "
		       "--instance %llu`, and `eprof trace` around it",
	    str(c, nd->name), (unsigned long long)nth);
	return 0;
}

/*
 * Slow instances of a timed region (a training step, a request): a p99 far above the
 * median. Names the slowest instance by its number, the one `eprof critical-path
 * --region NAME --instance N` takes.
 */
void rule_regions(struct rule_ctx *c)
{
	struct region_set rs;
	struct sample_filter all = { .pid = c->f->pid, .tid = c->f->tid };
	struct name_start *starts = NULL;
	struct tail *t = NULL;
	size_t nstarts = 0;

	if (regions_build(c->p, &all, &rs)) {
		c->err = -ENOMEM;
		return;
	}
	for (size_t j = 0; j < rs.nnodes; j++) {
		const struct region_node *nd = &rs.nodes[j];

		if (!tail_trips(nd))
			continue;
		/* the first node that trips pays for the pass and the sort; most files have none */
		if (!t) {
			t = calloc(rs.nnodes, sizeof(*t));
			starts = t ? name_starts(c->p, &nstarts) : NULL;
			if (!starts) {
				c->err = -ENOMEM;
				break;
			}
			region_tails(&rs, t);
		}
		if (t[j].slow && tail_finding(c, nd, &t[j], region_nth(starts, nstarts, t[j].slow)))
			break;
	}
	free(starts);
	free(t);
	region_set__free(&rs);
}
