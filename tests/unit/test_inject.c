// SPDX-License-Identifier: MIT
/* The injector's pure parts: seccomp filters run here, dynamic symbols read from memory. */
#include "test_util.h"

#include <dlfcn.h>
#include <link.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sys/syscall.h>

#include "inject/inject.h"
#include "inject/inject_internal.h"

static struct rseccomp_data data(long nr, uint64_t a0, uint64_t a1)
{
	struct rseccomp_data d = {.nr = (int32_t)nr, .arch = AUDIT_ARCH_X86_64};

	d.args[0] = a0;
	d.args[1] = a1;
	return d;
}

/* The filter a container runtime would write: the arch checked, one call denied. */
static void test_seccomp_deny_one_call(void **state)
{
	struct sock_filter f[] = {
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 319 /* memfd_create */, 0, 1),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | 1),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct rseccomp_data d = data(319, 0, 0);
	uint32_t ret = 0;

	assert_int_equal(seccomp_eval(f, 7, &d, &ret), 0);
	assert_int_equal(ret, SECCOMP_RET_ERRNO | 1);
	assert_false(seccomp_allows(ret));
	d = data(9, 0, 0);
	assert_int_equal(seccomp_eval(f, 7, &d, &ret), 0);
	assert_true(seccomp_allows(ret));
	d.arch = 0x40000003; /* i386: killed */
	assert_int_equal(seccomp_eval(f, 7, &d, &ret), 0);
	assert_int_equal(ret, SECCOMP_RET_KILL_PROCESS);
}

/* Arguments, scratch memory, the X register and arithmetic, as libseccomp emits them. */
static void test_seccomp_args_and_alu(void **state)
{
	struct sock_filter f[] = {
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 10 /* mprotect */, 0, 6),
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
	    BPF_STMT(BPF_ST, 3),
	    BPF_STMT(BPF_LDX | BPF_W | BPF_MEM, 3),
	    BPF_STMT(BPF_MISC | BPF_TXA, 0),
	    BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 4 /* PROT_EXEC */),
	    BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 4, 1, 0),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
	};
	struct rseccomp_data d = data(10, 0, 4096);
	uint32_t ret = 0;

	d.args[2] = 1; /* PROT_READ */
	assert_int_equal(seccomp_eval(f, 10, &d, &ret), 0);
	assert_int_equal(ret, SECCOMP_RET_ALLOW);
	d.args[2] = 5; /* PROT_READ | PROT_EXEC */
	assert_int_equal(seccomp_eval(f, 10, &d, &ret), 0);
	assert_int_equal(ret, SECCOMP_RET_TRAP);
	d = data(0, 0, 0);
	assert_int_equal(seccomp_eval(f, 10, &d, &ret), 0);
	assert_int_equal(ret, SECCOMP_RET_ALLOW);
}

static void test_seccomp_bad_programs(void **state)
{
	struct sock_filter unaligned[] = {
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 2),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_filter no_ret[] = {BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 0)};
	struct sock_filter div0[] = {
	    BPF_STMT(BPF_LD | BPF_IMM, 5),
	    BPF_STMT(BPF_ALU | BPF_DIV | BPF_K, 0),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct rseccomp_data d = data(0, 0, 0);
	uint32_t ret = 7;

	assert_int_equal(seccomp_eval(unaligned, 2, &d, &ret), -EINVAL);
	assert_int_equal(seccomp_eval(no_ret, 1, &d, &ret), -EINVAL);
	/* a division by zero ends a classic BPF program with 0: kill */
	assert_int_equal(seccomp_eval(div0, 3, &d, &ret), 0);
	assert_int_equal(ret, SECCOMP_RET_KILL_THREAD);
}

