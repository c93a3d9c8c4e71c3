/* SPDX-License-Identifier: MIT */
/*
 * The critical path of a recording: from an end point walk backwards; while
 * a track (a thread; later a GPU stream) runs, it is on the path; when it
 * waited, follow the edge that ended the wait (a wakeup: to the waker at the
 * wakeup time; a thread's creation: to its creator) and go on from there,
 * down to the start.
 *
 * The graph is generic: tracks with sorted waits, and edges
 * (from track, from time) -> (to track, to time) of a kind. The off-CPU
 * events fill it (critpath_build); GPU activity adds its streams as tracks
 * (their kernels and copies run on them), launches as edges CPU -> stream and
 * synchronization calls as edges stream -> CPU (critpath_add_gpu, called by
 * critpath_build).
 */
#ifndef EPROF_CRITPATH_H
#define EPROF_CRITPATH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "offcpu.h"

enum cp_edge_kind {
	CP_EDGE_WAKEUP = 0,	/* a thread woke another (futex, pipe, socket ...) */
	CP_EDGE_CREATE = 1,	/* a thread created another */
	CP_EDGE_GPU_LAUNCH = 2, /* CPU launch call -> the work starting on an idle stream */
	CP_EDGE_GPU_SYNC = 3,	/* the GPU work that ended a synchronization -> the CPU thread */
};

enum cp_track_kind {
	CP_TRACK_THREAD = 0,
	CP_TRACK_GPU_STREAM = 1, /* pid = the process, tid = a number, gpu_stream = which */
};

/* A kernel, copy or set on a GPU stream track. */
struct cp_gpu_op {
	uint64_t start, end;
	uint32_t event; /* index in the profile's events */
	uint32_t stack; /* the CPU stack that launched it, 0 = unknown */
	uint8_t kind;	/* WAIT_GPU_COMPUTE or WAIT_GPU_COPY */
};

struct cp_edge {
	uint32_t from_track;
	uint64_t from_ts;
	uint32_t to_track;
	uint64_t to_ts;
	uint8_t kind; /* enum cp_edge_kind */
};

/* A wait of a track: off from start to end, ready (runnable) from `ready`. */
struct cp_wait {
	uint64_t start, ready, end;
	int64_t edge;	/* index in graph edges, -1 when nothing known ended it */
	uint32_t stack; /* where the track waited, 0 = unknown */
	uint8_t kind;	/* enum wait_kind */
};

struct cp_track {
	uint32_t pid, tid;
	uint8_t kind;		  /* enum cp_track_kind */
	uint64_t t_first, t_last; /* when it existed (first and last sign of life) */
	struct cp_wait *waits;	  /* sorted by start after critpath_finalize */
	size_t nwaits, cap;
	uint32_t *samples; /* indexes of its CPU samples, by time */
	size_t nsamples;
	uint64_t gpu_stream;   /* GPU stream tracks: device << 32 | stream */
	struct cp_gpu_op *ops; /* GPU stream tracks: by start, never overlapping */
	size_t nops, opcap;
};

/* Widens the span in which the track is known to exist. */
static inline void cp_track_seen(struct cp_track *t, uint64_t from, uint64_t to)
{
	if (from < t->t_first)
		t->t_first = from;
	if (to > t->t_last)
		t->t_last = to;
}

struct cp_graph {
	const struct profile *p;
	struct cp_track *tracks;
	size_t ntracks, cap;
	struct cp_edge *edges;
	size_t nedges, ecap;
	struct hmap *track_idx;	 /* (kind, pid << 32 | tid) -> track */
	uint64_t t_start, t_end; /* of the recording */
};

/* Building blocks: return an index (>= 0) or -errno. */
int64_t critpath_add_track(struct cp_graph *g, uint8_t kind, uint32_t pid, uint32_t tid);
int64_t critpath_find_track(const struct cp_graph *g, uint8_t kind, uint32_t pid, uint32_t tid);
int64_t critpath_add_edge(struct cp_graph *g, const struct cp_edge *e);
int critpath_add_wait(struct cp_graph *g, uint32_t track, const struct cp_wait *w);
/* Sorts waits, sets track lifetimes; call after adding and before walking. */
int critpath_finalize(struct cp_graph *g);

/* The graph of a profile's threads from its EVK_OFFCPU events and samples, plus its GPU. */
int critpath_build(const struct profile *p, struct cp_graph *g);
/*
 * GPU edges (src/analysis/critpath_gpu.c): a stream track per (pid, device, stream)
 * running its kernels and copies; each idle gap before an op is a wait ended by its
 * launch call (CP_EDGE_GPU_LAUNCH), or by stream order when the launch came earlier;
 * a CPU thread in a synchronization call waits for the last op that ended inside the
 * call (CP_EDGE_GPU_SYNC; on any stream of the process, or the synchronized stream when
 * CUPTI names it). Off-CPU waits inside a synchronization call give way to it. Leaves
 * the graph unfinalized. Returns 0 or -ENOMEM.
 */
int critpath_add_gpu(const struct profile *p, struct cp_graph *g);
void critpath_free(struct cp_graph *g);

/* The default end point: the launched command's exit, else the last sign of life. */
int critpath_default_end(const struct cp_graph *g, uint32_t *track, uint64_t *ts);

struct cp_segment {
	uint32_t track;
	uint64_t start, end;
	uint8_t kind;	/* enum wait_kind; WAIT_ONCPU while running */
	uint32_t stack; /* waits: where it waited; GPU work and launches: the launch stack */
	uint32_t gpu_event; /* GPU work: 1 + index of its event in the profile, else 0 */
};

struct cp_attr {
	uint32_t pid, tid;
	uint32_t stack; /* address stack node (a sample's, or a wait's) */
	uint8_t kind;	/* enum wait_kind */
	uint64_t ns;
	uint32_t gpu_event; /* as in cp_segment */
};

struct cp_path {
	struct cp_segment *segs; /* in time order */
	size_t nsegs;
	uint64_t start, end, total_ns;
	uint64_t by_kind[WAIT_KIND_MAX];
	/* The path's length spread over stacks: samples in running segments, waits' stacks. */
	struct cp_attr *attr;
	size_t nattr;
};

/*
 * Walks back from (track, end) to the recording's start (or to `start` when
 * non-zero). An entry point for regions: pass the region instance's thread
 * and end time.
 */
int critpath_walk(const struct cp_graph *g, uint32_t track, uint64_t end, uint64_t start,
		  struct cp_path *out);
void critpath_path_free(struct cp_path *path);

struct cp_func {
	uint32_t name, module; /* string ids */
	uint64_t ns;	       /* inclusive */
};

/* Functions on the path, inclusive ns, descending. Wait kinds count as "[sleep]" ... frames. */
int critpath_functions(struct profile *p, const struct cp_path *path, struct cp_func **out,
		       size_t *n);

/* Pseudo-samples of the path for flamegraphs (weight = ns on the path); adds leaf frames to p. */
int critpath_samples(struct profile *p, const struct cp_path *path, struct sample **out, size_t *n);

#endif
