// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <linux/types.h>

#include "eprof_abi.h"
#include "unwind/unwind.h"
#include "util/log.h"
#include "events.h"
#include "proc.h"

#define MAX_FRAMES 512

_Static_assert(sizeof(struct ev_hdr) == 24, "ev_hdr layout");
_Static_assert(sizeof(struct ev_stack) == 40, "ev_stack layout");
_Static_assert(sizeof(struct ev_sample) == 24 + 8 + 8 + 16 + 40, "ev_sample layout");
_Static_assert(sizeof(struct ev_exec) == 24 + 8 + 16 + EPROF_PATH_LEN, "ev_exec layout");
_Static_assert(sizeof(struct ev_exit) == 24 + 8 + 16, "ev_exit layout");
_Static_assert(sizeof(struct ev_fork) == 24 + 8 + 16, "ev_fork layout");

int events_init(struct event_ctx *c, struct profile *p, struct proc_tracker *t,
		enum callgraph_mode cg)
{
	int64_t kobj;

	memset(c, 0, sizeof(*c));
	c->p = p;
	c->tracker = t;
	c->cg = cg;
	c->proc_root = "/proc";
	c->scan_words = UNWIND_SCAN_WORDS;
	kobj = profile__object(p, OBJ_KERNEL, "[kernel.kallsyms]", "", 0);
	if (kobj < 0)
		return (int)kobj;
	c->kernel_obj = kobj;
	return 0;
}

static void comm_copy(char *dst, const char *src)
{
	memcpy(dst, src, EPROF_TASK_COMM_LEN);
	dst[EPROF_TASK_COMM_LEN] = '\0';
}

static void set_thread_comm(struct event_ctx *c, uint32_t pid, uint32_t tid, const char *comm16)
{
	struct thread *t = profile__thread(c->p, pid, tid, true);
	char comm[EPROF_TASK_COMM_LEN + 1];

	if (!t)
		return;
	comm_copy(comm, comm16);
	if (strcmp(profile__str(c->p, t->comm), comm))
		t->comm = profile__intern(c->p, comm);
}

static char *read_small_file(const char *path, size_t *len)
{
	char *buf = malloc(4096);
	ssize_t n;
	int fd;

	if (!buf)
		return NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		free(buf);
		return NULL;
	}
	n = read(fd, buf, 4095);
	close(fd);
	if (n < 0) {
		free(buf);
		return NULL;
	}
	buf[n] = '\0';
	*len = n;
	return buf;
}

void events_read_proc_info(struct event_ctx *c, uint32_t pid, uint64_t ts)
{
	struct process *pr = profile__proc(c->p, pid, true);
	char path[PATH_MAX], *s;
	size_t len;

	if (!pr)
		return;
	if (!pr->start_ts)
		pr->start_ts = ts;
	snprintf(path, sizeof(path), "%s/%u/cmdline", c->proc_root, pid);
	s = read_small_file(path, &len);
	if (s) {
		for (size_t i = 0; len && i < len - 1; i++)
			if (s[i] == '\0')
				s[i] = ' ';
		pr->cmdline = profile__intern(c->p, s);
		free(s);
	}
	snprintf(path, sizeof(path), "%s/%u/comm", c->proc_root, pid);
	s = read_small_file(path, &len);
	if (s) {
		s[strcspn(s, "\n")] = '\0';
		pr->comm = profile__intern(c->p, s);
		free(s);
	}
	snprintf(path, sizeof(path), "%s/%u/stat", c->proc_root, pid);
	s = read_small_file(path, &len);
	if (s) {
		/* ppid is the 2nd field after the parenthesised comm, which may contain spaces. */
		char *rp = strrchr(s, ')');
		unsigned ppid;

		if (rp && sscanf(rp + 1, " %*c %u", &ppid) == 1)
			pr->ppid = ppid;
		free(s);
	}
}

struct unwind_cb_ctx {
	struct event_ctx *c;
	uint32_t pid;
	uint64_t now;
};

static bool unwind_find(void *ctx, uint64_t pc, const struct cfi_table **table, uint64_t *bias)
{
	struct unwind_cb_ctx *u = ctx;

	return proc_tracker__find_cfi(u->c->tracker, u->pid, pc, table, bias, u->now);
}

