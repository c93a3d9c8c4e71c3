// SPDX-License-Identifier: MIT
/*
 * One record: setup (output, permissions, BPF load), attach (targets, perf
 * events, launch), run (poll the ring buffer, flush chunks), teardown
 * (detach, drain, symbolize, finish the file).
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <linux/capability.h>
#include <linux/perf_event.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/types.h>

#include "model/event.h"
#include "eprof_abi.h"
#include "format/format.h"
#include "sym/symbolizer.h"
#include "util/bidcache.h"
#include "util/log.h"
#include "profile.skel.h"
#include "feature.h"
#include "job.h"
#include "mapwatch.h"
#include "proc.h"
#include "record.h"
#include "uprobe_multi.h"
#include "sym/symbolize.h"

#define PERM_HINT "run as root or grant CAP_BPF,CAP_PERFMON"
#define STACK_EPOCH_NODES (32u << 10) /* ~0.4 MB of nodes + ~2 MB of index */
#define POLL_MS 50 /* samples do not wake us: read the ring this often */
/*
 * What is read is written this often: a recorder SIGKILLed (OOM killer, a job scheduler)
 * loses at most this much plus what the ring held. 1 s kept 2/3 of a 3 s recording.
 */
#define FLUSH_NS 250000000ULL

static volatile sig_atomic_t stop_signal;

struct session {
	const struct record_opts *o;
	struct job_info job;	   /* rank and host: output names, metadata */
	struct clock_pair clock;   /* realtime <-> monotonic at the start */
	char out_path[PATH_MAX];   /* -o expanded (%r, %h...), or where a busy one went */
	struct profile *p;
	struct eprof_writer *w;
	struct proc_tracker *tracker;
	struct symbolizer *sym;
	struct event_ctx ev;
	struct profile_bpf *skel;
	struct ring_buffer *rb;
	struct bpf_link **links;
	int *pfds;
	int ncpus;
	struct mapwatch *mw; /* code mappings that changed, for the features' rescans */
	pid_t child;
	int go_pipe, err_pipe; /* launch: release the child / learn exec failure */
	int child_status;
	bool child_done;
	uint32_t live_targets;
	uint8_t pid_gone[RECORD_MAX_PIDS]; /* -p targets seen to exit */
	uint64_t next_alive_check;
	uint64_t start_ns, stop_ns;
	const char *stop_reason;
	uint64_t lost_shown;
	uint64_t lost_noted, evlost_noted, lost_noted_ts; /* drops already turned into EVK_LOST */
	bool status_line;
	bool children_noted; /* said that the listed processes exited before their children */
	int write_err; /* first write error, already reported */
	struct feature_ctx fctx;
	void *fstate[16]; /* per record_features[] entry; NULL when the feature is off */
	bool fon[16];
};

#define FOR_EACH_FEATURE(s, i, f)                                                                  \
	for (size_t i = 0; (f = record_features[i]) != NULL; i++)                                   \
		if ((s)->fon[i])

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static void on_signal(int sig)
{
	stop_signal = sig;
}

/* Only interrupts epoll_wait, so a launched command's exit is noticed at once. */
static void on_sigchld(int sig)
{
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	/* libbpf's messages (the verifier log above all) are long: pass them through whole. */
	if ((level == LIBBPF_DEBUG && log_get_level() < LOG_DEBUG) || log_get_level() < LOG_INFO)
		return 0;
	fputs("eprof: libbpf: ", stderr);
	return vfprintf(stderr, fmt, ap);
}

/* Effective capabilities, read with capget(2) so eprof needs no libcap. */
static bool have_cap(int cap)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2] = { 0 };

	if (syscall(SYS_capget, &hdr, data))
		return false;
	return data[cap / 32].effective & (1u << (cap % 32));
}

static int check_environment(void)
{
	/* CAP_SYS_ADMIN covers both on kernels older than 5.8. */
	if (geteuid() != 0 && !have_cap(CAP_SYS_ADMIN) &&
	    !(have_cap(CAP_BPF) && have_cap(CAP_PERFMON))) {
		log_err("no permission for BPF and perf events: " PERM_HINT);
		return -EPERM;
	}
	if (access("/sys/kernel/btf/vmlinux", R_OK)) {
		log_err("kernel without BTF (/sys/kernel/btf/vmlinux missing): eprof needs CONFIG_DEBUG_INFO_BTF=y");
		return -ENOTSUP;
	}
	return 0;
}

static int check_pids(const struct record_opts *o)
{
	/*
	 * With -a the allocator probes fire in every process on the machine: only root may
	 * probe processes of other users (a user with CAP_BPF alone must name its own PIDs).
	 */
	if (o->all && o->mem_sample && geteuid() != 0) {
		log_err("--mem with -a probes every user's processes: run as root, or use -p PID");
		return -EPERM;
	}
	for (size_t i = 0; i < o->npids; i++) {
		struct stat st;
		char path[64];

		snprintf(path, sizeof(path), "/proc/%u", o->pids[i]);
		if (stat(path, &st)) {
			log_err("no such process: %u", o->pids[i]);
			return -ESRCH;
		}
		/* Capabilities are not a licence to read other users' processes: only root is. */
		if (geteuid() != 0 && st.st_uid != geteuid()) {
			log_err("process %u belongs to another user: only root may profile it",
				o->pids[i]);
			return -EPERM;
		}
	}
	return 0;
}

