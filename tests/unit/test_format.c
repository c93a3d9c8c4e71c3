// SPDX-License-Identifier: MIT
#include "test_util.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <zlib.h>
#include <zstd.h>

#include "format/format.h"

static struct profile *make_profile(void)
{
	struct profile *p = profile__new();
	uint32_t a, b, c, k;
	int64_t kobj;
	struct process *pr;
	struct mapping m = { .pid = 42, .start = 0x400000, .end = 0x500000, .pgoff = 0x1000,
			     .object = 1, .ts = 5 };

	assert_non_null(p);
	a = test_loc(p, "/usr/bin/app", "main", NULL, 0x10);
	b = test_loc(p, "/usr/bin/app", "compute", "helper_inlined", 0x20);
	c = test_loc(p, "/lib/libm.so.6", "std::vector<int>::push_back", NULL, 0x30);
	kobj = profile__object(p, OBJ_KERNEL, "[kernel.kallsyms]", "", 0);
	k = profile__location(p, kobj, 0xffffffff81000000ULL);
	test_samples(p, 42, 42, "app", 5, (uint32_t[]){ a, b }, 2);
	test_samples(p, 42, 43, "worker", 3, (uint32_t[]){ a, c, k }, 3);
	pr = profile__proc(p, 42, true);
	pr->comm = profile__intern(p, "app");
	pr->cmdline = profile__intern(p, "app --fast");
	pr->exit_code = -9;
	pr->start_ts = 1;
	pr->exit_ts = 99;
	profile__add_mapping(p, &m);
	profile__set_meta(p, "command", "app --fast");
	profile__set_meta(p, "sample_rate", "999");
	p->stats[STAT_SAMPLES_LOST] = 7;
	return p;
}

static void assert_same(const struct profile *a, const struct profile *b, bool symbols)
{
	assert_int_equal(a->samples.n, b->samples.n);
	for (size_t i = 0; i < a->samples.n; i++)
		assert_memory_equal(&a->samples.v[i], &b->samples.v[i], sizeof(struct sample));
	assert_int_equal(a->stacks.n, b->stacks.n);
	for (size_t i = 1; i < a->stacks.n; i++) {
		assert_int_equal(a->stacks.v[i].parent, b->stacks.v[i].parent);
		assert_int_equal(a->stacks.v[i].loc, b->stacks.v[i].loc);
		assert_int_equal(a->stacks.v[i].depth, b->stacks.v[i].depth);
	}
	assert_int_equal(a->locations.n, b->locations.n);
	for (size_t i = 1; i < a->locations.n; i++) {
		uint32_t na, nb;
		const struct frame *fa = profile__loc_frames(a, i, &na);
		const struct frame *fb = profile__loc_frames(b, i, &nb);

		assert_int_equal(a->locations.v[i].addr, b->locations.v[i].addr);
		if (!symbols)
			continue;
		assert_int_equal(na, nb);
		for (uint32_t k = 0; k < na; k++) {
			assert_string_equal(profile__str(a, fa[k].name), profile__str(b, fb[k].name));
			assert_string_equal(profile__str(a, fa[k].file), profile__str(b, fb[k].file));
			assert_int_equal(fa[k].line, fb[k].line);
			assert_int_equal(fa[k].inlined, fb[k].inlined);
		}
	}
	assert_int_equal(a->procs.n, b->procs.n);
	assert_int_equal(a->threads.n, b->threads.n);
	assert_int_equal(a->mappings.n, b->mappings.n);
	assert_string_equal(profile__meta(b, "command"), "app --fast");
	assert_int_equal(b->stats[STAT_SAMPLES_LOST], 7);
	assert_int_equal(profile__proc((struct profile *)b, 42, false)->exit_code, -9);
}

