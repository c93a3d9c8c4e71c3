// SPDX-License-Identifier: MIT
/*
 * libeprof_mem.so: heap sampling inside the process. `eprof record --mem -- CMD` preloads it
 * (LD_PRELOAD); its malloc & co forward to the next definition (dlsym RTLD_NEXT: libc, or
 * an allocator the program links such as jemalloc) and decide in the process which calls
 * are sampled, so an unsampled call costs a few nanoseconds instead of a uprobe trap.
 *
 * Sampling: each thread counts down the bytes it allocates; the gaps are drawn from an
 * exponential distribution of mean EPROF_MEM_SAMPLE (a Poisson process over the bytes, as
 * the BPF sampler of bpf/mem.bpf.h does, so the recorder's weights are the same). A sampled
 * allocation calls eprof_mem_hit_alloc(), an empty function the recorder puts a uprobe on:
 * the BPF side takes the stack (native and Python) as for any allocation. The sampled
 * pointer goes into a small hash set; free() looks at a counting filter first (one load for
 * an unsampled block) and calls eprof_mem_hit_free() only for a sampled block.
 * EPROF_MEM_SAMPLE=1 calls the allocation marker on every allocation; frees are timed and
 * kept in a per-thread batch that eprof_mem_hit_frees() hands over 128 at a time (a trap per
 * batch, not per free; the reader orders events by time).
 *
 * EPROF_MEM_SAMPLE=1 with EPROF_MEM_SOCK (the channel mode): no marker at all. Each call is
 * a record (op, pointer, size, time, stack id) in a per-thread buffer sent to the recorder's
 * socket 127 records at a time; stacks are unwound here (eprof_mem_stack.c) and each
 * distinct one is sent once. A full socket blocks the sender: nothing is dropped.
 *
 * Without EPROF_MEM_SAMPLE the library forwards every call and records nothing (a process
 * that inherited LD_PRELOAD without being profiled pays one branch per call).
 *
 * C++ operator new/delete are not defined here: libstdc++'s operator new calls malloc
 * through its PLT and its delete calls free, so they are seen once, with operator new in the
 * stack, as with the uprobes.
 */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "eprof_mem_proto.h"
#include "eprof_mem_stack.h"
#include "eprof_mem_recv.h"

#define EXPORT __attribute__((visibility("default")))
#define HIDDEN __attribute__((visibility("hidden")))
#define TLS __thread __attribute__((tls_model("initial-exec")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/*
 * The markers: push %rbp; pop %rbp; ret, with CFI of a function entry. A uprobe on the push
 * is emulated. Not a 5-byte nop: kernel 6.18 turns a probed nop5 into a call to its uprobe
 * trampoline, a mapping a forked child does not get, so a child calling the marker faulted
 * at the trampoline's address (a torch DataLoader worker under record --mem).
 */
__asm__(".text\n"
	".globl " EMEM_HIT_ALLOC "\n"
	".type " EMEM_HIT_ALLOC ", @function\n"
	".p2align 4\n" EMEM_HIT_ALLOC ":\n"
	".cfi_startproc\n"
	"push %rbp\n"
	".cfi_adjust_cfa_offset 8\n"
	"pop %rbp\n"
	".cfi_adjust_cfa_offset -8\n"
	"ret\n"
	".cfi_endproc\n"
	".size " EMEM_HIT_ALLOC ", .-" EMEM_HIT_ALLOC "\n"
	".globl " EMEM_HIT_FREE "\n"
	".type " EMEM_HIT_FREE ", @function\n"
	".p2align 4\n" EMEM_HIT_FREE ":\n"
	".cfi_startproc\n"
	"push %rbp\n"
	".cfi_adjust_cfa_offset 8\n"
	"pop %rbp\n"
	".cfi_adjust_cfa_offset -8\n"
	"ret\n"
	".cfi_endproc\n"
	".size " EMEM_HIT_FREE ", .-" EMEM_HIT_FREE "\n"
	".globl " EMEM_HIT_FREES "\n"
	".type " EMEM_HIT_FREES ", @function\n"
	".p2align 4\n" EMEM_HIT_FREES ":\n"
	".cfi_startproc\n"
	"push %rbp\n"
	".cfi_adjust_cfa_offset 8\n"
	"pop %rbp\n"
	".cfi_adjust_cfa_offset -8\n"
	"ret\n"
	".cfi_endproc\n"
	".size " EMEM_HIT_FREES ", .-" EMEM_HIT_FREES "\n");

EXPORT void eprof_mem_hit_alloc(void *ptr, size_t size, unsigned func, unsigned long calls,
				void *ret, void *frame);
EXPORT void eprof_mem_hit_free(void *ptr);
EXPORT void eprof_mem_hit_frees(const struct emem_free *v, unsigned long n);

static struct {
	void *(*malloc)(size_t);
	void (*free)(void *);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	void *(*reallocarray)(void *, size_t, size_t);
	int (*posix_memalign)(void **, size_t, size_t);
	void *(*aligned_alloc)(size_t, size_t);
	void *(*memalign)(size_t, size_t);
	void *(*valloc)(size_t);
	void *(*pvalloc)(size_t);
	void (*exit_)(int); /* _exit: the channel's buffers are sent first */
} real;

enum { ST_NONE, ST_INIT, ST_READY };
static _Atomic int state;
static uint64_t mean; /* 0: inert, 1: every call */

/* --- the bootstrap arena: dlsym's own allocations, before real.* are known ---------------- */

#define BOOT_BYTES (64 << 10)
static _Alignas(64) char boot[BOOT_BYTES];
static atomic_size_t boot_used;

static void *boot_alloc(size_t n, size_t align)
{
	size_t cur = atomic_load(&boot_used), at, end;

	if (align < 16)
		align = 16;
	do {
		at = (cur + 16 + align - 1) & ~(align - 1); /* room for the size before it */
		end = at + n;
		if (end > BOOT_BYTES || end < at)
			return NULL;
	} while (!atomic_compare_exchange_weak(&boot_used, &cur, end));
	((size_t *)(boot + at))[-1] = n;
	return boot + at;
}

static bool in_boot(const void *p)
{
	return (const char *)p >= boot && (const char *)p < boot + BOOT_BYTES;
}

/* --- the set of sampled blocks ------------------------------------------------------------ */

/*
 * Open addressing with tombstones, under a spin lock: only sampled blocks go in (a few per
 * MiB allocated), so the lock is taken rarely. filt counts the members by hash so that a
 * free of an unsampled block is one load. Memory from mmap: never our own malloc.
 */
#define FILT_BITS 15 /* 32 KiB of counters: mostly in L1 on the free path */
#define FILT_MAX 255
#define TOMB ((uintptr_t)1)

struct slot {
	uintptr_t ptr;
};

static _Atomic uint8_t filt[1 << FILT_BITS]; /* saturated counters stay set */
static atomic_flag set_lock = ATOMIC_FLAG_INIT;
static struct slot *tab;
static size_t tab_cap, tab_used, tab_live; /* used: members and tombstones */

static inline uint64_t hash_ptr(uintptr_t p)
{
	return (p >> 4) * 0x9e3779b97f4a7c15ULL;
}

static inline _Atomic uint8_t *filt_of(uintptr_t p)
{
	return &filt[hash_ptr(p) >> (64 - FILT_BITS)];
}

static void lock(void)
{
	while (atomic_flag_test_and_set_explicit(&set_lock, memory_order_acquire))
		sched_yield();
}

static void unlock(void)
{
	atomic_flag_clear_explicit(&set_lock, memory_order_release);
}

