// SPDX-License-Identifier: MIT
/*
 * Python-aware stacks (see docs/python.md). The BPF side (bpf/python.bpf.h)
 * walks the interpreter frames of the sampled thread and appends (code
 * object, instruction pointer) pairs to the sample. This file:
 *  - finds CPython in each target (the executable or libpython: the one that
 *    defines _PyRuntime), reads Py_Version and the layout (_Py_DebugOffsets
 *    on 3.13+, the tables below for 3.11 and 3.12), and fills py_procs;
 *  - every poll, walks the interpreter's thread list and fills py_threads
 *    with native tid -> PyThreadState;
 *  - when a sample is decoded, turns code objects into locations named by
 *    qualified name, file and line (read with process_vm_readv, cached per
 *    (pid, code address) and checked again once per poll), and tells
 *    events.c which native frames are _PyEval_EvalFrameDefault.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "profile.skel.h"
#include "util/hmap.h"
#include "util/log.h"
#include "util/vec.h"
#include "events.h"
#include "feature.h"
#include "mapwatch.h"
#include "proc.h"
#include "python.h"
#include "record.h"

_Static_assert(sizeof(struct py_frame_rec) == 16, "py_frame_rec layout");
_Static_assert(sizeof(struct py_trailer) == 8, "py_trailer layout");
_Static_assert(sizeof(struct py_proc) == 48, "py_proc layout");
_Static_assert(sizeof(struct py_rcand) == 2 * PY_RNAME + 16, "py_rcand layout");

/* ---- target memory ---------------------------------------------------------------------- */

static int mem_read(uint32_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)addr, len };
	ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);

	if (n == (ssize_t)len)
		return 0;
	return n < 0 ? -errno : -EFAULT;
}

static int mem_u64(uint32_t pid, uint64_t addr, uint64_t *v)
{
	return mem_read(pid, addr, v, sizeof(*v));
}

/* Appends code point cp as UTF-8. */
static size_t put_utf8(char *o, uint32_t cp)
{
	if (cp < 0x80) {
		o[0] = cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = 0xc0 | cp >> 6;
		o[1] = 0x80 | (cp & 63);
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = 0xe0 | cp >> 12;
		o[1] = 0x80 | ((cp >> 6) & 63);
		o[2] = 0x80 | (cp & 63);
		return 3;
	}
	o[0] = 0xf0 | cp >> 18;
	o[1] = 0x80 | ((cp >> 12) & 63);
	o[2] = 0x80 | ((cp >> 6) & 63);
	o[3] = 0x80 | (cp & 63);
	return 4;
}

#define PY_STR_MAX 1024

/* A compact str object (all identifiers and file names are) as UTF-8 into out[PY_STR_MAX]. */
static int read_str(uint32_t pid, const struct py_layout *l, uint64_t addr, char *out)
{
	uint8_t raw[PY_STR_MAX * 4];
	uint32_t state;
	int64_t length;
	unsigned kind;
	size_t o = 0;
	int err;

	out[0] = '\0';
	if (!addr)
		return -EINVAL;
	err = mem_read(pid, addr + l->str_state, &state, sizeof(state));
	if (!err)
		err = mem_read(pid, addr + l->str_length, &length, sizeof(length));
	if (err)
		return err;
	kind = (state >> 2) & 7;
	if (!((state >> 5) & 1) || length < 0 || (kind != 1 && kind != 2 && kind != 4))
		return -EINVAL; /* not compact: not produced for code object names */
	if (length > PY_STR_MAX / 4 - 1)
		length = PY_STR_MAX / 4 - 1;
	err = mem_read(pid, addr + (((state >> 6) & 1) ? l->ascii_size : l->compact_size), raw,
		       length * kind);
	if (err)
		return err;
	for (int64_t i = 0; i < length; i++) {
		uint32_t cp;

		if (kind == 1)
			cp = raw[i];
		else if (kind == 2)
			cp = raw[2 * i] | raw[2 * i + 1] << 8;
		else
			cp = raw[4 * i] | raw[4 * i + 1] << 8 | raw[4 * i + 2] << 16 |
			     (uint32_t)raw[4 * i + 3] << 24;
		if (cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000))
			cp = 0xfffd;
		o += put_utf8(out + o, cp);
	}
	out[o] = '\0';
	return 0;
}

/* ---- per-target state ------------------------------------------------------------------- */

struct py_target {
	uint32_t pid;
	bool python;
	uint64_t gone;	     /* ns: when its process was found gone, 0 = alive */
	uint64_t next_check; /* ns: when to look at its mappings again */
	unsigned checks;     /* looks so far: the first ones come fast, to catch an exec */
	bool named;	     /* the last look found an object named like CPython mapped */
	char path[PATH_MAX]; /* the object that defines _PyRuntime */
	uint64_t map_start;  /* where that object's first mapping started */
	struct py_layout l;
	uint64_t runtime, code_type, eval_lo, eval_hi;
	uint64_t *tids; /* keys in py_threads (tids) or py_threads_fs (pthread_t, 3.10) */
	size_t ntids;
};

