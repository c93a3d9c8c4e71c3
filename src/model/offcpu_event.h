/* SPDX-License-Identifier: MIT */
/*
 * What the flags of an EVK_OFFCPU event (profile.h) mean, as the file stores them: the
 * recorder translates the BPF side's values (bpf/eprof_abi.h) into these when it decodes, so
 * readers depend on the file format only.
 */
#ifndef EPROF_OFFCPU_EVENT_H
#define EPROF_OFFCPU_EVENT_H

/* Bits 0-3: the state the thread left the CPU in. */
enum offcpu_ev_state {
	OFFEV_SLEEP = 1,    /* interruptible: waiting for an event, a lock, a timer */
	OFFEV_DISK = 2,	    /* uninterruptible: disk I/O, some kernel locks */
	OFFEV_RUNNABLE = 3, /* preempted: ready, waiting for a CPU */
	OFFEV_NEW = 4,	    /* a new thread from its creation to its first run */
};

#define OFFEV_STATE_MASK 0xf
#define OFFEV_STATE(flags) ((flags) & OFFEV_STATE_MASK)
#define OFFEV_F_IRQ_WAKE 0x10	/* woken from interrupt context: timer, I/O completion */
#define OFFEV_F_NO_STACK 0x20	/* over the stack budget: no stacks captured */
#define OFFEV_F_UNSAMPLED 0x40	/* not picked by the time sampling: no stacks, weighted */
#define OFFEV_F_FUTEX 0x80	/* went off CPU in a futex wait: a user-space lock or condition */
#define OFFEV_F_TAIL 0x100	/* picked for its wait for a CPU only (see OFFCPU_F_TAIL) */

#endif