/* Rehashes without the tombstones, twice as large when more than a quarter is live. */
static bool grow(void)
{
	size_t cap = !tab_cap ? 4096 : tab_live * 4 > tab_cap ? tab_cap * 2 : tab_cap;
	struct slot *n = emem_map_zero(cap * sizeof(*n));
	size_t used = 0;

	if (!n)
		return false;
	for (size_t i = 0; i < tab_cap; i++) {
		uintptr_t p = tab[i].ptr;
		size_t j;

		if (p <= TOMB)
			continue;
		for (j = hash_ptr(p) & (cap - 1); n[j].ptr; j = (j + 1) & (cap - 1))
			;
		n[j].ptr = p;
		used++;
	}
	if (tab)
		munmap(tab, tab_cap * sizeof(*tab));
	tab = n;
	tab_cap = cap;
	tab_used = used;
	return true;
}

/* False when the set cannot grow: the block is then not reported. */
static bool set_add(uintptr_t p)
{
	size_t j;

	lock();
	if ((tab_used + 1) * 2 > tab_cap && !grow()) {
		unlock();
		return false;
	}
	for (j = hash_ptr(p) & (tab_cap - 1); tab[j].ptr > TOMB; j = (j + 1) & (tab_cap - 1))
		if (tab[j].ptr == p)
			goto out; /* already in (a free we did not see) */
	if (!tab[j].ptr)
		tab_used++;
	tab_live++;
	tab[j].ptr = p;
	if (atomic_load_explicit(filt_of(p), memory_order_relaxed) < FILT_MAX)
		atomic_fetch_add_explicit(filt_of(p), 1, memory_order_relaxed);
out:
	unlock();
	return true;
}

static bool set_remove(uintptr_t p)
{
	bool found = false;

	if (!atomic_load_explicit(filt_of(p), memory_order_relaxed))
		return false;
	lock();
	if (tab_cap)
		for (size_t j = hash_ptr(p) & (tab_cap - 1); tab[j].ptr;
		     j = (j + 1) & (tab_cap - 1))
			if (tab[j].ptr == p) {
				tab[j].ptr = TOMB;
				tab_live--;
				if (atomic_load_explicit(filt_of(p), memory_order_relaxed) < FILT_MAX)
					atomic_fetch_sub_explicit(filt_of(p), 1,
								  memory_order_relaxed);
				found = true;
				break;
			}
	unlock();
	return found;
}

/* fork: the child gets the set as it was, with the lock free. */
static void emem_stacks_prepare_(void);
static void cbuf_release_mine(void);
static void emem_stacks_parent_(void);
static void chan_fork_child(void);

static void fork_prepare(void)
{
	lock();
	emem_stacks_prepare_();
}

static void fork_after(void)
{
	emem_stacks_parent_();
	unlock();
}

static void batch_forget_all(void);

static void fork_child(void)
{
	batch_forget_all();
	chan_fork_child();
	unlock();
}

/* --- per-thread sampling ------------------------------------------------------------------ */

static TLS int64_t left;	 /* bytes until the next sample */
static TLS bool drawn;		 /* left holds a draw */
static TLS uint64_t rng;	 /* xorshift state */
static TLS unsigned long calls;	 /* allocator calls since this thread's last hit */
static TLS bool keyed;		 /* the exit flush is registered */
static pthread_key_t flush_key;
static bool have_key;

/* ln(u) for u in (0, 1]: no libm in a preloaded library. */
static double ln(double u)
{
	union {
		double d;
		uint64_t u;
	} v = { .d = u };
	int e = (int)((v.u >> 52) & 0x7ff) - 1023;
	double m, s, s2, sum = 0, term;

	v.u = (v.u & ~(0x7ffULL << 52)) | (1023ULL << 52); /* mantissa in [1, 2) */
	m = v.d;
	s = (m - 1) / (m + 1); /* ln m = 2 atanh s, s <= 1/3 */
	s2 = s * s;
	term = s;
	for (int k = 1; k < 40; k += 2) {
		sum += term / k;
		term *= s2;
	}
	return e * 0.6931471805599453 + 2 * sum;
}

static int64_t draw(void)
{
	uint64_t x;
	double u, g;

	if (!rng) {
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		rng = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ULL ^ (uint64_t)gettid() << 32 ^
		      (uintptr_t)&left;
		rng |= 1;
	}
	x = rng;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	rng = x;
	u = ((x >> 11) + 1) * (1.0 / 9007199254740992.0); /* (0, 1] */
	g = -ln(u) * (double)mean;
	if (g < 1)
		g = 1;
	if (g > 9e18)
		g = 9e18;
	return (int64_t)g;
}

/* --- every-call mode: frees in per-thread batches ----------------------------------------- */

/*
 * A thread's buffer (a batch of frees, a channel's records) is a page of its own
 * (initial-exec TLS is scarce in a library dlopen()ed at attach), on a list so that the
 * process's exit and the retract can send what the other threads hold. busy: the owner
 * appends, or another thread sends it; dead: its thread is gone and a new thread may take the
 * page. Each kind of buffer starts with a struct tpage.
 */
struct tpage {
	struct tpage *next;
	atomic_int busy;
	atomic_int dead;
};

static void tpage_lock(struct tpage *t)
{
	while (atomic_exchange_explicit(&t->busy, 1, memory_order_acquire))
		sched_yield();
}

static void tpage_unlock(struct tpage *t)
{
	atomic_store_explicit(&t->busy, 0, memory_order_release);
}

/* A dead thread's page of the list, else a new one of bytes. NULL: no memory. */
static struct tpage *tpage_get(struct tpage *_Atomic *list, size_t bytes)
{
	struct tpage *t;
	int one = 1;

	for (t = atomic_load(list); t; t = t->next)
		if (atomic_load_explicit(&t->dead, memory_order_relaxed) &&
		    atomic_compare_exchange_strong(&t->dead, &one, 0))
			return t;
		else
			one = 1;
	t = emem_map_zero(bytes);
	if (!t)
		return NULL;
	t->next = atomic_load(list);
	while (!atomic_compare_exchange_weak(list, &t->next, t))
		;
	return t;
}

/* Its thread is gone: sent (send, under the page's lock), then free for another thread. */
static void tpage_release(struct tpage *t, void (*send)(struct tpage *))
{
	tpage_lock(t);
	send(t);
	atomic_store(&t->dead, 1);
	tpage_unlock(t);
}

/* Every thread's (at the process's exit, at the retract): safe beside their owners. */
static void tpage_send_all(struct tpage *_Atomic *list, void (*send)(struct tpage *))
{
	for (struct tpage *t = atomic_load(list); t; t = t->next) {
		tpage_lock(t);
		send(t);
		tpage_unlock(t);
	}
}

/* fork: every page free for the child's threads but its own thread's (mine), unlocked. */
static void tpage_fork_child(struct tpage *_Atomic *list, const struct tpage *mine)
{
	for (struct tpage *t = atomic_load(list); t; t = t->next) {
		atomic_store(&t->busy, 0);
		atomic_store(&t->dead, t != mine);
	}
}

struct fbatch {
	struct tpage t;
	unsigned long n;
	struct emem_free v[EMEM_FREE_BATCH];
};

static struct tpage *_Atomic batches;
static TLS struct fbatch *mybatch;

/* Under b's lock. */
static void batch_send(struct tpage *t)
{
	struct fbatch *b = (struct fbatch *)t;

	if (b->n)
		eprof_mem_hit_frees(b->v, b->n);
	b->n = 0;
}

static void batch_send_all(void)
{
	tpage_send_all(&batches, batch_send);
}

