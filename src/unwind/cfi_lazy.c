// SPDX-License-Identifier: MIT
/*
 * Unwind tables built on demand: .eh_frame_hdr's binary-search table finds
 * the FDE covering a pc, and only the FDEs that lookups reach get rows, each
 * once (cached by table index). A big library of which samples touch a few
 * hundred functions costs those functions, not its whole .eh_frame.
 *
 * The records are read with pread() from the object's file, never mapped: a
 * file truncated under us (objects belong to untrusted users) is a short
 * read, not a SIGBUS. Every offset and length read from the file is checked
 * against .eh_frame's bounds before use.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/hmap.h"
#include "util/vec.h"
#include "cfi.h"
#include "dwarf_read.h"
#include "unwind.h"

/* Real CIEs are tens of bytes and FDEs rarely above a few KiB: larger ones are refused. */
#define CFI_CIE_MAX (16u << 10)
#define CFI_FDE_MAX (1u << 20)

/* Rules of recent pcs, direct-mapped: return addresses recur from sample to sample. */
#define CFI_RECENT 256

/* What an hmap entry costs, for the memory budget (32-byte slots, half full at worst). */
#define CFI_HMAP_ENTRY 64

struct cfi_lazy {
	int fd;
	bool own_fd;
	uint64_t hdr_vaddr;
	uint64_t eh_vaddr, eh_off, eh_size;
	uint64_t text_lo, text_hi;
	unsigned int addr_size;
	size_t n;
	int32_t *tab;	    /* 2n: initial location, FDE address; from hdr_vaddr */
	struct hmap *fdes;  /* table index -> struct cfi_fde * (0: none) */
	struct hmap *cies;  /* offset in .eh_frame -> its record (struct cfi_rec *) */
	void **blocks;	    /* everything allocated since, freed with the table */
	size_t nblocks, bcap;
	/* The FDEs built, sorted by start: hot, where the search table is cold. */
	const struct cfi_fde **built;
	size_t nbuilt, builtcap;
	size_t bytes, rows;
	struct {
		uint64_t pc;	/* UINT64_MAX: empty */
		const struct cfi_rule *r;
	} recent[CFI_RECENT];
};

void cfi_lazy__free(struct cfi_lazy *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->nblocks; i++)
		free(l->blocks[i]);
	free(l->blocks);
	free(l->built);
	hmap__free(l->fdes);
	hmap__free(l->cies);
	free(l->tab);
	if (l->own_fd && l->fd >= 0)
		close(l->fd);
	free(l);
}

/* Keeps p (of size bytes) until the table is freed; frees it and fails when it can't. */
static int keep(struct cfi_lazy *l, void *p, size_t size)
{
	if (arr_grow(l->blocks, l->bcap, l->nblocks + 1)) {
		free(p);
		return -ENOMEM;
	}
	l->blocks[l->nblocks++] = p;
	l->bytes += size + sizeof(void *);
	return 0;
}

/*
 * Reads the record at .eh_frame offset off (at most max bytes) into a block
 * that starts at a multiple of 8 of the section. *rec describes it.
 */
static int read_rec(struct cfi_lazy *l, uint64_t off, size_t max, struct cfi_rec *rec)
{
	uint64_t base = off & ~7ull, len, total;
	uint8_t head[12];
	uint8_t *buf;
	ssize_t got;

	if (off >= l->eh_size || l->eh_size - off < 4)
		return -EINVAL;
	got = pread(l->fd, head, l->eh_size - off < 12 ? 4 : 12, (off_t)(l->eh_off + off));
	if (got < 4)
		return -EIO;
	memcpy(&len, head, 4);
	len &= 0xffffffffull;
	total = 4 + len;
	if (len == 0xffffffff) {
		if (got < 12)
			return -EINVAL;
		memcpy(&len, head + 4, 8);
		total = len > max ? max + 1 : 12 + len;
	}
	if (!len || total > max || total > l->eh_size - off)
		return -EINVAL;
	total += off - base;
	buf = malloc(total);
	if (!buf)
		return -ENOMEM;
	if (pread(l->fd, buf, total, (off_t)(l->eh_off + base)) != (ssize_t)total) {
		free(buf);
		return -EIO;
	}
	*rec = (struct cfi_rec){ .data = buf, .size = total, .off = off - base,
				 .vaddr = l->eh_vaddr + base, .addr_size = l->addr_size };
	return 0;
}

