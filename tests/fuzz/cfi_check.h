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

#endif
