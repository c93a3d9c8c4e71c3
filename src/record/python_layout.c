// SPDX-License-Identifier: MIT
/*
 * What eprof knows of CPython's memory layouts, apart from the live feature (python.c): the
 * offsets of each version (tables for 3.10 to 3.12, _Py_DebugOffsets from 3.13), the line
 * tables that map an instruction to its line, and the names --region py:FUNC may match. Pure
 * functions of their arguments: no process, no BPF (docs/python.md).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <linux/types.h>

#include "python.h"

/* ---- layouts ---------------------------------------------------------------------------- */

/*
 * Offsets from offsetof() on the pyenv builds' internal headers
 * (Include/internal/pycore_{runtime,interp,frame,code}.h, cpython/pystate.h,
 * cpython/unicodeobject.h) with Py_BUILD_CORE, x86-64 and aarch64 (LP64, no
 * Py_TRACE_REFS, no free threading). Stable within a minor release.
 */
/*
 * 3.10: no _PyInterpreterFrame; the thread state points to a chain of
 * PyFrameObjects (f_back), each run by its own _PyEval_EvalFrameDefault call;
 * f_lasti counts code units; the thread state has thread_id (pthread_t), no
 * native_thread_id (ts_native_tid holds thread_id's offset, PY_PF_TS_FSBASE
 * says so); code objects have no co_qualname (co_name is used).
 */
static const struct py_layout layout_310 = {
	.version = 0x030a0000,
	.rt_interp_head = 32, .is_next = 0, .is_threads_head = 8, .ts_next = 8,
	.ts_native_tid = 176,
	.bpf = { .ts_cframe = PY_NONE, .cf_frame = PY_NONE, .ts_frame = 24, .fr_previous = 24,
		 .fr_code = 32, .fr_instr = 96, .fr_owner = PY_NONE, .fr_is_entry = PY_NONE,
		 .owner_cstack = PY_NONE, .fr_read = 104,
		 .pflags = PY_PF_ALL_ENTRY | PY_PF_TS_FSBASE },
	.ob_type = 8, .co_filename = 104, .co_name = 112, .co_qualname = 112, .co_linetable = 120,
	.co_firstlineno = 40, .co_code_adaptive = 0,
	.str_state = 32, .str_length = 16, .ascii_size = 48, .compact_size = 72,
	.bytes_size = 16, .bytes_sval = 32,
	.rt_gil = 352, .is_ceval_gil = 0, .gil_locked = 16, .gil_holder = 8,
};

static const struct py_layout layout_311 = {
	.version = 0x030b0000,
	.rt_interp_head = 40, .is_next = 0, .is_threads_head = 16, .ts_next = 8,
	.ts_native_tid = 160,
	.bpf = { .ts_cframe = 56, .cf_frame = 8, .ts_frame = PY_NONE, .fr_previous = 48,
		 .fr_code = 32, .fr_instr = 56, .fr_owner = 69, .fr_is_entry = 68,
		 .owner_cstack = PY_NONE, .fr_read = 80 },
	.ob_type = 8, .co_filename = 112, .co_name = 120, .co_qualname = 128, .co_linetable = 136,
	.co_firstlineno = 72, .co_code_adaptive = 184,
	.str_state = 32, .str_length = 16, .ascii_size = 48, .compact_size = 72,
	.bytes_size = 16, .bytes_sval = 32,
	.rt_gil = 360, .is_ceval_gil = 0, .gil_locked = 16, .gil_holder = 8,
};

