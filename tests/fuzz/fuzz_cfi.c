// SPDX-License-Identifier: MIT
/*
 * The unwinder's CFI tables from an untrusted ELF image (cfi_table__load_mem:
 * libelf, .eh_frame_hdr/.eh_frame/.debug_frame, the DW_CFA interpreter), and
 * the lookup on the result. The same image as a file (a memfd) through
 * cfi_table__open: the on-demand table its .eh_frame_hdr gives, or the whole
 * one when the header is refused.
 */
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cfi_check.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet();
	return 0;
}

static void check_open(const uint8_t *data, size_t size)
{
	static int fd = -1;
	char path[64];
	struct cfi_table *t;
	int err = 0;

	if (fd < 0)
		fd = memfd_create("fuzz_cfi", 0);
	if (fd < 0 || ftruncate(fd, 0) || pwrite(fd, data, size, 0) != (ssize_t)size)
		return;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	t = cfi_table__open(path, &err);
	if (t && cfi_table__on_demand(t))
		check_lazy(t);
	else if (t)
		check_table(t);
	else
		FUZZ_CHECK(err < 0, "no table and no error");
	cfi_table__free(t);
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
	check_open(data, size);
	return 0;
}