static void unwind_span(void *ctx, uint64_t addr, struct unwind_span *out)
{
	struct unwind_cb_ctx *u = ctx;

	proc_tracker__span(u->c->tracker, u->pid, addr, out);
}

static bool unwind_code(void *ctx, uint64_t pc, uint8_t *buf, size_t len)
{
	struct unwind_cb_ctx *u = ctx;

	return proc_tracker__code_before(u->c->tracker, u->pid, pc, buf, len);
}

static void count_unwind_stop(struct profile *p, enum unwind_stop why)
{
	switch (why) {
	case UNWIND_NO_CFI:
		p->stats[STAT_UNWIND_NO_CFI]++;
		break;
	case UNWIND_TOO_DEEP:
		p->stats[STAT_UNWIND_TOO_DEEP]++;
		break;
	case UNWIND_READ_FAULT:
		p->stats[STAT_UNWIND_READ_FAULT]++;
		break;
	case UNWIND_BAD_FRAME:
	case UNWIND_UNMAPPED:
		p->stats[STAT_UNWIND_BAD_FRAME]++;
		break;
	default:
		break;
	}
}

/* User frames, leaf first, into out. Returns the count; *truncated when incomplete. */
static int user_ips(struct event_ctx *c, const struct ev_hdr *h, const struct ev_stack *st,
		    const uint64_t *ips, uint64_t *out, int max, bool *truncated)
{
	const uint8_t *stack = (const uint8_t *)(ips + st->kstack_n + st->ustack_n);
	struct unwind_cb_ctx u = { c, h->pid, h->ts };
	struct unwind_map_ops ops = { unwind_find, unwind_span, unwind_code };
	struct unwind_regs regs = { st->user_ip, st->user_sp, st->user_bp };
	struct unwind_result res;
	enum unwind_stop why;
	int n;

	*truncated = false;
	if (!(h->flags & SAMPLE_F_USER_REGS))
		return 0;
	if (!st->stack_len) {
		/* Frame pointers, walked in BPF. */
		n = st->ustack_n < max ? st->ustack_n : max;
		memcpy(out, ips + st->kstack_n, n * sizeof(*out));
		if (st->ustack_err)
			*truncated = true;
		return n;
	}
	n = unwind_stack_scan(&ops, &u, &regs, stack, st->stack_len, c->scan_words, out, NULL, max,
			      &res);
	why = res.why;
	if (res.scanned)
		c->p->stats[STAT_UNWIND_SCANNED]++;
	/* Reached the process's entry point (or sampled right on it): the stack is complete. */
	if (why != UNWIND_END && n >= 1 &&
	    proc_tracker__at_entry(c->tracker, h->pid, out[n - 1] - (n > 1), h->ts))
		why = UNWIND_END;
	if (why != UNWIND_END) {
		static unsigned logged;

		count_unwind_stop(c->p, why);
		*truncated = true;
		if (logged++ < 20)
			log_debug("unwind of pid %u stopped (%d) after %d frames at %#llx (sp %#llx, %u bytes copied%s)",
				  h->pid, why, n, n ? (unsigned long long)out[n - 1] : 0ULL,
				  (unsigned long long)st->user_sp, st->stack_len,
				  h->flags & SAMPLE_F_SNAP_TRUNC ? ", limit hit" : "");
	}
	return n;
}

/* Python frames of one sample (leaf first), in place of the native eval frames. */
struct py_part {
	const uint32_t *locs;
	const uint8_t *entry;
	uint32_t n;
	bool has_root;
	uint32_t root; /* [GIL] or [no GIL] at the root of the stack */
};

static bool is_perfmap(struct event_ctx *c, const struct ev_hdr *h, uint64_t ret)
{
	uint32_t loc;

	if (proc_tracker__location(c->tracker, h->pid, ret, true, &loc, h->ts))
		return false;
	return c->p->objects.v[c->p->locations.v[loc].object].kind == OBJ_PERFMAP;
}

/*
 * Leaf-first user locations of a Python sample: each native
 * _PyEval_EvalFrameDefault frame becomes the group of Python frames it runs
 * (up to and including the group's entry frame); groups left over (a native
 * stack cut short) go on the outer end.
 */
