/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Memory profiling: uprobes on the allocator's entry points, sampled by
 * bytes (a Poisson process of mean mem_sample_bytes over the bytes each CPU
 * allocates). Only sampled calls pay for a return probe: with uprobe
 * sessions (kernel >= 6.13) the entry program returns non-zero for the
 * others, so the kernel never hijacks their return address. Sampled live
 * allocations sit in mem_live so a free is matched here; an unsampled free
 * costs one map delete that finds nothing.
 *
 * Attach points and modes are chosen by src/record/mem.c:
 *   mem_alloc       session program (entry + return) on malloc & co
 *   mem_free        uprobe_multi on free
 *   mem_alloc_entry / mem_alloc_ret   uprobe + uretprobe fallback
 */
#ifndef EPROF_MEM_BPF_H
#define EPROF_MEM_BPF_H

#include "common.bpf.h"
#include "python.bpf.h"

#define MEM_EXP_TABLE 4096

const volatile bool mem_sample_all = false; /* --mem=1: every allocation */
/*
 * --mem=1 with uprobe sessions: no per-allocation state in BPF. Every allocation and
 * every free goes to the recorder, which matches them: a hash lookup and delete per
 * free cost ~800 ns here (cold buckets), a ring-buffer record ~170 ns.
 */
const volatile bool mem_user_match = false;
const volatile __u32 mem_stack_bytes = 0;   /* user stack copied per allocation (DWARF) */
/* Quantiles of an exponential distribution of mean SAMPLE_BYTES: the gaps between samples. */
const volatile __u64 mem_exp_table[MEM_EXP_TABLE] = { 1 };

extern __u64 *bpf_session_cookie(void) __ksym __weak;
extern bool bpf_session_is_return(void) __ksym __weak;

struct mem_key {
	__u64 addr;
	__u32 pid;
	__u32 pad;
};

struct mem_val {
	__u64 size;
	__u32 tid;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1 << 18); /* resized from userspace */
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct mem_key);
	__type(value, struct mem_val);
} mem_live SEC(".maps");

/* mem_user_match: inside an allocator call (its return is probed), per thread. */
struct mem_task {
	__u32 depth;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct mem_task);
} mem_tasks SEC(".maps");

/* Bytes left until the next sample on this CPU (0: not drawn yet). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} mem_left SEC(".maps");

/* A sampled call in flight: posix_memalign's out pointer, and the fallback's state. */
struct mem_pending {
	__u64 size;
	__u64 memptr;
	__u32 func;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct mem_pending);
} mem_pend SEC(".maps");

/*
 * Mapping syscalls in flight, by tid, until the return gives the result: an anonymous
 * mmap's length, brk's break before the call, mremap's old address and length.
 */
struct mem_sysarg {
	__u64 a, b;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct mem_sysarg);
} mem_mmap_len SEC(".maps");

static __always_inline __u64 mem_draw(void)
{
	__u32 i = bpf_get_prandom_u32() & (MEM_EXP_TABLE - 1);

	return mem_exp_table[i];
}

static __always_inline bool mem_should_sample(__u64 size)
{
	__u32 zero = 0;
	__u64 *left;

	if (mem_sample_all)
		return size != 0;
	left = bpf_map_lookup_elem(&mem_left, &zero);
	if (!left)
		return false;
	if (!*left)
		*left = mem_draw();
	if (size < *left) {
		*left -= size;
		return false;
	}
	/* Memoryless: the next gap starts at the end of this allocation. */
	*left = mem_draw();
	return true;
}

/* ts: when the free was made, 0 for now (a batch of the interposer's carries its times). */
static __always_inline void mem_send_free(__u64 id, __u64 addr, __u64 size, __u64 ts)
{
	struct ev_mem_free *e = reserve_event(sizeof(*e), BSTAT_MEM_RB_FULL);

	if (!e)
		return;
	fill_hdr(&e->h, EV_MEM_FREE, id);
	if (ts)
		e->h.ts = ts;
	e->h.size = sizeof(*e);
	e->addr = addr;
	e->size = size;
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
}

