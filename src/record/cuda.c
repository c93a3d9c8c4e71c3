// SPDX-License-Identifier: MIT
/*
 * The CUDA feature of record: uprobes on the CUDA runtime and driver in
 * every object a target maps that defines them (libcudart, libcuda, or a
 * cudart linked statically), and the server end of the CUPTI injection
 * library's socket (src/agent/eprof_cupti.c) in launch mode; in attach
 * mode (-p, -a --cuda, top --gpu -p) the same library injected into every
 * target that maps the CUDA driver (cuda_inject.h), talking over a socket
 * pair, and retracted at the end.
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <linux/types.h>

#include "model/event.h"
#include "eprof_abi.h"
#include "agent/eprof_gpu_proto.h"
#include "model/gpu_event.h"
#include "sym/symbolizer.h"
#include "util/elf_layout.h"
#include "util/hmap.h"
#include "util/log.h"
#include "profile.skel.h"
#include "cuda_funcs.h"
#include "cuda_inject.h"
#include "sockdir.h"
#include "events.h"
#include "feature.h"
#include "mapwatch.h"
#include "decode/gpu_conv.h"
#include "proc.h"
#include "record.h"
#include "uprobe_multi.h"

_Static_assert(sizeof(struct ev_cuda_api) == 24 + 48 + 40, "ev_cuda_api layout");
_Static_assert(sizeof(struct ev_cuda_handle) == 24 + 32 + EPROF_CUDA_NAME_LEN, "ev_cuda_handle");

#define SCAN_NS 200000000ULL /* rescan the targets' maps for CUDA libraries this often, */
#define SCAN_MAX_NS 800000000ULL /* ... backing off to this while none turns up */
#define SYS_SCAN_NS 1000000000ULL    /* -a --cuda: new processes */
#define SYS_RESCAN_NS 10000000000ULL /* -a --cuda: every process again */
#define MAX_CONNS 256

struct cuda_obj {
	dev_t dev;
	ino_t ino;
	struct bpf_link **links; /* one per probe (kernels without uprobe_multi) */
	size_t nlinks;
	int mfd[2]; /* uprobe_multi links: entries, returns (or one session link in mfd[0]) */
};

struct cuda_state {
	struct cuda_obj *objs;
	size_t nobjs;
	struct hmap *seen_paths; /* string id of a mapped path already checked */
	struct hmap *handles;	 /* (pid, CUfunction/CUkernel) -> kernel name string id */
	struct hmap *stubs;	 /* (pid, cudaKernel_t) -> its host stub's address */
	struct hmap *launch_nodes; /* (pid, host stub or cudaKernel_t) -> its one-frame stack */
	uint32_t func_names[128];
	bool multi;   /* attach with uprobe_multi links (Linux 6.6+) */
	bool session; /* ... as one uprobe session: launches can skip their return (6.13+) */
	struct profile_bpf *late; /* the probes' programs, loaded once a CUDA library is found */
	int late_err;		  /* ...or why they did not load */
	uint64_t last_scan, scan_every;
	/* -a with --cuda: processes looked at (pid, start time), and when all were last read */
	struct hmap *sys_seen;
	uint64_t last_sys_scan, last_sys_rescan;
	uint64_t calls, events;
	uint64_t convert_ns, scan_ns; /* main-loop time converting CUPTI records, scanning maps */
	/* CUPTI */
	struct gpu_conv conv;
	struct gpu_ns_tids ns_tids; /* used by whichever thread reads the socket */
	bool conv_on;
	int lfd;	     /* sd.lfd, or -1 */
	struct sockdir sd;   /* launch mode: the socket, in a 0700 directory of the command's user */
	uint32_t sock_uid;   /* ...whose processes (and root's) are the only peers taken */
	int conns[MAX_CONNS];
	uint32_t peers[MAX_CONNS]; /* each connection's process, as we see its pid (SO_PEERCRED) */
	size_t nconns;
	void *buf;
	/* a reader thread moves messages off the socket at once, so the sender never waits on
	 * the 50 ms main loop; the main loop converts them (the profile is not thread-safe) */
	pthread_t thread;
	bool thread_on;
	atomic_bool stop;
	atomic_ullong qlost;   /* messages the reader thread could not queue (ENOMEM) */
	atomic_ullong qn;      /* messages queued so far */
	atomic_bool connected; /* an injection library connected at least once */
	atomic_bool flush_req; /* ask every connected process to flush now */
	int wake[2];
	pthread_mutex_t qlock;
	struct qmsg *qhead, **qtail;
	/* attach mode: the collectors injected into the targets */
	struct cuda_inject *inj;
	bool inj_conn[MAX_CONNS]; /* the connection is an injected collector's channel */
	int adopt_fd[64];	  /* channels to add to conns (under qlock) */
	uint32_t adopt_pid[64];
	size_t nadopt;
	atomic_bool retract_req; /* send 'R' to every injected collector */
	bool retracted;
	bool no_inject;		 /* --no-inject: count the processes left without GPU timing */
	struct hmap *noinj_seen;
	struct profile *p_for_conv;
	char why[EGPU_ST_MAX][200]; /* the first process's reason, by status */
};

struct qmsg {
	struct qmsg *next;
	size_t len;
	uint32_t peer;
	_Alignas(8) unsigned char data[];
};

static bool cuda_enabled(const struct record_opts *o)
{
	return o->cuda != 0;
}

/* --- finding the traced functions in an ELF file ------------------------------------------ */

/* File offset of each table function the object defines (0 = not defined). */
static int scan_symbols(const char *path, uint64_t *offs, unsigned *found)
{
	Elf_Scn *scn = NULL;
	int fd, err = 0;
	Elf *elf;

	*found = 0;
	memset(offs, 0, sizeof(*offs) * cuda_nfuncs);
	fd = open_regular(path);
	if (fd < 0)
		return -errno;
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf) {
		close(fd);
		return -EINVAL;
	}
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) ||
		    (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM))
			continue;
		d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && sh.sh_entsize && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym s;
			GElf_Shdr ts;
			const char *name;
			int fi;

			if (!gelf_getsym(d, (int)i, &s) || !s.st_value || s.st_shndx == SHN_UNDEF ||
			    s.st_shndx >= SHN_LORESERVE)
				continue;
			if (GELF_ST_TYPE(s.st_info) != STT_FUNC &&
			    GELF_ST_TYPE(s.st_info) != STT_GNU_IFUNC)
				continue;
			name = elf_strptr(elf, sh.sh_link, s.st_name);
			if (!name || ((name[0] != 'c' || name[1] != 'u') && strncmp(name, "__cuda", 6)))
				continue;
			fi = cuda_func_find(name);
			if (fi < 0 || offs[fi])
				continue;
			if (!gelf_getshdr(elf_getscn(elf, s.st_shndx), &ts) ||
			    s.st_value < ts.sh_addr)
				continue;
			offs[fi] = s.st_value - ts.sh_addr + ts.sh_offset;
			(*found)++;
		}
	}
	elf_end(elf);
	close(fd);
	return err;
}