static int mix_python(struct event_ctx *c, const struct ev_hdr *h, const uint64_t *uips, int nu,
		      const struct py_part *py, uint32_t *out)
{
	uint32_t g = 0;
	int m = 0, err;

	for (int i = 0; i < nu; i++) {
		uint64_t pc = i > 0 ? uips[i] - 1 : uips[i];

		if (g < py->n && c->py_is_eval(c->py_arg, h->pid, pc)) {
			do
				out[m++] = py->locs[g];
			while (!py->entry[g++] && g < py->n);
			/*
			 * Under -X perf (3.12+) the eval call's caller is a perf-map
			 * trampoline naming the same function: the frame just added.
			 */
			if (i + 1 < nu && is_perfmap(c, h, uips[i + 1]))
				i++;
			continue;
		}
		err = proc_tracker__location(c->tracker, h->pid, uips[i], i > 0, &out[m], h->ts);
		if (err)
			return err;
		m++;
	}
	while (g < py->n)
		out[m++] = py->locs[g++];
	return m;
}

/* Anonymous executable memory of a process: JIT code with no perf map naming it. */
static bool jit_location(const struct profile *p, uint32_t loc)
{
	const struct object *o = &p->objects.v[p->locations.v[loc].object];

	return o->kind == OBJ_ANON && o->pid && strcmp(profile__str(p, o->path), "[uprobes]");
}

/*
 * Names JIT code by who runs it: "[jit] libdnnl.so.2" when the frame calling
 * into it (found by stack scanning) lies in that library. The location is the
 * whole mapping (proc_tracker__location), so the first caller seen names it;
 * a mapping no caller was ever seen for is "[jit] anon@START" (symbolize.c).
 * locs: the user part of a stack, root first.
 */
static int name_jit(struct profile *p, const uint32_t *locs, int n)
{
	for (int i = 1; i < n; i++) {
		struct location *l = &p->locations.v[locs[i]];
		const struct object *caller;
		char name[128];
		int j = i - 1;

		if (!jit_location(p, locs[i]))
			continue;
		if (l->frame_n && strncmp(profile__str(p, p->frames.v[l->frame_first].name),
					  JIT_ANON_PREFIX, strlen(JIT_ANON_PREFIX)))
			continue; /* named already */
		while (j > 0 && jit_location(p, locs[j]))
			j--;
		caller = &p->objects.v[p->locations.v[locs[j]].object];
		if (caller->kind != OBJ_ELF)
			continue;
		snprintf(name, sizeof(name), "[jit] %s",
			 profile__object_module(p, p->locations.v[locs[j]].object));
		if (!l->frame_n) {
			struct frame *f = vec_push(p->frames);

			if (!f)
				return -ENOMEM;
			l = &p->locations.v[locs[i]];
			l->frame_first = p->frames.n - 1;
			l->frame_n = 1;
		}
		p->frames.v[l->frame_first] = (struct frame){
			.name = profile__intern(p, name), .module = profile__intern(p, "[jit]"),
			.kind = FRAME_JIT };
	}
	return 0;
}

/*
 * How many innermost frames lie in the object of the first one (a probe on a marker
 * function of an interposer: its own frames, whatever was inlined or unwound).
 */
static int own_object_frames(struct event_ctx *c, const struct ev_hdr *h, const uint64_t *uips,
			     int nu)
{
	uint32_t loc, obj;
	int i;

	if (proc_tracker__location(c->tracker, h->pid, uips[0], false, &loc, h->ts))
		return 1;
	obj = c->p->locations.v[loc].object;
	for (i = 1; i < nu - 1; i++) {
		if (proc_tracker__location(c->tracker, h->pid, uips[i], true, &loc, h->ts) ||
		    c->p->locations.v[loc].object != obj)
			break;
	}
	return i;
}

