// SPDX-License-Identifier: MIT
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "sym/symbolizer.h"
#include "unwind/unwind.h"
#include "util/elf_layout.h"
#include "util/hmap.h"
#include "util/log.h"
#include "util/vec.h"
#include "proc.h"

/* One mapped file, opened once for the whole record. */
struct objinfo {
	uint32_t obj; /* profile object id */
	int fd;
	char fdpath[32];
	struct elf_layout layout; /* segments, and e_entry: a process's first frame */
	struct cfi_table *cfi;
	size_t cfi_bytes;
	uint64_t cfi_used; /* last unwind through it (CLOCK_MONOTONIC of the event), for eviction */
	bool cfi_tried;
	bool is_vdso;
};

struct pmap {
	uint64_t start, end, pgoff;
	uint32_t obj;	       /* profile object id */
	struct objinfo *oi;    /* NULL for anonymous memory and JIT */
	uint8_t kind;	       /* enum object_kind */
};

struct pstate {
	uint32_t pid;
	struct pmap *maps; /* sorted by start */
	size_t n;
	uint64_t last_scan; /* CLOCK_MONOTONIC when /proc/PID/maps was last read */
	uint64_t exit_ns;   /* CLOCK_MONOTONIC when its exit was seen */
	uint64_t look_again; /* CLOCK_MONOTONIC: read the maps again then (after an exec) */
	bool exited;
};

struct proc_tracker {
	struct profile *p;
	struct tracker_opts opts;
	struct hmap *pid_index; /* pid -> pstates index */
	struct pstate *ps;
	size_t nps, capps;
	struct hmap *file_index; /* (dev, ino) -> objinfo index + 1 */
	struct objinfo **objs;	 /* by insertion */
	size_t nobjs, capobjs;
	struct objinfo **by_obj; /* profile object id -> objinfo */
	size_t nby_obj;
	struct objinfo vdso;
	size_t cfi_bytes;  /* held by all tables */
	uint64_t cfi_evictions;
	size_t cfi_grown; /* the budget, grown to a working set larger than the one set */
	struct code_slot *code; /* code bytes before return addresses, for stack scanning */
	uint32_t *again;	/* pids with a look_again due */
	size_t nagain, capagain;
};

/*
 * Unwind tables are built when a sample first needs them and kept; with -a a
 * long record meets many large binaries (libLLVM: 7.4 MB of rows) most of which
 * run once. Past this budget the least recently used tables are dropped and
 * built again if needed, so the recorder's memory stays bounded.
 */
#define CFI_BUDGET_DEFAULT (40u << 20)
#define CFI_BUDGET_SET(t) ((t)->opts.cfi_budget ? (t)->opts.cfi_budget : CFI_BUDGET_DEFAULT)
#define CFI_BUDGET(t) (CFI_BUDGET_SET(t) > (t)->cfi_grown ? CFI_BUDGET_SET(t) : (t)->cfi_grown)
/*
 * A table used this recently is part of the working set: evicting it means building it again
 * at its next use (50-250 ms for a big library), sample after sample. The budget grows to the
 * working set instead, up to CFI_BUDGET_MAX (a PyTorch CUDA job's libraries need more than
 * the default).
 */
#define CFI_HOT_NS (5ULL * 1000000000ULL)
/* After an exec, the maps are read once more this much later (proc_tracker__poll). */
#define PROC_LOOK_AGAIN_NS (10ULL * 1000000ULL)
#define CFI_BUDGET_MAX ((size_t)1 << 30)

static int by_obj_set(struct proc_tracker *t, uint32_t obj, struct objinfo *oi)
{
	if (obj >= t->nby_obj) {
		size_t n = obj * 2 + 16;
		struct objinfo **nb = realloc(t->by_obj, n * sizeof(*nb));

		if (!nb)
			return -ENOMEM;
		memset(nb + t->nby_obj, 0, (n - t->nby_obj) * sizeof(*nb));
		t->by_obj = nb;
		t->nby_obj = n;
	}
	t->by_obj[obj] = oi;
	return 0;
}

static void load_vdso_info(struct proc_tracker *t)
{
	const void *img = (const void *)getauxval(AT_SYSINFO_EHDR);
	const Elf64_Ehdr *eh = img;
	size_t size = 0;

	t->vdso.fd = -1;
	t->vdso.is_vdso = true;
	t->vdso.cfi_tried = true;
	if (!img || !t->opts.want_cfi)
		return;
	/* The vDSO has no file: its size is the end of its last section header table or segment. */
	for (int i = 0; i < eh->e_phnum; i++) {
		const Elf64_Phdr *ph = (const Elf64_Phdr *)((const char *)img + eh->e_phoff) + i;

		if (ph->p_type == PT_LOAD && ph->p_offset + ph->p_filesz > size)
			size = ph->p_offset + ph->p_filesz;
	}
	if (eh->e_shoff + (size_t)eh->e_shnum * eh->e_shentsize > size)
		size = eh->e_shoff + (size_t)eh->e_shnum * eh->e_shentsize;
	t->vdso.cfi = cfi_table__load_mem(img, size, &(int){ 0 });
}

