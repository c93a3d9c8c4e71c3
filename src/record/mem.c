// SPDX-License-Identifier: MIT
/*
 * --mem: allocator uprobes on every mapped object that exports malloc and
 * free (libc, jemalloc, tcmalloc, mimalloc, static binaries), probed at
 * attach and again whenever a target maps a new object (dlopen, exec); RSS
 * from /proc/PID/statm on the poll timer. See docs/memory.md.
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/types.h>

#include "agent/eprof_mem_proto.h"
#include "inject/inject.h"
#include "model/event.h"
#include "eprof_abi.h"
#include "util/expq.h"
#include "util/hmap.h"
#include "util/log.h"
#include "util/vec.h"
#include "profile.skel.h"
#include "events.h"
#include "feature.h"
#include "mapwatch.h"
#include "mem_chan.h"
#include "kbtf.h"
#include "mem_probe.h"
#include "proc.h"
#include "record.h"
#include "uprobe_multi.h"

#define MEM_RESCAN_NS 200000000ULL
#define MEM_RSS_NS 100000000ULL
#define MEM_SYS_SCAN_NS 1000000000ULL /* -a: new processes' allocators */

struct mem_obj {
	char *path;
	struct mem_probe_set set;
};

/* The links made for one target (or for every process, with -a). */
struct mem_links {
	int *fds; /* uprobe_multi link fds */
	size_t nfds, capfds;
	struct bpf_link **links; /* fallback: one link per probe */
	size_t nlinks, caplinks;
};

struct mem_target {
	uint32_t pid;
	bool interp;	/* libeprof_mem.so samples in this process: its markers are probed */
	bool hit_linked;
	uint64_t handle; /* attach mode: dlopen's handle of the injected library */
	char **seen; /* mapped paths already looked at */
	size_t nseen, capseen;
	struct mem_links l;
};

struct mem_state {
	bool session;	  /* uprobe sessions; else uprobe + uretprobe on every call */
	bool interpose;	  /* libeprof_mem.so samples in the targets (docs/memory.md) */
	bool inject;	  /* -p: injected into each named target (else preloaded) */
	bool hit_multi;	  /* the markers through one uprobe_multi link per target (6.6+) */
	char lib[PATH_MAX]; /* its path */
	char *old_preload; /* eprof's own LD_PRELOAD, put back once the command is forked */
	bool had_preload;
	uint64_t mean;	  /* mean bytes between samples, 1 = all */
	struct mem_obj *objs;
	size_t nobjs;
	struct mem_links all; /* -a: probes for every process */
	struct mem_target sys; /* -a: objects looked at in any process */
	struct hmap *sys_seen; /* -a: processes scanned, by (pid, start time) */
	uint64_t last_sys_scan;
	/* Targets: the named PIDs, the launched command, and every process they fork later. */
	struct mem_target *targets;
	size_t ntargets, captargets;
	uint64_t last_scan, last_rss;
	uint32_t rss_name;
	uint32_t probes, objects;
	struct mem_chan *chan; /* --mem=1 through the interposer's channel (mem_chan.h) */
	struct profile_bpf *late; /* the allocator probes' programs, loaded with the first probe */
	int late_err;		  /* ...or why they did not load */
	char chan_name[64]; /* the launched command's socket (EMEM_ENV_SOCK) */
};

static bool mem_enabled(const struct record_opts *o)
{
	return o->mem_sample > 0;
}

/* Uprobe sessions: kernel >= 6.13 has the kfuncs; EPROF_MEM_PROBES=uretprobe forces the fallback. */
static bool have_sessions(void)
{
	const char *env = getenv("EPROF_MEM_PROBES");
	const char *kfunc = "bpf_session_is_return";
	bool ok;

	if (env && !strcmp(env, "uretprobe"))
		return false;
	return !kbtf_has_names(KBTF_VMLINUX, &kfunc, 1, &ok) && ok;
}

static void fill_exp_table(struct profile_bpf *skel, uint64_t mean)
{
	exp_quantiles((uint64_t *)skel->rodata->mem_exp_table,
		      sizeof(skel->rodata->mem_exp_table) / sizeof(skel->rodata->mem_exp_table[0]),
		      (double)mean);
}

static int handle_mem(struct event_ctx *c, void *arg, const void *data, size_t size)
{
	const struct ev_hdr *h = data;
	struct mem_state *st = arg;
	struct event ev = { 0 };
	int64_t node;

	ev.ts = h->ts;
	ev.pid = h->pid;
	ev.tid = h->tid;
	switch (h->kind) {
	case EV_MEM_ALLOC: {
		const struct ev_mem_alloc *e = data;

		if (size < sizeof(*e))
			return -EINVAL;
		/* From the interposer's marker: its own frames are not the program's. */
		node = events_stack(c, h, &e->st, size - sizeof(*e),
				    e->pad & MEM_HOW_INTERPOSED ? EVENTS_SKIP_OWN_OBJECT : 0);
		if (node < 0)
			return (int)node;
		ev.kind = EVK_ALLOC;
		ev.stack = node;
		ev.flags = e->func % MEM_NFUNCS;
		ev_set_heap(&ev, e->addr, e->size, mem_sample_weight(e->size, st->mean));
		break;
	}
	case EV_MEM_FREE: {
		const struct ev_mem_free *e = data;

		if (size < sizeof(*e))
			return -EINVAL;
		ev.kind = EVK_FREE;
		ev_set_heap(&ev, e->addr, e->size, 0);
		break;
	}
	case EV_MEM_MMAP:
	case EV_MEM_MUNMAP: {
		const struct ev_mem_map *e = data;

		if (size < sizeof(*e))
			return -EINVAL;
		ev.kind = h->kind == EV_MEM_MMAP ? EVK_MMAP : EVK_MUNMAP;
		ev_set_map(&ev, e->addr, e->len);
		break;
	}
	case EV_MEM_BRK: {
		const struct ev_mem_map *e = data;

		if (size < sizeof(*e))
			return -EINVAL;
		ev.kind = EVK_BRK;
		ev_set_brk(&ev, e->addr, e->len); /* the break before and after */
		break;
	}
	case EV_MEM_MREMAP: {
		/* A move of whatever was there: an unmap and a map, both flagged as a remap. */
		const struct ev_mem_remap *e = data;
		int err;

		if (size < sizeof(*e))
			return -EINVAL;
		ev.kind = EVK_MUNMAP;
		ev.flags = MEM_F_REMAP;
		ev_set_map(&ev, e->old_addr, e->old_len);
		err = profile__add_event(c->p, &ev);
		if (err)
			return err;
		ev.kind = EVK_MMAP;
		ev_set_map(&ev, e->new_addr, e->new_len);
		break;
	}
	default:
		return -EINVAL;
	}
	events_note_thread(c, h->pid, h->tid, NULL, h->ts);
	return profile__add_event(c->p, &ev);
}

