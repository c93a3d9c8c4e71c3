// SPDX-License-Identifier: MIT
/*
 * The injected CUPTI collectors of an attach-mode record (cuda_inject.h). A worker thread
 * does every injection and retraction (each one a few milliseconds of one target thread,
 * seconds at worst when a target does not answer), the record's loop only queues and takes.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/eprof_gpu_proto.h"
#include "inject/inject.h"
#include "util/hmap.h"
#include "util/log.h"
#include "cuda_inject.h"
#include "proc.h"

enum ci_state {
	CI_QUEUED,
	CI_RUNNING,
	CI_ACTIVE,  /* collector loaded, channel handed over */
	CI_FAILED,  /* not injected (status, msg) */
	CI_GONE,    /* the collector's channel closed: the process exited or exec'd */
	CI_RETRACT, /* retraction queued */
	CI_DONE,    /* retracted (unloaded, or kept loaded when it had to stay) */
};

struct ci_proc {
	uint32_t pid;
	uint64_t start; /* start time: a pid used again is another process */
	enum ci_state state;
	bool taken; /* its result went to the caller */
	bool keep;  /* retraction: the collector asked to stay loaded */
	struct cuda_inject_done done;
	uint64_t handle;
	double retract_stop_ms;
	bool kept; /* retracted, but the library stayed loaded */
};

struct cuda_inject {
	struct cuda_inject_opts o;
	char lib[4096];
	pthread_mutex_t lock;
	pthread_cond_t cv;   /* work for the worker */
	pthread_cond_t done; /* a job finished */
	pthread_t th;
	bool th_on, stop;
	struct ci_proc *v;
	size_t n, cap;
	struct hmap *by_pid; /* pid -> index in v */
};

static enum egpu_status status_of(enum inject_err e)
{
	switch (e) {
	case INJ_ERR_PTRACE:
		return EGPU_ST_PTRACE;
	case INJ_ERR_SECCOMP:
		return EGPU_ST_SECCOMP;
	case INJ_ERR_NO_DLOPEN:
		return EGPU_ST_NO_DLOPEN;
	default:
		return EGPU_ST_INJECT;
	}
}

/* --- where the process's libcupti would be ------------------------------------------------- */

static bool exists_in(uint32_t pid, const char *path)
{
	char in_ns[4200];

	snprintf(in_ns, sizeof(in_ns), "/proc/%u/root%s", pid, path);
	return !access(in_ns, R_OK);
}

/* Calls fn with each file path pid maps (the name, no newline) until it returns true. */
static bool maps_any_file(uint32_t pid, bool (*fn)(char *file, void *arg), void *arg)
{
	char path[96], line[4200];
	bool found = false;
	FILE *fp;

	snprintf(path, sizeof(path), "/proc/%u/maps", pid);
	fp = fopen(path, "re");
	while (fp && !found && fgets(line, sizeof(line), fp)) {
		char *file = strchr(line, '/');

		if (!file)
			continue;
		file[strcspn(file, "\n")] = '\0';
		found = fn(file, arg);
	}
	if (fp)
		fclose(fp);
	return found;
}

static const char *const cupti_rel[] = {
    "libcupti.so.13",
    "libcupti.so.12",
    "../extras/CUPTI/lib64/libcupti.so.13",
    "../extras/CUPTI/lib64/libcupti.so.12",
    "../../cuda_cupti/lib/libcupti.so.12",
    "../../cuda_cupti/lib/libcupti.so.13",
};

struct hint_arg {
	uint32_t pid;
	char *out;
	size_t len;
};

/* A libcupti beside the CUDA runtime or driver that file is. */
static bool cupti_beside(char *file, void *arg)
{
	struct hint_arg *h = arg;
	char *base = strrchr(file, '/') + 1;

	if (strncmp(base, "libcudart.so", 12) && strncmp(base, "libcuda.so", 10))
		return false;
	*base = '\0';
	for (size_t i = 0; i < sizeof(cupti_rel) / sizeof(cupti_rel[0]); i++) {
		snprintf(h->out, h->len, "%s%s", file, cupti_rel[i]);
		if (exists_in(h->pid, h->out))
			return true;
	}
	return false;
}

bool cuda_inject_cupti_hint(uint32_t pid, char *out, size_t len)
{
	struct hint_arg h = {pid, out, len};
	bool found = maps_any_file(pid, cupti_beside, &h);

	if (!found) /* the toolkit's */
		for (size_t i = 0; !found && i < 2; i++) {
			snprintf(out, len, "/usr/local/cuda/extras/CUPTI/lib64/%s", cupti_rel[i]);
			found = exists_in(pid, out);
		}
	if (!found && len)
		out[0] = '\0';
	return found;
}