/* dlopen & co read from this process's memory are the ones the loader gives. */
static void test_remote_symbols_of_self(void **state)
{
	const unsigned char sys_ret[] = {0x0f, 0x05, 0xc3};
	struct rmaps m;
	struct rsyms s;
	char msg[200] = "";
	unsigned char code[9];

	/* libc's own (under ASan, RTLD_DEFAULT would give its interceptors) */
	void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);

	assert_non_null(libc);
	assert_int_equal(rmaps_read(NULL, getpid(), &m), 0);
	assert_int_equal(rsyms_find(getpid(), &m, &s, msg, sizeof(msg)), 0);
	assert_true((void *)(uintptr_t)s.dlopen == dlsym(libc, "dlopen"));
	assert_true((void *)(uintptr_t)s.dlsym == dlsym(libc, "dlsym"));
	assert_true((void *)(uintptr_t)s.dlclose == dlsym(libc, "dlclose"));
	assert_true((void *)(uintptr_t)s.dlerror == dlsym(libc, "dlerror"));
	dlclose(libc);
	assert_non_null(strstr(s.from, "libc"));
	assert_memory_equal((void *)(uintptr_t)s.sys_ret, sys_ret, 3);
	assert_int_not_equal(s.sigreturn, 0);
	memcpy(code, (void *)(uintptr_t)s.sigreturn, sizeof(code));
	assert_true(code[0] == 0x48 || code[0] == 0xb8); /* mov $15, %rax / %eax */
	assert_true(inject_maps_contain(NULL, getpid(), "libc"));
	assert_false(inject_maps_contain(NULL, getpid(), "no-such-object-here"));
	rmaps_free(&m);
}

struct stack_check {
	struct rmaps *m;
	struct rrisk *k;
	int ret;
	char why[64];
};

static __attribute__((noinline)) int check_here(struct stack_check *c)
{
	/* as a thread blocked in a system call: its instruction pointer in libc */
	return rrisk_stack(getpid(), c->m, c->k, (uintptr_t)__builtin_frame_address(0),
			   (uintptr_t)dlsym(RTLD_DEFAULT, "read"), c->why, sizeof(c->why));
}

static int in_callback(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct stack_check *c = arg;

	(void)info;
	(void)size;
	c->ret = check_here(c);
	return 1;
}

/* Both checks on a thread of its own: a fresh stack, no stale words of earlier calls. */
static void *judge_thread(void *arg)
{
	struct stack_check *c = arg, *out = c + 1;

	/* the maps read here, where they hold this thread's stack */
	if (rmaps_read(NULL, getpid(), c->m) || rrisk_init(getpid(), c->m, c->k))
		return NULL;
	out->ret = check_here(c);
	dl_iterate_phdr(in_callback, c);
	return NULL;
}

/*
 * A thread is judged by its whole stack: called back from dl_iterate_phdr (which holds the
 * loader's lock) it is not safe, though its own code is the program's; from its own code it
 * is. The scan takes stale words for return addresses too (it errs on the safe side), so
 * the checks run on a new thread: on the test runner's stack, words left by earlier calls
 * into ld.so made the result depend on the build's stack layout.
 */
static void test_stack_frames_judged(void **state)
{
	struct rmaps m;
	struct rrisk k;
	struct stack_check c[2] = {{&m, &k, -1, ""}, {&m, &k, -1, ""}};
	pthread_t t;

	assert_int_equal(pthread_create(&t, NULL, judge_thread, c), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(c[1].ret, 0);
	assert_int_equal(c[0].ret, 1);
	assert_non_null(strstr(c[0].why, "dl_iterate_phdr"));
	/* by its version: libc's dlopen, not libasan's interceptor of it */
	assert_true(rrisk_code(&m, &k, (uintptr_t)dlvsym(RTLD_DEFAULT, "dlopen", "GLIBC_2.34")));
	assert_false(rrisk_code(&m, &k, (uintptr_t)check_here));
	rrisk_free(&k);
	rmaps_free(&m);
}

/* A process without libc (a static binary's view): no dlopen, and why. */
static void test_no_libc_no_dlopen(void **state)
{
	struct rmap v[] = {{0x400000, 0x401000, 0, 1, "r-xp", "/bin/static-prog"}};
	struct rmaps m = {v, 1};
	struct rsyms s;
	char msg[200] = "";

	assert_int_equal(rsyms_find(getpid(), &m, &s, msg, sizeof(msg)), -ENOENT);
	assert_non_null(strstr(msg, "static"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_seccomp_deny_one_call),
	    cmocka_unit_test(test_seccomp_args_and_alu),
	    cmocka_unit_test(test_seccomp_bad_programs),
	    cmocka_unit_test(test_remote_symbols_of_self),
	    cmocka_unit_test(test_no_libc_no_dlopen),
	    cmocka_unit_test(test_stack_frames_judged),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
