// SPDX-License-Identifier: MIT
/*
 * The symbolizer: caches of ELF objects (by path and build-id), per-address
 * results, kallsyms and perf maps, and the public entry points.
 */
#include <elf.h>
#include <errno.h>
#include <pthread.h>
#include <libelf.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

#ifdef HAVE_DEBUGINFOD
#include <elfutils/debuginfod.h>
#endif

#include "sym/sym_internal.h"
#include "util/hmap.h"
#include "util/log.h"
#include "util/vec.h"

/* Results are cached per (object, offset) up to this many; past it lookups still work. */
#define MAX_CACHED_RESULTS (1u << 20)
#define VDSO_PATH "[vdso]"
#define VDSO_KEY "[vdso]" /* its cache key's build-id: no real build-id looks like it */
#define VDSO_MAX_SIZE (1u << 20)

struct obj_slot {
	char *path;
	char *build_id;
	struct sym_obj *obj;
};

struct cached {
	struct sym_result r;
	int err;
};

struct symbolizer {
	struct symbolizer_opts opts;
	char *kallsyms_path;
	char *debug_dir;

	struct obj_slot *objs;
	size_t nobjs, cap_objs;
	struct hmap *obj_index; /* (hash path, hash build-id) -> objs index */
	size_t last_obj;	/* samples come in runs from one object: skip the hashing */

	struct cached *results;
	size_t nresults, cap_results;
	struct hmap *result_index; /* (objs index, file offset) -> results index */

	struct ksyms *ksyms;
	int ksyms_err;
	bool ksyms_tried;
	pthread_t kthread; /* background kallsyms load (symbolizer__preload_kernel) */
	bool kthread_running;

	struct perfmap **maps;
	size_t nmaps, cap_maps;
	struct hmap *map_index; /* (hash path, 0) -> maps index */

	int vdso_err;
	bool vdso_tried;
	size_t vdso_slot;

#ifdef HAVE_DEBUGINFOD
	debuginfod_client *dbgd;
#endif
	bool dbgd_warned;
};

const struct symbolizer_opts *symbolizer__opts(const struct symbolizer *s)
{
	return &s->opts;
}

const char *symbolizer__debug_dir(const struct symbolizer *s)
{
	return s->debug_dir;
}

struct symbolizer *symbolizer__new(const struct symbolizer_opts *opts)
{
	struct symbolizer *s = calloc(1, sizeof(*s));

	if (!s)
		goto fail;
	if (opts)
		s->opts = *opts;
	s->kallsyms_path = strdup(s->opts.kallsyms_path ? s->opts.kallsyms_path : "/proc/kallsyms");
	s->debug_dir = strdup(s->opts.debug_dir ? s->opts.debug_dir : "/usr/lib/debug");
	s->obj_index = hmap__new(64);
	s->result_index = hmap__new(1024);
	s->map_index = hmap__new(16);
	if (!s->kallsyms_path || !s->debug_dir || !s->obj_index || !s->result_index ||
	    !s->map_index)
		goto fail;
	/* The caller's strings need not outlive this call. */
	s->opts.kallsyms_path = s->kallsyms_path;
	s->opts.debug_dir = s->debug_dir;
	elf_version(EV_CURRENT);
	return s;
fail:
	symbolizer__free(s);
	errno = ENOMEM;
	return NULL;
}

void symbolizer__free(struct symbolizer *s)
{
	if (!s)
		return;
	if (s->kthread_running)
		pthread_join(s->kthread, NULL);
	for (size_t i = 0; i < s->nobjs; i++) {
		sym_obj__free(s->objs[i].obj);
		free(s->objs[i].path);
		free(s->objs[i].build_id);
	}
	free(s->objs);
	for (size_t i = 0; i < s->nresults; i++)
		sym_result__free(&s->results[i].r);
	free(s->results);
	for (size_t i = 0; i < s->nmaps; i++)
		perfmap__free(s->maps[i]);
	free(s->maps);
	hmap__free(s->obj_index);
	hmap__free(s->result_index);
	hmap__free(s->map_index);
	ksyms__free(s->ksyms);
#ifdef HAVE_DEBUGINFOD
	if (s->dbgd)
		debuginfod_end(s->dbgd);
#endif
	free(s->kallsyms_path);
	free(s->debug_dir);
	free(s);
}

