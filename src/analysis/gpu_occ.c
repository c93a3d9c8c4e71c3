// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "model/event.h"
#include "gpu_occ.h"
#include "util/hmap.h"
#include "util/vec.h"

const char *gpu_occ_limiter_name(enum gpu_occ_limiter l)
{
	static const char *const n[] = {"-", "warps", "registers", "shared", "blocks"};

	return l < GPU_OCC_LIMITER_MAX ? n[l] : "-";
}

static uint64_t round_up(uint64_t x, uint64_t unit)
{
	return (x + unit - 1) / unit * unit;
}

/*
 * Registers are handed out per warp, in units of 256, from 4 sub-partitions of the SM's
 * register file (2 on compute capability 6.0): a warp's registers come from one of them, so
 * what is left over in each sub-partition is lost. A block whose warps (rounded up to the
 * sub-partitions) need more than the per-block limit cannot be launched at all.
 */
static uint64_t blocks_by_regs(const struct gpu_device_props *d, uint64_t warps, uint64_t regs)
{
	uint64_t parts = d->cc_major == 6 && d->cc_minor == 0 ? 2 : 4;
	uint64_t per_warp = round_up(regs * d->warp_size, 256);

	if (d->max_regs_per_block && per_warp * round_up(warps, parts) > d->max_regs_per_block)
		return 0;
	return d->max_regs_per_sm / parts / per_warp * parts / warps;
}

/*
 * Shared memory is handed out per block in units of 128 bytes (256 before compute capability
 * 8.0), and from 8.0 on the driver reserves 1 KiB of every block's shared memory for itself.
 */
static uint64_t blocks_by_smem(const struct gpu_device_props *d, uint64_t smem)
{
	uint64_t unit = d->cc_major >= 8 ? 128 : 256, reserved = d->cc_major >= 8 ? 1024 : 0;
	uint64_t per_block = round_up(smem + reserved, unit);

	return per_block ? d->max_smem_per_sm / per_block : UINT32_MAX;
}

int gpu_occupancy(const struct gpu_device_props *d, uint32_t threads, uint32_t regs, uint32_t smem,
		  struct gpu_occupancy *o)
{
	uint64_t warps;

	memset(o, 0, sizeof(*o));
	if (!d || !threads || !regs || !d->warp_size || !d->max_warps_per_sm ||
	    !d->max_blocks_per_sm || !d->max_regs_per_sm || !d->max_smem_per_sm || !d->cc_major)
		return -ENODATA;
	/*
	 * Limits come from the file: bounds far above any GPU's keep the arithmetic below free
	 * of overflow (a wrapped warp count would divide by zero). Outside them: no figure.
	 */
	if (d->warp_size > 1024 || d->max_warps_per_sm > 65536 || d->max_blocks_per_sm > 65536 ||
	    d->max_regs_per_sm > (1u << 24) || d->max_regs_per_block > (1u << 24) ||
	    d->max_smem_per_sm > (1ull << 32) || threads > (1u << 20) || regs > 65536)
		return -ENODATA;
	warps = (threads + d->warp_size - 1) / d->warp_size;
	o->by[GPU_OCC_WARPS] = d->max_warps_per_sm / warps;
	o->by[GPU_OCC_REGS] = blocks_by_regs(d, warps, regs);
	o->by[GPU_OCC_SMEM] = blocks_by_smem(d, smem);
	o->by[GPU_OCC_BLOCKS] = d->max_blocks_per_sm;
	/* Ties go to the first limit in this order: at 100% the block size is the limit. */
	o->limiter = GPU_OCC_WARPS;
	for (int l = GPU_OCC_REGS; l < GPU_OCC_LIMITER_MAX; l++)
		if (o->by[l] < o->by[o->limiter])
			o->limiter = l;
	o->blocks = o->by[o->limiter];
	o->warps = o->blocks * warps;
	o->occupancy = (double)o->warps / d->max_warps_per_sm;
	return 0;
}

static void set_attr(struct gpu_device_props *d, const char *key, uint64_t v)
{
#define X(field, k)                                                                                \
	if (!strcmp(key, k)) {                                                                     \
		d->field = v;                                                                      \
		return;                                                                            \
	}
	GPU_ATTR_LIST(X)
#undef X
	/* else a limit a newer recorder wrote: not needed here */
}

/* The device (pid, device) of v, added when new; index: (pid, device) -> its place in v. */
static struct gpu_device_props *get_dev(struct gpu_device_props **v, size_t *n, size_t *cap,
					struct hmap *index, uint32_t pid, uint32_t device)
{
	struct gpu_device_props *d;
	uint64_t at;

	if (hmap__get(index, pid, device, &at))
		return &(*v)[at];
	if (arr_grow(*v, *cap, *n + 1))
		return NULL;
	if (hmap__put
(index, pid, device, *n))
		return NULL;
	d = &(*v)[(*n)++];
	memset(d, 0, sizeof(*d));
	d->pid = pid;
	d->device = device;
	return d;
}

int gpu_devices_load(const struct profile *p, struct gpu_device_props **v, size_t *n)
{
	struct hmap *index = hmap__new(16);
	size_t cap = 0;

	*v = NULL;
	*n = 0;
	if (!index)
		return -ENOMEM;
	for (size_t i = 0; i < p->events.n; i++) {
		const struct event *e = &p->events.v[i];
		struct gpu_device_props *d;

		if (e->kind != EVK_GPU_DEVICE && e->kind != EVK_GPU_DEVATTR)
			continue;
		if (ev_device_id(e) > UINT32_MAX)
			continue; /* not a device id: a malformed file */
		d = get_dev(v, n, &cap, index, e->pid, (uint32_t)ev_device_id(e));
		if (!d) {
			free(*v);
			*v = NULL;
			*n = 0;
			hmap__free(index);
			return -ENOMEM;
		}
		if (e->kind == EVK_GPU_DEVICE)
			d->name = e->name;
		else
			set_attr(d, profile__str(p, e->name), ev_devattr_value(e));
	}
	hmap__free(index);
	return 0;
}

const struct gpu_device_props *gpu_device_find(const struct gpu_device_props *v, size_t n,
					       uint32_t pid, uint32_t device)
{
	/* a few devices per process, a few processes: a scan is enough */
	for (size_t i = 0; i < n; i++)
		if (v[i].pid == pid && v[i].device == device)
			return &v[i];
	return NULL;
}
