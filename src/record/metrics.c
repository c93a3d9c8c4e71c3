// SPDX-License-Identifier: MIT
/*
 * Resource metrics beside the profile (docs/metrics.md): every --metrics-interval (100 ms by
 * default), per target process, CPU user/system time, minor/major faults and the thread count
 * (/proc/PID/stat, summed over threads by the kernel), RSS anonymous/file/shmem and its peak
 * (/proc/PID/status), syscall and block-layer I/O bytes (/proc/PID/io), and from BPF
 * (bpf/metrics.bpf.h) context switches and network bytes; machine-wide, RAPL energy
 * (powercap) and NVML GPU figures (nvml.c). Each reading is an EVK_COUNTER event named as in
 * src/model/metrics.h, written when its value changed since the last one written, and once
 * more at the end of the record, so a series is a step function of time.
 *
 * Per thread (not under -a), the task's own counters: CPU, faults, context switches, I/O
 * bytes, and socket bytes, read every interval by a BPF task iterator over each target
 * process's threads (one read() per process, no /proc file per thread), and a thread's last
 * figures from the exit tracepoint.
 *
 * -a follows the busiest processes only (find_busy): per-process /proc reads for every
 * process of the machine ten times a second would cost more than the profile.
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <linux/perf_event.h>
#include <linux/types.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include "model/event.h"
#include "model/metrics.h"
#include "eprof_abi.h"
#include "util/hmap.h"
#include "util/log.h"
#include "util/vec.h"
#include "profile.skel.h"
#include "events.h"
#include "feature.h"
#include "kbtf.h"
#include "nvml.h"
#include "record.h"

#define METRICS_DEFAULT_MS 100
#define RAPL_MAX_ZONES 16
/* -a: the busiest processes followed (by CPU samples), at most this many alive at once */
#define METRICS_SYSTEM_PROCS 32

struct mproc {
	uint32_t pid;
	int fd_stat, fd_status, fd_io;
	struct bpf_link *iter; /* its threads' figures (metrics_threads), NULL without */
	bool written;		    /* something written for it */
	uint64_t v[MET_PROC_COUNT]; /* the last reading */
	uint64_t w[MET_PROC_COUNT]; /* the last value written */
	uint64_t wts[MET_PROC_COUNT]; /* when */
	uint64_t last_read;	      /* the last reading's time */
	uint32_t have; /* bit per source read: 1 stat, 2 status, 4 io, 8 bpf, 16 rusage */
	uint64_t born; /* started during the record: when (CLOCK_MONOTONIC), else 0 */
	uint32_t ppid;
	bool gone;
	/*
	 * /proc/PID/io also counts the children the process has reaped (wait() adds theirs to
	 * the parent's): raw is what the file said, sub what reaped targets brought with them,
	 * and v holds raw - sub, the process's own bytes.
	 */
	uint64_t raw_io[4], sub_io[4];
};

/* A thread seen by the iterator or the exit tracepoint. */
struct mthread {
	uint32_t pid, tid;
	bool written, dead;
	char comm[16];		  /* its name as last seen (a thread names itself after it starts) */
	struct cpu_split cpu;	  /* CPU split so far (cpu_split_update) */
	uint64_t w[MET_T_COUNT]; /* the last values written */
	uint64_t wts[MET_T_COUNT], last_read; /* when, and the last reading's time */
};

struct rapl_zone {
	int fd;
	double scale; /* perf power events: Joules per count; 0: a powercap energy_uj file */
	uint64_t last, range, total; /* total: uJ since the start, wraps undone */
	uint64_t written;
};

struct metrics_state {
	uint64_t interval_ns, last;
	uint32_t names[MET_COUNT];
	struct mproc *procs;
	size_t nprocs, capprocs;
	bool bpf; /* the BPF counters are loaded */
	int map_fd;
	int ncpus;
	struct metrics_proc *percpu; /* ncpus values of one key */
	double ns_per_tick;
	int64_t boot_off; /* CLOCK_BOOTTIME - CLOCK_MONOTONIC: /proc start times are on the first */
	uint64_t page;
	struct rapl_zone rapl[RAPL_MAX_ZONES];
	size_t nrapl;
	/*
	 * The launched command's VmHWM before its exec: eprof's own footprint, copied by the
	 * fork, which the kernel keeps in the peak it reports at exit (ru_maxrss).
	 */
	uint64_t child_pre_hwm;
	struct nvml *nvml;
	uint64_t cpu_ns; /* the recorder thread's CPU time in the readings (meta metrics_cpu_ns) */
	uint64_t *gpu_written; /* per device x MET_COUNT */
	unsigned ngpus;
	size_t seen; /* -a: the CPU samples already counted for the busiest processes */
	uint32_t *busy; /* -a: scratch, the pids of the samples of one interval */
	size_t capbusy;
	/* per thread */
	bool threads;		    /* the iterator and the exit copy are loaded */
	bool iter_all;		    /* the kernel has no per-process task iterator: one for all */
	struct bpf_link *iter_any; /* that one */
	int exits_fd;
	struct mthread *thr;
	size_t nthr, capthr;
	struct hmap *thr_index; /* pid, tid -> thr index + 1 */
	char *ibuf;		/* iterator output */
	size_t capibuf;
};

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static bool metrics_enabled(const struct record_opts *o)
{
	return !o->no_metrics;
}