/* fork: the child's batches are empty (its parent sends those frees) and its own thread's. */
static void batch_forget_all(void)
{
	for (struct tpage *t = atomic_load(&batches); t; t = t->next)
		((struct fbatch *)t)->n = 0;
	tpage_fork_child(&batches, mybatch ? &mybatch->t : NULL);
}

static void emem_stacks_prepare_(void)
{
	if (mean == 1)
		emem_stacks_prepare();
}

static void emem_stacks_parent_(void)
{
	if (mean == 1)
		emem_stacks_parent();
}

static void flush_calls(void *arg)
{
	struct fbatch *b = mybatch;

	(void)arg;
	cbuf_release_mine();
	if (calls)
		eprof_mem_hit_alloc(NULL, 0, 0, calls, NULL, NULL);
	calls = 0;
	if (b) {
		mybatch = NULL;
		tpage_release(&b->t, batch_send);
	}
}

static void register_exit(void)
{
	keyed = true; /* first: pthread_setspecific may allocate */
	if (have_key)
		pthread_setspecific(flush_key, (void *)1);
}

/* Every-call mode: a free, timed before the block goes back to the allocator. */
static void batch_free(void *p)
{
	struct fbatch *b = mybatch;
	struct timespec ts;

	if (unlikely(!b)) {
		if (!keyed)
			register_exit();
		b = mybatch = (struct fbatch *)tpage_get(&batches, sizeof(*b));
		if (!b) {
			eprof_mem_hit_free(p); /* no page: one trap */
			return;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &ts);
	tpage_lock(&b->t);
	b->v[b->n].addr = (uintptr_t)p;
	b->v[b->n].ns = (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long)ts.tv_nsec;
	if (++b->n == EMEM_FREE_BATCH)
		batch_send(&b->t);
	tpage_unlock(&b->t);
}

/* --- every-call mode through the channel ------------------------------------------------- */

static _Atomic int chan_fd = -1;
static char chan_name[64];
static unsigned my_pid;
static atomic_bool chan_exiting; /* after the destructor: each record is sent at once */
static TLS bool guard;		 /* this thread is inside the library: calls are not recorded */
static TLS unsigned my_tid;
static atomic_ulong chan_lost;	 /* records without a buffer page */

struct cbuf {
	struct tpage t;
	struct emem_msg h;
	struct emem_rec v[EMEM_RECS_PER_MSG];
};

static struct tpage *_Atomic cbufs;
static TLS struct cbuf *mycbuf;

bool emem_chan_send(const void *msg, size_t len)
{
	int fd = atomic_load_explicit(&chan_fd, memory_order_relaxed);
	ssize_t r;

	if (fd < 0)
		return false;
	do
		r = send(fd, msg, len, MSG_NOSIGNAL);
	while (r < 0 && errno == EINTR);
	if (r == (ssize_t)len)
		return true;
	/* The recorder is gone: record nothing more (the markers have no probes either). */
	atomic_store(&chan_fd, -1);
	return false;
}

/*
 * The recorder's socket is in a 0700 directory of this process's user, which only root and
 * that user can reach; once the recording ended, though, anyone may make a directory of the
 * same name: the peer must be root and the recorder whose pid the name carries
 * (/tmp/eprof-mem-PID-XXXXXX/sock; 0: outside this pid namespace).
 */
static bool peer_is_recorder(int fd, const char *path)
{
	const char *tag = strstr(path, "/eprof-mem-");
	struct ucred cr = { 0 };
	socklen_t len = sizeof(cr);
	unsigned long pid;
	char *end;

	if (!tag)
		return false;
	pid = strtoul(tag + 11, &end, 10);
	if (*end != '-' || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) || len != sizeof(cr))
		return false;
	return cr.uid == 0 && (cr.pid == 0 || (unsigned long)cr.pid == pid);
}

/*
 * The channel's descriptor (connected here, or the one the injector handed over): a large
 * send buffer, and out of the way of a program that reuses low descriptors.
 */
static int chan_adopt(int fd)
{
	int hi, sz = 4 << 20;

	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	hi = fcntl(fd, F_DUPFD_CLOEXEC, 900);
	if (hi >= 0) {
		close(fd);
		fd = hi;
	}
	return fd;
}

static int chan_connect(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	size_t len = strlen(path);
	int fd;

	if (path[0] != '/' || len >= sizeof(a.sun_path))
		return -1;
	memcpy(a.sun_path, path, len + 1);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) || !peer_is_recorder(fd, path)) {
		close(fd);
		return -1;
	}
	return chan_adopt(fd);
}

/* Under b's lock. */
static void cbuf_send(struct tpage *t)
{
	struct cbuf *b = (struct cbuf *)t;

	if (b->h.n)
		emem_chan_send(&b->h, sizeof(b->h) + b->h.n * sizeof(b->v[0]));
	b->h.n = 0;
}

static void cbuf_send_all(void)
{
	tpage_send_all(&cbufs, cbuf_send);
}

static void register_exit(void);

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void chan_put(unsigned op, void *p, size_t size, unsigned func, unsigned stack,
		     uint64_t ns)
{
	struct cbuf *b = mycbuf;
	struct emem_rec *r;

	if (unlikely(!b)) {
		if (!keyed)
			register_exit();
		b = mycbuf = (struct cbuf *)tpage_get(&cbufs, sizeof(*b));
		if (!b) {
			atomic_fetch_add(&chan_lost, 1);
			return;
		}
	}
	tpage_lock(&b->t);
	if (unlikely(b->h.magic != EMEM_MSG_MAGIC || b->h.tid != my_tid || b->h.pid != my_pid))
		b->h = (struct emem_msg){ .magic = EMEM_MSG_MAGIC, .kind = EMEM_MSG_RECS,
					  .pid = my_pid, .tid = my_tid };
	r = &b->v[b->h.n++];
	r->ptr = (uintptr_t)p;
	r->ns = ns;
	r->size = size;
	r->stack = stack;
	r->op = (unsigned char)op;
	r->func = (unsigned char)func;
	r->pad = 0;
	if (b->h.n == EMEM_RECS_PER_MSG || unlikely(atomic_load_explicit(&chan_exiting,
									  memory_order_relaxed)))
		cbuf_send(&b->t);
	tpage_unlock(&b->t);
}

static inline bool chan_on(void)
{
	return atomic_load_explicit(&chan_fd, memory_order_relaxed) >= 0;
}

static void patch_new_objects(void);
static atomic_bool py_known; /* the recorder sent the interpreter's layout */
static TLS unsigned chk;

/*
 * Whether to look for the layout by time: 100 us after the last look at first, the gap
 * doubling to 100 ms while none comes (a program that never runs Python pays one recv() a
 * tenth of a second).
 */
static _Atomic uint64_t layout_next, layout_gap = 100000;

static bool layout_due(uint64_t ns)
{
	uint64_t next = atomic_load_explicit(&layout_next, memory_order_relaxed), gap;

	if (ns < next)
		return false;
	gap = atomic_load_explicit(&layout_gap, memory_order_relaxed);
	/* one thread looks; the others go on */
	if (!atomic_compare_exchange_strong(&layout_next, &next, ns + gap))
		return false;
	if (gap < 100000000)
		atomic_store_explicit(&layout_gap, 2 * gap, memory_order_relaxed);
	return true;
}

/* A message from the recorder (its Python layout), if one is waiting. */
static void chan_poll_in(void)
{
	_Alignas(8) char buf[512];
	int fd = atomic_load(&chan_fd);
	struct py_proc layout;
	ssize_t r;

	if (fd < 0)
		return;
	r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
	if (r > 0 && emem_recv_layout(buf, (size_t)r, &layout)) {
		emem_py_set(&layout);
		atomic_store(&py_known, true);
	}
}

