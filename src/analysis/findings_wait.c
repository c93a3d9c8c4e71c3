// SPDX-License-Identifier: MIT
/* Findings from the waits: CPU, lock, GIL and I/O contention, and the critical path. */
#include <stdlib.h>

#include "critpath.h"
#include "findings_rules.h"
#include "offcpu.h"
#include "stacks.h"

/* The innermost frame of a blocking stack that is the program's own: not the kernel, libc,
 * libpthread, the dynamic loader. NULL when there is none. */
const char *rule_own_frame(const struct rule_ctx *c, uint32_t node)
{
	const struct frame *fr[256];
	size_t n = stack_frames(c->p, node, fr, 256, NULL);

	for (size_t i = n; i-- > 0;) {
		if (fr[i]->kind == FRAME_KERNEL || fr[i]->kind == FRAME_SPECIAL ||
		    fr[i]->kind == FRAME_UNKNOWN || runtime_module(c, fr[i]))
			continue;
		return str(c, fr[i]->name);
	}
	return NULL;
}

/* Whether a blocking stack is waiting to acquire a lock (a mutex or rwlock, in the program
 * or in the kernel), as opposed to waiting for an event. */
static bool acquiring(const struct rule_ctx *c, uint32_t node)
{
	static const char *const user[] = { "pthread_mutex_lock", "pthread_mutex_timedlock",
					    "pthread_mutex_clocklock", "lll_lock_wait",
					    "pthread_rwlock_rdlock", "pthread_rwlock_wrlock",
					    "pthread_rwlock_timed", "pthread_rwlock_clock", NULL };
	const struct frame *fr[256];
	size_t n = stack_frames(c->p, node, fr, 256, NULL);
	char b[128];

	for (size_t i = 0; i < n; i++) {
		const char *name = base_name(str(c, fr[i]->name), b, sizeof(b));

		if (fr[i]->kind == FRAME_KERNEL) {
			if (prefix(name, "rwsem_down_") || prefix(name, "mutex_lock") ||
			    prefix(name, "rt_mutex_slowlock"))
				return true;
			continue;
		}
		for (const char *const *u = user; *u; u++)
			if (prefix(name, *u))
				return true;
	}
	return false;
}

/* Whether a blocking stack waits for CPython's GIL (take_gil, whatever lock it uses inside). */
static bool gil_wait(const struct rule_ctx *c, uint32_t node, const char **py)
{
	const struct frame *fr[256];
	size_t n = stack_frames(c->p, node, fr, 256, NULL);
	bool gil = false;
	char b[128];

	*py = NULL;
	for (size_t i = 0; i < n; i++) {
		if (fr[i]->kind == FRAME_PYTHON)
			*py = str(c, fr[i]->name); /* root first: the innermost wins */
		gil |= fr[i]->kind != FRAME_KERNEL &&
		       !strcmp(base_name(str(c, fr[i]->name), b, sizeof(b)), "take_gil");
	}
	return gil;
}

static void rule_cpu_contention(struct rule_ctx *c, const struct offcpu_summary *s, uint64_t all)
{
	double sh = (double)s->by_kind[WAIT_RUNNABLE] / all;
	struct finding *f;

	if (sh > WAIT_SHARE && (f = add(c, "cpu-contention", sev_of(sh), sh))) {
		unsigned ncpus = profile__meta_u64(c->p, "ncpus", 0);

		say(f->what, "threads waited %.3f s for a CPU while runnable, %.1f%% of their time "
			     "(%u CPUs)", s->by_kind[WAIT_RUNNABLE] / 1e9, 100 * sh, ncpus);
		say(f->advice, "the job's threads and everything else running want more than the "
			       "CPUs there are: run fewer threads (OMP_NUM_THREADS, "
			       "torch.set_num_threads, DataLoader num_workers, make -j), move other "
			       "work away (`eprof record -a` shows it) or add CPUs");
	}
}

