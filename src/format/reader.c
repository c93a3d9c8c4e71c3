// SPDX-License-Identifier: MIT
/*
 * The reader treats a file as untrusted input: every count is bounded by the
 * bytes left, every id is checked against the tables read so far.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "util/buf.h"
#include "util/fdio.h"
#include "format.h"

#define BAD(cond)                                                                                  \
	do {                                                                                       \
		if (cond)                                                                          \
			return -EINVAL;                                                            \
	} while (0)

static size_t nstr(const struct profile *p)
{
	return strtab__count(p->strs);
}

/* Each record is at least min_bytes long: a count that cannot fit is corruption. */
static int check_count(const struct rbuf *r, uint64_t count, size_t min_bytes)
{
	return count > rbuf_left(r) / min_bytes ? -EINVAL : 0;
}

static int read_strings(struct rbuf *r, struct profile *p, uint64_t count)
{
	for (uint64_t i = 0; i < count; i++) {
		uint32_t before = nstr(p), id;
		size_t len;
		const char *s = rbuf_str(r, &len);

		BAD(!r->ok);
		id = strtab__intern_len(p->strs, s, len);
		if (id == UINT32_MAX)
			return -ENOMEM;
		/* Ids are positional: a duplicate string would shift every later id. */
		BAD(id != before);
	}
	return 0;
}

static int read_objects(struct rbuf *r, struct profile *p, uint64_t count)
{
	for (uint64_t i = 0; i < count; i++) {
		struct object *o = vec_push(p->objects);

		if (!o)
			return -ENOMEM;
		o->path = rbuf_varint(r);
		o->build_id = rbuf_varint(r);
		o->pid = rbuf_varint(r);
		o->kind = rbuf_u8(r);
		BAD(!r->ok || o->path >= nstr(p) || o->build_id >= nstr(p) || o->kind >= OBJ_KIND_MAX);
	}
	return 0;
}

static int read_locations(struct rbuf *r, struct profile *p, uint64_t count)
{
	for (uint64_t i = 0; i < count; i++) {
		struct location *l = vec_push(p->locations);

		if (!l)
			return -ENOMEM;
		l->object = rbuf_varint(r);
		l->addr = rbuf_varint(r);
		BAD(!r->ok || l->object == 0 || l->object >= p->objects.n);
	}
	return 0;
}

static int read_stacks(struct rbuf *r, struct profile *p, uint64_t count)
{
	for (uint64_t i = 0; i < count; i++) {
		struct stack_node *s = vec_push(p->stacks);

		if (!s)
			return -ENOMEM;
		s->parent = rbuf_varint(r);
		s->loc = rbuf_varint(r);
		/* A parent always precedes its child, so the trie has no cycles. */
		BAD(!r->ok || s->parent >= p->stacks.n - 1 || s->loc == 0 || s->loc >= p->locations.n);
		s->depth = s->parent ? p->stacks.v[s->parent].depth + 1 : 1;
		BAD(s->depth > PROFILE_MAX_STACK_DEPTH);
	}
	return 0;
}

static int read_procs(struct rbuf *r, struct profile *p, uint64_t count)
{
	for (uint64_t i = 0; i < count; i++) {
		struct process tmp, *pr;

		tmp.pid = rbuf_varint(r);
		tmp.ppid = rbuf_varint(r);
		tmp.comm = rbuf_varint(r);
		tmp.cmdline = rbuf_varint(r);
		tmp.start_ts = rbuf_varint(r);
		tmp.exit_ts = rbuf_varint(r);
		tmp.exit_code = rbuf_svarint(r);
		BAD(!r->ok || tmp.comm >= nstr(p) || tmp.cmdline >= nstr(p));
		pr = profile__proc(p, tmp.pid, true);
		if (!pr)
			return -ENOMEM;
		*pr = tmp;
	}
	return 0;
}

static int read_threads(struct rbuf *r, struct profile *p, uint64_t count)
{
	for (uint64_t i = 0; i < count; i++) {
		uint32_t pid = rbuf_varint(r), tid = rbuf_varint(r), comm = rbuf_varint(r);
		struct thread *t;

		BAD(!r->ok || comm >= nstr(p));
		t = profile__thread(p, pid, tid, true);
		if (!t)
			return -ENOMEM;
		t->pid = pid;
		t->comm = comm;
	}
	return 0;
}

