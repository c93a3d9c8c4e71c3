// SPDX-License-Identifier: MIT
/*
 * libeprof_cupti.so: the CUDA injection library. The CUDA driver loads it
 * from CUDA_INJECTION64_PATH (set by `eprof record -- CMD`) and calls
 * InitializeInjection() in every process that initializes CUDA. It opens
 * libcupti with dlopen (no link-time dependency), makes CUPTI stamp records
 * with CLOCK_MONOTONIC (the clock of eprof's BPF events), enables kernel,
 * copy, set, synchronization and device activity plus API callbacks (for the
 * thread and correlation id of each call), and streams eprof's compact
 * records (eprof_gpu_proto.h) to the recorder over the SOCK_SEQPACKET
 * socket named by EPROF_CUPTI_SOCK. Records that cannot be delivered are
 * counted and reported in an EGPU_STATS record.
 *
 * Built against the CUPTI headers found at configure time; the record
 * layouts (CUpti_ActivityKernel10 & co) must match the libcupti loaded.
 */
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static struct {
	typeof(&cuptiActivityRegisterCallbacks) reg_cb;
	typeof(&cuptiActivityEnable) enable;
	typeof(&cuptiActivityRegisterTimestampCallback) reg_ts;
	typeof(&cuptiActivityGetNextRecord) next;
	typeof(&cuptiActivityFlushAll) flush_all;
	typeof(&cuptiActivityGetNumDroppedRecords) dropped;
	typeof(&cuptiSubscribe) subscribe;
	typeof(&cuptiEnableDomain) enable_domain;
	typeof(&cuptiGetVersion) version;
	typeof(&cuptiEnableCallback) enable_cb; /* optional */
	typeof(&cuptiGetCallbackName) cb_name;	/* optional */
} cupti;

static int sock_fd = -1;
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
static _Alignas(8) unsigned char out_buf[EGPU_MSG_MAX];
static size_t out_len;
static uint32_t out_nrec;
static atomic_ullong n_dropped, n_sent;
/* Activity records with a zero start or end, or an end before the start: dropped, counted. */
static atomic_ullong n_zero_ts, n_inverted_ts;
static bool verbose; /* EPROF_CUPTI_VERBOSE: what was loaded and sent, on stderr */
static atomic_bool stopping;
static pthread_t flusher;
static bool flusher_on;

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

/* Sends the pending message; out_lock held. */
static void send_locked(void)
{
	struct egpu_msg *m = (struct egpu_msg *)out_buf;

	if (!out_nrec)
		return;
	m->magic = EGPU_MAGIC;
	m->version = EGPU_VERSION;
	m->flags = 0;
	m->pid = (uint32_t)getpid();
	m->nrec = out_nrec;
	if (sock_fd < 0 || send(sock_fd, out_buf, out_len, MSG_NOSIGNAL) != (ssize_t)out_len)
		atomic_fetch_add(&n_dropped, out_nrec);
	else
		atomic_fetch_add(&n_sent, out_nrec);
	out_len = sizeof(struct egpu_msg);
	out_nrec = 0;
}