/* --user: the user's groups, looked up before the fork (NSS is no place for a forked child). */
static int user_groups(const struct record_opts *o, gid_t *groups, int *n)
{
	struct passwd *pw = getpwuid(o->run_uid);

	if (!pw || getgrouplist(pw->pw_name, o->run_gid, groups, n) < 0) {
		log_err("failed to list the groups of user '%s': %s", o->user,
			pw ? "more than 256" : "no such user");
		return -EINVAL;
	}
	return 0;
}

/*
 * --user: what initgroups() would set, then the gid and the uid, all three ids each (no way
 * back to root), before the exec.
 */
static int drop_to_user(const struct record_opts *o, const gid_t *groups, int n)
{
	if (setgroups((size_t)n, groups) || setresgid(o->run_gid, o->run_gid, o->run_gid) ||
	    setresuid(o->run_uid, o->run_uid, o->run_uid))
		return errno;
	return 0;
}

/* Forks the command stopped before exec; it runs once BPF is attached. */
static int launch_prepare(struct session *s)
{
	gid_t groups[256];
	int go[2], ep[2], ngroups = 256;
	char c;

	if (s->o->run_as && user_groups(s->o, groups, &ngroups))
		return -EINVAL;
	if (pipe2(go, O_CLOEXEC) || pipe2(ep, O_CLOEXEC))
		return -errno;
	s->child = fork();
	if (s->child < 0)
		return -errno;
	if (s->child == 0) {
		int e;

		close(go[1]);
		close(ep[0]);
		if (read(go[0], &c, 1) != 1)
			_exit(127);
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		e = s->o->run_as ? drop_to_user(s->o, groups, ngroups) : 0;
		if (!e)
			execvp(s->o->argv[0], s->o->argv);
		e = e ? e : errno;
		if (write(ep[1], &e, sizeof(e)) < 0)
			_exit(127);
		_exit(127);
	}
	close(go[0]);
	close(ep[1]);
	s->ev.launch_pid = (uint32_t)s->child;
	s->go_pipe = go[1];
	s->err_pipe = ep[0];
	return 0;
}

static int launch_release(struct session *s)
{
	int e = 0;
	ssize_t n;

	s->ev.launch_go_ns = now_ns();
	if (write(s->go_pipe, "x", 1) != 1)
		return -errno;
	close(s->go_pipe);
	s->go_pipe = -1;
	/* The exec-error pipe closes on a successful exec (CLOEXEC) and returns 0 bytes. */
	n = read(s->err_pipe, &e, sizeof(e));
	close(s->err_pipe);
	s->err_pipe = -1;
	if (n == sizeof(e)) {
		log_err("failed to run '%s': %s", s->o->argv[0], strerror(e));
		waitpid(s->child, NULL, 0);
		s->child = 0;
		return -e;
	}
	return 0;
}

static int open_perf_events(struct session *s)
{
	struct perf_event_attr attr = {
		.type = PERF_TYPE_SOFTWARE,
		.size = sizeof(attr),
		.config = PERF_COUNT_SW_CPU_CLOCK,
		.sample_freq = s->o->freq,
		.freq = 1,
	};
	int opened = 0;

	s->ncpus = libbpf_num_possible_cpus();
	if (s->ncpus <= 0)
		return -EINVAL;
	s->pfds = calloc(s->ncpus, sizeof(*s->pfds));
	s->links = calloc(s->ncpus, sizeof(*s->links));
	if (!s->pfds || !s->links)
		return -ENOMEM;
	for (int cpu = 0; cpu < s->ncpus; cpu++) {
		int fd = syscall(__NR_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);

		s->pfds[cpu] = fd;
		if (fd < 0) {
			if (errno == ENODEV || errno == ENOENT)
				continue; /* offline CPU */
			if (errno == EACCES || errno == EPERM) {
				log_err("failed to open perf event on CPU %d: %s (%s)", cpu,
					strerror(errno), PERM_HINT);
				return -EPERM;
			}
			log_err("failed to open perf event on CPU %d: %s", cpu, strerror(errno));
			return -errno;
		}
		s->links[cpu] = bpf_program__attach_perf_event(s->skel->progs.on_sample, fd);
		if (!s->links[cpu]) {
			log_err("failed to attach BPF program to CPU %d: %s", cpu, strerror(errno));
			return -errno;
		}
		opened++;
	}
	return opened ? 0 : -ENODEV;
}

static uint64_t bpf_stat(struct session *s, int idx);

static uint64_t feature_bpf_stat(struct feature_ctx *f, int idx)
{
	return bpf_stat(f->session, idx);
}

static int feature_consume(struct feature_ctx *f)
{
	struct session *s = f->session;

	return s->rb ? ring_buffer__consume(s->rb) : 0;
}

static int features_configure(struct session *s)
{
	const struct feature *f;
	int err;

	s->fctx.o = s->o;
	s->fctx.p = s->p;
	s->fctx.skel = s->skel;
	s->fctx.ev = &s->ev;
	s->fctx.tracker = s->tracker;
	s->fctx.ncpus = libbpf_num_possible_cpus();
	s->fctx.bpf_stat = feature_bpf_stat;
	s->fctx.consume = feature_consume;
	s->fctx.session = s;
	for (size_t i = 0; (f = record_features[i]) != NULL && i < 16; i++) {
		uint64_t t0 = now_ns();

		if (!f->enabled(s->o))
			continue;
		s->fon[i] = true;
		err = f->configure ? f->configure(&s->fctx, &s->fstate[i]) : 0;
		if (err)
			return err;
		log_debug("%s: configure took %.1f ms", f->name, (now_ns() - t0) / 1e6);
	}
	return 0;
}

