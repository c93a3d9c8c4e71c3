// SPDX-License-Identifier: MIT
#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "analysis/ranks.h"
#include "format/format.h"
#include "model/merge.h"
#include "sym/symbolize.h"
#include "sym/symbolizer.h"
#include "util/log.h"
#include "open.h"

static bool open_force;

void profile_open_force(bool force)
{
	open_force = force;
}

int profile_open(const char *path, struct profile **out)
{
	struct symbolizer_opts so = { .want_lines = true };
	struct symbolize_stats st;
	struct read_info info;
	struct symbolizer *sym;
	int err;

	err = eprof_read_file(path, out, &info);
	if (err) {
		log_err("failed to read '%s': %s", path, info.error);
		return err;
	}
	if (!info.complete)
		log_warn("'%s' is incomplete (recorder stopped early): read %u chunks, %" PRIu64
			 " trailing bytes lost",
			 path, info.chunks, info.bytes_lost);
	if (info.has_symbols)
		return 0;
	/*
	 * Another user's file names the paths to read and would have its kernel frames named
	 * from this machine's kallsyms (a KASLR oracle): not without --force.
	 */
	if (info.foreign && !open_force) {
		log_warn("'%s' belongs to uid %u: its frames are not named from the files it lists "
			 "nor from this machine's kernel (--force to name them)", path, info.owner);
		return 0;
	}
	/* No symbols chunk: name what we can from the binaries still on this machine. */
	sym = symbolizer__new(&so);
	if (!sym)
		return 0;
	err = symbolize_profile(*out, sym, NULL, NULL, &st);
	symbolizer__free(sym);
	if (err) {
		log_err("failed to symbolize '%s': %s", path, strerror(-err));
		profile__free(*out);
		*out = NULL;
		return err;
	}
	(*out)->stats[STAT_UNKNOWN_FRAMES] = st.unknown;
	if (st.objects_missing)
		log_warn("%" PRIu64 " binaries of this record are gone or changed: their frames stay unnamed",
			 st.objects_missing);
	return 0;
}

struct path_list {
	char **v;
	size_t n, cap;
};

