// SPDX-License-Identifier: MIT
/*
 * The ELF reading of region probes (src/record/usdt.c): USDT notes of
 * .note.stapsdt, their argument strings, function lookups by name and by
 * address, vaddr to file offset, and DT_NEEDED resolution, on any file.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "sym/usdt.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet();
	return 0;
}

static void on_needed(void *arg, const char *path)
{
	size_t *n = arg;

	FUZZ_CHECK(path && path[0], "empty needed path");
	(*n)++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fuzz_file("usdt.elf", data, size);
	struct usdt_note *notes = NULL;
	uint64_t vaddr, off;
	size_t needed = 0;
	char name[128];
	int fd, n;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = usdt_notes_read(fd, &notes);
	for (int i = 0; i < n; i++) {
		const struct usdt_note *u = &notes[i];

		FUZZ_CHECK(memchr(u->provider, 0, sizeof(u->provider)) &&
				   memchr(u->name, 0, sizeof(u->name)) &&
				   memchr(u->args, 0, sizeof(u->args)),
			   "note strings not terminated");
		for (int a = 0; a < 12; a++) {
			struct usdt_arg arg;
			int err = usdt_arg_parse(u->args, a, &arg);

			if (err == -ENOENT)
				break;
			FUZZ_CHECK(err || (arg.size >= -8 && arg.size <= 8), "argument size %d", arg.size);
		}
		elf_vaddr_to_off(fd, u->pc, &off);
		if (elf_func_at(fd, u->pc, name, sizeof(name)))
			FUZZ_CHECK(memchr(name, 0, sizeof(name)), "name not terminated");
	}
	free(notes);
	if (!elf_func_lookup(fd, "main", &vaddr, &off))
		elf_func_at(fd, vaddr, name, sizeof(name));
	elf_needed_paths(fd, path, "/nonexistent", on_needed, &needed);
	close(fd);
	/* The argument parser on the raw bytes as a string, too. */
	if (size) {
		char *s = malloc(size + 1);
		struct usdt_arg arg;

		if (s) {
			memcpy(s, data, size);
			s[size] = '\0';
			for (int a = 0; a < 4; a++)
				usdt_arg_parse(s, a, &arg);
			free(s);
		}
	}
	return 0;
}
