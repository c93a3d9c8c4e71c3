// SPDX-License-Identifier: MIT
/*
 * libeprof_cupti.so: the CUDA injection library. The CUDA driver loads it
 * from CUDA_INJECTION64_PATH (set by `eprof record -- CMD`) and calls
 * InitializeInjection() in every process that initializes CUDA. It uses the
 * process's libcupti (the copy already loaded, else one found by name; never
 * a second copy), makes CUPTI stamp records with CLOCK_MONOTONIC (the clock
 * of eprof's BPF events), enables kernel, copy, set, synchronization and
 * device activity plus API callbacks (for the thread and correlation id of
 * each call), and streams eprof's compact records (eprof_gpu_proto.h) to the
 * recorder over the SOCK_SEQPACKET socket named by EPROF_CUPTI_SOCK.
 *
 * Nothing is lost silently: records that cannot be delivered, records with
 * zero or inverted times (work still in flight), records stamped by another
 * clock (another CUPTI user re-registered the timestamp callback) and
 * buffers whose reading stopped on an error are counted and sent in
 * EGPU_STATS; an EGPU_INFO record says which libcupti runs and, when
 * nothing is recorded, why.
 *
 * At exit the flush thread is stopped and joined, every context is
 * synchronized so that work still queued completes, and the records are
 * flushed; the socket stays open for the records a context teardown after
 * that delivers (the kernel closes it at exit). A child forked without exec
 * drops what it inherited and records nothing.
 *
 * Attach mode (`record -p`): eprof's injector (src/inject/inject.c) loads the library into a
 * running process and calls eprof_cupti_attach() with a channel; a thread of the library
 * does the setup (callbacks before activity, so that every kernel recorded after the
 * attach has its API record; contexts that exist already found through their devices'
 * primary contexts). At the end of the record eprof asks it to stop ('R' on the channel):
 * activity off, contexts synchronized, a last flush, CUPTI finalized (at an API exit when the
 * program makes one, as NVIDIA advises), then eprof_cupti_retract() joins the thread and
 * closes the channel so that dlclose leaves nothing behind.
 *
 * Built against the CUPTI headers found at configure time; the record
 * layouts (CUpti_ActivityKernel10 & co) hold for every libcupti of the same
 * major version.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cupti.h>

#include "eprof_gpu_proto.h"

#define EXPORT __attribute__((visibility("default")))
#define ACT_BUF_SIZE (1 << 20)
#define FLUSH_MS 200 /* default flush period */
#define MAX_CTX 64   /* contexts synchronized at exit */
/* A record more than this before the library started, or after now, is on another clock. */
#define CLOCK_SLACK_NS (60ULL * 1000000000ULL)
#define CB_IDS 4096 /* callback ids per domain whose names are remembered as sent */
/* Messages the socket has no room for wait in a backlog of this many bytes at most
 * (EPROF_CUPTI_BACKLOG_MB), then are dropped and counted. */
#define BACKLOG_MB 32
/* At exit and at the retraction the backlog is sent before going on, for as long as the
 * recorder keeps taking messages, and given up after this long without one taken. */
#define DRAIN_IDLE_MS 1000

static struct {
	typeof(&cuptiActivityRegisterCallbacks) reg_cb;
	typeof(&cuptiActivityEnable) enable;
	typeof(&cuptiActivityDisable) disable;
	typeof(&cuptiActivityRegisterTimestampCallback) reg_ts;
	typeof(&cuptiActivityGetNextRecord) next;
	typeof(&cuptiActivityFlushAll) flush_all;
	typeof(&cuptiActivityGetNumDroppedRecords) dropped;
	typeof(&cuptiSubscribe) subscribe;
	typeof(&cuptiUnsubscribe) unsubscribe;
	typeof(&cuptiEnableDomain) enable_domain;
	typeof(&cuptiGetVersion) version;
	typeof(&cuptiEnableCallback) enable_cb; /* optional */
	typeof(&cuptiGetCallbackName) cb_name;	/* optional */
	typeof(&cuptiFinalize) finalize;	/* optional: without it the library stays loaded */
	typeof(&cuptiActivityEnableAndDump) enable_dump; /* optional: devices already known */
} cupti;

/* The driver calls that let work queued at exit complete before the last flush. */
static struct {
	CUresult (*push)(CUcontext);
	CUresult (*pop)(CUcontext *);
	CUresult (*sync)(void);
	/* attach mode: the contexts that exist already, through their devices' primary ones */
	CUresult (*dev_count)(int *);
	CUresult (*dev_get)(CUdevice *, int);
	CUresult (*pctx_state)(CUdevice, unsigned *, int *);
	CUresult (*pctx_retain)(CUcontext *, CUdevice);
	CUresult (*pctx_release)(CUdevice);
	void *handle;
} cu;

static int sock_fd = -1, wake_fd = -1;
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
static _Alignas(8) unsigned char out_buf[EGPU_MSG_MAX];
static size_t out_len;
static uint32_t out_nrec;
static atomic_ullong n_dropped, n_sent, n_zero, n_inverted, n_foreign, n_buf_err;
/* The backlog, in order; out_lock. A message goes to the socket only when it is empty. */
struct held_msg {
	struct held_msg *next;
	size_t len;
	uint32_t nrec;
	_Alignas(8) unsigned char data[];
};
static struct held_msg *held_head, **held_tail = &held_head;
static size_t held_bytes, held_max = (size_t)BACKLOG_MB << 20;
static atomic_bool stopping, disarmed, verbose;
static pthread_t flusher;
static bool flusher_on;
static uint64_t t_init; /* CLOCK_MONOTONIC ns when the library started */
static char cupti_path[256];
/* attach mode */
static atomic_bool attach_mode, collector_done;
static char cupti_hint[sizeof(((struct egpu_attach_arg *)0)->cupti_hint)];
static void *cupti_handle;
static bool cupti_fresh;     /* loaded by us, not already in the process: never unloaded */
static bool cupti_hooked;    /* CUPTI holds our callbacks: finalize it before unloading */
static CUpti_SubscriberHandle subscriber;
static _Atomic uint32_t first_corr; /* the first API call's correlation id after the attach */
static atomic_bool finalize_req, finalize_claimed;
static pthread_mutex_t fin_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t fin_cond = PTHREAD_COND_INITIALIZER;
static uint32_t fin_how; /* 1: finalized from our thread, 2: at an API exit */
static const CUpti_ActivityKind kinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMSET,		   CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
    CUPTI_ACTIVITY_KIND_MEMCPY2, /* peer-to-peer copies */
    CUPTI_ACTIVITY_KIND_DEVICE,	 /* optional: without it, no occupancy figures */
};
static bool kind_on[sizeof(kinds) / sizeof(kinds[0])];

static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static CUcontext ctxs[MAX_CTX];
static size_t nctx;

static _Atomic uint64_t cb_sent[5][CB_IDS / 64]; /* (domain, cbid) whose name was sent */

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static uint64_t CUPTIAPI cupti_timestamp(void)
{
	return mono_ns();
}

