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
	if (!m)
		return 0;
	if (tx)
		m->tx[k] += ret;
	else
		m->rx[k] += ret;
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