static void pick_progs(struct profile_bpf *late, void *arg)
{
	const struct cuda_state *s = arg;

	if (s->session) {
		bpf_program__set_autoload(late->progs.cuda_session, true);
		bpf_program__set_expected_attach_type(late->progs.cuda_session,
						      UPROBE_SESSION_ATTACH);
	}
	bpf_program__set_autoload(late->progs.cuda_enter, true);
	bpf_program__set_autoload(late->progs.cuda_exit, true);
	if (s->multi) {
		bpf_program__set_expected_attach_type(late->progs.cuda_enter, UPROBE_MULTI_ATTACH);
		bpf_program__set_expected_attach_type(late->progs.cuda_exit, UPROBE_MULTI_ATTACH);
	}
}

/*
 * The probes' programs, loaded on the first CUDA library found: ~60 ms of verifier time
 * that a record of a job without CUDA never pays. 0, or why they did not load.
 */
static int cuda_progs(struct feature_ctx *f, struct cuda_state *s)
{
	if (!s->late && !s->late_err) {
		s->late = feature_load_late(f, "CUDA tracing", pick_progs, s);
		s->late_err = s->late ? 0 : errno ? -errno : -EINVAL;
	}
	return s->late_err;
}

static int attach_object_multi(struct feature_ctx *f, struct cuda_state *s, struct cuda_obj *o,
			       const char *path, const uint64_t *offs)
{
	uint64_t so[128], ck[128];
	uint32_t n = 0;

	for (unsigned i = 0; i < cuda_nfuncs; i++) {
		if (!offs[i])
			continue;
		so[n] = offs[i];
		ck[n++] = cuda_func_cookie(i);
	}
	if (s->session) {
		o->mfd[0] = uprobe_multi_link(bpf_program__fd(s->late->progs.cuda_session),
					      UPROBE_MULTI_SESSION, path, so, ck, n, 0);
		if (o->mfd[0] >= 0)
			return 0;
		/* the entry and return programs are loaded too: go on with them */
		log_info("cuda: uprobe session refused (%s): entry and return probes instead",
			 strerror(errno));
		s->session = false;
	}
	o->mfd[0] =
	    uprobe_multi_link(bpf_program__fd(s->late->progs.cuda_enter), UPROBE_MULTI_ENTRY, path,
			      so, ck, n, 0);
	if (o->mfd[0] < 0)
		return -errno;
	o->mfd[1] =
	    uprobe_multi_link(bpf_program__fd(s->late->progs.cuda_exit), UPROBE_MULTI_RETURN, path,
			      so, ck, n, 0);
	if (o->mfd[1] < 0)
		return -errno;
	return 0;
}

/*
 * A traced function whose code is only a jump to another traced function (nvcc 13's static
 * __cudaLaunchKernel is `jmp cudaLaunchKernel`): not probed, as the call is seen there - a
 * second trap per launch for nothing. Both lie in .text: file offsets differ as addresses do.
 */
/*
 * The bytes before a thunk's jump that leave the stack as it was: endbr64, and the frame
 * pointer pushed and popped again (libcudart.so.13's __cudaLaunchKernel is push %rbp;
 * mov %rsp,%rbp; pop %rbp; jmp cudaLaunchKernel). Returns the offset of what follows.
 */
static size_t thunk_prologue(const unsigned char *c, size_t max)
{
	size_t at = 0;
	bool pushed = false;

	while (at < max) {
		if (c[at] == 0xf3 && c[at + 1] == 0x0f && c[at + 2] == 0x1e && c[at + 3] == 0xfa)
			at += 4; /* endbr64 */
		else if (c[at] == 0x55 && !pushed)
			at += 1, pushed = true; /* push %rbp */
		else if (pushed && c[at] == 0x48 && c[at + 1] == 0x89 && c[at + 2] == 0xe5)
			at += 3; /* mov %rsp,%rbp */
		else if (pushed && c[at] == 0x5d)
			return at + 1; /* pop %rbp: balanced */
		else
			break;
	}
	return pushed ? max : at; /* a push never popped: not a thunk */
}

static void skip_thunks(const char *path, uint64_t *offs, unsigned *found)
{
	static const char *const thunks[][2] = {
	    {"__cudaLaunchKernel", "cudaLaunchKernel"},
	    {"__cudaLaunchKernel_ptsz", "cudaLaunchKernel_ptsz"},
	};
	int fd = -1;

	for (size_t i = 0; i < sizeof(thunks) / sizeof(thunks[0]); i++) {
		int a = cuda_func_find(thunks[i][0]), b = cuda_func_find(thunks[i][1]);
		unsigned char code[16];
		size_t at = 0;
		int32_t rel;

		if (a < 0 || b < 0 || !offs[a] || !offs[b])
			continue;
		if (fd < 0 && (fd = open_regular(path)) < 0)
			return;
		if (pread(fd, code, sizeof(code), (off_t)offs[a]) != (ssize_t)sizeof(code))
			continue;
		at = thunk_prologue(code, sizeof(code) - 5);
		if (code[at] != 0xe9)
			continue;
		memcpy(&rel, code + at + 1, sizeof(rel));
		if (offs[a] + at + 5 + (int64_t)rel == offs[b]) {
			offs[a] = 0;
			(*found)--;
		}
	}
	if (fd >= 0)
		close(fd);
}

static int attach_object(struct feature_ctx *f, struct cuda_state *s, const char *path)
{
	uint64_t offs[128];
	struct cuda_obj *o;
	struct stat st;
	unsigned found;
	int err;

	if (stat(path, &st))
		return -errno;
	for (size_t i = 0; i < s->nobjs; i++)
		if (s->objs[i].dev == st.st_dev && s->objs[i].ino == st.st_ino)
			return 0;
	err = scan_symbols(path, offs, &found);
	if (!err && found && !getenv("EPROF_CUDA_PROBE_THUNKS"))
		skip_thunks(path, offs, &found);
	if (err || !found)
		return err;
	err = cuda_progs(f, s);
	if (err)
		return err;
	o = realloc(s->objs, (s->nobjs + 1) * sizeof(*o));
	if (!o)
		return -ENOMEM;
	s->objs = o;
	o = &s->objs[s->nobjs++];
	memset(o, 0, sizeof(*o));
	o->dev = st.st_dev;
	o->ino = st.st_ino;
	o->mfd[0] = o->mfd[1] = -1;
	if (s->multi) {
		err = attach_object_multi(f, s, o, path, offs);
		if (err)
			log_warn("failed to attach uprobes to CUDA functions in '%s': %s", path,
				 strerror(-err));
		else
			log_info("cuda: traced %u CUDA functions in %s", found, path);
		return 0;
	}
	o->links = calloc(2 * found, sizeof(*o->links));
	if (!o->links)
		return -ENOMEM;
	for (unsigned i = 0; i < cuda_nfuncs; i++) {
		LIBBPF_OPTS(bpf_uprobe_opts, uo, .bpf_cookie = cuda_func_cookie(i));

		if (!offs[i])
			continue;
		for (int ret = 0; ret < 2; ret++) {
			struct bpf_program *prog =
			    ret ? s->late->progs.cuda_exit : s->late->progs.cuda_enter;
			struct bpf_link *l;

			uo.retprobe = ret;
			l = bpf_program__attach_uprobe_opts(prog, -1, path, offs[i], &uo);
			if (!l) {
				log_warn("failed to attach uprobe to %s in '%s': %s",
					 cuda_funcs[i].name, path, strerror(errno));
				break;
			}
			o->links[o->nlinks++] = l;
		}
	}
	log_info("cuda: traced %u CUDA functions in %s", found, path);
	return 0;
}

