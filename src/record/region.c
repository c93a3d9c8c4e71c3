// SPDX-License-Identifier: MIT
/*
 * Timed regions: --region BIN:SYMBOL|BIN:0xADDR (uprobe + uretprobe),
 * --usdt BIN:PROVIDER:NAME (NAME__begin/NAME__end or NAME_start/NAME_end),
 * and, unless --no-auto-regions, the eprof:region__begin/__end probes of
 * include/eprof/region.h and NVTX push/pop and start/end ranges in
 * libnvToolsExt / libnvtx wherever a target maps them.
 *
 * Every probe is the one BPF program region_probe with a cookie that indexes
 * region_probes (pair id, begin or end, where the name argument is). Files
 * are found in the targets' /proc/PID/maps at attach and again from the poll
 * hook, so libraries loaded later (dlopen) get their probes too; a probe
 * site (file, offset, entry/return) is attached once.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <gelf.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/types.h>

#include "model/event.h"
#include "eprof_abi.h"
#include "profile.skel.h"
#include "util/elf_layout.h"
#include "util/hmap.h"
#include "util/log.h"
#include "util/vec.h"
#include "events.h"
#include "feature.h"
#include "mapwatch.h"
#include "python.h"
#include "record.h"
#include "sym/usdt.h"
#include "collective.h"
#include "uprobe_multi.h"

#include "region_pair.h"

_Static_assert(sizeof(struct ev_region) == 24 + 24 + EPROF_REGION_LABEL, "ev_region layout");
_Static_assert(sizeof(struct region_probe) == 16, "region_probe layout");

#define REGION_MAX_PROBES 4096
#define SCAN_FAST_NS 100000000ULL  /* rescan maps every 100 ms for the first 2 s */
#define SCAN_SLOW_NS 500000000ULL

#if defined(__x86_64__)
#define ARG0_SPEC "8@%rdi"
#elif defined(__aarch64__)
#define ARG0_SPEC "8@x0"
#else
#define ARG0_SPEC ""
#endif

struct region_spec {
	const char *arg;
	bool usdt;
	char bin[PATH_MAX];
	char what[256]; /* symbol, 0xADDR, or PROVIDER */
	char name[128]; /* USDT NAME */
	bool by_path, done;
	bool py; /* py:FUNC, a Python function (bpf/python_region.bpf.h) */
};

struct site {
	uint64_t dev, ino, off;
	bool ret;
};

struct file_id {
	uint64_t dev, ino;
};

/* What a region pair is when it times a communication call. */
struct coll_pair {
	const struct coll_fn *fn; /* NULL: not one */
	enum coll_family fam;
};

struct region_state {
	struct feature_ctx *f;
	struct region_spec *specs;
	size_t nspecs;
	char **pairs; /* pair id -> name */
	uint32_t *pair_str;
	size_t npairs, pairs_cap, pair_str_cap;
	uint32_t nprobes;
	struct bpf_link **links;
	size_t nlinks, links_cap;
	struct site *sites;
	size_t nsites, sites_cap;
	struct file_id *seen;
	size_t nseen, seen_cap;
	uint64_t next_scan;
	bool auto_on;
	bool sleepable; /* the kernel runs sleepable uprobes (6.0+) */
	bool warned_full;
	struct hmap *labels; /* (pid, address) -> string id of names read from /proc/PID/mem */
	struct coll_pair *coll; /* by pair id (up to ncoll) */
	size_t ncoll, coll_cap;
	struct hmap *type_size;	 /* (pid, Open MPI datatype address) -> its size + 1 */
	struct hmap *comm_ids;	 /* (pid, communicator handle) -> its number */
	struct hmap *comm_count; /* (pid, 0) -> communicators numbered */
	bool multi;		 /* communication calls through uprobe_multi links */
	int *mfds;		 /* their link fds */
	size_t nmfds, mfds_cap;
	struct profile_bpf *late; /* the probes' programs, loaded with the first probe */
	int late_err;		  /* ...or why they did not load */
	struct py_rcand py_cands[PY_RCAND_MAX];
	uint32_t npy_cands, npy_specs;
};

static bool regions_enabled(const struct record_opts *o)
{
	if (o->live)
		return false;
	if (o->nregions || o->nusdts)
		return true;
	/* Automatic probes need the targets' maps: not for the whole system. */
	return !o->no_auto_regions && !o->all;
}

static int spec_parse(struct region_spec *s, const char *arg, bool usdt)
{
	const char *c1, *c2;

	memset(s, 0, sizeof(*s));
	s->arg = arg;
	s->usdt = usdt;
	if (usdt) {
		/* BIN:PROVIDER:NAME: the last two colons (a path may hold one). */
		c2 = strrchr(arg, ':');
		for (c1 = c2 - 1; c1 > arg && *c1 != ':'; c1--)
			;
		if (c1 <= arg || c2 - c1 < 2 || !c2[1])
			return -EINVAL;
		snprintf(s->name, sizeof(s->name), "%s", c2 + 1);
		snprintf(s->what, sizeof(s->what), "%.*s", (int)(c2 - c1 - 1), c1 + 1);
	} else {
		/* BIN:SYMBOL: the first colon (C++ names hold "::"). */
		c1 = strchr(arg, ':');
		if (!c1 || c1 == arg || !c1[1])
			return -EINVAL;
		snprintf(s->what, sizeof(s->what), "%s", c1 + 1);
	}
	if ((size_t)(c1 - arg) >= sizeof(s->bin))
		return -ENAMETOOLONG;
	memcpy(s->bin, arg, c1 - arg);
	s->bin[c1 - arg] = '\0';
	s->by_path = strchr(s->bin, '/') != NULL;
	return 0;
}

