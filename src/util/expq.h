/* SPDX-License-Identifier: MIT */
#ifndef EPROF_EXPQ_H
#define EPROF_EXPQ_H

#include <stddef.h>
#include <stdint.h>

/*
 * Fills t[0..n) with quantiles of an exponential distribution (at the midpoints of n
 * equal slices), scaled so their mean is exactly `mean` and each at least 1: BPF draws
 * a Poisson process's gaps from such a table with one random index, no floating point.
 */
void exp_quantiles(uint64_t *t, size_t n, double mean);

#endif