static int64_t stack_node(struct event_ctx *c, const struct ev_hdr *h, const struct ev_stack *st,
			  size_t avail, int skip_user, const struct py_part *py)
{
	static uint64_t uips[MAX_FRAMES];
	static uint32_t mix[MAX_FRAMES + PY_MAX_FRAMES + 1];
	static uint32_t locs[MAX_FRAMES + PY_MAX_FRAMES + EPROF_MAX_STACK + 2];
	const uint64_t *ips = (const uint64_t *)(st + 1);
	bool truncated = false;
	int nu, nl = 0, ustart, err;
	int64_t node;

	if (((size_t)st->kstack_n + st->ustack_n) * 8 + st->stack_len > avail ||
	    st->kstack_n > EPROF_MAX_STACK || st->ustack_n > EPROF_MAX_STACK)
		return -EINVAL;
	nu = user_ips(c, h, st, ips, uips, MAX_FRAMES, &truncated);
	if (skip_user == EVENTS_SKIP_OWN_OBJECT && nu > 1)
		skip_user = own_object_frames(c, h, uips, nu);
	if (skip_user > 0) {
		/* Drop the innermost frames (a probe's own trampoline, say). */
		if (skip_user > nu)
			skip_user = nu;
		memmove(uips, uips + skip_user, (nu - skip_user) * sizeof(*uips));
		nu -= skip_user;
	}
	if (py && py->has_root)
		locs[nl++] = py->root;
	if (truncated) {
		node = profile__special(c->p, "[truncated]");
		if (node < 0)
			return node;
		locs[nl++] = node;
	}
	ustart = nl;
	if (py && py->n) {
		int m = mix_python(c, h, uips, nu, py, mix);

		if (m < 0)
			return m;
		for (int i = m - 1; i >= 0; i--)
			locs[nl++] = mix[i];
	} else {
		/* Root first: outermost user frame ... user leaf, outermost kernel frame ... leaf. */
		for (int i = nu - 1; i >= 0; i--) {
			err = proc_tracker__location(c->tracker, h->pid, uips[i], i > 0, &locs[nl],
						     h->ts);
			if (err)
				return err;
			nl++;
		}
	}
	err = name_jit(c->p, locs + ustart, nl - ustart);
	if (err)
		return err;
	if (st->kstack_n && !c->kernel_seen) {
		c->kernel_seen = true;
		if (c->on_kernel_frames)
			c->on_kernel_frames(c->arg);
	}
	for (int i = st->kstack_n - 1; i >= 0; i--) {
		int64_t l = profile__location(c->p, c->kernel_obj, ips[i] - (i > 0));

		if (l < 0)
			return l;
		locs[nl++] = l;
	}
	if (st->kstack_err)
		c->p->stats[STAT_KSTACK_ERR]++;
	if (st->ustack_err)
		c->p->stats[STAT_USTACK_ERR]++;
	return nl ? profile__stack_hint(c->p, h->tid, locs, nl) : 0;
}

/*
 * The Python part at the end of an event with a stack (STACK_F_PYTHON):
 * frame records and a trailer, the last bytes of the avail bytes after st.
 * Shrinks *avail to the stack part and fills py (py->n = 0 with the hooks
 * off). Returns 0, -EINVAL (malformed) or -ENOMEM.
 */
static int stack_python(struct event_ctx *c, const struct ev_hdr *h, const struct ev_stack *st,
			size_t *avail, struct py_part *py)
{
	static uint32_t locs[PY_MAX_FRAMES + 1];
	static uint8_t entry[PY_MAX_FRAMES + 1];
	static struct py_frame_rec recs[PY_MAX_FRAMES];
	const uint8_t *end = (const uint8_t *)(st + 1) + *avail;
	struct py_trailer tr;
	uint32_t nrec;
	size_t bytes;
	int n;

	py->n = 0;
	if (*avail < sizeof(tr))
		return -EINVAL;
	memcpy(&tr, end - sizeof(tr), sizeof(tr));
	nrec = tr.n & ~PY_TRAILER_TRUNC;
	bytes = (size_t)nrec * sizeof(struct py_frame_rec) + sizeof(tr);
	if (tr.magic != PY_TRAILER_MAGIC || nrec > PY_MAX_FRAMES || bytes > *avail)
		return -EINVAL;
	*avail -= bytes;
	if (!c->py_frames || !nrec)
		return 0;
	memcpy(recs, end - bytes, nrec * sizeof(*recs));
	n = c->py_frames(c->py_arg, h->pid, recs, nrec, locs, entry);
	if (n < 0)
		return n == -ENOMEM ? n : 0;
	if (n > 0 && (tr.n & PY_TRAILER_TRUNC)) {
		/*
		 * Outer Python frames were left out: the marker goes right above the
		 * last frame walked, in its eval frame's group (or, when that frame
		 * began its eval call, in place of the next eval frame).
		 */
		int64_t l = profile__special(c->p, "[python: truncated]");

		if (l < 0)
			return (int)l;
		locs[n] = l;
		entry[n++] = 0;
	}
	py->locs = locs;
	py->entry = entry;
	py->n = n;
	return 0;
}

