// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "profile.h"

const char *const profile_stat_names[STAT_MAX] = {
	[STAT_SAMPLES_LOST] = "samples_lost",
	[STAT_KSTACK_ERR] = "kernel_stack_errors",
	[STAT_USTACK_ERR] = "user_stack_errors",
	[STAT_UNWIND_NO_CFI] = "unwind_no_cfi",
	[STAT_UNWIND_TOO_DEEP] = "unwind_too_deep",
	[STAT_UNWIND_READ_FAULT] = "unwind_read_fault",
	[STAT_UNWIND_BAD_FRAME] = "unwind_bad_frame",
	[STAT_UNKNOWN_FRAMES] = "unknown_frames",
	[STAT_UNMAPPED_ADDR] = "unmapped_addresses",
	[STAT_EVENTS_LOST] = "events_lost",
	[STAT_DECODE_ERR] = "decode_errors",
	[STAT_OFFCPU_SEEN] = "offcpu_intervals",
	[STAT_OFFCPU_SHORT] = "offcpu_short_skipped",
	[STAT_OFFCPU_LOST] = "offcpu_events_lost",
	[STAT_OFFCPU_NO_STACK] = "offcpu_no_stack",
	[STAT_CUDA_CALLS] = "cuda_api_calls",
	[STAT_CUDA_NOSTACK] = "cuda_launches_without_stack",
	[STAT_CUDA_LOST] = "cuda_events_lost",
	[STAT_GPU_RECORDS_LOST] = "gpu_records_lost",
	[STAT_GPU_BAD_RECORDS] = "gpu_bad_records",
	[STAT_REGIONS_LOST] = "regions_lost",
	[STAT_REGIONS_UNMATCHED] = "regions_unmatched",
	[STAT_PY_SAMPLES] = "python_samples",
	[STAT_PY_NO_TSTATE] = "python_no_thread_state",
	[STAT_PY_READ_ERR] = "python_frame_read_errors",
	[STAT_PY_TRUNC] = "python_stack_truncated",
	[STAT_PY_UNKNOWN] = "python_unknown_frames",
	[STAT_MEM_CALLS] = "mem_alloc_calls",
	[STAT_MEM_LOST] = "mem_events_lost",
	[STAT_MEM_UNTRACKED] = "mem_untracked_allocs",
	[STAT_OFFCPU_UNSAMPLED] = "offcpu_unsampled",
	[STAT_CUDA_UNTRACKED] = "cuda_calls_untracked",
	[STAT_CUDA_STALE] = "cuda_calls_stale",
	[STAT_GPU_ZERO_TIME] = "gpu_records_zero_time",
	[STAT_GPU_INVERTED_TIME] = "gpu_records_inverted_time",
	[STAT_GPU_FOREIGN_CLOCK] = "gpu_records_foreign_clock",
	[STAT_GPU_BUFFER_ERRORS] = "gpu_buffer_errors",
	[STAT_UNWIND_SCANNED] = "unwind_scanned",
	[STAT_IO_CALLS] = "io_calls",
	[STAT_IO_LOST] = "io_events_lost",
	[STAT_IO_NO_STACK] = "io_no_stack",
	[STAT_IO_ERRORS] = "io_call_errors",
};

#define STACK_MEMO_SLOTS 16

struct stack_memo {
	uint64_t epoch; /* stack_epoch + 1 when filled, 0 when empty */
	size_t n, cap;
	uint32_t *locs;
	uint32_t *nodes; /* nodes[i]: the node of locs[0..i] */
};