/* "libfoo" names libfoo.so.1 and libfoo-2.so; "app" names app. */
static bool bin_matches(const char *want, const char *path)
{
	const char *bn = strrchr(path, '/');
	size_t n = strlen(want);

	bn = bn ? bn + 1 : path;
	if (!strncmp(bn, want, n) && (!bn[n] || bn[n] == '.' || bn[n] == '-'))
		return true;
	return false;
}

static int pair_new(struct region_state *st, const char *name)
{
	char *dup = strdup(name);

	if (!dup)
		return -ENOMEM;
	if (arr_grow(st->pairs, st->pairs_cap, st->npairs + 1) ||
	    arr_grow(st->pair_str, st->pair_str_cap, st->npairs + 1)) {
		free(dup);
		return -ENOMEM;
	}

	st->pairs[st->npairs] = dup;
	st->pair_str[st->npairs] = profile__intern(st->f->p, name);
	return (int)st->npairs++;
}

/* A probe record in region_probes; returns its cookie or -errno. */
static int probe_new(struct region_state *st, uint32_t pair, enum region_op op,
		     const struct usdt_arg *arg)
{
	struct region_probe pr = { .pair = pair, .op = op };
	uint32_t key = st->nprobes;

	if (key >= REGION_MAX_PROBES) {
		if (!st->warned_full)
			log_warn("more than %d region probes: the rest are not attached",
				 REGION_MAX_PROBES);
		st->warned_full = true;
		return -ENOSPC;
	}
	if (arg && arg->size && !arg->is_const && arg->reg_off >= 0 &&
	    (arg->size == 8 || arg->size == -8)) {
		pr.arg_kind = arg->deref ? REGION_ARG_DEREF : REGION_ARG_REG;
		pr.arg_reg_off = arg->reg_off;
		pr.arg_off = arg->off;
	}
	if (bpf_map__update_elem(st->f->skel->maps.region_probes, &key, sizeof(key), &pr,
				 sizeof(pr), BPF_ANY))
		return -errno;
	st->nprobes++;
	return key;
}

static void pick_progs(struct profile_bpf *late, void *arg)
{
	const struct region_state *st = arg;

	bpf_program__set_autoload(late->progs.region_probe, true);
	if (st->multi) {
		bpf_program__set_autoload(late->progs.region_probe_m, true);
		bpf_program__set_expected_attach_type(late->progs.region_probe_m,
						      UPROBE_MULTI_ATTACH);
	}
	bpf_program__set_autoload(late->progs.region_probe_s, st->sleepable);
	bpf_program__set_autoload(late->progs.region_thread_exit, true);
}

/*
 * The probes' programs, loaded when the first probe is attached: most records find no
 * region, NVTX or communication library, and skip ~20 ms of verifier time.
 */
static int region_progs(struct region_state *st)
{
	if (!st->late && !st->late_err) {
		st->late = feature_load_late(st->f, "regions", pick_progs, st);
		st->late_err = st->late ? 0 : errno ? -errno : -EINVAL;
	}
	return st->late_err;
}

/* named: a begin that reads a name, run by the sleepable program (it may fault pages in). */
static int attach_site(struct region_state *st, const char *path, uint64_t dev, uint64_t ino,
		       uint64_t off, bool ret, int cookie, uint64_t sema_off, bool named)
{
	LIBBPF_OPTS(bpf_uprobe_opts, uo, .retprobe = ret, .bpf_cookie = cookie,
		    .ref_ctr_offset = sema_off);
	struct bpf_program *prog;
	struct bpf_link *l;
	int err;

	for (size_t i = 0; i < st->nsites; i++)
		if (st->sites[i].dev == dev && st->sites[i].ino == ino && st->sites[i].off == off &&
		    st->sites[i].ret == ret)
			return 0;
	if (arr_grow(st->sites, st->sites_cap, st->nsites + 1) ||
	    arr_grow(st->links, st->links_cap, st->nlinks + 1))
		return -ENOMEM;
	err = region_progs(st);
	if (err)
		return err;
	/* pid -1: every process; region_probe keeps the targets' (children forked later too). */
	prog = named && st->sleepable ? st->late->progs.region_probe_s
				      : st->late->progs.region_probe;
	l = bpf_program__attach_uprobe_opts(prog, -1, path, off, &uo);
	if (!l) {
		err = -errno;
		log_warn("failed to attach region %s to '%s' at offset %#" PRIx64 ": %s",
			 ret ? "uretprobe" : "uprobe", path, off, strerror(-err));
		return err;
	}
	st->links[st->nlinks++] = l;
	st->sites[st->nsites++] = (struct site){ dev, ino, off, ret };
	return 0;
}