int symbolizer__debuginfod(struct symbolizer *s, const unsigned char *id, size_t len, char **path)
{
	const char *urls = getenv("DEBUGINFOD_URLS");

	if (!s->opts.use_debuginfod || !urls || !*urls)
		return -ENOENT;
#ifdef HAVE_DEBUGINFOD
	if (!s->dbgd)
		s->dbgd = debuginfod_begin();
	if (!s->dbgd)
		return -ENOMEM;
	return debuginfod_find_debuginfo(s->dbgd, id, (int)len, path);
#else
	if (!s->dbgd_warned)
		log_warn("debuginfod requested, but eprof was built without libdebuginfod");
	s->dbgd_warned = true;
	return -ENOTSUP;
#endif
}

/* --- objects and cached results ------------------------------------------------------ */

static bool slot_is(const struct obj_slot *o, const char *path, const char *bid)
{
	return !strcmp(o->path, path) && !strcmp(o->build_id, bid);
}

static int add_obj(struct symbolizer *s, const char *path, const char *bid, int fd, size_t *slot)
{
	struct obj_slot *o;

	if (arr_grow(s->objs, s->cap_objs, s->nobjs + 1)) {
		if (fd >= 0)
			close(fd);
		return -ENOMEM;
	}
	o = &s->objs[s->nobjs];
	o->path = strdup(path);
	o->build_id = strdup(bid);
	o->obj = sym_obj__open(s, path, fd, strcmp(bid, VDSO_KEY) ? bid : NULL);
	if (!o->path || !o->build_id || !o->obj) {
		sym_obj__free(o->obj);
		free(o->path);
		free(o->build_id);
		return -ENOMEM;
	}
	*slot = s->nobjs++;
	return 0;
}

/* The cache slot of an object, opened on first use; fd (>= 0) is taken. */
static int find_obj(struct symbolizer *s, const char *path, const char *build_id, int fd,
		    size_t *slot)
{
	const char *bid = build_id ? build_id : "";
	uint64_t k1, k2, v;
	bool taken;
	int err;

	if (s->last_obj < s->nobjs && slot_is(&s->objs[s->last_obj], path, bid)) {
		*slot = s->last_obj;
		goto found;
	}
	k1 = hash_bytes(path, strlen(path));
	k2 = hash_bytes(bid, strlen(bid));
	taken = hmap__get(s->obj_index, k1, k2, &v);
	if (taken && slot_is(&s->objs[v], path, bid)) {
		*slot = (size_t)v;
		goto found;
	}
	/* Two keys with one 128-bit hash: rare enough for a linear search. */
	for (size_t i = 0; taken && i < s->nobjs; i++) {
		if (slot_is(&s->objs[i], path, bid)) {
			*slot = i;
			goto found;
		}
	}
	err = add_obj(s, path, bid, fd, slot);
	if (err)
		return err;
	if (!taken && hmap__put(s->obj_index, k1, k2, *slot))
		return -ENOMEM;
	s->last_obj = *slot;
	return 0;
found:
	s->last_obj = *slot;
	if (fd >= 0)
		close(fd);
	return 0;
}

static int cache_result(struct symbolizer *s, size_t slot, uint64_t off, struct sym_result *r,
			int err, struct sym_result *out)
{
	struct cached *c;

	if (s->nresults >= MAX_CACHED_RESULTS ||
	    arr_grow(s->results, s->cap_results, s->nresults + 1) ||
	    hmap__put(s->result_index, slot + 1, off, s->nresults)) {
		*out = *r; /* not cached: the caller owns it */
		return err;
	}
	c = &s->results[s->nresults++];
	c->r = *r;
	c->err = err;
	return err ? err : sym_result__copy(out, &c->r);
}