struct profile *profile__new(void)
{
	struct profile *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->strs = strtab__new();
	p->obj_index = hmap__new(64);
	p->loc_index = hmap__new(4096);
	p->stack_index = hmap__new(4096);
	p->proc_index = hmap__new(64);
	p->thread_index = hmap__new(64);
	if (!p->strs || !p->obj_index || !p->loc_index || !p->stack_index || !p->proc_index ||
	    !p->thread_index)
		goto err;
	/* id 0 of objects, locations and stacks is a placeholder, so 0 can mean "none". */
	if (!vec_push(p->objects) || !vec_push(p->locations) || !vec_push(p->stacks))
		goto err;
	p->objects.v[0].kind = OBJ_SPECIAL;
	p->loc_indexed = p->stack_indexed = true;
	return p;
err:
	profile__free(p);
	return NULL;
}

void profile__free(struct profile *p)
{
	if (!p)
		return;
	strtab__free(p->strs);
	hmap__free(p->obj_index);
	hmap__free(p->loc_index);
	hmap__free(p->stack_index);
	for (size_t i = 0; p->stack_memo && i < STACK_MEMO_SLOTS; i++) {
		free(p->stack_memo[i].locs);
		free(p->stack_memo[i].nodes);
	}
	free(p->stack_memo);
	hmap__free(p->proc_index);
	hmap__free(p->thread_index);
	hmap__free(p->meta_index);
	free(p->objects.v);
	free(p->locations.v);
	free(p->frames.v);
	free(p->stacks.v);
	free(p->samples.v);
	free(p->events.v);
	free(p->procs.v);
	free(p->threads.v);
	free(p->mappings.v);
	free(p->meta.v);
	free(p);
}

uint32_t profile__intern(struct profile *p, const char *s)
{
	uint32_t id = strtab__intern(p->strs, s);

	return id == UINT32_MAX ? 0 : id;
}

static uint64_t obj_k1(uint32_t path, uint32_t build_id)
{
	return (uint64_t)path << 32 | build_id;
}

static uint64_t obj_k2(uint32_t pid, uint8_t kind)
{
	return (uint64_t)pid << 8 | kind;
}

int64_t profile__object(struct profile *p, enum object_kind kind, const char *path,
			const char *build_id, uint32_t pid)
{
	uint32_t ps = strtab__intern(p->strs, path), bs = strtab__intern(p->strs, build_id);
	struct object *o;
	uint64_t id;

	if (ps == UINT32_MAX || bs == UINT32_MAX)
		return -ENOMEM;
	if (hmap__get(p->obj_index, obj_k1(ps, bs), obj_k2(pid, kind), &id))
		return id;
	o = vec_push(p->objects);
	if (!o)
		return -ENOMEM;
	o->path = ps;
	o->build_id = bs;
	o->pid = pid;
	o->kind = kind;
	id = p->objects.n - 1;
	if (hmap__put(p->obj_index, obj_k1(ps, bs), obj_k2(pid, kind), id))
		return -ENOMEM;
	return id;
}

static int index_locations(struct profile *p)
{
	for (size_t i = 1; i < p->locations.n; i++) {
		if (hmap__put(p->loc_index, p->locations.v[i].object, p->locations.v[i].addr, i))
			return -ENOMEM;
	}
	p->loc_indexed = true;
	return 0;
}

static int index_stacks(struct profile *p)
{
	for (size_t i = 1; i < p->stacks.n; i++) {
		if (hmap__put(p->stack_index, p->stacks.v[i].parent, p->stacks.v[i].loc, i))
			return -ENOMEM;
	}
	p->stack_indexed = true;
	return 0;
}

int64_t profile__location(struct profile *p, uint32_t object, uint64_t addr)
{
	struct location *l;
	uint64_t id;

	if (!p->loc_indexed && index_locations(p))
		return -ENOMEM;
	if (hmap__get(p->loc_index, object, addr, &id))
		return id;
	l = vec_push(p->locations);
	if (!l)
		return -ENOMEM;
	l->object = object;
	l->addr = addr;
	id = p->locations.n - 1;
	if (hmap__put(p->loc_index, object, addr, id))
		return -ENOMEM;
	return id;
}

