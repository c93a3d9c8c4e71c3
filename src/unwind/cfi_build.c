// SPDX-License-Identifier: MIT
/*
 * Builds compact cfi_table rows from .eh_frame / .debug_frame bytes: walks
 * the CIE/FDE records, runs each FDE's DW_CFA program and keeps only what
 * the x86-64 unwinder needs (CFA rule, rbp save rule, RA undefined).
 *
 * Input is untrusted: every read is bounds-checked (dwarf_read.h), every
 * loop advances through a finite buffer or has an explicit bound.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/hmap.h"
#include "util/vec.h"
#include "cfi.h"
#include "dwarf_read.h"
#include "unwind.h"

#define DW_REG_RBP 6
#define DW_REG_RSP 7

/* DW_OP_* used by the expressions we recognize. */
#define DW_OP_deref 0x06
#define DW_OP_and 0x1a
#define DW_OP_plus 0x22
#define DW_OP_shl 0x24
#define DW_OP_ge 0x2a
#define DW_OP_lit0 0x30
#define DW_OP_breg0 0x70

/* remember_state nesting seen in practice is 1-2 deep. */
#define CFI_STATE_STACK 32

enum { R_SAME, R_UNDEF, R_OFFSET, R_EXPR_SP, R_EXPR_BP, R_OTHER };
enum { C_REG, C_PLT, C_DEREF_RBP, C_DEREF_RSP, C_OTHER };

struct reg_rule {
	uint8_t kind;
	int64_t off;
};

struct cfa_rule {
	uint8_t kind;
	uint8_t thresh;	/* C_PLT */
	uint64_t reg;	/* C_REG */
	int64_t off;
};

struct cfi_state {
	struct cfa_rule cfa;
	struct reg_rule rbp, ra;
};

struct cie {
	uint64_t off;
	const uint8_t *insns, *insns_end;
	uint64_t code_align;
	int64_t data_align;
	uint64_t ra_reg;
	uint8_t fde_enc;
	uint8_t addr_size;
	bool aug_z;
	bool signal;
	bool ok;
	/*
	 * The rules the initial instructions leave, computed once (run_cie): every
	 * FDE of the CIE starts from them, and DW_CFA_restore goes back to them.
	 */
	bool ran;
	bool init_ok;		/* false: the instructions are garbage, nothing is known */
	struct cfi_state init;
};

struct fde_ref {
	uint64_t start, end;	/* before resolving: start holds the CIE offset */
	const uint8_t *p;	/* after the CIE pointer; then the instructions */
	const uint8_t *insns_end;
	uint32_t cie;
	uint8_t sec;		/* index into builder.secs */
};

struct cfi_section {
	const uint8_t *data;
	size_t size;
	uint64_t vaddr;
	bool is_eh;
	unsigned int addr_size;
	struct cie *cies;	/* sorted by off: the walk meets them in order */
	size_t ncies, cap;
};

struct build_row {
	uint64_t pc;
	struct cfi_rule r;
};

struct cfi_builder {
	struct cfi_section secs[3];
	unsigned int nsecs;
	struct fde_ref *fdes;
	size_t nfdes, fcap;
	struct build_row *rows;
	size_t nrows, rcap;
	uint64_t text_lo, text_hi;
	bool oom;
	bool one_fde;	/* cfi_build_fde: the CIE is in secs[0], the FDE in secs[1] */
};

struct cfi_builder *cfi_builder__new(uint64_t text_lo, uint64_t text_hi)
{
	struct cfi_builder *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	b->text_lo = text_lo;
	b->text_hi = text_hi;
	return b;
}

void cfi_builder__free(struct cfi_builder *b)
{
	if (!b)
		return;
	for (unsigned int i = 0; i < b->nsecs; i++)
		free(b->secs[i].cies);
	free(b->fdes);
	free(b->rows);
	free(b);
}

static void cursor_init(struct dw_cursor *c, const struct cfi_section *s, const uint8_t *p,
			const uint8_t *end)
{
	c->p = p;
	c->end = end;
	c->sec = s->data;
	c->sec_vaddr = s->vaddr;
	c->data_base = 0;
	c->err = false;
}

/* Parses the augmentation data of a "z" CIE; false on what we can't skip. */
static bool parse_cie_aug(struct dw_cursor *c, const char *aug, struct cie *cie)
{
	uint64_t len = dw_uleb(c);
	const uint8_t *aug_end;

	if (c->err || !dw_avail(c, len))
		return false;
	aug_end = c->p + len;
	for (const char *a = aug + 1; *a; a++) {
		switch (*a) {
		case 'R':
			cie->fde_enc = dw_u8(c);
			break;
		case 'P': {
			uint8_t penc = dw_u8(c);

			/* Only skipped: an indirect pointer can't be followed anyway. */
			if (penc != DW_EH_PE_omit)
				dw_encoded(c, penc & 0x7f, cie->addr_size);
			break;
		}
		case 'L':
			dw_u8(c);
			break;
		case 'S':
			cie->signal = true;
			break;
		case 'B': /* AArch64 B-key, MTE tags: nothing to read */
		case 'G':
			break;
		default:
			/* An unknown letter could come before 'R': the FDE encoding would be a guess. */
			return false;
		}
		if (c->err || c->p > aug_end)
			return false;
	}
	c->p = aug_end;
	return true;
}

