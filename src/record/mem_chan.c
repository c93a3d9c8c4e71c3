// SPDX-License-Identifier: MIT
/* --mem=1 through libeprof_mem.so's channel: see mem_chan.h and docs/memory.md. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <linux/types.h>

#include "../inject/eprof_mem_proto.h"
#include "../model/event.h"
#include "../model/profile.h"
#include "../util/log.h"
#include "eprof_abi.h"
#include "events.h"
#include "mem_chan.h"
#include "mem_probe.h"

#define CHAN_QUEUE_MAX (256u << 20) /* bytes received and not decoded: then the reads stop */
#define CHAN_MAX_CONNS 4096
#define CHAN_MAX_UIDS 16
/*
 * A process's stack ids count up from 1 on its connection (eprof_mem_stack.c): an id further
 * ahead of what the connection sent is refused, so that the table of ids of one connection
 * grows with what it sent, not with the largest id it names.
 */
#define CHAN_ID_AHEAD 1024

/* A queue entry: [conn][len] then len bytes (padded to 8); len 0: the connection closed. */
struct qhdr {
	uint32_t conn, len;
};

struct conn_dec {
	int64_t *nodes; /* by stack id: the profile's stack node, -1 unknown */
	uint8_t *trunc;
	size_t cap;
	uint32_t nstacks; /* stacks taken on this connection */
};