/*
 * The hash maps keyed by process or thread. Preallocated, they cost ~10 ms of every start-up
 * (65,536 entries of targets, py_threads... and a per-CPU value for each of metrics_procs'
 * 4,096) for a record of one process. Since Linux 6.1 every program type may use hash maps
 * that allocate on update (perf_event programs needed preallocated ones before): they keep
 * their bounds and allocate only what the targets fill. EPROF_PREALLOC_MAPS=1 keeps the
 * preallocation (the older kernels' way).
 */
static const char *const grown_maps[] = {
	"targets",	    "py_threads",	  "py_threads_fs",	  "mem_pend",
	"mem_mmap_len",	    "metrics_procs",	  "metrics_thread_net", "metrics_thread_exits",
};

static void size_maps(struct session *s)
{
	struct bpf_object *obj = s->skel->obj;
	const struct feature *f;
	bool grow = kernel_at_least(6, 1) && !getenv("EPROF_PREALLOC_MAPS");

	for (size_t i = 0; (f = record_features[i]) != NULL && i < 16; i++) {
		for (size_t j = 0; !s->fon[i] && f->maps && f->maps[j]; j++) {
			struct bpf_map *m = bpf_object__find_map_by_name(obj, f->maps[j]);

			if (m)
				bpf_map__set_max_entries(m, 1);
		}
	}
	for (size_t i = 0; grow && i < sizeof(grown_maps) / sizeof(grown_maps[0]); i++) {
		struct bpf_map *m = bpf_object__find_map_by_name(obj, grown_maps[i]);

		if (m)
			bpf_map__set_map_flags(m, bpf_map__map_flags(m) | BPF_F_NO_PREALLOC);
	}
}

static int load_bpf(struct session *s)
{
	struct profile_bpf *skel;
	uint64_t t0 = now_ns(), t1, t2;
	int err;

	skel = profile_bpf__open();
	if (!skel) {
		err = -errno;
		log_err("failed to open BPF object: %s", strerror(errno));
		return err;
	}
	s->skel = skel;
	skel->rodata->trace_all = s->o->all;
	skel->rodata->self_pid = getpid();
	skel->rodata->want_kernel = !s->o->no_kernel;
	skel->rodata->follow_forks = !s->o->no_children;
	skel->rodata->snapshot_bytes = s->o->callgraph == CG_FP ? 0 : s->o->snapshot_bytes;
	/* Early wakeup at a quarter full: the 50 ms poll timer handles the steady state. */
	skel->rodata->wakeup_bytes = ((uint64_t)s->o->ringbuf_mb << 20) / 4;
	bpf_map__set_max_entries(skel->maps.events, (uint32_t)s->o->ringbuf_mb << 20);
	bpf_map__set_max_entries(skel->maps.targets, 65536);
	bpf_map__set_max_entries(skel->maps.scratch, EPROF_SCRATCH_SLOTS * libbpf_num_possible_cpus());
	t1 = now_ns();
	err = features_configure(s);
	if (err)
		return err;
	size_maps(s);
	t2 = now_ns();
	err = profile_bpf__load(skel);
	if (err) {
		if (err == -EPERM || err == -EACCES)
			log_err("failed to load BPF programs: %s (%s)", strerror(-err), PERM_HINT);
		else
			log_err("failed to load BPF programs: %s (run with -vv for the verifier log)",
				strerror(-err));
		return err;
	}
	err = profile_bpf__attach(skel); /* the fork/exec/exit tracepoints */
	if (err) {
		log_err("failed to attach process tracepoints: %s", strerror(-err));
		return err;
	}
	log_debug("BPF: open %.1f ms, features' configure %.1f ms, load and attach %.1f ms",
		  (t1 - t0) / 1e6, (t2 - t1) / 1e6, (now_ns() - t2) / 1e6);
	return 0;
}

static int handle_rb(void *ctx, void *data, size_t size)
{
	struct session *s = ctx;

	return events_handle(&s->ev, data, size) == -ENOMEM ? -ENOMEM : 0;
}

static void on_target_exit(void *arg, uint32_t pid, int32_t status)
{
	struct session *s = arg;

	for (size_t i = 0; i < s->o->npids; i++) {
		if (s->o->pids[i] == pid && !s->pid_gone[i] && s->live_targets) {
			s->pid_gone[i] = 1;
			s->live_targets--;
			log_info("process %u exited", pid);
		}
	}
}

/*
 * Reading kallsyms costs ~35 ms of CPU: in the background from the first kernel frame
 * decoded, not at start-up (a record that has none never reads it).
 */
static void on_kernel_frames(void *arg)
{
	struct session *s = arg;

	symbolizer__preload_kernel(s->sym);
}

static int add_target(struct session *s, uint32_t pid, uint64_t t)
{
	uint8_t one = 1;
	int err;

	if (bpf_map__update_elem(s->skel->maps.targets, &pid, sizeof(pid), &one, 1, BPF_ANY))
		return -errno;
	events_read_proc_info(&s->ev, pid, t);
	err = proc_tracker__scan(s->tracker, pid, t);
	if (err == -ESRCH)
		bpf_map__delete_elem(s->skel->maps.targets, &pid, sizeof(pid), 0);
	return err;
}

static bool is_target(struct session *s, uint32_t pid)
{
	uint8_t v;

	return !bpf_map__lookup_elem(s->skel->maps.targets, &pid, sizeof(pid), &v, 1, 0);
}

