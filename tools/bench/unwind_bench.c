// SPDX-License-Identifier: MIT
// Microbenchmark of src/unwind: CFI table build time and size for big ELF
// files, row lookup cost, and ns per unwind of a real 15+ frame stack of
// this process (own code without frame pointers + libc + ld.so): plain, with
// stack scanning on (what the recorder runs; nothing to scan on this stack),
// and through generated code without CFI (tests/fixtures/unwind/jitcode.h),
// which only scanning crosses.
//
// Build and run by hand from the repository root:
//   gcc -std=gnu11 -D_GNU_SOURCE -O2 -fomit-frame-pointer -Isrc -Itests/fixtures \
//       tools/bench/unwind_bench.c src/unwind/*.c src/util/log.c src/util/hmap.c \
//       src/util/elf_layout.c -lelf -o /tmp/unwind_bench
//   /tmp/unwind_bench [--unwind-only | --only plain|scan] [ELF...]
// Without arguments it measures libc, /usr/bin/python3.11 and gcc's cc1.
#include <elf.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <time.h>

#include "unwind/cfi.h"
#include "unwind/unwind.h"
#include "unwind/jitcode.h"

#define DEPTH 15
#define SNAP 32768
#define MAX_OBJS 32

static const char *default_paths[] = {
	"/lib/x86_64-linux-gnu/libc.so.6",
	"/usr/bin/python3.11",
	"/usr/lib/gcc/x86_64-linux-gnu/12/cc1",
};

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void bench_lookup(const struct cfi_table *t)
{
	enum { N = 1 << 20 };
	uint64_t span = t->limit - t->base, x = 88172645463325252ull, hits = 0;
	double t0 = now_ns();

	for (int i = 0; i < N; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		hits += cfi_lookup(t, t->base + x % span) != NULL;
	}
	printf("    random lookup: %.1f ns (%llu hits)\n", (now_ns() - t0) / N,
	       (unsigned long long)hits);
}

/* Rows (pc + rule) plus the bucket index. */
static void bench_build(const char *path)
{
	double best = 1e30;
	struct cfi_table *t = NULL;
	int err = 0;

	for (int i = 0; i < 5; i++) {
		double t0 = now_ns();

		cfi_table__free(t);
		t = cfi_table__load(path, NULL, &err);
		if (!t) {
			printf("%s: load failed: %s\n", path, strerror(-err));
			return;
		}
		if (now_ns() - t0 < best)
			best = now_ns() - t0;
	}
	printf("%s: build %.2f ms (best of 5), %zu rows, %zu rules, %zu KiB\n", path, best / 1e6,
	       cfi_table__nrows(t), t->nrules, cfi_table__bytes(t) / 1024);
	bench_lookup(t);
	cfi_table__free(t);
}

/* ---- unwinding this process's own stack -------------------------------- */

struct obj {
	uint64_t lo, hi, bias;
	struct cfi_table *t;
};

static struct obj objs[MAX_OBJS];
static int nobjs;

static size_t vdso_size(const ElfW(Ehdr) *eh)
{
	const ElfW(Phdr) *ph = (const void *)((const char *)eh + eh->e_phoff);
	size_t size = eh->e_shoff + (size_t)eh->e_shnum * eh->e_shentsize;

	for (int i = 0; i < eh->e_phnum; i++)
		if (ph[i].p_type == PT_LOAD && ph[i].p_offset + ph[i].p_filesz > size)
			size = ph[i].p_offset + ph[i].p_filesz;
	return size;
}

static int add_obj(struct dl_phdr_info *info, size_t size __attribute__((unused)),
		   void *data __attribute__((unused)))
{
	const void *vdso = (const void *)getauxval(AT_SYSINFO_EHDR);
	struct obj *o = &objs[nobjs];
	const char *name = info->dlpi_name;
	int err;

	if (nobjs >= MAX_OBJS)
		return 1;
	o->lo = UINT64_MAX;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		if (info->dlpi_addr + ph->p_vaddr < o->lo)
			o->lo = info->dlpi_addr + ph->p_vaddr;
		if (info->dlpi_addr + ph->p_vaddr + ph->p_memsz > o->hi)
			o->hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
	}
	o->bias = info->dlpi_addr;
	if (vdso && strstr(name, "vdso"))
		o->t = cfi_table__load_mem(vdso, vdso_size(vdso), &err);
	else
		o->t = cfi_table__load(name[0] ? name : "/proc/self/exe", NULL, &err);
	nobjs++;
	return 0;
}

static bool find(void *ctx __attribute__((unused)), uint64_t pc, const struct cfi_table **t, uint64_t *bias)
{
	for (int i = 0; i < nobjs; i++) {
		if (pc >= objs[i].lo && pc < objs[i].hi) {
			*t = objs[i].t;
			*bias = objs[i].bias;
			return true;
		}
	}
	return false;
}

static struct unwind_regs regs;
static uint8_t snap[SNAP];
static size_t snap_len;
volatile int sink;