static int read_mappings(struct rbuf *r, struct profile *p, uint64_t count)
{
	for (uint64_t i = 0; i < count; i++) {
		struct mapping *m = vec_push(p->mappings);

		if (!m)
			return -ENOMEM;
		m->pid = rbuf_varint(r);
		m->start = rbuf_varint(r);
		m->end = m->start + rbuf_varint(r);
		m->pgoff = rbuf_varint(r);
		m->object = rbuf_varint(r);
		m->ts = rbuf_varint(r);
		BAD(!r->ok || m->object >= p->objects.n);
	}
	return 0;
}

static int read_samples(struct rbuf *r, struct profile *p, uint64_t count)
{
	uint64_t prev = 0;

	if (vec_reserve(p->samples, p->samples.n + count))
		return -ENOMEM;
	for (uint64_t i = 0; i < count; i++) {
		struct sample *s = &p->samples.v[p->samples.n];

		s->ts = prev + rbuf_svarint(r);
		prev = s->ts;
		s->pid = rbuf_varint(r);
		s->tid = rbuf_varint(r);
		s->cpu = rbuf_varint(r);
		s->stack = rbuf_varint(r);
		s->weight = rbuf_varint(r);
		BAD(!r->ok || s->stack >= p->stacks.n);
		p->samples.n++;
	}
	return 0;
}

static int read_events(struct rbuf *r, struct profile *p, uint64_t count)
{
	uint64_t prev = 0;

	if (vec_reserve(p->events, p->events.n + count))
		return -ENOMEM;
	for (uint64_t i = 0; i < count; i++) {
		struct event *e = &p->events.v[p->events.n];
		uint64_t kind, flags;

		e->ts = prev + rbuf_svarint(r);
		prev = e->ts;
		e->dur = rbuf_varint(r);
		e->pid = rbuf_varint(r);
		e->tid = rbuf_varint(r);
		e->stack = rbuf_varint(r);
		e->stack2 = rbuf_varint(r);
		e->name = rbuf_varint(r);
		kind = rbuf_varint(r);
		flags = rbuf_varint(r);
		e->a = rbuf_varint(r);
		e->b = rbuf_varint(r);
		e->c = rbuf_varint(r);
		BAD(!r->ok || e->stack >= p->stacks.n || e->stack2 >= p->stacks.n ||
		    e->name >= nstr(p) || kind == 0 || kind >= EVK_KIND_MAX || flags > 0xffff);
		e->kind = kind;
		e->flags = flags;
		p->events.n++;
	}
	return 0;
}

static int read_meta(struct rbuf *r, struct profile *p, uint64_t count)
{
	for (uint64_t i = 0; i < count; i++) {
		uint32_t k = rbuf_varint(r), v = rbuf_varint(r);

		BAD(!r->ok || k >= nstr(p) || v >= nstr(p));
		if (profile__set_meta(p, profile__str(p, k), profile__str(p, v)))
			return -ENOMEM;
	}
	return 0;
}

static int read_stats(struct rbuf *r, struct profile *p, uint64_t count)
{
	for (uint64_t i = 0; i < count; i++) {
		uint64_t v = rbuf_varint(r);

		BAD(!r->ok);
		/* Counters a newer writer added are skipped, not an error. */
		if (i < STAT_MAX)
			p->stats[i] = v;
	}
	return 0;
}

static int read_frames(struct rbuf *r, struct profile *p, uint64_t count)
{
	for (uint64_t i = 0; i < count; i++) {
		uint64_t loc = rbuf_varint(r), n = rbuf_varint(r);

		BAD(!r->ok || loc == 0 || loc >= p->locations.n || n == 0 || n > 256);
		p->locations.v[loc].frame_first = p->frames.n;
		p->locations.v[loc].frame_n = n;
		for (uint64_t k = 0; k < n; k++) {
			struct frame *f = vec_push(p->frames);
			uint8_t kind;

			if (!f)
				return -ENOMEM;
			f->name = rbuf_varint(r);
			f->module = rbuf_varint(r);
			f->file = rbuf_varint(r);
			f->line = rbuf_varint(r);
			kind = rbuf_u8(r);
			f->kind = kind & 0x7f;
			f->inlined = !!(kind & 0x80);
			BAD(!r->ok || f->name >= nstr(p) || f->module >= nstr(p) ||
			    f->file >= nstr(p) || f->kind > FRAME_PYTHON);
		}
	}
	return 0;
}

typedef int (*section_fn)(struct rbuf *, struct profile *, uint64_t);

