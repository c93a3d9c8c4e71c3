// SPDX-License-Identifier: MIT
/* --mem=1's channel messages -> events: see mem_dec.h and docs/memory.md. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/eprof_mem_proto.h"
#include "model/event.h"
#include "model/profile.h"
#include "mem_dec.h"

/* EMEM_STACK_MAX fits the message, and stack ids the id table (EMEM's ids stop at 2^24 - 1). */
#define MEM_DEC_MAX_ID (1u << 24)

struct mem_dec_conn {
	int64_t *nodes; /* by stack id: the profile's stack node, -1 unknown */
	uint8_t *trunc;
	size_t cap;
	uint32_t nstacks; /* stacks taken on this connection */
};

void mem_dec_init(struct mem_dec *d, struct profile *p, const struct mem_dec_ops *ops)
{
	memset(d, 0, sizeof(*d));
	d->p = p;
	d->ops = *ops;
}

static struct mem_dec_conn *conn_of(struct mem_dec *d, uint32_t conn)
{
	if (conn >= d->nconns) {
		size_t n = (size_t)conn + 16;
		struct mem_dec_conn *c = realloc(d->conns, n * sizeof(*c));

		if (!c)
			return NULL;
		memset(c + d->nconns, 0, (n - d->nconns) * sizeof(*c));
		d->conns = c;
		d->nconns = n;
	}
	return &d->conns[conn];
}

static int grow(struct mem_dec_conn *c, uint32_t id)
{
	size_t cap = c->cap ? c->cap : 1024;
	int64_t *nodes;
	uint8_t *tr;

	while (cap <= id)
		cap *= 2;
	nodes = realloc(c->nodes, cap * sizeof(*nodes));
	if (!nodes)
		return -ENOMEM;
	c->nodes = nodes;
	tr = realloc(c->trunc, cap);
	if (!tr)
		return -ENOMEM;
	c->trunc = tr;
	for (size_t i = c->cap; i < cap; i++) {
		c->nodes[i] = -1;
		c->trunc[i] = 0;
	}
	c->cap = cap;
	return 0;
}

/* A new stack: made a node now (its objects are mapped), kept by its id. */
static int dec_stack(struct mem_dec *d, struct mem_dec_conn *c, const struct emem_msg *h,
		     size_t len, uint32_t pid)
{
	const struct emem_stack *s = (const void *)(h + 1);
	const uint64_t *ips = (const void *)(s + 1);
	int64_t node;
	int err;

	if (len < sizeof(*h) + sizeof(*s) ||
	    len < sizeof(*h) + sizeof(*s) + (size_t)h->n * 8 + (size_t)s->npy * 16 || !h->n ||
	    h->n > EMEM_STACK_MAX || s->npy > EMEM_PY_MAX || !s->id || s->id >= MEM_DEC_MAX_ID)
		return -EINVAL;
	if (s->id > c->nstacks + MEM_DEC_ID_AHEAD) {
		d->st.dropped++;
		return 0;
	}
	if (s->id >= c->cap) {
		err = grow(c, s->id);
		if (err)
			return err;
	}
	node = d->ops.stack(d->ops.arg, pid, h->tid, s->ns, ips, h->n, ips + h->n, s->npy,
			    s->flags & (EMEM_STACK_TRUNC | EMEM_STACK_PY_TRUNC));
	if (node < 0)
		return (int)node;
	c->nodes[s->id] = node;
	c->trunc[s->id] = !!(s->flags & EMEM_STACK_TRUNC);
	c->nstacks++;
	d->st.stacks++;
	return 0;
}

static int dec_recs(struct mem_dec *d, struct mem_dec_conn *c, const struct emem_msg *h,
		    size_t len, uint32_t pid)
{
	const struct emem_rec *r = (const void *)(h + 1);

	if (len < sizeof(*h) + (size_t)h->n * sizeof(*r))
		return -EINVAL;
	if (h->n && d->ops.thread)
		d->ops.thread(d->ops.arg, pid, h->tid, r[0].ns);
	for (unsigned i = 0; i < h->n; i++, r++) {
		struct event ev = { .ts = r->ns, .pid = pid, .tid = h->tid };
		int err;

		if (r->op == EMEM_OP_ALLOC) {
			ev.kind = EVK_ALLOC;
			if (r->stack && r->stack < c->cap && c->nodes[r->stack] >= 0) {
				ev.stack = c->nodes[r->stack];
				if (c->trunc[r->stack]) {
					d->p->stats[STAT_USTACK_ERR]++;
					d->st.truncated++;
				}
			} else {
				d->p->stats[STAT_USTACK_ERR]++;
				d->st.truncated++;
			}
			ev.flags = r->func % MEM_DEC_NFUNCS;
			/* Every call is recorded: each block weighs its size. */
			ev_set_heap(&ev, r->ptr, r->size, r->size);
			d->st.allocs++;
		} else if (r->op == EMEM_OP_FREE) {
			ev.kind = EVK_FREE;
			ev_set_heap(&ev, r->ptr, 0, 0);
			d->st.frees++;
		} else {
			d->st.bad++;
			continue;
		}
		err = profile__add_event(d->p, &ev);
		if (err)
			return err;
	}
	return 0;
}

int mem_dec_message(struct mem_dec *d, uint32_t conn, uint32_t pid, const void *msg, size_t len)
{
	const struct emem_msg *h = msg;
	struct mem_dec_conn *c;
	int err = 0;

	if (len < sizeof(*h) || h->magic != EMEM_MSG_MAGIC || !pid || conn >= MEM_DEC_MAX_CONNS) {
		d->st.bad++;
		return 0;
	}
	if (h->kind != EMEM_MSG_STACK && h->kind != EMEM_MSG_RECS)
		return 0; /* END and SYNC: the channel's; nothing to decode */
	c = conn_of(d, conn);
	if (!c)
		return -ENOMEM;
	if (h->kind == EMEM_MSG_STACK)
		err = dec_stack(d, c, h, len, pid);
	else
		err = dec_recs(d, c, h, len, pid);
	if (err == -EINVAL) {
		d->st.bad++;
		err = 0;
	}
	return err;
}

void mem_dec_closed(struct mem_dec *d, uint32_t conn)
{
	struct mem_dec_conn *c;

	if (conn >= d->nconns)
		return;
	c = &d->conns[conn];
	free(c->nodes);
	free(c->trunc);
	memset(c, 0, sizeof(*c));
}

size_t mem_dec_slots(const struct mem_dec *d, uint32_t conn)
{
	return conn < d->nconns ? d->conns[conn].cap : 0;
}

void mem_dec_free(struct mem_dec *d)
{
	for (size_t i = 0; i < d->nconns; i++) {
		free(d->conns[i].nodes);
		free(d->conns[i].trunc);
	}
	free(d->conns);
	d->conns = NULL;
	d->nconns = 0;
}
