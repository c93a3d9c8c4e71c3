// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fcntl.h>
#include <unistd.h>

#include "symbolizer.h"
#include "unwind/unwind.h"
#include "util/elf_layout.h"
#include "util/log.h"
#include "symbolize.h"

/* Per-object state: the path to open, or why the object cannot be opened. */
struct objstate {
	const char *path;
	int8_t usable; /* -1 unknown, 0 no, 1 yes */
	/* For code without symbols: function ranges from CFI, and offset -> vaddr. */
	bool fn_tried;
	struct cfi_table *cfi;
	struct elf_layout layout;
};

/*
 * File offset of the start of the function containing file offset off, from
 * the object's CFI (every function has an FDE even in a stripped binary).
 */
static bool function_start(struct objstate *os, uint64_t off, uint64_t *start_off)
{
	uint64_t start, end;
	int err = 0;

	uint64_t vaddr;

	if (!os->fn_tried) {
		int fd = open_regular(os->path);

		os->fn_tried = true;
		/* On demand: only the functions asked about get rows. */
		os->cfi = cfi_table__open(os->path, &err);
		if (fd >= 0) {
			elf_layout_read(fd, &os->layout);
			close(fd);
		}
	}
	if (!os->cfi || !elf_layout_vaddr(&os->layout, off, &vaddr) ||
	    !cfi_table__func_range(os->cfi, vaddr, &start, &end))
		return false;
	*start_off = off - (vaddr - start);
	return true;
}

static int add_frames(struct profile *p, struct location *l, const struct sym_result *r,
		      uint32_t module, uint8_t kind)
{
	uint32_t first = p->frames.n;

	for (uint32_t i = 0; i < r->n; i++) {
		struct frame *f = vec_push(p->frames);

		if (!f)
			return -ENOMEM;
		f->name = profile__intern(p, r->frames[i].name ? r->frames[i].name : "");
		f->file = profile__intern(p, r->frames[i].file ? r->frames[i].file : "");
		f->line = r->frames[i].line;
		f->module = module;
		f->kind = kind;
		f->inlined = r->frames[i].inlined;
	}
	l->frame_first = first;
	l->frame_n = r->n;
	return 0;
}

static int add_one(struct profile *p, struct location *l, uint32_t module, const char *name,
		   uint8_t kind)
{
	struct frame *f = vec_push(p->frames);

	if (!f)
		return -ENOMEM;
	f->name = profile__intern(p, name);
	f->module = module;
	f->kind = kind;
	l->frame_first = p->frames.n - 1;
	l->frame_n = 1;
	return 0;
}

/* "[unknown] module+0xOFFSET": the function's start when CFI tells it, else the address. */
static int add_unknown(struct profile *p, struct location *l, uint32_t module, struct objstate *os)
{
	uint64_t at = l->addr;
	char name[256];

	if (os && os->usable == 1 && !function_start(os, l->addr, &at))
		at = l->addr;
	snprintf(name, sizeof(name), "[unknown] %s+0x%" PRIx64, profile__str(p, module), at);
	return add_one(p, l, module, name, FRAME_UNKNOWN);
}

/*
 * The kernel's [uprobes] page holds the return trampoline of uretprobes: a function
 * probed for its return (eprof's --mem, --region, --cuda) returns there. Samples in it
 * are the profiler's own cost, named as such rather than as unknown code.
 */
static bool uprobes_page(const struct profile *p, const struct location *l)
{
	const struct object *o = &p->objects.v[l->object];

	return o->kind == OBJ_ANON && !strcmp(profile__str(p, o->path), "[uprobes]");
}

/*
 * Anonymous code the recorder gave one location per mapping (address = the
 * mapping's start) and no caller named: "[jit] anon@START".
 */
static bool jit_mapping(const struct profile *p, const struct location *l, uint64_t *start)
{
	const struct object *o = &p->objects.v[l->object];

	if (o->kind != OBJ_ANON || !o->pid || !strcmp(profile__str(p, o->path), "[uprobes]"))
		return false;
	*start = l->addr;
	return true;
}

static const char *usable_path(struct profile *p, struct objstate *os, uint32_t obj,
			       object_path_fn path_fn, void *ctx, struct symbolize_stats *st)
{
	const struct object *o = &p->objects.v[obj];
	char bid[128];

	if (os[obj].usable >= 0)
		return os[obj].usable ? os[obj].path : NULL;
	os[obj].path = path_fn ? path_fn(ctx, obj) : NULL;
	if (!os[obj].path) {
		/* Offline: the recorded path, only if it is still the same build. */
		os[obj].path = profile__str(p, o->path);
		if (o->build_id && (elf_read_build_id(os[obj].path, bid, sizeof(bid)) ||
				    strcmp(bid, profile__str(p, o->build_id)))) {
			log_debug("'%s' is gone or was rebuilt: its frames stay unnamed",
				  os[obj].path);
			st->objects_missing++;
			os[obj].usable = 0;
			return NULL;
		}
	}
	os[obj].usable = 1;
	return os[obj].path;
}