/* uprobe + uretprobe on a function of the file fd (spec: SYMBOL or 0xADDR). */
static int attach_func(struct region_state *st, struct region_spec *s, const char *path, int fd,
		       uint64_t dev, uint64_t ino)
{
	char name[256];
	uint64_t vaddr, off;
	int pair, b, e, err;

	if (!strncmp(s->what, "0x", 2)) {
		char *end;

		vaddr = strtoull(s->what, &end, 16);
		if (*end) {
			log_err("invalid address in --region '%s'", s->arg);
			return -EINVAL;
		}
		err = elf_vaddr_to_off(fd, vaddr, &off);
		if (!elf_func_at(fd, vaddr, name, sizeof(name)))
			snprintf(name, sizeof(name), "%.120s+%.120s", s->bin, s->what);
	} else {
		err = elf_func_lookup(fd, s->what, &vaddr, &off);
		snprintf(name, sizeof(name), "%s", s->what);
	}
	if (err) {
		log_err("failed to find function '%s' in '%s': %s", s->what, path,
			err == -ENOENT ? "no such symbol (see nm -D / nm)" : strerror(-err));
		return err;
	}
	pair = pair_new(st, name);
	if (pair < 0)
		return pair;
	b = probe_new(st, pair, REGION_OP_BEGIN, NULL);
	e = probe_new(st, pair, REGION_OP_END, NULL);
	if (b < 0 || e < 0)
		return b < 0 ? b : e;
	err = attach_site(st, path, dev, ino, off, false, b, 0, false);
	if (!err)
		err = attach_site(st, path, dev, ino, off, true, e, 0, false);
	if (!err)
		log_debug("region '%s': %s at %#" PRIx64, name, path, off);
	return err;
}

/* name is a begin (1) or end (2) probe of base; 0 otherwise. */
static int usdt_role(const char *name, const char *base)
{
	static const char *const begins[] = { "__begin", "_begin", "__start", "_start" };
	static const char *const ends[] = { "__end", "_end" };
	size_t n = strlen(base);

	if (strncmp(name, base, n))
		return 0;
	for (size_t i = 0; i < 4; i++)
		if (!strcmp(name + n, begins[i]))
			return 1;
	for (size_t i = 0; i < 2; i++)
		if (!strcmp(name + n, ends[i]))
			return 2;
	return 0;
}

/*
 * USDT pairs provider:base of the file. Returns the number of probes attached,
 * or -errno. One pair id for all sites: ends close the innermost open begin.
 */
static int attach_usdt(struct region_state *st, const char *path, int fd, uint64_t dev,
		       uint64_t ino, const char *provider, const char *base, const char *pair_name)
{
	struct usdt_note *notes;
	int n = usdt_notes_read(fd, &notes), pair = -1, attached = 0, err = 0;

	if (n <= 0)
		return n;
	for (int i = 0; i < n && !err; i++) {
		struct usdt_arg a;
		int role = usdt_role(notes[i].name, base), cookie;

		if (!role || strcmp(notes[i].provider, provider))
			continue;
		if (!notes[i].pc_off || (notes[i].sema && !notes[i].sema_off)) {
			log_warn("USDT probe %s:%s in '%s' lies outside the loadable segments",
				 provider, notes[i].name, path);
			continue;
		}
		if (pair < 0) {
			pair = pair_new(st, pair_name);
			if (pair < 0) {
				err = pair;
				break;
			}
		}
		if (role != 1 || usdt_arg_parse(notes[i].args, 0, &a))
			memset(&a, 0, sizeof(a));
		cookie = probe_new(st, pair, role == 1 ? REGION_OP_BEGIN : REGION_OP_END, &a);
		if (cookie < 0) {
			err = cookie;
			break;
		}
		/* With a semaphore the target evaluates the arguments: the kernel bumps it. */
		if (!attach_site(st, path, dev, ino, notes[i].pc_off, false, cookie,
				 notes[i].sema_off, role == 1 && a.size))
			attached++;
	}
	free(notes);
	if (!err && attached)
		log_debug("USDT %s:%s: %d probes in %s", provider, base, attached, path);
	return err ? err : attached;
}

/* An MPI, NCCL or gloo library: its communication calls as regions (collective.h). */
static int attach_coll(struct region_state *st, enum coll_family fam, const char *path, int fd,
		       uint64_t dev, uint64_t ino)
{
	size_t n;
	const struct coll_fn *fns = coll_fns(fam, &n);
	uint64_t offs[64], begins[64], ends[64];
	uint32_t nm = 0;
	int attached = 0;

	for (size_t i = 0; i < n; i++) {
		const struct coll_fn *fn = &fns[i];
		struct region_probe pr = { .op = REGION_OP_BEGIN };
		uint64_t vaddr, off;
		uint32_t key;
		int pair, e;

		if (nm >= 64 || elf_func_lookup(fd, fn->sym, &vaddr, &off))
			continue;
		pair = pair_new(st, fn->name);
		if (pair < 0)
			return pair;
		if (arr_grow(st->coll, st->coll_cap, (size_t)pair + 1))
			return -ENOMEM;
		while (st->ncoll <= (size_t)pair)
			st->coll[st->ncoll++] = (struct coll_pair){ 0 };
		st->coll[pair] = (struct coll_pair){ fn, fam };
		/* the begin keeps the count, datatype and communicator arguments */
		key = st->nprobes;
		if (key >= REGION_MAX_PROBES)
			return -ENOSPC;
		pr.pair = pair;
		if (fn->count || fn->type || fn->comm) {
			pr.arg_kind = REGION_ARG_INTS;
			pr.arg_off = fn->count | fn->type << 8 | fn->comm << 16;
		}
		if (bpf_map__update_elem(st->f->skel->maps.region_probes, &key, sizeof(key), &pr,
					 sizeof(pr), BPF_ANY))
			return -errno;
		st->nprobes++;
		e = probe_new(st, pair, REGION_OP_END, NULL);
		if (e < 0)
			return e;
		offs[nm] = off;
		begins[nm] = key;
		ends[nm++] = (uint64_t)e;
		if (!st->multi && !attach_site(st, path, dev, ino, off, false, (int)key, 0, false) &&
		    !attach_site(st, path, dev, ino, off, true, e, 0, false))
			attached++;
	}
	if (st->multi && nm) {
		int prog, fb, fe, err = region_progs(st);

		if (err)
			return err;
		if (arr_grow(st->mfds, st->mfds_cap, st->nmfds + 2))
			return -ENOMEM;
		prog = bpf_program__fd(st->late->progs.region_probe_m);
		fb = uprobe_multi_link(prog, UPROBE_MULTI_ENTRY, path, offs, begins, nm, 0);
		fe = fb < 0 ? -1 : uprobe_multi_link(prog, UPROBE_MULTI_RETURN, path, offs, ends, nm, 0);
		if (fb < 0 || fe < 0) {
			log_warn("failed to attach communication calls in '%s': %s", path,
				 strerror(errno));
			if (fb >= 0)
				close(fb);
			return 0;
		}
		st->mfds[st->nmfds++] = fb;
		st->mfds[st->nmfds++] = fe;
		attached = (int)nm;
	}
	if (attached)
		log_info("%d communication calls traced in %s", attached, path);
	return attached;
}

