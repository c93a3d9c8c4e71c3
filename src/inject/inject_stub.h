/* SPDX-License-Identifier: MIT */
/*
 * The code the injector copies into the target (x86-64, position-independent, in
 * inject_stub.c) and the data page that follows it, which eprof fills before the stub runs
 * and reads after. Offsets are fixed: the assembly uses the numbers.
 */
#ifndef EPROF_INJECT_STUB_H
#define EPROF_INJECT_STUB_H

#include <stddef.h>
#include <stdint.h>

#define STUB_PAGE 4096
#define STUB_LOAD 1   /* h = dlopen(path, flags); fn = dlsym(h, sym); ret = fn(arg) */
#define STUB_UNLOAD 2 /* fn = dlsym(handle, sym); ret = fn(arg); if !ret && !keep: dlclose(h) */

/*
 * STUB_LOAD with lib_len: before dlopen the stub copies the library (lib_len bytes at
 * lib_addr, in its mapping) into a memfd of its own and, with channel, makes a socket pair;
 * then it says so (state 2) and waits for eprof, which takes its end of the pair
 * (pidfd_getfd), writes the path /proc/self/fd/N and the blob with the target's end, and sets
 * go (1: go on, 2: give up).
 *
 * steps reached (step): 1 started, 2 loaded, 3 found, 4 called, 5 closed
 */
struct stub_data {
	uint64_t state; /* 0 running, 2 descriptors made, 1 done (waiting for eprof in select) */
	uint64_t op;
	uint64_t dlopen, dlsym, dlclose, dlerror;
	uint64_t handle; /* out of STUB_LOAD, in to STUB_UNLOAD */
	uint64_t fn;
	uint64_t arg;
	int64_t ret;
	uint64_t err;	     /* dlerror()'s string, when dlopen or dlsym failed */
	int64_t close_fd[2]; /* closed before the stub waits; -1: none (the memfd comes here) */
	uint64_t flags;	     /* dlopen's */
	uint64_t step;
	int64_t close_ret; /* dlclose's */
	int64_t tv[2];	   /* how long the stub waits for eprof before restoring the thread */
	uint64_t frame;	   /* the restore frame: rt_sigreturn with this stack pointer */
	uint64_t keep;	   /* STUB_UNLOAD: no dlclose */
	uint64_t lib_addr, lib_len; /* the library's bytes in the mapping */
	uint64_t memfd_flags;
	uint64_t channel; /* make a socket pair */
	uint64_t go;
	int64_t sys_err; /* a system call of the stub failed with this */
	int64_t tv_poll[2];
	uint64_t abandoned; /* eprof gave up: undo a load the stub has not called yet, no wait */
	uint64_t errno_fn;  /* libc's __errno_location (0: none): errno is kept across the calls */
	uint64_t errno_at;
	int64_t errno_was;
	char path[512]; /* at 256 */
	char sym[128];	/* at 768 */
	char name[64];	/* at 896: the memfd's name */
	int32_t sv[2];	/* at 960: socketpair's result */
	uint8_t pad2[56];
	uint8_t blob[2048]; /* at 1024 */
};

_Static_assert(offsetof(struct stub_data, op) == 8, "stub op");
_Static_assert(offsetof(struct stub_data, dlopen) == 16, "stub dlopen");
_Static_assert(offsetof(struct stub_data, dlerror) == 40, "stub dlerror");
_Static_assert(offsetof(struct stub_data, handle) == 48, "stub handle");
_Static_assert(offsetof(struct stub_data, fn) == 56, "stub fn");
_Static_assert(offsetof(struct stub_data, arg) == 64, "stub arg");
_Static_assert(offsetof(struct stub_data, ret) == 72, "stub ret");
_Static_assert(offsetof(struct stub_data, err) == 80, "stub err");
_Static_assert(offsetof(struct stub_data, close_fd) == 88, "stub close_fd");
_Static_assert(offsetof(struct stub_data, flags) == 104, "stub flags");
_Static_assert(offsetof(struct stub_data, step) == 112, "stub step");
_Static_assert(offsetof(struct stub_data, close_ret) == 120, "stub close_ret");
_Static_assert(offsetof(struct stub_data, tv) == 128, "stub tv");
_Static_assert(offsetof(struct stub_data, frame) == 144, "stub frame");
_Static_assert(offsetof(struct stub_data, keep) == 152, "stub keep");
_Static_assert(offsetof(struct stub_data, lib_addr) == 160, "stub lib_addr");
_Static_assert(offsetof(struct stub_data, lib_len) == 168, "stub lib_len");
_Static_assert(offsetof(struct stub_data, memfd_flags) == 176, "stub memfd_flags");
_Static_assert(offsetof(struct stub_data, channel) == 184, "stub channel");
_Static_assert(offsetof(struct stub_data, go) == 192, "stub go");
_Static_assert(offsetof(struct stub_data, sys_err) == 200, "stub sys_err");
_Static_assert(offsetof(struct stub_data, tv_poll) == 208, "stub tv_poll");
_Static_assert(offsetof(struct stub_data, abandoned) == 224, "stub abandoned");
_Static_assert(offsetof(struct stub_data, errno_fn) == 232, "stub errno_fn");
_Static_assert(offsetof(struct stub_data, errno_was) == 248, "stub errno_was");
_Static_assert(offsetof(struct stub_data, path) == 256, "stub path");
_Static_assert(offsetof(struct stub_data, sym) == 768, "stub sym");
_Static_assert(offsetof(struct stub_data, name) == 896, "stub name");
_Static_assert(offsetof(struct stub_data, sv) == 960, "stub sv");
_Static_assert(offsetof(struct stub_data, blob) == 1024, "stub blob");
_Static_assert(sizeof(struct stub_data) <= STUB_PAGE, "stub data page");

#if defined(__x86_64__)
extern const unsigned char eprof_inj_stub[], eprof_inj_stub_end[];
/* where the stub resumes after its select: the thread is taken back there */
extern const unsigned char eprof_inj_stub_waited[];
#endif

#endif