/* --- sending ------------------------------------------------------------------------------ */

/* EPROF_CUPTI_BACKLOG_MB: the backlog's bound (0: a message the socket cannot take is dropped). */
static void set_backlog(const char *mb)
{
	char *end;
	unsigned long v;

	if (!mb || !*mb)
		return;
	v = strtoul(mb, &end, 10);
	if (!*end && v <= 4096)
		held_max = (size_t)v << 20;
}

/* Wakes the flush thread (it then sends the backlog as the socket makes room). */
static void kick_flusher(void)
{
	uint64_t one = 1;

	if (wake_fd >= 0 && write(wake_fd, &one, sizeof(one)) < 0)
		return; /* the counter is full: a wake-up is pending anyway */
}

/* Drops every held message (counted); out_lock held. */
static void held_drop_locked(bool count)
{
	while (held_head) {
		struct held_msg *m = held_head;

		held_head = m->next;
		if (count)
			atomic_fetch_add(&n_dropped, m->nrec);
		free(m);
	}
	held_tail = &held_head;
	held_bytes = 0;
}

/*
 * Sends held messages, oldest first, while the socket takes them without waiting; out_lock
 * held. True when the backlog is empty. A socket error (the recorder went away) drops them.
 */
static bool held_send_locked(void)
{
	while (held_head) {
		struct held_msg *m = held_head;
		ssize_t n = send(sock_fd, m->data, m->len, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return false;
		if (n == (ssize_t)m->len) {
			atomic_fetch_add(&n_sent, m->nrec);
		} else {
			held_drop_locked(true);
			return true;
		}
		held_head = m->next;
		if (!held_head)
			held_tail = &held_head;
		held_bytes -= m->len;
		free(m);
	}
	return true;
}

/*
 * Sends the backlog before the library stops sending (exit, retraction): waits for room as
 * long as the recorder keeps reading, and drops what is left after DRAIN_IDLE_MS in which
 * nothing went through.
 */
static void held_drain(void)
{
	size_t left = SIZE_MAX;
	int idle = 0;

	for (;;) {
		struct pollfd pf = {.fd = sock_fd, .events = POLLOUT};
		size_t now;

		pthread_mutex_lock(&out_lock);
		if (sock_fd < 0 || held_send_locked()) {
			held_drop_locked(true);
			pthread_mutex_unlock(&out_lock);
			return;
		}
		now = held_bytes;
		if (now < left)
			idle = 0;
		left = now;
		if (idle >= DRAIN_IDLE_MS) {
			held_drop_locked(true);
			pthread_mutex_unlock(&out_lock);
			return;
		}
		pthread_mutex_unlock(&out_lock);
		idle += poll(&pf, 1, 50) > 0 ? 1 : 50; /* writable yet refused: bounded too */
	}
}

/*
 * Sends the pending message; out_lock held. The program never waits on the recorder: a
 * message the socket has no room for (a recorder kept off the CPU) joins the backlog, which
 * the flush thread sends as room comes; only a full backlog drops messages (counted).
 */
static void send_locked(void)
{
	struct egpu_msg *m = (struct egpu_msg *)out_buf;
	struct held_msg *h;

	if (!out_nrec)
		return;
	m->magic = EGPU_MAGIC;
	m->version = EGPU_VERSION;
	m->flags = 0;
	m->pid = (uint32_t)getpid();
	m->nrec = out_nrec;
	if (sock_fd < 0 || atomic_load(&disarmed)) {
		atomic_fetch_add(&n_dropped, out_nrec);
		goto out;
	}
	if (!held_head) {
		ssize_t n = send(sock_fd, out_buf, out_len, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n == (ssize_t)out_len) {
			atomic_fetch_add(&n_sent, out_nrec);
			goto out;
		}
		if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
			atomic_fetch_add(&n_dropped, out_nrec);
			goto out;
		}
	}
	h = held_bytes + out_len <= held_max ? malloc(sizeof(*h) + out_len) : NULL;
	if (!h) {
		atomic_fetch_add(&n_dropped, out_nrec);
		goto out;
	}
	h->next = NULL;
	h->len = out_len;
	h->nrec = out_nrec;
	memcpy(h->data, out_buf, out_len);
	*held_tail = h;
	held_tail = &h->next;
	held_bytes += out_len;
	if (h == held_head)
		kick_flusher();
out:
	out_len = sizeof(struct egpu_msg);
	out_nrec = 0;
}

/* Appends a record: fixed bytes, then tail padded to 8 (rec->size says the total); lock held. */
static void put_locked(const void *rec, size_t fixed, const void *tail, size_t tail_len)
{
	size_t size = fixed + ((tail_len + 7) & ~(size_t)7);

	if (out_len + size > sizeof(out_buf))
		send_locked();
	if (out_len + size > sizeof(out_buf)) { /* larger than a message: cannot be sent */
		atomic_fetch_add(&n_dropped, 1);
		return;
	}
	memcpy(out_buf + out_len, rec, fixed);
	memset(out_buf + out_len + fixed, 0, size - fixed);
	if (tail_len)
		memcpy(out_buf + out_len + fixed, tail, tail_len);
	out_len += size;
	out_nrec++;
}

static void put(const void *rec, size_t size, const void *tail, size_t tail_len)
{
	pthread_mutex_lock(&out_lock);
	put_locked(rec, size, tail, tail_len);
	pthread_mutex_unlock(&out_lock);
}

/* A string as a record's tail: its length with the NUL, cut to what a message holds. */
static size_t tail_len(const char *s)
{
	size_t n = s ? strlen(s) + 1 : 1;

	return n > EGPU_NAME_MAX ? EGPU_NAME_MAX : n;
}

/* Puts a record whose tail is the string s (cut with a NUL when too long); lock held. */
static void put_str_locked(void *rec, size_t fixed, uint32_t *len_field, const char *s)
{
	static char cut[EGPU_NAME_MAX];
	size_t n = tail_len(s);

	*len_field = (uint32_t)n;
	((struct egpu_rec *)rec)->size = (uint16_t)(fixed + ((n + 7) & ~(size_t)7));
	if (s && n == strlen(s) + 1) {
		put_locked(rec, fixed, s, n);
		return;
	}
	memcpy(cut, s ? s : "", n - 1);
	cut[n - 1] = '\0';
	put_locked(rec, fixed, cut, n);
}

static void send_stats_locked(void)
{
	struct egpu_stats r = {.r = {EGPU_STATS, sizeof(r), 0, mono_ns(), mono_ns()}};

	r.dropped = atomic_load(&n_dropped);
	r.records = atomic_load(&n_sent) + out_nrec;
	r.zero_time = atomic_load(&n_zero);
	r.inverted_time = atomic_load(&n_inverted);
	r.foreign_clock = atomic_load(&n_foreign);
	r.buffer_errors = atomic_load(&n_buf_err);
	put_locked(&r, sizeof(r), NULL, 0);
	send_locked();
}

