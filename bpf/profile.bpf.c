// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * CPU sampling: a cpu-clock perf event on every CPU runs on_sample(); it keeps
 * samples of the target processes (the PID set, kept current on fork and
 * exit) and sends stacks to userspace through one ring buffer.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "eprof_abi.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

const volatile bool trace_all = false;	  /* -a: every task but ours and idle */
const volatile __u32 self_pid = 0;	  /* never sample the recorder itself */
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

struct sample_buf {
	struct ev_sample s;
	/* kernel ips, then user ips (frame pointers) or the user stack copy */
	__u64 ips[EPROF_MAX_STACK];
	__u8 user[EPROF_MAX_SNAPSHOT > EPROF_MAX_STACK * 8 ? EPROF_MAX_SNAPSHOT : EPROF_MAX_STACK * 8];
};

/*
 * One sample buffer per CPU. Not a per-CPU map: those cap values at 32 KB.
 * perf-event programs are not preempted, so indexing by CPU is safe.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* set to the number of possible CPUs */
	__type(key, __u32);
	__type(value, struct sample_buf);
} scratch SEC(".maps");

static __always_inline void stat_inc(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &idx);

	if (v)
		*v += 1;
}

static __always_inline bool is_target(__u32 pid)
{
	if (trace_all)
		return pid != 0 && pid != self_pid;
	return bpf_map_lookup_elem(&targets, &pid) != NULL;
}

/*
 * Copies the user stack from sp upwards, page by page, to dst + kbytes, right
 * after the kernel ips; stops at the first unreadable page (the stack's top).
 */
static __always_inline __u32 copy_user_stack(struct sample_buf *b, __u32 kbytes, __u64 sp)
{
	__u64 want = snapshot_bytes, off = 0, chunk, pos, addr = sp;

	if (want > EPROF_MAX_SNAPSHOT)
		want = EPROF_MAX_SNAPSHOT;
	if (kbytes > EPROF_MAX_STACK * 8)
		return 0;
	chunk = 4096 - (sp & 4095);
	for (int i = 0; i < EPROF_MAX_SNAPSHOT / 4096 + 1; i++) {
		if (off >= want)
			break;
		if (chunk > want - off)
			chunk = want - off;
		pos = kbytes + off;
		/* Bounds the verifier can follow: 1 <= chunk <= 4096, pos + chunk inside the buffer. */
		asm volatile("" : "+r"(chunk), "+r"(pos));
		if (chunk < 1 || chunk > 4096)
			break;
		if (pos > EPROF_MAX_STACK * 8 + EPROF_MAX_SNAPSHOT - 4096)
			break;
		if (bpf_probe_read_user((__u8 *)b->ips + pos, chunk, (void *)addr))
			break;
		off += chunk;
		addr += chunk;
		chunk = 4096;
	}
	if (off >= want)
		b->s.h.flags |= SAMPLE_F_SNAP_TRUNC;
	return off;
}

