// SPDX-License-Identifier: MIT
/*
 * The injector (inject.h): one thread of the target, borrowed with ptrace.
 *
 * 1. Seize and interrupt a thread at a safe point: blocked in a system call that holds no
 *    libc lock (read, futex, nanosleep, poll, epoll_wait, ioctl, ...) or running the
 *    program's own code (not libc's, the loader's or an allocator's: our calls take their
 *    locks), with no frame of its stack in such code or in eprof's libraries
 *    (inject_safe.c). Else let it go and try another thread or a moment later.
 * 2. Save its registers, FP state (XSAVE) and signal mask; write a signal frame holding them
 *    below its red zone. Every later step that lets the thread run is arranged to end in
 *    rt_sigreturn through that frame when eprof is not there to take it back (libc's
 *    __restore_rt after a "syscall; ret", or after pthread_create returns).
 * 3. Block every signal in the thread, run one system call in it through libc's "syscall; ret"
 *    with PTRACE_SYSCALL (stopping at its entry and exit): mmap of the stub's code, data and
 *    library bytes, read-only and executable, which eprof writes through /proc/PID/mem (the
 *    worker makes its data page writable). A thread inside an rseq critical section will go
 *    on at the sequence's abort handler (rseq_restart).
 * 4. Have it call pthread_create(stub) untraced, returning into the stub's tail, which raises
 *    a signal the program ignores at the thread: its signal-delivery stop is the only one of
 *    the call (call_tail; call_traced follows each system call where that cannot be). The
 *    thread is stopped for pthread_create's time, never for dlopen's. The new thread, the
 *    worker (inject_stub.c), makes the memfd and socket pair (eprof takes its end with
 *    pidfd_getfd), calls dlopen, dlsym and the entry (or the retraction and dlclose), says how
 *    it went in its data page, which eprof reads (process_vm_readv), and ends by unmapping
 *    the stub.
 * 5. Put back registers, FP state, errno and signal mask, detach: a system call the thread was
 *    blocked in is restarted by the kernel exactly as after any stop.
 *
 * Before any of it, the target's seccomp filters are run here on the system calls the
 * injection makes: a filter that would kill the process or fail a call is found first.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "inject.h"
#include "inject_internal.h"
#include "inject_stub.h"

const char *inject_err_name(enum inject_err e)
{
	static const char *const names[] = {
	    [INJ_OK] = "ok",
	    [INJ_ERR_PTRACE] = "ptrace refused",
	    [INJ_ERR_SECCOMP] = "seccomp forbids it",
	    [INJ_ERR_NO_DLOPEN] = "no dlopen",
	    [INJ_ERR_NO_SAFE_POINT] = "no safe point",
	    [INJ_ERR_GONE] = "process exited",
	    [INJ_ERR_TIMEOUT] = "timed out",
	    [INJ_ERR_LOAD] = "load failed",
	    [INJ_ERR_SYSCALL] = "system call failed",
	    [INJ_ERR_ARCH] = "unsupported architecture",
	    [INJ_ERR_OTHER] = "failed",
	};

	return (unsigned)e < sizeof(names) / sizeof(names[0]) && names[e] ? names[e] : "failed";
}

bool inject_maps_contain(const char *proc_root, pid_t pid, const char *needle)
{
	struct rmaps m;
	bool found = false;

	if (rmaps_read(proc_root, pid, &m))
		return false;
	for (size_t i = 0; i < m.n && !found; i++)
		found = strstr(m.v[i].path, needle) != NULL;
	rmaps_free(&m);
	return found;
}

#if !defined(__x86_64__)

static int unsupported(struct inject_result *res)
{
	memset(res, 0, sizeof(*res));
	res->chan_fd = -1;
	res->dlclose_ret = -1;
	res->err = INJ_ERR_ARCH;
	snprintf(res->msg, sizeof(res->msg), "injection is implemented for x86-64 only");
	return -ENOTSUP;
}

int inject_load(pid_t pid, const struct inject_load_req *rq, struct inject_result *res)
{
	return unsupported(res);
}

int inject_unload(pid_t pid, const struct inject_unload_req *rq, struct inject_result *res)
{
	return unsupported(res);
}

#else

#include <cpuid.h>
#include <sys/user.h>

#define STOP_WAIT_NS 500000000ULL    /* one stop */
#define SAFE_POINT_NS 300000000ULL   /* finding a thread at a safe point */
#define ENTRY_GRACE_NS 2000000000ULL /* an entry found running at the limit: its time */
#define STUB_WAIT_S 3		     /* the worker's wait for eprof's ack before it ends alone */
#define MAX_TRIES 24
#define MIN_TRIES 3 /* even past SAFE_POINT_NS: one stop can take that long on busy CPUs */
#define MAX_STUCK 16
#define RED_ZONE 128
#define FP_XSTATE_MAGIC1 0x46505853U
#define FP_XSTATE_MAGIC2 0x46505845U
#define UC_FP_XSTATE 0x1
#define UC_SIGCONTEXT_SS 0x2
#define UC_STRICT_RESTORE_SS 0x4
#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC 0x1U
#endif
#define MFD_EXEC_ 0x10U
#ifndef NT_X86_XSTATE
#define NT_X86_XSTATE 0x202
#endif

/* The kernel's 64-bit signal frame (arch/x86/include/uapi/asm/sigcontext.h, ucontext.h). */
struct k_sigcontext {
	uint64_t r8, r9, r10, r11, r12, r13, r14, r15, rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp, rip,
	    eflags;
	uint16_t cs, gs, fs, ss;
	uint64_t err, trapno, oldmask, cr2, fpstate, reserved1[8];
};

struct k_ucontext {
	uint64_t uc_flags, uc_link;
	uint64_t ss_sp;
	int32_t ss_flags, pad;
	uint64_t ss_size;
	struct k_sigcontext mc;
	uint64_t sigmask;
};

struct k_rt_sigframe {
	uint64_t pretcode;
	struct k_ucontext uc;
	uint8_t info[128];
};

_Static_assert(sizeof(struct k_sigcontext) == 256, "sigcontext");
_Static_assert(offsetof(struct k_ucontext, mc) == 40, "ucontext");
_Static_assert(sizeof(struct k_ucontext) == 304, "ucontext size");

#ifdef INJECT_TEST_HOOKS
/* tests: die where told, as if eprof were SIGKILLed there */
static void test_die(const char *phase)
{
	const char *at = getenv("INJECT_DIE_AT");

	if (at && !strcmp(at, phase))
		raise(SIGKILL);
}
#else
#define test_die(phase) ((void)0)
#endif

struct inj {
	pid_t pid, tid;
	uint64_t t0, deadline, t_stop;
	struct user_regs_struct regs;	/* as the thread stopped: put back at the end */
	struct user_regs_struct resume; /* what the frame resumes the thread with */
	unsigned char *xs;		/* FP state: XSAVE layout (or FXSAVE) */
	size_t xs_len;
	bool xsave;
	uint64_t sigmask;
	bool attached; /* seized and stopped */
	bool
	    at_interrupt; /* the stop is a PTRACE_INTERRUPT one (the kernel restarts calls after) */
	bool modified;	  /* registers or mask changed: restore before detaching */
	bool frame_ok;
	uint64_t frame; /* the restore frame (pretcode) below the thread's stack pointer */
	uint64_t map;	/* the stub's mapping, 0: none */
	size_t map_len;
	unsigned char *lib; /* the library's bytes (inject_load) */
	size_t lib_len;
	size_t chan_fd_off;
	bool blob_arg;	   /* the entry's argument is the data page's blob */
	uint64_t left[16]; /* stubs left in phase SETUP by a killed eprof (find_leftovers) */
	unsigned nleft;
	struct rmaps maps;
	struct rsyms syms;
	struct rrisk risk; /* code a thread must not be stopped beneath (inject_safe.c) */
	uint64_t errno_at; /* the borrowed thread's errno, 0: not known */
	int32_t errno_was;
	uint64_t stub;		/* the mapping the worker runs in (it unmaps it), 0: none */
	pid_t worker;		/* the worker thread, 0: none started (or not known yet) */
	pid_t avoid;		/* a thread not to borrow */
	pid_t stuck[MAX_STUCK]; /* seized, but their stop never came (reap_stuck) */
	unsigned nstuck;
	bool masked; /* every signal blocked in the thread */
	bool seccomp;
	int tail_sig; /* the tail's signal (call_tail), 0: the call is followed system call by
			 system call (call_traced) */
	struct inject_result *res;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static int fail(struct inj *j, enum inject_err e, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(struct inj *j, enum inject_err e, int err, const char *fmt, ...)
{
	va_list ap;

	if (j->res->err == INJ_OK) {
		j->res->err = e;
		va_start(ap, fmt);
		vsnprintf(j->res->msg, sizeof(j->res->msg), fmt, ap);
		va_end(ap);
	}
	return err < 0 ? err : -EIO;
}

/* A field of /proc/PID/task/TID/status as a number (base 10, or 16 for the signal sets). */
static bool status_field(pid_t pid, pid_t tid, const char *key, int base, uint64_t *out)
{
	char path[96], line[256];
	bool found = false;
	FILE *fp;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid, (int)tid);
	fp = fopen(path, "re");
	while (fp && !found && fgets(line, sizeof(line), fp))
		if (!strncmp(line, key, strlen(key))) {
			*out = strtoull(line + strlen(key), NULL, base);
			found = true;
		}
	if (fp)
		fclose(fp);
	return found;
}

static bool have_cap(int cap)
{
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct data[2] = {0};

	if (syscall(SYS_capget, &hdr, data))
		return false;
	return data[cap / 32].effective & (1u << (cap % 32));
}

/*
 * A thread with shadow stacks (x86 CET, glibc 2.39+ on request): the frame's way back (a
 * "ret" into __restore_rt, an rt_sigreturn without the shadow stack's token) would kill it.
 */
static bool shadow_stack(pid_t pid, pid_t tid)
{
	char path[96], line[256];
	bool on = false;
	FILE *fp;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid, (int)tid);
	fp = fopen(path, "re");
	while (fp && fgets(line, sizeof(line), fp))
		if (!strncmp(line, "x86_Thread_features:", 20))
			on = strstr(line, "shstk") != NULL;
	if (fp)
		fclose(fp);
	return on;
}

static void comm_of(pid_t pid, char *out, size_t len)
{
	char path[64];
	FILE *fp;

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	out[0] = '\0';
	fp = fopen(path, "re");
	if (fp) {
		if (fgets(out, (int)len, fp))
			out[strcspn(out, "\n")] = '\0';
		fclose(fp);
	}
}

