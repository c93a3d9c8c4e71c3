/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Timed regions: one program, region_probe, is attached as a uprobe (a
 * function's entry, a USDT begin, nvtxRangePushA) or a uretprobe (the
 * function's return) with a cookie indexing region_probes. Begins push the
 * start time on the thread's stack of open regions, ends pop it and send one
 * event with start and duration: one ring-buffer record per region instead
 * of two, and no pairing left to userspace.
 */
#ifndef EPROF_REGION_BPF_H
#define EPROF_REGION_BPF_H

#include "common.bpf.h"
#include "region_pair.h"

/* Set by userspace when the record stops; the probes are detached later (slow). */
bool region_stopped = false;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* set to the number of probes from userspace */
	__type(key, __u32);
	__type(value, struct region_probe);
} region_probes SEC(".maps");

/* tid -> open regions. Allocated on a thread's first region, freed at its exit. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct region_tstate);
} region_threads SEC(".maps");

/* Zeroed template for a new thread's state (too large for the BPF stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct region_tstate);
} region_zero SEC(".maps");

static __always_inline struct region_tstate *region_state(__u32 tid, bool create)
{
	struct region_tstate *t = bpf_map_lookup_elem(&region_threads, &tid);
	__u32 zero = 0;

	if (t || !create)
		return t;
	t = bpf_map_lookup_elem(&region_zero, &zero);
	if (!t)
		return NULL;
	if (bpf_map_update_elem(&region_threads, &tid, t, BPF_NOEXIST) &&
	    !bpf_map_lookup_elem(&region_threads, &tid)) {
		stat_inc(BSTAT_REGION_NO_STATE);
		return NULL;
	}
	return bpf_map_lookup_elem(&region_threads, &tid);
}

/*
 * Integer argument pos (1-8) at a function's entry. x86-64 passes six in registers and the
 * rest on the stack above the return address; arm64 passes eight in x0-x7.
 */
static __always_inline __u64 region_int_arg(struct pt_regs *ctx, unsigned pos)
{
	__u64 v = 0;

	switch (pos) {
	case 1: return PT_REGS_PARM1(ctx);
	case 2: return PT_REGS_PARM2(ctx);
	case 3: return PT_REGS_PARM3(ctx);
	case 4: return PT_REGS_PARM4(ctx);
	case 5: return PT_REGS_PARM5(ctx);
	case 6: return PT_REGS_PARM6(ctx);
	case 7:
	case 8:
#if defined(__TARGET_ARCH_x86)
		bpf_probe_read_user(&v, sizeof(v), (void *)(PT_REGS_SP(ctx) + 8 * (pos - 6)));
#elif defined(__TARGET_ARCH_arm64)
		v = ((struct user_pt_regs *)ctx)->regs[pos - 1];
#endif
		return v;
	}
	return 0;
}

static __always_inline void region_read_label(struct pt_regs *ctx, const struct region_probe *pr,
					      struct region_slot *s, bool sleepable)
{
	__u64 ptr = 0, room;
	long n;

	if (pr->arg_kind == REGION_ARG_NONE)
		return;
	if (pr->arg_kind == REGION_ARG_INTS) {
		for (int i = 0; i < REGION_NARGS; i++)
			s->args[i] = region_int_arg(ctx, ((__u64)pr->arg_off >> (8 * i)) & 0xff);
		s->has_args = 1;
		return;
	}
	/* The register's offset comes from userspace: read it as libbpf's usdt.bpf.h does. */
	if (bpf_probe_read_kernel(&ptr, sizeof(ptr), (void *)ctx + (pr->arg_reg_off & 0xff)))
		return;
	if (pr->arg_kind == REGION_ARG_DEREF &&
	    bpf_probe_read_user(&ptr, sizeof(ptr), (void *)(ptr + pr->arg_off)))
		return;
	s->label_addr = ptr;
	n = bpf_probe_read_user_str(s->label, sizeof(s->label), (void *)ptr);
	if (n < 0 && sleepable) {
		/*
		 * A page the target never touched (a literal in .rodata) cannot be
		 * read without a page fault, which only a sleepable program may take.
		 * Copy up to the end of the page; the name must end there.
		 */
		room = 4096 - (ptr & 4095);
		if (room > sizeof(s->label) - 1)
			room = sizeof(s->label) - 1;
		asm volatile("" : "+r"(room));
		if (room >= 1 && room <= sizeof(s->label) - 1 &&
		    !bpf_copy_from_user(s->label, room, (void *)ptr)) {
			s->label[sizeof(s->label) - 1] = 0;
			n = 1;
			for (int i = 0; i < EPROF_REGION_LABEL - 1; i++) {
				if (!s->label[i])
					break;
				n++;
			}
			if (n > (long)room)
				n = -1; /* no NUL within the page */
			else
				s->label[n - 1] = 0;
		}
	}
	/* A name starts with a printable character; anything else was not a string. */
	if (n > 1 && s->label[0] >= 0x20 && s->label[0] < 0x7f)
		s->label_len = n - 1;
}