static int resolve_cached(struct symbolizer *s, size_t slot, uint64_t off, struct sym_result *out)
{
	struct sym_result r = {0};
	uint64_t v;
	int err;

	if (hmap__get(s->result_index, slot + 1, off, &v)) {
		const struct cached *c = &s->results[v];

		return c->err ? c->err : sym_result__copy(out, &c->r);
	}
	err = sym_obj__resolve(s->objs[slot].obj, off, s->opts.want_lines, &r);
	if (err && err != -ENOENT)
		return err; /* only answers about the address itself are worth keeping */
	return cache_result(s, slot, off, &r, err, out);
}

int symbolizer__elf(struct symbolizer *s, const char *path, const char *build_id, uint64_t file_off,
		    struct sym_result *out)
{
	size_t slot;
	int err;

	if (!out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	if (!s || !path || !*path)
		return -EINVAL;
	err = find_obj(s, path, build_id, -1, &slot);
	if (!err)
		err = sym_obj__err(s->objs[slot].obj);
	if (err)
		return err;
	return resolve_cached(s, slot, file_off, out);
}

/* --- vDSO ------------------------------------------------------------------------------ */

typedef ElfW(Ehdr) native_ehdr;
typedef ElfW(Phdr) native_phdr;

/* The size of our own vDSO image: the furthest of its headers and segments. */
static size_t vdso_size(const native_ehdr *eh)
{
	const native_phdr *ph = (const void *)((const char *)eh + eh->e_phoff);
	size_t size = eh->e_ehsize;

	if (eh->e_phoff + (size_t)eh->e_phnum * eh->e_phentsize > size)
		size = eh->e_phoff + (size_t)eh->e_phnum * eh->e_phentsize;
	if (eh->e_shoff + (size_t)eh->e_shnum * eh->e_shentsize > size)
		size = eh->e_shoff + (size_t)eh->e_shnum * eh->e_shentsize;
	for (int i = 0; i < eh->e_phnum && eh->e_phentsize == sizeof(*ph); i++) {
		if (ph[i].p_type == PT_LOAD && ph[i].p_offset + ph[i].p_filesz > size)
			size = ph[i].p_offset + ph[i].p_filesz;
	}
	return size;
}

/* A file holding a copy of the vDSO, so it goes through the same path as any ELF. */
static int vdso_fd(void)
{
	const native_ehdr *eh = (const void *)getauxval(AT_SYSINFO_EHDR);
	const char *p;
	size_t size, done = 0;
	int fd;

	if (!eh)
		return -ENOENT;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG))
		return -ENOEXEC;
	size = vdso_size(eh);
	if (size > VDSO_MAX_SIZE)
		return -E2BIG;
	fd = memfd_create("eprof-vdso", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	for (p = (const char *)eh; done < size;) {
		ssize_t n = write(fd, p + done, size - done);

		if (n <= 0) {
			close(fd);
			return n < 0 ? -errno : -EIO;
		}
		done += (size_t)n;
	}
	return fd;
}

