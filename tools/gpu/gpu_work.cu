// SPDX-License-Identifier: MIT
/*
 * The CUDA workload of tools/gpu-check: kernels of known names, timed by the program itself
 * with cudaEvents, launched through each path eprof must join to its CPU stack.
 *
 *   gpu_work timed N        N launches each of vadd and tmatmul (<<<>>>), one event pair per
 *                           kernel around its batch: prints "event KERNEL COUNT NS"
 *   gpu_work launch N       N launches of an empty kernel: prints "cpu_ns_per_launch X"
 *   gpu_work path P N       N kernels through path P: chevron (<<<>>>), rt (cudaLaunchKernel),
 *                           cuex (cuLaunchKernelEx), graph (cudaGraphLaunch of 10-kernel
 *                           graphs), cublas (cublasSgemm): prints "launched KERNELS"
 *   gpu_work short SYNC     50 kernels, then exit with (SYNC=1) or without a final synchronize
 *   gpu_work attach N       for record -p: CUDA up and warmed, prints "ready PID", then obeys
 *                           stdin: "go" (N launches each of vadd and tmatmul timed as in
 *                           timed, then "done"), "loop S" (vadd for S seconds, "looped K"),
 *                           "again" (100 vadd and a synchronize: "again ok"), "quit"
 *
 * Every line it prints is "key value..." so tools/gpu-check can parse it. Exit status 0 on
 * success, 2 on a CUDA error (the error is printed).
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifndef NO_CUBLAS
#include <cublas_v2.h>
#endif

#define CK(x)                                                                                      \
	do {                                                                                       \
		cudaError_t e_ = (x);                                                              \
		if (e_ != cudaSuccess) {                                                           \
			printf("error %s:%d %s: %s\n", __FILE__, __LINE__, #x,                     \
			       cudaGetErrorString(e_));                                            \
			exit(2);                                                                   \
		}                                                                                  \
	} while (0)

#define TILE 16

__global__ void vadd(const float *a, const float *b, float *c, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		c[i] = a[i] + b[i];
}

__global__ void tmatmul(const float *a, const float *b, float *c, int n)
{
	__shared__ float ta[TILE][TILE], tb[TILE][TILE];
	int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
	float acc = 0;

	for (int t = 0; t < n; t += TILE) {
		ta[threadIdx.y][threadIdx.x] = a[row * n + t + threadIdx.x];
		tb[threadIdx.y][threadIdx.x] = b[(t + threadIdx.y) * n + col];
		__syncthreads();
		for (int k = 0; k < TILE; k++)
			acc += ta[threadIdx.y][k] * tb[k][threadIdx.x];
		__syncthreads();
	}
	c[row * n + col] = acc;
}

__global__ void empty_kernel(void) {}

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* vadd moves 384 MiB (~100 us on an H100): the gaps between back-to-back kernels, which
 * cudaEvents count and CUPTI does not, stay near 1% */
enum { VN = 32 << 20, MN = 512 };

static float *dev_buf(size_t n)
{
	float *p;

	CK(cudaMalloc(&p, n * sizeof(float)));
	CK(cudaMemset(p, 0, n * sizeof(float)));
	return p;
}

struct bufs {
	float *a, *b, *c, *ma, *mb, *mc;
};

static void timed_batches(const struct bufs *x, int n)
{
	cudaEvent_t e0, e1;
	float ms;

	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	CK(cudaEventRecord(e0));
	for (int i = 0; i < n; i++)
		vadd<<<VN / 256, 256>>>(x->a, x->b, x->c, VN);
	CK(cudaEventRecord(e1));
	CK(cudaEventSynchronize(e1));
	CK(cudaEventElapsedTime(&ms, e0, e1));
	printf("event vadd %d %.0f\n", n, ms * 1e6);

	CK(cudaEventRecord(e0));
	for (int i = 0; i < n; i++)
		tmatmul<<<dim3(MN / TILE, MN / TILE), dim3(TILE, TILE)>>>(x->ma, x->mb, x->mc, MN);
	CK(cudaEventRecord(e1));
	CK(cudaEventSynchronize(e1));
	CK(cudaEventElapsedTime(&ms, e0, e1));
	printf("event tmatmul %d %.0f\n", n, ms * 1e6);
	CK(cudaGetLastError());
	CK(cudaDeviceSynchronize());
	CK(cudaEventDestroy(e0));
	CK(cudaEventDestroy(e1));
}

/* A running job for record -p: warmed up before eprof attaches, then driven by stdin. */
static int attach_mode(int n)
{
	struct bufs x = {dev_buf(VN), dev_buf(VN), dev_buf(VN), dev_buf(MN * MN), dev_buf(MN * MN),
			 dev_buf(MN * MN)};
	char line[64];

	setvbuf(stdout, NULL, _IOLBF, 0);
	vadd<<<VN / 256, 256>>>(x.a, x.b, x.c, VN);
	tmatmul<<<dim3(MN / TILE, MN / TILE), dim3(TILE, TILE)>>>(x.ma, x.mb, x.mc, MN);
	CK(cudaDeviceSynchronize());
	printf("ready %d\n", (int)getpid());
	while (fgets(line, sizeof(line), stdin)) {
		double secs;

		if (!strncmp(line, "go", 2)) {
			timed_batches(&x, n);
			printf("done\n");
		} else if (sscanf(line, "loop %lf", &secs) == 1) {
			double end = now_ns() + secs * 1e9;
			long k = 0;

			while (now_ns() < end) {
				for (int i = 0; i < 10; i++, k++)
					vadd<<<VN / 256, 256>>>(x.a, x.b, x.c, VN);
				CK(cudaDeviceSynchronize());
			}
			printf("looped %ld\n", k);
		} else if (!strncmp(line, "again", 5)) {
			for (int i = 0; i < 100; i++)
				vadd<<<VN / 256, 256>>>(x.a, x.b, x.c, VN);
			CK(cudaGetLastError());
			CK(cudaDeviceSynchronize());
			printf("again ok\n");
		} else if (!strncmp(line, "quit", 4)) {
			break;
		}
	}
	return 0;
}