/*
 * Open MPI's datatypes of process pid by address: a handle is the address of a predefined
 * object in libmpi or, through a copy relocation, in the program that names it. Both objects'
 * symbols are read while the process lives (its maps are gone by the time late events are
 * decoded) into type_size.
 */
static void ompi_register(struct region_state *st, uint32_t pid)
{
	char line[PATH_MAX + 128], exe[PATH_MAX], file[PATH_MAX + 64];
	uint64_t one;
	ssize_t n;
	FILE *fp;

	if (hmap__get(st->type_size, pid, 0, &one))
		return;
	hmap__put(st->type_size, pid, 0, 1);
	snprintf(line, sizeof(line), "/proc/%u/exe", pid);
	n = readlink(line, exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = '\0';
	snprintf(line, sizeof(line), "/proc/%u/maps", pid);
	fp = fopen(line, "re");
	while (fp && fgets(line, sizeof(line), fp)) {
		unsigned long long start, pgoff;
		const char *path;
		GElf_Ehdr eh;
		Elf *elf;
		bool exec;
		int k = 0, fd;

		if (sscanf(line, "%llx-%*x %*s %llx %*s %*u %n", &start, &pgoff, &k) != 2 || !k ||
		    line[k] != '/' || pgoff)
			continue;
		path = line + k;
		line[k + strcspn(path, "\n")] = '\0';
		if (strcmp(path, exe) && coll_family_of(path) != COLL_MPI)
			continue;
		snprintf(file, sizeof(file), "/proc/%u/root%s", pid, path);
		fd = open_regular(file);
		if (fd < 0)
			continue;
		elf = elf_begin(fd, ELF_C_READ, NULL);
		exec = elf && gelf_getehdr(elf, &eh) && eh.e_type == ET_EXEC;
		if (elf)
			elf_end(elf);
		for (size_t i = 0; i < coll_ompi_ntypes(); i++) {
			unsigned sz;
			const char *sym = coll_ompi_type_sym(i, &sz);
			uint64_t vaddr;

			if (!elf_object_lookup(fd, sym, &vaddr))
				hmap__put(st->type_size, pid, exec ? vaddr : start + vaddr,
					  (uint64_t)sz + 1);
		}
		close(fd);
	}
	if (fp)
		fclose(fp);
}

/* Bytes of one element of datatype type (MPICH handle, Open MPI object, NCCL enum). */
static uint64_t coll_type_size(struct region_state *st, uint32_t pid, const struct coll_pair *cp,
			       uint64_t type)
{
	uint64_t v;
	unsigned sz;

	if (cp->fam == COLL_NCCL)
		return coll_nccl_type_size(type);
	sz = coll_mpich_type_size(type);
	if (sz || !type)
		return sz;
	ompi_register(st, pid); /* once per process: normally done by scan_pid already */
	return hmap__get(st->type_size, pid, type, &v) ? v - 1 : 0;
}

/* A communication call's bytes, communicator number and flags onto its region event. */
static void coll_note(struct region_state *st, const struct ev_region *e, struct event *ev)
{
	const struct coll_pair *cp = &st->coll[e->pair];
	uint64_t bytes = 0, comm = 0, id = 0, count = 0;

	ev->flags |= EVF_REGION_COMM | (cp->fn->collective ? EVF_REGION_COLL : 0);
	if (e->h.flags & REGION_F_ARGS) {
		if (cp->fn->count && cp->fn->type)
			bytes = e->args[0] * coll_type_size(st, e->h.pid, cp, e->args[1]);
		comm = cp->fn->comm ? e->args[2] : 0;
		log_debug("region %s: count %" PRIu64 " type %#" PRIx64 " comm %#" PRIx64
			  " bytes %" PRIu64, cp->fn->name, (uint64_t)e->args[0], (uint64_t)e->args[1], (uint64_t)e->args[2], bytes);
	}
	/*
	 * Number communicators in the order the process first used them (handles differ from
	 * process to process). gloo's calls have one implicit communicator; calls that take none
	 * (waits, group brackets) get none.
	 */
	if (!cp->fn->comm && !(cp->fam == COLL_GLOO && cp->fn->collective))
		id = 0;
	else if (!hmap__get(st->comm_ids, e->h.pid, comm, &id)) {
		hmap__get(st->comm_count, e->h.pid, 0, &count);
		id = ++count;
		hmap__put(st->comm_count, e->h.pid, 0, count);
		hmap__put(st->comm_ids, e->h.pid, comm, id);
	}
	ev_set_region_comm(ev, bytes, (uint32_t)id);
}

/* NVTX v2 entry points (libnvToolsExt.so.1, libnvtx*): push/pop and start/end ranges. */
static int attach_nvtx(struct region_state *st, const char *path, int fd, uint64_t dev,
		       uint64_t ino)
{
	static const struct {
		const char *begin, *end, *pair;
	} fns[] = {
		{ "nvtxRangePushA", "nvtxRangePop", "nvtx" },
		{ "nvtxRangeStartA", "nvtxRangeEnd", "nvtx_range" },
	};
	struct usdt_arg a;
	int attached = 0;

	if (usdt_arg_parse(ARG0_SPEC, 0, &a))
		memset(&a, 0, sizeof(a));
	for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
		uint64_t vb, ob, ve, oe;
		int pair, b, e;

		if (elf_func_lookup(fd, fns[i].begin, &vb, &ob) ||
		    elf_func_lookup(fd, fns[i].end, &ve, &oe))
			continue;
		pair = pair_new(st, fns[i].pair);
		if (pair < 0)
			return pair;
		b = probe_new(st, pair, REGION_OP_BEGIN, &a);
		e = probe_new(st, pair, REGION_OP_END, NULL);
		if (b < 0 || e < 0)
			return b < 0 ? b : e;
		if (!attach_site(st, path, dev, ino, ob, false, b, 0, a.size != 0) &&
		    !attach_site(st, path, dev, ino, oe, false, e, 0, false))
			attached++;
	}
	if (attached)
		log_info("NVTX ranges traced in %s", path);
	return attached;
}

