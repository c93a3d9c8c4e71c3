// SPDX-License-Identifier: MIT
/*
 * --mem=1's channel: the recorder's decoder (decode/mem_dec.c) on messages a target could
 * send, the layout check of the library (agent/eprof_mem_recv.h), and the socket's
 * directory (record/sockdir.c).
 */
#include "test_util.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <linux/types.h>

#include "eprof_abi.h"
#include "decode/mem_dec.h"
#include "agent/eprof_mem_proto.h"
#include "agent/eprof_mem_recv.h"
#include "model/event.h"
#include "record/sockdir.h"

struct msg {
	_Alignas(8) unsigned char buf[EMEM_MSG_MAX];
	size_t len;
};

static void msg_hdr(struct msg *m, unsigned kind, unsigned n, unsigned pid, unsigned tid)
{
	struct emem_msg h = { .magic = EMEM_MSG_MAGIC, .kind = kind, .n = n, .pid = pid, .tid = tid };

	memset(m, 0, sizeof(*m));
	memcpy(m->buf, &h, sizeof(h));
	m->len = sizeof(h);
}

static void msg_stack(struct msg *m, uint32_t id, unsigned nips, unsigned pid)
{
	struct emem_stack s = { .id = id, .ns = 1000 };

	msg_hdr(m, EMEM_MSG_STACK, nips, pid, 7);
	memcpy(m->buf + m->len, &s, sizeof(s));
	m->len += sizeof(s);
	for (unsigned i = 0; i < nips; i++) {
		uint64_t ip = 0x401000 + 16 * i;

		memcpy(m->buf + m->len, &ip, 8);
		m->len += 8;
	}
}

static void msg_rec(struct msg *m, unsigned op, uint64_t ptr, uint64_t size, uint32_t stack)
{
	struct emem_rec r = { .ptr = ptr, .ns = 2000, .size = size, .stack = stack, .op = op };
	struct emem_msg h;

	memcpy(&h, m->buf, sizeof(h));
	h.n++;
	memcpy(m->buf, &h, sizeof(h));
	memcpy(m->buf + m->len, &r, sizeof(r));
	m->len += sizeof(r);
}

struct ctx {
	struct profile *p;
	unsigned stacks;
	uint32_t last_pid;
};

static int64_t stack_cb(void *arg, uint32_t pid, uint32_t tid, uint64_t ns, const uint64_t *ips,
			unsigned n, const uint64_t *py, unsigned npy, unsigned flags)
{
	struct ctx *c = arg;
	uint32_t locs[EMEM_STACK_MAX];
	int64_t obj = profile__object(c->p, OBJ_ANON, "[anon]", NULL, 0);

	assert_true(obj > 0);
	for (unsigned i = 0; i < n; i++)
		locs[i] = (uint32_t)profile__location(c->p, (uint32_t)obj, ips[i]);
	c->stacks++;
	c->last_pid = pid;
	return profile__stack(c->p, locs, n);
}

static void setup_dec(struct mem_dec *d, struct ctx *c)
{
	struct mem_dec_ops ops = { .stack = stack_cb, .arg = c };

	c->p = profile__new();
	assert_non_null(c->p);
	mem_dec_init(d, c->p, &ops);
}

/* The records are the peer's (SO_PEERCRED's pid), whatever pid the message names. */
static void test_pid_is_the_peers(void **state)
{
	struct mem_dec d;
	struct ctx c = { 0 };
	struct msg m;

	(void)state;
	setup_dec(&d, &c);
	msg_stack(&m, 1, 3, 1);
	assert_int_equal(mem_dec_message(&d, 0, 4242, m.buf, m.len), 0);
	assert_int_equal(c.stacks, 1);
	assert_int_equal(c.last_pid, 4242);
	msg_hdr(&m, EMEM_MSG_RECS, 0, 1, 7);
	msg_rec(&m, EMEM_OP_ALLOC, 0x1000, 1ULL << 40, 1);
	msg_rec(&m, EMEM_OP_FREE, 0x1000, 0, 0);
	assert_int_equal(mem_dec_message(&d, 0, 4242, m.buf, m.len), 0);
	assert_int_equal(c.p->events.n, 2);
	for (size_t i = 0; i < c.p->events.n; i++)
		assert_int_equal(c.p->events.v[i].pid, 4242);
	assert_int_equal(c.p->events.v[0].kind, EVK_ALLOC);
	assert_true(c.p->events.v[0].stack > 0);
	assert_int_equal(ev_alloc_size(&c.p->events.v[0]), 1ULL << 40);
	assert_int_equal(d.st.allocs, 1);
	assert_int_equal(d.st.frees, 1);
	assert_int_equal(d.st.truncated, 0);
	/* No peer pid: nothing is recorded. */
	assert_int_equal(mem_dec_message(&d, 0, 0, m.buf, m.len), 0);
	assert_int_equal(c.p->events.n, 2);
	assert_int_equal(d.st.bad, 1);
	mem_dec_free(&d);
	profile__free(c.p);
}

