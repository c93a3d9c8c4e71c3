// SPDX-License-Identifier: MIT
/*
 * Bottleneck rules. Each rule reads one analysis and adds a finding per thing it
 * flags (most flag one thing; GPU idle time is per device, occupancy per kernel,
 * tails per region); thresholds are the constants in findings_rules.h and are listed
 * for users in docs/findings.md. This file counts the samples the CPU rules read,
 * runs the rules of each domain (findings_*.c), sorts the findings, and pairs two
 * runs' findings for `eprof diff`.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "findings_rules.h"
#include "stacks.h"

const char *finding_severity_name(enum finding_severity s)
{
	return s == FINDING_HIGH ? "high" : s == FINDING_MEDIUM ? "medium" : "low";
}

static int cmp_finding(const void *a, const void *b)
{
	const struct finding *x = a, *y = b;

	if (x->severity != y->severity)
		return x->severity > y->severity ? -1 : 1;
	if (x->impact != y->impact)
		return x->impact > y->impact ? -1 : 1;
	return strcmp(x->id, y->id);
}

/* Whether a stack runs through a uprobe's trap or return trampoline: eprof's own cost. */
static bool in_probe(const struct rule_ctx *c, const struct frame *const *fr, size_t n)
{
	static const char *const marks[] = { "asm_exc_int3", "exc_int3", "uprobe_notify_resume",
					     "handle_swbp", "__do_sys_uretprobe",
					     "uprobe_handle_trampoline", "[uretprobe trampoline]",
					     NULL };

	for (size_t i = 0; i < n; i++)
		if ((fr[i]->kind == FRAME_KERNEL || fr[i]->kind == FRAME_SPECIAL) &&
		    in_list(str(c, fr[i]->name), marks))
			return true;
	return false;
}

/* A kernel-leaf sample (fr root first): counts it for the user frames it entered from. */
static void count_kernel_entry(struct rule_ctx *c, const struct frame *const *fr, size_t n,
			       uint64_t samples)
{
	const struct frame *entry = NULL, *own = NULL;
	uint64_t v = 0;

	for (size_t k = n; k-- > 0 && !own;) {
		if (fr[k]->kind == FRAME_KERNEL || fr[k]->kind == FRAME_SPECIAL)
			continue;
		if (!entry)
			entry = fr[k];
		if (!runtime_module(c, fr[k]) && fr[k]->kind != FRAME_UNKNOWN)
			own = fr[k];
	}
	if (!entry || !c->sys_idx)
		return;
	hmap__get(c->sys_idx, entry->name, own ? own->name : 0, &v);
	v += samples;
	if (hmap__put(c->sys_idx, entry->name, own ? own->name : 0, v))
		return;
	if (v > c->sys_best) {
		c->sys_best = v;
		c->sys_entry = entry->name;
		c->sys_own = own ? own->name : 0;
	}
}

/* A sample's innermost Python function (fr root first), if it has one. */
static void count_python(struct rule_ctx *c, const struct frame *const *fr, size_t n,
			 uint64_t samples)
{
	const struct frame *py = NULL;
	uint64_t v = 0;

	if (!c->py_idx)
		return;
	for (size_t k = n; k-- > 0 && !py;)
		if (fr[k]->kind == FRAME_PYTHON)
			py = fr[k];
	if (!py)
		return;
	c->py_samples += samples;
	hmap__get(c->py_idx, py->name, py->file, &v);
	v += samples;
	if (hmap__put(c->py_idx, py->name, py->file, v))
		return;
	if (v > c->py_best) {
		c->py_best = v;
		c->py_name = py->name;
		c->py_file = py->file;
	}
}

/* Sample totals: all, with an unnamed leaf (and its most common object), cut, in probes. */
static int count_samples(struct rule_ctx *c, uint64_t *unknown, uint64_t *truncated, uint32_t *umod)
{
	const struct profile *p = c->p;
	struct stack_counts sc;
	uint64_t best = 0;
	uint8_t *cut_of;

	*unknown = *truncated = 0;
	*umod = 0;
	if (stack_counts(p, c->f, &sc))
		return -ENOMEM;
	cut_of = stacks_truncated(p);
	/* Without these maps, no system call or Python names: not an error. */
	c->sys_idx = hmap__new(64);
	if (p->stats[STAT_PY_SAMPLES]) /* Python frames anywhere */
		c->py_idx = hmap__new(64);
	for (size_t i = 1; i < sc.n; i++) {
		uint32_t n;
		const struct frame *fr, *all[256];
		size_t nf;
		bool cut, probe;

		if (!sc.samples[i])
			continue;
		c->samples += sc.samples[i];
		c->cpu_ns += sc.weight[i];
		/* As the report counts them. */
		cut = cut_of ? cut_of[i] : stack_truncated(p, (uint32_t)i);
		*truncated += cut ? sc.samples[i] : 0;
		fr = profile__loc_frames(p, p->stacks.v[i].loc, &n);
		nf = stack_frames(p, i, all, 256, NULL);
		probe = in_probe(c, all, nf);
		count_python(c, all, nf, sc.samples[i]);
		if (!probe && n && fr[0].kind == FRAME_KERNEL)
			count_kernel_entry(c, all, nf, sc.samples[i]);
		if (probe) {
			c->probe += sc.samples[i];
			c->probe_kernel += n && fr[0].kind == FRAME_KERNEL ? sc.samples[i] : 0;
			c->probe_truncated += cut ? sc.samples[i] : 0;
		}
		if (stack_leaf_unknown(p, i)) {
			*unknown += sc.samples[i];
			/* The object's path, not the frame's short module name: the file to fix. */
			if (sc.samples[i] > best) {
				best = sc.samples[i];
				*umod = p->objects.v[p->locations.v[p->stacks.v[i].loc].object].path;
			}
		}
	}
	free(cut_of);
	stack_counts__free(&sc);
	hmap__free(c->sys_idx);
	hmap__free(c->py_idx);
	c->sys_idx = c->py_idx = NULL;
	return 0;
}