/*
 * The descendants of the listed processes that run now (DataLoader workers, the ranks under
 * torchrun or mpirun). BPF follows the forks of a process from the moment it is a target, so
 * a look at /proc after a parent went in finds every child it forked before; a child that a
 * descendant forks between the look and its own insertion is found by the next look, hence
 * the passes until one finds nothing new.
 */
static int add_descendants(struct session *s, uint64_t t)
{
	size_t added = 0, found = 1;

	for (int pass = 0; pass < 8 && found; pass++) {
		uint32_t *d;
		size_t n;
		int err = proc_descendants(NULL, s->o->pids, s->o->npids, getpid(), &d, &n);

		if (err) {
			log_warn("failed to list the child processes of the targets: %s", strerror(-err));
			return err == -ENOMEM ? err : 0;
		}
		found = 0;
		for (size_t i = 0; i < n && !err; i++) {
			if (is_target(s, d[i]))
				continue;
			err = add_target(s, d[i], t);
			if (err == -ESRCH) {
				err = 0; /* exited meanwhile */
				continue;
			}
			found++;
		}
		free(d);
		if (err)
			return err;
		added += found;
	}
	if (added)
		log_info("also profiling %zu descendant processes of the targets", added);
	return 0;
}

/* Gone or a zombie (its parent has not reaped it yet). */
static bool pid_exited(uint32_t pid)
{
	char path[64], buf[256], *rp;
	ssize_t n;
	int fd;

	if (kill((pid_t)pid, 0) && errno == ESRCH)
		return true;
	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	rp = strrchr(buf, ')');
	return rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X');
}

/*
 * The exit of a -p target comes as an event in the ring, and a ring kept full by a
 * flood of events (--mem=1 on an allocation-heavy target) can drop it: the record would
 * then never stop. Once a second, a target that is gone counts as exited.
 */
static void check_targets_alive(struct session *s, uint64_t now)
{
	if (now < s->next_alive_check)
		return;
	s->next_alive_check = now + 1000000000ULL;
	for (size_t i = 0; i < s->o->npids; i++)
		if (!s->pid_gone[i] && pid_exited(s->o->pids[i]))
			on_target_exit(s, s->o->pids[i], 0);
}

static int add_targets(struct session *s)
{
	uint64_t t = now_ns();
	int err;

	for (size_t i = 0; i < s->o->npids; i++) {
		err = add_target(s, s->o->pids[i], t);
		if (err == -ESRCH) {
			log_err("no such process: %u", s->o->pids[i]);
			return -ESRCH;
		}
		if (err)
			return err;
	}
	s->live_targets = s->o->npids;
	if (s->o->npids && !s->o->no_children) {
		err = add_descendants(s, t);
		if (err)
			return err;
	}
	if (s->child) {
		uint32_t pid = s->child;
		uint8_t one = 1;

		if (bpf_map__update_elem(s->skel->maps.targets, &pid, sizeof(pid), &one, 1, BPF_ANY))
			return -errno;
	}
	return 0;
}

/*
 * Whether a process of the target set still runs once the listed ones are gone: their
 * children (found at attach or forked since). BPF drops a target when it exits; an entry for
 * a process that exited before it went in is dropped here.
 */
static bool children_alive(struct session *s)
{
	struct bpf_map *m = s->skel->maps.targets;
	uint32_t key, next, gone[64];
	size_t ngone = 0;
	bool alive = false;
	void *prev = NULL;

	while (!alive && !bpf_map__get_next_key(m, prev, &next, sizeof(next))) {
		key = next;
		prev = &key;
		if (!kill((pid_t)key, 0) || errno == EPERM)
			alive = true;
		else if (ngone < 64)
			gone[ngone++] = key;
	}
	for (size_t i = 0; i < ngone; i++)
		bpf_map__delete_elem(m, &gone[i], sizeof(gone[i]), 0);
	return alive;
}

static void set_start_meta(struct session *s, int argc_total, char **eprof_argv)
{
	struct utsname u;
	char buf[4096] = "", host[256] = "";
	size_t off = 0;

	if (s->o->argv) {
		for (char **a = s->o->argv; *a && off < sizeof(buf) - 2; a++)
			off += snprintf(buf + off, sizeof(buf) - off, "%s%s", off ? " " : "", *a);
	} else if (s->o->all) {
		snprintf(buf, sizeof(buf), "[system-wide]");
	} else {
		for (size_t i = 0; i < s->o->npids && off < sizeof(buf) - 16; i++) {
			struct process *pr = profile__proc(s->p, s->o->pids[i], false);

			off += snprintf(buf + off, sizeof(buf) - off, "%s%s", off ? "; " : "",
					pr && pr->cmdline ? profile__str(s->p, pr->cmdline) : "?");
		}
	}
	profile__set_meta(s->p, "command", buf);
	uname(&u);
	gethostname(host, sizeof(host) - 1);
	profile__set_meta(s->p, "hostname", host);
	profile__set_meta(s->p, "kernel", u.release);
	profile__set_meta(s->p, "arch", u.machine);
	profile__set_meta(s->p, "eprof_version", EPROF_VERSION);
	snprintf(buf, sizeof(buf), "%u", s->o->freq);
	profile__set_meta(s->p, "sample_rate", buf);
	snprintf(buf, sizeof(buf), "%d", s->ncpus);
	profile__set_meta(s->p, "ncpus", buf);
	profile__set_meta(s->p, "call_graph", s->o->callgraph == CG_FP ? "fp" : "dwarf");
	profile__set_meta(s->p, "target", s->o->all ? "system" : s->o->argv ? "launch" : "pid");
	snprintf(buf, sizeof(buf), "%" PRIu64, s->start_ns);
	profile__set_meta(s->p, "start_ns", buf);
	snprintf(buf, sizeof(buf), "%lld", (long long)time(NULL));
	profile__set_meta(s->p, "start_time", buf);
	job_meta(s->p, &s->job, &s->clock);
	(void)argc_total;
	(void)eprof_argv;
}