/* libeprof_mem.so: EPROF_MEM_LIB, next to the eprof binary, or in ../lib/eprof/. */
static bool interposer_lib(char *out, size_t len)
{
	const char *env = getenv("EPROF_MEM_LIB");
	char self[PATH_MAX - 64];
	ssize_t n;

	if (env && *env)
		return realpath(env, out) != NULL;
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return false;
	self[n] = '\0';
	*(strrchr(self, '/') ? strrchr(self, '/') : self) = '\0';
	snprintf(out, len, "%s/libeprof_mem.so", self);
	if (!access(out, R_OK))
		return realpath(out, self) && snprintf(out, len, "%s", self) > 0;
	snprintf(out, len, "%s/../lib/eprof/libeprof_mem.so", self);
	return access(out, R_OK) == 0 && realpath(out, self) && snprintf(out, len, "%s", self) > 0;
}

/*
 * A launched command (LD_PRELOAD) or an attached process (injected) runs libeprof_mem.so:
 * --mem samples in the process; --mem=1 sends every call on the channel (mem_chan.h), with
 * stacks unwound in the process (measured: docs/memory.md). EPROF_MEM_INTERPOSE=0: the
 * uprobes; =1: --mem=1 through the library's markers (a trap per allocation, as before the
 * channel). No socket: the uprobes.
 */
static int setup_interposer(struct feature_ctx *f, struct mem_state *st)
{
	const char *env = getenv("EPROF_MEM_INTERPOSE"), *old = getenv("LD_PRELOAD");
	const struct record_opts *o = f->o;
	char buf[PATH_MAX + 4096], mean[32];

	if (o->all || (!o->npids && (!o->argv || !o->argv[0])))
		return 0; /* -a: the uprobes */
	if (env && !strcmp(env, "0"))
		return 0;
	if (!interposer_lib(st->lib, sizeof(st->lib))) {
		log_info("mem: no libeprof_mem.so next to eprof: allocator uprobes instead");
		return 0;
	}
	if (st->mean <= 1 && !(env && !strcmp(env, "1"))) {
		int err = -ENOMEM;

		st->chan = mem_chan_open();
		/* The command's processes connect as its user (--user), each -p target as its own. */
		if (st->chan && !o->npids)
			err = mem_chan_listen(st->chan, o->run_as ? o->run_uid : geteuid(),
					      o->run_as ? o->run_gid : getegid(), st->chan_name,
					      sizeof(st->chan_name));
		if (!st->chan || (!o->npids && err)) {
			log_warn("mem: no socket for libeprof_mem.so's records (%s): allocator "
				 "uprobes instead", strerror(-err));
			mem_chan_free(st->chan);
			st->chan = NULL;
			return 0;
		}
		profile__set_meta(f->p, "mem_channel", "1");
	}
	bpf_program__set_autoload(f->skel->progs.mem_hit, true);
	/* One link for the three markers: its detach waits for one grace period, not three. */
	st->hit_multi = kernel_at_least(6, 6) && !getenv("EPROF_NO_UPROBE_MULTI");
	if (st->hit_multi)
		bpf_program__set_expected_attach_type(f->skel->progs.mem_hit, UPROBE_MULTI_ATTACH);
	profile__set_meta(f->p, "mem_interposer", st->lib);
	st->interpose = true;
	if (o->npids) {
		st->inject = true; /* at attach, into each target */
		return 0;
	}
	if (old && *old && strlen(old) < 4096)
		snprintf(buf, sizeof(buf), "%s:%s", st->lib, old);
	else
		snprintf(buf, sizeof(buf), "%s", st->lib);
	snprintf(mean, sizeof(mean), "%" PRIu64, st->mean);
	/* The command is forked after configure: it inherits both, and so do its children. */
	st->had_preload = old != NULL;
	st->old_preload = old ? strdup(old) : NULL;
	if (setenv("LD_PRELOAD", buf, 1) || setenv(EMEM_ENV_SAMPLE, mean, 1))
		return -errno;
	if (st->chan && setenv(EMEM_ENV_SOCK, st->chan_name, 1))
		return -errno;
	return 0;
}

