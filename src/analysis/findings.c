// SPDX-License-Identifier: MIT
/*
 * Bottleneck rules. Each rule reads one analysis and adds a finding per thing it
 * flags (most flag one thing; GPU idle time is per device, occupancy per kernel,
 * tails per region); thresholds are the constants below and are listed for users
 * in docs/findings.md. Names from the file are untrusted: every one is printed
 * with a bound.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "critpath.h"
#include "findings.h"
#include "gpu.h"
#include "memory.h"
#include "offcpu.h"
#include "regions.h"
#include "stacks.h"
#include "../util/hmap.h"
#include "../util/vec.h"

#define MIN_SAMPLES 50		 /* fewer CPU samples: no CPU rule fires */
#define LOST_SHARE 0.01		 /* samples lost in the ring buffer */
#define UNKNOWN_SHARE 0.10	 /* samples whose leaf has no name */
#define TRUNC_SHARE 0.05	 /* samples whose stack was cut */
#define HOT_SHARE 0.25		 /* one function's self samples */
#define CLASS_SHARE 0.10	 /* copies, allocator, spinning */
#define KERNEL_SHARE 0.30	 /* samples with a kernel leaf */
#define WAIT_SHARE 0.10		 /* runnable time of all thread time */
#define LOCK_SHARE 0.20		 /* lock / I/O waits of all thread time */
#define LEAK_BYTES (1u << 20)	 /* or LEAK_PEAK_SHARE of the peak and LEAK_MIN_BYTES */
#define LEAK_PEAK_SHARE 0.10
#define LEAK_MIN_BYTES (64u << 10)
#define CHURN_RATE 10000.0	 /* short-lived allocations per second */
#define GROWTH_BYTES (1u << 20)	 /* live heap growth over the record's second half */
#define GROWTH_SHARE 0.20	 /* ... relative to its value midway */
#define GPU_IDLE_SHARE 0.30	 /* idle share of a device's window */
#define GPU_MIN_WINDOW 10000000	 /* 10 ms */
#define LAUNCH_MIN 1000		 /* kernels, for the launch-bound rule */
#define LAUNCH_SHORT_NS 20000	 /* mean kernel shorter than this: launch-bound */
#define SYNC_SHARE 0.10		 /* of the run's wall time */
#define OCC_SHARE 0.10		 /* a kernel's share of GPU time */
#define OCC_LOW 0.25		 /* theoretical occupancy, at most */
#define PATH_SHARE 0.30		 /* one function's share of a multi-thread critical path */
#define PATH_MIN_NS 10000000	 /* shorter paths: no finding */
/* More blocked intervals: no critical-path rule in the report (its graph costs ~0.5 us and
 * ~130 bytes per interval; `eprof critical-path` still walks any size). */
#define PATH_MAX_INTERVALS 1000000
#define TAIL_MIN_COUNT 20	 /* region instances, for the tail rule */
#define TAIL_RATIO 3.0		 /* p99 over the median */
#define TAIL_MIN_P50 10000	 /* 10 us: shorter regions are timing noise */
#define COPY_MIN 1000
#define COPY_SMALL (64u << 10)

struct ctx {
	struct profile *p;
	const struct sample_filter *f;
	struct findings *out;
	int err;
	uint64_t start, end; /* the record's span, ns */
	uint64_t samples, cpu_ns;
	/* Samples in eprof's own uprobe handling (traps, the return trampoline): all, those with
	 * a kernel leaf, those whose stack the trampoline cut. */
	uint64_t probe, probe_kernel, probe_truncated;
	uint64_t py_samples; /* samples with a Python frame */
	/* The innermost Python function with the most samples (its native callees included). */
	uint32_t py_name, py_file;
	struct hmap *py_idx; /* (name, file) -> samples, while counting */
	uint64_t py_best;
	/* Kernel-leaf samples: the user frames that entered the kernel most often (the innermost
	 * user frame, a libc wrapper say, and the program's own frame under it). */
	uint32_t sys_entry, sys_own;
	struct hmap *sys_idx; /* (entry, own) -> samples, while counting */
	uint64_t sys_best;
	const struct hot_result *hot;
	const struct mem_result *mem; /* the caller's, or NULL */
	bool exited; /* every process of the record exited while recorded */
	size_t cap; /* of out->v */
};