static uint64_t bpf_stat(struct session *s, int idx)
{
	uint64_t *vals = calloc(s->ncpus, sizeof(uint64_t)), sum = 0;
	uint32_t key = idx;

	if (!vals)
		return 0;
	if (!bpf_map__lookup_elem(s->skel->maps.stats, &key, sizeof(key), vals,
				  s->ncpus * sizeof(uint64_t), 0))
		for (int i = 0; i < s->ncpus; i++)
			sum += vals[i];
	free(vals);
	return sum;
}

static void collect_bpf_stats(struct session *s)
{
	struct profile *p = s->p;

	p->stats[STAT_SAMPLES_LOST] = bpf_stat(s, BSTAT_RB_FULL);
	p->stats[STAT_EVENTS_LOST] = bpf_stat(s, BSTAT_EVENT_RB_FULL) + bpf_stat(s, BSTAT_TARGETS_FULL);
	/* Stack errors are counted per sample in userspace too; BPF's count covers dropped ones. */
	if (bpf_stat(s, BSTAT_SNAP_FAULT) > p->stats[STAT_USTACK_ERR])
		p->stats[STAT_USTACK_ERR] = bpf_stat(s, BSTAT_SNAP_FAULT);
}

static void show_status(struct session *s, uint64_t t)
{
	fprintf(stderr, "\r\033[K[eprof] %.1f s  %" PRIu64 " samples  %" PRIu64 " lost",
		(t - s->start_ns) / 1e9, s->ev.samples, s->lost_shown);
	fflush(stderr);
}

static bool check_child(struct session *s)
{
	siginfo_t si = { 0 };
	struct rusage ru = { 0 };
	const struct feature *f;
	int status;

	if (!s->child || s->child_done)
		return false;
	/*
	 * Exited but not reaped: the features read its final figures from /proc first (the
	 * raw waitid also gives its peak RSS, which /proc no longer has).
	 */
	if (syscall(SYS_waitid, P_PID, s->child, &si, WEXITED | WNOHANG | WNOWAIT, &ru) ||
	    si.si_pid != s->child)
		return false;
	FOR_EACH_FEATURE(s, i, f)
		if (f->child_exit)
			f->child_exit(&s->fctx, s->fstate[i], s->child, now_ns(), &ru);
	if (waitpid(s->child, &status, WNOHANG) != s->child)
		return false;
	s->child_done = true;
	s->child_status = status;
	return true;
}

/*
 * Drops are counted in BPF, not timestamped: at each flush the drops since the
 * previous one become an EVK_LOST event, so the timeline shows where data is
 * missing to within the flush interval (FLUSH_NS).
 */
static void note_losses(struct session *s)
{
	uint64_t t = now_ns(), lost = bpf_stat(s, BSTAT_RB_FULL);
	uint64_t evlost = bpf_stat(s, BSTAT_EVENT_RB_FULL);
	struct event e = { 0 };

	if (lost > s->lost_noted || evlost > s->evlost_noted) {
		e.kind = EVK_LOST;
		e.ts = t;
		e.dur = s->lost_noted_ts ? t - s->lost_noted_ts : t - s->start_ns;
		ev_set_lost(&e, lost - s->lost_noted, evlost - s->evlost_noted);
		profile__add_event(s->p, &e);
	}
	s->lost_noted = lost;
	s->evlost_noted = evlost;
	s->lost_noted_ts = t;
}

static int flush(struct session *s)
{
	int err;

	note_losses(s);
	err = eprof_writer__flush(s->w, s->p);

	if (err) {
		/* One line per failure, however many flushes meet it (disk full). */
		if (!s->write_err)
			log_err("failed to write '%s': %s", s->out_path, strerror(-err));
		s->write_err = err;
		return err;
	}
	eprof_writer__forget_samples(s->w, s->p);
	eprof_writer__forget_events(s->w, s->p);
	eprof_writer__forget_mappings(s->w, s->p);
	/*
	 * A workload whose stacks never stop changing (-a on a build machine) would grow
	 * the stack trie and its index without end: past this many nodes, start afresh.
	 */
	if (s->p->stacks.n > STACK_EPOCH_NODES && profile__forget_stacks(s->p))
		return -ENOMEM;
	/* Processes gone for a while: their last samples have been read and written. */
	proc_tracker__gc(s->tracker, now_ns());
	if (eprof_writer__forget_exited(s->w, s->p, now_ns() - 5000000000ULL) < 0)
		return -ENOMEM;
	return 0;
}

/* One step: waits up to POLL_MS for samples, reads them. 1 when the session should stop. */
static int poll_step(struct session *s)
{
	int err = ring_buffer__poll(s->rb, POLL_MS);

	if (err == -EINTR)
		err = 0;
	/* Samples come without wakeups: the poll timing out is the cue to read them. */
	if (err >= 0)
		err = ring_buffer__consume(s->rb);
	if (err < 0) {
		log_err("failed to read the ring buffer: %s", strerror(-err));
		return err;
	}
	proc_tracker__poll(s->tracker);
	if (stop_signal) {
		s->stop_reason = stop_signal == SIGINT ? "interrupted" : "terminated";
		return 1;
	}
	if (check_child(s)) {
		s->stop_reason = "command exited";
		return 1;
	}
	if (s->o->npids && s->live_targets)
		check_targets_alive(s, now_ns());
	if (s->o->npids && !s->live_targets) {
		if (!children_alive(s)) {
			s->stop_reason = "all target processes exited";
			return 1;
		}
		if (!s->children_noted) {
			log_info("the targets exited; recording their children until they exit");
			s->children_noted = true;
		}
	}
	return 0;
}