static void send_stats(void)
{
	pthread_mutex_lock(&out_lock);
	send_stats_locked();
	pthread_mutex_unlock(&out_lock);
}

/*
 * A line for the user: on stderr in launch mode (the program is eprof's child); over the
 * channel in attach mode, where the target's stderr is its own log.
 */
static void note(bool warn, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void note(bool warn, const char *fmt, ...)
{
	struct egpu_note r = {.r = {EGPU_NOTE, 0, 0, mono_ns(), mono_ns()}, .warn = warn};
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (!atomic_load(&attach_mode)) {
		if (warn || atomic_load(&verbose))
			fprintf(stderr, "eprof: %s\n", buf);
		return;
	}
	pthread_mutex_lock(&out_lock);
	put_str_locked(&r, sizeof(r), &r.text_len, buf);
	send_locked();
	pthread_mutex_unlock(&out_lock);
}

static void send_info(uint32_t version, uint32_t status)
{
	struct egpu_info r = {.r = {EGPU_INFO, sizeof(r), 0, mono_ns(), mono_ns()}};

	r.cupti_version = version;
	r.built_version = CUPTI_API_VERSION;
	r.status = status;
	pthread_mutex_lock(&out_lock);
	put_str_locked(&r, sizeof(r), &r.path_len, cupti_path);
	send_locked();
	pthread_mutex_unlock(&out_lock);
	if (atomic_load(&verbose) && !atomic_load(&attach_mode))
		fprintf(stderr, "eprof-cupti: pid %d: libcupti API %u from %s (built with %u), %s\n",
			(int)getpid(), version, cupti_path[0] ? cupti_path : "?", CUPTI_API_VERSION,
			status == EGPU_ST_OK ? "recording" : "not recording");
}

/* --- kernel names, sent once -------------------------------------------------------------- */

/*
 * CUPTI shares one name string among all records of a kernel, so the pointer names the kernel;
 * its length and first and last bytes guard against a string freed with its module and its
 * address reused for another. out_lock held for all of it.
 */
struct name_slot {
	const char *ptr;
	uint64_t check;
	uint32_t id;
};
static struct name_slot *names;
static size_t names_cap, names_n;
static uint32_t next_name_id = 1;

static uint64_t name_check(const char *s, size_t len)
{
	uint64_t h = 1469598103934665603ULL ^ len;
	size_t head = len < 64 ? len : 64, tail = len < 128 ? len - head : 64;

	for (size_t i = 0; i < head; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
	for (size_t i = len - tail; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
	return h;
}

static size_t name_slot_of(const struct name_slot *t, size_t cap, const char *p)
{
	size_t i = ((uintptr_t)p >> 3) * 0x9E3779B97F4A7C15ULL >> 20;

	for (i &= cap - 1; t[i].ptr && t[i].ptr != p; i = (i + 1) & (cap - 1))
		;
	return i;
}

static bool names_grow(void)
{
	size_t cap = names_cap ? 2 * names_cap : 1024;
	struct name_slot *t = calloc(cap, sizeof(*t));

	if (!t)
		return false;
	for (size_t i = 0; i < names_cap; i++)
		if (names[i].ptr)
			t[name_slot_of(t, cap, names[i].ptr)] = names[i];
	free(names);
	names = t;
	names_cap = cap;
	return true;
}

/* The id of kernel name s, sending an EGPU_NAME record the first time; lock held. */
static uint32_t name_id_locked(const char *s)
{
	struct egpu_name r = {.r = {EGPU_NAME, 0, 0, 0, 0}};
	size_t len, i;
	uint64_t check;

	if (!s)
		return 0;
	len = strlen(s);
	check = name_check(s, len);
	if (names_n + 1 > names_cap / 2 && !names_grow())
		return 0;
	i = name_slot_of(names, names_cap, s);
	if (names[i].ptr && names[i].check == check)
		return names[i].id;
	if (!names[i].ptr)
		names_n++;
	names[i] = (struct name_slot){s, check, next_name_id++};
	r.id = names[i].id;
	r.r.start = r.r.end = mono_ns();
	put_str_locked(&r, sizeof(r), &r.name_len, s);
	return r.id;
}

/* --- activity records --------------------------------------------------------------------- */

/*
 * CUPTI documents that kernel records can carry 0 timestamps, a forced flush returns work
 * still in flight, and ends before starts have been seen; another CUPTI user can re-register
 * the timestamp callback, so records come on its clock. Any of these would stretch a device's
 * window to the machine's uptime or beyond: counted and dropped.
 */
static bool bad_times(uint64_t start, uint64_t end)
{
	uint64_t now;

	if (!start || !end) {
		atomic_fetch_add(&n_zero, 1);
		return true;
	}
	if (end < start) {
		atomic_fetch_add(&n_inverted, 1);
		return true;
	}
	now = mono_ns();
	if (start + CLOCK_SLACK_NS < t_init || start > now + CLOCK_SLACK_NS) {
		atomic_fetch_add(&n_foreign, 1);
		return true;
	}
	return false;
}

static void put_kernel(const CUpti_ActivityKernel10 *k)
{
	struct egpu_kernel r = {0};

	r.r.kind = EGPU_KERNEL;
	r.r.size = sizeof(r);
	r.r.corr = k->correlationId;
	r.r.start = k->start;
	r.r.end = k->end;
	r.device = k->deviceId;
	r.context = k->contextId;
	r.stream = k->streamId;
	r.grid[0] = k->gridX;
	r.grid[1] = k->gridY;
	r.grid[2] = k->gridZ;
	r.block[0] = k->blockX;
	r.block[1] = k->blockY;
	r.block[2] = k->blockZ;
	r.regs = k->registersPerThread;
	r.smem = k->staticSharedMemory + k->dynamicSharedMemory;
	if (atomic_load(&attach_mode)) {
		uint32_t first = atomic_load(&first_corr);

		if (!first || k->correlationId < first)
			r.flags |= EGPU_KF_BEFORE_ATTACH;
	}
	pthread_mutex_lock(&out_lock);
	r.name_id = name_id_locked(k->name);
	put_locked(&r, sizeof(r), NULL, 0);
	pthread_mutex_unlock(&out_lock);
}

/* The limits the occupancy of a launch configuration is computed from (src/analysis/gpu_occ.c). */
static void put_device(const CUpti_ActivityDevice5 *d)
{
	struct egpu_device r = {0};

	r.r.kind = EGPU_DEVICE;
	r.r.start = r.r.end = mono_ns();
	r.device = d->id;
	r.sm_count = d->numMultiprocessors;
	r.warp_size = d->numThreadsPerWarp;
	r.max_warps_per_sm = d->maxWarpsPerMultiprocessor;
	r.max_blocks_per_sm = d->maxBlocksPerMultiprocessor;
	r.max_threads_per_block = d->maxThreadsPerBlock;
	r.max_regs_per_sm = d->maxRegistersPerMultiprocessor;
	r.max_regs_per_block = d->maxRegistersPerBlock;
	r.max_smem_per_sm = d->maxSharedMemoryPerMultiprocessor;
	r.max_smem_per_block = d->maxSharedMemoryPerBlock;
	r.cc_major = d->computeCapabilityMajor;
	r.cc_minor = d->computeCapabilityMinor;
	r.global_mem = d->globalMemorySize;
	pthread_mutex_lock(&out_lock);
	put_str_locked(&r, sizeof(r), &r.name_len, d->name);
	pthread_mutex_unlock(&out_lock);
	/* CUDA 13's cupti_activity.h: the client frees the device name. */
	free((void *)d->name);
}

/* A copy, from CUpti_ActivityMemcpy6 or (peer to peer) CUpti_ActivityMemcpyPtoP4. */
#define PUT_COPY(m, src, dst)                                                                      \
	do {                                                                                       \
		struct egpu_memcpy r_ = {                                                          \
		    .r = {EGPU_MEMCPY, sizeof(r_), (m)->correlationId, (m)->start, (m)->end},      \
		    .device = (m)->deviceId,                                                       \
		    .context = (m)->contextId,                                                     \
		    .stream = (m)->streamId,                                                       \
		    .copy_kind = (m)->copyKind,                                                    \
		    .src_kind = (m)->srcKind,                                                      \
		    .dst_kind = (m)->dstKind,                                                      \
		    .bytes = (m)->bytes,                                                           \
		    .src_device = (src),                                                           \
		    .dst_device = (dst)};                                                          \
                                                                                                   \
		if (!bad_times((m)->start, (m)->end))                                              \
			put(&r_, sizeof(r_), NULL, 0);                                             \
	} while (0)

static void put_record(const CUpti_Activity *a)
{
	switch (a->kind) {
	case CUPTI_ACTIVITY_KIND_KERNEL:
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
		const CUpti_ActivityKernel10 *k = (const void *)a;

		if (!bad_times(k->start, k->end))
			put_kernel(k);
		break;
	}
	case CUPTI_ACTIVITY_KIND_DEVICE:
		put_device((const CUpti_ActivityDevice5 *)a);
		break;
	case CUPTI_ACTIVITY_KIND_MEMCPY: {
		const CUpti_ActivityMemcpy6 *m = (const void *)a;

		PUT_COPY(m, m->deviceId, m->deviceId);
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMCPY2: {
		const CUpti_ActivityMemcpyPtoP4 *m = (const void *)a;

		PUT_COPY(m, m->srcDeviceId, m->dstDeviceId);
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMSET: {
		const CUpti_ActivityMemset4 *m = (const void *)a;
		struct egpu_memset r = {
		    .r = {EGPU_MEMSET, sizeof(r), m->correlationId, m->start, m->end},
		    .device = m->deviceId,
		    .context = m->contextId,
		    .stream = m->streamId,
		    .value = m->value,
		    .bytes = m->bytes};

		if (!bad_times(m->start, m->end))
			put(&r, sizeof(r), NULL, 0);
		break;
	}
	case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
		const CUpti_ActivitySynchronization2 *s = (const void *)a;
		struct egpu_sync r = {
		    .r = {EGPU_SYNC, sizeof(r), s->correlationId, s->start, s->end},
		    .context = s->contextId,
		    .stream = s->streamId,
		    .type = s->type};

		if (!bad_times(s->start, s->end))
			put(&r, sizeof(r), NULL, 0);
		break;
	}
	default:
		break;
	}
}

static void CUPTIAPI buffer_requested(uint8_t **buf, size_t *size, size_t *max_records)
{
	*buf = aligned_alloc(8, ACT_BUF_SIZE);
	*size = *buf ? ACT_BUF_SIZE : 0;
	*max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size,
				      size_t valid)
{
	CUpti_Activity *rec = NULL;
	CUptiResult st = CUPTI_ERROR_MAX_LIMIT_REACHED;
	size_t dropped = 0;

	if (!atomic_load(&disarmed)) {
		while ((st = cupti.next(buf, valid, &rec)) == CUPTI_SUCCESS)
			put_record(rec);
		if (st != CUPTI_ERROR_MAX_LIMIT_REACHED)
			atomic_fetch_add(&n_buf_err, 1);
		if (cupti.dropped && cupti.dropped(ctx, stream, &dropped) == CUPTI_SUCCESS &&
		    dropped)
			atomic_fetch_add(&n_dropped, dropped);
	}
	free(buf);
}

/* --- contexts: synchronized before the last flush ----------------------------------------- */

static void ctx_add(CUcontext c)
{
	pthread_mutex_lock(&ctx_lock);
	if (nctx < MAX_CTX)
		ctxs[nctx++] = c;
	pthread_mutex_unlock(&ctx_lock);
}

static bool ctx_remove(CUcontext c)
{
	bool found = false;

	pthread_mutex_lock(&ctx_lock);
	for (size_t i = 0; i < nctx; i++) {
		if (ctxs[i] == c) {
			ctxs[i] = ctxs[--nctx];
			found = true;
			break;
		}
	}
	pthread_mutex_unlock(&ctx_lock);
	return found;
}

/* Waits until the work queued on c has run, so a forced flush returns it complete. */
static void ctx_sync(CUcontext c)
{
	CUcontext old;

	if (!c || !cu.push || !cu.pop || !cu.sync || cu.push(c) != CUDA_SUCCESS)
		return;
	cu.sync();
	cu.pop(&old);
}

static void flush_forced(void)
{
	cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	send_stats();
}

/* --- API callbacks ------------------------------------------------------------------------ */

/* The function name of a callback id, sent before its first API record; lock held. */
static void note_cb_name_locked(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
				const char *name)
{
	struct egpu_cbname r = {.r = {EGPU_CBNAME, 0, 0, 0, 0}};
	uint64_t bit;

	if (!name || domain >= 5 || cbid >= CB_IDS)
		return;
	bit = 1ULL << (cbid % 64);
	if (atomic_fetch_or(&cb_sent[domain][cbid / 64], bit) & bit)
		return;
	r.domain = domain;
	r.cbid = cbid;
	r.r.start = r.r.end = mono_ns();
	put_str_locked(&r, sizeof(r), &r.name_len, name);
}

static void on_resource(CUpti_CallbackId cbid, const CUpti_ResourceData *rd)
{
	if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED) {
		ctx_add(rd->context);
	} else if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
		/* The last chance for this context's records: after at_exit too (cudart's
		 * teardown can run after it). */
		if (ctx_remove(rd->context))
			ctx_sync(rd->context);
		flush_forced();
	}
}

/*
 * NVIDIA's advice for detaching CUPTI: cuptiFinalize at the exit of an API call (the
 * retraction asks for it, and waits a moment for the program to make one).
 */
static void finalize_here(void)
{
	if (atomic_exchange(&finalize_claimed, true))
		return;
	cupti.finalize();
	pthread_mutex_lock(&fin_lock);
	fin_how = 2;
	pthread_cond_broadcast(&fin_cond);
	pthread_mutex_unlock(&fin_lock);
}

/* The thread id whose first API call was sent at once (EGPU_API_F_FIRST); a fork changes it. */
static __thread uint32_t announced_tid;

static void CUPTIAPI on_callback(void *userdata, CUpti_CallbackDomain domain,
				 CUpti_CallbackId cbid, const void *data)
{
	const CUpti_CallbackData *cb = data;
	struct egpu_api r = {0};

	if (atomic_load(&disarmed))
		return;
	if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
		on_resource(cbid, data);
		return;
	}
	if (cb->callbackSite != CUPTI_API_ENTER) {
		if (atomic_load(&finalize_req))
			finalize_here();
		return;
	}
	if (atomic_load(&attach_mode) && !atomic_load(&first_corr)) {
		uint32_t none = 0;

		atomic_compare_exchange_strong(&first_corr, &none, cb->correlationId);
	}
	r.r.kind = EGPU_API;
	r.r.size = sizeof(r);
	r.r.corr = cb->correlationId;
	r.r.start = r.r.end = mono_ns();
	r.tid = (uint32_t)syscall(SYS_gettid);
	r.cbid = cbid;
	r.domain = domain;
	if (announced_tid != r.tid)
		r.flags = EGPU_API_F_FIRST;
	pthread_mutex_lock(&out_lock);
	note_cb_name_locked(domain, cbid, cb->functionName);
	put_locked(&r, sizeof(r), NULL, 0);
	if (r.flags & EGPU_API_F_FIRST) {
		/* once per thread: the recorder maps a container's thread id while it runs */
		announced_tid = r.tid;
		send_locked();
	}
	pthread_mutex_unlock(&out_lock);
}