/* Malformed messages are counted and skipped; ids far ahead are refused, the table stays small. */
static void test_malformed_and_caps(void **state)
{
	struct mem_dec d;
	struct ctx c = { 0 };
	struct msg m;

	(void)state;
	setup_dec(&d, &c);
	msg_stack(&m, 1, 2, 9);
	m.buf[0] ^= 1; /* magic */
	assert_int_equal(mem_dec_message(&d, 0, 9, m.buf, m.len), 0);
	msg_stack(&m, 1, 2, 9);
	assert_int_equal(mem_dec_message(&d, 0, 9, m.buf, m.len - 1), 0); /* short */
	msg_stack(&m, 0, 2, 9); /* id 0 */
	assert_int_equal(mem_dec_message(&d, 0, 9, m.buf, m.len), 0);
	msg_stack(&m, 1, EMEM_STACK_MAX + 1, 9); /* too many frames */
	assert_int_equal(mem_dec_message(&d, 0, 9, m.buf, m.len), 0);
	msg_hdr(&m, EMEM_MSG_RECS, 0, 9, 7);
	msg_rec(&m, EMEM_OP_ALLOC, 0x1000, 8, 0);
	m.buf[6] = 200; /* n beyond the message */
	assert_int_equal(mem_dec_message(&d, 0, 9, m.buf, m.len), 0);
	assert_int_equal(mem_dec_message(&d, MEM_DEC_MAX_CONNS, 9, m.buf, m.len), 0);
	assert_int_equal(d.st.bad, 6);
	assert_int_equal(c.stacks, 0);
	assert_int_equal(c.p->events.n, 0);
	/* A stack id 2^24 - 1 on a fresh connection: refused, no table of 16M entries. */
	msg_stack(&m, (1u << 24) - 1, 2, 9);
	assert_int_equal(mem_dec_message(&d, 0, 9, m.buf, m.len), 0);
	assert_int_equal(d.st.dropped, 1);
	assert_true(mem_dec_slots(&d, 0) <= 2048);
	msg_stack(&m, MEM_DEC_ID_AHEAD, 2, 9);
	assert_int_equal(mem_dec_message(&d, 0, 9, m.buf, m.len), 0);
	assert_int_equal(c.stacks, 1);
	/* An unknown op: counted, the others go on. */
	msg_hdr(&m, EMEM_MSG_RECS, 0, 9, 7);
	msg_rec(&m, 77, 0x1000, 8, 0);
	msg_rec(&m, EMEM_OP_ALLOC, 0x2000, 8, MEM_DEC_ID_AHEAD);
	assert_int_equal(mem_dec_message(&d, 0, 9, m.buf, m.len), 0);
	assert_int_equal(c.p->events.n, 1);
	assert_int_equal(d.st.bad, 7);
	/* Closed: its ids are forgotten (an allocation naming one has no stack). */
	mem_dec_closed(&d, 0);
	assert_int_equal(mem_dec_slots(&d, 0), 0);
	assert_int_equal(mem_dec_message(&d, 0, 9, m.buf, m.len), 0);
	assert_int_equal(d.st.truncated, 1);
	mem_dec_free(&d);
	profile__free(c.p);
}

static void layout_msg(struct msg *m, const struct py_proc *p)
{
	msg_hdr(m, EMEM_MSG_PYLAYOUT, 0, 0, 0);
	memcpy(m->buf + m->len, p, sizeof(*p));
	m->len += sizeof(*p);
}

