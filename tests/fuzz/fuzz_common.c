// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format/format.h"
#include "fuzz_common.h"
#include "model/profile.h"
#include "util/hmap.h"
#include "util/log.h"

static char dir[PATH_MAX];

static void remove_dir(void)
{
	char cmd[PATH_MAX + 16];

	if (!dir[0] ||
	    (strncmp(dir, "/dev/shm/eprof-fuzz-", 20) && strncmp(dir, "/tmp/eprof-fuzz-", 16)))
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd))
		return;
}

const char *fuzz_dir(void)
{
	if (dir[0])
		return dir;
	/* tmpfs: a file write per execution must not touch a disk. */
	strcpy(dir, "/dev/shm/eprof-fuzz-XXXXXX");
	if (!mkdtemp(dir)) {
		strcpy(dir, "/tmp/eprof-fuzz-XXXXXX");
		if (!mkdtemp(dir)) {
			perror("fuzz: mkdtemp");
			abort();
		}
	}
	atexit(remove_dir);
	return dir;
}

const char *fuzz_file(const char *name, const uint8_t *data, size_t size)
{
	static char path[PATH_MAX];
	size_t done = 0;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", fuzz_dir(), name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		perror("fuzz: open scratch file");
		abort();
	}
	while (done < size) {
		ssize_t n = write(fd, data + done, size - done);

		if (n <= 0) {
			perror("fuzz: write scratch file");
			abort();
		}
		done += (size_t)n;
	}
	close(fd);
	return path;
}

void fuzz_quiet(void)
{
	/* Warnings about bad input would come by the thousand; errors still print. */
	log_set_level(getenv("EPROF_FUZZ_VERBOSE") ? LOG_DEBUG : LOG_ERR);
}

void fuzz_fail(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "==FUZZ ORACLE== %s:%d: ", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}