static int mem_configure(struct feature_ctx *f, void **state)
{
	struct profile_bpf *skel = f->skel;
	struct mem_state *st = calloc(1, sizeof(*st));
	uint32_t stack;
	char buf[32];
	int err;

	if (!st)
		return -ENOMEM;
	*state = st;
	st->mean = f->o->mem_sample;
	st->session = have_sessions();
	/* the allocator probes' programs: loaded by alloc_progs() with the first probe */
	bpf_program__set_autoload(skel->progs.mem_sys_enter, true);
	bpf_program__set_autoload(skel->progs.mem_sys_exit, true);
	skel->rodata->mem_sample_all = st->mean <= 1;
	/*
	 * Stack copy per allocation: every allocation with --mem=1 (a shorter copy: its cost is
	 * most of a recorded call, see docs/memory.md), a few per second when sampled.
	 */
	stack = st->mean <= 1 ? 4096 : 16384;
	skel->rodata->mem_stack_bytes = f->o->callgraph == CG_FP ? 0
				      : f->o->snapshot_bytes < stack ? f->o->snapshot_bytes : stack;
	if (getenv("EPROF_MEM_STACK"))
		skel->rodata->mem_stack_bytes = atoi(getenv("EPROF_MEM_STACK"));
	if (getenv("EPROF_MEM_NULL"))
		skel->rodata->mem_null = atoi(getenv("EPROF_MEM_NULL"));
	fill_exp_table(skel, st->mean);
	/* --mem=1 with sessions matches frees in the recorder: no live map in BPF. */
	skel->rodata->mem_user_match = st->mean <= 1 && st->session &&
				       !(getenv("EPROF_MEM_MATCH") &&
					 !strcmp(getenv("EPROF_MEM_MATCH"), "bpf"));
	bpf_map__set_max_entries(skel->maps.mem_live, skel->rodata->mem_user_match ? 1
						      : st->mean <= 1		   ? 1 << 22
										   : 1 << 18);
	/* Every allocation with its stack copy: 16 MB fills in ~4,000 events; take 64 at least. */
	if (st->mean <= 1 && f->o->ringbuf_mb < 64) {
		bpf_map__set_max_entries(skel->maps.events, 64 << 20);
		skel->rodata->wakeup_bytes = (64 << 20) / 4;
	}
	snprintf(buf, sizeof(buf), "%" PRIu64, st->mean);
	profile__set_meta(f->p, "mem_sample_bytes", buf);
	profile__set_meta(f->p, "mem_probes", st->session ? "session" : "uretprobe");
	st->rss_name = profile__intern(f->p, "rss_bytes");
	err = setup_interposer(f, st);
	if (err)
		return err;
	return events_add_handler(f->ev, EV_MEM_FIRST, EV_MEM_LAST, handle_mem, st);
}

static int push_fd(struct mem_links *ml, int fd)
{
	if (arr_grow(ml->fds, ml->capfds, ml->nfds + 1))
		return -ENOMEM;
	ml->fds[ml->nfds++] = fd;
	return 0;
}

static int push_link(struct mem_links *ml, struct bpf_link *l)
{
	if (arr_grow(ml->links, ml->caplinks, ml->nlinks + 1))
		return -ENOMEM;
	ml->links[ml->nlinks++] = l;
	return 0;
}

static void links_detach(struct mem_links *ml)
{
	for (size_t i = 0; i < ml->nfds; i++)
		close(ml->fds[i]);
	ml->nfds = 0;
	for (size_t i = 0; i < ml->nlinks; i++)
		bpf_link__destroy(ml->links[i]);
	ml->nlinks = 0;
}

static void links_free(struct mem_links *ml)
{
	links_detach(ml);
	free(ml->fds);
	free(ml->links);
	memset(ml, 0, sizeof(*ml));
}

static void pick_progs(struct profile_bpf *late, void *arg)
{
	const struct mem_state *st = arg;

	if (st->session) {
		bpf_program__set_autoload(late->progs.mem_alloc, true);
		bpf_program__set_autoload(late->progs.mem_free, true);
		bpf_program__set_expected_attach_type(late->progs.mem_alloc,
						      UPROBE_SESSION_ATTACH);
		bpf_program__set_expected_attach_type(late->progs.mem_free, UPROBE_MULTI_ATTACH);
	} else {
		bpf_program__set_autoload(late->progs.mem_alloc_entry, true);
		bpf_program__set_autoload(late->progs.mem_alloc_ret, true);
		bpf_program__set_autoload(late->progs.mem_free, true);
	}
}

/*
 * The allocator uprobes' programs (20-40 ms of verifier time), loaded with the first object
 * probed: with libeprof_mem.so sampling in the targets (the default), only the processes it
 * cannot go into (static binaries, a cleared LD_PRELOAD) need them. 0, or why not loaded.
 */
static int alloc_progs(struct feature_ctx *f, struct mem_state *st)
{
	if (!st->late && !st->late_err) {
		st->late = feature_load_late(f, "memory probes", pick_progs, st);
		st->late_err = st->late ? 0 : errno ? -errno : -EINVAL;
	}
	return st->late_err;
}

static int attach_multi(struct mem_state *st, struct mem_links *ml, struct profile_bpf *skel,
			const struct mem_obj *o, uint32_t pid)
{
	uint64_t offs[MEM_NFUNCS], cookies[MEM_NFUNCS];
	uint32_t n = 0;
	int fd, err;

	for (int i = 0; i < o->set.n; i++) {
		if (i == o->set.free_idx)
			continue;
		offs[n] = o->set.offsets[i];
		cookies[n++] = o->set.cookies[i];
	}
	fd = uprobe_multi_link(bpf_program__fd(skel->progs.mem_alloc), UPROBE_MULTI_SESSION,
			       o->path, offs, cookies, n, pid);
	if (fd < 0)
		return -errno;
	err = push_fd(ml, fd);
	if (err) {
		close(fd);
		return err;
	}
	fd = uprobe_multi_link(bpf_program__fd(skel->progs.mem_free), UPROBE_MULTI_ENTRY,
			       o->path, &o->set.offsets[o->set.free_idx],
			       &o->set.cookies[o->set.free_idx], 1, pid);
	if (fd < 0)
		return -errno;
	err = push_fd(ml, fd);
	if (err)
		close(fd);
	st->probes += o->set.n;
	return err;
}