int findings_analyze(struct profile *p, const struct sample_filter *f,
		     const struct findings_pre *pre, struct findings *out)
{
	/* After the data-quality rule, in this order; from the second on, only while none failed. */
	static void (*const rules[])(struct rule_ctx *c) = {
		rule_python, rule_cpu, rule_offcpu, rule_critpath, rule_regions, rule_memory, rule_gpu,
		rule_io,
	};

	const struct hot_result *hot = pre ? pre->hot : NULL;
	struct rule_ctx c = { .p = p, .f = f, .out = out, .hot = hot, .mem = pre ? pre->mem : NULL };
	struct hot_opts ho = { .filter = *f };
	struct hot_result own = { 0 };
	uint64_t unknown, truncated;
	uint32_t umod;

	memset(out, 0, sizeof(*out));
	c.start = profile__meta_u64(p, "start_ns", 0);
	c.end = profile__meta_u64(p, "end_ns", 0);
	c.exited = p->procs.n > 0;
	for (size_t i = 0; i < p->procs.n; i++)
		c.exited &= p->procs.v[i].exit_ts != 0;
	if (count_samples(&c, &unknown, &truncated, &umod) ||
	    (!hot && hot_functions(p, &ho, &own))) {
		findings__free(out);
		return -ENOMEM;
	}
	if (!hot)
		c.hot = &own;
	/* Stacks cut at a uretprobe's trampoline are the probe's doing, counted under its cost. */
	rule_quality(&c, unknown, truncated - c.probe_truncated, umod);
	for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]) && (!i || !c.err); i++)
		rules[i](&c);
	hot_result__free(&own);

	if (c.err) {
		findings__free(out);
		return c.err;
	}
	if (out->n > 1)
		qsort(out->v, out->n, sizeof(*out->v), cmp_finding);
	return 0;
}

/*
 * Findings pair up by id and rank among the findings of that id (the second region-tail of
 * one run with the second of the other). Each side is sorted by (id, position) once, so a
 * pairing is a binary search: a rule that fires per region can fire thousands of times.
 */
struct ranked {
	const struct findings *fs;
	size_t *order; /* positions sorted by (id, position) */
	size_t *rank;  /* per position: its rank among the findings of its id */
};

static int cmp_rank_pos(const void *a, const void *b, void *arg)
{
	const struct findings *fs = arg;
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	int c = strcmp(fs->v[x].id, fs->v[y].id);

	return c ? c : x < y ? -1 : x > y;
}

static int ranked_init(struct ranked *r, const struct findings *fs)
{
	r->fs = fs;
	r->order = malloc((fs->n ? fs->n : 1) * sizeof(*r->order));
	r->rank = malloc((fs->n ? fs->n : 1) * sizeof(*r->rank));
	if (!r->order || !r->rank)
		return -ENOMEM;
	for (size_t i = 0; i < fs->n; i++)
		r->order[i] = i;
	qsort_r(r->order, fs->n, sizeof(*r->order), cmp_rank_pos, (void *)fs);
	for (size_t i = 0; i < fs->n; i++)
		r->rank[r->order[i]] = i && !strcmp(fs->v[r->order[i - 1]].id, fs->v[r->order[i]].id)
					       ? r->rank[r->order[i - 1]] + 1
					       : 0;
	return 0;
}

static void ranked_free(struct ranked *r)
{
	free(r->order);
	free(r->rank);
}

/* The finding of r with id and that rank among the findings of the id, or NULL. */
static const struct finding *ranked_find(const struct ranked *r, const char *id, size_t rank)
{
	size_t lo = 0, hi = r->fs->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (strcmp(r->fs->v[r->order[mid]].id, id) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo + rank < r->fs->n && !strcmp(r->fs->v[r->order[lo + rank]].id, id))
		return &r->fs->v[r->order[lo + rank]];
	return NULL;
}

int findings_compare(const struct findings *base, const struct findings *new,
		     struct finding_change **out, size_t *n)
{
	struct finding_change *v = malloc((base->n + new->n + 1) * sizeof(*v));
	struct ranked rb = { 0 }, rn = { 0 };
	size_t k = 0;

	*out = NULL;
	*n = 0;
	if (!v || ranked_init(&rb, base) || ranked_init(&rn, new)) {
		free(v);
		ranked_free(&rb);
		ranked_free(&rn);
		return -ENOMEM;
	}
	for (size_t i = 0; i < new->n; i++)
		if (!ranked_find(&rb, new->v[i].id, rn.rank[i]))
			v[k++] = (struct finding_change){ NULL, &new->v[i] };
	for (size_t i = 0; i < new->n; i++) {
		const struct finding *b = ranked_find(&rb, new->v[i].id, rn.rank[i]);

		if (b)
			v[k++] = (struct finding_change){ b, &new->v[i] };
	}
	for (size_t i = 0; i < base->n; i++)
		if (!ranked_find(&rn, base->v[i].id, rb.rank[i]))
			v[k++] = (struct finding_change){ &base->v[i], NULL };
	ranked_free(&rb);
	ranked_free(&rn);
	*out = v;
	*n = k;
	return 0;
}

void findings__free(struct findings *fs)
{
	free(fs->v);
	fs->v = NULL;
	fs->n = 0;
}
