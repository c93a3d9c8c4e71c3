// SPDX-License-Identifier: MIT
/*
 * Ping-pong between two threads over pipes: every hand-over blocks one
 * thread and wakes the other, so the context-switch rate is set by the work
 * done per turn. Prints the wall time, and the voluntary context switches
 * per second of the process.
 *   offcpu_pingpong ROUNDS WORK [pin]
 * WORK = loop iterations per turn; "pin" puts both threads on CPU 0.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static int ab[2], ba[2];
static long rounds, work;
static volatile uint64_t sink;

static void spin(void)
{
	uint64_t x = sink;

	for (long i = 0; i < work; i++)
		x = x * 6364136223846793005ULL + (uint64_t)i;
	sink = x;
}

static void *pong(void *arg)
{
	char c;

	for (long i = 0; i < rounds; i++) {
		if (read(ab[0], &c, 1) != 1)
			break;
		spin();
		if (write(ba[1], &c, 1) != 1)
			break;
	}
	return arg;
}

static void pin0(void)
{
	cpu_set_t s;

	CPU_ZERO(&s);
	CPU_SET(0, &s);
	sched_setaffinity(0, sizeof(s), &s);
}

int main(int argc, char **argv)
{
	struct timespec t0, t1;
	struct rusage ru;
	pthread_t t;
	double secs;
	char c = 'x';

	if (argc < 3)
		return 2;
	rounds = atol(argv[1]);
	work = atol(argv[2]);
	if (argc > 3)
		pin0(); /* inherited by the thread created next */
	if (pipe(ab) || pipe(ba) || pthread_create(&t, NULL, pong, NULL))
		return 1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long i = 0; i < rounds; i++) {
		if (write(ab[1], &c, 1) != 1 || read(ba[0], &c, 1) != 1)
			return 1;
		spin();
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	pthread_join(t, NULL);
	getrusage(RUSAGE_SELF, &ru);
	secs = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("%.6f %.0f %.0f\n", secs, (ru.ru_nvcsw + ru.ru_nivcsw) / secs, rounds / secs);
	return 0;
}