static void test_round_trip(void **state)
{
	struct profile *p = make_profile(), *q = NULL;
	const char *path = test_path("rt.eprof");
	struct eprof_writer *w = eprof_writer__open(path);
	struct read_info info;
	struct stat st;

	assert_non_null(w);
	assert_int_equal(eprof_writer__finish(w, p), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(eprof_read_file(path, &q, &info), 0);
	assert_true(info.complete);
	assert_true(info.has_symbols);
	assert_int_equal(info.bytes_lost, 0);
	assert_same(p, q, true);
	profile__free(p);
	profile__free(q);
}

/*
 * Metadata keys stay unique however many there are: 1,000 keys, every third set again
 * twice, then read back.
 */
static void test_many_meta_keys(void **state)
{
	struct profile *p = profile__new(), *q = NULL;
	const char *path = test_path("meta.eprof");
	struct eprof_writer *w = eprof_writer__open(path);
	struct read_info info;
	char k[32], v[32];

	(void)state;
	assert_non_null(w);
	for (int i = 0; i < 40; i++) { /* 20 keys twice */
		snprintf(k, sizeof(k), "key%d", i % 20);
		assert_int_equal(profile__set_meta(p, k, i < 20 ? "early" : "again"), 0);
	}
	assert_int_equal(p->meta.n, 20);
	assert_string_equal(profile__meta(p, "key19"), "again");
	for (int round = 0; round < 3; round++)
		for (int i = 0; i < 1000; i++) {
			if (round && i % 3)
				continue;
			snprintf(k, sizeof(k), "key%d", i);
			snprintf(v, sizeof(v), "v%d.%d", i, round);
			assert_int_equal(profile__set_meta(p, k, v), 0);
		}
	assert_int_equal(p->meta.n, 1000);
	assert_int_equal(eprof_writer__finish(w, p), 0);
	assert_int_equal(eprof_read_file(path, &q, &info), 0);
	for (struct profile *x = p; x; x = x == p ? q : NULL) {
		assert_int_equal(x->meta.n, 1000);
		for (int i = 0; i < 1000; i++) {
			snprintf(k, sizeof(k), "key%d", i);
			snprintf(v, sizeof(v), "v%d.%d", i, i % 3 ? 0 : 2);
			assert_string_equal(profile__meta(x, k), v);
		}
	}
	profile__free(p);
	profile__free(q);
}

/* Three flushes with samples dropped from memory in between, as record does. */
static struct profile *write_chunks(const char *path, bool finish)
{
	struct profile *p = make_profile(), *all = make_profile();
	struct eprof_writer *w = eprof_writer__open(path);
	uint32_t a = test_loc(p, "/usr/bin/app", "main", NULL, 0x10);

	assert_non_null(w);
	for (int round = 0; round < 3; round++) {
		uint32_t l = test_loc(p, "/usr/bin/app", "round", NULL, 0x100 + round);
		uint32_t la = test_loc(all, "/usr/bin/app", "round", NULL, 0x100 + round);

		if (round) {
			test_samples(p, 42, 42, "app", 10, (uint32_t[]){ a, l }, 2);
			test_samples(all, 42, 42, "app", 10, (uint32_t[]){ a, la }, 2);
		}
		assert_int_equal(eprof_writer__flush(w, p), 0);
		eprof_writer__forget_samples(w, p);
	}
	if (finish)
		assert_int_equal(eprof_writer__finish(w, p), 0);
	else
		eprof_writer__abort(w);
	profile__free(p);
	return all;
}

static void test_chunks_and_forget(void **state)
{
	const char *path = test_path("chunks.eprof");
	struct profile *want = write_chunks(path, true), *q = NULL;
	struct read_info info;

	assert_int_equal(eprof_read_file(path, &q, &info), 0);
	assert_int_equal(q->samples.n, want->samples.n);
	assert_int_equal(q->samples.n, 8 + 20);
	profile__free(q);
	profile__free(want);
}

/*
 * A record's life: processes appear, exit and are renamed between flushes; events and
 * mappings are dropped from memory after each flush. The file must hold the final state
 * of every process, every event once, every mapping once, and a chunk must not grow with
 * the number of processes that did not change.
 */
/*
 * A long -a record drops the processes that exited a while ago from memory once written
 * (and their threads): the file still has all of them, later changes of the others are
 * still written, and the memory holds only the rest.
 */
static void test_forget_exited(void **state)
{
	const char *path = test_path("forget.eprof");
	struct profile *p = profile__new(), *q = NULL;
	struct eprof_writer *w = eprof_writer__open(path);
	struct read_info info;

	assert_non_null(p);
	assert_non_null(w);
	for (uint32_t pid = 100; pid < 200; pid++) {
		struct process *pr = profile__proc(p, pid, true);

		pr->comm = profile__intern(p, pid % 2 ? "odd" : "even");
		pr->start_ts = pid;
		if (pid % 2)
			pr->exit_ts = 1000 + pid; /* the odd ones exited */
		profile__thread(p, pid, pid, true)->comm = pr->comm;
		profile__thread(p, pid, pid + 1000, true)->comm = pr->comm;
	}
	profile__proc(p, 199, false)->exit_ts = 5000; /* exited, but not long enough ago */
	assert_int_equal(eprof_writer__flush(w, p), 0);
	assert_int_equal(eprof_writer__forget_exited(w, p, 2000), 49);
	assert_int_equal(p->procs.n, 51);
	assert_int_equal(p->threads.n, 102);
	assert_null(profile__proc(p, 101, false));
	assert_null(profile__thread(p, 101, 1101, false));
	assert_int_equal(profile__proc(p, 150, false)->start_ts, 150);
	assert_int_equal(profile__thread(p, 150, 1150, false)->pid, 150);
	assert_int_equal(profile__proc(p, 199, false)->exit_ts, 5000);
	assert_int_equal(eprof_writer__forget_exited(w, p, 2000), 0); /* nothing more to drop */
	/* Changes after the drop are still seen as changes (the writer's copy moved too). */
	profile__proc(p, 150, false)->exit_ts = 7777;
	profile__thread(p, 152, 1152, false)->comm = profile__intern(p, "renamed");
	assert_int_equal(eprof_writer__finish(w, p), 0);

	assert_int_equal(eprof_read_file(path, &q, &info), 0);
	assert_true(info.complete);
	assert_int_equal(q->procs.n, 100);
	assert_int_equal(q->threads.n, 200);
	assert_int_equal(profile__proc(q, 101, false)->exit_ts, 1101);
	assert_string_equal(profile__str(q, profile__thread(q, 101, 1101, false)->comm), "odd");
	assert_int_equal(profile__proc(q, 150, false)->exit_ts, 7777);
	assert_string_equal(profile__str(q, profile__thread(q, 152, 1152, false)->comm), "renamed");
	assert_int_equal(profile__proc(q, 152, false)->exit_ts, 0);
	profile__free(q);
	profile__free(p);
}

static void test_changes_only(void **state)
{
	const char *path = test_path("changes.eprof");
	struct profile *p = profile__new(), *q = NULL;
	struct eprof_writer *w = eprof_writer__open(path);
	uint64_t before, grew_unchanged, grew_changed;
	struct read_info info;

	assert_non_null(p);
	assert_non_null(w);
	for (uint32_t pid = 100; pid < 600; pid++) {
		struct process *pr = profile__proc(p, pid, true);
		struct mapping m = { .pid = pid, .start = 0x1000, .end = 0x2000, .object = 0 };

		pr->comm = profile__intern(p, "short");
		pr->start_ts = pid;
		profile__thread(p, pid, pid, true)->comm = pr->comm;
		assert_int_equal(profile__add_mapping(p, &m), 0);
	}
	assert_int_equal(eprof_writer__flush(w, p), 0);
	eprof_writer__forget_mappings(w, p);
	before = eprof_writer__bytes(w);
	assert_int_equal(eprof_writer__flush(w, p), 0);
	grew_unchanged = eprof_writer__bytes(w) - before;
	/* Nothing changed: a chunk of empty sections, far smaller than 500 process records. */
	assert_true(grew_unchanged < 200);

	before = eprof_writer__bytes(w);
	profile__proc(p, 300, false)->exit_ts = 12345;
	profile__proc(p, 300, false)->exit_code = 9;
	profile__thread(p, 301, 301, false)->comm = profile__intern(p, "renamed");
	for (int i = 0; i < 3; i++) {
		struct event e = { .ts = 1000 + i, .kind = EVK_LOST, .b = 10 + i, .dur = 5 };

		assert_int_equal(profile__add_event(p, &e), 0);
	}
	assert_int_equal(eprof_writer__flush(w, p), 0);
	grew_changed = eprof_writer__bytes(w) - before;
	assert_true(grew_changed < 200);
	eprof_writer__forget_events(w, p);
	assert_int_equal(p->events.n, 0);
	assert_int_equal(eprof_writer__finish(w, p), 0);

	assert_int_equal(eprof_read_file(path, &q, &info), 0);
	assert_true(info.complete);
	assert_int_equal(q->procs.n, 500);
	assert_int_equal(q->threads.n, 500);
	assert_int_equal(q->mappings.n, 500);
	assert_int_equal(profile__proc(q, 300, false)->exit_ts, 12345);
	assert_int_equal(profile__proc(q, 300, false)->exit_code, 9);
	assert_int_equal(profile__proc(q, 299, false)->exit_ts, 0);
	assert_int_equal(profile__proc(q, 599, false)->start_ts, 599);
	assert_string_equal(profile__str(q, profile__thread(q, 301, 301, false)->comm), "renamed");
	assert_int_equal(q->events.n, 3);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(q->events.v[i].kind, EVK_LOST);
		assert_int_equal(q->events.v[i].ts, 1000 + i);
		assert_int_equal(q->events.v[i].b, 10 + i);
		assert_int_equal(q->events.v[i].dur, 5);
	}
	profile__free(p);
	profile__free(q);
}