static int attach_spec(struct region_state *st, struct region_spec *s, const char *path, int fd,
		       uint64_t dev, uint64_t ino)
{
	int err;

	if (!s->usdt) {
		err = attach_func(st, s, path, fd, dev, ino);
	} else {
		err = attach_usdt(st, path, fd, dev, ino, s->what, s->name, s->name);
		if (err == 0) {
			log_err("no USDT probes %s:%s__begin/__end or _start/_end in '%s'", s->what,
				s->name, path);
			err = -ENOENT;
		}
	}
	if (err >= 0)
		s->done = true;
	return err < 0 ? err : 0;
}

static bool seen(const struct region_state *st, uint64_t dev, uint64_t ino)
{
	for (size_t i = 0; i < st->nseen; i++)
		if (st->seen[i].dev == dev && st->seen[i].ino == ino)
			return true;
	return false;
}

static int seen_add(struct region_state *st, uint64_t dev, uint64_t ino)
{
	if (seen(st, dev, ino))
		return 0;
	if (arr_grow(st->seen, st->seen_cap, st->nseen + 1))
		return -ENOMEM;
	st->seen[st->nseen++] = (struct file_id){ dev, ino };
	return 0;
}

/*
 * A file mapped executable by a target (path openable from here). Explicit
 * specs naming it by file name, the eprof provider's probes and NVTX.
 */
static int scan_file(struct region_state *st, const char *path, uint64_t dev, uint64_t ino)
{
	int fd, err = 0;

	if (seen(st, dev, ino))
		return 0;
	if (seen_add(st, dev, ino))
		return -ENOMEM;
	fd = open_regular(path);
	if (fd < 0)
		return 0;
	for (size_t i = 0; i < st->nspecs; i++) {
		struct region_spec *s = &st->specs[i];

		if (s->done || s->by_path || !bin_matches(s->bin, path))
			continue;
		/* Probes on a library loaded later: one line, and the record goes on. */
		if (attach_spec(st, s, path, fd, dev, ino))
			s->done = true;
	}
	if (st->auto_on) {
		const char *bn = strrchr(path, '/');

		bn = bn ? bn + 1 : path;
		err = attach_usdt(st, path, fd, dev, ino, "eprof", "region", "region");
		if (err > 0)
			log_info("EPROF_REGION probes traced in %s", path);
		if (!strncmp(bn, "libnvToolsExt", 13) || !strncmp(bn, "libnvtx", 7))
			err = attach_nvtx(st, path, fd, dev, ino);
		else if (coll_family_of(path) != COLL_NONE)
			err = attach_coll(st, coll_family_of(path), path, fd, dev, ino);
		if (err == -ENOMEM)
			goto out;
		err = 0;
	}
out:
	close(fd);
	return err;
}

static int scan_pid(struct region_state *st, uint32_t pid)
{
	char path[64], line[PATH_MAX + 256], file[PATH_MAX + 64];
	struct stat sb;
	FILE *fp;
	int err = 0;

	snprintf(path, sizeof(path), "/proc/%u/maps", pid);
	fp = fopen(path, "re");
	if (!fp)
		return 0;
	while (!err && fgets(line, sizeof(line), fp)) {
		unsigned maj, min;
		unsigned long long ino;
		char perms[8];
		int n = 0;

		if (sscanf(line, "%*x-%*x %7s %*x %x:%x %llu %n", perms, &maj, &min, &ino,
			   &n) < 4 ||
		    !strchr(perms, 'x') || !ino || line[n] != '/')
			continue;
		line[strcspn(line, "\n")] = '\0';
		/* " (deleted)" files cannot be probed by path. */
		if (strstr(line + n, " (deleted)"))
			continue;
		if (coll_family_of(line + n) == COLL_MPI)
			ompi_register(st, pid);
		if (seen(st, makedev(maj, min), ino))
			continue;
		/*
		 * maps shows the device of the underlying filesystem (overlayfs,
		 * btrfs): key files by stat() like the paths given by hand, and
		 * remember the maps identity too.
		 */
		snprintf(file, sizeof(file), "/proc/%u/root%s", pid, line + n);
		if (!stat(file, &sb))
			err = scan_file(st, file, makedev(major(sb.st_dev), minor(sb.st_dev)),
					sb.st_ino);
		if (!err)
			err = seen_add(st, makedev(maj, min), ino);
	}
	fclose(fp);
	return err;
}

