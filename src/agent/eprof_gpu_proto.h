/* SPDX-License-Identifier: MIT */
/*
 * eprof's own compact, versioned GPU activity records: what the CUPTI
 * injection library (src/agent/eprof_cupti.c) sends to the recorder over
 * a SOCK_SEQPACKET Unix socket named by EPROF_CUPTI_SOCK. One message =
 * struct egpu_msg + nrec records, each starting with struct egpu_rec and
 * padded to 8 bytes (size covers the padding). Times are CLOCK_MONOTONIC ns,
 * the recorder's clock. Plain fixed-width types only.
 */
#ifndef EPROF_GPU_PROTO_H
#define EPROF_GPU_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define EGPU_MAGIC 0x55504745u /* "EGPU" */
/*
 * 2: kernels name their kernel by an id that an EGPU_NAME record defined before (names of any
 * length up to a message, sent once); EGPU_CBNAME, EGPU_INFO; longer EGPU_STATS.
 */
#define EGPU_VERSION 2
#define EGPU_MSG_MAX 65536 /* largest message */
/* longest name sent (bytes, with the NUL): whatever fits a message with its header */
#define EGPU_NAME_MAX (EGPU_MSG_MAX - 16 - 40)

struct egpu_msg {
	uint32_t magic;
	uint16_t version;
	uint16_t flags;
	uint32_t pid;
	uint32_t nrec;
};

enum egpu_kind {
	EGPU_KERNEL = 1,
	EGPU_MEMCPY = 2,
	EGPU_MEMSET = 3,
	EGPU_API = 4,	/* an API call seen by the CUPTI callback: tid and correlation id */
	EGPU_SYNC = 5,
	EGPU_STATS = 6, /* records dropped by the injection library so far */
	/*
	 * Added after version 1 shipped, without a version bump: a recorder that predates it
	 * skips the record (unknown kinds are skipped by size), so old recorders keep working.
	 */
	EGPU_DEVICE = 7, /* a device's properties (CUPTI_ACTIVITY_KIND_DEVICE) */
	EGPU_NAME = 8,	 /* a kernel name and the id later kernel records name it by */
	EGPU_CBNAME = 9, /* the function name of an API callback id (domain, cbid) */
	EGPU_INFO = 10,	 /* which libcupti the library runs on, and whether it records */
	/* attach mode (eprof_cupti_attach): */
	EGPU_THREAD = 11, /* a thread of the collector: its CUDA calls are not the program's */
	EGPU_NOTE = 12,	  /* a line for the user (the target's stderr is not eprof's) */
	EGPU_BYE = 13,	  /* the collector stopped, on the recorder's 'R' (retraction) */
};

/* EGPU_INFO status: why GPU activity is or is not recorded in that process. */
enum egpu_status {
	EGPU_ST_OK = 0,
	EGPU_ST_NO_CUPTI = 1,	 /* no libcupti could be loaded */
	EGPU_ST_VERSION = 2,	 /* libcupti of another major version than the build's */
	EGPU_ST_SUBSCRIBED = 3,	 /* CUPTI has another subscriber (Kineto, Nsight, DCGM) */
	EGPU_ST_SETUP = 4,	 /* another CUPTI call failed during setup */
	/* set by the recorder, never sent: why the collector could not be injected (-p) */
	EGPU_ST_PTRACE = 5,	  /* ptrace refused (Yama, no CAP_SYS_PTRACE, another tracer) */
	EGPU_ST_SECCOMP = 6,	  /* a seccomp filter forbids a system call the injection needs */
	EGPU_ST_NO_DLOPEN = 7,	  /* no dlopen in the process (static binary, not glibc) */
	EGPU_ST_INJECT = 8,	  /* the injection failed otherwise */
	EGPU_ST_NOT_INJECTED = 9, /* --no-inject */
	EGPU_ST_MAX = 16
};

struct egpu_rec {
	uint16_t kind;
	uint16_t size;
	uint32_t corr; /* CUPTI correlation id */
	uint64_t start, end;
};

struct egpu_kernel {
	struct egpu_rec r;
	uint32_t device, context, stream;
	uint32_t grid[3], block[3];
	uint32_t regs;	  /* registers per thread */
	uint32_t smem;	  /* static + dynamic shared memory per block */
	uint32_t name_id; /* an EGPU_NAME record's id; 0: no name */
	/* added later (a recorder reads records of 72 bytes as flags 0, an older one skips it) */
	uint32_t flags; /* EGPU_KF_* */
	uint32_t pad;
};

/* The kernel's correlation id is older than the first API call the collector saw: launched
 * before it attached (or while it was attaching), so no launch can be joined to it. */
#define EGPU_KF_BEFORE_ATTACH 1

/* corr = 0, start = end = when it was sent */
struct egpu_name {
	struct egpu_rec r;
	uint32_t id;
	uint32_t name_len; /* bytes of name after this struct, NUL included */
	/* char name[name_len], then padding to 8 */
};

struct egpu_cbname {
	struct egpu_rec r;
	uint32_t domain, cbid;
	uint32_t name_len; /* bytes of name after this struct, NUL included */
	uint32_t pad;
	/* char name[name_len], then padding to 8 */
};

struct egpu_info {
	struct egpu_rec r;
	uint32_t cupti_version; /* cuptiGetVersion; 0: unknown */
	uint32_t built_version; /* CUPTI_API_VERSION of the headers the library was built with */
	uint32_t status;	/* enum egpu_status */
	uint32_t path_len;	/* bytes of the libcupti path after this struct, NUL included */
	/* char path[path_len], then padding to 8 */
};

