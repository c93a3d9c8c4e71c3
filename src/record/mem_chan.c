// SPDX-License-Identifier: MIT
/* --mem=1 through libeprof_mem.so's channel: see mem_chan.h and docs/memory.md. */
#include <errno.h>
#include <fcntl.h>
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

#include "decode/mem_dec.h"
#include "agent/eprof_mem_proto.h"
#include "model/event.h"
#include "model/profile.h"
#include "util/log.h"
#include "eprof_abi.h"
#include "events.h"
#include "mem_chan.h"
#include "sockdir.h"

#define CHAN_QUEUE_MAX (256u << 20) /* bytes received and not decoded: then the reads stop */
#define CHAN_MAX_CONNS MEM_DEC_MAX_CONNS
#define CHAN_MAX_UIDS 16
#define CHAN_MAX_ADOPT 64

_Static_assert(MEM_DEC_NFUNCS == MEM_NFUNCS, "the allocator functions of mem_dec.h");

/* A queue entry: [conn][len] then len bytes (padded to 8); len 0: the connection closed. */
struct qhdr {
	uint32_t conn, len;
};

struct mem_chan {
	int ep;
	/* One listening socket per user whose processes connect, each in its own 0700 directory. */
	struct sockdir ls[CHAN_MAX_UIDS];
	uint32_t ls_uid[CHAN_MAX_UIDS];
	unsigned nls; /* under mu */
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
	struct {
		int fd;
		bool ended;
		uint32_t pid; /* SO_PEERCRED at the accept: the only pid its records get */
	} conns[CHAN_MAX_CONNS];
	struct {
		int fd;
		uint32_t pid;
	} adopt[CHAN_MAX_ADOPT]; /* under mu: handed over by mem_chan_adopt, for the reader */
	unsigned nadopt;
	bool py_sent[CHAN_MAX_CONNS]; /* main thread */
	struct mem_dec dec; /* main thread */
	bool dec_on;
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

/* epoll's tag of listening socket i (a connection's is its id + 1) */
#define LISTENER (1ULL << 63)

/* The reader's thread: connection fd gets the next id; its records are pid's. */
static void conn_add(struct mem_chan *m, int fd, uint32_t pid)
{
	struct epoll_event e = { .events = EPOLLIN };

	m->conns[m->nconn].fd = fd;
	m->conns[m->nconn].ended = false;
	m->conns[m->nconn].pid = pid;
	e.data.u64 = m->nconn + 1;
	epoll_ctl(m->ep, EPOLL_CTL_ADD, fd, &e);
	__atomic_store_n(&m->nconn, m->nconn + 1, __ATOMIC_RELEASE);
	m->live++;
	m->st.conns++;
}

/*
 * Only the directory's user (and root) can reach listening socket i; SO_PEERCRED says so
 * again, and its pid is the one the connection's records get.
 */
static void accept_all(struct mem_chan *m, unsigned i)
{
	for (;;) {
		int fd = accept4(m->ls[i].lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		struct ucred cr = { 0 };
		socklen_t crlen = sizeof(cr);
		bool ok;

		if (fd < 0)
			return;
		pthread_mutex_lock(&m->mu);
		ok = !getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) && cr.pid > 0 &&
		     (!cr.uid || cr.uid == m->ls_uid[i]) && m->nconn < CHAN_MAX_CONNS;
		if (!ok)
			m->st.refused++;
		pthread_mutex_unlock(&m->mu);
		if (!ok) {
			close(fd); /* the process falls back to the markers */
			continue;
		}
		conn_add(m, fd, (uint32_t)cr.pid);
	}
}

/* Under mu, in the reader's thread: the connections mem_chan_adopt handed over. */
static void adopt_pending(struct mem_chan *m)
{
	for (unsigned i = 0; i < m->nadopt; i++) {
		if (m->nconn < CHAN_MAX_CONNS) {
			conn_add(m, m->adopt[i].fd, m->adopt[i].pid);
		} else {
			close(m->adopt[i].fd);
			m->st.refused++;
		}
	}
	m->nadopt = 0;
}

int mem_chan_adopt(struct mem_chan *m, int fd, uint32_t pid)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) || fcntl(fd, F_SETFD, FD_CLOEXEC)) {
		close(fd);
		return -EBADF;
	}
	pthread_mutex_lock(&m->mu);
	if (m->nadopt == CHAN_MAX_ADOPT || m->stop) {
		m->st.refused++;
		pthread_mutex_unlock(&m->mu);
		close(fd);
		return -ENOSPC;
	}
	m->adopt[m->nadopt].fd = fd;
	m->adopt[m->nadopt].pid = pid;
	m->nadopt++;
	pthread_mutex_unlock(&m->mu);
	return 0;
}

