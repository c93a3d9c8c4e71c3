/* SPDX-License-Identifier: MIT */
/* Decodes ring-buffer events into the profile; no BPF here, so tests can feed it. */
#ifndef EPROF_EVENTS_H
#define EPROF_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/profile.h"

struct proc_tracker;
struct ev_hdr;
struct ev_stack;
struct event_ctx;
struct py_frame_rec;

/* Decoder of one feature's ring-buffer events (kinds first..last); returns 0 or -errno. */
typedef int (*event_handler_fn)(struct event_ctx *c, void *arg, const void *data, size_t size);

#define EVENTS_MAX_HANDLERS 8

enum callgraph_mode {
	CG_AUTO = 0, /* DWARF from a stack copy: complete stacks */
	CG_FP = 1,   /* frame pointers walked in BPF */
	CG_DWARF = 2,
};

enum ev_cost_class { EV_COST_SAMPLE, EV_COST_PROC, EV_COST_FEATURE, EV_COST_MAX };

struct event_ctx {
	struct profile *p;
	struct proc_tracker *tracker;
	enum callgraph_mode cg;
	uint32_t kernel_obj; /* profile object of the kernel */
	uint64_t samples;    /* samples decoded */
	uint64_t first_ts, last_ts;
	/* Called when a target process has exited (group dead). */
	void (*on_exit)(void *arg, uint32_t pid, int32_t status);
	/* Called once, on the first stack with kernel frames (reading kallsyms can start). */
	void (*on_kernel_frames)(void *arg);
	bool kernel_seen;
	void *arg;
	const char *proc_root; /* "/proc" */
	unsigned int scan_words; /* stack words one unwind may scan (UNWIND_SCAN_WORDS) */
	struct {
		uint16_t first, last;
		event_handler_fn fn;
		void *arg;
	} handlers[EVENTS_MAX_HANDLERS];
	size_t nhandlers;
	/*
	 * Python frames (src/record/python.c), NULL when off: py_frames turns n
	 * frame records (leaf first) into locations, entry[i] set on the first
	 * frame of each eval call, and returns how many it filled or -errno;
	 * py_is_eval says whether pc lies in _PyEval_EvalFrameDefault.
	 */
	int (*py_frames)(void *arg, uint32_t pid, const struct py_frame_rec *r, uint32_t n,
			 uint32_t *locs, uint8_t *entry);
	bool (*py_is_eval)(void *arg, uint32_t pid, uint64_t pc);
	void *py_arg;
	/*
	 * The launched command waits in eprof's code for the go, then execs: its samples and
	 * off-CPU intervals that began before its exec are eprof's, with stacks of eprof's
	 * image, and are left out (events_before_launch_go). On a busy machine the child may
	 * first run after the go, so the go alone does not end them: the exec event does (the
	 * ring holds one task's events in the order it made them).
	 */
	uint32_t launch_pid;
	uint64_t launch_go_ns; /* when the go was given (CLOCK_MONOTONIC), 0 before */
	uint64_t launch_exec_ns; /* the launched pid's first exec, 0 before it is decoded */
	/* Time spent decoding, by what was decoded: where a recorder that falls behind goes. */
	uint64_t decode_ns[EV_COST_MAX], decoded[EV_COST_MAX];
};

int events_init(struct event_ctx *c, struct profile *p, struct proc_tracker *t,
		enum callgraph_mode cg);
/* Returns 0; malformed events are counted (STAT_DECODE_ERR), never fatal. */
int events_handle(struct event_ctx *c, const void *data, size_t size);
/* Routes event kinds first..last (enum eprof_event_kind) to fn. Returns 0 or -ENOSPC. */
int events_add_handler(struct event_ctx *c, uint16_t first, uint16_t last, event_handler_fn fn,
		       void *arg);
/*
 * Turns the stack part of an event (st, followed by avail bytes of ips and
 * stack copy, then Python frame records when h has STACK_F_PYTHON) into a
 * stack node of c->p, unwinding the copy with DWARF and putting the Python
 * frames in place of the eval frames. skip_user drops that many innermost
 * user frames. Returns the node (0 for an empty stack) or -errno (-EINVAL:
 * malformed).
 */
/* skip_user: drop the innermost frames that lie in the object of the first one. */
#define EVENTS_SKIP_OWN_OBJECT (-1)
int64_t events_stack(struct event_ctx *c, const struct ev_hdr *h, const struct ev_stack *st,
		     size_t avail, int skip_user);
/* Makes sure the thread (and its process, read from /proc) is known; comm16 may be NULL. */
void events_note_thread(struct event_ctx *c, uint32_t pid, uint32_t tid, const char *comm16,
			uint64_t ts);
/* Fills comm, cmdline and ppid of a process from /proc (at attach or exec). */
void events_read_proc_info(struct event_ctx *c, uint32_t pid, uint64_t ts);

/*
 * An exec that has not come this long after the go was lost (a full ring): the launched
 * pid's events are then taken from the go on, as they would be without the exec rule.
 */
#define EVENTS_LAUNCH_EXEC_WAIT_NS 2000000000ULL

/* Whether something of pid that began at ts is the launched command before its exec. */
static inline bool events_before_launch_go(const struct event_ctx *c, uint32_t pid, uint64_t ts)
{
	if (!pid || pid != c->launch_pid)
		return false;
	if (!c->launch_go_ns || ts < c->launch_go_ns)
		return true;
	if (c->launch_exec_ns)
		return ts < c->launch_exec_ns;
	return ts < c->launch_go_ns + EVENTS_LAUNCH_EXEC_WAIT_NS;
}

#endif
