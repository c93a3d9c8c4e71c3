/* SPDX-License-Identifier: MIT */
/*
 * The one ABI header shared by BPF programs and userspace: event layouts in
 * the ring buffer. Only __u8..__u64 here; userspace checks sizes with
 * _Static_assert in src/record/events.c.
 */
#ifndef EPROF_ABI_H
#define EPROF_ABI_H

#ifndef EPROF_MAX_STACK
#define EPROF_MAX_STACK 127 /* kernel.perf_event_max_stack default */
#endif
#ifndef EPROF_MAX_SNAPSHOT
#define EPROF_MAX_SNAPSHOT (64 * 1024) /* largest user stack copy for DWARF unwinding */
#endif
#define EPROF_SCRATCH_SLOTS 4 /* scratch buffers per CPU (bpf/common.bpf.h) */
#ifndef EPROF_TASK_COMM_LEN
#define EPROF_TASK_COMM_LEN 16
#endif
#ifndef EPROF_PATH_LEN
#define EPROF_PATH_LEN 256
#endif

enum eprof_event_kind {
	EV_SAMPLE = 1,
	EV_FORK = 2,
	EV_EXEC = 3,
	EV_EXIT = 4,
	EV_LOST = 5,	      /* reserved */
	/* memory (bpf/mem.bpf.h): 16..31 */
	EV_MEM_FIRST = 16,
	EV_MEM_ALLOC = 16,  /* struct ev_mem_alloc */
	EV_MEM_FREE = 17,   /* struct ev_mem_free */
	EV_MEM_MMAP = 18,   /* struct ev_mem_map */
	EV_MEM_MUNMAP = 19, /* struct ev_mem_map */
	EV_MEM_BRK = 20,    /* struct ev_mem_map: addr = break before, len = break after */
	EV_MEM_MREMAP = 21, /* struct ev_mem_remap */
	EV_MEM_LAST = 31,
	/* off-CPU and wakeups (bpf/offcpu.bpf.h): 32..39 */
	EV_OFFCPU_FIRST = 32,
	EV_OFFCPU = 32,	      /* struct ev_offcpu: one blocked interval, sent when it ends */
	EV_OFFCPU_WAKE = 33,  /* struct ev_offcpu_wake: the waker's stack, sent at the wakeup */
	EV_OFFCPU_LAST = 39,
	/* regions: uprobe pairs, USDT, NVTX (bpf/region.bpf.h): 40..47 */
	EV_REGION_FIRST = 40,
	/* CUDA API (bpf/cuda.bpf.h): 48..63 */
	EV_CUDA_FIRST = 48,
	/* Python frames (bpf/python.bpf.h): 64..71 */
	EV_PY_FIRST = 64,
	/* I/O by stack (bpf/io.bpf.h): 72..79 */
	EV_IO_FIRST = 72,
	EV_IO = 72,	 /* struct ev_io: one read/write-like call, sent at its return */
	EV_IO_FILE = 73, /* struct ev_io_file: what an fd of a process is, sent when first used */
	EV_IO_LAST = 79,
};

/* Common header of every event: size covers the whole event, header included. */
struct ev_hdr {
	__u32 size;
	__u16 kind;
	__u16 flags;
	__u32 pid; /* tgid */
	__u32 tid;
	__u64 ts; /* CLOCK_MONOTONIC ns (bpf_ktime_get_ns) */
};

/* Flags in ev_hdr.flags of every event that carries a struct ev_stack (bits 0-7). */
enum ev_stack_flags {
	SAMPLE_F_USER_REGS = 1 << 0,   /* user_ip/sp/bp are valid */
	SAMPLE_F_IN_KERNEL = 1 << 1,   /* the CPU was in kernel mode */
	SAMPLE_F_SNAP_TRUNC = 1 << 2,  /* snapshot stopped at its size limit, not at a fault */
	/* Python frame records and a py_trailer end the event (after ips and stack copy) */
	STACK_F_PYTHON = 1 << 3,
};
/* Bits 8-15 of ev_hdr.flags are free for each event kind. */

/*
 * The stack part of an event, always its LAST member: right after it come
 * __u64 ips[kstack_n + ustack_n] (kernel first, each leaf first), then
 * stack_len bytes copied from user_sp upwards when DWARF unwinding is on
 * (ustack_n is then 0: userspace unwinds). Filled by capture_stack() in
 * bpf/common.bpf.h, decoded by events_stack() in src/record/events.c.
 */
