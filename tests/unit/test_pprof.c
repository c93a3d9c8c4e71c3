// SPDX-License-Identifier: MIT
#include "test_util.h"

#include <zlib.h>

#include "analysis/hot.h"
#include "output/pprof.h"
#include "util/buf.h"
#include "util/sink.h"

/* A small profile.proto decoder: just what the tests check. */
#define MAXN 256

struct pline {
	uint64_t func, line;
};
struct ploc {
	uint64_t id, mapping, addr;
	struct pline lines[8];
	size_t nlines;
};
struct psample {
	uint64_t locs[32];
	size_t nlocs;
	int64_t values[4];
	size_t nvalues;
	uint64_t pid, tid, thread; /* label values; thread is a string index */
};
struct pprof {
	char *strs[MAXN];
	size_t nstrs;
	uint64_t types[4][2];
	size_t ntypes;
	struct psample samples[MAXN];
	size_t nsamples;
	struct ploc locs[MAXN];
	size_t nlocs;
	uint64_t funcs[MAXN][3]; /* id, name, file */
	size_t nfuncs;
	uint64_t maps[MAXN][5]; /* id, start, limit, filename, build_id */
	size_t nmaps;
	uint64_t comments[MAXN];
	size_t ncomments;
	uint64_t period, duration;
};

static uint8_t *gunzip(const void *data, size_t len, size_t *out_len)
{
	z_stream z = { 0 };
	size_t cap = 1 << 20;
	uint8_t *out = malloc(cap);

	assert_int_equal(inflateInit2(&z, 15 + 16), Z_OK);
	z.next_in = (Bytef *)data;
	z.avail_in = (uInt)len;
	z.next_out = out;
	z.avail_out = (uInt)cap;
	assert_int_equal(inflate(&z, Z_FINISH), Z_STREAM_END);
	*out_len = z.total_out;
	inflateEnd(&z);
	return out;
}

/* Calls fn for each field of a message; fn gets the varint or the bytes. */
static void fields(const uint8_t *p, size_t len, void *ctx,
		   void (*fn)(void *ctx, unsigned field, uint64_t v, const uint8_t *b, size_t blen))
{
	struct rbuf r;

	rbuf_init(&r, p, len);
	while (rbuf_left(&r)) {
		uint64_t tag = rbuf_varint(&r);

		if ((tag & 7) == 0) {
			fn(ctx, tag >> 3, rbuf_varint(&r), NULL, 0);
		} else {
			size_t n;
			const char *b;

			assert_int_equal(tag & 7, 2);
			b = rbuf_str(&r, &n);
			fn(ctx, tag >> 3, 0, (const uint8_t *)b, n);
		}
		assert_true(r.ok);
	}
}

static void packed(const uint8_t *b, size_t n, uint64_t *out, size_t *nout, size_t max)
{
	struct rbuf r;

	rbuf_init(&r, b, n);
	while (rbuf_left(&r) && *nout < max)
		out[(*nout)++] = rbuf_varint(&r);
}

static void on_line(void *ctx, unsigned f, uint64_t v, const uint8_t *b, size_t n)
{
	struct pline *l = ctx;

	if (f == 1)
		l->func = v;
	if (f == 2)
		l->line = v;
}

static void on_loc(void *ctx, unsigned f, uint64_t v, const uint8_t *b, size_t n)
{
	struct ploc *l = ctx;

	if (f == 1)
		l->id = v;
	else if (f == 2)
		l->mapping = v;
	else if (f == 3)
		l->addr = v;
	else if (f == 4)
		fields(b, n, &l->lines[l->nlines++], on_line);
}

struct label {
	uint64_t key, str, num;
};

static void on_label(void *ctx, unsigned f, uint64_t v, const uint8_t *b, size_t n)
{
	struct label *l = ctx;

	if (f == 1)
		l->key = v;
	if (f == 2)
		l->str = v;
	if (f == 3)
		l->num = v;
}

static struct pprof *g_pp; /* for label key names */

static void on_sample(void *ctx, unsigned f, uint64_t v, const uint8_t *b, size_t n)
{
	struct psample *s = ctx;

	if (f == 1) {
		packed(b, n, s->locs, &s->nlocs, 32);
	} else if (f == 2) {
		packed(b, n, (uint64_t *)s->values, &s->nvalues, 4);
	} else if (f == 3) {
		struct label l = { 0 };

		fields(b, n, &l, on_label);
		/* keys are resolved once the string table is known: keep them raw */
		if (!s->pid)
			s->pid = l.key << 32 | l.num;
		else if (!s->tid)
			s->tid = l.key << 32 | l.num;
		else
			s->thread = l.str;
	}
}

static void on_vt(void *ctx, unsigned f, uint64_t v, const uint8_t *b, size_t n)
{
	uint64_t *t = ctx;

	if (f == 1 || f == 2)
		t[f - 1] = v;
}