/* Why PTRACE_SEIZE said EPERM, in words the user can act on. */
static int ptrace_refused(struct inj *j, pid_t tid, int err)
{
	uint64_t tracer = 0;
	int scope = -1;
	char comm[32];
	FILE *fp;

	if (status_field(j->pid, tid, "TracerPid:", 10, &tracer) && tracer) {
		comm_of((pid_t)tracer, comm, sizeof(comm));
		return fail(
		    j, INJ_ERR_PTRACE, err,
		    "it is already traced by pid %llu (%s): a debugger or profiler holds it",
		    (unsigned long long)tracer, comm[0] ? comm : "?");
	}
	fp = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
	if (fp) {
		if (fscanf(fp, "%d", &scope) != 1)
			scope = -1;
		fclose(fp);
	}
	if (scope == 3)
		return fail(j, INJ_ERR_PTRACE, err, "kernel.yama.ptrace_scope = 3 forbids ptrace");
	if (!have_cap(CAP_SYS_PTRACE)) {
		if (scope == 2)
			return fail(j, INJ_ERR_PTRACE, err,
				    "kernel.yama.ptrace_scope = 2 allows ptrace only with "
				    "CAP_SYS_PTRACE (run as root or grant it)");
		if (scope == 1)
			return fail(
			    j, INJ_ERR_PTRACE, err,
			    "kernel.yama.ptrace_scope = 1 allows ptrace of a process that is "
			    "not a descendant only with CAP_SYS_PTRACE (run as root or grant "
			    "it)");
		return fail(j, INJ_ERR_PTRACE, err,
			    "no CAP_SYS_PTRACE, and the process belongs to another user or is not "
			    "dumpable (run as root or grant CAP_SYS_PTRACE)");
	}
	return fail(j, INJ_ERR_PTRACE, err, "ptrace: %s", strerror(-err));
}

/* --- stops ---------------------------------------------------------------------------------- */

enum stop_kind { ST_INTERRUPT, ST_SYSCALL, ST_SIGNAL, ST_GROUP, ST_EXITED, ST_TIMEOUT };

/*
 * Threads seized whose stop never came (uninterruptible sleep: a vfork parent, an NFS read):
 * let go as soon as they stop. Those still running when the operation ends are detached by
 * the kernel as its thread exits, their pending interrupt dropped (in_own_thread).
 */
static void reap_stuck(struct inj *j)
{
	for (unsigned i = 0; i < j->nstuck;) {
		pid_t tid = j->stuck[i], r;
		int st = 0;

		r = waitpid(tid, &st, __WALL | WNOHANG);
		if (r == 0) {
			i++;
			continue;
		}
		if (r == tid && WIFSTOPPED(st))
			ptrace(PTRACE_DETACH, tid, NULL,
			       (void *)(long)((st >> 16) || WSTOPSIG(st) == SIGTRAP
						  ? 0
						  : WSTOPSIG(st)));
		j->stuck[i] = j->stuck[--j->nstuck];
	}
}

static enum stop_kind wait_stop(struct inj *j, int *sig)
{
	uint64_t until = now_ns() + STOP_WAIT_NS;
	struct timespec ts = {0, 20000};

	if (until > j->deadline)
		until = j->deadline;
	for (;;) {
		int st;
		pid_t r = waitpid(j->tid, &st, __WALL | WNOHANG);

		if (r == j->tid) {
			if (WIFEXITED(st) || WIFSIGNALED(st))
				return ST_EXITED;
			if (!WIFSTOPPED(st))
				continue;
			*sig = WSTOPSIG(st);
			if (*sig == (SIGTRAP | 0x80))
				return ST_SYSCALL;
			if ((st >> 16) == PTRACE_EVENT_STOP)
				return *sig == SIGTRAP ? ST_INTERRUPT : ST_GROUP;
			return ST_SIGNAL;
		}
		if (r < 0 && errno != EINTR)
			return ST_EXITED;
		if (now_ns() >= until)
			return ST_TIMEOUT;
		if (j->nstuck)
			reap_stuck(j);
		nanosleep(&ts, NULL);
		if (ts.tv_nsec < 500000)
			ts.tv_nsec *= 2;
	}
}

/* Seizes tid and stops it; a signal on its way is delivered first. 0, or -errno with res set. */
static int seize_stop(struct inj *j, pid_t tid)
{
	int sig = 0;

	j->tid = tid;
	if (ptrace(PTRACE_SEIZE, tid, NULL, (void *)(long)PTRACE_O_TRACESYSGOOD)) {
		int err = -errno;

		if (err == -ESRCH)
			return err;
		return err == -EPERM ? ptrace_refused(j, tid, err)
				     : fail(j, INJ_ERR_PTRACE, err, "ptrace: %s", strerror(-err));
	}
	j->attached = true;
	for (int tries = 0; tries < 8; tries++) {
		if (ptrace(PTRACE_INTERRUPT, tid, NULL, NULL))
			return -errno;
		switch (wait_stop(j, &sig)) {
		case ST_INTERRUPT:
			j->t_stop = now_ns();
			j->at_interrupt = true;
			return 0;
		case ST_SIGNAL: /* it was about to get a signal: let it have it, then stop it */
			if (ptrace(PTRACE_CONT, tid, NULL, (void *)(long)sig))
				return -errno;
			continue;
		case ST_GROUP:
			j->at_interrupt = true; /* stopped: it can be let go as it is */
			return fail(j, INJ_ERR_OTHER, -EAGAIN, "the process is stopped (SIGSTOP)");
		case ST_EXITED:
			j->attached = false;
			return -ESRCH;
		default: /* not stopped yet: let go when it is, another thread tried */
			if (j->nstuck < MAX_STUCK)
				j->stuck[j->nstuck++] = tid;
			j->attached = false;
			return -ETIMEDOUT;
		}
	}
	return fail(j, INJ_ERR_OTHER, -EAGAIN, "thread %d kept receiving signals", (int)tid);
}

/* Lets the thread go; what was changed is put back first. */
static void release(struct inj *j)
{
	struct iovec iov = {j->xs, j->xs_len};
	int sig = 0;

	if (!j->attached)
		return;
	if (!j->at_interrupt && !j->modified) {
		/*
		 * Seized, but its stop never came (uninterruptible sleep): the interrupt stays
		 * pending, so wait for it a while longer rather than leave it to stop later with
		 * nobody to let it go (an exiting eprof detaches it in any case).
		 */
		j->deadline = now_ns() + 4 * STOP_WAIT_NS;
		if (wait_stop(j, &sig) == ST_EXITED) {
			j->attached = false;
			return;
		}
	}
	/*
	 * The registers go back at a PTRACE_INTERRUPT stop, inside the kernel's signal path: a
	 * system call they say was interrupted is then restarted (or ended by a pending signal)
	 * as after any stop. At a syscall-exit stop nothing would look at them again.
	 */
	if (j->modified && !j->at_interrupt) {
		if (ptrace(PTRACE_INTERRUPT, j->tid, NULL, NULL) ||
		    ptrace(PTRACE_CONT, j->tid, NULL, NULL) || wait_stop(j, &sig) != ST_INTERRUPT)
			j->modified = false; /* cannot: the frame restores it when it runs */
	}
	/* the mask first: a thread resumed from here on with our registers returns through
	 * the frame anyway */
	if (j->modified) {
		ptrace(PTRACE_SETSIGMASK, j->tid, (void *)sizeof(j->sigmask), &j->sigmask);
		if (j->xs_len)
			ptrace(PTRACE_SETREGSET, j->tid,
			       (void *)(long)(j->xsave ? NT_X86_XSTATE : NT_PRFPREG), &iov);
		ptrace(PTRACE_SETREGS, j->tid, NULL, &j->regs);
	}
	test_die("final");
	ptrace(PTRACE_DETACH, j->tid, NULL, NULL);
	j->attached = j->modified = j->at_interrupt = false;
	j->res->stopped_ns += now_ns() - j->t_stop;
}

/* --- the thread: where it stopped, and whether calling into libc from there is safe --------- */

/*
 * The system calls a thread may be borrowed in (they hold no libc lock): 0, those the kernel
 * restarts after the stop as if nothing happened; 1, those the stop ends with EINTR when they
 * have a timeout (SO_RCVTIMEO, sigtimedwait's, io_getevents'), which are issued again
 * (plan_resume) but ranked after the others, or that are not always interruptible (ioctl);
 * -1, the others.
 */
static int call_class(long nr)
{
	static const long restarted[] = {SYS_read,     SYS_pread64,	    SYS_readv,
					 SYS_poll,     SYS_select,	    SYS_sched_yield,
					 SYS_pause,    SYS_nanosleep,	    SYS_wait4,
					 SYS_futex,    SYS_clock_nanosleep, SYS_waitid,
					 SYS_pselect6, SYS_ppoll,	    SYS_rt_sigsuspend,
					 SYS_flock,    SYS_restart_syscall, SYS_io_uring_enter};
	static const long eintr[] = {SYS_accept,	  SYS_connect,	   SYS_recvfrom,
				     SYS_recvmsg,	  SYS_sendto,	   SYS_sendmsg,
				     SYS_semop,		  SYS_msgrcv,	   SYS_msgsnd,
				     SYS_epoll_wait,	  SYS_epoll_pwait, 441 /* epoll_pwait2 */,
				     SYS_accept4,	  SYS_recvmmsg,	   SYS_io_getevents,
				     SYS_rt_sigtimedwait, SYS_ioctl};

	for (size_t i = 0; i < sizeof(restarted) / sizeof(restarted[0]); i++)
		if (nr == restarted[i])
			return 0;
	for (size_t i = 0; i < sizeof(eintr) / sizeof(eintr[0]); i++)
		if (nr == eintr[i])
			return 1;
	return -1;
}

static bool safe_syscall(long nr)
{
	return call_class(nr) >= 0;
}

/*
 * A call that a stop ends with EINTR, without a signal for the program, and that is issued
 * again in its place (the time left of its timeout starts over: the wait is longer by the
 * stop at most). connect (EALREADY after) and ioctl (its effect unknown) are not.
 */
static bool reissued(long nr)
{
	return call_class(nr) == 1 && nr != SYS_connect && nr != SYS_ioctl;
}

/* A signal the thread does not block is pending (it, not our stop, ended a wait). */
static bool signal_pending(struct inj *j)
{
	uint64_t pnd = 0, shd = 0, blk = 0;

	status_field(j->pid, j->tid, "SigPnd:", 16, &pnd);
	status_field(j->pid, j->tid, "ShdPnd:", 16, &shd);
	status_field(j->pid, j->tid, "SigBlk:", 16, &blk);
	return ((pnd | shd) & ~blk) != 0;
}

/*
 * The registers the thread resumes with when the frame restores it: a system call ended by
 * the stop is issued again as the kernel would (rt_sigreturn disables the kernel's own
 * restart, and turns a restart through the restart block into EINTR). A call the stop itself
 * ends with EINTR (epoll_wait, recv with SO_RCVTIMEO, sigtimedwait: reissued()) is issued
 * again in both paths.
 */