int mem_chan_listen(struct mem_chan *m, uint32_t uid, uint32_t gid, char *path, size_t len)
{
	struct epoll_event e = { .events = EPOLLIN };
	char prefix[40];
	unsigned i;
	int err;

	pthread_mutex_lock(&m->mu);
	for (i = 0; i < m->nls && m->ls_uid[i] != uid; i++)
		;
	pthread_mutex_unlock(&m->mu);
	if (i == CHAN_MAX_UIDS)
		return -ENOSPC;
	if (i == m->nls) {
		/* The recorder's pid in the name: the library talks only to that process. */
		snprintf(prefix, sizeof(prefix), "/tmp/eprof-mem-%d", (int)getpid());
		sockdir_sweep();
		err = sockdir_listen(&m->ls[i], prefix, uid, gid, 256);
		if (err)
			return err;
		m->ls_uid[i] = uid;
		e.data.u64 = LISTENER | i;
		if (epoll_ctl(m->ep, EPOLL_CTL_ADD, m->ls[i].lfd, &e)) {
			err = -errno;
			sockdir_remove(&m->ls[i]);
			return err;
		}
		pthread_mutex_lock(&m->mu);
		m->nls++;
		pthread_mutex_unlock(&m->mu);
	}
	if ((size_t)snprintf(path, len, "%s", m->ls[i].path) >= len)
		return -ENAMETOOLONG;
	return 0;
}

/* The recording has ended, or the channel is going: nothing is left to reach. */
static void remove_sockets(struct mem_chan *m)
{
	pthread_mutex_lock(&m->mu);
	for (unsigned i = 0; i < m->nls; i++)
		sockdir_remove(&m->ls[i]);
	pthread_mutex_unlock(&m->mu);
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
			if (ev[i].data.u64 & LISTENER)
				accept_all(m, (unsigned)(ev[i].data.u64 & ~LISTENER));
			else
				read_conn(m, (uint32_t)(ev[i].data.u64 - 1));
		}
		pthread_mutex_lock(&m->mu);
		adopt_pending(m);
		stop = m->stop && (!m->live || mono_ms() >= m->deadline);
		pthread_mutex_unlock(&m->mu);
		if (stop && n <= 0)
			break;
	}
	return NULL;
}

struct mem_chan *mem_chan_open(void)
{
	struct mem_chan *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	m->ep = -1;
	for (unsigned i = 0; i < CHAN_MAX_UIDS; i++)
		sockdir_init(&m->ls[i]);
	pthread_mutex_init(&m->mu, NULL);
	pthread_cond_init(&m->cv, NULL);
	m->ep = epoll_create1(EPOLL_CLOEXEC);
	if (m->ep < 0)
		goto fail;
	if (pthread_create(&m->th, NULL, reader, m))
		goto fail;
	m->th_ok = true;
	return m;
fail:
	log_debug("mem: no channel: %s", strerror(errno));
	mem_chan_free(m);
	return NULL;
}

