/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * --region py:FUNC, by sampling. Builds without USDT (pyenv, conda) have no
 * hook at each Python call, so a region is derived from observations of the
 * thread's interpreter frames: at every CPU sample (the walk on_sample()
 * does anyway) and when the thread is switched out (a walk of its own in
 * py_region_switch). A function is "running" while a frame of its code
 * object is on the stack; the outermost such frame identifies the call. A
 * call starts at the first observation that sees it and ends at the last
 * one; a thread switched back in has the stack it left with, so switch-ins
 * extend the calls it had open. Each call is sent as an ordinary ev_region
 * flagged REGION_F_SAMPLED. Included by bpf/python.bpf.h.
 */
#ifndef EPROF_PYTHON_REGION_BPF_H
#define EPROF_PYTHON_REGION_BPF_H

/* Candidates in py_rcands and py: options; 0: no Python regions (nothing below runs). */
const volatile __u32 py_nrcand = 0;
const volatile __u32 py_nrspec = 0;
const volatile __u32 py_rpair[PY_RSPEC_MAX] = {};
/* Set by userspace when the record stops. */
bool py_rstopped = false;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PY_RCAND_MAX);
	__type(key, __u32);
	__type(value, struct py_rcand);
} py_rcands SEC(".maps");

struct py_ckey {
	__u32 pid, pad;
	__u64 code;
};

/*
 * (pid, code object) -> mask of the py: options it matches, so names are
 * compared once per code object. The code object's name and file pointers
 * are kept and compared at each use: a code object freed (the interpreter
 * compiles and drops many while it starts) and its memory reused by another
 * would otherwise inherit the old answer.
 */
struct py_cval {
	__u64 qualname, filename;
	__u32 mask, pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct py_ckey);
	__type(value, struct py_cval);
} py_rmatch SEC(".maps");

/* tid -> calls in progress; created at a thread's first call, deleted at its exit. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct py_rthread);
} py_rthreads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct py_rthread);
} py_rzero SEC(".maps");

/* A compact ASCII str object (bits 5 and 6 of its state): its length. */
static __always_inline bool py_str_ascii(const struct py_proc *pp, __u64 str, __u64 *len)
{
	__u32 state = 0;
	__s64 n = 0;

	if (!str || bpf_probe_read_user(&state, sizeof(state), (void *)(str + pp->str_state)) ||
	    bpf_probe_read_user(&n, sizeof(n), (void *)(str + pp->str_length)))
		return false;
	if (((state >> 5) & 3) != 3 || n <= 0)
		return false;
	*len = n;
	return true;
}

static __always_inline bool py_req(const char *a, const char *b)
{
	const __u64 *x = (const __u64 *)a, *y = (const __u64 *)b;
	__u64 d = 0;

	for (int i = 0; i < PY_RNAME / 8; i++)
		d |= x[i] ^ y[i];
	return !d;
}

/*
 * The py: options a code object (of process pid; its name and file str
 * objects qs, fs) matches, as a mask. A global
 * function: the verifier checks it once, not at each call site.
 */
__noinline int py_rmatch_code(__u32 pid, __u64 qs, __u64 fs)
{
	__u64 qlen = 0, flen = 0;
	const struct py_proc *pp;
	struct py_frbuf *fb;
	__u32 zero = 0, mask = 0;
	bool fok;

	pp = bpf_map_lookup_elem(&py_procs, &pid);
	fb = bpf_map_lookup_elem(&py_frbuf, &zero);
	if (!pp || !fb)
		return 0;
	if (!py_str_ascii(pp, qs, &qlen) || qlen >= PY_RNAME)
		return 0;
	__builtin_memset(fb->q, 0, PY_RNAME);
	if (bpf_probe_read_user(fb->q, qlen & (PY_RNAME - 1), (void *)(qs + pp->str_ascii)))
		return 0;
	fok = py_str_ascii(pp, fs, &flen);

	for (__u32 i = 0; i < PY_RCAND_MAX; i++) {
		const struct py_rcand *c;
		__u64 fl, at;
		char ch = 0;

		if (i >= py_nrcand)
			break;
		c = bpf_map_lookup_elem(&py_rcands, &i);
		if (!c || c->qual_len != qlen || !py_req(c->qual, fb->q))
			continue;
		fl = c->file_len;
		if (fl) {
			if (!fok || fl >= PY_RNAME || flen < fl)
				continue;
			at = fs + pp->str_ascii + flen - fl;
			__builtin_memset(fb->f, 0, PY_RNAME);
			if (bpf_probe_read_user(fb->f, fl & (PY_RNAME - 1), (void *)at) ||
			    !py_req(c->file, fb->f))
				continue;
			/* "mod.py" names mod.py and dir/mod.py, not othermod.py */
			if (flen > fl &&
			    (bpf_probe_read_user(&ch, 1, (void *)(at - 1)) || ch != '/'))
				continue;
		}
		mask |= 1u << (c->spec & 31);
	}
	return mask;
}