static void plan_resume(struct inj *j)
{
	struct user_regs_struct *r = &j->resume;
	long nr = (long)j->regs.orig_rax, rv = (long)j->regs.rax;

	*r = j->regs;
	if (nr < 0)
		return;
	switch (-rv) {
	case 512: /* ERESTARTSYS */
	case 513: /* ERESTARTNOINTR */
	case 514: /* ERESTARTNOHAND */
		r->rax = (uint64_t)nr;
		r->rip -= 2;
		break;
	case 516: /* ERESTART_RESTARTBLOCK */
		r->rax = (uint64_t)-EINTR;
		break;
	case EINTR:
		if (reissued(nr) && !signal_pending(j)) {
			r->rax = (uint64_t)nr;
			r->rip -= 2;
			j->regs.rax = r->rax; /* the normal path too */
			j->regs.rip = r->rip;
			j->regs.orig_rax = (uint64_t)-1;
			j->modified = true;
		}
		break;
	default:
		break;
	}
}

static int read_state(struct inj *j)
{
	struct iovec iov;

	if (ptrace(PTRACE_GETREGS, j->tid, NULL, &j->regs) ||
	    ptrace(PTRACE_GETSIGMASK, j->tid, (void *)sizeof(j->sigmask), &j->sigmask))
		return -errno;
	if (!j->xs && !(j->xs = calloc(1, 65536)))
		return -ENOMEM;
	iov = (struct iovec){j->xs, 65536};
	j->xsave = !ptrace(PTRACE_GETREGSET, j->tid, (void *)NT_X86_XSTATE, &iov);
	if (!j->xsave) {
		iov = (struct iovec){j->xs, 512};
		if (ptrace(PTRACE_GETREGSET, j->tid, (void *)NT_PRFPREG, &iov))
			return -errno;
	}
	j->xs_len = iov.iov_len;
	return 0;
}

/*
 * Where the thread stopped is safe to run dlopen from: blocked in a safe call or in the
 * program's own code, no frame of its stack in code that may hold a lock the injection takes
 * (a retraction would otherwise wait on the thread it runs in), and room for the frame.
 */
static bool safe_point(struct inj *j)
{
	long nr = (long)j->regs.orig_rax;
	const struct rmap *stack = rmaps_find(&j->maps, j->regs.rsp);
	char why[64];

	if (!stack || j->regs.rsp - stack->start < 16 * 1024 + j->xs_len)
		return false; /* the frame must lie in the mapped part of the stack */
	if (nr >= 0 ? !safe_syscall(nr) : rrisk_code(&j->maps, &j->risk, j->regs.rip))
		return false;
	if (rrisk_stack(j->pid, &j->maps, &j->risk, j->regs.rsp, j->regs.rip, why, sizeof(why)) ==
	    0)
		return true;
#ifdef INJECT_TEST_HOOKS
	if (getenv("INJECT_DEBUG"))
		fprintf(stderr, "thread %d: %s\n", (int)j->tid, why);
#endif
	return false;
}

#ifndef PTRACE_GET_RSEQ_CONFIGURATION
#define PTRACE_GET_RSEQ_CONFIGURATION 0x420f
#endif

struct rseq_config { /* struct ptrace_rseq_configuration */
	uint64_t area;
	uint32_t size, sig, flags, pad;
};

struct rseq_cs_desc { /* struct rseq_cs */
	uint32_t version, flags;
	uint64_t start_ip, post_commit_offset, abort_ip;
};

/*
 * A thread stopped inside a restartable sequence (rseq: glibc registers an area for every
 * thread; tcmalloc and librseq run critical sections in it) must go on at the sequence's abort
 * handler, as the kernel sends it there after any preemption: once its instruction pointer has
 * been elsewhere (the injection's calls), the kernel clears the area's rseq_cs and would let
 * it resume in the middle of the sequence, whose commit then acts on what it read before.
 * The thread's rseq_cs is read through PTRACE_GET_RSEQ_CONFIGURATION; inside [start_ip,
 * start_ip + post_commit_offset) the thread is put at abort_ip and rseq_cs cleared, as the
 * kernel does. 0; -EINVAL for a descriptor the kernel would kill the thread for (an abort
 * handler inside the sequence or without the registered signature before it): not borrowed.
 */
static int rseq_restart(struct inj *j)
{
	struct rseq_config c = {0};
	struct rseq_cs_desc cs;
	uint64_t csp = 0, zero = 0, ip = j->regs.rip;
	uint32_t sig = 0;

	if ((int64_t)j->regs.orig_rax >= 0)
		return 0; /* in a system call: never inside a sequence */
	if (ptrace(PTRACE_GET_RSEQ_CONFIGURATION, j->tid, (void *)sizeof(c), &c) <
		(long)offsetof(struct rseq_config, flags) ||
	    !c.area || c.size < 16 || rmem_read(j->pid, c.area + 8, &csp, sizeof(csp)) || !csp)
		return 0; /* Linux < 5.13, no area, or no sequence */
	if (rmem_read(j->pid, csp, &cs, sizeof(cs)) ||
	    cs.post_commit_offset > UINT64_MAX - cs.start_ip)
		return -EINVAL;
	if (ip < cs.start_ip || ip - cs.start_ip >= cs.post_commit_offset)
		return 0; /* not inside: the kernel clears it as it would */
	if ((cs.abort_ip >= cs.start_ip && cs.abort_ip - cs.start_ip < cs.post_commit_offset) ||
	    cs.abort_ip < 4 || rmem_read(j->pid, cs.abort_ip - 4, &sig, sizeof(sig)) ||
	    sig != c.sig)
		return -EINVAL;
	if (rmem_write(j->pid, c.area + 8, &zero, sizeof(zero)))
		return -EINVAL;
	j->regs.rip = cs.abort_ip;
	j->modified = true;
	j->res->rseq_aborts++;
	return 0;
}

struct cand {
	pid_t tid;
	/*
	 * By class: 0, blocked in a call the kernel restarts; 1, in one the stop ends with
	 * EINTR (issued again); 2, anything else. Other threads blocked in either before the
	 * main thread, which often runs the job's critical loop: 0 and 1 for them, 2 and 3 for
	 * the main thread; running threads 4, the main thread 5.
	 */
	int rank;
};

#define RANK_RUNNING 4

static int cmp_cand(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;

	return x->rank != y->rank ? x->rank - y->rank : x->tid - y->tid;
}

/* tests: INJECT_TRY_D=1 seizes threads in D too, to check those that never stop */
static bool try_d_threads(void)
{
#ifdef INJECT_TEST_HOOKS
	return getenv("INJECT_TRY_D") != NULL;
#else
	return false;
#endif
}

static ssize_t read_small(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, len - 1) : -1;

	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return n;
}

/*
 * A thread's rank (struct cand), or -1 for one not to try: exited, or in uninterruptible
 * sleep (D: a stop would wait for the call to end, NFS or a driver, for seconds).
 */
static int thread_rank(pid_t pid, pid_t tid)
{
	char path[96], buf[256];
	const char *st;
	int cls = 2;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
	if (read_small(path, buf, sizeof(buf)) <= 0 || !(st = strrchr(buf, ')')) || !st[1])
		return -1;
	if (st[2] == 'Z' || st[2] == 'X' || (st[2] == 'D' && !try_d_threads()))
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", (int)pid, (int)tid);
	if (read_small(path, buf, sizeof(buf)) > 0 && buf[0] >= '0' && buf[0] <= '9') {
		int c = call_class(strtol(buf, NULL, 10));

		if (c >= 0)
			cls = c;
	}
	return cls == 2 ? RANK_RUNNING + (tid == pid) : 2 * (tid == pid) + cls;
}

/* The target's threads that may be tried, best first (struct cand). */
static size_t list_threads(pid_t pid, struct cand *out, size_t max)
{
	char path[96];
	struct dirent *de;
	size_t n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	while (d && n < max && (de = readdir(d))) {
		pid_t tid = (pid_t)strtol(de->d_name, NULL, 10);
		int rank = tid > 0 ? thread_rank(pid, tid) : -1;

		if (rank < 0)
			continue;
		out[n].tid = tid;
		out[n++].rank = rank;
	}
	if (d)
		closedir(d);
	qsort(out, n, sizeof(*out), cmp_cand);
	return n;
}

static bool stuck(const struct inj *j, pid_t tid)
{
	for (unsigned i = 0; i < j->nstuck; i++)
		if (j->stuck[i] == tid)
			return true;
	return false;
}

/* A thread seized whose stop has not come, and that is not in uninterruptible sleep. */
static bool stuck_stopping(const struct inj *j)
{
	for (unsigned i = 0; i < j->nstuck; i++) {
		char path[96], buf[256];
		const char *st;

		snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)j->pid,
			 (int)j->stuck[i]);
		if (read_small(path, buf, sizeof(buf)) > 0 && (st = strrchr(buf, ')')) && st[1] &&
		    st[2] != 'D' && st[2] != 'Z' && st[2] != 'X')
			return true;
	}
	return false;
}

/* Stops a thread at a safe point: threads blocked in a safe call first, then the others. */
static int stop_thread(struct inj *j)
{
	uint64_t until = now_ns() + SAFE_POINT_NS;
	struct cand c[256];
	unsigned tries = 0;
	bool any = false;

	for (int pass = 0;
	     tries < MAX_TRIES && now_ns() < j->deadline && (now_ns() < until || tries < MIN_TRIES);
	     pass++) {
		size_t n = list_threads(j->pid, c, sizeof(c) / sizeof(c[0]));
		unsigned before = tries;

		if (!n)
			return fail(j, INJ_ERR_GONE, -ESRCH, "the process has exited");
		/*
		 * The maps are read before a thread is stopped, not while it is: a PyTorch
		 * process has ~1,700 lines, and reading them was most of each stop (the first
		 * pass has begin()'s). Only a thread whose stack or code is in none of them
		 * (mapped since) has them read again while stopped.
		 */
		if (pass > 0) {
			int err;

			rmaps_free(&j->maps);
			err = rmaps_read(NULL, j->pid, &j->maps);
			if (err)
				return fail(j, INJ_ERR_GONE, err, "cannot read its maps: %s",
					    strerror(-err));
		}
		for (size_t i = 0; i < n && tries < MAX_TRIES; i++) {
			int err;

			if (pass == 0 && c[i].rank >= RANK_RUNNING && c[0].rank < RANK_RUNNING)
				break; /* first, only the threads that are waiting */
			if ((c[i].tid == j->avoid && n > 1) || stuck(j, c[i].tid))
				continue; /* seized already, its stop not come: not seized again */
			err = seize_stop(j, c[i].tid);
			if (err == -ESRCH) {
				release(j);
				continue;
			}
			tries++;
			if (err == -ETIMEDOUT)
				continue; /* it did not stop: the next */
			if (err)
				return err;
			any = true;
			err = read_state(j);
			if (!err && (!rmaps_find(&j->maps, j->regs.rsp) ||
				     !rmaps_find(&j->maps, j->regs.rip))) {
				rmaps_free(&j->maps);
				err = rmaps_read(NULL, j->pid, &j->maps);
			}
			if (err) {
				release(j);
				return fail(j, INJ_ERR_OTHER, err, "reading thread %d: %s",
					    (int)j->tid, strerror(-err));
			}
			j->res->attempts = tries;
			if (safe_point(j) && !rseq_restart(j))
				return 0;
			plan_resume(j); /* a call the stop ended with EINTR is issued again */
			release(j);
		}
		/*
		 * Past the time with nothing left to try: give up, unless a thread whose stop has
		 * not come is not in uninterruptible sleep: on CPUs busy with other work its stop
		 * can take longer than one wait, and it is tried again once it came (reap_stuck).
		 */
		if (tries == before && now_ns() >= until && !stuck_stopping(j))
			break;
		if (j->nstuck)
			reap_stuck(j);
		usleep(2000);
	}
	return fail(j, INJ_ERR_NO_SAFE_POINT, -EAGAIN,
		    any ? "no thread stopped at a point where calling dlopen is safe (%u tries)"
			: "no thread could be stopped (%u tries)",
		    tries);
}

