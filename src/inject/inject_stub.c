// SPDX-License-Identifier: MIT
/*
 * The stub the injector copies into the target's memory, followed there by its data page
 * (struct stub_data, inject_stub.h): the start routine of the worker thread a borrowed program
 * thread starts with pthread_create. The program thread is given back as soon as
 * pthread_create returns; only the worker waits on the loader's lock, a library's locks or
 * eprof, so a slow constructor in another thread, or one that waits on the borrowed thread,
 * holds up the injection and nothing of the program.
 *
 * The worker blocks every signal but glibc's SIGSETXID (whose handler runs no program code,
 * and which a setuid() in another thread waits for), detaches itself, runs the load or the
 * unload, publishes how it went, waits for eprof to read it (ack; not when eprof gave up) for
 * a bounded time, and ends by unmapping the stub's mapping through libc's "syscall; ret",
 * whose ret takes it back into start_thread: no instruction of the mapping runs after the
 * munmap, and nothing of the stub stays whether eprof is there or not.
 *
 * When eprof gave up on it (abandoned: dlopen waited past eprof's limit on a loader lock
 * another thread held), a library dlopen() returns afterwards is closed again before its entry
 * is called.
 *
 * It is data to eprof: never executed in eprof's own process.
 */
#include "inject_stub.h"

#if defined(__x86_64__)
#define S_(x) #x
#define S(x) S_(x)
#define D(off) S(off) "(%rbx)"

/* select(0, 0, 0, 0, &tv_poll) with tv_poll = {0, US}: a short sleep (SD_TV_POLL is changed) */
#define NAP(us)                                                                                \
	"	movq	$0, " D(SD_TV_POLL) "\n"                                                \
	"	movq	$" #us ", " S(SD_TV_POLL) "+8(%rbx)\n"                                  \
	"	mov	$23, %eax\n"                                                           \
	"	xor	%edi, %edi\n"                                                          \
	"	xor	%esi, %esi\n"                                                          \
	"	xor	%edx, %edx\n"                                                          \
	"	xor	%r10d, %r10d\n"                                                        \
	"	lea	" D(SD_TV_POLL) ", %r8\n"                                               \
	"	syscall\n"

/* close(fd) of a 32-bit slot when it holds one, then -1 there */
#define CLOSE32(off)                                                                           \
	"	movslq	" D(off) ", %rdi\n"                                                     \
	"	test	%rdi, %rdi\n"                                                          \
	"	js	1f\n"                                                                  \
	"	mov	$3, %eax\n"                                                            \
	"	syscall\n"                                                                     \
	"	movl	$-1, " D(off) "\n"                                                      \
	"1:\n"

