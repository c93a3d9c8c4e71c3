/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * I/O by stack (record --io): every read-, write-, send- and receive-like system call of a
 * target thread, with its bytes, its time and the caller's user stack (Python frames
 * included), and what the fd is: a path, a pipe, a socket and its peer.
 *
 * Only tracepoints (kprobes and fentry are not on every kernel eprof runs on): the raw
 * sys_enter notes the call's start and fd in task storage for the calls of interest;
 * sys_exit, still in the calling thread with its user stack as it made the call, sends one
 * event. Both run for every system call of the machine while --io is on (the kernel puts
 * every task on its traced syscall path): the first thing each does is a switch on the
 * call number, so the calls of no interest cost that path and a few instructions.
 *
 * The fd is resolved in BPF, not from /proc at decode time: a file read and closed within
 * the recorder's 50 ms poll would be gone. The path walk is paid once per (process, fd,
 * file): an LRU map remembers what each fd of a process was last described as.
 */
#ifndef EPROF_IO_BPF_H
#define EPROF_IO_BPF_H

#include "common.bpf.h"
#include "python.bpf.h"
#include <bpf/bpf_endian.h>

const volatile __u32 io_stack_bytes = 0; /* user stack copy for DWARF; 0 = frame pointers */
const volatile __u64 io_stack_rate = 0;	 /* stacks per second and CPU at most; 0 = all */

struct io_task {
	__u64 ts; /* the pending call's entry; 0 = none */
	__u32 fd;
	__u16 call; /* enum io_call */
	__u16 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct io_task);
} io_tasks SEC(".maps");

struct io_fd_key {
	__u32 tgid, fd;
};

struct io_fd_val {
	__u64 file, ino;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct io_fd_key);
	__type(value, struct io_fd_val);
} io_fds SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ev_io_file);
} io_filebuf SEC(".maps");

/* Token bucket per CPU for stacks, as offcpu's: a storm of tiny calls costs times, not stacks. */
struct io_bucket {
	__u64 last_ns;
	__u64 tokens;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct io_bucket);
} io_budget SEC(".maps");

static __always_inline bool io_take_stack(__u64 now)
{
	/* One second of calls may come at once: a burst of reads gets its stacks. */
	const __u64 one = 1000000000ULL, burst = one * (io_stack_rate > 64 ? io_stack_rate : 64);
	struct io_bucket *bk;
	__u32 k = 0;

	if (!io_stack_rate)
		return true;
	bk = bpf_map_lookup_elem(&io_budget, &k);
	if (!bk)
		return true;
	if (now > bk->last_ns) {
		__u64 add = (now - bk->last_ns) * io_stack_rate;

		bk->tokens = add >= burst || bk->tokens + add >= burst ? burst : bk->tokens + add;
	}
	bk->last_ns = now;
	if (bk->tokens < one)
		return false;
	bk->tokens -= one;
	return true;
}

/* The calls of interest by number; 0 for the rest. Multi-message calls return counts. */
static __always_inline __u16 io_call_of(long nr)
{
#if defined(__TARGET_ARCH_x86)
	switch (nr) {
	case 0: return IO_READ;
	case 1: return IO_WRITE;
	case 17: return IO_PREAD;
	case 18: return IO_PWRITE;
	case 19: return IO_READV;
	case 20: return IO_WRITEV;
	case 40: return IO_SENDFILE;
	case 44: return IO_SENDTO;
	case 45: return IO_RECVFROM;
	case 46: return IO_SENDMSG;
	case 47: return IO_RECVMSG;
	case 295: return IO_PREADV;
	case 296: return IO_PWRITEV;
	case 327: return IO_PREADV; /* preadv2 */
	case 328: return IO_PWRITEV; /* pwritev2 */
	}
#endif
	return 0;
}

static __always_inline long io_syscall_nr(struct pt_regs *regs)
{
#if defined(__TARGET_ARCH_x86)
	return BPF_CORE_READ(regs, orig_ax);
#else
	return -1;
#endif
}

SEC("?tp_btf/sys_enter")
int BPF_PROG(io_enter, struct pt_regs *regs, long id)
{
	__u16 call = io_call_of(id);
	struct io_task *s;

	if (!call || !is_target(bpf_get_current_pid_tgid() >> 32))
		return 0;
	s = bpf_task_storage_get(&io_tasks, bpf_get_current_task_btf(), NULL,
				 BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!s) {
		stat_inc(BSTAT_IO_NO_STORAGE);
		return 0;
	}
	s->ts = bpf_ktime_get_ns();
	s->fd = PT_REGS_PARM1_CORE_SYSCALL(regs);
	s->call = call;
	return 0;
}

/* task is a trusted BTF pointer: direct loads, one helper call for the array slot. */
static __always_inline struct file *io_fd_file(struct task_struct *task, __u32 fd)
{
	struct files_struct *files = task->files;
	struct fdtable *fdt = files ? files->fdt : NULL;
	struct file *f = NULL;

	if (!fdt || fd >= fdt->max_fds)
		return NULL;
	if (bpf_probe_read_kernel(&f, sizeof(f), &fdt->fd[fd]))
		return NULL;
	return f;
}