static __attribute__((noinline)) void chan_alloc(void *p, size_t n, unsigned func, void *ret,
						 void *frame)
{
	uint64_t ns = now_ns();
	unsigned id = 0;

	if (unlikely(!my_tid))
		my_tid = (unsigned)gettid();
	guard = true;
	/*
	 * Python's layout: looked for often at first (the recorder finds CPython at start-up),
	 * by count and by time. By count alone, a program that allocates nothing while the
	 * layout comes (a script's sleep) made up to 63 allocations of its next burst without
	 * Python frames; the first allocation after a quiet spell looks now.
	 */
	chk++;
	if (unlikely(!atomic_load_explicit(&py_known, memory_order_relaxed)) &&
	    (!(chk & (chk < 65536 ? 63 : 4095)) || layout_due(ns)))
		chan_poll_in();
	if (unlikely(!(chk & 4095)))
		patch_new_objects(); /* attach mode: objects dlopen()ed since */
	if (ret && frame)
		id = emem_stack_id((uintptr_t)ret, (uintptr_t)frame, ns, my_pid, my_tid);
	chan_put(EMEM_OP_ALLOC, p, n, func, id, ns);
	guard = false;
}

static __attribute__((noinline)) void chan_free(void *p)
{
	if (unlikely(!my_tid))
		my_tid = (unsigned)gettid();
	guard = true;
	chan_put(EMEM_OP_FREE, p, 0, 0, 0, now_ns());
	guard = false;
}

/* Sends what this thread holds and gives its page to the next thread. */
static void cbuf_release_mine(void)
{
	struct cbuf *b = mycbuf;

	if (!b)
		return;
	mycbuf = NULL;
	tpage_release(&b->t, cbuf_send);
}

/* fork: the child's own connection, an empty stack table, no buffered records of the parent. */
static void chan_fork_child(void)
{
	int fd = atomic_load(&chan_fd);

	/* The layout stays (the same interpreter); the recorder sends it again, ignored. */
	emem_stacks_child();
	my_pid = (unsigned)getpid();
	my_tid = (unsigned)gettid();
	for (struct tpage *t = atomic_load(&cbufs); t; t = t->next)
		((struct cbuf *)t)->h.n = 0;
	tpage_fork_child(&cbufs, mycbuf ? &mycbuf->t : NULL);
	if (fd < 0)
		return;
	close(fd);
	atomic_store(&chan_fd, chan_connect(chan_name));
}

/*
 * At exit: waits (2 s at most) until the recorder has decoded what was sent, so that it names
 * the stacks while this process's maps can still be read.
 */
static void chan_sync(void)
{
	struct emem_msg m = { .magic = EMEM_MSG_MAGIC, .kind = EMEM_MSG_SYNC, .pid = my_pid };
	int fd = atomic_load(&chan_fd);
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char c;

	if (fd < 0 || !emem_chan_send(&m, sizeof(m)))
		return;
	/* The answer is one byte; a layout may come before it. */
	for (int i = 0; i < 4 && poll(&p, 1, 2000) == 1; i++) {
		_Alignas(8) char buf[512];

		if (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) == 1)
			break;
	}
	(void)c;
}

static void patch_new_objects(void);

static __attribute__((noinline)) void sampled(void *p, size_t n, unsigned func, void *ret,
					      void *frame)
{
	patch_new_objects();
	if (!keyed)
		register_exit();
	left = draw(); /* memoryless: the next gap starts at the end of this block */
	if (mean > 1 && !set_add((uintptr_t)p))
		return;
	eprof_mem_hit_alloc(p, n, func, calls, ret, frame);
	calls = 0;
}

/*
 * Inlined into each wrapper: ret and frame are the wrapper's return address and frame
 * pointer (the library is built with frame pointers), from which the BPF side unwinds.
 */
#define CALLER __builtin_return_address(0), __builtin_frame_address(0)

static inline __attribute__((always_inline)) void note(void *p, size_t n, unsigned func,
						       void *ret, void *frame)
{
	int64_t l;

	if (!mean || !p)
		return;
	if (mean == 1 && chan_on()) {
		if (likely(!guard))
			chan_alloc(p, n, func, ret, frame);
		return;
	}
	calls++;
	if (mean == 1) {
		if (unlikely(!(calls & 4095)))
			patch_new_objects(); /* attach mode: objects dlopen()ed since */
		eprof_mem_hit_alloc(p, n, func, calls, ret, frame);
		calls = 0;
		return;
	}
	l = left - (int64_t)n;
	if (likely(l > 0)) {
		left = l;
		return;
	}
	if (!drawn) {
		drawn = true;
		left = draw();
		l = left - (int64_t)n;
		if (l > 0) {
			left = l;
			return;
		}
	}
	sampled(p, n, func, ret, frame);
}

/* A block about to be freed or moved: its free marker if it was sampled. */
static inline void release(void *p)
{
	if (!mean || !p)
		return;
	if (mean == 1 && chan_on()) {
		if (likely(!guard))
			chan_free(p);
		return;
	}
	if (mean == 1)
		batch_free(p);
	else if (set_remove((uintptr_t)p))
		eprof_mem_hit_free(p);
}

/* --- setup -------------------------------------------------------------------------------- */

HIDDEN void *emem_malloc(size_t n);

/* A canonical PLT entry (jmp *GOT, after endbr64 or bnd): not a definition. */
static bool is_plt_stub(const unsigned char *c)
{
	if (c[0] == 0xf3 && c[1] == 0x0f && c[2] == 0x1e && c[3] == 0xfa)
		c += 4;
	if (c[0] == 0xf2)
		c++;
	return c[0] == 0xff && c[1] == 0x25;
}

/* The allocator calls are forwarded to: the next definitions (preloaded) or the program's. */
static bool resolve(void *where)
{
	void *m = dlsym(where, "malloc");

	if (!m || m == (void *)emem_malloc)
		return false;
	real.malloc = m;
	real.free = dlsym(where, "free");
	real.calloc = dlsym(where, "calloc");
	real.realloc = dlsym(where, "realloc");
	real.reallocarray = dlsym(where, "reallocarray");
	real.posix_memalign = dlsym(where, "posix_memalign");
	real.aligned_alloc = dlsym(where, "aligned_alloc");
	real.memalign = dlsym(where, "memalign");
	real.valloc = dlsym(where, "valloc");
	real.pvalloc = dlsym(where, "pvalloc");
	real.exit_ = dlsym(where, "_exit");
	if (!real.free || !real.calloc || !real.realloc || !real.posix_memalign ||
	    !real.aligned_alloc || !real.memalign || !real.valloc || !real.pvalloc)
		return false;
	/* an executable's canonical PLT entries lead back to its GOT, which we may patch */
	for (size_t i = 0; i < sizeof(real) / sizeof(void *) - 1; i++) {
		void *f = ((void **)&real)[i];

		if (f && is_plt_stub(f))
			return false;
	}
	return true;
}

static void env_scrub_self(void);