/* --- the restore frame ---------------------------------------------------------------------- */

/*
 * Builds the rt_sigframe that restores the thread (j->resume, FP state, signal mask) and
 * writes it below the red zone; pretcode is libc's __restore_rt, so a "syscall; ret" run
 * with the stack pointer at the frame returns into rt_sigreturn.
 */
/* The signal frame's software bytes, at 464 of the FXSAVE area (struct _fpx_sw_bytes). */
struct fpx_sw {
	uint32_t magic1, extended_size;
	uint64_t xfeatures;
	uint32_t xstate_size, pad[7];
};

_Static_assert(sizeof(struct fpx_sw) == 48, "fpx_sw");

/*
 * What the frame's XSAVE area restores: the features of XCR0 (which the ptrace buffer's
 * software bytes hold; the signal frame's own on kernels that copy those there), AMX's tiles
 * only when in use (a task without AMX permission has a smaller frame, and rt_sigreturn
 * refuses a larger one), and the size of their area in the standard format (CPUID 0xD).
 * 0: FXSAVE only.
 */
static size_t xstate_layout(const struct inj *j, uint64_t *xfeat)
{
	uint64_t xcr0, bv;
	uint32_t magic1;
	size_t size = 576; /* the legacy area and the XSAVE header */

	if (!j->xsave || j->xs_len < size)
		return 0;
	memcpy(&magic1, j->xs + 464, sizeof(magic1));
	memcpy(&xcr0, j->xs + (magic1 == FP_XSTATE_MAGIC1 ? 472 : 464), sizeof(xcr0));
	memcpy(&bv, j->xs + 512, sizeof(bv));
	if (!(bv & (3ULL << 17)))
		xcr0 &= ~(3ULL << 17); /* XTILECFG, XTILEDATA */
	if ((xcr0 & 3) != 3)
		return 0;
	for (unsigned i = 2; i < 63; i++) {
		unsigned a, b, c, d;

		if (!(xcr0 >> i & 1))
			continue;
		__cpuid_count(0xd, i, a, b, c, d);
		if (b + a > size)
			size = b + a;
	}
	if (size > j->xs_len)
		return 0;
	*xfeat = xcr0;
	return size;
}

/* The FP part of the frame at fp (xsize from xstate_layout, 0: FXSAVE only). */
static void frame_fp(const struct inj *j, unsigned char *fp, size_t xsize, uint64_t xfeat)
{
	struct fpx_sw sw = {.magic1 = FP_XSTATE_MAGIC1,
			    .extended_size = (uint32_t)xsize + 4,
			    .xfeatures = xfeat,
			    .xstate_size = (uint32_t)xsize};
	uint32_t magic2 = FP_XSTATE_MAGIC2;
	uint64_t bv;

	memcpy(fp, j->xs, xsize ? xsize : 512);
	if (!xsize) {
		memset(fp + 464, 0, sizeof(sw));
		return;
	}
	memcpy(fp + 464, &sw, sizeof(sw));
	memcpy(&bv, fp + 512, sizeof(bv));
	bv &= xfeat;
	memcpy(fp + 512, &bv, sizeof(bv));
	memcpy(fp + xsize, &magic2, sizeof(magic2));
}

static int write_frame(struct inj *j)
{
	uint64_t xfeat = 0;
	size_t xsize = xstate_layout(j, &xfeat), xs = xsize ? xsize + 4 : 512;
	/* above the frame, below the red zone: a word for pthread_create's pthread_t */
	uint64_t top = j->regs.rsp - RED_ZONE - 16, fp = (top - xs) & ~(uint64_t)63;
	/* at 8 modulo 16, as the kernel puts it: a function "called" with the stack pointer
	 * at pretcode finds the stack aligned as after a call, and returns into __restore_rt */
	uint64_t frame = ((fp - sizeof(struct k_rt_sigframe)) & ~(uint64_t)15) - 8;
	size_t len = top - frame;
	unsigned char *buf = calloc(1, len);
	struct k_rt_sigframe *f = (void *)buf;
	struct k_sigcontext *sc = &f->uc.mc;
	const struct user_regs_struct *r = &j->resume;
	int err;

	if (!buf)
		return -ENOMEM;
	f->pretcode = j->syms.sigreturn;
	f->uc.uc_flags = UC_SIGCONTEXT_SS | UC_STRICT_RESTORE_SS | (xsize ? UC_FP_XSTATE : 0);
	f->uc.ss_flags = 3; /* not a valid mode: rt_sigreturn leaves the altstack as it is */
	f->uc.sigmask = j->sigmask;
	*sc = (struct k_sigcontext){.r8 = r->r8,
				    .r9 = r->r9,
				    .r10 = r->r10,
				    .r11 = r->r11,
				    .r12 = r->r12,
				    .r13 = r->r13,
				    .r14 = r->r14,
				    .r15 = r->r15,
				    .rdi = r->rdi,
				    .rsi = r->rsi,
				    .rbp = r->rbp,
				    .rbx = r->rbx,
				    .rdx = r->rdx,
				    .rax = r->rax,
				    .rcx = r->rcx,
				    .rsp = r->rsp,
				    .rip = r->rip,
				    .eflags = r->eflags,
				    .cs = (uint16_t)r->cs,
				    .ss = (uint16_t)r->ss,
				    .fpstate = fp};
	frame_fp(j, buf + (fp - frame), xsize, xfeat);
	err = rmem_write(j->pid, frame, buf, len);
	free(buf);
	if (err)
		return err;
	j->frame = frame;
	j->frame_ok = j->syms.sigreturn != 0;
	return 0;
}

/* --- system calls in the target --------------------------------------------------------------- */

static int run_to_syscall_stop(struct inj *j)
{
	int sig = 0;

	if (ptrace(PTRACE_SYSCALL, j->tid, NULL, NULL))
		return -errno;
	switch (wait_stop(j, &sig)) {
	case ST_SYSCALL:
		return 0;
	case ST_EXITED:
		j->attached = false;
		return -ESRCH;
	case ST_TIMEOUT:
		return -ETIMEDOUT;
	default:
		return -EINTR;
	}
}

/*
 * No signal until the thread is back (they wait, pending). Only once its registers lead
 * through the frame, which restores the mask: an eprof killed in between leaves no thread
 * with every signal blocked.
 */
static int block_signals(struct inj *j)
{
	uint64_t all = ~0ULL;

	if (j->masked)
		return 0;
	if (ptrace(PTRACE_SETSIGMASK, j->tid, (void *)sizeof(all), &all))
		return -errno;
	j->masked = true;
	test_die("masked");
	return 0;
}

/* One system call in the stopped thread, through libc's "syscall; ret". */
static int rsys(struct inj *j, long nr, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3,
		uint64_t a4, uint64_t a5, int64_t *ret)
{
	struct user_regs_struct r = j->regs;
	int err;

	r.rax = (uint64_t)nr;
	r.orig_rax = (uint64_t)-1;
	r.rdi = a0;
	r.rsi = a1;
	r.rdx = a2;
	r.r10 = a3;
	r.r8 = a4;
	r.r9 = a5;
	r.rip = j->syms.sys_ret;
	r.rsp = j->frame; /* the "ret" after it pops pretcode: rt_sigreturn */
	if (ptrace(PTRACE_SETREGS, j->tid, NULL, &r))
		return -errno;
	j->modified = true;
	j->at_interrupt = false;
	test_die("syscall-set");
	err = block_signals(j);
	if (!err)
		err = run_to_syscall_stop(j); /* entry */
	if (!err)
		err = run_to_syscall_stop(j); /* exit */
	if (!err && ptrace(PTRACE_GETREGS, j->tid, NULL, &r))
		err = -errno;
	if (err)
		return err;
	*ret = (int64_t)r.rax;
	return 0;
}

/*
 * The last system call: stops at its entry only, then at the PTRACE_INTERRUPT stop on its
 * way back, where the thread's registers can go back (one stop less than rsys + release).
 */
static int rsys_last(struct inj *j, long nr, uint64_t a0, uint64_t a1)
{
	struct user_regs_struct r = j->regs;
	int sig = 0, err;

	r.rax = (uint64_t)nr;
	r.orig_rax = (uint64_t)-1;
	r.rdi = a0;
	r.rsi = a1;
	r.rip = j->syms.sys_ret;
	r.rsp = j->frame;
	if (ptrace(PTRACE_SETREGS, j->tid, NULL, &r))
		return -errno;
	j->modified = true;
	j->at_interrupt = false;
	err = block_signals(j);
	if (!err)
		err = run_to_syscall_stop(j);
	if (err)
		return err;
	if (ptrace(PTRACE_INTERRUPT, j->tid, NULL, NULL) || ptrace(PTRACE_CONT, j->tid, NULL, NULL))
		return -errno;
	if (wait_stop(j, &sig) != ST_INTERRUPT)
		return -EIO;
	j->at_interrupt = true;
	return 0;
}

static int rsys_checked(struct inj *j, const char *what, long nr, uint64_t a0, uint64_t a1,
			uint64_t a2, uint64_t a3, uint64_t a4, uint64_t a5, int64_t *ret)
{
	int err = rsys(j, nr, a0, a1, a2, a3, a4, a5, ret);

	if (err == -ESRCH)
		return fail(j, INJ_ERR_GONE, err, "the process exited during the injection");
	if (err)
		return fail(j, INJ_ERR_OTHER, err, "running %s in the target: %s", what,
			    strerror(-err));
	if (*ret < 0 && *ret > -4096)
		return fail(j, INJ_ERR_SYSCALL, (int)*ret, "%s in the target failed: %s", what,
			    strerror((int)-*ret));
	return 0;
}

/* --- seccomp -------------------------------------------------------------------------------- */

struct planned {
	const char *name;
	long nr;
	uint64_t a[6];
	long alt; /* when it fails with an error: what glibc falls back to (clone3 -> clone), or
		     itself for a failure the caller handles; -1: the injection would fail */
};

/*
 * The system calls the injection makes, with the arguments filters look at: its own, those
 * dlopen and pthread_create make, and the injected entries'.
 */
