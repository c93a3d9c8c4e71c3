// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vec.h"

#define VEC_MIN_CAP 16

/* Capacity ncap: 0 or -ENOMEM, the array as it was. */
static int resize(void **v, size_t *cap, size_t ncap, size_t elem)
{
	void *nv;

	if (elem && ncap > SIZE_MAX / elem)
		return -ENOMEM;
	nv = realloc(*v, ncap * elem);
	if (!nv)
		return -ENOMEM;
	*v = nv;
	*cap = ncap;
	return 0;
}

int vec_grow_(void **v, size_t *cap, size_t want, size_t elem)
{
	size_t ncap = *cap ? *cap : VEC_MIN_CAP;

	if (want <= *cap)
		return 0;
	while (ncap < want) {
		if (ncap > SIZE_MAX / 2)
			return -ENOMEM;
		ncap *= 2;
	}
	return resize(v, cap, ncap, elem);
}

void *vec_push_(void **v, size_t *n, size_t *cap, size_t elem)
{
	char *p;

	if (*n == *cap && vec_grow_(v, cap, *n + 1, elem)) {
		errno = ENOMEM;
		return NULL;
	}
	p = (char *)*v + (*n)++ * elem;
	memset(p, 0, elem);
	return p;
}

int vec_reserve_(void **v, size_t *cap, size_t want, size_t elem)
{
	return want <= *cap ? 0 : resize(v, cap, want, elem);
}

