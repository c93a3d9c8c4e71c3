// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "mem_probe.h"
#include "util/elf_layout.h"

const char *const mem_func_names[MEM_NFUNCS] = {
	[MEM_MALLOC] = "malloc",
	[MEM_CALLOC] = "calloc",
	[MEM_REALLOC] = "realloc",
	[MEM_REALLOCARRAY] = "reallocarray",
	[MEM_POSIX_MEMALIGN] = "posix_memalign",
	[MEM_ALIGNED_ALLOC] = "aligned_alloc",
	[MEM_MEMALIGN] = "memalign",
	[MEM_VALLOC] = "valloc",
	[MEM_PVALLOC] = "pvalloc",
	[MEM_FREE] = "free",
};

/* Length of an instruction the x86 uprobe code emulates instead of single-stepping; 0 if not. */
static uint32_t emulated_len(const uint8_t *c, size_t n)
{
	if (n >= 1 && (c[0] >= 0x50 && c[0] <= 0x57))
		return 1; /* push reg */
	if (n >= 2 && c[0] == 0x41 && c[1] >= 0x50 && c[1] <= 0x57)
		return 2; /* push r8..r15 */
	if (n >= 2 && ((c[0] >= 0x70 && c[0] <= 0x7f) || c[0] == 0xeb))
		return 2; /* jcc rel8, jmp rel8 */
	if (n >= 5 && (c[0] == 0xe9 || c[0] == 0xe8))
		return 5; /* jmp rel32, call rel32 */
	if (n >= 6 && c[0] == 0x0f && c[1] >= 0x80 && c[1] <= 0x8f)
		return 6; /* jcc rel32 */
	if (n >= 1 && c[0] == 0x90)
		return 1; /* nop */
	if (n >= 2 && c[0] == 0x66 && c[1] == 0x90)
		return 2;
	return 0;
}

/* Length of an instruction that may be passed over: no branch, no register written. */
static uint32_t passive_len(const uint8_t *c, size_t n)
{
	if (n >= 4 && c[0] == 0xf3 && c[1] == 0x0f && c[2] == 0x1e && c[3] == 0xfa)
		return 4; /* endbr64 */
	/* test %rdi,%rdi / %rsi,%rsi / %rdx,%rdx (flags only) */
	if (n >= 3 && c[0] == 0x48 && c[1] == 0x85 && (c[2] == 0xff || c[2] == 0xf6 || c[2] == 0xd2))
		return 3;
	/* cmpb $imm8, disp32(%rip) / cmpl $imm8, disp32(%rip) (flags only) */
	if (n >= 7 && (c[0] == 0x80 || c[0] == 0x83) && c[1] == 0x3d)
		return 7;
	return 0;
}

uint32_t mem_probe_offset(const uint8_t *code, size_t n)
{
	uint32_t off = 0;

	for (int i = 0; i < 4 && off < n; i++) {
		uint32_t len;

		if (emulated_len(code + off, n - off))
			return off;
		len = passive_len(code + off, n - off);
		if (!len)
			return 0;
		off += len;
	}
	return 0;
}

/* Virtual address and file offset of each of names[0..n) the file defines as a function. */
static void find_syms(Elf *elf, const char *const *names, int n, uint64_t *vaddr, uint64_t *foff)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		Elf_Data *d;
		size_t nsym;

		if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_DYNSYM && sh.sh_type != SHT_SYMTAB))
			continue;
		d = elf_getdata(scn, NULL);
		if (!d || !sh.sh_entsize)
			continue;
		nsym = sh.sh_size / sh.sh_entsize;
		for (size_t i = 0; i < nsym; i++) {
			GElf_Sym s;
			GElf_Shdr tsh;
			Elf_Scn *ts;
			const char *name;

			if (!gelf_getsym(d, i, &s) || GELF_ST_TYPE(s.st_info) != STT_FUNC ||
			    s.st_shndx == SHN_UNDEF || s.st_shndx >= SHN_LORESERVE || !s.st_value)
				continue;
			name = elf_strptr(elf, sh.sh_link, s.st_name);
			if (!name)
				continue;
			for (int f = 0; f < n; f++) {
				if (vaddr[f] || strcmp(name, names[f]))
					continue;
				ts = elf_getscn(elf, s.st_shndx);
				if (!ts || !gelf_getshdr(ts, &tsh) || tsh.sh_type != SHT_PROGBITS ||
				    s.st_value < tsh.sh_addr)
					break;
				vaddr[f] = s.st_value;
				foff[f] = s.st_value - tsh.sh_addr + tsh.sh_offset;
				break;
			}
		}
	}
}

int mem_probe_named(const char *path, const char *const *names, int n, uint64_t *offs)
{
	uint64_t vaddr[MEM_PROBE_NAMED_MAX] = { 0 };
	Elf *elf;
	int fd, found = 0;

	if (n < 0 || n > MEM_PROBE_NAMED_MAX)
		return -EINVAL;
	memset(offs, 0, sizeof(*offs) * (size_t)n);
	fd = open_regular(path);
	if (fd < 0)
		return -errno;
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (elf && elf_kind(elf) == ELF_K_ELF)
		find_syms(elf, names, n, vaddr, offs);
	for (int f = 0; f < n; f++)
		found += vaddr[f] != 0;
	if (elf)
		elf_end(elf);
	close(fd);
	return found;
}

int mem_probe_find(const char *path, struct mem_probe_set *set)
{
	uint64_t vaddr[MEM_NFUNCS] = { 0 }, foff[MEM_NFUNCS] = { 0 };
	Elf *elf;
	int fd, err = 0;

	memset(set, 0, sizeof(*set));
	set->free_idx = -1;
	fd = open_regular(path);
	if (fd < 0)
		return -errno;
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		err = 0; /* not an ELF file: nothing to probe */
		goto out;
	}
	find_syms(elf, mem_func_names, MEM_NFUNCS, vaddr, foff);
	if (!vaddr[MEM_MALLOC] || !vaddr[MEM_FREE])
		goto out;
	for (int f = 0; f < MEM_NFUNCS; f++) {
		uint8_t code[32];
		ssize_t got;
		bool dup = false;

		if (!vaddr[f])
			continue;
		for (int g = 0; g < f; g++)
			dup |= vaddr[g] == vaddr[f];
		if (dup)
			continue;
		got = pread(fd, code, sizeof(code), foff[f]);
		set->skipped[set->n] = got > 0 ? mem_probe_offset(code, got) : 0;
		set->offsets[set->n] = foff[f] + set->skipped[set->n];
		set->cookies[set->n] = f;
		if (f == MEM_FREE)
			set->free_idx = set->n;
		set->n++;
	}
out:
	if (elf)
		elf_end(elf);
	close(fd);
	return err;
}

uint64_t mem_sample_weight(uint64_t size, uint64_t mean)
{
	double p;

	if (mean <= 1 || !size)
		return size;
	/* P(a Poisson process of rate 1/mean hits one of size bytes) = 1 - e^(-size/mean) */
	p = -expm1(-(double)size / (double)mean);
	if (p <= 0)
		return size;
	return (uint64_t)llround((double)size / p);
}
