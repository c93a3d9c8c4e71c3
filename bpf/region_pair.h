/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The per-thread stack of open regions, shared by the BPF programs
 * (bpf/region.bpf.h) and the unit tests, which check the pairing rules on
 * the same code. The includer provides __u16/__u32/__u64 and eprof_abi.h.
 *
 * Rules: a begin pushes (its start time, pair id, label); an end pops the
 * innermost open region of the same pair, so recursion and regions of
 * different pairs nest right. Regions opened above it and never ended
 * (a longjmp, an exception through a uretprobe'd frame) are dropped and
 * counted as unmatched; an end without any open region of its pair changes
 * nothing and is counted. Past EPROF_REGION_DEPTH open regions, begins are
 * only counted (overflow) and the same number of ends is absorbed first.
 */
#ifndef EPROF_REGION_PAIR_H
#define EPROF_REGION_PAIR_H

#define REGION_DEPTH_MASK (EPROF_REGION_DEPTH - 1)

struct region_slot {
	__u64 start;
	__u32 pair;
	__u16 label_len;
	__u16 pad;
	__u64 label_addr; /* the name's address in the target, 0 = none */
	__u16 has_args;	  /* args[] kept (REGION_ARG_INTS) */
	union {
		char label[EPROF_REGION_LABEL];
		__u64 args[REGION_NARGS];
	};
};

struct region_tstate {
	__u32 depth;	/* open regions in s[] */
	__u32 overflow; /* begins past the last slot, not timed */
	struct region_slot s[EPROF_REGION_DEPTH];
};

/* The slot for a new region, or NULL when the stack is full (counted in overflow). */
static __always_inline struct region_slot *region_push(struct region_tstate *t, __u64 start,
						       __u32 pair)
{
	struct region_slot *s;
	__u32 d = t->depth;

	if (d >= EPROF_REGION_DEPTH || t->overflow) {
		t->overflow++;
		return (struct region_slot *)0;
	}
	s = &t->s[d & REGION_DEPTH_MASK];
	s->start = start;
	s->pair = pair;
	s->label_len = 0;
	s->label_addr = 0;
	s->has_args = 0;
	t->depth = d + 1;
	return s;
}

/*
 * Ends the innermost open region of pair. Returns its depth (its slot stays
 * readable until the next push), -1 when the end was absorbed by an
 * overflow, -2 when no region of pair is open. *dropped gets the number of
 * regions above it that were left open and are now forgotten.
 */
static __always_inline int region_pop(struct region_tstate *t, __u32 pair, __u32 *dropped)
{
	__u32 d = t->depth;

	*dropped = 0;
	if (t->overflow) {
		t->overflow--;
		return -1;
	}
	if (d > EPROF_REGION_DEPTH)
		d = EPROF_REGION_DEPTH;
	for (int k = 0; k < EPROF_REGION_DEPTH; k++) {
		int i = (int)d - 1 - k;

		if (i < 0)
			break;
		if (t->s[i & REGION_DEPTH_MASK].pair == pair) {
			*dropped = d - 1 - i;
			t->depth = i;
			return i;
		}
	}
	return -2;
}

#endif
