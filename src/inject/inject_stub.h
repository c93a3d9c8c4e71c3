/* SPDX-License-Identifier: MIT */
/*
 * The code the injector copies into the target (x86-64, position-independent, in
 * inject_stub.c) and the data page that follows it, which eprof fills before the stub runs
 * and reads while and after it runs. Offsets are fixed: the assembly uses the SD_ numbers.
 *
 * The stub is the start routine of a thread of its own (the worker): a borrowed program thread
 * only calls pthread_create(&thread, NULL, stub, data) and is given back; the worker does the
 * rest (STUB_LOAD or STUB_UNLOAD), says where it is in state and step, and when it is done and
 * eprof has read the results (ack), or eprof gave up (abandoned) or went away (the ack does
 * not come), it unmaps the whole mapping from libc's "syscall; ret" and returns from there to
 * pthread's start_thread: no instruction of the stub runs after the munmap.
 *
 * STUB_LOAD with lib_len: the worker copies the library (lib_len bytes at lib_addr, in the
 * mapping) into a memfd of its own and, with channel, makes a socket pair; then it says so
 * (state 2) and waits for eprof, which takes its end of the pair (pidfd_getfd), writes the
 * path /proc/self/fd/N and the blob with the target's end, and sets go (1: go on, 2: give up).
 *
 * The tail (eprof_inj_tail) is what pthread_create returns into in the borrowed thread: the
 * thread runs the call untraced and stops once, at the tail's signal; the stub is the
 * worker's to unmap only after eprof has let the thread go from there (ack).
 *
 * steps reached (step): 1 started, 2 loaded, 3 found, 4 called, 5 closed
 */
#ifndef EPROF_INJECT_STUB_H
#define EPROF_INJECT_STUB_H

#include <stddef.h>
#include <stdint.h>

#define STUB_PAGE 4096
#define STUB_LOAD 1   /* h = dlopen(path, flags); fn = dlsym(h, sym); ret = fn(arg) */
#define STUB_UNLOAD 2 /* fn = dlsym(handle, sym); ret = fn(arg); if !ret && !keep: dlclose(h) */
#define STUB_MAGIC 0x425554535f495045ULL /* "EPI_STUB": a data page of ours */

/* phase: who may run the stub (the next injection unmaps a stub nobody ever will) */
#define STUB_PHASE_SETUP 0  /* written by eprof; no thread runs it yet */
#define STUB_PHASE_CALLED 1 /* handed to pthread_create: its worker unmaps it */

#define SD_STATE 0
#define SD_OP 8
#define SD_DLOPEN 16
#define SD_DLSYM 24
#define SD_DLCLOSE 32
#define SD_DLERROR 40
#define SD_HANDLE 48
#define SD_FN 56
#define SD_ARG 64
#define SD_RET 72
#define SD_ERR 80
#define SD_CLOSE_FD 88
#define SD_FLAGS 104
#define SD_STEP 112
#define SD_CLOSE_RET 120
#define SD_ACK_POLLS 128
#define SD_MAGIC 136
#define SD_PHASE 144
#define SD_KEEP 152
#define SD_LIB_ADDR 160
#define SD_LIB_LEN 168
#define SD_MEMFD_FLAGS 176
#define SD_CHANNEL 184
#define SD_GO 192
#define SD_SYS_ERR 200
#define SD_TV_POLL 208
#define SD_ABANDONED 224
#define SD_THREAD 232
#define SD_DETACH 240
#define SD_ACK 248
#define SD_PATH 256
#define SD_SYM 768
#define SD_NAME 896
#define SD_SV 960
#define SD_WORKER_TID 968
#define SD_MAP 976
#define SD_MAP_LEN 984
#define SD_SYS_RET 992
#define SD_BUSY_TRIES 1000
#define SD_SIGMASK 1008
#define SD_BLOB 1024
#define SD_ERRMSG 3072
#define SD_TAIL_SIG 3328

