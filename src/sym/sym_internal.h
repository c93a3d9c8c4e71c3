/* SPDX-License-Identifier: MIT */
/* Private to src/sym: the pieces the symbolizer is built from. */
#ifndef EPROF_SYM_INTERNAL_H
#define EPROF_SYM_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sym/symbolizer.h"

struct hmap;

/*
 * A sorted table of address ranges with names: ELF symbols, kallsyms and
 * perf maps all reduce to this, so they share one lookup.
 */
#define SYMTAB_GUESSED 0x1 /* size unknown: runs to the next symbol */

struct symtab_ent {
	uint64_t addr;
	uint64_t end;
	uint32_t name; /* offset into symtab.strs */
	uint32_t aux;  /* kallsyms: module index + 1; perf maps: line number */
	uint8_t flags;
	uint8_t rank; /* lower is better among aliases at one address */
};

struct symtab {
	struct symtab_ent *ents;
	size_t n, cap;
	char *strs;
	size_t strs_len, strs_cap;
	char **pretty; /* lazily demangled names, one per entry, or NULL */
};

void symtab__init(struct symtab *t);
void symtab__clear(struct symtab *t);
int symtab__add(struct symtab *t, uint64_t addr, uint64_t end, const char *name, size_t len,
		uint8_t flags, uint8_t rank, uint32_t aux);
/* Sorts, drops aliases (keeping the best rank) and sizes the guessed entries. */
int symtab__finish(struct symtab *t);
const struct symtab_ent *symtab__find(const struct symtab *t, uint64_t addr);
static inline const char *symtab__name(const struct symtab *t, const struct symtab_ent *e)
{
	return t->strs + e->name;
}
/* Demangled, parameter-stripped name of an entry, cached; NULL on ENOMEM. */
const char *symtab__pretty(struct symtab *t, const struct symtab_ent *e);

/* Results. */
int sym_result__alloc(struct sym_result *r, uint32_t n);
int sym_frame__set(struct sym_frame *f, const char *name, const char *file, uint32_t line,
		   bool inlined);
int sym_result__copy(struct sym_result *dst, const struct sym_result *src);

/* One user-space ELF object (sym_elf.c). */
struct sym_obj;
struct sym_obj *sym_obj__open(struct symbolizer *s, const char *path, int fd, const char *build_id);
void sym_obj__free(struct sym_obj *o);
int sym_obj__err(const struct sym_obj *o);
int sym_obj__resolve(struct sym_obj *o, uint64_t file_off, bool want_lines, struct sym_result *out);

/* DWARF index of one object (sym_dwarf.c). */
struct dw_index;
struct Dwarf;
struct dw_index *dw_index__new(struct Dwarf *dw, uint64_t dwbias);
void dw_index__free(struct dw_index *x);
/*
 * Fills out with the inline chain at addr (a module address): innermost
 * first, the real function last, named outer_name when given. Returns 0,
 * -ENOENT when DWARF does not cover addr, or -ENOMEM.
 */
int dw_index__resolve(struct dw_index *x, uint64_t addr, const char *outer_name,
		      struct sym_result *out);

/* kallsyms (sym_kernel.c). */
struct ksyms;
void ksyms__free(struct ksyms *k);
int ksyms__load(const char *path, struct ksyms **out);
const struct symtab_ent *ksyms__find(const struct ksyms *k, uint64_t addr);
const char *ksyms__name(const struct ksyms *k, const struct symtab_ent *e);
const char *ksyms__module(const struct ksyms *k, const struct symtab_ent *e);

/* perf maps (sym_perfmap.c). */
struct perfmap;
struct perfmap *perfmap__load(const char *path);
void perfmap__free(struct perfmap *m);
/* Re-reads the file when it grew since it was read; returns 0 or -errno. */
int perfmap__refresh(struct perfmap *m);
const char *perfmap__path(const struct perfmap *m);
/* Returns the name covering addr or NULL. */
const char *perfmap__find(const struct perfmap *m, uint64_t addr);

/* Shared state the object code reads from the symbolizer. */
const struct symbolizer_opts *symbolizer__opts(const struct symbolizer *s);
const char *symbolizer__debug_dir(const struct symbolizer *s);
/* A debuginfod lookup; returns an fd or -errno, *path malloc'd. */
int symbolizer__debuginfod(struct symbolizer *s, const unsigned char *id, size_t len, char **path);

/* Hex helpers (sym_elf.c). */
void sym_hex(const unsigned char *bits, size_t len, char *hex);

#endif