/* The features' timers: new targets' interpreters, libraries, RSS ... */
static int poll_features(struct session *s, uint64_t t)
{
	const struct feature *f;
	int err;

	mapwatch_poll(s->mw);
	FOR_EACH_FEATURE(s, i, f)
	{
		err = f->poll ? f->poll(&s->fctx, s->fstate[i], t) : 0;
		if (err)
			return err;
	}
	return 0;
}

static int run_loop(struct session *s)
{
	uint64_t last_flush = now_ns(), last_status = 0, end = 0;
	int err = 0;

	if (s->o->duration)
		end = s->start_ns + (uint64_t)(s->o->duration * 1e9);
	for (;;) {
		uint64_t t;

		err = poll_step(s);
		if (err < 0)
			return err;
		if (err)
			break;
		t = now_ns();
		err = poll_features(s, t);
		if (err)
			return err;
		if (end && t >= end) {
			s->stop_reason = "duration reached";
			break;
		}
		if (t - last_flush >= FLUSH_NS || s->p->samples.n > 100000 ||
		    s->p->events.n > 100000) {
			err = flush(s);
			if (err)
				return err;
			last_flush = t;
		}
		if (s->status_line && t - last_status > 500000000ULL) {
			s->lost_shown = bpf_stat(s, BSTAT_RB_FULL);
			show_status(s, t);
			last_status = t;
		}
	}
	return 0;
}

static void detach(struct session *s)
{
	for (int i = 0; s->links && i < s->ncpus; i++) {
		bpf_link__destroy(s->links[i]);
		s->links[i] = NULL;
	}
	for (int i = 0; s->pfds && i < s->ncpus; i++) {
		if (s->pfds[i] >= 0)
			close(s->pfds[i]);
		s->pfds[i] = -1;
	}
}

static const char *tracker_path(void *ctx, uint32_t obj)
{
	return proc_tracker__object_path(ctx, obj);
}

static int finish(struct session *s)
{
	struct symbolize_stats st;
	const struct feature *f;
	char buf[64];
	int err;

	/* Samples still in the ring buffer after detach belong to the record. */
	ring_buffer__consume(s->rb);
	collect_bpf_stats(s);
	FOR_EACH_FEATURE(s, i, f)
	{
		err = f->finish ? f->finish(&s->fctx, s->fstate[i]) : 0;
		if (err)
			return err;
	}
	if (!s->stop_ns) /* an error before the loop ended it */
		s->stop_ns = now_ns();
	snprintf(buf, sizeof(buf), "%" PRIu64, s->stop_ns);
	profile__set_meta(s->p, "end_ns", buf);
	profile__set_meta(s->p, "stop_reason", s->stop_reason ? s->stop_reason : "");
	err = flush(s);
	if (err)
		return err;
	{
		size_t cfi_bytes;
		uint64_t evictions;

		proc_tracker__cfi_stats(s->tracker, &cfi_bytes, &evictions);
		log_info("recorder: %.2f s decoding %" PRIu64 " samples, %.2f s for %" PRIu64
			 " feature events, %.2f s for %" PRIu64 " process events",
			 s->ev.decode_ns[EV_COST_SAMPLE] / 1e9, s->ev.decoded[EV_COST_SAMPLE],
			 s->ev.decode_ns[EV_COST_FEATURE] / 1e9, s->ev.decoded[EV_COST_FEATURE],
			 s->ev.decode_ns[EV_COST_PROC] / 1e9, s->ev.decoded[EV_COST_PROC]);
		if (s->mw) {
			struct mapwatch_stats ms;

			mapwatch_stats(s->mw, &ms);
			log_debug("mapping events: %" PRIu64 " read, %" PRIu64 " resets",
				  ms.records, ms.resets);
		}
		log_debug("unwind tables: %.1f MB held, %" PRIu64 " dropped to stay in budget; "
			  "%" PRIu64 " stack nodes, %zu locations",
			  cfi_bytes / 1048576.0, evictions, profile__stacks_end(s->p),
			  s->p->locations.n);
		/* Nothing is unwound after this point. */
		proc_tracker__drop_cfi(s->tracker);
	}
	err = symbolize_profile_src(s->p, s->sym, &(const struct symbolize_src){ tracker_path,
			proc_tracker__mapping_start, s->tracker }, &st);
	log_debug("symbolized %" PRIu64 " locations (%" PRIu64 " unnamed)", st.locations, st.unknown);
	if (bidcache_enabled()) {
		struct bidcache_counters bc;

		bidcache_counters(&bc);
		log_info("cache: %" PRIu64 " hits, %" PRIu64 " misses, %" PRIu64
			 " refused, %" PRIu64 " stored, %" PRIu64 " evicted (%s)",
			 bc.hits, bc.misses, bc.refused, bc.stored, bc.evicted, bidcache_path());
	}
	if (err)
		return err;
	s->p->stats[STAT_UNKNOWN_FRAMES] = st.unknown;
	err = eprof_writer__finish(s->w, s->p);
	s->w = NULL;
	if (err && !s->write_err)
		log_err("failed to finish '%s': %s", s->out_path, strerror(-err));
	return err;
}