/* --- the flush thread, exit, fork --------------------------------------------------------- */

enum loop_end { END_EXIT, END_RETRACT, END_RECORDER_GONE };

/*
 * Flushes every FLUSH_MS (EPROF_CUPTI_FLUSH_MS), and at once, forced, when the recorder asks
 * (a message on the socket: it is stopping while we still run). Ends when at_exit wakes it,
 * and in attach mode when the recorder asks for the retraction or goes away.
 */
static enum loop_end run_flushes(void)
{
	const char *env = getenv("EPROF_CUPTI_FLUSH_MS");
	int ms = env && atoi(env) > 0 ? atoi(env) : FLUSH_MS;
	bool recorder_gone = false, attached = atomic_load(&attach_mode);
	uint64_t next = mono_ns() + (uint64_t)ms * 1000000ULL;

	while (!atomic_load(&stopping)) {
		uint64_t now = mono_ns();
		int wait = now >= next ? 0 : (int)((next - now + 999999) / 1000000);
		struct pollfd pf[2] = {{.fd = wake_fd, .events = POLLIN},
				       {.fd = recorder_gone ? -1 : sock_fd, .events = POLLIN}};
		bool asked = false, held;
		int r;

		pthread_mutex_lock(&out_lock);
		held = held_head != NULL;
		pthread_mutex_unlock(&out_lock);
		if (held)
			pf[1].events |= POLLOUT;
		r = poll(pf, 2, wait);
		/* the wake-up is a stop (stopping is set first) or a new backlog */
		if (atomic_load(&stopping))
			break;
		if (r > 0 && (pf[0].revents & POLLIN)) {
			uint64_t v;

			if (read(wake_fd, &v, sizeof(v)) < 0)
				v = 0;
		}
		if (r > 0 && (pf[1].revents & POLLIN)) {
			char c[16];
			ssize_t n = recv(sock_fd, c, sizeof(c), MSG_DONTWAIT);

			if (n > 0 && attached && memchr(c, EGPU_REQ_RETRACT, (size_t)n))
				return END_RETRACT;
			asked = n > 0;
		}
		if (r > 0 && (pf[1].revents & (POLLHUP | POLLERR))) {
			/* attach mode: nobody to record for, stop; launch mode: nothing more to
			 * send, keep CUPTI's buffers drained */
			if (attached)
				return END_RECORDER_GONE;
			recorder_gone = true;
		}
		if (held) {
			size_t before;

			pthread_mutex_lock(&out_lock);
			before = held_bytes;
			if (recorder_gone)
				held_drop_locked(true);
			else if (!held_send_locked() && held_bytes == before && r > 0 &&
				 (pf[1].revents & POLLOUT))
				wait = -1; /* said writable, took nothing: do not spin on it */
			pthread_mutex_unlock(&out_lock);
			if (wait < 0)
				nanosleep(&(struct timespec){0, 1000000}, NULL);
		}
		if (asked || mono_ns() >= next) {
			cupti.flush_all(asked ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
			send_stats();
			next = mono_ns() + (uint64_t)ms * 1000000ULL;
		}
	}
	return END_EXIT;
}

static void *flush_loop(void *arg)
{
	run_flushes();
	return NULL;
}

static void stop_flusher(void)
{
	uint64_t one = 1;

	atomic_store(&stopping, true);
	if (!flusher_on)
		return;
	/* without the wake-up, the poll's timeout still ends it */
	if (wake_fd < 0 || write(wake_fd, &one, sizeof(one)) != sizeof(one))
		atomic_store(&stopping, true);
	pthread_join(flusher, NULL);
	flusher_on = false;
}

static void at_exit(void)
{
	CUcontext c[MAX_CTX];
	size_t n;

	if (atomic_load(&disarmed))
		return;
	stop_flusher();
	if (atomic_load(&disarmed)) /* the collector was stopping: it has finished */
		return;
	/* Work still queued (a program that exits without synchronizing) completes first: a forced
	 * flush would return it unfinished, with zero times. */
	pthread_mutex_lock(&ctx_lock);
	n = nctx;
	memcpy(c, ctxs, n * sizeof(c[0]));
	pthread_mutex_unlock(&ctx_lock);
	for (size_t i = 0; i < n; i++)
		ctx_sync(c[i]);
	flush_forced();
	held_drain();
	if (atomic_load(&verbose) && atomic_load(&attach_mode))
		note(false, "at exit: %llu records sent, %llu dropped",
		     (unsigned long long)atomic_load(&n_sent),
		     (unsigned long long)atomic_load(&n_dropped));
	else if (atomic_load(&verbose))
		fprintf(stderr,
			"eprof-cupti: pid %d: %llu records sent, %llu dropped, %llu with a zero "
			"timestamp, %llu with end < start, %llu on another clock, %llu buffer "
			"errors\n",
			(int)getpid(), (unsigned long long)atomic_load(&n_sent),
			(unsigned long long)atomic_load(&n_dropped),
			(unsigned long long)atomic_load(&n_zero),
			(unsigned long long)atomic_load(&n_inverted),
			(unsigned long long)atomic_load(&n_foreign),
			(unsigned long long)atomic_load(&n_buf_err));
	/* The socket stays open: a context destroyed after this still sends its records. */
}

/* fork without exec: hold the output lock across it, so neither side inherits it taken. */
static void atfork_prepare(void)
{
	pthread_mutex_lock(&out_lock);
}

static void atfork_parent(void)
{
	pthread_mutex_unlock(&out_lock);
}

/*
 * The child has the parent's unsent records, socket and exit handler but no flush thread,
 * and CUDA does not work in it: it drops the records and sends nothing, ever.
 */
static void atfork_child(void)
{
	atomic_store(&disarmed, true);
	out_len = sizeof(struct egpu_msg);
	out_nrec = 0;
	held_drop_locked(false); /* the parent's: it sends them */
	flusher_on = false;
	if (sock_fd >= 0)
		close(sock_fd);
	sock_fd = -1;
	if (wake_fd >= 0)
		close(wake_fd);
	wake_fd = -1;
	pthread_mutex_unlock(&out_lock);
}

/* --- setup -------------------------------------------------------------------------------- */

static void note_path(void *h, const char *sym)
{
	Dl_info info;
	void *f = h ? dlsym(h, sym) : NULL;

	if (f && dladdr(f, &info) && info.dli_fname)
		snprintf(cupti_path, sizeof(cupti_path), "%s", info.dli_fname);
}

/*
 * One libcupti per process: a PyTorch process has usually loaded libcupti.so.13 (or .12) from
 * its own wheel already, and a second copy from another directory would keep state of its own
 * the first never sees. So: a copy already loaded (RTLD_NOLOAD, versioned names first), then
 * EPROF_LIBCUPTI, then the versioned names on the search path, then the toolkit's.
 */
static void *open_cupti(void)
{
	static const char *const loaded[] = {"libcupti.so.13", "libcupti.so.12", "libcupti.so"};
	static const char *const names_[] = {
	    "libcupti.so.13",
	    "libcupti.so.12",
	    "libcupti.so",
	    "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so",
	    "/usr/local/cuda/lib64/libcupti.so",
	};
	const char *env = getenv("EPROF_LIBCUPTI");
	void *h = NULL;

	for (size_t i = 0; !h && i < sizeof(loaded) / sizeof(loaded[0]); i++)
		h = dlopen(loaded[i], RTLD_NOW | RTLD_NOLOAD);
	cupti_fresh = !h;
	if (!h && env && *env)
		h = dlopen(env, RTLD_NOW);
	if (!h && cupti_hint[0]) /* attach mode: the one of the program's CUDA install */
		h = dlopen(cupti_hint, RTLD_NOW);
	for (size_t i = 0; !h && i < sizeof(names_) / sizeof(names_[0]); i++)
		h = dlopen(names_[i], RTLD_NOW);
	note_path(h, "cuptiGetVersion");
	return h;
}

/*
 * The socket's directory under /tmp is free again once the recording ended, and anyone may
 * make one of the same name: only a root peer (the recorder) is talked to.
 */
static bool peer_is_root(int fd)
{
	struct ucred cr = { 0 };
	socklen_t len = sizeof(cr);

	return !getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) && len == sizeof(cr) &&
	       cr.uid == 0;
}

