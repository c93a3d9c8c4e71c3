/* SPDX-License-Identifier: MIT */
/* Turns messages of the CUPTI injection library (src/inject/eprof_gpu_proto.h) into events. */
#ifndef EPROF_GPU_CONV_H
#define EPROF_GPU_CONV_H

#include <stddef.h>
#include <stdint.h>

struct profile;
struct hmap;

struct gpu_conv {
	struct profile *p;
	struct hmap *names; /* raw kernel name string id -> demangled name string id */
	uint64_t kernels, memcpys, memsets, apis, syncs, devices;
	uint64_t bad;	  /* malformed messages or records */
	uint64_t dropped; /* records the injection library lost (latest EGPU_STATS per pid, summed) */
	struct hmap *dropped_by_pid;
};

int gpu_conv_init(struct gpu_conv *c, struct profile *p);
void gpu_conv_free(struct gpu_conv *c);
/* Converts one message. Returns 0, -EINVAL for a malformed one (counted), -ENOMEM. */
int gpu_conv_message(struct gpu_conv *c, const void *buf, size_t len);

#endif
