// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "util/buf.h"
#include "util/fdio.h"
#include "format.h"

struct eprof_writer {
	int fd;
	uint64_t bytes;
	/* watermarks: entries below these were written already */
	size_t strings, objects, locations, stacks, mappings;
	uint64_t samples_written;
	size_t samples_in_mem_written; /* of p->samples.v[] */
	size_t events_in_mem_written;  /* of p->events.v[] */
	/* Processes and threads as last written: a chunk carries only what changed. */
	struct process *wprocs;
	size_t nwprocs, capwprocs;
	struct thread *wthreads;
	size_t nwthreads, capwthreads;
	struct buf raw;
	uint8_t *zbuf;
	size_t zcap;
	ZSTD_CCtx *zc; /* kept across chunks: its tables are allocated once */
};

struct eprof_writer *eprof_writer__open(const char *path)
{
	struct eprof_writer *w;
	struct buf hdr = { 0 };
	struct stat st;
	int fd, err;

	fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return NULL;
	/* An existing file of someone else (a planted file in /tmp) is never overwritten. */
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
		close(fd);
		errno = EPERM;
		return NULL;
	}
	/*
	 * One recorder per file: ranks started with the same -o would write into one file and
	 * lose both recordings. The lock is held until the file is finished (closed).
	 */
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		err = errno == EWOULDBLOCK ? EBUSY : errno;
		close(fd);
		errno = err;
		return NULL;
	}
	if (ftruncate(fd, 0) || fchmod(fd, 0600)) {
		err = errno;
		close(fd);
		errno = err;
		return NULL;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		close(fd);
		errno = ENOMEM;
		return NULL;
	}
	w->fd = fd;
	/* Entry 0 of these tables exists in every profile: never written. */
	w->strings = w->objects = w->locations = w->stacks = 1;
	buf_put(&hdr, EPROF_FILE_MAGIC, 8);
	buf_u32le(&hdr, EPROF_FILE_VERSION);
	buf_u32le(&hdr, 0);
	buf_u64le(&hdr, (uint64_t)time(NULL));
	err = hdr.err ? hdr.err : fd_write_full(fd, hdr.data, hdr.len);
	buf_free(&hdr);
	if (err) {
		eprof_writer__abort(w);
		errno = -err;
		return NULL;
	}
	w->bytes = EPROF_HEADER_SIZE;
	return w;
}

static int write_chunk(struct eprof_writer *w, enum chunk_type type)
{
	size_t zlen;
	struct buf hdr = { 0 };
	uint32_t crc;
	int err;

	if (w->raw.err)
		return w->raw.err;
	if (w->raw.len > EPROF_CHUNK_MAX)
		return -E2BIG;
	zlen = ZSTD_compressBound(w->raw.len);
	if (zlen > w->zcap) {
		uint8_t *nz = realloc(w->zbuf, zlen);

		if (!nz)
			return -ENOMEM;
		w->zbuf = nz;
		w->zcap = zlen;
	}
	if (!w->zc && !(w->zc = ZSTD_createCCtx()))
		return -ENOMEM;
	/*
	 * DATA chunks come every second while the target runs: zstd's level 1 compressed an
	 * off-CPU record's payload at ~450 MB/s where zlib's fastest level did ~100 MB/s, into
	 * 12% fewer bytes (tools/bench/codec.c). The symbols, written once at the end, get a
	 * denser level.
	 */
	zlen = ZSTD_compressCCtx(w->zc, w->zbuf, w->zcap, w->raw.data, w->raw.len,
				 type == CHUNK_DATA ? 1 : 6);
	if (ZSTD_isError(zlen))
		return -EIO;
	crc = crc32(0, w->zbuf, zlen);
	buf_u32le(&hdr, EPROF_CHUNK_MAGIC);
	buf_u32le(&hdr, type);
	buf_u32le(&hdr, w->raw.len);
	buf_u32le(&hdr, zlen);
	buf_u32le(&hdr, crc);
	buf_u32le(&hdr, CODEC_ZSTD);
	/* Header and payload in one write: a cut-off file ends in a short chunk, not a torn one. */
	buf_put(&hdr, w->zbuf, zlen);
	err = hdr.err ? hdr.err : fd_write_full(w->fd, hdr.data, hdr.len);
	if (!err)
		w->bytes += hdr.len;
	buf_free(&hdr);
	buf_reset(&w->raw);
	return err;
}

