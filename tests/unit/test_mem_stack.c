// SPDX-License-Identifier: MIT
/*
 * libeprof_mem.so's in-process stacks (src/agent/eprof_mem_stack.c): the native unwind from
 * a wrapper's frame through this program's real stack, the deduplication (a stack is sent
 * once, under one id), truncation made visible, and Python frames read from a fake
 * interpreter frame chain laid out as a py_proc says.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#define EMEM_STACK_TEST 1
#include "../../src/agent/eprof_mem_stack.c"

/* The channel: the messages the module sends, kept. */
static struct {
	struct emem_msg h;
	struct emem_stack s;
	uint64_t w[EMEM_STACK_MAX + 2 * EMEM_PY_MAX];
} last;
static int nsent;

bool emem_chan_send(const void *msg, size_t len)
{
	assert_true(len <= sizeof(last) && len <= EMEM_MSG_MAX);
	memset(&last, 0, sizeof(last));
	memcpy(&last, msg, len);
	nsent++;
	return true;
}

/* A wrapper as libeprof_mem.so's malloc is: its return address and frame pointer. */
static __attribute__((noinline, optimize("no-omit-frame-pointer"))) unsigned wrapper(void)
{
	unsigned id = emem_stack_id((uintptr_t)__builtin_return_address(0),
				    (uintptr_t)__builtin_frame_address(0), 1, 1, 1);

	__asm__ volatile("" ::: "memory");
	return id;
}

static __attribute__((noinline)) unsigned site_a(void)
{
	unsigned id = wrapper();

	__asm__ volatile("" ::: "memory");
	return id + 0;
}

static __attribute__((noinline)) unsigned site_b(void)
{
	unsigned id = wrapper();

	__asm__ volatile("" ::: "memory");
	return id + 0;
}

static __attribute__((noinline)) unsigned outer(int which)
{
	unsigned id = which ? site_b() : site_a();

	__asm__ volatile("" ::: "memory");
	return id;
}

static bool in_func(uint64_t pc, void *fn)
{
	return pc > (uintptr_t)fn && pc < (uintptr_t)fn + 256;
}

static void test_unwind_and_dedup(void **state)
{
	unsigned ids[4];
	int sent[4];

	(void)state;
	nsent = 0;
	/* one call site of outer() each: a, a again (the same stack), b, b again */
	for (int i = 0; i < 4; i++) {
		ids[i] = outer(i >= 2);
		sent[i] = nsent;
		if (i == 0) {
			assert_int_equal(last.h.kind, EMEM_MSG_STACK);
			assert_int_equal(last.s.id, ids[0]);
			/* leaf first: the caller of the wrapper, its caller, ... down to _start */
			assert_true(last.h.n >= 4);
			assert_true(in_func(last.w[0], (void *)site_a));
			assert_true(in_func(last.w[1], (void *)outer));
			/* reached the outermost frame */
			assert_int_equal(last.s.flags & EMEM_STACK_TRUNC, 0);
			assert_int_equal(last.s.npy, 0);
		}
		if (i == 2)
			assert_true(in_func(last.w[0], (void *)site_b));
	}
	assert_int_not_equal(ids[0], 0);
	assert_int_equal(ids[0], ids[1]); /* the same stack: the same id, nothing sent */
	assert_int_equal(sent[0], 1);
	assert_int_equal(sent[1], 1);
	assert_int_not_equal(ids[2], ids[0]); /* another call site: a new id, sent once */
	assert_int_equal(ids[2], ids[3]);
	assert_int_equal(sent[2], 2);
	assert_int_equal(sent[3], 2);
}

/* A frame outside the thread's stack (a coroutine's): the leaf only, marked truncated. */
static void test_foreign_stack_truncated(void **state)
{
	static uint64_t fake[4] = { 0, 0, 0, 0 };
	unsigned id;

	(void)state;
	nsent = 0;
	id = emem_stack_id((uintptr_t)site_a + 8, (uintptr_t)&fake[0], 1, 1, 1);
	assert_int_not_equal(id, 0);
	assert_int_equal(nsent, 1);
	assert_int_equal(last.h.n, 1);
	assert_true(last.s.flags & EMEM_STACK_TRUNC);
}

/*
 * A full table (a big job's hundreds of thousands of distinct stacks) is emptied and the ids
 * go on: no allocation gets the empty id 0, and a stack seen before the reset is sent again
 * under a new id (records already made with the old one keep it: the recorder keeps both).
 */