struct py_code {
	uint32_t pid;
	uint64_t addr;
	uint64_t gen;			/* poll generation of the last check */
	uint64_t name_ptr, file_ptr; /* what it was resolved from, to check it later */
	uint32_t name, file;		/* string ids */
	int firstlineno;
	uint8_t *lt;
	size_t ltlen;
	bool bad;   /* not a code object */
	bool freed; /* bad because the memory holds another object now: freed since the sample */
	/*
	 * The last instructions seen and their locations: a function's frames come back at
	 * the same few call sites in sample after sample, and with --mem=1 every allocation
	 * brings its whole Python stack, so the line table is not walked for each.
	 */
	uint8_t next_hit;
	struct {
		uint64_t instr;
		uint32_t loc;
	} hits[4];
};

struct py_state {
	struct feature_ctx *f;
	struct py_target *t;
	size_t nt, capt;
	struct hmap *by_pid; /* pid -> index in t + 1; 0 = none */
	bool all;	     /* -a: every process of the system is a candidate */
	struct hmap *sys_seen; /* -a: processes looked at, by (pid, start time) */
	struct py_code *codes;
	size_t ncodes, capcodes;
	struct hmap *code_index; /* (pid, addr) -> codes index */
	struct hmap *loc_index;	 /* (name << 32 | file, line) -> location */
	uint32_t obj;		 /* the OBJ_PYTHON object */
	uint32_t module;	 /* string id "python" */
	/* string ids: importlib's function that execs a module's code, and what that runs */
	uint32_t id_exec, id_module;
	uint64_t next_loc, gen, next_scan;
	uint64_t detected;
};

/* By pid through an index: with -a every process is a target, and decoding asks per frame. */
static struct py_target *target_find(struct py_state *s, uint32_t pid)
{
	uint64_t i;

	if (!hmap__get(s->by_pid, pid, 0, &i) || !i || i > s->nt)
		return NULL;
	return &s->t[i - 1];
}

static struct py_target *target_add(struct py_state *s, uint32_t pid)
{
	struct py_target *t = target_find(s, pid);

	if (t)
		return t;
	if (arr_grow(s->t, s->capt, s->nt + 1))
		return NULL;
	if (hmap__put(s->by_pid, pid, 0, s->nt + 1))
		return NULL;
	t = &s->t[s->nt++];
	memset(t, 0, sizeof(*t));
	t->pid = pid;
	return t;
}

/* ---- detection -------------------------------------------------------------------------- */

struct py_syms {
	uint64_t runtime, version, eval, eval_size, code_type, min_vaddr;
};

static void scan_symtab(Elf *elf, Elf_Scn *scn, GElf_Shdr *sh, struct py_syms *ps)
{
	Elf_Data *d = elf_getdata(scn, NULL);
	size_t n = sh->sh_entsize ? sh->sh_size / sh->sh_entsize : 0;

	for (size_t i = 0; d && i < n; i++) {
		GElf_Sym sym;
		const char *name;

		if (!gelf_getsym(d, i, &sym) || sym.st_shndx == SHN_UNDEF || !sym.st_value)
			continue;
		name = elf_strptr(elf, sh->sh_link, sym.st_name);
		if (!name || (name[0] != '_' && name[0] != 'P'))
			continue;
		if (!strcmp(name, "_PyRuntime"))
			ps->runtime = sym.st_value;
		else if (!strcmp(name, "Py_Version"))
			ps->version = sym.st_value;
		else if (!strcmp(name, "_PyEval_EvalFrameDefault")) {
			ps->eval = sym.st_value;
			ps->eval_size = sym.st_size;
		} else if (!strcmp(name, "PyCode_Type"))
			ps->code_type = sym.st_value;
	}
}

/* Symbols of the file at path (dynsym first: Debian strips symtab). 0 when it has _PyRuntime. */
static int read_syms(const char *path, struct py_syms *ps)
{
	Elf_Scn *scn = NULL;
	size_t nph = 0;
	int fd, err = -ENOENT;
	Elf *elf;

	memset(ps, 0, sizeof(*ps));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf)
		goto out;
	ps->min_vaddr = UINT64_MAX;
	elf_getphdrnum(elf, &nph);
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(elf, i, &ph) && ph.p_type == PT_LOAD && ph.p_vaddr < ps->min_vaddr)
			ps->min_vaddr = ph.p_vaddr & ~0xfffULL;
	}
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_DYNSYM || sh.sh_type == SHT_SYMTAB)
			scan_symtab(elf, scn, &sh, ps);
	}
	/* Py_Version came with 3.11: before, the version comes from the file name. */
	if (ps->runtime && ps->eval && ps->min_vaddr != UINT64_MAX)
		err = 0;
	elf_end(elf);
out:
	close(fd);
	return err;
}

