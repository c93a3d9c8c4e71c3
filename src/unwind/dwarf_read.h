/* SPDX-License-Identifier: MIT */
/*
 * Private to src/unwind: bounds-checked readers for DWARF CFI bytes. Every
 * read past the end sets cur->err and yields 0, so parsers can read a whole
 * record and check err once; garbage input can never read out of bounds.
 */
#ifndef EPROF_UNWIND_DWARF_READ_H
#define EPROF_UNWIND_DWARF_READ_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* DW_EH_PE_* pointer encodings (LSB "Exception Frames"). */
#define DW_EH_PE_absptr 0x00
#define DW_EH_PE_uleb128 0x01
#define DW_EH_PE_udata2 0x02
#define DW_EH_PE_udata4 0x03
#define DW_EH_PE_udata8 0x04
#define DW_EH_PE_sleb128 0x09
#define DW_EH_PE_sdata2 0x0a
#define DW_EH_PE_sdata4 0x0b
#define DW_EH_PE_sdata8 0x0c
#define DW_EH_PE_pcrel 0x10
#define DW_EH_PE_datarel 0x30
#define DW_EH_PE_aligned 0x50
#define DW_EH_PE_indirect 0x80
#define DW_EH_PE_omit 0xff

struct dw_cursor {
	const uint8_t *p;
	const uint8_t *end;
	const uint8_t *sec;	/* start of the section, for pcrel */
	uint64_t sec_vaddr;	/* its ELF vaddr */
	uint64_t data_base;	/* for datarel (.eh_frame_hdr) */
	bool err;
};

static inline bool dw_avail(struct dw_cursor *c, uint64_t n)
{
	if ((uint64_t)(c->end - c->p) < n) {
		c->err = true;
		c->p = c->end;
		return false;
	}
	return true;
}

static inline uint64_t dw_fixed(struct dw_cursor *c, unsigned int n)
{
	uint64_t v = 0;

	if (!dw_avail(c, n))
		return 0;
	/* x86-64 and the files it runs are little-endian. */
	memcpy(&v, c->p, n);
	c->p += n;
	return v;
}

static inline uint8_t dw_u8(struct dw_cursor *c)
{
	return (uint8_t)dw_fixed(c, 1);
}

static inline uint64_t dw_uleb(struct dw_cursor *c)
{
	uint64_t v = 0;
	unsigned int shift = 0;

	/* At most 10 bytes encode 64 bits; longer runs are garbage. */
	for (int i = 0; i < 10; i++) {
		uint8_t b;

		if (!dw_avail(c, 1))
			return 0;
		b = *c->p++;
		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80))
			return v;
	}
	c->err = true;
	return 0;
}

static inline int64_t dw_sleb(struct dw_cursor *c)
{
	uint64_t v = 0;
	unsigned int shift = 0;

	for (int i = 0; i < 10; i++) {
		uint8_t b;

		if (!dw_avail(c, 1))
			return 0;
		b = *c->p++;
		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80)) {
			if (shift < 64 && (b & 0x40))
				v |= ~(uint64_t)0 << shift;
			return (int64_t)v;
		}
	}
	c->err = true;
	return 0;
}

/*
 * Reads a pointer in encoding enc. Indirect pointers (personality routines)
 * cannot be followed without the process's memory: their value is returned
 * undereferenced, which is fine since only their size matters to us.
 */
static inline uint64_t dw_encoded(struct dw_cursor *c, uint8_t enc, unsigned int addr_size)
{
	uint64_t field_vaddr = c->sec_vaddr + (uint64_t)(c->p - c->sec);
	uint64_t v;

	if (enc == DW_EH_PE_omit)
		return 0;
	if ((enc & 0x70) == DW_EH_PE_aligned) {
		uint64_t mis = (uint64_t)(c->p - c->sec) % addr_size;

		if (mis && dw_avail(c, addr_size - mis))
			c->p += addr_size - mis;
		return dw_fixed(c, addr_size);
	}
	switch (enc & 0x0f) {
	case DW_EH_PE_absptr: v = dw_fixed(c, addr_size); break;
	case DW_EH_PE_uleb128: v = dw_uleb(c); break;
	case DW_EH_PE_udata2: v = dw_fixed(c, 2); break;
	case DW_EH_PE_udata4: v = dw_fixed(c, 4); break;
	case DW_EH_PE_udata8: v = dw_fixed(c, 8); break;
	case DW_EH_PE_sleb128: v = (uint64_t)dw_sleb(c); break;
	case DW_EH_PE_sdata2: v = (uint64_t)(int64_t)(int16_t)dw_fixed(c, 2); break;
	case DW_EH_PE_sdata4: v = (uint64_t)(int64_t)(int32_t)dw_fixed(c, 4); break;
	case DW_EH_PE_sdata8: v = dw_fixed(c, 8); break;
	default: c->err = true; return 0;
	}
	switch (enc & 0x70) {
	case 0: break;
	case DW_EH_PE_pcrel: v += field_vaddr; break;
	case DW_EH_PE_datarel: v += c->data_base; break;
	default: c->err = true; return 0; /* textrel/funcrel: unused on x86-64 */
	}
	return v;
}

#endif