struct proc_tracker *proc_tracker__new(struct profile *p, const struct tracker_opts *opts)
{
	struct proc_tracker *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->p = p;
	t->opts = *opts;
	if (!t->opts.proc_root)
		t->opts.proc_root = "/proc";
	t->pid_index = hmap__new(64);
	t->file_index = hmap__new(64);
	if (!t->pid_index || !t->file_index) {
		proc_tracker__free(t);
		return NULL;
	}
	elf_version(EV_CURRENT);
	load_vdso_info(t);
	return t;
}

void proc_tracker__free(struct proc_tracker *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->nps; i++)
		free(t->ps[i].maps);
	free(t->ps);
	for (size_t i = 0; i < t->nobjs; i++) {
		if (t->objs[i]->fd >= 0)
			close(t->objs[i]->fd);
		cfi_table__free(t->objs[i]->cfi);
		free(t->objs[i]);
	}
	cfi_table__free(t->vdso.cfi);
	free(t->code);
	free(t->again);
	free(t->objs);
	free(t->by_obj);
	hmap__free(t->pid_index);
	hmap__free(t->file_index);
	free(t);
}

static struct pstate *pstate_get(struct proc_tracker *t, uint32_t pid, bool create)
{
	uint64_t idx;

	if (hmap__get(t->pid_index, pid, 0, &idx))
		return &t->ps[idx];
	if (!create)
		return NULL;
	if (arr_grow(t->ps, t->capps, t->nps + 1))
		return NULL;
	memset(&t->ps[t->nps], 0, sizeof(t->ps[0]));
	t->ps[t->nps].pid = pid;
	if (hmap__put(t->pid_index, pid, 0, t->nps))
		return NULL;
	return &t->ps[t->nps++];
}

static int open_mapped_file(struct proc_tracker *t, uint32_t pid, uint64_t start, uint64_t end,
			    const char *path)
{
	char buf[PATH_MAX + 64];
	int fd, root;

	/* map_files reaches the very inode mapped, even when deleted or in another mount ns. */
	snprintf(buf, sizeof(buf), "%s/%u/map_files/%" PRIx64 "-%" PRIx64, t->opts.proc_root, pid,
		 start, end);
	fd = open_regular(buf);
	if (fd >= 0)
		return fd;
	/* The path as the target sees it: an absolute symlink stays inside its root. */
	snprintf(buf, sizeof(buf), "%s/%u/root", t->opts.proc_root, pid);
	root = open(buf, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return open_regular(path); /* gone: the path as we see it */
	fd = open_in_root(root, path, false);
	close(root);
	return fd;
}

static struct objinfo *objinfo_get(struct proc_tracker *t, uint32_t pid, uint64_t start,
				   uint64_t end, uint64_t dev, uint64_t ino, const char *path)
{
	char build_id[128] = "";
	struct objinfo *oi;
	uint64_t idx;
	int64_t obj;

	if (hmap__get(t->file_index, dev, ino, &idx))
		return t->objs[idx];
	oi = calloc(1, sizeof(*oi));
	if (!oi)
		return NULL;
	oi->fd = open_mapped_file(t, pid, start, end, path);
	if (oi->fd >= 0) {
		snprintf(oi->fdpath, sizeof(oi->fdpath), "/proc/self/fd/%d", oi->fd);
		elf_layout_read(oi->fd, &oi->layout);
		if (elf_read_build_id(oi->fdpath, build_id, sizeof(build_id)))
			build_id[0] = '\0';
	} else {
		log_debug("cannot open '%s' of pid %u: %s", path, pid, strerror(errno));
	}
	obj = profile__object(t->p, OBJ_ELF, path, build_id, 0);
	if (obj < 0)
		goto fail;
	if (arr_grow(t->objs, t->capobjs, t->nobjs + 1))
		goto fail;
	oi->obj = obj;
	t->objs[t->nobjs] = oi;
	if (hmap__put(t->file_index, dev, ino, t->nobjs) || by_obj_set(t, obj, oi))
		return NULL;
	t->nobjs++;
	return oi;
fail:
	if (oi->fd >= 0)
		close(oi->fd);
	free(oi);
	return NULL;
}

/*
 * A JIT's perf map or jitdump file (shown: its name in the process), opened
 * once and kept: the JIT appends to it while it runs and may delete it at
 * exit, and /proc/PID/root is gone once the process is.
 */
/* Takes fd (the perf map, open_perfmap()): kept by the object, or closed. */
static int64_t perfmap_object(struct proc_tracker *t, uint32_t pid, int fd, const char *shown)
{
	struct objinfo *oi;
	int64_t obj;

	obj = profile__object(t->p, OBJ_PERFMAP, shown, "", pid);
	if (obj < 0 || proc_tracker__object_path(t, obj) || arr_grow(t->objs, t->capobjs,
								      t->nobjs + 1)) {
		if (fd >= 0)
			close(fd);
		return obj < 0 || proc_tracker__object_path(t, obj) ? obj : -ENOMEM;
	}
	oi = calloc(1, sizeof(*oi));
	if (!oi) {
		if (fd >= 0)
			close(fd);
		return -ENOMEM;
	}
	oi->obj = obj;
	oi->fd = fd;
	if (oi->fd >= 0)
		snprintf(oi->fdpath, sizeof(oi->fdpath), "/proc/self/fd/%d", oi->fd);
	t->objs[t->nobjs++] = oi;
	if (by_obj_set(t, obj, oi))
		return -ENOMEM;
	return obj;
}

/* The effective uid of pid and its pid in its own pid namespace (NSpid's last), from status. */
static bool proc_ids(const char *proc_root, uint32_t pid, uint32_t *euid, uint32_t *nspid)
{
	char path[PATH_MAX], line[256];
	bool uid = false;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%u/status", proc_root, pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	*nspid = pid; /* kernels without NSpid: no pid namespaces to tell */
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "Uid:", 4)) {
			uid = sscanf(line + 4, "%*u %u", euid) == 1;
		} else if (!strncmp(line, "NSpid:", 6)) {
			char *last = strrchr(line, '\t');

			*nspid = (uint32_t)strtoul(last ? last + 1 : line + 6, NULL, 10);
		}
	}
	fclose(f);
	return uid && *nspid;
}