static bool python_name(const char *path)
{
	const char *b = strrchr(path, '/');

	b = b ? b + 1 : path;
	return !strncmp(b, "libpython3", 10) || !strncmp(b, "python3", 7) || !strcmp(b, "python");
}

/* "libpython3.10.so.1.0" or "python3.10" -> 0x030a0000; 0 when the name has no version. */
static uint64_t version_from_name(const char *path)
{
	const char *b = strrchr(path, '/');
	unsigned minor;
	char c;

	b = b ? b + 1 : path;
	if (!strncmp(b, "lib", 3))
		b += 3;
	if (sscanf(b, "python3.%u%c", &minor, &c) < 1 || minor > 99)
		return 0;
	return 0x03000000 | (uint64_t)minor << 16;
}

/* Layout of a found interpreter: debug offsets (3.13+) or the tables. */
static int target_layout(struct py_target *t, uint64_t version)
{
	uint8_t dbg[PY_DEBUG_OFFSETS_SIZE];
	struct py_layout fromdbg;
	int err;

	err = py_layout_for_version(version, &t->l);
	if (version >= 0x030d0000 && !mem_read(t->pid, t->runtime, dbg, sizeof(dbg))) {
		int e = py_layout_from_debug(dbg, sizeof(dbg), &fromdbg);

		if (!e) {
			if (!err && memcmp(&fromdbg, &t->l, sizeof(fromdbg)))
				log_debug("python: pid %u: _Py_DebugOffsets differ from the table",
					  t->pid);
			t->l = fromdbg;
			err = 0;
		} else if (e == -ENOTSUP) {
			err = e; /* free-threaded build: another object layout */
		}
	}
	return err;
}

/*
 * Looks for CPython in pid's mappings. Returns 1 when found (t filled), 0
 * when not, -ESRCH when the process is gone.
 */
static int detect(struct py_target *t)
{
	char mpath[64], line[PATH_MAX + 128], fpath[PATH_MAX + 64];
	unsigned long long start, end, off;
	struct py_syms ps;
	uint64_t version = 0, bias;
	int found = 0;
	FILE *f;

	snprintf(mpath, sizeof(mpath), "/proc/%u/maps", t->pid);
	f = fopen(mpath, "re");
	if (!f)
		return -ESRCH;
	t->named = false;
	while (!found && fgets(line, sizeof(line), f)) {
		char perms[8], *path;
		int pos = 0;

		if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %n", &start, &end, perms, &off,
			   &pos) < 4 || !pos || off != 0)
			continue;
		path = line + pos;
		path[strcspn(path, "\n")] = '\0';
		if (path[0] != '/' || !python_name(path))
			continue;
		t->named = true;
		snprintf(fpath, sizeof(fpath), "/proc/%u/map_files/%llx-%llx", t->pid, start, end);
		if (read_syms(fpath, &ps)) {
			snprintf(fpath, sizeof(fpath), "/proc/%u/root%s", t->pid, path);
			if (read_syms(fpath, &ps))
				continue;
		}
		bias = start - ps.min_vaddr;
		if (ps.version ? mem_u64(t->pid, ps.version + bias, &version)
			       : !(version = version_from_name(path)))
			continue;
		t->runtime = ps.runtime + bias;
		t->code_type = ps.code_type ? ps.code_type + bias : 0;
		t->eval_lo = ps.eval + bias;
		t->eval_hi = t->eval_lo + (ps.eval_size ? ps.eval_size : 1);
		t->map_start = start;
		snprintf(t->path, sizeof(t->path), "%s", path);
		found = 1;
	}
	fclose(f);
	if (!found)
		return 0;
	version &= 0xffffffff;
	if (target_layout(t, version)) {
		log_info("python: pid %u runs Python %llu.%llu: not supported (3.10 to 3.13 are)",
			 t->pid, (unsigned long long)(version >> 24),
			 (unsigned long long)((version >> 16) & 0xff));
		return 0;
	}
	return 1;
}

/* Still the same interpreter mapped at the same place (no exec since)? */
static bool still_there(struct py_target *t)
{
	char mpath[64], line[PATH_MAX + 128];
	unsigned long long start;
	bool ok = false;
	FILE *f;

	snprintf(mpath, sizeof(mpath), "/proc/%u/maps", t->pid);
	f = fopen(mpath, "re");
	if (!f)
		return false;
	while (!ok && fgets(line, sizeof(line), f)) {
		char *p = strchr(line, '/');

		if (sscanf(line, "%llx-", &start) == 1 && start == t->map_start && p) {
			p[strcspn(p, "\n")] = '\0';
			ok = !strcmp(p, t->path);
		}
	}
	fclose(f);
	return ok;
}

/* ---- threads ---------------------------------------------------------------------------- */

static bool by_fsbase(const struct py_target *t)
{
	return t->l.bpf.pflags & PY_PF_TS_FSBASE;
}