static bool cuda_name(const char *path)
{
	const char *b = strrchr(path, '/');

	b = b ? b + 1 : path;
	return !strncmp(b, "libcudart", 9) || !strncmp(b, "libcuda.so", 10) || strstr(b, "cuda");
}

static void attach_want(struct cuda_state *s, uint32_t pid);

/* Checks every executable mapping of pid not seen before: CUDA libraries by name, the program. */
static void scan_pid(struct feature_ctx *f, struct cuda_state *s, uint32_t pid)
{
	char path[64], line[PATH_MAX + 128], exe[PATH_MAX];
	bool driver = false;
	ssize_t n;
	FILE *fp;

	snprintf(path, sizeof(path), "/proc/%u/exe", pid);
	n = readlink(path, exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = '\0';
	snprintf(path, sizeof(path), "/proc/%u/maps", pid);
	fp = fopen(path, "re");
	if (!fp)
		return;
	while (fgets(line, sizeof(line), fp)) {
		char perms[8], *file;
		uint64_t seen;
		uint32_t id;
		int pos = 0;

		if (sscanf(line, "%*x-%*x %7s %*x %*s %*u %n", perms, &pos) < 1 || !pos ||
		    perms[2] != 'x')
			continue;
		file = line + pos;
		file[strcspn(file, "\n")] = '\0';
		if (file[0] != '/')
			continue;
		driver |= !strncmp(strrchr(file, '/') + 1, "libcuda.so", 10);
		id = profile__intern(f->p, file);
		if (!id || hmap__get(s->seen_paths, id, 0, &seen))
			continue;
		hmap__put(s->seen_paths, id, 0, 1);
		if (cuda_name(file) || !strcmp(file, exe)) {
			char in_ns[PATH_MAX + 32];

			/* the target's view of the path: it may live in another mount namespace */
			snprintf(in_ns, sizeof(in_ns), "/proc/%u/root%s", pid, file);
			attach_object(f, s, access(in_ns, R_OK) ? file : in_ns);
		}
	}
	fclose(fp);
	/* after its uprobes: every launch the collector records has its probed call */
	if (driver)
		attach_want(s, pid);
}

static void scan_targets(struct feature_ctx *f, struct cuda_state *s)
{
	uint32_t pid;

	for (size_t i = 0; feature_next_target(f, &i, &pid);)
		if (mapwatch_changed(f->maps, MAPWATCH_CUDA, pid))
			scan_pid(f, s, pid);
}

struct sys_scan {
	struct feature_ctx *f;
	struct cuda_state *s;
};

static void scan_process(uint32_t pid, void *arg)
{
	struct sys_scan *c = arg;

	if (mapwatch_changed(c->f->maps, MAPWATCH_CUDA, pid))
		scan_pid(c->f, c->s, pid);
}

/*
 * -a: every process's executable mappings, once per process and path (seen_paths): CUDA
 * libraries get system-wide uprobes (pid -1), and so does an executable with a static
 * cudart. New processes are looked at every second; every ten seconds all of them are read
 * again for libraries loaded since (PyTorch dlopen()s its CUDA libraries on import).
 */
static void scan_system(struct feature_ctx *f, struct cuda_state *s, uint64_t now, bool all)
{
	struct sys_scan c = { f, s };

	s->last_sys_scan = now;
	if (all)
		s->last_sys_rescan = now;
	proc_for_each(all ? NULL : s->sys_seen, scan_process, &c);
}

/* --- a launched program: its CUDA libraries before it runs ----------------------------------- */

static bool find_in_dirs(const char *dirs, const char *origin, const char *name, char *out,
			 size_t len)
{
	char *copy = strdup(dirs ? dirs : ""), *save = NULL, *d;
	bool ok = false;

	for (d = strtok_r(copy, ":", &save); copy && d && !ok; d = strtok_r(NULL, ":", &save)) {
		if (!strncmp(d, "$ORIGIN", 7))
			snprintf(out, len, "%s%s/%s", origin, d + 7, name);
		else
			snprintf(out, len, "%s/%s", d, name);
		ok = access(out, R_OK) == 0;
	}
	free(copy);
	return ok;
}

static const char *const lib_dirs =
    "/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:"
    "/usr/lib/x86_64-linux-gnu:/lib/x86_64-linux-gnu:/usr/lib64:"
    "/lib64:/usr/lib:/usr/local/lib:/usr/lib/wsl/lib";

/* The CUDA libraries an executable needs, found as ld.so would (RPATH, RUNPATH, LD_LIBRARY_PATH).
 */
static void attach_needed(struct feature_ctx *f, struct cuda_state *s, const char *exe)
{
	char origin[PATH_MAX], found[PATH_MAX], *rpath = NULL, *needed[32];
	Elf_Scn *scn = NULL;
	size_t nneeded = 0;
	Elf *elf;
	int fd;

	snprintf(origin, sizeof(origin), "%s", exe);
	*(strrchr(origin, '/') ? strrchr(origin, '/') : origin) = '\0';
	fd = open_regular(exe);
	if (fd < 0)
		return;
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ, NULL);
	while (elf && (scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNAMIC)
			continue;
		d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && sh.sh_entsize && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Dyn dyn;
			const char *v;

			if (!gelf_getdyn(d, (int)i, &dyn))
				continue;
			v = elf_strptr(elf, sh.sh_link, dyn.d_un.d_val);
			if (!v)
				continue;
			if ((dyn.d_tag == DT_RUNPATH || dyn.d_tag == DT_RPATH) && !rpath)
				rpath = strdup(v);
			else if (dyn.d_tag == DT_NEEDED && cuda_name(v) && nneeded < 32)
				needed[nneeded++] = strdup(v);
		}
	}
	for (size_t i = 0; i < nneeded; i++) {
		if (needed[i] && (find_in_dirs(rpath, origin, needed[i], found, sizeof(found)) ||
				  find_in_dirs(getenv("LD_LIBRARY_PATH"), origin, needed[i], found,
					       sizeof(found)) ||
				  find_in_dirs(lib_dirs, origin, needed[i], found, sizeof(found))))
			attach_object(f, s, found);
		free(needed[i]);
	}
	free(rpath);
	if (elf)
		elf_end(elf);
	close(fd);
}