/* The launched command's executable, before it execs: argv[0] looked up in PATH. */
static bool command_path(const char *argv0, char *out, size_t len)
{
	const char *env = getenv("PATH");
	char *copy, *save = NULL, *dir;
	bool found = false;

	if (strchr(argv0, '/')) {
		snprintf(out, len, "%s", argv0);
		return access(out, X_OK) == 0;
	}
	copy = strdup(env ? env : "/usr/bin:/bin");
	if (!copy)
		return false;
	for (dir = strtok_r(copy, ":", &save); dir && !found; dir = strtok_r(NULL, ":", &save)) {
		snprintf(out, len, "%s/%s", *dir ? dir : ".", argv0);
		found = access(out, X_OK) == 0;
	}
	free(copy);
	return found;
}

static int scan_path(struct region_state *st, const char *path)
{
	struct stat sb;

	if (stat(path, &sb))
		return 0;
	return scan_file(st, path, makedev(major(sb.st_dev), minor(sb.st_dev)), sb.st_ino);
}

struct needed_ctx {
	struct region_state *st;
	int err;
};

static void scan_needed(void *arg, const char *path)
{
	struct needed_ctx *c = arg;

	if (!c->err)
		c->err = scan_path(c->st, path);
}

/*
 * A launched command's executable and the libraries it links: probed before
 * it starts, so regions at its very beginning are not missed. Libraries it
 * loads later come from the poll hook.
 */
static int scan_command(struct region_state *st, const char *path)
{
	struct needed_ctx c = { st, 0 };
	int fd, err = scan_path(st, path);

	if (err)
		return err;
	fd = open_regular(path);
	if (fd < 0)
		return 0;
	elf_needed_paths(fd, path, getenv("LD_LIBRARY_PATH"), scan_needed, &c);
	close(fd);
	return c.err;
}

/* py:FUNC: a region pair and the name candidates BPF compares code objects with. */
static int py_spec_configure(struct region_state *st, struct region_spec *s)
{
	const struct record_opts *o = st->f->o;
	int pair, n;

	if (o->no_python || o->all) {
		log_err("--region %s needs Python frames: not with %s", s->arg,
			o->all ? "-a" : "--no-python");
		return -EINVAL;
	}
	if (st->npy_specs == PY_RSPEC_MAX) {
		log_err("--region %s: at most %d py: regions", s->arg, PY_RSPEC_MAX);
		return -EINVAL;
	}
	pair = pair_new(st, s->what);
	if (pair < 0)
		return pair;
	n = py_region_cands(s->what, st->npy_specs, pair, st->py_cands + st->npy_cands,
			    PY_RCAND_MAX - st->npy_cands);
	if (n < 0) {
		log_err("--region %s: %s", s->arg,
			n == -E2BIG ? "too many dotted parts in the py: regions" : "invalid name");
		return -EINVAL;
	}
	st->npy_cands += n;
	st->npy_specs++;
	s->py = true;
	s->done = true;
	return 0;
}

static int region_configure(struct feature_ctx *f, void **state)
{
	const struct record_opts *o = f->o;
	struct region_state *st = calloc(1, sizeof(*st));
	struct utsname u;
	int err = -EINVAL;

	if (!st)
		return -ENOMEM;
	*state = st;
	st->f = f;
	st->labels = hmap__new(64);
	st->type_size = hmap__new(16);
	st->comm_ids = hmap__new(16);
	st->comm_count = hmap__new(16);
	if (!st->labels || !st->type_size || !st->comm_ids || !st->comm_count)
		return -ENOMEM;
	st->auto_on = !o->no_auto_regions && !o->all;
	st->specs = calloc(o->nregions + o->nusdts + 1, sizeof(*st->specs));
	if (!st->specs)
		return -ENOMEM;
	for (size_t i = 0; i < o->nregions + o->nusdts; i++) {
		bool usdt = i >= o->nregions;
		const char *arg = usdt ? o->usdts[i - o->nregions] : o->regions[i];

		if (spec_parse(&st->specs[i], arg, usdt)) {
			log_err("invalid --%s '%s'", usdt ? "usdt" : "region", arg);
			return -EINVAL;
		}
		if (!usdt && !strcmp(st->specs[i].bin, "py")) {
			err = py_spec_configure(st, &st->specs[i]);
			if (err)
				return err;
			st->nspecs++;
			continue;
		}
		if (o->all && !st->specs[i].by_path) {
			log_err("--%s '%s': with -a, name the binary by its path",
				usdt ? "usdt" : "region", arg);
			return err;
		}
		st->nspecs++;
	}
	if (st->npy_specs) {
		f->skel->rodata->py_nrspec = st->npy_specs;
		f->skel->rodata->py_nrcand = st->npy_cands;
		for (uint32_t i = 0; i < st->npy_cands; i++)
			f->skel->rodata->py_rpair[st->py_cands[i].spec] = st->py_cands[i].pair;
		bpf_program__set_autoload(f->skel->progs.py_region_switch, true);
	} else {
		/* only the py: regions' programs fill them (an LRU map is preallocated) */
		bpf_map__set_max_entries(f->skel->maps.py_rthreads, 1);
		bpf_map__set_max_entries(f->skel->maps.py_rmatch, 1);
	}
	/* the probes' programs: loaded by region_progs() with the first probe */
	st->multi = st->auto_on && kernel_at_least(6, 6) && !getenv("EPROF_NO_UPROBE_MULTI");
	/* Sleepable uprobes came with Linux 6.0; before, unread names are read later. */
	if (uname(&u) == 0 && atoi(u.release) >= 6)
		st->sleepable = true;
	bpf_map__set_max_entries(f->skel->maps.region_probes, REGION_MAX_PROBES);
	return 0;
}