/* Locations of a stack, root first, as names: the same whatever the node ids. */
static void stack_names(const struct profile *p, uint32_t node, char *out, size_t len)
{
	out[0] = '\0';
	for (; node; node = p->stacks.v[node].parent) {
		uint32_t n;
		const struct frame *f = profile__loc_frames(p, p->stacks.v[node].loc, &n);
		char tmp[256];

		snprintf(tmp, sizeof(tmp), "%s;%s", n ? profile__str(p, f[0].name) : "?", out);
		snprintf(out, len, "%s", tmp);
	}
}

/* The recorder drops written stack nodes and starts a fresh trie: files stay whole. */
/* profile__stack_hint: the ids of profile__stack, whatever the order, the slot or the epoch. */
static void test_stack_hint_same_ids(void **state)
{
	struct profile *p = profile__new(), *q = profile__new();
	uint32_t l[8], seq[200][8];
	size_t len[200];
	unsigned r = 12345;

	(void)state;
	for (int i = 0; i < 8; i++) {
		char name[16];

		snprintf(name, sizeof(name), "f%d", i);
		l[i] = test_loc(p, "/usr/bin/app", name, NULL, 0x10 * (i + 1));
		assert_int_equal(test_loc(q, "/usr/bin/app", name, NULL, 0x10 * (i + 1)), l[i]);
	}
	/* stacks that share root-side frames, differ in the middle, or are prefixes of others */
	for (int s = 0; s < 200; s++) {
		len[s] = 1 + (r = r * 1103515245 + 12345) % 8;
		for (size_t i = 0; i < len[s]; i++)
			seq[s][i] = l[(i < 3 ? i : (r >> (i + 8)) % 8)];
	}
	for (int s = 0; s < 200; s++) {
		/* few hints: slots are shared and overwritten; an epoch ends a third of the way */
		int64_t a = profile__stack_hint(p, (uint32_t)(s % 5), seq[s], len[s]);
		int64_t b = profile__stack(q, seq[s], len[s]);

		assert_true(a > 0);
		assert_int_equal(a, b);
		if (s == 70) {
			assert_int_equal(profile__forget_stacks(p), 0);
			assert_int_equal(profile__forget_stacks(q), 0);
		}
	}
	profile__free(p);
	profile__free(q);
}