struct stub_data {
	uint64_t state; /* 0 running, 2 descriptors made, 1 done */
	uint64_t op;
	uint64_t dlopen, dlsym, dlclose, dlerror;
	uint64_t handle; /* out of STUB_LOAD, in to STUB_UNLOAD */
	uint64_t fn;
	uint64_t arg;
	int64_t ret;
	uint64_t err;	     /* dlerror() said something: its text is in errmsg */
	int64_t close_fd[2]; /* closed by the worker at its end; -1: none (the memfd comes here) */
	uint64_t flags;	     /* dlopen's */
	uint64_t step;
	int64_t close_ret;	    /* dlclose's */
	int64_t ack_polls;	    /* 200 us polls the worker waits for ack before it goes alone */
	uint64_t magic;		    /* STUB_MAGIC */
	uint64_t phase;		    /* STUB_PHASE_* */
	uint64_t keep;		    /* STUB_UNLOAD: no dlclose */
	uint64_t lib_addr, lib_len; /* the library's bytes in the mapping */
	uint64_t memfd_flags;
	uint64_t channel; /* make a socket pair */
	uint64_t go;
	int64_t sys_err; /* a system call of the stub failed with this */
	int64_t tv_poll[2];
	uint64_t abandoned; /* eprof gave up: undo a load not called yet (checked after step 3) */
	uint64_t thread;    /* unused (pthread_create's pthread_t goes to the stack) */
	uint64_t detach;    /* pthread_detach, called by the worker on itself */
	uint64_t ack;	    /* eprof read the results: the worker may unmap and go */
	char path[512];	    /* at 256 */
	char sym[128];	    /* at 768 */
	char name[64];	    /* at 896: the memfd's name */
	int32_t sv[2];	    /* at 960: socketpair's result (-1 before; sv[1] -1 once closed) */
	uint64_t worker_tid;
	uint64_t map, map_len; /* the whole mapping, unmapped by the worker at its end */
	uint64_t sys_ret;      /* libc's "syscall; ret", where the worker unmaps from */
	uint64_t busy_tries;   /* STUB_UNLOAD: calls again while fn says -EBUSY, 2 ms apart */
	uint64_t sigmask;      /* the worker's signal mask */
	uint8_t pad[8];
	uint8_t blob[2048]; /* at 1024 */
	char errmsg[256];   /* at 3072: dlerror()'s text (it lives in the worker's TLS) */
	uint64_t tail_sig; /* the signal the tail raises (eprof_inj_tail) */
};

#define SD_CHECK(field, off) _Static_assert(offsetof(struct stub_data, field) == off, #field)
SD_CHECK(state, SD_STATE);
SD_CHECK(op, SD_OP);
SD_CHECK(dlopen, SD_DLOPEN);
SD_CHECK(dlsym, SD_DLSYM);
SD_CHECK(dlclose, SD_DLCLOSE);
SD_CHECK(dlerror, SD_DLERROR);
SD_CHECK(handle, SD_HANDLE);
SD_CHECK(fn, SD_FN);
SD_CHECK(arg, SD_ARG);
SD_CHECK(ret, SD_RET);
SD_CHECK(err, SD_ERR);
SD_CHECK(close_fd, SD_CLOSE_FD);
SD_CHECK(flags, SD_FLAGS);
SD_CHECK(step, SD_STEP);
SD_CHECK(close_ret, SD_CLOSE_RET);
SD_CHECK(ack_polls, SD_ACK_POLLS);
SD_CHECK(magic, SD_MAGIC);
SD_CHECK(phase, SD_PHASE);
SD_CHECK(keep, SD_KEEP);
SD_CHECK(lib_addr, SD_LIB_ADDR);
SD_CHECK(lib_len, SD_LIB_LEN);
SD_CHECK(memfd_flags, SD_MEMFD_FLAGS);
SD_CHECK(channel, SD_CHANNEL);
SD_CHECK(go, SD_GO);
SD_CHECK(sys_err, SD_SYS_ERR);
SD_CHECK(tv_poll, SD_TV_POLL);
SD_CHECK(abandoned, SD_ABANDONED);
SD_CHECK(thread, SD_THREAD);
SD_CHECK(detach, SD_DETACH);
SD_CHECK(ack, SD_ACK);
SD_CHECK(path, SD_PATH);
SD_CHECK(sym, SD_SYM);
SD_CHECK(name, SD_NAME);
SD_CHECK(sv, SD_SV);
SD_CHECK(worker_tid, SD_WORKER_TID);
SD_CHECK(map, SD_MAP);
SD_CHECK(map_len, SD_MAP_LEN);
SD_CHECK(sys_ret, SD_SYS_RET);
SD_CHECK(busy_tries, SD_BUSY_TRIES);
SD_CHECK(sigmask, SD_SIGMASK);
SD_CHECK(blob, SD_BLOB);
SD_CHECK(errmsg, SD_ERRMSG);
SD_CHECK(tail_sig, SD_TAIL_SIG);
_Static_assert(sizeof(struct stub_data) <= STUB_PAGE, "stub data page");

#if defined(__x86_64__)
/* the worker's start routine, at the start of the code page */
extern const unsigned char eprof_inj_stub[], eprof_inj_stub_end[];
/*
 * Where pthread_create returns to in the borrowed thread (an offset in the code page like
 * the rest): pthread_create's result goes to r8, then tgkill(getpid(), gettid(), tail_sig),
 * whose signal-delivery stop is where eprof puts the thread back; then, eprof gone (the
 * signal, one the program ignores, was dropped), "add $8, %rsp; ret" into the restore
 * frame's pretcode (__restore_rt). eprof_inj_tail_stop is the address after the syscall.
 */
extern const unsigned char eprof_inj_tail[], eprof_inj_tail_stop[];
#endif

#endif
