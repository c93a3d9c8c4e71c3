/* SPDX-License-Identifier: MIT */
/*
 * Growable arrays. A VEC(type) holds its elements, count and capacity; arr_push() and
 * arr_grow() do the same for an array kept as three separate fields (a struct whose layout
 * other code reads). Capacity doubles, so n pushes cost O(n) copies in all.
 */
#ifndef EPROF_VEC_H
#define EPROF_VEC_H

#include <stddef.h>
#include <stdlib.h>

#define VEC(type)                                                                                  \
	struct {                                                                                   \
		type *v;                                                                           \
		size_t n, cap;                                                                     \
	}

/* Grows (v, n, cap) by one zeroed element; returns a pointer to it, or NULL with errno ENOMEM. */
void *vec_push_(void **v, size_t *n, size_t *cap, size_t elem);
/* Capacity for at least want elements, doubling (at least 16); 0 or -ENOMEM. */
int vec_grow_(void **v, size_t *cap, size_t want, size_t elem);
/* Capacity of exactly want elements when it is less (a known final size); 0 or -ENOMEM. */
int vec_reserve_(void **v, size_t *cap, size_t want, size_t elem);

/* An array kept as separate fields: ptr (any element type), n and cap (size_t). */
#define arr_push(ptr, n, cap)                                                                      \
	((__typeof__(ptr))vec_push_((void **)&(ptr), &(n), &(cap), sizeof(*(ptr))))
#define arr_grow(ptr, cap, want)                                                                   \
	({                                                                                         \
		size_t want_ = (want);                                                             \
		want_ <= (cap) ? 0 : vec_grow_((void **)&(ptr), &(cap), want_, sizeof(*(ptr)));    \
	})

#define vec_push(vec) arr_push((vec).v, (vec).n, (vec).cap)
#define vec_grow(vec, want) arr_grow((vec).v, (vec).cap, (want))
#define vec_reserve(vec, want) vec_reserve_((void **)&(vec).v, &(vec).cap, (want), sizeof(*(vec).v))
/* Frees the elements and leaves an empty VEC. */
#define vec_free(vec)                                                                              \
	do {                                                                                       \
		free((vec).v);                                                                     \
		(vec).v = NULL;                                                                    \
		(vec).n = (vec).cap = 0;                                                           \
	} while (0)

#endif
