// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "analysis/stacks.h"
#include "util/buf.h"
#include "util/sink.h"
#include "util/utf8.h"
#include "util/vec.h"
#include "pprof.h"

#define ZCHUNK (64 * 1024)

/* profile.proto field numbers */
enum {
	PROFILE_SAMPLE_TYPE = 1,
	PROFILE_SAMPLE = 2,
	PROFILE_MAPPING = 3,
	PROFILE_LOCATION = 4,
	PROFILE_FUNCTION = 5,
	PROFILE_STRING_TABLE = 6,
	PROFILE_TIME_NANOS = 9,
	PROFILE_DURATION_NANOS = 10,
	PROFILE_PERIOD_TYPE = 11,
	PROFILE_PERIOD = 12,
	PROFILE_COMMENT = 13,
};

void pb_varint_field(struct buf *b, unsigned field, uint64_t v)
{
	buf_varint(b, (uint64_t)field << 3);
	buf_varint(b, v);
}

void pb_bytes_field(struct buf *b, unsigned field, const void *data, size_t len)
{
	buf_varint(b, (uint64_t)field << 3 | 2);
	buf_varint(b, len);
	buf_put(b, data, len);
}

struct group {
	uint32_t node, pid, tid;
	uint64_t count, ns;
};

struct pp {
	const struct profile *p;
	struct sink *out;
	z_stream z;
	bool zinit;
	unsigned char *zin, *zout;
	size_t zin_len;
	int err;
	struct strtab *strs;
	uint32_t *str_of; /* profile string id -> pprof string index + 1 */
	struct buf msg, sub, sub2;
	uint8_t *loc_used, *obj_used;
	struct hmap *func_idx;
	uint64_t nfuncs;
	/* per object: how its file offsets map to addresses in one process */
	uint64_t *obj_start, *obj_end, *obj_pgoff, *obj_lo, *obj_hi;
	uint32_t *obj_pid;
	struct group *groups;
	size_t ngroups;
};

static void z_run(struct pp *c, int flush)
{
	int ret;

	c->z.next_in = c->zin;
	c->z.avail_in = (uInt)c->zin_len;
	do {
		c->z.next_out = c->zout;
		c->z.avail_out = ZCHUNK;
		ret = deflate(&c->z, flush);
		if (ret == Z_STREAM_ERROR) {
			c->err = -EIO;
			break;
		}
		sink_write(c->out, c->zout, ZCHUNK - c->z.avail_out);
	} while (c->z.avail_out == 0 || (flush == Z_FINISH && ret != Z_STREAM_END));
	c->zin_len = 0;
}

static void z_put(struct pp *c, const void *data, size_t len)
{
	const unsigned char *d = data;

	while (len) {
		size_t n = ZCHUNK - c->zin_len;

		if (n > len)
			n = len;
		memcpy(c->zin + c->zin_len, d, n);
		c->zin_len += n;
		d += n;
		len -= n;
		if (c->zin_len == ZCHUNK)
			z_run(c, Z_NO_FLUSH);
	}
}

/* A top-level field of Profile holding the message in b; b is reset. */
static void emit_msg(struct pp *c, unsigned field, struct buf *b)
{
	unsigned char hdr[24];
	struct buf h = {.data = hdr, .cap = sizeof(hdr)};

	if (b->err) {
		c->err = -ENOMEM;
		buf_reset(b);
		return;
	}
	/* a buf over a stack array: varints of a tag and a length always fit */
	buf_varint(&h, (uint64_t)field << 3 | 2);
	buf_varint(&h, b->len);
	z_put(c, h.data, h.len);
	z_put(c, b->data, b->len);
	buf_reset(b);
}

static void emit_varint(struct pp *c, unsigned field, uint64_t v)
{
	unsigned char tmp[24];
	struct buf h = {.data = tmp, .cap = sizeof(tmp)};

	pb_varint_field(&h, field, v);
	z_put(c, h.data, h.len);
}

static uint32_t lit(struct pp *c, const char *s)
{
	uint32_t id = strtab__intern(c->strs, s ? s : "");

	if (id == UINT32_MAX) {
		c->err = -ENOMEM;
		return 0;
	}
	return id;
}