static void attach_launched(struct feature_ctx *f, struct cuda_state *s)
{
	const char *cmd = f->o->argv[0];
	char path[PATH_MAX];

	if (strchr(cmd, '/'))
		snprintf(path, sizeof(path), "%s", cmd);
	else if (!find_in_dirs(getenv("PATH"), "", cmd, path, sizeof(path)))
		return;
	attach_object(f, s, path); /* a cudart linked statically */
	attach_needed(f, s, path);
}

/* --- decoding ------------------------------------------------------------------------------ */

static uint32_t handle_name(struct cuda_state *s, uint32_t pid, uint64_t h)
{
	uint64_t v = 0;

	return h && hmap__get(s->handles, pid, h, &v) ? (uint32_t)v : 0;
}

static int on_handle(struct event_ctx *c, struct cuda_state *s, const struct ev_cuda_handle *e)
{
	char name[EPROF_CUDA_NAME_LEN + 1];
	uint32_t id;
	char *d;

	if (e->result != 0 || !e->out)
		return 0;
	if (e->func < cuda_nfuncs && !strcmp(cuda_funcs[e->func].name, "__cudaGetKernel"))
		return e->in ? hmap__put(s->stubs, e->h.pid, e->out, e->in) : 0;
	if (e->in) { /* cuKernelGetFunction: the function is named after its kernel */
		id = handle_name(s, e->h.pid, e->in);
	} else {
		char cut[EPROF_CUDA_NAME_LEN + 8];

		memcpy(name, e->name, EPROF_CUDA_NAME_LEN);
		name[EPROF_CUDA_NAME_LEN] = '\0';
		if (strlen(name) >= EPROF_CUDA_NAME_LEN - 1) {
			/* read cut at the BPF side's length: shown as cut (the join's name check
			 * leaves such names out), not demangled (a cut mangled name is invalid) */
			snprintf(cut, sizeof(cut), "%s\u2026", name);
			id = profile__intern(c->p, cut);
		} else {
			d = name[0] == '_' && name[1] == 'Z' ? sym_demangle(name) : NULL;
			id = profile__intern(c->p, d && *d ? d : name);
			free(d);
		}
	}
	return id ? hmap__put(s->handles, e->h.pid, e->out, id) : 0;
}

/* The kernel a launch names, as a one-frame stack (stack2): the host stub, symbolized later. */
static uint32_t launch_kernel(struct event_ctx *c, struct cuda_state *s,
			      const struct ev_cuda_api *e, const struct cuda_func *fn)
{
	char buf[EPROF_CUDA_NAME_LEN + 16];
	uint32_t loc, name;
	int64_t l, node;

	if (!e->ptr)
		return 0;
	if (!cuda_func_runtime(fn)) { /* cu*: a driver function handle */
		name = handle_name(s, e->h.pid, e->ptr);
		if (!name)
			return 0;
		snprintf(buf, sizeof(buf), "%s", profile__str(c->p, name));
		l = profile__special(c->p, buf);
		if (l < 0)
			return 0;
		loc = l;
	} else {
		uint64_t stub = e->ptr, node = 0;

		/*
		 * A launch-bound program launches the same few kernels again and again: each
		 * (pid, pointer) is resolved once. A cudaKernel_t (nvcc 13's <<<>>>) names the
		 * host stub __cudaGetKernel was given; one whose __cudaGetKernel was not seen is
		 * a heap pointer, which must not send the maps to be read again at every launch.
		 */
		if (hmap__get(s->launch_nodes, e->h.pid, e->ptr, &node))
			return (uint32_t)node;
		hmap__get(s->stubs, e->h.pid, e->ptr, &stub);
		if (!proc_tracker__file_mapped(c->tracker, e->h.pid, stub) ||
		    proc_tracker__location(c->tracker, e->h.pid, stub, false, &loc, e->h.ts))
			return 0;
		node = (uint64_t)profile__stack(c->p, &loc, 1);
		if ((int64_t)node <= 0)
			return 0;
		hmap__put(s->launch_nodes, e->h.pid, e->ptr, node);
		return (uint32_t)node;
	}
	node = profile__stack(c->p, &loc, 1);
	return node > 0 ? (uint32_t)node : 0;
}

/* Samples name their threads; a thread seen only in CUDA events is named from /proc. */
static void note_thread(struct event_ctx *c, uint32_t pid, uint32_t tid, uint64_t ts)
{
	struct thread *t = profile__thread(c->p, pid, tid, false);
	char path[96], comm[EPROF_TASK_COMM_LEN + 1] = "";
	FILE *fp;

	if (t && t->comm)
		return;
	snprintf(path, sizeof(path), "%s/%u/task/%u/comm", c->proc_root, pid, tid);
	fp = fopen(path, "re");
	if (fp) {
		if (fgets(comm, sizeof(comm), fp))
			comm[strcspn(comm, "\n")] = '\0';
		fclose(fp);
	}
	events_note_thread(c, pid, tid, comm[0] ? comm : NULL, ts);
}

static int on_api(struct event_ctx *c, struct cuda_state *s, const struct ev_cuda_api *e,
		  size_t size)
{
	struct event ev = {.kind = EVK_CUDA_API};
	const struct cuda_func *fn;
	unsigned dir;
	int64_t st;

	if (e->func >= cuda_nfuncs)
		return -EINVAL;
	if (s->inj && gpu_conv_own_thread(&s->conv, e->h.pid, e->h.tid))
		return 0; /* the injected collector's own calls (its final synchronize) */
	fn = &cuda_funcs[e->func];
	note_thread(c, e->h.pid, e->h.tid, e->h.ts);
	if (!s->func_names[e->func])
		s->func_names[e->func] = profile__intern(c->p, fn->name);
	ev.ts = e->h.ts;
	ev.dur = e->dur;
	ev.pid = e->h.pid;
	ev.tid = e->h.tid;
	ev.name = s->func_names[e->func];
	ev_set_api(&ev, (int32_t)e->result /* CUresult / cudaError_t */, e->bytes, 0);
	dir = fn->dir;
	if (!dir && fn->cat == CUDA_CAT_MEMCPY && fn->kind >= 0)
		dir = cuda_memcpy_kind_dir(e->kind);
	ev.flags = fn->cat | dir << 4 | (fn->async ? CUDA_API_F_ASYNC : 0) |
		   (e->h.flags & CUDA_EVF_NESTED ? CUDA_API_F_NESTED : 0) |
		   (e->h.flags & CUDA_EVF_NOSTACK ? CUDA_API_F_NOSTACK : 0) |
		   ((int32_t)e->result ? CUDA_API_F_FAILED : 0) |
		   (e->h.flags & CUDA_EVF_NORET ? CUDA_API_F_NODUR : 0);
	if (fn->cat == CUDA_CAT_ALLOC)
		ev_set_api(&ev, (int32_t)e->result, e->bytes, fn->out >= 0 ? e->out : e->ptr);
	else if (fn->cat == CUDA_CAT_FREE)
		ev_set_api(&ev, (int32_t)e->result, e->bytes, e->ptr);
	if (fn->cat == CUDA_CAT_LAUNCH)
		ev.stack2 = launch_kernel(c, s, e, fn);
	if (!(e->h.flags & CUDA_EVF_NOSTACK)) {
		st = events_stack(c, &e->h, &e->st, size - sizeof(*e), 0);
		if (st < 0)
			return (int)st;
		ev.stack = (uint32_t)st;
	}
	s->events++;
	return profile__add_event(c->p, &ev);
}

