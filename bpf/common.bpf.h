/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Shared by every BPF program of eprof (all compiled as one object from
 * profile.bpf.c): the target set, the ring buffer, the stats counters, the
 * per-CPU scratch buffers and capture_stack(), which fills a struct ev_stack
 * with the kernel stack, the user registers and either frame-pointer ips or a
 * copy of the user stack for DWARF unwinding in userspace.
 */
#ifndef EPROF_COMMON_BPF_H
#define EPROF_COMMON_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "eprof_abi.h"

/* System call numbers (orig_ax), the unwinder's registers, vmlinux/x86: x86-64 only. */
#if !defined(__TARGET_ARCH_x86)
#error "eprof's BPF programs are written for x86-64 (CMakeLists.txt refuses other targets)"
#endif

#ifndef PT_REGS_PARM6 /* libbpf before 1.2 */
#if defined(__TARGET_ARCH_x86)
#define PT_REGS_PARM6(x) ((x)->r9)
#elif defined(__TARGET_ARCH_arm64)
#define PT_REGS_PARM6(x) (((struct user_pt_regs *)(x))->regs[5])
#endif
#endif

const volatile bool trace_all = false;	  /* -a: every task but ours and idle */
const volatile __u32 self_pid = 0;	  /* never trace the recorder itself */
const volatile __u32 snapshot_bytes = 0; /* >0: copy user stack for DWARF unwinding */
const volatile bool want_kernel = true;
const volatile bool want_user = true;
/* Wake userspace only when this much is waiting; it polls on a timer otherwise. */
const volatile __u64 wakeup_bytes = 1 << 20;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384); /* resized from userspace */
	__type(key, __u32);
	__type(value, __u8);
} targets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20); /* resized from userspace */
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, BSTAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

/* Room for an event's fixed part, then kernel ips, then user ips or the user stack copy. */
#define SCRATCH_HEAD 256
#define SCRATCH_IPS (EPROF_MAX_STACK * 8)
#define SCRATCH_SIZE (SCRATCH_HEAD + SCRATCH_IPS + EPROF_MAX_SNAPSHOT)

struct scratch_buf {
	__u8 data[SCRATCH_SIZE];
};

/*
 * Scratch buffers: SCRATCH_SLOTS per CPU, one per kind of context (a perf
 * event, a uprobe, a scheduler tracepoint), so a program interrupting
 * another on the same CPU never writes into its buffer. Not a per-CPU map:
 * those cap values at 32 KB.
 */
enum scratch_slot {
	SLOT_SAMPLE = 0, /* perf_event programs */
	SLOT_UPROBE = 1, /* uprobes, uretprobes, USDT */
	SLOT_SCHED = 2,	 /* sched tracepoints (IRQs off) */
	SLOT_OTHER = 3,	 /* syscall tracepoints and the rest */
	SCRATCH_SLOTS = EPROF_SCRATCH_SLOTS,
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SCRATCH_SLOTS); /* set to SCRATCH_SLOTS * possible CPUs */
	__type(key, __u32);
	__type(value, struct scratch_buf);
} scratch SEC(".maps");

static __always_inline void stat_inc(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &idx);

	if (v)
		*v += 1;
}

static __always_inline void stat_add(__u32 idx, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &idx);

	if (v)
		*v += n;
}

static __always_inline bool is_target(__u32 pid)
{
	if (trace_all)
		return pid != 0 && pid != self_pid;
	return bpf_map_lookup_elem(&targets, &pid) != NULL;
}

static __always_inline struct scratch_buf *scratch_get(enum scratch_slot slot)
{
	__u32 key = bpf_get_smp_processor_id() * SCRATCH_SLOTS + slot;

	return bpf_map_lookup_elem(&scratch, &key);
}

static __always_inline void fill_hdr(struct ev_hdr *h, __u16 kind, __u64 id)
{
	h->size = 0;
	h->kind = kind;
	h->flags = 0;
	h->pid = id >> 32;
	h->tid = (__u32)id;
	h->ts = bpf_ktime_get_ns();
}

