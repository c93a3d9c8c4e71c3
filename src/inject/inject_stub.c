// SPDX-License-Identifier: MIT
/*
 * The stub the injector copies into the target's memory, followed there by its data page
 * (struct stub_data, inject_stub.h). It runs on a stack of its own in the same mapping, with
 * every signal blocked, and ends in one of two ways:
 *
 * - eprof takes the thread back while it waits in select() (state = 1 tells it when), and
 *   restores the registers it saved;
 * - the wait ends (eprof is gone): rt_sigreturn through the frame eprof wrote below the
 *   thread's stack pointer restores the thread by itself.
 *
 * The thread's errno is as before (dlopen and the entry set it).
 *
 * When eprof gave up on it (abandoned: dlopen waited past eprof's limit on a loader lock
 * another thread held), a library dlopen() returns afterwards is closed again before its
 * entry is called, and the thread restores itself at once instead of waiting for eprof.
 *
 * It is data to eprof: never executed in eprof's own process.
 */
#include "inject_stub.h"

#if defined(__x86_64__)
__asm__(".pushsection .rodata.eprof_inj_stub, \"a\"\n"
	".globl eprof_inj_stub\n"
	".globl eprof_inj_stub_end\n"
	".globl eprof_inj_stub_waited\n"
	".p2align 4\n"
	"eprof_inj_stub:\n"
	".Lbase:\n"
	"	lea	.Lbase+4096(%rip), %rbx\n" /* the data page */
	"	movq	$1, 112(%rbx)\n"
	/* the thread's errno, put back before the thread is */
	"	mov	232(%rbx), %rax\n"
	"	test	%rax, %rax\n"
	"	jz	1f\n"
	"	call	*%rax\n"
	"	mov	%rax, 240(%rbx)\n"
	"	movslq	(%rax), %rcx\n"
	"	mov	%rcx, 248(%rbx)\n"
	"1:\n"
	"	cmpq	$2, 8(%rbx)\n"
	"	je	.Lsym\n"
	"	cmpq	$0, 168(%rbx)\n" /* no library bytes: path names it */
	"	je	.Ldlopen\n"
	/* M = memfd_create(name, flags), without MFD_EXEC before Linux 6.3 */
	"	mov	$319, %eax\n"
	"	lea	896(%rbx), %rdi\n"
	"	mov	176(%rbx), %rsi\n"
	"	syscall\n"
	"	cmp	$-22, %rax\n"
	"	jne	1f\n"
	"	mov	$319, %eax\n"
	"	lea	896(%rbx), %rdi\n"
	"	mov	176(%rbx), %rsi\n"
	"	and	$-17, %rsi\n"
	"	syscall\n"
	"1:	test	%rax, %rax\n"
	"	js	.Lsyserr\n"
	"	mov	%rax, 88(%rbx)\n"
	/* write(M, lib, len) until all of it is there */
	"	mov	160(%rbx), %r12\n"
	"	mov	168(%rbx), %r13\n"
	"2:	mov	$1, %eax\n"
	"	mov	88(%rbx), %rdi\n"
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
	"	cmpq	$0, 184(%rbx)\n"
	"	je	3f\n"
	"	mov	$53, %eax\n"
	"	mov	$1, %edi\n"
	"	mov	$0x80005, %esi\n"
	"	xor	%edx, %edx\n"
	"	lea	960(%rbx), %r10\n"
	"	syscall\n"
	"	test	%rax, %rax\n"
	"	js	.Lsyserr\n"
	/* state 2: eprof takes its end, writes the path and the blob, sets go (200 us polls) */
	"3:	movq	$2, 0(%rbx)\n"
	"	mov	$5000, %r12d\n"
	"4:	cmpq	$0, 192(%rbx)\n"
	"	jne	5f\n"
	"	movq	$0, 208(%rbx)\n"
	"	movq	$200, 216(%rbx)\n"
	"	mov	$23, %eax\n"
	"	xor	%edi, %edi\n"
	"	xor	%esi, %esi\n"
	"	xor	%edx, %edx\n"
	"	xor	%r10d, %r10d\n"
	"	lea	208(%rbx), %r8\n"
	"	syscall\n"
	"	dec	%r12d\n"
	"	jnz	4b\n"
	"	jmp	.Lclose\n" /* eprof never came */
	"5:	cmpq	$1, 192(%rbx)\n"
	"	jne	.Lclose\n"
	"	cmpq	$0, 184(%rbx)\n" /* the target's copy of eprof's end goes */
	"	je	.Ldlopen\n"
	"	movslq	964(%rbx), %rdi\n"
	"	mov	$3, %eax\n"
	"	syscall\n"
	/* h = dlopen(path, flags) */
	".Ldlopen:\n"
	"	lea	256(%rbx), %rdi\n"
	"	mov	104(%rbx), %rsi\n"
	"	call	*16(%rbx)\n"
	"	mov	%rax, 48(%rbx)\n"
	"	test	%rax, %rax\n"
	"	jz	.Lerr\n"
	"	cmpq	$0, 224(%rbx)\n" /* abandoned: nothing stays loaded, nothing is called */
	"	jne	.Lundo\n"
	"	movq	$2, 112(%rbx)\n"
	/* fn = dlsym(h, sym) */
	".Lsym:\n"
	"	mov	48(%rbx), %rdi\n"
	"	lea	768(%rbx), %rsi\n"
	"	call	*24(%rbx)\n"
	"	mov	%rax, 56(%rbx)\n"
	"	test	%rax, %rax\n"
	"	jz	.Lerr\n"
	"	movq	$3, 112(%rbx)\n"
	/* ret = fn(arg) */
	"	mov	64(%rbx), %rdi\n"
	"	call	*%rax\n"
	"	movslq	%eax, %rax\n"
	"	mov	%rax, 72(%rbx)\n"
	"	movq	$4, 112(%rbx)\n"
	/* unload: dlclose(h) when fn returned 0 and the library may go */
	"	cmpq	$2, 8(%rbx)\n"
	"	jne	.Lclose\n"
	"	test	%rax, %rax\n"
	"	jnz	.Lclose\n"
	"	cmpq	$0, 152(%rbx)\n"
	"	jne	.Lclose\n"
	"	mov	48(%rbx), %rdi\n"
	"	call	*32(%rbx)\n"
	"	movslq	%eax, %rax\n"
	"	mov	%rax, 120(%rbx)\n"
	"	movq	$5, 112(%rbx)\n"
	"	jmp	.Lclose\n"
	".Lundo:\n"
	"	mov	48(%rbx), %rdi\n"
	"	call	*32(%rbx)\n"
	"	movq	$0, 48(%rbx)\n"
	"	jmp	.Lclose\n"
	".Lshort:\n"
	"	mov	$-5, %rax\n" /* EIO */
	".Lsyserr:\n"
	"	mov	%rax, 200(%rbx)\n"
	"	jmp	.Lclose\n"
	".Lerr:\n"
	"	mov	40(%rbx), %rax\n"
	"	test	%rax, %rax\n"
	"	jz	.Lclose\n"
	"	call	*%rax\n"
	"	mov	%rax, 80(%rbx)\n"
	/* close the descriptors eprof made for the load (the memfd stays mapped) */
	".Lclose:\n"
	"	mov	88(%rbx), %rdi\n"
	"	test	%rdi, %rdi\n"
	"	js	1f\n"
	"	mov	$3, %eax\n"
	"	syscall\n"
	"1:	mov	96(%rbx), %rdi\n"
	"	test	%rdi, %rdi\n"
	"	js	2f\n"
	"	mov	$3, %eax\n"
	"	syscall\n"
	/* done: errno back; wait for eprof in select(0, 0, 0, 0, &tv), unless it gave up */
	"2:	mov	240(%rbx), %rax\n"
	"	test	%rax, %rax\n"
	"	jz	3f\n"
	"	mov	248(%rbx), %rcx\n"
	"	mov	%ecx, (%rax)\n"
	"3:	movq	$1, 0(%rbx)\n"
	"	cmpq	$0, 224(%rbx)\n"
	"	jne	.Lwaited\n"
	"	mov	$23, %eax\n"
	"	xor	%edi, %edi\n"
	"	xor	%esi, %esi\n"
	"	xor	%edx, %edx\n"
	"	xor	%r10d, %r10d\n"
	"	lea	128(%rbx), %r8\n"
	"	syscall\n"
	"eprof_inj_stub_waited:\n"
	".Lwaited:\n"
	/* eprof did not come back: the thread restores itself */
	"	mov	144(%rbx), %rsp\n"
	"	mov	$15, %eax\n"
	"	syscall\n"
	"	ud2\n"
	"eprof_inj_stub_end:\n"
	".popsection\n");
#endif
