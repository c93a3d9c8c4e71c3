// SPDX-License-Identifier: MIT
/*
 * Raw CFI section bytes straight into the table builder (src/unwind/cfi_build.c),
 * without an ELF around them. Input: u8 flags (bit 0: .eh_frame rules, bit 1:
 * 4-byte addresses, bit 2: the same bytes once more as .debug_frame), u32
 * section vaddr, then the section.
 */
#include <stdint.h>

#include "cfi_check.h"

#define TEXT_LO 0x1000
#define TEXT_HI (TEXT_LO + (64u << 20))

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cfi_builder *b;
	struct cfi_table *t;
	uint8_t flags;
	uint64_t vaddr;
	int err = 0;

	if (size < 5)
		return 0;
	flags = data[0];
	vaddr = fuzz_u64(data + 1, 4);
	data += 5;
	size -= 5;
	b = cfi_builder__new(TEXT_LO, TEXT_HI);
	if (!b)
		return 0;
	if (cfi_builder__add(b, data, size, vaddr, flags & 1, flags & 2 ? 4 : 8) ||
	    ((flags & 4) && cfi_builder__add(b, data, size, vaddr, false, flags & 2 ? 4 : 8))) {
		cfi_builder__free(b);
		return 0;
	}
	t = cfi_builder__finish(b, &err);
	cfi_builder__free(b);
	if (t) {
		check_table(t);
		FUZZ_CHECK(!t->n || (t->base >= TEXT_LO && t->limit <= TEXT_HI + 1),
			   "rows outside the text range: %#lx..%#lx", (unsigned long)t->base,
			   (unsigned long)t->limit);
	}
	cfi_table__free(t);
	return 0;
}