/*
 * Lock contention is time spent acquiring a lock, not every futex wait: a thread waiting
 * on a condition variable, a join or a semaphore waits for work, which the critical path
 * explains. The stacks table (sampled intervals scaled up) tells them apart.
 */
static void rule_locks(struct rule_ctx *c, const struct offcpu_summary *s, uint64_t all)
{
	uint64_t mutex_ns = 0, gil_ns = 0;
	const char *where = NULL, *py_where = NULL, *py;
	struct finding *f;
	double sh;

	for (size_t i = 0; i < s->nstacks; i++) {
		if (s->stacks[i].kind != WAIT_LOCK)
			continue;
		if (gil_wait(c, s->stacks[i].stack, &py)) {
			gil_ns += s->stacks[i].ns;
			py_where = py_where ? py_where : py;
		} else if (acquiring(c, s->stacks[i].stack)) {
			mutex_ns += s->stacks[i].ns;
			if (!where)
				where = rule_own_frame(c, s->stacks[i].stack);
		}
	}
	sh = (double)gil_ns / all;
	if (sh > LOCK_SHARE && (f = add(c, "gil-contention", sev_of(sh), sh))) {
		say(f->what, "Python threads waited %.3f s for the GIL, %.1f%% of their time%s"
			     "%.120s", gil_ns / 1e9, 100 * sh,
		    py_where ? ", the most in " : "", py_where ? py_where : "");
		say(f->advice, "one thread at a time runs Python code: move CPU-bound Python "
			       "work to processes (multiprocessing, DataLoader num_workers) or "
			       "to native code that releases the GIL (NumPy, torch ops)");
	}
	sh = (double)mutex_ns / all;
	if (sh > LOCK_SHARE && (f = add(c, "lock-contention", sev_of(sh), sh))) {
		say(f->what, "threads waited %.3f s to acquire locks, %.1f%% of their time%s%.120s",
		    mutex_ns / 1e9, 100 * sh, where ? ", the most under " : "",
		    where ? where : "");
		say(f->advice, "shorten what runs under the lock or split it; `eprof "
			       "critical-path` shows whether these waits set the run's length");
	}
}

static void rule_io_wait(struct rule_ctx *c, const struct offcpu_summary *s, uint64_t all)
{
	double sh = (double)s->by_kind[WAIT_IO] / all;
	const char *where = NULL;
	struct finding *f;

	if (sh <= LOCK_SHARE || !(f = add(c, "io-wait", sev_of(sh), sh)))
		return;
	for (size_t i = 0; i < s->nstacks && !where; i++)
		if (s->stacks[i].kind == WAIT_IO)
			where = rule_own_frame(c, s->stacks[i].stack);
	say(f->what, "threads were blocked %.3f s in disk I/O, %.1f%% of their time%s%.120s",
	    s->by_kind[WAIT_IO] / 1e9, 100 * sh, where ? ", the most under " : "",
	    where ? where : "");
	say(f->advice, "read ahead or in the background (more DataLoader workers, "
		       "prefetching, larger reads); check the storage's throughput");
}

void rule_offcpu(struct rule_ctx *c)
{
	struct offcpu_summary s;
	uint64_t all;

	if (offcpu_summarize(c->p, c->f, &s)) {
		c->err = -ENOMEM;
		return;
	}
	all = s.total_ns + c->cpu_ns;
	if (s.intervals && all) {
		/*
		 * Lock, GIL and I/O waits as a share of the time the threads were not waiting for
		 * a CPU (which cpu-contention reports): on an overloaded machine the runnable time
		 * swamps all else, and a mutex-bound program's lock share read 20% at load ~15
		 * against ~50% quiet, where the program itself had not changed.
		 */
		uint64_t own = all - s.by_kind[WAIT_RUNNABLE];

		rule_cpu_contention(c, &s, all);
		if (own) {
			rule_locks(c, &s, own);
			rule_io_wait(c, &s, own);
		}
	}
	offcpu_summary__free(&s);
}

