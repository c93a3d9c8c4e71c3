// SPDX-License-Identifier: MIT
#include <math.h>

#include "expq.h"

void exp_quantiles(uint64_t *t, size_t n, double mean)
{
	double sum = 0;

	for (size_t i = 0; i < n; i++)
		sum += -log((i + 0.5) / n);
	for (size_t i = 0; i < n; i++) {
		double v = -log((i + 0.5) / n) * mean * n / sum;

		t[i] = v < 1 ? 1 : (uint64_t)llround(v);
	}
}