static const struct planned planned_calls[] = {
    /* the injector's own, in the borrowed thread */
    {"mmap",
     SYS_mmap,
     {0, 2 * STUB_PAGE, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, (uint64_t)-1, 0},
     -1},
    /* the worker's own first: its data page made writable */
    {"mprotect", SYS_mprotect, {0, STUB_PAGE, PROT_READ | PROT_WRITE}, -1},
    {"munmap", SYS_munmap, {0, 2 * STUB_PAGE}, -1},
    {"rt_sigreturn", SYS_rt_sigreturn, {0}, -1},
    /* pthread_create's, in the borrowed thread, and its new thread's start and end */
    {"mmap",
     SYS_mmap,
     {0, 8 << 20, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, (uint64_t)-1, 0},
     -1},
    {"mprotect", SYS_mprotect, {0, 8 << 20, PROT_READ | PROT_WRITE}, -1},
    {"rt_sigprocmask", SYS_rt_sigprocmask, {SIG_SETMASK, 0, 0, 8}, -1},
    {"clone3", SYS_clone3, {0, 88}, SYS_clone},
    {"clone", SYS_clone, {0x3d0f00}, -1},
    {"set_robust_list", SYS_set_robust_list, {0, 24}, SYS_set_robust_list},
    {"rseq", SYS_rseq, {0, 32, 0, 0x53053053}, SYS_rseq},
    {"madvise", SYS_madvise, {0, 0, MADV_DONTNEED}, SYS_madvise},
    {"exit", SYS_exit, {0}, -1},
    /* the worker's (inject_stub.c), dlopen's and dlclose's */
    {"gettid", SYS_gettid, {0}, SYS_gettid},
    {"memfd_create", SYS_memfd_create, {0, MFD_CLOEXEC | MFD_EXEC_}, -1},
    {"write", SYS_write, {3}, -1},
    {"socketpair", SYS_socketpair, {AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0}, -1},
    {"select", SYS_select, {0}, -1},
    {"close", SYS_close, {3}, -1},
    {"openat", SYS_openat, {(uint64_t)AT_FDCWD, 0, O_RDONLY | O_CLOEXEC}, -1},
    {"read", SYS_read, {3}, -1},
    {"pread64", SYS_pread64, {3}, -1},
    {"newfstatat", SYS_newfstatat, {3, 0, 0, AT_EMPTY_PATH}, -1},
    {"mmap", SYS_mmap, {0, 1 << 20, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_FIXED, 3, 0}, -1},
    {"futex", SYS_futex, {0, 129 /* FUTEX_WAKE_PRIVATE */, 1}, -1},
    /*
     * The entries' own: the channel to the recorder (a failure leaves them without
     * it), the CUPTI collector's wake-up eventfd, libeprof_mem.so's probe of a GOT page
     * (a failure: it judges by PT_GNU_RELRO). alt: an error is handled.
     */
    {"socket", SYS_socket, {AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0}, SYS_socket},
    {"connect", SYS_connect, {3}, SYS_connect},
    {"sendto", SYS_sendto, {3}, SYS_sendto},
    {"recvfrom", SYS_recvfrom, {3}, SYS_recvfrom},
    {"eventfd2", SYS_eventfd2, {0, 0x80800 /* EFD_CLOEXEC | EFD_NONBLOCK */}, -1},
    {"process_vm_writev", SYS_process_vm_writev, {0, 0, 1, 0, 1, 0}, SYS_mprotect},
};

/* The tail's calls: a filter that does not let them run means the call is followed instead. */
static int check_seccomp_tail(struct inj *j)
{
	static const long calls[] = {SYS_getpid, SYS_gettid, SYS_tgkill};

	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]) && j->tail_sig; i++) {
		/* ip: in the stub, which a filter may look at, and refuse */
		struct rseccomp_data d = {
		    .nr = (int32_t)calls[i],
		    .arch = AUDIT_ARCH_X86_64,
		    .args = {(uint64_t)j->pid, (uint64_t)j->tid, (uint64_t)j->tail_sig}};
		uint32_t ret = 0;

		if (seccomp_verdict(j->tid, &d, &ret) || !seccomp_allows(ret))
			j->tail_sig = 0;
	}
	return 0;
}

/* The target's filters run on planned_calls: 0, or -EPERM with why (-errno: unreadable). */
static int check_seccomp(struct inj *j, bool load)
{
	struct rseccomp_data d = {.arch = AUDIT_ARCH_X86_64, .ip = j->syms.sys_ret};
	uint64_t mode = 0;

	status_field(j->pid, j->tid, "Seccomp:", 10, &mode);
	j->seccomp = mode != 0;
	if (!mode)
		return 0;
	if (mode == 1)
		return fail(j, INJ_ERR_SECCOMP, -EPERM,
			    "it runs in seccomp strict mode: only read, write and exit");
	for (size_t i = 0; i < sizeof(planned_calls) / sizeof(planned_calls[0]); i++) {
		const struct planned *c = &planned_calls[i];
		uint32_t ret = 0;
		int err;

		if (!load && (c->nr == SYS_memfd_create || c->nr == SYS_socketpair))
			continue;
		d.nr = (int32_t)c->nr;
		memcpy(d.args, c->a, sizeof(d.args));
		err = seccomp_verdict(j->tid, &d, &ret);
		if (err == -EPERM)
			return fail(j, INJ_ERR_SECCOMP, err,
				    "it runs under a seccomp filter eprof cannot read (needs "
				    "CAP_SYS_ADMIN) to check the calls the injection makes");
		if (err)
			return fail(j, INJ_ERR_SECCOMP, err, "reading its seccomp filter: %s",
				    strerror(-err));
		if (seccomp_allows(ret))
			continue;
		if (c->alt >= 0 && (ret & SECCOMP_RET_ACTION_FULL) == SECCOMP_RET_ERRNO)
			continue; /* glibc falls back to the alternative, checked next */
		if ((ret & SECCOMP_RET_ACTION_FULL) == SECCOMP_RET_ERRNO)
			return fail(j, INJ_ERR_SECCOMP, -EPERM,
				    "its seccomp filter forbids %s (it would fail with %s)",
				    c->name, strerror((int)(ret & SECCOMP_RET_DATA)));
		return fail(j, INJ_ERR_SECCOMP, -EPERM, "its seccomp filter forbids %s (%s)",
			    c->name,
			    (ret & SECCOMP_RET_ACTION_FULL) == SECCOMP_RET_KILL_PROCESS ||
				    (ret & SECCOMP_RET_ACTION_FULL) == SECCOMP_RET_KILL_THREAD
				? "it would kill the process"
				: "it would trap or notify");
	}
	return check_seccomp_tail(j);
}

/* --- the stub --------------------------------------------------------------------------------- */

#define DATA(j, field) ((j)->stub + STUB_PAGE + offsetof(struct stub_data, field))

/* The stub's code, its data page d and the library's bytes into the mapping. */
static int write_stub(struct inj *j, const struct stub_data *d)
{
	const size_t code = (size_t)(eprof_inj_stub_end - eprof_inj_stub);
	int err = rmem_write(j->pid, j->map, eprof_inj_stub, code);

	if (!err)
		err = rmem_write(j->pid, j->map + STUB_PAGE, d, sizeof(*d));
	if (!err && j->lib_len)
		err = rmem_write(j->pid, j->map + 2 * STUB_PAGE, j->lib, j->lib_len);
	return err;
}

/*
 * Maps the stub: its code, the data page d and the library's bytes, all written at once while
 * the phase says SETUP: a stub left so (eprof killed before the call) is unmapped by the next
 * injection (clean_leftovers). One system call in the borrowed thread, each costing two stops:
 * the mapping is made read-only and executable and written through /proc/PID/mem (as a
 * debugger writes a breakpoint), and the worker makes its data page writable itself. Where
 * such writes are refused (proc_mem.force_override=never), the mapping is made writable for
 * them and the code page executable again after (two calls more).
 */
static int map_stub(struct inj *j, struct stub_data *d)
{
	int64_t ret;
	int err;

	j->map_len = 2 * STUB_PAGE + ((j->lib_len + STUB_PAGE - 1) & ~(size_t)(STUB_PAGE - 1));
	err = rsys_checked(j, "mmap", SYS_mmap, 0, j->map_len, PROT_READ | PROT_EXEC,
			   MAP_PRIVATE | MAP_ANONYMOUS, (uint64_t)-1, 0, &ret);
	if (err)
		return err;
	j->map = j->stub = (uint64_t)ret;
	d->map = j->map;
	d->map_len = j->map_len;
	if (j->lib_len)
		d->lib_addr = j->map + 2 * STUB_PAGE;
	if (j->blob_arg)
		d->arg = DATA(j, blob);
	err = write_stub(j, d);
	if (err) {
		err = rsys_checked(j, "mprotect", SYS_mprotect, j->map, j->map_len,
				   PROT_READ | PROT_WRITE, 0, 0, 0, &ret);
		if (err)
			return err;
		err = write_stub(j, d);
		if (err)
			return fail(j, INJ_ERR_OTHER, err, "writing the stub: %s", strerror(-err));
		err = rsys_checked(j, "mprotect", SYS_mprotect, j->map, STUB_PAGE,
				   PROT_READ | PROT_EXEC, 0, 0, 0, &ret);
	}
	test_die("mapped");
	return err;
}

#define SIGSETXID_ 33 /* glibc's: its handler runs no program code; setuid() waits for it */

static void fill_common(struct inj *j, struct stub_data *d)
{
	d->magic = STUB_MAGIC;
	d->phase = STUB_PHASE_SETUP;
	d->dlopen = j->syms.dlopen;
	d->dlsym = j->syms.dlsym;
	d->dlclose = j->syms.dlclose;
	d->dlerror = j->syms.dlerror;
	d->detach = j->syms.pthread_detach;
	d->sys_ret = j->syms.sys_ret;
	d->close_fd[0] = d->close_fd[1] = -1;
	d->sv[0] = d->sv[1] = -1;
	d->ack_polls = STUB_WAIT_S * 5000;
#ifdef INJECT_TEST_HOOKS
	if (getenv("INJECT_STUB_WAIT_MS"))
		d->ack_polls = atol(getenv("INJECT_STUB_WAIT_MS")) * 5;
#endif
	d->sigmask = ~(1ULL << (SIGSETXID_ - 1));
	d->busy_tries = 50;
	d->flags = RTLD_NOW;
	d->tail_sig = (uint64_t)j->tail_sig;
}

static int pidfd_take(pid_t pid, int fd)
{
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0), out;

	if (pfd < 0)
		return -errno;
	out = (int)syscall(SYS_pidfd_getfd, pfd, fd, 0);
	if (out < 0)
		out = -errno;
	close(pfd);
	return out;
}

/*
 * The worker made its memfd and socket pair (state 2): take eprof's end, give the entry the
 * target's end and dlopen the memfd's path, or tell the worker to give up.
 */
