// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../inject/eprof_gpu_proto.h"
#include "../model/gpu_event.h"
#include "../model/profile.h"
#include "../sym/symbolizer.h"
#include "../util/hmap.h"
#include "gpu_conv.h"

int gpu_conv_init(struct gpu_conv *c, struct profile *p)
{
	memset(c, 0, sizeof(*c));
	c->p = p;
	c->names = hmap__new(256);
	c->dropped_by_pid = hmap__new(16);
	if (!c->names || !c->dropped_by_pid) {
		gpu_conv_free(c);
		return -ENOMEM;
	}
	return 0;
}

void gpu_conv_free(struct gpu_conv *c)
{
	hmap__free(c->names);
	hmap__free(c->dropped_by_pid);
	c->names = c->dropped_by_pid = NULL;
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

static uint64_t dev_stream(uint32_t dev, uint32_t stream)
{
	return (uint64_t)dev << 32 | stream;
}

static int conv_kernel(struct gpu_conv *c, uint32_t pid, const struct egpu_kernel *k, size_t size)
{
	struct event e = {.kind = EVK_GPU_KERNEL, .pid = pid};
	char name[EGPU_NAME_MAX];
	size_t n = k->name_len;

	if (size < sizeof(*k) || n > size - sizeof(*k) || n > sizeof(name))
		return -EINVAL;
	memcpy(name, k + 1, n);
	name[n ? n - 1 : 0] = '\0';
	e.ts = k->r.start;
	e.dur = k->r.end > k->r.start ? k->r.end - k->r.start : 0;
	e.name = kernel_name(c, name[0] ? name : "[unnamed kernel]");
	e.a = dev_stream(k->device, k->stream);
	/* launch configuration: blocks << 32 | threads per block */
	e.b = (uint64_t)k->grid[0] * k->grid[1] * k->grid[2] << 32 |
	      (uint32_t)((uint64_t)k->block[0] * k->block[1] * k->block[2]);
	e.c = k->r.corr;
	/* what the occupancy needs besides the block size (flags 0: not recorded) */
	e.flags = k->regs > 0xffff ? 0xffff : (uint16_t)k->regs;
	e.tid = k->smem;
	c->kernels++;
	return profile__add_event(c->p, &e);
}

/* One EVK_GPU_DEVICE naming the device, then an EVK_GPU_DEVATTR per limit CUPTI reported. */
static int conv_device(struct gpu_conv *c, uint32_t pid, const struct egpu_device *d, size_t size)
{
	struct event e = {.kind = EVK_GPU_DEVICE, .pid = pid, .ts = d->r.start, .a = d->device};
	char name[EGPU_NAME_MAX];
	size_t n;
	int err;

	if (size < sizeof(*d))
		return -EINVAL;
	n = d->name_len;
	if (n > size - sizeof(*d) || n > sizeof(name))
		return -EINVAL;
	memcpy(name, d + 1, n);
	name[n ? n - 1 : 0] = '\0';
	e.name = profile__intern(c->p, name[0] ? name : "[unnamed device]");
	err = profile__add_event(c->p, &e);
	e.kind = EVK_GPU_DEVATTR;
#define X(field, key)                                                                              \
	if (!err && d->field) {                                                                    \
		e.name = profile__intern(c->p, key);                                               \
		e.b = d->field;                                                                    \
		err = e.name ? profile__add_event(c->p, &e) : -ENOMEM;                             \
	}
	GPU_ATTR_LIST(X)
#undef X
	c->devices++;
	return err;
}

static int conv_one(struct gpu_conv *c, uint32_t pid, const struct egpu_rec *r, size_t size)
{
	struct event e = {.pid = pid, .ts = r->start, .c = r->corr};

	e.dur = r->end > r->start ? r->end - r->start : 0;
	switch (r->kind) {
	case EGPU_KERNEL:
		return conv_kernel(c, pid, (const void *)r, size);
	case EGPU_MEMCPY: {
		const struct egpu_memcpy *m = (const void *)r;

		if (size < sizeof(*m))
			return -EINVAL;
		e.kind = EVK_GPU_MEMCPY;
		e.a = dev_stream(m->device, m->stream);
		e.b = m->bytes;
		e.flags = copy_dir(m->copy_kind);
		c->memcpys++;
		break;
	}
	case EGPU_MEMSET: {
		const struct egpu_memset *m = (const void *)r;

		if (size < sizeof(*m))
			return -EINVAL;
		e.kind = EVK_GPU_MEMSET;
		e.a = dev_stream(m->device, m->stream);
		e.b = m->bytes;
		c->memsets++;
		break;
	}
	case EGPU_API: {
		const struct egpu_api *a = (const void *)r;

		if (size < sizeof(*a))
			return -EINVAL;
		e.kind = EVK_CUDA_CORR;
		e.tid = a->tid;
		e.dur = 0;
		e.a = a->cbid;
		e.b = a->domain;
		c->apis++;
		break;
	}
	case EGPU_SYNC: {
		const struct egpu_sync *s = (const void *)r;

		if (size < sizeof(*s))
			return -EINVAL;
		e.kind = EVK_GPU_SYNC;
		e.a = dev_stream(s->context, s->stream);
		e.b = s->type;
		c->syncs++;
		break;
	}
	case EGPU_DEVICE:
		return conv_device(c, pid, (const void *)r, size);
	case EGPU_STATS: {
		const struct egpu_stats *s = (const void *)r;
		uint64_t old = 0;

		if (size < sizeof(*s))
			return -EINVAL;
		hmap__get(c->dropped_by_pid, pid, 0, &old);
		if (s->dropped > old) {
			c->dropped += s->dropped - old;
			return hmap__put(c->dropped_by_pid, pid, 0, s->dropped);
		}
		return 0;
	}
	default:
		return 0; /* a newer library's record: skip it */
	}
	return profile__add_event(c->p, &e);
}

int gpu_conv_message(struct gpu_conv *c, const void *buf, size_t len)
{
	const struct egpu_msg *m = buf;
	size_t off = sizeof(*m);
	int err;

	if (len < sizeof(*m) || m->magic != EGPU_MAGIC || m->version != EGPU_VERSION) {
		c->bad++;
		return -EINVAL;
	}
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
		err = conv_one(c, m->pid, (const void *)((const char *)buf + off), r.size);
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
