/* SPDX-License-Identifier: MIT */
/* Open-addressing hash map from a 128-bit key (two u64) to a u64 value. */
#ifndef EPROF_HMAP_H
#define EPROF_HMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hmap;

struct hmap *hmap__new(size_t expect);
void hmap__free(struct hmap *m);
/* Returns true and sets *val when found. */
bool hmap__get(const struct hmap *m, uint64_t k1, uint64_t k2, uint64_t *val);
/* Inserts or overwrites; returns 0 or -ENOMEM. */
int hmap__put(struct hmap *m, uint64_t k1, uint64_t k2, uint64_t val);
size_t hmap__count(const struct hmap *m);
/* The per-process random seed the maps hash with (never 0): for other structures whose
 * balance must not be up to a file's contents. */
uint64_t hmap__seed(void);

static inline uint64_t hash_mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

uint64_t hash_bytes(const void *data, size_t len);

#endif
