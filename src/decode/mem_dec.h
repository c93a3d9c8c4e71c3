/* SPDX-License-Identifier: MIT */
/*
 * Decodes the messages libeprof_mem.so sends on --mem=1's channel (src/agent/eprof_mem_proto.h)
 * into allocation and free events: the recorder's side of the channel without its sockets
 * (src/record/mem_chan.c feeds it; tests/fuzz/fuzz_memchan.c too). Every byte of a message
 * is the target's: lengths, counts and stack ids are checked before use, and what one
 * connection can make the decoder hold is capped.
 */
#ifndef EPROF_MEM_DEC_H
#define EPROF_MEM_DEC_H

#include <stddef.h>
#include <stdint.h>

struct profile;

/* Connections a decoder tells apart (ids 0..MEM_DEC_MAX_CONNS-1). */
#define MEM_DEC_MAX_CONNS 4096
/*
 * A process's stack ids count up from 1 on its connection (eprof_mem_stack.c): an id further
 * ahead of what the connection sent is refused, so that the table of ids of one connection
 * grows with what it sent, not with the largest id it names.
 */
#define MEM_DEC_ID_AHEAD 1024
/* An allocation's function (event flags) is below this: enum mem_func of bpf/eprof_abi.h. */
#define MEM_DEC_NFUNCS 10

struct mem_dec_ops {
	/*
	 * A new stack: its node in the profile (>= 0), or -errno. ips: n return addresses, leaf
	 * first (1 <= n <= EMEM_STACK_MAX); py: npy (code | entry bit, instr) pairs, leaf first
	 * (npy <= EMEM_PY_MAX); flags: EMEM_STACK_TRUNC, EMEM_STACK_PY_TRUNC.
	 */
	int64_t (*stack)(void *arg, uint32_t pid, uint32_t tid, uint64_t ns, const uint64_t *ips,
			 unsigned n, const uint64_t *py, unsigned npy, unsigned flags);
	/* A thread that sent records (NULL: none). */
	void (*thread)(void *arg, uint32_t pid, uint32_t tid, uint64_t ns);
	void *arg;
};

struct mem_dec_stats {
	uint64_t allocs, frees, stacks, truncated; /* truncated: allocations whose stack was */
	uint64_t bad;				   /* malformed messages and records */
	uint64_t dropped; /* stacks refused: ids far ahead of what the connection sent */
};

struct mem_dec_conn;

struct mem_dec {
	struct profile *p;
	struct mem_dec_ops ops;
	struct mem_dec_conn *conns; /* by connection id */
	size_t nconns;
	struct mem_dec_stats st;
};

void mem_dec_init(struct mem_dec *d, struct profile *p, const struct mem_dec_ops *ops);
/*
 * One message of connection conn, whose peer is pid (SO_PEERCRED's: the message's own pid
 * is never used). msg is 8-byte aligned. Returns 0 (a malformed message is counted in
 * st.bad and skipped), or -errno from the profile or ops->stack (-ENOMEM...).
 */
int mem_dec_message(struct mem_dec *d, uint32_t conn, uint32_t pid, const void *msg, size_t len);
/* The connection closed: its stack ids are forgotten (a new process connects anew). */
void mem_dec_closed(struct mem_dec *d, uint32_t conn);
/* Stack ids connection conn's table has room for (what it holds grows with them). */
size_t mem_dec_slots(const struct mem_dec *d, uint32_t conn);
void mem_dec_free(struct mem_dec *d);

#endif
