/* SPDX-License-Identifier: MIT */
/*
 * What the findings rules share: their thresholds (docs/findings.md lists them for users),
 * the context each rule reads and adds its findings to, small helpers, and the rules of each
 * domain (findings_cpu.c, findings_wait.c, findings_region.c, findings_mem.c,
 * findings_gpu.c); findings.c counts the samples, runs the rules and sorts what they found.
 * Names from the file are untrusted: every one is printed with a bound.
 */
#ifndef EPROF_FINDINGS_RULES_H
#define EPROF_FINDINGS_RULES_H

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "findings.h"
#include "util/hmap.h"
#include "util/vec.h"

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
#define SLOW_INPUT_SHARE 0.50	   /* a thread's time in reads, of its span */
#define SLOW_INPUT_MIN_NS 100000000 /* 100 ms in reads at least */

struct rule_ctx {
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

static inline enum finding_severity sev_of(double impact)
{
	return impact >= 0.30 ? FINDING_HIGH : impact >= 0.10 ? FINDING_MEDIUM : FINDING_LOW;
}

static inline struct finding *add(struct rule_ctx *c, const char *id, enum finding_severity sev, double impact)
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

__attribute__((format(printf, 2, 3))) static inline void say(char *dst, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(dst, sizeof(((struct finding *)0)->what), fmt, ap);
	va_end(ap);
}

static inline const char *str(const struct rule_ctx *c, uint32_t id)
{
	const char *s = profile__str(c->p, id);

	return s && *s ? s : "?";
}

/* A function name without leading underscores, glibc's __GI_ alias prefix and .part/.constprop
 * suffixes, into buf: "__GI___libc_free" -> "libc_free". */
static inline const char *base_name(const char *name, char *buf, size_t len)
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

static inline bool in_list(const char *s, const char *const *list)
{
	for (; *list; list++)
		if (!strcmp(s, *list))
			return true;
	return false;
}

static inline bool prefix(const char *s, const char *pre)
{
	return !strncmp(s, pre, strlen(pre));
}

/* The C and C++ runtimes and the dynamic loader: never "the program's own" frame. */
static inline bool runtime_module(const struct rule_ctx *c, const struct frame *f)
{
	const char *m = str(c, f->module);

	return strstr(m, "libc.so") || strstr(m, "libpthread") || strstr(m, "ld-linux") ||
	       strstr(m, "libstdc++");
}

/* The innermost frame of a blocking or allocating stack that is the program's own. */
const char *rule_own_frame(const struct rule_ctx *c, uint32_t node);

/* The rules, in the order findings_analyze() runs them. */
void rule_quality(struct rule_ctx *c, uint64_t unknown, uint64_t truncated, uint32_t unk_module);
void rule_python(struct rule_ctx *c);
void rule_cpu(struct rule_ctx *c);
void rule_offcpu(struct rule_ctx *c);
void rule_critpath(struct rule_ctx *c);
void rule_regions(struct rule_ctx *c);
void rule_memory(struct rule_ctx *c);
void rule_gpu(struct rule_ctx *c);
void rule_io(struct rule_ctx *c);

#endif
