/* SPDX-License-Identifier: MIT */
/*
 * --mem=1's channel (docs/memory.md, "Every call without traps"): libeprof_mem.so in each
 * target sends every allocation and free, with stacks it unwound itself, on a unix socket
 * (src/agent/eprof_mem_proto.h) in a 0700 directory of the target's user (sockdir.h): one
 * per user whose processes are profiled, removed when the recording ends. A thread of the recorder reads the socket into a
 * bounded queue (a full queue stops the reading, so the targets' sends block: nothing is
 * dropped); the main thread turns the queue into the same events as the allocator probes.
 */
#ifndef EPROF_MEM_CHAN_H
#define EPROF_MEM_CHAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_ctx;
struct mem_chan;

struct mem_chan_stats {
	uint64_t allocs, frees, stacks, truncated; /* truncated: allocations whose stack was */
	uint64_t conns, bad;			   /* bad: malformed messages */
	uint64_t refused; /* connections refused: another user's, or beyond CHAN_MAX_CONNS */
	uint64_t dropped; /* stacks refused: ids far ahead of what the connection sent */
};

/* A channel that listens nowhere yet (mem_chan_listen). NULL on failure. */
struct mem_chan *mem_chan_open(void);
/*
 * The path of the socket processes of uid connect to (EMEM_ENV_SOCK), made the first time:
 * /tmp/eprof-mem-PID-XXXXXX/sock, the directory 0700 and uid:gid's. Its peers are taken
 * when SO_PEERCRED says uid or root. Returns 0, -ENOSPC (16 users at most) or -errno.
 */
int mem_chan_listen(struct mem_chan *m, uint32_t uid, uint32_t gid, char *path, size_t len);
/*
 * Takes fd, eprof's end of a socket pair whose other end a -p target's library was handed
 * (inject_load's channel): no name to reach, in the target's mount namespace or any other.
 * Its records are pid's. The reader starts on it within its next poll (20 ms). 0, or -errno
 * (fd closed; counted as refused).
 */
int mem_chan_adopt(struct mem_chan *m, int fd, uint32_t pid);
/* Decodes what was received so far into c's profile. Returns 0 or -errno. */
int mem_chan_drain(struct mem_chan *m, struct event_ctx *c);
/*
 * Stops reading once every connection has ended (closed, or an end message) or wait_ms
 * passed, then decodes the rest. Returns 0 or -errno.
 */
int mem_chan_finish(struct mem_chan *m, struct event_ctx *c, int wait_ms);
/*
 * Sends each connected process that layout() knows to be CPython its interpreter layout
 * (struct py_proc), once: the library then adds Python frames to its stacks.
 */
void mem_chan_python(struct mem_chan *m,
		     bool (*layout)(void *arg, uint32_t pid, void *out, size_t len), void *arg);
const struct mem_chan_stats *mem_chan_stats(const struct mem_chan *m);
void mem_chan_free(struct mem_chan *m);

#endif