/* Forgets a sampled address being freed; one map operation when it was not sampled. */
static __always_inline void mem_release(__u64 id, __u64 addr, __u64 ts)
{
	struct mem_key k = { .addr = addr, .pid = id >> 32 };
	struct mem_val *v;
	__u64 size;

	if (mem_user_match) {
		stat_inc(BSTAT_MEM_FREES);
		mem_send_free(id, addr, 0, ts);
		return;
	}
	v = bpf_map_lookup_elem(&mem_live, &k);
	if (!v)
		return;
	size = v->size;
	if (bpf_map_delete_elem(&mem_live, &k))
		return; /* another thread freed it first */
	stat_inc(BSTAT_MEM_FREES);
	mem_send_free(id, addr, size, ts);
}

/* Size requested by an allocator call, from its arguments. */
static __always_inline __u64 mem_call_size(struct pt_regs *ctx, __u32 func)
{
	switch (func) {
	case MEM_CALLOC:
		return PT_REGS_PARM1(ctx) * PT_REGS_PARM2(ctx);
	case MEM_REALLOC:
	case MEM_ALIGNED_ALLOC:
	case MEM_MEMALIGN:
		return PT_REGS_PARM2(ctx);
	case MEM_REALLOCARRAY:
		return PT_REGS_PARM2(ctx) * PT_REGS_PARM3(ctx);
	case MEM_POSIX_MEMALIGN:
		return PT_REGS_PARM3(ctx);
	default:
		return PT_REGS_PARM1(ctx);
	}
}

/*
 * Entry of an allocator call: releases realloc's old block and decides
 * whether the call is sampled. Returns the size when sampled, 0 otherwise.
 */
static __always_inline __u64 mem_entry(struct pt_regs *ctx, __u64 id, __u32 func)
{
	__u64 size;

	stat_inc(BSTAT_MEM_CALLS);
	if ((func == MEM_REALLOC || func == MEM_REALLOCARRAY) && PT_REGS_PARM1(ctx))
		mem_release(id, PT_REGS_PARM1(ctx), 0);
	size = mem_call_size(ctx, func);
	if (!mem_should_sample(size))
		return 0;
	stat_inc(BSTAT_MEM_SAMPLED);
	return size;
}

/* Return of a sampled call: remember the block and send it with the caller's stack. */
static __always_inline void mem_record(struct pt_regs *ctx, __u64 id, __u64 addr, __u64 size,
				       __u32 func, __u32 how, const struct user_regs_at *at)
{
	struct mem_key k = { .addr = addr, .pid = id >> 32 };
	struct mem_val v = { .size = size, .tid = (__u32)id };
	__u32 ubytes = mem_stack_bytes;
	struct py_frbuf *pyf;
	struct mem_val *old;
	struct ev_mem_alloc *e;
	struct scratch_buf *b;
	__u64 n;

	if (!addr)
		return;
	if (mem_user_match)
		goto send;
	if (bpf_map_update_elem(&mem_live, &k, &v, BPF_NOEXIST)) {
		old = bpf_map_lookup_elem(&mem_live, &k);
		/* realloc(NULL) or memalign calling malloc inside: the inner call recorded it. */
		if (old && old->tid == (__u32)id) {
			stat_inc(BSTAT_MEM_DUP);
			return;
		}
		/* A block whose free we missed: this one replaces it. */
		if (bpf_map_update_elem(&mem_live, &k, &v, BPF_ANY))
			stat_inc(BSTAT_MEM_LIVE_FULL);
	}
send:
	b = scratch_get(SLOT_UPROBE);
	if (!b)
		goto drop;
	e = (struct ev_mem_alloc *)b->data;
	fill_hdr(&e->h, EV_MEM_ALLOC, id);
	e->addr = addr;
	e->size = size;
	e->func = func;
	e->pad = how;
	/* Python frames: walked before the stack capture, appended after (bpf/python.bpf.h). */
	pyf = py_event_walk(id, SLOT_UPROBE, &ubytes);
	n = capture_stack_at(ctx, b, sizeof(*e), &e->h, &e->st, false, ubytes, at);
	/* Unwound from the interposer's caller: nothing of the interposer to drop. */
	if (n && at && e->st.stack_len)
		e->pad = 0;
	if (n && pyf)
		n = py_append(b, n, &e->h, pyf);
	if (n && !send_scratch(b, n, BSTAT_MEM_RB_FULL))
		return;
drop:
	if (!mem_user_match)
		bpf_map_delete_elem(&mem_live, &k);
}

