// SPDX-License-Identifier: MIT
/* Findings from the CPU samples: what the record missed, hot functions, copies, the allocator,
 * spinning, eprof's own probes, kernel time, hot Python functions. */
#include "findings_rules.h"

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
static bool interpreter(const struct rule_ctx *c, const struct func_stat *fs)
{
	const char *m = str(c, fs->module);

	return fs->kind == FRAME_USER && (strstr(m, "libpython") || !strncmp(m, "python", 6));
}

/*
 * Python: samples charged to their innermost Python function (with the native code it
 * calls), the function a Python user can change (counted by count_samples). Fires for the
 * largest such share.
 */
void rule_python(struct rule_ctx *c)
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

void rule_quality(struct rule_ctx *c, uint64_t unknown, uint64_t truncated, uint32_t unk_module)
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

/* What the function table says, for the CPU rules. */
struct cpu_tally {
	uint64_t cls[4], cls_top_n[4]; /* self samples per enum fclass, and of its top function */
	uint32_t cls_top[4];
	uint64_t kernel, fault, sys;   /* kernel-leaf samples, under page faults, a system call */
	uint32_t sys_name;	       /* the system call with the most */
	const struct func_stat *hot;   /* the hottest function no other rule speaks for */
};

static void cpu_tally(const struct rule_ctx *c, struct cpu_tally *t)
{
	const struct hot_result *r = c->hot;

	for (size_t i = 0; i < r->n; i++) {
		const struct func_stat *fs = &r->funcs[i];
		const char *name = str(c, fs->name);
		enum fclass k;

		if (fs->kind == FRAME_KERNEL) {
			t->kernel += fs->self;
			if (!strcmp(name, "exc_page_fault") || !strcmp(name, "handle_mm_fault"))
				t->fault = fs->total > t->fault ? fs->total : t->fault;
			if ((prefix(name, "__x64_sys_") || prefix(name, "__ia32_sys_")) &&
			    fs->total > t->sys) {
				t->sys = fs->total;
				t->sys_name = fs->name;
			}
			continue;
		}
		k = classify(name, str(c, fs->module));
		t->cls[k] += fs->self;
		if (fs->self > t->cls_top_n[k]) {
			t->cls_top_n[k] = fs->self;
			t->cls_top[k] = fs->name;
		}
	}
	/* The hottest function that no other rule speaks for (copies, allocator, spinning,
	 * the kernel, unnamed code, the Python interpreter under Python functions). The
	 * table may be in the report's --sort total order: look at every row. */
	for (size_t i = 0; i < r->n; i++) {
		const struct func_stat *fs = &r->funcs[i];

		if ((t->hot && fs->self <= t->hot->self) ||
		    classify(str(c, fs->name), str(c, fs->module)) != FC_NONE ||
		    fs->kind == FRAME_KERNEL || fs->kind == FRAME_UNKNOWN ||
		    fs->kind == FRAME_SPECIAL || (c->py_samples && interpreter(c, fs)))
			continue;
		t->hot = fs;
	}
}

/* Compute code has a hottest function: a pointer, not an alarm. */
static void rule_hot_function(struct rule_ctx *c, const struct cpu_tally *t)
{
	double s = t->hot ? (double)t->hot->self / c->samples : 0;
	struct finding *f;

	if (s > HOT_SHARE &&
	    (f = add(c, "hot-function", s >= 0.5 ? FINDING_MEDIUM : FINDING_LOW, s))) {
		say(f->what, "%.120s (%.80s) runs %.1f%% of the CPU samples in its own code",
		    str(c, t->hot->name), str(c, t->hot->module), 100 * s);
		say(f->advice, "the place where optimizing pays: `eprof report --lines` shows its "
			       "hottest lines, `eprof flamegraph` its callers");
	}
}

