/* SPDX-License-Identifier: MIT */
/* Invariants of a cfi_table that the unwinder's lookup relies on (cfi and ehframe targets). */
#ifndef EPROF_FUZZ_CFI_CHECK_H
#define EPROF_FUZZ_CFI_CHECK_H

#include "fuzz_common.h"
#include "unwind/cfi.h"
#include "unwind/unwind.h"

static inline void check_row(const struct cfi_table *t, uint64_t pc)
{
	const struct cfi_rule *r = cfi_lookup(t, pc);
	ssize_t row = cfi_lookup_row(t, pc);
	uint32_t off = (uint32_t)(pc - t->base);
	size_t j;

	if (pc < t->base || pc >= t->limit) {
		FUZZ_CHECK(!r, "a rule outside the table's range");
		return;
	}
	if (!r) {
		FUZZ_CHECK(!t->n || t->pcs[0] > off, "no rule for a covered pc");
		return;
	}
	FUZZ_CHECK(row >= 0 && r == cfi_row_rule(t, row), "lookup and row disagree");
	j = (size_t)row;
	FUZZ_CHECK(j < t->n, "row %zu of %zu", j, t->n);
	FUZZ_CHECK(!t->ridx || t->ridx[j] < t->nrules, "rule %u of a palette of %zu",
		   t->ridx ? t->ridx[j] : 0, t->nrules);
	FUZZ_CHECK(t->pcs[j] <= off && (j + 1 == t->n || t->pcs[j + 1] > off),
		   "lookup of +%#x found row %zu (+%#x)", off, j, t->pcs[j]);
}

static inline void check_table(const struct cfi_table *t)
{
	uint64_t start, end;

	FUZZ_CHECK(t->limit > t->base, "empty range");
	for (size_t i = 1; i < t->n; i++)
		FUZZ_CHECK(t->pcs[i - 1] <= t->pcs[i], "rows not sorted at %zu", i);
	for (size_t i = 0; i < t->n && i < 4096; i++) {
		check_row(t, t->base + t->pcs[i]);
		check_row(t, t->base + t->pcs[i] - 1);
		check_row(t, t->base + t->pcs[i] + 1);
	}
	for (int k = 0; k <= 64; k++) {
		uint64_t pc = t->base + (t->limit - t->base) / 64 * k;

		check_row(t, pc);
		if (cfi_table__func_range(t, pc, &start, &end))
			FUZZ_CHECK(start <= pc && pc < end, "function range misses its pc");
	}
	check_row(t, 0);
	check_row(t, UINT64_MAX);
	check_row(t, t->limit);
	for (size_t i = 1; i < t->nfn; i++)
		FUZZ_CHECK(t->fn_start[i - 1] < t->fn_start[i], "function ranges not sorted");
}

/*
 * An on-demand table: each search-table entry's pc and its neighbours look up
 * without fault, a rule only inside the function range that covers the pc.
 */
static inline void check_lazy(const struct cfi_table *t)
{
	uint64_t pc, start, end;

	for (size_t i = 0; i < 1024 && cfi_lazy__entry(t, i, &pc); i++)
		for (uint64_t p = pc - 1; p != pc + 3; p++) {
			const struct cfi_rule *r = cfi_lookup(t, p);
			bool in = cfi_table__func_range(t, p, &start, &end);

			FUZZ_CHECK(!r || in, "a rule outside every function");
			FUZZ_CHECK(!in || (start <= p && p < end), "function range misses its pc");
		}
	cfi_lookup(t, 0);
	cfi_lookup(t, UINT64_MAX);
	FUZZ_CHECK(cfi_table__nrows(t) < cfi_table__bytes(t), "rows not counted in bytes");
}

#endif
