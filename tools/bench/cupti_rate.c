// SPDX-License-Identifier: MIT
/*
 * CUPTI record throughput for tools/bench/cupti.py: acts as the CUDA driver
 * (loads CUDA_INJECTION64_PATH and calls InitializeInjection, which loads the
 * fake libcupti of tests/fixtures/fakecuda named by EPROF_LIBCUPTI), then
 * produces N launches (one API callback + one kernel record each) and
 * flushes. The time covers CUPTI-side generation, the injection library's
 * conversion and the socket to the recorder (which blocks when the recorder
 * falls behind), so records/s is the pipeline's rate.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	const char *inj = getenv("CUDA_INJECTION64_PATH"), *cupti = getenv("EPROF_LIBCUPTI");
	uint32_t (*enter)(int, int, const char *);
	void (*act)(int, uint32_t, const char *, uint64_t, uint32_t, uint64_t);
	int (*flush)(uint32_t);
	void *h, *c;
	double t0, t1;

	h = inj ? dlopen(inj, RTLD_NOW) : NULL;
	if (!h || !cupti) {
		fprintf(stderr, "run under eprof record with EPROF_LIBCUPTI set\n");
		return 2;
	}
	((int (*)(void))dlsym(h, "InitializeInjection"))();
	c = dlopen(cupti, RTLD_NOW | RTLD_NOLOAD);
	if (!c)
		return 2;
	enter = (uint32_t(*)(int, int, const char *))dlsym(c, "fake_cupti_api_enter");
	act = (void (*)(int, uint32_t, const char *, uint64_t, uint32_t, uint64_t))dlsym(
		c, "fake_cupti_activity");
	flush = (int (*)(uint32_t))dlsym(c, "cuptiActivityFlushAll");
	t0 = now();
	for (long i = 0; i < n; i++)
		act(0, enter(1, 307, "cuLaunchKernel"), (i & 1) ? "_Z4stepPfi" : "_Z6reducePKfPfi",
		    1000 + (i & 7), (uint32_t)(i & 3), 0);
	flush(1);
	t1 = now();
	printf("%ld kernel records + %ld API records in %.3f s: %.2f M kernel records/s\n", n, n,
	       t1 - t0, n / (t1 - t0) / 1e6);
	return 0;
}
