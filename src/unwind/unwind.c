// SPDX-License-Identifier: MIT
/*
 * Unwinds a user stack from the registers and stack bytes BPF copied at
 * sample time. Runs for every sample, so: no allocation, one binary search
 * per frame, and every stack read checked against the snapshot.
 */
#include <string.h>

#include "cfi.h"
#include "insn.h"
#include "unwind.h"

#define unlikely(x) __builtin_expect(!!(x), 0)

/* A step that moved to the caller; any other value stops the unwind. */
#define STEP_OK UNWIND_END
/* Internal: the CFA is rbp-based and rbp is unknown here (after a scanned frame). */
#define STEP_NEED_BP 100
/* Internal: no CFI row that can be evaluated: frame pointers or scanning. */
#define STEP_NO_RULE 101

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

static inline __attribute__((always_inline)) int cfa_of(const struct snapshot *s,
							const struct cfi_rule *r,
							const struct frame *f, uint64_t *cfa)
{
	uint64_t off = (uint64_t)(int64_t)r->cfa_off;

	switch (r->cfa) {
	case CFI_CFA_RSP:
		*cfa = f->sp + off;
		return STEP_OK;
	case CFI_CFA_RBP:
		if (!f->bp_ok)
			return STEP_NEED_BP;
		*cfa = f->bp + off;
		return STEP_OK;
	case CFI_CFA_DEREF_RBP:
		if (!f->bp_ok)
			return STEP_NEED_BP;
		return snap_read(s, f->bp + off, cfa) ? STEP_OK : UNWIND_READ_FAULT;
	case CFI_CFA_PLT:
		/* Past the push in a lazy-binding stub, one more word is on the stack. */
		*cfa = f->sp + off + ((f->pc & 15) >= (uint64_t)r->rbp_off ? 8 : 0);
		return STEP_OK;
	}
	return UNWIND_NO_CFI;
}

/*
 * Moves f to the caller's frame by its CFI row. Returns STEP_OK with f->pc == 0
 * at the outermost frame, STEP_NO_RULE when r cannot be evaluated (no row,
 * unsupported) and STEP_NEED_BP; f is left alone unless the step succeeds.
 * Inlined: the per-frame path of every unwind (a call cost a third more).
 */