int64_t profile__stack_child(struct profile *p, uint32_t parent, uint32_t loc)
{
	struct stack_node *s;
	uint64_t id;

	if (!p->stack_indexed && index_stacks(p))
		return -ENOMEM;
	if (hmap__get(p->stack_index, parent, loc, &id))
		return id;
	/* Within one epoch every parent is in memory (the index was reset with the nodes). */
	if (parent && (parent < p->stacks_base || parent - p->stacks_base >= p->stacks.n))
		return -EINVAL;
	/*
	 * Deeper than any recording (a file with it would not read back): the
	 * stack stays at the cap, as the recorder's own frame limits do.
	 */
	if (parent && p->stacks.v[parent - p->stacks_base].depth >= PROFILE_MAX_STACK_DEPTH)
		return parent;
	s = vec_push(p->stacks);
	if (!s)
		return -ENOMEM;
	s->parent = parent;
	s->loc = loc;
	s->depth = parent ? p->stacks.v[parent - p->stacks_base].depth + 1 : 1;
	id = p->stacks_base + p->stacks.n - 1;
	if (hmap__put(p->stack_index, parent, loc, id))
		return -ENOMEM;
	return id;
}

int profile__forget_stacks(struct profile *p)
{
	p->stack_epoch++; /* the remembered nodes are gone with the index */
	struct hmap *fresh = hmap__new(1024);

	if (!fresh)
		return -ENOMEM;
	hmap__free(p->stack_index);
	p->stack_index = fresh;
	p->stack_indexed = true;
	p->stacks_base += p->stacks.n;
	p->stacks.n = 0;
	/* Give the memory back: the next epoch grows its own vector. */
	free(p->stacks.v);
	p->stacks.v = NULL;
	p->stacks.cap = 0;
	return 0;
}

int64_t profile__stack(struct profile *p, const uint32_t *locs, size_t n)
{
	int64_t node = 0;

	for (size_t i = 0; i < n; i++) {
		node = profile__stack_child(p, (uint32_t)node, locs[i]);
		if (node < 0)
			return node;
	}
	return node;
}

int64_t profile__stack_hint(struct profile *p, uint32_t hint, const uint32_t *locs, size_t n)
{
	struct stack_memo *m;
	int64_t node = 0;
	size_t k = 0;

	if (!p->stack_memo) {
		p->stack_memo = calloc(STACK_MEMO_SLOTS, sizeof(*p->stack_memo));
		if (!p->stack_memo)
			return profile__stack(p, locs, n);
	}
	m = &p->stack_memo[hash_mix64(hint) % STACK_MEMO_SLOTS];
	if (m->epoch == p->stack_epoch + 1) {
		size_t lim = n < m->n ? n : m->n;

		while (k < lim && m->locs[k] == locs[k])
			k++;
		if (k)
			node = m->nodes[k - 1];
	}
	if (n > m->cap) {
		size_t cap = n < 64 ? 64 : n;
		uint32_t *l = realloc(m->locs, cap * sizeof(*l)), *d;

		if (l)
			m->locs = l;
		d = l ? realloc(m->nodes, cap * sizeof(*d)) : NULL;
		if (d)
			m->nodes = d;
		if (!l || !d) { /* no memory to remember: intern without */
			m->epoch = 0;
			return profile__stack(p, locs, n);
		}
		m->cap = cap;
	}
	for (size_t i = k; i < n; i++) {
		node = profile__stack_child(p, (uint32_t)node, locs[i]);
		if (node < 0) {
			m->epoch = 0;
			return node;
		}
		m->locs[i] = locs[i];
		m->nodes[i] = (uint32_t)node;
	}
	m->n = n;
	m->epoch = p->stack_epoch + 1;
	return node;
}

