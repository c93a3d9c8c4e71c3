// SPDX-License-Identifier: MIT
/* Seed shared object: .dynsym only after stripping, PLT calls, a weak alias. */
#include <string.h>

__attribute__((noinline)) size_t lib_len(const char *s)
{
	return strlen(s) + 1;
}

size_t lib_alias(const char *s) __attribute__((weak, alias("lib_len")));

int lib_cmp(const char *a, const char *b)
{
	return strcmp(a, b) + (int)lib_len(a);
}
