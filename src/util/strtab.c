// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hmap.h"
#include "strtab.h"
#include "vec.h"

#define BLOCK_SIZE (256 * 1024)

struct block {
	struct block *next;
	size_t used, size;
	char data[];
};

struct strtab {
	char **ptrs;
	uint32_t n;
	size_t cap, cap_chain;
	struct hmap *index; /* (hash, len) -> id; collisions checked by strcmp chain below */
	uint32_t *chain;    /* next id with the same (hash, len) key, 0 = end */
	struct block *blocks;
};

static char *arena_alloc(struct strtab *t, size_t len)
{
	struct block *b = t->blocks;

	if (!b || b->used + len > b->size) {
		size_t sz = len > BLOCK_SIZE ? len : BLOCK_SIZE;

		b = malloc(sizeof(*b) + sz);
		if (!b)
			return NULL;
		b->size = sz;
		b->used = 0;
		b->next = t->blocks;
		t->blocks = b;
	}
	b->used += len;
	return b->data + b->used - len;
}

struct strtab *strtab__new(void)
{
	struct strtab *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->index = hmap__new(1024);
	if (!t->index || strtab__intern(t, "") != 0) {
		strtab__free(t);
		return NULL;
	}
	return t;
}

void strtab__free(struct strtab *t)
{
	if (!t)
		return;
	while (t->blocks) {
		struct block *b = t->blocks;

		t->blocks = b->next;
		free(b);
	}
	hmap__free(t->index);
	free(t->ptrs);
	free(t->chain);
	free(t);
}

uint32_t strtab__intern_len(struct strtab *t, const char *s, size_t len)
{
	uint64_t h = hash_bytes(s, len), head = 0;
	uint32_t id;
	char *copy;

	if (hmap__get(t->index, h, len, &head)) {
		for (id = (uint32_t)head; ; id = t->chain[id]) {
			if (!memcmp(t->ptrs[id], s, len) && t->ptrs[id][len] == '\0')
				return id;
			if (!t->chain[id])
				break;
		}
	}
	/* UINT32_MAX is the error return: ids stay below it. */
	if (t->n >= UINT32_MAX - 1 || arr_grow(t->ptrs, t->cap, (size_t)t->n + 1) ||
	    arr_grow(t->chain, t->cap_chain, (size_t)t->n + 1))
		return UINT32_MAX;

	copy = arena_alloc(t, len + 1);
	if (!copy)
		return UINT32_MAX;
	memcpy(copy, s, len);
	copy[len] = '\0';
	id = t->n++;
	t->ptrs[id] = copy;
	/* New id becomes the head of its bucket chain; the old head follows it. */
	t->chain[id] = (uint32_t)head;
	if (hmap__put(t->index, h, len, id)) {
		t->n--;
		return UINT32_MAX;
	}
	return id;
}

uint32_t strtab__intern(struct strtab *t, const char *s)
{
	return strtab__intern_len(t, s ? s : "", s ? strlen(s) : 0);
}

const char *strtab__get(const struct strtab *t, uint32_t id)
{
	return id < t->n ? t->ptrs[id] : "";
}

uint32_t strtab__count(const struct strtab *t)
{
	return t->n;
}
