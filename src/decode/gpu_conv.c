// SPDX-License-Identifier: MIT
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/eprof_gpu_proto.h"
#include "model/event.h"
#include "model/gpu_event.h"
#include "model/profile.h"
#include "sym/symbolizer.h"
#include "util/hmap.h"
#include "util/log.h"
#include "gpu_conv.h"

int gpu_conv_init(struct gpu_conv *c, struct profile *p)
{
	memset(c, 0, sizeof(*c));
	c->p = p;
	c->names = hmap__new(256);
	c->name_ids = hmap__new(256);
	c->cb_names = hmap__new(64);
	c->stats_by_pid = hmap__new(16);
	c->own_tids = hmap__new(16);
	c->bye = hmap__new(16);
	if (!c->names || !c->name_ids || !c->cb_names || !c->stats_by_pid || !c->own_tids ||
	    !c->bye) {
		gpu_conv_free(c);
		return -ENOMEM;
	}
	return 0;
}

void gpu_conv_free(struct gpu_conv *c)
{
	hmap__free(c->names);
	hmap__free(c->name_ids);
	hmap__free(c->cb_names);
	hmap__free(c->stats_by_pid);
	hmap__free(c->own_tids);
	hmap__free(c->bye);
	c->names = c->name_ids = c->cb_names = c->stats_by_pid = c->own_tids = c->bye = NULL;
}

bool gpu_conv_own_thread(const struct gpu_conv *c, uint32_t pid, uint32_t tid)
{
	uint64_t v;

	return c->own_tids && hmap__count(c->own_tids) && hmap__get(c->own_tids, pid, tid, &v);
}

/* CUpti_ActivityMemcpyKind -> enum gpu_copy_dir */
static unsigned copy_dir(uint8_t kind)
{
	switch (kind) {
	case 1:
	case 3:
		return GPU_COPY_HTOD; /* HTOD, HTOA */
	case 2:
	case 4:
		return GPU_COPY_DTOH; /* DTOH, ATOH */
	case 5:
	case 6:
	case 7:
	case 8:
		return GPU_COPY_DTOD; /* ATOA, ATOD, DTOA, DTOD */
	case 9:
		return GPU_COPY_HTOH;
	case 10:
		return GPU_COPY_PTOP;
	default:
		return GPU_COPY_UNKNOWN;
	}
}

static uint32_t kernel_name(struct gpu_conv *c, const char *raw)
{
	uint32_t id = profile__intern(c->p, raw);
	uint64_t v;
	char *d;

	if (!id || hmap__get(c->names, id, 0, &v))
		return id ? (uint32_t)v : 0;
	d = raw[0] == '_' && raw[1] == 'Z' ? sym_demangle(raw) : NULL;
	v = d && *d ? profile__intern(c->p, d) : id;
	free(d);
	if (!v)
		v = id;
	hmap__put(c->names, id, 0, v);
	return (uint32_t)v;
}

/* The string after a record's fixed part: n bytes, NUL included; NULL when malformed. */
static const char *rec_str(const void *r, size_t fixed, size_t size, uint32_t n)
{
	const char *s = (const char *)r + fixed;

	if (size < fixed || !n || n > size - fixed || s[n - 1] != '\0')
		return NULL;
	return s;
}

static int conv_name(struct gpu_conv *c, uint32_t pid, const struct egpu_name *r, size_t size)
{
	const char *raw = rec_str(r, sizeof(*r), size, size >= sizeof(*r) ? r->name_len : 0);
	uint32_t id;

	if (!raw || !r->id)
		return -EINVAL;
	id = kernel_name(c, raw[0] ? raw : "[unnamed kernel]");
	return id ? hmap__put(c->name_ids, pid, r->id, id) : -ENOMEM;
}

static int conv_cbname(struct gpu_conv *c, uint32_t pid, const struct egpu_cbname *r, size_t size)
{
	const char *name = rec_str(r, sizeof(*r), size, size >= sizeof(*r) ? r->name_len : 0);
	uint32_t id;

	if (!name || !name[0])
		return -EINVAL;
	id = profile__intern(c->p, name);
	return id ? hmap__put(c->cb_names, pid, (uint64_t)r->domain << 32 | r->cbid, id) : -ENOMEM;
}