static const struct py_layout layout_312 = {
	.version = 0x030c0000,
	.rt_interp_head = 40, .is_next = 0, .is_threads_head = 72, .ts_next = 8,
	.ts_native_tid = 144,
	.bpf = { .ts_cframe = 56, .cf_frame = 0, .ts_frame = PY_NONE, .fr_previous = 8,
		 .fr_code = 0, .fr_instr = 56, .fr_owner = 70, .fr_is_entry = PY_NONE,
		 .owner_cstack = 3, .fr_read = 80 },
	.ob_type = 8, .co_filename = 112, .co_name = 120, .co_qualname = 128, .co_linetable = 136,
	.co_firstlineno = 68, .co_code_adaptive = 192,
	.str_state = 32, .str_length = 16, .ascii_size = 40, .compact_size = 56,
	.bytes_size = 16, .bytes_sval = 32,
	.rt_gil = 0, .is_ceval_gil = 384, .gil_locked = 16, .gil_holder = 8,
};

static const struct py_layout layout_313 = {
	.version = 0x030d0000,
	.rt_interp_head = 632, .is_next = 7264, .is_threads_head = 7344, .ts_next = 8,
	.ts_native_tid = 160,
	.bpf = { .ts_cframe = PY_NONE, .cf_frame = PY_NONE, .ts_frame = 72, .fr_previous = 8,
		 .fr_code = 0, .fr_instr = 56, .fr_owner = 70, .fr_is_entry = PY_NONE,
		 .owner_cstack = 3, .fr_read = 80 },
	.ob_type = 8, .co_filename = 112, .co_name = 120, .co_qualname = 128, .co_linetable = 136,
	.co_firstlineno = 68, .co_code_adaptive = 200,
	.str_state = 32, .str_length = 16, .ascii_size = 40, .compact_size = 56,
	.bytes_size = 16, .bytes_sval = 32,
	.rt_gil = 0, .is_ceval_gil = 16, .gil_locked = 16, .gil_holder = 8,
};

int py_layout_for_version(uint32_t version, struct py_layout *l)
{
	switch (version >> 16) {
	case 0x030a:
		*l = layout_310;
		break;
	case 0x030b:
		*l = layout_311;
		break;
	case 0x030c:
		*l = layout_312;
		break;
	case 0x030d:
		*l = layout_313;
		break;
	default:
		return -ENOTSUP;
	}
	l->version = version;
	return 0;
}

/* Index of each field in _Py_DebugOffsets (3.13), counted in u64 words. */
enum {
	DO_VERSION = 1, DO_FREE_THREADED = 2, DO_RT_INTERP_HEAD = 5, DO_IS_NEXT = 8,
	DO_IS_THREADS_HEAD = 9, DO_IS_CEVAL_GIL = 14, DO_IS_GIL = 15, DO_GIL_LOCKED = 17,
	DO_GIL_HOLDER = 18,
	DO_TS_NEXT = 21, DO_TS_CURRENT_FRAME = 23, DO_TS_NATIVE_TID = 25,
	DO_FR_PREVIOUS = 29, DO_FR_EXECUTABLE = 30, DO_FR_INSTR_PTR = 31, DO_FR_OWNER = 33,
	DO_CO_FILENAME = 35, DO_CO_NAME = 36, DO_CO_QUALNAME = 37, DO_CO_LINETABLE = 38,
	DO_CO_FIRSTLINENO = 39, DO_CO_CODE_ADAPTIVE = 43, DO_OB_TYPE = 45, DO_BYTES_SIZE = 65,
	DO_BYTES_SVAL = 66, DO_STR_STATE = 68, DO_STR_LENGTH = 69, DO_ASCII_SIZE = 70,
	DO_WORDS = 73,
};

static bool frame_off_ok(uint64_t v)
{
	return v <= 72; /* bpf/python.bpf.h reads the first 80 bytes of a frame */
}

