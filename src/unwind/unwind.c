// SPDX-License-Identifier: MIT
/*
 * Unwinds a user stack from the registers and stack bytes BPF copied at
 * sample time. Runs for every sample, so: no allocation, one binary search
 * per frame, and every stack read checked against the snapshot.
 */
#include <string.h>

#include "cfi.h"
#include "unwind.h"

/* A step that moved to the caller; any other value stops the unwind. */
#define STEP_OK UNWIND_END

struct frame {
	uint64_t pc, sp, bp;
	bool bp_ok;	/* bp holds the value this frame really had */
	bool exact;	/* pc was interrupted, not a return address: look it up as is */
};

struct snapshot {
	const uint8_t *data;
	uint64_t lo;	/* address of data[0] */
	uint64_t len;
};

static inline bool snap_read(const struct snapshot *s, uint64_t addr, uint64_t *v)
{
	uint64_t off = addr - s->lo;

	if (addr < s->lo || s->len < 8 || off > s->len - 8)
		return false;
	memcpy(v, s->data + off, sizeof(*v));
	return true;
}

/*
 * The conventional frame-pointer record: [rbp] = caller's rbp, [rbp+8] = RA.
 * A misaligned rbp is a general-purpose value, not a frame pointer.
 */
static enum unwind_stop step_fp(const struct snapshot *s, struct frame *f)
{
	uint64_t ra, bp;

	if (!f->bp_ok || (f->bp & 7) || f->bp < f->sp || !snap_read(s, f->bp + 8, &ra) ||
	    !snap_read(s, f->bp, &bp))
		return UNWIND_NO_CFI;
	f->sp = f->bp + 16;
	f->pc = ra;
	f->bp = bp;
	f->exact = false;
	return STEP_OK;
}

/* Kernel-built rt_sigframe: the interrupted rsp/rip/rbp from the sigcontext. */
static enum unwind_stop step_signal(const struct snapshot *s, const struct cfi_rule *r,
				    struct frame *f)
{
	uint64_t sp, pc, bp = 0;
	uint64_t at = f->sp + (uint64_t)(int64_t)r->cfa_off;

	if (!snap_read(s, at, &sp) || !snap_read(s, at + 8, &pc))
		return UNWIND_READ_FAULT;
	if (r->rbp == CFI_RBP_AT_SP && !snap_read(s, f->sp + (uint64_t)(int64_t)r->rbp_off, &bp))
		return UNWIND_READ_FAULT;
	if (!sp)
		return UNWIND_BAD_FRAME;
	f->bp_ok = r->rbp == CFI_RBP_AT_SP || (r->rbp == CFI_RBP_SAME && f->bp_ok);
	if (r->rbp == CFI_RBP_AT_SP)
		f->bp = bp;
	f->sp = sp;
	f->pc = pc;
	f->exact = true;
	return STEP_OK;
}

static enum unwind_stop cfa_of(const struct snapshot *s, const struct cfi_rule *r,
			       const struct frame *f, uint64_t *cfa)
{
	uint64_t off = (uint64_t)(int64_t)r->cfa_off;

	switch (r->cfa) {
	case CFI_CFA_RSP:
		*cfa = f->sp + off;
		return STEP_OK;
	case CFI_CFA_RBP:
		if (!f->bp_ok)
			return UNWIND_BAD_FRAME;
		*cfa = f->bp + off;
		return STEP_OK;
	case CFI_CFA_DEREF_RBP:
		if (!f->bp_ok)
			return UNWIND_BAD_FRAME;
		return snap_read(s, f->bp + off, cfa) ? STEP_OK : UNWIND_READ_FAULT;
	case CFI_CFA_PLT:
		/* Past the push in a lazy-binding stub, one more word is on the stack. */
		*cfa = f->sp + off + ((f->pc & 15) >= (uint64_t)r->rbp_off ? 8 : 0);
		return STEP_OK;
	}
	return UNWIND_NO_CFI;
}

/*
 * Moves f to the caller's frame. Returns STEP_OK with f->pc == 0 at the
 * outermost frame.
 */
static enum unwind_stop step(const struct snapshot *s, const struct cfi_rule *r, struct frame *f)
{
	uint64_t cfa, ra, bp = f->bp;
	enum unwind_stop why;