/* The CIE an FDE record points to, read once per CIE. */
static int cie_of(struct cfi_lazy *l, const struct cfi_rec *fde, uint64_t fde_off,
		  const struct cfi_rec **out)
{
	const uint8_t *p = fde->data + fde->off;
	uint64_t v, id = 0, id_off = fde_off + 4;
	struct cfi_rec *cie;
	uint32_t len;
	int err;

	memcpy(&len, p, 4);
	if (len == 0xffffffff) {
		if (fde->size - fde->off < 20)
			return -EINVAL;
		memcpy(&id, p + 12, 8);
		id_off += 8;
	} else {
		if (fde->size - fde->off < 8)
			return -EINVAL;
		memcpy(&id, p + 4, 4);
	}
	if (!id || id > id_off)
		return -EINVAL; /* a CIE, or a pointer before the section */
	if (hmap__get(l->cies, id_off - id, 0, &v)) {
		*out = (const struct cfi_rec *)(uintptr_t)v;
		return *out ? 0 : -EINVAL;
	}
	cie = malloc(sizeof(*cie));
	if (!cie)
		return -ENOMEM;
	err = read_rec(l, id_off - id, CFI_CIE_MAX, cie);
	if (err) {
		free(cie);
		if (err == -ENOMEM)
			return err;
		cie = NULL; /* cached: its FDEs have no rows */
	} else if (keep(l, (void *)cie->data, cie->size)) {
		free(cie);
		return -ENOMEM;
	} else if (keep(l, cie, sizeof(*cie))) {
		return -ENOMEM;
	}
	if (hmap__put(l->cies, id_off - id, 0, (uintptr_t)cie))
		return -ENOMEM;
	l->bytes += CFI_HMAP_ENTRY;
	*out = cie;
	return cie ? 0 : err;
}

/* Builds the rows of table entry i; NULL when its FDE is unusable. */
static struct cfi_fde *build(struct cfi_lazy *l, size_t i, int *err)
{
	uint64_t fde_off = l->hdr_vaddr + (uint64_t)(int64_t)l->tab[2 * i + 1] - l->eh_vaddr;
	uint64_t start = l->hdr_vaddr + (uint64_t)(int64_t)l->tab[2 * i];
	const struct cfi_rec *cie;
	struct cfi_fde *f = NULL;
	struct cfi_rec fde;

	*err = read_rec(l, fde_off, CFI_FDE_MAX, &fde);
	if (*err)
		return NULL;
	*err = cie_of(l, &fde, fde_off, &cie);
	if (!*err)
		f = cfi_build_fde(cie, &fde, l->text_lo, l->text_hi, err);
	free((void *)fde.data);
	/* The search table must name the FDE's own start, or lookups would disagree. */
	if (f && f->start != start) {
		free(f);
		f = NULL;
		*err = -EINVAL;
	}
	return f;
}