static int hand_over(struct inj *j, struct stub_data *d)
{
	int64_t memfd = -1;
	uint64_t go = 2;
	int err;

	err = rmem_read(j->pid, DATA(j, close_fd), &memfd, sizeof(memfd));
	if (!err && d->channel)
		err = rmem_read(j->pid, DATA(j, sv), d->sv, sizeof(d->sv));
	if (err) {
		fail(j, INJ_ERR_OTHER, err, "reading the stub's descriptors: %s", strerror(-err));
		goto out;
	}
	if (d->channel) {
		j->res->chan_fd = pidfd_take(j->pid, d->sv[1]);
		if (j->res->chan_fd < 0) {
			err = j->res->chan_fd;
			fail(j, INJ_ERR_OTHER, err, "pidfd_getfd of the channel: %s",
			     strerror(-err));
			goto out;
		}
		memcpy(d->blob + j->chan_fd_off, &d->sv[0], sizeof(int));
	}
	snprintf(d->path, sizeof(d->path), "/proc/self/fd/%d", (int)memfd);
	err = rmem_write(j->pid, DATA(j, path), d->path, sizeof(d->path));
	if (!err)
		err = rmem_write(j->pid, DATA(j, blob), d->blob, sizeof(d->blob));
	if (err)
		fail(j, INJ_ERR_OTHER, err, "writing the stub's data: %s", strerror(-err));
	else
		go = 1;
out:
	if (rmem_write(j->pid, DATA(j, go), &go, sizeof(go)) && !err)
		err = fail(j, INJ_ERR_GONE, -ESRCH, "the process exited during the injection");
	return err;
}

/*
 * Where the borrowed thread's errno is, and its value: the thread pointer (fs_base) plus the
 * offset libc's __errno_location adds to it, read from its code ([endbr64;] mov
 * off(%rip), %rax; add %fs:0, %rax, or the two the other way round) and its GOT. Read, not
 * run: a thread single-stepped through it would get the SIGTRAP of its stop if eprof died
 * there. pthread_create sets errno on its failure paths (glibc 2.36 saves it around clone3's
 * ENOSYS fallback itself, other versions and C libraries may not): it is put back before the
 * thread is.
 */
static void thread_errno(struct inj *j)
{
	static const unsigned char add_fs[] = {0x64, 0x48, 0x03, 0x04, 0x25, 0, 0, 0, 0};
	static const unsigned char mov_fs[] = {0x64, 0x48, 0x8b, 0x04, 0x25, 0, 0, 0, 0};
	static const unsigned char endbr[] = {0xf3, 0x0f, 0x1e, 0xfa};
	unsigned char c[32];
	size_t at = 0, mov;
	int32_t disp;
	int64_t tpoff;
	uint64_t got;

	if (!j->syms.errno_loc || rmem_read(j->pid, j->syms.errno_loc, c, sizeof(c)))
		return;
	if (!memcmp(c, endbr, sizeof(endbr)))
		at = sizeof(endbr);
	if (c[at] == 0x48 && c[at + 1] == 0x8b && c[at + 2] == 0x05 &&
	    !memcmp(c + at + 7, add_fs, sizeof(add_fs)))
		mov = at; /* mov off(%rip), %rax; add %fs:0, %rax */
	else if (!memcmp(c + at, mov_fs, sizeof(mov_fs)) && c[at + 9] == 0x48 &&
		 c[at + 10] == 0x03 && c[at + 11] == 0x05)
		mov = at + 9; /* mov %fs:0, %rax; add off(%rip), %rax */
	else
		return;
	memcpy(&disp, c + mov + 3, sizeof(disp));
	got = j->syms.errno_loc + mov + 7 + (int64_t)disp;
	if (rmem_read(j->pid, got, &tpoff, sizeof(tpoff)) || !j->regs.fs_base)
		return;
	j->errno_at = j->regs.fs_base + (uint64_t)tpoff;
	if (j->errno_at % 4 || !rmaps_find(&j->maps, j->errno_at) ||
	    rmem_read(j->pid, j->errno_at, &j->errno_was, sizeof(j->errno_was)))
		j->errno_at = 0;
}

/*
 * The id eprof sees of the target's thread whose id in the target's own pid namespace is
 * nstid (the last of NSpid in its status), or 0 when none has it.
 */
static pid_t host_tid(pid_t pid, pid_t nstid)
{
	char path[64], line[256];
	struct dirent *de;
	pid_t found = 0;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	dir = opendir(path);
	for (bool same = true; dir && !found && (same || (de = readdir(dir))); same = false) {
		/* first the thread of that id here: the same one when the namespace is eprof's */
		pid_t tid = same ? nstid : (pid_t)strtol(de->d_name, NULL, 10);
		FILE *fp;

		if (tid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid, (int)tid);
		fp = fopen(path, "re");
		while (fp && fgets(line, sizeof(line), fp))
			if (!strncmp(line, "NSpid:", 6)) {
				const char *last = strrchr(line, '\t');

				if (last && strtol(last + 1, NULL, 10) == nstid)
					found = tid;
				break;
			}
		if (fp)
			fclose(fp);
	}
	if (dir)
		closedir(dir);
	return found;
}

/* Whether thread tid of the target still exists. */
static bool thread_alive(pid_t pid, pid_t tid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/task/%d", (int)pid, (int)tid);
	return access(path, F_OK) == 0;
}

/*
 * Gives up on a pthread_create that has not returned by the limit: the worker, when it
 * starts, ends at once (abandoned), and the thread is let go to return from the call and
 * restore itself through the frame.
 */
static void abandon_call(struct inj *j, bool stopped) /* stopped: at a ptrace stop now */
{
	uint64_t one = 1;
	int sig = 0;

	rmem_write(j->pid, DATA(j, abandoned), &one, sizeof(one));
	j->deadline = now_ns() + 2 * STOP_WAIT_NS;
	if (!stopped && !ptrace(PTRACE_INTERRUPT, j->tid, NULL, NULL)) {
		enum stop_kind k = wait_stop(j, &sig); /* the interrupt, or a stop before it */

		stopped = k != ST_TIMEOUT && k != ST_EXITED;
		if (k != ST_SIGNAL)
			sig = 0;
	}
	if (stopped) /* a pending interrupt goes with the detach */
		ptrace(PTRACE_DETACH, j->tid, NULL, (void *)(long)sig);
	j->res->stopped_ns += now_ns() - j->t_stop;
	j->attached = j->modified = false;
	j->map = j->stub = 0; /* the worker's, if one starts */
}

/*
 * The borrowed thread's registers for pthread_create(&word, NULL, stub, data page), its stack
 * pointer at sp: the new thread's id goes to a word below the red zone (the data page is
 * read-only to the program).
 */
static void create_regs(const struct inj *j, struct user_regs_struct *r, uint64_t sp)
{
	*r = j->regs;
	r->rip = j->syms.pthread_create;
	r->rsp = sp;
	r->rdi = j->regs.rsp - RED_ZONE - 16;
	r->rsi = 0;
	r->rdx = j->stub;
	r->rcx = j->stub + STUB_PAGE;
	r->rax = 0;
	r->orig_rax = (uint64_t)-1;
}

/*
 * Lets the thread in pthread_create go on (req: PTRACE_SYSCALL or PTRACE_CONT, delivering
 * *sig) and waits for its next stop up to the deadline: 0 with *k, or the failure. Past the
 * deadline the thread is left to finish the call and restore itself.
 */
static int resume_call(struct inj *j, enum __ptrace_request req, int *sig, enum stop_kind *k)
{
	if (ptrace(req, j->tid, NULL, (void *)(long)*sig)) {
		abandon_call(j, false);
		return fail(j, INJ_ERR_GONE, -ESRCH, "the process exited during the call");
	}
	*sig = 0;
	do
		*k = wait_stop(j, sig);
	while (*k == ST_TIMEOUT && now_ns() < j->deadline);
	if (*k == ST_TIMEOUT) {
		abandon_call(j, false);
		return fail(j, INJ_ERR_TIMEOUT, -ETIMEDOUT,
			    "pthread_create did not return within the time limit (the "
			    "thread is left to finish it and restore itself)");
	}
	if (*k == ST_EXITED) {
		j->attached = false;
		j->map = j->stub = 0;
		return fail(j, INJ_ERR_GONE, -ESRCH, "the process exited during the call");
	}
	return 0;
}

/*
 * The borrowed thread calls pthread_create(&thread, NULL, stub, data) and nothing else: it
 * is "called" with its stack pointer at the frame's pretcode, so pthread_create returns into
 * __restore_rt and the thread restores itself if eprof is not there any more. eprof follows
 * its system calls (PTRACE_SYSCALL): clone3's or clone's return in this thread is the
 * worker's id, and rt_sigreturn's entry is where pthread_create has returned. There its errno
 * is put back and rt_sigreturn let run, to the PTRACE_INTERRUPT stop after it, where
 * release() puts back what the thread was stopped with.
 *
 * pthread_create (glibc 2.36) waits on no lock a constructor holds: allocate_stack takes the
 * stack cache's lock, _dl_allocate_tls_init the loader's TLS lock (dl_load_tls_lock), which
 * dlopen holds while it maps and relocates objects but not while constructors run
 * (dl_open_worker drops it before _dl_init), nor dlclose while destructors run; then malloc's
 * arena locks and the default attribute's lock. Each is held for short moments by threads
 * that do not wait on this one (it is at a safe point: no frame of pthread_create, ld.so or
 * the allocator on its stack). A wait past the limit leaves the thread to finish the call
 * alone (abandon_call).
 */
