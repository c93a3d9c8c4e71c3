/* SPDX-License-Identifier: MIT */
/* Helpers shared by unit tests: temp dirs and small synthetic profiles. */
#ifndef EPROF_TEST_UTIL_H
#define EPROF_TEST_UTIL_H

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "model/profile.h"

/* A fresh directory for one test binary; removed by the OS's tmp cleaning, not by us. */
static inline const char *test_tmpdir(void)
{
	static char dir[PATH_MAX];
	const char *base = getenv("EPROF_TEST_TMP");

	if (dir[0])
		return dir;
	if (!base)
		base = "/tmp";
	mkdir(base, 0700);
	snprintf(dir, sizeof(dir), "%s/eprof-test-XXXXXX", base);
	if (!mkdtemp(dir))
		fail_msg("mkdtemp failed");
	return dir;
}

static inline char *test_path(const char *name)
{
	static char path[8][PATH_MAX + 64];
	static int slot;
	char *p = path[slot++ % 8];

	snprintf(p, PATH_MAX + 64, "%.*s/%s", PATH_MAX - 1, test_tmpdir(), name);
	return p;
}

/* A location in a fake ELF object with one named frame (plus an optional inlined callee). */
static inline uint32_t test_loc(struct profile *p, const char *module, const char *func,
				const char *inlined_callee, uint64_t addr)
{
	int64_t obj = profile__object(p, OBJ_ELF, module, "", 0);
	const char *base = strrchr(module, '/') ? strrchr(module, '/') + 1 : module;
	int64_t loc;
	struct location *l;
	struct frame *f;

	assert_true(obj > 0);
	loc = profile__location(p, obj, addr);
	assert_true(loc > 0);
	l = &p->locations.v[loc];
	if (l->frame_n)
		return loc;
	l->frame_first = p->frames.n;
	if (inlined_callee) {
		f = vec_push(p->frames);
		f->name = profile__intern(p, inlined_callee);
		f->module = profile__intern(p, base);
		f->file = profile__intern(p, "inl.h");
		f->line = 7;
		f->inlined = 1;
		l->frame_n++;
	}
	f = vec_push(p->frames);
	f->name = profile__intern(p, func);
	f->module = profile__intern(p, base);
	f->file = profile__intern(p, "src/main.c");
	f->line = 10 + (uint32_t)addr;
	l->frame_n++;
	return loc;
}

/* Adds count samples of thread (pid, tid) on the stack of locations given root first. */
static inline void test_samples(struct profile *p, uint32_t pid, uint32_t tid, const char *comm,
				int count, const uint32_t *locs, size_t n)
{
	int64_t node = profile__stack(p, locs, n);
	struct thread *t = profile__thread(p, pid, tid, true);

	assert_true(node >= 0);
	t->comm = profile__intern(p, comm);
	for (int i = 0; i < count; i++) {
		struct sample s = { .ts = 1000000 + p->samples.n * 1000, .pid = pid, .tid = tid,
				    .cpu = i % 2, .stack = node, .weight = 1000000 };

		assert_int_equal(profile__add_sample(p, &s), 0);
	}
}

#endif
