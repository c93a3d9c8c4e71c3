// SPDX-License-Identifier: MIT
/*
 * The symbolizer on untrusted ELF files (src/sym: libdwfl opening, symbol
 * tables, PLT names, DWARF lines and inline chains, MiniDebugInfo, the
 * build-id and debuglink searches). The input is written to a tmpfs file,
 * since that is how the symbolizer opens objects, and looked up at offsets
 * spread over its executable segments.
 */
#include <elf.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_common.h"
#include "sym/symbolizer.h"

#define MAX_OFFS 48

static char debug_dir[PATH_MAX];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet();
	/* An empty debug tree: lookups by build-id and debuglink find nothing outside. */
	snprintf(debug_dir, sizeof(debug_dir), "%s/debug", fuzz_dir());
	mkdir(debug_dir, 0700);
	return 0;
}

/* File offsets inside the PT_LOAD segments the program headers claim. */
static size_t pick_offsets(const uint8_t *d, size_t size, uint64_t *off)
{
	const Elf64_Ehdr *eh = (const void *)d;
	size_t n = 0;

	off[n++] = 0;
	if (size < sizeof(*eh) || memcmp(d, ELFMAG, SELFMAG) || d[EI_CLASS] != ELFCLASS64 ||
	    eh->e_phentsize != sizeof(Elf64_Phdr) || eh->e_phoff > size)
		return n;
	for (size_t i = 0; i < eh->e_phnum && n + 9 <= MAX_OFFS; i++) {
		Elf64_Phdr ph;

		if ((size - eh->e_phoff) / sizeof(ph) <= i)
			break;
		memcpy(&ph, d + eh->e_phoff + i * sizeof(ph), sizeof(ph));
		if (ph.p_type != PT_LOAD || !ph.p_filesz)
			continue;
		for (int k = 0; k < 8; k++)
			off[n++] = ph.p_offset + ph.p_filesz / 8 * k + k;
		off[n++] = ph.p_offset + ph.p_filesz - 1;
	}
	return n;
}

static void check(const struct sym_result *r)
{
	FUZZ_CHECK(r->n >= 1 && r->frames, "success without frames");
	for (uint32_t i = 0; i < r->n; i++)
		FUZZ_CHECK(r->frames[i].name, "frame %u without a name", i);
	FUZZ_CHECK(!r->frames[r->n - 1].inlined, "outermost frame marked inlined");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct symbolizer_opts so = { .kallsyms_path = "/nonexistent/kallsyms",
				      .debug_dir = debug_dir, .want_lines = true };
	uint64_t off[MAX_OFFS];
	size_t n = pick_offsets(data, size, off);
	const char *path = fuzz_file("obj", data, size);
	struct symbolizer *s;
	char hex[129];

	elf_read_build_id(path, hex, sizeof(hex));
	for (int pass = 0; pass < 2; pass++) {
		so.want_lines = !pass;
		s = symbolizer__new(&so);
		if (!s)
			return 0;
		for (size_t i = 0; i < n; i++) {
			struct sym_result r;

			if (!symbolizer__elf(s, path, pass ? "00ff" : NULL, off[i], &r))
				check(&r);
			sym_result__free(&r);
			/* The second lookup comes from the result cache. */
			if (!symbolizer__elf(s, path, pass ? "00ff" : NULL, off[i], &r))
				check(&r);
			sym_result__free(&r);
		}
		symbolizer__free(s);
	}
	return 0;
}