SEC("perf_event")
int on_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = id >> 32, tid = (__u32)id, cpu, kbytes = 0, ubytes = 0;
	__u64 size; /* 64-bit: the verifier must see its bound on the register passed */
	struct task_struct *task;
	struct sample_buf *b;
	struct pt_regs *uregs;
	__u64 flags;
	long n;

	if (!is_target(pid) || tid == 0)
		return 0;
	stat_inc(BSTAT_SAMPLES);
	cpu = bpf_get_smp_processor_id();
	b = bpf_map_lookup_elem(&scratch, &cpu);
	if (!b)
		return 0;

	b->s.h.kind = EV_SAMPLE;
	b->s.h.flags = 0;
	b->s.h.pid = pid;
	b->s.h.tid = tid;
	b->s.h.ts = bpf_ktime_get_ns();
	b->s.period = ctx->sample_period;
	b->s.cpu = cpu;
	b->s.kstack_err = 0;
	b->s.ustack_err = 0;
	b->s.stack_len = 0;
	b->s.pad = 0;
	b->s.user_ip = b->s.user_sp = b->s.user_bp = 0;
	bpf_get_current_comm(b->s.comm, sizeof(b->s.comm));

	/* Kernel mode: the interrupted ip is a kernel address (top half of the address space). */
	if (want_kernel && (__s64)PT_REGS_IP(&ctx->regs) < 0) {
		b->s.h.flags |= SAMPLE_F_IN_KERNEL;
		n = bpf_get_stack(ctx, b->ips, EPROF_MAX_STACK * 8, 0);
		if (n < 0) {
			b->s.kstack_err = n;
			stat_inc(BSTAT_KSTACK_ERR);
		} else {
			kbytes = n;
		}
	}

	task = bpf_get_current_task_btf();
	if (want_user && task->mm) {
		uregs = (struct pt_regs *)bpf_task_pt_regs(task);
		b->s.user_ip = BPF_CORE_READ(uregs, ip);
		b->s.user_sp = BPF_CORE_READ(uregs, sp);
		b->s.user_bp = BPF_CORE_READ(uregs, bp);
		b->s.h.flags |= SAMPLE_F_USER_REGS;
		if (kbytes > EPROF_MAX_STACK * 8)
			kbytes = EPROF_MAX_STACK * 8;
		if (snapshot_bytes) {
			b->s.stack_len = copy_user_stack(b, kbytes, b->s.user_sp);
			if (!b->s.stack_len)
				stat_inc(BSTAT_SNAP_FAULT);
		} else {
			n = bpf_get_stack(ctx, (void *)b->ips + kbytes, EPROF_MAX_STACK * 8,
					  BPF_F_USER_STACK);
			if (n < 0) {
				b->s.ustack_err = n;
				stat_inc(BSTAT_USTACK_ERR);
			} else {
				ubytes = n;
			}
		}
	}
	if (kbytes > EPROF_MAX_STACK * 8)
		kbytes = EPROF_MAX_STACK * 8;
	if (ubytes > EPROF_MAX_STACK * 8)
		ubytes = EPROF_MAX_STACK * 8;
	b->s.kstack_n = kbytes / 8;
	b->s.ustack_n = ubytes / 8;

	/*
	 * A wakeup per sample would cost the recorder a context switch each time;
	 * it reads the ring on a short timer instead, and is woken early only
	 * when the ring fills up.
	 */
	flags = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > wakeup_bytes ? BPF_RB_FORCE_WAKEUP
									      : BPF_RB_NO_WAKEUP;
	size = sizeof(struct ev_sample) + kbytes + ubytes + b->s.stack_len;
	b->s.h.size = size;
	/* Keep the compiler from folding the bound away: the verifier must see it on this register. */
	asm volatile("" : "+r"(size));
	if (size > sizeof(*b))
		return 0;
	if (bpf_ringbuf_output(&events, b, size, flags))
		stat_inc(BSTAT_RB_FULL);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ppid = parent->tgid, pid = child->tgid;
	__u8 one = 1;
	struct ev_fork *e;

	if (pid == ppid || !is_target(ppid))
		return 0;
	if (!trace_all && bpf_map_update_elem(&targets, &pid, &one, BPF_ANY))
		stat_inc(BSTAT_TARGETS_FULL);
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		stat_inc(BSTAT_EVENT_RB_FULL);
		return 0;
	}
	e->h.size = sizeof(*e);
	e->h.kind = EV_FORK;
	e->h.flags = 0;
	e->h.pid = pid;
	e->h.tid = child->pid;
	e->h.ts = bpf_ktime_get_ns();
	e->ppid = ppid;
	e->pad = 0;
	__builtin_memcpy(e->comm, child->comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, 0);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 pid = p->tgid;
	struct ev_exec *e;

	if (!is_target(pid))
		return 0;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		stat_inc(BSTAT_EVENT_RB_FULL);
		return 0;
	}
	e->h.size = sizeof(*e);
	e->h.kind = EV_EXEC;
	e->h.flags = 0;
	e->h.pid = pid;
	e->h.tid = p->pid;
	e->h.ts = bpf_ktime_get_ns();
	e->old_tid = old_pid;
	e->pad = 0;
	__builtin_memcpy(e->comm, p->comm, sizeof(e->comm));
	bpf_probe_read_kernel_str(e->filename, sizeof(e->filename), BPF_CORE_READ(bprm, filename));
	bpf_ringbuf_submit(e, 0);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *p)
{
	__u32 pid = p->tgid;
	struct ev_exit *e;
	int live;

	if (!is_target(pid))
		return 0;
	/* signal->live drops to 0 before this tracepoint when the whole group is gone. */
	live = BPF_CORE_READ(p, signal, live.counter);
	if (live != 0)
		return 0;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (e) {
		e->h.size = sizeof(*e);
		e->h.kind = EV_EXIT;
		e->h.flags = 0;
		e->h.pid = pid;
		e->h.tid = p->pid;
		e->h.ts = bpf_ktime_get_ns();
		e->exit_code = p->exit_code;
		e->group_dead = 1;
		__builtin_memcpy(e->comm, p->comm, sizeof(e->comm));
		bpf_ringbuf_submit(e, 0);
	} else {
		stat_inc(BSTAT_EVENT_RB_FULL);
	}
	if (!trace_all)
		bpf_map_delete_elem(&targets, &pid);
	return 0;
}