int py_layout_from_debug(const void *dbg, size_t len, struct py_layout *l)
{
	uint64_t w[DO_WORDS];

	if (len < sizeof(w) || memcmp(dbg, "xdebugpy", 8))
		return -EINVAL;
	memcpy(w, dbg, sizeof(w));
	if (w[DO_FREE_THREADED])
		return -ENOTSUP;
	if ((w[DO_VERSION] >> 16) < 0x030d)
		return -EINVAL;
	memset(l, 0, sizeof(*l));
	l->version = w[DO_VERSION];
	l->rt_interp_head = w[DO_RT_INTERP_HEAD];
	l->is_next = w[DO_IS_NEXT];
	l->is_threads_head = w[DO_IS_THREADS_HEAD];
	l->ts_next = w[DO_TS_NEXT];
	l->ts_native_tid = w[DO_TS_NATIVE_TID];
	if (w[DO_TS_CURRENT_FRAME] > 0xfff0 || !frame_off_ok(w[DO_FR_PREVIOUS]) ||
	    !frame_off_ok(w[DO_FR_EXECUTABLE]) || !frame_off_ok(w[DO_FR_INSTR_PTR]) ||
	    w[DO_FR_OWNER] > 79)
		return -EINVAL;
	l->bpf.ts_cframe = PY_NONE;
	l->bpf.cf_frame = PY_NONE;
	l->bpf.ts_frame = w[DO_TS_CURRENT_FRAME];
	l->bpf.fr_previous = w[DO_FR_PREVIOUS];
	l->bpf.fr_code = w[DO_FR_EXECUTABLE];
	l->bpf.fr_instr = w[DO_FR_INSTR_PTR];
	l->bpf.fr_owner = w[DO_FR_OWNER];
	l->bpf.fr_is_entry = PY_NONE;
	l->bpf.owner_cstack = 3; /* FRAME_OWNED_BY_CSTACK: not in the debug offsets */
	l->bpf.fr_read = 80;
	l->ob_type = w[DO_OB_TYPE];
	l->co_filename = w[DO_CO_FILENAME];
	l->co_name = w[DO_CO_NAME];
	l->co_qualname = w[DO_CO_QUALNAME];
	l->co_linetable = w[DO_CO_LINETABLE];
	l->co_firstlineno = w[DO_CO_FIRSTLINENO];
	l->co_code_adaptive = w[DO_CO_CODE_ADAPTIVE];
	l->str_state = w[DO_STR_STATE];
	l->str_length = w[DO_STR_LENGTH];
	l->ascii_size = w[DO_ASCII_SIZE];
	/* PyCompactUnicodeObject adds utf8_length and utf8 to PyASCIIObject. */
	l->compact_size = w[DO_ASCII_SIZE] + 16;
	l->bytes_size = w[DO_BYTES_SIZE];
	l->bytes_sval = w[DO_BYTES_SVAL];
	/* locked and holder are given in the interpreter's own GIL (at DO_IS_GIL): make them
	 * relative to the GIL, which ceval.gil points to. */
	if (w[DO_GIL_LOCKED] >= w[DO_IS_GIL] && w[DO_GIL_LOCKED] - w[DO_IS_GIL] <= 64 &&
	    w[DO_GIL_HOLDER] >= w[DO_IS_GIL] && w[DO_GIL_HOLDER] - w[DO_IS_GIL] <= 64) {
		l->is_ceval_gil = w[DO_IS_CEVAL_GIL];
		l->gil_locked = w[DO_GIL_LOCKED] - w[DO_IS_GIL];
		l->gil_holder = w[DO_GIL_HOLDER] - w[DO_IS_GIL];
	}
	return 0;
}

/* ---- line tables (Objects/locations.md of CPython 3.11+) --------------------------------- */

static bool lt_varint(const uint8_t *lt, size_t len, size_t *i, uint64_t *out)
{
	uint64_t v = 0;
	int shift = 0;

	for (;;) {
		uint8_t b;

		if (*i >= len || shift > 60)
			return false;
		b = lt[(*i)++];
		v |= (uint64_t)(b & 63) << shift;
		shift += 6;
		if (!(b & 64))
			break;
	}
	*out = v;
	return true;
}

