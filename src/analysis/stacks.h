/* SPDX-License-Identifier: MIT */
/*
 * Stacks as users see them. Samples point at address stacks; two addresses in
 * one function are one frame to a user, so stacks are re-keyed into a
 * symbolic trie (function name, module, and with `lines` file:line) and
 * grouped per (thread name, symbolic stack).
 */
#ifndef EPROF_STACKS_H
#define EPROF_STACKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hot.h"
#include "view.h"

/*
 * Frames a flamegraph, folded line or pprof sample shows of one stack at most, the leaf side
 * kept: far deeper than real stacks (the recorder writes at most ~770 locations of a few
 * frames each), and it keeps output linear in the input for crafted deep chains.
 */
#define STACK_MAX_FRAMES 4096

struct sym_node {
	uint32_t parent; /* 0 = root level */
	uint32_t frame;	 /* index into profile.frames: a representative frame */
	uint32_t depth;	 /* 1 at root level */
};

struct collapsed {
	uint32_t comm; /* thread name string id */
	uint32_t node; /* leaf symbolic node */
	uint64_t samples, weight;
	/* of those, the Python samples whose thread held the GIL ([0]) or did not ([1]) */
	uint64_t gil_samples[2], gil_weight[2];
};

/* Which samples of Python threads to keep by their GIL state (GIL_ANY keeps every sample). */
enum gil_filter { GIL_ANY = 0, GIL_HELD, GIL_NOT_HELD };

struct collapsed_set {
	struct collapsed *v;
	size_t n;
	struct sym_node *nodes; /* symbolic trie, node 0 unused */
	size_t nnodes;
};

/*
 * Groups samples by (thread name, symbolic stack), sorted by name then node. The [GIL] /
 * [no GIL] mark at the root of a Python sample's stack is no frame here: it becomes the
 * group's gil_samples / gil_weight, so a thread's graph is not split in two by it.
 */
int collapse_stacks(const struct profile *p, const struct sample_filter *f, bool lines,
		    struct collapsed_set *out);
/* The same, keeping only the samples of Python threads in GIL state gil (unless GIL_ANY). */
int collapse_stacks_gil(const struct profile *p, const struct sample_filter *f, bool lines,
			enum gil_filter gil, struct collapsed_set *out);
/*
 * The same, each stack read in view v (view_stack_locs()): p is not changed, so one profile
 * gives every view (the SVG flamegraph carries them all).
 */
int collapse_stacks_view(const struct profile *p, const struct sample_filter *f, bool lines,
			 enum gil_filter gil, enum stack_view v, struct collapsed_set *out);
void collapsed_set__free(struct collapsed_set *c);

/*
 * Frames of a symbolic node, ROOT first. Returns how many were written (at
 * most max, the leaf side kept); *total gets the full depth.
 */
size_t collapsed_frames(const struct collapsed_set *c, const struct profile *p, uint32_t node,
			const struct frame **out, size_t max, size_t *total);

/*
 * Frames of an address stack node, ROOT first, inline frames expanded (outer before inner):
 * at most max, the leaf side kept. The walk stops at max unless total is wanted: *total gets
 * the full depth, which costs a walk to the root.
 */
size_t stack_frames(const struct profile *p, uint32_t node, const struct frame **out, size_t max,
		    size_t *total);

/* stack_frames LEAF first (the reports' "leaf <- caller" lists); 0 for node 0 or out of range. */
size_t stack_frames_leaf_first(const struct profile *p, uint32_t node, const struct frame **out,
			       size_t max);

/*
 * A frame's name as users read it: a Python frame is "qualname (file.py:LINE)" (the base name
 * of its file, the line of the sample), any other frame its name. Returns name or buf.
 */
const char *frame_display_name(const struct profile *p, const struct frame *f, char *buf,
			       size_t len);

/*
 * The frames a one-line stack shows, LEAF first: its first max frames, or, when its innermost
 * Python frame of the program's own code (py_file_is_library(); else its innermost Python
 * frame) lies beyond them, the first max - 2, then that Python frame and its caller;
 * *gap is then the index in out of the Python frame (frames were left out before it), else 0;
 * *more: whether frames beyond the last one shown were left out. Returns how many were written.
 */
size_t stack_shown_frames(const struct profile *p, uint32_t node, const struct frame **out,
			  size_t max, size_t *gap, bool *more);
/* The same choice among n frames already read, leaf first (a caller that filters them). */
size_t stack_pick_shown(const struct profile *p, const struct frame **all, size_t n,
			const struct frame **out, size_t max, size_t *gap, bool *more);

/* Whether a stack was cut short: its root (below a Python [GIL] marker) is a special frame
 * such as [truncated]. */
bool stack_truncated(const struct profile *p, uint32_t node);
/* stack_truncated of every stack node in one pass (calloc'd, stacks.n entries), or NULL for
 * -ENOMEM: for callers that ask about many nodes, where walks to the root would cost
 * nodes x depth. */
uint8_t *stacks_truncated(const struct profile *p);
/* Whether a stack's leaf frame has no name. */
bool stack_leaf_unknown(const struct profile *p, uint32_t node);

#endif