/* Adds (or, with ts NULL, removes) a thread's key in the map its version uses. */
static void thread_key(struct py_state *s, struct py_target *t, uint64_t key, const uint64_t *ts)
{
	struct profile_bpf *sk = s->f->skel;
	struct bpf_map *m = by_fsbase(t) ? sk->maps.py_threads_fs : sk->maps.py_threads;
	uint32_t tid = key;

	if (!by_fsbase(t) && (!key || key >= UINT32_MAX))
		return;
	if (ts)
		bpf_map_update_elem(bpf_map__fd(m), by_fsbase(t) ? (void *)&key : (void *)&tid, ts,
				    BPF_ANY);
	else
		bpf_map_delete_elem(bpf_map__fd(m), by_fsbase(t) ? (void *)&key : (void *)&tid);
}

static void drop_threads(struct py_state *s, struct py_target *t)
{
	for (size_t i = 0; i < t->ntids; i++)
		thread_key(s, t, t->tids[i], NULL);
	t->ntids = 0;
}

static void drop_target(struct py_state *s, struct py_target *t)
{
	if (t->python) {
		bpf_map_delete_elem(bpf_map__fd(s->f->skel->maps.py_procs), &t->pid);
		drop_threads(s, t);
	}
	t->python = false;
}

/* Forgets target i (its process is gone): the last one takes its place. */
static void target_remove(struct py_state *s, size_t i)
{
	struct py_target *t = &s->t[i];

	drop_target(s, t);
	free(t->tids);
	hmap__put(s->by_pid, t->pid, 0, 0);
	if (i != s->nt - 1) {
		*t = s->t[s->nt - 1];
		hmap__put(s->by_pid, t->pid, 0, i + 1);
	}
	s->nt--;
}

#define PY_MAX_THREADS 4096

/* Reads the thread list of every interpreter and makes py_threads match it. */
/*
 * The GIL's address, once the interpreter has one: in _PyRuntime (3.11), or
 * the first interpreter's ceval.gil pointer (3.12+; the main interpreter
 * unless sub-interpreters were created). py_procs is updated when found.
 */
static void find_gil(struct py_state *s, struct py_target *t, uint64_t interp)
{
	uint64_t gil = 0;

	if (t->l.bpf.gil || (!t->l.rt_gil && !t->l.is_ceval_gil))
		return;
	if (t->l.rt_gil)
		gil = t->runtime + t->l.rt_gil;
	else if (interp && mem_u64(t->pid, interp + t->l.is_ceval_gil, &gil))
		gil = 0;
	if (!gil)
		return;
	t->l.bpf.gil = gil;
	t->l.bpf.gil_locked = t->l.gil_locked;
	t->l.bpf.gil_holder = t->l.gil_holder;
	if (bpf_map_update_elem(bpf_map__fd(s->f->skel->maps.py_procs), &t->pid, &t->l.bpf,
				BPF_EXIST))
		t->l.bpf.gil = 0;
}

static int refresh_threads(struct py_state *s, struct py_target *t)
{
	uint64_t *tids = NULL;
	size_t n = 0, cap = 0;
	uint64_t interp, ts;
	int err;

	err = mem_u64(t->pid, t->runtime + t->l.rt_interp_head, &interp);
	if (!err)
		find_gil(s, t, interp);
	for (int ni = 0; !err && interp && ni < 64; ni++) {
		err = mem_u64(t->pid, interp + t->l.is_threads_head, &ts);
		while (!err && ts && n < PY_MAX_THREADS) {
			uint64_t tid;

			err = mem_u64(t->pid, ts + t->l.ts_native_tid, &tid);
			if (err)
				break;
			if (arr_grow(tids, cap, n + 1)) {
				err = -ENOMEM;
				break;
			}
			tids[n++] = tid;
			thread_key(s, t, tid, &ts);
			err = mem_u64(t->pid, ts + t->l.ts_next, &ts);
		}
		if (!err)
			err = mem_u64(t->pid, interp + t->l.is_next, &interp);
	}
	if (err) {
		free(tids);
		return err;
	}
	/* Threads that left the list: their tids may be reused by anything. */
	for (size_t i = 0; i < t->ntids; i++) {
		bool kept = false;

		for (size_t j = 0; j < n && !kept; j++)
			kept = tids[j] == t->tids[i];
		if (!kept)
			thread_key(s, t, t->tids[i], NULL);
	}
	free(t->tids);
	t->tids = tids;
	t->ntids = n;
	return 0;
}

/* ---- code objects -> locations ---------------------------------------------------------- */

static struct py_code *code_slot(struct py_state *s, uint32_t pid, uint64_t addr, bool *fresh)
{
	uint64_t idx;
	struct py_code *c;

	*fresh = false;
	if (hmap__get(s->code_index, pid, addr, &idx))
		return &s->codes[idx];
	if (arr_grow(s->codes, s->capcodes, s->ncodes + 1))
		return NULL;