static int call_traced(struct inj *j)
{
	struct user_regs_struct r = j->regs;
	uint64_t phase = STUB_PHASE_CALLED;
	bool entry = false;
	int sig = 0, err;

	if (rmem_write(j->pid, DATA(j, phase), &phase, sizeof(phase)))
		return fail(j, INJ_ERR_GONE, -ESRCH, "the process exited during the injection");
	create_regs(j, &r, j->frame);
	if (ptrace(PTRACE_SETREGS, j->tid, NULL, &r))
		return fail(j, INJ_ERR_OTHER, -errno, "calling pthread_create: %s",
			    strerror(errno));
	j->modified = true;
	j->at_interrupt = false;
	test_die("call-set");
	for (;;) {
		enum stop_kind k;

		if (now_ns() >= j->deadline) {
			abandon_call(j, true);
			return fail(j, INJ_ERR_TIMEOUT, -ETIMEDOUT,
				    "pthread_create did not return within the time limit (the "
				    "thread is left to finish it and restore itself)");
		}
		err = resume_call(j, PTRACE_SYSCALL, &sig, &k);
		if (err)
			return err;
		if (k == ST_SIGNAL)
			continue; /* a fault of the call: delivered, as it would have been */
		sig = 0;
		/* stopped otherwise (SIGSTOP): let go to finish the call, never cut it short */
		if (k != ST_SYSCALL || ptrace(PTRACE_GETREGS, j->tid, NULL, &r)) {
			abandon_call(j, true);
			return fail(j, INJ_ERR_OTHER, -EIO, "the thread stopped during the call");
		}
		test_die("calling");
		entry = !entry;
		if (!entry && (r.orig_rax == SYS_clone3 || r.orig_rax == SYS_clone) &&
		    (int64_t)r.rax > 0)
			j->worker = -1; /* made: run_worker learns its id from its data page */
		if (entry && r.orig_rax == SYS_rt_sigreturn)
			break;
	}
	if (j->worker)
		j->map = 0; /* the worker's now: it unmaps it */
	if (j->errno_at)
		rmem_write(j->pid, j->errno_at, &j->errno_was, sizeof(j->errno_was));
	test_die("created");
	/*
	 * rt_sigreturn would end the restart block of a nanosleep the thread was stopped in:
	 * skipped, and the thread sent on to a getpid from "syscall; ret" with the stack pointer
	 * at pretcode, which returns through the frame if eprof is killed now. It stops on its
	 * way there, where release() puts its registers back.
	 */
	r = j->regs;
	r.rip = j->syms.sys_ret;
	r.rsp = j->frame;
	r.rax = SYS_getpid;
	r.orig_rax = (uint64_t)-1;
	if (ptrace(PTRACE_SETREGS, j->tid, NULL, &r) ||
	    ptrace(PTRACE_INTERRUPT, j->tid, NULL, NULL) ||
	    ptrace(PTRACE_CONT, j->tid, NULL, NULL) || wait_stop(j, &sig) != ST_INTERRUPT)
		return fail(j, INJ_ERR_OTHER, -EIO, "the thread did not stop after pthread_create");
	j->at_interrupt = true;
	if (!j->worker)
		return fail(j, INJ_ERR_SYSCALL, -EAGAIN,
			    "pthread_create failed in the target (no thread was made)");
	j->worker = 0; /* its id: run_worker */
	return 0;
}

/*
 * The signal the tail raises in the borrowed thread (eprof_inj_tail): one whose default is to
 * be ignored and that the program does not catch, so that the thread, if eprof is gone by
 * then, drops it; 0 when the program catches all three (Go does), and the call is followed
 * system call by system call instead.
 */
static int tail_signal(struct inj *j)
{
	static const int cands[] = {SIGURG, SIGWINCH, SIGCHLD};
	uint64_t caught = ~0ULL;

	if (!status_field(j->pid, j->pid, "SigCgt:", 16, &caught))
		return 0;
	for (size_t i = 0; i < sizeof(cands) / sizeof(cands[0]); i++)
		if (!(caught >> (cands[i] - 1) & 1))
			return cands[i];
	return 0;
}

/*
 * The thread is stopped at the tail's own signal (not another one sent to it): just after the
 * tail's tgkill, a tgkill's signal. (Its si_pid is the process's in its own pid namespace.)
 */
static bool at_tail(struct inj *j, int sig, const struct user_regs_struct *r)
{
	siginfo_t si;

	if (sig != j->tail_sig || r->rip != j->stub + (eprof_inj_tail_stop - eprof_inj_stub) ||
	    r->orig_rax != SYS_tgkill || ptrace(PTRACE_GETSIGINFO, j->tid, NULL, &si))
		return false;
	return si.si_code == SI_TKILL;
}

/*
 * The borrowed thread calls pthread_create(&thread, NULL, stub, data) untraced, and stops
 * once: pthread_create returns into the stub's tail (from a word below the restore frame,
 * whose pretcode stays __restore_rt), which raises tail_sig at the thread itself. Its
 * signal-delivery stop is in the kernel's signal path, as a PTRACE_INTERRUPT stop is:
 * release() puts the thread back there, and the signal is dropped with the detach. Each stop
 * costs a round trip through the scheduler (the thread's, then eprof's), tens of milliseconds
 * on CPUs that other threads keep busy: call_traced's stops at every system call of
 * pthread_create made it several times longer. If eprof is gone when the thread gets there, it
 * drops the signal (ignored) and returns through the frame; the worker unmaps the stub only
 * after eprof's ack, which comes after release(), or 3 s after the worker is done.
 *
 * During the call the thread blocks every signal but tail_sig (pthread_create blocks them all
 * around clone itself); a tail_sig from elsewhere, or a fault, is delivered as it would be.
 */
static int call_tail(struct inj *j)
{
	struct user_regs_struct r = j->regs;
	uint64_t phase = STUB_PHASE_CALLED, ret[2], mask = ~(1ULL << (j->tail_sig - 1));
	int sig = 0, err;

	/* pthread_create's return address below the frame, the stack aligned as after a call;
	 * the tail's "add $8, %rsp; ret" skips ret[1] and returns into pretcode */
	ret[0] = j->stub + (eprof_inj_tail - eprof_inj_stub);
	ret[1] = 0;
	if (rmem_write(j->pid, DATA(j, phase), &phase, sizeof(phase)) ||
	    rmem_write(j->pid, j->frame - 16, ret, sizeof(ret)))
		return fail(j, INJ_ERR_GONE, -ESRCH, "the process exited during the injection");
	create_regs(j, &r, j->frame - 16);
	if (ptrace(PTRACE_SETREGS, j->tid, NULL, &r) ||
	    ptrace(PTRACE_SETSIGMASK, j->tid, (void *)sizeof(mask), &mask))
		return fail(j, INJ_ERR_OTHER, -errno, "calling pthread_create: %s",
			    strerror(errno));
	j->modified = true;
	j->at_interrupt = false;
	test_die("call-set");
	for (;;) {
		enum stop_kind k;

		err = resume_call(j, PTRACE_CONT, &sig, &k);
		if (err)
			return err;
		if (k != ST_SIGNAL || ptrace(PTRACE_GETREGS, j->tid, NULL, &r)) {
			abandon_call(j, k != ST_SIGNAL);
			return fail(j, INJ_ERR_OTHER, -EIO, "the thread stopped during the call");
		}
		if (at_tail(j, sig, &r))
			break;
		/* another signal (a fault of the call, a tail_sig from elsewhere): delivered */
	}
	j->at_interrupt = true; /* in the signal path: release() puts the thread back here */
	test_die("calling");
	if (j->errno_at)
		rmem_write(j->pid, j->errno_at, &j->errno_was, sizeof(j->errno_was));
	if ((int64_t)r.r8 != 0)
		return fail(j, INJ_ERR_SYSCALL, -EAGAIN,
			    "pthread_create failed in the target: %s (no thread was made)",
			    strerror((int)r.r8));
	j->map = 0; /* the worker's now: it unmaps it */
	test_die("created");
	return 0;
}

static int call_create(struct inj *j)
{
	return j->tail_sig ? call_tail(j) : call_traced(j);
}

/*
 * Follows the worker through its data page until it is done: hands over the descriptors
 * (state 2), reads the results, lets it go (ack) and waits for its thread to end, the mapping
 * gone with it. Past the limit it is told to give up (abandoned) and left to end alone: a
 * library its dlopen opens after is closed again before its entry is called. An entry it had
 * already started (step 3, which it checks abandoned after saying) is waited for 2 s more:
 * a library left running without eprof knowing would go on unseen.
 */
static int run_worker(struct inj *j, struct stub_data *d)
{
	struct timespec ts = {0, 20000};
	bool handed = false, gave_up = false;
	uint64_t one = 1, two = 2;
	int err;

	test_die("worker-running");
	for (;;) {
		uint64_t state = 0, tid = 0;
		bool alive;

		/* the worker says who it is itself (in its pid namespace's numbers) */
		if (!j->worker && !rmem_read(j->pid, DATA(j, worker_tid), &tid, sizeof(tid)) &&
		    tid > 0 && tid < INT32_MAX)
			j->worker = host_tid(j->pid, (pid_t)tid);
		alive = !j->worker || thread_alive(j->pid, j->worker);

		if (rmem_read(j->pid, DATA(j, state), &state, sizeof(state)))
			return fail(j, INJ_ERR_GONE, -ESRCH, "the process exited during the call");
		if (state == 2 && !handed) {
			handed = true;
			hand_over(j,
				  d); /* an error leaves the worker to give up, and is reported */
			test_die("handed-over");
			continue;
		}
		if (state == 1)
			break;
		if (!alive)
			return fail(j, INJ_ERR_OTHER, -EIO, "the injector's thread ended early");
		if (now_ns() >= j->deadline && !gave_up) {
			uint64_t step = 0;

			/* the worker checks abandoned after it says step 3: one sees the other */
			gave_up = true;
			rmem_write(j->pid, DATA(j, abandoned), &one, sizeof(one));
			if (!handed)
				rmem_write(j->pid, DATA(j, go), &two, sizeof(two));
			if (!rmem_read(j->pid, DATA(j, step), &step, sizeof(step)) && step >= 3) {
				j->deadline = now_ns() + ENTRY_GRACE_NS; /* the entry runs */
				continue;
			}
			j->stub = 0;
			return fail(j, INJ_ERR_TIMEOUT, -ETIMEDOUT,
				    "the call did not return within the time limit (its thread, "
				    "not the program's, finishes alone and unloads what it loads)");
		}
		if (now_ns() >= j->deadline) {
			j->stub = 0;
			return fail(
			    j, INJ_ERR_TIMEOUT, -ETIMEDOUT,
			    "the library's entry did not return within the time limit (left "
			    "to finish in the injector's thread)");
		}
		nanosleep(&ts, NULL);
		if (ts.tv_nsec < 1000000)
			ts.tv_nsec += 20000;
	}
	test_die("worker-done");
	err = rmem_read(j->pid, j->stub + STUB_PAGE, d, sizeof(*d));
	if (err)
		return fail(j, INJ_ERR_GONE, err, "the process exited during the call");
	rmem_write(j->pid, DATA(j, ack), &one, sizeof(one));
	/* its munmap and exit follow the ack at once: a caller may check the maps after */
	for (uint64_t until = now_ns() + STOP_WAIT_NS; thread_alive(j->pid, j->worker);) {
		struct timespec nap = {0, 200000};

		if (now_ns() >= until)
			break;
		nanosleep(&nap, NULL);
	}
	j->stub = 0;
	if (d->sys_err)
		return fail(j, INJ_ERR_SYSCALL, (int)d->sys_err,
			    "a system call of the stub failed in the target: %s",
			    strerror((int)-d->sys_err));
	return j->res->err ? -EIO : 0;
}

/*
 * Maps the stub, has the borrowed thread start the worker and gives the thread back at once;
 * then follows the worker.
 */
static int run_stub(struct inj *j, struct stub_data *d)
{
	int err = map_stub(j, d);

	if (!err)
		err = call_create(j);
	if (err)
		return err;
	release(j);
	return run_worker(j, d);
}

/* --- stubs left behind ------------------------------------------------------------------------ */

#define MAX_LEFTOVERS 16

/*
 * Stubs an eprof left mapped when it was killed before it handed them to pthread_create (phase
 * SETUP): nothing will ever run them. Found before a thread is stopped (reading a little of
 * every anonymous mapping takes a while in a large process).
 */