static uint32_t sid(struct pp *c, uint32_t profile_str)
{
	if (!c->str_of[profile_str])
		c->str_of[profile_str] = lit(c, profile__str(c->p, profile_str)) + 1;
	return c->str_of[profile_str] - 1;
}

static void value_type(struct pp *c, unsigned field, const char *type, const char *unit)
{
	pb_varint_field(&c->msg, 1, lit(c, type));
	pb_varint_field(&c->msg, 2, lit(c, unit));
	emit_msg(c, field, &c->msg);
}

static int group_samples(struct pp *c, const struct sample_filter *f)
{
	const struct profile *p = c->p;
	struct hmap *idx = hmap__new(4096);
	size_t cap = 0;

	if (!idx)
		return -ENOMEM;
	for (size_t i = 0; i < p->samples.n; i++) {
		const struct sample *s = &p->samples.v[i];
		uint32_t node = s->stack < p->stacks.n ? s->stack : 0;
		uint64_t k;

		if (!sample_filter__match(f, s))
			continue;
		if (!hmap__get(idx, node, (uint64_t)s->pid << 32 | s->tid, &k)) {
			if (arr_grow(c->groups, cap, c->ngroups + 1))
				goto nomem;
			c->groups
[c->ngroups] =
			    (struct group){.node = node, .pid = s->pid, .tid = s->tid};
			k = c->ngroups++;
			if (hmap__put(idx, node, (uint64_t)s->pid << 32 | s->tid, k))
				goto nomem;
		}
		c->groups[k].count++;
		c->groups[k].ns += s->weight;
	}
	hmap__free(idx);
	return 0;
nomem:
	hmap__free(idx);
	return -ENOMEM;
}

static void write_samples(struct pp *c)
{
	const struct profile *p = c->p;
	uint32_t k_pid = lit(c, "pid"), k_tid = lit(c, "tid"), k_thread = lit(c, "thread");

	for (size_t g = 0; g < c->ngroups && !c->err; g++) {
		const struct group *gr = &c->groups[g];
		const struct thread *t =
		    profile__find_thread(p, gr->pid, gr->tid);
		uint32_t frames;

		/*
		 * Location ids, leaf first; unsymbolized locations are skipped as report does. A
		 * sample holds its whole stack, so a crafted chain of nodes would make the output
		 * grow with the square of the input: stacks stop at the frame cap of the
		 * flamegraph, far above what the recorder writes.
		 */
		frames = 0;
		for (uint32_t n = gr->node; n; n = p->stacks.v[n].parent) {
			uint32_t loc = p->stacks.v[n].loc, nf = p->locations.v[loc].frame_n;

			if (!nf)
				continue;
			if (frames + nf > STACK_MAX_FRAMES)
				break;
			frames += nf;
			c->loc_used[loc] = 1;
			buf_varint(&c->sub, loc);
		}
		if (c->sub.len)
			pb_bytes_field(&c->msg, 1, c->sub.data, c->sub.len);
		buf_reset(&c->sub);
		buf_varint(&c->sub, gr->count);
		buf_varint(&c->sub, gr->ns);
		pb_bytes_field(&c->msg, 2, c->sub.data, c->sub.len);
		buf_reset(&c->sub);
		pb_varint_field(&c->sub, 1, k_pid);
		pb_varint_field(&c->sub, 3, gr->pid);
		pb_bytes_field(&c->msg, 3, c->sub.data, c->sub.len);
		buf_reset(&c->sub);
		pb_varint_field(&c->sub, 1, k_tid);
		pb_varint_field(&c->sub, 3, gr->tid);
		pb_bytes_field(&c->msg, 3, c->sub.data, c->sub.len);
		buf_reset(&c->sub);
		if (t && t->comm) {
			pb_varint_field(&c->sub, 1, k_thread);
			pb_varint_field(&c->sub, 2, sid(c, t->comm));
			pb_bytes_field(&c->msg, 3, c->sub.data, c->sub.len);
			buf_reset(&c->sub);
		}
		emit_msg(c, PROFILE_SAMPLE, &c->msg);
	}
}

static bool absolute_addrs(uint8_t kind)
{
	return kind == OBJ_KERNEL || kind == OBJ_PERFMAP || kind == OBJ_ANON;
}