	if (hmap__put(s->code_index, pid, addr, s->ncodes))
		return NULL;
	c = &s->codes[s->ncodes++];
	memset(c, 0, sizeof(*c));
	c->pid = pid;
	c->addr = addr;
	*fresh = true;
	return c;
}

/* Reads a code object's names and line table. */
static int code_read(struct py_state *s, struct py_target *t, struct py_code *c)
{
	const struct py_layout *l = &t->l;
	uint64_t type = 0, qual = 0, name = 0, file = 0, lt = 0;
	int64_t ltlen = 0;
	int32_t first = 0;
	char buf[PY_STR_MAX];
	int err;

	c->bad = true;
	c->freed = false;
	free(c->lt);
	c->lt = NULL;
	c->ltlen = 0;
	memset(c->hits, 0, sizeof(c->hits));
	err = mem_u64(t->pid, c->addr + l->ob_type, &type);
	if (err)
		return err;
	if (t->code_type && type != t->code_type) {
		c->freed = true; /* a frame ran it when the sample was taken */
		return -EINVAL;
	}
	if (mem_u64(t->pid, c->addr + l->co_qualname, &qual) ||
	    mem_u64(t->pid, c->addr + l->co_name, &name) ||
	    mem_u64(t->pid, c->addr + l->co_filename, &file) ||
	    mem_u64(t->pid, c->addr + l->co_linetable, &lt) ||
	    mem_read(t->pid, c->addr + l->co_firstlineno, &first, sizeof(first)))
		return -EFAULT;
	if (read_str(t->pid, l, qual, buf) && read_str(t->pid, l, name, buf))
		return -EFAULT;
	c->name = profile__intern(s->f->p, buf);
	read_str(t->pid, l, file, buf);
	c->file = profile__intern(s->f->p, buf);
	c->firstlineno = first;
	c->name_ptr = qual;
	c->file_ptr = file;
	if (lt && !mem_read(t->pid, lt + l->bytes_size, &ltlen, sizeof(ltlen)) && ltlen > 0 &&
	    ltlen < (1 << 20)) {
		c->lt = malloc(ltlen);
		if (c->lt && !mem_read(t->pid, lt + l->bytes_sval, c->lt, ltlen))
			c->ltlen = ltlen;
	}
	c->bad = false;
	return 0;
}

/* Was the code object at c->addr freed and its memory reused since it was read? */
static bool code_changed(struct py_target *t, struct py_code *c)
{
	uint64_t a = t->l.co_qualname, b = t->l.co_filename, lo = a < b ? a : b,
		 span = (a < b ? b : a) + 8 - lo, qual = 0, file = 0;
	uint8_t buf[64];

	/*
	 * Once per code object and poll (every 50 ms): on a deep stack at 999 Hz these reads were
	 * the recorder's most frequent system call. The two pointers sit a few bytes apart in
	 * every CPython's code object: one read takes both.
	 */
	if (span <= sizeof(buf)) {
		if (mem_read(t->pid, c->addr + lo, buf, span))
			return false; /* gone: keep what we know, the sample was taken before */
		memcpy(&qual, buf + (a - lo), 8);
		memcpy(&file, buf + (b - lo), 8);
	} else if (mem_u64(t->pid, c->addr + a, &qual) || mem_u64(t->pid, c->addr + b, &file)) {
		return false;
	}
	return qual != c->name_ptr || file != c->file_ptr;
}

static int64_t py_location(struct py_state *s, uint32_t name, uint32_t file, int line)
{
	struct profile *p = s->f->p;
	uint64_t loc;
	int64_t l;
	struct frame *fr;

	if (line < 0)
		line = 0;
	if (hmap__get(s->loc_index, (uint64_t)name << 32 | file, line, &loc))
		return loc;
	l = profile__location(p, s->obj, ++s->next_loc);
	if (l < 0)
		return l;
	fr = vec_push(p->frames);
	if (!fr)
		return -ENOMEM;
	fr->name = name;
	fr->module = s->module;
	fr->file = file;
	fr->line = line;
	fr->kind = FRAME_PYTHON;
	p->locations.v[l].frame_first = p->frames.n - 1;
	p->locations.v[l].frame_n = 1;
	if (hmap__put(s->loc_index, (uint64_t)name << 32 | file, line, l))
		return -ENOMEM;
	return l;
}

/* *lost: 0 for a frame named, 1 for one whose code object could not be read, 2 when the
 * memory of that code object holds another object now (freed since the sample). */