/* A new stack from the decoder: the same event as the probes' (their py records appended). */
static int64_t chan_stack(void *arg, uint32_t pid, uint32_t tid, uint64_t ns, const uint64_t *ips,
			  unsigned n, const uint64_t *py, unsigned npy, unsigned flags)
{
	static _Alignas(8) uint8_t buf[sizeof(struct ev_stack) + EMEM_STACK_MAX * 8 +
				       EMEM_PY_MAX * sizeof(struct py_frame_rec) +
				       sizeof(struct py_trailer)];
	struct event_ctx *c = arg;
	struct ev_stack *st = (struct ev_stack *)buf;
	struct ev_hdr eh = { 0 };
	size_t avail;
	int64_t node;

	if (!n || n > EMEM_STACK_MAX || npy > EMEM_PY_MAX)
		return -EINVAL;
	memset(st, 0, sizeof(*st));
	avail = (size_t)n * 8;
	memcpy(st + 1, ips, avail);
	if (npy) {
		/* As bpf/python.bpf.h appends them: the records, then the trailer. */
		struct py_trailer tr = { .n = npy, .magic = PY_TRAILER_MAGIC };

		if (flags & EMEM_STACK_PY_TRUNC)
			tr.n |= PY_TRAILER_TRUNC;
		memcpy((uint8_t *)(st + 1) + avail, py, (size_t)npy * sizeof(struct py_frame_rec));
		avail += (size_t)npy * sizeof(struct py_frame_rec);
		memcpy((uint8_t *)(st + 1) + avail, &tr, sizeof(tr));
		avail += sizeof(tr);
		eh.flags |= STACK_F_PYTHON;
	}
	st->ustack_n = n;
	st->user_ip = ips[0];
	st->ustack_err = flags & EMEM_STACK_TRUNC ? -EFAULT : 0;
	eh.pid = pid;
	eh.tid = tid;
	eh.ts = ns;
	eh.flags |= SAMPLE_F_USER_REGS;
	node = events_stack(c, &eh, st, avail, 0);
	/* Counted by allocation (mem_dec), as the probes count each event. */
	if (node >= 0 && st->ustack_err)
		c->p->stats[STAT_USTACK_ERR]--;
	return node;
}

static void chan_thread(void *arg, uint32_t pid, uint32_t tid, uint64_t ns)
{
	events_note_thread(arg, pid, tid, NULL, ns);
}

static void copy_dec_stats(struct mem_chan *m)
{
	m->st.allocs = m->dec.st.allocs;
	m->st.frees = m->dec.st.frees;
	m->st.stacks = m->dec.st.stacks;
	m->st.truncated = m->dec.st.truncated;
	m->st.bad = m->dec.st.bad;
	m->st.dropped = m->dec.st.dropped;
}

static int decode(struct mem_chan *m, struct event_ctx *c, const uint8_t *q, size_t qlen)
{
	int err = 0;

	if (!m->dec_on || m->dec.ops.arg != c) {
		struct mem_dec_ops ops = { .stack = chan_stack, .thread = chan_thread, .arg = c };

		mem_dec_free(&m->dec);
		mem_dec_init(&m->dec, c->p, &ops);
		m->dec_on = true;
	}
	for (size_t off = 0; off + sizeof(struct qhdr) <= qlen && !err;) {
		struct qhdr qh;
		const struct emem_msg *h;

		memcpy(&qh, q + off, sizeof(qh));
		h = (const void *)(q + off + sizeof(qh));
		off += sizeof(qh) + ((qh.len + 7) & ~7u);
		if (!qh.len) {
			mem_dec_closed(&m->dec, qh.conn);
			continue;
		}
		if (qh.len >= sizeof(*h) && h->magic == EMEM_MSG_MAGIC && h->kind == EMEM_MSG_SYNC) {
			/* Everything before it is decoded: the process may exit. */
			int fd = qh.conn < CHAN_MAX_CONNS ? m->conns[qh.conn].fd : -1;

			if (fd >= 0)
				send(fd, "k", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
			continue;
		}
		/* The pid is SO_PEERCRED's, never the message's. */
		err = mem_dec_message(&m->dec, qh.conn,
				      qh.conn < CHAN_MAX_CONNS ? m->conns[qh.conn].pid : 0, h,
				      qh.len);
	}
	copy_dec_stats(m);
	return err;
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
	remove_sockets(m);
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
	for (unsigned i = 0; i < m->nadopt; i++)
		close(m->adopt[i].fd);
	remove_sockets(m);
	if (m->ep >= 0)
		close(m->ep);
	if (m->dec_on)
		mem_dec_free(&m->dec);
	free(m->q);
	free(m);
}