static void test_stack_epochs(void **state)
{
	const char *path = test_path("epochs.eprof");
	struct profile *p = profile__new(), *q = NULL;
	struct eprof_writer *w = eprof_writer__open(path);
	uint32_t a, b, c;
	int64_t first, second, stale;
	struct read_info info;
	char n1[512], n2[512];

	assert_non_null(w);
	a = test_loc(p, "/usr/bin/app", "main", NULL, 0x10);
	b = test_loc(p, "/usr/bin/app", "work", NULL, 0x20);
	c = test_loc(p, "/usr/bin/app", "leaf", NULL, 0x30);
	test_samples(p, 1, 1, "app", 2, (uint32_t[]){ a, b, c }, 3);
	first = p->samples.v[0].stack;
	assert_int_equal(eprof_writer__flush(w, p), 0);
	eprof_writer__forget_samples(w, p);
	assert_int_equal(profile__forget_stacks(p), 0);
	assert_int_equal(p->stacks.n, 0);
	/* A parent of the dropped epoch cannot be extended. */
	stale = profile__stack_child(p, (uint32_t)first, a);
	assert_int_equal(stale, -EINVAL);
	test_samples(p, 1, 1, "app", 3, (uint32_t[]){ a, b, c }, 3);
	second = p->samples.v[0].stack;
	assert_true(second > first);
	assert_int_equal(p->stacks.v[second - p->stacks_base].depth, 3);
	assert_int_equal(eprof_writer__finish(w, p), 0);

	assert_int_equal(eprof_read_file(path, &q, &info), 0);
	assert_true(info.complete);
	assert_int_equal(q->samples.n, 5);
	assert_int_equal(q->stacks.n, 1 + 3 + 3);
	stack_names(q, q->samples.v[0].stack, n1, sizeof(n1));
	stack_names(q, q->samples.v[4].stack, n2, sizeof(n2));
	assert_string_equal(n1, "main;work;leaf;");
	assert_string_equal(n1, n2);
	assert_int_not_equal(q->samples.v[0].stack, q->samples.v[4].stack);
	profile__free(p);
	profile__free(q);
}

