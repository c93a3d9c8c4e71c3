/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Off-CPU intervals and wakeups of target threads (record --offcpu).
 *
 * The cost is paid by the intervals that matter:
 *  - sched_switch: the thread going off CPU gets its time and state in task
 *    storage (no stack). The thread coming back, if it was off long enough,
 *    gets its kernel stack read (it is still parked in __schedule) and is
 *    marked pending. Short intervals cost two task-storage lookups.
 *  - sched_waking (runs in the waker): notes the wakeup time and the waker;
 *    if the wakee has been blocked >= the minimum, the waker's stack is sent.
 *  - rseq_update (runs in the resumed thread on its way back to user mode,
 *    so its user stack is still the one it blocked with; glibc registers
 *    rseq for every thread): a pending interval is sent with that user
 *    stack (a copy of up to 8 KiB for DWARF, or frame pointers). A thread
 *    that is switched out again before that (preempted on its way back, or a
 *    wait inside the kernel) sends it at that switch: with its user stack when
 *    it has rseq (it has not been back in user mode since it blocked), else
 *    without one. sys_exit would catch
 *    more, but enabling it puts every syscall of the machine on a slow path.
 * Wakeups from interrupts (timers, I/O completions) have no waker thread:
 * a per-CPU depth counter on the irq, softirq and hrtimer tracepoints says
 * when sched_waking runs in one. (This kernel family may lack kprobes and
 * fentry: only tracepoints are used.)
 */
#ifndef EPROF_OFFCPU_BPF_H
#define EPROF_OFFCPU_BPF_H

#include "common.bpf.h"
#include "python.bpf.h"

const volatile __u64 offcpu_min_ns = 10000;
const volatile __u32 offcpu_stack_bytes = 0; /* user stack copy for DWARF; 0 = frame pointers */
/* Stack captures (blocking or waker) per second and CPU; beyond, times and wakers only (0 = all). */
const volatile __u64 offcpu_stack_rate = 0;
/*
 * Blocked time sampled by a Poisson process (mean offcpu_sample_ns, 0 = off): an interval
 * of d ns gets its stacks when a gap drawn from the exponential table is <= d, i.e. with
 * probability 1 - e^(-d/mean), and then stands for d / that probability (the reader
 * scales it): long waits nearly always have stacks, a storm of short ones costs a few.
 */
const volatile __u64 offcpu_sample_ns = 0;
#define OFFCPU_EXP_TABLE 4096
const volatile __u64 offcpu_exp_table[OFFCPU_EXP_TABLE] = { 1 };

/* Internal: the time sampling's draw is done (at the wakeup); never sent. */
#define OFFCPU_DRAWN 0x8000

/*
 * The draw for an interval blocked d ns so far: true when it is not picked. Made once per
 * interval: at its wakeup (so the waker's stack is taken only for picked ones), or at the
 * switch back for intervals without one (preempted, or a wakeup not seen). The reader
 * repeats the arithmetic with the same d (the wakeup time, else the whole interval).
 */
static __always_inline bool offcpu_unpicked(__u64 d)
{
	return d < offcpu_exp_table[bpf_get_prandom_u32() & (OFFCPU_EXP_TABLE - 1)];
}

#define OFFCPU_NR_FUTEX 202 /* x86_64 */
#define OFFCPU_NR_FUTEX_WAITV 449

#define OFFCPU_TASK_RUNNING 0x0000
#define OFFCPU_TASK_INTERRUPTIBLE 0x0001
#define OFFCPU_TASK_UNINTERRUPTIBLE 0x0002

struct offcpu_task {
	__u64 off_ts;  /* went off CPU; 0 = not in a tracked interval */
	__u64 wake_ts; /* made runnable; 0 = not yet */
	__u64 on_ts;   /* back on CPU (set with pending) */
	__u32 waker_pid, waker_tid;
	__u16 state, wflags;
	__u32 pending; /* on CPU again after a long interval: send it when it resumes */
	__s32 kerr;    /* bpf_get_task_stack error, or 0 */
	__u32 kbytes;  /* kernel stack bytes in kips */
	__u64 kips[EPROF_MAX_STACK];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct offcpu_task);
} offcpu_tasks SEC(".maps");