static bool lt_svarint(const uint8_t *lt, size_t len, size_t *i, int64_t *out)
{
	uint64_t v;

	if (!lt_varint(lt, len, i, &v))
		return false;
	*out = (v & 1) ? -(int64_t)(v >> 1) : (int64_t)(v >> 1);
	return true;
}

int py_addr2line(const uint8_t *lt, size_t len, int firstlineno, int64_t unit)
{
	int64_t line = firstlineno, at = 0;
	size_t i = 0;

	if (unit < 0)
		unit = 0;
	while (i < len) {
		uint8_t first = lt[i++];
		int code = (first >> 3) & 15, has_line = 1;
		int64_t n = (first & 7) + 1, delta = 0;
		uint64_t skip;

		if (!(first & 0x80))
			return -1; /* lost sync */
		switch (code) {
		case 15: /* no location */
			has_line = 0;
			break;
		case 14: /* long form: line delta, end line delta, column, end column */
			if (!lt_svarint(lt, len, &i, &delta) || !lt_varint(lt, len, &i, &skip) ||
			    !lt_varint(lt, len, &i, &skip) || !lt_varint(lt, len, &i, &skip))
				return -1;
			break;
		case 13: /* no column */
			if (!lt_svarint(lt, len, &i, &delta))
				return -1;
			break;
		case 10:
		case 11:
		case 12: /* one-line forms: delta = code - 10, then column and end column bytes */
			delta = code - 10;
			i += 2;
			break;
		default: /* short forms: same line, one column byte */
			i += 1;
			break;
		}
		line += delta;
		if (unit < at + n)
			return has_line ? (int)line : -1;
		at += n;
	}
	return -1;
}

int py310_addr2line(const uint8_t *lt, size_t len, int firstlineno, int64_t addr)
{
	int64_t start, end = 0, line = firstlineno, at_line;
	size_t i = 0;

	if (addr < 0)
		return firstlineno;
	/* (bytes, signed line delta) pairs; -128: no line. Empty ranges only move the line. */
	while (i + 1 < len) {
		int8_t ld = (int8_t)lt[i + 1];

		start = end;
		end += lt[i];
		i += 2;
		if (ld == -128) {
			at_line = -1;
		} else {
			line += ld;
			at_line = line;
		}
		if (start != end && addr < end)
			return (int)at_line;
	}
	return -1;
}

/* ---- --region py:FUNC ------------------------------------------------------------------ */

static bool name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '<' || c == '>' || (unsigned char)c >= 0x80;
}

int py_region_cands(const char *func, uint32_t spec, uint32_t pair, struct py_rcand *out,
		    size_t max)
{
	size_t len = strlen(func), n = 0;

	if (!len || func[0] == '.' || func[len - 1] == '.')
		return -EINVAL;
	for (size_t i = 0; i < len; i++)
		if (!name_char(func[i]) && !(func[i] == '.' && func[i + 1] != '.'))
			return -EINVAL;
	/* Split after each dot, the whole name first: prefix = module path, rest = qualname. */
	for (size_t cut = 0; cut < len; cut++) {
		struct py_rcand *c;
		size_t ql;

		if (cut && func[cut - 1] != '.')
			continue;
		ql = len - cut;
		/* A qualname too long for BPF cannot match anything: ask for a shorter one. */
		if (ql >= PY_RNAME || (cut && cut - 1 + 3 >= PY_RNAME))
			return -E2BIG;
		if (n == max)
			return -E2BIG;
		c = &out[n++];
		memset(c, 0, sizeof(*c));
		memcpy(c->qual, func + cut, ql);
		c->qual_len = ql;
		if (cut) {
			for (size_t i = 0; i < cut - 1; i++)
				c->file[i] = func[i] == '.' ? '/' : func[i];
			memcpy(c->file + cut - 1, ".py", 3);
			c->file_len = cut - 1 + 3;
		}
		c->spec = spec;
		c->pair = pair;
	}
	return (int)n;
}