static int64_t frame_location(struct py_state *s, struct py_target *t, const struct py_frame_rec *r,
			      uint8_t *lost)
{
	uint64_t addr = r->code & ~1ULL;
	struct py_code *c;
	bool fresh;
	int64_t loc;
	int line;

	c = code_slot(s, t->pid, addr, &fresh);
	if (!c)
		return -ENOMEM;
	if (fresh || (c->gen != s->gen && code_changed(t, c))) {
		if (code_read(s, t, c) == -ENOMEM)
			return -ENOMEM;
	}
	c->gen = s->gen;
	*lost = c->bad ? 1 + c->freed : 0;
	if (c->bad) {
		s->f->p->stats[STAT_PY_UNKNOWN]++;
		return profile__special(s->f->p, "[python: unreadable frame]");
	}
	for (int i = 0; i < 4; i++)
		if (c->hits[i].loc && c->hits[i].instr == r->instr)
			return c->hits[i].loc;
	line = c->firstlineno;
	if (t->l.version < 0x030b0000) {
		/* 3.10: f_lasti (int, code units; -1 before the first instruction) */
		int32_t lasti = (int32_t)(uint32_t)r->instr;
		int ln = c->ltlen && lasti >= 0 ? py310_addr2line(c->lt, c->ltlen, c->firstlineno,
								  (int64_t)lasti * 2)
						: -1;

		if (ln > 0)
			line = ln;
	} else if (c->ltlen && r->instr >= addr + t->l.co_code_adaptive) {
		int64_t unit = (int64_t)(r->instr - addr - t->l.co_code_adaptive) / 2;
		int ln = py_addr2line(c->lt, c->ltlen, c->firstlineno, unit);

		if (ln > 0)
			line = ln;
	}
	loc = py_location(s, c->name, c->file, line);
	if (loc > 0) {
		c->hits[c->next_hit].instr = r->instr;
		c->hits[c->next_hit].loc = (uint32_t)loc;
		c->next_hit = (c->next_hit + 1) & 3;
	}
	return loc;
}

static const struct frame *loc_frame(const struct profile *p, int64_t loc)
{
	const struct location *l = &p->locations.v[loc];

	return l->frame_n ? &p->frames.v[l->frame_first] : NULL;
}

static bool frame_in_importlib(const struct profile *p, const struct frame *f)
{
	return !strncmp(profile__str(p, f->file), "<frozen importlib._bootstrap", 28);
}

/*
 * Whether location loc is importlib's frame that runs a module's code: exec_module()'s
 * _call_with_frames_removed(exec, code, module.__dict__). The other Python code it runs is
 * importlib's own (_gcd_import, or _find_and_load through the C import of __import__).
 */
static bool loc_runs_module(const struct py_state *s, int64_t loc)
{
	const struct frame *f = loc_frame(s->f->p, loc);

	return f && f->kind == FRAME_PYTHON && f->name == s->id_exec &&
	       frame_in_importlib(s->f->p, f);
}

/*
 * A code object freed between the sample and its decoding cannot be named; one whose memory
 * held another code object by then would be named wrong. Both are almost always a module's
 * top-level code, run once by an import and freed when the module has run, within
 * milliseconds of the sample (docs/python.md: decoding ten times sooner lost as many).
 * A frame importlib's exec runs that is neither a <module> nor importlib's own is such a
 * stranger: lost too.
 */
static void find_lost(struct py_state *s, const int64_t *l, uint8_t *lost, uint32_t n)
{
	for (uint32_t i = 0; i + 1 < n; i++) {
		const struct frame *f = loc_frame(s->f->p, l[i]);

		if (!lost[i] && !lost[i + 1] && f && f->name != s->id_module &&
		    loc_runs_module(s, l[i + 1]) && !frame_in_importlib(s->f->p, f)) {
			lost[i] = 2;
			s->f->p->stats[STAT_PY_UNKNOWN]++;
		}
	}
}

/* Names a lost frame by what is known of it: the import that ran it, or why it is lost. */
static int64_t lost_location(struct py_state *s, const int64_t *l, const uint8_t *lost, uint32_t i,
			     uint32_t n)
{
	uint32_t j = i + 1;

	while (j < n && lost[j])
		j++;
	if (j < n && loc_runs_module(s, l[j]))
		return profile__special(s->f->p, j == i + 1
						     ? "[python: <module> of an import, code freed]"
						     : "[python: code run by an import, freed]");
	return profile__special(s->f->p, lost[i] == 2
					     ? "[python: code object freed before it was read]"
					     : "[python: unreadable frame]");
}

/* event_ctx hooks (src/record/events.c) */
static int py_frames(void *arg, uint32_t pid, const struct py_frame_rec *r, uint32_t n,
		     uint32_t *locs, uint8_t *entry)
{
	struct py_state *s = arg;
	struct py_target *t = target_find(s, pid);
	int64_t l[PY_MAX_FRAMES];
	uint8_t lost[PY_MAX_FRAMES];

	if (!t || !t->python)
		return 0;
	if (n > PY_MAX_FRAMES)
		n = PY_MAX_FRAMES;
	for (uint32_t i = 0; i < n; i++) {
		l[i] = frame_location(s, t, &r[i], &lost[i]);
		if (l[i] < 0)
			return (int)l[i];
		entry[i] = r[i].code & 1;
	}
	/* named once every frame is resolved: a lost frame is told by its callers */
	find_lost(s, l, lost, n);
	for (uint32_t i = 0; i < n; i++)
		if (lost[i] && (l[i] = lost_location(s, l, lost, i, n)) < 0)
			return (int)l[i];
	for (uint32_t i = 0; i < n; i++)
		locs[i] = l[i];
	return n;
}

