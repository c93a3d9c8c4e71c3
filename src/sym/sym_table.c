// SPDX-License-Identifier: MIT
/* Sorted address tables shared by ELF symbols, kallsyms and perf maps. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sym/sym_internal.h"
#include "util/vec.h"

/* How far back a lookup looks for an earlier symbol that still covers the address. */
#define SYMTAB_SCAN_BACK 8

void symtab__init(struct symtab *t)
{
	memset(t, 0, sizeof(*t));
}

void symtab__clear(struct symtab *t)
{
	if (t->pretty) {
		for (size_t i = 0; i < t->n; i++)
			free(t->pretty[i]);
	}
	free(t->pretty);
	free(t->ents);
	free(t->strs);
	symtab__init(t);
}

int symtab__add(struct symtab *t, uint64_t addr, uint64_t end, const char *name, size_t len,
		uint8_t flags, uint8_t rank, uint32_t aux)
{
	struct symtab_ent *e;
	int err;

	/* Offsets are 32-bit: a string table past 4 GiB is not a real symbol table. */
	if (t->strs_len + len + 1 > UINT32_MAX)
		return -E2BIG;
	err = arr_grow(t->ents, t->cap, t->n + 1);
	if (!err)
		err = arr_grow(t->strs, t->strs_cap, t->strs_len + len + 1);
	if (err)
		return err;
	e = &t->ents[t->n++];
	e->addr = addr;
	e->end = end;
	e->name = (uint32_t)t->strs_len;
	e->aux = aux;
	e->flags = flags;
	e->rank = rank;
	memcpy(t->strs + t->strs_len, name, len);
	t->strs[t->strs_len + len] = '\0';
	t->strs_len += len + 1;
	return 0;
}

static int ent_cmp(const void *pa, const void *pb, void *strs)
{
	const struct symtab_ent *a = pa, *b = pb;
	const char *sort_strs = strs;
	const char *na, *nb;
	size_t la, lb;

	if (a->addr != b->addr)
		return a->addr < b->addr ? -1 : 1;
	if (a->rank != b->rank)
		return a->rank < b->rank ? -1 : 1;
	/* Perf maps: the later line describes the code now at that address. */
	if (a->aux != b->aux)
		return a->aux > b->aux ? -1 : 1;
	/* Among equal aliases prefer the shorter, then the alphabetically first name. */
	na = sort_strs + a->name;
	nb = sort_strs + b->name;
	la = strlen(na);
	lb = strlen(nb);
	if (la != lb)
		return la < lb ? -1 : 1;
	return strcmp(na, nb);
}

int symtab__finish(struct symtab *t)
{
	size_t out = 0;

	if (!t->n)
		return 0;
	qsort_r(t->ents, t->n, sizeof(*t->ents), ent_cmp, t->strs);
	for (size_t i = 0; i < t->n; i++) {
		if (out && t->ents[out - 1].addr == t->ents[i].addr)
			continue; /* an alias ranked lower than the one kept */
		t->ents[out++] = t->ents[i];
	}
	t->n = out;
	/* A symbol without a size runs to the next symbol (or its own bound). */
	for (size_t i = 0; i + 1 < t->n; i++) {
		struct symtab_ent *e = &t->ents[i];

		if ((e->flags & SYMTAB_GUESSED) && e->end > t->ents[i + 1].addr)
			e->end = t->ents[i + 1].addr;
	}
	return 0;
}

/* Index of the last entry whose address is <= addr, or -1. */
static long find_floor(const struct symtab *t, uint64_t addr)
{
	size_t lo = 0, hi = t->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (t->ents[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (long)lo - 1;
}

const struct symtab_ent *symtab__find(const struct symtab *t, uint64_t addr)
{
	long i = find_floor(t, addr), stop;
	const struct symtab_ent *guess = NULL;

	if (i < 0)
		return NULL;
	/* A guessed size never overlaps a later entry, so only the floor can be one. */
	if ((t->ents[i].flags & SYMTAB_GUESSED) && addr < t->ents[i].end)
		guess = &t->ents[i];
	stop = i >= SYMTAB_SCAN_BACK ? i - SYMTAB_SCAN_BACK : 0;
	for (; i >= stop; i--) {
		const struct symtab_ent *e = &t->ents[i];

		if (!(e->flags & SYMTAB_GUESSED) && addr < e->end)
			return e;
	}
	return guess;
}

const char *symtab__pretty(struct symtab *t, const struct symtab_ent *e)
{
	size_t i = (size_t)(e - t->ents);

	if (!t->pretty) {
		t->pretty = calloc(t->n ? t->n : 1, sizeof(*t->pretty));
		if (!t->pretty)
			return NULL;
	}
	if (!t->pretty[i])
		t->pretty[i] = sym_demangle(symtab__name(t, e));
	return t->pretty[i];
}

/* --- results ------------------------------------------------------------------ */

int sym_result__alloc(struct sym_result *r, uint32_t n)
{
	r->frames = calloc(n ? n : 1, sizeof(*r->frames));
	r->n = 0;
	return r->frames ? 0 : -ENOMEM;
}

int sym_frame__set(struct sym_frame *f, const char *name, const char *file, uint32_t line,
		   bool inlined)
{
	f->name = strdup(name ? name : "??");
	f->file = file ? strdup(file) : NULL;
	f->line = line;
	f->inlined = inlined;
	if (!f->name || (file && !f->file)) {
		free(f->name);
		free(f->file);
		f->name = f->file = NULL;
		return -ENOMEM;
	}
	return 0;
}

void sym_result__free(struct sym_result *r)
{
	if (!r)
		return;
	for (uint32_t i = 0; i < r->n; i++) {
		free(r->frames[i].name);
		free(r->frames[i].file);
	}
	free(r->frames);
	r->frames = NULL;
	r->n = 0;
}

int sym_result__copy(struct sym_result *dst, const struct sym_result *src)
{
	int err = sym_result__alloc(dst, src->n);

	if (err)
		return err;
	for (uint32_t i = 0; i < src->n; i++) {
		const struct sym_frame *f = &src->frames[i];

		err = sym_frame__set(&dst->frames[i], f->name, f->file, f->line, f->inlined);
		if (err) {
			sym_result__free(dst);
			return err;
		}
		dst->n++;
	}
	return 0;
}
