/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Python frames at the time a stack is taken. Userspace (src/record/python.c)
 * finds the CPython interpreters among the targets, fills py_procs with the
 * layout of each and py_threads with tid -> PyThreadState address from the
 * interpreter's thread list (refreshed every poll). on_sample(), and every
 * other program that takes a user stack (allocations, off-CPU intervals and
 * their wakers, CUDA calls), then walks the thread's _PyInterpreterFrame
 * chain here, while the frames are still those that ran, and appends (code
 * object, instruction pointer) pairs to its event; userspace reads names and
 * lines from the target's memory later.
 */
#ifndef EPROF_PYTHON_BPF_H
#define EPROF_PYTHON_BPF_H

#include "common.bpf.h"

const volatile bool py_enabled = false;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32); /* pid */
	__type(value, struct py_proc);
} py_procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);   /* tid */
	__type(value, __u64); /* PyThreadState address */
} py_threads SEC(".maps");

/* pthread_t (the thread's fsbase) -> PyThreadState address, for PY_PF_TS_FSBASE (3.10). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, __u64);
} py_threads_fs SEC(".maps");

/* Frame bytes read when py_proc.fr_read is not set (3.11+: every field lies in them). */
#define PY_FRAME_READ 80
/*
 * 3.11+: a thread's interpreter frames lie in its data stack, each caller just below its
 * callee, so one read of the bytes that end with a frame brings the frames of its callers
 * too: one helper call for several frames instead of one each. Each read costs ~60 ns plus
 * ~0.2 ns a byte here, so the first window is small (most of it is wasted on a shallow
 * stack) and each next one twice as large, up to PY_WIN. A frame outside the window but
 * less than PY_WIN_NEAR below it starts a new window; one farther away (a shim frame on
 * the C stack, a generator's frame in its object) is read alone.
 */
#define PY_WIN 4096
#define PY_WIN_FIRST 512
#define PY_WIN_NEAR (64 * 1024)
#define PY_ONE 128 /* room for a frame read alone, before the window */

/*
 * Per-CPU room for one walk: the frame being read, then the records and the
 * trailer, contiguous (the trailer goes in the slot after the last record),
 * copied to the end of the sample with one call. Walking before
 * capture_stack() and copying after keeps the verifier's work small: the
 * walk is checked once, not once per path through the stack capture.
 */
struct py_frbuf {
	__u8 d[PY_ONE + PY_WIN]; /* a frame read alone at 0, the window at PY_ONE */
	struct py_frame_rec recs[PY_MAX_FRAMES + 1];
	__u32 n;
	__u32 err;  /* a frame could not be read: the walk saw part of the stack */
	__u32 more; /* frames left beyond PY_MAX_FRAMES */
	__u64 tstate;
	__u16 gil;  /* SAMPLE_F_PY_GIL* flags for the sample */
	/* --region py:FUNC: the outermost frame running each option's function, 0 = none */
	__u64 rframe[PY_RSPEC_MAX];
	char q[PY_RNAME], f[PY_RNAME]; /* names read for a match */
};

/*
 * One per scratch slot (enum scratch_slot), as the scratch buffers: a walk
 * in a uprobe or a scheduler tracepoint can be interrupted by a CPU sample
 * that walks too. The --region py: matching uses slot SLOT_SAMPLE only (CPU
 * samples, and sched_switch, which runs with interrupts off).
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SCRATCH_SLOTS);
	__type(key, __u32);
	__type(value, struct py_frbuf);
} py_frbuf SEC(".maps");

/* Room the Python frames need at the end of a sample. */
#define PY_ROOM (PY_MAX_FRAMES * sizeof(struct py_frame_rec) + sizeof(struct py_trailer))

static __always_inline const struct py_proc *py_lookup(__u64 id)
{
	__u32 pid = id >> 32;

	if (!py_enabled)
		return NULL;
	return bpf_map_lookup_elem(&py_procs, &pid);
}

/* The user stack copy of a Python sample leaves room for its frames in the scratch buffer. */
static __always_inline __u32 py_user_bytes(__u32 want)
{
	const __u32 most = EPROF_MAX_SNAPSHOT - PY_ROOM - 64;

	return want > most ? most : want;
}