/* The network tracepoints came in Linux 6.3: without them, no network bytes (meta says). */
static void configure_bpf(struct feature_ctx *f, struct metrics_state *st)
{
	static const char *const tps[] = { "btf_trace_sock_send_length",
					   "btf_trace_sock_recv_length" };
	bool have[2];
	bool net = !kbtf_has_names(KBTF_VMLINUX, tps, 2, have) && have[0] && have[1];

	bpf_program__set_autoload(f->skel->progs.metrics_switch, true);
	/* per thread: the task iterator is attached per process (thread_iter_open), not here */
	bpf_program__set_autoload(f->skel->progs.metrics_threads, true);
	bpf_program__set_autoattach(f->skel->progs.metrics_threads, false);
	f->skel->rodata->metrics_threads_on = true;
	st->threads = true;
	bpf_program__set_autoload(f->skel->progs.metrics_send, net);
	bpf_program__set_autoload(f->skel->progs.metrics_recv, net);
	if (!net)
		log_info("metrics: no sock_send_length tracepoint (Linux < 6.3): no network bytes");
	profile__set_meta(f->p, "metrics_net", net ? "sock_length_tracepoints" : "none");
	st->bpf = true;
}

static int metrics_configure(struct feature_ctx *f, void **state)
{
	struct metrics_state *st = calloc(1, sizeof(*st));
	char buf[32];

	if (!st)
		return -ENOMEM;
	*state = st;
	st->interval_ns =
	    (uint64_t)(f->o->metrics_interval_ms ? f->o->metrics_interval_ms : METRICS_DEFAULT_MS) *
	    1000000ULL;
	st->map_fd = -1;
	st->exits_fd = -1;
	st->ns_per_tick = 1e9 / (double)sysconf(_SC_CLK_TCK);
	st->page = (uint64_t)sysconf(_SC_PAGESIZE);
	st->boot_off = (int64_t)(clock_ns(CLOCK_BOOTTIME) - clock_ns(CLOCK_MONOTONIC));
	for (int i = 0; i < MET_COUNT; i++) {
		st->names[i] = profile__intern(f->p, metric_defs[i].name);
		if (!st->names[i])
			return -ENOMEM;
	}
	if (!f->o->all)
		configure_bpf(f, st);
	snprintf(buf, sizeof(buf), "%" PRIu64, st->interval_ns / 1000000);
	profile__set_meta(f->p, "metrics_interval_ms", buf);
	profile__set_meta(f->p, "metrics_scope", f->o->all ? "system" : "process");
	/* a running total's flat steps are closed by a reading (write_proc): readers spread
	 * its growth over the whole time between two readings */
	profile__set_meta(f->p, "metrics_steps", "closed");
	if (f->o->all) {
		snprintf(buf, sizeof(buf), "%d", METRICS_SYSTEM_PROCS);
		profile__set_meta(f->p, "metrics_system_procs", buf);
	}
	return 0;
}

/* --- RAPL through powercap --- */

static int read_u64_at(int dirfd, const char *name, uint64_t *v)
{
	char buf[64];
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = '\0';
	*v = strtoull(buf, NULL, 10);
	return 0;
}

static int read_fd_u64(int fd, uint64_t *v)
{
	char buf[64];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);

	if (n <= 0)
		return -EIO;
	buf[n] = '\0';
	*v = strtoull(buf, NULL, 10);
	return 0;
}

static int read_zone(struct rapl_zone *z, uint64_t *v)
{
	uint64_t count;

	if (!z->scale)
		return read_fd_u64(z->fd, v);
	if (read(z->fd, &count, sizeof(count)) != sizeof(count))
		return -EIO;
	*v = (uint64_t)((double)count * z->scale * 1e6);
	return 0;
}

/*
 * The RAPL counters as perf events of the "power" PMU (energy-pkg, energy-ram, energy-psys
 * ...), one per package on the CPUs of its cpumask: where powercap is not there (or not
 * readable). Some VMs expose the PMU and count nothing; the report then says so.
 */
static bool perf_power_open(struct feature_ctx *f, struct metrics_state *st)
{
	const char *dir = "/sys/bus/event_source/devices/power";
	char path[512], buf[256];
	uint64_t type;
	struct dirent *de;
	int cpus[8], ncpus = 0;
	DIR *d;
	FILE *fp;

	snprintf(path, sizeof(path), "%s/type", dir);
	fp = fopen(path, "re");
	if (!fp || fscanf(fp, "%" SCNu64, &type) != 1) {
		if (fp)
			fclose(fp);
		return false;
	}
	fclose(fp);
	snprintf(path, sizeof(path), "%s/cpumask", dir);
	fp = fopen(path, "re");
	if (fp && fgets(buf, sizeof(buf), fp)) {
		for (char *tok = strtok(buf, ",\n"); tok && ncpus < 8; tok = strtok(NULL, ",\n"))
			cpus[ncpus++] = atoi(tok);
	}
	if (fp)
		fclose(fp);
	snprintf(path, sizeof(path), "%s/events", dir);
	d = opendir(path);
	while (d && (de = readdir(d)) && ncpus) {
		struct perf_event_attr attr = {.size = sizeof(attr)};
		unsigned config;
		double scale = 0;

		if (strncmp(de->d_name, "energy-", 7) || strchr(de->d_name, '.'))
			continue;
		snprintf(path, sizeof(path), "%s/events/%s", dir, de->d_name);
		fp = fopen(path, "re");
		if (!fp || fscanf(fp, "event=%x", &config) != 1) {
			if (fp)
				fclose(fp);
			continue;
		}
		fclose(fp);
		snprintf(path, sizeof(path), "%s/events/%s.scale", dir, de->d_name);
		fp = fopen(path, "re");
		if (!fp || fscanf(fp, "%lf", &scale) != 1 || scale <= 0) {
			if (fp)
				fclose(fp);
			continue;
		}
		fclose(fp);
		attr.type = (uint32_t)type;
		attr.config = config;
		for (int c = 0; c < ncpus && st->nrapl < RAPL_MAX_ZONES; c++) {
			struct rapl_zone *z = &st->rapl[st->nrapl];
			char key[32];

			z->fd = (int)syscall(SYS_perf_event_open, &attr, -1, cpus[c], -1,
					     PERF_FLAG_FD_CLOEXEC);
			z->scale = scale;
			if (z->fd < 0 || read_zone(z, &z->last)) {
				log_debug("metrics: perf power event %s not readable", de->d_name);
				if (z->fd >= 0)
					close(z->fd);
				continue;
			}
			snprintf(key, sizeof(key), "energy_zone_%zu", st->nrapl);
			snprintf(path, sizeof(path), "%s perf:power/%s/ cpu%d", de->d_name + 7,
				 de->d_name, cpus[c]);
			profile__set_meta(f->p, key, path);
			z->written = UINT64_MAX;
			st->nrapl++;
		}
	}
	if (d)
		closedir(d);
	if (!st->nrapl)
		return false;
	profile__set_meta(f->p, "energy_source", "rapl-perf");
	log_info("metrics: %zu RAPL energy counters (perf power events)", st->nrapl);
	return true;
}

