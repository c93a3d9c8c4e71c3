// SPDX-License-Identifier: MIT
/*
 * record --io: every read-, write-, send- and receive-like system call of the targets with
 * its bytes, time and calling stack (bpf/io.bpf.h). Each call becomes one EVK_IO event named
 * after what its fd is: the BPF side describes an fd (a path, a pipe, a socket and its peer)
 * in an EV_IO_FILE before the first call on it, and again when the fd's file changed; the
 * description is kept here per (process, file) and joined to the calls.
 */
#include <arpa/inet.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <linux/types.h>

#include "model/io_event.h"
#include "eprof_abi.h"
#include "util/hmap.h"
#include "util/log.h"
#include "events.h"
#include "feature.h"
#include "profile.skel.h"
#include "record.h"

_Static_assert(sizeof(struct ev_io) == 24 + 8 + 8 + 8 + 8 + 16 + 40, "ev_io layout");
_Static_assert(sizeof(struct ev_io_file) == 24 + 8 + 8 + 8 + 16 + 32 + EPROF_IO_PATH,
	       "ev_io_file layout");
_Static_assert((int)IO_READ == IOC_READ && (int)IO_SENDFILE == IOC_SENDFILE &&
		   (int)IO_NCALLS == IOC_MAX,
	       "enum io_call and enum io_ev_call agree");
_Static_assert((int)IO_FT_REG == IOT_FILE && (int)IO_FT_SOCK == IOT_SOCKET &&
		   (int)IO_FT_DIR == IOT_DIR,
	       "enum io_file_type and enum io_ev_type agree");

/* The stack copy: I/O calls are made from shallow user stacks, as blocking calls are. */
#define IO_MAX_STACK_BYTES 8192

struct io_rec {
	struct hmap *files; /* (pid, struct file address) -> string id << 8 | type */
	uint32_t child;	    /* the launched command: its calls before exec are eprof's */
	uint64_t events, described;
};

static bool io_enabled(const struct record_opts *o)
{
	return o->io;
}

static void fmt_inet(char *buf, size_t len, const struct ev_io_file *e, const uint8_t *addr,
		     uint16_t port)
{
	char a[INET6_ADDRSTRLEN] = "?";

	inet_ntop(e->family == AF_INET ? AF_INET : AF_INET6, addr, a, sizeof(a));
	snprintf(buf, len, e->family == AF_INET6 ? "[%s]:%u" : "%s:%u", a, port);
}

static void describe_socket(char *buf, size_t len, const struct ev_io_file *e)
{
	const char *proto = e->protocol == IPPROTO_TCP ? "tcp" : e->protocol == IPPROTO_UDP ? "udp"
											   : "ip";
	char ep[80];

	if (e->family == AF_INET || e->family == AF_INET6) {
		/* The peer is what names a connection; an unconnected socket has only its port. */
		if (e->rport) {
			fmt_inet(ep, sizeof(ep), e, e->raddr, e->rport);
			snprintf(buf, len, "%s %s", proto, ep);
		} else {
			fmt_inet(ep, sizeof(ep), e, e->laddr, e->lport);
			snprintf(buf, len, "%s local %s", proto, ep);
		}
	} else if (e->family == AF_UNIX) {
		size_t n = e->path_len < 108 ? e->path_len : 108;
		char path[110];

		memcpy(path, e->path, n);
		path[n] = '\0';
		if (n && path[0] == '\0') /* abstract: @name */
			snprintf(buf, len, "unix @%.*s", (int)strnlen(path + 1, n - 1), path + 1);
		else if (n && path[0])
			snprintf(buf, len, "unix %s", path);
		else
			snprintf(buf, len, "unix socket:[%" PRIu64 "]", (uint64_t)e->ino);
	} else {
		snprintf(buf, len, "socket:[%" PRIu64 "] (family %u)", (uint64_t)e->ino, e->family);
	}
}

/* The components come leaf first, each NUL-terminated: joined root first. */
static void describe_path(char *buf, size_t len, const struct ev_io_file *e)
{
	const char *comp[IO_PATH_DEPTH];
	size_t n = 0, pos = 0, used = e->path_len < EPROF_IO_PATH ? e->path_len : EPROF_IO_PATH;

	while (pos < used && n < IO_PATH_DEPTH) {
		size_t l = strnlen(e->path + pos, used - pos);

		if (pos + l >= used)
			break; /* not terminated: a malformed event */
		comp[n++] = e->path + pos;
		pos += l + 1;
	}
	buf[0] = '\0';
	if (e->flags & IO_FILE_F_TRUNC)
		snprintf(buf, len, "...");
	for (size_t i = n; i-- > 0;) {
		size_t at = strlen(buf);

		snprintf(buf + at, len - at, "/%s", comp[i]);
	}
	if (!n)
		snprintf(buf, len, "/");
}

static int handle_file(struct event_ctx *c, struct io_rec *st, const void *data, size_t size)
{
	const size_t head = offsetof(struct ev_io_file, path);
	struct ev_io_file e = { 0 };
	char desc[1200];
	uint32_t id;

	if (size < head || size > sizeof(e))
		return -EINVAL;
	memcpy(&e, data, size);
	if (e.path_len > size - head)
		return -EINVAL;
	if (e.type == IO_FT_SOCK)
		describe_socket(desc, sizeof(desc), &e);
	else if (e.type == IO_FT_PIPE)
		snprintf(desc, sizeof(desc), "pipe:[%" PRIu64 "]", (uint64_t)e.ino);
	else
		describe_path(desc, sizeof(desc), &e);
	id = profile__intern(c->p, desc);
	if (!id)
		return -ENOMEM;
	st->described++;
	return hmap__put(st->files, e.h.pid, e.file, (uint64_t)id << 8 | (e.type & 0xff));
}