static void test_killed_recorder(void **state)
{
	const char *path = test_path("killed.eprof");
	struct profile *want = write_chunks(path, false), *q = NULL;
	struct read_info info;
	struct stat st;

	/* No END chunk: everything flushed is there, symbols are not. */
	assert_int_equal(eprof_read_file(path, &q, &info), 0);
	assert_false(info.complete);
	assert_false(info.has_symbols);
	assert_int_equal(q->samples.n, want->samples.n);
	profile__free(q);

	/* Cut mid-chunk: the last chunk is lost, the earlier ones open. */
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(truncate(path, st.st_size - 10), 0);
	assert_int_equal(eprof_read_file(path, &q, &info), 0);
	assert_false(info.complete);
	assert_true(info.bytes_lost > 0);
	assert_int_equal(info.chunks, 2);
	assert_int_equal(q->samples.n, 8 + 10);
	profile__free(q);
	profile__free(want);
}

static void test_corrupt(void **state)
{
	const char *path = test_path("corrupt.eprof");
	struct profile *want = write_chunks(path, true), *q = NULL;
	struct read_info info;
	int fd = open(path, O_RDWR);
	char c;

	assert_true(fd >= 0);
	/* A byte inside the first chunk's payload: its CRC no longer matches. */
	assert_int_equal(pread(fd, &c, 1, EPROF_HEADER_SIZE + EPROF_CHUNK_HDR_SIZE + 5), 1);
	c ^= 0x5a;
	assert_int_equal(pwrite(fd, &c, 1, EPROF_HEADER_SIZE + EPROF_CHUNK_HDR_SIZE + 5), 1);
	close(fd);
	assert_true(eprof_read_file(path, &q, &info) < 0);
	assert_null(q);
	assert_non_null(strstr(info.error, "corrupt chunk 1"));
	profile__free(want);
}

static uint32_t get32(const uint8_t *p)
{
	return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24;
}

static void set32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = v >> (8 * i);
}

/*
 * Rewrites a file of this writer (version 2, zstd chunks) as version 1 wrote it (zlib
 * chunks, 0 in the codec word), or with codec as every chunk's codec word (bytes unchanged).
 */