/*
 * No recorder (the recording ended): the programs this process starts get nothing of eprof
 * in their environment.
 */
static void env_scrub(void)
{
	const char *lib = getenv("CUDA_INJECTION64_PATH");
	const char *base = lib ? strrchr(lib, '/') : NULL;

	base = base ? base + 1 : lib;
	if (base && !strncmp(base, "libeprof_", 9))
		unsetenv("CUDA_INJECTION64_PATH");
	unsetenv("EPROF_CUPTI_SOCK");
}

static int connect_recorder(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	const char *path = getenv("EPROF_CUPTI_SOCK");
	int fd;

	if (!path || strlen(path) >= sizeof(sa.sun_path))
		return -1;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) || !peer_is_root(fd)) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * Callbacks only for the calls that queue GPU work: their correlation ids are all the join
 * needs, and a callback on every API call (cudaGetDevice runs millions of times in PyTorch)
 * would cost each of them. Without callback names: the whole domain.
 */
static CUptiResult enable_work_callbacks(CUpti_SubscriberHandle sub, CUpti_CallbackDomain dom,
					 uint32_t ncbid)
{
	static const char *const work[] = {
	    "cudaLaunch",   "__cudaLaunch", "cudaMemcpy",   "cudaMemset", "cudaGraphLaunch",
	    "cuLaunch",	    "cuMemcpy",	    "cuMemset",	    "cuGraphLaunch"};
	uint32_t on = 0;

	for (uint32_t id = 1; cupti.cb_name && cupti.enable_cb && id < ncbid; id++) {
		const char *name = NULL;

		if (cupti.cb_name(dom, id, &name) != CUPTI_SUCCESS || !name)
			continue;
		for (size_t i = 0; i < sizeof(work) / sizeof(work[0]); i++) {
			if (!strncmp(name, work[i], strlen(work[i]))) {
				on += cupti.enable_cb(1, sub, dom, id) == CUPTI_SUCCESS;
				break;
			}
		}
	}
	return on ? CUPTI_SUCCESS : cupti.enable_domain(1, sub, dom);
}