static bool is_driver(char *file, void *arg)
{
	(void)arg;
	return !strncmp(strrchr(file, '/') + 1, "libcuda.so", 10);
}

/* Whether pid maps the CUDA driver now (what it was queued for). */
static bool maps_driver(uint32_t pid)
{
	return maps_any_file(pid, is_driver, NULL);
}

/* --- the worker ---------------------------------------------------------------------------- */

static void do_inject(struct cuda_inject *ci, struct ci_proc *p)
{
	struct egpu_attach_arg a = {.fd = -1};
	struct inject_load_req rq = {.lib_path = ci->lib,
				     .memfd_name = "eprof-cupti",
				     .entry = "eprof_cupti_attach",
				     .blob = &a,
				     .blob_len = sizeof(a),
				     .channel = true,
				     .chan_fd_off = offsetof(struct egpu_attach_arg, fd),
				     .timeout_ms = ci->o.timeout_ms};
	struct inject_result r;
	int err;

	a.flags = ci->o.verbose ? EGPU_ATTACH_VERBOSE : 0;
	cuda_inject_cupti_hint(p->pid, a.cupti_hint, sizeof(a.cupti_hint));
	{
		/* the launched collector reads it from its environment; an attached one, here */
		const char *mb = getenv("EPROF_CUPTI_BACKLOG_MB");
		char *end;
		unsigned long v = mb && *mb ? strtoul(mb, &end, 10) : 0;

		if (mb && *mb && !*end && v <= 4096)
			a.backlog_mb = (uint32_t)v + 1;
	}
	err = inject_load((pid_t)p->pid, &rq, &r);
	p->done.pid = p->pid;
	p->done.stopped_ms = r.stopped_ns / 1e6;
	p->done.tid = (uint32_t)r.tid;
	p->done.chan_fd = r.chan_fd;
	if (!err && r.ret != 0) {
		snprintf(p->done.msg, sizeof(p->done.msg), "the collector refused to start: %s",
			 r.ret == -EALREADY ? "it is loaded already (launched under eprof?)"
					    : strerror((int)-r.ret));
		err = -EIO;
		/* loaded but not running: let it go again */
		if (r.handle) {
			struct inject_unload_req u = {.handle = r.handle,
						      .retract = "eprof_cupti_retract",
						      .timeout_ms = ci->o.timeout_ms};
			struct inject_result ur;

			inject_unload((pid_t)p->pid, &u, &ur);
		}
	} else if (err) {
		snprintf(p->done.msg, sizeof(p->done.msg), "%s", r.msg);
	}
	if (err) {
		if (p->done.chan_fd >= 0)
			close(p->done.chan_fd);
		p->done.chan_fd = -1;
		p->done.status = r.err == INJ_OK ? EGPU_ST_INJECT : status_of(r.err);
		p->state = r.err == INJ_ERR_GONE ? CI_GONE : CI_FAILED;
		/*
		 * A child seen between its fork and its exec maps the driver its parent had; by
		 * the injection it may be another program, with no libc mapped yet (a python3
		 * that loads the driver a second later through ctypes). The image it was queued
		 * for is gone: not a failure, and queued again when it maps the driver itself.
		 */
		if (p->state == CI_FAILED && !maps_driver(p->pid)) {
			log_debug("cuda: pid %u no longer maps the CUDA driver (exec'd?): %s", p->pid,
				  p->done.msg);
			p->state = CI_GONE;
		}
		return;
	}
	p->handle = r.handle;
	p->done.status = EGPU_ST_OK;
	p->state = CI_ACTIVE;
}

