/* SPDX-License-Identifier: MIT */
/* The parts of the injector (inject.c) that unit tests reach: maps, remote ELF, seccomp. */
#ifndef EPROF_INJECT_INTERNAL_H
#define EPROF_INJECT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct sock_filter;

struct rmap {
	uint64_t start, end, offset, inode;
	char perms[5];
	char *path; /* "" for anonymous mappings */
};

struct rmaps {
	struct rmap *v;
	size_t n;
};

/* /proc/PID/maps (proc_root NULL: "/proc"). 0 or -errno. */
int rmaps_read(const char *proc_root, pid_t pid, struct rmaps *m);
void rmaps_free(struct rmaps *m);
/* The mapping holding addr, or NULL. */
const struct rmap *rmaps_find(const struct rmaps *m, uint64_t addr);

/* Reads or writes the target's memory (process_vm_readv/writev, else /proc/PID/mem). */
int rmem_read(pid_t pid, uint64_t addr, void *buf, size_t len);
int rmem_write(pid_t pid, uint64_t addr, const void *buf, size_t len);

/* What the injection calls in the target, found in its loaded libc (or libdl). */
struct rsyms {
	uint64_t dlopen, dlsym, dlclose, dlerror; /* dlerror 0: none (glibc's __libc_ forms) */
	uint64_t sys_ret;			  /* "syscall; ret" */
	uint64_t sigreturn;			  /* "mov $15, %rax; syscall" (__restore_rt) */
	uint64_t errno_loc;			  /* __errno_location, 0: not found */
	uint64_t pthread_create, pthread_detach;  /* libc's (2.34+) or libpthread's, 0: none */
	char from[128];				  /* the library they came from */
};

/*
 * Looks the functions up through the dynamic sections of the target's mapped objects, in
 * memory (a library replaced on disk or in another mount namespace does not matter).
 * 0; -ENOENT when the process has no dlopen (static, or no glibc), with why in msg.
 */
int rsyms_find(pid_t pid, const struct rmaps *m, struct rsyms *s, char *msg, size_t msglen);
/* The address of the dynamic symbol name of the object whose file is mapped at base. */
int rsym_lookup(pid_t pid, uint64_t base, const char *name, uint64_t *addr);
/* The same, with the symbol's size (st_size: 0 when the object does not say). */
int rsym_range(pid_t pid, uint64_t base, const char *name, uint64_t *addr, uint64_t *size);

/* Code a borrowed thread must not be stopped beneath (inject_safe.c). */
enum { RR_FUNCTION, RR_OBJECT, RR_NEUTRAL, RR_CLEAN };

struct rrange {
	uint64_t lo, hi;
	int kind; /* RR_*: a risky libc function, a risky object, libc's other code, the rest */
	char what[40];
};

struct rranges {
	struct rrange *v; /* sorted, disjoint */
	size_t n, cap;
};

struct rrisk {
	struct rranges risky; /* RR_FUNCTION, RR_OBJECT */
	struct rranges code;  /* the other executable mappings: RR_NEUTRAL, RR_CLEAN */
	struct rrange root;   /* __libc_start_main: the main thread's stack is scanned up to it */
};

/*
 * The code that may hold a lock the injection takes, in the target's mappings m: ld.so,
 * libpthread, libgcc_s, other allocators, eprof's libraries and stub, and libc's allocator,
 * dl_iterate_phdr, dlopen & co, the thread, fork and exit functions. 0 or -ENOMEM.
 */
int rrisk_init(pid_t pid, const struct rmaps *m, struct rrisk *k);
void rrisk_free(struct rrisk *k);
/* The instruction pointer is in such code (or anywhere in libc or libstdc++). */
bool rrisk_code(const struct rmaps *m, const struct rrisk *k, uint64_t ip);
/*
 * A return address on the stack from sp (the thread at ip) to the top of its mapping leads
 * into such code: 1 (why says where), 0, or -errno when the stack cannot be read.
 */
int rrisk_stack(pid_t pid, const struct rmaps *m, const struct rrisk *k, uint64_t sp, uint64_t ip,
		char *why, size_t len);

/* x86-64 seccomp_data, as filters see it */
struct rseccomp_data {
	int32_t nr;
	uint32_t arch;
	uint64_t ip;
	uint64_t args[6];
};

/*
 * Runs a classic BPF seccomp filter on d: 0 and *ret (SECCOMP_RET_*), or -EINVAL for an
 * instruction a seccomp filter may not hold.
 */
int seccomp_eval(const struct sock_filter *prog, size_t n, const struct rseccomp_data *d,
		 uint32_t *ret);
/*
 * The verdict of every filter of stopped tracee tid on d, the strictest (as the kernel takes
 * it): 0 and *ret, -EPERM when the filters cannot be read (no CAP_SYS_ADMIN).
 */
int seccomp_verdict(pid_t tid, const struct rseccomp_data *d, uint32_t *ret);
/* Whether a seccomp return value lets the system call run. */
bool seccomp_allows(uint32_t ret);

#endif