static int path_add(struct path_list *l, const char *path)
{
	char *dup;

	for (size_t i = 0; i < l->n; i++)
		if (!strcmp(l->v[i], path))
			return 0;
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 16;
		char **v = realloc(l->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	dup = strdup(path);
	if (!dup)
		return -ENOMEM;
	l->v[l->n++] = dup;
	return 0;
}

/* A recording by its name: NAME.data, or NAME.data.PID (a second recorder's file). */
static bool data_name(const char *name)
{
	const char *d = strstr(name, ".data");

	for (; d; d = strstr(d + 1, ".data")) {
		const char *t = d + 5;

		if (!*t)
			return true;
		if (*t++ != '.' || !*t)
			continue;
		while (*t >= '0' && *t <= '9')
			t++;
		if (!*t)
			return true;
	}
	return false;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int add_dir(struct path_list *l, const char *dir)
{
	size_t first = l->n;
	struct dirent *de;
	char path[4096];
	DIR *d = opendir(dir);
	int err = 0;

	if (!d) {
		err = -errno;
		log_err("failed to read directory '%s': %s", dir, strerror(errno));
		return err;
	}
	while (!err && (de = readdir(d))) {
		struct stat sb;

		if (!data_name(de->d_name))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (!stat(path, &sb) && S_ISREG(sb.st_mode))
			err = path_add(l, path);
	}
	closedir(d);
	if (!err && l->n == first) {
		log_err("no recordings (*.data) in directory '%s'", dir);
		return -ENOENT;
	}
	qsort(l->v + first, l->n - first, sizeof(*l->v), cmp_str);
	return err;
}

static int add_arg(struct path_list *l, const char *arg)
{
	struct stat sb;
	glob_t g;
	int err = 0;

	if (!stat(arg, &sb) && S_ISDIR(sb.st_mode))
		return add_dir(l, arg);
	if (!strpbrk(arg, "*?[") || !stat(arg, &sb))
		return path_add(l, arg);
	if (glob(arg, 0, NULL, &g)) {
		log_err("no recordings match '%s'", arg);
		return -ENOENT;
	}
	for (size_t i = 0; !err && i < g.gl_pathc; i++)
		err = path_add(l, g.gl_pathv[i]);
	globfree(&g);
	return err;
}

int job_open(const char *first, char **pos, int npos, struct profile ***profs, char ***paths,
	     size_t *n)
{
	struct path_list l = { 0 };
	struct profile **p = NULL;
	int err = add_arg(&l, first);

	for (int i = 0; !err && i < npos; i++)
		err = add_arg(&l, pos[i]);
	if (!err) {
		p = calloc(l.n ? l.n : 1, sizeof(*p));
		err = p ? 0 : -ENOMEM;
	}
	for (size_t i = 0; !err && i < l.n; i++)
		err = profile_open(l.v[i], &p[i]);
	if (err) {
		if (err == -ENOMEM)
			log_err("out of memory");
		job_free(p, l.v, l.n);
		return err;
	}
	*profs = p;
	*paths = l.v;
	*n = l.n;
	return 0;
}

void job_free(struct profile **profs, char **paths, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (profs)
			profile__free(profs[i]);
		if (paths)
			free(paths[i]);
	}
	free(profs);
	free(paths);
}

/* Metadata of the merge: each recording's keys where the first did not set them. */
static int merge_meta(struct profile *d, const struct profile *s)
{
	for (size_t i = 0; i < s->meta.n; i++) {
		const char *k = profile__str(s, s->meta.v[i].key);

		if (!profile__meta(d, k) && profile__set_meta(d, k, profile__str(s, s->meta.v[i].value)))
			return -ENOMEM;
	}
	return 0;
}

int job_merge(struct profile **profs, char *const *paths, size_t n, int rank,
	      const char *host, bool rank_root, struct profile **out)
{
	struct profile *d = profile__new();
	struct job_summary js;
	uint64_t t0 = UINT64_MAX, t1 = 0;
	uint32_t next = 0;
	size_t used = 0;
	char buf[64];
	int err;

	if (!d) {
		log_err("out of memory");
		return -ENOMEM;
	}
	err = job_analyze(profs, paths, n, &js);
	for (size_t i = 0; !err && i < js.n; i++) {
		struct rank_info *r = &js.ranks[i];
		char prefix[320], root[320];
		struct merge_opts mo = { .id_base = next };
		const char *v;

		if ((rank >= 0 && r->rank != rank) || (host && strcmp(host, r->host)))
			continue;
		if (r->rank >= 0)
			snprintf(prefix, sizeof(prefix), "rank %d (%s) ", r->rank, r->host);
		else
			snprintf(prefix, sizeof(prefix), "(%s) ", r->host);
		if (r->rank >= 0)
			snprintf(root, sizeof(root), "%s/rank %d", r->host, r->rank);
		else
			snprintf(root, sizeof(root), "%s/%s", r->host, r->path);
		/* onto the clock of the first recording merged */
		mo.ts_shift = r->offset_ns - js.ranks[0].offset_ns;
		mo.proc_prefix = prefix;
		mo.thread_name = rank_root ? root : NULL;
		err = profile_merge(d, r->p, &mo, &next) ?: merge_meta(d, r->p);
		v = profile__meta(r->p, "start_ns");
		if (v && strtoull(v, NULL, 10) + mo.ts_shift < t0)
			t0 = strtoull(v, NULL, 10) + mo.ts_shift;
		v = profile__meta(r->p, "end_ns");
		if (v && strtoull(v, NULL, 10) + mo.ts_shift > t1)
			t1 = strtoull(v, NULL, 10) + mo.ts_shift;
		used++;
		/* merged: the recording's own copy goes (the peak is the merge, not both) */
		for (size_t k = 0; k < n; k++)
			if (profs[k] == r->p) {
				profile__free(profs[k]);
				profs[k] = NULL;
			}
		r->p = NULL;
	}
	if (!err && !used) {
		log_err("no recording of the job matches --rank/--host");
		err = -ENOENT;
	}
	if (!err && t0 != UINT64_MAX) {
		snprintf(buf, sizeof(buf), "%" PRIu64, t0);
		err = profile__set_meta(d, "start_ns", buf);
		snprintf(buf, sizeof(buf), "%" PRIu64, t1);
		err = err ?: profile__set_meta(d, "end_ns", buf);
		snprintf(buf, sizeof(buf), "%zu", used);
		err = err ?: profile__set_meta(d, "job_recordings", buf);
	}
	job_summary_free(&js);
	if (err) {
		if (err == -ENOMEM)
			log_err("out of memory merging the job's recordings");
		profile__free(d);
		return err;
	}
	*out = d;
	return 0;
}