const char *finding_severity_name(enum finding_severity s)
{
	return s == FINDING_HIGH ? "high" : s == FINDING_MEDIUM ? "medium" : "low";
}

static enum finding_severity sev_of(double impact)
{
	return impact >= 0.30 ? FINDING_HIGH : impact >= 0.10 ? FINDING_MEDIUM : FINDING_LOW;
}

static struct finding *add(struct ctx *c, const char *id, enum finding_severity sev, double impact)
{
	/* A file can hold thousands of tailed regions, each a finding. */
	struct finding *f = arr_push(c->out->v, c->out->n, c->cap);

	if (!f) {
		c->err = -ENOMEM;
		return NULL;
	}
	f->id = id;
	f->severity = sev;
	f->impact = impact < 0 ? 0 : impact > 1 ? 1 : impact;
	return f;
}

__attribute__((format(printf, 2, 3))) static void say(char *dst, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(dst, sizeof(((struct finding *)0)->what), fmt, ap);
	va_end(ap);
}

static const char *str(const struct ctx *c, uint32_t id)
{
	const char *s = profile__str(c->p, id);

	return s && *s ? s : "?";
}

/* A function name without leading underscores, glibc's __GI_ alias prefix and .part/.constprop
 * suffixes, into buf: "__GI___libc_free" -> "libc_free". */
static const char *base_name(const char *name, char *buf, size_t len)
{
	size_t n;
	char *dot;

	if (!strncmp(name, "__GI_", 5))
		name += 5;
	while (*name == '_')
		name++;
	snprintf(buf, len, "%s", name);
	dot = strchr(buf, '.');
	if (dot)
		*dot = '\0';
	n = strlen(buf);
	return n ? buf : "?";
}

static bool in_list(const char *s, const char *const *list)
{
	for (; *list; list++)
		if (!strcmp(s, *list))
			return true;
	return false;
}

static bool prefix(const char *s, const char *pre)
{
	return !strncmp(s, pre, strlen(pre));
}

enum fclass { FC_NONE, FC_COPY, FC_ALLOC, FC_SPIN };

static enum fclass classify(const char *name, const char *module)
{
	static const char *const alloc[] = {
		"malloc", "free", "calloc", "realloc", "cfree", "int_malloc", "int_free", "int_realloc",
		"malloc_consolidate", "unlink_chunk", "sysmalloc", "libc_malloc", "libc_free",
		"libc_calloc", "libc_realloc", "int_free_merge_chunk", "int_free_create_chunk",
		"int_free_maybe_consolidate", "tcache_get", "tcache_put", "posix_memalign",
		"libc_memalign", "int_memalign", "aligned_alloc",
		/* CPython's object allocator (leading underscores stripped) */
		"PyObject_Malloc", "PyObject_Free", "PyObject_Realloc", "PyObject_Calloc",
		"PyMem_Malloc", "PyMem_Free", "PyMem_Realloc", "PyMem_RawMalloc", "PyMem_RawFree",
		"pymalloc_alloc", "pymalloc_free", "pymalloc_realloc", NULL
	};
	static const char *const spin[] = { "sched_yield", "libc_sched_yield", "pthread_spin_lock",
					    "pthread_spin_trylock", NULL };
	char b[128];
	const char *n = base_name(name, b, sizeof(b));

	if (prefix(n, "memcpy") || prefix(n, "memmove") || prefix(n, "memset") ||
	    prefix(n, "wmemset") || prefix(n, "wmemcpy"))
		return FC_COPY;
	if (in_list(n, alloc) || prefix(name, "operator new") || prefix(name, "operator delete") ||
	    ((prefix(n, "je_") || prefix(n, "tc_") || prefix(n, "mi_")) && in_list(n + 3, alloc)))
		return FC_ALLOC;
	if (in_list(n, spin) || strstr(module, "libgomp"))
		return FC_SPIN;
	return FC_NONE;
}

/* Whether a native function is the Python interpreter's own (its binary or libpython). */
static bool interpreter(const struct ctx *c, const struct func_stat *fs)
{
	const char *m = str(c, fs->module);

	return fs->kind == FRAME_USER && (strstr(m, "libpython") || !strncmp(m, "python", 6));
}

/*
 * Python: samples charged to their innermost Python function (with the native code it
 * calls), the function a Python user can change (counted by count_samples). Fires for the
 * largest such share.
 */
