// SPDX-License-Identifier: MIT
/*
 * The DWARF unwinder on untrusted stack snapshots: the registers and stack
 * bytes come from the target process, so any value may be there. The CFI is
 * this program's own (real tables). Input: u64 ip (an offset into our code),
 * u64 sp, u64 bp, then the stack bytes.
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct unwind_map_ops ops = { .find = find };
	struct unwind_regs regs;
	uint64_t ips[MAX_FRAMES];
	enum unwind_stop why;
	int n;

	if (size < 24)
		return 0;
	regs.ip = table->base + bias + fuzz_u64(data, 8) % (table->limit - table->base);
	regs.sp = fuzz_u64(data + 8, 8);
	regs.bp = fuzz_u64(data + 16, 8);
	n = unwind_stack(&ops, NULL, &regs, data + 24, size - 24, ips, MAX_FRAMES, &why);
	FUZZ_CHECK(n >= 1 && n <= MAX_FRAMES && ips[0] == regs.ip, "%d frames", n);
	FUZZ_CHECK(why <= UNWIND_UNMAPPED, "stop reason %d", why);
	/* Without a stack, only the interrupted pc. */
	n = unwind_stack(&ops, NULL, &regs, NULL, 0, ips, 1, &why);
	FUZZ_CHECK(n == 1, "%d frames from an empty stack", n);
	return 0;
}
