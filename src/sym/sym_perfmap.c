// SPDX-License-Identifier: MIT
/*
 * JIT symbols from perf map files (/tmp/perf-PID.map): "START SIZE name"
 * lines, hex; or from a jitdump file (jit-PID.dump, perf's binary format:
 * a header and JIT_CODE_LOAD / JIT_CODE_MOVE records). A JIT appends as it
 * compiles, so a miss re-reads a file that has changed since it was read.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sym/sym_internal.h"
#include "sym/symbolizer.h"
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

/* perf's jitdump format (tools/perf/Documentation/jitdump-specification.txt), little-endian. */
#define JITDUMP_MAGIC 0x4a695444u /* "JiTD" */
#define JITDUMP_HDR_MIN 40
#define JIT_CODE_LOAD 0
#define JIT_CODE_MOVE 1
#define JITDUMP_MAX (1ull << 30) /* a bigger file is not read */

static uint32_t rd32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static uint64_t rd64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* The name of the newest entry at addr among the last ones added (a code move's source). */
static const char *recent_name(const struct symtab *t, uint64_t addr, size_t *len)
{
	for (size_t i = t->n, k = 0; i-- > 0 && k < 4096; k++) {
		if (t->ents[i].addr == addr) {
			*len = strlen(t->strs + t->ents[i].name);
			return t->strs + t->ents[i].name;
		}
	}
	return NULL;
}

/* Records of a jitdump file; one that runs past the end (still being written) ends it. */
static int parse_jitdump(struct symtab *t, const uint8_t *d, size_t size)
{
	size_t off = rd32(d + 8); /* header size */
	uint32_t order = 0;
	int err = 0;

	if (off < JITDUMP_HDR_MIN || off > size)
		return -EINVAL;
	while (!err && size - off >= 16) {
		uint32_t id = rd32(d + off), len = rd32(d + off + 4);
		const uint8_t *r = d + off + 16;

		if (len < 16 || len > size - off)
			break;
		if (id == JIT_CODE_LOAD && len >= 16 + 40) {
			uint64_t addr = rd64(r + 16), csize = rd64(r + 24);
			const uint8_t *name = r + 40, *nul = memchr(name, 0, len - 16 - 40);

			if (nul && nul > name && csize && addr + csize > addr)
				err = symtab__add(t, addr, addr + csize, (const char *)name,
						  (size_t)(nul - name), 0, 0, ++order);
		} else if (id == JIT_CODE_MOVE && len >= 16 + 48) {
			uint64_t from = rd64(r + 16), to = rd64(r + 24), csize = rd64(r + 32);
			size_t nlen = 0;
			const char *name = recent_name(t, from, &nlen);
			char copy[256];

			/* The name lives in t's string table, which adding may move. */
			if (name && csize && to + csize > to) {
				nlen = nlen < sizeof(copy) ? nlen : sizeof(copy) - 1;
				memcpy(copy, name, nlen);
				err = symtab__add(t, to, to + csize, copy, nlen, 0, 0, ++order);
			}
		}
		off += len;
	}
	return err;
}

static int read_jitdump(struct symtab *t, FILE *f, const struct stat *st)
{
	uint8_t *d;
	int err;

	if (st->st_size < JITDUMP_HDR_MIN || (uint64_t)st->st_size > JITDUMP_MAX)
		return -EINVAL;
	d = malloc((size_t)st->st_size);
	if (!d)
		return -ENOMEM;
	rewind(f);
	if (fread(d, 1, (size_t)st->st_size, f) != (size_t)st->st_size)
		err = -EIO;
	else
		err = parse_jitdump(t, d, (size_t)st->st_size);
	free(d);
	return err;
}

/*
 * The "START SIZE name" lines, from whoever wrote the file: PERFMAP_MAX bytes at most, and a
 * line longer than PERFMAP_LINE_MAX is skipped whole.
 */
static int read_lines(struct symtab *t, FILE *f)
{
	char *line = malloc(PERFMAP_LINE_MAX + 2);
	uint32_t lines = 0;
	size_t total = 0;
	bool skip = false;
	int err = 0;

	if (!line)
		return -ENOMEM;
	while (!err && total < PERFMAP_MAX && fgets(line, PERFMAP_LINE_MAX + 2, f)) {
		size_t len = strlen(line);
		bool whole = len && line[len - 1] == '\n';

		total += len;
		if (!skip && (whole || len <= PERFMAP_LINE_MAX))
			err = parse_line(t, line, ++lines);
		skip = !whole; /* the rest of an overlong line, or of one cut by EOF */
	}
	if (!err && ferror(f))
		err = -EIO;
	free(line);
	return err;
}

static int read_map(struct perfmap *m)
{
	struct symtab t;
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
	if (m->st.st_size > PERFMAP_MAX) {
		err = -EFBIG;
		goto out;
	}
	{
		uint8_t magic[4];

		if (fread(magic, 1, 4, f) == 4 && rd32(magic) == JITDUMP_MAGIC)
			err = read_jitdump(&t, f, &m->st);
		else
			rewind(f);
	}
	/* A jitdump was read to its end: no lines follow. */
	if (!err)
		err = read_lines(&t, f);
	if (!err)
		err = symtab__finish(&t);
out:
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