/* Index of the last built FDE starting at or before pc, + 1 (0: none). */
static size_t built_pos(const struct cfi_lazy *l, uint64_t pc)
{
	size_t lo = 0, hi = l->nbuilt;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (l->built[mid]->start <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int add_built(struct cfi_lazy *l, const struct cfi_fde *f)
{
	size_t at = built_pos(l, f->start);

	if (arr_grow(l->built, l->builtcap, l->nbuilt + 1))
		return -ENOMEM;
	memmove(l->built + at + 1, l->built + at, (l->nbuilt - at) * sizeof(*l->built));
	l->built[at] = f;
	l->nbuilt++;
	return 0;
}

/* The FDE of table entry i, built on first use; NULL when it has no usable rows. */
static const struct cfi_fde *fde_at(struct cfi_lazy *l, size_t i)
{
	struct cfi_fde *f;
	uint64_t v;
	int err;

	if (hmap__get(l->fdes, i, 0, &v))
		return (const struct cfi_fde *)(uintptr_t)v;
	f = build(l, i, &err);
	if (err == -ENOMEM)
		return NULL; /* not cached: try again once memory is back */
	if (f) {
		if (keep(l, f, sizeof(*f) + f->n * (sizeof(*f->pcs) + sizeof(*f->rules))) ||
		    add_built(l, f))
			return NULL; /* (f is kept: freed with the table) */
		l->rows += f->n;
	}
	if (hmap__put(l->fdes, i, 0, (uintptr_t)f))
		return NULL;
	l->bytes += CFI_HMAP_ENTRY;
	return f;
}

/* The FDE whose range holds ELF vaddr pc, or NULL. */
static const struct cfi_fde *fde_for(struct cfi_lazy *l, uint64_t pc)
{
	int64_t rel = (int64_t)(pc - l->hdr_vaddr);
	size_t lo = 0, hi = l->n;
	const struct cfi_fde *f;

	if (l->nbuilt) {
		size_t b = built_pos(l, pc);

		if (b && pc < l->built[b - 1]->end)
			return l->built[b - 1];
	}
	if (rel < INT32_MIN || rel > INT32_MAX)
		return NULL;
	/* The last entry starting at or before pc. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (l->tab[2 * mid] <= rel)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	f = fde_at(l, lo - 1);
	return f && pc >= f->start && pc < f->end ? f : NULL;
}

static const struct cfi_rule *rule_in(const struct cfi_fde *f, uint64_t pc)
{
	uint32_t off = (uint32_t)(pc - f->start);
	size_t lo = 0, len = f->n;

	/* Invariant pcs[lo] <= off: pcs[0] is 0. */
	while (len > 1) {
		size_t half = len / 2;

		lo = f->pcs[lo + half] <= off ? lo + half : lo;
		len -= half;
	}
	return &f->rules[lo];
}

const struct cfi_rule *cfi_lazy_lookup(const struct cfi_table *t, uint64_t pc)
{
	struct cfi_lazy *l = t->lazy;
	size_t slot = (size_t)((pc ^ (pc >> 9)) * 0x9e3779b97f4a7c15ull >> 56) % CFI_RECENT;
	const struct cfi_fde *f;
	const struct cfi_rule *r;

	if (l->recent[slot].pc == pc)
		return l->recent[slot].r;
	f = fde_for(l, pc);
	if (!f)
		return NULL; /* not kept: a failed allocation must not stick */
	r = rule_in(f, pc);
	l->recent[slot].pc = pc;
	l->recent[slot].r = r;
	return r;
}

bool cfi_lazy__func_range(const struct cfi_table *t, uint64_t vaddr, uint64_t *start,
			  uint64_t *end)
{
	const struct cfi_fde *f = fde_for(t->lazy, vaddr);

	if (!f)
		return false;
	*start = f->start;
	*end = f->end;
	return true;
}

size_t cfi_lazy__bytes(const struct cfi_table *t)
{
	const struct cfi_lazy *l = t->lazy;

	return sizeof(*t) + sizeof(*l) + l->n * 2 * sizeof(*l->tab) +
	       (l->bcap + l->builtcap) * sizeof(void *) + l->bytes;
}

bool cfi_lazy__entry(const struct cfi_table *t, size_t i, uint64_t *start)
{
	if (!t->lazy || i >= t->lazy->n)
		return false;
	*start = t->lazy->hdr_vaddr + (uint64_t)(int64_t)t->lazy->tab[2 * i];
	return true;
}

size_t cfi_lazy__n(const struct cfi_table *t)
{
	return t->lazy->n;
}

size_t cfi_lazy__nrows(const struct cfi_table *t)
{
	return t->lazy->rows;
}

/* Copies the search table; -EINVAL unless sorted and pointing into .eh_frame. */
static int read_table(struct cfi_lazy *l, struct dw_cursor *c, uint64_t count)
{
	l->tab = malloc(count * 2 * sizeof(*l->tab));
	if (!l->tab)
		return -ENOMEM;
	l->n = count;
	for (size_t i = 0; i < count; i++) {
		uint64_t fde;

		l->tab[2 * i] = (int32_t)dw_fixed(c, 4);
		l->tab[2 * i + 1] = (int32_t)dw_fixed(c, 4);
		fde = l->hdr_vaddr + (uint64_t)(int64_t)l->tab[2 * i + 1];
		if (c->err || (i && l->tab[2 * i] <= l->tab[2 * i - 2]) || fde < l->eh_vaddr ||
		    fde - l->eh_vaddr >= l->eh_size)
			return -EINVAL;
	}
	return 0;
}

/* Version 1, .eh_frame where the section says, a datarel sdata4 table of count entries. */
static int read_hdr(struct cfi_lazy *l, const struct cfi_lazy_src *src)
{
	struct dw_cursor c = { .p = src->hdr, .end = src->hdr + src->hdr_size, .sec = src->hdr,
			       .sec_vaddr = src->hdr_vaddr, .data_base = src->hdr_vaddr };
	uint8_t ptr_enc, cnt_enc, tab_enc;
	uint64_t eh, count;

	if (dw_u8(&c) != 1)
		return -EINVAL;
	ptr_enc = dw_u8(&c);
	cnt_enc = dw_u8(&c);
	tab_enc = dw_u8(&c);
	eh = dw_encoded(&c, ptr_enc, src->addr_size);
	if (c.err || eh != src->eh_vaddr || cnt_enc == DW_EH_PE_omit ||
	    tab_enc != (DW_EH_PE_datarel | DW_EH_PE_sdata4))
		return -EINVAL;
	count = dw_encoded(&c, cnt_enc, src->addr_size);
	if (c.err || !count || count > (uint64_t)(c.end - c.p) / 8)
		return -EINVAL;
	return read_table(l, &c, count);
}

struct cfi_table *cfi_lazy__table(const struct cfi_lazy_src *src, int *err)
{
	struct cfi_table *t = calloc(1, sizeof(*t));
	struct cfi_lazy *l = calloc(1, sizeof(*l));

	*err = -ENOMEM;
	if (!t || !l)
		goto fail;
	l->fd = -1;
	for (size_t i = 0; i < CFI_RECENT; i++)
		l->recent[i].pc = UINT64_MAX;
	l->hdr_vaddr = src->hdr_vaddr;
	l->eh_vaddr = src->eh_vaddr;
	l->eh_off = src->eh_off;
	l->eh_size = src->eh_size;
	l->text_lo = src->text_lo;
	l->text_hi = src->text_hi;
	l->addr_size = src->addr_size;
	*err = -EINVAL;
	if (src->hdr_vaddr >= (1ull << 62) || src->eh_size >= (1ull << 32))
		goto fail;
	*err = read_hdr(l, src);
	if (*err)
		goto fail;
	*err = -ENOMEM;
	l->fdes = hmap__new(64);
	l->cies = hmap__new(8);
	if (!l->fdes || !l->cies)
		goto fail;
	l->fd = src->fd;
	l->own_fd = src->own_fd;
	t->lazy = l;
	*err = 0;
	return t;
fail:
	cfi_lazy__free(l);
	free(t);
	return NULL;
}