struct mem_chan {
	int lfd, ep;
	pthread_t th;
	bool th_ok;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint8_t *q;
	size_t qlen, qcap;
	bool stop;	    /* finish: leave once every connection ended */
	uint64_t deadline;  /* ...or at this time */
	unsigned live;	    /* connections open and not ended */
	unsigned nconn;	    /* ids given */
	uint32_t uids[CHAN_MAX_UIDS]; /* besides root, the users whose processes may connect */
	unsigned nuids;
	struct {
		int fd;
		bool ended;
		uint32_t pid; /* SO_PEERCRED at the accept: the only pid its records get */
	} conns[CHAN_MAX_CONNS];
	bool py_sent[CHAN_MAX_CONNS]; /* main thread */
	struct conn_dec *dec; /* main thread: by connection id */
	size_t ndec;
	struct mem_chan_stats st;
};

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Under mu. Waits while the queue is full (the targets' sends then block). */
static bool q_push(struct mem_chan *m, uint32_t conn, const void *data, uint32_t len)
{
	size_t need = sizeof(struct qhdr) + ((len + 7) & ~7u);
	struct qhdr h = { conn, len };

	while (m->qlen + need > CHAN_QUEUE_MAX && m->qlen && !m->stop)
		pthread_cond_wait(&m->cv, &m->mu);
	if (m->qlen + need > m->qcap) {
		size_t cap = m->qcap ? m->qcap : 1 << 20;
		uint8_t *n;

		while (cap < m->qlen + need)
			cap *= 2;
		n = realloc(m->q, cap);
		if (!n)
			return false;
		m->q = n;
		m->qcap = cap;
	}
	memcpy(m->q + m->qlen, &h, sizeof(h));
	if (len)
		memcpy(m->q + m->qlen + sizeof(h), data, len);
	m->qlen += need;
	return true;
}

static void conn_close(struct mem_chan *m, uint32_t id)
{
	epoll_ctl(m->ep, EPOLL_CTL_DEL, m->conns[id].fd, NULL);
	close(m->conns[id].fd);
	m->conns[id].fd = -1;
	if (!m->conns[id].ended)
		m->live--;
	m->conns[id].ended = true;
	pthread_mutex_lock(&m->mu);
	q_push(m, id, NULL, 0);
	pthread_mutex_unlock(&m->mu);
}

/* Under mu. Root, or a user whose process is profiled (mem_chan_allow_uid). */
static bool uid_allowed(const struct mem_chan *m, uint32_t uid)
{
	if (!uid)
		return true;
	for (unsigned i = 0; i < m->nuids; i++)
		if (m->uids[i] == uid)
			return true;
	return false;
}

/*
 * The socket's name can be reached by every user: a peer is taken only when SO_PEERCRED says
 * it runs as root or as a profiled process's user, and its pid is the one its records get.
 */
static void accept_all(struct mem_chan *m)
{
	for (;;) {
		int fd = accept4(m->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		struct epoll_event e = { .events = EPOLLIN };
		struct ucred cr = { 0 };
		socklen_t crlen = sizeof(cr);
		bool ok;

		if (fd < 0)
			return;
		pthread_mutex_lock(&m->mu);
		ok = !getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) && cr.pid > 0 &&
		     uid_allowed(m, cr.uid) && m->nconn < CHAN_MAX_CONNS;
		if (!ok)
			m->st.refused++;
		pthread_mutex_unlock(&m->mu);
		if (!ok) {
			close(fd); /* the process falls back to the markers */
			continue;
		}
		m->conns[m->nconn].fd = fd;
		m->conns[m->nconn].ended = false;
		m->conns[m->nconn].pid = (uint32_t)cr.pid;
		e.data.u64 = m->nconn + 1;
		epoll_ctl(m->ep, EPOLL_CTL_ADD, fd, &e);
		__atomic_store_n(&m->nconn, m->nconn + 1, __ATOMIC_RELEASE);
		m->live++;
		m->st.conns++;
	}
}

int mem_chan_allow_uid(struct mem_chan *m, uint32_t uid)
{
	int err = 0;

	pthread_mutex_lock(&m->mu);
	if (!uid_allowed(m, uid)) {
		if (m->nuids < CHAN_MAX_UIDS)
			m->uids[m->nuids++] = uid;
		else
			err = -ENOSPC;
	}
	pthread_mutex_unlock(&m->mu);
	return err;
}

static void read_conn(struct mem_chan *m, uint32_t id)
{
	static _Alignas(8) uint8_t buf[EMEM_MSG_MAX + 64];

	for (int i = 0; i < 256; i++) {
		ssize_t n = recv(m->conns[id].fd, buf, sizeof(buf), MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			conn_close(m, id);
			return;
		}
		if ((size_t)n >= sizeof(struct emem_msg) &&
		    ((struct emem_msg *)buf)->kind == EMEM_MSG_END && !m->conns[id].ended) {
			m->conns[id].ended = true;
			m->live--;
		}
		pthread_mutex_lock(&m->mu);
		q_push(m, id, buf, (uint32_t)n);
		pthread_mutex_unlock(&m->mu);
	}
}

static void *reader(void *arg)
{
	struct mem_chan *m = arg;

	for (;;) {
		struct epoll_event ev[32];
		int n = epoll_wait(m->ep, ev, 32, 20);
		bool stop;

		for (int i = 0; i < n; i++) {
			if (!ev[i].data.u64)
				accept_all(m);
			else
				read_conn(m, (uint32_t)(ev[i].data.u64 - 1));
		}
		pthread_mutex_lock(&m->mu);
		stop = m->stop && (!m->live || mono_ms() >= m->deadline);
		pthread_mutex_unlock(&m->mu);
		if (stop && n <= 0)
			break;
	}
	return NULL;
}

struct mem_chan *mem_chan_open(char *name, size_t len)
{
	struct mem_chan *m = calloc(1, sizeof(*m));
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct epoll_event e = { .events = EPOLLIN, .data.u64 = 0 };
	int n;

	if (!m)
		return NULL;
	m->lfd = m->ep = -1;
	pthread_mutex_init(&m->mu, NULL);
	pthread_cond_init(&m->cv, NULL);
	n = snprintf(name, len, "eprof-mem-%d-%lx", (int)getpid(), (unsigned long)mono_ms());
	if (n <= 0 || (size_t)n >= len || (size_t)n >= sizeof(a.sun_path) - 1)
		goto fail;
	memcpy(a.sun_path + 1, name, (size_t)n);
	m->lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (m->lfd < 0 ||
	    bind(m->lfd, (struct sockaddr *)&a,
		 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n)) ||
	    listen(m->lfd, 256))
		goto fail;
	m->ep = epoll_create1(EPOLL_CLOEXEC);
	if (m->ep < 0 || epoll_ctl(m->ep, EPOLL_CTL_ADD, m->lfd, &e))
		goto fail;
	if (pthread_create(&m->th, NULL, reader, m))
		goto fail;
	m->th_ok = true;
	return m;
fail:
	log_debug("mem: no channel socket: %s", strerror(errno));
	mem_chan_free(m);
	return NULL;
}