static const struct {
	section_fn fn;
	size_t min_bytes; /* smallest encoding of one record */
} sections[] = {
	[SEC_STRINGS] = { read_strings, 1 },   [SEC_OBJECTS] = { read_objects, 4 },
	[SEC_LOCATIONS] = { read_locations, 2 }, [SEC_STACKS] = { read_stacks, 2 },
	[SEC_PROCS] = { read_procs, 7 },       [SEC_THREADS] = { read_threads, 3 },
	[SEC_MAPPINGS] = { read_mappings, 6 }, [SEC_SAMPLES] = { read_samples, 6 },
	[SEC_META] = { read_meta, 2 },	       [SEC_STATS] = { read_stats, 1 },
	[SEC_FRAMES] = { read_frames, 2 },     [SEC_EVENTS] = { read_events, 12 },
};

static int read_payload(const uint8_t *data, size_t len, struct profile *p)
{
	struct rbuf r;

	rbuf_init(&r, data, len);
	while (rbuf_left(&r)) {
		uint8_t tag = rbuf_u8(&r);
		uint64_t count = rbuf_varint(&r);
		int err;

		BAD(!r.ok || tag == 0 || tag >= sizeof(sections) / sizeof(sections[0]) ||
		    !sections[tag].fn);
		if (check_count(&r, count, sections[tag].min_bytes) && count)
			return -EINVAL;
		err = sections[tag].fn(&r, p, count);
		if (err)
			return err;
	}
	return r.ok ? 0 : -EINVAL;
}

static void set_error(struct read_info *info, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(info->error, sizeof(info->error), fmt, ap);
	va_end(ap);
}

/* Decompression state of one read: the output buffer and a zstd context, reused per chunk. */
struct chunk_buf {
	uint8_t *out;
	ZSTD_DCtx *dc;
};

/* Decompresses a chunk payload of the given codec into exactly raw_len bytes; 0 or -EBADMSG. */
static int inflate_chunk(struct chunk_buf *cb, uint32_t codec, const uint8_t *z, uint32_t zlen,
			 uint32_t raw_len)
{
	uint8_t *nz = realloc(cb->out, raw_len ? raw_len : 1);

	if (!nz)
		return -ENOMEM;
	cb->out = nz;
	if (codec == CODEC_ZLIB) {
		uLongf out_len = raw_len;

		if (uncompress(cb->out, &out_len, z, zlen) != Z_OK || out_len != raw_len)
			return -EBADMSG;
		return 0;
	}
	if (codec == CODEC_ZSTD) {
		size_t n;

		if (!cb->dc && !(cb->dc = ZSTD_createDCtx()))
			return -ENOMEM;
		n = ZSTD_decompressDCtx(cb->dc, cb->out, raw_len, z, zlen);
		if (ZSTD_isError(n) || n != raw_len)
			return -EBADMSG;
		return 0;
	}
	return -EBADMSG;
}

/* Returns 0, 1 when the chunk is cut off (end of usable data), or -errno. */
static int read_chunk(struct rbuf *r, struct profile *p, struct read_info *info,
		      struct chunk_buf *cb, uint32_t version)
{
	uint32_t magic, type, raw_len, zlen, crc, codec;
	int err;

	if (rbuf_left(r) < EPROF_CHUNK_HDR_SIZE)
		return 1; /* the writer was stopped inside a chunk header */
	magic = rbuf_u32le(r);
	type = rbuf_u32le(r);
	raw_len = rbuf_u32le(r);
	zlen = rbuf_u32le(r);
	crc = rbuf_u32le(r);
	codec = rbuf_u32le(r);
	if (magic != EPROF_CHUNK_MAGIC || type < CHUNK_DATA || type > CHUNK_END ||
	    raw_len > EPROF_CHUNK_MAX || (version < 2 && codec != CODEC_ZLIB))
		return -EBADMSG;
	if (zlen > rbuf_left(r))
		return 1; /* payload cut off */
	if (crc32(0, r->p, zlen) != crc)
		return -EBADMSG;
	err = inflate_chunk(cb, codec, r->p, zlen, raw_len);
	if (err)
		return err;
	r->p += zlen;
	err = read_payload(cb->out, raw_len, p);
	if (err)
		return err == -ENOMEM ? err : -EBADMSG;
	info->chunks++;
	if (type == CHUNK_SYMBOLS)
		info->has_symbols = true;
	if (type == CHUNK_END)
		info->complete = true;
	return 0;
}