static void init(void)
{
	int expect = ST_NONE;
	const char *env;

	if (!atomic_compare_exchange_strong(&state, &expect, ST_INIT)) {
		while (atomic_load(&state) != ST_READY) /* another thread is at it */
			sched_yield();
		return;
	}
	/* Preloaded: the next definitions. dlopen()ed by eprof's injector: the program's. */
	if (!resolve(RTLD_NEXT) && !resolve(RTLD_DEFAULT))
		abort(); /* no allocator after us: nothing can run */
	env = getenv(EMEM_ENV_SAMPLE);
	mean = env ? strtoull(env, NULL, 10) : 0;
	my_pid = (unsigned)getpid();
	env = getenv(EMEM_ENV_SOCK);
	if (mean == 1 && env && strlen(env) < sizeof(chan_name)) {
		strcpy(chan_name, env);
		/* No socket (the recorder is gone, or this is not its command): the markers. */
		atomic_store(&chan_fd, chan_connect(chan_name));
	}
	atomic_store(&state, ST_READY);
	if (chan_name[0] && !chan_on())
		env_scrub_self();
	if (mean) {
		pthread_atfork(fork_prepare, fork_after, fork_child);
		have_key = !pthread_key_create(&flush_key, flush_calls);
	}
}

__attribute__((constructor)) static void emem_ctor(void)
{
	if (atomic_load(&state) != ST_READY)
		init();
}

/*
 * The main thread's count (other threads flush theirs at exit through flush_key), and the
 * frees every thread still holds.
 */
__attribute__((destructor)) static void emem_dtor(void)
{
	if (mean)
		flush_calls(NULL);
	if (mean == 1) {
		batch_send_all();
		/* Calls made after this (later destructors, atexit handlers) are sent one by one. */
		atomic_store(&chan_exiting, true);
		cbuf_send_all();
		chan_sync();
	}
}

#define READY()                                                                                    \
	do {                                                                                       \
		if (unlikely(atomic_load_explicit(&state, memory_order_acquire) != ST_READY))      \
			init();                                                                    \
	} while (0)

/* During init (dlsym allocates): the arena. */
static inline bool booting(void)
{
	return unlikely(atomic_load_explicit(&state, memory_order_relaxed) == ST_INIT);
}

/* --- the interposed functions ------------------------------------------------------------- */

HIDDEN void *emem_malloc(size_t n)
{
	void *p;

	if (booting())
		return boot_alloc(n, 16);
	READY();
	p = real.malloc(n);
	note(p, n, EMEM_MALLOC, CALLER);
	return p;
}

HIDDEN void emem_free(void *p)
{
	if (!p || unlikely(in_boot(p)))
		return;
	READY();
	release(p);
	real.free(p);
}

HIDDEN void *emem_calloc(size_t n, size_t m)
{
	size_t bytes;
	void *p;

	if (booting())
		return __builtin_mul_overflow(n, m, &bytes) ? NULL : boot_alloc(bytes, 16);
	READY();
	p = real.calloc(n, m);
	if (p)
		note(p, n * m, EMEM_CALLOC, CALLER);
	return p;
}

/* realloc of a bootstrap block: a real one, with the contents. */
static void *boot_move(void *old, size_t n)
{
	size_t was = ((size_t *)old)[-1];
	void *p = real.malloc(n);

	if (p) {
		memcpy(p, old, was < n ? was : n);
		note(p, n, EMEM_REALLOC, NULL, NULL);
	}
	return p;
}

HIDDEN void *emem_realloc(void *old, size_t n)
{
	void *p;

	if (booting()) {
		p = boot_alloc(n, 16);
		if (p && old)
			memcpy(p, old, ((size_t *)old)[-1] < n ? ((size_t *)old)[-1] : n);
		return p;
	}
	READY();
	if (old && in_boot(old))
		return boot_move(old, n);
	/* The old block's free first: a failed realloc is recorded as a free of it (as before). */
	release(old);
	p = real.realloc(old, n);
	note(p, n, EMEM_REALLOC, CALLER);
	return p;
}

HIDDEN void *emem_reallocarray(void *old, size_t n, size_t m)
{
	size_t bytes;
	void *p;

	READY();
	if (__builtin_mul_overflow(n, m, &bytes)) {
		errno = ENOMEM;
		return NULL;
	}
	if (old && in_boot(old))
		return boot_move(old, bytes);
	if (!real.reallocarray)
		return emem_realloc(old, bytes);
	release(old);
	p = real.reallocarray(old, n, m);
	note(p, bytes, EMEM_REALLOCARRAY, CALLER);
	return p;
}

HIDDEN int emem_posix_memalign(void **out, size_t align, size_t n)
{
	int err;

	if (booting()) {
		*out = boot_alloc(n, align);
		return *out ? 0 : ENOMEM;
	}
	READY();
	err = real.posix_memalign(out, align, n);
	if (!err)
		note(*out, n, EMEM_POSIX_MEMALIGN, CALLER);
	return err;
}

HIDDEN void *emem_aligned_alloc(size_t align, size_t n)
{
	void *p;

	if (booting())
		return boot_alloc(n, align);
	READY();
	p = real.aligned_alloc(align, n);
	note(p, n, EMEM_ALIGNED_ALLOC, CALLER);
	return p;
}

HIDDEN void *emem_memalign(size_t align, size_t n)
{
	void *p;

	if (booting())
		return boot_alloc(n, align);
	READY();
	p = real.memalign(align, n);
	note(p, n, EMEM_MEMALIGN, CALLER);
	return p;
}

HIDDEN void *emem_valloc(size_t n)
{
	void *p;

	if (booting())
		return boot_alloc(n, 4096);
	READY();
	p = real.valloc(n);
	note(p, n, EMEM_VALLOC, CALLER);
	return p;
}

HIDDEN void *emem_pvalloc(size_t n)
{
	void *p;

	if (booting())
		return boot_alloc(n, 4096);
	READY();
	p = real.pvalloc(n);
	note(p, n, EMEM_PVALLOC, CALLER);
	return p;
}

/*
 * _exit (and _Exit): a forked child that ends with _exit (Python's os._exit, multiprocessing)
 * would lose the records its threads hold; they are sent first, in the channel mode.
 */
HIDDEN __attribute__((noreturn)) void emem__exit(int status)
{
	if (mean == 1 && chan_on()) {
		cbuf_send_all();
		chan_sync();
	}
	if (real.exit_)
		real.exit_(status);
	for (;;)
		syscall(SYS_exit_group, status);
}

/*
 * exec: what the threads hold is sent, and the recorder names this image's stacks, before
 * the image goes (execve, execv, execvp, execvpe; execl* and posix_spawn are not wrapped).
 */
static void chan_before_exec(void)
{
	if (mean == 1 && chan_on()) {
		cbuf_send_all();
		chan_sync();
	}
}

extern char **environ;

/*
 * Whether a recorder still takes what this process records: its channel answered (it failed
 * at the exec's sync if the recorder went), or, without a channel, a uprobe (int3) sits on
 * the allocation marker.
 */
static bool recorder_here(void)
{
	if (mean == 1 && chan_name[0])
		return chan_on();
	return mean && *(const volatile uint8_t *)(uintptr_t)eprof_mem_hit_alloc == 0xcc;
}

/* An entry the recording put into the environment: EPROF_*, or this library in LD_PRELOAD. */
static bool is_eprof_lib(const char *s, size_t n)
{
	const char *base = s;

	for (size_t i = 0; i < n; i++)
		if (s[i] == '/')
			base = s + i + 1;
	return n - (size_t)(base - s) > 9 && !strncmp(base, "libeprof_", 9);
}

/* EPROF_*, or CUDA_INJECTION64_PATH naming eprof's CUPTI collector: a NAME=VALUE to drop. */
static bool is_eprof_var(const char *e)
{
	static const char cuda[] = "CUDA_INJECTION64_PATH=";

	if (!strncmp(e, "EPROF_", 6))
		return true;
	return !strncmp(e, cuda, sizeof(cuda) - 1) &&
	       is_eprof_lib(e + sizeof(cuda) - 1, strlen(e + sizeof(cuda) - 1));
}