static int conv_info(struct gpu_conv *c, const struct egpu_info *r, size_t size)
{
	const char *path = rec_str(r, sizeof(*r), size, size >= sizeof(*r) ? r->path_len : 0);

	if (!path)
		return -EINVAL;
	c->status_procs[r->status < EGPU_ST_MAX ? r->status : EGPU_ST_SETUP]++;
	if (!c->cupti_version && r->cupti_version) {
		c->cupti_version = r->cupti_version;
		c->built_version = r->built_version;
		snprintf(c->cupti_path, sizeof(c->cupti_path), "%s", path);
	}
	return 0;
}

static int conv_kernel(struct gpu_conv *c, uint32_t pid, const struct egpu_kernel *k, size_t size)
{
	struct event e = {.kind = EVK_GPU_KERNEL, .pid = pid};
	uint64_t name = 0;

	if (size < offsetof(struct egpu_kernel, flags)) /* 72 bytes before the flags came */
		return -EINVAL;
	if (size >= sizeof(*k) && (k->flags & EGPU_KF_BEFORE_ATTACH))
		ev_set_kernel_before_attach(&e);
	if (k->name_id && !hmap__get(c->name_ids, pid, k->name_id, &name))
		c->bad++; /* its EGPU_NAME never came: the kernel is kept, unnamed */
	e.ts = k->r.start;
	e.dur = k->r.end > k->r.start ? k->r.end - k->r.start : 0;
	e.name = name ? (uint32_t)name : kernel_name(c, "[unnamed kernel]");
	ev_set_gpu_place(&e, k->device, k->stream, k->r.corr);
	/* the launch configuration, and what the occupancy needs besides the block size */
	ev_set_kernel_config(&e, (uint64_t)k->grid[0] * k->grid[1] * k->grid[2],
			     (uint32_t)((uint64_t)k->block[0] * k->block[1] * k->block[2]), k->regs,
			     k->smem);
	c->kernels++;
	return profile__add_event(c->p, &e);
}

/* The latest cumulative counters a process reported: what is new is added to the totals. */
static int conv_stats(struct gpu_conv *c, uint32_t pid, const struct egpu_stats *s, size_t size)
{
	const uint64_t now[GPU_CNT_MAX] = {
	    [GPU_CNT_DROPPED] = s->dropped,	       [GPU_CNT_ZERO] = s->zero_time,
	    [GPU_CNT_INVERTED] = s->inverted_time, [GPU_CNT_FOREIGN] = s->foreign_clock,
	    [GPU_CNT_BUF_ERR] = s->buffer_errors,
	};

	if (size < sizeof(*s))
		return -EINVAL;
	for (int i = 0; i < GPU_CNT_MAX; i++) {
		uint64_t old = 0;

		hmap__get(c->stats_by_pid, pid, i, &old);
		if (now[i] > old) {
			c->count[i] += now[i] - old;
			if (hmap__put(c->stats_by_pid, pid, i, now[i]))
				return -ENOMEM;
		}
	}
	return 0;
}

/*
 * A thread id of a process in another pid namespace (a container), as this process sees it:
 * the task whose NSpid line ends with it. 0 when no task of pid has it (the thread exited).
 * fresh: looked for again, not taken from what an earlier scan found.
 */
static uint32_t map_tid(struct gpu_ns_tids *c, uint32_t pid, uint32_t nstid, bool fresh)
{
	char path[320], line[256];
	struct dirent *de;
	uint64_t v = 0;
	DIR *d;

	if (!fresh && hmap__get(c->map, pid, nstid, &v))
		return (uint32_t)v;
	snprintf(path, sizeof(path), "%s/%u/task", c->proc_root, pid);
	d = opendir(path);
	while (d && (de = readdir(d))) {
		uint32_t tid = (uint32_t)strtoul(de->d_name, NULL, 10);
		FILE *fp;

		if (!tid)
			continue;
		snprintf(path, sizeof(path), "%s/%u/task/%u/status", c->proc_root, pid, tid);
		fp = fopen(path, "re");
		while (fp && fgets(line, sizeof(line), fp)) {
			char *last;
			uint32_t inner;

			if (strncmp(line, "NSpid:", 6))
				continue;
			line[strcspn(line, "\n")] = '\0';
			last = strrchr(line, '\t');
			last = last ? last : strrchr(line, ' ');
			inner = last ? (uint32_t)strtoul(last + 1, NULL, 10) : 0;
			if (inner) /* every task of the process at once: one scan per process */
				hmap__put(c->map, pid, inner, tid);
			if (inner == nstid)
				v = tid;
			break;
		}
		if (fp)
			fclose(fp);
	}
	if (d)
		closedir(d);
	if (!v)
		hmap__put(c->map, pid, nstid, 0); /* gone: not looked for again */
	return (uint32_t)v;
}

