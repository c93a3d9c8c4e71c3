// SPDX-License-Identifier: MIT
/*
 * The unwinder's CFI tables from an untrusted ELF image (cfi_table__load_mem:
 * libelf, .eh_frame_hdr/.eh_frame/.debug_frame, the DW_CFA interpreter), and
 * the lookup on the result.
 */
#include <stdint.h>

#include "cfi_check.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int err = 0;
	struct cfi_table *t = cfi_table__load_mem(data, size, &err);

	if (t)
		check_table(t);
	else
		FUZZ_CHECK(err < 0, "no table and no error");
	cfi_table__free(t);
	return 0;
}
