/* SPDX-License-Identifier: MIT */
/*
 * Private to libeprof_mem.so: native stacks taken inside the process for --mem=1's channel
 * mode (src/agent/eprof_mem_stack.c), unwound with the recorder's CFI tables (src/unwind)
 * built from the loaded objects' .eh_frame in memory, and deduplicated: each distinct stack
 * gets an id and is sent once.
 */
#ifndef EPROF_MEM_STACK_H
#define EPROF_MEM_STACK_H

#include <stddef.h>
#include <stdint.h>

#define EMEM_HIDDEN __attribute__((visibility("hidden")))

/* Sends one whole message on the channel (blocking); false when the channel is gone. */
EMEM_HIDDEN bool emem_chan_send(const void *msg, size_t len);

/*
 * The id of the stack whose leaf is the return address ip of a wrapper whose frame pointer
 * is frame (the caller's sp is frame + 16, its rbp is saved at frame); a new stack is sent
 * first (EMEM_MSG_STACK, pid and tid in its header). 0 when none could be had.
 * The caller holds the thread's re-entrancy guard: the allocator calls made here (the
 * tables built the first time an object is met) are not recorded.
 */
EMEM_HIDDEN unsigned emem_stack_id(uintptr_t ip, uintptr_t frame, uint64_t ns, unsigned pid,
				   unsigned tid);
struct py_proc;
/*
 * The interpreter layout the recorder sent (emem_recv_layout): Python frames from then on.
 * A layout whose offsets are out of bounds is ignored.
 */
EMEM_HIDDEN void emem_py_set(const struct py_proc *layout);
/* fork: the locks are taken before and released after; the child starts a new id space. */
EMEM_HIDDEN void emem_stacks_prepare(void);
EMEM_HIDDEN void emem_stacks_parent(void);
EMEM_HIDDEN void emem_stacks_child(void);
/*
 * A new recorder (an attach after an earlier one was retracted): it knows none of the ids
 * sent before, so they start again. No hook runs then (the entries are not patched yet).
 */
EMEM_HIDDEN void emem_stacks_reset(void);
/* Counters: unwinds that stopped before the root, stacks sent, stacks not interned. */
/* Zeroed memory of the library's own, left out of the target's mmap figures (NULL: failed). */
EMEM_HIDDEN void *emem_map_zero(size_t bytes);
EMEM_HIDDEN extern unsigned long emem_stk_trunc, emem_stk_sent, emem_stk_full, emem_stk_resets;

#endif