/*
 * The critical path's hottest function: when the path runs through more than one thread,
 * the function where it spends most of its time running or preempted (runnable: it would
 * have run) is the one whose speed sets the run's length (src/analysis/critpath.c;
 * `eprof critical-path` has the details).
 */
struct path_fn {
	uint32_t name, module, tid;
	uint64_t ns;
};

static void path_top(const struct profile *p, const struct cp_path *path, struct hmap *h,
		     struct path_fn *v, size_t *nv, struct path_fn *top)
{
	for (size_t i = 0; i < path->nattr; i++) {
		const struct cp_attr *a = &path->attr[i];
		const struct frame *fr[256], *leaf = NULL;
		size_t n;
		uint64_t at;

		if ((a->kind != WAIT_ONCPU && a->kind != WAIT_RUNNABLE) || !a->stack ||
		    a->stack >= p->stacks.n)
			continue;
		/* The program's innermost frame: a preempted thread's kernel frames are the
		 * scheduler's, not its work. */
		n = stack_frames(p, a->stack, fr, 256, NULL);
		for (size_t k = n; k-- > 0 && !leaf;)
			if (fr[k]->kind != FRAME_KERNEL && fr[k]->kind != FRAME_SPECIAL)
				leaf = fr[k];
		if (!leaf)
			continue;
		if (!hmap__get(h, leaf->name, 0, &at)) {
			at = (*nv)++;
			v[at] = (struct path_fn){ leaf->name, leaf->module, a->tid, 0 };
			if (hmap__put(h, leaf->name, 0, at)) {
				(*nv)--;
				continue;
			}
		}
		v[at].ns += a->ns;
		if (v[at].tid != a->tid)
			v[at].tid = 0; /* on several threads */
		if (v[at].ns > top->ns)
			*top = v[at];
	}
}

void rule_critpath(struct rule_ctx *c)
{
	struct cp_graph g;
	struct cp_path path = { 0 };
	struct path_fn top = { 0 }, *v = NULL;
	struct hmap *h = NULL;
	uint32_t track, first = UINT32_MAX;
	uint64_t end;
	size_t nv = 0;
	bool threads = false;
	struct finding *f;
	char on[32];
	double sh;
	size_t intervals = offcpu_count(c->p);

	if (!intervals || intervals > PATH_MAX_INTERVALS || critpath_build(c->p, &g))
		return;
	if (critpath_default_end(&g, &track, &end) || critpath_walk(&g, track, end, 0, &path) ||
	    path.total_ns < PATH_MIN_NS)
		goto out;
	for (size_t i = 0; i < path.nsegs; i++) {
		const struct cp_track *t = &g.tracks[path.segs[i].track];

		if (t->kind != CP_TRACK_THREAD)
			continue;
		if (first == UINT32_MAX)
			first = t->tid;
		threads |= t->tid != first;
	}
	if (!threads)
		goto out; /* one thread: its hot functions are the report's */
	v = malloc((path.nattr ? path.nattr : 1) * sizeof(*v));
	h = hmap__new(64);
	if (!v || !h)
		goto out;
	path_top(c->p, &path, h, v, &nv, &top);
	sh = (double)top.ns / path.total_ns;
	if (sh < PATH_SHARE || !(f = add(c, "critical-path", sev_of(sh), sh)))
		goto out;
	snprintf(on, sizeof(on), top.tid ? "thread %u" : "several threads", top.tid);
	say(f->what, "%.120s (%.80s) on %s is %.1f%% of the critical path (%.3f s of %.3f s, "
		     "running or preempted)", str(c, top.name), str(c, top.module), on, 100 * sh,
	    top.ns / 1e9, path.total_ns / 1e9);
	say(f->advice, "the run gets shorter only when the path does: speed up this function "
		       "first (`eprof critical-path --segments` shows the chain of threads)");
out:
	hmap__free(h);
	free(v);
	critpath_path_free(&path);
	critpath_free(&g);
}