static bool py_is_eval(void *arg, uint32_t pid, uint64_t pc)
{
	struct py_state *s = arg;
	struct py_target *t = target_find(s, pid);

	return t && t->python && pc >= t->eval_lo && pc < t->eval_hi;
}

/* ---- the feature ------------------------------------------------------------------------ */

#define PY_CHECK_FAST_NS 100000000ULL	/* the first looks at a new target */
#define PY_CHECK_NS 1000000000ULL	/* then: has it exec'd (into) Python? */
#define PY_SYS_SCAN_NS 1000000000ULL	/* -a: new processes */
#define PY_SYS_RECHECK_NS 10000000000ULL /* -a: a process not running Python, again */
#define PY_GONE_NS 2000000000ULL

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static void check_target(struct py_state *s, struct py_target *t, uint64_t now)
{
	int fd = bpf_map__fd(s->f->skel->maps.py_procs);
	bool changed;
	int r;

	/*
	 * Every 100 ms for the first 2 s (a launched command execs Python), then every second;
	 * with -a, a process that does not run Python is looked at again every 10 s only.
	 */
	t->next_check = now + (t->checks++ < 20	     ? PY_CHECK_FAST_NS
			       : s->all && !t->python ? PY_SYS_RECHECK_NS
						      : PY_CHECK_NS);
	/*
	 * Whether the interpreter is still there, or has come, depends on the maps only; unless
	 * a look found CPython's name but could not read its version or layout (a transient
	 * state), an unchanged map needs no new look.
	 */
	changed = mapwatch_changed(s->f->maps, MAPWATCH_PYTHON, t->pid);
	if (t->python) {
		if (!changed || still_there(t))
			return;
		drop_target(s, t); /* exec'd or exited */
	}
	if (!changed && t->checks > 1 && !t->named) {
		if (kill((pid_t)t->pid, 0) && errno == ESRCH && !t->gone)
			t->gone = now;
		return;
	}
	r = detect(t);
	if (r == -ESRCH && !t->gone)
		t->gone = now;
	if (r <= 0)
		return;
	t->python = true;
	/* What --region py: compares names with (bpf/python_region.bpf.h). */
	t->l.bpf.co_qualname = t->l.co_qualname;
	t->l.bpf.co_filename = t->l.co_filename;
	t->l.bpf.str_state = t->l.str_state;
	t->l.bpf.str_length = t->l.str_length;
	t->l.bpf.str_ascii = t->l.ascii_size;
	if (bpf_map_update_elem(fd, &t->pid, &t->l.bpf, BPF_ANY)) {
		log_warn("python: pid %u: cannot add it to py_procs: %s", t->pid, strerror(errno));
		t->python = false;
		return;
	}
	s->detected++;
	log_info("python: pid %u: Python %u.%u.%u in %s", t->pid, t->l.version >> 24,
		 (t->l.version >> 16) & 0xff, (t->l.version >> 8) & 0xff, t->path);
	refresh_threads(s, t);
}

struct sys_scan {
	struct py_state *s;
	uint64_t now;
};

static void sys_add(uint32_t pid, void *arg)
{
	struct sys_scan *c = arg;
	struct py_target *t = target_find(c->s, pid);

	/* A pid seen again with another start time: a new process, looked at anew. */
	if (!t)
		t = target_add(c->s, pid);
	if (t) {
		t->checks = 0;
		t->gone = 0;
		t->next_check = c->now;
	}
}

/*
 * Targets whose process has been gone for PY_GONE_NS: its last events are decoded by
 * then (the ring is read every 50 ms), and with -a the list would grow with every
 * process the system ever ran.
 */
static void prune_targets(struct py_state *s, uint64_t now)
{
	for (size_t i = 0; i < s->nt;) {
		if (s->t[i].gone && now - s->t[i].gone > PY_GONE_NS)
			target_remove(s, i);
		else
			i++;
	}
}

/* New target pids (forks, the launched command) from the recorder's process table. */
static void scan_targets(struct py_state *s, uint64_t now)
{
	uint32_t pid;

	for (size_t i = 0; feature_next_target(s->f, &i, &pid);) {
		struct py_target *t = target_find(s, pid);

		if (!t) {
			t = target_add(s, pid);
			if (!t)
				return;
			t->next_check = now;
		}
	}
}

/* The first --region py:FUNC, or NULL. */
static const char *py_region_asked(const struct record_opts *o)
{
	for (size_t i = 0; i < o->nregions; i++)
		if (!strncmp(o->regions[i], PY_REGION_PREFIX, strlen(PY_REGION_PREFIX)))
			return o->regions[i];
	return NULL;
}

