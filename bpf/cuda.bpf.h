/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * CUDA API calls through uprobes: one generic entry program and one generic
 * return program, attached to every traced runtime/driver function with a
 * cookie that names the function and the positions of its interesting
 * arguments (eprof_abi.h). The entry remembers the arguments per (thread,
 * function); the return sends one ev_cuda_api with duration, result and the
 * caller's stack (for launches only up to cuda_stack_rate per second and
 * thread, so launch-bound programs stay cheap while counts stay exact).
 *
 * With uprobe sessions (Linux 6.13+) one program, cuda_session, runs at both
 * ends of a call, and its entry decides whether the return is probed at all:
 * a launch past the stack rate is sent at entry (no duration, no result) and
 * returns 1, so the kernel does not hijack its return address - the
 * uretprobe's second trap, half of a launch's cost, is skipped.
 */
#ifndef EPROF_CUDA_BPF_H
#define EPROF_CUDA_BPF_H

#include "common.bpf.h"
#include "python.bpf.h"

const volatile __u32 cuda_stack_rate = 100; /* launch stacks per second per thread, 0 = none */

/* sp at a return is the entry's plus the popped return address (x86-64), the same on arm64. */
#if defined(__TARGET_ARCH_x86)
#define CUDA_RET_SP 8
#else
#define CUDA_RET_SP 0
#endif

struct cuda_call {
	__u64 ts;
	__u64 bytes;
	__u64 ptr;
	__u64 outp;
	__u64 namep;
	__u64 sp; /* at entry: tells the session's return from a new entry */
	__u32 kind;
	__u16 nested;
	__u16 stack; /* 1: the entry took a stack token (session), 0: the return decides */
};

#define CUDA_MAX_DEPTH 8 /* nested traced calls per thread (runtime -> driver) */

/* Per-thread state in task storage: one lookup per probe hit, no hash map. */
struct cuda_task {
	__u32 depth;
	__u32 rate_n;
	__u64 rate_window;
	struct cuda_call calls[CUDA_MAX_DEPTH];
	__u16 funcs[CUDA_MAX_DEPTH];
	/* The last launch entered was a runtime launch sent at entry: a driver launch next (other
	 * traced calls between them allowed) is the runtime calling the driver - nested - as the
	 * depth cannot tell. */
	__u8 rt_launch;
	/* ... and which it was and where it was entered: another launch function entered at that
	 * same stack pointer right after it was jumped to from it (nvcc 13's __cudaLaunchKernel
	 * tail-calls cudaLaunchKernel). The same function again there is the next launch of a
	 * loop, not nested. */
	__u64 rt_sp, rt_ts;
	__u16 rt_func;
};

#define CUDA_TAIL_NS 200000 /* a tail call follows its caller's entry within this */

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct cuda_task);
} cuda_tasks SEC(".maps");

/* The register arguments, read once at constant offsets (the verifier wants no computed ctx
 * offset). */
struct cuda_regs {
	__u64 r[6];
	__u64 sp;
};

static __always_inline void cuda_regs_get(struct pt_regs *ctx, struct cuda_regs *a)
{
	a->r[0] = PT_REGS_PARM1(ctx);
	a->r[1] = PT_REGS_PARM2(ctx);
	a->r[2] = PT_REGS_PARM3(ctx);
	a->r[3] = PT_REGS_PARM4(ctx);
	a->r[4] = PT_REGS_PARM5(ctx);
	a->r[5] = PT_REGS_PARM6(ctx);
	a->sp = PT_REGS_SP(ctx);
}

/* Argument i of the call at function entry; args past the sixth come from the stack. */
static __always_inline __u64 cuda_arg(struct cuda_regs *a, __u32 i)
{
	__u64 v = 0;

	switch (i) {
	case 0:
		return a->r[0];
	case 1:
		return a->r[1];
	case 2:
		return a->r[2];
	case 3:
		return a->r[3];
	case 4:
		return a->r[4];
	case 5:
		return a->r[5];
	case CUDA_ARG_NONE:
		return 0;
	}
	/* x86-64: [sp] is the return address, stack args follow. */
	bpf_probe_read_user(&v, sizeof(v), (void *)(a->sp + 8 * (i - 5)));
	return v;
}

