/* SPDX-License-Identifier: MIT */
/* Decodes ring-buffer events into the profile; no BPF here, so tests can feed it. */
#ifndef EPROF_EVENTS_H
#define EPROF_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../model/profile.h"

struct proc_tracker;

enum callgraph_mode {
	CG_AUTO = 0, /* DWARF from a stack copy: complete stacks */
	CG_FP = 1,   /* frame pointers walked in BPF */
	CG_DWARF = 2,
};

struct event_ctx {
	struct profile *p;
	struct proc_tracker *tracker;
	enum callgraph_mode cg;
	uint32_t kernel_obj; /* profile object of the kernel */
	uint64_t samples;    /* samples decoded */
	uint64_t first_ts, last_ts;
	/* Called when a target process has exited (group dead). */
	void (*on_exit)(void *arg, uint32_t pid, int32_t status);
	void *arg;
	const char *proc_root; /* "/proc" */
};

int events_init(struct event_ctx *c, struct profile *p, struct proc_tracker *t,
		enum callgraph_mode cg);
/* Returns 0; malformed events are counted (STAT_DECODE_ERR), never fatal. */
int events_handle(struct event_ctx *c, const void *data, size_t size);
/* Fills comm, cmdline and ppid of a process from /proc (at attach or exec). */
void events_read_proc_info(struct event_ctx *c, uint32_t pid, uint64_t ts);

#endif