/* Copies the user stack from sp upwards, page by page, to buf->data + pos0; stops at the first unreadable page. */
static __always_inline __u32 copy_user_stack(struct scratch_buf *b, __u32 pos0, __u64 sp,
					     __u32 limit, struct ev_hdr *h)
{
	__u64 want = limit, off = 0, chunk, pos, addr = sp;

	if (want > EPROF_MAX_SNAPSHOT)
		want = EPROF_MAX_SNAPSHOT;
	if (pos0 > SCRATCH_HEAD + SCRATCH_IPS)
		return 0;
	chunk = 4096 - (sp & 4095);
	for (int i = 0; i < EPROF_MAX_SNAPSHOT / 4096 + 1; i++) {
		if (off >= want)
			break;
		if (chunk > want - off)
			chunk = want - off;
		pos = pos0 + off;
		/* Bounds the verifier can follow: 1 <= chunk <= 4096, pos + chunk inside the buffer. */
		asm volatile("" : "+r"(chunk), "+r"(pos));
		if (chunk < 1 || chunk > 4096)
			break;
		if (pos > SCRATCH_SIZE - 4096)
			break;
		if (bpf_probe_read_user(b->data + pos, chunk, (void *)addr))
			break;
		off += chunk;
		addr += chunk;
		chunk = 4096;
	}
	if (off >= want)
		h->flags |= SAMPLE_F_SNAP_TRUNC;
	return off;
}

/*
 * While a uretprobe (a --region function) is pending, the kernel has put its
 * trampoline in place of the function's return address on the user stack,
 * and DWARF unwinding of the copy would stop there. The originals are in
 * current->utask->return_instances (innermost first, each with the stack
 * slot it replaced): put them back into the copy. x86: the slot is the sp at
 * entry; elsewhere the return address is in a register at entry.
 */
struct uret_fix_ctx {
	struct scratch_buf *b;
	struct return_instance *ri;
	__u64 sp;
	__u32 pos0, len;
};

static long fix_one_uretprobe_slot(__u64 i, void *arg)
{
	struct uret_fix_ctx *c = arg;
	struct return_instance *ri = c->ri;
	__u64 slot, ret, pos;

	if (!ri)
		return 1;
	slot = BPF_CORE_READ(ri, stack);
	ret = BPF_CORE_READ(ri, orig_ret_vaddr);
	c->ri = BPF_CORE_READ(ri, next);
	if (slot < c->sp || slot - c->sp + 8 > c->len)
		return 0;
	pos = c->pos0 + (slot - c->sp);
	asm volatile("" : "+r"(pos));
	if (pos <= SCRATCH_SIZE - 8 && c->b)
		__builtin_memcpy(c->b->data + pos, &ret, 8);
	return 0;
}

static __always_inline void fix_uretprobe_slots(struct task_struct *task, struct scratch_buf *b,
						__u32 pos0, __u64 sp, __u32 len)
{
#if defined(__TARGET_ARCH_x86)
	struct uret_fix_ctx c = { .b = b, .sp = sp, .pos0 = pos0, .len = len };

	if (!bpf_core_field_exists(task->utask))
		return;
	c.ri = BPF_CORE_READ(task, utask, return_instances);
	/*
	 * bpf_loop: the verifier checks the body once, not once per pending
	 * uretprobe. It came with 5.17; older kernels skip the fix-up (dead code).
	 */
	if (c.ri && bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_loop))
		bpf_loop(64, fix_one_uretprobe_slot, &c, 0);
#endif
}

/*
 * Fills the stack part of an event whose fixed part (ending with struct
 * ev_stack) is the first hdr_size bytes of b: kernel ips when kstack is set,
 * user registers, and user ips (frame pointers) or a copy of up to
 * user_bytes of the user stack (0 = frame pointers only). Returns the total
 * event size (hdr_size + ips + copy), also stored in h->size; 0 on a bound
 * failure. ctx is the program's context (bpf_get_stack needs it).
 */
/*
 * The user registers to unwind from, when not those of the trap: an interposer's marker
 * passes those of its caller's caller (src/agent/eprof_mem.c), so that nothing of the
 * interposer is unwound (it may be loaded from a memfd, of no file to read CFI from).
 */
struct user_regs_at {
	__u64 ip, sp, bp;
};

