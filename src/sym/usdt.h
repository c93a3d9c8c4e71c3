/* SPDX-License-Identifier: MIT */
/*
 * What region probes need from an ELF file: a function's address by name,
 * the USDT probes of its .note.stapsdt section, where a USDT argument lives,
 * and file offsets (uprobes are placed by file offset). Pure: tests feed it
 * files and strings.
 */
#ifndef EPROF_USDT_H
#define EPROF_USDT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct usdt_note {
	char provider[64], name[64];
	uint64_t pc;	    /* ELF vaddr of the probe's nop, .stapsdt.base adjusted */
	uint64_t sema;	    /* ELF vaddr of the semaphore, 0 = none */
	uint64_t pc_off;    /* file offsets of both (0 when not in a loadable segment) */
	uint64_t sema_off;
	char args[128];	    /* "8@%rdi -4@-20(%rbp)" */
};

/* All USDT notes of an open ELF file into *out (malloc'd). Returns the count or -errno. */
int usdt_notes_read(int fd, struct usdt_note **out);

/*
 * Address of function sym (.symtab, then .dynsym; global before local):
 * *vaddr its ELF vaddr, *off its file offset. Returns 0, -ENOENT or -errno.
 */
int elf_func_lookup(int fd, const char *sym, uint64_t *vaddr, uint64_t *off);
/* ELF vaddr of data object sym (STT_OBJECT), as elf_func_lookup. */
int elf_object_lookup(int fd, const char *sym, uint64_t *vaddr);
/* Name of the function starting at vaddr, into buf; false when none. */
bool elf_func_at(int fd, uint64_t vaddr, char *buf, size_t len);
/* File offset of an ELF vaddr; -ENOENT when no loadable segment holds it. */
int elf_vaddr_to_off(int fd, uint64_t vaddr, uint64_t *off);

/*
 * The DT_NEEDED libraries of an ELF file, resolved the way ld.so would for
 * the common cases: DT_RPATH/DT_RUNPATH ($ORIGIN expanded), then
 * ld_library_path, then the standard directories (no ld.so.cache). Calls fn
 * once with each path found; a name listed twice is looked up once, and only
 * the first 1024 DT_NEEDED entries and 64 directories of each search path are
 * used. Returns 0 or -errno.
 */
int elf_needed_paths(int fd, const char *self_path, const char *ld_library_path,
		     void (*fn)(void *arg, const char *path), void *arg);

/* Where argument n (0-based) of a USDT probe is, from its argument string. */
struct usdt_arg {
	int size;	 /* bytes, negative for signed; 0 when absent */
	bool is_const;	 /* $imm */
	bool deref;	 /* off(%reg): in memory at reg + off */
	int reg_off;	 /* offset of the register in struct pt_regs, -1 when unknown */
	int64_t off;	 /* deref offset, or the constant */
};
/* Returns 0, -ENOENT when the probe has fewer arguments, -EINVAL when unparsable. */
int usdt_arg_parse(const char *args, int n, struct usdt_arg *out);

#endif