static int zone_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/*
 * The RAPL zones of powercap (intel-rapl:N packages, intel-rapl:N:M their sub-zones such as
 * dram), whose energy_uj counters are readable. EPROF_POWERCAP_DIR points elsewhere (tests).
 */
static void rapl_open(struct feature_ctx *f, struct metrics_state *st)
{
	const char *root = getenv("EPROF_POWERCAP_DIR") ?: "/sys/class/powercap";
	char *names[64];
	size_t n = 0;
	struct dirent *de;
	DIR *d = opendir(root);

	if (!d) {
		if (!getenv("EPROF_POWERCAP_DIR") && perf_power_open(f, st))
			return;
		profile__set_meta(f->p, "energy_source", "none");
		return;
	}
	while ((de = readdir(d)) && n < 64)
		if (!strncmp(de->d_name, "intel-rapl:", 11))
			names[n++] = strdup(de->d_name);
	closedir(d);
	qsort(names, n, sizeof(*names), zone_cmp);
	for (size_t i = 0; i < n; i++) {
		char path[512], key[32], zname[64] = "";
		struct rapl_zone *z = &st->rapl[st->nrapl];
		int dfd;
		FILE *fp;

		if (!names[i] || st->nrapl == RAPL_MAX_ZONES)
			continue;
		snprintf(path, sizeof(path), "%s/%s", root, names[i]);
		dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd < 0)
			continue;
		z->fd = openat(dfd, "energy_uj", O_RDONLY | O_CLOEXEC);
		if (z->fd < 0 || read_fd_u64(z->fd, &z->last)) {
			log_debug("metrics: %s/energy_uj not readable", path);
			if (z->fd >= 0)
				close(z->fd);
			close(dfd);
			continue;
		}
		if (read_u64_at(dfd, "max_energy_range_uj", &z->range))
			z->range = 0;
		snprintf(path, sizeof(path), "%s/%s/name", root, names[i]);
		fp = fopen(path, "re");
		if (fp) {
			if (fgets(zname, sizeof(zname), fp))
				zname[strcspn(zname, "\n")] = '\0';
			fclose(fp);
		}
		close(dfd);
		snprintf(key, sizeof(key), "energy_zone_%zu", st->nrapl);
		/* "package-0 intel-rapl:0": the kind of zone, then where it is */
		snprintf(path, sizeof(path), "%s %s", zname[0] ? zname : "unknown", names[i]);
		profile__set_meta(f->p, key, path);
		z->written = UINT64_MAX;
		st->nrapl++;
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	if (st->nrapl) {
		profile__set_meta(f->p, "energy_source", "rapl-powercap");
		log_info("metrics: %zu RAPL energy zones", st->nrapl);
	} else if (getenv("EPROF_POWERCAP_DIR") || !perf_power_open(f, st)) {
		profile__set_meta(f->p, "energy_source", "none");
	}
}

static void emit(struct feature_ctx *f, struct metrics_state *st, uint64_t now, uint32_t pid,
		 uint32_t index, int m, uint64_t v)
{
	struct event ev = {0};

	ev.ts = now;
	ev.kind = EVK_COUNTER;
	ev.pid = pid;
	ev.name = st->names[m];
	ev_set_counter_at(&ev, index, v);
	profile__add_event(f->p, &ev);
}

static void rapl_read(struct feature_ctx *f, struct metrics_state *st, uint64_t now, bool last)
{
	for (size_t i = 0; i < st->nrapl; i++) {
		struct rapl_zone *z = &st->rapl[i];
		uint64_t v;

		if (read_zone(z, &v))
			continue;
		/* the counter wraps at max_energy_range_uj */
		z->total += v >= z->last ? v - z->last : z->range ? z->range - z->last + v : 0;
		z->last = v;
		if (z->total != z->written || last) {
			emit(f, st, now, 0, (uint32_t)i, MET_ENERGY_UJ, z->total);
			z->written = z->total;
		}
	}
}

/* --- NVML --- */

static void gpu_open(struct feature_ctx *f, struct metrics_state *st)
{
	char key[32];

	st->nvml = nvml_open();
	if (!st->nvml) {
		profile__set_meta(f->p, "nvml", "none");
		return;
	}
	st->ngpus = nvml_count(st->nvml);
	profile__set_meta(f->p, "nvml", nvml_driver(st->nvml));
	for (unsigned i = 0; i < st->ngpus; i++) {
		snprintf(key, sizeof(key), "nvml_gpu_%u", i);
		profile__set_meta(f->p, key, nvml_name(st->nvml, i));
	}
	st->gpu_written = malloc((st->ngpus ? st->ngpus : 1) * MET_COUNT * sizeof(uint64_t));
	if (st->gpu_written)
		memset(st->gpu_written, 0xff,
		       (st->ngpus ? st->ngpus : 1) * MET_COUNT * sizeof(uint64_t));
	log_info("metrics: %u NVIDIA GPUs through NVML", st->ngpus);
}