/* One EVK_GPU_DEVICE naming the device, then an EVK_GPU_DEVATTR per limit CUPTI reported. */
static int conv_device(struct gpu_conv *c, uint32_t pid, const struct egpu_device *d, size_t size)
{
	struct event e = {.kind = EVK_GPU_DEVICE, .pid = pid, .ts = d->r.start};
	const char *name = rec_str(d, sizeof(*d), size, size >= sizeof(*d) ? d->name_len : 0);
	int err;

	if (!name)
		return -EINVAL;
	ev_set_device(&e, d->device, 0);
	e.name = profile__intern(c->p, name[0] ? name : "[unnamed device]");
	err = profile__add_event(c->p, &e);
	e.kind = EVK_GPU_DEVATTR;
#define X(field, key)                                                                              \
	if (!err && d->field) {                                                                    \
		e.name = profile__intern(c->p, key);                                               \
		ev_set_device(&e, d->device, d->field);                                            \
		err = e.name ? profile__add_event(c->p, &e) : -ENOMEM;                             \
	}
	GPU_ATTR_LIST(X)
#undef X
	c->devices++;
	return err;
}

static int conv_one(struct gpu_conv *c, uint32_t pid, const struct egpu_rec *r, size_t size)
{
	struct event e = {.pid = pid, .ts = r->start};

	e.dur = r->end > r->start ? r->end - r->start : 0;
	switch (r->kind) {
	case EGPU_KERNEL:
		return conv_kernel(c, pid, (const void *)r, size);
	case EGPU_MEMCPY: {
		const struct egpu_memcpy *m = (const void *)r;

		if (size < sizeof(*m))
			return -EINVAL;
		e.kind = EVK_GPU_MEMCPY;
		ev_set_gpu_place(&e, m->device, m->stream, r->corr);
		ev_set_copy(&e, m->bytes, copy_dir(m->copy_kind));
		c->memcpys++;
		break;
	}
	case EGPU_MEMSET: {
		const struct egpu_memset *m = (const void *)r;

		if (size < sizeof(*m))
			return -EINVAL;
		e.kind = EVK_GPU_MEMSET;
		ev_set_gpu_place(&e, m->device, m->stream, r->corr);
		ev_set_copy(&e, m->bytes, 0);
		c->memsets++;
		break;
	}
	case EGPU_API: {
		const struct egpu_api *a = (const void *)r;
		uint64_t name = 0;

		if (size < sizeof(*a))
			return -EINVAL;
		e.kind = EVK_CUDA_CORR;
		e.tid = a->tid;
		e.dur = 0;
		ev_set_corr(&e, r->corr, a->cbid, a->domain);
		/* the function the callback was for: the join checks it against the probed call */
		if (hmap__get(c->cb_names, pid, (uint64_t)a->domain << 32 | a->cbid, &name))
			e.name = (uint32_t)name;
		c->apis++;
		break;
	}
	case EGPU_SYNC: {
		const struct egpu_sync *s = (const void *)r;

		if (size < sizeof(*s))
			return -EINVAL;
		e.kind = EVK_GPU_SYNC;
		ev_set_gpu_place(&e, s->context, s->stream, r->corr); /* CUPTI gives no device */
		ev_set_sync_type(&e, s->type);
		c->syncs++;
		break;
	}
	case EGPU_DEVICE:
		return conv_device(c, pid, (const void *)r, size);
	case EGPU_STATS:
		return conv_stats(c, pid, (const void *)r, size);
	case EGPU_NAME:
		return conv_name(c, pid, (const void *)r, size);
	case EGPU_CBNAME:
		return conv_cbname(c, pid, (const void *)r, size);
	case EGPU_INFO:
		return conv_info(c, (const void *)r, size);
	case EGPU_THREAD: {
		const struct egpu_thread *t = (const void *)r;

		return size < sizeof(*t) ? -EINVAL : hmap__put(c->own_tids, pid, t->tid, 1);
	}
	case EGPU_NOTE: {
		const struct egpu_note *n = (const void *)r;
		const char *text = rec_str(n, sizeof(*n), size, size >= sizeof(*n) ? n->text_len : 0);

		if (!text)
			return -EINVAL;
		log_msg(n->warn ? LOG_WARN : LOG_INFO, "cuda: pid %u: %s", pid, text);
		return 0;
	}
	case EGPU_BYE: {
		const struct egpu_bye *b = (const void *)r;

		if (size < sizeof(*b))
			return -EINVAL;
		return hmap__put(c->bye, pid, 0,
				 GPU_BYE_SEEN | (b->keep ? GPU_BYE_KEEP : 0) | (b->finalized & 0xff));
	}
	default:
		return 0; /* a newer library's record: skip it */
	}
	return profile__add_event(c->p, &e);
}