static int attach_classic(struct mem_state *st, struct mem_links *ml, struct profile_bpf *skel,
			  const struct mem_obj *o, uint32_t pid)
{
	for (int i = 0; i < o->set.n; i++) {
		bool is_free = i == o->set.free_idx;
		int nprog = is_free ? 1 : 2;

		for (int r = 0; r < nprog; r++) {
			LIBBPF_OPTS(bpf_uprobe_opts, uo, .bpf_cookie = o->set.cookies[i],
				    .retprobe = r == 1);
			struct bpf_program *prog = is_free ? skel->progs.mem_free
						 : r ? skel->progs.mem_alloc_ret
						     : skel->progs.mem_alloc_entry;
			struct bpf_link *l;
			int err;

			l = bpf_program__attach_uprobe_opts(prog, pid ? (int)pid : -1, o->path,
							    o->set.offsets[i], &uo);
			if (!l)
				return -errno;
			err = push_link(ml, l);
			if (err) {
				bpf_link__destroy(l);
				return err;
			}
		}
	}
	st->probes += o->set.n;
	return 0;
}

/* The allocator probes of path (looked at once per file), attached for pid (0: every process). */
static int probe_object(struct feature_ctx *f, struct mem_state *st, struct mem_links *ml,
			const char *path, uint32_t pid)
{
	struct mem_obj *o = NULL, *n;
	int err;

	for (size_t i = 0; i < st->nobjs; i++)
		if (!strcmp(st->objs[i].path, path))
			o = &st->objs[i];
	if (!o) {
		n = realloc(st->objs, (st->nobjs + 1) * sizeof(*n));
		if (!n)
			return -ENOMEM;
		st->objs = n;
		o = &st->objs[st->nobjs];
		memset(o, 0, sizeof(*o));
		o->path = strdup(path);
		if (!o->path)
			return -ENOMEM;
		st->nobjs++;
		if (mem_probe_find(path, &o->set))
			o->set.n = 0;
		/* Benchmarks only: probe the first instruction, as a plain uprobe tracer does. */
		if (getenv("EPROF_MEM_ENTRY") && !strcmp(getenv("EPROF_MEM_ENTRY"), "start"))
			for (int i = 0; i < o->set.n; i++) {
				o->set.offsets[i] -= o->set.skipped[i];
				o->set.skipped[i] = 0;
			}
		for (int i = 0; i < o->set.n; i++)
			log_debug("mem: %s: %s at file offset 0x%" PRIx64 " (+%u)", path,
				  mem_func_names[o->set.cookies[i]], o->set.offsets[i],
				  o->set.skipped[i]);
	}
	if (!o->set.n || o->set.free_idx < 0)
		return 0;
	if (alloc_progs(f, st))
		return 0; /* feature_load_late() said why, once */
	err = st->session ? attach_multi(st, ml, st->late, o, pid)
			  : attach_classic(st, ml, st->late, o, pid);
	if (err == -ESRCH || err == -ENOENT)
		return 0; /* the process is gone */
	if (err) {
		/* -a meets objects of other mount namespaces (containers): not worth a warning */
		if (pid)
			log_warn("failed to attach allocator uprobes to '%s': %s", path,
				 strerror(-err));
		else
			log_debug("failed to attach allocator uprobes to '%s': %s", path,
				  strerror(-err));
		return 0; /* the other objects still count */
	}
	st->objects++;
	return 0;
}

static bool target_seen(struct mem_target *t, const char *path)
{
	for (size_t i = 0; i < t->nseen; i++)
		if (!strcmp(t->seen[i], path))
			return true;
	if (arr_grow(t->seen, t->capseen, t->nseen + 1))
		return true;
	t->seen[t->nseen] = strdup(path);
	if (t->seen[t->nseen])
		t->nseen++;
	return false;
}

/*
 * Probes the executable objects process maps_pid maps that were not looked at yet (by
 * seen: one target's list, or the system-wide one), with links for filter_pid (0: all).
 */
static int scan_maps(struct feature_ctx *f, struct mem_state *st, uint32_t maps_pid,
		     struct mem_target *seen, struct mem_links *ml, uint32_t filter_pid)
{
	char path[64], line[4096 + 128];
	FILE *fp;
	int err = 0;

	snprintf(path, sizeof(path), "/proc/%u/maps", maps_pid);
	fp = fopen(path, "re");
	if (!fp)
		return -errno;
	while (fgets(line, sizeof(line), fp)) {
		char perms[8], *file;
		int off = 0;

		if (sscanf(line, "%*x-%*x %7s %*x %*x:%*x %*u %n", perms, &off) < 1 || !off)
			continue;
		file = line + off;
		file[strcspn(file, "\n")] = 0;
		if (perms[2] != 'x' || file[0] != '/' || target_seen(seen, file))
			continue;
		err = probe_object(f, st, ml, file, filter_pid);
		if (err)
			break;
	}
	fclose(fp);
	return err;
}

#define SAME_ID(x) ((int)EMEM_##x == (int)MEM_##x)
_Static_assert(SAME_ID(MALLOC) && SAME_ID(CALLOC) && SAME_ID(REALLOC) && SAME_ID(REALLOCARRAY) &&
		       SAME_ID(POSIX_MEMALIGN) && SAME_ID(ALIGNED_ALLOC) && SAME_ID(MEMALIGN) &&
		       SAME_ID(VALLOC) && SAME_ID(PVALLOC),
	       "libeprof_mem.so's function ids are enum mem_func");

/*
 * The file of pid's copy of libeprof_mem.so, for a uprobe: its path when preloaded (or not
 * mapped yet: a launched command before exec), /proc/PID/map_files/... for the memfd an
 * injection loads it from. 1 when mapped, 0 when not, -errno.
 */
