// SPDX-License-Identifier: MIT
/*
 * Call-instruction check for stack scanning. x86-64 code cannot be decoded
 * backwards, so every start that could end exactly at the return address is
 * tried: E8 rel32 five bytes back, and FF /2 (call r/m64) with its ModRM, SIB
 * and displacement forms, after a REX byte and up to two legacy prefixes
 * (notrack 3E, segment overrides, 67 address size, F2 bnd).
 */
#include "insn.h"

static bool legacy_prefix(uint8_t b)
{
	/* Segment overrides, notrack (3e), address size (67), bnd (f2). */
	return b == 0x26 || b == 0x2e || b == 0x36 || b == 0x3e || b == 0x64 || b == 0x65 ||
	       b == 0x67 || b == 0xf2;
}

/* Bytes after the ModRM byte: SIB and displacement. */
static size_t modrm_tail(uint8_t modrm, const uint8_t *next, size_t avail)
{
	uint8_t mod = modrm >> 6, rm = modrm & 7;
	size_t n = 0;

	if (mod == 3)
		return 0;
	if (rm == 4) {
		if (!avail)
			return (size_t)-1;
		n = 1;
		/* SIB base 101 without displacement byte means disp32, no base. */
		if (mod == 0 && (next[0] & 7) == 5)
			return n + 4;
	} else if (mod == 0 && rm == 5) {
		return 4; /* rip-relative */
	}
	return n + (mod == 1 ? 1 : mod == 2 ? 4 : 0);
}

/* Does an FF /2 call start at code[k] and end exactly at code[len]? */
static bool indirect_at(const uint8_t *code, size_t k, size_t len)
{
	size_t i = k, npre = 0, tail;

	while (i < len && legacy_prefix(code[i]) && npre < 2) {
		i++;
		npre++;
	}
	if (i < len && (code[i] & 0xf0) == 0x40)
		i++; /* REX */
	if (len - i < 2 || code[i] != 0xff || ((code[i + 1] >> 3) & 7) != 2)
		return false;
	tail = modrm_tail(code[i + 1], code + i + 2, len - i - 2);
	return tail != (size_t)-1 && i + 2 + tail == len;
}

enum x86_call x86_call_before(const uint8_t *code, size_t len, int32_t *rel)
{
	size_t lo = len > X86_CALL_MAX_LEN ? len - X86_CALL_MAX_LEN : 0;

	if (len < 2)
		return X86_CALL_NONE;
	for (size_t k = len - 2;; k--) {
		if (indirect_at(code, k, len))
			return X86_CALL_INDIRECT;
		if (k == lo)
			break;
	}
	if (len >= 5 && code[len - 5] == 0xe8) {
		uint32_t v = (uint32_t)code[len - 4] | (uint32_t)code[len - 3] << 8 |
			     (uint32_t)code[len - 2] << 16 | (uint32_t)code[len - 1] << 24;

		*rel = (int32_t)v;
		return X86_CALL_DIRECT;
	}
	return X86_CALL_NONE;
}
