// SPDX-License-Identifier: MIT
// What an object's unwind table costs the recorder before the first unwind result and after:
// the whole-object table (cfi_table__load: every FDE of .eh_frame run and sorted) against the
// on-demand one (cfi_table__open: .eh_frame_hdr's search table, rows for the FDEs looked up),
// in the same run, alternating rounds. Per round and path: CPU time to open the object and
// look up N random pcs inside its functions (the first samples of a big library), the table
// bytes held then, and the warm lookup cost. The pcs and the rules found are the same for
// both paths (checked).
//
// Build and run by hand from the repository root:
//   gcc -std=gnu11 -D_GNU_SOURCE -O2 -Isrc tools/bench/unwind_ondemand.c src/unwind/*.c
//       src/util/log.c src/util/hmap.c src/util/vec.c src/util/elf_layout.c -lelf
//       -o /tmp/unwind_ondemand
//   /tmp/unwind_ondemand [ELF [N [ROUNDS]]]
// Defaults: /usr/lib/x86_64-linux-gnu/libLLVM-14.so.1, 100 pcs, 5 rounds.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "unwind/cfi.h"
#include "unwind/unwind.h"

#define MAX_ROUNDS 21

static double cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return v[n / 2];
}

struct result {
	double open_ns, warm_ns;
	size_t bytes, rows;
	unsigned long hits;
};

/* Opens the table one way, looks every pc up (cold), then again 100 times (warm). */
static int measure(const char *path, bool lazy, const uint64_t *pcs, int n, struct result *res)
{
	struct cfi_table *t;
	double t0 = cpu_ns();
	int err = 0;

	t = lazy ? cfi_table__open(path, &err) : cfi_table__load(path, NULL, &err);
	if (!t) {
		fprintf(stderr, "cannot load CFI of %s: %s\n", path, strerror(-err));
		return -1;
	}
	res->hits = 0;
	for (int i = 0; i < n; i++)
		res->hits += cfi_lookup(t, pcs[i]) != NULL;
	res->open_ns = cpu_ns() - t0;
	res->bytes = cfi_table__bytes(t);
	res->rows = cfi_table__nrows(t);
	t0 = cpu_ns();
	for (int k = 0; k < 100; k++)
		for (int i = 0; i < n; i++)
			res->hits += cfi_lookup(t, pcs[i]) != NULL;
	res->warm_ns = (cpu_ns() - t0) / (100.0 * n);
	if (lazy != cfi_table__on_demand(t))
		fprintf(stderr, "%s: not the table asked for (no usable .eh_frame_hdr?)\n", path);
	cfi_table__free(t);
	return 0;
}

/* n pcs inside random functions, and the rules both tables give them must agree. */
static uint64_t *pick_pcs(const char *path, int n)
{
	struct cfi_table *w = cfi_table__load(path, NULL, &(int){ 0 });
	struct cfi_table *l = cfi_table__open(path, &(int){ 0 });
	uint64_t *pcs = malloc(n * sizeof(*pcs)), x = 88172645463325252ull;
	int bad = 0;

	if (!w || !l || !pcs || !w->nfn)
		exit(1);
	for (int i = 0; i < n; i++) {
		size_t f;
		const struct cfi_rule *a, *b;

		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		f = x % w->nfn;
		pcs[i] = w->fn_start[f] + (x >> 32) % (w->fn_end[f] - w->fn_start[f]);
		a = cfi_lookup(w, pcs[i]);
		b = cfi_lookup(l, pcs[i]);
		bad += !a != !b || (a && memcmp(a, b, sizeof(*a)));
	}
	printf("%s: %zu functions, %zu rows whole; %d random pcs, %d disagreeing rules\n", path,
	       w->nfn, cfi_table__nrows(w), n, bad);
	cfi_table__free(w);
	cfi_table__free(l);
	return pcs;
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1";
	int n = argc > 2 ? atoi(argv[2]) : 100, rounds = argc > 3 ? atoi(argv[3]) : 5;
	double o_open[MAX_ROUNDS], n_open[MAX_ROUNDS], o_warm[MAX_ROUNDS], n_warm[MAX_ROUNDS];
	struct result o = { 0 }, nw = { 0 };
	uint64_t *pcs;

	if (n < 1 || rounds < 1 || rounds > MAX_ROUNDS)
		return 2;
	pcs = pick_pcs(path, n);
	for (int r = 0; r < rounds; r++) {
		/* Alternate which goes first: the page cache and the CPU's state favour neither. */
		if (r & 1) {
			if (measure(path, true, pcs, n, &nw) || measure(path, false, pcs, n, &o))
				return 1;
		} else if (measure(path, false, pcs, n, &o) || measure(path, true, pcs, n, &nw)) {
			return 1;
		}
		o_open[r] = o.open_ns;
		n_open[r] = nw.open_ns;
		o_warm[r] = o.warm_ns;
		n_warm[r] = nw.warm_ns;
	}
	printf("median of %d rounds      whole table   on demand   ratio (on demand / whole)\n",
	       rounds);
	printf("CPU to open + %4d pcs  %9.2f ms  %9.2f ms   %.4f\n", n,
	       median(o_open, rounds) / 1e6, median(n_open, rounds) / 1e6,
	       median(n_open, rounds) / median(o_open, rounds));
	printf("table bytes held        %9zu     %9zu      %.4f\n", o.bytes, nw.bytes,
	       (double)nw.bytes / (double)o.bytes);
	printf("rows held               %9zu     %9zu      %.4f\n", o.rows, nw.rows,
	       (double)nw.rows / (double)o.rows);
	printf("warm lookup             %9.1f ns  %9.1f ns   %.2f\n", median(o_warm, rounds),
	       median(n_warm, rounds), median(n_warm, rounds) / median(o_warm, rounds));
	free(pcs);
	return 0;
}