static bool load_cupti(void *h)
{
#define SYM(field, name)                                                                           \
	do {                                                                                       \
		cupti.field = (typeof(cupti.field))dlsym(h, #name);                                \
		if (!cupti.field)                                                                  \
			return false;                                                              \
	} while (0)
	SYM(reg_cb, cuptiActivityRegisterCallbacks);
	SYM(enable, cuptiActivityEnable);
	SYM(disable, cuptiActivityDisable);
	SYM(reg_ts, cuptiActivityRegisterTimestampCallback);
	SYM(next, cuptiActivityGetNextRecord);
	SYM(flush_all, cuptiActivityFlushAll);
	SYM(subscribe, cuptiSubscribe);
	SYM(unsubscribe, cuptiUnsubscribe);
	SYM(enable_domain, cuptiEnableDomain);
	SYM(version, cuptiGetVersion);
#undef SYM
	cupti.dropped = (typeof(cupti.dropped))dlsym(h, "cuptiActivityGetNumDroppedRecords");
	cupti.enable_cb = (typeof(cupti.enable_cb))dlsym(h, "cuptiEnableCallback");
	cupti.cb_name = (typeof(cupti.cb_name))dlsym(h, "cuptiGetCallbackName");
	cupti.finalize = (typeof(cupti.finalize))dlsym(h, "cuptiFinalize");
	cupti.enable_dump = (typeof(cupti.enable_dump))dlsym(h, "cuptiActivityEnableAndDump");
	return true;
}

static void load_driver(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);

	if (!h)
		return;
	cu.handle = h;
	cu.push = (typeof(cu.push))dlsym(h, "cuCtxPushCurrent_v2");
	cu.pop = (typeof(cu.pop))dlsym(h, "cuCtxPopCurrent_v2");
	cu.sync = (typeof(cu.sync))dlsym(h, "cuCtxSynchronize");
	cu.dev_count = (typeof(cu.dev_count))dlsym(h, "cuDeviceGetCount");
	cu.dev_get = (typeof(cu.dev_get))dlsym(h, "cuDeviceGet");
	cu.pctx_state = (typeof(cu.pctx_state))dlsym(h, "cuDevicePrimaryCtxGetState");
	cu.pctx_retain = (typeof(cu.pctx_retain))dlsym(h, "cuDevicePrimaryCtxRetain");
	cu.pctx_release = (typeof(cu.pctx_release))dlsym(h, "cuDevicePrimaryCtxRelease_v2");
	if (!cu.pctx_release)
		cu.pctx_release = (typeof(cu.pctx_release))dlsym(h, "cuDevicePrimaryCtxRelease");
}