static void do_retract(struct cuda_inject *ci, struct ci_proc *p)
{
	struct inject_unload_req u = {.handle = p->handle,
				      .retract = "eprof_cupti_retract",
				      .keep_loaded = p->keep,
				      .timeout_ms = ci->o.timeout_ms};
	struct inject_result r;
	int err = inject_unload((pid_t)p->pid, &u, &r);

	p->retract_stop_ms = r.stopped_ns / 1e6;
	p->state = CI_DONE;
	if (err == -ESRCH || r.err == INJ_ERR_GONE)
		return; /* it exited meanwhile: nothing left to unload */
	if (err) {
		log_warn("cuda: cannot retract the CUPTI collector from pid %u: %s (it stays "
			 "loaded, inert once its channel closes)",
			 p->pid, r.msg);
		p->kept = true;
		return;
	}
	p->kept = r.dlclose_ret != 0;
	if (p->kept)
		log_warn("cuda: the CUPTI collector stays loaded in pid %u (%s)", p->pid,
			 r.ret == EBUSY ? "it had not stopped, or CUPTI still holds its callbacks"
					: "dlclose failed");
	else
		log_info("cuda: CUPTI collector retracted from pid %u: thread %d stopped %.2f ms",
			 p->pid, (int)r.tid, p->retract_stop_ms);
}

static void *worker(void *arg)
{
	struct cuda_inject *ci = arg;

	pthread_mutex_lock(&ci->lock);
	while (!ci->stop) {
		struct ci_proc *p = NULL;
		struct ci_proc copy;

		for (size_t i = 0; i < ci->n && !p; i++)
			if (ci->v[i].state == CI_QUEUED || ci->v[i].state == CI_RETRACT)
				p = &ci->v[i];
		if (!p) {
			pthread_cond_wait(&ci->cv, &ci->lock);
			continue;
		}
		if (p->state == CI_QUEUED)
			p->state = CI_RUNNING;
		copy = *p; /* v may move while the lock is dropped */
		pthread_mutex_unlock(&ci->lock);
		if (copy.state == CI_RUNNING)
			do_inject(ci, &copy);
		else
			do_retract(ci, &copy);
		pthread_mutex_lock(&ci->lock);
		{
			uint64_t idx;

			if (hmap__get(ci->by_pid, copy.pid, 0, &idx) && idx < ci->n)
				ci->v[idx] = copy;
		}
		pthread_cond_broadcast(&ci->done);
	}
	pthread_mutex_unlock(&ci->lock);
	return NULL;
}

/* --- the record's side ----------------------------------------------------------------------- */

struct cuda_inject *cuda_inject__new(const struct cuda_inject_opts *o)
{
	struct cuda_inject *ci = calloc(1, sizeof(*ci));

	if (!ci)
		return NULL;
	ci->o = *o;
	snprintf(ci->lib, sizeof(ci->lib), "%s", o->lib);
	ci->o.lib = ci->lib;
	ci->by_pid = hmap__new(64);
	pthread_mutex_init(&ci->lock, NULL);
	pthread_cond_init(&ci->cv, NULL);
	pthread_cond_init(&ci->done, NULL);
	if (!ci->by_pid || pthread_create(&ci->th, NULL, worker, ci)) {
		hmap__free(ci->by_pid);
		free(ci);
		return NULL;
	}
	ci->th_on = true;
	return ci;
}

void cuda_inject__free(struct cuda_inject *ci)
{
	if (!ci)
		return;
	pthread_mutex_lock(&ci->lock);
	ci->stop = true;
	pthread_cond_broadcast(&ci->cv);
	pthread_mutex_unlock(&ci->lock);
	if (ci->th_on)
		pthread_join(ci->th, NULL);
	for (size_t i = 0; i < ci->n; i++)
		if (!ci->v[i].taken && ci->v[i].done.chan_fd >= 0)
			close(ci->v[i].done.chan_fd);
	free(ci->v);
	hmap__free(ci->by_pid);
	pthread_mutex_destroy(&ci->lock);
	pthread_cond_destroy(&ci->cv);
	pthread_cond_destroy(&ci->done);
	free(ci);
}

void cuda_inject__want(struct cuda_inject *ci, uint32_t pid)
{
	uint64_t idx, start;
	struct ci_proc *p;

	pthread_mutex_lock(&ci->lock);
	if (hmap__get(ci->by_pid, pid, 0, &idx) && ci->v[idx].state != CI_GONE)
		goto out;
	start = proc_start_ticks(pid);
	if (!start)
		goto out;
	if (hmap__get(ci->by_pid, pid, 0, &idx)) {
		p = &ci->v[idx]; /* the same process after an exec, or a new one with its pid */
	} else {
		if (ci->n == ci->cap) {
			size_t cap = ci->cap ? 2 * ci->cap : 16;
			struct ci_proc *v = realloc(ci->v, cap * sizeof(*v));

			if (!v)
				goto out;
			ci->v = v;
			ci->cap = cap;
		}
		if (hmap__put(ci->by_pid, pid, 0, ci->n))
			goto out;
		p = &ci->v[ci->n++];
	}
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	p->start = start;
	p->done.chan_fd = -1;
	p->state = CI_QUEUED;
	pthread_cond_broadcast(&ci->cv);
out:
	pthread_mutex_unlock(&ci->lock);
}