/* Synthetic frames need no symbolizer: name them from their object even in a cut-off file. */
static int name_special_locations(struct profile *p)
{
	for (size_t i = 1; i < p->locations.n; i++) {
		struct location *l = &p->locations.v[i];
		struct frame *f;

		if (l->frame_n || p->objects.v[l->object].kind != OBJ_SPECIAL)
			continue;
		f = vec_push(p->frames);
		if (!f)
			return -ENOMEM;
		f->name = p->objects.v[l->object].path;
		f->module = profile__intern(p, "[eprof]");
		f->kind = FRAME_SPECIAL;
		l->frame_first = p->frames.n - 1;
		l->frame_n = 1;
	}
	return 0;
}

int eprof_read_mem(const void *data, size_t len, struct profile **out, struct read_info *info)
{
	struct profile *p = NULL;
	struct chunk_buf cb = { 0 };
	uint32_t version;
	struct rbuf r;
	int err = 0;

	memset(info, 0, sizeof(*info));
	*out = NULL;
	rbuf_init(&r, data, len);
	if (len < EPROF_HEADER_SIZE || memcmp(data, EPROF_FILE_MAGIC, 8)) {
		set_error(info, "not an eprof data file (bad magic)");
		return -EINVAL;
	}
	r.p += 8;
	version = rbuf_u32le(&r);
	if (version < EPROF_FILE_VERSION_MIN || version > EPROF_FILE_VERSION) {
		set_error(info, "unsupported eprof data file version %u (this eprof reads %u to %u)",
			  version, EPROF_FILE_VERSION_MIN, EPROF_FILE_VERSION);
		return -EPROTO;
	}
	r.p = (const uint8_t *)data + EPROF_HEADER_SIZE;
	p = profile__new();
	if (!p) {
		err = -ENOMEM;
		goto out;
	}
	while (rbuf_left(&r) && !info->complete) {
		const uint8_t *at = r.p;

		err = read_chunk(&r, p, info, &cb, version);
		if (err == 1) {
			info->bytes_lost = (const uint8_t *)data + len - at;
			err = 0;
			break;
		}
		if (err) {
			set_error(info, "corrupt chunk %u at byte %zu", info->chunks + 1,
				  (size_t)(at - (const uint8_t *)data));
			goto out;
		}
	}
	err = name_special_locations(p);
	if (!err)
		err = profile__reindex(p);
out:
	free(cb.out);
	ZSTD_freeDCtx(cb.dc);
	if (err) {
		if (!info->error[0])
			set_error(info, "%s", strerror(-err));
		profile__free(p);
		return err;
	}
	*out = p;
	return 0;
}

/*
 * A copy of the file in memory: another user may truncate a file of theirs while it is read,
 * and a mapping would then fault (SIGBUS). Fewer bytes than st_size: it shrank while read.
 */
static void *read_copy(int fd, size_t size, size_t *got)
{
	uint8_t *buf = malloc(size);
	ssize_t n;

	if (!buf)
		return NULL;
	n = fd_pread_upto(fd, buf, size, 0);
	if (n < 0) {
		free(buf);
		return NULL;
	}
	*got = (size_t)n;
	return buf;
}

int eprof_read_file(const char *path, struct profile **out, struct read_info *info)
{
	struct stat st;
	void *map;
	size_t len;
	bool copy;
	int fd, err;

	memset(info, 0, sizeof(*info));
	/* O_NONBLOCK: a FIFO given as the input fails here instead of hanging. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		err = -errno;
		set_error(info, "cannot open: %s", strerror(errno));
		return err;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		set_error(info, "not a regular file");
		return -EINVAL;
	}
	if (st.st_size == 0) {
		close(fd);
		set_error(info, "empty file");
		return -EINVAL;
	}
	/* Mapped only when no one else can write to it. */
	copy = st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH));
	len = (size_t)st.st_size;
	map = copy ? read_copy(fd, len, &len)
		   : mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (!map || map == MAP_FAILED) {
		err = errno ? -errno : -EIO;
		set_error(info, "cannot read: %s", strerror(-err));
		return err;
	}
	if (copy && len < (size_t)st.st_size) {
		/* Not a recording cut off by its recorder: someone truncated it under us. */
		free(map);
		set_error(info, "the file shrank from %zu to %zu bytes while it was read",
			  (size_t)st.st_size, len);
		return -EIO;
	}
	err = eprof_read_mem(map, len, out, info); /* which clears info */
	info->owner = st.st_uid;
	info->foreign = st.st_uid != geteuid();
	if (copy)
		free(map);
	else
		munmap(map, len);
	return err;
}