/* Everything enabled so far off again: a failed setup costs the program nothing. */
static void undo(CUpti_SubscriberHandle *sub)
{
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (kind_on[i])
			cupti.disable(kinds[i]);
	memset(kind_on, 0, sizeof(kind_on));
	if (sub)
		cupti.unsubscribe(*sub);
	cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

/* Activity kinds on; in attach mode device records of the devices known already too. */
static bool enable_kinds(bool dump)
{
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		bool dev = kinds[i] == CUPTI_ACTIVITY_KIND_DEVICE;

		kind_on[i] = (dev && dump && cupti.enable_dump ? cupti.enable_dump(kinds[i])
							      : cupti.enable(kinds[i])) ==
			     CUPTI_SUCCESS;
		if (!kind_on[i] && dev)
			note(true, "CUPTI gives no device records: no occupancy figures");
		else if (!kind_on[i] && kinds[i] != CUPTI_ACTIVITY_KIND_MEMCPY2)
			return false;
	}
	return true;
}

static bool enable_callbacks(void)
{
	if (enable_work_callbacks(subscriber, CUPTI_CB_DOMAIN_RUNTIME_API,
				  CUPTI_RUNTIME_TRACE_CBID_SIZE) != CUPTI_SUCCESS ||
	    enable_work_callbacks(subscriber, CUPTI_CB_DOMAIN_DRIVER_API,
				  CUPTI_DRIVER_TRACE_CBID_SIZE) != CUPTI_SUCCESS)
		return false;
	/* Contexts, to synchronize them before the last flush. Optional. */
	if (cupti.enable_cb) {
		cupti.enable_cb(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE,
				CUPTI_CBID_RESOURCE_CONTEXT_CREATED);
		cupti.enable_cb(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE,
				CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING);
	}
	return true;
}

/*
 * Launch mode turns activity on before the callbacks (nothing runs yet); attach mode the
 * callbacks first, so that no kernel recorded after the attach lacks its API record.
 */
static uint32_t setup(uint32_t *version, bool attach)
{
	CUptiResult r;
	void *h = open_cupti();

	if (!h) {
		note(true, "failed to load libcupti: %s", dlerror());
		return EGPU_ST_NO_CUPTI;
	}
	cupti_handle = h;
	if (!load_cupti(h)) {
		note(true, "%s lacks a CUPTI function eprof needs", cupti_path);
		return EGPU_ST_NO_CUPTI;
	}
	/* Records are read with this build's layouts, which hold within a major version: minor
	 * and update releases only append fields (13.0 GA is 130000, 13.0 Update 1 130001). */
	if (cupti.version(version) != CUPTI_SUCCESS ||
	    *version / 10000 != CUPTI_API_VERSION / 10000) {
		note(true,
		     "libcupti API version %u does not match the %u eprof was built with: GPU "
		     "activity is not recorded",
		     *version, CUPTI_API_VERSION);
		return EGPU_ST_VERSION;
	}
	/* Subscribe first: with another subscriber (torch.profiler, Nsight, DCGM) nothing else
	 * is turned on. */
	r = cupti.subscribe(&subscriber, on_callback, NULL);
	if (r != CUPTI_SUCCESS) {
		note(true,
		     "CUPTI %s: GPU activity is not recorded (CPU and CUDA API profiling go on)",
		     r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
			 ? "already has a subscriber (torch.profiler, Nsight or DCGM profiling)"
			 : "refused a subscriber");
		return r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED ? EGPU_ST_SUBSCRIBED
									 : EGPU_ST_SETUP;
	}
	/* The clock first: every record after this is in CLOCK_MONOTONIC ns. */
	cupti_hooked = true;
	if (cupti.reg_ts(cupti_timestamp) != CUPTI_SUCCESS ||
	    cupti.reg_cb(buffer_requested, buffer_completed) != CUPTI_SUCCESS)
		goto fail;
	if (attach ? !enable_callbacks() || !enable_kinds(true)
		   : !enable_kinds(false) || !enable_callbacks())
		goto fail;
	return EGPU_ST_OK;
fail:
	note(true, "CUPTI setup failed: GPU activity is not recorded");
	undo(&subscriber);
	return EGPU_ST_SETUP;
}

EXPORT int InitializeInjection(void)
{
	uint32_t version = 0, status;

	if (sock_fd >= 0 || atomic_load(&disarmed))
		return 1;
	atomic_store(&verbose, getenv("EPROF_CUPTI_VERBOSE") && *getenv("EPROF_CUPTI_VERBOSE"));
	set_backlog(getenv("EPROF_CUPTI_BACKLOG_MB"));
	t_init = mono_ns();
	sock_fd = connect_recorder();
	if (sock_fd < 0) {
		env_scrub();
		return 1; /* not under eprof: stay out of the way */
	}
	out_len = sizeof(struct egpu_msg);
	status = setup(&version, false);
	send_info(version, status);
	if (status != EGPU_ST_OK) {
		send_stats();
		held_drain();
		close(sock_fd);
		sock_fd = -1;
		return 1;
	}
	load_driver();
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
	wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	flusher_on = !pthread_create(&flusher, NULL, flush_loop, NULL);
	atexit(at_exit);
	return 1;
}

/* --- attach mode (record -p): loaded by eprof's injector into a running process ------------- */

/*
 * The contexts the program made before the attach: no CONTEXT_CREATED callback came for
 * them. The primary context of every device that has an active one (what the runtime API,
 * and so PyTorch, uses); retained only to learn its handle, released at once so the program's
 * own reference count is what it was. Contexts made with cuCtxCreate before the attach are
 * not found: their work completes unsynchronized at the retraction (forced flush).
 */