static void test_full_table_starts_again(void **state)
{
	const size_t cap = (((size_t)1 << STK_BITS) - 1) >> 1;
	const uint64_t seen[3] = { 0x401000, 0x402000, 0x403000 };
	unsigned first, again, last_id = 0;
	uint64_t w[2];

	(void)state;
	nsent = 0;
	first = stack_of(seen, 3, 3, 1, 1, 1);
	assert_int_not_equal(first, 0);
	assert_int_equal(nsent, 1);
	assert_int_equal(stack_of(seen, 3, 3, 1, 1, 1), first); /* found, not sent */
	assert_int_equal(nsent, 1);
	for (size_t i = 0; i <= cap; i++) {
		unsigned id;

		w[0] = 0x100000 + i; /* a distinct two-frame stack each */
		w[1] = 0x200000;
		id = stack_of(w, 2, 2, 1, 1, 1);
		assert_true(id > last_id); /* never 0, never again */
		last_id = id;
	}
	assert_int_equal(emem_stk_resets, 1);
	assert_true(stab_count < 16);
	/* after the reset: sent again once, under a new id, then found */
	nsent = 0;
	again = stack_of(seen, 3, 3, 1, 1, 1);
	assert_true(again > last_id);
	assert_int_equal(nsent, 1);
	assert_int_equal(last.h.kind, EMEM_MSG_STACK);
	assert_int_equal(last.s.id, again);
	assert_int_equal(stack_of(seen, 3, 3, 1, 1, 1), again);
	assert_int_equal(nsent, 1);
}

/* Python: a thread state and three interpreter frames, one of them a C-stack shim. */
static uint8_t tstate[64];
static uint8_t frames[3][64];

static void *fake_tstate(void)
{
	return tstate;
}

static void test_python_frames(void **state)
{
	struct py_proc pp = { .version = 0x030c0000, .ts_cframe = PY_NONE, .ts_frame = 8,
			      .fr_previous = 0, .fr_code = 8, .fr_instr = 16, .fr_owner = 24,
			      .fr_is_entry = PY_NONE, .owner_cstack = 3 };
	uint64_t f0 = (uintptr_t)frames[0], f1 = (uintptr_t)frames[1], f2 = (uintptr_t)frames[2];

	(void)state;
	/* leaf f0 (code 0x1000) <- shim f1 <- f2 (code 0x2000) */
	memcpy(tstate + 8, &f0, 8);
	memcpy(frames[0] + 0, &f1, 8);
	memcpy(frames[0] + 8, &(uint64_t){ 0x1000 }, 8);
	memcpy(frames[0] + 16, &(uint64_t){ 0x1010 }, 8);
	frames[0][24] = 0;
	memcpy(frames[1] + 0, &f2, 8);
	frames[1][24] = 3;
	memcpy(frames[2] + 0, &(uint64_t){ 0 }, 8);
	memcpy(frames[2] + 8, &(uint64_t){ 0x2000 }, 8);
	memcpy(frames[2] + 16, &(uint64_t){ 0x2020 }, 8);
	frames[2][24] = 0;
	py = pp;
	py_tstate = fake_tstate;
	atomic_store(&py_on, true);
	nsent = 0;
	outer(0);
	atomic_store(&py_on, false);
	assert_int_equal(nsent, 1); /* with Python frames: another stack */
	assert_int_equal(last.s.npy, 2);
	/* leaf first; the frame under the shim begins its eval call: bit 0 */
	assert_int_equal(last.w[last.h.n + 0], 0x1000 | 1);
	assert_int_equal(last.w[last.h.n + 1], 0x1010);
	assert_int_equal(last.w[last.h.n + 2], 0x2000);
	assert_int_equal(last.w[last.h.n + 3], 0x2020);
}

/* The tables live as long as the process in the library; the test frees them (sanitizers). */
static int free_tables(void **state)
{
	struct objset *set = atomic_load(&objs);

	(void)state;
	for (size_t i = 0; set && i < set->n; i++)
		cfi_table__free(atomic_load(&set->v[i].t));
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unwind_and_dedup),
		cmocka_unit_test(test_foreign_stack_truncated),
		cmocka_unit_test(test_full_table_starts_again),
		cmocka_unit_test(test_python_frames),
	};

	return cmocka_run_group_tests(tests, NULL, free_tables);
}
