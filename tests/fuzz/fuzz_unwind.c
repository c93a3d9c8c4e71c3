// SPDX-License-Identifier: MIT
/*
 * The DWARF unwinder on untrusted stack snapshots: the registers and stack
 * bytes come from the target process, so any value may be there. The CFI is
 * this program's own (real tables). Input: u64 ip (an offset into our code),
 * u64 sp, u64 bp, then the stack bytes. Each input is unwound twice: plain,
 * and with stack scanning (our text is the one file mapping, a page at
 * JIT_LO stands for code without CFI; code bytes come from our own memory).
 * For the second, words tagged 0xc0de in their top 16 bits become addresses
 * in our text and 0x57ac ones addresses in the stack, so that the fuzzer
 * reaches the candidate checks without guessing this run's address layout.
 */
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfi_check.h"

#define MAX_FRAMES 128

static struct cfi_table *table;
static uint64_t bias; /* runtime address = ELF vaddr + bias */

static int find_bias(struct dl_phdr_info *info, size_t size, void *data)
{
	bias = info->dlpi_addr; /* the first object is the executable */
	return 1;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	int err = 0;

	fuzz_quiet();
	table = cfi_table__load("/proc/self/exe", NULL, &err);
	if (!table) {
		fprintf(stderr, "fuzz_unwind: no CFI in /proc/self/exe: %d\n", err);
		abort();
	}
	dl_iterate_phdr(find_bias, NULL);
	return 0;
}

static bool find(void *ctx, uint64_t pc, const struct cfi_table **t, uint64_t *b)
{
	if (pc < 4096)
		return false; /* nothing is mapped at the bottom */
	*b = bias;
	*t = pc - bias >= table->base && pc - bias < table->limit ? table : NULL;
	return true;
}

#define JIT_LO 0x100000000ull
#define JIT_HI (JIT_LO + 4096)

static void span(void *ctx, uint64_t addr, struct unwind_span *out)
{
	uint64_t lo = table->base + bias, hi = table->limit + bias;

	out->kind = UNWIND_SPAN_NONE;
	if (addr >= lo && addr < hi) {
		out->lo = lo;
		out->hi = hi;
		out->kind = UNWIND_SPAN_FILE;
	} else if (addr >= JIT_LO && addr < JIT_HI) {
		out->lo = JIT_LO;
		out->hi = JIT_HI;
		out->kind = UNWIND_SPAN_OTHER;
	} else if (addr < JIT_LO) {
		out->lo = 0;
		out->hi = JIT_LO;
	} else if (addr < lo) {
		out->lo = JIT_HI;
		out->hi = lo;
	} else {
		out->lo = hi;
		out->hi = UINT64_MAX;
	}
}

static bool code_before(void *ctx, uint64_t pc, uint8_t *buf, size_t len)
{
	if (pc < table->base + bias + len || pc > table->limit + bias)
		return false;
	memcpy(buf, (const void *)(uintptr_t)(pc - len), len);
	return true;
}

static const uint8_t *relocated(const uint8_t *stack, size_t len, uint64_t sp)
{
	static uint64_t words[1 << 13];
	size_t n = len / 8 < sizeof(words) / 8 ? len / 8 : sizeof(words) / 8;

	memcpy(words, stack, n * 8);
	memcpy((uint8_t *)words + n * 8, stack + n * 8, len - n * 8 < 8 ? len - n * 8 : 0);
	for (size_t i = 0; i < n; i++) {
		uint64_t w = words[i];

		if (w >> 48 == 0xc0de)
			words[i] = table->base + bias + (w & 0xffffffff) % (table->limit - table->base);
		else if (w >> 48 == 0x57ac)
			words[i] = sp + (w & 0xffff);
	}
	return len <= sizeof(words) ? (const uint8_t *)words : stack;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct unwind_map_ops ops = { .find = find };
	static const struct unwind_map_ops sops = { .find = find, .span = span,
						    .code_before = code_before };
	struct unwind_regs regs;
	uint64_t ips[MAX_FRAMES];
	uint8_t marks[MAX_FRAMES];
	struct unwind_result res;
	enum unwind_stop why;
	unsigned int scanned = 0;
	int n;

	if (size < 24)
		return 0;
	regs.ip = table->base + bias + fuzz_u64(data, 8) % (table->limit - table->base);
	regs.sp = fuzz_u64(data + 8, 8);
	regs.bp = fuzz_u64(data + 16, 8);
	n = unwind_stack(&ops, NULL, &regs, data + 24, size - 24, ips, MAX_FRAMES, &why);
	FUZZ_CHECK(n >= 1 && n <= MAX_FRAMES && ips[0] == regs.ip, "%d frames", n);
	FUZZ_CHECK(why <= UNWIND_UNMAPPED, "stop reason %d", why);
	n = unwind_stack_scan(&sops, NULL, &regs, relocated(data + 24, size - 24, regs.sp),
			      size - 24, 64, ips, marks, MAX_FRAMES, &res);
	FUZZ_CHECK(n >= 1 && n <= MAX_FRAMES && ips[0] == regs.ip, "%d frames (scanning)", n);
	FUZZ_CHECK(res.why <= UNWIND_UNMAPPED, "stop reason %d (scanning)", res.why);
	FUZZ_CHECK(res.words <= 64, "%u words scanned of 64", res.words);
	for (int i = 0; i < n; i++)
		scanned += marks[i] == UNWIND_MARK_SCANNED;
	FUZZ_CHECK(scanned == res.scanned && !marks[0], "%u marks for %u scanned frames", scanned,
		   res.scanned);
	/* Without a stack, only the interrupted pc. */
	n = unwind_stack(&ops, NULL, &regs, NULL, 0, ips, 1, &why);
	FUZZ_CHECK(n == 1, "%d frames from an empty stack", n);
	return 0;
}
