/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Resource metrics (src/record/metrics.c): what /proc does not give per process. Context
 * switches are counted per thread by the kernel and shown per thread in /proc; network bytes
 * are not counted per process at all. Both are summed here per target process (tgid), in a
 * per-CPU hash: no atomics, the recorder sums the CPUs when it reads.
 *
 * The network counters are the sock_send_length / sock_recv_length tracepoints (Linux 6.3+),
 * which every sendmsg/recvmsg of a socket passes (send, recv, read and write on a socket,
 * sendfile and splice into one): payload bytes as the process sees them, by protocol. Only
 * tracepoints: kprobes and fentry are not available on every kernel eprof runs on.
 */
#ifndef EPROF_METRICS_BPF_H
#define EPROF_METRICS_BPF_H

#include "common.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct metrics_proc);
} metrics_procs SEC(".maps");

/* tid -> socket bytes of a target thread, while it lives (the exit copy deletes it). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct metrics_net_tid);
} metrics_thread_net SEC(".maps");

/* tid -> the last figures of a target thread that exited; the recorder reads and deletes. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct metrics_thread);
} metrics_thread_exits SEC(".maps");

static __always_inline struct metrics_proc *metrics_get(__u32 tgid)
{
	static const struct metrics_proc zero;
	struct metrics_proc *m = bpf_map_lookup_elem(&metrics_procs, &tgid);

	if (m)
		return m;
	if (bpf_map_update_elem(&metrics_procs, &tgid, &zero, BPF_NOEXIST) &&
	    !bpf_map_lookup_elem(&metrics_procs, &tgid)) {
		stat_inc(BSTAT_METRICS_FULL);
		return NULL;
	}
	return bpf_map_lookup_elem(&metrics_procs, &tgid);
}

/*
 * The scheduler's own rule (__schedule): a switch away from a task that is no longer
 * runnable, not by preemption, is voluntary; any other is involuntary.
 */
SEC("?tp_btf/sched_switch")
int BPF_PROG(metrics_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	struct metrics_proc *m;
	__u32 tgid = prev->tgid;

	if (!prev->pid || !is_target(tgid))
		return 0;
	m = metrics_get(tgid);
	if (!m)
		return 0;
	if (!preempt && prev_state)
		m->nvcsw++;
	else
		m->nivcsw++;
	return 0;
}

/* A thread's socket bytes: only the thread itself adds to its entry, so no atomics. */
static __always_inline void metrics_thread_net_add(__u32 tid, int bytes, bool tx)
{
	static const struct metrics_net_tid zero;
	struct metrics_net_tid *n = bpf_map_lookup_elem(&metrics_thread_net, &tid);

	if (!n) {
		if (bpf_map_update_elem(&metrics_thread_net, &tid, &zero, BPF_NOEXIST) &&
		    !bpf_map_lookup_elem(&metrics_thread_net, &tid)) {
			stat_inc(BSTAT_METRICS_THREAD_FULL);
			return;
		}
		n = bpf_map_lookup_elem(&metrics_thread_net, &tid);
		if (!n)
			return;
	}
	if (tx)
		n->tx += bytes;
	else
		n->rx += bytes;
}

/* What a task_struct says of its thread now. */
static __always_inline void metrics_thread_fill(struct metrics_thread *t, struct task_struct *task)
{
	struct metrics_net_tid *n;
	__u32 tid = task->pid;

	t->pid = task->tgid;
	t->tid = tid;
	t->start_ns = task->start_time;
	t->utime = task->utime;
	t->stime = task->stime;
	t->rtime = task->se.sum_exec_runtime;
	t->minflt = task->min_flt;
	t->majflt = task->maj_flt;
	t->nvcsw = task->nvcsw;
	t->nivcsw = task->nivcsw;
	if (bpf_core_field_exists(task->ioac)) {
		t->rchar = BPF_CORE_READ(task, ioac.rchar);
		t->wchar = BPF_CORE_READ(task, ioac.wchar);
		t->read_bytes = BPF_CORE_READ(task, ioac.read_bytes);
		t->write_bytes = BPF_CORE_READ(task, ioac.write_bytes);
	}
	n = bpf_map_lookup_elem(&metrics_thread_net, &tid);
	if (n) {
		t->tx = n->tx;
		t->rx = n->rx;
	}
	__builtin_memcpy(t->comm, task->comm, sizeof(t->comm));
}

/*
 * The threads of one process (the recorder attaches a link per target process, with the
 * kernel's per-process filter), one struct metrics_thread each, read every interval: no
 * /proc file per thread.
 */
SEC("?iter/task")
int metrics_threads(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	struct metrics_thread t = {};

	if (!task)
		return 0;
	metrics_thread_fill(&t, task);
	bpf_seq_write(ctx->meta->seq, &t, sizeof(t));
	return 0;
}

/*
 * A target thread goes: its last figures, which no iteration will see any more. Called by
 * on_exit (profile.bpf.c) before it forgets a process whose last thread this is.
 */
const volatile bool metrics_threads_on = false;

static __always_inline void metrics_thread_exit(struct task_struct *task)
{
	struct metrics_thread t = {};
	__u32 tid = task->pid;

	if (!metrics_threads_on)
		return;
	metrics_thread_fill(&t, task);
	t.exit_ns = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&metrics_thread_exits, &tid, &t, BPF_ANY))
		stat_inc(BSTAT_METRICS_THREAD_FULL);
	bpf_map_delete_elem(&metrics_thread_net, &tid);
}

#define METRICS_AF_UNIX 1
#define METRICS_AF_INET 2
#define METRICS_AF_INET6 10
#define METRICS_MSG_PEEK 2

/* What sock_sendmsg/sock_recvmsg returned, by family and protocol; other sockets are left. */
static __always_inline int metrics_net(struct sock *sk, int ret, int flags, bool tx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct metrics_proc *m;
	__u16 family, proto;
	int k;

	if (ret <= 0 || !sk || (!tx && (flags & METRICS_MSG_PEEK)) || !is_target(tgid))
		return 0;
	family = BPF_CORE_READ(sk, __sk_common.skc_family);
	proto = BPF_CORE_READ(sk, sk_protocol);
	if (family == METRICS_AF_UNIX)
		k = METRICS_NET_UNIX;
	else if ((family == METRICS_AF_INET || family == METRICS_AF_INET6) && proto == IPPROTO_TCP)
		k = METRICS_NET_TCP;
	else if ((family == METRICS_AF_INET || family == METRICS_AF_INET6) && proto == IPPROTO_UDP)
		k = METRICS_NET_UDP;
	else
		return 0;
	m = metrics_get(tgid);
	if (m) {
		if (tx)
			m->tx[k] += ret;
		else
			m->rx[k] += ret;
	}
	metrics_thread_net_add((__u32)bpf_get_current_pid_tgid(), ret, tx);
	return 0;
}

SEC("?tp_btf/sock_send_length")
int BPF_PROG(metrics_send, struct sock *sk, int ret, int flags)
{
	return metrics_net(sk, ret, flags, true);
}

SEC("?tp_btf/sock_recv_length")
int BPF_PROG(metrics_recv, struct sock *sk, int ret, int flags)
{
	return metrics_net(sk, ret, flags, false);
}

#endif
