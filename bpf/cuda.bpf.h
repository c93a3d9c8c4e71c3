/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * CUDA API calls through uprobes: one generic entry program and one generic
 * return program, attached to every traced runtime/driver function with a
 * cookie that names the function and the positions of its interesting
 * arguments (eprof_abi.h). The entry remembers the arguments per (thread,
 * function); the return sends one ev_cuda_api with duration, result and the
 * caller's stack (for launches only up to cuda_stack_rate per second and
 * thread, so launch-bound programs stay cheap while counts stay exact).
 */
#ifndef EPROF_CUDA_BPF_H
#define EPROF_CUDA_BPF_H

#include "common.bpf.h"

#ifndef PT_REGS_PARM6 /* libbpf before 1.2 */
#if defined(__TARGET_ARCH_x86)
#define PT_REGS_PARM6(x) ((x)->r9)
#elif defined(__TARGET_ARCH_arm64)
#define PT_REGS_PARM6(x) (((struct user_pt_regs *)(x))->regs[5])
#endif
#endif

const volatile __u32 cuda_stack_rate = 100; /* launch stacks per second per thread, 0 = none */

struct cuda_call {
	__u64 ts;
	__u64 bytes;
	__u64 ptr;
	__u64 outp;
	__u64 namep;
	__u32 kind;
	__u32 nested;
};

struct cuda_rate {
	__u64 window;
	__u32 n;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64); /* tid << 16 | function id */
	__type(value, struct cuda_call);
} cuda_inflight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32); /* tid */
	__type(value, __u32);
} cuda_depth SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32); /* tid */
	__type(value, struct cuda_rate);
} cuda_rates SEC(".maps");

/* The register arguments, read once at constant offsets (the verifier wants no computed ctx offset). */
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

	if (i == CUDA_ARG_NONE)
		return 0;
	if (i < 6)
		return a->r[i];
	/* x86-64: [sp] is the return address, stack args follow. */
	bpf_probe_read_user(&v, sizeof(v), (void *)(a->sp + 8 * (i - 5)));
	return v;
}

SEC("?uprobe")
int BPF_KPROBE(cuda_enter)
{
	__u64 id = bpf_get_current_pid_tgid(), ck = bpf_get_attach_cookie(ctx);
	__u32 tid = (__u32)id, one = 1, *depth;
	struct cuda_call c = {};
	struct cuda_regs regs;
	__u64 key, b2;
	__u32 ia;

	if (!is_target(id >> 32))
		return 0;
	stat_inc(BSTAT_CUDA_CALLS);
	cuda_regs_get(ctx, &regs);
	depth = bpf_map_lookup_elem(&cuda_depth, &tid);
	if (depth) {
		c.nested = *depth > 0;
		*depth += 1;
	} else {
		bpf_map_update_elem(&cuda_depth, &tid, &one, BPF_ANY);
	}
	ia = CUDA_CK_ARG(ck, CUDA_CK_BYTES);
	if (ia != CUDA_ARG_NONE) {
		c.bytes = cuda_arg(&regs, ia);
		ia = CUDA_CK_ARG(ck, CUDA_CK_BYTES2);
		if (ia != CUDA_ARG_NONE) {
			b2 = cuda_arg(&regs, ia);
			c.bytes *= b2;
		}
		c.bytes <<= CUDA_CK_ARG(ck, CUDA_CK_SHIFT) & 3;
	}
	c.kind = cuda_arg(&regs, CUDA_CK_ARG(ck, CUDA_CK_KIND));
	c.ptr = cuda_arg(&regs, CUDA_CK_ARG(ck, CUDA_CK_PTR));
	c.outp = cuda_arg(&regs, CUDA_CK_ARG(ck, CUDA_CK_OUT));
	c.namep = cuda_arg(&regs, CUDA_CK_ARG(ck, CUDA_CK_NAME));
	c.ts = bpf_ktime_get_ns();
	key = (__u64)tid << 16 | CUDA_CK_FUNC(ck);
	if (bpf_map_update_elem(&cuda_inflight, &key, &c, BPF_ANY))
		stat_inc(BSTAT_CUDA_INFLIGHT_FULL);
	return 0;
}

static __always_inline bool cuda_want_stack(__u32 tid, __u64 now)
{
	struct cuda_rate *r, fresh = { .window = now, .n = 1 };

	if (!cuda_stack_rate)
		return false;
	r = bpf_map_lookup_elem(&cuda_rates, &tid);
	if (!r) {
		bpf_map_update_elem(&cuda_rates, &tid, &fresh, BPF_ANY);
		return true;
	}
	if (now - r->window >= 1000000000ULL) {
		r->window = now;
		r->n = 0;
	}
	if (r->n >= cuda_stack_rate)
		return false;
	r->n++;
	return true;
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

SEC("?uretprobe")
int BPF_KRETPROBE(cuda_exit, long rc)
{
	__u64 id = bpf_get_current_pid_tgid(), ck = bpf_get_attach_cookie(ctx), now, key, size;
	__u32 tid = (__u32)id, *depth;
	struct scratch_buf *b;
	struct ev_cuda_api *e;
	struct cuda_call *c;
	bool stack = true;

	if (!is_target(id >> 32))
		return 0;
	now = bpf_ktime_get_ns();
	depth = bpf_map_lookup_elem(&cuda_depth, &tid);
	if (depth && *depth > 0)
		*depth -= 1;
	key = (__u64)tid << 16 | CUDA_CK_FUNC(ck);
	c = bpf_map_lookup_elem(&cuda_inflight, &key);
	if (!c)
		return 0;
	if (CUDA_CK_CLASS(ck) == CUDA_CL_HANDLE) {
		cuda_send_handle(c, id, ck, rc);
		/* the call is an API event too (count and time) */
	}
	b = scratch_get(SLOT_UPROBE);
	if (!b)
		goto out;
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
	if (CUDA_CK_CLASS(ck) == CUDA_CL_LAUNCH)
		stack = cuda_want_stack(tid, now);
	if (stack) {
		size = capture_stack(ctx, b, sizeof(*e), &e->h, &e->st, false, snapshot_bytes);
	} else {
		stat_inc(BSTAT_CUDA_NOSTACK);
		e->h.flags |= CUDA_EVF_NOSTACK;
		__builtin_memset(&e->st, 0, sizeof(e->st));
		size = sizeof(*e);
		e->h.size = size;
	}
	if (size)
		send_scratch(b, size, BSTAT_CUDA_RB_FULL);
out:
	bpf_map_delete_elem(&cuda_inflight, &key);
	return 0;
}

#endif
