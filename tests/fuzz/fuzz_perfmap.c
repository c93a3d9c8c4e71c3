// SPDX-License-Identifier: MIT
/*
 * JIT perf maps (/tmp/perf-PID.map: "START SIZE name" lines) and jitdump
 * files (binary, "JiTD" magic) as the symbolizer reads them, including the
 * re-read when a JIT appends: the first half of the input is the file as first
 * read, the whole input the file after the JIT wrote more.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "sym/symbolizer.h"

#define MAX_ADDRS 24

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet();
	return 0;
}

static void lookups(struct symbolizer *s, const char *path, const uint64_t *addr, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		for (int d = -1; d <= 1; d++) {
			struct sym_result r;

			if (!symbolizer__perfmap(s, path, addr[i] + d, &r))
				FUZZ_CHECK(r.n == 1 && r.frames[0].name && r.frames[0].name[0],
					   "perf map hit without a name");
			sym_result__free(&r);
		}
	}
}

/* Code addresses of a jitdump's records (LOAD: code_addr; MOVE: the new address). */
static size_t jitdump_addrs(const uint8_t *d, size_t size, uint64_t *addr, size_t max)
{
	uint32_t magic, hsize, id, len;
	size_t off, n = 0;

	if (size < 40)
		return 0;
	memcpy(&magic, d, 4);
	memcpy(&hsize, d + 8, 4);
	if (magic != 0x4a695444 || hsize > size)
		return 0;
	for (off = hsize; size - off >= 16 + 32 && n < max; off += len) {
		memcpy(&id, d + off, 4);
		memcpy(&len, d + off + 4, 4);
		if (len < 16 || len > size - off)
			break;
		if (id <= 1)
			memcpy(&addr[n++], d + off + 16 + (id ? 24 : 16), 8);
	}
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t addr[MAX_ADDRS];
	size_t n = jitdump_addrs(data, size, addr, MAX_ADDRS);

	if (!n)
		n = fuzz_line_addrs(data, size, addr, MAX_ADDRS);
	struct symbolizer *s = symbolizer__new(NULL);
	const char *path;

	if (!s)
		return 0;
	path = fuzz_file("perf-1.map", data, size / 2);
	lookups(s, path, addr, n);
	fuzz_file("perf-1.map", data, size);
	lookups(s, path, addr, n);
	symbolizer__free(s);
	return 0;
}