__asm__(".pushsection .rodata.eprof_inj_stub, \"a\"\n"
	".globl eprof_inj_stub\n"
	".globl eprof_inj_stub_end\n"
	".p2align 4\n"
	"eprof_inj_stub:\n"
	".Lbase:\n"
	/* start_thread's registers are kept for the way back; the stack aligned for calls */
	"	push	%rbx\n"
	"	push	%rbp\n"
	"	push	%r12\n"
	"	push	%r13\n"
	"	push	%r14\n"
	"	push	%r15\n"
	"	sub	$8, %rsp\n"
	"	lea	.Lbase+4096(%rip), %rbx\n" /* the data page */
	/* mprotect(data, 4096, PROT_READ | PROT_WRITE): mapped read-only, written by eprof
	 * through /proc/PID/mem; nothing can be said without it */
	"	mov	$10, %eax\n"
	"	mov	%rbx, %rdi\n"
	"	mov	$4096, %esi\n"
	"	mov	$3, %edx\n"
	"	syscall\n"
	"	test	%rax, %rax\n"
	"	jnz	.Lexit\n"
	"	mov	$186, %eax\n"		   /* gettid */
	"	syscall\n"
	"	mov	%rax, " D(SD_WORKER_TID) "\n"
	/* rt_sigprocmask(SIG_SETMASK, &sigmask, NULL, 8) */
	"	mov	$14, %eax\n"
	"	mov	$2, %edi\n"
	"	lea	" D(SD_SIGMASK) ", %rsi\n"
	"	xor	%edx, %edx\n"
	"	mov	$8, %r10d\n"
	"	syscall\n"
	/* pthread_detach(pthread_self()): glibc's thread pointer (%fs:16, its header.self) */
	"	mov	" D(SD_DETACH) ", %rax\n"
	"	test	%rax, %rax\n"
	"	jz	1f\n"
	"	mov	%fs:16, %rdi\n"
	"	call	*%rax\n"
	"1:	movq	$1, " D(SD_STEP) "\n"
	"	cmpq	$0, " D(SD_ABANDONED) "\n"
	"	jne	.Lexit\n"
	"	cmpq	$2, " D(SD_OP) "\n"
	"	je	.Lsym\n"
	"	cmpq	$0, " D(SD_LIB_LEN) "\n" /* no library bytes: path names it */
	"	je	.Ldlopen\n"
	/* M = memfd_create(name, flags), without MFD_EXEC before Linux 6.3 */
	"	mov	$319, %eax\n"
	"	lea	" D(SD_NAME) ", %rdi\n"
	"	mov	" D(SD_MEMFD_FLAGS) ", %rsi\n"
	"	syscall\n"
	"	cmp	$-22, %rax\n"
	"	jne	1f\n"
	"	mov	$319, %eax\n"
	"	lea	" D(SD_NAME) ", %rdi\n"
	"	mov	" D(SD_MEMFD_FLAGS) ", %rsi\n"
	"	and	$-17, %rsi\n"
	"	syscall\n"
	"1:	test	%rax, %rax\n"
	"	js	.Lsyserr\n"
	"	mov	%rax, " D(SD_CLOSE_FD) "\n"
	/* write(M, lib, len) until all of it is there */
	"	mov	" D(SD_LIB_ADDR) ", %r12\n"
	"	mov	" D(SD_LIB_LEN) ", %r13\n"
	"2:	mov	$1, %eax\n"
	"	mov	" D(SD_CLOSE_FD) ", %rdi\n"
	"	mov	%r12, %rsi\n"
	"	mov	%r13, %rdx\n"
	"	syscall\n"
	"	cmp	$-4, %rax\n"
	"	je	2b\n"
	"	test	%rax, %rax\n"
	"	js	.Lsyserr\n"
	"	jz	.Lshort\n"
	"	add	%rax, %r12\n"
	"	sub	%rax, %r13\n"
	"	jnz	2b\n"
	/* the channel: socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) */
	"	cmpq	$0, " D(SD_CHANNEL) "\n"
	"	je	3f\n"
	"	mov	$53, %eax\n"
	"	mov	$1, %edi\n"
	"	mov	$0x80005, %esi\n"
	"	xor	%edx, %edx\n"
	"	lea	" D(SD_SV) ", %r10\n"
	"	syscall\n"
	"	test	%rax, %rax\n"
	"	js	.Lsyserr\n"
	/* state 2: eprof takes its end, writes the path and the blob, sets go (200 us polls,
	 * 1 s at least) */
	"3:	movq	$2, " D(SD_STATE) "\n"
	"	mov	$5000, %r12d\n"
	"4:	cmpq	$0, " D(SD_GO) "\n"
	"	jne	5f\n"
	NAP(200)
	"	dec	%r12d\n"
	"	jnz	4b\n"
	"	jmp	.Lclose\n" /* eprof never came */
	"5:	cmpq	$1, " D(SD_GO) "\n"
	"	jne	.Lclose\n"
	CLOSE32(SD_SV + 4) /* the target's copy of eprof's end */
	/* h = dlopen(path, flags) */
	".Ldlopen:\n"
	"	lea	" D(SD_PATH) ", %rdi\n"
	"	mov	" D(SD_FLAGS) ", %rsi\n"
	"	call	*" D(SD_DLOPEN) "\n"
	"	mov	%rax, " D(SD_HANDLE) "\n"
	"	test	%rax, %rax\n"
	"	jz	.Lerr\n"
	"	cmpq	$0, " D(SD_ABANDONED) "\n" /* nothing stays loaded, nothing is called */
	"	jne	.Lundo\n"
	"	movq	$2, " D(SD_STEP) "\n"
	/* fn = dlsym(h, sym) */
	".Lsym:\n"
	"	mov	" D(SD_HANDLE) ", %rdi\n"
	"	lea	" D(SD_SYM) ", %rsi\n"
	"	call	*" D(SD_DLSYM) "\n"
	"	mov	%rax, " D(SD_FN) "\n"
	"	test	%rax, %rax\n"
	"	jz	.Lerr\n"
	"	movq	$3, " D(SD_STEP) "\n"
	/* eprof gives up by writing abandoned, then reading step: one of the two sees the other */
	"	mfence\n"
	"	cmpq	$0, " D(SD_ABANDONED) "\n"
	"	je	.Lcall\n"
	"	movq	$2, " D(SD_STEP) "\n"
	"	cmpq	$2, " D(SD_OP) "\n"
	"	je	.Lclose\n"
	"	jmp	.Lundo\n"
	/* ret = fn(arg) */
	".Lcall:\n"
	"	mov	" D(SD_ARG) ", %rdi\n"
	"	call	*" D(SD_FN) "\n"
	"	movslq	%eax, %rax\n"
	"	mov	%rax, " D(SD_RET) "\n"
	"	movq	$4, " D(SD_STEP) "\n"
	"	cmpq	$2, " D(SD_OP) "\n"
	"	jne	.Lclose\n"
	/* unload: a lock the retraction found taken (-EBUSY) is tried again, 2 ms later */
	"	cmp	$-16, %rax\n"
	"	jne	6f\n"
	"	cmpq	$0, " D(SD_BUSY_TRIES) "\n"
	"	je	.Lclose\n"
	"	cmpq	$0, " D(SD_ABANDONED) "\n"
	"	jne	.Lclose\n"
	"	decq	" D(SD_BUSY_TRIES) "\n"
	NAP(2000)
	"	jmp	.Lcall\n"
	/* dlclose(h) when fn returned 0 and the library may go */
	"6:	test	%rax, %rax\n"
	"	jnz	.Lclose\n"
	"	cmpq	$0, " D(SD_KEEP) "\n"
	"	jne	.Lclose\n"
	"	mov	" D(SD_HANDLE) ", %rdi\n"
	"	call	*" D(SD_DLCLOSE) "\n"
	"	movslq	%eax, %rax\n"
	"	mov	%rax, " D(SD_CLOSE_RET) "\n"
	"	movq	$5, " D(SD_STEP) "\n"
	"	jmp	.Lclose\n"
	".Lundo:\n"
	"	mov	" D(SD_HANDLE) ", %rdi\n"
	"	call	*" D(SD_DLCLOSE) "\n"
	"	movq	$0, " D(SD_HANDLE) "\n"
	"	jmp	.Lclose\n"
	".Lshort:\n"
	"	mov	$-5, %rax\n" /* EIO */
	".Lsyserr:\n"
	"	mov	%rax, " D(SD_SYS_ERR) "\n"
	"	jmp	.Lclose\n"
	/* dlerror()'s text is the worker's, freed when it exits: copied into errmsg */
	".Lerr:\n"
	"	mov	" D(SD_DLERROR) ", %rax\n"
	"	test	%rax, %rax\n"
	"	jz	.Lclose\n"
	"	call	*%rax\n"
	"	test	%rax, %rax\n"
	"	jz	.Lclose\n"
	"	mov	%rax, " D(SD_ERR) "\n"
	"	lea	" D(SD_ERRMSG) ", %rdi\n"
	"	mov	$255, %ecx\n"
	"7:	movb	(%rax), %dl\n"
	"	movb	%dl, (%rdi)\n"
	"	test	%dl, %dl\n"
	"	jz	.Lclose\n"
	"	inc	%rax\n"
	"	inc	%rdi\n"
	"	dec	%ecx\n"
	"	jnz	7b\n"
	"	movb	$0, (%rdi)\n"
	/* the descriptors made for the load: the memfd (its mapping stays), the pair's ends
	 * unless the entry took the target's */
	".Lclose:\n"
	"	mov	" D(SD_CLOSE_FD) ", %rdi\n"
	"	test	%rdi, %rdi\n"
	"	js	1f\n"
	"	mov	$3, %eax\n"
	"	syscall\n"
	"1:	mov	" S(SD_CLOSE_FD) "+8(%rbx), %rdi\n"
	"	test	%rdi, %rdi\n"
	"	js	2f\n"
	"	mov	$3, %eax\n"
	"	syscall\n"
	"2:\n"
	CLOSE32(SD_SV + 4)
	"	cmpq	$4, " D(SD_STEP) "\n"
	"	jae	3f\n"
	CLOSE32(SD_SV)
	/* done: wait for eprof to read it (ack), unless it gave up before the call */
	"3:	movq	$1, " D(SD_STATE) "\n"
	"	mov	" D(SD_ACK_POLLS) ", %r12\n"
	"4:	cmpq	$0, " D(SD_ACK) "\n"
	"	jne	.Lexit\n"
	"	cmpq	$0, " D(SD_ABANDONED) "\n"
	"	je	5f\n"
	"	cmpq	$3, " D(SD_STEP) "\n"
	"	jb	.Lexit\n"
	"5:	test	%r12, %r12\n"
	"	jle	.Lexit\n"
	NAP(200)
	"	dec	%r12\n"
	"	jmp	4b\n"
	/* munmap(map, len) from libc's "syscall; ret": the ret returns into start_thread */
	".Lexit:\n"
	"	mov	" D(SD_MAP) ", %rdi\n"
	"	mov	" D(SD_MAP_LEN) ", %rsi\n"
	"	mov	" D(SD_SYS_RET) ", %rcx\n"
	"	add	$8, %rsp\n"
	"	pop	%r15\n"
	"	pop	%r14\n"
	"	pop	%r13\n"
	"	pop	%r12\n"
	"	pop	%rbp\n"
	"	pop	%rbx\n"
	"	mov	$11, %eax\n"
	"	jmp	*%rcx\n"
	/* the borrowed thread's way back from pthread_create (inject_stub.h) */
	".globl eprof_inj_tail\n"
	".globl eprof_inj_tail_stop\n"
	"eprof_inj_tail:\n"
	"	mov	%rax, %r8\n"
	/* its own ids, as its pid namespace numbers them */
	"	mov	$39, %eax\n" /* getpid */
	"	syscall\n"
	"	mov	%rax, %rdi\n"
	"	mov	$186, %eax\n" /* gettid */
	"	syscall\n"
	"	mov	%rax, %rsi\n"
	"	mov	.Lbase+4096+" S(SD_TAIL_SIG) "(%rip), %rdx\n"
	"	mov	$234, %eax\n" /* tgkill */
	"	syscall\n"
	"eprof_inj_tail_stop:\n"
	"	add	$8, %rsp\n"
	"	ret\n"
	"eprof_inj_stub_end:\n"
	".popsection\n");
#endif