static int resolve(struct profile *p, struct symbolizer *sym, struct location *l,
		   const char *path, struct sym_result *r, uint32_t *module, uint8_t *kind,
		   object_path_fn path_fn, void *ctx)
{
	const struct object *o = &p->objects.v[l->object];
	const char *kmod;

	*kind = FRAME_USER;
	*module = profile__intern(p, profile__object_module(p, l->object));
	switch (o->kind) {
	case OBJ_ELF:
		if (!path)
			return -ENOENT;
		return symbolizer__elf(sym, path, profile__str(p, o->build_id), l->addr, r);
	case OBJ_KERNEL:
		*kind = FRAME_KERNEL;
		kmod = symbolizer__kernel_module(sym, l->addr);
		if (kmod) {
			char m[96];

			snprintf(m, sizeof(m), "[%s]", kmod);
			*module = profile__intern(p, m);
		}
		return symbolizer__kernel(sym, l->addr, r);
	case OBJ_PERFMAP:
		*kind = FRAME_JIT;
		/* The recorder's kept handle, else the recorded path (offline). */
		path = path_fn ? path_fn(ctx, l->object) : NULL;
		return symbolizer__perfmap(sym, path ? path : profile__str(p, o->path), l->addr, r);
	case OBJ_VDSO:
		return symbolizer__vdso(sym, l->addr, r);
	default:
		return -ENOENT;
	}
}

/* The mappings of perf-map objects, sorted by (object, start), built on first use. */
struct pm_maps {
	struct mapping *v;
	size_t n;
	bool built;
};

static int cmp_pm(const void *a, const void *b)
{
	const struct mapping *x = a, *y = b;

	if (x->object != y->object)
		return x->object < y->object ? -1 : 1;
	return x->start < y->start ? -1 : x->start > y->start;
}

/* The start of the mapping of a perf-map object that holds l's address. */
static bool perfmap_mapping(const struct profile *p, const struct symbolize_src *src,
			    struct pm_maps *pm, const struct location *l, uint64_t *start)
{
	size_t lo = 0, hi;

	/* The recorder knows the processes' maps; its profile keeps no mapping rows. */
	if (src->mapping_start)
		return src->mapping_start(src->ctx, p->objects.v[l->object].pid, l->addr, start);
	if (!pm->built) {
		pm->built = true;
		pm->v = malloc((p->mappings.n + 1) * sizeof(*pm->v));
		if (!pm->v)
			return false;
		for (size_t i = 0; i < p->mappings.n; i++)
			if (p->mappings.v[i].object < p->objects.n &&
			    p->objects.v[p->mappings.v[i].object].kind == OBJ_PERFMAP)
				pm->v[pm->n++] = p->mappings.v[i];
		qsort(pm->v, pm->n, sizeof(*pm->v), cmp_pm);
	}
	/* The last mapping of l's object starting at or below the address. */
	hi = pm->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		const struct mapping *m = &pm->v[mid];

		if (m->object < l->object || (m->object == l->object && m->start <= l->addr))
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo || pm->v[lo - 1].object != l->object || l->addr >= pm->v[lo - 1].end)
		return false;
	*start = pm->v[lo - 1].start;
	return true;
}

int symbolize_profile(struct profile *p, struct symbolizer *sym, object_path_fn path_fn, void *ctx,
		      struct symbolize_stats *st)
{
	const struct symbolize_src src = { .path = path_fn, .ctx = ctx };

	return symbolize_profile_src(p, sym, &src, st);
}

int symbolize_profile_src(struct profile *p, struct symbolizer *sym,
			  const struct symbolize_src *src, struct symbolize_stats *st)
{
	struct objstate *os = calloc(p->objects.n, sizeof(*os));
	object_path_fn path_fn = src->path;
	void *ctx = src->ctx;
	struct pm_maps pm = { 0 };
	int err = 0;

	memset(st, 0, sizeof(*st));
	if (!os)
		return -ENOMEM;
	for (size_t i = 0; i < p->objects.n; i++)
		os[i].usable = -1;
	for (size_t i = 1; i < p->locations.n; i++) {
		struct location *l = &p->locations.v[i];
		struct sym_result r = { 0 };
		const char *path = NULL;
		uint64_t start;
		uint32_t module;
		uint8_t kind;
		bool jit;

		if (l->frame_n)
			continue;
		st->locations++;
		if (p->objects.v[l->object].kind == OBJ_ELF)
			path = usable_path(p, os, l->object, path_fn, ctx, st);
		if (uprobes_page(p, l)) {
			err = add_one(p, l, profile__intern(p, "[uprobes]"), "[uretprobe trampoline]",
				      FRAME_SPECIAL);
			st->named++;
		} else if ((jit = jit_mapping(p, l, &start))) {
			char name[64];

			snprintf(name, sizeof(name), JIT_ANON_PREFIX "%#" PRIx64, start);
			/* Nothing names this code, not even who runs it: unknown. */
			err = add_one(p, l, profile__intern(p, "[jit]"), name, FRAME_UNKNOWN);
			st->unknown++;
		} else if (!resolve(p, sym, l, path, &r, &module, &kind, path_fn, ctx) && r.n) {
			err = add_frames(p, l, &r, module, kind);
			st->named++;
		} else if (p->objects.v[l->object].kind == OBJ_PERFMAP &&
			   perfmap_mapping(p, src, &pm, l, &start)) {
			/* Code the perf map does not list: one row per mapping, not per address. */
			char name[64];

			snprintf(name, sizeof(name), JIT_ANON_PREFIX "%#" PRIx64, start);
			err = add_one(p, l, module, name, FRAME_UNKNOWN);
			st->unknown++;
		} else {
			err = add_unknown(p, l, module,
					  p->objects.v[l->object].kind == OBJ_ELF ? &os[l->object] : NULL);
			st->unknown++;
		}
		sym_result__free(&r);
		if (err)
			break;
	}
	for (size_t i = 0; i < p->objects.n; i++)
		cfi_table__free(os[i].cfi);
	free(os);
	free(pm.v);
	return err;
}