static struct conn_dec *dec_of(struct mem_chan *m, uint32_t conn)
{
	if (conn >= m->ndec) {
		size_t n = conn + 16;
		struct conn_dec *d = realloc(m->dec, n * sizeof(*d));

		if (!d)
			return NULL;
		memset(d + m->ndec, 0, (n - m->ndec) * sizeof(*d));
		m->dec = d;
		m->ndec = n;
	}
	return &m->dec[conn];
}

/* A new stack: resolved now (its objects are mapped), kept as a node by its id. */
static int dec_stack(struct mem_chan *m, struct event_ctx *c, struct conn_dec *d,
		     const struct emem_msg *h, size_t len, uint32_t pid)
{
	static _Alignas(8) uint8_t buf[sizeof(struct ev_stack) + EMEM_STACK_MAX * 8 +
				       EMEM_PY_MAX * sizeof(struct py_frame_rec) +
				       sizeof(struct py_trailer)];
	const struct emem_stack *s = (const void *)(h + 1);
	struct ev_stack *st = (struct ev_stack *)buf;
	struct ev_hdr eh = { 0 };
	size_t avail;
	int64_t node;

	if (len < sizeof(*h) + sizeof(*s) ||
	    len < sizeof(*h) + sizeof(*s) + (size_t)h->n * 8 + (size_t)s->npy * 16 || !h->n ||
	    h->n > EMEM_STACK_MAX || s->npy > EMEM_PY_MAX || !s->id || s->id > (1u << 24))
		return -EINVAL;
	if (s->id > d->nstacks + CHAN_ID_AHEAD) {
		m->st.dropped++;
		return 0;
	}
	if (s->id >= d->cap) {
		size_t cap = d->cap ? d->cap : 1024;
		int64_t *nodes;
		uint8_t *tr;

		while (cap <= s->id)
			cap *= 2;
		nodes = realloc(d->nodes, cap * sizeof(*nodes));
		if (!nodes)
			return -ENOMEM;
		d->nodes = nodes;
		tr = realloc(d->trunc, cap);
		if (!tr)
			return -ENOMEM;
		d->trunc = tr;
		for (size_t i = d->cap; i < cap; i++)
			d->nodes[i] = -1;
		d->cap = cap;
	}
	memset(st, 0, sizeof(*st));
	avail = (size_t)h->n * 8;
	memcpy(st + 1, s + 1, avail);
	if (s->npy) {
		/* As bpf/python.bpf.h appends them: the records, then the trailer. */
		struct py_trailer tr = { .n = s->npy, .magic = PY_TRAILER_MAGIC };

		if (s->flags & EMEM_STACK_PY_TRUNC)
			tr.n |= PY_TRAILER_TRUNC;
		memcpy((uint8_t *)(st + 1) + avail, (const uint8_t *)(s + 1) + avail,
		       (size_t)s->npy * sizeof(struct py_frame_rec));
		avail += (size_t)s->npy * sizeof(struct py_frame_rec);
		memcpy((uint8_t *)(st + 1) + avail, &tr, sizeof(tr));
		avail += sizeof(tr);
		eh.flags |= STACK_F_PYTHON;
	}
	st->ustack_n = h->n;
	st->user_ip = ((const uint64_t *)(s + 1))[0];
	st->ustack_err = s->flags & EMEM_STACK_TRUNC ? -EFAULT : 0;
	eh.pid = pid;
	eh.tid = h->tid;
	eh.ts = s->ns;
	eh.flags |= SAMPLE_F_USER_REGS;
	node = events_stack(c, &eh, st, avail, 0);
	if (node < 0)
		return (int)node;
	/* Counted by allocation below, as the probes count each event. */
	if (st->ustack_err)
		c->p->stats[STAT_USTACK_ERR]--;
	d->nodes[s->id] = node;
	d->trunc[s->id] = !!(s->flags & EMEM_STACK_TRUNC);
	d->nstacks++;
	m->st.stacks++;
	return 0;
}