/*
 * The perf map of pid, where perf looks: /tmp/perf-NSPID.map in the target's root (NSPID: its
 * pid in its own namespace), no symlink followed, a regular file owned by the target's user
 * (root's only for a root target), at most PERFMAP_MAX bytes. -1 when none can be trusted.
 */
static int open_perfmap(const char *proc_root, uint32_t pid)
{
	char path[PATH_MAX];
	struct stat st;
	uint32_t euid, nspid;
	int root, fd;

	if (!proc_ids(proc_root, pid, &euid, &nspid))
		return -1;
	snprintf(path, sizeof(path), "%s/%u/root", proc_root, pid);
	root = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return -1;
	snprintf(path, sizeof(path), "tmp/perf-%u.map", nspid);
	fd = open_in_root(root, path, true);
	close(root);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) || st.st_uid != euid || st.st_size > PERFMAP_MAX) {
		log_debug("proc: perf map of %u not read: not its user's, or over %d MiB", pid,
			  PERFMAP_MAX >> 20);
		close(fd);
		return -1;
	}
	return fd;
}

static bool is_anon_path(const char *path)
{
	return !*path || !strncmp(path, "[anon", 5) || !strncmp(path, "//anon", 6) ||
	       !strcmp(path, "[heap]") || !strcmp(path, "[stack]");
}

/* Classifies one executable mapping and interns its object. */
static int classify(struct proc_tracker *t, uint32_t pid, struct pmap *m, uint64_t dev,
		    uint64_t ino, const char *path)
{
	int64_t obj;

	if (!strcmp(path, "[vdso]")) {
		m->kind = OBJ_VDSO;
		m->oi = &t->vdso;
		obj = profile__object(t->p, OBJ_VDSO, "[vdso]", "", 0);
	} else if (!strcmp(path, "[vsyscall]")) {
		/* The same fixed page in every process: one object for all of them. */
		m->kind = OBJ_ANON;
		obj = profile__object(t->p, OBJ_ANON, "[vsyscall]", "", 0);
	} else if (is_anon_path(path) || !ino) {
		/* JIT code: named by the process's perf map when it writes one. */
		int fd = open_perfmap(t->opts.proc_root, pid);

		if (fd >= 0) {
			char shown[64];

			snprintf(shown, sizeof(shown), "/tmp/perf-%u.map", pid);
			m->kind = OBJ_PERFMAP;
			obj = perfmap_object(t, pid, fd, shown);
		} else {
			m->kind = OBJ_ANON;
			obj = profile__object(t->p, OBJ_ANON, *path ? path : "[anon]", "", pid);
		}
	} else {
		m->kind = OBJ_ELF;
		m->oi = objinfo_get(t, pid, m->start, m->end, dev, ino, path);
		if (!m->oi)
			return -ENOMEM;
		obj = m->oi->obj;
	}
	if (obj < 0)
		return (int)obj;
	m->obj = obj;
	return 0;
}

/* A jitdump file: "jit-PID.dump", mapped executable by the JIT so that profilers find it. */
static bool is_jitdump(const char *path, uint32_t pid)
{
	const char *base = strrchr(path, '/');
	char want[32];

	snprintf(want, sizeof(want), "jit-%u.dump", pid);
	return base && !strcmp(base + 1, want);
}

/* The process writes a jitdump (and no perf map): it names the anonymous code. */
static int use_jitdump(struct proc_tracker *t, uint32_t pid, struct pstate *ps, const char *open,
		       const char *path)
{
	int64_t obj = -1;

	for (size_t i = 0; i < ps->n; i++) {
		struct pmap *m = &ps->maps[i];

		if (m->kind != OBJ_ANON ||
		    !is_anon_path(profile__str(t->p, t->p->objects.v[m->obj].path)))
			continue;
		if (obj < 0)
			obj = perfmap_object(t, pid, open_regular(open), path);
		if (obj < 0)
			return (int)obj;
		m->kind = OBJ_PERFMAP;
		m->obj = obj;
	}
	return 0;
}