static void gpu_read(struct feature_ctx *f, struct metrics_state *st, uint64_t now, bool last)
{
	uint64_t v[MET_COUNT];
	uint64_t have;

	for (unsigned d = 0; st->gpu_written && d < st->ngpus; d++) {
		have = nvml_read(st->nvml, d, v);
		for (int m = MET_GPU_UTIL; m < MET_COUNT; m++) {
			uint64_t *w = &st->gpu_written[d * MET_COUNT + m];

			if (!(have & (1ULL << m)) || (*w == v[m] && !last))
				continue;
			emit(f, st, now, 0, d, m, v[m]);
			*w = v[m];
		}
	}
}

/* --- processes --- */

static int open_proc(uint32_t pid, const char *what)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%u/%s", pid, what);
	return open(path, O_RDONLY | O_CLOEXEC);
}

static ssize_t read_fd(int fd, char *buf, size_t len)
{
	ssize_t n = fd >= 0 ? pread(fd, buf, len - 1, 0) : -1;

	buf[n > 0 ? n : 0] = '\0';
	return n;
}

/* When the process started (CLOCK_MONOTONIC), from field 22 of /proc/PID/stat; 0 unknown. */
static uint64_t start_time(struct metrics_state *st, const char *buf)
{
	const char *p = strrchr(buf, ')');
	unsigned long long ticks;

	if (!p || sscanf(p + 2,
			 "%*c"
			 "%*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d "
			 "%*d %*d %*d %llu",
			 &ticks) != 1)
		return 0;
	return (uint64_t)((double)ticks * st->ns_per_tick - (double)st->boot_off);
}

/* /proc/PID/stat: fields after the ')' of the command name, which may hold anything. */
static bool parse_stat(struct metrics_state *st, const char *buf, uint64_t *v, uint32_t *ppid)
{
	const char *p = strrchr(buf, ')');
	unsigned long long minflt, majflt, utime, stime, threads;

	/* state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
	 * cutime cstime priority nice num_threads */
	if (!p || sscanf(p + 2,
			 "%*c %*d %*d %*d %*d %*d %*u %llu %*u %llu %*u %llu %llu %*d %*d %*d %*d "
			 "%llu",
			 &minflt, &majflt, &utime, &stime, &threads) != 5)
		return false;
	v[MET_MINFLT] = minflt;
	v[MET_MAJFLT] = majflt;
	v[MET_CPU_USER] = (uint64_t)(utime * st->ns_per_tick);
	v[MET_CPU_SYS] = (uint64_t)(stime * st->ns_per_tick);
	v[MET_THREADS] = threads;
	*ppid = (uint32_t)strtoul(p + 4, NULL, 10);
	return true;
}

static uint64_t field_kb(const char *buf, const char *key)
{
	const char *p = strstr(buf, key);

	return p ? strtoull(p + strlen(key), NULL, 10) * 1024 : 0;
}