static __always_inline bool cuda_want_stack(struct cuda_task *t, __u64 now)
{
	if (!cuda_stack_rate)
		return false;
	if (now - t->rate_window >= 1000000000ULL) {
		t->rate_window = now;
		t->rate_n = 0;
	}
	if (t->rate_n >= cuda_stack_rate)
		return false;
	t->rate_n++;
	return true;
}

/* A launch whose return is not probed: its event now, without stack, duration or result. */
static __always_inline void cuda_send_entry(__u64 id, __u64 ck, __u64 now, __u64 ptr, bool nested)
{
	__u64 flags = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > wakeup_bytes
			  ? BPF_RB_FORCE_WAKEUP
			  : BPF_RB_NO_WAKEUP;
	struct ev_cuda_api *e = reserve_event(sizeof(*e), BSTAT_CUDA_RB_FULL);

	if (!e)
		return;
	/* fill_hdr without its second clock read */
	e->h.kind = EV_CUDA_API;
	e->h.pid = id >> 32;
	e->h.tid = (__u32)id;
	e->h.size = sizeof(*e);
	e->h.ts = now;
	e->h.flags = CUDA_EVF_NOSTACK | CUDA_EVF_NORET | (nested ? CUDA_EVF_NESTED : 0);
	e->dur = 0;
	e->result = 0;
	e->bytes = 0;
	e->ptr = ptr;
	e->out = 0;
	e->kind = 0;
	e->func = CUDA_CK_FUNC(ck);
	e->pad = 0;
	__builtin_memset(&e->st, 0, sizeof(e->st));
	bpf_ringbuf_submit(e, flags);
}

/*
 * Calls whose return was never seen (a longjmp or exception through them, a return the kernel
 * could not probe) would pile up until every call of the thread is lost. The stack grows down:
 * a pending call whose entry stack pointer is below `limit` (an entry's own, or a return's less
 * the popped return address) is no longer on the stack, so it is over.
 */
static __always_inline void cuda_pop_stale(struct cuda_task *t, __u64 limit)
{
	for (int i = 0; i < CUDA_MAX_DEPTH; i++) {
		__u32 d = t->depth;

		if (!d || d > CUDA_MAX_DEPTH || t->calls[d - 1].sp >= limit)
			break;
		t->depth = d - 1;
		stat_inc(BSTAT_CUDA_STALE);
	}
}

/*
 * Entry of a traced call: its arguments onto the thread's call stack. Returns 1 when its
 * return needs no probe (sessions only: a launch past the stack rate, sent here).
 */
