// SPDX-License-Identifier: MIT
/*
 * Cost of one traced region, measured inside the target: loops of N calls of
 * an empty function that eprof probes (--region BIN:probed: uprobe +
 * uretprobe + one event; probed_xol: the same whose first instruction is
 * single-stepped), of an identical one it does not (the baseline),
 * and of an EPROF_REGION_BEGIN/END pair (two USDT uprobes + one event; a nop
 * pair when untraced). Each loop runs `rounds` times interleaved; prints the
 * median ns per call of each as JSON. Driven by region_cost.py.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <eprof/region.h>

/*
 * A uprobe on an instruction the kernel emulates (push %rbp here, nop) costs
 * a trap; any other first instruction (ret, sub, lea, mov) is single-stepped
 * out of line, a second trap. Both kinds are measured.
 */
#if defined(__x86_64__)
__attribute__((naked, noinline)) void probed(void)
{
	__asm__ volatile("push %rbp\n\tmov %rsp, %rbp\n\tpop %rbp\n\tret");
}
#else
__attribute__((noinline, noclone)) void probed(void)
{
	__asm__ volatile("" ::: "memory");
}
#endif

__attribute__((noinline, noclone)) void probed_xol(void)
{
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline, noclone)) void unprobed(void)
{
	__asm__ volatile("" ::: "memory");
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

#define ROUNDS_MAX 64

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100000;
	int rounds = argc > 2 ? atoi(argv[2]) : 5;
	double base[ROUNDS_MAX], func[ROUNDS_MAX], xol[ROUNDS_MAX], usdt[ROUNDS_MAX], t;

	if (rounds < 1 || rounds > ROUNDS_MAX || n < 1)
		return 2;
	for (int r = 0; r < rounds; r++) {
		t = now();
		for (long i = 0; i < n; i++)
			unprobed();
		base[r] = (now() - t) / n;
		t = now();
		for (long i = 0; i < n; i++)
			probed();
		func[r] = (now() - t) / n;
		t = now();
		for (long i = 0; i < n; i++)
			probed_xol();
		xol[r] = (now() - t) / n;
		t = now();
		for (long i = 0; i < n; i++) {
			EPROF_REGION_BEGIN("bench");
			__asm__ volatile("" ::: "memory");
			EPROF_REGION_END("bench");
		}
		usdt[r] = (now() - t) / n;
	}
	qsort(base, rounds, sizeof(double), cmp);
	qsort(func, rounds, sizeof(double), cmp);
	qsort(usdt, rounds, sizeof(double), cmp);
	qsort(xol, rounds, sizeof(double), cmp);
	printf("{\"calls\": %ld, \"rounds\": %d, \"base_ns\": %.2f, \"func_ns\": %.2f, "
	       "\"xol_ns\": %.2f, \"usdt_ns\": %.2f}\n",
	       n, rounds, base[rounds / 2], func[rounds / 2], xol[rounds / 2], usdt[rounds / 2]);
	return 0;
}