struct ev_stack {
	__u64 user_ip, user_sp, user_bp;
	__u16 kstack_n, ustack_n;
	__s32 kstack_err, ustack_err; /* negative errno from bpf_get_stack, or 0 */
	__u32 stack_len;
};

/* A CPU sample. */
struct ev_sample {
	struct ev_hdr h;
	__u64 period; /* ns of CPU this sample stands for */
	__u32 cpu;
	__u32 pad;
	char comm[EPROF_TASK_COMM_LEN];
	struct ev_stack st;
};

struct ev_fork {
	struct ev_hdr h; /* pid/tid: the child */
	__u32 ppid;
	__u32 pad;
	char comm[EPROF_TASK_COMM_LEN];
};

struct ev_exec {
	struct ev_hdr h;
	__u32 old_tid;
	__u32 pad;
	char comm[EPROF_TASK_COMM_LEN];
	char filename[EPROF_PATH_LEN];
};

/*
 * CUDA API (bpf/cuda.bpf.h). The attach cookie of every CUDA uprobe says
 * which function it is and where its interesting arguments are; the
 * uretprobe sends one ev_cuda_api per call (with uprobe sessions, launches
 * past the stack rate send it at entry and skip their return probe).
 */
#define CUDA_ARG_NONE 0xf
enum cuda_class {
	CUDA_CL_OTHER = 0,
	CUDA_CL_LAUNCH = 1, /* stacks rate-limited per thread */
	CUDA_CL_HANDLE = 2, /* sends an ev_cuda_handle: out handle, in handle, name */
};
/* Cookie layout (u64): bits 0-15 function id (userspace table), 16-19 class,
 * 20-23 bytes arg, 24-27 second bytes factor arg, 28-31 kind arg, 32-35 ptr arg,
 * 36-39 out-pointer arg, 40-43 name arg, 44-47 bytes shift. Args >= 6 are read
 * from the user stack. */
#define CUDA_CK_FUNC(c) ((c) & 0xffff)
#define CUDA_CK_CLASS(c) (((c) >> 16) & 0xf)
#define CUDA_CK_ARG(c, shift) (((c) >> (shift)) & 0xf)
#define CUDA_CK_BYTES 20
#define CUDA_CK_BYTES2 24
#define CUDA_CK_KIND 28
#define CUDA_CK_PTR 32
#define CUDA_CK_OUT 36
#define CUDA_CK_NAME 40
#define CUDA_CK_SHIFT 44
#define CUDA_CK_RUNTIME (1ULL << 48) /* a runtime (cuda*) function, not a driver (cu*) one */

enum cuda_ev_flags {
	CUDA_EVF_NESTED = 1 << 8,  /* called from inside another traced CUDA call */
	CUDA_EVF_NOSTACK = 1 << 9, /* stack left out by the rate limit */
	CUDA_EVF_NORET = 1 << 10,  /* sent at entry, return not probed: no duration or result */
};

enum {
	EV_CUDA_API = 48,
	EV_CUDA_HANDLE = 49,
};

struct ev_cuda_api {
	struct ev_hdr h; /* ts: entry */
	__u64 dur;
	__s64 result;
	__u64 bytes;
	__u64 ptr;  /* launch: host stub or function handle; free: address */
	__u64 out;  /* value left in *out-pointer arg at return (allocation address) */
	__u32 kind; /* cudaMemcpyKind argument where there is one */
	__u16 func; /* function id */
	__u16 pad;
	struct ev_stack st;
};

#ifndef EPROF_CUDA_NAME_LEN
#define EPROF_CUDA_NAME_LEN 256
#endif

struct ev_cuda_handle {
	struct ev_hdr h;
	__u64 out; /* new handle (CUfunction, CUkernel) */
	__u64 in;  /* the handle it was made from (cuKernelGetFunction), or 0 */
	__s64 result;
	__u16 func;
	__u16 pad[3];
	char name[EPROF_CUDA_NAME_LEN];
};

struct ev_exit {
	struct ev_hdr h;
	__s32 exit_code; /* wait status style: code << 8 | signal */
	__u32 group_dead;
	char comm[EPROF_TASK_COMM_LEN];
};