static int interposer_file(const struct mem_state *st, uint32_t pid, char *out, size_t len)
{
	char path[64], line[4096 + 128];
	unsigned long lo, hi;
	FILE *fp;

	snprintf(out, len, "%s", st->lib);
	snprintf(path, sizeof(path), "/proc/%u/maps", pid);
	fp = fopen(path, "re");
	if (!fp)
		return -errno;
	while (fgets(line, sizeof(line), fp)) {
		char *file = strchr(line, '/');

		if (!file)
			continue;
		file[strcspn(file, "\n")] = 0;
		if (!strcmp(file, st->lib)) {
			fclose(fp);
			return 1;
		}
		if (!strncmp(file, "/memfd:" EMEM_MEMFD " ", 8 + strlen(EMEM_MEMFD)) &&
		    sscanf(line, "%lx-%lx", &lo, &hi) == 2) {
			snprintf(out, len, "/proc/%u/map_files/%lx-%lx", pid, lo, hi);
			fclose(fp);
			return 1;
		}
	}
	fclose(fp);
	return 0;
}

/* The uprobes on libeprof_mem.so's markers, for t's process. */
static int link_hits(struct feature_ctx *f, struct mem_state *st, struct mem_target *t)
{
	char file[PATH_MAX];
	int err;

	static const char *const names[] = { [MEM_HIT_ALLOC] = EMEM_HIT_ALLOC,
					     [MEM_HIT_FREE] = EMEM_HIT_FREE,
					     [MEM_HIT_FREES] = EMEM_HIT_FREES };

	_Static_assert(MEM_FREE_BATCH == EMEM_FREE_BATCH, "free batch");
	_Static_assert(sizeof(struct emem_free) == 16, "emem_free");

	if (t->hit_linked)
		return 0;
	err = interposer_file(st, t->pid, file, sizeof(file));
	if (err < 0)
		return err;
	if (st->hit_multi) {
		uint64_t offs[3], cookies[3] = { 0, 1, 2 }; /* the index in names */
		int fd;

		_Static_assert(sizeof(names) / sizeof(names[0]) == 3, "markers");
		err = mem_probe_named(file, names, 3, offs);
		if (err < 0)
			return err;
		if (err < 3)
			return -ENOENT;
		fd = uprobe_multi_link(bpf_program__fd(f->skel->progs.mem_hit),
				       UPROBE_MULTI_ENTRY, file, offs, cookies, 3, t->pid);
		if (fd < 0)
			return -errno;
		err = push_fd(&t->l, fd);
		if (err) {
			close(fd);
			return err;
		}
		goto linked;
	}
	for (int i = 0; i < (int)(sizeof(names) / sizeof(names[0])); i++) {
		LIBBPF_OPTS(bpf_uprobe_opts, uo, .func_name = names[i], .bpf_cookie = i);
		struct bpf_link *l;
		int err;

		l = bpf_program__attach_uprobe_opts(f->skel->progs.mem_hit, (int)t->pid, file, 0,
						    &uo);
		if (!l)
			return -errno;
		err = push_link(&t->l, l);
		if (err) {
			bpf_link__destroy(l);
			return err;
		}
	}
linked:
	t->hit_linked = true;
	st->probes += (int)(sizeof(names) / sizeof(names[0]));
	st->objects++;
	return 0;
}

/*
 * Whether pid runs with libeprof_mem.so: 1 when mapped, 0 when libc is mapped without it
 * (exec'd with LD_PRELOAD cleared: the uprobes then), -EAGAIN when neither (ld.so not
 * there yet, or a static binary), or -errno.
 */
static int interposer_mapped(const struct mem_state *st, uint32_t pid)
{
	char path[64], line[4096 + 128];
	bool libc = false;
	FILE *fp;

	snprintf(path, sizeof(path), "/proc/%u/maps", pid);
	fp = fopen(path, "re");
	if (!fp)
		return -errno;
	while (fgets(line, sizeof(line), fp)) {
		char *file = strchr(line, '/'), *base;

		if (!file)
			continue;
		file[strcspn(file, "\n")] = 0;
		if (!strcmp(file, st->lib) ||
		    !strncmp(file, "/memfd:" EMEM_MEMFD " ", 8 + strlen(EMEM_MEMFD))) {
			fclose(fp);
			return 1;
		}
		base = strrchr(file, '/') + 1;
		libc |= !strncmp(base, "libc.so", 7) || !strncmp(base, "libc-", 5);
	}
	fclose(fp);
	return libc ? 0 : -EAGAIN;
}

/*
 * The effective uid and gid of pid (what its connect() is checked with), from its status:
 * /proc/PID itself is root's for a process that is not dumpable.
 */
static bool effective_ids(uint32_t pid, uint32_t *uid, uint32_t *gid)
{
	char path[32], line[256];
	int got = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/status", pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (got < 2 && fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "Uid:", 4))
			got += sscanf(line + 4, "%*u %u", uid) == 1;
		else if (!strncmp(line, "Gid:", 4))
			got += sscanf(line + 4, "%*u %u", gid) == 1;
	}
	fclose(f);
	return got == 2;
}

/*
 * -p: loads libeprof_mem.so into t's process with the injector (as the CUPTI collector is)
 * and lets it redirect the allocator entries of every loaded object; its markers are then
 * probed. False when it could not: the uprobes then, as without it.
 */
/*
 * Whether pid sees the files we see: our mount namespace and our root. A name in our /tmp
 * means nothing to a process in a container (or a chroot).
 */
