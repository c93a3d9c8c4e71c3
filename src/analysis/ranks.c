// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/event.h"
#include "util/hmap.h"
#include "ranks.h"
#include "stacks.h"
#include "summary.h"

/*
 * Times past this (73 years of monotonic clock) are not real: the clock arithmetic below
 * keeps every sum and difference within int64 by leaving such times out.
 */
#define TIME_LIMIT (1ULL << 61)

/* A collective call of one rank; seq is its place among its (name, communicator) calls. */
struct inst {
	const char *name;
	uint32_t comm;
	uint64_t start, end, bytes;
};

struct rank_work {
	struct inst *v;
	size_t n;
};

static const char *meta_or(const struct profile *p, const char *key, const char *dflt)
{
	const char *v = profile__meta(p, key);

	return v && *v ? v : dflt;
}

static int meta_int(const struct profile *p, const char *key)
{
	const char *v = profile__meta(p, key);
	char *end;
	long x;

	if (!v || !*v)
		return -1;
	x = strtol(v, &end, 10);
	return *end || x < 0 || x > 1 << 30 ? -1 : (int)x;
}

static uint64_t meta_u64(const struct profile *p, const char *key)
{
	const char *v = profile__meta(p, key);

	return v ? strtoull(v, NULL, 10) : 0;
}

static int cmp_rank(const void *a, const void *b)
{
	const struct rank_info *x = a, *y = b;

	if ((x->rank < 0) != (y->rank < 0))
		return x->rank < 0 ? 1 : -1;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return strcmp(x->path, y->path);
}

static int cmp_inst(const void *a, const void *b)
{
	const struct inst *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	if (c)
		return c;
	if (x->comm != y->comm)
		return x->comm < y->comm ? -1 : 1;
	return x->start < y->start ? -1 : x->start > y->start;
}

static void rank_read(struct rank_info *r, const struct profile *p, const char *path)
{
	struct profile_summary s;
	uint64_t real = meta_u64(p, "clock_realtime_ns"), mono = meta_u64(p, "clock_monotonic_ns");

	r->p = p;
	r->path = path;
	r->rank = meta_int(p, "rank");
	r->local_rank = meta_int(p, "local_rank");
	r->world_size = meta_int(p, "world_size");
	r->host = meta_or(p, "hostname", "?");
	r->job_id = meta_or(p, "job_id", NULL);
	r->command = meta_or(p, "command", "");
	/* a mapping beyond the year 2116, or a clock 73 years after boot, is not one */
	r->has_clock = real && mono && real < TIME_LIMIT * 2 && mono < TIME_LIMIT * 2;
	r->offset_ns = r->has_clock ? (int64_t)real - (int64_t)mono : 0;
	profile_summarize(p, NULL, &s);
	r->wall_s = s.duration_s;
	r->cpu_s = s.weight / 1e9;
	for (size_t i = 0; i < p->events.n; i++) {
		const struct event *e = &p->events.v[i];

		if (e->kind != EVK_REGION || !(e->flags & EVF_REGION_COMM))
			continue;
		r->comm_s += e->dur / 1e9;
		r->colls += (e->flags & EVF_REGION_COLL) != 0;
	}
}

/* The blocking collective calls of a rank, sorted by (name, communicator, start). */
static int rank_insts(const struct rank_info *r, struct rank_work *w)
{
	const struct profile *p = r->p;

	w->v = calloc(r->colls + 1, sizeof(*w->v));
	if (!w->v)
		return -ENOMEM;
	for (size_t i = 0; i < p->events.n; i++) {
		const struct event *e = &p->events.v[i];

		if (e->kind != EVK_REGION || !(e->flags & EVF_REGION_COLL) || w->n >= r->colls ||
		    e->ts >= TIME_LIMIT || e->dur >= TIME_LIMIT)
			continue;
		w->v[w->n++] = (struct inst){ profile__str(p, e->name), ev_region_comm(e), e->ts,
					      e->ts + e->dur, ev_region_bytes(e) };
	}
	qsort(w->v, w->n, sizeof(*w->v), cmp_inst);
	return 0;
}