/*
 * Memory: a sampled allocation, sent from the allocator's return with the
 * caller's stack (the leaf is the return address into the caller).
 */
struct ev_mem_alloc {
	struct ev_hdr h;
	__u64 addr;
	__u64 size;
	__u32 func; /* enum mem_func */
	__u32 pad;  /* MEM_HOW_INTERPOSED: from libeprof_mem.so's marker (stack starts there) */
	struct ev_stack st;
};

/* A free (or realloc) of an address recorded by an ev_mem_alloc. */
struct ev_mem_free {
	struct ev_hdr h;
	__u64 addr;
	__u64 size; /* size recorded at allocation */
};

/*
 * libeprof_mem.so's own memory (its tables, buffers, the stack arena of --mem=1) is mapped
 * with this file offset, which the kernel ignores for an anonymous mapping: mem_sys_enter
 * leaves such a mapping out of the target's anonymous-mapping figures (it is eprof's, not the
 * program's; RSS still counts its touched pages). Page-aligned.
 */
#define EPROF_MEM_OWN_MAP_OFF 0x65707266000ULL

/* An anonymous mmap or a munmap of a target. */
struct ev_mem_map {
	struct ev_hdr h;
	__u64 addr;
	__u64 len;
};

/* A successful mremap of a target (any mapping: the reader knows which were anonymous). */
struct ev_mem_remap {
	struct ev_hdr h;
	__u64 old_addr, old_len;
	__u64 new_addr, new_len;
};

#define MEM_HOW_INTERPOSED 1
/* Cookies of the uprobes on libeprof_mem.so's markers (src/agent/eprof_mem_proto.h). */
#define MEM_HIT_ALLOC 0
#define MEM_HIT_FREE 1
#define MEM_HIT_FREES 2	 /* a batch of timed frees (every-call mode) */
#define MEM_FREE_BATCH 128 /* at most, in one batch (EMEM_FREE_BATCH) */

/* The allocator entry points, as the uprobe cookie. */
enum mem_func {
	MEM_MALLOC = 0,
	MEM_CALLOC,
	MEM_REALLOC,
	MEM_REALLOCARRAY,
	MEM_POSIX_MEMALIGN,
	MEM_ALIGNED_ALLOC,
	MEM_MEMALIGN,
	MEM_VALLOC,
	MEM_PVALLOC,
	MEM_FREE,
	MEM_NFUNCS,
};

/* State of a thread in a blocked interval: ev_offcpu.state and EVK_OFFCPU flags bits 0-3. */
enum offcpu_state {
	OFFCPU_SLEEP = 1,    /* TASK_INTERRUPTIBLE: waiting for an event, a lock, a timer */
	OFFCPU_DISK = 2,     /* TASK_UNINTERRUPTIBLE: disk I/O, some kernel locks */
	OFFCPU_RUNNABLE = 3, /* preempted: ready, waiting for a CPU */
	OFFCPU_NEW = 4,	     /* a new thread from its creation to its first run */
	OFFCPU_OTHER = 5,    /* stopped, traced, dead ... */
};
#define OFFCPU_STATE_MASK 0xf
#define OFFCPU_F_IRQ_WAKE 0x10 /* woken from interrupt context: timer, I/O completion */
#define OFFCPU_F_NO_STACK 0x20 /* over the stack budget: no stacks captured */
/* Not picked by the time sampling (--offcpu-sample-us): no stacks; the picked ones stand for it. */
#define OFFCPU_F_UNSAMPLED 0x40
#define OFFCPU_F_FUTEX 0x80 /* went off CPU in a futex wait: a user-space lock or condition */
/*
 * Not picked at its wakeup, but its wait for a CPU after it was, by a second draw on that
 * wait's length: its stacks stand for the runnable part only (the blocked part is unsampled).
 */
#define OFFCPU_F_TAIL 0x100

/*
 * A blocked interval of a target thread: off at off_ts (sched_switch), made
 * runnable at wake_ts (sched_waking; = off_ts when preempted; 0 unknown) by
 * waker_tid (0: an interrupt or an unseen waker), running again at h.ts.
 * The stack is the thread's own, captured as it resumes (it is unchanged
 * since it blocked), so only intervals >= the minimum pay for a stack.
 */