static int dec_recs(struct mem_chan *m, struct event_ctx *c, struct conn_dec *d,
		    const struct emem_msg *h, size_t len, uint32_t pid)
{
	const struct emem_rec *r = (const void *)(h + 1);

	if (len < sizeof(*h) + (size_t)h->n * sizeof(*r))
		return -EINVAL;
	if (h->n)
		events_note_thread(c, pid, h->tid, NULL, r[0].ns);
	for (unsigned i = 0; i < h->n; i++, r++) {
		struct event ev = { .ts = r->ns, .pid = pid, .tid = h->tid };
		int err;

		if (r->op == EMEM_OP_ALLOC) {
			ev.kind = EVK_ALLOC;
			if (r->stack && r->stack < d->cap && d->nodes[r->stack] >= 0) {
				ev.stack = d->nodes[r->stack];
				if (d->trunc[r->stack]) {
					c->p->stats[STAT_USTACK_ERR]++;
					m->st.truncated++;
				}
			} else {
				c->p->stats[STAT_USTACK_ERR]++;
				m->st.truncated++;
			}
			ev.flags = r->func % MEM_NFUNCS;
			ev_set_heap(&ev, r->ptr, r->size, mem_sample_weight(r->size, 1));
			m->st.allocs++;
		} else if (r->op == EMEM_OP_FREE) {
			ev.kind = EVK_FREE;
			ev_set_heap(&ev, r->ptr, 0, 0);
			m->st.frees++;
		} else {
			m->st.bad++;
			continue;
		}
		err = profile__add_event(c->p, &ev);
		if (err)
			return err;
	}
	return 0;
}

