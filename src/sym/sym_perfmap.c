// SPDX-License-Identifier: MIT
/*
 * JIT symbols from perf map files (/tmp/perf-PID.map): "START SIZE name"
 * lines, hex. A JIT appends as it compiles, so a miss re-reads a file that
 * has changed since it was read.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sym/sym_internal.h"
#include "util/elf_layout.h"

struct perfmap {
	char *path;
	struct symtab syms;
	struct stat st; /* of the file as last read */
	bool loaded;
};

static int parse_line(struct symtab *t, char *line, uint32_t order)
{
	unsigned long long start, size;
	char *p = line, *end;
	size_t len;

	start = strtoull(p, &end, 16);
	if (end == p || *end != ' ')
		return 0;
	p = end + 1;
	size = strtoull(p, &end, 16);
	if (end == p || *end != ' ' || !size)
		return 0;
	p = end + 1;
	len = strcspn(p, "\r\n");
	if (!len || start + size < start)
		return 0;
	return symtab__add(t, start, start + size, p, len, 0, 0, order);
}

static int read_map(struct perfmap *m)
{
	struct symtab t;
	size_t cap = 0, lines = 0;
	char *line = NULL;
	FILE *f;
	int err = 0;

	symtab__init(&t);
	{
		int fd = open_regular(m->path);

		f = fd >= 0 ? fdopen(fd, "re") : NULL;
		if (!f && fd >= 0)
			close(fd);
	}
	if (!f)
		return -errno;
	if (fstat(fileno(f), &m->st)) {
		err = -errno;
		goto out;
	}
	while (!err && getline(&line, &cap, f) > 0)
		err = parse_line(&t, line, (uint32_t)++lines);
	if (!err && ferror(f))
		err = -EIO;
	if (!err)
		err = symtab__finish(&t);
out:
	free(line);
	fclose(f);
	if (err) {
		symtab__clear(&t);
		return err;
	}
	symtab__clear(&m->syms);
	m->syms = t;
	m->loaded = true;
	return 0;
}

struct perfmap *perfmap__load(const char *path)
{
	struct perfmap *m = calloc(1, sizeof(*m));
	int err;

	if (!m || !(m->path = strdup(path))) {
		free(m);
		errno = ENOMEM;
		return NULL;
	}
	symtab__init(&m->syms);
	err = read_map(m);
	if (err) {
		perfmap__free(m);
		errno = -err;
		return NULL;
	}
	return m;
}

void perfmap__free(struct perfmap *m)
{
	if (!m)
		return;
	symtab__clear(&m->syms);
	free(m->path);
	free(m);
}

const char *perfmap__path(const struct perfmap *m)
{
	return m->path;
}

int perfmap__refresh(struct perfmap *m)
{
	struct stat st;

	if (stat(m->path, &st))
		return -errno;
	if (st.st_size == m->st.st_size && st.st_mtim.tv_sec == m->st.st_mtim.tv_sec &&
	    st.st_mtim.tv_nsec == m->st.st_mtim.tv_nsec && st.st_ino == m->st.st_ino)
		return 0;
	return read_map(m);
}

const char *perfmap__find(const struct perfmap *m, uint64_t addr)
{
	const struct symtab_ent *e = symtab__find(&m->syms, addr);

	return e ? symtab__name(&m->syms, e) : NULL;
}