/* Copies, the allocator, spinning. */
static void rule_classes(struct rule_ctx *c, const struct cpu_tally *t)
{
	struct finding *f;
	double s;

	s = (double)t->cls[FC_COPY] / c->samples;
	if (s > CLASS_SHARE && (f = add(c, "memory-copies", sev_of(s), s))) {
		say(f->what, "%.1f%% of the CPU samples copy or fill memory (%.120s the most)", 100 * s,
		    str(c, t->cls_top[FC_COPY]));
		say(f->advice, "find the callers in `eprof flamegraph` (search memcpy): pass buffers "
			       "by reference, reuse them, copy once");
	}
	s = (double)t->cls[FC_ALLOC] / c->samples;
	if (s > CLASS_SHARE && (f = add(c, "allocator", sev_of(s), s))) {
		const char *top = str(c, t->cls_top[FC_ALLOC]);

		say(f->what, "%.1f%% of the CPU samples are in the memory allocator (%.120s the most)",
		    100 * s, top);
		if (strstr(top, "Py") || strstr(top, "py"))
			say(f->advice, "Python makes an object per value: work on whole arrays "
				       "(NumPy, torch) instead of element by element, or reuse objects");
		else
			say(f->advice, "reuse buffers instead of allocating per item (`eprof record "
				       "--mem` shows which stacks allocate), or preload jemalloc/tcmalloc");
	}
	s = (double)t->cls[FC_SPIN] / c->samples;
	if (s > CLASS_SHARE && (f = add(c, "spinning", sev_of(s), s))) {
		say(f->what, "%.1f%% of the CPU samples spin waiting (%.120s the most)", 100 * s,
		    str(c, t->cls_top[FC_SPIN]));
		say(f->advice, "threads burn CPU waiting for others: OMP_WAIT_POLICY=passive for "
			       "OpenMP, fewer threads (OMP_NUM_THREADS), or blocking waits");
	}
}

static void rule_probe_overhead(struct rule_ctx *c)
{
	double s = (double)c->probe / c->samples;
	struct finding *f;

	if (s > CLASS_SHARE && (f = add(c, "probe-overhead", sev_of(s), s))) {
		say(f->what, "%.1f%% of the CPU samples are in eprof's own uprobes (allocation, "
			     "region or CUDA probes): the job ran that much slower while recorded",
		    100 * s);
		say(f->advice, "the rest of the profile is right; for a lighter record, sample "
			       "allocations (--mem rather than --mem=1) or probe fewer functions");
	}
}

static void rule_kernel_time(struct rule_ctx *c, const struct cpu_tally *t)
{
	/* The kernel time of uprobe traps is eprof's, not the program's. */
	uint64_t kernel = t->kernel - (c->probe_kernel < t->kernel ? c->probe_kernel : t->kernel);
	double s = (double)kernel / c->samples;
	char from[256] = "";
	struct finding *f;

	if (s <= KERNEL_SHARE || !(f = add(c, "kernel-time", sev_of(s), s)))
		return;
	if (t->fault * 2 > kernel) {
		say(f->what, "%.1f%% of the CPU samples are in the kernel, %.1f%% under page "
			     "faults", 100 * s, 100.0 * t->fault / c->samples);
		say(f->advice, "memory is touched for the first time over and over: reuse "
			       "buffers instead of fresh mappings, or pre-fault them "
			       "(MAP_POPULATE, transparent huge pages)");
		return;
	}
	if (c->sys_entry && c->sys_own && c->sys_own != c->sys_entry)
		snprintf(from, sizeof(from), ", the most entered from %.80s in %.80s",
			 str(c, c->sys_entry), str(c, c->sys_own));
	else if (c->sys_entry)
		snprintf(from, sizeof(from), ", the most entered from %.80s", str(c, c->sys_entry));
	say(f->what, "%.1f%% of the CPU samples are in the kernel%s%s%.80s", 100 * s, from,
	    t->sys_name ? ", under " : "", t->sys_name ? str(c, t->sys_name) : "");
	say(f->advice, "fewer, larger system calls (bigger I/O buffers, batching); "
		       "`eprof flamegraph` shows which calls and from where");
}

void rule_cpu(struct rule_ctx *c)
{
	struct cpu_tally t = { 0 };

	if (c->samples < MIN_SAMPLES)
		return;
	cpu_tally(c, &t);
	rule_hot_function(c, &t);
	rule_classes(c, &t);
	rule_probe_overhead(c);
	rule_kernel_time(c, &t);
}