/*
 * A name BPF could not read (its page not yet faulted in by the target):
 * read it from /proc/PID/mem, once per (pid, address). 0 when unreadable or
 * not a name.
 */
static uint32_t label_from_mem(struct region_state *st, uint32_t pid, uint64_t addr)
{
	char path[64], buf[EPROF_REGION_LABEL + 1];
	uint64_t id;
	ssize_t n;
	int fd;

	if (hmap__get(st->labels, pid, addr, &id))
		return id;
	snprintf(path, sizeof(path), "/proc/%u/mem", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	n = fd >= 0 ? pread(fd, buf, EPROF_REGION_LABEL, (off_t)addr) : -1;
	if (fd >= 0)
		close(fd);
	id = 0;
	if (n > 0) {
		buf[n] = '\0';
		if (buf[0] >= 0x20 && buf[0] < 0x7f)
			id = profile__intern(st->f->p, buf);
	}
	hmap__put(st->labels, pid, addr, id);
	return id;
}

static int handle_region(struct event_ctx *c, void *arg, const void *data, size_t size)
{
	struct region_state *st = arg;
	const struct ev_region *e = data;
	struct event ev = { 0 };
	char label[EPROF_REGION_LABEL + 1];

	if (size < sizeof(*e) || e->h.kind != EV_REGION || e->pair >= st->npairs ||
	    e->label_len > EPROF_REGION_LABEL)
		return -EINVAL;
	ev.kind = EVK_REGION;
	ev.ts = e->h.ts;
	ev.dur = e->dur;
	ev.pid = e->h.pid;
	ev.tid = e->h.tid;
	ev_set_region_depth(&ev, e->depth);
	ev.flags = e->h.flags & REGION_F_OPEN ? EVF_REGION_OPEN : 0;
	if (e->h.flags & REGION_F_SAMPLED)
		ev.flags |= EVF_REGION_SAMPLED;
	if (e->pair < st->ncoll && st->coll[e->pair].fn) {
		coll_note(st, e, &ev);
	} else if (e->label_len) {
		memcpy(label, e->label, e->label_len);
		label[e->label_len] = '\0';
		ev.name = profile__intern(c->p, label);
	} else if (e->label_addr) {
		ev.name = label_from_mem(st, e->h.pid, e->label_addr);
	}
	if (!ev.name)
		ev.name = st->pair_str[e->pair];
	events_note_thread(c, e->h.pid, e->h.tid, NULL, e->h.ts);
	return profile__add_event(c->p, &ev);
}

static int region_attach(struct feature_ctx *f, void *state)
{
	struct region_state *st = state;
	const struct record_opts *o = f->o;
	char path[PATH_MAX];
	int err;

	err = events_add_handler(f->ev, EV_REGION, EV_REGION, handle_region, st);
	if (err)
		return err;
	for (uint32_t i = 0; i < st->npy_cands; i++) {
		err = bpf_map__update_elem(f->skel->maps.py_rcands, &i, sizeof(i), &st->py_cands[i],
					   sizeof(st->py_cands[i]), BPF_ANY);
		if (err)
			return err;
	}
	for (size_t i = 0; i < st->nspecs; i++) {
		struct region_spec *s = &st->specs[i];
		struct stat sb;
		int fd;

		if (!s->by_path)
			continue;
		fd = open_regular(s->bin);
		if (fd < 0 || fstat(fd, &sb)) {
			err = -errno;
			log_err("failed to open '%s' for --%s: %s", s->bin,
				s->usdt ? "usdt" : "region", strerror(errno));
			if (fd >= 0)
				close(fd);
			return err;
		}
		err = attach_spec(st, s, s->bin, fd, makedev(major(sb.st_dev), minor(sb.st_dev)),
				  sb.st_ino);
		close(fd);
		if (err)
			return err;
	}
	if (o->argv && command_path(o->argv[0], path, sizeof(path))) {
		err = scan_command(st, path);
		if (err)
			return err;
	}
	for (size_t i = 0; i < o->npids; i++) {
		mapwatch_changed(f->maps, MAPWATCH_REGION, o->pids[i]); /* seen from now on */
		err = scan_pid(st, o->pids[i]);
		if (err)
			return err;
	}
	for (size_t i = 0; i < st->nspecs; i++)
		if (!st->specs[i].done)
			log_info("%s: waiting for '%s' to be mapped", st->specs[i].arg,
				 st->specs[i].bin);
	st->next_scan = 0;
	return 0;
}

static int region_poll(struct feature_ctx *f, void *state, uint64_t now)
{
	struct region_state *st = state;
	struct profile *p = f->p;
	int err = 0;

	if (f->o->all || now < st->next_scan)
		return 0;
	st->next_scan = now + (now - f->start_ns < 2000000000ULL ? SCAN_FAST_NS : SCAN_SLOW_NS);
	for (size_t i = 0; i < p->procs.n && !err; i++)
		if (!p->procs.v[i].exit_ts &&
		    mapwatch_changed(f->maps, MAPWATCH_REGION, p->procs.v[i].pid))
			err = scan_pid(st, p->procs.v[i].pid);
	return err == -ENOMEM ? err : 0;
}

static uint32_t thread_pid(struct profile *p, uint32_t tid)
{
	struct thread *t = profile__thread(p, 0, tid, false);
	char path[64], line[256];
	unsigned pid = 0;
	FILE *fp;

	if (t)
		return t->pid;
	snprintf(path, sizeof(path), "/proc/%u/status", tid);
	fp = fopen(path, "re");
	if (!fp)
		return 0;
	while (fgets(line, sizeof(line), fp))
		if (sscanf(line, "Tgid: %u", &pid) == 1)
			break;
	fclose(fp);
	return pid;
}

/* Regions still open when the record stops: sent with the time up to now, flagged open. */
static int emit_open(struct region_state *st, uint64_t now)
{
	struct bpf_map *m = st->f->skel->maps.region_threads;
	struct region_tstate *t = malloc(sizeof(*t));
	uint32_t key, next, *prev = NULL;
	int err = 0;

	if (!t)
		return -ENOMEM;
	while (!err && !bpf_map__get_next_key(m, prev, &next, sizeof(next))) {
		key = next;
		prev = &key;
		if (bpf_map__lookup_elem(m, &key, sizeof(key), t, sizeof(*t), 0))
			continue;
		for (uint32_t d = 0; d < t->depth && d < EPROF_REGION_DEPTH && !err; d++) {
			struct region_slot *s = &t->s[d];
			struct ev_region e = { 0 };

			e.h.size = sizeof(e);
			e.h.kind = EV_REGION;
			e.h.flags = REGION_F_OPEN;
			e.h.pid = thread_pid(st->f->p, key);
			e.h.tid = key;
			e.h.ts = s->start;
			e.dur = now > s->start ? now - s->start : 0;
			e.pair = s->pair;
			e.depth = d;
			e.label_len = s->label_len;
			e.label_addr = s->label_addr;
			memcpy(e.label, s->label, sizeof(e.label));
			if (e.h.pid)
				err = handle_region(st->f->ev, st, &e, sizeof(e));
		}
	}
	free(t);
	return err == -ENOMEM ? err : 0;
}

/* Python calls still running when the record stops: up to their last observation, open. */
static int emit_open_py(struct region_state *st)
{
	struct bpf_map *m = st->f->skel->maps.py_rthreads;
	uint32_t key, next, *prev = NULL;
	struct py_rthread t;
	int err = 0;

	while (!err && !bpf_map__get_next_key(m, prev, &next, sizeof(next))) {
		key = next;
		prev = &key;
		if (bpf_map__lookup_elem(m, &key, sizeof(key), &t, sizeof(t), 0))
			continue;
		for (uint32_t s = 0; s < st->npy_specs && !err; s++) {
			struct ev_region e = { 0 };

			if (!t.frame[s])
				continue;
			e.h.size = sizeof(e);
			e.h.kind = EV_REGION;
			e.h.flags = REGION_F_OPEN | REGION_F_SAMPLED;
			e.h.pid = thread_pid(st->f->p, key);
			e.h.tid = key;
			e.h.ts = t.start[s];
			e.dur = t.last[s] - t.start[s];
			e.pair = st->f->skel->rodata->py_rpair[s];
			if (e.h.pid)
				err = handle_region(st->f->ev, st, &e, sizeof(e));
		}
	}
	return err == -ENOMEM ? err : 0;
}

static void detach_all(struct region_state *st)
{
	for (size_t i = 0; i < st->nlinks; i++)
		bpf_link__destroy(st->links[i]);
	st->nlinks = 0;
	for (size_t i = 0; i < st->nmfds; i++)
		close(st->mfds[i]);
	st->nmfds = 0;
}

static int region_finish(struct feature_ctx *f, void *state)
{
	struct region_state *st = state;
	struct timespec ts;
	int err;

	/*
	 * Each uprobe detach waits for the kernel (100+ ms, serialized): switch the
	 * probes off here and detach in destroy, once the file is written.
	 */
	f->skel->bss->region_stopped = true;
	f->skel->bss->py_rstopped = true;
	f->consume(f);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	err = emit_open(st, (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec);
	if (!err && st->npy_specs)
		err = emit_open_py(st);
	f->p->stats[STAT_REGIONS_LOST] = f->bpf_stat(f, BSTAT_REGION_RB_FULL) +
					 f->bpf_stat(f, BSTAT_REGION_TOO_DEEP) +
					 f->bpf_stat(f, BSTAT_REGION_NO_STATE);
	f->p->stats[STAT_REGIONS_UNMATCHED] = f->bpf_stat(f, BSTAT_REGION_UNMATCHED);
	for (size_t i = 0; i < st->nspecs; i++)
		if (!st->specs[i].done)
			log_warn("%s: '%s' was never mapped by a target: no regions from it",
				 st->specs[i].arg, st->specs[i].bin);
	return err;
}

static void region_destroy(struct feature_ctx *f, void *state)
{
	struct region_state *st = state;

	if (!st)
		return;
	detach_all(st);
	profile_bpf__destroy(st->late);
	for (size_t i = 0; i < st->npairs; i++)
		free(st->pairs[i]);
	free(st->pairs);
	free(st->pair_str);
	free(st->links);
	free(st->sites);
	free(st->seen);
	free(st->specs);
	hmap__free(st->labels);
	hmap__free(st->type_size);
	hmap__free(st->comm_ids);
	hmap__free(st->comm_count);
	free(st->coll);
	free(st->mfds);
	free(st);
}

static const char *const region_maps[] = { "region_threads", "py_rthreads", "py_rmatch", NULL };

const struct feature feature_region = {
	.name = "region",
	.maps = region_maps,
	.enabled = regions_enabled,
	.configure = region_configure,
	.attach = region_attach,
	.poll = region_poll,
	.finish = region_finish,
	.destroy = region_destroy,
};