static int on_event(struct event_ctx *c, void *arg, const void *data, size_t size)
{
	const struct ev_hdr *h = data;

	if (h->kind == EV_CUDA_API) {
		if (size < sizeof(struct ev_cuda_api))
			return -EINVAL;
		return on_api(c, arg, data, size);
	}
	if (h->kind == EV_CUDA_HANDLE) {
		if (size < sizeof(struct ev_cuda_handle))
			return -EINVAL;
		return on_handle(c, arg, data);
	}
	return -EINVAL;
}

/* --- CUPTI: the injection library's socket ------------------------------------------------ */

static bool cupti_lib(char *out, size_t len)
{
	const char *env = getenv("EPROF_CUPTI_LIB");
	char self[PATH_MAX - 64];
	ssize_t n;

	if (env && *env) {
		snprintf(out, len, "%s", env);
		return access(out, R_OK) == 0;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return false;
	self[n] = '\0';
	*(strrchr(self, '/') ? strrchr(self, '/') : self) = '\0';
	snprintf(out, len, "%s/libeprof_cupti.so", self);
	if (!access(out, R_OK))
		return true;
	snprintf(out, len, "%s/../lib/eprof/libeprof_cupti.so", self);
	return access(out, R_OK) == 0;
}

static void *cupti_thread(void *arg);
static int attach_setup(struct feature_ctx *f, struct cuda_state *s, const char *lib);

/* What reads the collectors' messages: the conversion and the reader thread. */
static int cupti_reader_setup(struct cuda_state *s)
{
	s->buf = aligned_alloc(8, EGPU_MSG_MAX);
	if (!s->buf || gpu_ns_tids_init(&s->ns_tids) || gpu_conv_init(&s->conv, s->p_for_conv))
		return -ENOMEM;
	s->conv_on = true;
	if (pipe2(s->wake, O_CLOEXEC))
		return -errno;
	s->thread_on = !pthread_create(&s->thread, NULL, cupti_thread, s);
	if (!s->thread_on)
		log_warn("cuda: no CUPTI reader thread: reading every 50 ms");
	return 0;
}

static int cupti_setup(struct feature_ctx *f, struct cuda_state *s)
{
	char lib[PATH_MAX], prefix[40];
	int err;

	s->p_for_conv = f->p;
	if (!cupti_lib(lib, sizeof(lib))) {
		log_info("cuda: no CUPTI injection library: GPU activity is not recorded");
		return 0;
	}
	if (!f->o->argv)
		return attach_setup(f, s, lib);
	if (getenv("CUDA_INJECTION64_PATH")) {
		log_warn("CUDA_INJECTION64_PATH is already set: GPU activity is not recorded");
		return 0;
	}
	/* The command's user (--user) reaches the socket; no other does (sockdir.h). */
	s->sock_uid = f->o->run_as ? f->o->run_uid : geteuid();
	/* The recorder's pid in the name: the next recorder removes it if this one is killed. */
	snprintf(prefix, sizeof(prefix), "/tmp/eprof-cupti-%d", (int)getpid());
	sockdir_sweep();
	err = sockdir_listen(&s->sd, prefix, s->sock_uid,
			     f->o->run_as ? f->o->run_gid : getegid(), 64);
	if (err) {
		log_err("failed to create the CUPTI socket in /tmp: %s", strerror(-err));
		return err;
	}
	s->lfd = s->sd.lfd;
	err = cupti_reader_setup(s);
	if (err)
		return err;
	/* The command is forked after configure: it inherits both. */
	setenv("CUDA_INJECTION64_PATH", lib, 1);
	setenv("EPROF_CUPTI_SOCK", s->sd.path, 1);
	log_info("cuda: CUPTI injection library %s", lib);
	return 0;
}

static void queue_msg(struct cuda_state *s, const void *buf, size_t len, uint32_t peer)
{
	struct qmsg *m = malloc(sizeof(*m) + len);

	if (!m) {
		atomic_fetch_add(&s->qlost, 1);
		return;
	}
	m->next = NULL;
	m->len = len;
	m->peer = peer;
	memcpy(m->data, buf, len);
	atomic_fetch_add(&s->qn, 1);
	pthread_mutex_lock(&s->qlock);
	*s->qtail = m;
	s->qtail = &m->next;
	pthread_mutex_unlock(&s->qlock);
}

/* Converts the messages the reader thread queued (main thread). */
static void convert_queued(struct cuda_state *s)
{
	struct qmsg *m, *next;

	pthread_mutex_lock(&s->qlock);
	m = s->qhead;
	s->qhead = NULL;
	s->qtail = &s->qhead;
	pthread_mutex_unlock(&s->qlock);
	for (; m; m = next) {
		next = m->next;
		gpu_conv_message(&s->conv, m->data, m->len, m->peer);
		free(m);
	}
}

/* Channels of collectors injected since the last read become connections (reader's side). */
static void adopt_channels(struct cuda_state *s)
{
	pthread_mutex_lock(&s->qlock);
	for (size_t i = 0; i < s->nadopt; i++) {
		if (s->nconns == MAX_CONNS) {
			close(s->adopt_fd[i]);
			continue;
		}
		s->peers[s->nconns] = s->adopt_pid[i];
		s->inj_conn[s->nconns] = true;
		s->conns[s->nconns++] = s->adopt_fd[i];
		atomic_store(&s->connected, true);
	}
	s->nadopt = 0;
	pthread_mutex_unlock(&s->qlock);
}

/* Reads what is waiting on the socket: queued, or converted at once. Returns connections open. */
static size_t cupti_read(struct cuda_state *s, bool queue)
{
	int fd;

	if (!s->conv_on)
		return 0;
	adopt_channels(s);
	while (s->nconns < MAX_CONNS &&
	       (fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
		struct ucred cr = {0};
		socklen_t cl = sizeof(cr);

		/* Only the command's user or root can reach the socket: SO_PEERCRED says so again. */
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) ||
		    (cr.uid && cr.uid != s->sock_uid)) {
			close(fd);
			continue;
		}
		/* The pid the sender puts in its messages is that of its own pid namespace. */
		if (cr.pid <= 0)
			cr.pid = 0;
		s->peers[s->nconns] = (uint32_t)cr.pid;
		s->inj_conn[s->nconns] = false;
		s->conns[s->nconns++] = fd;
		atomic_store(&s->connected, true);
	}
	for (size_t i = 0; i < s->nconns;) {
		ssize_t n = recv(s->conns[i], s->buf, EGPU_MSG_MAX, MSG_DONTWAIT);

		if (n > 0) {
			/* a container's thread ids, mapped now while the sender still runs */
			gpu_ns_map_tids(&s->ns_tids, s->buf, (size_t)n, s->peers[i]);
			if (queue)
				queue_msg(s, s->buf, (size_t)n, s->peers[i]);
			else
				gpu_conv_message(&s->conv, s->buf, (size_t)n, s->peers[i]);
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			i++;
			continue;
		}
		close(s->conns[i]); /* the process closed it (exit) */
		if (s->inj_conn[i])
			cuda_inject__gone(s->inj, s->peers[i]);
		s->conns[i] = s->conns[--s->nconns];
		s->peers[i] = s->peers[s->nconns];
		s->inj_conn[i] = s->inj_conn[s->nconns];
	}
	return s->nconns;
}