/* Each kernel's batch between its own pair of events: the GPU time of N back-to-back runs. */
static int timed(int n)
{
	struct bufs x = {dev_buf(VN), dev_buf(VN), dev_buf(VN), dev_buf(MN * MN), dev_buf(MN * MN),
			 dev_buf(MN * MN)};
	float *a = x.a, *b = x.b, *c = x.c, *ma = x.ma, *mb = x.mb, *mc = x.mc;

	/* warm-up, not counted by the program: eprof sees these too, so they are reported */
	vadd<<<VN / 256, 256>>>(a, b, c, VN);
	tmatmul<<<dim3(MN / TILE, MN / TILE), dim3(TILE, TILE)>>>(ma, mb, mc, MN);
	CK(cudaDeviceSynchronize());
	printf("warmup vadd 1\nwarmup tmatmul 1\n");
	timed_batches(&x, n);
	return 0;
}

static int launch_bound(int n)
{
	double t0;

	empty_kernel<<<1, 32>>>();
	CK(cudaDeviceSynchronize());
	t0 = now_ns();
	for (int i = 0; i < n; i++)
		empty_kernel<<<1, 32>>>();
	printf("cpu_ns_per_launch %.1f\n", (now_ns() - t0) / n);
	CK(cudaDeviceSynchronize());
	return 0;
}

static int path(const char *p, int n)
{
	float *a = dev_buf(VN), *b = dev_buf(VN), *c = dev_buf(VN);
	int vn = VN, launched = 0;

	if (!strcmp(p, "chevron")) {
		for (int i = 0; i < n; i++, launched++)
			vadd<<<VN / 256, 256>>>(a, b, c, VN);
	} else if (!strcmp(p, "rt")) {
		void *args[] = {&a, &b, &c, &vn};

		for (int i = 0; i < n; i++, launched++)
			CK(cudaLaunchKernel((const void *)vadd, dim3(VN / 256), dim3(256), args, 0, 0));
	} else if (!strcmp(p, "cuex")) {
		void *args[] = {&a, &b, &c, &vn};
		cudaFunction_t f;
		CUlaunchConfig cfg;

		memset(&cfg, 0, sizeof(cfg));
		CK(cudaGetFuncBySymbol(&f, (const void *)vadd));
		cfg.gridDimX = VN / 256;
		cfg.gridDimY = cfg.gridDimZ = 1;
		cfg.blockDimX = 256;
		cfg.blockDimY = cfg.blockDimZ = 1;
		for (int i = 0; i < n; i++, launched++) {
			CUresult r = cuLaunchKernelEx(&cfg, (CUfunction)f, args, NULL);

			if (r != CUDA_SUCCESS) {
				printf("error cuLaunchKernelEx: %d\n", (int)r);
				return 2;
			}
		}
	} else if (!strcmp(p, "graph")) {
		cudaStream_t s;
		cudaGraph_t g;
		cudaGraphExec_t ge;

		CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
		CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
		for (int i = 0; i < 10; i++)
			vadd<<<VN / 256, 256, 0, s>>>(a, b, c, VN);
		CK(cudaStreamEndCapture(s, &g));
		CK(cudaGraphInstantiate(&ge, g, 0));
		for (int i = 0; i < n / 10; i++, launched += 10)
			CK(cudaGraphLaunch(ge, s));
		CK(cudaStreamSynchronize(s));
	} else if (!strcmp(p, "cublas")) {
#ifndef NO_CUBLAS
		cublasHandle_t h;
		float one = 1, zero = 0;
		float *ma = dev_buf(MN * MN), *mb = dev_buf(MN * MN), *mc = dev_buf(MN * MN);

		if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
			printf("error cublasCreate\n");
			return 2;
		}
		for (int i = 0; i < n; i++, launched++)
			cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, MN, MN, MN, &one, ma, MN, mb, MN, &zero,
				    mc, MN);
		CK(cudaDeviceSynchronize());
		cublasDestroy(h);
#else
		printf("error built without cuBLAS\n");
		return 2;
#endif
	} else {
		printf("error unknown path %s\n", p);
		return 2;
	}
	CK(cudaGetLastError());
	CK(cudaDeviceSynchronize());
	printf("launched %d\n", launched);
	return 0;
}

static int short_run(int sync)
{
	float *a = dev_buf(VN), *b = dev_buf(VN), *c = dev_buf(VN);

	for (int i = 0; i < 50; i++)
		vadd<<<VN / 256, 256>>>(a, b, c, VN);
	CK(cudaGetLastError());
	if (sync)
		CK(cudaDeviceSynchronize());
	printf("launched 50\n");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "timed"))
		return timed(atoi(argv[2]));
	if (argc >= 3 && !strcmp(argv[1], "launch"))
		return launch_bound(atoi(argv[2]));
	if (argc >= 4 && !strcmp(argv[1], "path"))
		return path(argv[2], atoi(argv[3]));
	if (argc >= 3 && !strcmp(argv[1], "short"))
		return short_run(atoi(argv[2]));
	if (argc >= 3 && !strcmp(argv[1], "attach"))
		return attach_mode(atoi(argv[2]));
	fprintf(stderr, "usage: gpu_work timed N | launch N | path P N | short SYNC | attach N\n");
	return 1;
}