/* LD_PRELOAD=... less eprof's libraries, into out (as long as v). False: none left. */
static bool preload_less_eprof(const char *v, char *out)
{
	size_t n = 0;

	for (const char *p = v; *p;) {
		size_t len = strcspn(p, ": ");

		if (len && !is_eprof_lib(p, len)) {
			if (n)
				out[n++] = ':';
			memmove(out + n, p, len); /* out may be v itself */
			n += len;
		}
		p += len;
		p += *p != '\0';
	}
	out[n] = '\0';
	return n > 0;
}

/*
 * The environment to exec with once the recording has ended: no EPROF_* variable and no
 * eprof library (LD_PRELOAD, CUDA_INJECTION64_PATH), so that the next image neither loads
 * it nor connects to a name another user may have bound since. NULL when there is no room
 * (the exec then fails).
 */
static char *const *env_scrubbed(char *const envp[])
{
	size_t n = 0, room = 0, k = 0;
	char **v, *pre;

	for (; envp && envp[n]; n++)
		if (!strncmp(envp[n], "LD_PRELOAD=", 11))
			room += strlen(envp[n]) + 1;
	v = mmap(NULL, (n + 1) * sizeof(*v) + room + 1, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (v == MAP_FAILED)
		return NULL;
	pre = (char *)(v + n + 1);
	for (size_t i = 0; i < n; i++) {
		if (is_eprof_var(envp[i]))
			continue;
		if (!strncmp(envp[i], "LD_PRELOAD=", 11)) {
			memcpy(pre, "LD_PRELOAD=", 11);
			if (!preload_less_eprof(envp[i] + 11, pre + 11))
				continue;
			v[k++] = pre;
			pre += strlen(pre) + 1;
			continue;
		}
		v[k++] = envp[i];
	}
	v[k] = NULL;
	return v;
}

/*
 * A process started after the recording (its channel is gone): nothing of eprof in the
 * environment it passes on, even by the calls not wrapped (posix_spawn, execl*). In place:
 * unsetenv and an LD_PRELOAD that only gets shorter allocate nothing.
 */
static void env_scrub_self(void)
{
	char *pre = getenv("LD_PRELOAD");

	for (size_t i = 0; environ && environ[i];) {
		char name[64];
		size_t n = strcspn(environ[i], "=");

		if (!is_eprof_var(environ[i]) || n >= sizeof(name)) {
			i++;
			continue;
		}
		memcpy(name, environ[i], n);
		name[n] = '\0';
		unsetenv(name);
	}
	if (pre && !preload_less_eprof(pre, pre))
		unsetenv("LD_PRELOAD");
}

/* The environment an exec passes on: as it is while recording, scrubbed after. */
static char *const *exec_env(char *const envp[])
{
	chan_before_exec();
	if (!mean || recorder_here())
		return envp;
	return env_scrubbed(envp);
}

HIDDEN int emem_execve(const char *path, char *const argv[], char *const envp[])
{
	static int (*next)(const char *, char *const[], char *const[]);
	char *const *env;

	if (!next)
		next = dlsym(RTLD_NEXT, "execve");
	env = exec_env(envp);
	if (!env)
		return errno = E2BIG, -1;
	return next ? next(path, argv, env) : (errno = ENOSYS, -1);
}

HIDDEN int emem_execv(const char *path, char *const argv[])
{
	return emem_execve(path, argv, environ);
}

HIDDEN int emem_execvp(const char *file, char *const argv[])
{
	static int (*next)(const char *, char *const[], char *const[]);
	char *const *env;

	if (!next)
		next = dlsym(RTLD_NEXT, "execvpe");
	env = exec_env(environ);
	if (!env)
		return errno = E2BIG, -1;
	return next ? next(file, argv, env) : (errno = ENOSYS, -1);
}

HIDDEN int emem_execvpe(const char *file, char *const argv[], char *const envp[])
{
	static int (*next)(const char *, char *const[], char *const[]);
	char *const *env;

	if (!next)
		next = dlsym(RTLD_NEXT, "execvpe");
	env = exec_env(envp);
	if (!env)
		return errno = E2BIG, -1;
	return next ? next(file, argv, env) : (errno = ENOSYS, -1);
}

/* The exported names (LD_PRELOAD); attach mode patches GOT entries with the emem_ addresses. */
#define ALIAS(name) EXPORT extern __typeof(emem_##name) name __attribute__((alias("emem_" #name)))
ALIAS(malloc);
ALIAS(free);
ALIAS(calloc);
ALIAS(realloc);
ALIAS(reallocarray);
ALIAS(posix_memalign);
ALIAS(aligned_alloc);
ALIAS(memalign);
ALIAS(valloc);
ALIAS(pvalloc);
EXPORT extern __typeof(emem__exit) _exit __attribute__((alias("emem__exit")));
EXPORT extern __typeof(emem__exit) _Exit __attribute__((alias("emem__exit")));
ALIAS(execve);
ALIAS(execv);
ALIAS(execvp);
ALIAS(execvpe);

/* --- attach mode: GOT entries of every loaded object ------------------------------------- */

/*
 * `record --mem -p PID`: eprof's injector (src/inject/inject.c) dlopens this library in the
 * running process and calls eprof_mem_attach(); the library was not preloaded, so nothing
 * calls its malloc. It redirects the GOT entries (PLT slots and GLOB_DAT) of the allocator
 * functions in every loaded object to its own, forwarding to the program's allocator
 * (RTLD_DEFAULT: glibc's, or jemalloc's when the program links it), so a block allocated
 * before the attach and freed after reaches the allocator that made it (it is not in the
 * sampled set: no free marker). Objects loaded later are patched at the next sample of any
 * thread (dl_iterate_phdr counts loads).
 *
 * eprof_mem_retract() writes every entry back and leaves the library inert (forwarding
 * only): threads may be inside a wrapper, and function pointers taken meanwhile may hold
 * a wrapper's address, so it stays loaded (eprof does not dlclose it).
 *
 * Other threads dlopen and dlclose meanwhile. Entries are kept per object (its base and
 * program headers) and read or written only from dl_iterate_phdr's callback for that object,
 * which holds the lock dlclose takes before it unmaps one; an object's entries are dropped
 * when it is no longer listed or its slots no longer hold our functions (unloaded, loaded
 * again). dl_iterate_phdr lists an object before ld.so has relocated it: a slot is patched
 * only once it holds a relocated address, and a page is made writable only when ld.so has
 * made it read-only (RELRO, once the object is relocated), and read-only again after.
 */
struct patch {
	uintptr_t *slot;
	uintptr_t old;
	uintptr_t base; /* the object's: dlpi_addr and dlpi_phdr */
	const void *phdr;
	uint8_t hook;	/* its index in hooks[] */
	bool seen;	/* listed in this pass, and still ours */
	bool relro;	/* in PT_GNU_RELRO: made writable for the write when writes fail */
};

static const struct {
	const char *name;
	void *fn;
} hooks[] = {
	{ "malloc", (void *)emem_malloc },
	{ "free", (void *)emem_free },
	{ "calloc", (void *)emem_calloc },
	{ "realloc", (void *)emem_realloc },
	{ "reallocarray", (void *)emem_reallocarray },
	{ "posix_memalign", (void *)emem_posix_memalign },
	{ "aligned_alloc", (void *)emem_aligned_alloc },
	{ "memalign", (void *)emem_memalign },
	{ "valloc", (void *)emem_valloc },
	{ "pvalloc", (void *)emem_pvalloc },
	{ "_exit", (void *)emem__exit },
	{ "_Exit", (void *)emem__exit },
};

static struct patch *patches;
static size_t npatches, cappatches;
static atomic_bool attached;
static unsigned long long seen_adds, seen_subs; /* dl_iterate_phdr's counts at the last pass */
static unsigned unready_passes; /* passes that found slots ld.so had not relocated yet */
static pthread_mutex_t patch_lock = PTHREAD_MUTEX_INITIALIZER;
static int restored; /* entries written back since the attach */

static bool push_patch(const struct patch *p)
{
	if (npatches == cappatches) {
		size_t cap = cappatches ? cappatches * 2 : 256;
		struct patch *n = emem_map_zero(cap * sizeof(*n));

		if (!n)
			return false;
		if (patches) {
			memcpy(n, patches, npatches * sizeof(*n));
			munmap(patches, cappatches * sizeof(*n));
		}
		patches = n;
		cappatches = cap;
	}
	patches[npatches++] = *p;
	return true;
}

/* Whether slot's page is writable now: the same value written through the kernel. -1: unknown */
static int slot_writable(uintptr_t *slot)
{
	uintptr_t cur = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
	struct iovec l = { &cur, sizeof(cur) }, r = { slot, sizeof(cur) };

	if (syscall(SYS_process_vm_writev, getpid(), &l, 1UL, &r, 1UL, 0UL) == sizeof(cur))
		return 1;
	return errno == EFAULT ? 0 : -1;
}

/*
 * Writes a GOT entry. A page ld.so made read-only (RELRO) is made writable for the write and
 * read-only again; a writable one (ld.so may still be relocating the object) is left so.
 * Without process_vm_writev (seccomp), the entry's place in PT_GNU_RELRO decides.
 */
static bool write_slot(uintptr_t *slot, uintptr_t v, bool relro)
{
	long pg = sysconf(_SC_PAGESIZE);
	void *page = (void *)((uintptr_t)slot & ~(uintptr_t)(pg - 1));
	int w = slot_writable(slot);
	bool open = w == 0 || (w < 0 && relro);

	if (open && mprotect(page, pg, PROT_READ | PROT_WRITE))
		return false;
	__atomic_store_n(slot, v, __ATOMIC_RELEASE);
	if (open)
		mprotect(page, pg, PROT_READ);
	return true;
}

static int hook_of(const char *name)
{
	for (size_t i = 0; i < sizeof(hooks) / sizeof(hooks[0]); i++)
		if (!strcmp(name, hooks[i].name))
			return (int)i;
	return -1;
}

/* An object being patched: where it is, and its link-time extent. */
struct pobj {
	uintptr_t base, rlo, rhi, end; /* end: its highest link-time address */
	const void *phdr;
	bool unready; /* a slot held no relocated address yet */
};

/*
 * Whether v, read from a GOT slot, is an address ld.so relocated: 0 and a link-time value
 * (below the object's extent, for an object loaded at a bias) are not.
 */
static bool relocated(const struct pobj *o, uintptr_t v)
{
	return v && !(o->base && v < o->end);
}

static void patch_relocs(struct pobj *o, const ElfW(Rela) *r, size_t bytes, const ElfW(Sym) *sym,
			 const char *str)
{
	for (size_t i = 0; i < bytes / sizeof(*r); i++) {
		unsigned type = ELF64_R_TYPE(r[i].r_info);
		struct patch p = { .base = o->base, .phdr = o->phdr, .seen = true };
		uintptr_t v;
		int h;

		if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT)
			continue;
		h = hook_of(str + sym[ELF64_R_SYM(r[i].r_info)].st_name);
		if (h < 0)
			continue;
		p.slot = (uintptr_t *)(o->base + r[i].r_offset);
		v = __atomic_load_n(p.slot, __ATOMIC_ACQUIRE);
		if (v == (uintptr_t)hooks[h].fn)
			continue; /* done already */
		if (!relocated(o, v)) {
			o->unready = true; /* ld.so has not got there: the next pass */
			continue;
		}
		p.old = v;
		p.hook = (uint8_t)h;
		p.relro = (uintptr_t)p.slot >= o->rlo && (uintptr_t)p.slot < o->rhi;
		if (push_patch(&p) && !write_slot(p.slot, (uintptr_t)hooks[h].fn, p.relro))
			npatches--;
	}
}