static void session_free(struct session *s)
{
	const struct feature *f;

	detach(s);
	FOR_EACH_FEATURE(s, i, f)
	{
		if (f->destroy)
			f->destroy(&s->fctx, s->fstate[i]);
		s->fon[i] = false;
	}
	ring_buffer__free(s->rb);
	mapwatch_close(s->mw);
	profile_bpf__destroy(s->skel);
	free(s->links);
	free(s->pfds);
	proc_tracker__free(s->tracker);
	symbolizer__free(s->sym);
	if (s->w)
		eprof_writer__abort(s->w);
	profile__free(s->p);
}

static int open_output(struct session *s);

static int setup(struct session *s)
{
	struct tracker_opts to = { .want_cfi = s->o->callgraph != CG_FP };
	/* A live view must not wait on DWARF line tables or the network. */
	struct symbolizer_opts so = { .want_lines = !s->o->live, .use_debuginfod = !s->o->live };
	int err;

	bidcache_setup(!s->o->no_cache, NULL, 0);
	so.use_cache = bidcache_enabled();

	err = check_environment();
	if (err)
		return err;
	err = check_pids(s->o);
	if (err)
		return err;
	s->p = profile__new();
	s->sym = symbolizer__new(&so);
	if (!s->p || !s->sym)
		return -ENOMEM;
	s->tracker = proc_tracker__new(s->p, &to);
	if (!s->tracker)
		return -ENOMEM;
	err = events_init(&s->ev, s->p, s->tracker, s->o->callgraph);
	if (err)
		return err;
	s->ev.on_exit = on_target_exit;
	if (!s->o->no_kernel)
		s->ev.on_kernel_frames = on_kernel_frames;
	s->ev.arg = s;
	/* The output first: an unwritable path fails before anything is attached. */
	err = open_output(s);
	if (err)
		return err;
	libbpf_set_print(libbpf_print);
	return load_bpf(s);
}

/*
 * The output file: -o with %r, %h... expanded. A file another recorder is writing (ranks
 * launched with one literal -o) is left to it: this record goes to FILE.PID instead.
 */
static int open_output(struct session *s)
{
	int err;

	job_info_read(&s->job);
	job_clock_pair(&s->clock);
	if (!s->o->output)
		return 0;
	err = job_output_path(s->o->output, &s->job, s->out_path, sizeof(s->out_path));
	if (err)
		return err;
	s->w = eprof_writer__open(s->out_path);
	if (!s->w && errno == EBUSY) {
		char busy[PATH_MAX];

		snprintf(busy, sizeof(busy), "%s", s->out_path);
		if ((size_t)snprintf(s->out_path, sizeof(s->out_path), "%s.%d", busy, (int)getpid()) <
		    sizeof(s->out_path))
			s->w = eprof_writer__open(s->out_path);
		if (s->w)
			log_warn("'%s' is being written by another eprof record (use -o with %%r or "
				 "%%p for one file per rank): this record goes to '%s'",
				 busy, s->out_path);
	}
	if (!s->w) {
		err = -errno;
		log_err("failed to create output '%s': %s", s->out_path, strerror(errno));
		return err;
	}
	return 0;
}

/*
 * Before the features' first look at the targets' maps, so that nothing mapped after it is
 * missed. Without it (EPROF_MAPWATCH=0, or perf refuses the dummy events) the features
 * re-read the maps on their timers.
 */
static void open_mapwatch(struct session *s)
{
	const char *env = getenv("EPROF_MAPWATCH");
	int n = libbpf_num_possible_cpus();

	if ((env && !strcmp(env, "0")) || n <= 0)
		return;
	s->mw = mapwatch_open(n, 8);
	if (!s->mw)
		log_debug("no mapping events (%s): rescanning maps on timers", strerror(errno));
	s->fctx.maps = s->mw;
}

static int attach(struct session *s)
{
	int err;

	s->rb = ring_buffer__new(bpf_map__fd(s->skel->maps.events), handle_rb, s, NULL);
	if (!s->rb)
		return -errno;
	if (s->o->argv) {
		err = launch_prepare(s);
		if (err) {
			log_err("failed to start '%s': %s", s->o->argv[0], strerror(-err));
			return err;
		}
	}
	err = add_targets(s);
	if (err)
		return err;
	s->fctx.child = s->child;
	s->fctx.start_ns = now_ns();
	open_mapwatch(s);
	{
		const struct feature *f;

		FOR_EACH_FEATURE(s, i, f)
		{
			err = f->attach ? f->attach(&s->fctx, s->fstate[i]) : 0;
			if (err)
				return err;
		}
	}
	err = open_perf_events(s);
	if (err)
		return err;
	s->start_ns = now_ns();
	set_start_meta(s, 0, NULL);
	if (s->child) {
		err = launch_release(s);
		if (err)
			return err;
		events_read_proc_info(&s->ev, s->child, s->start_ns);
	}
	return 0;
}

static void print_summary(struct session *s)
{
	const struct profile *p = s->p;

	if (s->status_line)
		fprintf(stderr, "\r\033[K");
	if (s->o->quiet)
		return;
	fprintf(stderr,
		"eprof: %" PRIu64 " samples in %.2f s (%s), %" PRIu64 " lost, written to %s\n",
		s->ev.samples, (s->stop_ns - s->start_ns) / 1e9,
		s->stop_reason ? s->stop_reason : "stopped", p->stats[STAT_SAMPLES_LOST],
		s->out_path);
}