static uint8_t *transcode(const uint8_t *d, size_t len, bool to_v1, uint32_t codec, size_t *out_len)
{
	uint8_t *o = malloc(len * 2 + 4096);
	size_t n = EPROF_HEADER_SIZE, off = EPROF_HEADER_SIZE;

	assert_non_null(o);
	memcpy(o, d, EPROF_HEADER_SIZE);
	if (to_v1)
		set32(o + 8, 1);
	while (off + EPROF_CHUNK_HDR_SIZE <= len) {
		const uint8_t *h = d + off;
		uint32_t raw_len = get32(h + 8), zlen = get32(h + 12);
		uint8_t *raw = malloc(raw_len + 1);
		uLongf zl = len * 2 - n;

		assert_int_equal(get32(h + 20), CODEC_ZSTD);
		assert_int_equal(ZSTD_decompress(raw, raw_len, h + EPROF_CHUNK_HDR_SIZE, zlen), raw_len);
		memcpy(o + n, h, EPROF_CHUNK_HDR_SIZE);
		if (to_v1) {
			assert_int_equal(compress2(o + n + EPROF_CHUNK_HDR_SIZE, &zl, raw, raw_len, 6), Z_OK);
			set32(o + n + 12, zl);
			set32(o + n + 16, crc32(0, o + n + EPROF_CHUNK_HDR_SIZE, zl));
			set32(o + n + 20, CODEC_ZLIB);
		} else {
			zl = zlen;
			memcpy(o + n + EPROF_CHUNK_HDR_SIZE, h + EPROF_CHUNK_HDR_SIZE, zlen);
			set32(o + n + 20, codec);
		}
		n += EPROF_CHUNK_HDR_SIZE + zl;
		off += EPROF_CHUNK_HDR_SIZE + zlen;
		free(raw);
	}
	*out_len = n;
	return o;
}

/* Files of version 1 (zlib chunks) still read, the same; codec words that do not fit are refused. */
static void test_version1_files(void **state)
{
	const char *path = test_path("v2.eprof");
	struct profile *want = write_chunks(path, true), *q = NULL, *q1 = NULL;
	struct read_info info;
	struct stat st;
	uint8_t *d, *v1;
	size_t n1;
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	d = malloc(st.st_size);
	assert_int_equal(read(fd, d, st.st_size), st.st_size);
	close(fd);
	assert_int_equal(get32(d + 8), EPROF_FILE_VERSION);
	assert_int_equal(eprof_read_mem(d, st.st_size, &q, &info), 0);
	assert_true(info.complete);

	v1 = transcode(d, st.st_size, true, 0, &n1);
	assert_int_equal(eprof_read_mem(v1, n1, &q1, &info), 0);
	assert_true(info.complete);
	assert_true(info.has_symbols);
	assert_same(q, q1, true);
	assert_int_equal(q1->samples.n, want->samples.n);
	profile__free(q1);
	free(v1);

	/* A zstd chunk in a version 1 file, or a codec nobody knows: corrupt, not misread. */
	v1 = transcode(d, st.st_size, false, CODEC_ZSTD, &n1);
	set32(v1 + 8, 1);
	assert_true(eprof_read_mem(v1, n1, &q1, &info) < 0);
	assert_non_null(strstr(info.error, "corrupt chunk 1"));
	free(v1);
	v1 = transcode(d, st.st_size, false, 7, &n1);
	assert_true(eprof_read_mem(v1, n1, &q1, &info) < 0);
	assert_non_null(strstr(info.error, "corrupt chunk 1"));
	free(v1);

	/* A version from the future names itself. */
	set32(d + 8, EPROF_FILE_VERSION + 1);
	assert_true(eprof_read_mem(d, st.st_size, &q1, &info) < 0);
	assert_non_null(strstr(info.error, "unsupported eprof data file version"));
	free(d);
	profile__free(q);
	profile__free(want);
}

static void test_garbage_inputs(void **state)
{
	struct profile *q = NULL;
	struct read_info info;
	unsigned char junk[4096];
	const char *empty = test_path("empty.eprof");

	assert_true(eprof_read_mem("hello", 5, &q, &info) < 0);
	assert_non_null(strstr(info.error, "not an eprof"));
	srand(1);
	for (int round = 0; round < 200; round++) {
		for (size_t i = 0; i < sizeof(junk); i++)
			junk[i] = rand();
		memcpy(junk, EPROF_FILE_MAGIC, 8);
		junk[8] = EPROF_FILE_VERSION;
		junk[9] = junk[10] = junk[11] = 0;
		if (eprof_read_mem(junk, sizeof(junk), &q, &info) == 0)
			profile__free(q); /* random bytes read as a cut-off header: fine, no crash */
	}
	close(open(empty, O_CREAT | O_WRONLY, 0600));
	assert_true(eprof_read_file(empty, &q, &info) < 0);
	assert_true(eprof_read_file(test_path("missing.eprof"), &q, &info) < 0);
}