static bool same_files(uint32_t pid)
{
	char path[48];
	struct stat a, b;

	snprintf(path, sizeof(path), "/proc/%u/ns/mnt", pid);
	if (stat("/proc/self/ns/mnt", &a) || stat(path, &b) || a.st_ino != b.st_ino ||
	    a.st_dev != b.st_dev)
		return false;
	snprintf(path, sizeof(path), "/proc/%u/root", pid);
	return !stat("/", &a) && !stat(path, &b) && a.st_ino == b.st_ino && a.st_dev == b.st_dev;
}

static bool inject_target(struct feature_ctx *f, struct mem_state *st, struct mem_target *t)
{
	struct emem_attach_arg a = { .mean = st->mean, .chan_fd = -1 };
	uint32_t uid, gid;

	/*
	 * The channel is a socket pair the injector makes in the process (no name anyone can
	 * reach, whatever its namespaces); the socket of the target's user, in a directory no
	 * other user can enter, is for the children it forks, where that name means something.
	 */
	if (st->chan && same_files(t->pid) && effective_ids(t->pid, &uid, &gid)) {
		int err = mem_chan_listen(st->chan, uid, gid, a.sock, sizeof(a.sock));

		if (err) {
			a.sock[0] = '\0';
			log_warn("mem: no channel socket for uid %u (%s): %u records through the "
				 "markers", (unsigned)uid, strerror(-err), t->pid);
		}
	}
	struct inject_load_req rq = { .lib_path = st->lib,
				      .memfd_name = EMEM_MEMFD,
				      .entry = EMEM_ATTACH,
				      .blob = &a,
				      .blob_len = sizeof(a),
				      .channel = st->chan != NULL,
				      .chan_fd_off = offsetof(struct emem_attach_arg, chan_fd) };
	struct inject_result r;
	int err;

	err = inject_load((pid_t)t->pid, &rq, &r);
	if (!err && r.chan_fd >= 0 && r.ret) {
		close(r.chan_fd); /* the library refused, and closed its end */
	} else if (!err && r.chan_fd >= 0) {
		int cerr = mem_chan_adopt(st->chan, r.chan_fd, t->pid);

		if (cerr)
			log_warn("mem: no channel for %u (%s): its records through the markers",
				 t->pid, strerror(-cerr));
	}
	if (!err && r.ret) {
		log_warn("mem: libeprof_mem.so refused to start in %u: %s: allocator uprobes "
			 "instead", t->pid, r.ret == -EALREADY ? "it samples there already"
								: strerror((int)-r.ret));
		return false; /* loaded, inert */
	}
	if (err) {
		log_warn("mem: cannot load libeprof_mem.so into %u (%s): allocator uprobes instead",
			 t->pid, r.msg);
		return false;
	}
	t->handle = r.handle;
	t->interp = true;
	log_info("mem: libeprof_mem.so loaded into %u (its thread %d stopped %.1f ms)", t->pid,
		 (int)r.tid, r.stopped_ns / 1e6);
	err = link_hits(f, st, t);
	if (err)
		log_warn("mem: failed to attach uprobes to libeprof_mem.so in %u: %s", t->pid,
			 strerror(-err));
	return true;
}

#define RETRACT_TRIES 5

/*
 * The end of an attach: the entries are written back; the library stays, inert. A retraction
 * that found a lock taken (-EBUSY: it never waits on one) is tried again in another thread.
 */
static void retract_target(struct mem_target *t)
{
	struct inject_unload_req u = { .handle = t->handle, .retract = EMEM_RETRACT,
				       .keep_loaded = true };
	struct inject_result r;
	int err;

	if (!t->handle)
		return;
	for (int i = 0;; i++) {
		err = inject_unload((pid_t)t->pid, &u, &r);
		if (err || r.ret != -EBUSY || i + 1 == RETRACT_TRIES)
			break;
		u.avoid_tid = r.tid;
		usleep(20000);
	}
	t->handle = 0;
	if (err == -ESRCH || r.err == INJ_ERR_GONE)
		return;
	if (err)
		log_warn("mem: cannot retract libeprof_mem.so from %u: %s (it keeps sampling "
			 "until the process ends; nothing records it)", t->pid, r.msg);
	else if (r.ret < 0)
		log_warn("mem: cannot retract libeprof_mem.so from %u: %s, %d tries (some of its "
			 "entries may stay until the process ends; nothing records them)", t->pid,
			 strerror((int)-r.ret), RETRACT_TRIES);
	else
		log_info("mem: libeprof_mem.so retracted from %u: %lld allocator entries restored "
			 "(its thread %d stopped %.1f ms)", t->pid, (long long)r.ret, (int)r.tid,
			 r.stopped_ns / 1e6);
}

static int scan_target(struct feature_ctx *f, struct mem_state *st, struct mem_target *t,
		       struct mem_links *ml, uint32_t filter_pid)
{
	int k;

	if (st->interpose) {
		k = interposer_mapped(st, t->pid);
		if (k == -ENOENT || k == -ESRCH)
			return k;
		if (k == 1 || (k == -EAGAIN && t->interp)) {
			if (!t->interp)
				log_debug("mem: process %u samples with libeprof_mem.so", t->pid);
			t->interp = true;
			/* Its allocators are reached through the interposer: no uprobes on them. */
			return link_hits(f, st, t);
		}
		if (k == 0 && t->interp) {
			log_info("mem: process %u runs without libeprof_mem.so (LD_PRELOAD "
				 "cleared?): allocator uprobes instead", t->pid);
			t->interp = false;
		}
	}
	return scan_maps(f, st, t->pid, t, ml, filter_pid);
}

/*
 * The launched command's executable: a static binary has its own malloc, probed before it
 * runs. Marked as seen under its real path, the name its maps will show after exec.
 */