static void put_section(struct buf *b, enum section_tag tag, size_t count)
{
	buf_u8(b, tag);
	buf_varint(b, count);
}

static void encode_tables(struct eprof_writer *w, const struct profile *p)
{
	struct buf *b = &w->raw;
	uint32_t nstr = strtab__count(p->strs);

	put_section(b, SEC_STRINGS, nstr - w->strings);
	for (size_t i = w->strings; i < nstr; i++)
		buf_str(b, strtab__get(p->strs, i));
	w->strings = nstr;

	put_section(b, SEC_OBJECTS, p->objects.n - w->objects);
	for (size_t i = w->objects; i < p->objects.n; i++) {
		const struct object *o = &p->objects.v[i];

		buf_varint(b, o->path);
		buf_varint(b, o->build_id);
		buf_varint(b, o->pid);
		buf_u8(b, o->kind);
	}
	w->objects = p->objects.n;

	put_section(b, SEC_LOCATIONS, p->locations.n - w->locations);
	for (size_t i = w->locations; i < p->locations.n; i++) {
		buf_varint(b, p->locations.v[i].object);
		buf_varint(b, p->locations.v[i].addr);
	}
	w->locations = p->locations.n;

	/* w->stacks is an id; the recorder may have dropped ids below p->stacks_base. */
	put_section(b, SEC_STACKS, profile__stacks_end(p) - w->stacks);
	for (size_t i = w->stacks; i < profile__stacks_end(p); i++) {
		const struct stack_node *sn = &p->stacks.v[i - p->stacks_base];

		buf_varint(b, sn->parent);
		buf_varint(b, sn->loc);
	}
	w->stacks = profile__stacks_end(p);
}

static bool proc_same(const struct process *a, const struct process *b)
{
	return a->pid == b->pid && a->ppid == b->ppid && a->comm == b->comm &&
	       a->cmdline == b->cmdline && a->start_ts == b->start_ts && a->exit_ts == b->exit_ts &&
	       a->exit_code == b->exit_code;
}

static bool thread_same(const struct thread *a, const struct thread *b)
{
	return a->pid == b->pid && a->tid == b->tid && a->comm == b->comm;
}

/* Keeps a copy of n elements of src in dst (capacity *cap); NULL n = 0 when out of memory. */
static void *keep_copy(void *dst, size_t *cap, const void *src, size_t n, size_t elem)
{
	if (n > *cap) {
		size_t ncap = n + n / 2 + 16;
		void *nd = realloc(dst, ncap * elem);

		if (!nd)
			return dst; /* the next chunk writes everything again: still correct */
		dst = nd;
		*cap = ncap;
	}
	if (n)
		memcpy(dst, src, n * elem);
	return dst;
}