/* Token bucket per CPU for stack captures: a storm of long waits costs times, not stacks. */
struct offcpu_bucket {
	__u64 last_ns;
	__u64 tokens_ns; /* tokens in units of 1/rate s, scaled by 1e9 */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct offcpu_bucket);
} offcpu_budget SEC(".maps");

static __always_inline bool offcpu_take_stack(__u64 now)
{
	const __u64 one = 1000000000ULL, burst = one * 64;
	struct offcpu_bucket *bk;
	__u32 k = 0;

	if (!offcpu_stack_rate)
		return true;
	bk = bpf_map_lookup_elem(&offcpu_budget, &k);
	if (!bk)
		return true;
	/* tokens_ns gains rate per ns elapsed: one token = 1e9 units; at most 64 banked. */
	if (now > bk->last_ns) {
		__u64 add = (now - bk->last_ns) * offcpu_stack_rate;

		bk->tokens_ns = add >= burst || bk->tokens_ns + add >= burst ? burst
									     : bk->tokens_ns + add;
	}
	bk->last_ns = now;
	if (bk->tokens_ns < one)
		return false;
	bk->tokens_ns -= one;
	return true;
}

/* Interrupt nesting per CPU: > 0 while a hardirq, softirq or hrtimer callback runs. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __s32);
} offcpu_irq SEC(".maps");

static __always_inline void offcpu_irq_add(int d)
{
	__u32 k = 0;
	__s32 *v = bpf_map_lookup_elem(&offcpu_irq, &k);

	if (!v)
		return;
	/* Attached in the middle of an interrupt: its exit comes without an entry. */
	if (d < 0 && *v <= 0)
		return;
	*v += d;
}

static __always_inline bool offcpu_in_irq(void)
{
	__u32 k = 0;
	__s32 *v = bpf_map_lookup_elem(&offcpu_irq, &k);

	return v && *v > 0;
}

/*
 * Exits are defined (and so attached) before entries: an interrupt that is
 * running while the programs attach then shows an exit without an entry,
 * which offcpu_irq_add ignores, never an entry without an exit, which would
 * leave the CPU marked as in an interrupt. sched_switch clears the mark too.
 */
SEC("?tp_btf/irq_handler_exit")
int BPF_PROG(offcpu_irq_exit, int irq, struct irqaction *action, int ret)
{
	offcpu_irq_add(-1);
	return 0;
}

SEC("?tp_btf/softirq_exit")
int BPF_PROG(offcpu_softirq_exit, unsigned int vec)
{
	offcpu_irq_add(-1);
	return 0;
}

SEC("?tp_btf/hrtimer_expire_exit")
int BPF_PROG(offcpu_hrtimer_exit, struct hrtimer *t)
{
	offcpu_irq_add(-1);
	return 0;
}

SEC("?tp_btf/irq_handler_entry")
int BPF_PROG(offcpu_irq_entry, int irq, struct irqaction *action)
{
	offcpu_irq_add(1);
	return 0;
}

SEC("?tp_btf/softirq_entry")
int BPF_PROG(offcpu_softirq_entry, unsigned int vec)
{
	offcpu_irq_add(1);
	return 0;
}

SEC("?tp_btf/hrtimer_expire_entry")
int BPF_PROG(offcpu_hrtimer_entry, struct hrtimer *t, ktime_t *now)
{
	offcpu_irq_add(1);
	return 0;
}

static __always_inline __u16 offcpu_state(bool preempt, unsigned int prev_state)
{
	if (preempt || prev_state == OFFCPU_TASK_RUNNING)
		return OFFCPU_RUNNABLE;
	if (prev_state & OFFCPU_TASK_UNINTERRUPTIBLE)
		return OFFCPU_DISK;
	if (prev_state & OFFCPU_TASK_INTERRUPTIBLE)
		return OFFCPU_SLEEP;
	return OFFCPU_OTHER;
}