static __always_inline __u64 py_field(struct py_frbuf *fb, __u32 off)
{
	if (off > sizeof(fb->d) - 8)
		return 0;
	return *(__u64 *)(fb->d + off);
}

static __always_inline __u8 py_byte(struct py_frbuf *fb, __u32 off)
{
	if (off > sizeof(fb->d) - 1)
		return 0;
	return fb->d[off];
}

static __always_inline __u64 py_read_ptr(__u64 addr)
{
	__u64 v = 0;

	if (bpf_probe_read_user(&v, sizeof(v), (void *)addr))
		return 0;
	return v;
}

struct py_walk {
	struct py_frbuf *fb;
	const struct py_proc *pp;
	__u64 frame;
	__u64 win_lo, win_hi; /* the target's bytes in fb->d + PY_ONE; win_hi 0 = none */
	__u32 win_next;	      /* bytes the next window reads */
	__u32 base;	      /* where the current frame's bytes start in fb->d */
	__u32 pid;
	bool regions; /* note the frames of --region py: functions */
	bool windows; /* frames in a data stack (3.11+): read them by windows */
};

#include "python_region.bpf.h"

/* Reads a window of the target's memory [lo, lo + len) into fb->d + PY_ONE. */
static __always_inline bool py_window(struct py_walk *w, __u64 lo, __u64 len)
{
	asm volatile("" : "+r"(len));
	if (len < 1 || len > PY_WIN)
		return false;
	if (bpf_probe_read_user(w->fb->d + PY_ONE, len, (void *)lo))
		return false;
	w->win_lo = lo;
	w->win_hi = lo + len;
	return true;
}

/* Makes the sz bytes of the current frame readable at fb->d + w->base. */
static __always_inline bool py_frame_bytes(struct py_walk *w, __u32 sz)
{
	__u64 f = w->frame;

	if (w->win_hi && f >= w->win_lo && f + sz <= w->win_hi) {
		w->base = PY_ONE + (__u32)(f - w->win_lo);
		return true;
	}
	if (w->windows && (!w->win_hi || (f < w->win_lo && w->win_lo - f < PY_WIN_NEAR))) {
		__u64 len = w->win_next, lo;

		if (len < sz || len > PY_WIN)
			len = PY_WIN;
		w->win_next = len * 2;
		/*
		 * The bytes ending with the frame, from no lower than its page: the page below
		 * may not be mapped (the data stack's first chunk), and a read that faults
		 * costs more than the next window.
		 */
		lo = f + sz - len;
		if (lo < (f & ~4095ULL))
			lo = f & ~4095ULL;
		if (py_window(w, lo, f + sz - lo)) {
			w->base = PY_ONE + (__u32)(f - w->win_lo);
			return true;
		}
	}
	w->base = 0;
	return !bpf_probe_read_user(w->fb->d, sz, (void *)f);
}

/* One interpreter frame (bpf_loop callback): 0 to go on, 1 to stop. */
static long py_step(__u32 i, void *arg)
{
	struct py_walk *w = arg;
	struct py_frbuf *fb = w->fb;
	const struct py_proc *pp = w->pp;
	__u32 n = fb->n;
	__u32 sz = pp->fr_read & (PY_ONE - 1);
	__u64 code, prev;
	__u32 base;
	__u8 owner;

	if (!w->frame || n >= PY_MAX_FRAMES)
		return 1;
	if (sz < 8)
		sz = PY_FRAME_READ;
	if (!py_frame_bytes(w, sz)) {
		stat_inc(BSTAT_PY_READ_ERR);
		fb->err = 1;
		return 1;
	}
	base = w->base;
	owner = py_byte(fb, base + pp->fr_owner);
	prev = py_field(fb, base + pp->fr_previous);
	if (owner == pp->owner_cstack) {
		/* A shim frame below the first frame of an eval call (3.12+): mark that frame. */
		if (n > 0 && n <= PY_MAX_FRAMES)
			fb->recs[n - 1].code |= 1;
		w->frame = prev;
		return 0;
	}
	code = py_field(fb, base + pp->fr_code);
	if (py_nrcand && w->regions)
		py_rnote(w, code, w->frame);
	if ((pp->fr_is_entry != PY_NONE && py_byte(fb, base + pp->fr_is_entry)) ||
	    (pp->pflags & PY_PF_ALL_ENTRY))
		code |= 1;
	fb->recs[n].code = code;
	fb->recs[n].instr = py_field(fb, base + pp->fr_instr);
	fb->n = n + 1;
	w->frame = prev;
	return 0;
}

