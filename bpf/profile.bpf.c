// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * CPU sampling: a cpu-clock perf event on every CPU runs on_sample(); it keeps
 * samples of the target processes (the PID set, kept current on fork and
 * exit) and sends stacks to userspace through one ring buffer.
 */
#include "common.bpf.h"
#include "python.bpf.h"
#include "metrics.bpf.h" /* on_exit keeps an exiting thread's last figures */

char LICENSE[] SEC("license") = "Dual MIT/GPL";

SEC("perf_event")
int on_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid(), size;
	struct scratch_buf *b;
	const struct py_proc *py;
	struct py_frbuf *pyf = NULL;
	struct ev_sample *e;
	bool in_kernel;

	if (!is_target(id >> 32) || (__u32)id == 0)
		return 0;
	stat_inc(BSTAT_SAMPLES);
	b = scratch_get(SLOT_SAMPLE);
	if (!b)
		return 0;
	e = (struct ev_sample *)b->data;
	fill_hdr(&e->h, EV_SAMPLE, id);
	e->period = ctx->sample_period;
	e->cpu = bpf_get_smp_processor_id();
	e->pad = 0;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	/* Kernel mode: the interrupted ip is a kernel address (top half of the address space). */
	in_kernel = (__s64)PT_REGS_IP(&ctx->regs) < 0;
	if (in_kernel)
		e->h.flags |= SAMPLE_F_IN_KERNEL;
	py = py_lookup(id);
	if (py)
		pyf = py_collect(py, id);
	size = capture_stack(ctx, b, sizeof(*e), &e->h, &e->st, in_kernel,
			     py ? py_user_bytes(snapshot_bytes) : snapshot_bytes);
	if (size && pyf)
		size = py_append(b, size, &e->h, pyf);
	if (size)
		send_scratch(b, size, BSTAT_RB_FULL);
	return 0;
}

/* --no-children: the target set stays the listed processes (or the launched command). */
const volatile bool follow_forks = true;

SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ppid = parent->tgid, pid = child->tgid;
	__u8 one = 1;
	struct ev_fork *e;

	if (pid == ppid || !follow_forks || !is_target(ppid))
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
	/*
	 * Wake the recorder now: it reads the new image's maps from /proc, and a short program
	 * may be gone by its next 50 ms poll (events without wakeups may already be queued,
	 * so the default adaptive wakeup would not fire).
	 */
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
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
	metrics_thread_exit(p);
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
#include "offcpu.bpf.h"
#include "cuda.bpf.h"
#include "region.bpf.h"
#include "mem.bpf.h"
#include "io.bpf.h"