static void probe_command(struct feature_ctx *f, struct mem_state *st, struct mem_target *t)
{
	const char *cmd = f->o->argv[0], *path = getenv("PATH");
	char buf[4096], real[4096];

	buf[0] = 0;
	if (strchr(cmd, '/')) {
		snprintf(buf, sizeof(buf), "%s", cmd);
	} else {
		while (path && *path) {
			size_t len = strcspn(path, ":");

			snprintf(buf, sizeof(buf), "%.*s/%s", (int)len, path, cmd);
			if (len && access(buf, X_OK) == 0)
				break;
			buf[0] = 0;
			path += len + (path[len] == ':');
		}
	}
	if (buf[0] && realpath(buf, real) && !target_seen(t, real))
		probe_object(f, st, &t->l, real, f->child);
}

static struct mem_target *add_target(struct mem_state *st, uint32_t pid)
{
	struct mem_target *n = arr_push(st->targets, st->ntargets, st->captargets);

	if (!n)
		return NULL;
	n->pid = pid;
	return n;
}

static void target_free(struct mem_target *t)
{
	links_free(&t->l);
	for (size_t j = 0; j < t->nseen; j++)
		free(t->seen[j]);
	free(t->seen);
	t->seen = NULL;
	t->nseen = t->capseen = 0;
}

struct sys_scan {
	struct feature_ctx *f;
	struct mem_state *st;
};

static void scan_new_process(uint32_t pid, void *arg)
{
	struct sys_scan *c = arg;

	scan_maps(c->f, c->st, pid, &c->st->sys, &c->st->all, 0);
}

/*
 * -a: looks at the maps of every process not seen before, so an allocator any of them maps
 * (another libc, a static binary, jemalloc) gets system-wide probes once. Objects a process
 * dlopen()s after it was scanned are not seen.
 */
static void scan_system(struct feature_ctx *f, struct mem_state *st)
{
	struct sys_scan c = { f, st };

	proc_for_each(st->sys_seen, scan_new_process, &c);
}

static int mem_attach(struct feature_ctx *f, void *state)
{
	struct mem_state *st = state;
	const struct record_opts *o = f->o;
	int err;

	if (st->interpose && !st->inject) {
		/* The command has its environment: programs eprof runs later need none of it. */
		unsetenv(EMEM_ENV_SAMPLE);
		unsetenv(EMEM_ENV_SOCK);
		if (st->had_preload && st->old_preload)
			setenv("LD_PRELOAD", st->old_preload, 1);
		else
			unsetenv("LD_PRELOAD");
	}
	for (size_t i = 0; i < o->npids; i++)
		if (!add_target(st, o->pids[i]))
			return -ENOMEM;
	/* A launched command has not exec'd yet: its maps are ours, and so most likely its libc. */
	if (f->child && !add_target(st, f->child))
		return -ENOMEM;
	for (size_t i = 0; i < st->ntargets; i++) {
		struct mem_target *t = &st->targets[i];

		if (st->inject && inject_target(f, st, t))
			continue;
		if (st->interpose && t->pid == (uint32_t)f->child) {
			/* Not exec'd yet: the markers' probes wait for the library to be mapped. */
			t->interp = true;
			err = link_hits(f, st, t);
			if (err) {
				log_err("failed to attach uprobes to '%s': %s", st->lib,
					strerror(-err));
				return err;
			}
			continue;
		}
		err = scan_target(f, st, t, &t->l, t->pid);
		if (err && err != -ENOENT && err != -ESRCH)
			return err;
	}
	if (f->child && o->argv && o->argv[0]) {
		uint32_t before = st->objects;

		probe_command(f, st, &st->targets[st->ntargets - 1]);
		if (st->interpose && st->objects > before)
			log_info("mem: '%s' has its own malloc and free (a static binary?): "
				 "uprobes on them, as LD_PRELOAD cannot reach it", o->argv[0]);
	}
	if (o->all) {
		/* System-wide: eprof's own libc, then every allocator any process maps. */
		st->sys_seen = hmap__new(1024);
		if (!st->sys_seen)
			return -ENOMEM;
		err = scan_maps(f, st, getpid(), &st->sys, &st->all, 0);
		if (err)
			return err;
		scan_system(f, st);
	}
	if (!st->objects) {
		log_err("failed to find an allocator (malloc and free) in the target's objects");
		return -ENOENT;
	}
	if (st->chan)
		log_info("mem: %u allocator probes in %u objects (every call sent by %s on its "
			 "channel, stacks unwound in the process)", st->probes, st->objects, st->lib);
	else if (st->interpose)
		log_info("mem: %u allocator probes in %u objects (sampled in the process by %s, "
			 "mean %" PRIu64 " bytes)", st->probes, st->objects, st->lib, st->mean);
	else
		log_info("mem: %u allocator probes in %u objects (%s)", st->probes, st->objects,
			 st->session ? "uprobe sessions" : "uprobe + uretprobe");
	return 0;
}

/*
 * Processes the targets forked since the last look (the process table follows forks):
 * uprobes attached for one PID do not follow it into a child, so each child gets its own.
 * Its first allocations, before the next poll, are not seen.
 */
static void follow_children(struct feature_ctx *f, struct mem_state *st)
{
	size_t n = st->ntargets;
	uint32_t pid;

	if (f->o->all)
		return;
	for (size_t k = 0; feature_next_target(f, &k, &pid);) {
		bool known = false;

		for (size_t i = 0; i < n && !known; i++)
			known = st->targets[i].pid == pid;
		if (!known && !add_target(st, pid))
			return;
	}
	for (size_t i = n; i < st->ntargets; i++) {
		struct mem_target *t = &st->targets[i];

		log_debug("mem: following child %u", t->pid);
		scan_target(f, st, t, &t->l, t->pid);
	}
}