/* In the walk: remember frame as the outermost one so far of each option code matches. */
static __always_inline void py_rnote(struct py_walk *w, __u64 code, __u64 frame)
{
	struct py_ckey k = { .pid = w->pid, .code = code };
	struct py_cval *m, v = {};
	__u32 mask;

	if (!code)
		return;
	v.qualname = py_read_ptr(code + w->pp->co_qualname);
	v.filename = py_read_ptr(code + w->pp->co_filename);
	m = bpf_map_lookup_elem(&py_rmatch, &k);
	if (m && m->qualname == v.qualname && m->filename == v.filename) {
		mask = m->mask;
	} else {
		mask = py_rmatch_code(w->pid, v.qualname, v.filename);
		v.mask = mask;
		bpf_map_update_elem(&py_rmatch, &k, &v, BPF_ANY);
	}
	for (int s = 0; s < PY_RSPEC_MAX; s++)
		if (mask & (1u << s))
			w->fb->rframe[s] = frame;
}

static __always_inline void py_rsend(__u64 id, __u32 spec, __u64 start, __u64 last, __u16 flags)
{
	struct ev_region *e = reserve_event(sizeof(*e), BSTAT_REGION_RB_FULL);

	if (!e)
		return;
	e->h.size = sizeof(*e);
	e->h.kind = EV_REGION;
	e->h.flags = flags | REGION_F_SAMPLED;
	e->h.pid = id >> 32;
	e->h.tid = (__u32)id;
	e->h.ts = start;
	e->dur = last - start;
	e->pair = py_rpair[spec & (PY_RSPEC_MAX - 1)];
	e->depth = 0;
	e->label_len = 0;
	e->label_addr = 0;
	e->label[0] = 0;
	bpf_ringbuf_submit(e, bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > wakeup_bytes
				      ? BPF_RB_FORCE_WAKEUP
				      : BPF_RB_NO_WAKEUP);
}

/*
 * One observation of thread id at now: known = 0 when its frames are not
 * known (no thread state: it left the interpreter or is not in it yet), so
 * nothing runs; else the walk just done on this CPU (py_frbuf) says which
 * frames run. A walk cut short by a read error changes nothing.
 */
__noinline int py_region_seen(__u64 id, __u64 now, int known)
{
	__u32 tid = (__u32)id, zero = 0;
	struct py_frbuf *fb = NULL;
	struct py_rthread *t;
	bool any = false;

	if (py_rstopped)
		return 0;
	if (known) {
		fb = bpf_map_lookup_elem(&py_frbuf, &zero);
		if (!fb || fb->err)
			return 0;
		for (int s = 0; s < PY_RSPEC_MAX; s++)
			any |= fb->rframe[s] != 0;
	}
	t = bpf_map_lookup_elem(&py_rthreads, &tid);
	if (!t) {
		if (!any)
			return 0;
		t = bpf_map_lookup_elem(&py_rzero, &zero);
		if (!t || (bpf_map_update_elem(&py_rthreads, &tid, t, BPF_NOEXIST) &&
			   !bpf_map_lookup_elem(&py_rthreads, &tid))) {
			stat_inc(BSTAT_REGION_NO_STATE);
			return 0;
		}
		t = bpf_map_lookup_elem(&py_rthreads, &tid);
		if (!t)
			return 0;
	}
	for (__u32 s = 0; s < PY_RSPEC_MAX; s++) {
		__u64 f;

		if (s >= py_nrspec)
			break;
		f = fb ? fb->rframe[s] : 0;
		if (t->frame[s] && t->frame[s] == f) {
			t->last[s] = now;
			continue;
		}
		if (t->frame[s]) {
			py_rsend(id, s, t->start[s], t->last[s], 0);
			t->frame[s] = 0;
		}
		if (f) {
			t->frame[s] = f;
			t->start[s] = now;
			t->last[s] = now;
		}
	}
	return 0;
}

#endif
