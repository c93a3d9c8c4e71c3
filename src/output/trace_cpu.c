// SPDX-License-Identifier: MIT
/*
 * CPU samples in `eprof trace`: each thread's samples in time order become nested slices,
 * one per frame for as long as consecutive samples share it, with CPU utilisation counters
 * per process.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/stacks.h"
#include "util/json.h"
#include "util/log.h"
#include "util/vec.h"
#include "trace.h"

/*
 * Frames a sample contributes to CPU slices, root side first; deeper ones are cut and one
 * "[truncated]" slice stands for them. Real stacks stay far below this (the recorder keeps at
 * most ~770 locations of a few inline frames each); a crafted file with thousands of frames
 * per sample would otherwise write that many slices per sample.
 */
#define MAX_FRAMES 1024
/*
 * CPU slices of one trace: about 200 MB of JSON, where `eprof trace` already warns that
 * viewers struggle. A few hundred bytes of crafted samples, each off CPU and deep, would
 * otherwise ask for gigabytes; past this the remaining samples open no slices.
 */
#define MAX_SLICES (2u << 20)
#define CUT_FRAG ",\"name\":\"[truncated]\",\"cat\":\"[eprof]\"}"

struct tthread {
	uint32_t pid, tid;
	uint64_t weight;
	size_t first, n;
};

struct frag {
	uint32_t off, len;
};

struct cpu_ctx {
	const struct profile *p;
	const struct trace_opts *o;
	struct trace_writer *w;
	struct trace_stats *st;
	uint32_t *order; /* sample indexes by (pid, tid, ts) */
	struct tthread *thr;
	size_t nthr;
	uint64_t t_min, t_max, period;
	/* ',"name":"...","cat":"..."}' per (name, module), rendered once */
	struct hmap *frag_idx;
	uint32_t *frag_of_frame; /* profile frame index -> frag index + 1 */
	struct frag *frags;
	size_t nfrags, capfrags;
	char *arena;
	size_t arena_len, arena_cap;
	/*
	 * Per stack node: frames from the root through it (saturating at MAX_FRAMES + 1), the
	 * nearest ancestor with frames, and the deepest node of its path whose frames start
	 * below MAX_FRAMES. Common prefixes then cost the frames that differ, not the depth.
	 */
	uint32_t *fdepth, *fup, *cut;
	struct frame cut_frame; /* stands for the frames beyond MAX_FRAMES */
	struct frag cut_frag;
	/* per-thread work arrays */
	uint32_t *lcp;
	uint32_t *endk;
	const struct frame **fa, **fb; /* MAX_FRAMES + 1, indexed by depth */
	uint64_t slices; /* CPU slices written; none past MAX_SLICES (or the options' cap) */
	/* CPU utilisation buckets of the current process, and which of them are not 0 */
	double *bucket;
	uint32_t *busy;
	size_t nbuckets, nbusy;
	uint64_t bucket_ns;
};

static void arena_put(void *ctx, const void *p, size_t n)
{
	struct cpu_ctx *c = ctx;

	if (c->arena_cap == SIZE_MAX)
		return;
	if (arr_grow(c->arena, c->arena_cap, c->arena_len + n)) {
		c->arena_cap = SIZE_MAX; /* marks ENOMEM; checked by the caller */
		return;
	}
	memcpy(c->arena + c->arena_len, p, n);
	c->arena_len += n;
}

static const struct frag *frame_frag_slow(struct cpu_ctx *c, const struct frame *f)
{
	uint64_t idx;
	size_t off = c->arena_len;

	if (hmap__get(c->frag_idx, f->name, f->module, &idx))
		return &c->frags[idx];
	if (arr_grow(c->frags, c->capfrags, c->nfrags + 1))
		return NULL;
	arena_put(c, ",\"name\":\"", 9);
	json_escape(profile__str(c->p, f->name), arena_put, c);
	arena_put(c, "\",\"cat\":\"", 9);
	json_escape(profile__str(c->p, f->module), arena_put, c);
	arena_put(c, "\"}", 2);
	if (c->arena_cap == SIZE_MAX || c->arena_len - off > UINT32_MAX)
		return NULL;
	c->frags[c->nfrags] = (struct frag){(uint32_t)off, (uint32_t)(c->arena_len - off)};
	if (hmap__put(c->frag_idx, f->name, f->module, c->nfrags))
		return NULL;
	return &c->frags[c->nfrags++];
}

