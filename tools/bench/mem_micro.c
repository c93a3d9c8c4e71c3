// SPDX-License-Identifier: MIT
/*
 * Allocator microbenchmark for tools/bench/mem_bench.py: times ROUNDS x
 * (N malloc(SIZE), then N free) and prints ns per malloc and per free.
 * With GOFILE it first waits for that file to exist (so a profiler can
 * attach by PID), then removes it.
 * Usage: mem_micro N SIZE ROUNDS [GOFILE]
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100000, size = argc > 2 ? atol(argv[2]) : 64;
	int rounds = argc > 3 ? atoi(argv[3]) : 10;
	void *volatile *v = malloc(n * sizeof(void *));
	double tm = 0, tf = 0, t;

	if (argc > 4) {
		struct timespec ts = { 0, 2000000 };

		while (access(argv[4], F_OK) != 0)
			nanosleep(&ts, NULL);
		unlink(argv[4]);
	}
	for (int r = 0; r < rounds; r++) {
		t = now();
		for (long i = 0; i < n; i++)
			v[i] = malloc(size);
		tm += now() - t;
		t = now();
		for (long i = 0; i < n; i++)
			free(v[i]);
		tf += now() - t;
	}
	printf("malloc_ns %.1f free_ns %.1f\n", tm * 1e9 / (n * rounds), tf * 1e9 / (n * rounds));
	return 0;
}