static void parse_cie(const struct cfi_section *s, const uint8_t *p, const uint8_t *end,
		      struct cie *cie)
{
	struct dw_cursor c;
	const char *aug;
	uint8_t version;

	cursor_init(&c, s, p, end);
	cie->ok = false;
	cie->fde_enc = DW_EH_PE_absptr;
	cie->addr_size = s->addr_size;
	version = dw_u8(&c);
	if (version != 1 && version != 3 && version != 4)
		return;
	aug = (const char *)c.p;
	if (!memchr(c.p, 0, (size_t)(c.end - c.p)))
		return;
	c.p += strlen(aug) + 1;
	if (version == 4) {
		cie->addr_size = dw_u8(&c);
		dw_u8(&c); /* segment selector size */
		if (cie->addr_size != 4 && cie->addr_size != 8)
			return;
	}
	cie->code_align = dw_uleb(&c);
	cie->data_align = dw_sleb(&c);
	cie->ra_reg = version == 1 ? dw_u8(&c) : dw_uleb(&c);
	cie->aug_z = aug[0] == 'z';
	if (cie->aug_z) {
		if (!parse_cie_aug(&c, aug, cie))
			return;
	} else if (aug[0]) {
		return; /* e.g. the pre-"z" "eh" form: its layout is not self-describing */
	}
	if (c.err || !cie->code_align)
		return;
	cie->insns = c.p;
	cie->insns_end = end;
	cie->ok = true;
}

static int add_cie(struct cfi_section *s, uint64_t off, const uint8_t *p,
		   const uint8_t *end)
{
	struct cie *cie;

	if (arr_grow(s->cies, s->cap, s->ncies + 1))
		return -ENOMEM;
	cie = &s->cies[s->ncies++];
	memset(cie, 0, sizeof(*cie));
	cie->off = off;
	parse_cie(s, p, end, cie);
	return 0;
}

static int add_fde_ref(struct cfi_builder *b, unsigned int sec, uint64_t cie_off, const uint8_t *p,
		       const uint8_t *end)
{
	struct fde_ref *f;

	if (arr_grow(b->fdes, b->fcap, b->nfdes + 1))
		return -ENOMEM;
	f = &b->fdes[b->nfdes++];
	f->start = cie_off;
	f->p = p;
	f->insns_end = end;
	f->sec = (uint8_t)sec;
	return 0;
}

/*
 * Puts c on the body of the record at off (after its length). Returns 1 for a
 * record, 0 for a zero length (the terminator), -1 for garbage.
 */
static int record_at(const struct cfi_section *s, uint64_t off, struct dw_cursor *c,
		     unsigned int *idsz)
{
	uint64_t len;

	*idsz = 4;
	if (off > s->size || s->size - off < 4)
		return -1;
	cursor_init(c, s, s->data + off, s->data + s->size);
	len = dw_fixed(c, 4);
	if (len == 0)
		return 0;
	if (len == 0xffffffff) {
		len = dw_fixed(c, 8);
		*idsz = 8;
	}
	if (c->err || len < *idsz || len > (uint64_t)(c->end - c->p))
		return -1;
	c->end = c->p + len;
	return 1;
}

/* One pass over the records: CIEs are parsed, FDEs queued for resolve_fdes(). */
static int walk_section(struct cfi_builder *b, unsigned int si)
{
	struct cfi_section *s = &b->secs[si];
	uint64_t off = 0;
	int err;

	while (s->size - off >= 4) {
		struct dw_cursor c;
		uint64_t id, id_off, cie_mark;
		unsigned int idsz;
		int rc = record_at(s, off, &c, &idsz);

		if (rc == 0) {
			if (s->is_eh)
				break; /* the terminator the runtime relies on */
			off += 4;
			continue;
		}
		if (rc < 0)
			break;
		id_off = (uint64_t)(c.p - s->data);
		id = dw_fixed(&c, idsz);
		cie_mark = s->is_eh ? 0 : (idsz == 4 ? 0xffffffffull : ~0ull);
		if (id == cie_mark)
			err = add_cie(s, off, c.p, c.end);
		else if (s->is_eh)
			err = id <= id_off ? add_fde_ref(b, si, id_off - id, c.p, c.end) : 0;
		else
			err = add_fde_ref(b, si, id, c.p, c.end);
		if (err)
			return err;
		off = (uint64_t)(c.end - s->data);
	}
	return 0;
}