struct ev_offcpu {
	struct ev_hdr h;
	__u64 off_ts, wake_ts;
	__u32 waker_pid, waker_tid;
	__u16 state, wflags;
	__u32 pad;
	struct ev_stack st;
};

/* The waker's stack, captured in the waker as it wakes a thread that blocked >= the minimum. */
struct ev_offcpu_wake {
	struct ev_hdr h; /* pid/tid: the waker; ts: the wakeup */
	__u64 wakee_off_ts;
	__u32 wakee_pid, wakee_tid;
	struct ev_stack st;
};

/*
 * Regions (bpf/region.bpf.h): each attached probe has a cookie, an index into
 * the region_probes map, that says which region pair it belongs to and
 * whether it begins or ends it. One event per region, sent at its end.
 */
#define EV_REGION (EV_REGION_FIRST + 0)
#ifndef EPROF_REGION_DEPTH
#define EPROF_REGION_DEPTH 32 /* open regions per thread; a power of two */
#endif
#ifndef EPROF_REGION_LABEL
#define EPROF_REGION_LABEL 48 /* bytes of a name read from the target (USDT, NVTX) */
#endif

enum region_op {
	REGION_OP_BEGIN = 1,
	REGION_OP_END = 2,
};

enum region_arg_kind {
	REGION_ARG_NONE = 0,  /* no name argument */
	REGION_ARG_REG = 1,   /* the name pointer is in a register */
	REGION_ARG_DEREF = 2, /* ... at register + offset in memory */
	REGION_ARG_INTS = 3,  /* integer arguments kept (a collective's count, type, comm) */
};

struct region_probe {
	__u32 pair;	   /* region pair id (userspace's table), shared by begin and end */
	__u8 op;	   /* enum region_op */
	__u8 arg_kind;	   /* enum region_arg_kind: where a BEGIN finds its name string */
	__u16 arg_reg_off; /* offset of the register in struct pt_regs */
	__s64 arg_off;	   /* REGION_ARG_DEREF: offset added to the register; REGION_ARG_INTS:
			      byte i = the position (1-8, 0 none) of the argument kept as args[i] */
};

#define REGION_NARGS 3 /* integer arguments a REGION_ARG_INTS begin keeps */

/* Flags of an ev_region (bits 8-15 of ev_hdr.flags). */
enum ev_region_flags {
	REGION_F_OPEN = 1 << 8, /* still open when the record stopped: dur runs to then */
	REGION_F_SAMPLED = 1 << 9, /* a Python region seen by sampling (--region py:FUNC) */
	REGION_F_ARGS = 1 << 10,   /* args[] holds a REGION_ARG_INTS begin's arguments, not a name */
};

struct ev_region {
	struct ev_hdr h; /* ts: the region's start */
	__u64 dur;
	__u32 pair;	 /* region pair id */
	__u16 depth;	 /* regions open on the thread around this one (0 = outermost) */
	__u16 label_len; /* bytes of label used */
	__u64 label_addr; /* where the name string is in the target, 0 = none */
	union {
		char label[EPROF_REGION_LABEL];
		__u64 args[REGION_NARGS]; /* REGION_F_ARGS */
	};
};

/*
 * Python frames (bpf/python.bpf.h). Any event with a struct ev_stack (a CPU
 * sample, an allocation, an off-CPU interval or its waker, a CUDA call) taken
 * in a thread of a detected CPython process carries STACK_F_PYTHON and, after
 * its stack part (ips and stack copy), n struct py_frame_rec, leaf first, then
 * struct py_trailer as the event's last 8 bytes. The GIL bits are set on
 * samples only.
 */
#define SAMPLE_F_PYTHON STACK_F_PYTHON
#define SAMPLE_F_PY_GIL_KNOWN (1 << 9) /* the GIL was readable: SAMPLE_F_PY_GIL says who held it */
#define SAMPLE_F_PY_GIL (1 << 10)      /* the sampled thread held the GIL */
#define PY_MAX_FRAMES 128
#define PY_TRAILER_TRUNC (1u << 31) /* in py_trailer.n: the walk stopped at PY_MAX_FRAMES */
#define PY_TRAILER_MAGIC 0x50594652 /* "PYFR" */
#define PY_NONE 0xffff		    /* an offset that does not exist in this version */