/* Where each binary sat in the first process that mapped it. */
static void object_layout(struct pp *c)
{
	const struct profile *p = c->p;

	for (size_t i = 0; i < p->mappings.n; i++) {
		const struct mapping *m = &p->mappings.v[i];
		uint32_t o = m->object;

		if (o >= p->objects.n || absolute_addrs(p->objects.v[o].kind))
			continue;
		if (!c->obj_pid[o])
			c->obj_pid[o] = m->pid ? m->pid : UINT32_MAX;
		if (c->obj_pid[o] != (m->pid ? m->pid : UINT32_MAX))
			continue;
		if (!c->obj_end[o] || m->start < c->obj_start[o]) {
			c->obj_start[o] = m->start;
			c->obj_pgoff[o] = m->pgoff;
		}
		if (m->end > c->obj_end[o])
			c->obj_end[o] = m->end;
	}
}

static uint64_t loc_address(const struct pp *c, const struct location *l)
{
	uint32_t o = l->object;

	if (absolute_addrs(c->p->objects.v[o].kind) || !c->obj_end[o] || l->addr < c->obj_pgoff[o])
		return l->addr;
	return c->obj_start[o] + (l->addr - c->obj_pgoff[o]);
}

static uint64_t function_id(struct pp *c, const struct frame *f)
{
	uint64_t id;

	if (hmap__get(c->func_idx, f->name, f->file, &id))
		return id;
	id = ++c->nfuncs;
	if (hmap__put(c->func_idx, f->name, f->file, id)) {
		c->err = -ENOMEM;
		return id;
	}
	pb_varint_field(&c->sub2, 1, id);
	pb_varint_field(&c->sub2, 2, sid(c, f->name));
	pb_varint_field(&c->sub2, 3, sid(c, f->name));
	pb_varint_field(&c->sub2, 4, sid(c, f->file));
	emit_msg(c, PROFILE_FUNCTION, &c->sub2);
	return id;
}

static void write_locations(struct pp *c)
{
	const struct profile *p = c->p;

	for (size_t i = 1; i < p->locations.n && !c->err; i++) {
		const struct location *l = &p->locations.v[i];
		const struct frame *fr;
		uint32_t nf, o = l->object;
		uint64_t addr;

		if (!c->loc_used[i])
			continue;
		fr = profile__loc_frames(p, (uint32_t)i, &nf);
		addr = loc_address(c, l);
		pb_varint_field(&c->msg, 1, i);
		if (o && p->objects.v[o].kind != OBJ_SPECIAL) {
			pb_varint_field(&c->msg, 2, o);
			c->obj_used[o] = 1;
			if (!c->obj_hi[o] || addr < c->obj_lo[o])
				c->obj_lo[o] = addr;
			if (addr + 1 > c->obj_hi[o])
				c->obj_hi[o] = addr + 1;
		}
		pb_varint_field(&c->msg, 3, addr);
		/* frames are innermost first, the order of Location.line */
		for (uint32_t k = 0; k < nf; k++) {
			pb_varint_field(&c->sub, 1, function_id(c, &fr[k]));
			pb_varint_field(&c->sub, 2, fr[k].line);
			pb_bytes_field(&c->msg, 4, c->sub.data, c->sub.len);
			buf_reset(&c->sub);
		}
		emit_msg(c, PROFILE_LOCATION, &c->msg);
	}
}

/*
 * pprof takes the first mapping for the main binary ("File:" in its header):
 * the executable most stacks start in, else any ELF object.
 */
static uint32_t main_object(const struct pp *c)
{
	const struct profile *p = c->p;
	uint64_t *roots = calloc(p->objects.n ? p->objects.n : 1, sizeof(*roots)), best = 0;
	uint32_t main = 0;

	if (!roots)
		return 0;
	for (size_t g = 0; g < c->ngroups; g++) {
		uint32_t root = 0;

		for (uint32_t n = c->groups[g].node; n; n = p->stacks.v[n].parent)
			if (p->locations.v[p->stacks.v[n].loc].frame_n)
				root = p->locations.v[p->stacks.v[n].loc].object;
		roots[root] += c->groups[g].count;
	}
	for (size_t o = 1; o < p->objects.n; o++) {
		const char *path = profile__str(p, p->objects.v[o].path);
		const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
		uint64_t score = roots[o] + 1;

		if (!c->obj_used[o] || p->objects.v[o].kind != OBJ_ELF)
			continue;
		if (strstr(base, ".so"))
			score = 1; /* a library only when nothing else is there */
		if (score > best) {
			best = score;
			main = (uint32_t)o;
		}
	}
	free(roots);
	return main;
}