struct egpu_memcpy {
	struct egpu_rec r;
	uint32_t device, context, stream;
	uint8_t copy_kind; /* CUpti_ActivityMemcpyKind */
	uint8_t src_kind, dst_kind, pad;
	uint64_t bytes;
	uint32_t src_device, dst_device; /* peer copies; otherwise both are device */
};

struct egpu_memset {
	struct egpu_rec r;
	uint32_t device, context, stream;
	uint32_t value;
	uint64_t bytes;
};

struct egpu_api {
	struct egpu_rec r; /* start = end = CLOCK_MONOTONIC at the callback's API enter */
	uint32_t tid;
	uint32_t cbid;
	uint32_t domain; /* CUpti_CallbackDomain */
	uint32_t flags;	 /* EGPU_API_F_*; was padding (0) in recorders before it */
};

/*
 * The thread's first call seen by this library (or its first since a fork): sent at once, so
 * that a recorder outside the process's pid namespace maps the thread's id while it still runs,
 * and forgets a mapping left by an exited thread that had the same id.
 */
#define EGPU_API_F_FIRST 1u

struct egpu_sync {
	struct egpu_rec r;
	uint32_t context, stream, type, pad;
};

/* Limits of one device, as CUPTI reported them; 0 = not reported. corr = 0, start = end = seen. */
struct egpu_device {
	struct egpu_rec r;
	uint32_t device; /* CUPTI device id, as in egpu_kernel.device */
	uint32_t sm_count;
	uint32_t warp_size;
	uint32_t max_warps_per_sm;
	uint32_t max_blocks_per_sm;
	uint32_t max_threads_per_block;
	uint32_t max_regs_per_sm;
	uint32_t max_regs_per_block;
	uint32_t max_smem_per_sm;    /* bytes */
	uint32_t max_smem_per_block; /* bytes */
	uint32_t cc_major, cc_minor; /* compute capability */
	uint64_t global_mem;	     /* bytes */
	uint32_t name_len;	     /* bytes of name after this struct, NUL included */
	uint32_t pad;
	/* char name[name_len], then padding to 8 */
};

struct egpu_stats {
	struct egpu_rec r;
	uint64_t dropped;	/* records lost in the injection library (buffers, socket) */
	uint64_t records;	/* records sent so far */
	uint64_t zero_time;	/* activity records with a start or end of 0 (work in flight) */
	uint64_t inverted_time; /* ... with end before start */
	uint64_t foreign_clock; /* ... stamped by another clock than ours (another CUPTI user) */
	uint64_t buffer_errors; /* activity buffers whose reading stopped on an error */
};

/* EGPU_THREAD: start = end = when the thread started */
struct egpu_thread {
	struct egpu_rec r;
	uint32_t tid; /* in the sender's pid namespace, as EGPU_API's */
	uint32_t pad;
};

/* EGPU_NOTE */
struct egpu_note {
	struct egpu_rec r;
	uint32_t warn;	   /* 1: a warning, 0: information (shown with -v) */
	uint32_t text_len; /* bytes of text after this struct, NUL included */
	/* char text[text_len], then padding to 8 */
};

/* EGPU_BYE: the last record before the collector's channel goes quiet */
struct egpu_bye {
	struct egpu_rec r;
	uint32_t finalized; /* 0: CUPTI could not be finalized, 1: from eprof's thread, 2: at an
			     * API exit, as NVIDIA advises */
	uint32_t keep;	    /* 1: the library must stay loaded (CUPTI still holds its callbacks) */
	uint32_t contexts;  /* contexts synchronized before the last flush */
	uint32_t pad;
};

/*
 * The argument of eprof_cupti_attach(), copied into the target by the injector (and freed
 * with the injector's stub after the call: the collector keeps a copy).
 */
struct egpu_attach_arg {
	int32_t fd;	       /* the target's end of the channel (SOCK_SEQPACKET) */
	uint32_t flags;	       /* EGPU_ATTACH_* */
	char cupti_hint[500];  /* a libcupti of the target's CUDA install, in its namespace; "" */
	uint32_t backlog_mb;   /* 1 + the recorder's EPROF_CUPTI_BACKLOG_MB; 0: the default */
};
#define EGPU_ATTACH_VERBOSE 1

/* Bytes the recorder sends on the channel: flush now; retract (stop, then wait for the call) */
#define EGPU_REQ_FLUSH 'F'
#define EGPU_REQ_RETRACT 'R'

_Static_assert(sizeof(struct egpu_msg) == 16, "egpu_msg");
_Static_assert(sizeof(struct egpu_thread) == 32, "egpu_thread");
_Static_assert(sizeof(struct egpu_note) == 32, "egpu_note");
_Static_assert(sizeof(struct egpu_bye) == 40, "egpu_bye");
_Static_assert(sizeof(struct egpu_attach_arg) == 512, "egpu_attach_arg");
_Static_assert(sizeof(struct egpu_rec) == 24, "egpu_rec");
_Static_assert(sizeof(struct egpu_kernel) == 80, "egpu_kernel");
_Static_assert(offsetof(struct egpu_kernel, flags) == 72, "egpu_kernel flags");
_Static_assert(sizeof(struct egpu_memcpy) == 56, "egpu_memcpy");
_Static_assert(sizeof(struct egpu_name) == 32, "egpu_name");
_Static_assert(sizeof(struct egpu_cbname) == 40, "egpu_cbname");
_Static_assert(sizeof(struct egpu_info) == 40, "egpu_info");
_Static_assert(sizeof(struct egpu_memset) == 48, "egpu_memset");
_Static_assert(sizeof(struct egpu_api) == 40, "egpu_api");
_Static_assert(sizeof(struct egpu_sync) == 40, "egpu_sync");
_Static_assert(sizeof(struct egpu_stats) == 72, "egpu_stats");
_Static_assert(sizeof(struct egpu_device) == 88, "egpu_device");

#endif