static const struct cie *find_cie(const struct cfi_section *s, uint64_t off)
{
	size_t lo = 0, hi = s->ncies;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (s->cies[mid].off == off)
			return s->cies[mid].ok ? &s->cies[mid] : NULL;
		if (s->cies[mid].off < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* Decodes each FDE's pc range now that all CIEs are known; drops bad ones. */
static void resolve_fdes(struct cfi_builder *b)
{
	size_t out = 0;

	for (size_t i = 0; i < b->nfdes; i++) {
		struct fde_ref f = b->fdes[i];
		const struct cfi_section *s = &b->secs[f.sec];
		const struct cfi_section *cs = b->one_fde ? &b->secs[0] : s;
		const struct cie *cie = find_cie(cs, f.start);
		struct dw_cursor c;
		uint64_t start, range;

		if (!cie)
			continue;
		cursor_init(&c, s, f.p, f.insns_end);
		start = dw_encoded(&c, cie->fde_enc, cie->addr_size);
		range = dw_encoded(&c, cie->fde_enc & 0x0f, cie->addr_size);
		if (cie->aug_z) {
			uint64_t len = dw_uleb(&c);

			if (dw_avail(&c, len))
				c.p += len;
		}
		if (c.err || !range || start < b->text_lo || start >= b->text_hi ||
		    range > b->text_hi - start)
			continue;
		f.start = start;
		f.end = start + range;
		f.p = c.p;
		f.cie = (uint32_t)(cie - cs->cies);
		b->fdes[out++] = f;
	}
	b->nfdes = out;
}

int cfi_builder__add(struct cfi_builder *b, const uint8_t *data, size_t size, uint64_t vaddr,
		     bool is_eh, unsigned int addr_size)
{
	struct cfi_section *s;

	if (b->nsecs >= sizeof(b->secs) / sizeof(b->secs[0]))
		return -E2BIG;
	s = &b->secs[b->nsecs];
	memset(s, 0, sizeof(*s));
	s->data = data;
	s->size = size;
	s->vaddr = vaddr;
	s->is_eh = is_eh;
	s->addr_size = addr_size;
	return walk_section(b, b->nsecs++);
}

/*
 * Appends a row keeping the array sorted, merged and overlap-free: rows at
 * or after pc (a zero advance, a backwards set_loc, an overlapping FDE) are
 * replaced, and a rule equal to the previous row's adds nothing.
 */
static void push_row(struct cfi_builder *b, uint64_t pc, struct cfi_rule r)
{
	while (b->nrows && b->rows[b->nrows - 1].pc >= pc)
		b->nrows--;
	if (b->nrows && !memcmp(&b->rows[b->nrows - 1].r, &r, sizeof(r)))
		return;
	if (arr_grow(b->rows, b->rcap, b->nrows + 1)) {
		b->oom = true;
		return;
	}
	b->rows[b->nrows].pc = pc;
	b->rows[b->nrows].r = r;
	b->nrows++;
}


/* ---- DW_CFA program execution ------------------------------------------ */

struct cfa_ctx {
	struct cfi_builder *b;
	const struct cfi_section *s;
	const struct cie *cie;
	struct cfi_state st;
	struct cfi_state init;	/* after the CIE's instructions: DW_CFA_restore */
	struct cfi_state stack[CFI_STATE_STACK];
	unsigned int depth;
	uint64_t start, loc, end;
	bool in_cie;	/* initial instructions: rules only, no rows */
};

/* Wrapping multiply: garbage factors must not be signed-overflow UB. */
static int64_t scale(uint64_t v, int64_t factor)
{
	return (int64_t)(v * (uint64_t)factor);
}

static bool fits(int64_t v, int64_t lo, int64_t hi)
{
	return v >= lo && v <= hi;
}

/* Reduces the full state to the row the unwinder evaluates. */
static struct cfi_rule state_to_rule(const struct cfi_state *st, bool signal)
{
	struct cfi_rule r;
	bool ra_std = st->ra.kind == R_OFFSET && st->ra.off == -8;

	memset(&r, 0, sizeof(r));
	r.flags = signal ? CFI_F_SIGNAL : 0;
	if (st->ra.kind == R_UNDEF) {
		r.cfa = CFI_CFA_END;
		return r;
	}
	r.cfa = CFI_CFA_UNSUPPORTED;
	if (!fits(st->cfa.off, INT32_MIN, INT32_MAX - 8))
		return r;
	switch (st->cfa.kind) {
	case C_REG:
		if (ra_std && st->cfa.reg == DW_REG_RSP)
			r.cfa = CFI_CFA_RSP;
		else if (ra_std && st->cfa.reg == DW_REG_RBP)
			r.cfa = CFI_CFA_RBP;
		break;
	case C_DEREF_RBP:
		if (ra_std)
			r.cfa = CFI_CFA_DEREF_RBP;
		break;
	case C_PLT:
		if (ra_std) {
			r.cfa = CFI_CFA_PLT;
			r.cfa_off = (int32_t)st->cfa.off;
			r.rbp_off = st->cfa.thresh;
			return r; /* PLT stubs never touch rbp */
		}
		break;
	case C_DEREF_RSP:
		/* The rt_sigframe form: rsp and rip read from the sigcontext. */
		if (st->ra.kind == R_EXPR_SP && st->ra.off == st->cfa.off + 8)
			r.cfa = CFI_CFA_SIGNAL;
		break;
	}
	if (r.cfa == CFI_CFA_UNSUPPORTED)
		return r;
	r.cfa_off = (int32_t)st->cfa.off;
	if (st->rbp.kind == R_SAME) {
		r.rbp = CFI_RBP_SAME;
	} else if (st->rbp.kind == R_OFFSET && fits(st->rbp.off, INT16_MIN, INT16_MAX)) {
		r.rbp = CFI_RBP_AT_CFA;
		r.rbp_off = (int16_t)st->rbp.off;
	} else if (st->rbp.kind == R_EXPR_SP && fits(st->rbp.off, INT16_MIN, INT16_MAX)) {
		r.rbp = CFI_RBP_AT_SP;
		r.rbp_off = (int16_t)st->rbp.off;
	} else if (st->rbp.kind == R_EXPR_BP && fits(st->rbp.off, INT16_MIN, INT16_MAX)) {
		r.rbp = CFI_RBP_AT_RBP;
		r.rbp_off = (int16_t)st->rbp.off;
	} else {
		r.rbp = CFI_RBP_UNDEF;
	}
	return r;
}

/* Recognizes "breg7 N; breg16 0; lit15; and; litT; ge; lit3; shl; plus". */
static bool match_plt(struct dw_cursor *c, struct cfa_rule *cfa)
{
	static const uint8_t tail[] = { DW_OP_shl, DW_OP_plus };
	uint8_t t;

	if (dw_u8(c) != DW_OP_breg0 + 16 || dw_sleb(c) != 0 || dw_u8(c) != DW_OP_lit0 + 15 ||
	    dw_u8(c) != DW_OP_and)
		return false;
	t = dw_u8(c);
	if (t < DW_OP_lit0 || t > DW_OP_lit0 + 15 || dw_u8(c) != DW_OP_ge ||
	    dw_u8(c) != DW_OP_lit0 + 3)
		return false;
	if (c->err || c->end - c->p != sizeof(tail) || memcmp(c->p, tail, sizeof(tail)))
		return false;
	cfa->kind = C_PLT;
	cfa->thresh = t - DW_OP_lit0;
	return true;
}

static void classify_cfa_expr(const uint8_t *p, uint64_t len, struct cfa_rule *cfa)
{
	struct dw_cursor c = { .p = p, .end = p + len, .sec = p };
	uint8_t op = dw_u8(&c);
	int64_t off;

	cfa->kind = C_OTHER;
	if (op != DW_OP_breg0 + DW_REG_RSP && op != DW_OP_breg0 + DW_REG_RBP)
		return;
	off = dw_sleb(&c);
	if (c.err)
		return;
	cfa->off = off;
	if (c.end - c.p == 1 && *c.p == DW_OP_deref)
		cfa->kind = op == DW_OP_breg0 + DW_REG_RSP ? C_DEREF_RSP : C_DEREF_RBP;
	else if (op == DW_OP_breg0 + DW_REG_RSP)
		match_plt(&c, cfa);
}

/*
 * DW_CFA_expression for a register: "saved at rsp + N" (signal frames) and
 * "saved at rbp + N" (stack realignment) are the forms compilers emit.
 */
static struct reg_rule classify_reg_expr(const uint8_t *p, uint64_t len)
{
	struct dw_cursor c = { .p = p, .end = p + len, .sec = p };
	struct reg_rule r = { .kind = R_OTHER };
	uint8_t op = dw_u8(&c);
	int64_t off;

	if (op != DW_OP_breg0 + DW_REG_RSP && op != DW_OP_breg0 + DW_REG_RBP)
		return r;
	off = dw_sleb(&c);
	if (!c.err && c.p == c.end) {
		r.kind = op == DW_OP_breg0 + DW_REG_RSP ? R_EXPR_SP : R_EXPR_BP;
		r.off = off;
	}
	return r;
}

static void set_reg(struct cfa_ctx *x, uint64_t reg, struct reg_rule r)
{
	if (reg == DW_REG_RBP)
		x->st.rbp = r;
	if (reg == x->cie->ra_reg)
		x->st.ra = r;
}

static void restore_reg(struct cfa_ctx *x, uint64_t reg)
{
	if (reg == DW_REG_RBP)
		x->st.rbp = x->init.rbp;
	if (reg == x->cie->ra_reg)
		x->st.ra = x->init.ra;
}

/* Emits the row for [loc, new_loc); false once past the FDE's end. */
static bool advance_to(struct cfa_ctx *x, uint64_t new_loc)
{
	if (x->loc < x->end)
		push_row(x->b, x->loc, state_to_rule(&x->st, x->cie->signal));
	x->loc = new_loc;
	return new_loc < x->end;
}

static bool advance(struct cfa_ctx *x, uint64_t delta)
{
	uint64_t d, loc;

	if (__builtin_mul_overflow(delta, x->cie->code_align, &d) ||
	    __builtin_add_overflow(x->loc, d, &loc))
		loc = UINT64_MAX;
	return advance_to(x, loc);
}

static struct reg_rule reg_rule(uint8_t kind, int64_t off)
{
	struct reg_rule r = { .kind = kind, .off = off };

	return r;
}

/* Block operands (expressions): returns the block and skips it. */
static const uint8_t *take_block(struct dw_cursor *c, uint64_t *len)
{
	const uint8_t *p;

	*len = dw_uleb(c);
	if (c->err || !dw_avail(c, *len))
		return NULL;
	p = c->p;
	c->p += *len;
	return p;
}

/* The opcodes with operands in the low 6 bits. Returns 1 to stop. */
static int exec_primary(struct cfa_ctx *x, struct dw_cursor *c, uint8_t op)
{
	uint8_t reg = op & 0x3f;

	switch (op >> 6) {
	case 1: /* DW_CFA_advance_loc */
		return advance(x, reg) ? 0 : 1;
	case 2: /* DW_CFA_offset */
		set_reg(x, reg, reg_rule(R_OFFSET, scale(dw_uleb(c), x->cie->data_align)));
		return 0;
	default: /* DW_CFA_restore */
		restore_reg(x, reg);
		return 0;
	}
}

static int exec_state_op(struct cfa_ctx *x, uint8_t op)
{
	if (op == 0x0a) { /* DW_CFA_remember_state */
		if (x->depth >= CFI_STATE_STACK)
			return -EINVAL;
		x->stack[x->depth++] = x->st;
		return 0;
	}
	/* DW_CFA_restore_state: the whole row, CFA included (epilogues rely on it). */
	if (!x->depth)
		return -EINVAL;
	x->st = x->stack[--x->depth];
	return 0;
}

static int exec_cfa_op(struct cfa_ctx *x, struct dw_cursor *c, uint8_t op)
{
	const struct cie *cie = x->cie;
	const uint8_t *blk;
	uint64_t len;

	switch (op) {
	case 0x0c: /* DW_CFA_def_cfa */
		x->st.cfa.reg = dw_uleb(c);
		x->st.cfa.off = (int64_t)dw_uleb(c);
		x->st.cfa.kind = C_REG;
		return 0;
	case 0x12: /* DW_CFA_def_cfa_sf */
		x->st.cfa.reg = dw_uleb(c);
		x->st.cfa.off = scale((uint64_t)dw_sleb(c), cie->data_align);
		x->st.cfa.kind = C_REG;
		return 0;
	case 0x0d: /* DW_CFA_def_cfa_register */
		x->st.cfa.reg = dw_uleb(c);
		if (x->st.cfa.kind != C_REG)
			x->st.cfa.off = 0;
		x->st.cfa.kind = C_REG;
		return 0;
	case 0x0e: /* DW_CFA_def_cfa_offset */
	case 0x13: /* DW_CFA_def_cfa_offset_sf */
		x->st.cfa.off = op == 0x0e ? (int64_t)dw_uleb(c)
					   : scale((uint64_t)dw_sleb(c), cie->data_align);
		if (x->st.cfa.kind != C_REG)
			x->st.cfa.kind = C_OTHER;
		return 0;
	case 0x0f: /* DW_CFA_def_cfa_expression */
		blk = take_block(c, &len);
		if (!blk)
			return -EINVAL;
		classify_cfa_expr(blk, len, &x->st.cfa);
		return 0;
	}
	return -EINVAL;
}

static int exec_reg_op(struct cfa_ctx *x, struct dw_cursor *c, uint8_t op)
{
	int64_t da = x->cie->data_align;
	uint64_t reg = dw_uleb(c), len;
	const uint8_t *blk;

	switch (op) {
	case 0x05: /* DW_CFA_offset_extended */
		set_reg(x, reg, reg_rule(R_OFFSET, scale(dw_uleb(c), da)));
		return 0;
	case 0x11: /* DW_CFA_offset_extended_sf */
		set_reg(x, reg, reg_rule(R_OFFSET, scale((uint64_t)dw_sleb(c), da)));
		return 0;
	case 0x2f: /* DW_CFA_GNU_negative_offset_extended */
		set_reg(x, reg, reg_rule(R_OFFSET, -scale(dw_uleb(c), da)));
		return 0;
	case 0x06: /* DW_CFA_restore_extended */
		restore_reg(x, reg);
		return 0;
	case 0x07: /* DW_CFA_undefined */
		set_reg(x, reg, reg_rule(R_UNDEF, 0));
		return 0;
	case 0x08: /* DW_CFA_same_value */
		set_reg(x, reg, reg_rule(R_SAME, 0));
		return 0;
	case 0x09: /* DW_CFA_register */
		dw_uleb(c);
		set_reg(x, reg, reg_rule(R_OTHER, 0));
		return 0;
	case 0x14: /* DW_CFA_val_offset */
		dw_uleb(c);
		set_reg(x, reg, reg_rule(R_OTHER, 0));
		return 0;
	case 0x15: /* DW_CFA_val_offset_sf */
		dw_sleb(c);
		set_reg(x, reg, reg_rule(R_OTHER, 0));
		return 0;
	case 0x10: /* DW_CFA_expression */
	case 0x16: /* DW_CFA_val_expression */
		blk = take_block(c, &len);
		if (!blk)
			return -EINVAL;
		set_reg(x, reg, op == 0x10 ? classify_reg_expr(blk, len) : reg_rule(R_OTHER, 0));
		return 0;
	}
	return -EINVAL;
}

/* Returns 0 at the end of the program, 1 past the FDE's range, -EINVAL on garbage. */
static int exec_op(struct cfa_ctx *x, struct dw_cursor *c)
{
	uint8_t op = dw_u8(c);
	uint64_t loc;

	/*
	 * A location op among a CIE's initial instructions would make the row they
	 * leave depend on each FDE's range, so it could not be computed once per CIE.
	 * Compilers and assemblers never put one there.
	 */
	if (x->in_cie && ((op >> 6) == 1 || (op >= 0x01 && op <= 0x04)))
		return -EINVAL;
	if (op & 0xc0)
		return exec_primary(x, c, op);
	switch (op) {
	case 0x00: /* DW_CFA_nop */
	case 0x2d: /* DW_CFA_GNU_window_save: SPARC, no operands */
		return 0;
	case 0x01: /* DW_CFA_set_loc */
		loc = dw_encoded(c, x->cie->fde_enc, x->cie->addr_size);
		if (c->err || loc < x->start)
			return -EINVAL;
		return advance_to(x, loc) ? 0 : 1;
	case 0x02: /* DW_CFA_advance_loc1/2/4 */
	case 0x03:
	case 0x04:
		loc = dw_fixed(c, op == 0x02 ? 1 : op == 0x03 ? 2 : 4);
		if (c->err)
			return -EINVAL;
		return advance(x, loc) ? 0 : 1;
	case 0x0a: /* DW_CFA_remember_state */
	case 0x0b: /* DW_CFA_restore_state */
		return exec_state_op(x, op);
	case 0x0c:
	case 0x0d:
	case 0x0e:
	case 0x0f:
	case 0x12:
	case 0x13:
		return exec_cfa_op(x, c, op);
	case 0x2e: /* DW_CFA_GNU_args_size */
		dw_uleb(c);
		return 0;
	}
	return exec_reg_op(x, c, op);
}

/* Runs a DW_CFA program; every op consumes at least one byte, so it ends. */
static int exec_program(struct cfa_ctx *x, const uint8_t *p, const uint8_t *end)
{
	struct dw_cursor c;

	cursor_init(&c, x->s, p, end);
	while (c.p < c.end) {
		int rc = exec_op(x, &c);

		if (c.err)
			return -EINVAL;
		if (rc)
			return rc;
	}
	return 0;
}

/*
 * Runs a CIE's initial instructions, once: thousands of FDEs can share one
 * CIE, and running its program for each of them costs the CIE's length times
 * their number (a 32 KB CIE of nops and 2,000 FDEs: seconds).
 */
static void run_cie(struct cfi_builder *b, const struct cfi_section *s, struct cie *cie)
{
	struct cfa_ctx ctx, *x = &ctx;

	memset(&x->st, 0, sizeof(x->st));
	x->b = b;
	x->s = s;
	x->cie = cie;
	x->st.cfa.kind = C_OTHER;
	x->st.rbp.kind = R_SAME;
	x->st.ra.kind = R_SAME; /* "unsupported" until the CIE says CFA-8 */
	x->init = x->st;	/* a DW_CFA_restore here goes back to the defaults */
	x->depth = 0;
	x->start = x->loc = x->end = 0;
	x->in_cie = true;
	cie->init_ok = exec_program(x, cie->insns, cie->insns_end) == 0;
	cie->init = x->st;
	cie->ran = true;
}

static void run_fde(struct cfi_builder *b, const struct fde_ref *f)
{
	struct cfi_section *s = &b->secs[f->sec];
	struct cfi_section *cs = b->one_fde ? &b->secs[0] : s;
	struct cie *cie = &cs->cies[f->cie];
	struct cfa_ctx ctx, *x = &ctx;
	int rc = -EINVAL;

	if (!cie->ran)
		run_cie(b, cs, cie);
	x->b = b;
	x->s = s;
	x->cie = cie;
	x->st = cie->init;
	x->init = cie->init;
	x->depth = 0;
	x->start = x->loc = f->start;
	x->end = f->end;
	x->in_cie = false;
	if (cie->init_ok)
		rc = exec_program(x, f->p, f->insns_end);
	if (rc < 0)
		/* Rows before the bad op stand; after it nothing is known. */
		x->st.cfa.kind = C_OTHER;
	if (x->loc < x->end)
		advance_to(x, x->end);
	push_row(b, f->end, (struct cfi_rule){ .cfa = CFI_CFA_NONE });
}

static int cmp_fde(const void *a, const void *b)
{
	const struct fde_ref *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return (int)x->sec - (int)y->sec;
}

static uint64_t rule_key(const struct cfi_rule *r)
{
	uint64_t k;

	memcpy(&k, r, sizeof(k));
	return k;
}

/* Distinct rules once each, rows pointing at them; one rule per row if there are too many. */
static int make_palette(struct cfi_table *t, struct cfi_builder *b)
{
	size_t n = t->n, cap = 64;
	struct hmap *seen = hmap__new(256);
	struct cfi_rule *pal = malloc(cap * sizeof(*pal));
	uint16_t *ridx = malloc((n ? n : 1) * sizeof(*ridx));
	int err = -ENOMEM;

	if (!seen || !pal || !ridx)
		goto out;
	t->nrules = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t k = rule_key(&b->rows[i].r), id;

		if (!hmap__get(seen, k, 0, &id)) {
			if (t->nrules == 65536)
				break; /* too many: fall back below */
			if (arr_grow(pal, cap, (size_t)t->nrules + 1))
				goto out;
			id = t->nrules++;

			pal[id] = b->rows[i].r;
			if (hmap__put(seen, k, 0, id))
				goto out;
		}
		ridx[i] = (uint16_t)id;
	}
	if (n && t->nrules == 65536) {
		/* Not seen in practice; keep every row's rule. */
		free(ridx);
		ridx = NULL;
		free(pal);
		pal = malloc(n * sizeof(*pal));
		if (!pal)
			goto out;
		for (size_t i = 0; i < n; i++)
			pal[i] = b->rows[i].r;
		t->nrules = n;
	} else if (t->nrules < cap) {
		struct cfi_rule *np = realloc(pal, (t->nrules ? t->nrules : 1) * sizeof(*pal));

		if (np)
			pal = np;
	}
	t->rules = pal;
	t->ridx = ridx;
	pal = NULL;
	ridx = NULL;
	err = 0;
out:
	free(pal);
	free(ridx);
	hmap__free(seen);
	return err;
}

/* Buckets of ~8 rows: small enough to search in a cache line or two. */
static int make_index(struct cfi_table *t)
{
	uint64_t span = t->limit - t->base;
	size_t nb, i = 0;

	t->shift = 4;
	while (t->shift < 31 && (span >> t->shift) > t->n / 8)
		t->shift++;
	nb = (size_t)((span - 1) >> t->shift) + 1;
	t->idx = malloc((nb + 1) * sizeof(*t->idx));
	if (!t->idx)
		return -ENOMEM;
	for (size_t b = 0; b <= nb; b++) {
		while (i < t->n && t->pcs[i] < ((uint64_t)b << t->shift))
			i++;
		t->idx[b] = (uint32_t)i;
	}
	return 0;
}

static struct cfi_table *make_table(struct cfi_builder *b, int *err)
{
	struct cfi_table *t = calloc(1, sizeof(*t));
	size_t n = b->nrows;

	if (!t)
		goto oom;
	if (n) {
		t->base = b->rows[0].pc;
		if (b->rows[n - 1].pc - t->base >= UINT32_MAX) {
			free(t);
			*err = -E2BIG;
			return NULL;
		}
		t->limit = b->rows[n - 1].pc + 1;
	} else {
		t->limit = t->base + 1;
	}
	t->pcs = malloc((n ? n : 1) * sizeof(*t->pcs));
	if (!t->pcs)
		goto oom;
	for (size_t i = 0; i < n; i++)
		t->pcs[i] = (uint32_t)(b->rows[i].pc - t->base);
	t->n = n;
	if (make_palette(t, b))
		goto oom;
	if (make_index(t))
		goto oom;
	return t;
oom:
	cfi_table__free(t);
	*err = -ENOMEM;
	return NULL;
}

/* Keeps each FDE's range (the first one wins where .debug_frame repeats .eh_frame). */
static struct cfi_table *add_functions(struct cfi_builder *b, struct cfi_table *t, int *err)
{
	uint64_t covered = 0;

	if (!t)
		return NULL;
	t->fn_start = malloc((b->nfdes ? b->nfdes : 1) * sizeof(*t->fn_start));
	t->fn_end = malloc((b->nfdes ? b->nfdes : 1) * sizeof(*t->fn_end));
	if (!t->fn_start || !t->fn_end) {
		cfi_table__free(t);
		*err = -ENOMEM;
		return NULL;
	}
	for (size_t i = 0; i < b->nfdes; i++) {
		if (b->fdes[i].start < covered)
			continue;
		t->fn_start[t->nfn] = b->fdes[i].start;
		t->fn_end[t->nfn++] = b->fdes[i].end;
		covered = b->fdes[i].end;
	}
	return t;
}

struct cfi_table *cfi_builder__finish(struct cfi_builder *b, int *err)
{
	uint64_t covered = 0;
	bool sorted = true;

	resolve_fdes(b);
	for (size_t i = 1; i < b->nfdes && sorted; i++)
		sorted = cmp_fde(&b->fdes[i - 1], &b->fdes[i]) <= 0;
	if (!sorted)
		qsort(b->fdes, b->nfdes, sizeof(*b->fdes), cmp_fde);
	for (size_t i = 0; i < b->nfdes && !b->oom; i++) {
		const struct fde_ref *f = &b->fdes[i];

		/* .debug_frame only fills what .eh_frame leaves uncovered. */
		if (!b->secs[f->sec].is_eh && f->start < covered)
			continue;
		run_fde(b, f);
		if (f->end > covered)
			covered = f->end;
	}
	if (b->oom) {
		*err = -ENOMEM;
		return NULL;
	}
	return add_functions(b, make_table(b, err), err);
}

static void set_rec_section(struct cfi_section *s, const struct cfi_rec *r)
{
	memset(s, 0, sizeof(*s));
	s->data = r->data;
	s->size = r->size;
	s->vaddr = r->vaddr;
	s->is_eh = true;
	s->addr_size = r->addr_size;
}

/* The builder's rows of its one FDE as a block: pcs from the FDE's start, then rules. */
static struct cfi_fde *take_fde_rows(struct cfi_builder *b, int *err)
{
	const struct fde_ref *f = &b->fdes[0];
	size_t n = b->nrows;
	struct cfi_fde *out;

	/* The closing "no CFI" row at the end is implied by end. */
	if (n && b->rows[n - 1].pc >= f->end)
		n--;
	if (!n || b->rows[0].pc != f->start || f->end - f->start > UINT32_MAX) {
		*err = -EINVAL;
		return NULL;
	}
	out = malloc(sizeof(*out) + n * (sizeof(*out->pcs) + sizeof(*out->rules)));
	if (!out) {
		*err = -ENOMEM;
		return NULL;
	}
	out->start = f->start;
	out->end = f->end;
	out->n = (uint32_t)n;
	out->rules = (struct cfi_rule *)(out + 1);
	out->pcs = (uint32_t *)(out->rules + n);
	for (size_t i = 0; i < n; i++) {
		out->pcs[i] = (uint32_t)(b->rows[i].pc - f->start);
		out->rules[i] = b->rows[i].r;
	}
	return out;
}

struct cfi_fde *cfi_build_fde(const struct cfi_rec *cie, const struct cfi_rec *fde,
			      uint64_t text_lo, uint64_t text_hi, int *err)
{
	struct cfi_builder *b = cfi_builder__new(text_lo, text_hi);
	struct cfi_fde *out = NULL;
	struct dw_cursor c;
	unsigned int idsz;

	*err = -ENOMEM;
	if (!b)
		return NULL;
	b->one_fde = true;
	b->nsecs = 2;
	set_rec_section(&b->secs[0], cie);
	set_rec_section(&b->secs[1], fde);
	*err = -EINVAL;
	if (record_at(&b->secs[0], cie->off, &c, &idsz) != 1 || dw_fixed(&c, idsz) != 0 ||
	    c.err)
		goto out;
	*err = -ENOMEM;
	if (add_cie(&b->secs[0], cie->off, c.p, c.end))
		goto out;
	*err = -EINVAL;
	if (record_at(&b->secs[1], fde->off, &c, &idsz) != 1 || !dw_fixed(&c, idsz) || c.err)
		goto out;
	*err = -ENOMEM;
	if (add_fde_ref(b, 1, cie->off, c.p, c.end))
		goto out;
	resolve_fdes(b);
	*err = -EINVAL;
	if (b->nfdes != 1)
		goto out;
	run_fde(b, &b->fdes[0]);
	*err = -ENOMEM;
	if (!b->oom)
		out = take_fde_rows(b, err);
out:
	cfi_builder__free(b);
	if (out)
		*err = 0;
	return out;
}

/* Here, not in cfi_elf.c: libeprof_mem.so links this file alone and frees tables too. */
void cfi_table__free(struct cfi_table *t)
{
	if (!t)
		return;
	cfi_lazy__free(t->lazy);
	free(t->pcs);
	free(t->rules);
	free(t->ridx);
	free(t->idx);
	free(t->fn_start);
	free(t->fn_end);
	free(t);
}