static void find_contexts(void)
{
	int n = 0;

	if (!cu.dev_count || !cu.dev_get || !cu.pctx_state || !cu.pctx_retain ||
	    !cu.pctx_release || cu.dev_count(&n) != CUDA_SUCCESS)
		return; /* CUDA not initialized yet: its contexts will be announced */
	for (int i = 0; i < n; i++) {
		CUdevice dev;
		CUcontext ctx = NULL;
		unsigned flags = 0;
		int active = 0;

		if (cu.dev_get(&dev, i) != CUDA_SUCCESS ||
		    cu.pctx_state(dev, &flags, &active) != CUDA_SUCCESS || !active ||
		    cu.pctx_retain(&ctx, dev) != CUDA_SUCCESS)
			continue;
		cu.pctx_release(dev);
		ctx_add(ctx);
	}
}

static void send_thread(void)
{
	struct egpu_thread r = {.r = {EGPU_THREAD, sizeof(r), 0, mono_ns(), mono_ns()}};

	r.tid = (uint32_t)syscall(SYS_gettid);
	put(&r, sizeof(r), NULL, 0);
}

/*
 * Lets go of CUPTI so that it never calls into this library again: cuptiFinalize at the
 * exit of an API call when the program makes one within 200 ms, else from here (activity
 * is off, contexts synchronized and buffers flushed by then, as NVIDIA asks). 0: no
 * cuptiFinalize in this libcupti (unsubscribed only: the library must stay loaded).
 */
static uint32_t finalize_cupti(void)
{
	struct timespec until;
	uint32_t how;

	if (!cupti.finalize) {
		cupti.unsubscribe(subscriber);
		return 0;
	}
	atomic_store(&finalize_req, true);
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_nsec += 200000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&fin_lock);
	while (!fin_how && pthread_cond_timedwait(&fin_cond, &fin_lock, &until) == 0)
		;
	if (!fin_how && !atomic_exchange(&finalize_claimed, true)) {
		pthread_mutex_unlock(&fin_lock);
		cupti.finalize();
		pthread_mutex_lock(&fin_lock);
		fin_how = 1;
	}
	while (!fin_how) /* a callback is finalizing right now */
		pthread_cond_wait(&fin_cond, &fin_lock);
	how = fin_how;
	pthread_mutex_unlock(&fin_lock);
	return how;
}

/* The last record: the recorder may unload the library now (unless keep). */
static void send_bye(uint32_t finalized, uint32_t keep, uint32_t contexts)
{
	struct egpu_bye r = {.r = {EGPU_BYE, sizeof(r), 0, mono_ns(), mono_ns()}};

	r.finalized = finalized;
	r.keep = keep;
	r.contexts = contexts;
	put(&r, sizeof(r), NULL, 0);
	send_stats();
}

/* The retraction's work, on the collector's thread while the program runs on. */
static void detach_cupti(void)
{
	uint32_t how;
	CUcontext c[MAX_CTX];
	size_t n;

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (kind_on[i])
			cupti.disable(kinds[i]);
	memset(kind_on, 0, sizeof(kind_on));
	/* work queued before activity went off completes, and comes out whole */
	pthread_mutex_lock(&ctx_lock);
	n = nctx;
	memcpy(c, ctxs, n * sizeof(c[0]));
	pthread_mutex_unlock(&ctx_lock);
	for (size_t i = 0; i < n; i++)
		ctx_sync(c[i]);
	flush_forced();
	how = finalize_cupti();
	send_bye(how, !how, (uint32_t)n);
	held_drain();
	atomic_store(&disarmed, true);
}

static void *collector_main(void *arg)
{
	uint32_t version = 0, status;
	enum loop_end end;

	pthread_setname_np(pthread_self(), "eprof-cupti");
	send_thread();
	status = setup(&version, true);
	send_info(version, status);
	if (status != EGPU_ST_OK) {
		uint32_t how = 0;

		/* CUPTI may hold our callbacks when the setup failed late */
		if (cupti_hooked && cupti.finalize)
			how = finalize_cupti();
		send_bye(how, cupti_hooked && !how, 0);
		held_drain();
		atomic_store(&disarmed, true);
		atomic_store(&collector_done, true);
		return NULL;
	}
	load_driver();
	find_contexts();
	note(false, "recording GPU activity with %s (API %u)", cupti_path, version);
	end = run_flushes();
	if (end != END_EXIT) /* at_exit does the rest */
		detach_cupti();
	atomic_store(&collector_done, true);
	return NULL;
}

/*
 * Attach mode's entry, called by eprof's injector in a thread of the program it borrows for
 * a moment: takes the channel and starts the collector's thread, which does the setup while
 * the program runs on. 0, or a negative errno.
 */
EXPORT int eprof_cupti_attach(const void *arg)
{
	const struct egpu_attach_arg *a = arg;

	if (!a || a->fd < 0)
		return -EINVAL;
	if (sock_fd >= 0 || flusher_on || atomic_load(&disarmed))
		return -EALREADY; /* launched under eprof, or attached already */
	atomic_store(&attach_mode, true);
	atomic_store(&verbose, (a->flags & EGPU_ATTACH_VERBOSE) != 0);
	memcpy(cupti_hint, a->cupti_hint, sizeof(cupti_hint));
	cupti_hint[sizeof(cupti_hint) - 1] = '\0';
	if (a->backlog_mb && a->backlog_mb <= 4097)
		held_max = (size_t)(a->backlog_mb - 1) << 20;
	t_init = mono_ns();
	sock_fd = a->fd;
	out_len = sizeof(struct egpu_msg);
	wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	flusher_on = !pthread_create(&flusher, NULL, collector_main, NULL);
	if (!flusher_on) {
		close(sock_fd);
		sock_fd = -1;
		if (wake_fd >= 0)
			close(wake_fd);
		wake_fd = -1;
		return -EAGAIN;
	}
	/* registered with this library's handle: glibc drops them at dlclose */
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
	atexit(at_exit);
	return 0;
}

/*
 * Attach mode's end, called through the injector after the collector answered the
 * recorder's 'R' with EGPU_BYE: joins the thread and lets go of everything, so that dlclose
 * unloads the library. 0, or EBUSY when the library must stay loaded (the collector has not
 * stopped, or CUPTI still holds its callbacks).
 */
EXPORT int eprof_cupti_retract(uint64_t arg)
{
	if (!atomic_load(&attach_mode))
		return 0;
	if (!atomic_load(&collector_done))
		return EBUSY;
	if (flusher_on) {
		pthread_join(flusher, NULL);
		flusher_on = false;
	}
	atomic_store(&disarmed, true);
	if (cupti_hooked && !fin_how)
		return EBUSY;
	pthread_mutex_lock(&out_lock);
	held_drop_locked(true);
	if (sock_fd >= 0)
		close(sock_fd);
	sock_fd = -1;
	pthread_mutex_unlock(&out_lock);
	if (wake_fd >= 0)
		close(wake_fd);
	wake_fd = -1;
	if (cupti_handle && !cupti_fresh)
		dlclose(cupti_handle); /* a reference on the program's own copy */
	cupti_handle = NULL;
	if (cu.handle)
		dlclose(cu.handle);
	cu.handle = NULL;
	free(names);
	names = NULL;
	names_cap = names_n = 0;
	return 0;
}
