// SPDX-License-Identifier: MIT
/*
 * --mem=1's channel, both directions. The input is a sequence of messages, each a tag byte,
 * a little-endian u16 length and that many bytes:
 *   tag bit 7 clear: a message libeprof_mem.so sent, decoded by the recorder
 *     (src/decode/mem_dec.c) on connection tag & 7; tag bit 6: that connection closes
 *     instead (its bytes are skipped);
 *   tag bit 7 set: a message the recorder sent, taken by the library (eprof_mem_recv.h);
 *     when it takes it as a Python layout, the walk's reads are run on a thread state and
 *     frames of exactly the sizes the layout may name: a read beyond is a heap overflow.
 * Oracles: the records get the peer's pid (never the message's), stack callbacks see
 * bounded counts inside the message, a connection's id table grows with what it sent, and
 * the profile stays consistent.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <linux/types.h>

#include "fuzz_common.h"
#include "decode/mem_dec.h"
#include "agent/eprof_mem_proto.h"
#include "agent/eprof_mem_recv.h"
#include "model/event.h"
#include "model/profile.h"

#define NCONN 8
#define PEER_PID(c) (4000u + (c))

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet();
	return 0;
}

/* The recorder reads each message into an 8-aligned buffer. */
static uint64_t msgbuf[65536 / 8];

struct ctx {
	struct profile *p;
	uint32_t obj;
	const uint8_t *msg;
	size_t len;
	uint64_t stacks[NCONN];
};

static int64_t stack_cb(void *arg, uint32_t pid, uint32_t tid, uint64_t ns, const uint64_t *ips,
			unsigned n, const uint64_t *py, unsigned npy, unsigned flags)
{
	struct ctx *c = arg;
	const uint8_t *lo = (const uint8_t *)ips, *hi = (const uint8_t *)(py + 2 * (size_t)npy);
	uint32_t locs[EMEM_STACK_MAX];

	FUZZ_CHECK(pid >= PEER_PID(0) && pid < PEER_PID(NCONN), "stack of pid %u", pid);
	FUZZ_CHECK(n >= 1 && n <= EMEM_STACK_MAX && npy <= EMEM_PY_MAX, "%u frames, %u py", n, npy);
	FUZZ_CHECK(lo >= c->msg && py == ips + n && hi <= c->msg + c->len,
		   "frames outside the message");
	FUZZ_CHECK(!(flags & ~(unsigned)(EMEM_STACK_TRUNC | EMEM_STACK_PY_TRUNC)), "flags %x",
		   flags);
	for (unsigned i = 0; i < n; i++) {
		int64_t l = profile__location(c->p, c->obj, ips[i]);

		if (l < 0)
			return l;
		locs[i] = (uint32_t)l;
	}
	/* Each word is read, as the recorder copies them. */
	for (unsigned i = 0; i < 2 * npy; i++)
		ns ^= py[i];
	c->stacks[pid - PEER_PID(0)]++;
	return profile__stack(c->p, locs, n);
}

static void thread_cb(void *arg, uint32_t pid, uint32_t tid, uint64_t ns)
{
	FUZZ_CHECK(pid >= PEER_PID(0) && pid < PEER_PID(NCONN), "thread of pid %u", pid);
}