	if (!r || r->cfa == CFI_CFA_NONE || r->cfa == CFI_CFA_UNSUPPORTED)
		return step_fp(s, f);
	if (r->cfa == CFI_CFA_END) {
		f->pc = 0;
		return STEP_OK;
	}
	if (r->cfa == CFI_CFA_SIGNAL)
		return step_signal(s, r, f);
	why = cfa_of(s, r, f, &cfa);
	if (why != STEP_OK)
		return why;
	/* The caller's frame, RA slot included, lies above this one's sp. */
	if (cfa < f->sp + 8 || cfa < f->sp)
		return UNWIND_BAD_FRAME;
	if (!snap_read(s, cfa - 8, &ra))
		return UNWIND_READ_FAULT;
	switch (r->rbp) {
	case CFI_RBP_AT_CFA:
		/*
		 * Epilogues shrink the CFA offset without restating the save
		 * slots: a slot below sp has been popped already, so the live
		 * rbp is the caller's (and the snapshot does not hold the slot).
		 */
		if (cfa + (uint64_t)(int64_t)r->rbp_off < f->sp)
			break;
		if (!snap_read(s, cfa + (uint64_t)(int64_t)r->rbp_off, &bp))
			return UNWIND_READ_FAULT;
		f->bp_ok = true;
		break;
	case CFI_RBP_AT_SP:
		if (!snap_read(s, f->sp + (uint64_t)(int64_t)r->rbp_off, &bp))
			return UNWIND_READ_FAULT;
		f->bp_ok = true;
		break;
	case CFI_RBP_AT_RBP:
		/* Without this frame's rbp the caller's is unknown too. */
		if (f->bp_ok && !snap_read(s, f->bp + (uint64_t)(int64_t)r->rbp_off, &bp))
			return UNWIND_READ_FAULT;
		break;
	case CFI_RBP_UNDEF:
		f->bp_ok = false;
		break;
	}
	f->bp = bp;
	f->sp = cfa;
	f->pc = ra;
	/* After an "S" frame the next pc was interrupted, not called. */
	f->exact = r->flags & CFI_F_SIGNAL;
	return STEP_OK;
}

static const struct cfi_rule *rule_for(const struct unwind_map_ops *ops, void *ctx,
				       const struct frame *f, bool *mapped)
{
	const struct cfi_table *t = NULL;
	uint64_t bias = 0;

	*mapped = ops->find(ctx, f->pc, &t, &bias);
	if (!*mapped || !t)
		return NULL;
	/* A return address may be one past the last byte of a noreturn call's function. */
	return cfi_lookup(t, (f->exact ? f->pc : f->pc - 1) - bias);
}

int unwind_stack(const struct unwind_map_ops *ops, void *ctx, const struct unwind_regs *regs,
		 const uint8_t *stack, size_t stack_len, uint64_t *ips, int max,
		 enum unwind_stop *why)
{
	struct snapshot s = { .data = stack, .lo = regs->sp, .len = stack ? stack_len : 0 };
	struct frame f = { .pc = regs->ip, .sp = regs->sp, .bp = regs->bp, .bp_ok = true,
			   .exact = true };
	const struct cfi_rule *r;
	bool mapped;
	int n = 0;

	*why = UNWIND_END;
	if (!regs->ip || max <= 0)
		return 0;
	/* The snapshot must not wrap around the address space. */
	if (s.len > UINT64_MAX - s.lo)
		s.len = UINT64_MAX - s.lo;
	ips[n++] = f.pc;
	r = rule_for(ops, ctx, &f, &mapped);
	if (!mapped) {
		*why = UNWIND_UNMAPPED;
		return n;
	}
	for (;;) {
		enum unwind_stop st = step(&s, r, &f);

		if (st != STEP_OK) {
			*why = st;
			return n;
		}
		if (!f.pc)
			return n; /* outermost frame */
		if (n >= max) {
			*why = UNWIND_TOO_DEEP;
			return n;
		}
		r = rule_for(ops, ctx, &f, &mapped);
		if (!mapped) {
			*why = UNWIND_UNMAPPED;
			return n;
		}
		ips[n++] = f.pc;
	}
}
