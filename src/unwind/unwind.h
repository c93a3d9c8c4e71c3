/* SPDX-License-Identifier: MIT */
/*
 * DWARF-CFI unwinding of user stacks from a register set and a stack snapshot
 * (the bytes from sp upwards, copied by BPF at sample time).
 *
 * cfi_table: compact rows built once per ELF file from .eh_frame (and
 * .debug_frame when given), sorted by pc: for each pc range, how to find the
 * CFA (rsp+off, rbp+off, PLT rule) and where the caller's rbp was saved.
 * The return address is always at CFA-8 on x86-64.
 */
#ifndef EPROF_UNWIND_H
#define EPROF_UNWIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cfi_table;

/* Builds the table of an ELF file; debug_path (may be NULL) adds its .debug_frame. */
struct cfi_table *cfi_table__load(const char *path, const char *debug_path, int *err);
/*
 * For the recorder: a table whose rows are built per function on first
 * lookup, found through .eh_frame_hdr's search table, when the object has a
 * usable one and no .debug_frame; else the whole table, as cfi_table__load.
 * It keeps the file open and grows as lookups reach new functions
 * (cfi_table__bytes tells how far): lookups must come from one thread.
 */
struct cfi_table *cfi_table__open(const char *path, int *err);
/* Same from an open file, which must stay open as long as the table (it is not closed). */
struct cfi_table *cfi_table__open_fd(int fd, const char *name, int *err);
/* Whether t builds its rows on demand. */
bool cfi_table__on_demand(const struct cfi_table *t);
/* Same from an ELF image in memory (the vDSO). */
struct cfi_table *cfi_table__load_mem(const void *image, size_t size, int *err);
void cfi_table__free(struct cfi_table *t);
/* Heap bytes the table holds. */
size_t cfi_table__bytes(const struct cfi_table *t);
size_t cfi_table__nrows(const struct cfi_table *t);
/* The function (FDE) containing vaddr: how code without symbols is still grouped by function. */
bool cfi_table__func_range(const struct cfi_table *t, uint64_t vaddr, uint64_t *start,
			   uint64_t *end);

struct unwind_regs {
	uint64_t ip, sp, bp;
};

enum unwind_stop {
	UNWIND_END = 0,	       /* reached the outermost frame (RA undefined or 0) */
	UNWIND_NO_CFI,	       /* a pc had no CFI row and frame pointers failed too */
	UNWIND_TOO_DEEP,       /* hit max frames */
	UNWIND_READ_FAULT,     /* needed a stack word outside the snapshot */
	UNWIND_BAD_FRAME,      /* CFA or return address impossible (not increasing, 0) */
	UNWIND_UNMAPPED,       /* a return address in no known mapping */
};

/* What the address space holds around an address, as stack scanning sees it. */
enum unwind_span_kind {
	UNWIND_SPAN_NONE = 0,  /* no executable mapping */
	UNWIND_SPAN_FILE,      /* an executable mapping of a file (ELF code) */
	UNWIND_SPAN_OTHER,     /* executable but no file: JIT code, the vDSO */
};

struct unwind_span {
	uint64_t lo, hi; /* the mapping holding the address, or the gap around it */
	uint8_t kind;	 /* enum unwind_span_kind */
};

struct unwind_map_ops {
	/*
	 * Finds what covers pc: *table (NULL when the object has no CFI, e.g.
	 * JIT code), *bias so that the ELF vaddr is pc - bias. Returns false
	 * when pc lies in no executable mapping.
	 */
	bool (*find)(void *ctx, uint64_t pc, const struct cfi_table **table, uint64_t *bias);
	/*
	 * Stack scanning (both NULL: no scanning). span runs for many stack words
	 * per sample, so it must be cheap and must not read the process's maps
	 * again. code_before copies the len bytes just below pc from the file
	 * mapped there (or the process's memory) and returns false when it cannot.
	 */
	void (*span)(void *ctx, uint64_t addr, struct unwind_span *out);
	bool (*code_before)(void *ctx, uint64_t pc, uint8_t *buf, size_t len);
};

/*
 * Unwinds: ips[0] = regs->ip, then each caller's return address. stack holds
 * stack_len bytes copied from address regs->sp. Frames without CFI fall
 * back to the frame-pointer chain. Returns the number of ips (>= 1 when
 * regs->ip != 0) and sets *why.
 */
int unwind_stack(const struct unwind_map_ops *ops, void *ctx, const struct unwind_regs *regs,
		 const uint8_t *stack, size_t stack_len, uint64_t *ips, int max,
		 enum unwind_stop *why);

/* marks[i] of a frame whose return address was found by scanning the stack. */
#define UNWIND_MARK_SCANNED 0x1

/* Stack words one unwind may examine when scanning, unless told otherwise. */
#define UNWIND_SCAN_WORDS 2048

struct unwind_result {
	enum unwind_stop why;
	unsigned int scanned; /* frames found by scanning */
	unsigned int words;   /* stack words scanning examined */
};

/*
 * unwind_stack, and where a frame has no CFI (JIT code, a function without
 * unwind info) or its CFA needs an rbp that is unknown: scans the snapshot
 * upwards for the caller's return address (docs/unwinding.md, "Stack
 * scanning"). A candidate must lie in an executable file mapping, follow a
 * call instruction and start a CFI chain that holds for a few frames. At most
 * scan_words stack words are examined in all. marks (may be NULL) gets one
 * byte per ip.
 */
int unwind_stack_scan(const struct unwind_map_ops *ops, void *ctx, const struct unwind_regs *regs,
		      const uint8_t *stack, size_t stack_len, unsigned int scan_words,
		      uint64_t *ips, uint8_t *marks, int max, struct unwind_result *res);

#endif