struct py_frame_rec {
	__u64 code;  /* code object address; bit 0: the first frame of its eval call (entry) */
	__u64 instr; /* prev_instr (3.11, 3.12) or instr_ptr (3.13+) */
};

struct py_trailer {
	__u32 n; /* records, | PY_TRAILER_TRUNC when frames were left out */
	__u32 magic;
};

/* Layout of one interpreter, per target process (map py_procs), offsets in bytes. */
struct py_proc {
	__u32 version;	    /* PY_VERSION_HEX */
	__u16 ts_cframe;    /* PyThreadState.cframe (3.11, 3.12), or PY_NONE */
	__u16 cf_frame;	    /* _PyCFrame.current_frame */
	__u16 ts_frame;	    /* PyThreadState.current_frame (3.13+) */
	__u16 fr_previous;  /* _PyInterpreterFrame.previous */
	__u16 fr_code;	    /* f_code / f_executable */
	__u16 fr_instr;	    /* prev_instr / instr_ptr */
	__u16 fr_owner;	    /* owner (char) */
	__u16 fr_is_entry;  /* is_entry (bool, 3.11), or PY_NONE */
	__u16 owner_cstack; /* FRAME_OWNED_BY_CSTACK (3.12+), or PY_NONE */
	/* code objects and str objects, for --region py:FUNC (names compared in BPF) */
	__u16 co_qualname;  /* co_qualname (co_name before 3.11) */
	__u16 co_filename;
	__u16 str_state;    /* PyASCIIObject.state */
	__u16 str_length;   /* PyASCIIObject.length */
	__u16 str_ascii;    /* where the characters of a compact ASCII str start */
	/* the GIL (struct _gil_runtime_state), for SAMPLE_F_PY_GIL* */
	__u16 gil_locked;   /* int locked: 1 when taken */
	__u16 gil_holder;   /* PyThreadState *last_holder */
	__u16 fr_read;	    /* frame bytes to read (< 128): all fields used lie in them */
	__u16 pflags;	    /* enum py_proc_flags */
	__u64 gil;	    /* its address in the target, 0 = not known (yet) */
};

enum py_proc_flags {
	/* 3.10: each interpreter frame (PyFrameObject) is its own _PyEval_EvalFrameDefault call */
	PY_PF_ALL_ENTRY = 1 << 0,
	/*
	 * 3.10: the thread state knows its pthread_t (the thread's TLS base: fsbase on
	 * x86-64), not its tid: py_threads_fs is keyed by it
	 */
	PY_PF_TS_FSBASE = 1 << 1,
};

/*
 * --region py:FUNC: each FUNC gives one candidate per way of splitting it
 * into [MODULE.]QUALNAME; a code object matches when its qualified name is
 * qual and, if file_len, its file name ends with file ("pkg/mod.py") after a
 * '/' or at its start. Strings are NUL-padded to PY_RNAME.
 */
#define PY_RSPEC_MAX 8	/* --region py: options */
#define PY_RCAND_MAX 16 /* candidates over all of them */
#define PY_RNAME 64	/* longest name or file suffix + 1 */

struct py_rcand {
	char qual[PY_RNAME];
	char file[PY_RNAME];
	__u32 qual_len, file_len;
	__u32 spec; /* index of the py: option: bit in the match mask, slot in the thread state */
	__u32 pair; /* region pair id of the option */
};

/* Calls in progress on a thread (map py_rthreads), per py: option; frame 0 = none. */
struct py_rthread {
	__u64 frame[PY_RSPEC_MAX]; /* outermost interpreter frame of the call */
	__u64 start[PY_RSPEC_MAX]; /* first observation */
	__u64 last[PY_RSPEC_MAX];  /* last observation */
};

/*
 * Resource metrics (bpf/metrics.bpf.h): per-process counters the kernel does not sum over the
 * threads of a process in /proc, in a per-CPU hash (metrics_procs) keyed by tgid that the
 * recorder reads and sums over CPUs every interval.
 */
enum metrics_net_proto {
	METRICS_NET_TCP = 0,
	METRICS_NET_UDP = 1,
	METRICS_NET_UNIX = 2,
	METRICS_NET_PROTOS = 3,
};