/* An interval over the stack budget: times, state and waker only, sent from the switch. */
static __always_inline void offcpu_send_bare(struct offcpu_task *s, __u32 pid, __u32 tid)
{
	struct ev_offcpu *e = reserve_event(sizeof(*e), BSTAT_OFFCPU_RB_FULL);
	__u64 off_ts = s->off_ts;

	s->off_ts = 0;
	if (!e)
		return;
	__builtin_memset(e, 0, sizeof(*e));
	e->h.size = sizeof(*e);
	e->h.kind = EV_OFFCPU;
	e->h.pid = pid;
	e->h.tid = tid;
	e->h.ts = s->on_ts;
	e->off_ts = off_ts;
	e->wake_ts = s->wake_ts;
	e->waker_pid = s->waker_pid;
	e->waker_tid = s->waker_tid;
	e->state = s->state;
	e->wflags = (s->wflags & ~OFFCPU_DRAWN) | OFFCPU_F_NO_STACK;
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
}

/*
 * Sends the interval of s from the resumed thread's own context: its kernel
 * stack read at the switch, then its user stack (when user is set) as it is
 * now, unchanged since it blocked as long as it has not returned to user mode.
 */
static __always_inline void offcpu_send(void *ctx, struct offcpu_task *s, bool user)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u32 kbytes = s->kbytes, ubytes = 0, ulen = 0, pos, copy = offcpu_stack_bytes;
	__u64 id = bpf_get_current_pid_tgid(), size;
	struct py_frbuf *pyf = NULL;
	struct scratch_buf *b;
	struct ev_offcpu *e;
	struct pt_regs *uregs;
	long n;

	s->pending = 0;
	b = scratch_get(SLOT_SCHED);
	if (!b)
		return;
	/* Its Python frames, unchanged since it blocked like its user stack (bpf/python.bpf.h). */
	if (user)
		pyf = py_event_walk(id, SLOT_SCHED, &copy);
	e = (struct ev_offcpu *)b->data;
	fill_hdr(&e->h, EV_OFFCPU, id);
	e->h.ts = s->on_ts;
	e->off_ts = s->off_ts;
	e->wake_ts = s->wake_ts;
	e->waker_pid = s->waker_pid;
	e->waker_tid = s->waker_tid;
	e->state = s->state;
	e->wflags = s->wflags & ~OFFCPU_DRAWN;
	e->pad = 0;
	s->off_ts = 0;
	e->st.user_ip = e->st.user_sp = e->st.user_bp = 0;
	e->st.kstack_err = s->kerr;
	e->st.ustack_err = 0;
	if (kbytes > sizeof(s->kips))
		kbytes = sizeof(s->kips);
	if (kbytes && bpf_probe_read_kernel(b->data + sizeof(*e), kbytes, s->kips))
		kbytes = 0;
	if (user && want_user && BPF_CORE_READ(task, mm)) { /* read: see capture_stack() */
		uregs = (struct pt_regs *)bpf_task_pt_regs(task);
		e->st.user_ip = BPF_CORE_READ(uregs, ip);
		e->st.user_sp = BPF_CORE_READ(uregs, sp);
		e->st.user_bp = BPF_CORE_READ(uregs, bp);
		e->h.flags |= SAMPLE_F_USER_REGS;
		pos = sizeof(*e) + kbytes;
		if (copy) {
			ulen = copy_user_stack(b, pos, e->st.user_sp, copy, &e->h);
		} else {
			asm volatile("" : "+r"(pos));
			if (pos > SCRATCH_HEAD + SCRATCH_IPS)
				return;
			n = bpf_get_stack(ctx, b->data + pos, SCRATCH_IPS, BPF_F_USER_STACK);
			if (n < 0)
				e->st.ustack_err = n;
			else
				ubytes = n;
			if (ubytes > SCRATCH_IPS)
				ubytes = SCRATCH_IPS;
		}
	}
	e->st.kstack_n = kbytes / 8;
	e->st.ustack_n = ubytes / 8;
	e->st.stack_len = ulen;
	size = sizeof(*e) + kbytes + ubytes + ulen;
	e->h.size = size;
	if (pyf)
		size = py_append(b, size, &e->h, pyf);
	send_scratch(b, size, BSTAT_OFFCPU_RB_FULL);
}

/* Whether t registered rseq (glibc does for every thread): see offcpu_switch. */
static __always_inline bool offcpu_has_rseq(struct task_struct *t)
{
	if (!bpf_core_field_exists(t->rseq))
		return false;
	return BPF_CORE_READ(t, rseq) != NULL;
}