static void write_mapping(struct pp *c, uint32_t o)
{
	const struct object *ob = &c->p->objects.v[o];
	uint64_t start, limit, off = 0;

	if (c->obj_end[o]) {
		start = c->obj_start[o];
		limit = c->obj_end[o];
		off = c->obj_pgoff[o];
		if (c->obj_hi[o] > limit) /* a location beyond what one process mapped */
			limit = c->obj_hi[o];
	} else {
		start = c->obj_lo[o];
		limit = c->obj_hi[o];
	}
	pb_varint_field(&c->msg, 1, o);
	pb_varint_field(&c->msg, 2, start);
	pb_varint_field(&c->msg, 3, limit);
	pb_varint_field(&c->msg, 4, off);
	pb_varint_field(&c->msg, 5, sid(c, ob->path));
	pb_varint_field(&c->msg, 6, sid(c, ob->build_id));
	for (unsigned f = 7; f <= 10; f++)
		pb_varint_field(&c->msg, f, 1); /* functions, files, lines, inline frames */
	emit_msg(c, PROFILE_MAPPING, &c->msg);
}

static void write_mappings(struct pp *c)
{
	uint32_t main = main_object(c);

	if (main)
		write_mapping(c, main);
	for (size_t o = 1; o < c->p->objects.n && !c->err; o++)
		if (c->obj_used[o] && o != main)
			write_mapping(c, (uint32_t)o);
}

static uint64_t wall_start_ns(const struct profile *p)
{
	const char *v = profile__meta(p, "start_time");
	struct tm tm = {0};
	char *end;
	unsigned long long secs;

	if (!v || !*v)
		return 0;
	errno = 0;
	secs = strtoull(v, &end, 10);
	if (!errno && !*end)
		return secs * 1000000000ull;
	end = strptime(v, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!end)
		return 0;
	return (uint64_t)timegm(&tm) * 1000000000ull;
}

static void comment(struct pp *c, const char *text)
{
	emit_varint(c, PROFILE_COMMENT, lit(c, text));
}

static const char *meta_or(const struct profile *p, const char *key, const char *dflt)
{
	const char *v = profile__meta(p, key);

	return v && *v ? v : dflt;
}

/* Three comment lines (pprof prints them above every report): what, where, counters. */
static void write_comments(struct pp *c)
{
	const struct profile *p = c->p;
	char buf[4096];
	size_t n;

	snprintf(buf, sizeof(buf), "eprof %s: %s", meta_or(p, "eprof_version", "?"),
		 meta_or(p, "command", "?"));
	comment(c, buf);
	snprintf(buf, sizeof(buf), "host %s, kernel %s %s, %s Hz per CPU, %s stacks, target %s",
		 meta_or(p, "hostname", "?"), meta_or(p, "kernel", "?"), meta_or(p, "arch", ""),
		 meta_or(p, "sample_rate", "?"), meta_or(p, "call_graph", "?"),
		 meta_or(p, "target", "?"));
	comment(c, buf);
	n = (size_t)snprintf(buf, sizeof(buf), "counters:");
	for (int i = 0; i < STAT_MAX && n < sizeof(buf); i++)
		if (p->stats[i])
			n += (size_t)snprintf(buf + n, sizeof(buf) - n, " %s=%" PRIu64,
					      profile_stat_names[i], p->stats[i]);
	if (n > sizeof("counters:") - 1 && n < sizeof(buf))
		comment(c, buf);
}