/* The library's side: a layout it takes must keep every read of the walk in bounds. */
static void library_msg(const uint8_t *data, size_t len, const uint8_t *fill, size_t nfill)
{
	struct py_proc py;
	uint8_t *ts, *cf, *fr[2];
	struct emem_py_frame f;
	uint64_t top;

	if (!emem_recv_layout(data, len, &py))
		return;
	FUZZ_CHECK(py.fr_read < EMEM_PY_FRAME_MAX && py.fr_previous + 8u <= py.fr_read &&
			   py.fr_code + 8u <= py.fr_read && py.fr_instr + 8u <= py.fr_read,
		   "frame offsets beyond fr_read %u", py.fr_read);
	FUZZ_CHECK(py.owner_cstack == PY_NONE || py.fr_owner < py.fr_read, "fr_owner %u",
		   py.fr_owner);
	FUZZ_CHECK(py.fr_is_entry == PY_NONE || py.fr_is_entry < py.fr_read, "fr_is_entry %u",
		   py.fr_is_entry);
	if (py.ts_cframe != PY_NONE)
		FUZZ_CHECK(py.ts_cframe + 8u <= EMEM_PY_TS_MAX && py.cf_frame + 8u <= EMEM_PY_TS_MAX,
			   "cframe offsets %u %u", py.ts_cframe, py.cf_frame);
	else
		FUZZ_CHECK(py.ts_frame + 8u <= EMEM_PY_TS_MAX, "ts_frame %u", py.ts_frame);
	/* Objects of exactly the sizes the checks allow: ASan sees any read beyond. */
	ts = calloc(1, EMEM_PY_TS_MAX);
	cf = calloc(1, EMEM_PY_TS_MAX);
	fr[0] = malloc(py.fr_read);
	fr[1] = malloc(py.fr_read);
	if (!ts || !cf || !fr[0] || !fr[1])
		goto out;
	for (int i = 0; i < 2; i++)
		for (size_t j = 0; j < py.fr_read; j++)
			fr[i][j] = nfill ? fill[(j + i * 7) % nfill] : 0;
	{
		uint64_t a = (uintptr_t)fr[0], b = (uintptr_t)fr[1], z = 0, c = (uintptr_t)cf;

		if (py.ts_cframe != PY_NONE) {
			memcpy(ts + py.ts_cframe, &c, 8);
			memcpy(cf + py.cf_frame, &a, 8);
		} else {
			memcpy(ts + py.ts_frame, &a, 8);
		}
		memcpy(fr[0] + py.fr_previous, &b, 8);
		memcpy(fr[1] + py.fr_previous, &z, 8);
	}
	top = emem_py_top(&py, (uintptr_t)ts);
	FUZZ_CHECK(top == (uintptr_t)fr[0], "the walk does not start at the frame");
	for (int i = 0; i < 3 && top; i++) {
		emem_py_frame_read(&py, (const uint8_t *)(uintptr_t)top, &f);
		top = f.prev;
	}
	FUZZ_CHECK(!top, "the walk does not end");
out:
	free(ts);
	free(cf);
	free(fr[0]);
	free(fr[1]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ctx c = { .p = profile__new() };
	struct mem_dec_ops ops = { .stack = stack_cb, .thread = thread_cb, .arg = &c };
	struct mem_dec d;
	size_t pos = 0;
	int64_t obj;

	if (!c.p)
		return 0;
	obj = profile__object(c.p, OBJ_ANON, "[anon]", NULL, 0);
	if (obj < 0) {
		profile__free(c.p);
		return 0;
	}
	c.obj = (uint32_t)obj;
	mem_dec_init(&d, c.p, &ops);
	while (pos + 3 <= size) {
		unsigned tag = data[pos], conn = tag & 7;
		size_t len = data[pos + 1] | (size_t)data[pos + 2] << 8;
		size_t before = c.p->events.n;
		int err;

		pos += 3;
		if (len > size - pos)
			len = size - pos;
		memcpy(msgbuf, data + pos, len);
		if (tag & 0x80) {
			library_msg((const uint8_t *)msgbuf, len, data + pos, len);
		} else if (tag & 0x40) {
			mem_dec_closed(&d, conn);
			c.stacks[conn] = 0;
		} else {
			c.msg = (const uint8_t *)msgbuf;
			c.len = len;
			err = mem_dec_message(&d, conn, PEER_PID(conn), msgbuf, len);
			FUZZ_CHECK(err == 0 || err == -ENOMEM, "error %d", err);
			for (size_t i = before; i < c.p->events.n; i++) {
				const struct event *e = &c.p->events.v[i];

				FUZZ_CHECK(e->pid == PEER_PID(conn), "an event of pid %u from %u",
					   e->pid, PEER_PID(conn));
				FUZZ_CHECK(e->kind == EVK_ALLOC || e->kind == EVK_FREE, "kind %u",
					   e->kind);
				FUZZ_CHECK(e->stack < c.p->stacks.n, "stack %u of %zu", e->stack,
					   c.p->stacks.n);
			}
			/* What a connection holds grows with the stacks it sent, not the ids. */
			FUZZ_CHECK(mem_dec_slots(&d, conn) <=
					   2 * (c.stacks[conn] + MEM_DEC_ID_AHEAD + 1),
				   "%zu slots after %llu stacks", mem_dec_slots(&d, conn),
				   (unsigned long long)c.stacks[conn]);
		}
		pos += len;
	}
	fuzz_check_profile(c.p);
	mem_dec_free(&d);
	profile__free(c.p);
	return 0;
}