uint64_t fuzz_u64(const uint8_t *p, size_t avail)
{
	uint64_t v = 0;

	for (size_t i = 0; i < 8 && i < avail; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

size_t fuzz_line_addrs(const uint8_t *d, size_t size, uint64_t *addr, size_t max)
{
	char buf[20];
	size_t n = 0, i = 0;

	if (max >= 2) {
		addr[n++] = 0;
		addr[n++] = UINT64_MAX;
	}
	while (i < size && n < max) {
		size_t k = 0;

		while (i + k < size && k < sizeof(buf) - 1 && d[i + k] != ' ' && d[i + k] != '\n') {
			buf[k] = (char)d[i + k];
			k++;
		}
		buf[k] = '\0';
		addr[n++] = strtoull(buf, NULL, 16);
		while (i < size && d[i] != '\n')
			i++;
		i++;
	}
	return n;
}

/* --- UTF-8 ------------------------------------------------------------------------------ */

/* Length of the valid UTF-8 sequence at s, or 0. */
static size_t utf8_seq(const unsigned char *s, size_t left)
{
	uint32_t cp;
	size_t n;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4, cp = s[0] & 0x07;
	else
		return 0;
	if (left < n)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

bool fuzz_utf8_valid(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s, *end = p + len;

	while (p < end) {
		size_t n = utf8_seq(p, end - p);

		if (!n)
			return false;
		p += n;
	}
	return true;
}

/* --- JSON ------------------------------------------------------------------------------- */

struct jp {
	const unsigned char *p, *end;
	int depth;
};

static void ws(struct jp *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
		j->p++;
}

static bool lit(struct jp *j, const char *w)
{
	size_t n = strlen(w);

	if ((size_t)(j->end - j->p) < n || memcmp(j->p, w, n))
		return false;
	j->p += n;
	return true;
}

static bool is_hex(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static bool jstring(struct jp *j)
{
	if (j->p >= j->end || *j->p != '"')
		return false;
	j->p++;
	while (j->p < j->end && *j->p != '"') {
		size_t n;

		if (*j->p < 0x20)
			return false;
		if (*j->p == '\\') {
			if (++j->p >= j->end)
				return false;
			if (*j->p == 'u') {
				if (j->end - j->p < 5 || !is_hex(j->p[1]) || !is_hex(j->p[2]) ||
				    !is_hex(j->p[3]) || !is_hex(j->p[4]))
					return false;
				j->p += 5;
				continue;
			}
			if (!strchr("\"\\/bfnrt", *j->p))
				return false;
			j->p++;
			continue;
		}
		n = utf8_seq(j->p, j->end - j->p);
		if (!n)
			return false;
		j->p += n;
	}
	if (j->p >= j->end)
		return false;
	j->p++;
	return true;
}

static bool digits(struct jp *j)
{
	const unsigned char *s = j->p;

	while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
		j->p++;
	return j->p > s;
}

static bool jnumber(struct jp *j)
{
	if (j->p < j->end && *j->p == '-')
		j->p++;
	if (j->p < j->end && *j->p == '0')
		j->p++;
	else if (!digits(j))
		return false;
	if (j->p < j->end && *j->p == '.') {
		j->p++;
		if (!digits(j))
			return false;
	}
	if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
		j->p++;
		if (j->p < j->end && (*j->p == '+' || *j->p == '-'))
			j->p++;
		if (!digits(j))
			return false;
	}
	return true;
}

static bool jvalue(struct jp *j);

static bool jcontainer(struct jp *j, char close, bool object)
{
	j->p++;
	if (++j->depth > 256)
		return false;
	ws(j);
	if (j->p < j->end && *j->p == close) {
		j->p++;
		j->depth--;
		return true;
	}
	for (;;) {
		ws(j);
		if (object) {
			if (!jstring(j))
				return false;
			ws(j);
			if (j->p >= j->end || *j->p++ != ':')
				return false;
			ws(j);
		}
		if (!jvalue(j))
			return false;
		ws(j);
		if (j->p >= j->end)
			return false;
		if (*j->p == ',') {
			j->p++;
			continue;
		}
		if (*j->p++ != close)
			return false;
		j->depth--;
		return true;
	}
}

static bool jvalue(struct jp *j)
{
	if (j->p >= j->end)
		return false;
	switch (*j->p) {
	case '{': return jcontainer(j, '}', true);
	case '[': return jcontainer(j, ']', false);
	case '"': return jstring(j);
	case 't': return lit(j, "true");
	case 'f': return lit(j, "false");
	case 'n': return lit(j, "null");
	default: return jnumber(j);
	}
}

bool fuzz_json_valid(const char *s, size_t len)
{
	struct jp j = { (const unsigned char *)s, (const unsigned char *)s + len, 0 };

	ws(&j);
	if (!jvalue(&j))
		return false;
	ws(&j);
	return j.p == j.end;
}

/* --- the profile model ------------------------------------------------------------------- */


void fuzz_check_profile(const struct profile *p)
{
	size_t nstr = strtab__count(p->strs);

	FUZZ_CHECK(p->objects.n >= 1 && p->locations.n >= 1 && p->stacks.n >= 1,
		   "entry 0 missing");
	for (size_t i = 0; i < p->objects.n; i++) {
		const struct object *o = &p->objects.v[i];

		FUZZ_CHECK(o->path < nstr && o->build_id < nstr && o->kind < OBJ_KIND_MAX,
			   "object %zu out of range", i);
	}
	for (size_t i = 1; i < p->locations.n; i++) {
		const struct location *l = &p->locations.v[i];

		FUZZ_CHECK(l->object >= 1 && l->object < p->objects.n, "location %zu: object", i);
		FUZZ_CHECK(!l->frame_n || (l->frame_first < p->frames.n &&
					   l->frame_n <= p->frames.n - l->frame_first),
			   "location %zu: frames %u+%u of %zu", i, l->frame_first, l->frame_n,
			   p->frames.n);
	}
	for (size_t i = 0; i < p->frames.n; i++) {
		const struct frame *f = &p->frames.v[i];

		FUZZ_CHECK(f->name < nstr && f->module < nstr && f->file < nstr &&
			   f->kind <= FRAME_PYTHON,
			   "frame %zu out of range", i);
	}
	for (size_t i = 1; i < p->stacks.n; i++) {
		const struct stack_node *s = &p->stacks.v[i];

		FUZZ_CHECK(s->parent < i && s->loc >= 1 && s->loc < p->locations.n,
			   "stack node %zu: parent %u loc %u", i, s->parent, s->loc);
		FUZZ_CHECK(s->depth == (s->parent ? p->stacks.v[s->parent].depth + 1 : 1),
			   "stack node %zu: depth", i);
	}
	for (size_t i = 0; i < p->samples.n; i++)
		FUZZ_CHECK(p->samples.v[i].stack < p->stacks.n, "sample %zu: stack", i);
	for (size_t i = 0; i < p->threads.n; i++)
		FUZZ_CHECK(p->threads.v[i].comm < nstr, "thread %zu: comm", i);
	for (size_t i = 0; i < p->procs.n; i++)
		FUZZ_CHECK(p->procs.v[i].comm < nstr && p->procs.v[i].cmdline < nstr,
			   "process %zu: strings", i);
	for (size_t i = 0; i < p->mappings.n; i++)
		FUZZ_CHECK(p->mappings.v[i].object < p->objects.n, "mapping %zu: object", i);
	for (size_t i = 0; i < p->meta.n; i++)
		FUZZ_CHECK(p->meta.v[i].key < nstr && p->meta.v[i].value < nstr, "meta %zu", i);
}

struct profile *fuzz_read_profile(const uint8_t *data, size_t size)
{
	struct read_info info;
	struct profile *p = NULL;
	int err = eprof_read_mem(data, size, &p, &info);

	if (err) {
		FUZZ_CHECK(!p, "error %d with a profile", err);
		FUZZ_CHECK(info.error[0] && memchr(info.error, 0, sizeof(info.error)) &&
				   !strchr(info.error, '\n'),
			   "error %d without a one-line message", err);
		return NULL;
	}
	FUZZ_CHECK(p, "no error and no profile");
	fuzz_check_profile(p);
	return p;
}

uint64_t fuzz_unpacked_bytes(const uint8_t *data, size_t size)
{
	uint64_t total = 0;
	size_t off = EPROF_HEADER_SIZE;

	/* chunk header: magic, type, raw_len, zlen, crc, codec (u32 LE each), then zlen bytes */
	while (off + EPROF_CHUNK_HDR_SIZE <= size) {
		uint64_t zlen = (uint32_t)fuzz_u64(data + off + 12, 4);

		total += (uint32_t)fuzz_u64(data + off + 8, 4);
		/* in 64 bits: a zlen of 2^32 - 24 summed in 32 bits never moved off (a timeout) */
		if (zlen > size - off - EPROF_CHUNK_HDR_SIZE)
			break;
		off += (size_t)EPROF_CHUNK_HDR_SIZE + (size_t)zlen;
	}
	return total;
}

size_t fuzz_profile_records(const struct profile *p)
{
	uint32_t *depth = calloc(p->stacks.n ? p->stacks.n : 1, sizeof(*depth));
	size_t n = p->samples.n + p->events.n + p->stacks.n + p->locations.n, walk = 0;

	if (!depth)
		return SIZE_MAX;
	/* parents precede their children (fuzz_check_profile holds the reader to it) */
	for (size_t i = 1; i < p->stacks.n; i++)
		depth[i] = depth[p->stacks.v[i].parent] + 1;
	/*
	 * Stacks are walked from each sampled node to the root: nodes whose locations have no
	 * frames (an unsymbolized file; the CLI names every location first) do not end a walk.
	 */
	for (size_t i = 0; i < p->samples.n; i++)
		walk += p->samples.v[i].stack < p->stacks.n ? depth[p->samples.v[i].stack] : 0;
	free(depth);
	return n + walk / 16;
}

uint64_t fuzz_stack_frames(const struct profile *p, uint64_t cap)
{
	uint64_t *depth = calloc(p->stacks.n ? p->stacks.n : 1, sizeof(*depth)), sum = 0, v;
	struct hmap *seen = hmap__new(1024); /* (thread name, stack): what the writers group by */

	if (!depth || !seen) {
		free(depth);
		hmap__free(seen);
		return UINT64_MAX;
	}
	/* parents precede their children (fuzz_check_profile holds the reader to it) */
	for (size_t i = 1; i < p->stacks.n; i++) {
		const struct stack_node *n = &p->stacks.v[i];

		depth[i] = depth[n->parent] + p->locations.v[n->loc].frame_n;
	}
	for (size_t i = 0; i < p->samples.n && sum < UINT64_MAX / 2; i++) {
		const struct sample *s = &p->samples.v[i];
		const struct thread *t;

		if (s->stack >= p->stacks.n)
			continue;
		t = profile__thread((struct profile *)p, s->pid, s->tid, false);
		if (hmap__get(seen, t ? t->comm : 0, s->stack, &v))
			continue;
		if (hmap__put(seen, t ? t->comm : 0, s->stack, 1)) {
			sum = UINT64_MAX;
			break;
		}
		sum += cap && depth[s->stack] > cap ? cap : depth[s->stack];
	}
	free(depth);
	hmap__free(seen);
	return sum;
}