static __always_inline __u64 capture_stack_at(void *ctx, struct scratch_buf *b, __u32 hdr_size,
					      struct ev_hdr *h, struct ev_stack *st, bool kstack,
					      __u32 user_bytes, const struct user_regs_at *at)
{
	__u32 kbytes = 0, ubytes = 0, ulen = 0;
	struct task_struct *task;
	struct pt_regs *uregs;
	__u64 size;
	long n;

	st->user_ip = st->user_sp = st->user_bp = 0;
	st->kstack_err = st->ustack_err = 0;
	st->stack_len = 0;
	if (hdr_size > SCRATCH_HEAD)
		return 0;
	if (kstack && want_kernel) {
		n = bpf_get_stack(ctx, b->data + hdr_size, SCRATCH_IPS, 0);
		if (n < 0) {
			st->kstack_err = n;
			stat_inc(BSTAT_KSTACK_ERR);
		} else {
			kbytes = n;
		}
	}
	if (kbytes > SCRATCH_IPS)
		kbytes = SCRATCH_IPS;
	task = bpf_get_current_task_btf();
	/*
	 * Read, not loaded through the trusted pointer: the verifier checks such a load of a
	 * pointer field with a linear search of the kernel's BTF (btf_nested_type_is_trusted),
	 * at every path through here: ~5% of the start-up's verifier time.
	 */
	if (want_user && BPF_CORE_READ(task, mm)) {
		uregs = (struct pt_regs *)bpf_task_pt_regs(task);
		st->user_ip = BPF_CORE_READ(uregs, ip);
		st->user_sp = BPF_CORE_READ(uregs, sp);
		st->user_bp = BPF_CORE_READ(uregs, bp);
		if (at && user_bytes) {
			st->user_ip = at->ip;
			st->user_sp = at->sp;
			st->user_bp = at->bp;
		}
		h->flags |= SAMPLE_F_USER_REGS;
		if (user_bytes) {
			ulen = copy_user_stack(b, hdr_size + kbytes, st->user_sp, user_bytes, h);
			if (!ulen)
				stat_inc(BSTAT_SNAP_FAULT);
			else
				fix_uretprobe_slots(task, b, hdr_size + kbytes, st->user_sp, ulen);
		} else {
			__u32 pos = hdr_size + kbytes;

			asm volatile("" : "+r"(pos));
			if (pos > SCRATCH_HEAD + SCRATCH_IPS)
				return 0;
			n = bpf_get_stack(ctx, b->data + pos, SCRATCH_IPS, BPF_F_USER_STACK);
			if (n < 0) {
				st->ustack_err = n;
				stat_inc(BSTAT_USTACK_ERR);
			} else {
				ubytes = n;
			}
		}
	}
	if (ubytes > SCRATCH_IPS)
		ubytes = SCRATCH_IPS;
	st->kstack_n = kbytes / 8;
	st->ustack_n = ubytes / 8;
	st->stack_len = ulen;
	size = hdr_size + kbytes + ubytes + ulen;
	h->size = size;
	return size;
}

static __always_inline __u64 capture_stack(void *ctx, struct scratch_buf *b, __u32 hdr_size,
					   struct ev_hdr *h, struct ev_stack *st, bool kstack,
					   __u32 user_bytes)
{
	return capture_stack_at(ctx, b, hdr_size, h, st, kstack, user_bytes, NULL);
}

/*
 * Sends the first size bytes of b. A wakeup per event would cost the
 * recorder a context switch each time; it reads the ring on a short timer
 * instead, and is woken early only when the ring fills up.
 */
static __always_inline int send_scratch(struct scratch_buf *b, __u64 size, __u32 full_stat)
{
	__u64 flags = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > wakeup_bytes
			      ? BPF_RB_FORCE_WAKEUP
			      : BPF_RB_NO_WAKEUP;

	/* Keep the compiler from folding the bound away: the verifier must see it on this register. */
	asm volatile("" : "+r"(size));
	if (size < sizeof(struct ev_hdr) || size > SCRATCH_SIZE)
		return -1;
	if (bpf_ringbuf_output(&events, b->data, size, flags)) {
		stat_inc(full_stat);
		return -1;
	}
	return 0;
}

/* Reserves a fixed-size event without a stack; NULL (counted) when the ring is full. */
static __always_inline void *reserve_event(__u64 size, __u32 full_stat)
{
	void *e = bpf_ringbuf_reserve(&events, size, 0);

	if (!e)
		stat_inc(full_stat);
	return e;
}

#endif