static inline __attribute__((always_inline)) int step(const struct snapshot *s,
						      const struct cfi_rule *r, struct frame *f)
{
	uint64_t cfa, ra, bp = f->bp;
	int why;

	if (!r || r->cfa == CFI_CFA_NONE || r->cfa == CFI_CFA_UNSUPPORTED)
		return STEP_NO_RULE;
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

static bool no_cfi(const struct cfi_rule *r)
{
	return !r || r->cfa == CFI_CFA_NONE || r->cfa == CFI_CFA_UNSUPPORTED;
}

/* ---- stack scanning ------------------------------------------------------ */

/* Frames of CFI a candidate must unwind through consistently. */
#define SCAN_CHECK_FRAMES 3
/* Saved-rbp guesses tried for a candidate whose CFA is rbp-based. */
#define SCAN_BP_GUESSES 8

struct scan {
	const struct unwind_map_ops *ops;
	void *ctx;
	const struct snapshot *s;
	unsigned int left; /* stack words this unwind may still examine */
	unsigned int used;
	struct unwind_span cache[4]; /* recent spans: most words fall in a few */
	unsigned int next;
};

static uint8_t span_kind(struct scan *sc, uint64_t addr)
{
	struct unwind_span sp = { 0 };

	for (int i = 0; i < 4; i++)
		if (addr >= sc->cache[i].lo && addr < sc->cache[i].hi)
			return sc->cache[i].kind;
	sc->ops->span(sc->ctx, addr, &sp);
	if (addr < sp.lo || addr >= sp.hi) {
		/* A span that does not hold addr is not cached. */
		return sp.kind;
	}
	sc->cache[sc->next++ & 3] = sp;
	return sp.kind;
}

/* The rule and table covering an address (exact, or a return address when !exact). */
static const struct cfi_rule *rule_at(struct scan *sc, uint64_t pc, bool exact,
				      const struct cfi_table **table, uint64_t *bias)
{
	*table = NULL;
	if (!sc->ops->find(sc->ctx, pc, table, bias) || !*table)
		return NULL;
	return cfi_lookup(*table, (exact ? pc : pc - 1) - *bias);
}

/*
 * Does the CFI chain from candidate frame c hold: each CFA above the last
 * sp and inside the snapshot, each return address mapped? The first step
 * must succeed in full; later ones may run past the snapshot or into code
 * without CFI (nothing more to check there). Returns STEP_OK, STEP_NEED_BP
 * (rbp needed but unknown; *first when the candidate's own CFA needed it) or
 * UNWIND_BAD_FRAME; *used_bp when a known rbp was used.
 */
static int check_chain(struct scan *sc, struct frame c, const struct cfi_rule *r, bool *used_bp,
		       bool *first)
{
	const struct cfi_table *t;
	uint64_t bias;

	for (int d = 0; d < SCAN_CHECK_FRAMES; d++) {
		bool bp_known = c.bp_ok;
		int st;

		if (r->cfa == CFI_CFA_END)
			return STEP_OK;
		if (no_cfi(r) || (!d && (r->cfa == CFI_CFA_PLT || r->cfa == CFI_CFA_SIGNAL)))
			return d ? STEP_OK : UNWIND_BAD_FRAME;
		st = step(sc->s, r, &c);
		if (st == STEP_NEED_BP) {
			*first = !d;
			return STEP_NEED_BP;
		}
		if (bp_known && (r->cfa == CFI_CFA_RBP || r->cfa == CFI_CFA_DEREF_RBP))
			*used_bp = true;
		if (st == UNWIND_READ_FAULT && d)
			return STEP_OK;
		if (st != STEP_OK)
			return UNWIND_BAD_FRAME;
		if (!c.pc)
			return STEP_OK; /* outermost */
		switch (span_kind(sc, c.pc)) {
		case UNWIND_SPAN_NONE:
			return UNWIND_BAD_FRAME;
		case UNWIND_SPAN_OTHER:
			return STEP_OK; /* JIT code: nothing more to check */
		}
		r = rule_at(sc, c.pc, c.exact, &t, &bias);
		if (!r)
			return STEP_OK;
	}
	return STEP_OK;
}

/*
 * Is the instruction before return address ra a call that could have made
 * the frame being skipped? fn_lo/fn_hi: that frame's function when its CFI
 * says so (0, 0 for code without CFI). A direct call must then target it; for
 * code without CFI, a direct call to a function that has CFI made some other
 * frame (a stale return address left on the stack by an earlier call).
 */
static bool call_before(struct scan *sc, uint64_t ra, uint64_t fn_lo, uint64_t fn_hi)
{
	uint8_t code[X86_CALL_MAX_LEN];
	const struct cfi_table *t;
	const struct cfi_rule *r;
	uint64_t target, bias;
	int32_t rel = 0;

	if (!sc->ops->code_before(sc->ctx, ra, code, sizeof(code)))
		return false;
	switch (x86_call_before(code, sizeof(code), &rel)) {
	case X86_CALL_NONE:
		return false;
	case X86_CALL_INDIRECT:
		return true;
	case X86_CALL_DIRECT:
		break;
	}
	target = ra + (uint64_t)(int64_t)rel;
	if (fn_hi)
		return target >= fn_lo && target < fn_hi;
	switch (span_kind(sc, target)) {
	case UNWIND_SPAN_NONE:
		return false;
	case UNWIND_SPAN_OTHER:
		return true;
	}
	r = rule_at(sc, target, true, &t, &bias);
	return no_cfi(r) || r->cfa == CFI_CFA_PLT;
}

/*
 * Candidate return address w found at stack address a, above frame f: the
 * caller's frame if the checks hold (*out), with rbp known only where the
 * chain needed and confirmed it.
 */
static bool scan_accept(struct scan *sc, const struct frame *f, uint64_t a, uint64_t w,
			uint64_t fn_lo, uint64_t fn_hi, struct frame *out)
{
	struct frame c = { .pc = w, .sp = a + 8, .bp = f->bp, .bp_ok = false, .exact = false };
	const struct cfi_table *t;
	const struct cfi_rule *r;
	uint64_t bias, end = sc->s->lo + sc->s->len;
	bool used = false, first = false, own;
	int st, tries = 0;

	r = rule_at(sc, w, false, &t, &bias);
	if (no_cfi(r))
		return false;
	st = check_chain(sc, c, r, &used, &first);
	if (st == STEP_NEED_BP) {
		own = first;
		/*
		 * The chain needs the caller's rbp: the skipped frame left it alone
		 * (f->bp) or saved it among the words it pushed, below a.
		 */
		st = UNWIND_BAD_FRAME;
		if (f->bp_ok) {
			c.bp_ok = true;
			st = check_chain(sc, c, r, &used, &first);
		}
		for (uint64_t at = f->sp; st != STEP_OK && at < a && tries < SCAN_BP_GUESSES;
		     at += 8) {
			uint64_t v;

			if (!snap_read(sc->s, at, &v) || v <= a || v >= end || (v & 7))
				continue;
			tries++;
			c.bp = v;
			c.bp_ok = true;
			used = false;
			st = check_chain(sc, c, r, &used, &first);
		}
		/* Checked up to a caller whose rbp is unknown: the candidate itself holds. */
		if (st != STEP_OK && !own) {
			c.bp_ok = false;
			st = STEP_OK;
		}
	}
	if (st != STEP_OK || !call_before(sc, w, fn_lo, fn_hi))
		return false;
	c.bp_ok = c.bp_ok && used;
	*out = c;
	return true;
}

/*
 * Frame f has no CFI, or CFI it cannot evaluate (rbp unknown): finds its
 * caller by scanning the stack from f->sp up to limit (exclusive). fn_lo and
 * fn_hi: f's function from its CFI, 0 when none.
 */
static bool scan_stack(struct scan *sc, struct frame *f, uint64_t limit, uint64_t fn_lo,
		       uint64_t fn_hi)
{
	uint64_t end = sc->s->lo + sc->s->len;

	for (uint64_t a = (f->sp + 7) & ~7ull; a < limit && sc->left; a += 8) {
		struct frame c;
		uint64_t w;

		if (!snap_read(sc->s, a, &w))
			break;
		sc->left--;
		sc->used++;
		/* Small values, stack addresses and kernel or non-canonical ones are no code. */
		if (w < 4096 || (w >= sc->s->lo && w < end) || w >= (1ull << 47))
			continue;
		if (span_kind(sc, w) != UNWIND_SPAN_FILE)
			continue;
		if (scan_accept(sc, f, a, w, fn_lo, fn_hi, &c)) {
			*f = c;
			return true;
		}
	}
	return false;
}

/*
 * The frame-pointer candidate of a frame without CFI: where [rbp+8] lies if
 * it is a plausible return address (mapped; after a call when in a file).
 */
static bool fp_candidate(struct scan *sc, const struct frame *f, uint64_t *slot)
{
	struct frame g = *f;
	uint8_t kind;

	if (step_fp(sc->s, &g) != STEP_OK || !g.pc)
		return false;
	kind = span_kind(sc, g.pc);
	if (kind == UNWIND_SPAN_NONE || (kind == UNWIND_SPAN_FILE && !call_before(sc, g.pc, 0, 0)))
		return false;
	*slot = f->bp + 8;
	return true;
}

/*
 * Steps over a frame without usable CFI: scanning finds the nearest
 * validated return address; frame pointers win where they point below it
 * (a frame-pointer chain through code without CFI whose callers' return
 * addresses cannot be validated).
 */
static int step_nocfi(struct scan *sc, struct frame *f, bool *scanned)
{
	uint64_t slot = UINT64_MAX;
	bool fp = sc->ops->span && fp_candidate(sc, f, &slot);

	*scanned = false;
	if (sc->ops->span && scan_stack(sc, f, slot, 0, 0)) {
		*scanned = true;
		return STEP_OK;
	}
	if (fp || !sc->ops->span)
		return step_fp(sc->s, f);
	return UNWIND_NO_CFI;
}

/* A frame whose rbp-based CFA cannot be computed: scan, checking direct calls against fn. */
static int step_need_bp(struct scan *sc, struct frame *f, bool *scanned)
{
	const struct cfi_table *t;
	uint64_t bias, lo = 0, hi = 0;

	*scanned = false;
	if (!sc->ops->span)
		return UNWIND_BAD_FRAME;
	if (rule_at(sc, f->pc, f->exact, &t, &bias) &&
	    cfi_table__func_range(t, (f->exact ? f->pc : f->pc - 1) - bias, &lo, &hi)) {
		lo += bias;
		hi += bias;
	}
	if (!hi || !scan_stack(sc, f, UINT64_MAX, lo, hi))
		return UNWIND_BAD_FRAME;
	*scanned = true;
	return STEP_OK;
}

int unwind_stack_scan(const struct unwind_map_ops *ops, void *ctx, const struct unwind_regs *regs,
		      const uint8_t *stack, size_t stack_len, unsigned int scan_words,
		      uint64_t *ips, uint8_t *marks, int max, struct unwind_result *res)
{
	struct snapshot s = { .data = stack, .lo = regs->sp, .len = stack ? stack_len : 0 };
	struct frame f = { .pc = regs->ip, .sp = regs->sp, .bp = regs->bp, .bp_ok = true,
			   .exact = true };
	const struct unwind_map_ops plain = { .find = ops->find };
	struct scan sc = { .ops = ops, .ctx = ctx, .s = &s, .left = scan_words };
	const struct cfi_rule *r;
	unsigned int nscanned = 0;
	bool mapped;
	int n = 0;

	memset(res, 0, sizeof(*res));
	if (!ops->span || !ops->code_before || !scan_words)
		sc.ops = &plain; /* no scanning */
	if (!regs->ip || max <= 0)
		return 0;
	/* The snapshot must not wrap around the address space. */
	if (s.len > UINT64_MAX - s.lo)
		s.len = UINT64_MAX - s.lo;
	if (marks)
		marks[n] = 0;
	ips[n++] = f.pc;
	r = rule_for(ops, ctx, &f, &mapped);
	if (!mapped) {
		res->why = UNWIND_UNMAPPED;
		return n;
	}
	for (;;) {
		bool scanned = false;
		int st;

		/* f moves only when the step succeeds. */
		st = step(&s, r, &f);
		if (unlikely(st >= STEP_NEED_BP)) {
			/* Out of line, on a copy: f stays in registers on the common path. */
			struct frame g = f;

			st = st == STEP_NO_RULE ? step_nocfi(&sc, &g, &scanned)
						: step_need_bp(&sc, &g, &scanned);
			f = g;
		}
		if (st != STEP_OK) {
			res->why = st;
			break;
		}
		if (!f.pc)
			break; /* outermost frame */
		if (n >= max) {
			res->why = UNWIND_TOO_DEEP;
			break;
		}
		r = rule_for(ops, ctx, &f, &mapped);
		if (!mapped) {
			res->why = UNWIND_UNMAPPED;
			break;
		}
		if (marks)
			marks[n] = scanned ? UNWIND_MARK_SCANNED : 0;
		nscanned += scanned;
		ips[n++] = f.pc;
	}
	res->scanned = nscanned;
	res->words = sc.used;
	return n;
}

int unwind_stack(const struct unwind_map_ops *ops, void *ctx, const struct unwind_regs *regs,
		 const uint8_t *stack, size_t stack_len, uint64_t *ips, int max,
		 enum unwind_stop *why)
{
	const struct unwind_map_ops plain = { .find = ops->find };
	struct unwind_result res;
	int n = unwind_stack_scan(&plain, ctx, regs, stack, stack_len, 0, ips, NULL, max, &res);

	*why = res.why;
	return n;
}
