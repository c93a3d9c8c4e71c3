/* SPDX-License-Identifier: MIT */
/* The loadable segments of an ELF file: how file offsets map to virtual addresses. */
#ifndef EPROF_ELF_LAYOUT_H
#define EPROF_ELF_LAYOUT_H

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

#endif