static __always_inline int cuda_entry(struct pt_regs *ctx, __u64 id, __u64 ck, struct cuda_task *t,
				      bool session)
{
	bool launch = CUDA_CK_CLASS(ck) == CUDA_CL_LAUNCH, nested, token = false;
	struct cuda_regs regs;
	struct cuda_call *c;
	__u32 ia, d;
	__u64 b2;

	cuda_regs_get(ctx, &regs);
	/* A call entered at the same stack pointer as a pending one was tail-called from it. */
	cuda_pop_stale(t, regs.sp);
	d = t->depth;
	nested = d > 0 || (launch && t->rt_launch && !(ck & CUDA_CK_RUNTIME)) ||
		 (launch && t->rt_launch && regs.sp == t->rt_sp &&
		  CUDA_CK_FUNC(ck) != t->rt_func && bpf_ktime_get_ns() - t->rt_ts < CUDA_TAIL_NS);
	if (launch)
		t->rt_launch = 0;
	/* A nested launch needs no stack (the outer call has it) and, in a session, no return. */
	if (session && launch) {
		__u64 now = bpf_ktime_get_ns();

		token = !nested && cuda_want_stack(t, now);
		if (!token) {
			stat_inc(BSTAT_CUDA_NOSTACK);
			t->rt_launch = !!(ck & CUDA_CK_RUNTIME);
			if (!nested) { /* the outer call: what a tail call from it looks like */
				t->rt_sp = regs.sp;
				t->rt_ts = now;
				t->rt_func = CUDA_CK_FUNC(ck);
			}
			cuda_send_entry(id, ck, now, cuda_arg(&regs, CUDA_CK_ARG(ck, CUDA_CK_PTR)),
					nested);
			return 1;
		}
	}
	if (d >= CUDA_MAX_DEPTH) {
		stat_inc(BSTAT_CUDA_INFLIGHT_FULL);
		if (session)
			return 1; /* its return could not be told from an entry */
		t->depth = d + 1;
		return 0;
	}
	t->depth = d + 1;
	c = &t->calls[d];
	t->funcs[d] = CUDA_CK_FUNC(ck);
	c->nested = nested;
	c->stack = token;
	c->sp = regs.sp;
	c->bytes = 0;
	ia = CUDA_CK_ARG(ck, CUDA_CK_BYTES);
	if (ia != CUDA_ARG_NONE) {
		c->bytes = cuda_arg(&regs, ia);
		ia = CUDA_CK_ARG(ck, CUDA_CK_BYTES2);
		if (ia != CUDA_ARG_NONE) {
			b2 = cuda_arg(&regs, ia);
			c->bytes *= b2;
		}
		c->bytes <<= CUDA_CK_ARG(ck, CUDA_CK_SHIFT) & 3;
	}
	c->kind = cuda_arg(&regs, CUDA_CK_ARG(ck, CUDA_CK_KIND));
	c->ptr = cuda_arg(&regs, CUDA_CK_ARG(ck, CUDA_CK_PTR));
	c->outp = cuda_arg(&regs, CUDA_CK_ARG(ck, CUDA_CK_OUT));
	c->namep = cuda_arg(&regs, CUDA_CK_ARG(ck, CUDA_CK_NAME));
	c->ts = bpf_ktime_get_ns();
	return 0;
}

SEC("?uprobe")
int BPF_KPROBE(cuda_enter)
{
	__u64 id = bpf_get_current_pid_tgid(), ck = bpf_get_attach_cookie(ctx);
	struct cuda_task *t;

	if (!is_target(id >> 32))
		return 0;
	stat_inc(BSTAT_CUDA_CALLS);
	t = bpf_task_storage_get(&cuda_tasks, bpf_get_current_task_btf(), NULL,
				 BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!t) {
		stat_inc(BSTAT_CUDA_INFLIGHT_FULL);
		return 0;
	}
	return cuda_entry(ctx, id, ck, t, false);
}

static __always_inline int cuda_send_handle(struct cuda_call *c, __u64 id, __u64 ck, long rc)
{
	struct ev_cuda_handle *e;

	e = reserve_event(sizeof(*e), BSTAT_CUDA_RB_FULL);
	if (!e)
		return 0;
	fill_hdr(&e->h, EV_CUDA_HANDLE, id);
	e->h.size = sizeof(*e);
	e->h.ts = c->ts;
	e->out = 0;
	e->in = c->ptr;
	e->result = rc;
	e->func = CUDA_CK_FUNC(ck);
	e->pad[0] = e->pad[1] = e->pad[2] = 0;
	e->name[0] = 0;
	if (c->outp)
		bpf_probe_read_user(&e->out, sizeof(e->out), (void *)c->outp);
	if (c->namep)
		bpf_probe_read_user_str(e->name, sizeof(e->name), (void *)c->namep);
	bpf_ringbuf_submit(e, 0);
	return 0;
}