static void encode_procs(struct eprof_writer *w, const struct profile *p)
{
	struct buf *b = &w->raw;
	size_t n = 0;

	/*
	 * Processes and threads change (exit, rename): a chunk carries the entries that
	 * changed since the last one, in full; readers let later records override. Only
	 * changes: with thousands of short-lived processes, rewriting all of them every
	 * second would make the recorder's cost grow with the length of the record.
	 */
	for (size_t i = 0; i < p->procs.n; i++)
		n += i >= w->nwprocs || !proc_same(&p->procs.v[i], &w->wprocs[i]);
	put_section(b, SEC_PROCS, n);
	for (size_t i = 0; i < p->procs.n; i++) {
		const struct process *pr = &p->procs.v[i];

		if (i < w->nwprocs && proc_same(pr, &w->wprocs[i]))
			continue;
		buf_varint(b, pr->pid);
		buf_varint(b, pr->ppid);
		buf_varint(b, pr->comm);
		buf_varint(b, pr->cmdline);
		buf_varint(b, pr->start_ts);
		buf_varint(b, pr->exit_ts);
		buf_svarint(b, pr->exit_code);
	}
	w->wprocs = keep_copy(w->wprocs, &w->capwprocs, p->procs.v, p->procs.n, sizeof(*w->wprocs));
	w->nwprocs = w->capwprocs >= p->procs.n ? p->procs.n : 0;

	n = 0;
	for (size_t i = 0; i < p->threads.n; i++)
		n += i >= w->nwthreads || !thread_same(&p->threads.v[i], &w->wthreads[i]);
	put_section(b, SEC_THREADS, n);
	for (size_t i = 0; i < p->threads.n; i++) {
		if (i < w->nwthreads && thread_same(&p->threads.v[i], &w->wthreads[i]))
			continue;
		buf_varint(b, p->threads.v[i].pid);
		buf_varint(b, p->threads.v[i].tid);
		buf_varint(b, p->threads.v[i].comm);
	}
	w->wthreads = keep_copy(w->wthreads, &w->capwthreads, p->threads.v, p->threads.n,
				sizeof(*w->wthreads));
	w->nwthreads = w->capwthreads >= p->threads.n ? p->threads.n : 0;

	put_section(b, SEC_MAPPINGS, p->mappings.n - w->mappings);
	for (size_t i = w->mappings; i < p->mappings.n; i++) {
		const struct mapping *m = &p->mappings.v[i];

		buf_varint(b, m->pid);
		buf_varint(b, m->start);
		buf_varint(b, m->end - m->start);
		buf_varint(b, m->pgoff);
		buf_varint(b, m->object);
		buf_varint(b, m->ts);
	}
	w->mappings = p->mappings.n;
}

static void encode_samples(struct eprof_writer *w, const struct profile *p)
{
	struct buf *b = &w->raw;
	uint64_t prev = 0;

	put_section(b, SEC_SAMPLES, p->samples.n - w->samples_in_mem_written);
	for (size_t i = w->samples_in_mem_written; i < p->samples.n; i++) {
		const struct sample *s = &p->samples.v[i];

		buf_svarint(b, (int64_t)(s->ts - prev));
		prev = s->ts;
		buf_varint(b, s->pid);
		buf_varint(b, s->tid);
		buf_varint(b, s->cpu);
		buf_varint(b, s->stack);
		buf_varint(b, s->weight);
	}
	w->samples_written += p->samples.n - w->samples_in_mem_written;
	w->samples_in_mem_written = p->samples.n;
}

static void encode_events(struct eprof_writer *w, const struct profile *p)
{
	struct buf *b = &w->raw;
	uint64_t prev = 0;

	if (p->events.n == w->events_in_mem_written)
		return;
	put_section(b, SEC_EVENTS, p->events.n - w->events_in_mem_written);
	for (size_t i = w->events_in_mem_written; i < p->events.n; i++) {
		const struct event *e = &p->events.v[i];

		buf_svarint(b, (int64_t)(e->ts - prev));
		prev = e->ts;
		buf_varint(b, e->dur);
		buf_varint(b, e->pid);
		buf_varint(b, e->tid);
		buf_varint(b, e->stack);
		buf_varint(b, e->stack2);
		buf_varint(b, e->name);
		buf_varint(b, e->kind);
		buf_varint(b, e->flags);
		buf_varint(b, e->a);
		buf_varint(b, e->b);
		buf_varint(b, e->c);
	}
	w->events_in_mem_written = p->events.n;
}

static void encode_meta_stats(struct eprof_writer *w, const struct profile *p)
{
	struct buf *b = &w->raw;

	put_section(b, SEC_META, p->meta.n);
	for (size_t i = 0; i < p->meta.n; i++) {
		buf_varint(b, p->meta.v[i].key);
		buf_varint(b, p->meta.v[i].value);
	}
	put_section(b, SEC_STATS, STAT_MAX);
	for (int i = 0; i < STAT_MAX; i++)
		buf_varint(b, p->stats[i]);
}