int64_t events_stack(struct event_ctx *c, const struct ev_hdr *h, const struct ev_stack *st,
		     size_t avail, int skip_user)
{
	struct py_part py = { 0 };
	int err;

	if (h->flags & STACK_F_PYTHON) {
		err = stack_python(c, h, st, &avail, &py);
		if (err)
			return err;
	}
	return stack_node(c, h, st, avail, skip_user, &py);
}

/*
 * A sample's Python part (SAMPLE_F_PYTHON): its frames, and whether the thread
 * held the GIL. Shrinks *avail to the stack part. Returns 0 or -errno.
 */
static int sample_python(struct event_ctx *c, const struct ev_sample *e, size_t *avail,
			 struct py_part *py)
{
	int err = stack_python(c, &e->h, &e->st, avail, py);

	if (err)
		return err;
	if (py->n)
		c->p->stats[STAT_PY_SAMPLES]++;
	if (c->py_frames && (e->h.flags & SAMPLE_F_PY_GIL_KNOWN)) {
		/* Whether the thread held the GIL: a marker frame at the root (docs/python.md). */
		int64_t l = profile__special(c->p, e->h.flags & SAMPLE_F_PY_GIL ? PY_GIL_HELD
									     : PY_GIL_NOT_HELD);

		if (l < 0)
			return (int)l;
		py->root = (uint32_t)l;
		py->has_root = true;
	}
	return 0;
}

void events_note_thread(struct event_ctx *c, uint32_t pid, uint32_t tid, const char *comm16,
			uint64_t ts)
{
	if (comm16)
		set_thread_comm(c, pid, tid, comm16);
	else if (!profile__thread(c->p, pid, tid, false))
		profile__thread(c->p, pid, tid, true);
	if (!profile__proc(c->p, pid, false))
		events_read_proc_info(c, pid, ts);
}

static int handle_sample(struct event_ctx *c, const struct ev_sample *e, size_t size)
{
	struct py_part py = { 0 };
	struct sample s = { 0 };
	size_t avail;
	int64_t node;
	int err;

	if (size < sizeof(*e))
		return -EINVAL;
	if (events_before_launch_go(c, e->h.pid, e->h.ts))
		return 0;
	avail = size - sizeof(*e);
	if (e->h.flags & SAMPLE_F_PYTHON) {
		err = sample_python(c, e, &avail, &py);
		if (err)
			return err;
	}
	node = stack_node(c, &e->h, &e->st, avail, 0, &py);
	if (node < 0)
		return (int)node;
	s.ts = e->h.ts;
	s.pid = e->h.pid;
	s.tid = e->h.tid;
	s.cpu = e->cpu;
	s.stack = node;
	s.weight = e->period;
	events_note_thread(c, e->h.pid, e->h.tid, e->comm, e->h.ts);
	c->samples++;
	if (!c->first_ts || e->h.ts < c->first_ts)
		c->first_ts = e->h.ts;
	if (e->h.ts > c->last_ts)
		c->last_ts = e->h.ts;
	return profile__add_sample(c->p, &s);
}

static int handle_fork(struct event_ctx *c, const struct ev_fork *e)
{
	struct process *pr = profile__proc(c->p, e->h.pid, true);
	struct process *parent = profile__proc(c->p, e->ppid, false);
	char comm[EPROF_TASK_COMM_LEN + 1];

	if (!pr)
		return -ENOMEM;
	comm_copy(comm, e->comm);
	pr->ppid = e->ppid;
	pr->start_ts = e->h.ts;
	pr->comm = profile__intern(c->p, comm);
	if (parent)
		pr->cmdline = parent->cmdline;
	/* The child shares the parent's mappings until it execs. */
	proc_tracker__fork(c->tracker, e->ppid, e->h.pid, e->h.ts);
	return 0;
}