/*
 * Walks the interpreter frames of thread id into the per-CPU buffer of
 * scratch slot slot, leaf first. Entry frames (the first frame run by one
 * _PyEval_EvalFrameDefault call) get bit 0 of code set so userspace can put
 * each group in place of its native eval frame. With --region py:, a walk in
 * SLOT_SAMPLE also notes the frames of the functions asked for. NULL when
 * the thread has no known thread state or the kernel has no bpf_loop.
 */
static __always_inline struct py_frbuf *py_walk_frames(const struct py_proc *pp, __u64 id,
						       __u32 slot)
{
	struct py_walk w = { .pp = pp, .pid = id >> 32, .regions = slot == SLOT_SAMPLE,
			     .windows = !(pp->pflags & PY_PF_ALL_ENTRY), .win_next = PY_WIN_FIRST };
	__u32 tid = (__u32)id;
	__u64 *tstate;

	/* bpf_loop came with 5.17: on an older kernel the rest of on_sample() still loads. */
	if (!bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_loop))
		return NULL;
	w.fb = bpf_map_lookup_elem(&py_frbuf, &slot);
	if (!w.fb)
		return NULL;
	w.fb->n = 0;
	w.fb->err = 0;
	w.fb->more = 0;
	w.fb->gil = 0;
	if (py_nrcand && w.regions)
		__builtin_memset(w.fb->rframe, 0, sizeof(w.fb->rframe));
	if (pp->pflags & PY_PF_TS_FSBASE) {
#if defined(__TARGET_ARCH_x86)
		struct task_struct *task = (struct task_struct *)bpf_get_current_task();
		__u64 fs = BPF_CORE_READ(task, thread.fsbase);

		tstate = bpf_map_lookup_elem(&py_threads_fs, &fs);
#else
		tstate = NULL;
#endif
	} else {
		tstate = bpf_map_lookup_elem(&py_threads, &tid);
	}
	if (!tstate)
		return NULL;
	w.fb->tstate = *tstate;
	if (pp->ts_cframe != PY_NONE)
		w.frame = py_read_ptr(py_read_ptr(*tstate + pp->ts_cframe) + pp->cf_frame);
	else
		w.frame = py_read_ptr(*tstate + pp->ts_frame);
	bpf_loop(PY_MAX_FRAMES + 16, py_step, &w, 0);
	w.fb->more = w.frame && w.fb->n >= PY_MAX_FRAMES;
	return w.fb;
}

/*
 * Whether the sampled thread holds the GIL: the GIL is taken (locked == 1)
 * and its last holder is this thread's state. Two fields of struct
 * _gil_runtime_state (3.11: in _PyRuntime; 3.12+: the main interpreter's
 * ceval.gil).
 */
static __always_inline void py_gil(const struct py_proc *pp, struct py_frbuf *fb)
{
	__u64 holder = 0;
	__s32 locked = -1;

	fb->gil = 0;
	if (!pp->gil ||
	    bpf_probe_read_user(&locked, sizeof(locked), (void *)(pp->gil + pp->gil_locked)) ||
	    bpf_probe_read_user(&holder, sizeof(holder), (void *)(pp->gil + pp->gil_holder)))
		return;
	if (locked != 0 && locked != 1)
		return; /* -1: not created yet */
	fb->gil = SAMPLE_F_PY_GIL_KNOWN;
	if (locked == 1 && holder == fb->tstate)
		fb->gil |= SAMPLE_F_PY_GIL;
}