/* The library takes a layout only when every offset it reads lies in the bytes it may name. */
static void test_layout_bounds(void **state)
{
	struct py_proc ok = { .ts_cframe = PY_NONE, .cf_frame = PY_NONE, .ts_frame = 72,
			      .fr_previous = 8, .fr_code = 0, .fr_instr = 56, .fr_owner = 70,
			      .fr_is_entry = PY_NONE, .owner_cstack = 3, .fr_read = 72 };
	struct py_proc p, out;
	struct msg m;

	(void)state;
	layout_msg(&m, &ok);
	assert_true(emem_recv_layout(m.buf, m.len, &out));
	assert_int_equal(out.fr_instr, 56);
	assert_false(emem_recv_layout(m.buf, m.len - 1, &out));
	m.buf[4] = EMEM_MSG_RECS;
	assert_false(emem_recv_layout(m.buf, m.len, &out));
	p = ok, p.fr_instr = 65; /* 65 + 8 > 72 */
	layout_msg(&m, &p);
	assert_false(emem_recv_layout(m.buf, m.len, &out));
	p = ok, p.fr_read = 128;
	layout_msg(&m, &p);
	assert_false(emem_recv_layout(m.buf, m.len, &out));
	p = ok, p.fr_owner = 72; /* needed: owner_cstack is set */
	layout_msg(&m, &p);
	assert_false(emem_recv_layout(m.buf, m.len, &out));
	p = ok, p.fr_owner = PY_NONE;
	layout_msg(&m, &p);
	assert_false(emem_recv_layout(m.buf, m.len, &out));
	p = ok, p.ts_frame = EMEM_PY_TS_MAX - 7;
	layout_msg(&m, &p);
	assert_false(emem_recv_layout(m.buf, m.len, &out));
	p = ok, p.ts_cframe = 8, p.cf_frame = PY_NONE;
	layout_msg(&m, &p);
	assert_false(emem_recv_layout(m.buf, m.len, &out));
	p = ok, p.ts_cframe = 8, p.cf_frame = 16;
	layout_msg(&m, &p);
	assert_true(emem_recv_layout(m.buf, m.len, &out));
}

/* The socket's directory: 0700, the socket 0600, gone afterwards even if renamed. */
static void test_sockdir(void **state)
{
	struct sockdir s;
	char prefix[64], dir[sizeof(s.dir)], moved[sizeof(s.dir) + 8], gone[sizeof(moved) + 8];
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct stat sb;
	int fd;

	(void)state;
	snprintf(prefix, sizeof(prefix), "/tmp/eprof-test-sockdir-%d", (int)getpid());
	assert_int_equal(sockdir_listen(&s, prefix, getuid(), getgid(), 4), 0);
	assert_int_equal(stat(s.dir, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0700);
	assert_int_equal(lstat(s.path, &sb), 0);
	assert_true(S_ISSOCK(sb.st_mode));
	assert_int_equal(sb.st_mode & 0777, 0600);
	memcpy(a.sun_path, s.path, strlen(s.path) + 1);
	fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	close(fd);
	/* Its owner renames it and leaves a symlink to elsewhere in its place. */
	memcpy(dir, s.dir, sizeof(dir));
	snprintf(moved, sizeof(moved), "%s.moved", s.dir);
	assert_int_equal(rename(s.dir, moved), 0);
	assert_int_equal(symlink(test_tmpdir(), s.dir), 0);
	fd = open(test_path("sock"), O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	close(fd);
	sockdir_remove(&s);
	assert_int_equal(lstat(test_path("sock"), &sb), 0); /* not followed */
	assert_int_equal(lstat(dir, &sb), 0); /* the owner's symlink: not ours to remove */
	assert_true(S_ISLNK(sb.st_mode));
	assert_int_equal(unlink(dir), 0);
	snprintf(gone, sizeof(gone), "%s/sock", moved);
	assert_int_equal(lstat(gone, &sb), -1); /* removed where it went */
	assert_int_equal(rmdir(moved), 0);
	assert_int_equal(lstat(moved, &sb), -1);
	sockdir_remove(&s); /* idempotent */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_pid_is_the_peers),
	    cmocka_unit_test(test_malformed_and_caps),
	    cmocka_unit_test(test_layout_bounds),
	    cmocka_unit_test(test_sockdir),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