int64_t profile__special(struct profile *p, const char *name)
{
	int64_t obj = profile__object(p, OBJ_SPECIAL, name, "", 0);
	int64_t loc;
	struct frame *f;

	if (obj < 0)
		return obj;
	loc = profile__location(p, (uint32_t)obj, 0);
	if (loc < 0 || p->locations.v[loc].frame_n)
		return loc;
	/* Synthetic frames carry their name at once: they need no symbolizer. */
	f = vec_push(p->frames);
	if (!f)
		return -ENOMEM;
	f->name = profile__intern(p, name);
	f->module = profile__intern(p, "[eprof]");
	f->kind = FRAME_SPECIAL;
	p->locations.v[loc].frame_first = p->frames.n - 1;
	p->locations.v[loc].frame_n = 1;
	return loc;
}

struct process *profile__proc(struct profile *p, uint32_t pid, bool create)
{
	struct process *pr;
	uint64_t idx;

	if (hmap__get(p->proc_index, pid, 0, &idx))
		return &p->procs.v[idx];
	if (!create)
		return NULL;
	pr = vec_push(p->procs);
	if (!pr)
		return NULL;
	pr->pid = pid;
	if (hmap__put(p->proc_index, pid, 0, p->procs.n - 1)) {
		p->procs.n--;
		return NULL;
	}
	return pr;
}

struct thread *profile__thread(struct profile *p, uint32_t pid, uint32_t tid, bool create)
{
	struct thread *t;
	uint64_t idx;

	if (hmap__get(p->thread_index, tid, 0, &idx))
		return &p->threads.v[idx];
	if (!create)
		return NULL;
	t = vec_push(p->threads);
	if (!t)
		return NULL;
	t->pid = pid;
	t->tid = tid;
	if (hmap__put(p->thread_index, tid, 0, p->threads.n - 1)) {
		p->threads.n--;
		return NULL;
	}
	return t;
}

int profile__add_sample(struct profile *p, const struct sample *s)
{
	struct sample *d = vec_push(p->samples);

	if (!d)
		return -ENOMEM;
	*d = *s;
	return 0;
}

int profile__add_event(struct profile *p, const struct event *e)
{
	struct event *d = vec_push(p->events);

	if (!d)
		return -ENOMEM;
	*d = *e;
	return 0;
}

static int cmp_event_ts(const void *a, const void *b, void *arg)
{
	const struct profile *p = arg;
	uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
	uint64_t x = p->events.v[i].ts, y = p->events.v[j].ts;

	if (x != y)
		return x < y ? -1 : 1;
	return i < j ? -1 : i > j;
}

void profile__sort_events(const struct profile *p, uint32_t *idx, size_t n)
{
	qsort_r(idx, n, sizeof(*idx), cmp_event_ts, (void *)p);
}

int profile__add_mapping(struct profile *p, const struct mapping *m)
{
	struct mapping *d = vec_push(p->mappings);

	if (!d)
		return -ENOMEM;
	*d = *m;
	return 0;
}

int profile__set_meta(struct profile *p, const char *key, const char *value)
{
	uint32_t k = profile__intern(p, key), v = profile__intern(p, value);
	uint64_t at;

	/* A file may hold any number of keys: they are found by hash, not by a scan. */
	if (!p->meta_index && !(p->meta_index = hmap__new(16)))
		return -ENOMEM;
	if (hmap__get(p->meta_index, k, 0, &at)) {
		p->meta.v[at].value = v;
		return 0;
	}
	if (!vec_push(p->meta))
		return -ENOMEM;
	if (hmap__put(p->meta_index, k, 0, p->meta.n - 1)) {
		p->meta.n--;
		return -ENOMEM;
	}
	p->meta.v[p->meta.n - 1] = (struct meta_kv){ .key = k, .value = v };
	return 0;
}

const char *profile__meta(const struct profile *p, const char *key)
{
	/* Later entries win: a file's end chunk overrides what its start chunk said. */
	for (size_t i = p->meta.n; i-- > 0;) {
		if (!strcmp(profile__str(p, p->meta.v[i].key), key))
			return profile__str(p, p->meta.v[i].value);
	}
	return NULL;
}