static int handle_io(struct event_ctx *c, struct io_rec *st, const void *data, size_t size)
{
	const struct ev_io *e = data;
	bool no_stack = e->h.flags & IO_EVF_NO_STACK;
	struct event ev = { 0 };
	uint64_t file = 0;
	int64_t node = 0;

	if (size < sizeof(*e) || e->call == 0 || e->call >= IO_NCALLS || e->h.ts < e->dur)
		return -EINVAL;
	/* The launched command before its exec: eprof's own wait for the go-ahead. */
	if (st->child && e->h.pid == st->child && !strncmp(e->comm, "eprof", sizeof(e->comm)))
		return 0;
	if (!no_stack) {
		node = events_stack(c, &e->h, &e->st, size - sizeof(*e), 0);
		if (node < 0)
			return (int)node;
	}
	ev.kind = EVK_IO;
	ev.ts = e->h.ts - e->dur;
	ev.dur = e->dur;
	ev.pid = e->h.pid;
	ev.tid = e->h.tid;
	ev.stack = (uint32_t)node;
	if (e->file && hmap__get(st->files, e->h.pid, e->file, &file)) {
		ev.name = (uint32_t)(file >> 8);
	} else {
		char buf[32];

		snprintf(buf, sizeof(buf), "fd %u", e->fd);
		ev.name = profile__intern(c->p, buf);
	}
	ev_set_io(&ev, e->call, (unsigned)(file & 0xff), no_stack, e->bytes, e->fd);
	events_note_thread(c, e->h.pid, e->h.tid, e->comm, e->h.ts);
	st->events++;
	return profile__add_event(c->p, &ev);
}

static int io_decode(struct event_ctx *c, void *arg, const void *data, size_t size)
{
	const struct ev_hdr *h = data;

	if (h->kind == EV_IO)
		return handle_io(c, arg, data, size);
	if (h->kind == EV_IO_FILE)
		return handle_file(c, arg, data, size);
	return -EINVAL;
}

static int io_configure(struct feature_ctx *f, void **state)
{
	struct profile_bpf *skel = f->skel;
	uint32_t bytes = f->o->callgraph == CG_FP ? 0 : f->o->snapshot_bytes;
	struct io_rec *st = calloc(1, sizeof(*st));
	char buf[32];

	if (!st)
		return -ENOMEM;
	*state = st;
	st->files = hmap__new(256);
	if (!st->files)
		return -ENOMEM;
	bpf_program__set_autoload(skel->progs.io_enter, true);
	bpf_program__set_autoload(skel->progs.io_exit, true);
	skel->rodata->io_stack_bytes = bytes > IO_MAX_STACK_BYTES ? IO_MAX_STACK_BYTES : bytes;
	skel->rodata->io_stack_rate = f->o->io_stack_rate;
	profile__set_meta(f->p, "io", "syscalls");
	snprintf(buf, sizeof(buf), "%u", f->o->io_stack_rate);
	profile__set_meta(f->p, "io_stack_rate", buf);
	return events_add_handler(f->ev, EV_IO_FIRST, EV_IO_LAST, io_decode, st);
}

static int io_attach(struct feature_ctx *f, void *state)
{
	struct io_rec *st = state;

	st->child = f->child > 0 ? (uint32_t)f->child : 0;
	return 0;
}

static int io_finish(struct feature_ctx *f, void *state)
{
	struct io_rec *st = state;
	struct profile *p = f->p;

	f->consume(f);
	p->stats[STAT_IO_CALLS] = f->bpf_stat(f, BSTAT_IO_CALLS);
	p->stats[STAT_IO_NO_STACK] = f->bpf_stat(f, BSTAT_IO_NO_STACK);
	p->stats[STAT_IO_ERRORS] = f->bpf_stat(f, BSTAT_IO_ERRORS);
	p->stats[STAT_IO_LOST] = f->bpf_stat(f, BSTAT_IO_RB_FULL) +
				 f->bpf_stat(f, BSTAT_IO_NO_STORAGE);
	log_info("I/O: %" PRIu64 " calls recorded (%" PRIu64 " without a stack over the rate), "
		 "%" PRIu64 " files described, %" PRIu64 " failed calls skipped, %" PRIu64 " lost",
		 st->events, p->stats[STAT_IO_NO_STACK], st->described, p->stats[STAT_IO_ERRORS],
		 p->stats[STAT_IO_LOST]);
	return 0;
}

static void io_destroy(struct feature_ctx *f, void *state)
{
	struct io_rec *st = state;

	if (!st)
		return;
	hmap__free(st->files);
	free(st);
}

static const char *const io_maps[] = { "io_fds", NULL };

const struct feature feature_io = {
    .name = "io",
    .maps = io_maps,
    .enabled = io_enabled,
    .configure = io_configure,
    .attach = io_attach,
    .finish = io_finish,
    .destroy = io_destroy,
};