static void find_leftovers(struct inj *j)
{
	for (size_t i = 0; i < j->maps.n && j->nleft < MAX_LEFTOVERS; i++) {
		const struct rmap *r = &j->maps.v[i];
		unsigned char head[32];
		uint64_t hdr[3]; /* magic, phase at SD_MAGIC */

		if (r->path[0] || r->perms[0] != 'r' ||
		    rmem_read(j->pid, r->start, head, sizeof(head)) ||
		    memcmp(head, eprof_inj_stub, sizeof(head)) ||
		    rmem_read(j->pid, r->start + STUB_PAGE + SD_MAGIC, hdr, sizeof(hdr)))
			continue;
		if (hdr[0] == STUB_MAGIC && hdr[1] == STUB_PHASE_SETUP)
			j->left[j->nleft++] = r->start;
	}
}

/* Another thread of the process is under a tracer (another injection may be setting up). */
static bool other_traced(struct inj *j)
{
	char path[64];
	struct dirent *de;
	bool traced = false;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)j->pid);
	dir = opendir(path);
	while (dir && !traced && (de = readdir(dir))) {
		pid_t tid = (pid_t)strtol(de->d_name, NULL, 10);
		uint64_t tracer = 0;

		if (tid > 0 && tid != j->tid &&
		    status_field(j->pid, tid, "TracerPid:", 10, &tracer))
			traced = tracer != 0;
	}
	if (dir)
		closedir(dir);
	return traced || !dir;
}

/*
 * Unmaps the leftovers find_leftovers saw, from the borrowed thread. A stub in phase SETUP is
 * also one another injection is setting up right now, with a thread of the process stopped
 * under its ptrace until it has written phase CALLED: none is unmapped while another thread
 * has a tracer, and the phase is read again after that check. (A stub past SETUP is its
 * worker's to unmap; the worker always does, eprof there or not.)
 */
static void clean_leftovers(struct inj *j)
{
	if (!j->nleft || other_traced(j))
		return;
	for (unsigned i = 0; i < j->nleft; i++) {
		uint64_t hdr[2], len = 0;
		int64_t ret;

		if (rmem_read(j->pid, j->left[i] + STUB_PAGE + SD_MAGIC, hdr, sizeof(hdr)) ||
		    hdr[0] != STUB_MAGIC || hdr[1] != STUB_PHASE_SETUP ||
		    rmem_read(j->pid, j->left[i] + STUB_PAGE + SD_MAP_LEN, &len, sizeof(len)) ||
		    len < 2 * STUB_PAGE || len > (128u << 20) || len % STUB_PAGE)
			continue;
		if (!rsys(j, SYS_munmap, j->left[i], len, 0, 0, 0, 0, &ret) && !ret)
			j->res->leftovers++;
	}
}

/* --- the whole operation -----------------------------------------------------------------------
 */

static int begin(struct inj *j, pid_t pid, struct inject_result *res, bool load)
{
	char msg[200];
	int err;

	err = rmaps_read(NULL, pid, &j->maps);
	if (err)
		return fail(j, INJ_ERR_GONE, err, "cannot read its maps: %s", strerror(-err));
	err = rsyms_find(pid, &j->maps, &j->syms, msg, sizeof(msg));
	if (err == -ENOENT)
		return fail(j, INJ_ERR_NO_DLOPEN, err, "%s", msg);
	if (err)
		return fail(j, INJ_ERR_OTHER, err, "reading its libc: %s", strerror(-err));
	if (!j->syms.pthread_create || !j->syms.pthread_detach)
		return fail(j, INJ_ERR_NO_DLOPEN, -ENOENT,
			    "it maps no pthread_create (glibc before 2.34 without libpthread): the "
			    "injection runs in a thread of its own");
	err = rrisk_init(pid, &j->maps, &j->risk);
	if (err)
		return fail(j, INJ_ERR_OTHER, err, "reading its mappings: %s", strerror(-err));
	find_leftovers(j);
	err = stop_thread(j);
	if (err)
		return err;
	res->tid = j->tid;
	if (shadow_stack(j->pid, j->tid))
		return fail(
		    j, INJ_ERR_OTHER, -ENOTSUP,
		    "it runs with shadow stacks (CET), which the injection does not support");
	j->tail_sig = tail_signal(j);
#ifdef INJECT_TEST_HOOKS
	if (getenv("INJECT_TRACED")) /* tests: the call followed system call by system call */
		j->tail_sig = 0;
#endif
	err = check_seccomp(j, load);
	if (err)
		return err;
	plan_resume(j);
	err = write_frame(j);
	if (err)
		return fail(j, INJ_ERR_OTHER, err, "writing the restore frame: %s", strerror(-err));
	test_die("frame");
	thread_errno(j);
	clean_leftovers(j);
	return 0;
}

static void init(struct inj *j, pid_t pid, unsigned timeout_ms, struct inject_result *res)
{
	memset(res, 0, sizeof(*res));
	res->chan_fd = -1;
	res->dlclose_ret = -1;
	memset(j, 0, sizeof(*j));
	j->pid = pid;
	j->res = res;
	j->t0 = now_ns();
	j->deadline = j->t0 + (uint64_t)(timeout_ms ? timeout_ms : 5000) * 1000000ULL;
}

/* Puts everything back: a stub no worker took, the thread. */
static void end(struct inj *j)
{
	j->deadline = now_ns() + 2 * STOP_WAIT_NS; /* time to clean up, whatever went before */
	if (j->map && j->attached)
		rsys_last(j, SYS_munmap, j->map, j->map_len);
	release(j);
	reap_stuck(j);
	rmaps_free(&j->maps);
	rrisk_free(&j->risk);
	free(j->xs);
	free(j->lib);
	j->res->total_ns = now_ns() - j->t0;
}

static int read_lib(struct inj *j, const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	off_t len;
	int err = 0;

	if (fd < 0)
		return fail(j, INJ_ERR_OTHER, -errno, "cannot read %s: %s", path, strerror(errno));
	len = lseek(fd, 0, SEEK_END);
	if (len <= 0 || len > (64 << 20))
		err = -EINVAL;
	else if (!(j->lib = malloc((size_t)len)))
		err = -ENOMEM;
	else if (pread(fd, j->lib, (size_t)len, 0) != len)
		err = -EIO;
	close(fd);
	if (err)
		return fail(j, INJ_ERR_OTHER, err, "cannot read %s: %s", path, strerror(-err));
	j->lib_len = (size_t)len;
	return 0;
}

static int load_op(pid_t pid, const void *req, struct inject_result *res)
{
	const struct inject_load_req *rq = req;
	struct stub_data d = {0};
	struct inj j;
	int err;

	init(&j, pid, rq->timeout_ms, res);
	if (rq->blob_len > sizeof(d.blob) ||
	    (rq->channel && rq->chan_fd_off + sizeof(int) > rq->blob_len))
		err = fail(&j, INJ_ERR_OTHER, -EINVAL, "bad argument for the call");
	else
		err = read_lib(&j, rq->lib_path);
	j.chan_fd_off = rq->chan_fd_off;
	if (!err)
		err = begin(&j, pid, res, true);
	if (!err) {
		fill_common(&j, &d);
		d.op = STUB_LOAD;
		d.lib_len = j.lib_len;
		d.memfd_flags = MFD_CLOEXEC | MFD_EXEC_;
		d.channel = rq->channel;
		snprintf(d.name, sizeof(d.name), "%s", rq->memfd_name ? rq->memfd_name : "eprof");
		snprintf(d.sym, sizeof(d.sym), "%s", rq->entry);
		memcpy(d.blob, rq->blob, rq->blob_len);
		j.blob_arg = rq->blob_len != 0;
		err = run_stub(&j, &d);
	}
	if (!err) {
		res->handle = d.handle;
		res->ret = d.ret;
		if (!d.handle || !d.fn)
			err = fail(&j, INJ_ERR_LOAD, -ENOENT, "%s failed in the target: %s",
				   d.handle ? "dlsym" : "dlopen",
				   d.err && d.errmsg[0] ? d.errmsg : "no reason given");
	}
	end(&j);
	if (err && res->chan_fd >= 0) {
		close(res->chan_fd);
		res->chan_fd = -1;
	}
	return err;
}

static int unload_op(pid_t pid, const void *req, struct inject_result *res)
{
	const struct inject_unload_req *rq = req;
	struct stub_data d = {0};
	struct inj j;
	int err;

	init(&j, pid, rq->timeout_ms, res);
	j.avoid = rq->avoid_tid;
	err = begin(&j, pid, res, false);
	if (!err) {
		fill_common(&j, &d);
		d.op = STUB_UNLOAD;
		d.handle = rq->handle;
		d.arg = rq->arg;
		d.keep = rq->keep_loaded;
		snprintf(d.sym, sizeof(d.sym), "%s", rq->retract);
		err = run_stub(&j, &d);
	}
	if (!err) {
		res->ret = d.ret;
		res->dlclose_ret = d.step >= 5 ? (int)d.close_ret : -1;
		if (!d.fn)
			err = fail(&j, INJ_ERR_LOAD, -ENOENT, "dlsym failed in the target: %s",
				   d.err && d.errmsg[0] ? d.errmsg : "no reason given");
	}
	end(&j);
	return err;
}

struct op {
	int (*fn)(pid_t pid, const void *rq, struct inject_result *res);
	pid_t pid;
	const void *rq;
	struct inject_result *res;
	int ret;
};

/*
 * The operation's thread runs at nice -20 (when eprof may: root, CAP_SYS_NICE): each stop of
 * the borrowed thread waits for this thread to be woken and to run, and on CPUs the job's
 * other threads keep busy, a thread of nice 0 waited 4-8 ms (scheduler ticks) for each of
 * them. It sleeps between them and lives for the operation only.
 */
static void *op_main(void *arg)
{
	struct op *o = arg;

	if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), -20))
		errno = 0; /* not allowed: the same at nice 0, only slower on a loaded machine */
	o->ret = o->fn(o->pid, o->rq, o->res);
	return NULL;
}

/*
 * Each operation runs in a thread of its own, the tracer of the threads it seizes: when it
 * ends, the kernel detaches a thread whose stop never came and drops the interrupt still
 * pending, so that thread is not stopped later with nobody to let it go.
 */
static int in_own_thread(struct op *o)
{
	pthread_t t;

	if (pthread_create(&t, NULL, op_main, o))
		return o->fn(o->pid, o->rq, o->res);
	pthread_join(t, NULL);
	return o->ret;
}

int inject_load(pid_t pid, const struct inject_load_req *rq, struct inject_result *res)
{
	struct op o = {load_op, pid, rq, res, 0};

	return in_own_thread(&o);
}

int inject_unload(pid_t pid, const struct inject_unload_req *rq, struct inject_result *res)
{
	struct op o = {unload_op, pid, rq, res, 0};

	return in_own_thread(&o);
}

#endif