static __always_inline __u64 mem_result(struct pt_regs *ctx, __u32 func, __u64 memptr)
{
	__u64 addr = 0;

	if (func != MEM_POSIX_MEMALIGN)
		return PT_REGS_RC(ctx);
	if ((int)PT_REGS_RC(ctx) != 0 || !memptr)
		return 0;
	bpf_probe_read_user(&addr, sizeof(addr), (void *)memptr);
	return addr;
}

const volatile int mem_null = 0;
SEC("?uprobe")
int mem_alloc(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid(), size, *cookie;
	__u32 func = bpf_get_attach_cookie(ctx), tid = id;
	struct mem_pending pd = {}, *pp;
	struct mem_task *mt = NULL;

	if (mem_null == 1)
		return 1;

	if (bpf_session_is_return()) {
		if (mem_user_match) {
			mt = bpf_task_storage_get(&mem_tasks, bpf_get_current_task_btf(), NULL, 0);
			if (mt)
				mt->depth = 0;
		}
		cookie = bpf_session_cookie();
		if (!cookie)
			return 0;
		size = *cookie;
		if (func == MEM_POSIX_MEMALIGN) {
			pp = bpf_map_lookup_elem(&mem_pend, &tid);
			if (!pp)
				return 0;
			pd = *pp;
			bpf_map_delete_elem(&mem_pend, &tid);
		}
		mem_record(ctx, id, mem_result(ctx, func, pd.memptr), size, func, 0, NULL);
		return 0;
	}
	if (!is_target(id >> 32))
		return 1;
	if (mem_user_match) {
		/*
		 * An allocator call inside another (realloc(NULL, n) or memalign calling
		 * malloc): the outer one records the block.
		 */
		mt = bpf_task_storage_get(&mem_tasks, bpf_get_current_task_btf(), NULL,
					  BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (mt && mt->depth) {
			stat_inc(BSTAT_MEM_DUP);
			return 1;
		}
	}
	size = mem_entry(ctx, id, func);
	if (!size)
		return 1; /* no return probe for this call */
	cookie = bpf_session_cookie();
	if (!cookie)
		return 1;
	*cookie = size;
	if (mt)
		mt->depth = 1;
	if (func == MEM_POSIX_MEMALIGN) {
		pd.size = size;
		pd.memptr = PT_REGS_PARM1(ctx);
		pd.func = func;
		bpf_map_update_elem(&mem_pend, &tid, &pd, BPF_ANY);
	}
	return 0;
}

SEC("?uprobe")
int mem_free(struct pt_regs *ctx)
{
	__u64 addr = PT_REGS_PARM1(ctx);

	if (mem_null == 1)
		return 0;
	if (!addr)
		return 0;
	if (mem_user_match && !is_target(bpf_get_current_pid_tgid() >> 32))
		return 0;
	mem_release(bpf_get_current_pid_tgid(), addr, 0);
	return 0;
}

/* Fallback without uprobe sessions: a uretprobe on every call, state by tid. */
SEC("?uprobe")
int mem_alloc_entry(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid(), size;
	__u32 func = bpf_get_attach_cookie(ctx), tid = id;
	struct mem_pending pd = {};

	if (!is_target(id >> 32))
		return 0;
	size = mem_entry(ctx, id, func);
	if (!size)
		return 0;
	pd.size = size;
	pd.func = func;
	if (func == MEM_POSIX_MEMALIGN)
		pd.memptr = PT_REGS_PARM1(ctx);
	bpf_map_update_elem(&mem_pend, &tid, &pd, BPF_ANY);
	return 0;
}

SEC("?uretprobe")
int mem_alloc_ret(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct mem_pending *pp, pd;
	__u32 tid = id;

	pp = bpf_map_lookup_elem(&mem_pend, &tid);
	if (!pp)
		return 0;
	pd = *pp;
	bpf_map_delete_elem(&mem_pend, &tid);
	mem_record(ctx, id, mem_result(ctx, pd.func, pd.memptr), pd.size, pd.func, 0, NULL);
	return 0;
}

/*
 * The markers of libeprof_mem.so (src/agent/eprof_mem.c), cookie MEM_HIT_ALLOC or
 * MEM_HIT_FREE: the process sampled the call itself, so every hit is recorded.
 *   eprof_mem_hit_alloc(ptr, size, func, calls, ret, frame)  after the allocator returned
 *       ptr; ret and frame: the return address of its malloc and that malloc's frame
 *       pointer, from which the caller's registers are rebuilt (sp = frame + 16, bp = the
 *       saved one at frame) and the stack unwound from there
 *   eprof_mem_hit_free(ptr)                                  before a sampled block is freed
 *   eprof_mem_hit_frees(v, n)      every-call mode: a thread's last n frees, timed
 */
/* eprof_mem_hit_frees(v, n): n (addr, ns) pairs, each free sent with its own time. */
struct mem_frees_walk {
	__u64 id, v, n;
};

/* One pair: 0 to go on, 1 to stop. */
static __always_inline long mem_hit_free_one(__u64 id, __u64 v, __u64 n, __u32 i)
{
	struct {
		__u64 addr, ns;
	} f;

	if (i >= n || bpf_probe_read_user(&f, sizeof(f), (void *)(v + i * sizeof(f))))
		return 1;
	if (f.addr)
		mem_release(id, f.addr, f.ns);
	return 0;
}

static long mem_hit_free_step(__u32 i, void *arg)
{
	struct mem_frees_walk *w = arg;

	return mem_hit_free_one(w->id, w->v, w->n, i);
}

static __always_inline void mem_hit_frees(__u64 id, __u64 v, __u64 n)
{
	struct mem_frees_walk w = { .id = id, .v = v, .n = n };

	/*
	 * bpf_loop (5.17+): the verifier checks one pair, not 128 unrolled ones (that took
	 * 0.39 s of the --mem start-up). Older kernels walk the bounded loop instead.
	 */
	if (bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_loop)) {
		bpf_loop(MEM_FREE_BATCH, mem_hit_free_step, &w, 0);
		return;
	}
	for (__u32 i = 0; i < MEM_FREE_BATCH; i++)
		if (mem_hit_free_one(id, v, n, i))
			break;
}

