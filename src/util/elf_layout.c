// SPDX-License-Identifier: MIT
#include <errno.h>
#include <gelf.h>
#include <string.h>

#include "elf_layout.h"

int elf_layout_read(int fd, struct elf_layout *out)
{
	size_t nph = 0;
	GElf_Ehdr eh;
	Elf *elf;

	memset(out, 0, sizeof(*out));
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf)
		return -EINVAL;
	if (elf_kind(elf) != ELF_K_ELF || elf_getphdrnum(elf, &nph) || !gelf_getehdr(elf, &eh)) {
		elf_end(elf);
		return -EINVAL;
	}
	out->entry = eh.e_entry;
	for (size_t i = 0; i < nph && out->nsegs < ELF_LAYOUT_MAX_SEGS; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, i, &ph) || ph.p_type != PT_LOAD)
			continue;
		out->segs[out->nsegs].off = ph.p_offset;
		out->segs[out->nsegs].vaddr = ph.p_vaddr;
		out->segs[out->nsegs].filesz = ph.p_filesz;
		out->nsegs++;
	}
	elf_end(elf);
	return 0;
}

bool elf_layout_vaddr(const struct elf_layout *l, uint64_t off, uint64_t *vaddr)
{
	for (int i = 0; i < l->nsegs; i++) {
		if (off >= l->segs[i].off && off < l->segs[i].off + l->segs[i].filesz) {
			*vaddr = off - l->segs[i].off + l->segs[i].vaddr;
			return true;
		}
	}
	return false;
}