/* Bytes with a valid CRC but an id pointing past its table must be refused. */
static void test_hostile_ids(void **state)
{
	struct profile *p = profile__new(), *q = NULL;
	const char *path = test_path("ids.eprof");
	struct eprof_writer *w = eprof_writer__open(path);
	struct read_info info;
	struct sample s = { .ts = 1, .pid = 1, .tid = 1, .stack = 12345, .weight = 1 };

	profile__add_sample(p, &s);
	assert_int_equal(eprof_writer__finish(w, p), 0);
	assert_true(eprof_read_file(path, &q, &info) < 0);
	assert_non_null(strstr(info.error, "corrupt"));
	profile__free(p);
}

/*
 * Stacks are at most PROFILE_MAX_STACK_DEPTH deep: the model stops growing a
 * stack there, a file at the bound reads back, and one node deeper is corrupt.
 */
static void test_stack_depth_bound(void **state)
{
	const size_t n = PROFILE_MAX_STACK_DEPTH + 10;
	const char *path = test_path("deep.eprof");
	struct profile *p = profile__new(), *q = NULL;
	uint32_t *locs = calloc(n, sizeof(*locs));
	struct eprof_writer *w;
	struct read_info info;
	struct stack_node *extra;
	int64_t leaf;

	assert_non_null(p);
	assert_non_null(locs);
	for (size_t i = 0; i < n; i++)
		locs[i] = test_loc(p, "/usr/bin/app", i % 2 ? "even" : "odd", NULL, 0x10 + i % 2);
	leaf = profile__stack(p, locs, n);
	assert_true(leaf > 0);
	assert_int_equal(p->stacks.v[leaf].depth, PROFILE_MAX_STACK_DEPTH);
	w = eprof_writer__open(path);
	assert_non_null(w);
	assert_int_equal(eprof_writer__finish(w, p), 0);
	assert_int_equal(eprof_read_file(path, &q, &info), 0);
	assert_int_equal(q->stacks.v[leaf].depth, PROFILE_MAX_STACK_DEPTH);
	profile__free(q);

	/* A node under the deepest one, made behind the model's back: the reader refuses it. */
	extra = vec_push(p->stacks);
	assert_non_null(extra);
	extra->parent = (uint32_t)leaf;
	extra->loc = locs[0];
	extra->depth = PROFILE_MAX_STACK_DEPTH + 1;
	w = eprof_writer__open(path);
	assert_non_null(w);
	assert_int_equal(eprof_writer__finish(w, p), 0);
	assert_true(eprof_read_file(path, &q, &info) < 0);
	assert_non_null(strstr(info.error, "corrupt"));
	free(locs);
	profile__free(p);
}

static void test_writer_refuses_symlink_and_foreign_file(void **state)
{
	const char *link = test_path("link.eprof"), *victim = test_path("victim"),
		   *foreign = test_path("foreign.eprof");
	int fd = open(victim, O_CREAT | O_WRONLY, 0644);

	close(fd);
	unlink(link);
	assert_int_equal(symlink(victim, link), 0);
	assert_null(eprof_writer__open(link));
	if (geteuid() == 0) {
		fd = open(foreign, O_CREAT | O_WRONLY, 0644);
		close(fd);
		assert_int_equal(chown(foreign, 65534, 65534), 0);
		assert_null(eprof_writer__open(foreign));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_stack_hint_same_ids),
		cmocka_unit_test(test_many_meta_keys),
		cmocka_unit_test(test_chunks_and_forget),
		cmocka_unit_test(test_changes_only),
		cmocka_unit_test(test_stack_epochs),
		cmocka_unit_test(test_killed_recorder),
		cmocka_unit_test(test_corrupt),
		cmocka_unit_test(test_forget_exited),
		cmocka_unit_test(test_garbage_inputs),
		cmocka_unit_test(test_version1_files),
		cmocka_unit_test(test_hostile_ids),
		cmocka_unit_test(test_stack_depth_bound),
		cmocka_unit_test(test_writer_refuses_symlink_and_foreign_file),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