#define IO_S_IFMT 0170000
#define IO_S_IFSOCK 0140000
#define IO_S_IFREG 0100000
#define IO_S_IFBLK 0060000
#define IO_S_IFDIR 0040000
#define IO_S_IFCHR 0020000
#define IO_S_IFIFO 0010000

static __always_inline __u16 io_file_type(__u32 mode)
{
	switch (mode & IO_S_IFMT) {
	case IO_S_IFREG: return IO_FT_REG;
	case IO_S_IFIFO: return IO_FT_PIPE;
	case IO_S_IFSOCK: return IO_FT_SOCK;
	case IO_S_IFCHR: return IO_FT_CHR;
	case IO_S_IFBLK: return IO_FT_BLK;
	case IO_S_IFDIR: return IO_FT_DIR;
	}
	return IO_FT_OTHER;
}

/* The path walk, one component per bpf_loop step: the verifier checks the step once. */
struct io_walk {
	struct ev_io_file *e;
	struct dentry *d;
	struct mount *mnt;
	__u32 pos;
};

static long io_path_step(__u64 i, void *arg)
{
	struct io_walk *w = arg;
	struct dentry *d = w->d, *parent = BPF_CORE_READ(d, d_parent);
	struct mount *mnt = w->mnt;
	struct ev_io_file *e = w->e;
	const unsigned char *name;
	__u32 pos = w->pos;
	long n;

	if (d == BPF_CORE_READ(mnt, mnt.mnt_root)) {
		struct mount *up = BPF_CORE_READ(mnt, mnt_parent);

		if (up == mnt)
			return 1;
		w->d = BPF_CORE_READ(mnt, mnt_mountpoint);
		w->mnt = up;
		return 0;
	}
	if (d == parent || !parent)
		return 1;
	asm volatile("" : "+r"(pos));
	if (pos > EPROF_IO_PATH - IO_PATH_COMP) {
		e->flags |= IO_FILE_F_TRUNC;
		return 1;
	}
	name = BPF_CORE_READ(d, d_name.name);
	n = bpf_probe_read_kernel_str(e->path + pos, IO_PATH_COMP, name);
	if (n <= 0)
		return 1;
	w->pos = pos + n;
	e->ncomp++;
	w->d = parent;
	return 0;
}

/* The path's components, leaf first, up to the global root (crossing mounts). */
static __always_inline void io_path(struct ev_io_file *e, struct file *file)
{
	struct vfsmount *vm = BPF_CORE_READ(file, f_path.mnt);
	struct io_walk w = {
		.e = e,
		.d = BPF_CORE_READ(file, f_path.dentry),
		.mnt = (void *)vm - bpf_core_field_offset(struct mount, mnt),
	};

	if (bpf_loop(IO_PATH_DEPTH, io_path_step, &w, 0) == IO_PATH_DEPTH)
		e->flags |= IO_FILE_F_TRUNC;
	e->path_len = w.pos;
}

#define IO_AF_UNIX 1
#define IO_AF_INET 2
#define IO_AF_INET6 10

/* A Unix socket's bound path (its peer's when it has none), as raw sun_path bytes. */
static __always_inline void io_unix_addr(struct ev_io_file *e, struct sock *sk)
{
	struct unix_sock *u = (void *)sk;
	struct unix_address *a = BPF_CORE_READ(u, addr);
	struct sock *peer = BPF_CORE_READ(u, peer);
	int len;

	if (peer) {
		struct unix_address *pa = BPF_CORE_READ((struct unix_sock *)peer, addr);

		if (pa)
			a = pa;
	}
	if (!a)
		return;
	len = BPF_CORE_READ(a, len) - (int)sizeof(__u16);
	if (len <= 0)
		return;
	if (len > 108)
		len = 108;
	if (bpf_probe_read_kernel(e->path, 108, &a->name[0].sun_path))
		return;
	e->path_len = len;
}

static __always_inline void io_sock(struct ev_io_file *e, struct file *file)
{
	struct socket *sock = BPF_CORE_READ(file, private_data);
	struct sock *sk = BPF_CORE_READ(sock, sk);

	if (!sk)
		return;
	e->family = BPF_CORE_READ(sk, __sk_common.skc_family);
	e->protocol = BPF_CORE_READ(sk, sk_protocol);
	if (e->family == IO_AF_INET) {
		__u32 l = BPF_CORE_READ(sk, __sk_common.skc_rcv_saddr);
		__u32 r = BPF_CORE_READ(sk, __sk_common.skc_daddr);

		__builtin_memcpy(e->laddr, &l, 4);
		__builtin_memcpy(e->raddr, &r, 4);
	} else if (e->family == IO_AF_INET6) {
		BPF_CORE_READ_INTO(&e->laddr, sk, __sk_common.skc_v6_rcv_saddr);
		BPF_CORE_READ_INTO(&e->raddr, sk, __sk_common.skc_v6_daddr);
	} else if (e->family == IO_AF_UNIX) {
		e->protocol = BPF_CORE_READ(sock, type);
		io_unix_addr(e, sk);
		return;
	} else {
		return;
	}
	e->lport = BPF_CORE_READ(sk, __sk_common.skc_num);
	e->rport = bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
}