int symbolizer__vdso(struct symbolizer *s, uint64_t off, struct sym_result *out)
{
	int fd;

	if (!out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	if (!s)
		return -EINVAL;
	if (!s->vdso_tried) {
		s->vdso_tried = true;
		fd = vdso_fd();
		s->vdso_err = fd < 0 ? fd : find_obj(s, VDSO_PATH, VDSO_KEY, fd, &s->vdso_slot);
		if (!s->vdso_err)
			s->vdso_err = sym_obj__err(s->objs[s->vdso_slot].obj);
		if (s->vdso_err)
			log_debug("cannot read the vDSO: %s", strerror(-s->vdso_err));
	}
	if (s->vdso_err)
		return s->vdso_err;
	return resolve_cached(s, s->vdso_slot, off, out);
}

/* --- kernel -------------------------------------------------------------------------- */

static void *ksyms_thread(void *arg)
{
	struct symbolizer *s = arg;

	s->ksyms_err = ksyms__load(s->kallsyms_path, &s->ksyms);
	return NULL;
}

int symbolizer__preload_kernel(struct symbolizer *s)
{
	int err;

	if (s->ksyms_tried || s->kthread_running)
		return 0;
	/* Reading kallsyms costs ~40 ms of kernel time alone: do it while the record runs. */
	err = pthread_create(&s->kthread, NULL, ksyms_thread, s);
	if (err)
		return -err;
	s->kthread_running = true;
	return 0;
}

static int load_ksyms(struct symbolizer *s)
{
	if (s->kthread_running) {
		pthread_join(s->kthread, NULL);
		s->kthread_running = false;
		s->ksyms_tried = true;
		if (s->ksyms_err == -EACCES)
			log_warn("kernel addresses in '%s' are hidden: run as root or lower "
				 "kernel.kptr_restrict",
				 s->kallsyms_path);
	}
	if (!s->ksyms_tried) {
		s->ksyms_tried = true;
		s->ksyms_err = ksyms__load(s->kallsyms_path, &s->ksyms);
		if (s->ksyms_err == -EACCES)
			log_warn("kernel addresses in '%s' are hidden: run as root or lower "
				 "kernel.kptr_restrict",
				 s->kallsyms_path);
		else if (s->ksyms_err)
			log_warn("failed to read '%s': %s", s->kallsyms_path,
				 strerror(-s->ksyms_err));
	}
	return s->ksyms_err;
}

static int one_frame(struct sym_result *out, const char *name)
{
	int err = sym_result__alloc(out, 1);

	if (!err)
		err = sym_frame__set(&out->frames[0], name, NULL, 0, false);
	if (err) {
		sym_result__free(out);
		return err;
	}
	out->n = 1;
	return 0;
}

int symbolizer__kernel(struct symbolizer *s, uint64_t addr, struct sym_result *out)
{
	const struct symtab_ent *e;
	int err;

	if (!out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	if (!s)
		return -EINVAL;
	err = load_ksyms(s);
	if (err)
		return err;
	e = ksyms__find(s->ksyms, addr);
	if (!e)
		return -ENOENT;
	return one_frame(out, ksyms__name(s->ksyms, e));
}

const char *symbolizer__kernel_module(struct symbolizer *s, uint64_t addr)
{
	const struct symtab_ent *e;

	if (!s || load_ksyms(s))
		return NULL;
	e = ksyms__find(s->ksyms, addr);
	return e ? ksyms__module(s->ksyms, e) : NULL;
}

/* --- perf maps ------------------------------------------------------------------------ */

static struct perfmap *find_map(struct symbolizer *s, const char *path, int *err)
{
	uint64_t k1 = hash_bytes(path, strlen(path)), v;
	bool taken = hmap__get(s->map_index, k1, 0, &v);
	struct perfmap *m;

	if (taken && !strcmp(perfmap__path(s->maps[v]), path))
		return s->maps[v];
	for (size_t i = 0; taken && i < s->nmaps; i++) {
		if (!strcmp(perfmap__path(s->maps[i]), path))
			return s->maps[i];
	}
	m = perfmap__load(path);
	if (!m) {
		*err = -errno;
		return NULL;
	}
	if (arr_grow(s->maps, s->cap_maps, s->nmaps + 1) ||
	    (!taken && hmap__put(s->map_index, k1, 0, s->nmaps))) {
		perfmap__free(m);
		*err = -ENOMEM;
		return NULL;
	}
	s->maps[s->nmaps++] = m;
	return m;
}

int symbolizer__perfmap(struct symbolizer *s, const char *map_path, uint64_t addr,
			struct sym_result *out)
{
	struct perfmap *m;
	const char *name;
	int err = 0;

	if (!out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	if (!s || !map_path)
		return -EINVAL;
	m = find_map(s, map_path, &err);
	if (!m)
		return err;
	name = perfmap__find(m, addr);
	/* A JIT keeps appending: a miss may be code written after we read the file. */
	if (!name && !perfmap__refresh(m))
		name = perfmap__find(m, addr);
	if (!name)
		return -ENOENT;
	return one_frame(out, name);
}