__attribute__((noinline)) static void capture(void)
{
	extern char **environ;
	uint64_t top = (uint64_t)(uintptr_t)environ[0];

	__asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2"
			 : "=a"(regs.ip), "=d"(regs.sp), "=c"(regs.bp)
			 :
			 : "memory");
	/* Bounded by the stack's top: the environment strings lie just below it. */
	snap_len = SNAP;
	if (top > regs.sp && top - regs.sp < snap_len)
		snap_len = top - regs.sp;
	memcpy(snap, (const void *)(uintptr_t)regs.sp, snap_len);
	sink++;
}

static jit_fn jit;

__attribute__((noinline)) static void recurse(int n, bool through_jit)
{
	if (n)
		recurse(n - 1, through_jit);
	else if (through_jit)
		jit(capture, 1, 0, 0); /* generated code without CFI, calling capture */
	else
		capture();
	sink++;
}

#ifdef UNWIND_MARK_SCANNED
/* The recorder's span: objects' code, the generated code's page, gaps between. */
static void span(void *ctx __attribute__((unused)), uint64_t addr, struct unwind_span *out)
{
	uint64_t j = (uint64_t)(uintptr_t)jit;

	out->lo = 0;
	out->hi = UINT64_MAX;
	out->kind = UNWIND_SPAN_NONE;
	if (addr >= j && addr < j + 4096) {
		out->lo = j;
		out->hi = j + 4096;
		out->kind = UNWIND_SPAN_OTHER;
		return;
	}
	for (int i = 0; i < nobjs; i++) {
		if (addr >= objs[i].lo && addr < objs[i].hi) {
			out->lo = objs[i].lo;
			out->hi = objs[i].hi;
			out->kind = UNWIND_SPAN_FILE;
			return;
		}
		if (objs[i].hi <= addr && objs[i].hi > out->lo)
			out->lo = objs[i].hi;
		if (objs[i].lo > addr && objs[i].lo < out->hi)
			out->hi = objs[i].lo;
	}
}

/* Own code: read in place, as the recorder's cache hit copies its cached bytes. */
static bool code_before(void *ctx __attribute__((unused)), uint64_t pc, uint8_t *buf, size_t len)
{
	memcpy(buf, (const void *)(uintptr_t)(pc - len), len);
	return true;
}
#endif

static bool find_jit(void *ctx, uint64_t pc, const struct cfi_table **t, uint64_t *bias)
{
	uint64_t j = (uint64_t)(uintptr_t)jit;

	if (pc >= j && pc < j + 4096) {
		*t = NULL;
		*bias = 0;
		return true;
	}
	return find(ctx, pc, t, bias);
}

static void time_unwind(const char *what, bool scan)
{
	enum { N = 200000 };
	uint64_t ips[128];
	int n = 0, stop = 0;
	double t0;

#ifdef UNWIND_MARK_SCANNED
	const struct unwind_map_ops sops = { .find = find_jit, .span = span,
					     .code_before = code_before };
	struct unwind_result res;

	if (scan) {
		t0 = now_ns();
		for (int i = 0; i < N; i++)
			n = unwind_stack_scan(&sops, NULL, &regs, snap, snap_len, UNWIND_SCAN_WORDS,
					      ips, NULL, 128, &res);
		stop = res.why;
		printf("%-44s %3d frames, stop %d, %4.0f ns per unwind (%.1f ns/frame)\n", what,
		       n, stop, (now_ns() - t0) / N, (now_ns() - t0) / N / n);
		return;
	}
#else
	if (scan) {
		printf("%-44s (no stack scanning in this build)\n", what);
		return;
	}
#endif
	{
		const struct unwind_map_ops ops = { .find = find_jit };
		enum unwind_stop why = UNWIND_END;

		t0 = now_ns();
		for (int i = 0; i < N; i++)
			n = unwind_stack(&ops, NULL, &regs, snap, snap_len, ips, 128, &why);
		stop = why;
	}
	printf("%-44s %3d frames, stop %d, %4.0f ns per unwind (%.1f ns/frame)\n", what, n, stop,
	       (now_ns() - t0) / N, (now_ns() - t0) / N / n);
}

static const char *only; /* --only plain|scan: one timing (for instruction counts) */

static void bench_unwind(void)
{
	jit = jit_install(1);
	if (!jit) {
		perror("jit_install");
		return;
	}
	dl_iterate_phdr(add_obj, NULL);
	recurse(DEPTH, false);
	if (only) {
		time_unwind(only, !strcmp(only, "scan"));
		return;
	}
	time_unwind("(warm-up)", false);
	time_unwind("unwind of this process (CFI all the way):", false);
	time_unwind("  the same with stack scanning on:", true);
	recurse(DEPTH, true);
	time_unwind("through generated code, no scanning:", false);
	time_unwind("through generated code, scanning:", true);
	for (int i = 0; i < nobjs; i++)
		cfi_table__free(objs[i].t);
}

int main(int argc, char **argv)
{
	int first = 1;

	if (argc > 2 && !strcmp(argv[1], "--only")) {
		only = argv[2];
		bench_unwind();
		return 0;
	}
	if (argc > 1 && !strcmp(argv[1], "--unwind-only")) {
		bench_unwind();
		return 0;
	}
	if (argc > first)
		for (int i = first; i < argc; i++)
			bench_build(argv[i]);
	else
		for (size_t i = 0; i < sizeof(default_paths) / sizeof(*default_paths); i++)
			bench_build(default_paths[i]);
	bench_unwind();
	return 0;
}