/* Return of the call on top of the thread's call stack: one event with duration and result. */
static __always_inline int cuda_return(struct pt_regs *ctx, __u64 id, __u64 ck, struct cuda_task *t,
				       long rc)
{
	__u64 now = bpf_ktime_get_ns(), size;
	struct scratch_buf *b;
	struct ev_cuda_api *e;
	struct cuda_call *c;
	bool stack = true;
	__u32 d;

	if (!t->depth)
		return 0;
	d = --t->depth;
	if (d >= CUDA_MAX_DEPTH)
		return 0;
	if (t->funcs[d] != CUDA_CK_FUNC(ck)) {
		/* a return we missed (longjmp, a probe attached mid-call): start over */
		t->depth = 0;
		return 0;
	}
	c = &t->calls[d];
	if (CUDA_CK_CLASS(ck) == CUDA_CL_HANDLE)
		cuda_send_handle(c, id, ck, rc); /* and the call is an API event too */
	b = scratch_get(SLOT_UPROBE);
	if (!b)
		return 0;
	e = (struct ev_cuda_api *)b->data;
	fill_hdr(&e->h, EV_CUDA_API, id);
	e->h.ts = c->ts;
	e->dur = now - c->ts;
	e->result = rc;
	e->bytes = c->bytes;
	e->ptr = c->ptr;
	e->out = 0;
	if (c->outp)
		bpf_probe_read_user(&e->out, sizeof(e->out), (void *)c->outp);
	e->kind = c->kind;
	e->func = CUDA_CK_FUNC(ck);
	e->pad = 0;
	if (c->nested)
		e->h.flags |= CUDA_EVF_NESTED;
	if (CUDA_CK_CLASS(ck) == CUDA_CL_LAUNCH && !c->stack)
		stack = !c->nested && cuda_want_stack(t, now);
	if (stack) {
		__u32 ubytes = snapshot_bytes;
		struct py_frbuf *pyf = py_event_walk(id, SLOT_UPROBE, &ubytes);

		size = capture_stack(ctx, b, sizeof(*e), &e->h, &e->st, false, ubytes);
		if (size && pyf)
			size = py_append(b, size, &e->h, pyf);
	} else {
		stat_inc(BSTAT_CUDA_NOSTACK);
		e->h.flags |= CUDA_EVF_NOSTACK;
		__builtin_memset(&e->st, 0, sizeof(e->st));
		size = sizeof(*e);
		e->h.size = size;
	}
	if (size)
		send_scratch(b, size, BSTAT_CUDA_RB_FULL);
	return 0;
}

SEC("?uretprobe")
int BPF_KRETPROBE(cuda_exit, long rc)
{
	__u64 id = bpf_get_current_pid_tgid(), ck = bpf_get_attach_cookie(ctx);
	struct cuda_task *t;

	if (!is_target(id >> 32))
		return 0;
	t = bpf_task_storage_get(&cuda_tasks, bpf_get_current_task_btf(), NULL, 0);
	if (!t)
		return 0;
	return cuda_return(ctx, id, ck, t, rc);
}

/*
 * Both ends of a call under a uprobe session (expected attach type BPF_TRACE_UPROBE_SESSION,
 * set by userspace). A return is the call on top of the thread's stack coming back: same
 * function, stack pointer just above the entry's (a new entry of that function from inside
 * it has a lower one). Returning 1 from an entry skips the return probe.
 */
SEC("?uprobe")
int BPF_KPROBE(cuda_session)
{
	__u64 id = bpf_get_current_pid_tgid(), ck = bpf_get_attach_cookie(ctx);
	struct cuda_task *t;
	__u32 d;

	if (!is_target(id >> 32))
		return 1;
	t = bpf_task_storage_get(&cuda_tasks, bpf_get_current_task_btf(), NULL,
				 BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!t) {
		stat_inc(BSTAT_CUDA_CALLS);
		stat_inc(BSTAT_CUDA_INFLIGHT_FULL);
		return 1;
	}
	cuda_pop_stale(t, PT_REGS_SP(ctx) - CUDA_RET_SP);
	d = t->depth - 1;
	if (d < CUDA_MAX_DEPTH && t->funcs[d] == CUDA_CK_FUNC(ck) &&
	    PT_REGS_SP(ctx) == t->calls[d].sp + CUDA_RET_SP)
		return cuda_return(ctx, id, ck, t, PT_REGS_RC(ctx));
	stat_inc(BSTAT_CUDA_CALLS);
	return cuda_entry(ctx, id, ck, t, true);
}

#endif
