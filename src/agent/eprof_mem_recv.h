/* SPDX-License-Identifier: MIT */
/*
 * Private to libeprof_mem.so: what it takes from the recorder on --mem=1's channel (one
 * message: EMEM_MSG_PYLAYOUT, struct py_proc) and the reads its Python walk makes at the
 * offsets that message names (src/agent/eprof_mem_stack.c). Pure functions, so that
 * tests/fuzz/fuzz_memchan.c runs the very checks and reads on bytes of its own: every offset
 * is checked against the bytes it may name before it is used.
 */
#ifndef EPROF_MEM_RECV_H
#define EPROF_MEM_RECV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <linux/types.h>

#include "eprof_abi.h"
#include "eprof_mem_proto.h"

/* PyThreadState and _PyCFrame are smaller than this in 3.10-3.13: their offsets lie below. */
#define EMEM_PY_TS_MAX 1024
/* An interpreter frame: the layout's fr_read bytes, fewer than this. */
#define EMEM_PY_FRAME_MAX 128

static inline bool emem_py_off_ok(uint16_t off, unsigned width, unsigned lim, bool optional)
{
	if (optional && off == PY_NONE)
		return true;
	return off != PY_NONE && (unsigned)off + width <= lim;
}

/* Every offset the walk reads lies within the frame's fr_read bytes or a thread state's. */
static inline bool emem_py_layout_sane(const struct py_proc *p)
{
	if (p->fr_read >= EMEM_PY_FRAME_MAX)
		return false;
	return emem_py_off_ok(p->fr_previous, 8, p->fr_read, false) &&
	       emem_py_off_ok(p->fr_code, 8, p->fr_read, false) &&
	       emem_py_off_ok(p->fr_instr, 8, p->fr_read, false) &&
	       emem_py_off_ok(p->fr_owner, 1, p->fr_read, p->owner_cstack == PY_NONE) &&
	       emem_py_off_ok(p->fr_is_entry, 1, p->fr_read, true) &&
	       (p->ts_cframe != PY_NONE
			? emem_py_off_ok(p->ts_cframe, 8, EMEM_PY_TS_MAX, false) &&
				  emem_py_off_ok(p->cf_frame, 8, EMEM_PY_TS_MAX, false)
			: emem_py_off_ok(p->ts_frame, 8, EMEM_PY_TS_MAX, false));
}

/*
 * A message received from the channel's peer (len bytes at buf, 8-byte aligned): true when
 * it is a layout to use, copied to out. Anything else (short, another kind, an offset out
 * of bounds) is ignored.
 */
static inline bool emem_recv_layout(const void *buf, size_t len, struct py_proc *out)
{
	struct emem_msg h;
	struct py_proc p;

	if (len < sizeof(h) + sizeof(p))
		return false;
	memcpy(&h, buf, sizeof(h));
	if (h.magic != EMEM_MSG_MAGIC || h.kind != EMEM_MSG_PYLAYOUT)
		return false;
	memcpy(&p, (const char *)buf + sizeof(h), sizeof(p));
	if (!emem_py_layout_sane(&p))
		return false;
	*out = p;
	return true;
}

static inline uint64_t emem_ld64(uint64_t a)
{
	uint64_t v;

	if (!a)
		return 0;
	memcpy(&v, (const void *)(uintptr_t)a, sizeof(v));
	return v;
}

/* The thread's current interpreter frame, from its thread state ts (a sane layout). */
static inline uint64_t emem_py_top(const struct py_proc *py, uint64_t ts)
{
	if (py->ts_cframe != PY_NONE) {
		uint64_t cf = emem_ld64(ts + py->ts_cframe);

		return cf ? emem_ld64(cf + py->cf_frame) : 0;
	}
	return emem_ld64(ts + py->ts_frame);
}

struct emem_py_frame {
	uint64_t prev, code, instr;
	bool cstack; /* a C stack's entry frame (3.12+): no code of its own */
	bool entry;  /* the first frame of its eval call */
};

/* One interpreter frame f (fr_read bytes of it are read, no more), as py_step() reads it. */
static inline void emem_py_frame_read(const struct py_proc *py, const uint8_t *f,
				      struct emem_py_frame *o)
{
	memcpy(&o->prev, f + py->fr_previous, 8);
	o->cstack = py->owner_cstack != PY_NONE && f[py->fr_owner] == py->owner_cstack;
	if (o->cstack) {
		o->code = o->instr = 0;
		o->entry = false;
		return;
	}
	memcpy(&o->code, f + py->fr_code, 8);
	memcpy(&o->instr, f + py->fr_instr, 8);
	o->entry = (py->fr_is_entry != PY_NONE && f[py->fr_is_entry]) ||
		   (py->pflags & PY_PF_ALL_ENTRY);
}

#endif