SEC("?uprobe")
int mem_hit(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid(), addr = PT_REGS_PARM1(ctx), frame;
	struct user_regs_at at = {}, *pat = NULL;

	if (!is_target(id >> 32))
		return 0;
	switch (bpf_get_attach_cookie(ctx)) {
	case MEM_HIT_FREE:
		if (addr)
			mem_release(id, addr, 0);
		return 0;
	case MEM_HIT_FREES:
		mem_hit_frees(id, addr, PT_REGS_PARM2(ctx));
		return 0;
	}
	stat_add(BSTAT_MEM_CALLS, PT_REGS_PARM4(ctx));
	if (!addr)
		return 0; /* a thread's last count */
	stat_inc(BSTAT_MEM_SAMPLED);
	at.ip = PT_REGS_PARM5(ctx);
	frame = PT_REGS_PARM6(ctx);
	if (at.ip && frame && !bpf_probe_read_user(&at.bp, sizeof(at.bp), (void *)frame)) {
		at.sp = frame + 16;
		pat = &at;
	}
	mem_record(ctx, id, addr, PT_REGS_PARM2(ctx), (__u32)PT_REGS_PARM3(ctx) % MEM_NFUNCS,
		   MEM_HOW_INTERPOSED, pat);
	return 0;
}

static __always_inline void mem_send_map(__u16 kind, __u64 id, __u64 addr, __u64 len)
{
	struct ev_mem_map *e = reserve_event(sizeof(*e), BSTAT_MEM_RB_FULL);

	if (!e)
		return;
	fill_hdr(&e->h, kind, id);
	e->h.size = sizeof(*e);
	e->addr = addr;
	e->len = len;
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
}