static void rule_python(struct ctx *c)
{
	struct finding *f;
	double sh = c->samples ? (double)c->py_best / c->samples : 0;

	if (c->samples >= MIN_SAMPLES && sh > HOT_SHARE &&
	    (f = add(c, "hot-python-function", sh >= 0.5 ? FINDING_MEDIUM : FINDING_LOW, sh))) {
		say(f->what, "Python function %.120s (%.160s) and the native code it calls run %.1f%% "
			     "of the CPU samples", str(c, c->py_name), str(c, c->py_file), 100 * sh);
		say(f->advice, "the Python code to speed up first: `eprof report --lines` shows its "
			       "lines; loops over elements are faster as array operations (NumPy, "
			       "torch) or in native code");
	}
}

/* --- data quality ------------------------------------------------------------------ */

static void rule_quality(struct ctx *c, uint64_t unknown, uint64_t truncated, uint32_t unk_module)
{
	const struct profile *p = c->p;
	uint64_t lost = p->stats[STAT_SAMPLES_LOST], tot = c->samples + lost;
	uint64_t ev = p->stats[STAT_EVENTS_LOST] + p->stats[STAT_OFFCPU_LOST] +
		      p->stats[STAT_MEM_LOST] + p->stats[STAT_CUDA_LOST] + p->stats[STAT_REGIONS_LOST];
	struct finding *f;

	if (tot && (double)lost / tot > LOST_SHARE && (f = add(c, "lost-samples", FINDING_MEDIUM,
							      (double)lost / tot))) {
		say(f->what, "%llu samples (%.1f%%) were lost: the ring buffer was full",
		    (unsigned long long)lost, 100.0 * lost / tot);
		say(f->advice, "record with a larger --ringbuf-mb (default 16) or a lower -F");
	}
	if (ev && (f = add(c, "lost-events", FINDING_MEDIUM, 0))) {
		say(f->what, "%llu events (off-CPU, memory, CUDA or regions) were lost: the ring "
			     "buffer was full", (unsigned long long)ev);
		say(f->advice, "record with a larger --ringbuf-mb (default 16); for --offcpu, a "
			       "larger --offcpu-min-us; for --mem, sample (--mem=BYTES)");
	}
	if (c->samples >= MIN_SAMPLES && (double)unknown / c->samples > UNKNOWN_SHARE &&
	    (f = add(c, "unknown-code", FINDING_MEDIUM, (double)unknown / c->samples))) {
		const char *m = unk_module ? str(c, unk_module) : "?";

		say(f->what, "%.1f%% of samples end in code with no name, most in %.160s",
		    100.0 * unknown / c->samples, m);
		if (!strcmp(m, "?") || strchr(m, '[') || strstr(m, "memfd") || strstr(m, "anon"))
			say(f->advice, "JIT code: have the runtime write /tmp/perf-PID.map (python -X "
				       "perf, node --perf-basic-prof, the JVM's perf-map-agent)");
		else
			say(f->advice, "install the debug symbols of %.160s (Debian: its -dbgsym "
				       "package) or set DEBUGINFOD_URLS", m);
	}
	if (c->samples >= MIN_SAMPLES && (double)truncated / c->samples > TRUNC_SHARE &&
	    (f = add(c, "truncated-stacks", FINDING_LOW, (double)truncated / c->samples))) {
		uint64_t nocfi = p->stats[STAT_UNWIND_NO_CFI], deep = p->stats[STAT_UNWIND_TOO_DEEP];
		uint64_t fault = p->stats[STAT_UNWIND_READ_FAULT], bad = p->stats[STAT_UNWIND_BAD_FRAME];
		uint64_t most = nocfi > deep ? nocfi : deep;

		most = most > fault ? most : fault;
		most = most > bad ? most : bad;
		say(f->what, "%.1f%% of stacks stop early (no CFI %llu, too deep %llu, beyond the "
			     "copied stack %llu, bad frame %llu)", 100.0 * truncated / c->samples,
		    (unsigned long long)nocfi, (unsigned long long)deep, (unsigned long long)fault,
		    (unsigned long long)bad);
		if (!most)
			say(f->advice, "the record does not say why (frame-pointer stacks stop at the "
				       "first function without one): record with -g dwarf");
		else if (most == fault)
			say(f->advice, "record with a larger --stack-size (default 32768, max 65536)");
		else if (most == nocfi)
			say(f->advice, "build the code with -fasynchronous-unwind-tables (or keep frame "
				       "pointers and record with -g fp)");
		else if (most == bad)
			say(f->advice, "the unwind tables and the stack disagree (hand-written assembly, "
				       "a JIT, a corrupted stack): if the code keeps frame pointers, "
				       "record with -g fp");
		else
			say(f->advice, "the stacks are deeper than eprof follows: the flamegraph's roots "
				       "are cut, the leaves are right");
	}
}