/* glibc relocates the d_ptr values of _DYNAMIC in place; other loaders may not. */
static uintptr_t dptr(uintptr_t base, uintptr_t v)
{
	return v < base ? v + base : v;
}

/* This pass lists the object: its entries patched before are kept while they are ours. */
static void mark_seen(const struct pobj *o)
{
	for (size_t i = 0; i < npatches; i++) {
		struct patch *p = &patches[i];

		if (p->base == o->base && p->phdr == o->phdr && !p->seen)
			p->seen = __atomic_load_n(p->slot, __ATOMIC_ACQUIRE) ==
				  (uintptr_t)hooks[p->hook].fn;
	}
}

static const ElfW(Dyn) *object_extent(struct dl_phdr_info *info, struct pobj *o)
{
	const ElfW(Dyn) *dyn = NULL;
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);

	*o = (struct pobj){ .base = info->dlpi_addr, .phdr = info->dlpi_phdr };
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type == PT_LOAD && ph->p_vaddr + ph->p_memsz > o->end)
			o->end = ph->p_vaddr + ph->p_memsz;
		if (ph->p_type == PT_DYNAMIC)
			dyn = (const ElfW(Dyn) *)(o->base + ph->p_vaddr);
		else if (ph->p_type == PT_GNU_RELRO) {
			/* ld.so protects its whole pages; a last partial one stays writable */
			o->rlo = (o->base + ph->p_vaddr) & ~(pg - 1);
			o->rhi = (o->base + ph->p_vaddr + ph->p_memsz) & ~(pg - 1);
		}
	}
	return dyn;
}

static int patch_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	const ElfW(Rela) *jmprel = NULL, *rela = NULL;
	uintptr_t self = (uintptr_t)arg;
	size_t pltsz = 0, relasz = 0;
	const ElfW(Sym) *sym = NULL;
	const ElfW(Dyn) *dyn;
	const char *str = NULL;
	struct pobj o;

	(void)size;
	seen_adds = info->dlpi_adds;
	seen_subs = info->dlpi_subs;
	if (info->dlpi_addr == self || strstr(info->dlpi_name, "linux-vdso") ||
	    strstr(info->dlpi_name, "/ld-linux"))
		return 0;
	dyn = object_extent(info, &o);
	mark_seen(&o);
	for (; dyn && dyn->d_tag != DT_NULL; dyn++) {
		switch (dyn->d_tag) {
		case DT_SYMTAB:
			sym = (const ElfW(Sym) *)dptr(o.base, dyn->d_un.d_ptr);
			break;
		case DT_STRTAB:
			str = (const char *)dptr(o.base, dyn->d_un.d_ptr);
			break;
		case DT_JMPREL:
			jmprel = (const ElfW(Rela) *)dptr(o.base, dyn->d_un.d_ptr);
			break;
		case DT_PLTRELSZ:
			pltsz = dyn->d_un.d_val;
			break;
		case DT_RELA:
			rela = (const ElfW(Rela) *)dptr(o.base, dyn->d_un.d_ptr);
			break;
		case DT_RELASZ:
			relasz = dyn->d_un.d_val;
			break;
		}
	}
	if (!sym || !str)
		return 0;
	if (jmprel)
		patch_relocs(&o, jmprel, pltsz, sym, str);
	if (rela)
		patch_relocs(&o, rela, relasz, sym, str);
	if (o.unready)
		unready_passes++;
	return 0;
}

struct alloc_obj {
	uintptr_t self;
	void *handle;
};