#define MEM_MAP_ANONYMOUS 0x20

#define MEM_NR_MMAP 9 /* x86_64 */
#define MEM_NR_MUNMAP 11
#define MEM_NR_BRK 12
#define MEM_NR_MREMAP 25

/*
 * The raw syscall tracepoints through BTF: syscall tracepoints need tracefs
 * (may not be mounted), kprobes and fentry are not available on every
 * kernel we run on. Other syscalls leave after one compare.
 */
SEC("?tp_btf/sys_enter")
int BPF_PROG(mem_sys_enter, struct pt_regs *regs, long nr)
{
	struct mem_sysarg arg = {};
	struct mm_struct *mm;
	__u64 id;
	__u32 tid;

	if (nr != MEM_NR_MMAP && nr != MEM_NR_MUNMAP && nr != MEM_NR_BRK && nr != MEM_NR_MREMAP)
		return 0;
	id = bpf_get_current_pid_tgid();
	if (!is_target(id >> 32))
		return 0;
	switch (nr) {
	case MEM_NR_MUNMAP:
		mem_send_map(EV_MEM_MUNMAP, id, BPF_CORE_READ(regs, di), BPF_CORE_READ(regs, si));
		return 0;
	case MEM_NR_MMAP:
		if (!(BPF_CORE_READ(regs, r10) & MEM_MAP_ANONYMOUS) ||
		    BPF_CORE_READ(regs, r9) == EPROF_MEM_OWN_MAP_OFF)
			return 0;
		arg.a = BPF_CORE_READ(regs, si);
		break;
	case MEM_NR_BRK:
		mm = bpf_get_current_task_btf()->mm;
		if (!mm)
			return 0;
		arg.a = mm->brk;
		break;
	default: /* mremap */
		arg.a = BPF_CORE_READ(regs, di);
		arg.b = BPF_CORE_READ(regs, si);
		break;
	}
	tid = id;
	bpf_map_update_elem(&mem_mmap_len, &tid, &arg, BPF_ANY);
	return 0;
}

SEC("?tp_btf/sys_exit")
int BPF_PROG(mem_sys_exit, struct pt_regs *regs, long ret)
{
	struct mem_sysarg *ap, arg;
	struct ev_mem_remap *e;
	__u64 id, nr;
	__u32 tid;

	nr = BPF_CORE_READ(regs, orig_ax);
	if (nr != MEM_NR_MMAP && nr != MEM_NR_BRK && nr != MEM_NR_MREMAP)
		return 0;
	id = bpf_get_current_pid_tgid();
	tid = id;
	ap = bpf_map_lookup_elem(&mem_mmap_len, &tid);
	if (!ap)
		return 0;
	arg = *ap;
	bpf_map_delete_elem(&mem_mmap_len, &tid);
	if (ret < 0 && ret > -4096)
		return 0;
	if (nr == MEM_NR_MMAP) {
		mem_send_map(EV_MEM_MMAP, id, ret, arg.a);
	} else if (nr == MEM_NR_BRK) {
		/* brk returns the break after the call: unchanged for a query or a refusal. */
		if ((__u64)ret != arg.a)
			mem_send_map(EV_MEM_BRK, id, arg.a, ret);
	} else {
		e = reserve_event(sizeof(*e), BSTAT_MEM_RB_FULL);
		if (!e)
			return 0;
		fill_hdr(&e->h, EV_MEM_MREMAP, id);
		e->h.size = sizeof(*e);
		e->old_addr = arg.a;
		e->old_len = arg.b;
		e->new_addr = ret;
		e->new_len = BPF_CORE_READ(regs, dx); /* argument registers survive the call */
		bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
	}
	return 0;
}

#endif