/* --- CPU -------------------------------------------------------------------------- */

static void rule_cpu(struct ctx *c)
{
	const struct hot_result *r = c->hot;
	const struct func_stat *hot = NULL;
	uint64_t cls[4] = { 0 }, kernel = 0, fault = 0, sys = 0;
	uint32_t cls_top[4] = { 0 }, sys_name = 0;
	uint64_t cls_top_n[4] = { 0 };
	struct finding *f;
	double s;

	if (c->samples < MIN_SAMPLES)
		return;
	for (size_t i = 0; i < r->n; i++) {
		const struct func_stat *fs = &r->funcs[i];
		const char *name = str(c, fs->name);
		enum fclass k;

		if (fs->kind == FRAME_KERNEL) {
			kernel += fs->self;
			if (!strcmp(name, "exc_page_fault") || !strcmp(name, "handle_mm_fault"))
				fault = fs->total > fault ? fs->total : fault;
			if ((prefix(name, "__x64_sys_") || prefix(name, "__ia32_sys_")) &&
			    fs->total > sys) {
				sys = fs->total;
				sys_name = fs->name;
			}
			continue;
		}
		k = classify(name, str(c, fs->module));
		cls[k] += fs->self;
		if (fs->self > cls_top_n[k]) {
			cls_top_n[k] = fs->self;
			cls_top[k] = fs->name;
		}
	}
	/* The hottest function that no other rule speaks for (copies, allocator, spinning,
	 * the kernel, unnamed code, the Python interpreter under Python functions). The
	 * table may be in the report's --sort total order: look at every row. */
	for (size_t i = 0; i < r->n; i++) {
		const struct func_stat *fs = &r->funcs[i];

		if ((hot && fs->self <= hot->self) ||
		    classify(str(c, fs->name), str(c, fs->module)) != FC_NONE ||
		    fs->kind == FRAME_KERNEL || fs->kind == FRAME_UNKNOWN ||
		    fs->kind == FRAME_SPECIAL || (c->py_samples && interpreter(c, fs)))
			continue;
		hot = fs;
	}
	s = hot ? (double)hot->self / c->samples : 0;
	/* Compute code has a hottest function: a pointer, not an alarm. */
	if (s > HOT_SHARE &&
	    (f = add(c, "hot-function", s >= 0.5 ? FINDING_MEDIUM : FINDING_LOW, s))) {
		say(f->what, "%.120s (%.80s) runs %.1f%% of the CPU samples in its own code",
		    str(c, hot->name), str(c, hot->module), 100 * s);
		say(f->advice, "the place where optimizing pays: `eprof report --lines` shows its "
			       "hottest lines, `eprof flamegraph` its callers");
	}
	s = (double)cls[FC_COPY] / c->samples;
	if (s > CLASS_SHARE && (f = add(c, "memory-copies", sev_of(s), s))) {
		say(f->what, "%.1f%% of the CPU samples copy or fill memory (%.120s the most)", 100 * s,
		    str(c, cls_top[FC_COPY]));
		say(f->advice, "find the callers in `eprof flamegraph` (search memcpy): pass buffers "
			       "by reference, reuse them, copy once");
	}
	s = (double)cls[FC_ALLOC] / c->samples;
	if (s > CLASS_SHARE && (f = add(c, "allocator", sev_of(s), s))) {
		say(f->what, "%.1f%% of the CPU samples are in the memory allocator (%.120s the most)",
		    100 * s, str(c, cls_top[FC_ALLOC]));
		if (strstr(str(c, cls_top[FC_ALLOC]), "Py") || strstr(str(c, cls_top[FC_ALLOC]), "py"))
			say(f->advice, "Python makes an object per value: work on whole arrays "
				       "(NumPy, torch) instead of element by element, or reuse objects");
		else
			say(f->advice, "reuse buffers instead of allocating per item (`eprof record "
				       "--mem` shows which stacks allocate), or preload jemalloc/tcmalloc");
	}
	s = (double)cls[FC_SPIN] / c->samples;
	if (s > CLASS_SHARE && (f = add(c, "spinning", sev_of(s), s))) {
		say(f->what, "%.1f%% of the CPU samples spin waiting (%.120s the most)", 100 * s,
		    str(c, cls_top[FC_SPIN]));
		say(f->advice, "threads burn CPU waiting for others: OMP_WAIT_POLICY=passive for "
			       "OpenMP, fewer threads (OMP_NUM_THREADS), or blocking waits");
	}
	s = (double)c->probe / c->samples;
	if (s > CLASS_SHARE && (f = add(c, "probe-overhead", sev_of(s), s))) {
		say(f->what, "%.1f%% of the CPU samples are in eprof's own uprobes (allocation, "
			     "region or CUDA probes): the job ran that much slower while recorded",
		    100 * s);
		say(f->advice, "the rest of the profile is right; for a lighter record, sample "
			       "allocations (--mem rather than --mem=1) or probe fewer functions");
	}
	/* The kernel time of uprobe traps is eprof's, not the program's. */
	kernel -= c->probe_kernel < kernel ? c->probe_kernel : kernel;
	s = (double)kernel / c->samples;
	if (s > KERNEL_SHARE && (f = add(c, "kernel-time", sev_of(s), s))) {
		if (fault * 2 > kernel) {
			say(f->what, "%.1f%% of the CPU samples are in the kernel, %.1f%% under page "
				     "faults", 100 * s, 100.0 * fault / c->samples);
			say(f->advice, "memory is touched for the first time over and over: reuse "
				       "buffers instead of fresh mappings, or pre-fault them "
				       "(MAP_POPULATE, transparent huge pages)");
		} else {
			char from[256] = "";

			if (c->sys_entry && c->sys_own && c->sys_own != c->sys_entry)
				snprintf(from, sizeof(from), ", the most entered from %.80s in %.80s",
					 str(c, c->sys_entry), str(c, c->sys_own));
			else if (c->sys_entry)
				snprintf(from, sizeof(from), ", the most entered from %.80s",
					 str(c, c->sys_entry));
			say(f->what, "%.1f%% of the CPU samples are in the kernel%s%s%.80s", 100 * s, from,
			    sys_name ? ", under " : "", sys_name ? str(c, sys_name) : "");
			say(f->advice, "fewer, larger system calls (bigger I/O buffers, batching); "
				       "`eprof flamegraph` shows which calls and from where");
		}
	}
}

