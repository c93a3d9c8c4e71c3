/* SPDX-License-Identifier: MIT */
/*
 * Private to src/unwind: the one piece of x86-64 decoding stack scanning
 * needs, "do these bytes end with a call instruction?". A return address
 * found by scanning the stack is only believed when the instruction just
 * before it is a call.
 */
#ifndef EPROF_UNWIND_INSN_H
#define EPROF_UNWIND_INSN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest call form accepted: prefixes (2), REX, FF, ModRM, SIB, disp32. */
#define X86_CALL_MAX_LEN 10

enum x86_call {
	X86_CALL_NONE = 0,
	X86_CALL_DIRECT,   /* E8 rel32: the target is known (*rel from the return address) */
	X86_CALL_INDIRECT, /* FF /2: through a register or memory */
};

/*
 * code holds the len bytes that end right before a return address. Returns
 * which call instruction, if any, ends exactly there; when both forms fit
 * (the bytes are ambiguous), the indirect one, which says less.
 */
enum x86_call x86_call_before(const uint8_t *code, size_t len, int32_t *rel);

#endif