int eprof_writer__flush(struct eprof_writer *w, struct profile *p)
{
	/* Strings come first in a chunk: the reader checks every id against what it has. */
	encode_tables(w, p);
	encode_samples(w, p);
	encode_events(w, p);
	encode_procs(w, p);
	encode_meta_stats(w, p);
	return write_chunk(w, CHUNK_DATA);
}

void eprof_writer__forget_samples(struct eprof_writer *w, struct profile *p)
{
	p->samples.n = 0;
	w->samples_in_mem_written = 0;
}

void eprof_writer__forget_events(struct eprof_writer *w, struct profile *p)
{
	p->events.n = 0;
	w->events_in_mem_written = 0;
}

void eprof_writer__forget_mappings(struct eprof_writer *w, struct profile *p)
{
	p->mappings.n = 0;
	w->mappings = 0;
}

int eprof_writer__forget_exited(struct eprof_writer *w, struct profile *p, uint64_t before)
{
	int n = profile__drop_exited(p, before);

	if (n <= 0)
		return n;
	/* Just flushed: what stays is exactly what was written, at its new positions. */
	w->wprocs = keep_copy(w->wprocs, &w->capwprocs, p->procs.v, p->procs.n, sizeof(*w->wprocs));
	w->nwprocs = w->capwprocs >= p->procs.n ? p->procs.n : 0;
	w->wthreads = keep_copy(w->wthreads, &w->capwthreads, p->threads.v, p->threads.n,
				sizeof(*w->wthreads));
	w->nwthreads = w->capwthreads >= p->threads.n ? p->threads.n : 0;
	return n;
}

static void encode_frames(struct eprof_writer *w, const struct profile *p)
{
	struct buf *b = &w->raw;
	size_t n = 0;

	for (size_t i = 1; i < p->locations.n; i++)
		n += p->locations.v[i].frame_n > 0;
	put_section(b, SEC_FRAMES, n);
	for (size_t i = 1; i < p->locations.n; i++) {
		const struct location *l = &p->locations.v[i];

		if (!l->frame_n)
			continue;
		buf_varint(b, i);
		buf_varint(b, l->frame_n);
		for (uint32_t k = 0; k < l->frame_n; k++) {
			const struct frame *f = &p->frames.v[l->frame_first + k];

			buf_varint(b, f->name);
			buf_varint(b, f->module);
			buf_varint(b, f->file);
			buf_varint(b, f->line);
			buf_u8(b, f->kind | (f->inlined ? 0x80 : 0));
		}
	}
}

int eprof_writer__finish(struct eprof_writer *w, struct profile *p)
{
	int err = eprof_writer__flush(w, p);

	if (err)
		goto out;
	encode_tables(w, p);
	encode_frames(w, p);
	err = write_chunk(w, CHUNK_SYMBOLS);
	if (err)
		goto out;
	encode_tables(w, p);
	encode_meta_stats(w, p);
	err = write_chunk(w, CHUNK_END);
	if (!err && fsync(w->fd) && errno != EINVAL)
		err = -errno;
out:
	if (close(w->fd) && !err)
		err = -errno;
	w->fd = -1;
	buf_free(&w->raw);
	free(w->zbuf);
	ZSTD_freeCCtx(w->zc);
	free(w->wprocs);
	free(w->wthreads);
	free(w);
	return err;
}

void eprof_writer__abort(struct eprof_writer *w)
{
	if (!w)
		return;
	if (w->fd >= 0)
		close(w->fd);
	buf_free(&w->raw);
	free(w->zbuf);
	ZSTD_freeCCtx(w->zc);
	free(w->wprocs);
	free(w->wthreads);
	free(w);
}

uint64_t eprof_writer__bytes(const struct eprof_writer *w)
{
	return w->bytes;
}

uint64_t eprof_writer__samples_written(const struct eprof_writer *w)
{
	return w->samples_written;
}
