// SPDX-License-Identifier: MIT
// Microbenchmark of src/unwind: CFI table build time and size for big ELF
// files, row lookup cost, and ns per unwind of a real 15+ frame stack of
// this process (own code without frame pointers + libc + ld.so).
//
// Build and run by hand from the repository root:
//   gcc -std=gnu11 -D_GNU_SOURCE -O2 -fomit-frame-pointer -Isrc tools/bench/unwind_bench.c
//       src/unwind/*.c src/util/log.c src/util/hmap.c src/util/elf_layout.c -lelf \
//       -o /tmp/unwind_bench
//   /tmp/unwind_bench [ELF...]
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

__attribute__((noinline)) static void recurse(int n)
{
	if (n)
		recurse(n - 1);
	else
		capture();
	sink++;
}

static void bench_unwind(void)
{
	const struct unwind_map_ops ops = { .find = find };
	enum { N = 200000 };
	uint64_t ips[128];
	enum unwind_stop why;
	int n = 0;
	double t0;

	recurse(DEPTH);
	dl_iterate_phdr(add_obj, NULL);
	t0 = now_ns();
	for (int i = 0; i < N; i++)
		n = unwind_stack(&ops, NULL, &regs, snap, snap_len, ips, 128, &why);
	printf("unwind of this process: %d frames, stop %d, %.0f ns per unwind (%.1f ns/frame)\n",
	       n, why, (now_ns() - t0) / N, (now_ns() - t0) / N / n);
	for (int i = 0; i < nobjs; i++)
		cfi_table__free(objs[i].t);
}

int main(int argc, char **argv)
{
	if (argc > 1)
		for (int i = 1; i < argc; i++)
			bench_build(argv[i]);
	else
		for (size_t i = 0; i < sizeof(default_paths) / sizeof(*default_paths); i++)
			bench_build(default_paths[i]);
	bench_unwind();
	return 0;
}