static void *cupti_thread(void *arg)
{
	struct cuda_state *s = arg;
	struct pollfd pf[MAX_CONNS + 2];

	while (!atomic_load(&s->stop)) {
		size_t n = 0;

		pf[n++] = (struct pollfd){.fd = s->wake[0], .events = POLLIN};
		pf[n++] = (struct pollfd){.fd = s->lfd, .events = POLLIN};
		for (size_t i = 0; i < s->nconns; i++)
			pf[n++] = (struct pollfd){.fd = s->conns[i], .events = POLLIN};
		if (poll(pf, n, 200) < 0 && errno != EINTR)
			break;
		if (pf[0].revents & POLLIN) {
			char c[16];

			if (read(s->wake[0], c, sizeof(c)) < 0)
				continue;
		}
		if (atomic_exchange(&s->flush_req, false))
			for (size_t i = 0; i < s->nconns; i++)
				send(s->conns[i], "F", 1, MSG_DONTWAIT | MSG_NOSIGNAL);
		adopt_channels(s);
		if (atomic_exchange(&s->retract_req, false))
			for (size_t i = 0; i < s->nconns; i++)
				if (s->inj_conn[i])
					send(s->conns[i], "R", 1, MSG_DONTWAIT | MSG_NOSIGNAL);
		cupti_read(s, true);
	}
	return NULL;
}

/*
 * The record stops while processes may still run: ask them to flush and take what comes
 * until nothing new arrived for 100 ms (at most 1 s).
 */
static void cupti_final_flush(struct cuda_state *s)
{
	struct timespec ts = {0, 20000000};
	uint64_t last = atomic_load(&s->qn);
	int quiet = 0;

	/* No program loaded the library (no CUDA, or no CUPTI): nothing to wait for. */
	if (!s->thread_on || !atomic_load(&s->connected))
		return;
	atomic_store(&s->flush_req, true);
	if (write(s->wake[1], "x", 1) < 0)
		return;
	for (int i = 0; i < 50 && quiet < 5; i++) {
		uint64_t n;

		nanosleep(&ts, NULL);
		n = atomic_load(&s->qn);
		quiet = n == last ? quiet + 1 : 0;
		last = n;
		convert_queued(s);
	}
}

static void cupti_stop_thread(struct cuda_state *s)
{
	if (!s->thread_on)
		return;
	atomic_store(&s->stop, true);
	if (write(s->wake[1], "x", 1) < 0)
		log_debug("cuda: wake pipe: %s", strerror(errno));
	pthread_join(s->thread, NULL);
	s->thread_on = false;
}

static void cuda_detach(struct cuda_state *s)
{
	for (size_t i = 0; i < s->nobjs; i++) {
		struct cuda_obj *o = &s->objs[i];

		for (size_t j = 0; j < o->nlinks; j++)
			bpf_link__destroy(o->links[j]);
		o->nlinks = 0;
		for (int j = 0; j < 2; j++) {
			if (o->mfd[j] >= 0)
				close(o->mfd[j]);
			o->mfd[j] = -1;
		}
	}
}

/* --- attach mode: the collector injected into running processes ---------------------------- */

static int attach_setup(struct feature_ctx *f, struct cuda_state *s, const char *lib)
{
	struct cuda_inject_opts io = {.lib = lib, .verbose = log_get_level() >= LOG_INFO};
	int err;

	if (f->o->no_inject) {
		s->no_inject = true;
		s->noinj_seen = hmap__new(16);
		if (!s->noinj_seen || gpu_conv_init(&s->conv, f->p))
			return -ENOMEM;
		s->conv_on = true; /* for the report's line on what is missing */
		log_info("cuda: --no-inject: CUDA API calls only, no GPU activity");
		return 0;
	}
	err = cupti_reader_setup(s);
	if (err)
		return err;
	s->inj = cuda_inject__new(&io);
	if (!s->inj)
		return -ENOMEM;
	log_info("cuda: CUPTI collector %s, injected into the targets that map the CUDA driver",
		 lib);
	return 0;
}

/* A target maps the CUDA driver. */
static void attach_want(struct cuda_state *s, uint32_t pid)
{
	uint64_t v;

	if (s->inj) {
		cuda_inject__want(s->inj, pid);
	} else if (s->no_inject && !hmap__get(s->noinj_seen, pid, 0, &v)) {
		hmap__put(s->noinj_seen, pid, 0, 1);
		if (s->conv_on)
			s->conv.status_procs[EGPU_ST_NOT_INJECTED]++;
	}
}

static void comm_of(uint32_t pid, char *out, size_t len)
{
	char path[64];
	FILE *fp;

	snprintf(path, sizeof(path), "/proc/%u/comm", pid);
	out[0] = '\0';
	fp = fopen(path, "re");
	if (fp) {
		if (fgets(out, (int)len, fp))
			out[strcspn(out, "\n")] = '\0';
		fclose(fp);
	}
}

/* Injections that finished: their channels to the reader, their failures said once each. */
static void attach_poll(struct cuda_state *s)
{
	struct cuda_inject_done d[16];
	size_t n;

	if (!s->inj)
		return;
	while ((n = cuda_inject__take(s->inj, d, 16)) > 0) {
		for (size_t i = 0; i < n; i++) {
			char comm[32];

			comm_of(d[i].pid, comm, sizeof(comm));
			if (d[i].status == EGPU_ST_OK) {
				log_info("cuda: CUPTI collector injected into pid %u (%s): thread %u "
					 "stopped %.2f ms",
					 d[i].pid, comm, d[i].tid, d[i].stopped_ms);
				pthread_mutex_lock(&s->qlock);
				if (s->nadopt < sizeof(s->adopt_fd) / sizeof(s->adopt_fd[0])) {
					s->adopt_fd[s->nadopt] = d[i].chan_fd;
					s->adopt_pid[s->nadopt++] = d[i].pid;
				} else {
					close(d[i].chan_fd);
				}
				pthread_mutex_unlock(&s->qlock);
				if (s->thread_on && write(s->wake[1], "x", 1) < 0)
					log_debug("cuda: wake pipe: %s", strerror(errno));
				continue;
			}
			log_warn("cuda: cannot inject the CUPTI collector into pid %u (%s): %s: no GPU "
				 "kernel or copy timing there (CPU and CUDA API profiling go on)",
				 d[i].pid, comm, d[i].msg);
			if (d[i].status < EGPU_ST_MAX) {
				s->conv.status_procs[d[i].status]++;
				if (!s->why[d[i].status][0])
					snprintf(s->why[d[i].status], sizeof(s->why[0]), "%.*s",
						 (int)sizeof(s->why[0]) - 1, d[i].msg);
			}
		}
	}
}