uint64_t profile__meta_u64(const struct profile *p, const char *key, uint64_t dflt)
{
	const char *v = profile__meta(p, key);
	char *end;
	unsigned long long x;

	if (!v || !*v)
		return dflt;
	x = strtoull(v, &end, 10);
	return *end ? dflt : x;
}

static bool proc_gone(const struct process *pr, uint64_t before)
{
	return pr->exit_ts && pr->exit_ts < before;
}

int profile__drop_exited(struct profile *p, uint64_t before)
{
	struct hmap *gone, *pi, *ti;
	size_t n = 0, k = 0;

	for (size_t i = 0; i < p->procs.n; i++)
		n += proc_gone(&p->procs.v[i], before);
	if (!n)
		return 0;
	gone = hmap__new(n);
	pi = hmap__new(p->procs.n - n + 16);
	ti = hmap__new(p->threads.n / 2 + 16);
	if (!gone || !pi || !ti)
		goto nomem;
	for (size_t i = 0; i < p->procs.n; i++)
		if (proc_gone(&p->procs.v[i], before) && hmap__put(gone, p->procs.v[i].pid, 0, 1))
			goto nomem;
	/* Build the new indexes first: on failure nothing has moved. */
	for (size_t i = 0; i < p->procs.n; i++)
		if (!proc_gone(&p->procs.v[i], before) && hmap__put(pi, p->procs.v[i].pid, 0, k++))
			goto nomem;
	k = 0;
	for (size_t i = 0; i < p->threads.n; i++) {
		uint64_t v;

		if (!hmap__get(gone, p->threads.v[i].pid, 0, &v) &&
		    hmap__put(ti, p->threads.v[i].tid, 0, k++))
			goto nomem;
	}
	k = 0;
	for (size_t i = 0; i < p->procs.n; i++)
		if (!proc_gone(&p->procs.v[i], before))
			p->procs.v[k++] = p->procs.v[i];
	p->procs.n = k;
	k = 0;
	for (size_t i = 0; i < p->threads.n; i++) {
		uint64_t v;

		if (!hmap__get(gone, p->threads.v[i].pid, 0, &v))
			p->threads.v[k++] = p->threads.v[i];
	}
	p->threads.n = k;
	hmap__free(p->proc_index);
	hmap__free(p->thread_index);
	p->proc_index = pi;
	p->thread_index = ti;
	hmap__free(gone);
	return (int)n;
nomem:
	hmap__free(gone);
	hmap__free(pi);
	hmap__free(ti);
	return -ENOMEM;
}

int profile__reindex(struct profile *p)
{
	for (size_t i = 1; i < p->objects.n; i++) {
		const struct object *o = &p->objects.v[i];

		if (hmap__put(p->obj_index, obj_k1(o->path, o->build_id), obj_k2(o->pid, o->kind), i))
			return -ENOMEM;
	}
	/* Location and stack indexes: built lazily, only if something interns into them. */
	p->loc_indexed = p->stack_indexed = false;
	for (size_t i = 0; i < p->procs.n; i++) {
		if (hmap__put(p->proc_index, p->procs.v[i].pid, 0, i))
			return -ENOMEM;
	}
	for (size_t i = 0; i < p->threads.n; i++) {
		if (hmap__put(p->thread_index, p->threads.v[i].tid, 0, i))
			return -ENOMEM;
	}
	return 0;
}

const char *profile__object_module(const struct profile *p, uint32_t object)
{
	const char *path, *slash;

	if (object >= p->objects.n)
		return "[unknown]";
	switch (p->objects.v[object].kind) {
	case OBJ_KERNEL:
		return "[kernel]";
	case OBJ_VDSO:
		return "[vdso]";
	case OBJ_ANON:
		return "[anon]";
	case OBJ_PERFMAP:
		return "[jit]";
	default:
		break;
	}
	path = profile__str(p, p->objects.v[object].path);
	slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}
