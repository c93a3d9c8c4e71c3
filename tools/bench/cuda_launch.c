// SPDX-License-Identifier: MIT
/*
 * Launch-bound loop for tools/bench/cuda.py: N calls of cudaLaunchKernel on one
 * thread, timed inside the program (start-up excluded). Without a GPU every
 * call fails fast, which makes this a worst case for the per-call cost of
 * eprof's uprobes: the call itself costs almost nothing.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

__attribute__((noinline)) void empty_kernel(void)
{
	__asm__ volatile("");
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100000;
	dim3 g = { 1, 1, 1 }, b = { 1, 1, 1 };
	double t0;
	int fails = 0;

	cudaLaunchKernel((const void *)empty_kernel, g, b, NULL, 0, 0); /* runtime init */
	t0 = now();
	for (long i = 0; i < n; i++)
		fails += cudaLaunchKernel((const void *)empty_kernel, g, b, NULL, 0, 0) != 0;
	printf("%.1f ns/launch (%d failed)\n", (now() - t0) * 1e9 / n, fails);
	return 0;
}
