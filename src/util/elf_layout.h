/* SPDX-License-Identifier: MIT */
/* The loadable segments of an ELF file: how file offsets map to virtual addresses. */
#ifndef EPROF_ELF_LAYOUT_H
#define EPROF_ELF_LAYOUT_H

#include <libelf.h>
#include <stdbool.h>
#include <stdint.h>

#define ELF_LAYOUT_MAX_SEGS 8

struct elf_layout {
	struct {
		uint64_t off, vaddr, filesz;
	} segs[ELF_LAYOUT_MAX_SEGS];
	int nsegs;
	uint64_t entry; /* e_entry */
};

/* Reads the PT_LOAD segments and entry point of an open ELF file. Returns 0 or -errno. */
int elf_layout_read(int fd, struct elf_layout *out);
/* ELF vaddr of a file offset; false when no loadable segment holds it. */
bool elf_layout_vaddr(const struct elf_layout *l, uint64_t off, uint64_t *vaddr);

/*
 * Opens a path that must be a regular file (O_RDONLY, O_CLOEXEC) without ever
 * blocking: paths come from targets and from recorded files, and a FIFO or a
 * device planted there must not hang eprof. Returns the fd, or -1 with errno.
 */
int open_regular(const char *path);
/*
 * Opens path (relative) for reading as a target sees it: rootfd is the target's root
 * (/proc/PID/root) and path is resolved inside it (openat2 RESOLVE_IN_ROOT), never following a
 * symlink when nofollow (RESOLVE_NO_SYMLINKS; without openat2, O_NOFOLLOW on each component).
 * Regular files only, O_NONBLOCK while opening. -1 with errno set.
 */
int open_in_root(int rootfd, const char *path, bool nofollow);

/*
 * The size a compressed section says it inflates to: ch_size of an
 * SHF_COMPRESSED section, or the big-endian size after "ZLIB" of a GNU
 * .zdebug_ one. Returns 1 with *claimed set, 0 for a section stored plainly,
 * -1 for a compressed section whose header cannot be read.
 */
int elf_scn_inflated_size(Elf *elf, Elf_Scn *scn, uint64_t *claimed);
/*
 * libelf and libdw allocate and inflate whatever a compressed section claims.
 * Real DWARF and MiniDebugInfo compress 2-10x: a claim above 64x the stored
 * bytes (plus 1 MiB of slack for small sections) is a decompression bomb.
 */
bool elf_inflate_plausible(uint64_t claimed, uint64_t stored);

#endif