SEC("?tp_btf/sched_switch")
int BPF_PROG(offcpu_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	__u64 now = bpf_ktime_get_ns();
	struct offcpu_task *s;
	__s32 *depth;
	__u32 zero = 0;
	long n;

	/*
	 * No interrupt handler schedules: a CPU that switches tasks is not in one. An
	 * entry whose exit we missed would otherwise make every later wakeup on this CPU
	 * look like an interrupt's, without a waker.
	 */
	depth = bpf_map_lookup_elem(&offcpu_irq, &zero);
	if (depth && *depth)
		*depth = 0;
	/* Only targets have storage: found, it is one; else the target set says (and creates). */
	s = prev->pid ? bpf_task_storage_get(&offcpu_tasks, prev, NULL, 0) : NULL;
	if (!s && prev->pid && is_target(prev->tgid)) {
		s = bpf_task_storage_get(&offcpu_tasks, prev, NULL, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (!s)
			stat_inc(BSTAT_OFFCPU_NO_STORAGE);
	}
	if (s) {
		/*
		 * Back and off again without a hook in between: woken, then preempted (or blocked
		 * again) inside the kernel before its return to user mode, where rseq_update would
		 * have sent it. With rseq registered, every switch-out is followed by that hook on
		 * the way back to user mode: the thread has not been there since it blocked, and
		 * its user stack (prev is current here) is still the one it blocked with. Without
		 * rseq it may have returned and blocked again: no trustworthy user stack.
		 */
		if (s->pending)
			offcpu_send(ctx, s, offcpu_has_rseq(prev));
		s->off_ts = now;
		s->state = offcpu_state(preempt, prev_state);
		s->wake_ts = s->state == OFFCPU_RUNNABLE ? now : 0;
		s->waker_pid = s->waker_tid = 0;
		s->wflags = 0;
		/* A futex wait names a lock even when the interval gets no stack. */
		if (s->state == OFFCPU_SLEEP) {
			/* A BTF pointer: a direct load, no probe-read helper call. */
			struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(prev);
			long nr = regs->orig_ax;

			if (nr == OFFCPU_NR_FUTEX || nr == OFFCPU_NR_FUTEX_WAITV)
				s->wflags = OFFCPU_F_FUTEX;
		}
	}
	/* Only targets have storage: a lookup without F_CREATE is the cheap filter. */
	s = bpf_task_storage_get(&offcpu_tasks, next, NULL, 0);
	if (!s || !s->off_ts || s->pending)
		return 0;
	stat_inc(BSTAT_OFFCPU_SEEN);
	if (now - s->off_ts < offcpu_min_ns && s->state != OFFCPU_NEW) {
		stat_inc(BSTAT_OFFCPU_SHORT);
		s->off_ts = 0;
		return 0;
	}
	s->on_ts = now;
	if (offcpu_sample_ns && s->state != OFFCPU_NEW) {
		if (!(s->wflags & OFFCPU_DRAWN)) {
			if (offcpu_unpicked(now - s->off_ts))
				s->wflags |= OFFCPU_F_UNSAMPLED;
		} else if ((s->wflags & OFFCPU_F_UNSAMPLED) && s->wake_ts && now > s->wake_ts &&
			   !offcpu_unpicked(now - s->wake_ts)) {
			/*
			 * Not picked at its wakeup: its wait for a CPU since gets a draw of its
			 * own, so that a busy machine's long waits for a CPU after short sleeps
			 * are sampled by their own length (P = 1 - e^-(blocked + runnable) in
			 * all), not only through the sleep's.
			 */
			s->wflags = (s->wflags & ~OFFCPU_F_UNSAMPLED) | OFFCPU_F_TAIL;
		}
		if (s->wflags & OFFCPU_F_UNSAMPLED) {
			stat_inc(BSTAT_OFFCPU_UNSAMPLED);
			offcpu_send_bare(s, next->tgid, next->pid);
			return 0;
		}
	}
	if (!offcpu_take_stack(now)) {
		stat_inc(BSTAT_OFFCPU_NO_STACK);
		offcpu_send_bare(s, next->tgid, next->pid);
		return 0;
	}
	s->pending = 1;
	s->kerr = 0;
	s->kbytes = 0;
	if (want_kernel) {
		/* Still parked in __schedule(): its kernel stack is the blocking one. */
		n = bpf_get_task_stack(next, s->kips, sizeof(s->kips), 0);
		if (n < 0) {
			s->kerr = n;
			stat_inc(BSTAT_KSTACK_ERR);
		} else {
			s->kbytes = n;
		}
	}
	return 0;
}

/* Thread creation: the new thread waits for its first run, woken by its creator. */
SEC("?tp_btf/sched_wakeup_new")
int BPF_PROG(offcpu_wakeup_new, struct task_struct *p)
{
	__u64 id = bpf_get_current_pid_tgid(), now = bpf_ktime_get_ns();
	struct offcpu_task *s;

	if (!is_target(p->tgid))
		return 0;
	s = bpf_task_storage_get(&offcpu_tasks, p, NULL, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!s) {
		stat_inc(BSTAT_OFFCPU_NO_STORAGE);
		return 0;
	}
	s->off_ts = now;
	s->wake_ts = now;
	s->state = OFFCPU_NEW;
	s->waker_pid = id >> 32;
	s->waker_tid = (__u32)id;
	s->wflags = 0;
	s->pending = 0;
	return 0;
}

SEC("?tp_btf/sched_waking")
int BPF_PROG(offcpu_waking, struct task_struct *p)
{
	__u64 id = bpf_get_current_pid_tgid(), now;
	struct ev_offcpu_wake *e;
	struct offcpu_task *s;
	struct scratch_buf *b;
	struct py_frbuf *pyf;
	__u32 ubytes = 0;
	__u64 size;
	bool irq;

	s = bpf_task_storage_get(&offcpu_tasks, p, NULL, 0);
	if (!s || !s->off_ts || s->wake_ts || s->pending)
		return 0;
	now = bpf_ktime_get_ns();
	s->wake_ts = now;
	if (offcpu_sample_ns) {
		s->wflags |= OFFCPU_DRAWN;
		if (offcpu_unpicked(now - s->off_ts))
			s->wflags |= OFFCPU_F_UNSAMPLED;
	}
	irq = offcpu_in_irq() || (__u32)id == 0;
	if (irq) {
		s->wflags |= OFFCPU_F_IRQ_WAKE;
		stat_inc(BSTAT_OFFCPU_IRQ_WAKE);
		return 0;
	}
	s->waker_pid = id >> 32;
	s->waker_tid = (__u32)id;
	if (now - s->off_ts < offcpu_min_ns || (s->wflags & OFFCPU_F_UNSAMPLED) ||
	    !offcpu_take_stack(now))
		return 0;
	b = scratch_get(SLOT_SCHED);
	if (!b)
		return 0;
	e = (struct ev_offcpu_wake *)b->data;
	fill_hdr(&e->h, EV_OFFCPU_WAKE, id);
	e->h.ts = now;
	e->wakee_off_ts = s->off_ts;
	e->wakee_pid = p->tgid;
	e->wakee_tid = p->pid;
	/*
	 * User frames by frame pointer only: a stack copy or a kernel unwind here
	 * would double the cost of every long wait in a storm. The kernel side of
	 * a wakeup (futex_wake, pipe_write ...) mirrors the wakee's blocking stack.
	 */
	pyf = py_event_walk(id, SLOT_SCHED, &ubytes);
	size = capture_stack(ctx, b, sizeof(*e), &e->h, &e->st, false, ubytes);
	if (size && pyf)
		size = py_append(b, size, &e->h, pyf);
	if (size)
		send_scratch(b, size, BSTAT_OFFCPU_RB_FULL);
	return 0;
}

/* On the way back to user mode after a switch, for threads with rseq (glibc registers it). */
SEC("?tp_btf/rseq_update")
int BPF_PROG(offcpu_rseq, struct task_struct *t)
{
	struct offcpu_task *s;

	s = bpf_task_storage_get(&offcpu_tasks, bpf_get_current_task_btf(), NULL, 0);
	if (s && s->pending)
		offcpu_send(ctx, s, true);
	return 0;
}

#endif