int gpu_conv_message(struct gpu_conv *c, const void *buf, size_t len, uint32_t peer_pid)
{
	const struct egpu_msg *m = buf;
	size_t off = sizeof(*m);
	uint32_t pid;
	int err;

	if (len < sizeof(*m) || m->magic != EGPU_MAGIC || m->version != EGPU_VERSION) {
		c->bad++;
		return -EINVAL;
	}
	pid = peer_pid ? peer_pid : m->pid;
	for (uint32_t i = 0; i < m->nrec; i++) {
		struct egpu_rec r;

		if (len - off < sizeof(r))
			goto bad;
		memcpy(&r, (const char *)buf + off, sizeof(r));
		if (r.size < sizeof(r) || r.size > len - off || r.size % 8)
			goto bad;
		if (((uintptr_t)buf + off) % 8) {
			/* records are read in place: the message must be 8-aligned */
			goto bad;
		}
		err = conv_one(c, pid, (const void *)((const char *)buf + off), r.size);
		if (err == -ENOMEM)
			return err;
		if (err)
			c->bad++;
		off += r.size;
	}
	return 0;
bad:
	c->bad++;
	return -EINVAL;
}

int gpu_ns_tids_init(struct gpu_ns_tids *t)
{
	t->proc_root = "/proc";
	t->map = hmap__new(64);
	return t->map ? 0 : -ENOMEM;
}

void gpu_ns_tids_free(struct gpu_ns_tids *t)
{
	hmap__free(t->map);
	t->map = NULL;
}

void gpu_ns_map_tids(struct gpu_ns_tids *t, void *buf, size_t len, uint32_t peer_pid)
{
	const struct egpu_msg *m = buf;
	size_t off = sizeof(*m);

	if (len < sizeof(*m) || m->magic != EGPU_MAGIC || !peer_pid || peer_pid == m->pid)
		return;
	for (uint32_t i = 0; i < m->nrec && len - off >= sizeof(struct egpu_rec); i++) {
		struct egpu_rec r;

		memcpy(&r, (char *)buf + off, sizeof(r));
		if (r.size < sizeof(r) || r.size > len - off || r.size % 8)
			return; /* malformed: the conversion counts it */
		if (r.kind == EGPU_THREAD && r.size >= sizeof(struct egpu_thread)) {
			struct egpu_thread th;

			memcpy(&th, (char *)buf + off, sizeof(th));
			th.tid = map_tid(t, peer_pid, th.tid, false);
			memcpy((char *)buf + off, &th, sizeof(th));
		}
		if (r.kind == EGPU_API && r.size >= sizeof(struct egpu_api)) {
			struct egpu_api a;

			memcpy(&a, (char *)buf + off, sizeof(a));
			/* a thread's first call: looked up again (an exited thread may have had its id) */
			a.tid = map_tid(t, peer_pid, a.tid, a.flags & EGPU_API_F_FIRST);
			memcpy((char *)buf + off, &a, sizeof(a));
		}
		off += r.size;
	}
}
