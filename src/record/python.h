/* SPDX-License-Identifier: MIT */
/*
 * Python frames: detection of CPython 3.11+ in target processes, the
 * interpreter layout per version, resolution of code objects read from the
 * target's memory into profile locations (OBJ_PYTHON). The pure parts
 * (layout tables, _Py_DebugOffsets, line tables) are exposed for unit tests.
 */
#ifndef EPROF_PYTHON_H
#define EPROF_PYTHON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>

#include "eprof_abi.h"

struct py_layout {
	uint32_t version; /* PY_VERSION_HEX of the target */
	/* runtime -> interpreters -> thread states */
	uint64_t rt_interp_head, is_next, is_threads_head, ts_next, ts_native_tid;
	/* frame walk, handed to BPF */
	struct py_proc bpf;
	/* code objects and the strings and bytes they point to */
	uint64_t ob_type, co_filename, co_name, co_qualname, co_linetable, co_firstlineno;
	uint64_t co_code_adaptive;
	uint64_t str_state, str_length, ascii_size, compact_size, bytes_size, bytes_sval;
	/*
	 * The GIL: struct _gil_runtime_state at _PyRuntime + rt_gil (3.11), or
	 * pointed to by the main interpreter's ceval.gil at is_ceval_gil (3.12+);
	 * 0 = not that way. Its locked and last_holder fields.
	 */
	uint64_t rt_gil, is_ceval_gil, gil_locked, gil_holder;
};

/* Built-in tables for 3.11 and 3.12 (and 3.13 as a fallback). Returns 0 or -ENOTSUP. */
int py_layout_for_version(uint32_t version, struct py_layout *l);
/*
 * From the _Py_DebugOffsets at the start of _PyRuntime (3.13+): len bytes at
 * dbg. Returns 0, -EINVAL (no cookie, too short) or -ENOTSUP (free-threaded).
 */
int py_layout_from_debug(const void *dbg, size_t len, struct py_layout *l);
/* Size of the _Py_DebugOffsets prefix py_layout_from_debug() reads. */
#define PY_DEBUG_OFFSETS_SIZE (73 * 8)

/*
 * Line of code unit `unit` (instruction offset / 2) from a 3.11+ location
 * table (co_linetable) starting at firstlineno. Returns the line, or -1 when
 * the table has no line there.
 */
int py_addr2line(const uint8_t *lt, size_t len, int firstlineno, int64_t unit);

/*
 * The same for 3.10's co_linetable (PEP 626: pairs of a byte count and a
 * signed line delta, -128 for none) at byte offset addr (f_lasti * 2).
 */
int py310_addr2line(const uint8_t *lt, size_t len, int firstlineno, int64_t addr);

/*
 * --region py:FUNC: the candidates FUNC gives, one per way of reading it as
 * [MODULE.]QUALNAME ("a.b.c": qualname a.b.c in any file, b.c in a.py, c in
 * a/b.py), with spec and pair set. Returns their number (<= max), or
 * -EINVAL when FUNC is not a dotted name, -E2BIG when a part is too long or
 * there are more than max.
 */
int py_region_cands(const char *func, uint32_t spec, uint32_t pair, struct py_rcand *out,
		    size_t max);
/* "py:FUNC" region options of a record (--region), counted. */
#define PY_REGION_PREFIX "py:"

#endif