/* Ends the records of a walk with the trailer (in the slot after the last record). */
static __always_inline struct py_frbuf *py_seal(struct py_frbuf *fb)
{
	struct py_trailer *tr;
	__u32 n = fb->n;

	if (n > PY_MAX_FRAMES)
		return NULL;
	tr = (struct py_trailer *)&fb->recs[n];
	tr->n = n;
	if (fb->more)
		tr->n |= PY_TRAILER_TRUNC;
	tr->magic = PY_TRAILER_MAGIC;
	return fb;
}

/* A CPU sample's walk: its frames, the GIL, the --region py: observation, the counters. */
static __always_inline struct py_frbuf *py_collect(const struct py_proc *pp, __u64 id)
{
	struct py_frbuf *fb;

	fb = py_walk_frames(pp, id, SLOT_SAMPLE);
	if (py_nrcand)
		py_region_seen(id, bpf_ktime_get_ns(), fb != NULL);
	if (!fb) {
		stat_inc(BSTAT_PY_NO_TSTATE);
		return NULL;
	}
	stat_inc(BSTAT_PY_SAMPLES);
	if (fb->more)
		stat_inc(BSTAT_PY_TRUNC);
	py_gil(pp, fb);
	return py_seal(fb);
}

/*
 * The walk for any other event with a stack (an allocation, an off-CPU
 * interval or its waker, a CUDA call), made before capture_stack() like a
 * sample's; *user_bytes shrinks so the records fit after the stack copy.
 * NULL when the thread is not a Python thread we know.
 */
static __always_inline struct py_frbuf *py_event_walk(__u64 id, __u32 slot, __u32 *user_bytes)
{
	const struct py_proc *pp = py_lookup(id);
	struct py_frbuf *fb;

	if (!pp)
		return NULL;
	*user_bytes = py_user_bytes(*user_bytes);
	fb = py_walk_frames(pp, id, slot);
	if (!fb)
		return NULL;
	return py_seal(fb);
}

/* Appends the sealed records and trailer to the event of size bytes; returns the new size. */
static __always_inline __u64 py_append(struct scratch_buf *b, __u64 size, struct ev_hdr *h,
				       struct py_frbuf *fb)
{
	__u64 len = fb->n;

	if (len > PY_MAX_FRAMES)
		return size;
	len = len * sizeof(struct py_frame_rec) + sizeof(struct py_trailer);
	asm volatile("" : "+r"(size));
	if (size > SCRATCH_SIZE - PY_ROOM)
		return size;
	if (bpf_probe_read_kernel(b->data + size, len, fb->recs))
		return size;
	h->flags |= STACK_F_PYTHON | fb->gil;
	size += len;
	h->size = size;
	return size;
}

#ifndef PF_EXITING
#define PF_EXITING 0x00000004
#endif

/*
 * --region py:FUNC: a Python thread switched out is observed like a sample
 * (its stack cannot change until it runs again), and a thread switched in
 * has its open calls extended to now. Loaded only with py: regions.
 */
SEC("?tp_btf/sched_switch")
int BPF_PROG(py_region_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	__u64 id = bpf_get_current_pid_tgid(), now = bpf_ktime_get_ns();
	const struct py_proc *pp;
	struct py_rthread *t;
	__u32 ntid = next->pid;

	if (py_rstopped)
		return 0;
	if (is_target(next->tgid)) {
		t = bpf_map_lookup_elem(&py_rthreads, &ntid);
		if (t)
			for (int s = 0; s < PY_RSPEC_MAX; s++)
				if (t->frame[s])
					t->last[s] = now;
	}
	if (!is_target(id >> 32) || !(__u32)id)
		return 0;
	pp = py_lookup(id);
	if (!pp)
		return 0;
	if (prev->flags & PF_EXITING) {
		/* Its calls end here (a thread exits with no Python frames left). */
		__u32 ptid = (__u32)id;

		py_region_seen(id, now, 0);
		bpf_map_delete_elem(&py_rthreads, &ptid);
		return 0;
	}
	py_region_seen(id, now, py_walk_frames(pp, id, SLOT_SAMPLE) != NULL);
	return 0;
}

#endif