/* Describes fd of the current process unless this file was described for it already. */
static __always_inline void io_note_file(__u64 id, __u32 fd, struct file *file)
{
	struct io_fd_key k = { .tgid = id >> 32, .fd = fd };
	struct inode *inode = BPF_CORE_READ(file, f_inode);
	struct io_fd_val v = { .file = (__u64)file, .ino = BPF_CORE_READ(inode, i_ino) };
	struct io_fd_val *old = bpf_map_lookup_elem(&io_fds, &k);
	struct ev_io_file *e;
	__u32 zero = 0, size;

	if (old && old->file == v.file && old->ino == v.ino)
		return;
	e = bpf_map_lookup_elem(&io_filebuf, &zero);
	if (!e)
		return;
	fill_hdr(&e->h, EV_IO_FILE, id);
	e->file = v.file;
	e->ino = v.ino;
	e->dev = BPF_CORE_READ(inode, i_sb, s_dev);
	e->fd = fd;
	e->type = io_file_type(BPF_CORE_READ(inode, i_mode));
	e->family = e->protocol = e->flags = e->lport = e->rport = 0;
	e->ncomp = e->path_len = 0;
	__builtin_memset(e->laddr, 0, sizeof(e->laddr));
	__builtin_memset(e->raddr, 0, sizeof(e->raddr));
	if (e->type == IO_FT_SOCK)
		io_sock(e, file);
	else if (e->type != IO_FT_PIPE)
		io_path(e, file);
	size = __builtin_offsetof(struct ev_io_file, path) + e->path_len;
	if (size > sizeof(*e))
		size = sizeof(*e);
	e->h.size = size;
	if (bpf_ringbuf_output(&events, e, size, BPF_RB_NO_WAKEUP)) {
		stat_inc(BSTAT_IO_RB_FULL);
		return;
	}
	bpf_map_update_elem(&io_fds, &k, &v, BPF_ANY);
}

static __always_inline void io_fill(struct ev_io *e, __u64 id, __u64 now, struct io_task *s,
				    long ret, struct file *file)
{
	fill_hdr(&e->h, EV_IO, id);
	e->h.ts = now;
	e->dur = now - s->ts;
	e->bytes = ret;
	e->file = (__u64)file;
	e->fd = s->fd;
	e->call = s->call;
	e->pad = 0;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
}

SEC("?tp_btf/sys_exit")
int BPF_PROG(io_exit, struct pt_regs *regs, long ret)
{
	__u64 id, now, size;
	struct task_struct *task;
	struct py_frbuf *pyf;
	struct scratch_buf *b;
	struct io_task *s;
	struct file *file;
	struct ev_io *e;
	__u32 ubytes;

	if (!io_call_of(io_syscall_nr(regs)))
		return 0;
	task = bpf_get_current_task_btf();
	s = bpf_task_storage_get(&io_tasks, task, NULL, 0);
	if (!s || !s->ts)
		return 0;
	if (ret < 0) {
		stat_inc(BSTAT_IO_ERRORS);
		s->ts = 0;
		return 0;
	}
	stat_inc(BSTAT_IO_CALLS);
	id = bpf_get_current_pid_tgid();
	now = bpf_ktime_get_ns();
	file = io_fd_file(task, s->fd);
	if (file)
		io_note_file(id, s->fd, file);
	if (!io_take_stack(now)) {
		/* Over the rate: straight into the ring, no scratch copy. */
		stat_inc(BSTAT_IO_NO_STACK);
		e = reserve_event(sizeof(*e), BSTAT_IO_RB_FULL);
		if (e) {
			io_fill(e, id, now, s, ret, file);
			__builtin_memset(&e->st, 0, sizeof(e->st));
			e->h.flags |= IO_EVF_NO_STACK;
			e->h.size = sizeof(*e);
			bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
		}
		s->ts = 0;
		return 0;
	}
	b = scratch_get(SLOT_OTHER);
	if (!b) {
		s->ts = 0;
		return 0;
	}
	e = (struct ev_io *)b->data;
	io_fill(e, id, now, s, ret, file);
	s->ts = 0;
	ubytes = io_stack_bytes;
	pyf = py_event_walk(id, SLOT_OTHER, &ubytes);
	/* No kernel stack: at sys_exit it is the exit path, the same for every call. */
	size = capture_stack(ctx, b, sizeof(*e), &e->h, &e->st, false, ubytes);
	if (size && pyf)
		size = py_append(b, size, &e->h, pyf);
	if (size)
		send_scratch(b, size, BSTAT_IO_RB_FULL);
	return 0;
}

#endif