static bool attach_keep(void *arg, uint32_t pid)
{
	struct cuda_state *s = arg;
	uint64_t v = 0;

	return hmap__get(s->conv.bye, pid, 0, &v) && (v & GPU_BYE_KEEP);
}

/*
 * The end of the record: every injected collector is asked to stop ('R': activity off,
 * contexts synchronized, last flush, CUPTI finalized) while the uprobes still see the
 * program, and when it said goodbye (or 3 s passed) it is unloaded through the injector.
 */
static void attach_retract(struct cuda_state *s)
{
	struct timespec ts = {0, 10000000};
	uint32_t pids[256];
	size_t n;

	if (!s->inj || s->retracted)
		return;
	s->retracted = true;
	cuda_inject__settle(s->inj, 6000);
	attach_poll(s);
	n = cuda_inject__active(s->inj, pids, sizeof(pids) / sizeof(pids[0]));
	if (n && s->thread_on) {
		atomic_store(&s->retract_req, true);
		if (write(s->wake[1], "x", 1) < 0)
			log_debug("cuda: wake pipe: %s", strerror(errno));
		for (int i = 0; i < 300; i++) {
			size_t waiting = 0;
			uint32_t act[256];
			size_t na;

			nanosleep(&ts, NULL);
			convert_queued(s);
			na = cuda_inject__active(s->inj, act, sizeof(act) / sizeof(act[0]));
			for (size_t j = 0; j < na; j++) {
				uint64_t v = 0;

				waiting += !hmap__get(s->conv.bye, act[j], 0, &v);
			}
			if (!waiting)
				break;
		}
	}
	cuda_inject__retract_all(s->inj, attach_keep, s, 8000);
	convert_queued(s);
}

/* The injections and retractions, in the file's metadata (report: GPU data quality). */
static void attach_meta(struct feature_ctx *f, struct cuda_state *s)
{
	struct cuda_inject_summary m;
	char buf[256];

	if (!s->inj)
		return;
	cuda_inject__summary(s->inj, &m);
	if (!m.injected && !m.failed)
		return;
	snprintf(buf, sizeof(buf), "%u", m.injected);
	profile__set_meta(f->p, "gpu_attach_injected", buf);
	snprintf(buf, sizeof(buf), "%u", m.retracted);
	profile__set_meta(f->p, "gpu_attach_retracted", buf);
	snprintf(buf, sizeof(buf), "%u", m.kept);
	profile__set_meta(f->p, "gpu_attach_kept", buf);
	snprintf(buf, sizeof(buf), "%.0f", m.inject_stop_max_ms * 1000);
	profile__set_meta(f->p, "gpu_inject_stop_max_us", buf);
	snprintf(buf, sizeof(buf), "%.0f", m.retract_stop_max_ms * 1000);
	profile__set_meta(f->p, "gpu_retract_stop_max_us", buf);
	log_info("cuda: CUPTI collector injected into %u process%s (thread stopped %.2f ms at "
		 "most), retracted from %u (%.2f ms at most), %u left loaded, %u not injected",
		 m.injected, m.injected == 1 ? "" : "es", m.inject_stop_max_ms, m.retracted,
		 m.retract_stop_max_ms, m.kept, m.failed);
}

/* --- hooks --------------------------------------------------------------------------------- */

static int cuda_configure(struct feature_ctx *f, void **state)
{
	struct cuda_state *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	*state = s;
	s->lfd = -1;
	sockdir_init(&s->sd);
	s->wake[0] = s->wake[1] = -1;
	pthread_mutex_init(&s->qlock, NULL);
	s->qtail = &s->qhead;
	s->seen_paths = hmap__new(256);
	s->handles = hmap__new(256);
	s->stubs = hmap__new(256);
	s->launch_nodes = hmap__new(256);
	if (!s->seen_paths || !s->handles || !s->stubs || !s->launch_nodes || cuda_nfuncs > 128)
		return -ENOMEM;
	s->multi = kernel_at_least(6, 6) && !getenv("EPROF_NO_UPROBE_MULTI");
	s->session = s->multi && kernel_at_least(6, 13) && !getenv("EPROF_NO_UPROBE_SESSION");
	/* the probes' programs: loaded by cuda_progs() once a CUDA library is found */
	f->skel->rodata->cuda_stack_rate = f->o->cuda_stack_rate;
	return cupti_setup(f, s);
}