static const struct frag *cut_frag(struct cpu_ctx *c)
{
	size_t off = c->arena_len;

	if (c->cut_frag.len)
		return &c->cut_frag;
	arena_put(c, CUT_FRAG, sizeof(CUT_FRAG) - 1);
	if (c->arena_cap == SIZE_MAX)
		return NULL;
	c->cut_frag = (struct frag){(uint32_t)off, (uint32_t)(c->arena_len - off)};
	return &c->cut_frag;
}

static inline const struct frag *frame_frag(struct cpu_ctx *c, const struct frame *f)
{
	size_t fi = (size_t)(f - c->p->frames.v);
	const struct frag *fr;

	if (f == &c->cut_frame)
		return cut_frag(c);
	if (c->frag_of_frame[fi])
		return &c->frags[c->frag_of_frame[fi] - 1];
	fr = frame_frag_slow(c, f);
	if (fr)
		c->frag_of_frame[fi] = (uint32_t)(fr - c->frags) + 1;
	return fr;
}

static int cmp_tthread(const void *a, const void *b)
{
	const struct tthread *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

static const struct sample *g_samples; /* for qsort of one thread's range */

static int cmp_by_ts(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	uint64_t tx = g_samples[x].ts, ty = g_samples[y].ts;

	if (tx != ty)
		return tx < ty ? -1 : 1;
	return x < y ? -1 : x > y;
}

/* Groups the filtered samples by thread (pid, tid order), each thread's in time order. */
static int order_samples(struct cpu_ctx *c)
{
	const struct profile *p = c->p;
	struct hmap *idx = hmap__new(64);
	uint32_t *prov = malloc((p->samples.n ? p->samples.n : 1) * sizeof(*prov));
	uint32_t *rank = NULL;
	size_t *fill = NULL, cap = 0, total = 0;
	int err = -ENOMEM;

	c->t_min = UINT64_MAX;
	if (!idx || !prov)
		goto out;
	for (size_t i = 0; i < p->samples.n; i++) {
		const struct sample *s = &p->samples.v[i];
		uint64_t k;

		prov[i] = UINT32_MAX;
		if (!sample_filter__match(&c->o->filter, s))
			continue;
		if (!hmap__get(idx, s->pid, s->tid, &k)) {
			if (arr_grow(c->thr, cap, c->nthr + 1))
				goto out;
			c->thr
[c->nthr] = (struct tthread){.pid = s->pid, .tid = s->tid};
			k = c->nthr++;
			if (hmap__put(idx, s->pid, s->tid, k))
				goto out;
		}
		prov[i] = (uint32_t)k;
		c->thr[k].n++;
		c->thr[k].weight += s->weight;
		total++;
		if (s->ts < c->t_min)
			c->t_min = s->ts;
		if (s->ts > c->t_max)
			c->t_max = s->ts;
	}
	c->order = malloc((total ? total : 1) * sizeof(*c->order));
	rank = malloc((c->nthr ? c->nthr : 1) * sizeof(*rank));
	fill = malloc((c->nthr ? c->nthr : 1) * sizeof(*fill));
	if (!c->order || !rank || !fill)
		goto out;
	/* remember the provisional id in .first while sorting */
	for (size_t t = 0; t < c->nthr; t++)
		c->thr[t].first = t;
	if (c->nthr)
		qsort(c->thr, c->nthr, sizeof(*c->thr), cmp_tthread);
	for (size_t t = 0, off = 0; t < c->nthr; t++) {
		rank[c->thr[t].first] = (uint32_t)t;
		c->thr[t].first = off;
		fill[t] = off;
		off += c->thr[t].n;
	}
	for (size_t i = 0; i < p->samples.n; i++)
		if (prov[i] != UINT32_MAX)
			c->order[fill[rank[prov[i]]]++] = (uint32_t)i;
	g_samples = p->samples.v;
	for (size_t t = 0; t < c->nthr; t++) {
		uint32_t *o = c->order + c->thr[t].first;

		for (size_t j = 1; j < c->thr[t].n; j++) {
			if (g_samples[o[j]].ts < g_samples[o[j - 1]].ts) {
				qsort(o, c->thr[t].n, sizeof(*o), cmp_by_ts);
				break;
			}
		}
	}
	err = 0;
out:
	hmap__free(idx);
	free(prov);
	free(rank);
	free(fill);
	return err;
}

static inline bool contiguous(const struct cpu_ctx *c, const struct sample *prev,
			      const struct sample *s)
{
	uint64_t w = s->weight ? s->weight : c->period;

	/* cpu-clock samples fire every `weight` ns of running: a longer gap is time off CPU */
	return s->ts - prev->ts <= w + w / 2;
}

static inline uint32_t leaf_of(const struct cpu_ctx *c, uint32_t si)
{
	uint32_t node = c->p->samples.v[si].stack;

	return node < c->p->stacks.n ? node : 0;
}

/* Length of a stack's frame list: at most MAX_FRAMES frames, then the cut marker. */
static inline uint32_t stack_len(const struct cpu_ctx *c, uint32_t node)
{
	return c->fdepth[node] > MAX_FRAMES ? MAX_FRAMES + 1 : c->fdepth[node];
}

/*
 * Frames of a stack, root first, inline frames expanded (outer before inner), as
 * stack_frames() gives them: fills buf[from .. len) with the frames at those depths and
 * returns len. Walks only the nodes that hold them.
 */
static uint32_t frames_from(const struct cpu_ctx *c, uint32_t node, uint32_t from,
			    const struct frame **buf)
{
	const struct profile *p = c->p;
	uint32_t len = stack_len(c, node);

	if (len > MAX_FRAMES)
		buf[MAX_FRAMES] = &c->cut_frame;
	for (uint32_t v = c->cut[node]; v; v = c->fup[v]) {
		uint32_t nf, start = c->fdepth[c->fup[v]], pos;
		const struct frame *fr = profile__loc_frames(p, p->stacks.v[v].loc, &nf);

		if (start + (uint64_t)nf <= from)
			break;
		for (pos = start > from ? start : from; pos - start < nf && pos < MAX_FRAMES; pos++)
			buf[pos] = &fr[nf - 1 - (pos - start)];
	}
	return len;
}

/*
 * How many root-side frames two stacks share. Frames continue by function name alone, as
 * viewers key slices: two same-named functions of two binaries meeting at one depth would
 * otherwise end and start a slice of one name at one instant, which speedscope nests inside
 * each other. The slice keeps the binary of its first sample.
 *
 * Up to their common ancestor in the trie the frames are the same; only below it are they
 * expanded and compared, so a sample costs what changed, not its depth.
 */
static uint32_t stack_lcp(struct cpu_ctx *c, uint32_t x, uint32_t y)
{
	uint32_t u = c->cut[x], v = c->cut[y], i, n, nx = stack_len(c, x), ny = stack_len(c, y);

	if (x == y)
		return nx;
	while (u != v) {
		uint32_t su = c->fdepth[c->fup[u]], sv = c->fdepth[c->fup[v]];

		if (su >= sv)
			u = c->fup[u];
		if (sv >= su)
			v = c->fup[v];
	}
	n = nx < ny ? nx : ny;
	i = c->fdepth[u] < n ? c->fdepth[u] : n;
	if (i < n) {
		frames_from(c, x, i, c->fa);
		frames_from(c, y, i, c->fb);
		while (i < n && (c->fa[i] == c->fb[i] || c->fa[i]->name == c->fb[i]->name))
			i++;
	}
	return i;
}

static void add_busy(struct cpu_ctx *c, const struct sample *s)
{
	size_t b;

	if (!c->bucket || !s->weight)
		return;
	b = (s->ts - c->t_min) / c->bucket_ns;
	if (b >= c->nbuckets)
		return;
	if (c->bucket[b] == 0)
		c->busy[c->nbusy++] = (uint32_t)b;
	c->bucket[b] += (double)s->weight;
}

/* Pass A: per sample, how many root-side frames it shares with the next one (0 across a gap). */
static void thread_lcp(struct cpu_ctx *c, const struct tthread *t)
{
	const struct sample *sv = c->p->samples.v;
	const uint32_t *ord = c->order + t->first;
	uint32_t *L = c->lcp;

	for (size_t j = 0; j + 1 < t->n; j++)
		L[j] = contiguous(c, &sv[ord[j]], &sv[ord[j + 1]])
			       ? stack_lcp(c, leaf_of(c, ord[j]), leaf_of(c, ord[j + 1]))
			       : 0;
	L[t->n - 1] = 0;
}

/*
 * Whether a frame named like the first slice opening at a boundary ends there.
 * Viewers that order same-time events by name (speedscope opens before it
 * closes when the names match) would nest the new slice in the old one.
 */
static bool name_closes(struct cpu_ctx *c, uint32_t prev, uint32_t a, const struct frame *f)
{
	uint32_t pn = frames_from(c, prev, a, c->fb);

	for (uint32_t d = a; d < pn; d++)
		if (c->fb[d]->name == f->name)
			return true;
	return false;
}

/* Writes the slices of frames a..n-1 of sample j, which begin at begin_us, parents first. */
static int open_slices(struct cpu_ctx *c, const uint32_t *ord, size_t j, const struct frame **fr,
		       uint32_t a, size_t n, uint64_t begin_us, const char *prefix, size_t prefix_len)
{
	const struct sample *sv = c->p->samples.v;
	uint32_t top, last_k = UINT32_MAX;
	size_t k = j, hlen, blen = 0;
	char b[32], head[160];

	for (top = (uint32_t)n; top > a; k++)
		while (top > a && top > c->lcp[k])
			c->endk[--top] = (uint32_t)k;
	/* the slices opened here share their head ('"ph":"X",...,"dur":'), and often their end */
	memcpy(head, prefix, prefix_len);
	hlen = prefix_len + json_fmt_u64(head + prefix_len, begin_us);
	memcpy(head + hlen, ",\"dur\":", 7);
	hlen += 7;
	for (uint32_t d = a; d < n; d++) {
		const struct frag *f = frame_frag(c, fr[d]);

		if (!f)
			return -ENOMEM;
		if (c->endk[d] != last_k) {
			uint64_t end_us = (sv[ord[c->endk[d]]].ts + 500) / 1000;

			last_k = c->endk[d];
			blen = json_fmt_u64(b, end_us > begin_us ? end_us - begin_us : 0);
		}
		trace_event_text(c->w, head, hlen);
		trace_event_more(c->w, b, blen);
		trace_event_more(c->w, c->arena + f->off, f->len);
		c->st->slices++;
	}
	return 0;
}

/*
 * One thread: pass A (thread_lcp) stores how many frames each sample shares
 * with the next; pass B opens the frames a sample does not share with the
 * previous one and finds each one's last sample by scanning that array
 * forward, so every slice is written once, complete ("X"), parent first.
 *
 * Times are whole microseconds: a slice's end (ts + dur) then equals its
 * neighbour's start exactly in viewers that add them as doubles (speedscope),
 * so adjacent slices never appear to overlap.
 */
static int cpu_thread(struct cpu_ctx *c, const struct tthread *t, const char *prefix,
		      size_t prefix_len)
{
	const struct sample *sv = c->p->samples.v;
	const uint32_t *ord = c->order + t->first;
	uint64_t max_slices = c->o->max_slices ? c->o->max_slices : MAX_SLICES;
	int err = 0;

	thread_lcp(c, t);
	for (size_t j = 0; j < t->n && !err; j++) {
		const struct sample *s = &sv[ord[j]];
		uint64_t w = s->weight ? s->weight : c->period, begin, begin_us;
		uint32_t a = j ? c->lcp[j - 1] : 0, node = leaf_of(c, ord[j]);
		bool cont = j && contiguous(c, &sv[ord[j - 1]], s);
		uint32_t n = stack_len(c, node);

		add_busy(c, s);
		c->st->samples++;
		if (a >= n) /* nothing opens: the same stack as before, or a shallower one */
			continue;
		if (c->slices + (n - a) > max_slices) {
			if (c->slices <= max_slices)
				log_warn("trace: CPU slices stop at %" PRIu64 ", the rest of the "
					 "samples open none; pick a window with --time-range",
					 max_slices);
			c->slices = max_slices + 1;
			continue;
		}
		c->slices += n - a;
		frames_from(c, node, a, c->fa);
		begin = cont ? sv[ord[j - 1]].ts : s->ts > w ? s->ts - w : 0;
		begin_us = (begin + 500) / 1000;
		/* a same-named frame ends here (recursion): start 1 us later, see name_closes() */
		if (cont && (s->ts + 500) / 1000 > begin_us + 1 &&
		    name_closes(c, leaf_of(c, ord[j - 1]), a, c->fa[a]))
			begin_us++;
		err = open_slices(c, ord, j, c->fa, a, n, begin_us, prefix, prefix_len);
	}
	return err ? err : trace_writer__error(c->w);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static void counter_point(struct cpu_ctx *c, uint32_t pid, size_t i)
{
	static const char *const series[] = {"cores"};
	double v = c->bucket[i] / (double)c->bucket_ns;

	trace_counter(c->w, pid, "CPU utilization", c->t_min + i * c->bucket_ns, series, &v, 1);
}

/*
 * The process's buckets from its first busy one to the 0 after its last. Viewers hold a
 * counter's value until the next point, so of a run of equal values only the first and the
 * last point are written (the last for viewers that draw lines between points): the same
 * graph, in points that grow with the changes, not with the length of the record. Only the
 * busy buckets and the zeros beside them are visited.
 */
static void flush_counters(struct cpu_ctx *c, uint32_t pid)
{
	const double *b = c->bucket;

	if (!b)
		return;
	qsort(c->busy, c->nbusy, sizeof(*c->busy), cmp_u32);
	for (size_t k = 0; k < c->nbusy; k++) {
		size_t i = c->busy[k], next = k + 1 < c->nbusy ? c->busy[k + 1] : i + 2;

		if (!k || b[i] != b[i - 1] || i + 1 >= c->nbuckets || b[i] != b[i + 1])
			counter_point(c, pid, i);
		if (next > i + 1 && i + 1 < c->nbuckets) {
			counter_point(c, pid, i + 1); /* a run of zeros: its first and last */
			if (next - 1 > i + 1)
				counter_point(c, pid, next - 1);
		}
	}
	for (size_t k = 0; k < c->nbusy; k++)
		c->bucket[c->busy[k]] = 0;
	c->nbusy = 0;
}

static const char *process_name(const struct profile *p, uint32_t pid, char *buf, size_t len)
{
	const struct process *pr = profile__find_proc(p, pid);
	const struct thread *t = profile__find_thread(p, pid, pid);

	if (pr && pr->comm && *profile__str(p, pr->comm))
		return profile__str(p, pr->comm);
	if (t && t->comm && *profile__str(p, t->comm))
		return profile__str(p, t->comm);
	snprintf(buf, len, "pid %u", pid);
	return buf;
}

static void process_tracks(struct cpu_ctx *c, uint32_t pid, int sort_index)
{
	const struct process *pr = profile__find_proc(c->p, pid);
	char buf[32];

	trace_process_name(c->w, pid, process_name(c->p, pid, buf, sizeof(buf)));
	trace_process_sort_index(c->w, pid, sort_index);
	if (pr && pr->cmdline && *profile__str(c->p, pr->cmdline))
		trace_process_labels(c->w, pid, profile__str(c->p, pr->cmdline));
}

static void thread_track(struct cpu_ctx *c, const struct tthread *t, int sort_index)
{
	const struct thread *th = profile__find_thread(c->p, t->pid, t->tid);
	char buf[32];
	const char *name = th && th->comm ? profile__str(c->p, th->comm) : "";

	if (!*name) {
		snprintf(buf, sizeof(buf), "tid %u", t->tid);
		name = buf;
	}
	trace_thread_name(c->w, t->pid, t->tid, name);
	trace_thread_sort_index(c->w, t->pid, t->tid, sort_index);
}

struct pid_rank {
	uint32_t pid, ord; /* ord: index in pid order, the order tracks are written in */
	uint64_t weight;
};

static int cmp_pid_rank(const void *a, const void *b)
{
	const struct pid_rank *x = a, *y = b;

	if (x->weight != y->weight)
		return x->weight < y->weight ? 1 : -1;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

/* fdepth, fup and cut of every stack node, parents first (the reader checks parent < id). */
static int stack_index(struct cpu_ctx *c)
{
	const struct profile *p = c->p;
	size_t n = p->stacks.n ? p->stacks.n : 1;

	c->fdepth = calloc(n, sizeof(*c->fdepth));
	c->fup = calloc(n, sizeof(*c->fup));
	c->cut = calloc(n, sizeof(*c->cut));
	if (!c->fdepth || !c->fup || !c->cut)
		return -ENOMEM;
	c->cut_frame.name = UINT32_MAX; /* no string id: never continues a real frame */
	for (size_t v = 1; v < p->stacks.n; v++) {
		uint32_t par = p->stacks.v[v].parent < v ? p->stacks.v[v].parent : 0;
		uint64_t nf = p->locations.v[p->stacks.v[v].loc].frame_n;
		uint64_t fd = c->fdepth[par] + nf;

		c->fdepth[v] = fd > MAX_FRAMES ? MAX_FRAMES + 1 : (uint32_t)fd;
		c->fup[v] = par && p->locations.v[p->stacks.v[par].loc].frame_n ? par : c->fup[par];
		c->cut[v] = nf && c->fdepth[par] < MAX_FRAMES ? (uint32_t)v : c->cut[par];
	}
	return 0;
}

static int cpu_alloc(struct cpu_ctx *c)
{
	size_t maxn = 1;

	for (size_t t = 0; t < c->nthr; t++)
		if (c->thr[t].n > maxn)
			maxn = c->thr[t].n;
	c->lcp = malloc(maxn * sizeof(*c->lcp));
	c->endk = malloc((MAX_FRAMES + 1) * sizeof(*c->endk));
	c->fa = malloc((MAX_FRAMES + 1) * sizeof(*c->fa));
	c->fb = malloc((MAX_FRAMES + 1) * sizeof(*c->fb));
	c->frag_idx = hmap__new(4096);
	c->frag_of_frame = calloc(c->p->frames.n ? c->p->frames.n : 1, sizeof(*c->frag_of_frame));
	if (!c->lcp || !c->endk || !c->fa || !c->fb || !c->frag_idx || !c->frag_of_frame ||
	    stack_index(c))
		return -ENOMEM;
	if (!c->o->no_counters && c->nthr) {
		/* about 2000 points per process, 10 ms at the finest */
		uint64_t span = c->t_max - c->t_min + 1;

		c->bucket_ns = span / 2000 > 10000000 ? span / 2000 : 10000000;
		c->nbuckets = span / c->bucket_ns + 2; /* + a last one back at 0 */
		c->bucket = calloc(c->nbuckets, sizeof(*c->bucket));
		c->busy = malloc(c->nbuckets * sizeof(*c->busy));
		if (!c->bucket || !c->busy)
			return -ENOMEM;
	}
	return 0;
}

static void cpu_free(struct cpu_ctx *c)
{
	free(c->order);
	free(c->thr);
	free(c->lcp);
	free(c->endk);
	free(c->fa);
	free(c->fb);
	free(c->fdepth);
	free(c->fup);
	free(c->cut);
	hmap__free(c->frag_idx);
	free(c->frag_of_frame);
	free(c->frags);
	free(c->arena);
	free(c->bucket);
	free(c->busy);
}

/* rank_of: per process in pid order, its place by CPU time (busiest first), the track order */
static int cpu_processes(struct cpu_ctx *c, const int *rank_of)
{
	char prefix[96];
	size_t k = 0;
	int err = 0;

	for (size_t t = 0; t < c->nthr && !err; t++) {
		const struct tthread *th = &c->thr[t];
		size_t plen;

		if (!t || th->pid != c->thr[t - 1].pid)
			process_tracks(c, th->pid, rank_of[k++]);
		thread_track(c, th, th->tid == th->pid ? 0 : (int)(t + 1));
		plen = (size_t)snprintf(prefix, sizeof(prefix),
					"{\"ph\":\"X\",\"pid\":%u,\"tid\":%u,\"ts\":", th->pid,
					th->tid);
		err = cpu_thread(c, th, prefix, plen);
		c->st->threads++;
		if (t + 1 == c->nthr || c->thr[t + 1].pid != th->pid)
			flush_counters(c, th->pid);
	}
	return err;
}

int trace_source_cpu(struct trace_writer *w, const struct profile *p, const struct trace_opts *o,
		     struct trace_stats *st)
{
	struct cpu_ctx c = {.p = p, .o = o, .w = w, .st = st};
	unsigned rate = (unsigned)profile__meta_u64(p, "sample_rate", 0);
	struct pid_rank *ranks = NULL;
	int *rank_of = NULL;
	size_t nranks = 0;
	int err;

	c.period = rate ? 1000000000ull / rate : 1000000;
	err = order_samples(&c);
	if (!err)
		err = cpu_alloc(&c);
	if (err)
		goto out;
	ranks = calloc(c.nthr ? c.nthr : 1, sizeof(*ranks));
	rank_of = calloc(c.nthr ? c.nthr : 1, sizeof(*rank_of));
	if (!ranks || !rank_of) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t t = 0; t < c.nthr; t++) {
		if (!t || c.thr[t].pid != c.thr[t - 1].pid) {
			ranks[nranks].pid = c.thr[t].pid;
			ranks[nranks].ord = (uint32_t)nranks;
			nranks++;
		}
		ranks[nranks - 1].weight += c.thr[t].weight;
	}
	qsort(ranks, nranks, sizeof(*ranks), cmp_pid_rank);
	for (size_t i = 0; i < nranks; i++)
		rank_of[ranks[i].ord] = (int)i;
	err = cpu_processes(&c, rank_of);
out:
	free(ranks);
	free(rank_of);
	cpu_free(&c);
	return err;
}
