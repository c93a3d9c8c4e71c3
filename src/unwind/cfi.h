/* SPDX-License-Identifier: MIT */
/*
 * Private to src/unwind: the compact row format of a cfi_table and its
 * lookup, shared by the table builder (cfi.c) and the unwinder (unwind.c).
 */
#ifndef EPROF_UNWIND_CFI_H
#define EPROF_UNWIND_CFI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* How a row finds the CFA (the caller's sp) of a frame. */
enum cfi_cfa {
	CFI_CFA_NONE = 0,	/* no CFI covers this pc (a gap between FDEs) */
	CFI_CFA_RSP,		/* CFA = rsp + cfa_off */
	CFI_CFA_RBP,		/* CFA = rbp + cfa_off */
	CFI_CFA_DEREF_RBP,	/* CFA = *(rbp + cfa_off): stack realignment (main) */
	CFI_CFA_PLT,		/* CFA = rsp + cfa_off + ((rip & 15) >= rbp_off ? 8 : 0) */
	CFI_CFA_SIGNAL,		/* rt_sigframe: rsp at sp+cfa_off, rip at sp+cfa_off+8 */
	CFI_CFA_END,		/* return address undefined: outermost frame */
	CFI_CFA_UNSUPPORTED,	/* CFI exists but uses a rule we do not evaluate */
};

/* Where the caller's rbp is. */
enum cfi_rbp {
	CFI_RBP_SAME = 0,	/* unchanged by this frame */
	CFI_RBP_UNDEF,		/* unknown after this frame */
	CFI_RBP_AT_CFA,		/* saved at CFA + rbp_off */
	CFI_RBP_AT_SP,		/* saved at sp + rbp_off (signal frames) */
	CFI_RBP_AT_RBP,		/* saved at rbp + rbp_off (realigned frames) */
};

/* Set in cfi_rule.flags when the FDE's CIE has the "S" augmentation. */
#define CFI_F_SIGNAL 0x1

struct cfi_rule {
	int32_t cfa_off;
	int16_t rbp_off;
	uint8_t cfa;	/* enum cfi_cfa */
	uint8_t rbp : 4; /* enum cfi_rbp */
	uint8_t flags : 4;
};

_Static_assert(sizeof(struct cfi_rule) == 8, "cfi_rule must stay 8 bytes");

/*
 * Rows sorted by pc: rule i applies from base + pcs[i] up to the next row.
 * pcs are 32-bit offsets from base to halve the memory the binary search
 * walks; an object spanning more than 4 GiB of code is rejected. pcs and
 * rules are separate arrays so the search touches only pcs. A binary has few
 * distinct rules (libLLVM: ~950k rows, a few hundred rules), so rules is a
 * palette and ridx[i] the rule of row i: 6 bytes a row instead of 12, which
 * matters for a long -a record. ridx is NULL when the palette would overflow
 * 16 bits; rules then has one entry per row.
 *
 * idx[b] counts the rows that start before bucket b (b << shift): a lookup
 * searches only its bucket's few rows, which keeps a cold lookup in a big
 * table (cc1: ~480k rows) to a handful of cache misses.
 */
struct cfi_table {
	uint64_t base;
	uint64_t limit;		/* first vaddr past the last row */
	size_t n;
	uint32_t *pcs;
	struct cfi_rule *rules; /* palette (nrules), or one per row when ridx is NULL */
	uint16_t *ridx;		/* rule of each row, indexes rules */
	size_t nrules;
	uint32_t *idx;		/* nbuckets + 1 entries */
	unsigned int shift;
	/* Function ranges from the FDEs, sorted by start: names code a symbol table lacks. */
	uint64_t *fn_start, *fn_end;
	size_t nfn;
	/* Set: rows are built per FDE on first lookup (cfi_lazy.c); the arrays above are empty. */
	struct cfi_lazy *lazy;
};

/*
 * One FDE's rows, built on demand: rule i applies from start + pcs[i] up to
 * the next row, the last one up to end. One allocation: never moves, so a
 * rule pointer stays valid as long as its table.
 */
struct cfi_fde {
	uint64_t start, end;
	uint32_t n;
	uint32_t *pcs;
	struct cfi_rule *rules;
};

const struct cfi_rule *cfi_lazy_lookup(const struct cfi_table *t, uint64_t pc);
void cfi_lazy__free(struct cfi_lazy *l);