static void on_func(void *ctx, unsigned f, uint64_t v, const uint8_t *b, size_t n)
{
	uint64_t *fn = ctx;

	if (f == 1)
		fn[0] = v;
	if (f == 2)
		fn[1] = v;
	if (f == 4)
		fn[2] = v;
}

static void on_map(void *ctx, unsigned f, uint64_t v, const uint8_t *b, size_t n)
{
	uint64_t *m = ctx;

	if (f == 1)
		m[0] = v;
	if (f == 2)
		m[1] = v;
	if (f == 3)
		m[2] = v;
	if (f == 5)
		m[3] = v;
	if (f == 6)
		m[4] = v;
}

static void on_profile(void *ctx, unsigned f, uint64_t v, const uint8_t *b, size_t n)
{
	struct pprof *pp = ctx;

	switch (f) {
	case 1:
		fields(b, n, pp->types[pp->ntypes++], on_vt);
		break;
	case 2:
		assert_true(pp->nsamples < MAXN);
		fields(b, n, &pp->samples[pp->nsamples++], on_sample);
		break;
	case 3:
		fields(b, n, pp->maps[pp->nmaps++], on_map);
		break;
	case 4:
		fields(b, n, &pp->locs[pp->nlocs++], on_loc);
		break;
	case 5:
		fields(b, n, pp->funcs[pp->nfuncs++], on_func);
		break;
	case 6:
		pp->strs[pp->nstrs++] = strndup((const char *)b, n);
		break;
	case 10:
		pp->duration = v;
		break;
	case 12:
		pp->period = v;
		break;
	case 13:
		pp->comments[pp->ncomments++] = v;
		break;
	}
}

static struct pprof *decode(struct profile *p, const struct pprof_opts *o)
{
	struct sink *s = sink_mem();
	struct pprof *pp = calloc(1, sizeof(*pp));
	const char *data;
	size_t len, rawlen;
	uint8_t *raw;

	assert_int_equal(pprof_write(s, p, o), 0);
	data = sink_mem_data(s, &len);
	assert_true(len > 18 && (uint8_t)data[0] == 0x1f && (uint8_t)data[1] == 0x8b);
	raw = gunzip(data, len, &rawlen);
	g_pp = pp;
	fields(raw, rawlen, pp, on_profile);
	free(raw);
	sink_close(s);
	return pp;
}

static void pprof_free(struct pprof *pp)
{
	for (size_t i = 0; i < pp->nstrs; i++)
		free(pp->strs[i]);
	free(pp);
}

static const char *S(const struct pprof *pp, uint64_t i)
{
	assert_true(i < pp->nstrs);
	return pp->strs[i];
}

static const struct ploc *loc(const struct pprof *pp, uint64_t id)
{
	for (size_t i = 0; i < pp->nlocs; i++)
		if (pp->locs[i].id == id)
			return &pp->locs[i];
	fail_msg("no location %llu", (unsigned long long)id);
	return NULL;
}

static const char *func_name(const struct pprof *pp, uint64_t id)
{
	for (size_t i = 0; i < pp->nfuncs; i++)
		if (pp->funcs[i][0] == id)
			return S(pp, pp->funcs[i][1]);
	fail_msg("no function %llu", (unsigned long long)id);
	return NULL;
}

/* Self samples of a function as pprof computes them (first line of the first location). */
static int64_t pprof_self(const struct pprof *pp, const char *name, bool noinlines)
{
	int64_t n = 0;

	for (size_t i = 0; i < pp->nsamples; i++) {
		const struct psample *s = &pp->samples[i];
		const struct ploc *l;

		if (!s->nlocs)
			continue;
		l = loc(pp, s->locs[0]);
		if (!strcmp(func_name(pp, l->lines[noinlines ? l->nlines - 1 : 0].func), name))
			n += s->values[0];
	}
	return n;
}

static struct profile *make(void)
{
	struct profile *p = profile__new();
	uint32_t m = test_loc(p, "/bin/app", "main", NULL, 1), a = test_loc(p, "/bin/app", "a", NULL, 2),
		 c = test_loc(p, "/bin/app", "c", "helper", 3), l = test_loc(p, "/lib/x.so", "leaf", NULL, 4);
	struct mapping mp = { .pid = 10, .start = 0x400000, .end = 0x401000, .pgoff = 0,
			      .object = p->locations.v[m].object };

	test_samples(p, 10, 10, "app", 60, (uint32_t[]){ m, a, l }, 3);
	test_samples(p, 10, 11, "worker", 30, (uint32_t[]){ m, c }, 2);
	test_samples(p, 10, 10, "app", 10, (uint32_t[]){ m, a }, 2);
	assert_int_equal(profile__add_mapping(p, &mp), 0);
	p->objects.v[p->locations.v[m].object].build_id = profile__intern(p, "abcdef0123");
	profile__set_meta(p, "command", "/bin/app --run");
	profile__set_meta(p, "sample_rate", "1000");
	profile__set_meta(p, "start_ns", "1000000000");
	profile__set_meta(p, "end_ns", "3000000000");
	p->stats[STAT_SAMPLES_LOST] = 3;
	return p;
}