static bool py_enabled(const struct record_opts *o)
{
	return !o->no_python;
}

static int py_configure(struct feature_ctx *f, void **state)
{
	struct py_state *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->f = f;
	s->all = f->o->all;
	s->code_index = hmap__new(1024);
	s->loc_index = hmap__new(1024);
	s->by_pid = hmap__new(64);
	s->sys_seen = s->all ? hmap__new(1024) : NULL;
	if (!s->code_index || !s->loc_index || !s->by_pid || (s->all && !s->sys_seen)) {
		hmap__free(s->code_index);
		hmap__free(s->loc_index);
		hmap__free(s->by_pid);
		hmap__free(s->sys_seen);
		free(s);
		return -ENOMEM;
	}
	f->skel->rodata->py_enabled = true;
	*state = s;
	return 0;
}

static int py_attach(struct feature_ctx *f, void *state)
{
	struct py_state *s = state;
	uint64_t now = now_ns();
	int64_t obj;

	obj = profile__object(f->p, OBJ_PYTHON, "[python]", "", 0);
	if (obj < 0)
		return (int)obj;
	s->obj = obj;
	s->module = profile__intern(f->p, "python");
	s->id_exec = profile__intern(f->p, "_call_with_frames_removed");
	s->id_module = profile__intern(f->p, "<module>");
	f->ev->py_frames = py_frames;
	f->ev->py_is_eval = py_is_eval;
	f->ev->py_arg = s;
	for (size_t i = 0; i < f->o->npids; i++) {
		struct py_target *t = target_add(s, f->o->pids[i]);

		if (!t)
			return -ENOMEM;
		check_target(s, t, now);
	}
	if (f->o->npids && py_region_asked(f->o) && !s->detected) {
		log_err("--region %s: process %d is not a CPython 3.10-3.13 interpreter",
			py_region_asked(f->o), f->o->pids[0]);
		return -EINVAL;
	}
	if (f->child && !target_add(s, f->child))
		return -ENOMEM;
	s->next_scan = now;
	return 0;
}

static int py_poll(struct feature_ctx *f, void *state, uint64_t now)
{
	struct py_state *s = state;

	(void)f;
	s->gen++;
	if (now >= s->next_scan) {
		if (s->all) {
			struct sys_scan c = { s, now };

			if (proc_for_each(s->sys_seen, sys_add, &c))
				return -ENOMEM;
			s->next_scan = now + PY_SYS_SCAN_NS;
		} else {
			scan_targets(s, now);
			s->next_scan = now + 250000000ULL;
		}
	}
	for (size_t i = 0; i < s->nt; i++) {
		struct py_target *t = &s->t[i];

		if (now >= t->next_check)
			check_target(s, t, now);
		if (t->python && refresh_threads(s, t) == -ESRCH) {
			drop_target(s, t);
			t->gone = now;
		}
	}
	prune_targets(s, now);
	return 0;
}

static int py_finish(struct feature_ctx *f, void *state)
{
	struct py_state *s = state;

	f->p->stats[STAT_PY_NO_TSTATE] += f->bpf_stat(f, BSTAT_PY_NO_TSTATE);
	f->p->stats[STAT_PY_READ_ERR] += f->bpf_stat(f, BSTAT_PY_READ_ERR);
	f->p->stats[STAT_PY_TRUNC] += f->bpf_stat(f, BSTAT_PY_TRUNC);
	if (py_region_asked(f->o) && !s->detected) {
		log_err("--region %s: the target never ran a CPython 3.10-3.13 interpreter",
			py_region_asked(f->o));
		return -EINVAL;
	}
	if (s->detected)
		log_debug("python: %llu interpreters, %zu code objects, %llu Python samples",
			  (unsigned long long)s->detected, s->ncodes,
			  (unsigned long long)f->p->stats[STAT_PY_SAMPLES]);
	return 0;
}

static void py_destroy(struct feature_ctx *f, void *state)
{
	struct py_state *s = state;

	if (!s)
		return;
	if (f->ev && f->ev->py_arg == s) {
		f->ev->py_frames = NULL;
		f->ev->py_is_eval = NULL;
		f->ev->py_arg = NULL;
	}
	for (size_t i = 0; i < s->nt; i++)
		free(s->t[i].tids);
	for (size_t i = 0; i < s->ncodes; i++)
		free(s->codes[i].lt);
	free(s->t);
	free(s->codes);
	hmap__free(s->code_index);
	hmap__free(s->loc_index);
	hmap__free(s->by_pid);
	hmap__free(s->sys_seen);
	free(s);
}

static const char *const python_maps[] = { "py_procs", "py_threads", "py_threads_fs", NULL };

const struct feature feature_python = {
	.name = "python",
	.maps = python_maps,
	.enabled = py_enabled,
	.configure = py_configure,
	.attach = py_attach,
	.poll = py_poll,
	.finish = py_finish,
	.destroy = py_destroy,
};
