// SPDX-License-Identifier: MIT
/* Seed ELF for the symbolizer and CFI fuzz targets: inline chains, a realigned main. */
#include <stdio.h>
#include <stdlib.h>

static inline __attribute__((always_inline)) int leaf(int x)
{
	return x * 3 + 1;
}

static inline __attribute__((always_inline)) int middle(int x)
{
	return leaf(x) ^ leaf(x + 1);
}

__attribute__((noinline)) int outer(int n)
{
	int s = 0;

	for (int i = 0; i < n; i++)
		s += middle(i);
	return s;
}

__attribute__((noinline)) int aligned(int n)
{
	int __attribute__((aligned(64))) buf[16];

	for (int i = 0; i < 16; i++)
		buf[i] = outer(n + i);
	return buf[n & 15];
}

int main(int argc, char **argv)
{
	printf("%d\n", aligned(argc > 1 ? atoi(argv[1]) : 3));
	return 0;
}