/* --- off-CPU ---------------------------------------------------------------------- */

/* The C and C++ runtimes and the dynamic loader: never "the program's own" frame. */
static bool runtime_module(const struct ctx *c, const struct frame *f)
{
	const char *m = str(c, f->module);

	return strstr(m, "libc.so") || strstr(m, "libpthread") || strstr(m, "ld-linux") ||
	       strstr(m, "libstdc++");
}

/* The innermost frame of a blocking stack that is the program's own: not the kernel, libc,
 * libpthread, the dynamic loader. NULL when there is none. */
static const char *own_frame(const struct ctx *c, uint32_t node)
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
static bool acquiring(const struct ctx *c, uint32_t node)
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
static bool gil_wait(const struct ctx *c, uint32_t node, const char **py)
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

static void rule_offcpu(struct ctx *c)
{
	struct offcpu_summary s;
	uint64_t all;
	struct finding *f;
	double sh;

	if (offcpu_summarize(c->p, c->f, &s)) {
		c->err = -ENOMEM;
		return;
	}
	all = s.total_ns + c->cpu_ns;
	if (!s.intervals || !all)
		goto out;
	sh = (double)s.by_kind[WAIT_RUNNABLE] / all;
	if (sh > WAIT_SHARE && (f = add(c, "cpu-contention", sev_of(sh), sh))) {
		unsigned ncpus = profile__meta_u64(c->p, "ncpus", 0);

		say(f->what, "threads waited %.3f s for a CPU while runnable, %.1f%% of their time "
			     "(%u CPUs)", s.by_kind[WAIT_RUNNABLE] / 1e9, 100 * sh, ncpus);
		say(f->advice, "the job's threads and everything else running want more than the "
			       "CPUs there are: run fewer threads (OMP_NUM_THREADS, "
			       "torch.set_num_threads, DataLoader num_workers, make -j), move other "
			       "work away (`eprof record -a` shows it) or add CPUs");
	}
	/*
	 * Lock contention is time spent acquiring a lock, not every futex wait: a thread waiting
	 * on a condition variable, a join or a semaphore waits for work, which the critical path
	 * explains. The stacks table (sampled intervals scaled up) tells them apart.
	 */
	{
		uint64_t mutex_ns = 0, gil_ns = 0;
		const char *where = NULL, *py_where = NULL, *py;

		for (size_t i = 0; i < s.nstacks; i++) {
			if (s.stacks[i].kind != WAIT_LOCK)
				continue;
			if (gil_wait(c, s.stacks[i].stack, &py)) {
				gil_ns += s.stacks[i].ns;
				py_where = py_where ? py_where : py;
			} else if (acquiring(c, s.stacks[i].stack)) {
				mutex_ns += s.stacks[i].ns;
				if (!where)
					where = own_frame(c, s.stacks[i].stack);
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
	sh = (double)s.by_kind[WAIT_IO] / all;
	if (sh > LOCK_SHARE && (f = add(c, "io-wait", sev_of(sh), sh))) {
		const char *where = NULL;

		for (size_t i = 0; i < s.nstacks && !where; i++)
			if (s.stacks[i].kind == WAIT_IO)
				where = own_frame(c, s.stacks[i].stack);
		say(f->what, "threads were blocked %.3f s in disk I/O, %.1f%% of their time%s%.120s",
		    s.by_kind[WAIT_IO] / 1e9, 100 * sh, where ? ", the most under " : "",
		    where ? where : "");
		say(f->advice, "read ahead or in the background (more DataLoader workers, "
			       "prefetching, larger reads); check the storage's throughput");
	}
out:
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

static void rule_critpath(struct ctx *c)
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

/* --- regions --------------------------------------------------------------------- */

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
static int tail_finding(struct ctx *c, const struct region_node *nd, const struct tail *t,
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
static void rule_regions(struct ctx *c)
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

/* --- memory ----------------------------------------------------------------------- */

/*
 * A record that ends with its processes alive cannot call anything a leak; a live heap
 * still climbing through the record's second half, and at its peak at the end, is the sign
 * of one (or of an unbounded cache) worth a look.
 */
static void rule_heap_growth(struct ctx *c, const struct mem_result *r)
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
	where = r->nleaks ? own_frame(c, r->leaks[0].stack) : NULL;
	f = add(c, "heap-growth", FINDING_LOW, r->peak_bytes ? (double)(end - mid) / r->peak_bytes : 0);
	if (!f)
		return;
	say(f->what, "the live heap grew from %.2f MiB midway to %.2f MiB at the end of the record, "
		     "its peak%s%.120s", mid / 1048576.0, end / 1048576.0,
	    where ? "; the most still held from " : "", where ? where : "");
	say(f->advice, "a heap that keeps growing is a leak or an unbounded cache: record longer "
		       "to confirm; `eprof flamegraph --mem leaks` shows what holds it");
}

static void rule_memory(struct ctx *c)
{
	struct mem_opts o = { .temp_ns = 1000000 };
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
		const char *where = r.nleaks ? own_frame(c, r.leaks[0].stack) : NULL;

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
		const char *where = r.ntemps ? own_frame(c, r.temps[0].stack) : NULL;

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

/* --- GPU -------------------------------------------------------------------------- */

static void rule_gpu_devices(struct ctx *c, const struct gpu_summary *s)
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
static void rule_cuda_errors(struct ctx *c, const struct gpu_summary *s)
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

static void rule_gpu(struct ctx *c)
{
	struct gpu_summary s;
	uint64_t kernels = 0, wall = c->end > c->start ? c->end - c->start : 0;
	struct finding *f;
	double sh;

	if (!gpu_present(c->p))
		return;
	if (gpu_analyze(c->p, &s)) {
		c->err = -ENOMEM;
		return;
	}
	rule_gpu_devices(c, &s);
	rule_cuda_errors(c, &s);
	for (size_t i = 0; i < s.nkernels; i++)
		kernels += s.kernels[i].count;
	if (kernels >= LAUNCH_MIN && s.kernel_ns / kernels < LAUNCH_SHORT_NS &&
	    (f = add(c, "launch-bound", FINDING_MEDIUM, 0.10))) {
		say(f->what, "%llu kernels ran %.1f us each on average", (unsigned long long)kernels,
		    s.kernel_ns / 1e3 / kernels);
		if (s.launches_timed)
			snprintf(f->what + strlen(f->what), sizeof(f->what) - strlen(f->what),
				 "; a launch call took %.1f us of CPU",
				 s.launch_ns / 1e3 / s.launches_timed);
		say(f->advice, "kernels this short cost more to launch than to run: fuse them "
			       "(torch.compile, fused ops) or capture the loop in a CUDA graph");
	}
	sh = wall ? (double)s.sync_ns / wall : 0;
	if (sh > SYNC_SHARE && (f = add(c, "gpu-sync-wait", sev_of(sh), sh))) {
		const struct gpu_api_stat *top = NULL;

		for (size_t i = 0; i < s.napi; i++)
			if (s.api[i].cat == CUDA_CAT_SYNC && (!top || s.api[i].total_ns > top->total_ns))
				top = &s.api[i];
		say(f->what, "CPU threads spent %.3f s (%.1f%% of the run) in %llu synchronization "
			     "calls%s%.80s", s.sync_ns / 1e9, 100 * sh, (unsigned long long)s.sync_calls,
		    top ? ", the most in " : "", top ? str(c, top->name) : "");
		say(f->advice, "take host synchronizations out of the loop (.item(), .cpu(), printing "
			       "tensors, cudaDeviceSynchronize); wait on events only where the result "
			       "is needed");
	}
	for (size_t i = 0; i < s.nkernels && s.kernel_ns; i++) {
		const struct gpu_kernel_stat *k = &s.kernels[i];
		const char *lim;

		sh = (double)k->total_ns / s.kernel_ns;
		if (sh < OCC_SHARE || !k->occ_known || k->occupancy > OCC_LOW + 1e-9)
			continue;
		if (!(f = add(c, "low-occupancy", FINDING_LOW, sh)))
			break;
		lim = gpu_occ_limiter_name(k->limiter);
		say(f->what, "kernel %.120s (%.1f%% of GPU time) has %.0f%% theoretical occupancy, "
			     "limited by %s", str(c, k->name), 100 * sh, 100 * k->occupancy, lim);
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
	for (int d = GPU_COPY_HTOD; d <= GPU_COPY_DTOH; d++) {
		const struct gpu_copy_stat *cp = &s.copies[d];
		uint64_t n = cp->count ? cp->count : cp->api_count;
		uint64_t b = cp->count ? cp->bytes : cp->api_bytes;

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
	if (c->exited && s.mem_live >= LEAK_BYTES && (f = add(c, "gpu-memory-leak", FINDING_LOW, 0))) {
		say(f->what, "%.2f MiB of device memory in %llu allocations was never freed before "
			     "the process exited", s.mem_live / 1048576.0,
		    (unsigned long long)s.mem_live_allocs);
		say(f->advice, "free it (cudaFree) or keep it in a caching allocator meant to hold it");
	}
	gpu_summary_free(&s);
}

/* --- driver ----------------------------------------------------------------------- */

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
static bool in_probe(const struct ctx *c, const struct frame *const *fr, size_t n)
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
static void count_kernel_entry(struct ctx *c, const struct frame *const *fr, size_t n,
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
static void count_python(struct ctx *c, const struct frame *const *fr, size_t n,
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
static int count_samples(struct ctx *c, uint64_t *unknown, uint64_t *truncated, uint32_t *umod)
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
	const struct hot_result *hot = pre ? pre->hot : NULL;
	struct ctx c = { .p = p, .f = f, .out = out, .hot = hot, .mem = pre ? pre->mem : NULL };
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
	rule_python(&c);
	if (!c.err)
		rule_cpu(&c);
	if (!c.err)
		rule_offcpu(&c);
	if (!c.err)
		rule_critpath(&c);
	if (!c.err)
		rule_regions(&c);
	if (!c.err)
		rule_memory(&c);
	if (!c.err)
		rule_gpu(&c);
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