static int decode(struct mem_chan *m, struct event_ctx *c, const uint8_t *q, size_t qlen)
{
	for (size_t off = 0; off + sizeof(struct qhdr) <= qlen;) {
		struct qhdr qh;
		const struct emem_msg *h;
		struct conn_dec *d;
		uint32_t pid;
		int err = 0;

		memcpy(&qh, q + off, sizeof(qh));
		h = (const void *)(q + off + sizeof(qh));
		off += sizeof(qh) + ((qh.len + 7) & ~7u);
		d = dec_of(m, qh.conn);
		if (!d)
			return -ENOMEM;
		if (!qh.len) {
			/* Closed: its ids are not used again (a new process connects anew). */
			free(d->nodes);
			free(d->trunc);
			memset(d, 0, sizeof(*d));
			continue;
		}
		if (qh.len < sizeof(*h) || h->magic != EMEM_MSG_MAGIC) {
			m->st.bad++;
			continue;
		}
		if (h->kind == EMEM_MSG_SYNC) {
			/* Everything before it is decoded: the process may exit. */
			int fd = qh.conn < CHAN_MAX_CONNS ? m->conns[qh.conn].fd : -1;

			if (fd >= 0)
				send(fd, "k", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
			continue;
		}
		/* The pid is SO_PEERCRED's, never the message's. */
		pid = qh.conn < CHAN_MAX_CONNS ? m->conns[qh.conn].pid : 0;
		if (!pid)
			err = -EINVAL;
		else if (h->kind == EMEM_MSG_STACK)
			err = dec_stack(m, c, d, h, qh.len, pid);
		else if (h->kind == EMEM_MSG_RECS)
			err = dec_recs(m, c, d, h, qh.len, pid);
		if (err == -EINVAL)
			m->st.bad++;
		else if (err)
			return err;
	}
	return 0;
}

int mem_chan_drain(struct mem_chan *m, struct event_ctx *c)
{
	uint8_t *q;
	size_t qlen, qcap;
	int err;

	pthread_mutex_lock(&m->mu);
	q = m->q;
	qlen = m->qlen;
	qcap = m->qcap;
	m->q = NULL;
	m->qlen = m->qcap = 0;
	pthread_cond_broadcast(&m->cv);
	pthread_mutex_unlock(&m->mu);
	err = decode(m, c, q, qlen);
	/* Keep the buffer for the next round when the reader has not started a new one. */
	pthread_mutex_lock(&m->mu);
	if (!m->q && q) {
		m->q = q;
		m->qcap = qcap;
		q = NULL;
	}
	pthread_mutex_unlock(&m->mu);
	free(q);
	return err;
}

int mem_chan_finish(struct mem_chan *m, struct event_ctx *c, int wait_ms)
{
	int err = 0;

	if (m->th_ok) {
		pthread_mutex_lock(&m->mu);
		m->stop = true;
		m->deadline = mono_ms() + (uint64_t)wait_ms;
		pthread_mutex_unlock(&m->mu);
		/* Drain while waiting: a full queue would stop the reader. */
		for (;;) {
			struct timespec ts = { 0, 5 * 1000 * 1000 };

			err = mem_chan_drain(m, c);
			if (err || !pthread_tryjoin_np(m->th, NULL))
				break;
			nanosleep(&ts, NULL);
		}
		if (err) {
			pthread_mutex_lock(&m->mu);
			m->deadline = 0;
			pthread_cond_broadcast(&m->cv);
			pthread_mutex_unlock(&m->mu);
			pthread_join(m->th, NULL);
		}
		m->th_ok = false;
	}
	if (!err)
		err = mem_chan_drain(m, c);
	if (m->live && !err)
		log_warn("mem: %u processes still connected after the record: their last records "
			 "are not in it", m->live);
	return err;
}

void mem_chan_python(struct mem_chan *m,
		     bool (*layout)(void *arg, uint32_t pid, void *out, size_t len), void *arg)
{
	unsigned n = __atomic_load_n(&m->nconn, __ATOMIC_ACQUIRE);

	for (unsigned i = 0; i < n; i++) {
		struct {
			struct emem_msg h;
			struct py_proc pp;
		} msg = { .h = { .magic = EMEM_MSG_MAGIC, .kind = EMEM_MSG_PYLAYOUT } };
		uint32_t pid = m->conns[i].pid;
		int fd = __atomic_load_n(&m->conns[i].fd, __ATOMIC_RELAXED);

		if (!pid || m->py_sent[i] || fd < 0 || !layout(arg, pid, &msg.pp, sizeof(msg.pp)))
			continue;
		msg.h.pid = pid;
		if (send(fd, &msg, sizeof(msg), MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)sizeof(msg))
			m->py_sent[i] = true;
	}
}

const struct mem_chan_stats *mem_chan_stats(const struct mem_chan *m)
{
	return &m->st;
}

void mem_chan_free(struct mem_chan *m)
{
	if (!m)
		return;
	if (m->th_ok) {
		pthread_mutex_lock(&m->mu);
		m->stop = true;
		m->deadline = 0;
		pthread_cond_broadcast(&m->cv);
		pthread_mutex_unlock(&m->mu);
		pthread_join(m->th, NULL);
	}
	for (unsigned i = 0; i < m->nconn; i++)
		if (m->conns[i].fd >= 0)
			close(m->conns[i].fd);
	if (m->lfd >= 0)
		close(m->lfd);
	if (m->ep >= 0)
		close(m->ep);
	for (size_t i = 0; i < m->ndec; i++) {
		free(m->dec[i].nodes);
		free(m->dec[i].trunc);
	}
	free(m->dec);
	free(m->q);
	free(m);
}