static int parse_maps(struct proc_tracker *t, uint32_t pid, FILE *f, struct pstate *ps)
{
	char line[PATH_MAX + 128], jitdump[PATH_MAX] = "", jd_open[PATH_MAX + 64];
	size_t cap = 0;

	ps->n = 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long start, end, off, ino;
		unsigned int maj, min;
		char perms[8], *path;
		int pos = 0;
		struct pmap *m;
		int err;

		if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu %n", &start, &end, perms, &off, &maj,
			   &min, &ino, &pos) < 7 || !strchr(perms, 'x'))
			continue;
		path = line + pos;
		path[strcspn(path, "\n")] = '\0';
		if (is_jitdump(path, pid)) {
			snprintf(jitdump, sizeof(jitdump), "%s", path);
			snprintf(jd_open, sizeof(jd_open), "%s/%u/map_files/%llx-%llx",
				 t->opts.proc_root, pid, start, end);
			continue;
		}
		if (arr_grow(ps->maps, cap, ps->n + 1))
			return -ENOMEM;
		m = &ps->maps[ps->n];
		*m = (struct pmap){ .start = start, .end = end, .pgoff = off };
		err = classify(
t, pid, m, (uint64_t)maj << 32 | min, ino, path);
		if (err)
			return err;
		ps->n++;
	}
	return *jitdump ? use_jitdump(t, pid, ps, jd_open, jitdump) : 0;
}

