// SPDX-License-Identifier: MIT
/* Kernel symbols from a kallsyms file ("ADDR TYPE NAME [MODULE]" lines). */
#include <stdint.h>

#include "fuzz_common.h"
#include "sym/symbolizer.h"

#define MAX_ADDRS 24

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct symbolizer_opts so = { 0 };
	uint64_t addr[MAX_ADDRS];
	size_t n = fuzz_line_addrs(data, size, addr, MAX_ADDRS);
	struct symbolizer *s;

	so.kallsyms_path = fuzz_file("kallsyms", data, size);
	s = symbolizer__new(&so);
	if (!s)
		return 0;
	for (size_t i = 0; i < n; i++) {
		for (int d = -1; d <= 1; d++) {
			struct sym_result r;

			if (!symbolizer__kernel(s, addr[i] + d, &r))
				FUZZ_CHECK(r.n == 1 && r.frames[0].name, "kernel hit without a name");
			sym_result__free(&r);
			symbolizer__kernel_module(s, addr[i] + d);
		}
	}
	symbolizer__free(s);
	return 0;
}