struct metrics_proc {
	__u64 nvcsw;  /* voluntary context switches: the thread blocked */
	__u64 nivcsw; /* involuntary: preempted while runnable */
	__u64 tx[METRICS_NET_PROTOS]; /* bytes sent (what sendmsg returned) */
	__u64 rx[METRICS_NET_PROTOS]; /* bytes received */
};

/*
 * Per-thread figures (bpf/metrics.bpf.h): what the kernel keeps in each task_struct, copied by
 * a task iterator over one target process's threads every interval, and by the exit
 * tracepoint for a thread that goes (metrics_thread_exits), plus the socket bytes it sent and
 * received (metrics_thread_net). CPU times are the task's raw tick-based utime/stime and its
 * exact sum_exec_runtime (ns); the recorder splits the latter in the ratio of the former, as
 * /proc/PID/task/TID/stat does.
 */
struct metrics_net_tid {
	__u64 tx, rx; /* every protocol of metrics_net_proto */
};

struct metrics_thread {
	__u32 pid, tid;
	__u64 start_ns; /* task start, CLOCK_MONOTONIC */
	__u64 utime, stime, rtime;
	__u64 minflt, majflt, nvcsw, nivcsw;
	__u64 rchar, wchar, read_bytes, write_bytes;
	__u64 tx, rx;
	char comm[16];
	__u64 exit_ns; /* from the exit tracepoint: when, and these are its last figures */
};

/*
 * I/O by stack (record --io, bpf/io.bpf.h): each read-, write-, send- or receive-like system
 * call of a target thread that returned >= 0 is one ev_io, sent from sys_exit with the
 * caller's user stack (and Python frames). The first call on an fd (or on an fd whose file
 * changed since) sends an ev_io_file before it that says what the file is.
 */
enum io_call {
	IO_READ = 1,
	IO_WRITE,
	IO_PREAD,
	IO_PWRITE,
	IO_READV,
	IO_WRITEV,
	IO_PREADV,
	IO_PWRITEV,
	IO_RECVFROM,
	IO_SENDTO,
	IO_RECVMSG,
	IO_SENDMSG,
	IO_SENDFILE,
	IO_NCALLS,
};

enum io_file_type {
	IO_FT_OTHER = 0,
	IO_FT_REG = 1,	/* a regular file */
	IO_FT_PIPE = 2, /* a pipe or FIFO */
	IO_FT_SOCK = 3,
	IO_FT_CHR = 4,	/* a character device (a terminal, /dev/null) */
	IO_FT_BLK = 5,
	IO_FT_DIR = 6,
};

#define IO_EVF_NO_STACK (1 << 8) /* over --io-stack-rate: sent without a stack */

struct ev_io {
	struct ev_hdr h; /* ts: the call's return */
	__u64 dur;	 /* from its entry */
	__u64 bytes;	 /* what it returned */
	__u64 file;	 /* the struct file's address: joins the ev_io_file of the fd */
	__u32 fd;
	__u16 call;	 /* enum io_call */
	__u16 pad;
	char comm[EPROF_TASK_COMM_LEN];
	struct ev_stack st;
};

#ifndef EPROF_IO_PATH
#define EPROF_IO_PATH 1024 /* bytes of path components an ev_io_file carries */
#endif
#define IO_PATH_COMP 256   /* the longest component kept (NAME_MAX + 1) */
#define IO_PATH_DEPTH 32   /* components walked at most */
#define IO_FILE_F_TRUNC 1  /* the path was deeper or longer than what was kept */

struct ev_io_file {
	struct ev_hdr h;
	__u64 file;
	__u64 ino;
	__u32 dev;
	__u32 fd;
	__u16 type;	 /* enum io_file_type */
	__u16 family;	 /* sockets: AF_INET, AF_INET6, AF_UNIX ... */
	__u16 protocol;	 /* sockets: IPPROTO_TCP, IPPROTO_UDP; the socket type for AF_UNIX */
	__u16 flags;	 /* IO_FILE_F_* */
	__u16 lport, rport; /* host order */
	__u16 ncomp;	 /* path components in path, leaf first, each NUL-terminated */
	__u16 path_len;	 /* bytes used in path */
	__u8 laddr[16], raddr[16]; /* IPv4 in the first 4 bytes */
	char path[EPROF_IO_PATH];
};