/* Appends a record: fixed bytes, then tail padded to 8 (rec->size says the total); lock held. */
static void put_locked(const void *rec, size_t fixed, const void *tail, size_t tail_len)
{
	size_t size = fixed + ((tail_len + 7) & ~(size_t)7);

	if (out_len + size > sizeof(out_buf))
		send_locked();
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

static void put_kernel(const CUpti_ActivityKernel10 *k)
{
	struct egpu_kernel r = {0};
	size_t n = k->name ? strlen(k->name) + 1 : 1;

	if (n > EGPU_NAME_MAX)
		n = EGPU_NAME_MAX;
	r.r.kind = EGPU_KERNEL;
	r.r.size = sizeof(r) + ((n + 7) & ~(size_t)7);
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
	r.name_len = n;
	{
		char name[EGPU_NAME_MAX];

		memcpy(name, k->name ? k->name : "", n - 1);
		name[n - 1] = '\0';
		put(&r, sizeof(r), name, n);
	}
}

/* The limits the occupancy of a launch configuration is computed from (src/analysis/gpu_occ.c). */
static void put_device(const CUpti_ActivityDevice5 *d)
{
	struct egpu_device r = {0};
	size_t n = d->name ? strlen(d->name) + 1 : 1;
	char name[EGPU_NAME_MAX];

	if (n > EGPU_NAME_MAX)
		n = EGPU_NAME_MAX;
	r.r.kind = EGPU_DEVICE;
	r.r.size = sizeof(r) + ((n + 7) & ~(size_t)7);
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
	r.name_len = n;
	memcpy(name, d->name ? d->name : "", n - 1);
	name[n - 1] = '\0';
	put(&r, sizeof(r), name, n);
	/* CUDA 13's cupti_activity.h: the client frees the device name. */
	free((void *)d->name);
}

/*
 * CUPTI documents that kernel records can carry 0 timestamps, a forced flush returns work
 * still in flight, and ends before starts have been seen: such a record would stretch a
 * device's window to the machine's uptime. Counted and dropped.
 */
static bool bad_times(uint64_t start, uint64_t end)
{
	if (!start || !end) {
		atomic_fetch_add(&n_zero_ts, 1);
		return true;
	}
	if (end < start) {
		atomic_fetch_add(&n_inverted_ts, 1);
		return true;
	}
	return false;
}

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
		break;
	case CUPTI_ACTIVITY_KIND_DEVICE:
		put_device((const CUpti_ActivityDevice5 *)a);
		break;
	case CUPTI_ACTIVITY_KIND_MEMCPY: {
		const CUpti_ActivityMemcpy6 *m = (const void *)a;
		struct egpu_memcpy r = {
		    .r = {EGPU_MEMCPY, sizeof(r), m->correlationId, m->start, m->end},
		    .device = m->deviceId,
		    .context = m->contextId,
		    .stream = m->streamId,
		    .copy_kind = m->copyKind,
		    .src_kind = m->srcKind,
		    .dst_kind = m->dstKind,
		    .bytes = m->bytes};

		if (!bad_times(m->start, m->end))
			put(&r, sizeof(r), NULL, 0);
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
	size_t dropped = 0;

	while (cupti.next(buf, valid, &rec) == CUPTI_SUCCESS)
		put_record(rec);
	if (cupti.dropped && cupti.dropped(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped)
		atomic_fetch_add(&n_dropped, dropped);
	free(buf);
}

static void CUPTIAPI on_api(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
			    const void *data)
{
	const CUpti_CallbackData *cb = data;
	struct egpu_api r = {0};

	if (cb->callbackSite != CUPTI_API_ENTER)
		return;
	r.r.kind = EGPU_API;
	r.r.size = sizeof(r);
	r.r.corr = cb->correlationId;
	r.r.start = r.r.end = mono_ns();
	r.tid = (uint32_t)syscall(SYS_gettid);
	r.cbid = cbid;
	r.domain = domain;
	put(&r, sizeof(r), NULL, 0);
}

static void send_stats(void)
{
	struct egpu_stats r = {.r = {EGPU_STATS, sizeof(r), 0, mono_ns(), mono_ns()}};

	pthread_mutex_lock(&out_lock);
	r.dropped = atomic_load(&n_dropped);
	r.records = atomic_load(&n_sent) + out_nrec;
	put_locked(&r, sizeof(r), NULL, 0);
	send_locked();
	pthread_mutex_unlock(&out_lock);
}

/*
 * Flushes every FLUSH_MS (EPROF_CUPTI_FLUSH_MS), and at once, forced, when the recorder asks
 * (a message on the socket: it is stopping while we still run).
 */
static void *flush_loop(void *arg)
{
	const char *env = getenv("EPROF_CUPTI_FLUSH_MS");
	int ms = env && atoi(env) > 0 ? atoi(env) : FLUSH_MS;

	while (!atomic_load(&stopping)) {
		struct pollfd pf = {.fd = sock_fd, .events = POLLIN};
		int r = poll(&pf, 1, ms);
		bool asked = false;

		if (r > 0 && (pf.revents & POLLIN)) {
			char c[16];

			asked = recv(sock_fd, c, sizeof(c), MSG_DONTWAIT) > 0;
		}
		cupti.flush_all(asked ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
		send_stats();
		if (r > 0 && (pf.revents & (POLLHUP | POLLERR)))
			break; /* the recorder is gone: nothing more to send */
	}
	return NULL;
}

static void at_exit(void)
{
	atomic_store(&stopping, true);
	cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	send_stats();
	if (verbose)
		fprintf(stderr,
			"eprof-cupti: pid %d: %llu records sent, %llu dropped, %llu with a zero "
			"timestamp, %llu with end < start\n",
			(int)getpid(), (unsigned long long)atomic_load(&n_sent),
			(unsigned long long)atomic_load(&n_dropped),
			(unsigned long long)atomic_load(&n_zero_ts),
			(unsigned long long)atomic_load(&n_inverted_ts));
	if (sock_fd >= 0)
		close(sock_fd);
	sock_fd = -1;
}

/* The file the library was loaded from, for the recorder's log (empty when unknown). */
static char cupti_path[256];

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
	static const char *const names[] = {
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
	if (!h && env && *env)
		h = dlopen(env, RTLD_NOW);
	for (size_t i = 0; !h && i < sizeof(names) / sizeof(names[0]); i++)
		h = dlopen(names[i], RTLD_NOW);
	note_path(h, "cuptiGetVersion");
	return h;
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
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
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
	static const char *const work[] = {"cudaLaunch",      "cudaMemcpy",   "cudaMemset",
					   "cudaGraphLaunch", "cuLaunch",     "cuMemcpy",
					   "cuMemset",	      "cuGraphLaunch"};
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

#define SYM(field, name)                                                                           \
	do {                                                                                       \
		cupti.field = (typeof(cupti.field))dlsym(h, #name);                                \
		if (!cupti.field)                                                                  \
			goto fail;                                                                 \
	} while (0)

EXPORT int InitializeInjection(void)
{
	static const CUpti_ActivityKind kinds[] = {
	    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
	    CUPTI_ACTIVITY_KIND_MEMCPY,
	    CUPTI_ACTIVITY_KIND_MEMSET,
	    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
	};
	CUpti_SubscriberHandle sub;
	void *h;

	if (sock_fd >= 0)
		return 1;
	verbose = getenv("EPROF_CUPTI_VERBOSE") && *getenv("EPROF_CUPTI_VERBOSE");
	sock_fd = connect_recorder();
	if (sock_fd < 0)
		return 1; /* not under eprof: stay out of the way */
	out_len = sizeof(struct egpu_msg);
	h = open_cupti();
	if (!h) {
		fprintf(stderr, "eprof: failed to load libcupti: %s\n", dlerror());
		goto fail_quiet;
	}
	SYM(reg_cb, cuptiActivityRegisterCallbacks);
	SYM(enable, cuptiActivityEnable);
	SYM(reg_ts, cuptiActivityRegisterTimestampCallback);
	SYM(next, cuptiActivityGetNextRecord);
	SYM(flush_all, cuptiActivityFlushAll);
	SYM(subscribe, cuptiSubscribe);
	SYM(enable_domain, cuptiEnableDomain);
	SYM(version, cuptiGetVersion);
	cupti.dropped = (typeof(cupti.dropped))dlsym(h, "cuptiActivityGetNumDroppedRecords");
	cupti.enable_cb = (typeof(cupti.enable_cb))dlsym(h, "cuptiEnableCallback");
	cupti.cb_name = (typeof(cupti.cb_name))dlsym(h, "cuptiGetCallbackName");
	/*
	 * Records are read with this build's layouts, which hold within a major version: minor
	 * and update releases only append fields (13.0 GA is 130000, 13.0 Update 1 130001).
	 */
	{
		uint32_t v = 0;

		if (cupti.version(&v) == CUPTI_SUCCESS && verbose)
			fprintf(stderr, "eprof-cupti: pid %d: libcupti API %u from %s (built with %u)\n",
				(int)getpid(), v, cupti_path[0] ? cupti_path : "?", CUPTI_API_VERSION);
		if (cupti.version(&v) != CUPTI_SUCCESS || v / 10000 != CUPTI_API_VERSION / 10000) {
			fprintf(
			    stderr,
			    "eprof: libcupti API version %u does not match the %u eprof was built "
			    "with: GPU activity is not recorded\n",
			    v, CUPTI_API_VERSION);
			goto fail_quiet;
		}
	}
	/* The clock first: every record after this is in CLOCK_MONOTONIC ns. */
	if (cupti.reg_ts(cupti_timestamp) != CUPTI_SUCCESS ||
	    cupti.reg_cb(buffer_requested, buffer_completed) != CUPTI_SUCCESS)
		goto fail;
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (cupti.enable(kinds[i]) != CUPTI_SUCCESS)
			goto fail;
	/* Optional: without device records the report shows no occupancy, nothing else is lost. */
	if (cupti.enable(CUPTI_ACTIVITY_KIND_DEVICE) != CUPTI_SUCCESS)
		fprintf(stderr, "eprof: CUPTI gives no device records: no occupancy figures\n");
	if (cupti.subscribe(&sub, on_api, NULL) != CUPTI_SUCCESS ||
	    enable_work_callbacks(sub, CUPTI_CB_DOMAIN_RUNTIME_API,
				  CUPTI_RUNTIME_TRACE_CBID_SIZE) != CUPTI_SUCCESS ||
	    enable_work_callbacks(sub, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_SIZE) !=
		CUPTI_SUCCESS)
		goto fail;
	flusher_on = !pthread_create(&flusher, NULL, flush_loop, NULL);
	if (flusher_on)
		pthread_detach(flusher);
	atexit(at_exit);
	return 1;
fail:
	fprintf(stderr, "eprof: CUPTI setup failed: GPU activity is not recorded\n");
fail_quiet:
	send_stats();
	close(sock_fd);
	sock_fd = -1;
	return 1;
}