static void read_rss(struct feature_ctx *f, struct mem_state *st, uint64_t now)
{
	long page = sysconf(_SC_PAGESIZE);

	for (size_t i = 0; i < st->ntargets; i++) {
		unsigned long long size, rss;
		struct event ev = { 0 };
		char path[64];
		FILE *fp;
		int got;

		snprintf(path, sizeof(path), "/proc/%u/statm", st->targets[i].pid);
		fp = fopen(path, "re");
		if (!fp)
			continue;
		got = fscanf(fp, "%llu %llu", &size, &rss);
		fclose(fp);
		if (got != 2)
			continue;
		ev.ts = now;
		ev.kind = EVK_COUNTER;
		ev.pid = st->targets[i].pid;
		ev.name = st->rss_name;
		ev_set_counter(&ev, rss * page);
		profile__add_event(f->p, &ev);
	}
}

static void copy_stats(struct feature_ctx *f, const struct mem_state *st)
{
	f->p->stats[STAT_MEM_CALLS] = f->bpf_stat(f, BSTAT_MEM_CALLS) +
				      (st->chan ? mem_chan_stats(st->chan)->allocs : 0);
	f->p->stats[STAT_MEM_LOST] = f->bpf_stat(f, BSTAT_MEM_RB_FULL);
	f->p->stats[STAT_MEM_UNTRACKED] = f->bpf_stat(f, BSTAT_MEM_LIVE_FULL);
}

/* The interpreter layout the Python feature found in pid (its BPF map), for the channel. */
static bool py_layout_of(void *arg, uint32_t pid, void *out, size_t len)
{
	struct feature_ctx *f = arg;
	struct py_proc pp;
	int fd = bpf_map__fd(f->skel->maps.py_procs);

	if (fd < 0 || len < sizeof(pp) || bpf_map_lookup_elem(fd, &pid, &pp))
		return false;
	memcpy(out, &pp, sizeof(pp));
	return true;
}

static int mem_poll(struct feature_ctx *f, void *state, uint64_t now)
{
	struct mem_state *st = state;

	if (now - st->last_rss >= MEM_RSS_NS) {
		read_rss(f, st, now);
		st->last_rss = now;
		copy_stats(f, st);
	}
	if (st->chan) {
		int err = mem_chan_drain(st->chan, f->ev);

		if (err)
			return err;
		mem_chan_python(st->chan, py_layout_of, f);
	}
	if (f->o->all && st->sys_seen && now - st->last_sys_scan >= MEM_SYS_SCAN_NS) {
		scan_system(f, st);
		st->last_sys_scan = now;
	}
	if (now - st->last_scan >= MEM_RESCAN_NS) {
		follow_children(f, st);
		for (size_t i = 0; i < st->ntargets;) {
			struct mem_target *t = &st->targets[i];
			int err;

			/* No code mapped since the last look: only whether it is still there. */
			if (mapwatch_changed(f->maps, MAPWATCH_MEM, t->pid))
				err = scan_target(f, st, t, &t->l, t->pid);
			else
				err = kill((pid_t)t->pid, 0) ? -errno : 0;

			/* Gone: its links go (they pin the task) and so does its entry. */
			if (err == -ENOENT || err == -ESRCH) {
				target_free(t);
				st->targets[i] = st->targets[--st->ntargets];
				continue;
			}
			i++;
		}
		st->last_scan = now;
	}
	return 0;
}

static void detach_all(struct mem_state *st)
{
	links_detach(&st->all);
	for (size_t i = 0; i < st->ntargets; i++)
		links_detach(&st->targets[i].l);
}

static int mem_finish(struct feature_ctx *f, void *state)
{
	struct mem_state *st = state;

	for (size_t i = 0; i < st->ntargets; i++)
		retract_target(&st->targets[i]);
	detach_all(st);
	f->consume(f);
	if (st->chan) {
		const struct mem_chan_stats *cs = mem_chan_stats(st->chan);
		int err = mem_chan_finish(st->chan, f->ev, 2000);

		if (err)
			return err;
		log_info("mem: channel: %" PRIu64 " allocations, %" PRIu64 " frees, %" PRIu64
			 " distinct stacks, %" PRIu64 " allocations with a truncated stack, %" PRIu64
			 " processes%s", cs->allocs, cs->frees, cs->stacks, cs->truncated, cs->conns,
			 cs->bad ? " (malformed messages)" : "");
		if (cs->refused || cs->dropped)
			log_warn("mem: channel: %" PRIu64 " connections refused (another "
				 "user's, or too many), %" PRIu64 " stacks refused (ids beyond "
				 "what was sent)",
				 cs->refused, cs->dropped);
	}
	read_rss(f, st, st->last_rss + MEM_RSS_NS);
	copy_stats(f, st);
	if (f->p->stats[STAT_MEM_LOST] && !f->o->quiet)
		log_warn("%" PRIu64 " memory events lost (ring buffer full): try --ringbuf-mb",
			 f->p->stats[STAT_MEM_LOST]);
	return 0;
}

static void mem_destroy(struct feature_ctx *f, void *state)
{
	struct mem_state *st = state;

	(void)f;
	if (!st)
		return;
	links_free(&st->all);
	mem_chan_free(st->chan);
	free(st->old_preload);
	target_free(&st->sys);
	hmap__free(st->sys_seen);
	for (size_t i = 0; i < st->nobjs; i++)
		free(st->objs[i].path);
	free(st->objs);
	for (size_t i = 0; i < st->ntargets; i++)
		target_free(&st->targets[i]);
	free(st->targets);
	profile_bpf__destroy(st->late);
	free(st);
}

static const char *const mem_maps[] = { "mem_live", "mem_pend", "mem_mmap_len", NULL };

const struct feature feature_mem = {
	.name = "mem",
	.maps = mem_maps,
	.enabled = mem_enabled,
	.configure = mem_configure,
	.attach = mem_attach,
	.poll = mem_poll,
	.finish = mem_finish,
	.destroy = mem_destroy,
};
