// SPDX-License-Identifier: MIT
/*
 * eprof's demo workload: a toy "training loop" built without frame pointers,
 * like most software users run. The main thread does the math (matmul,
 * softmax through libm's expf); a loader thread sorts batches with libc's
 * qsort (a callback through code without frame pointers) and writes them to
 * /dev/null (kernel time). Usage: workload [SECONDS]
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define N 96

static float A[N][N], B[N][N], C[N][N];
static volatile int stop;
static volatile float sink;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static void matmul(void)
{
	for (int i = 0; i < N; i++)
		for (int j = 0; j < N; j++) {
			float acc = 0;

			for (int k = 0; k < N; k++)
				acc += A[i][k] * B[k][j];
			C[i][j] = acc;
		}
}

__attribute__((noinline)) static void softmax_rows(void)
{
	for (int i = 0; i < N; i++) {
		float sum = 0;

		for (int j = 0; j < N; j++) {
			C[i][j] = expf(C[i][j] * 1e-3f);
			sum += C[i][j];
		}
		for (int j = 0; j < N; j++)
			C[i][j] /= sum;
	}
}

__attribute__((noinline)) static void train_step(void)
{
	matmul();
	softmax_rows();
	memcpy(A, C, sizeof(A));
	sink += C[1][2];
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;

	return (x > y) - (x < y);
}

__attribute__((noinline)) static void load_batch(float *batch, size_t n, int fd)
{
	for (size_t i = 0; i < n; i++)
		batch[i] = (float)rand() / RAND_MAX;
	qsort(batch, n, sizeof(*batch), cmp_float);
	for (size_t off = 0; off < n * sizeof(*batch); off += 4096)
		if (write(fd, (char *)batch + off, 4096) < 0)
			break;
}

static void *loader(void *arg)
{
	static float batch[1 << 15];
	int fd = open("/dev/null", O_WRONLY);

	while (!stop) {
		load_batch(batch, sizeof(batch) / sizeof(batch[0]), fd);
		usleep(2000);
	}
	close(fd);
	return arg;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 3.0, end = now() + seconds;
	pthread_t t;
	long steps = 0;

	for (int i = 0; i < N; i++)
		for (int j = 0; j < N; j++) {
			A[i][j] = (float)(i + j) / N;
			B[i][j] = (float)(i - j) / N;
		}
	pthread_create(&t, NULL, loader, NULL);
	pthread_setname_np(t, "loader");
	while (now() < end) {
		train_step();
		steps++;
	}
	stop = 1;
	pthread_join(t, NULL);
	printf("workload: %ld training steps in %.1f s\n", steps, seconds);
	return 0;
}