static __always_inline void region_send(struct region_tstate *t, int depth, __u64 id, __u64 now,
					__u16 flags)
{
	struct region_slot *s = &t->s[depth & REGION_DEPTH_MASK];
	struct ev_region *e = reserve_event(sizeof(*e), BSTAT_REGION_RB_FULL);

	if (!e)
		return;
	e->h.size = sizeof(*e);
	e->h.kind = EV_REGION;
	e->h.flags = flags;
	e->h.pid = id >> 32;
	e->h.tid = (__u32)id;
	e->h.ts = s->start;
	e->dur = now - s->start;
	e->pair = s->pair;
	e->depth = depth;
	e->label_len = s->label_len;
	e->label_addr = s->label_addr;
	if (s->has_args) {
		e->h.flags |= REGION_F_ARGS;
		e->label_len = 0;
		for (int i = 0; i < REGION_NARGS; i++)
			e->args[i] = s->args[i];
	} else if (s->label_len)
		__builtin_memcpy(e->label, s->label, sizeof(e->label));
	else
		e->label[0] = 0;
	bpf_ringbuf_submit(e, bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > wakeup_bytes
				      ? BPF_RB_FORCE_WAKEUP
				      : BPF_RB_NO_WAKEUP);
}

static __always_inline int region_handle(struct pt_regs *ctx, bool sleepable)
{
	__u64 id = bpf_get_current_pid_tgid(), now = bpf_ktime_get_ns();
	__u32 key = bpf_get_attach_cookie(ctx), dropped;
	struct region_probe *pr;
	struct region_tstate *t;
	struct region_slot *s;
	int depth;

	if (region_stopped || !is_target(id >> 32))
		return 0;
	pr = bpf_map_lookup_elem(&region_probes, &key);
	if (!pr)
		return 0;
	t = region_state((__u32)id, pr->op == REGION_OP_BEGIN);
	if (!t) {
		if (pr->op != REGION_OP_BEGIN)
			stat_inc(BSTAT_REGION_UNMATCHED);
		return 0;
	}
	if (pr->op == REGION_OP_BEGIN) {
		s = region_push(t, now, pr->pair);
		if (!s)
			stat_inc(BSTAT_REGION_TOO_DEEP);
		else
			region_read_label(ctx, pr, s, sleepable);
		return 0;
	}
	depth = region_pop(t, pr->pair, &dropped);
	if (dropped)
		stat_add(BSTAT_REGION_UNMATCHED, dropped);
	if (depth == -2)
		stat_inc(BSTAT_REGION_UNMATCHED);
	if (depth >= 0)
		region_send(t, depth, id, now, 0);
	return 0;
}

SEC("?uprobe")
int region_probe(struct pt_regs *ctx)
{
	return region_handle(ctx, false);
}

/* The same through uprobe_multi links (communication calls: one link per library). */
SEC("?uprobe")
int region_probe_m(struct pt_regs *ctx)
{
	return region_handle(ctx, false);
}

/* For begins that carry a name (USDT, NVTX): may fault the name's page in. */
SEC("?uprobe.s")
int region_probe_s(struct pt_regs *ctx)
{
	return region_handle(ctx, true);
}

SEC("?tp_btf/sched_process_exit")
int BPF_PROG(region_thread_exit, struct task_struct *p)
{
	struct region_tstate *t;
	__u32 tid = p->pid;

	/* No is_target(): the process may have left the target set first (on_exit). */
	t = bpf_map_lookup_elem(&region_threads, &tid);
	if (!t)
		return 0;
	/* Regions a thread never ended (it exited inside them) are counted, not timed. */
	if (t->depth && !region_stopped)
		stat_add(BSTAT_REGION_UNMATCHED, t->depth);
	bpf_map_delete_elem(&region_threads, &tid);
	return 0;
}

#endif
