// SPDX-License-Identifier: MIT
/* Seed for fuzz_usdt: USDT probes with a semaphore, register, memory and constant arguments. */
#include <sys/sdt.h>

unsigned short seed_work_semaphore __attribute__((section(".probes"), used));
static volatile int sink;

__attribute__((noinline)) int work(int n, const char *name)
{
	DTRACE_PROBE2(seed, work__begin, name, n);
	for (int i = 0; i < n; i++)
		sink += i;
	DTRACE_PROBE1(seed, work__end, sink);
	return sink;
}

int main(int argc, char **argv)
{
	DTRACE_PROBE(seed, start);
	return work(argc * 10, argv[0]) & 1;
}
