// SPDX-License-Identifier: MIT
/*
 * The target's seccomp filters, run here on the system calls an injection makes before it
 * makes them: a filter that would kill the process (or make a call fail) is found while the
 * process is still untouched. Classic BPF as seccomp accepts it (the kernel's
 * seccomp_check_filter list); filters are read with PTRACE_SECCOMP_GET_FILTER.
 */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>

#include "inject_internal.h"

#ifndef PTRACE_SECCOMP_GET_FILTER
#define PTRACE_SECCOMP_GET_FILTER 0x420c
#endif

static int load_abs(const struct rseccomp_data *d, uint32_t k, uint32_t *out)
{
	if (k % 4 || k + 4 > sizeof(*d))
		return -EINVAL;
	memcpy(out, (const char *)d + k, 4);
	return 0;
}

static int alu(uint16_t op, uint32_t *a, uint32_t v)
{
	switch (op) {
	case BPF_ADD:
		*a += v;
		break;
	case BPF_SUB:
		*a -= v;
		break;
	case BPF_MUL:
		*a *= v;
		break;
	case BPF_DIV:
		if (!v)
			return 1; /* the filter returns 0 (kill) */
		*a /= v;
		break;
	case BPF_MOD:
		if (!v)
			return 1;
		*a %= v;
		break;
	case BPF_AND:
		*a &= v;
		break;
	case BPF_OR:
		*a |= v;
		break;
	case BPF_XOR:
		*a ^= v;
		break;
	case BPF_LSH:
		*a = v < 32 ? *a << v : 0;
		break;
	case BPF_RSH:
		*a = v < 32 ? *a >> v : 0;
		break;
	case BPF_NEG:
		*a = -*a;
		break;
	default:
		return -EINVAL;
	}
	return 0;
}

static int jump(uint16_t op, uint32_t a, uint32_t v, bool *taken)
{
	switch (op) {
	case BPF_JEQ:
		*taken = a == v;
		break;
	case BPF_JGT:
		*taken = a > v;
		break;
	case BPF_JGE:
		*taken = a >= v;
		break;
	case BPF_JSET:
		*taken = (a & v) != 0;
		break;
	default:
		return -EINVAL;
	}
	return 0;
}

int seccomp_eval(const struct sock_filter *prog, size_t n, const struct rseccomp_data *d,
		 uint32_t *ret)
{
	uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = {0};

	for (size_t pc = 0; pc < n; pc++) {
		const struct sock_filter *f = &prog[pc];
		uint16_t cls = BPF_CLASS(f->code);
		uint32_t v = BPF_SRC(f->code) == BPF_X ? x : f->k;
		bool taken;
		int r;

		switch (cls) {
		case BPF_LD:
		case BPF_LDX: {
			uint32_t *dst = cls == BPF_LD ? &a : &x;

			switch (BPF_MODE(f->code)) {
			case BPF_ABS:
				if (cls != BPF_LD || BPF_SIZE(f->code) != BPF_W ||
				    load_abs(d, f->k, dst))
					return -EINVAL;
				break;
			case BPF_LEN:
				*dst = sizeof(*d);
				break;
			case BPF_IMM:
				*dst = f->k;
				break;
			case BPF_MEM:
				if (f->k >= BPF_MEMWORDS)
					return -EINVAL;
				*dst = mem[f->k];
				break;
			default:
				return -EINVAL;
			}
			break;
		}
		case BPF_ST:
		case BPF_STX:
			if (f->k >= BPF_MEMWORDS)
				return -EINVAL;
			mem[f->k] = cls == BPF_ST ? a : x;
			break;
		case BPF_ALU:
			r = alu(BPF_OP(f->code), &a, v);
			if (r < 0)
				return r;
			if (r) {
				*ret = SECCOMP_RET_KILL_THREAD;
				return 0;
			}
			break;
		case BPF_JMP:
			if (BPF_OP(f->code) == BPF_JA) {
				pc += f->k;
				break;
			}
			if (jump(BPF_OP(f->code), a, v, &taken))
				return -EINVAL;
			pc += taken ? f->jt : f->jf;
			break;
		case BPF_RET:
			*ret = BPF_RVAL(f->code) == BPF_A ? a : f->k;
			return 0;
		case BPF_MISC:
			if (BPF_MISCOP(f->code) == BPF_TAX)
				x = a;
			else
				a = x;
			break;
		default:
			return -EINVAL;
		}
	}
	return -EINVAL; /* fell off the end: the kernel's checker refuses such a filter */
}

static int32_t action(uint32_t ret)
{
	return (int32_t)(ret & SECCOMP_RET_ACTION_FULL);
}

bool seccomp_allows(uint32_t ret)
{
	uint32_t act = ret & SECCOMP_RET_ACTION_FULL;

	return act == SECCOMP_RET_ALLOW || act == SECCOMP_RET_LOG;
}

int seccomp_verdict(pid_t tid, const struct rseccomp_data *d, uint32_t *ret)
{
	*ret = SECCOMP_RET_ALLOW;
	for (unsigned long i = 0; i < 64; i++) {
		long n = ptrace(PTRACE_SECCOMP_GET_FILTER, tid, (void *)i, NULL);
		struct sock_filter *prog;
		uint32_t r;
		int err;

		if (n < 0)
			return errno == ENOENT ? 0 : errno == EACCES ? -EPERM : -errno;
		prog = calloc((size_t)n, sizeof(*prog));
		if (!prog)
			return -ENOMEM;
		n = ptrace(PTRACE_SECCOMP_GET_FILTER, tid, (void *)i, prog);
		err = n < 0 ? -errno : seccomp_eval(prog, (size_t)n, d, &r);
		free(prog);
		if (err)
			return err;
		/* the kernel keeps the action of highest precedence: the lowest as signed */
		if (action(r) < action(*ret))
			*ret = r;
	}
	return 0;
}
