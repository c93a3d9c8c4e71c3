/* SPDX-License-Identifier: MIT */
/*
 * Loading a shared library into a running process and calling a function of it, then, later,
 * calling another function of it and unloading it: the injection that lets `record -p` give a
 * running program eprof's CUPTI collector (docs/gpu.md, "Attach mode"), written so that other
 * in-process collectors can use it the same way.
 *
 * One thread of the target is borrowed for a millisecond or two with ptrace; the process's
 * other threads keep running. The thread is stopped where calling into libc is safe (blocked
 * in a system call, or in the program's own code, with no frame of the loader, the allocator
 * or eprof's libraries on its stack), runs one system call eprof hands it (a mapping for a
 * small code stub and the library's bytes) and pthread_create, which starts the injector's own
 * thread (the worker) in the stub, three ptrace stops in all; then it gets its registers,
 * floating-point state, errno and signal mask back, and a system call it was blocked in is
 * restarted as the kernel would have (nanosleep, read, futex, poll, ...; epoll_wait, which the
 * stop ends with EINTR, is issued again). Signals that arrive meanwhile wait, blocked, and are
 * delivered after. The worker makes a memfd holding the library and a socket pair for the
 * channel, calls the target's own dlopen on /proc/self/fd/N and the entry point (or the
 * retraction and dlclose), says how it went in its data page and unmaps the stub: a dlopen that
 * waits on the loader's lock (a slow constructor in another thread) holds up no program thread.
 *
 * If eprof dies at any point, the thread finds its way back alone: everything it runs ends in
 * an rt_sigreturn through a frame written below its stack pointer first, which restores its
 * registers, signal mask and FP state (a call interrupted in a restartable system call that
 * uses the kernel's restart block, nanosleep above all, then returns EINTR); a worker already
 * started finishes alone and unmaps the stub; a stub never handed to pthread_create is
 * unmapped by the next injection; whatever the called function did stays.
 *
 * x86-64 only (other architectures get -ENOTSUP with a message). Errors are one line in
 * res->msg, by class in res->err.
 */
#ifndef EPROF_INJECT_H
#define EPROF_INJECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum inject_err {
	INJ_OK = 0,
	INJ_ERR_PTRACE,	       /* ptrace refused: Yama, no CAP_SYS_PTRACE, another tracer */
	INJ_ERR_SECCOMP,       /* the target's seccomp filter forbids a system call it needs */
	INJ_ERR_NO_DLOPEN,     /* no dlopen in the process (static binary, no glibc) */
	INJ_ERR_NO_SAFE_POINT, /* no thread stopped where calling into libc is safe */
	INJ_ERR_GONE,	       /* the process or thread exited */
	INJ_ERR_TIMEOUT,       /* no answer in time (the stub, if it runs, finishes alone) */
	INJ_ERR_LOAD,	       /* dlopen or dlsym failed in the target (dlerror's text) */
	INJ_ERR_SYSCALL,       /* a system call in the target failed */
	INJ_ERR_ARCH,	       /* not x86-64 */
	INJ_ERR_OTHER,
};

struct inject_result {
	enum inject_err err;
	char msg[320];	 /* one line: what failed and why; empty on success */
	int64_t ret;	 /* the called function's return value (an int, sign-extended) */
	uint64_t handle; /* inject_load: dlopen's handle in the target */
	int chan_fd;	 /* inject_load with a channel: eprof's end of the socket pair, else -1 */
	int dlclose_ret; /* inject_unload: dlclose's result; -1 when it was not called */
	pid_t tid;	 /* the thread borrowed */
	uint64_t stopped_ns; /* how long that thread ran none of its own code */
	uint64_t total_ns;   /* the whole operation, retries at unsafe points included */
	unsigned attempts;   /* threads stopped before one was at a safe point */
	unsigned leftovers;  /* stubs a killed eprof left mapped, unmapped by this operation */
	unsigned rseq_aborts; /* the thread was inside an rseq critical section: resumed at its
				 abort handler, as the kernel restarts one after a preemption */
};

struct inject_load_req {
	const char *lib_path;	/* eprof's file: copied into a memfd in the target */
	const char *memfd_name; /* the target's maps show /memfd:NAME (deleted) while loaded */
	const char *entry;	/* called as int entry(void *blob) */
	/*
	 * Copied into the target for the call only (the function copies what it keeps). With
	 * channel, the target's end of a SOCK_SEQPACKET socket pair (an int) is written at
	 * chan_fd_off of the copy, and eprof's end comes back in res->chan_fd.
	 */
	const void *blob;
	size_t blob_len;
	bool channel;
	size_t chan_fd_off;
	unsigned timeout_ms; /* the whole operation (0: 5000) */
};

/* 0, or a negative errno with res->err and res->msg set. */
int inject_load(pid_t pid, const struct inject_load_req *rq, struct inject_result *res);

struct inject_unload_req {
	uint64_t handle;     /* inject_load's res->handle */
	const char *retract; /* int retract(uint64_t arg), called first; NULL: none */
	uint64_t arg;
	bool keep_loaded;    /* call retract only (the library asked to stay) */
	unsigned timeout_ms; /* 0: 5000 */
	pid_t avoid_tid;     /* a thread not to borrow (the last try's), 0: none */
};

/*
 * Calls retract(arg) and, when it returned 0 and !keep_loaded, dlclose(handle). 0 when both
 * ran (res->ret and res->dlclose_ret say how they went), or a negative errno.
 */
int inject_unload(pid_t pid, const struct inject_unload_req *rq, struct inject_result *res);

/* Short name of an error class ("ptrace refused", ...). */
const char *inject_err_name(enum inject_err e);

/*
 * Whether pid maps anything whose path contains needle (after an injection: nothing of
 * eprof's may be left). proc_root NULL: "/proc".
 */
bool inject_maps_contain(const char *proc_root, pid_t pid, const char *needle);

#endif