/* The first library, in load order, that defines malloc itself. */
static int find_allocator(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct alloc_obj *a = arg;
	Dl_info di;
	void *h, *m;

	(void)size;
	if (!info->dlpi_name[0] || info->dlpi_addr == a->self ||
	    strstr(info->dlpi_name, "linux-vdso"))
		return 0;
	h = dlopen(info->dlpi_name, RTLD_NOLOAD | RTLD_LAZY);
	if (!h)
		return 0;
	m = dlsym(h, "malloc");
	if (m && dladdr(m, &di) && di.dli_fname && !strcmp(di.dli_fname, info->dlpi_name)) {
		a->handle = h;
		return 1;
	}
	dlclose(h);
	return 0;
}

/*
 * Attach mode: the allocator the program uses. dlsym(RTLD_DEFAULT) answers the executable's
 * canonical PLT entry when it takes malloc's address (a non-PIE python3 does), whose GOT
 * slot is about to lead to us: the first library that defines malloc is asked instead,
 * unless the executable defines it itself.
 */
static bool resolve_program(uintptr_t self)
{
	struct alloc_obj a = { .self = self };

	if (resolve(RTLD_DEFAULT))
		return true;
	dl_iterate_phdr(find_allocator, &a);
	return a.handle && resolve(a.handle);
}

static uintptr_t self_base(void)
{
	Dl_info di;

	return dladdr((void *)emem_malloc, &di) ? (uintptr_t)di.dli_fbase : 0;
}

/* Drops the entries of objects this pass did not list, or whose slots are no longer ours. */
static void drop_unseen(void)
{
	size_t n = 0;

	for (size_t i = 0; i < npatches; i++)
		if (patches[i].seen)
			patches[n++] = patches[i];
	npatches = n;
}

/* One pass over the loaded objects, under patch_lock. */
static void patch_all(void)
{
	unsigned unready = unready_passes;

	for (size_t i = 0; i < npatches; i++)
		patches[i].seen = false;
	dl_iterate_phdr(patch_object, (void *)self_base());
	drop_unseen();
	/* slots ld.so had not relocated: another pass at the next look (64 at most) */
	if (unready_passes != unready && unready_passes < 64)
		seen_adds = seen_subs = ~0ULL;
}

static int count_adds(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	((unsigned long long *)arg)[0] = info->dlpi_adds;
	((unsigned long long *)arg)[1] = info->dlpi_subs;
	return 1;
}

/* From a sampled call: objects loaded or unloaded since the last look. */
static void patch_new_objects(void)
{
	unsigned long long n[2] = { 0, 0 };

	if (!atomic_load(&attached) || pthread_mutex_trylock(&patch_lock))
		return;
	dl_iterate_phdr(count_adds, n);
	if ((n[0] != seen_adds || n[1] != seen_subs) && atomic_load(&attached))
		patch_all();
	pthread_mutex_unlock(&patch_lock);
}

EXPORT int eprof_mem_attach(void *blob)
{
	const struct emem_attach_arg *a = blob;
	int err;

	_Static_assert(sizeof(*a) == 80, "emem_attach_arg");

	if (!a)
		return -EINVAL;
	if (atomic_load(&attached) || (mean && !patches)) {
		err = -EALREADY; /* attached, or preloaded and sampling */
		goto refuse;
	}
	if (a->mean < 1) {
		err = -EINVAL;
		goto refuse;
	}
	if (!resolve_program(self_base())) {
		err = -ENOENT;
		goto refuse;
	}
	if (!have_key) {
		pthread_atfork(fork_prepare, fork_after, fork_child);
		have_key = !pthread_key_create(&flush_key, flush_calls);
	}
	atomic_store(&state, ST_READY);
	my_pid = (unsigned)getpid();
	chan_name[0] = '\0'; /* an earlier recorder's is gone */
	if (a->mean == 1 && a->sock[0] && memchr(a->sock, 0, sizeof(a->sock)))
		strcpy(chan_name, a->sock);
	{
		/* A connection of an earlier attach (retracted since: nothing sends on it) goes. */
		int fd = -1, old;

		if (a->mean == 1 && a->chan_fd >= 0)
			fd = chan_adopt(a->chan_fd);
		else if (a->mean == 1 && chan_name[0])
			fd = chan_connect(chan_name);
		else if (a->chan_fd >= 0)
			close(a->chan_fd);
		if (fd >= 0)
			emem_stacks_reset();
		old = atomic_exchange(&chan_fd, fd);
		if (old >= 0 && old != fd)
			close(old);
	}
	mean = a->mean;
	pthread_mutex_lock(&patch_lock);
	restored = 0;
	atomic_store(&attached, true);
	patch_all();
	pthread_mutex_unlock(&patch_lock);
	return npatches ? 0 : -ENOENT;
refuse:
	if (a->chan_fd >= 0)
		close(a->chan_fd);
	return err;
}

/* The entries of a listed object that still hold our functions get their values back. */
static int restore_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	(void)arg;
	for (size_t i = 0; i < npatches; i++) {
		struct patch *p = &patches[i];

		if (p->base != info->dlpi_addr || p->phdr != info->dlpi_phdr ||
		    __atomic_load_n(p->slot, __ATOMIC_ACQUIRE) != (uintptr_t)hooks[p->hook].fn)
			continue;
		if (write_slot(p->slot, p->old, p->relro))
			restored++;
	}
	return 0;
}

/*
 * The retraction runs in a thread eprof borrowed, which another thread may be waiting on: no
 * lock is waited on longer than this; it says -EBUSY instead, and eprof tries again later,
 * in another thread.
 */
#define RETRACT_WAIT_NS 100000000ULL

static bool tpage_lock_until(struct tpage *t, uint64_t until)
{
	while (atomic_exchange_explicit(&t->busy, 1, memory_order_acquire)) {
		if (now_ns() >= until)
			return false;
		sched_yield();
	}
	return true;
}

/* Sends every page of list whose lock comes free in time: false when one did not. */
static bool tpage_send_all_until(struct tpage *_Atomic *list, void (*send)(struct tpage *),
				 uint64_t until)
{
	bool all = true;

	for (struct tpage *t = atomic_load(list); t; t = t->next) {
		if (!tpage_lock_until(t, until)) {
			all = false;
			continue;
		}
		send(t);
		tpage_unlock(t);
	}
	return all;
}

/*
 * Restores every entry; the library stays loaded and inert. Returns the entries restored,
 * or -EBUSY when a lock stayed taken (what was done stays done: called again, it goes on).
 */
EXPORT int eprof_mem_retract(uint64_t arg)
{
	uint64_t until = now_ns() + RETRACT_WAIT_NS;
	bool sent;

	(void)arg;
	while (pthread_mutex_trylock(&patch_lock)) {
		if (now_ns() >= until)
			return -EBUSY;
		sched_yield();
	}
	if (atomic_load(&attached)) {
		atomic_store(&attached, false);
		dl_iterate_phdr(restore_object, NULL);
		npatches = 0;
	}
	mean = 0; /* wrappers still running, or reached through a saved pointer: forward only */
	pthread_mutex_unlock(&patch_lock);
	if (calls)
		eprof_mem_hit_alloc(NULL, 0, 0, calls, NULL, NULL);
	calls = 0;
	sent = tpage_send_all_until(&batches, batch_send, until);
	sent = tpage_send_all_until(&cbufs, cbuf_send, until) && sent;
	if (!sent)
		return -EBUSY;
	if (chan_on()) {
		struct emem_msg end = { .magic = EMEM_MSG_MAGIC, .kind = EMEM_MSG_END, .pid = my_pid };

		emem_chan_send(&end, sizeof(end));
	}
	return restored;
}