static int handle_exec(struct event_ctx *c, const struct ev_exec *e)
{
	struct process *pr;
	char comm[EPROF_TASK_COMM_LEN + 1];

	events_read_proc_info(c, e->h.pid, e->h.ts);
	pr = profile__proc(c->p, e->h.pid, true);
	if (!pr)
		return -ENOMEM;
	comm_copy(comm, e->comm);
	pr->comm = profile__intern(c->p, comm);
	if (!pr->cmdline) {
		char fn[EPROF_PATH_LEN + 1];

		memcpy(fn, e->filename, EPROF_PATH_LEN);
		fn[EPROF_PATH_LEN] = '\0';
		pr->cmdline = profile__intern(c->p, fn);
	}
	proc_tracker__exec(c->tracker, e->h.pid, e->h.ts);
	if (e->h.pid == c->launch_pid && !c->launch_exec_ns)
		c->launch_exec_ns = e->h.ts;
	return 0;
}

static int handle_exit(struct event_ctx *c, const struct ev_exit *e)
{
	struct process *pr = profile__proc(c->p, e->h.pid, true);

	if (!pr)
		return -ENOMEM;
	pr->exit_ts = e->h.ts;
	pr->exit_code = e->exit_code;
	proc_tracker__exit(c->tracker, e->h.pid);
	if (c->on_exit)
		c->on_exit(c->arg, e->h.pid, e->exit_code);
	return 0;
}

static uint64_t mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int handle_one(struct event_ctx *c, const void *data, size_t size);

int events_handle(struct event_ctx *c, const void *data, size_t size)
{
	const struct ev_hdr *h = data;
	unsigned cls = size < sizeof(*h)	? EV_COST_PROC
		       : h->kind == EV_SAMPLE ? EV_COST_SAMPLE
		       : h->kind == EV_FORK || h->kind == EV_EXEC || h->kind == EV_EXIT
			   ? EV_COST_PROC
			   : EV_COST_FEATURE;
	uint64_t t0 = mono_now();
	int err = handle_one(c, data, size);

	c->decode_ns[cls] += mono_now() - t0;
	c->decoded[cls]++;
	return err;
}

static int handle_one(struct event_ctx *c, const void *data, size_t size)
{
	const struct ev_hdr *h = data;
	int err = -EINVAL;

	if (size < sizeof(*h) || h->size > size)
		goto bad;
	switch (h->kind) {
	case EV_SAMPLE:
		err = handle_sample(c, data, h->size);
		break;
	case EV_FORK:
		if (h->size >= sizeof(struct ev_fork))
			err = handle_fork(c, data);
		break;
	case EV_EXEC:
		if (h->size >= sizeof(struct ev_exec))
			err = handle_exec(c, data);
		break;
	case EV_EXIT:
		if (h->size >= sizeof(struct ev_exit))
			err = handle_exit(c, data);
		break;
	default:
		/* Feature events (memory, off-CPU, regions, CUDA, Python): their own decoders. */
		for (size_t i = 0; i < c->nhandlers; i++)
			if (h->kind >= c->handlers[i].first && h->kind <= c->handlers[i].last) {
				err = c->handlers[i].fn(c, c->handlers[i].arg, data, h->size);
				break;
			}
		break;
	}
	if (err == -ENOMEM)
		return err;
	if (!err)
		return 0;
bad:
	c->p->stats[STAT_DECODE_ERR]++;
	return 0;
}

int events_add_handler(struct event_ctx *c, uint16_t first, uint16_t last, event_handler_fn fn,
		       void *arg)
{
	if (c->nhandlers >= EVENTS_MAX_HANDLERS)
		return -ENOSPC;
	c->handlers[c->nhandlers].first = first;
	c->handlers[c->nhandlers].last = last;
	c->handlers[c->nhandlers].fn = fn;
	c->handlers[c->nhandlers].arg = arg;
	c->nhandlers++;
	return 0;
}