static int exit_status(struct session *s, int err)
{
	if (err)
		return 1;
	if (s->child && s->child_done) {
		if (WIFEXITED(s->child_status))
			return WEXITSTATUS(s->child_status);
		if (WIFSIGNALED(s->child_status))
			return 128 + WTERMSIG(s->child_status);
	}
	if (stop_signal && s->child && !s->child_done)
		return 128 + stop_signal;
	return 0;
}

static void reap_child(struct session *s)
{
	/* After Ctrl-C the command got the signal too: give it a moment, never kill it. */
	for (int i = 0; i < 50 && s->child && !s->child_done; i++) {
		if (check_child(s))
			break;
		usleep(10000);
	}
	if (s->child && !s->child_done && !stop_signal && s->stop_reason &&
	    !strcmp(s->stop_reason, "duration reached")) {
		/* -d on a launched command: the command ends with the record, as with timeout(1). */
		kill(s->child, SIGTERM);
		for (int i = 0; i < 300 && !check_child(s); i++)
			usleep(10000);
		if (!s->child_done)
			log_warn("'%s' (pid %d) ignored SIGTERM; not waiting for it", s->o->argv[0],
				 (int)s->child);
		return;
	}
	if (s->child && !s->child_done && stop_signal)
		log_warn("'%s' (pid %d) is still running; not waiting for it", s->o->argv[0],
			 (int)s->child);
}

static void install_signals(const struct record_opts *o)
{
	struct sigaction sa = { .sa_handler = on_signal };
	struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };

	log_set_level(o->verbose >= 2 ? LOG_DEBUG : o->verbose ? LOG_INFO : LOG_WARN);
	setrlimit(RLIMIT_MEMLOCK, &rl);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	sa.sa_handler = on_sigchld; /* no SA_RESTART: the poll returns EINTR */
	sigaction(SIGCHLD, &sa, NULL);
}

int record_run(const struct record_opts *o)
{
	struct session s = { .o = o, .go_pipe = -1, .err_pipe = -1 };
	uint64_t t0;
	int err;

	install_signals(o);
	s.status_line = !o->quiet && isatty(STDERR_FILENO);
	t0 = now_ns();
	err = setup(&s);
	log_debug("setup (BPF load) took %.1f ms", (now_ns() - t0) / 1e6);
	if (!err) {
		t0 = now_ns();
		err = attach(&s);
		/* -v: the point from which the targets are recorded (scripts and tests wait on it) */
		if (!err)
			log_info("attach took %.1f ms: recording", (now_ns() - t0) / 1e6);
	}
	if (!err)
		err = run_loop(&s);
	if (!err || (s.w && s.start_ns)) {
		int ferr;

		detach(&s);
		/*
		 * The recording's end: when sampling stopped, not after the features' finish
		 * (ending a launched command, a CUPTI flush), which took 0.7 s on a loaded
		 * machine and made `-d 1` a 1.7 s recording in the report.
		 */
		s.stop_ns = now_ns();
		t0 = now_ns();
		ferr = finish(&s);
		log_debug("finish (drain, symbolize, write) took %.1f ms", (now_ns() - t0) / 1e6);
		err = err ? err : ferr;
		if (!ferr)
			print_summary(&s);
	}
	if (err && !s.start_ns && s.w) {
		/* Nothing was recorded: leave no empty file behind. */
		eprof_writer__abort(s.w);
		s.w = NULL;
		unlink(s.out_path);
	}
	if (s.child && !s.child_done && s.go_pipe >= 0) {
		/* Never released: the command must not run unprofiled. */
		kill(s.child, SIGKILL);
		waitpid(s.child, NULL, 0);
		s.child = 0;
	}
	reap_child(&s);
	err = exit_status(&s, err);
	session_free(&s);
	return err;
}

/* --- live sessions (eprof top): the same setup and attach, no output file ------------------ */

int live_open(const struct record_opts *o, struct session **out)
{
	struct session *s = calloc(1, sizeof(*s));
	int err;

	if (!s)
		return -ENOMEM;
	s->o = o;
	s->go_pipe = s->err_pipe = -1;
	install_signals(o);
	err = setup(s);
	if (!err)
		err = attach(s);
	if (err) {
		live_close(s);
		return err;
	}
	*out = s;
	return 0;
}

int live_poll(struct session *s)
{
	int err;

	/* top reads samples only: mapping rows and the maps of long-gone processes can go. */
	s->p->mappings.n = 0;
	proc_tracker__gc(s->tracker, now_ns());
	err = poll_step(s);
	/* As in a record: Python's thread states, CUDA libraries mapped since the attach ... */
	if (!err) {
		int ferr = poll_features(s, now_ns());

		if (ferr)
			return ferr;
	}
	return err;
}

struct profile *live_profile(struct session *s)
{
	return s->p;
}

int live_symbolize(struct session *s)
{
	struct symbolize_stats st;

	return symbolize_profile_src(s->p, s->sym, &(const struct symbolize_src){ tracker_path,
			proc_tracker__mapping_start, s->tracker }, &st);
}

void live_stats(struct session *s, struct live_stats *st)
{
	st->samples = s->ev.samples;
	st->lost = bpf_stat(s, BSTAT_RB_FULL);
	st->start_ns = s->start_ns;
	st->now_ns = now_ns();
	st->ncpus = s->ncpus;
	st->stop_reason = s->stop_reason;
}

void live_close(struct session *s)
{
	if (!s)
		return;
	session_free(s);
	free(s);
}
