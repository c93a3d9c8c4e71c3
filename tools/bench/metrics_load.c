// SPDX-License-Identifier: MIT
/*
 * Workloads of tools/bench/metrics_cost.py:
 *   metrics_load threads N SECONDS   N threads, each computing ~200 us then sleeping 1 ms
 *                                    (a worker pool: ~N x 800 voluntary switches a second)
 *   metrics_load pingpong SECONDS    two threads passing a byte through pipes: one context
 *                                    switch each way; prints round trips a second
 *   metrics_load socket SECONDS      the same over a Unix socket pair (send/recv: the
 *                                    network tracepoints run each time)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double seconds;
static volatile int stop;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *worker(void *arg)
{
	struct timespec nap = {0, 1000000};
	uint64_t *iters = arg;
	volatile uint64_t x = 0;

	while (!stop) {
		double t0 = now_s();

		while (now_s() - t0 < 200e-6)
			x++;
		nanosleep(&nap, NULL);
		(*iters)++;
	}
	return NULL;
}

static int threads(int n)
{
	pthread_t *t = calloc(n, sizeof(*t));
	uint64_t *it = calloc(n, sizeof(*it)), sum = 0;

	double end = now_s() + seconds;

	for (int i = 0; i < n; i++)
		pthread_create(&t[i], NULL, worker, &it[i]);
	/* a sleep that a signal cuts short (a profiler attaching) is resumed */
	while (now_s() < end)
		usleep(100000);
	stop = 1;
	for (int i = 0; i < n; i++) {
		pthread_join(t[i], NULL);
		sum += it[i];
	}
	printf("%.1f iterations/s\n", sum / seconds);
	return 0;
}

static int fds[4]; /* a->b read, a->b write, b->a read, b->a write */
static int use_socket;

static void *ponger(void *arg)
{
	char c;

	(void)arg;
	for (;;) {
		if ((use_socket ? recv(fds[0], &c, 1, 0) : read(fds[0], &c, 1)) != 1 || c == 'q')
			return NULL;
		if ((use_socket ? send(fds[3], &c, 1, 0) : write(fds[3], &c, 1)) != 1)
			return NULL;
	}
}

static int pingpong(void)
{
	pthread_t t;
	uint64_t n = 0;
	double t0;
	char c = 'p';

	if (use_socket) {
		int a[2], b[2];

		if (socketpair(AF_UNIX, SOCK_STREAM, 0, a) || socketpair(AF_UNIX, SOCK_STREAM, 0, b))
			return 1;
		fds[0] = a[0], fds[1] = a[1], fds[2] = b[0], fds[3] = b[1];
	} else if (pipe(fds) || pipe(fds + 2)) {
		return 1;
	}
	pthread_create(&t, NULL, ponger, NULL);
	t0 = now_s();
	while (now_s() - t0 < seconds) {
		for (int i = 0; i < 1000; i++) {
			if ((use_socket ? send(fds[1], &c, 1, 0) : write(fds[1], &c, 1)) != 1 ||
			    (use_socket ? recv(fds[2], &c, 1, 0) : read(fds[2], &c, 1)) != 1)
				return 1;
		}
		n += 1000;
	}
	c = 'q';
	if (write(fds[1], &c, 1) != 1)
		return 1;
	pthread_join(t, NULL);
	printf("%.1f round trips/s\n", n / (now_s() - t0));
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "threads")) {
		seconds = atof(argv[3]);
		return threads(atoi(argv[2]));
	}
	if (argc == 3 && (!strcmp(argv[1], "pingpong") || !strcmp(argv[1], "socket"))) {
		seconds = atof(argv[2]);
		use_socket = argv[1][0] == 's';
		return pingpong();
	}
	fprintf(stderr, "usage: metrics_load threads N SECONDS | pingpong SECONDS | socket SECONDS\n");
	return 2;
}