static int cuda_attach(struct feature_ctx *f, void *state)
{
	struct cuda_state *s = state;
	int err;

	err = events_add_handler(f->ev, EV_CUDA_API, EV_CUDA_HANDLE, on_event, s);
	if (err)
		return err;
	if (f->o->argv)
		attach_launched(f, s);
	else if (!f->o->all)
		scan_targets(f, s);
	s->last_scan = f->start_ns;
	s->scan_every = SCAN_NS;
	if (f->o->cuda > 0 && f->o->all) {
		s->sys_seen = hmap__new(1024);
		if (!s->sys_seen)
			return -ENOMEM;
		scan_system(f, s, f->start_ns, false);
		s->last_sys_rescan = f->start_ns;
		log_info("cuda: -a: %zu objects with CUDA functions so far", s->nobjs);
	} else if (f->o->cuda > 0 && !s->nobjs && !f->o->argv)
		log_warn(
		    "--cuda: no CUDA library in the target yet; tracing it once one is loaded");
	return 0;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int cuda_poll(struct feature_ctx *f, void *state, uint64_t now)
{
	struct cuda_state *s = state;
	uint64_t t0 = mono_ns(), t1;

	attach_poll(s);
	if (s->thread_on)
		convert_queued(s);
	else
		cupti_read(s, false);
	t1 = mono_ns();
	s->convert_ns += t1 - t0;
	if (s->sys_seen && now - s->last_sys_scan >= SYS_SCAN_NS)
		scan_system(f, s, now, now - s->last_sys_rescan >= SYS_RESCAN_NS);
	if (!f->o->all && now - s->last_scan >= s->scan_every) {
		size_t before = s->nobjs;

		s->last_scan = now;
		scan_targets(f, s);
		/*
		 * A big job's maps are long (a PyTorch CUDA process has thousands of lines) and
		 * reading them contends with its mmaps: back off while nothing new turns up.
		 */
		s->scan_every = s->nobjs != before ? SCAN_NS
				: s->scan_every < SCAN_MAX_NS ? 2 * s->scan_every
							     : SCAN_MAX_NS;
	}
	s->scan_ns += mono_ns() - t1;
	return 0;
}

/*
 * Which libcupti ran, in the file's metadata; and why GPU activity is missing where it is, as
 * a warning now and a metadata line the report shows.
 */
static void cupti_note_info(struct feature_ctx *f, const struct cuda_state *s)
{
	static const char *const why[EGPU_ST_MAX] = {
	    [EGPU_ST_NO_CUPTI] = "no libcupti could be loaded",
	    [EGPU_ST_VERSION] = "its libcupti is of another major version than eprof was built for",
	    [EGPU_ST_SUBSCRIBED] = "CUPTI already had a subscriber (torch.profiler/Kineto, Nsight "
				   "or DCGM profiling)",
	    [EGPU_ST_SETUP] = "CUPTI refused its setup",
	    [EGPU_ST_PTRACE] = "eprof could not ptrace it to inject the CUPTI collector",
	    [EGPU_ST_SECCOMP] = "its seccomp filter forbids what injecting the collector needs",
	    [EGPU_ST_NO_DLOPEN] = "it has no dlopen to load the collector with",
	    [EGPU_ST_INJECT] = "injecting the CUPTI collector failed",
	    [EGPU_ST_NOT_INJECTED] = "--no-inject (CUDA API calls only)",
	};
	const struct gpu_conv *c = &s->conv;
	char buf[1024];
	size_t off = 0;

	if (c->cupti_version) {
		snprintf(buf, sizeof(buf), "%u.%u (API %u, eprof built with %u)",
			 c->cupti_version / 10000, c->cupti_version / 100 % 100, c->cupti_version,
			 c->built_version);
		profile__set_meta(f->p, "cupti_version", buf);
		if (c->cupti_path[0])
			profile__set_meta(f->p, "cupti_path", c->cupti_path);
	}
	buf[0] = '\0';
	for (unsigned st = 1; st < EGPU_ST_MAX && off < sizeof(buf); st++) {
		char detail[240] = "";

		if (!c->status_procs[st] || !why[st])
			continue;
		if (s->why[st][0])
			snprintf(detail, sizeof(detail), " (%s)", s->why[st]);
		log_warn("cuda: GPU activity not recorded in %llu process%s: %s%s",
			 (unsigned long long)c->status_procs[st], c->status_procs[st] > 1 ? "es" : "",
			 why[st], detail);
		off += (size_t)snprintf(buf + off, sizeof(buf) - off, "%s%llu process%s: %s%s",
					off ? "; " : "", (unsigned long long)c->status_procs[st],
					c->status_procs[st] > 1 ? "es" : "", why[st], detail);
	}
	if (buf[0])
		profile__set_meta(f->p, "gpu_not_recorded", buf);
}

static int cuda_finish(struct feature_ctx *f, void *state)
{
	struct cuda_state *s = state;
	struct timespec ts = {0, 20000000};

	attach_retract(s); /* while the uprobes still see the program */
	cuda_detach(s);
	f->consume(f);
	/* A process that exits flushes its last records first: give it a moment. */
	cupti_final_flush(s);
	cupti_stop_thread(s);
	convert_queued(s);
	for (int i = 0; i < 25 && cupti_read(s, false); i++)
		nanosleep(&ts, NULL);
	cupti_read(s, false);
	f->p->stats[STAT_EVENTS_LOST] += f->bpf_stat(f, BSTAT_CUDA_RB_FULL);
	f->p->stats[STAT_CUDA_CALLS] = f->bpf_stat(f, BSTAT_CUDA_CALLS);
	f->p->stats[STAT_CUDA_NOSTACK] = f->bpf_stat(f, BSTAT_CUDA_NOSTACK);
	f->p->stats[STAT_CUDA_LOST] =
	    f->bpf_stat(f, BSTAT_CUDA_RB_FULL) + f->bpf_stat(f, BSTAT_CUDA_INFLIGHT_FULL);
	f->p->stats[STAT_CUDA_UNTRACKED] = f->bpf_stat(f, BSTAT_CUDA_INFLIGHT_FULL);
	f->p->stats[STAT_CUDA_STALE] = f->bpf_stat(f, BSTAT_CUDA_STALE);
	if (s->conv_on) {
		f->p->stats[STAT_GPU_RECORDS_LOST] = s->conv.count[GPU_CNT_DROPPED];
		f->p->stats[STAT_GPU_ZERO_TIME] = s->conv.count[GPU_CNT_ZERO];
		f->p->stats[STAT_GPU_INVERTED_TIME] = s->conv.count[GPU_CNT_INVERTED];
		f->p->stats[STAT_GPU_FOREIGN_CLOCK] = s->conv.count[GPU_CNT_FOREIGN];
		f->p->stats[STAT_GPU_BUFFER_ERRORS] = s->conv.count[GPU_CNT_BUF_ERR];
		f->p->stats[STAT_GPU_BAD_RECORDS] = s->conv.bad + atomic_load(&s->qlost);
		attach_meta(f, s);
		cupti_note_info(f, s);
		log_info("cuda: CUPTI records: %llu kernels, %llu copies, %llu sets, %llu API",
			 (unsigned long long)s->conv.kernels, (unsigned long long)s->conv.memcpys,
			 (unsigned long long)s->conv.memsets, (unsigned long long)s->conv.apis);
	}
	log_info("cuda: %llu API events in %zu objects; %.2f s converting CUPTI records, %.2f s "
		 "looking for CUDA libraries",
		 (unsigned long long)s->events, s->nobjs, s->convert_ns / 1e9, s->scan_ns / 1e9);
	return 0;
}

static void cuda_destroy(struct feature_ctx *f, void *state)
{
	struct cuda_state *s = state;

	if (!s)
		return;
	attach_retract(s); /* top, or a record that failed: the targets get their state back */
	/* the CUPTI thread tells the injector of each connection that closes (a retracted
	 * target closes its own): stopped first, it cannot do so into a freed injector */
	cupti_stop_thread(s);
	cuda_inject__free(s->inj);
	s->inj = NULL;
	convert_queued(s); /* frees what is left */
	for (int i = 0; i < 2; i++)
		if (s->wake[i] >= 0)
			close(s->wake[i]);
	cuda_detach(s);
	profile_bpf__destroy(s->late);
	for (size_t i = 0; i < s->nobjs; i++)
		free(s->objs[i].links);
	free(s->objs);
	for (size_t i = 0; i < s->nconns; i++)
		close(s->conns[i]);
	sockdir_remove(&s->sd); /* closes s->lfd */
	s->lfd = -1;
	if (s->conv_on)
		gpu_conv_free(&s->conv);
	gpu_ns_tids_free(&s->ns_tids);
	free(s->buf);
	hmap__free(s->seen_paths);
	hmap__free(s->handles);
	hmap__free(s->stubs);
	hmap__free(s->launch_nodes);
	hmap__free(s->sys_seen);
	hmap__free(s->noinj_seen);
	free(s);
}

const struct feature feature_cuda = {
    .name = "cuda",
    .enabled = cuda_enabled,
    .configure = cuda_configure,
    .attach = cuda_attach,
    .poll = cuda_poll,
    .finish = cuda_finish,
    .destroy = cuda_destroy,
};