static void write_header(struct pp *c)
{
	const struct profile *p = c->p;
	uint64_t start = profile__meta_u64(p, "start_ns", 0),
		 end = profile__meta_u64(p, "end_ns", 0);
	unsigned rate = (unsigned)profile__meta_u64(p, "sample_rate", 0);

	value_type(c, PROFILE_SAMPLE_TYPE, "samples", "count");
	value_type(c, PROFILE_SAMPLE_TYPE, "cpu", "nanoseconds");
	value_type(c, PROFILE_PERIOD_TYPE, "cpu", "nanoseconds");
	if (rate)
		emit_varint(c, PROFILE_PERIOD, 1000000000ull / rate);
	if (wall_start_ns(p))
		emit_varint(c, PROFILE_TIME_NANOS, wall_start_ns(p));
	if (start && end > start)
		emit_varint(c, PROFILE_DURATION_NANOS, end - start);
	write_comments(c);
}

static void write_strings(struct pp *c)
{
	uint32_t n = strtab__count(c->strs);

	for (uint32_t i = 0; i < n && !c->err; i++) {
		const char *s = strtab__get(c->strs, i);
		/* profile.proto strings must be UTF-8: names from binaries may be anything. */
		size_t len;
		char *valid = utf8_sanitize(s, &len);

		if (!valid) {
			c->err = -ENOMEM;
			break;
		}
		pb_bytes_field(&c->msg, PROFILE_STRING_TABLE, valid, len);
		free(valid);
		if (c->msg.len > ZCHUNK) {
			if (c->msg.err)
				c->err = -ENOMEM;
			z_put(c, c->msg.data, c->msg.len);
			buf_reset(&c->msg);
		}
	}
	if (c->msg.err)
		c->err = -ENOMEM;
	z_put(c, c->msg.data, c->msg.len);
	buf_reset(&c->msg);
}

static int pp_init(struct pp *c, const struct profile *p, struct sink *out, int level)
{
	size_t no = p->objects.n ? p->objects.n : 1;

	c->p = p;
	c->out = out;
	c->zin = malloc(ZCHUNK);
	c->zout = malloc(ZCHUNK);
	c->strs = strtab__new();
	c->str_of = calloc(strtab__count(p->strs) + 1, sizeof(*c->str_of));
	c->loc_used = calloc(p->locations.n ? p->locations.n : 1, 1);
	c->obj_used = calloc(no, 1);
	c->obj_start = calloc(no, sizeof(uint64_t));
	c->obj_end = calloc(no, sizeof(uint64_t));
	c->obj_pgoff = calloc(no, sizeof(uint64_t));
	c->obj_lo = calloc(no, sizeof(uint64_t));
	c->obj_hi = calloc(no, sizeof(uint64_t));
	c->obj_pid = calloc(no, sizeof(uint32_t));
	c->func_idx = hmap__new(1024);
	if (!c->zin || !c->zout || !c->strs || !c->str_of || !c->loc_used || !c->obj_used ||
	    !c->obj_start || !c->obj_end || !c->obj_pgoff || !c->obj_lo || !c->obj_hi ||
	    !c->obj_pid || !c->func_idx)
		return -ENOMEM;
	/* gzip wrapper: windowBits 15 + 16 */
	if (deflateInit2(&c->z, level ? level : 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
	    Z_OK)
		return -ENOMEM;
	c->zinit = true;
	return 0;
}

static void pp_free(struct pp *c)
{
	if (c->zinit)
		deflateEnd(&c->z);
	free(c->zin);
	free(c->zout);
	strtab__free(c->strs);
	free(c->str_of);
	buf_free(&c->msg);
	buf_free(&c->sub);
	buf_free(&c->sub2);
	free(c->loc_used);
	free(c->obj_used);
	free(c->obj_start);
	free(c->obj_end);
	free(c->obj_pgoff);
	free(c->obj_lo);
	free(c->obj_hi);
	free(c->obj_pid);
	hmap__free(c->func_idx);
	free(c->groups);
}

int pprof_write(struct sink *out, const struct profile *p, const struct pprof_opts *o)
{
	struct pp c = {0};
	int err;

	err = pp_init(&c, p, out, o ? o->level : 0);
	if (!err)
		err = group_samples(&c, o ? &o->filter : NULL);
	if (err)
		goto out;
	object_layout(&c);
	write_header(&c);
	write_samples(&c);
	write_locations(&c);
	write_mappings(&c);
	write_strings(&c);
	if (!c.err)
		z_run(&c, Z_FINISH);
	err = c.err ? c.err : out->err;
out:
	pp_free(&c);
	return err;
}
