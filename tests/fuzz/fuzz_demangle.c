// SPDX-License-Identifier: MIT
/* Symbol names as the symbolizer shows them: demangling and parameter-list stripping. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "sym/symbolizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1), *d;

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	d = sym_demangle(s);
	if (d) {
		sym_strip_params(d);
		free(d);
	}
	sym_strip_params(s);
	FUZZ_CHECK(strlen(s) <= size, "stripping made the name longer");
	free(s);
	return 0;
}
