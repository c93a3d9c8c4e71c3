// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "hmap.h"

struct slot {
	uint64_t k1, k2, val;
	uint8_t used;
};

struct hmap {
	struct slot *slots;
	size_t cap; /* power of two */
	size_t count;
	uint64_t seed;
};

/*
 * Keys often come from files that may be hostile (thread ids, addresses): with
 * a fixed hash, keys chosen to land in one cluster make every lookup walk it.
 * A seed per process, unknown to the file, spreads them. Nothing iterates a
 * map, so the seed changes no output.
 */
static uint64_t process_seed(void)
{
	static uint64_t seed;
	uint64_t s = __atomic_load_n(&seed, __ATOMIC_RELAXED);
	struct timespec ts;

	if (s)
		return s;
	if (getrandom(&s, sizeof(s), GRND_NONBLOCK) != (ssize_t)sizeof(s)) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		s = hash_mix64((uint64_t)ts.tv_nsec ^ (uint64_t)(uintptr_t)&ts ^
			       (uint64_t)ts.tv_sec << 32);
	}
	s |= 1;
	__atomic_store_n(&seed, s, __ATOMIC_RELAXED);
	return s;
}

uint64_t hmap__seed(void)
{
	return process_seed();
}

uint64_t hash_bytes(const void *data, size_t len)
{
	/* FNV-1a, then a final mix: strings here are short and hashing is not hot. */
	const unsigned char *p = data;
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	return hash_mix64(h);
}

static size_t slot_of(const struct hmap *m, uint64_t k1, uint64_t k2)
{
	return hash_mix64((k1 ^ m->seed) * 0x9e3779b97f4a7c15ULL ^ hash_mix64(k2 + m->seed)) &
	       (m->cap - 1);
}

struct hmap *hmap__new(size_t expect)
{
	struct hmap *m = calloc(1, sizeof(*m));
	size_t cap = 16;

	if (!m)
		return NULL;
	while (cap < expect * 2)
		cap <<= 1;
	m->slots = calloc(cap, sizeof(*m->slots));
	if (!m->slots) {
		free(m);
		return NULL;
	}
	m->cap = cap;
	m->seed = process_seed();
	return m;
}

void hmap__free(struct hmap *m)
{
	if (!m)
		return;
	free(m->slots);
	free(m);
}

bool hmap__get(const struct hmap *m, uint64_t k1, uint64_t k2, uint64_t *val)
{
	size_t i = slot_of(m, k1, k2);

	for (;;) {
		const struct slot *s = &m->slots[i];

		if (!s->used)
			return false;
		if (s->k1 == k1 && s->k2 == k2) {
			*val = s->val;
			return true;
		}
		i = (i + 1) & (m->cap - 1);
	}
}

static int grow(struct hmap *m)
{
	struct slot *old = m->slots;
	size_t oldcap = m->cap, ncap = m->cap * 2;

	m->slots = calloc(ncap, sizeof(*m->slots));
	if (!m->slots) {
		m->slots = old;
		return -ENOMEM;
	}
	m->cap = ncap;
	for (size_t i = 0; i < oldcap; i++) {
		size_t j;

		if (!old[i].used)
			continue;
		j = slot_of(m, old[i].k1, old[i].k2);
		while (m->slots[j].used)
			j = (j + 1) & (ncap - 1);
		m->slots[j] = old[i];
	}
	free(old);
	return 0;
}

int hmap__put(struct hmap *m, uint64_t k1, uint64_t k2, uint64_t val)
{
	size_t i;

	if ((m->count + 1) * 4 > m->cap * 3 && grow(m))
		return -ENOMEM;
	i = slot_of(m, k1, k2);
	for (;;) {
		struct slot *s = &m->slots[i];

		if (!s->used) {
			s->used = 1;
			s->k1 = k1;
			s->k2 = k2;
			s->val = val;
			m->count++;
			return 0;
		}
		if (s->k1 == k1 && s->k2 == k2) {
			s->val = val;
			return 0;
		}
		i = (i + 1) & (m->cap - 1);
	}
}

size_t hmap__count(const struct hmap *m)
{
	return m->count;
}