static void test_pprof_structure(void **state)
{
	struct profile *p = make();
	struct pprof *pp = decode(p, NULL);
	int64_t total[2] = { 0 };
	bool cmd = false, lost = false;

	assert_string_equal(pp->strs[0], "");
	assert_int_equal(pp->ntypes, 2);
	assert_string_equal(S(pp, pp->types[0][0]), "samples");
	assert_string_equal(S(pp, pp->types[0][1]), "count");
	assert_string_equal(S(pp, pp->types[1][0]), "cpu");
	assert_string_equal(S(pp, pp->types[1][1]), "nanoseconds");
	assert_int_equal(pp->period, 1000000);
	assert_int_equal(pp->duration, 2000000000);
	assert_int_equal(pp->nsamples, 3);
	for (size_t i = 0; i < pp->nsamples; i++) {
		assert_int_equal(pp->samples[i].nvalues, 2);
		total[0] += pp->samples[i].values[0];
		total[1] += pp->samples[i].values[1];
		/* labels pid and tid are numbers, thread a string */
		assert_string_equal(S(pp, pp->samples[i].pid >> 32), "pid");
		assert_int_equal(pp->samples[i].pid & 0xffffffff, 10);
		assert_string_equal(S(pp, pp->samples[i].tid >> 32), "tid");
		assert_string_equal(S(pp, pp->samples[i].thread),
				    (pp->samples[i].tid & 0xffffffff) == 11 ? "worker" : "app");
	}
	assert_int_equal(total[0], 100);
	assert_int_equal(total[1], 100 * 1000000);
	/* the first sample's locations are leaf first */
	assert_int_equal(pp->samples[0].nlocs, 3);
	assert_string_equal(func_name(pp, loc(pp, pp->samples[0].locs[0])->lines[0].func), "leaf");
	assert_string_equal(func_name(pp, loc(pp, pp->samples[0].locs[2])->lines[0].func), "main");
	/* an inlined callee is the first line of its location, with its own file and line */
	{
		const struct ploc *l = loc(pp, pp->samples[1].locs[0]);

		assert_int_equal(l->nlines, 2);
		assert_string_equal(func_name(pp, l->lines[0].func), "helper");
		assert_int_equal(l->lines[0].line, 7);
		assert_string_equal(func_name(pp, l->lines[1].func), "c");
		assert_int_equal(l->lines[1].line, 13);
	}
	/* the executable is the first mapping, with its build-id; addresses land in it */
	assert_true(pp->nmaps >= 2);
	assert_string_equal(S(pp, pp->maps[0][3]), "/bin/app");
	assert_string_equal(S(pp, pp->maps[0][4]), "abcdef0123");
	assert_int_equal(pp->maps[0][1], 0x400000);
	assert_int_equal(loc(pp, pp->samples[0].locs[2])->addr, 0x400001);
	for (size_t i = 0; i < pp->ncomments; i++) {
		cmd |= strstr(S(pp, pp->comments[i]), ": /bin/app --run") != NULL;
		lost |= !strcmp(S(pp, pp->comments[i]), "counters: samples_lost=3");
	}
	assert_true(cmd && lost);
	pprof_free(pp);
	profile__free(p);
}

/* pprof's self shares are eprof report's: with inline frames (--inline) and without. */
static void test_pprof_agrees_with_report(void **state)
{
	struct profile *p = make();
	struct pprof *pp = decode(p, NULL);
	struct hot_result r;

	for (int inl = 0; inl < 2; inl++) {
		assert_int_equal(hot_functions(p, &(struct hot_opts){ .inlined = inl }, &r), 0);
		for (size_t i = 0; i < r.n; i++)
			assert_int_equal(pprof_self(pp, profile__str(p, r.funcs[i].name), !inl),
					 r.funcs[i].self);
		hot_result__free(&r);
	}
	pprof_free(pp);
	profile__free(p);
}

static void test_pprof_filter(void **state)
{
	struct profile *p = make();
	struct pprof *pp = decode(p, &(struct pprof_opts){ .filter = { .tid = 11 } });

	assert_int_equal(pp->nsamples, 1);
	assert_int_equal(pp->samples[0].values[0], 30);
	pprof_free(pp);
	profile__free(p);
}

static void test_pb_encoding(void **state)
{
	struct buf b = { 0 };

	pb_varint_field(&b, 1, 300);
	pb_bytes_field(&b, 6, "hi", 2);
	assert_int_equal(b.len, 7);
	assert_memory_equal(b.data, "\x08\xac\x02\x32\x02hi", 7);
	buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pprof_structure),
		cmocka_unit_test(test_pprof_agrees_with_report),
		cmocka_unit_test(test_pprof_filter),
		cmocka_unit_test(test_pb_encoding),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