/* The run of (name, comm) in w starting at or after *from: its first index and length. */
static size_t find_run(const struct rank_work *w, const char *name, uint32_t comm, size_t *first)
{
	size_t i = 0, n = 0;

	while (i < w->n && (strcmp(w->v[i].name, name) || w->v[i].comm != comm))
		i++;
	*first = i;
	while (i + n < w->n && !strcmp(w->v[i + n].name, name) && w->v[i + n].comm == comm)
		n++;
	return n;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

/* A matched instance: (name, comm) run starts per rank, and k. */
struct match {
	size_t *first; /* per rank */
	size_t k;
};

/*
 * Ranks on another host than the first rank: the median of (first rank's end - this rank's
 * end) over the matched instances, applied to its offset.
 */
static int correct_clocks(struct job_summary *s, struct rank_work *w, const struct match *m,
			  size_t nm)
{
	int64_t *d = malloc((nm + 1) * sizeof(*d));

	if (!d)
		return -ENOMEM;
	for (size_t r = 1; r < s->n; r++) {
		struct rank_info *ri = &s->ranks[r];

		if (!strcmp(ri->host, s->ranks[0].host) || !nm)
			continue;
		for (size_t i = 0; i < nm; i++) {
			const struct inst *a = &w[0].v[m[i].first[0] + m[i].k];
			const struct inst *b = &w[r].v[m[i].first[r] + m[i].k];

			d[i] = ((int64_t)a->end + s->ranks[0].offset_ns) -
			       ((int64_t)b->end + ri->offset_ns);
		}
		qsort(d, nm, sizeof(*d), cmp_i64);
		ri->correction_ns = d[nm / 2];
		/* a real correction is seconds at most: clocks hours apart are not corrected */
		if (ri->correction_ns > (int64_t)(TIME_LIMIT / 2) ||
		    ri->correction_ns < -(int64_t)(TIME_LIMIT / 2))
			ri->correction_ns = 0;
		ri->offset_ns += ri->correction_ns;
	}
	free(d);
	return 0;
}

struct interval {
	uint64_t t0, t1; /* the straggler's monotonic ns */
};

static int cmp_interval(const void *a, const void *b)
{
	const struct interval *x = a, *y = b;

	return x->t0 < y->t0 ? -1 : x->t0 > y->t0;
}

/*
 * What a stack runs, as a user would name it: its innermost Python function when it has
 * Python frames (the interpreter's and libraries' native leaves say little), else its
 * innermost named user function (not a kernel or synthetic frame). Its name's string id, 0
 * none.
 */
static uint32_t user_leaf(const struct profile *p, uint32_t node)
{
	const struct frame *fr[256];
	size_t n = stack_frames(p, node, fr, 256, NULL);

	for (size_t i = n; i-- > 0;)
		if (fr[i]->kind == FRAME_PYTHON && fr[i]->name)
			return fr[i]->name;
	for (size_t i = n; i-- > 0;) {
		const char *name = profile__str(p, fr[i]->name);

		if (fr[i]->kind == FRAME_KERNEL || fr[i]->kind == FRAME_SPECIAL || !name || !*name)
			continue;
		return fr[i]->name;
	}
	return 0;
}

/* What the straggler ran while the others waited for it: its hottest user function. */
static int straggler_func(struct job_summary *s, struct interval *iv, size_t niv)
{
	const struct profile *p = s->ranks[s->straggler].p;
	struct hmap *count = hmap__new(64);
	uint64_t best = 0, total = 0;
	uint32_t best_name = 0;

	if (!count)
		return -ENOMEM;
	qsort(iv, niv, sizeof(*iv), cmp_interval);
	for (size_t i = 0; i < p->samples.n; i++) {
		const struct sample *sm = &p->samples.v[i];
		size_t lo = 0, hi = niv;
		uint32_t id;
		uint64_t c = 0;

		/* the last interval starting at or before the sample */
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;

			if (iv[mid].t0 <= sm->ts)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (!lo || sm->ts >= iv[lo - 1].t1 || !sm->stack)
			continue;
		id = user_leaf(p, sm->stack);
		total++;
		if (!id)
			continue;
		hmap__get(count, id, 0, &c);
		hmap__put(count, id, 0, ++c);
		if (c > best) {
			best = c;
			best_name = id;
		}
	}
	s->straggler_samples = total;
	if (best_name && total) {
		snprintf(s->straggler_func, sizeof(s->straggler_func), "%s",
			 profile__str(p, best_name));
		s->straggler_func_share = (double)best / total;
	}
	hmap__free(count);
	return 0;
}

static struct coll_op *op_for(struct job_summary *s, const char *name, uint32_t id)
{
	struct coll_op *o;

	for (size_t i = 0; i < s->nops; i++)
		if (!strcmp(s->ops[i].label, name))
			return &s->ops[i];
	o = realloc(s->ops, (s->nops + 1) * sizeof(*o));
	if (!o)
		return NULL;
	s->ops = o;
	o = &s->ops[s->nops++];
	memset(o, 0, sizeof(*o));
	o->name = id;
	o->label = name;
	return o;
}

/* Every instance of every (name, comm) run of the first rank that each rank has. */
static int match_all(struct job_summary *s, struct rank_work *w, struct match **out, size_t *nout)
{
	struct match *m = NULL;
	size_t nm = 0, cap = 0;

	for (size_t i = 0; i < w[0].n;) {
		const struct inst *x = &w[0].v[i];
		size_t *first = calloc(s->n, sizeof(*first)), len = SIZE_MAX, maxlen = 0, len0 = 0;

		if (!first)
			goto nomem;
		while (i + len0 < w[0].n && !strcmp(w[0].v[i + len0].name, x->name) &&
		       w[0].v[i + len0].comm == x->comm)
			len0++;
		for (size_t r = 0; r < s->n; r++) {
			size_t l = find_run(&w[r], x->name, x->comm, &first[r]);

			len = l < len ? l : len;
			maxlen = l > maxlen ? l : maxlen;
		}
		s->unmatched += maxlen - len;
		for (size_t k = 0; k < len; k++) {
			if (nm == cap) {
				struct match *t = realloc(m, (cap = cap ? 2 * cap : 64) * sizeof(*m));

				if (!t) {
					if (!k)
						free(first);
					goto nomem;
				}
				m = t;
			}
			m[nm++] = (struct match){ first, k }; /* k == 0 owns first */
		}
		if (!len)
			free(first);
		i += len0;
	}
	*out = m;
	*nout = nm;
	return 0;
nomem:
	*out = m;
	*nout = nm;
	return -ENOMEM;
}

struct job_priv {
	struct rank_work *w; /* per rank (sorted as job_summary.ranks) */
	struct match *m;
	size_t nm;
};

static void free_matches(struct match *m, size_t nm)
{
	for (size_t i = 0; i < nm; i++)
		if (m[i].k == 0)
			free(m[i].first);
	free(m);
}

static int waits(struct job_summary *s, struct rank_work *w, const struct match *m, size_t nm)
{
	struct interval *iv = NULL;
	size_t niv = 0;
	int64_t *arr = malloc(s->n * sizeof(*arr));
	int err = 0;

	if (!arr)
		return -ENOMEM;
	s->matched = nm;
	for (size_t i = 0; i < nm; i++) {
		const struct inst *x0 = &w[0].v[m[i].first[0] + m[i].k];
		struct coll_op *op = op_for(s, x0->name, 0);
		int64_t last = INT64_MIN, first = INT64_MAX;
		size_t lr = 0;

		if (!op) {
			err = -ENOMEM;
			break;
		}
		for (size_t r = 0; r < s->n; r++) {
			const struct inst *x = &w[r].v[m[i].first[r] + m[i].k];

			arr[r] = (int64_t)x->start + s->ranks[r].offset_ns;
			if (arr[r] > last) {
				last = arr[r];
				lr = r;
			}
			first = arr[r] < first ? arr[r] : first;
		}
		op->instances++;
		op->bytes = x0->bytes;
		if ((last - first) / 1e9 > op->max_spread_s)
			op->max_spread_s = (last - first) / 1e9;
		s->ranks[lr].last++;
		for (size_t r = 0; r < s->n; r++) {
			double wt = (last - arr[r]) / 1e9;

			s->ranks[r].wait_s += wt;
			op->wait_s += wt;
			s->wait_s += wt;
		}
	}
	/* the straggler: last at the most instances, at half of them or more */
	s->straggler = -1;
	for (size_t r = 0; nm && r < s->n; r++)
		if (s->straggler < 0 || s->ranks[r].last > s->ranks[s->straggler].last)
			s->straggler = (int)r;
	if (s->straggler >= 0 && s->n > 1 && nm >= 2 &&
	    2 * s->ranks[s->straggler].last >= nm) {
		size_t st = (size_t)s->straggler;

		s->straggler_share = (double)s->ranks[st].last / nm;
		iv = malloc(nm * sizeof(*iv));
		if (!iv) {
			free(arr);
			return -ENOMEM;
		}
		for (size_t i = 0; i < nm; i++) {
			int64_t last = INT64_MIN, first = INT64_MAX, mine = 0;
			size_t lr = 0;

			for (size_t r = 0; r < s->n; r++) {
				const struct inst *x = &w[r].v[m[i].first[r] + m[i].k];
				int64_t a = (int64_t)x->start + s->ranks[r].offset_ns;

				if (a > last) {
					last = a;
					lr = r;
				}
				if (r != st && a < first)
					first = a;
				if (r == st)
					mine = a;
			}
			if (lr != st)
				continue;
			for (size_t r = 0; r < s->n; r++)
				if (r != st)
					s->others_wait_s +=
					    (mine - ((int64_t)w[r].v[m[i].first[r] + m[i].k].start +
						     s->ranks[r].offset_ns)) / 1e9;
			if (first < mine)
				iv[niv++] = (struct interval){
					(uint64_t)(first - s->ranks[st].offset_ns),
					(uint64_t)(mine - s->ranks[st].offset_ns) };
		}
		err = straggler_func(s, iv, niv);
	} else {
		s->straggler = -1;
	}
	free(iv);
	free(arr);
	return err;
}

/*
 * Offsets relative to the first rank's (the job's clock is its monotonic clock); a rank whose
 * offset from it is beyond 73 years has no usable mapping.
 */
static void rebase_clocks(struct job_summary *s)
{
	int64_t base = s->n && s->ranks[0].has_clock ? s->ranks[0].offset_ns : 0;

	for (size_t i = 0; i < s->n; i++) {
		struct rank_info *r = &s->ranks[i];
		int64_t rel;

		if (!r->has_clock || !s->ranks[0].has_clock ||
		    __builtin_sub_overflow(r->offset_ns, base, &rel) ||
		    rel > (int64_t)TIME_LIMIT || rel < -(int64_t)TIME_LIMIT) {
			r->has_clock = r->has_clock && i == 0;
			rel = 0;
		}
		r->offset_ns = rel;
	}
}

static void check_ranks(struct job_summary *s)
{
	s->world_size = -1;
	for (size_t i = 0; i < s->n; i++) {
		const struct rank_info *r = &s->ranks[i];

		if (r->world_size > s->world_size)
			s->world_size = r->world_size;
		if (i && (!r->job_id) != (!s->ranks[0].job_id))
			s->mixed_jobs = true;
		if (i && r->job_id && s->ranks[0].job_id && strcmp(r->job_id, s->ranks[0].job_id))
			s->mixed_jobs = true;
		if (i && r->rank >= 0 && r->rank == s->ranks[i - 1].rank)
			s->duplicate_ranks = true;
		if (strcmp(r->host, s->ranks[0].host))
			s->mixed_hosts = true;
	}
	if (s->world_size <= 0 || s->world_size > 1 << 20)
		return;
	s->missing = calloc((size_t)s->world_size, sizeof(*s->missing));
	for (int k = 0; s->missing && k < s->world_size; k++) {
		bool have = false;

		for (size_t i = 0; i < s->n && !have; i++)
			have = s->ranks[i].rank == k;
		if (!have)
			s->missing[s->nmissing++] = k;
	}
}

int job_analyze(struct profile *const *profs, char *const *paths, size_t n,
		struct job_summary *out)
{
	struct rank_work *w;
	struct match *m = NULL;
	struct job_priv *pv;
	size_t nm = 0;
	int err = 0;

	memset(out, 0, sizeof(*out));
	out->straggler = -1;
	out->ranks = calloc(n + 1, sizeof(*out->ranks));
	w = calloc(n + 1, sizeof(*w));
	if (!out->ranks || !w) {
		free(w);
		return -ENOMEM;
	}
	out->n = n;
	for (size_t i = 0; i < n; i++)
		rank_read(&out->ranks[i], profs[i], paths[i]);
	qsort(out->ranks, n, sizeof(*out->ranks), cmp_rank);
	rebase_clocks(out);
	check_ranks(out);
	for (size_t i = 0; !err && i < n; i++)
		err = rank_insts(&out->ranks[i], &w[i]);
	if (!err && n)
		err = match_all(out, w, &m, &nm);
	if (!err && out->mixed_hosts)
		err = correct_clocks(out, w, m, nm);
	if (!err)
		err = waits(out, w, m, nm);
	pv = calloc(1, sizeof(*pv));
	if (!err && pv) {
		*pv = (struct job_priv){ w, m, nm };
		out->priv = pv;
		return 0;
	}
	free(pv);
	free_matches(m, nm);
	for (size_t i = 0; i < n; i++)
		free(w[i].v);
	free(w);
	return err ? err : -ENOMEM;
}

void job_summary_free(struct job_summary *s)
{
	struct job_priv *pv = s->priv;

	if (pv) {
		free_matches(pv->m, pv->nm);
		for (size_t i = 0; i < s->n; i++)
			free(pv->w[i].v);
		free(pv->w);
		free(pv);
	}
	free(s->ranks);
	free(s->missing);
	free(s->ops);
	memset(s, 0, sizeof(*s));
}

void rank_label(const struct rank_info *r, char *buf, size_t len)
{
	if (r->rank >= 0)
		snprintf(buf, len, "rank %d (%s)", r->rank, r->host);
	else
		snprintf(buf, len, "%s (%s)", r->path, r->host);
}

/* --- the critical path across ranks --- */

static const struct inst *inst_of(const struct job_priv *pv, size_t i, size_t r)
{
	return &pv->w[r].v[pv->m[i].first[r] + pv->m[i].k];
}

static const struct job_priv *path_priv;
static size_t path_rank;

static int cmp_end_on_rank(const void *a, const void *b)
{
	uint64_t x = inst_of(path_priv, *(const uint32_t *)a, path_rank)->end;
	uint64_t y = inst_of(path_priv, *(const uint32_t *)b, path_rank)->end;

	return x < y ? -1 : x > y;
}

static int seg_add(struct job_path *p, size_t *cap, struct job_seg sg)
{
	if (sg.t1 <= sg.t0)
		return 0;
	if (p->nsegs == *cap) {
		struct job_seg *v = realloc(p->segs, (*cap = *cap ? 2 * *cap : 64) * sizeof(*v));

		if (!v)
			return -ENOMEM;
		p->segs = v;
	}
	p->segs[p->nsegs++] = sg;
	return 0;
}

static int64_t meta_time(const struct rank_info *r, const char *key)
{
	uint64_t t = meta_u64(r->p, key);

	return (int64_t)(t < TIME_LIMIT ? t : 0) + r->offset_ns;
}

/* Each rank's hottest function over its compute stretches of the path. */
static int path_funcs(const struct job_summary *s, struct job_path *p)
{
	struct interval *iv = malloc((p->nsegs + 1) * sizeof(*iv));
	int err = 0;

	if (!iv)
		return -ENOMEM;
	for (size_t r = 0; !err && r < s->n; r++) {
		struct job_summary one = { .ranks = s->ranks, .n = s->n, .straggler = (int)r };
		size_t niv = 0;

		for (size_t i = 0; i < p->nsegs; i++)
			if (p->segs[i].rank == r && !p->segs[i].coll)
				iv[niv++] = (struct interval){
					(uint64_t)(p->segs[i].t0 - s->ranks[r].offset_ns),
					(uint64_t)(p->segs[i].t1 - s->ranks[r].offset_ns) };
		if (!niv)
			continue;
		err = straggler_func(&one, iv, niv);
		memcpy(p->ranks[r].func, one.straggler_func, sizeof(p->ranks[r].func));
		p->ranks[r].func_share = one.straggler_func_share;
	}
	free(iv);
	return err;
}

int job_path(const struct job_summary *s, struct job_path *out)
{
	const struct job_priv *pv = s->priv;
	uint32_t **by_end = NULL;
	size_t cap = 0, cur = 0, steps = 0;
	int64_t t;
	int err = 0;

	memset(out, 0, sizeof(*out));
	if (!pv || !s->n)
		return -EINVAL;
	out->ranks = calloc(s->n, sizeof(*out->ranks));
	by_end = calloc(s->n, sizeof(*by_end));
	if (!out->ranks || !by_end) {
		err = -ENOMEM;
		goto out;
	}
	/* each rank's matched instances by their end on it */
	for (size_t r = 0; r < s->n; r++) {
		by_end[r] = malloc((pv->nm + 1) * sizeof(**by_end));
		if (!by_end[r]) {
			err = -ENOMEM;
			goto out;
		}
		for (size_t i = 0; i < pv->nm; i++)
			by_end[r][i] = (uint32_t)i;
		path_priv = pv;
		path_rank = r;
		qsort(by_end[r], pv->nm, sizeof(**by_end), cmp_end_on_rank);
	}
	/* from the rank that ends last */
	for (size_t r = 1; r < s->n; r++)
		if (meta_time(&s->ranks[r], "end_ns") > meta_time(&s->ranks[cur], "end_ns"))
			cur = r;
	t = out->t1 = meta_time(&s->ranks[cur], "end_ns");
	while (!err && steps++ <= pv->nm) {
		const struct rank_info *ri = &s->ranks[cur];
		size_t lo = 0, hi = pv->nm, last = 0;
		int64_t end, arrive = INT64_MIN;
		const struct inst *x;
		uint32_t i;

		/* the latest instance that ended on this rank by t */
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;

			if ((int64_t)inst_of(pv, by_end[cur][mid], cur)->end + ri->offset_ns <= t)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (!lo)
			break;
		i = by_end[cur][lo - 1];
		x = inst_of(pv, i, cur);
		end = (int64_t)x->end + ri->offset_ns;
		for (size_t r = 0; r < s->n; r++) {
			int64_t a = (int64_t)inst_of(pv, i, r)->start + s->ranks[r].offset_ns;

			if (a > arrive) {
				arrive = a;
				last = r;
			}
		}
		if (arrive >= t)
			break; /* clocks that disagree: no progress */
		err = seg_add(out, &cap, (struct job_seg){ cur, end, t, NULL, 0 });
		err = err ?: seg_add(out, &cap, (struct job_seg){ cur, arrive, end, x->name,
								  pv->m[i].k + 1 });
		t = arrive;
		cur = last;
	}
	out->t0 = meta_time(&s->ranks[cur], "start_ns");
	if (!err && out->t0 < t)
		err = seg_add(out, &cap, (struct job_seg){ cur, out->t0, t, NULL, 0 });
	for (size_t i = 0; !err && i < out->nsegs; i++) {
		const struct job_seg *g = &out->segs[i];
		double d = (g->t1 - g->t0) / 1e9;

		if (g->coll)
			out->ranks[g->rank].comm_s += d;
		else
			out->ranks[g->rank].compute_s += d;
	}
	if (!err)
		err = path_funcs(s, out);
out:
	for (size_t r = 0; by_end && r < s->n; r++)
		free(by_end[r]);
	free(by_end);
	if (err)
		job_path_free(out);
	return err;
}

void job_path_free(struct job_path *p)
{
	free(p->segs);
	free(p->ranks);
	memset(p, 0, sizeof(*p));
}
