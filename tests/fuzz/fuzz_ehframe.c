// SPDX-License-Identifier: MIT
/*
 * Raw CFI section bytes straight into the table builder (src/unwind/cfi_build.c),
 * without an ELF around them. Input: u8 flags (bit 0: .eh_frame rules, bit 1:
 * 4-byte addresses, bit 2: the same bytes once more as .debug_frame), u32
 * section vaddr, then the section. Bit 3: an on-demand table instead
 * (cfi_lazy.c): u16 length, that many bytes of .eh_frame_hdr (at the section's
 * vaddr - 0x1000), then the section, read from a memfd.
 */
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cfi_check.h"

#define TEXT_LO 0x1000
#define TEXT_HI (TEXT_LO + (64u << 20))

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet();
	return 0;
}

static void check_on_demand(const uint8_t *data, size_t size, uint64_t vaddr, bool asz4)
{
	static int fd = -1;
	struct cfi_lazy_src src = { .text_lo = TEXT_LO, .text_hi = TEXT_HI,
				    .addr_size = asz4 ? 4 : 8, .own_fd = true };
	struct cfi_table *t;
	size_t hlen;
	int err = 0;

	if (size < 2)
		return;
	hlen = (size_t)fuzz_u64(data, 2);
	if (hlen > size - 2)
		return;
	if (fd < 0)
		fd = memfd_create("fuzz_ehframe", 0);
	src.hdr = data + 2;
	src.hdr_size = hlen;
	src.eh_size = size - 2 - hlen;
	src.eh_vaddr = vaddr + 0x1000;
	src.hdr_vaddr = vaddr;
	if (fd < 0 || ftruncate(fd, 0) ||
	    pwrite(fd, data + 2 + hlen, src.eh_size, 0) != (ssize_t)src.eh_size)
		return;
	/* The table would own (and close) fd: give it a copy. */
	src.fd = dup(fd);
	if (src.fd < 0)
		return;
	t = cfi_lazy__table(&src, &err);
	if (t)
		check_lazy(t);
	else
		close(src.fd);
	cfi_table__free(t);
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
	if (flags & 8) {
		check_on_demand(data, size, vaddr, flags & 2);
		return 0;
	}
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