/* The row covering ELF vaddr pc, or -1 when none. */
static inline ssize_t cfi_lookup_row(const struct cfi_table *t, uint64_t pc)
{
	const uint32_t *pcs = t->pcs;
	size_t lo, len, b;
	uint32_t off;

	if (pc < t->base || pc >= t->limit)
		return -1;
	off = (uint32_t)(pc - t->base);
	b = off >> t->shift;
	lo = t->idx[b];
	len = t->idx[b + 1] - lo;
	/* The row covering the bucket's start begins in an earlier bucket. */
	if (lo) {
		lo--;
		len++;
	}
	if (!len || pcs[lo] > off)
		return -1;
	/* Branch-free search: invariant pcs[lo] <= off. */
	while (len > 1) {
		size_t half = len / 2;

		lo = pcs[lo + half] <= off ? lo + half : lo;
		len -= half;
	}
	return (ssize_t)lo;
}

static inline const struct cfi_rule *cfi_row_rule(const struct cfi_table *t, size_t row)
{
	return t->ridx ? &t->rules[t->ridx[row]] : &t->rules[row];
}

/* The rule covering ELF vaddr pc, or NULL when none. */
static inline const struct cfi_rule *cfi_lookup(const struct cfi_table *t, uint64_t pc)
{
	ssize_t row;

	if (t->lazy)
		return cfi_lazy_lookup(t, pc);
	row = cfi_lookup_row(t, pc);
	return row < 0 ? NULL : cfi_row_rule(t, row);
}

/*
 * Table building. Sections added keep pointing into the caller's data until
 * finish: keep the ELF open until then. text_lo/hi bound the pcs an FDE may
 * cover (the executable PT_LOADs), which rejects garbage ranges early.
 */
struct cfi_builder;

struct cfi_builder *cfi_builder__new(uint64_t text_lo, uint64_t text_hi);
/* is_eh: .eh_frame rules (relative CIE pointers, augmentations, 0 terminator). */
int cfi_builder__add(struct cfi_builder *b, const uint8_t *data, size_t size, uint64_t vaddr,
		     bool is_eh, unsigned int addr_size);
struct cfi_table *cfi_builder__finish(struct cfi_builder *b, int *err);
void cfi_builder__free(struct cfi_builder *b);

/*
 * A record of .eh_frame read on its own: data holds size bytes from ELF vaddr
 * vaddr (a multiple of 8 below the record, so "aligned" pointers decode as in
 * the section), the record starts at data + off.
 */
struct cfi_rec {
	const uint8_t *data;
	size_t size, off;
	uint64_t vaddr;
	unsigned int addr_size;
};

/* The rows of the FDE record fde whose CIE record is cie; NULL with *err set. */
struct cfi_fde *cfi_build_fde(const struct cfi_rec *cie, const struct cfi_rec *fde,
			      uint64_t text_lo, uint64_t text_hi, int *err);

/*
 * An on-demand table: .eh_frame_hdr's search table (hdr, hdr_size bytes at
 * ELF vaddr hdr_vaddr, read now) finds a pc's FDE, whose bytes are read from
 * fd (at eh_off, .eh_frame's file offset) when a lookup first needs them.
 * With own_fd, the table closes fd when freed (else fd must outlive it). NULL
 * with *err = -EINVAL when the header is
 * unusable (not sorted, entries outside .eh_frame): build the whole table.
 */
struct cfi_lazy_src {
	const uint8_t *hdr;
	size_t hdr_size;
	uint64_t hdr_vaddr;
	uint64_t eh_vaddr, eh_off, eh_size;
	uint64_t text_lo, text_hi;
	unsigned int addr_size;
	int fd;
	bool own_fd;
};

struct cfi_table *cfi_lazy__table(const struct cfi_lazy_src *src, int *err);
bool cfi_lazy__func_range(const struct cfi_table *t, uint64_t vaddr, uint64_t *start,
			  uint64_t *end);
size_t cfi_lazy__bytes(const struct cfi_table *t);
size_t cfi_lazy__nrows(const struct cfi_table *t);
size_t cfi_lazy__n(const struct cfi_table *t);
/* The pc where search-table entry i starts (tests, fuzzing). */
bool cfi_lazy__entry(const struct cfi_table *t, size_t i, uint64_t *start);

#endif