/* Indexes of the per-CPU stats array: every failure in BPF is counted here. */
enum eprof_bpf_stat {
	BSTAT_SAMPLES = 0,     /* samples of target tasks seen */
	BSTAT_RB_FULL,	       /* sample dropped: ring buffer full */
	BSTAT_KSTACK_ERR,      /* bpf_get_stack (kernel) failed */
	BSTAT_USTACK_ERR,      /* bpf_get_stack (user) failed */
	BSTAT_SNAP_FAULT,      /* user stack snapshot could not be read at all */
	BSTAT_EVENT_RB_FULL,   /* fork/exec/exit event dropped */
	BSTAT_TARGETS_FULL,    /* a forked child could not be added to the target set */
	/* Features add their counters below, each in its own block. */
	/* memory (bpf/mem.bpf.h) */
	BSTAT_MEM_CALLS,      /* allocation calls seen */
	BSTAT_MEM_SAMPLED,    /* allocations sampled */
	BSTAT_MEM_FREES,      /* frees of sampled allocations matched */
	BSTAT_MEM_RB_FULL,    /* memory event dropped: ring buffer full */
	BSTAT_MEM_LIVE_FULL,  /* sampled allocation not tracked: live map full */
	BSTAT_MEM_DUP,	      /* nested allocator call returned an address already recorded */
	/* off-CPU (bpf/offcpu.bpf.h) */
	BSTAT_OFFCPU_SEEN,     /* blocked intervals of target threads that ended */
	BSTAT_OFFCPU_SHORT,    /* ... shorter than --offcpu-min-us: not sent */
	BSTAT_OFFCPU_RB_FULL,  /* off-CPU or waker event dropped: ring buffer full */
	BSTAT_OFFCPU_NO_STORAGE, /* per-thread state could not be created */
	BSTAT_OFFCPU_IRQ_WAKE, /* wakeups from interrupt context (no waker thread) */
	BSTAT_OFFCPU_NO_STACK, /* intervals sent without stacks: over --offcpu-stack-rate */
	BSTAT_OFFCPU_UNSAMPLED, /* intervals sent without stacks: not picked by the time sampling */
	/* cuda (bpf/cuda.bpf.h) */
	BSTAT_CUDA_CALLS,      /* CUDA API calls of targets seen (entries) */
	BSTAT_CUDA_RB_FULL,    /* CUDA API or handle event dropped: ring buffer full */
	BSTAT_CUDA_NOSTACK,    /* launch sent without a stack (--cuda-stack-rate) */
	BSTAT_CUDA_INFLIGHT_FULL, /* call not recorded: nested too deep, or no task storage */
	/* regions (bpf/region.bpf.h) */
	BSTAT_REGION_RB_FULL,	/* region event dropped: ring buffer full */
	BSTAT_REGION_TOO_DEEP,	/* region nested deeper than EPROF_REGION_DEPTH: not timed */
	BSTAT_REGION_UNMATCHED, /* an end without its begin, or begins left open below an end */
	BSTAT_REGION_NO_STATE,	/* per-thread region state could not be created */
	/* python (bpf/python.bpf.h) */
	BSTAT_PY_SAMPLES,      /* samples of a Python thread whose frames were walked */
	BSTAT_PY_NO_TSTATE,    /* sample of a Python process from a thread with no known tstate */
	BSTAT_PY_READ_ERR,     /* an interpreter frame could not be read */
	BSTAT_PY_TRUNC,	       /* Python stack deeper than PY_MAX_FRAMES */
	BSTAT_CUDA_STALE,      /* pending CUDA calls dropped: their return was never seen */
	/* metrics (bpf/metrics.bpf.h) */
	BSTAT_METRICS_FULL,    /* a process's counters could not be created: map full */
	/* I/O by stack (bpf/io.bpf.h) */
	BSTAT_IO_CALLS,	       /* I/O calls of targets that returned >= 0 */
	BSTAT_IO_RB_FULL,      /* I/O or file event dropped: ring buffer full */
	BSTAT_IO_NO_STACK,     /* I/O calls sent without a stack: over --io-stack-rate */
	BSTAT_IO_ERRORS,       /* I/O calls that failed (returned < 0): not sent */
	BSTAT_IO_NO_STORAGE,   /* per-thread state could not be created */
	BSTAT_METRICS_THREAD_FULL, /* a thread's socket bytes or last figures: map full */
	BSTAT_MAX
};

#endif