static int record_mappings(struct proc_tracker *t, struct pstate *ps, uint64_t now_ns)
{
	for (size_t i = 0; i < ps->n; i++) {
		struct mapping m = { .pid = ps->pid, .start = ps->maps[i].start,
				     .end = ps->maps[i].end, .pgoff = ps->maps[i].pgoff,
				     .object = ps->maps[i].obj, .ts = now_ns };
		int err = profile__add_mapping(t->p, &m);

		if (err)
			return err;
	}
	return 0;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

int proc_tracker__scan(struct proc_tracker *t, uint32_t pid, uint64_t now_ns)
{
	struct pstate *ps = pstate_get(t, pid, true), tmp = { 0 };
	size_t old_n;
	char path[PATH_MAX];
	FILE *f;
	int err;

	if (!ps)
		return -ENOMEM;
	ps->last_scan = mono_ns();
	snprintf(path, sizeof(path), "%s/%u/maps", t->opts.proc_root, pid);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	old_n = ps->n;
	tmp.pid = pid;
	err = parse_maps(t, pid, f, &tmp);
	fclose(f);
	/*
	 * A process that is exiting has dropped its memory: its maps read empty. Its
	 * events still in the ring buffer need the maps it had, so keep those.
	 */
	if (err || (!tmp.n && old_n)) {
		free(tmp.maps);
		return err ? err : -ESRCH;
	}
	free(ps->maps);
	ps->maps = tmp.maps;
	ps->n = tmp.n;
	if (ps->n != old_n)
		err = record_mappings(t, ps, now_ns);
	return err;
}

int proc_tracker__fork(struct proc_tracker *t, uint32_t ppid, uint32_t pid, uint64_t now_ns)
{
	struct pstate *child, *parent;
	struct pmap *maps;
	int err;

	/* A pid used again: the new process is alive whatever the old one did. */
	child = pstate_get(t, pid, false);
	if (child) {
		child->exited = false;
		child->exit_ns = 0;
	}

	/*
	 * A child that is exiting already reads empty maps (a new pstate keeps them empty): it
	 * has its parent's, which its samples still in the ring buffer need.
	 */
	err = proc_tracker__scan(t, pid, now_ns);
	child = pstate_get(t, pid, false);
	if (err != -ESRCH && (err || (child && child->n)))
		return err;
	parent = pstate_get(t, ppid, false);
	if (!parent || !parent->n)
		return -ESRCH;
	maps = malloc(parent->n * sizeof(*maps));
	child = pstate_get(t, pid, true); /* may move parent: pstates live in one array */
	if (!maps || !child) {
		free(maps);
		return -ENOMEM;
	}
	parent = pstate_get(t, ppid, false);
	memcpy(maps, parent->maps, parent->n * sizeof(*maps));
	free(child->maps);
	child->maps = maps;
	child->n = parent->n;
	child->last_scan = parent->last_scan;
	return 0;
}

int proc_tracker__exec(struct proc_tracker *t, uint32_t pid, uint64_t now_ns)
{
	struct pstate *ps = pstate_get(t, pid, true);
	int err;

	if (!ps)
		return -ENOMEM;
	ps->n = 0;
	ps->exited = false;
	err = proc_tracker__scan(t, pid, now_ns);
	/*
	 * Read right after the exec, the maps hold the program and ld.so; its libraries come a
	 * moment later. A miss reads them again, but a short program (sleep 0.1) may be gone by
	 * the time its events are decoded: one more read shortly after covers it.
	 */
	if (!err && !arr_grow(t->again, t->capagain, t->nagain + 1)) {
		ps = pstate_get(t, pid, false);
		if (ps) {
			ps->look_again = mono_ns() + PROC_LOOK_AGAIN_NS;
			t->again[t->nagain++] = pid;
		}
	}
	return err;
}

void proc_tracker__poll(struct proc_tracker *t)
{
	uint64_t now = mono_ns();
	size_t k = 0;

	for (size_t i = 0; i < t->nagain; i++) {
		struct pstate *ps = pstate_get(t, t->again[i], false);

		if (!ps || ps->exited || !ps->look_again)
			continue;
		if (now < ps->look_again) {
			t->again[k++] = t->again[i];
			continue;
		}
		if (ps->last_scan < ps->look_again)
			proc_tracker__scan(t, ps->pid, now);
		ps = pstate_get(t, t->again[i], false);
		if (ps)
			ps->look_again = 0;
	}
	t->nagain = k;
}

void proc_tracker__exit(struct proc_tracker *t, uint32_t pid)
{
	struct pstate *ps = pstate_get(t, pid, false);
	struct timespec ts;

	if (!ps)
		return;
	ps->exited = true;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ps->exit_ns = (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

void proc_tracker__gc(struct proc_tracker *t, uint64_t now_ns)
{
	/*
	 * The exit event follows the process's last samples in the ring buffer, so its
	 * maps are not needed once that has been read; a few seconds of slack cover
	 * samples of other CPUs still in flight. The whole entry goes, and the pid index
	 * is rebuilt, once enough have gone (a long -a record meets thousands).
	 */
	size_t k = 0, gone = 0;
	struct hmap *idx;

	for (size_t i = 0; i < t->nps; i++) {
		struct pstate *ps = &t->ps[i];

		if (ps->exited && ps->exit_ns && now_ns > ps->exit_ns + 5000000000ULL) {
			free(ps->maps);
			ps->maps = NULL;
			ps->n = 0;
			gone++;
		}
	}
	if (gone < 64 && gone * 4 < t->nps)
		return;
	idx = hmap__new(t->nps - gone + 16);
	if (!idx)
		return;
	for (size_t i = 0; i < t->nps; i++) {
		struct pstate *ps = &t->ps[i];

		if (ps->exited && ps->exit_ns && now_ns > ps->exit_ns + 5000000000ULL)
			continue;
		if (hmap__put(idx, ps->pid, 0, k)) {
			hmap__free(idx);
			return; /* out of memory: keep them all, the old index is intact */
		}
		k++;
	}
	k = 0;
	for (size_t i = 0; i < t->nps; i++) {
		struct pstate *ps = &t->ps[i];

		if (!(ps->exited && ps->exit_ns && now_ns > ps->exit_ns + 5000000000ULL))
			t->ps[k++] = *ps;
	}
	t->nps = k;
	hmap__free(t->pid_index);
	t->pid_index = idx;
}

static struct pmap *find_map(struct pstate *ps, uint64_t pc)
{
	size_t lo = 0, hi = ps->n;

	/* Maps come sorted from the kernel; binary search over start. */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (ps->maps[mid].end <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < ps->n && ps->maps[lo].start <= pc)
		return &ps->maps[lo];
	return NULL;
}

static struct pmap *lookup(struct proc_tracker *t, uint32_t pid, uint64_t pc, uint64_t ts)
{
	struct pstate *ps = pstate_get(t, pid, false);
	struct pmap *m;

	if (!ps) {
		if (proc_tracker__scan(t, pid, ts))
			return NULL;
		ps = pstate_get(t, pid, false);
		if (!ps)
			return NULL;
	}
	m = find_map(ps, pc);
	/*
	 * A miss from a sample taken after our last read of the maps may be a
	 * library mapped since (ld.so right after exec, dlopen): read them again.
	 * A miss from before that read is genuine, so an address that stays
	 * unmapped costs at most one read per batch of newer samples.
	 */
	if (m || ps->exited || ts <= ps->last_scan)
		return m;
	/* A miss on a live process: a library loaded since the last scan. */
	if (proc_tracker__scan(t, pid, ts))
		return NULL;
	return find_map(ps, pc);
}

/*
 * An address in no mapping we saw. In a process whose JIT writes a perf map or
 * jitdump it is most likely JIT code freed before we read the maps again (V8
 * releases code pages): the JIT's list names it by address if it lists it.
 * Otherwise one object for all processes: it names nothing of its process.
 */
static int unknown_location(struct proc_tracker *t, uint32_t pid, uint64_t pc, uint32_t *loc)
{
	struct pstate *ps = pstate_get(t, pid, false);
	int64_t obj = -1;
	int64_t l;

	for (size_t i = 0; ps && i < ps->n && obj < 0; i++)
		if (ps->maps[i].kind == OBJ_PERFMAP)
			obj = ps->maps[i].obj;
	if (obj < 0)
		obj = profile__object(t->p, OBJ_ANON, "[unknown]", "", 0);

	if (obj < 0)
		return (int)obj;
	l = profile__location(t->p, obj, pc);
	if (l < 0)
		return (int)l;
	*loc = l;
	return 0;
}

bool proc_tracker__file_mapped(struct proc_tracker *t, uint32_t pid, uint64_t pc)
{
	struct pstate *ps = pstate_get(t, pid, false);
	struct pmap *m = ps ? find_map(ps, pc) : NULL;

	return m && pc >= m->start && m->kind == OBJ_ELF;
}

int proc_tracker__location(struct proc_tracker *t, uint32_t pid, uint64_t pc, bool is_return,
			   uint32_t *loc, uint64_t now_ns)
{
	struct pmap *m = lookup(t, pid, pc, now_ns);
	uint64_t addr;
	int64_t l;

	if (is_return && pc)
		pc--;
	if (!m || pc < m->start) {
		t->p->stats[STAT_UNMAPPED_ADDR]++;
		return unknown_location(t, pid, pc, loc);
	}
	switch (m->kind) {
	case OBJ_ELF:
		addr = pc - m->start + m->pgoff;
		break;
	case OBJ_VDSO:
		addr = pc - m->start;
		break;
	case OBJ_ANON:
		/* Code without a name (JIT without a perf map): one location per mapping. */
		addr = m->start;
		break;
	default:
		addr = pc;
	}
	l = profile__location(t->p, m->obj, addr);
	if (l < 0)
		return (int)l;
	*loc = l;
	return 0;
}

static bool seg_bias(const struct objinfo *oi, const struct pmap *m, uint64_t pc, uint64_t *bias)
{
	uint64_t vaddr;

	if (!elf_layout_vaddr(&oi->layout, pc - m->start + m->pgoff, &vaddr))
		return false;
	*bias = pc - vaddr;
	return true;
}

/* Drops least recently used tables (never keep) until the total is under budget. */
static void evict_cfi(struct proc_tracker *t, struct objinfo *keep)
{
	uint64_t now = keep->cfi_used;

	while (t->cfi_bytes > CFI_BUDGET(t)) {
		struct objinfo *lru = NULL;

		for (size_t i = 0; i < t->nobjs; i++) {
			struct objinfo *oi = t->objs[i];

			if (oi != keep && oi->cfi && (!lru || oi->cfi_used < lru->cfi_used))
				lru = oi;
		}
		if (!lru)
			return;
		if (now - lru->cfi_used < CFI_HOT_NS && t->cfi_bytes <= CFI_BUDGET_MAX) {
			if (!t->cfi_grown)
				log_info("unwinding tables: the target's code in use needs more than "
					 "%zu MiB: kept, not rebuilt at every use",
					 CFI_BUDGET_SET(t) >> 20);
			t->cfi_grown = t->cfi_bytes;
			return;
		}
		cfi_table__free(lru->cfi);
		lru->cfi = NULL;
		lru->cfi_tried = false; /* built again on its next use */
		t->cfi_bytes -= lru->cfi_bytes;
		lru->cfi_bytes = 0;
		t->cfi_evictions++;
	}
}

/*
 * An on-demand table grows as lookups reach new functions (after find_cfi
 * returned it): its growth since the last look goes into the budget here.
 */
static void account_cfi(struct proc_tracker *t, struct objinfo *oi)
{
	size_t bytes = cfi_table__bytes(oi->cfi);

	if (bytes == oi->cfi_bytes)
		return;
	t->cfi_bytes += bytes - oi->cfi_bytes;
	oi->cfi_bytes = bytes;
	if (t->cfi_bytes > CFI_BUDGET(t))
		evict_cfi(t, oi);
}

bool proc_tracker__find_cfi(struct proc_tracker *t, uint32_t pid, uint64_t pc,
			    const struct cfi_table **table, uint64_t *bias, uint64_t now_ns)
{
	struct pmap *m = lookup(t, pid, pc, now_ns);
	struct objinfo *oi;

	*table = NULL;
	*bias = 0;
	if (!m)
		return false;
	oi = m->oi;
	if (!oi)
		return true; /* JIT / anonymous: no CFI, frame pointers only */
	if (oi->is_vdso) {
		*table = oi->cfi;
		*bias = m->start;
		return true;
	}
	if (!oi->cfi_tried && oi->fd >= 0) {
		int err = 0;

		oi->cfi_tried = true;
		/* On demand, the table reads through oi->fd: freed before it is closed. */
		oi->cfi = cfi_table__open_fd(oi->fd, oi->fdpath, &err);
		if (!oi->cfi)
			log_debug("no CFI for '%s': %s",
				  profile__str(t->p, t->p->objects.v[oi->obj].path), strerror(-err));
		oi->cfi_bytes = cfi_table__bytes(oi->cfi);
		t->cfi_bytes += oi->cfi_bytes;
		oi->cfi_used = now_ns;
		if (t->cfi_bytes > CFI_BUDGET(t))
			evict_cfi(t, oi);
		/* Building a large table leaves freed scratch memory behind: give it back. */
		if (oi->cfi_bytes > (1u << 20))
			malloc_trim(0);
	}
	if (now_ns > oi->cfi_used)
		oi->cfi_used = now_ns;
	if (cfi_table__on_demand(oi->cfi))
		account_cfi(t, oi);
	*table = oi->cfi;
	if (!seg_bias(oi, m, pc, bias))
		*table = NULL;
	return true;
}

void proc_tracker__span(struct proc_tracker *t, uint32_t pid, uint64_t addr,
			struct unwind_span *out)
{
	struct pstate *ps = pstate_get(t, pid, false);
	size_t lo = 0, hi;

	out->lo = 0;
	out->hi = UINT64_MAX;
	out->kind = UNWIND_SPAN_NONE;
	if (!ps)
		return;
	/* The first map ending above addr; the known maps only: this runs per stack word. */
	hi = ps->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (ps->maps[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo)
		out->lo = ps->maps[lo - 1].end;
	if (lo == ps->n)
		return;
	if (ps->maps[lo].start > addr) {
		out->hi = ps->maps[lo].start;
		return;
	}
	out->lo = ps->maps[lo].start;
	out->hi = ps->maps[lo].end;
	out->kind = ps->maps[lo].kind == OBJ_ELF ? UNWIND_SPAN_FILE : UNWIND_SPAN_OTHER;
}

bool proc_tracker__mapping_start(void *tracker, uint32_t pid, uint64_t addr, uint64_t *start)
{
	struct unwind_span sp;

	proc_tracker__span(tracker, pid, addr, &sp);
	*start = sp.lo;
	return sp.kind != UNWIND_SPAN_NONE;
}

/*
 * Code bytes read for stack scanning, by (file, offset): the same few return
 * addresses come back sample after sample, and each read is a system call.
 */
#define CODE_SLOTS 2048 /* the hash's top 11 bits */
#define CODE_BYTES 16

struct code_slot {
	const struct objinfo *oi;
	uint64_t off; /* file offset of the return address */
	uint8_t bytes[CODE_BYTES];
	bool ok;
};

static bool read_code(uint32_t pid, const struct pmap *m, uint64_t pc, uint8_t *buf)
{
	struct iovec local = { buf, CODE_BYTES };
	struct iovec remote = { (void *)(uintptr_t)(pc - CODE_BYTES), CODE_BYTES };
	uint64_t off = pc - m->start + m->pgoff;

	/* The file as mapped (its handle was kept); the process's memory when it has none. */
	if (m->oi->fd >= 0)
		return pread(m->oi->fd, buf, CODE_BYTES, (off_t)(off - CODE_BYTES)) == CODE_BYTES;
	return pc - CODE_BYTES >= m->start &&
	       process_vm_readv(pid, &local, 1, &remote, 1, 0) == CODE_BYTES;
}

bool proc_tracker__code_before(struct proc_tracker *t, uint32_t pid, uint64_t pc, uint8_t *buf,
			       size_t len)
{
	struct pstate *ps = pstate_get(t, pid, false);
	struct code_slot *slot;
	struct pmap *m;
	uint64_t off;

	if (!ps || len > CODE_BYTES)
		return false;
	m = find_map(ps, pc);
	if (!m || m->kind != OBJ_ELF || !m->oi || pc - m->start + m->pgoff < CODE_BYTES)
		return false;
	if (!t->code) {
		t->code = calloc(CODE_SLOTS, sizeof(*t->code));
		if (!t->code)
			return false;
	}
	off = pc - m->start + m->pgoff;
	slot = &t->code[((off ^ (uintptr_t)m->oi) * 0x9e3779b97f4a7c15ull) >> 53];
	if (slot->oi != m->oi || slot->off != off) {
		slot->oi = m->oi;
		slot->off = off;
		slot->ok = read_code(pid, m, pc, slot->bytes);
	}
	if (slot->ok)
		memcpy(buf, slot->bytes + CODE_BYTES - len, len);
	return slot->ok;
}

void proc_tracker__drop_cfi(struct proc_tracker *t)
{
	for (size_t i = 0; i < t->nobjs; i++) {
		struct objinfo *oi = t->objs[i];

		cfi_table__free(oi->cfi);
		oi->cfi = NULL;
		oi->cfi_tried = false;
		oi->cfi_bytes = 0;
	}
	t->cfi_bytes = 0;
	malloc_trim(0);
}

void proc_tracker__cfi_stats(const struct proc_tracker *t, size_t *bytes, uint64_t *evictions)
{
	*bytes = t->cfi_bytes;
	*evictions = t->cfi_evictions;
}

bool proc_tracker__at_entry(struct proc_tracker *t, uint32_t pid, uint64_t pc, uint64_t ts)
{
	struct pmap *m = lookup(t, pid, pc, ts);
	uint64_t bias;

	if (!m || !m->oi || m->oi->is_vdso || !m->oi->layout.entry || !seg_bias(m->oi, m, pc, &bias))
		return false;
	/* The entry stub is a few instructions that call into the loader or libc. */
	return pc - bias >= m->oi->layout.entry && pc - bias < m->oi->layout.entry + 64;
}

const char *proc_tracker__object_path(struct proc_tracker *t, uint32_t obj)
{
	if (obj >= t->nby_obj || !t->by_obj[obj] || t->by_obj[obj]->fd < 0)
		return NULL;
	return t->by_obj[obj]->fdpath;
}

void proc_tracker__counts(const struct proc_tracker *t, uint32_t *pids, uint32_t *files)
{
	*pids = t->nps;
	*files = t->nobjs;
}

uint64_t proc_start_ticks(uint32_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long start = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	p = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d "
			 "%*d %*d %*d %llu", &start) != 1)
		return 0;
	return start;
}

int proc_for_each(struct hmap *seen, void (*fn)(uint32_t pid, void *arg), void *arg)
{
	uint32_t self = getpid();
	struct dirent *d;
	DIR *dir = opendir("/proc");
	int err = 0;

	if (!dir)
		return 0;
	while ((d = readdir(dir))) {
		uint64_t start, v;
		char *end;
		unsigned long pid = strtoul(d->d_name, &end, 10);

		if (*end || !pid || pid == self || pid > UINT32_MAX)
			continue;
		if (seen) {
			start = proc_start_ticks((uint32_t)pid);
			if (!start || hmap__get(seen, pid, start, &v))
				continue;
			if (hmap__put(seen, pid, start, 1)) {
				err = -ENOMEM;
				break;
			}
		}
		fn((uint32_t)pid, arg);
	}
	closedir(dir);
	return err;
}

/* ppid of a process from its stat line ("pid (comm) state ppid ..."); -1 when unreadable. */
static int64_t stat_ppid(const char *proc_root, uint32_t pid)
{
	char path[PATH_MAX], buf[1024], *p;
	unsigned ppid;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%u/stat", proc_root, pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	p = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
	if (!p || sscanf(p + 1, " %*c %u", &ppid) != 1)
		return -1;
	return ppid;
}

struct pid_pair {
	uint32_t ppid, pid;
};

static int cmp_pair(const void *a, const void *b)
{
	const struct pid_pair *x = a, *y = b;

	if (x->ppid != y->ppid)
		return x->ppid < y->ppid ? -1 : 1;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

/* Every (ppid, pid) of proc_root but skip's, sorted by ppid. */
static int read_pairs(const char *proc_root, uint32_t skip, struct pid_pair **out, size_t *nout)
{
	struct pid_pair *v = NULL;
	size_t n = 0, cap = 0;
	struct dirent *d;
	DIR *dir = opendir(proc_root);

	*out = NULL;
	*nout = 0;
	if (!dir)
		return -errno;
	while ((d = readdir(dir))) {
		char *end;
		unsigned long pid = strtoul(d->d_name, &end, 10);
		int64_t ppid;

		if (*end || !pid || pid > UINT32_MAX || pid == skip)
			continue;
		ppid = stat_ppid(proc_root, (uint32_t)pid);
		if (ppid < 0)
			continue; /* gone since readdir */
		if (arr_grow(v, cap, n + 1)) {
			free(v);
			closedir(dir);
			return -ENOMEM;
		}
		v[n++] = (struct pid_pair){ (uint32_t)ppid, (uint32_t)pid };
	}
	closedir(dir);
	if (n)
		qsort(v, n, sizeof(*v), cmp_pair);
	*out = v;
	*nout = n;
	return 0;
}

int proc_descendants(const char *proc_root, const uint32_t *roots, size_t nroots, uint32_t skip,
		     uint32_t **out, size_t *nout)
{
	struct pid_pair *pairs;
	struct hmap *seen = hmap__new(64);
	uint32_t *q = NULL; /* roots, then the descendants found, in breadth-first order */
	size_t npairs, nq = 0, nr, cap = nroots + 16;
	uint64_t v;
	int err;

	*out = NULL;
	*nout = 0;
	if (!seen)
		return -ENOMEM;
	err = read_pairs(proc_root ? proc_root : "/proc", skip, &pairs, &npairs);
	if (err) {
		hmap__free(seen);
		return err;
	}
	q = malloc(cap * sizeof(*q));
	err = q ? 0 : -ENOMEM;
	for (size_t i = 0; i < nroots && !err; i++) {
		if (hmap__get(seen, roots[i], 0, &v))
			continue;
		q[nq++] = roots[i];
		err = hmap__put(seen, roots[i], 0, 1);
	}
	nr = nq;
	for (size_t head = 0; head < nq && !err; head++) {
		struct pid_pair key = { q[head], 0 };
		size_t lo = 0, hi = npairs;

		/* First pair with ppid >= q[head]: its children follow in a run. */
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;

			if (cmp_pair(&pairs[mid], &key) < 0)
				lo = mid + 1;
			else
				hi = mid;
		}
		for (; lo < npairs && pairs[lo].ppid == q[head] && !err; lo++) {
			uint32_t pid = pairs[lo].pid;

			if (hmap__get(seen, pid, 0, &v))
				continue; /* a root, or (pid reuse) a loop */
			if (arr_grow(q, cap, nq + 1)) {
				err = -ENOMEM;
				break;
			}
			q[nq++] = pid;

			err = hmap__put(seen, pid, 0, 1);
		}
	}
	free(pairs);
	hmap__free(seen);
	if (err) {
		free(q);
		return err;
	}
	/* Only the descendants: the roots (the first nr of the queue) stay the caller's. */
	memmove(q, q + nr, (nq - nr) * sizeof(*q));
	*out = q;
	*nout = nq - nr;
	return 0;
}