static uint64_t field_u64(const char *buf, const char *key)
{
	const char *p = strstr(buf, key);

	return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

/* The BPF counters of pid, summed over CPUs. */
static bool read_bpf(struct metrics_state *st, uint32_t pid, uint64_t *v)
{
	uint64_t tx[METRICS_NET_PROTOS] = {0}, rx[METRICS_NET_PROTOS] = {0}, vol = 0, invol = 0;

	if (st->map_fd < 0 || bpf_map_lookup_elem(st->map_fd, &pid, st->percpu))
		return false;
	for (int c = 0; c < st->ncpus; c++) {
		const struct metrics_proc *m = &st->percpu[c];

		vol += m->nvcsw;
		invol += m->nivcsw;
		for (int k = 0; k < METRICS_NET_PROTOS; k++) {
			tx[k] += m->tx[k];
			rx[k] += m->rx[k];
		}
	}
	v[MET_NVCSW] = vol;
	v[MET_NIVCSW] = invol;
	v[MET_NET_TCP_TX] = tx[METRICS_NET_TCP];
	v[MET_NET_TCP_RX] = rx[METRICS_NET_TCP];
	v[MET_NET_UDP_TX] = tx[METRICS_NET_UDP];
	v[MET_NET_UDP_RX] = rx[METRICS_NET_UDP];
	v[MET_NET_UNIX_TX] = tx[METRICS_NET_UNIX];
	v[MET_NET_UNIX_RX] = rx[METRICS_NET_UNIX];
	return true;
}

/* One reading of a process; false when it is gone (nothing read). */
static bool read_proc(struct metrics_state *st, struct mproc *mp)
{
	char buf[4096];
	uint64_t v[MET_PROC_COUNT];
	uint32_t have = 0;

	memcpy(v, mp->v, sizeof(v));
	if (read_fd(mp->fd_stat, buf, sizeof(buf)) > 0 && parse_stat(st, buf, v, &mp->ppid))
		have |= 1;
	/* A zombie has no memory left: its RSS stays what it was last seen. */
	if (read_fd(mp->fd_status, buf, sizeof(buf)) > 0 && strstr(buf, "RssAnon:")) {
		v[MET_RSS_ANON] = field_kb(buf, "RssAnon:");
		v[MET_RSS_FILE] = field_kb(buf, "RssFile:");
		v[MET_RSS_SHMEM] = field_kb(buf, "RssShmem:");
		v[MET_RSS_PEAK] = field_kb(buf, "VmHWM:");
		have |= 2;
	}
	if (read_fd(mp->fd_io, buf, sizeof(buf)) > 0 && strstr(buf, "rchar:")) {
		mp->raw_io[0] = field_u64(buf, "rchar:");
		mp->raw_io[1] = field_u64(buf, "wchar:");
		mp->raw_io[2] = field_u64(buf, "\nread_bytes:");
		mp->raw_io[3] = field_u64(buf, "\nwrite_bytes:");
		have |= 4;
	}
	if (!have)
		return false;
	if (read_bpf(st, mp->pid, v))
		have |= 8;
	memcpy(mp->v, v, sizeof(v));
	mp->have |= have;
	return true;
}

static bool metric_read(const struct mproc *mp, int m)
{
	switch (m) {
	case MET_CPU_USER:
	case MET_CPU_SYS:
	case MET_MINFLT:
	case MET_MAJFLT:
	case MET_THREADS:
		return mp->have & 1;
	case MET_RSS_PEAK:
		return mp->have & (2 | 16);
	case MET_RSS_ANON:
	case MET_RSS_FILE:
	case MET_RSS_SHMEM:
		return mp->have & 2;
	case MET_IO_RCHAR:
	case MET_IO_WCHAR:
	case MET_IO_READ_BYTES:
	case MET_IO_WRITE_BYTES:
		return mp->have & 4;
	default:
		return mp->have & 8;
	}
}

static void write_proc(struct feature_ctx *f, struct metrics_state *st, struct mproc *mp,
		       uint64_t now, bool all)
{
	/*
	 * The launched command before its exec is eprof's fork: its VmHWM (55 MiB, eprof's own
	 * footprint) was the demo's "RSS peak" for a 2 MiB program. Its readings start at exec.
	 */
	if (f->ev && events_before_launch_go(f->ev, mp->pid, now))
		return;
	for (int k = 0; k < 4; k++)
		mp->v[MET_IO_RCHAR + k] =
		    mp->raw_io[k] >= mp->sub_io[k] ? mp->raw_io[k] - mp->sub_io[k] : 0;
	/*
	 * A process started during the record (the command, a forked child) had all its
	 * running totals at 0 when it started: that reading opens its series, so a reader
	 * takes last - first for what it did, whatever the interval missed at its start.
	 */
	if (!mp->written && mp->born) {
		for (int m = 0; m < MET_PROC_COUNT; m++)
			if (metric_defs[m].cumulative && metric_read(mp, m))
				emit(f, st, mp->born < now ? mp->born : now, mp->pid, 0, m, 0);
	}
	for (int m = 0; m < MET_PROC_COUNT; m++) {
		if (!metric_read(mp, m) || (mp->written && !all && mp->w[m] == mp->v[m]))
			continue;
		/* unchanged at the last reading: that reading closes the flat step (meta
		 * metrics_steps), so a reader knows the growth came after it */
		if (mp->written && metric_defs[m].cumulative && mp->wts[m] < mp->last_read &&
		    mp->w[m] != mp->v[m])
			emit(f, st, mp->last_read, mp->pid, 0, m, mp->w[m]);
		emit(f, st, now, mp->pid, 0, m, mp->v[m]);
		mp->w[m] = mp->v[m];
		mp->wts[m] = now;
	}
	mp->written = true;
	mp->last_read = now;
}

/* --- threads --- */

static struct mproc *find_proc(struct feature_ctx *f, struct metrics_state *st, uint32_t pid,
			       bool create);

/*
 * The task iterator over the threads of mp (the kernel filters by process since Linux 6.1;
 * before, one iterator over every task, whose records of other processes are skipped).
 */
static void thread_iter_open(struct feature_ctx *f, struct metrics_state *st, struct mproc *mp)
{
	LIBBPF_OPTS(bpf_iter_attach_opts, opts);
	union bpf_iter_link_info li;

	if (!st->threads || st->iter_all)
		return;
	memset(&li, 0, sizeof(li));
	li.task.pid = mp->pid;
	opts.link_info = &li;
	opts.link_info_len = sizeof(li);
	mp->iter = bpf_program__attach_iter(f->skel->progs.metrics_threads, &opts);
	if (mp->iter)
		return;
	log_debug("metrics: no per-process task iterator (%s): one over every task",
		  strerror(errno));
	st->iter_all = true;
	st->iter_any = bpf_program__attach_iter(f->skel->progs.metrics_threads, NULL);
	if (!st->iter_any) {
		log_info("metrics: no BPF task iterator (%s): no per-thread figures",
			 strerror(errno));
		st->threads = false;
	}
}

/* What one iterator wrote: struct metrics_thread records in st->ibuf. Returns how many. */
static size_t iter_read(struct metrics_state *st, struct bpf_link *l)
{
	int fd = bpf_iter_create(bpf_link__fd(l));
	size_t len = 0;

	if (fd < 0)
		return 0;
	for (;;) {
		ssize_t n;

		if (len + 4096 > st->capibuf && arr_grow(st->ibuf, st->capibuf, len + 65536))
			break;
		n = read(fd, st->ibuf + len, st->capibuf - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	return len / sizeof(struct metrics_thread);
}

static struct mthread *thread_of(struct metrics_state *st, uint32_t pid, uint32_t tid)
{
	struct mthread *t;
	uint64_t k;

	if (!st->thr_index && !(st->thr_index = hmap__new(64)))
		return NULL;
	if (hmap__get(st->thr_index, pid, tid, &k))
		return &st->thr[k];
	if (arr_grow(st->thr, st->capthr, st->nthr + 1) ||
	    hmap__put(st->thr_index, pid, tid, st->nthr))
		return NULL;
	t = &st->thr[st->nthr++];
	memset(t, 0, sizeof(*t));
	t->pid = pid;
	t->tid = tid;
	return t;
}

/* One thread's figures: written where they changed (all: every one); its exit closes it. */
static void thread_write(struct feature_ctx *f, struct metrics_state *st,
			 const struct metrics_thread *r, uint64_t now, bool all)
{
	struct mthread *t = thread_of(st, r->pid, r->tid);
	uint64_t v[MET_T_COUNT];
	uint64_t ts = r->exit_ns && r->exit_ns < now ? r->exit_ns : now;

	if (!t || t->dead)
		return;
	cpu_split_update(&t->cpu, r->utime, r->stime, r->rtime, all || r->exit_ns);
	v[0] = t->cpu.user;
	v[1] = t->cpu.sys;
	v[MET_T_MINFLT - MET_T_FIRST] = r->minflt;
	v[MET_T_MAJFLT - MET_T_FIRST] = r->majflt;
	v[MET_T_NVCSW - MET_T_FIRST] = r->nvcsw;
	v[MET_T_NIVCSW - MET_T_FIRST] = r->nivcsw;
	v[MET_T_IO_RCHAR - MET_T_FIRST] = r->rchar;
	v[MET_T_IO_WCHAR - MET_T_FIRST] = r->wchar;
	v[MET_T_IO_READ_BYTES - MET_T_FIRST] = r->read_bytes;
	v[MET_T_IO_WRITE_BYTES - MET_T_FIRST] = r->write_bytes;
	v[MET_T_NET_TX - MET_T_FIRST] = r->tx;
	v[MET_T_NET_RX - MET_T_FIRST] = r->rx;
	if (memcmp(t->comm, r->comm, sizeof(t->comm)) && r->comm[0]) {
		struct thread *th = profile__thread(f->p, r->pid, r->tid, true);
		char comm[sizeof(r->comm) + 1];

		memcpy(comm, r->comm, sizeof(r->comm));
		comm[sizeof(r->comm)] = '\0';
		if (th)
			th->comm = profile__intern(f->p, comm);
		memcpy(t->comm, r->comm, sizeof(t->comm));
	}
	if (!t->written) {
		/* started during the record: its series opens at 0 when it started */
		if (r->start_ns + (uint64_t)st->ns_per_tick >= f->start_ns)
			for (int m = 0; m < MET_T_COUNT; m++)
				emit(f, st, r->start_ns < ts ? r->start_ns : ts, r->pid, r->tid,
				     MET_T_FIRST + m, 0);
	}
	for (int m = 0; m < MET_T_COUNT; m++) {
		if (t->written && !all && !r->exit_ns && t->w[m] == v[m])
			continue;
		if (t->written && t->wts[m] < t->last_read && t->w[m] != v[m])
			emit(f, st, t->last_read, r->pid, r->tid, MET_T_FIRST + m, t->w[m]);
		emit(f, st, ts, r->pid, r->tid, MET_T_FIRST + m, v[m]);
		t->w[m] = v[m];
		t->wts[m] = ts;
	}
	t->written = true;
	t->last_read = ts;
	t->dead = r->exit_ns != 0;
}

/* The threads of the live processes, then the last figures of those that exited. */
static void threads_read(struct feature_ctx *f, struct metrics_state *st, uint64_t now,
			 bool last)
{
	struct metrics_thread r[64];
	uint32_t keys[64];
	bool batch = true;

	if (!st->threads)
		return;
	(void)now; /* each iteration is timed itself: the readings before it take a while */
	if (st->iter_any) {
		size_t n = iter_read(st, st->iter_any);

		now = clock_ns(CLOCK_MONOTONIC);
		for (size_t k = 0; k < n; k++) {
			struct metrics_thread *t = (struct metrics_thread *)st->ibuf + k;

			if (find_proc(f, st, t->pid, false))
				thread_write(f, st, t, now, last);
		}
	}
	for (size_t i = 0; i < st->nprocs; i++) {
		size_t n = st->procs[i].iter ? iter_read(st, st->procs[i].iter) : 0;

		now = clock_ns(CLOCK_MONOTONIC);
		for (size_t k = 0; k < n; k++)
			thread_write(f, st, (struct metrics_thread *)st->ibuf + k, now, last);
	}
	/* exited: taken out of the map as they are read */
	for (;;) {
		__u32 count = sizeof(keys) / sizeof(keys[0]), out = 0;
		int err = -1;

		if (batch) {
			err = bpf_map_lookup_and_delete_batch(st->exits_fd, NULL, &out, keys, r,
							      &count, NULL);
			if (err && errno != ENOENT) {
				batch = false;
				continue;
			}
		} else {
			count = 0;
			if (!bpf_map_get_next_key(st->exits_fd, NULL, &keys[0]) &&
			    !bpf_map_lookup_and_delete_elem(st->exits_fd, &keys[0], &r[0]))
				count = 1;
			err = count ? 0 : -1;
		}
		for (__u32 k = 0; k < count; k++)
			thread_write(f, st, &r[k], now, true);
		if (err || !count)
			break;
	}
}

static void close_proc(struct metrics_state *st, struct mproc *mp)
{
	if (mp->fd_stat >= 0)
		close(mp->fd_stat);
	if (mp->fd_status >= 0)
		close(mp->fd_status);
	if (mp->fd_io >= 0)
		close(mp->fd_io);
	mp->fd_stat = mp->fd_status = mp->fd_io = -1;
	bpf_link__destroy(mp->iter);
	mp->iter = NULL;
	if (st->map_fd >= 0)
		bpf_map_delete_elem(st->map_fd, &mp->pid);
}

static struct mproc *find_proc(struct feature_ctx *f, struct metrics_state *st, uint32_t pid,
			       bool create)
{
	struct mproc *mp;

	for (size_t i = 0; i < st->nprocs; i++)
		if (st->procs[i].pid == pid)
			return &st->procs[i];
	if (!create || arr_grow(st->procs, st->capprocs, st->nprocs + 1))
		return NULL;
	mp = &st->procs[st->nprocs];
	memset(mp, 0, sizeof(*mp));
	mp->pid = pid;
	mp->fd_stat = open_proc(pid, "stat");
	mp->fd_status = open_proc(pid, "status");
	mp->fd_io = open_proc(pid, "io");
	if (mp->fd_stat < 0) {
		close_proc(st, mp);
		return NULL;
	}
	if (pid == (uint32_t)f->child) {
		mp->born = f->start_ns;
	} else {
		char buf[1024];
		uint64_t t = read_fd(mp->fd_stat, buf, sizeof(buf)) > 0 ? start_time(st, buf) : 0;

		/* a clock tick of slack: the start time is in ticks */
		if (t + (uint64_t)st->ns_per_tick >= f->start_ns)
			mp->born = t;
	}
	log_debug("metrics: process %u%s", pid, mp->born ? " (started during the record)" : "");
	st->nprocs++;
	thread_iter_open(f, st, mp);
	return mp;
}

/* A process is gone: it holds no memory any more (its running totals keep their last value). */
static void gone(struct feature_ctx *f, struct metrics_state *st, struct mproc *mp, uint64_t now)
{
	static const int levels[] = {MET_RSS_ANON, MET_RSS_FILE, MET_RSS_SHMEM};

	for (size_t k = 0; mp->written && k < sizeof(levels) / sizeof(levels[0]); k++)
		if (metric_read(mp, levels[k]) && mp->w[levels[k]])
			emit(f, st, now, mp->pid, 0, levels[k], 0);
}

/*
 * A target was reaped: its parent's /proc/PID/io now holds its bytes too. They are taken off
 * the parent's as of the child's last reading; what the child did after it (at most an
 * interval) stays with the parent, so the sum over the processes is the tree's exact total.
 */
static void reaped(struct metrics_state *st, const struct mproc *child)
{
	for (size_t i = 0; i < st->nprocs; i++) {
		struct mproc *par = &st->procs[i];

		if (par->pid != child->ppid || par == child)
			continue;
		for (int k = 0; k < 4; k++)
			par->sub_io[k] += child->raw_io[k];
		return;
	}
}

/* The target processes alive now (feature_next_target). */
static void find_targets(struct feature_ctx *f, struct metrics_state *st)
{
	uint32_t pid;

	for (size_t i = 0; feature_next_target(f, &i, &pid);)
		find_proc(f, st, pid, true);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

struct busy_pid {
	uint32_t pid, n;
};

static int cmp_busy(const void *a, const void *b)
{
	const struct busy_pid *x = a, *y = b;

	if (x->n != y->n)
		return x->n > y->n ? -1 : 1;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

/*
 * -a: reading /proc for every process each interval would cost more than the profile. The
 * processes with CPU samples since the last reading are followed instead, the busiest first,
 * at most METRICS_SYSTEM_PROCS alive at once; each from its first reading on (or from its
 * start when it started during the record), until it exits.
 */
static void find_busy(struct feature_ctx *f, struct metrics_state *st)
{
	size_t n = f->p->samples.n, k = 0, nb = 0;
	uint32_t self = (uint32_t)getpid();
	struct busy_pid *b;

	if (st->seen > n) /* the live view dropped its samples */
		st->seen = n;
	if (n == st->seen || st->nprocs >= METRICS_SYSTEM_PROCS)
		goto out;
	if (arr_grow(st->busy, st->capbusy, n - st->seen))
		goto out;
	for (size_t i = st->seen; i < n; i++)
		if (f->p->samples.v[i].pid && f->p->samples.v[i].pid != self)
			st->busy[k++] = f->p->samples.v[i].pid;
	qsort(st->busy, k, sizeof(*st->busy), cmp_u32);
	/* runs of one pid, counted in place */
	b = (struct busy_pid *)calloc(k ? k : 1, sizeof(*b));
	if (!b)
		goto out;
	for (size_t i = 0; i < k; i++) {
		if (nb && b[nb - 1].pid == st->busy[i])
			b[nb - 1].n++;
		else
			b[nb++] = (struct busy_pid){st->busy[i], 1};
	}
	qsort(b, nb, sizeof(*b), cmp_busy);
	for (size_t i = 0; i < nb && st->nprocs < METRICS_SYSTEM_PROCS; i++)
		if (!find_proc(f, st, b[i].pid, false))
			find_proc(f, st, b[i].pid, true);
	free(b);
out:
	st->seen = n;
}

static void sample_all_(struct feature_ctx *f, struct metrics_state *st, uint64_t now, bool last);

/* One reading of everything, its cost counted (tools/bench/metrics_cost.py reads it). */
static void sample_all(struct feature_ctx *f, struct metrics_state *st, uint64_t now, bool last)
{
	uint64_t t0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);

	sample_all_(f, st, now, last);
	st->cpu_ns += clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0;
}

static void sample_all_(struct feature_ctx *f, struct metrics_state *st, uint64_t now, bool last)
{
	{
		if (f->o->all)
			find_busy(f, st);
		else
			find_targets(f, st);
		/* read all first: a parent's bytes are corrected for the children reaped before */
		for (size_t i = 0; i < st->nprocs; i++)
			st->procs[i].gone = !read_proc(st, &st->procs[i]);
		for (size_t i = 0; i < st->nprocs; i++)
			if (st->procs[i].gone)
				reaped(st, &st->procs[i]);
		threads_read(f, st, now, last);
		for (size_t i = 0; i < st->nprocs;) {
			struct mproc *mp = &st->procs[i];

			if (!mp->gone) {
				write_proc(f, st, mp, now, last);
				i++;
				continue;
			}
			gone(f, st, mp, now);
			close_proc(st, mp);
			st->procs[i] = st->procs[--st->nprocs];
		}
	}
	rapl_read(f, st, now, last);
	gpu_read(f, st, now, last);
}

static int metrics_attach(struct feature_ctx *f, void *state)
{
	struct metrics_state *st = state;

	st->ncpus = f->ncpus;
	if (f->child) {
		char buf[4096];
		int fd = open_proc((uint32_t)f->child, "status");

		if (read_fd(fd, buf, sizeof(buf)) > 0)
			st->child_pre_hwm = field_kb(buf, "VmHWM:");
		if (fd >= 0)
			close(fd);
	}
	if (st->bpf) {
		st->map_fd = bpf_map__fd(f->skel->maps.metrics_procs);
		st->percpu = calloc(st->ncpus, sizeof(*st->percpu));
		if (!st->percpu)
			return -ENOMEM;
	}
	if (st->threads)
		st->exits_fd = bpf_map__fd(f->skel->maps.metrics_thread_exits);
	rapl_open(f, st);
	gpu_open(f, st);
	/* the machine's counters start at attach: energy from then on, not from the first poll */
	rapl_read(f, st, clock_ns(CLOCK_MONOTONIC), false);
	gpu_read(f, st, clock_ns(CLOCK_MONOTONIC), false);
	return 0;
}

static int metrics_poll(struct feature_ctx *f, void *state, uint64_t now)
{
	struct metrics_state *st = state;

	if (now - st->last < st->interval_ns)
		return 0;
	/* the first reading at the first poll, then on the interval's grid */
	st->last =
	    st->last ? st->last + st->interval_ns * ((now - st->last) / st->interval_ns) : now;
	sample_all(f, st, now, false);
	return 0;
}

/* The launched command exited and is not reaped yet: its last figures, whole. */
static void metrics_child_exit(struct feature_ctx *f, void *state, uint32_t pid, uint64_t now,
			       const struct rusage *ru)
{
	struct metrics_state *st = state;
	/* a command shorter than the interval is seen here for the first time */
	struct mproc *mp = f->o->all ? NULL : find_proc(f, st, pid, true);

	if (!mp)
		return;
	if (read_proc(st, mp)) {
		/*
		 * Its peak from the kernel (a command shorter than the interval has no reading),
		 * unless that is the pre-exec copy of eprof's (which may still grow by a few pages
		 * before the exec: 1.3 MiB in the demo, whose own peak is 2.5 MiB): the kernel's
		 * figure is the larger of the two memories'. With readings since the exec, it
		 * counts only when well above the copy's.
		 */
		uint64_t peak = (uint64_t)ru->ru_maxrss * 1024;
		uint64_t slack = mp->written ? 8u << 20 : 1u << 20;

		log_debug("metrics: command peak %" PRIu64 ", before exec %" PRIu64, peak,
			  st->child_pre_hwm);
		if (peak > mp->v[MET_RSS_PEAK] && peak > st->child_pre_hwm + slack) {
			mp->v[MET_RSS_PEAK] = peak;
			mp->have |= 16;
		}
		write_proc(f, st, mp, now, true);
	}
	gone(f, st, mp, now);
	close_proc(st, mp);
	*mp = st->procs[--st->nprocs];
}

static int metrics_finish(struct feature_ctx *f, void *state)
{
	struct metrics_state *st = state;
	uint64_t full = st->bpf ? f->bpf_stat(f, BSTAT_METRICS_FULL) : 0;
	uint64_t tfull = st->threads ? f->bpf_stat(f, BSTAT_METRICS_THREAD_FULL) : 0;
	char buf[32];

	sample_all(f, st, clock_ns(CLOCK_MONOTONIC), true);
	profile__set_meta(f->p, "metrics_threads", st->threads ? "task_iterator" : "none");
	if (tfull) {
		snprintf(buf, sizeof(buf), "%" PRIu64, tfull);
		profile__set_meta(f->p, "metrics_threads_untracked", buf);
	}
	snprintf(buf, sizeof(buf), "%" PRIu64, st->cpu_ns);
	profile__set_meta(f->p, "metrics_cpu_ns", buf);
	if (full) {
		snprintf(buf, sizeof(buf), "%" PRIu64, full);
		profile__set_meta(f->p, "metrics_untracked", buf);
	}
	return 0;
}

static void metrics_destroy(struct feature_ctx *f, void *state)
{
	struct metrics_state *st = state;

	(void)f;
	if (!st)
		return;
	for (size_t i = 0; i < st->nprocs; i++)
		close_proc(st, &st->procs[i]);
	for (size_t i = 0; i < st->nrapl; i++)
		close(st->rapl[i].fd);
	nvml_close(st->nvml);
	bpf_link__destroy(st->iter_any);
	hmap__free(st->thr_index);
	free(st->thr);
	free(st->ibuf);
	free(st->gpu_written);
	free(st->procs);
	free(st->busy);
	free(st->percpu);
	free(st);
}

static const char *const metrics_maps[] = { "metrics_procs", "metrics_thread_net", "metrics_thread_exits", NULL };

const struct feature feature_metrics = {
    .name = "metrics",
    .maps = metrics_maps,
    .enabled = metrics_enabled,
    .configure = metrics_configure,
    .attach = metrics_attach,
    .poll = metrics_poll,
    .child_exit = metrics_child_exit,
    .finish = metrics_finish,
    .destroy = metrics_destroy,
};