size_t cuda_inject__take(struct cuda_inject *ci, struct cuda_inject_done *out, size_t max)
{
	size_t n = 0;

	pthread_mutex_lock(&ci->lock);
	for (size_t i = 0; i < ci->n && n < max; i++) {
		struct ci_proc *p = &ci->v[i];

		if (p->taken || (p->state != CI_ACTIVE && p->state != CI_FAILED))
			continue;
		out[n++] = p->done;
		p->taken = true;
		p->done.chan_fd = -1; /* the caller's now */
	}
	pthread_mutex_unlock(&ci->lock);
	return n;
}

void cuda_inject__gone(struct cuda_inject *ci, uint32_t pid)
{
	uint64_t idx;

	pthread_mutex_lock(&ci->lock);
	if (hmap__get(ci->by_pid, pid, 0, &idx) && ci->v[idx].state == CI_ACTIVE)
		ci->v[idx].state = CI_GONE;
	pthread_mutex_unlock(&ci->lock);
}

static bool busy(const struct cuda_inject *ci, bool retracting)
{
	for (size_t i = 0; i < ci->n; i++) {
		enum ci_state s = ci->v[i].state;

		if (s == CI_QUEUED || s == CI_RUNNING || (retracting && s == CI_RETRACT))
			return true;
	}
	return false;
}

static bool wait_done(struct cuda_inject *ci, bool retracting, unsigned timeout_ms)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += timeout_ms / 1000;
	until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	while (busy(ci, retracting))
		if (pthread_cond_timedwait(&ci->done, &ci->lock, &until))
			return false;
	return true;
}

void cuda_inject__settle(struct cuda_inject *ci, unsigned timeout_ms)
{
	pthread_mutex_lock(&ci->lock);
	wait_done(ci, false, timeout_ms);
	pthread_mutex_unlock(&ci->lock);
}

size_t cuda_inject__active(struct cuda_inject *ci, uint32_t *pids, size_t max)
{
	size_t n = 0;

	pthread_mutex_lock(&ci->lock);
	for (size_t i = 0; i < ci->n && n < max; i++)
		if (ci->v[i].state == CI_ACTIVE && ci->v[i].taken)
			pids[n++] = ci->v[i].pid;
	pthread_mutex_unlock(&ci->lock);
	return n;
}

void cuda_inject__retract_all(struct cuda_inject *ci, bool (*keep)(void *arg, uint32_t pid),
			      void *arg, unsigned timeout_ms)
{
	pthread_mutex_lock(&ci->lock);
	wait_done(ci, false, timeout_ms); /* injections under way first */
	for (size_t i = 0; i < ci->n; i++) {
		struct ci_proc *p = &ci->v[i];

		if (p->state != CI_ACTIVE)
			continue;
		p->keep = keep && keep(arg, p->pid);
		p->state = CI_RETRACT;
	}
	pthread_cond_broadcast(&ci->cv);
	if (!wait_done(ci, true, timeout_ms))
		log_warn("cuda: retracting the CUPTI collectors took more than %u ms; not waiting",
			 timeout_ms);
	pthread_mutex_unlock(&ci->lock);
}

void cuda_inject__summary(struct cuda_inject *ci, struct cuda_inject_summary *s)
{
	memset(s, 0, sizeof(*s));
	pthread_mutex_lock(&ci->lock);
	for (size_t i = 0; i < ci->n; i++) {
		const struct ci_proc *p = &ci->v[i];

		if (p->state == CI_FAILED) {
			s->failed++;
			continue;
		}
		if (p->done.status != EGPU_ST_OK || !p->taken)
			continue;
		s->injected++;
		s->inject_stop_sum_ms += p->done.stopped_ms;
		if (p->done.stopped_ms > s->inject_stop_max_ms)
			s->inject_stop_max_ms = p->done.stopped_ms;
		if (p->state != CI_DONE)
			continue;
		if (p->kept)
			s->kept++;
		else
			s->retracted++;
		s->retract_stop_sum_ms += p->retract_stop_ms;
		if (p->retract_stop_ms > s->retract_stop_max_ms)
			s->retract_stop_max_ms = p->retract_stop_ms;
	}
	pthread_mutex_unlock(&ci->lock);
}
