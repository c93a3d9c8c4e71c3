// SPDX-License-Identifier: MIT
/*
 * Whether a stopped thread may be borrowed: the code it runs and every frame of its stack.
 * dlopen, the entry it calls and a retraction take the loader's locks, the allocator's, the
 * atexit and atfork lists' and those of eprof's own libraries; a thread stopped anywhere
 * beneath one of those (a frame in ld.so, in libc's allocator or dl_iterate_phdr, in
 * libgcc_s's unwinder, in libeprof_mem.so's channel) may hold the lock, and the call made in
 * it would wait on itself for ever.
 *
 * The stack is scanned whole, from the stack pointer to the top of its mapping (the main
 * thread's: to __libc_start_main's frame), for return addresses: a word that points just
 * after a call instruction in such code. Stale words that happen to look like one only make
 * a thread be passed over.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inject_internal.h"
#include "inject_stub.h"

#define SCAN_MAX (1u << 20) /* stack bytes read above the stack pointer */

/* Objects all of whose code may hold a lock the injection takes (by file name). */
static bool risky_name(const char *path, bool at_ip)
{
	static const char *const always[] = {
	    "ld-linux",	   "ld-",	  "libpthread",	 "libdl",     "libgcc_s",
	    "libjemalloc", "libtcmalloc", "libmimalloc", "libeprof_", "memfd:eprof"};
	/* at the instruction pointer, all of libc and libstdc++ (their frames are judged by
	 * function below) */
	static const char *const at_ip_only[] = {"libc.so", "libc-", "libstdc++"};
	const char *b = strrchr(path, '/');

	if (path[0] != '/')
		return false; /* anonymous (JIT), vdso */
	b++;
	for (size_t i = 0; i < sizeof(always) / sizeof(always[0]); i++)
		if (!strncmp(b, always[i], strlen(always[i])))
			return true;
	for (size_t i = 0; at_ip && i < sizeof(at_ip_only) / sizeof(at_ip_only[0]); i++)
		if (!strncmp(b, at_ip_only[i], strlen(at_ip_only[i])))
			return true;
	return false;
}

/* An anonymous executable mapping that starts with the injector's stub (a stub of ours). */
static bool is_stub(pid_t pid, const struct rmap *r)
{
#if defined(__x86_64__)
	unsigned char head[32];

	if (r->path[0] || r->perms[2] != 'x' || rmem_read(pid, r->start, head, sizeof(head)))
		return false;
	return !memcmp(head, eprof_inj_stub, sizeof(head));
#else
	(void)pid;
	(void)r;
	return false;
#endif
}

static const char *const libc_risky[] = {
    /* the allocator (an arena lock, or the entry calls malloc) */
    "malloc", "free", "calloc", "realloc", "reallocarray", "memalign", "posix_memalign",
    "aligned_alloc", "valloc", "pvalloc", "malloc_trim", "malloc_info", "malloc_stats", "mallinfo",
    "mallinfo2",
    /* the loader's locks, taken through libc */
    "dl_iterate_phdr", "dlopen", "dlmopen", "dlclose", "dlsym", "dlvsym", "dladdr", "dladdr1",
    "dlinfo", "dlerror", "__libc_dlopen_mode", "__libc_dlsym", "__libc_dlclose",
    /* thread, fork and exit lists (pthread_create, pthread_atfork, __cxa_atexit) */
    "pthread_create", "pthread_exit", "fork", "_Fork", "pthread_atfork", "__register_atfork",
    "__cxa_atexit", "__cxa_finalize", "__cxa_thread_atexit_impl", "atexit", "on_exit", "exit"};

static int cmp_range(const void *a, const void *b)
{
	const struct rrange *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static int add_range(struct rranges *s, uint64_t lo, uint64_t hi, int kind, const char *what)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 64;
		struct rrange *v = realloc(s->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n] = (struct rrange){lo, hi, kind, ""};
	snprintf(s->v[s->n++].what, sizeof(s->v[0].what), "%s", what);
	return 0;
}

/* The executable mappings: risky objects (k->risky), the others (k->code, clean or not). */
static int add_mapping(pid_t pid, struct rrisk *k, const struct rmap *r)
{
	const char *b = strrchr(r->path, '/');

	if (risky_name(r->path, false))
		return add_range(&k->risky, r->start, r->end, RR_OBJECT, b + 1);
	if (is_stub(pid, r))
		return add_range(&k->risky, r->start, r->end, RR_OBJECT, "the injector's stub");
	/* libc's and libstdc++'s other frames neither make a stack unsafe nor end the part
	 * where frames of risky objects count */
	return add_range(&k->code, r->start, r->end,
			 r->path[0] == '/' && risky_name(r->path, true) ? RR_NEUTRAL : RR_CLEAN,
			 b ? b + 1 : r->path);
}

/* The code ranges whose frames make a thread unsafe, sorted. 0 or -ENOMEM. */
int rrisk_init(pid_t pid, const struct rmaps *m, struct rrisk *k)
{
	const struct rmap *libc = NULL;
	int err = 0;

	memset(k, 0, sizeof(*k));
	for (size_t i = 0; i < m->n && !err; i++) {
		const struct rmap *r = &m->v[i];
		const char *b = strrchr(r->path, '/');

		if (!libc && r->offset == 0 && b &&
		    (!strncmp(b + 1, "libc.so", 7) || !strncmp(b + 1, "libc-", 5)))
			libc = r;
		if (r->perms[2] == 'x')
			err = add_mapping(pid, k, r);
	}
	if (libc && !rsym_range(pid, libc->start, "__libc_start_main", &k->root.lo, &k->root.hi))
		k->root.hi += k->root.lo;
	for (size_t i = 0; libc && !err && i < sizeof(libc_risky) / sizeof(libc_risky[0]); i++) {
		uint64_t at = 0, size = 0;

		if (!rsym_range(pid, libc->start, libc_risky[i], &at, &size) && size)
			err = add_range(&k->risky, at, at + size, RR_FUNCTION, libc_risky[i]);
	}
	if (err) {
		rrisk_free(k);
		return err;
	}
	qsort(k->risky.v, k->risky.n, sizeof(*k->risky.v), cmp_range);
	qsort(k->code.v, k->code.n, sizeof(*k->code.v), cmp_range);
	return 0;
}

void rrisk_free(struct rrisk *k)
{
	free(k->risky.v);
	free(k->code.v);
	memset(k, 0, sizeof(*k));
}

static const struct rrange *range_find(const struct rranges *s, uint64_t a)
{
	size_t lo = 0, hi = s->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (a < s->v[mid].lo)
			hi = mid;
		else if (a >= s->v[mid].hi)
			lo = mid + 1;
		else
			return &s->v[mid];
	}
	return NULL;
}

/* Whether the bytes before ret end in a call (e8 rel32, or ff /2 in its register, disp8,
 * disp32 and SIB forms). */
static bool after_call(pid_t pid, uint64_t ret)
{
	unsigned char c[8];

	if (ret < 8 || rmem_read(pid, ret - 8, c, sizeof(c)))
		return false;
	if (c[3] == 0xe8)
		return true;
	for (int len = 2; len <= 7; len++) {
		unsigned char op = c[8 - len], modrm = c[9 - len];

		if (op == 0xff && (modrm & 0x38) == 0x10)
			return true;
	}
	return false;
}

/* The instruction pointer is in code that may hold such a lock. */
bool rrisk_code(const struct rmaps *m, const struct rrisk *k, uint64_t ip)
{
	const struct rmap *r = rmaps_find(m, ip);

	if (range_find(&k->risky, ip))
		return true;
	return r && risky_name(r->path, true);
}

/*
 * The frame a stack word would be: a risky one (returned), or a clean one (*clean set: the
 * program's own code; frames of risky objects beyond it are not counted, see rrisk_stack).
 */
static const struct rrange *frame_of(pid_t pid, const struct rrisk *k, uint64_t w, bool inner,
				     bool *clean)
{
	const struct rrange *r = range_find(&k->risky, w), *c;

	if (r && (r->kind == RR_FUNCTION || inner) && after_call(pid, w))
		return r;
	if (!r && inner && (c = range_find(&k->code, w)) && c->kind == RR_CLEAN &&
	    after_call(pid, w))
		*clean = true;
	return NULL;
}

/*
 * Whether a frame of the stack (sp up to the top of its mapping) returns into risky code:
 * 1 (what in why), 0, or -errno when the stack cannot be read.
 *
 * libc's risky functions count at any depth (dl_iterate_phdr and dlopen call the program
 * back). Risky objects count up to the first frame of the program's own code (or not at all
 * when the thread runs the program's code): ld.so is entered from the program (a PLT slot,
 * __tls_get_addr) or through libc's dlopen & co, and ld.so's start-up left its return
 * addresses in the words the main thread's first frames now hold, unwritten.
 */
int rrisk_stack(pid_t pid, const struct rmaps *m, const struct rrisk *k, uint64_t sp, uint64_t ip,
		char *why, size_t len)
{
	const struct rmap *st = rmaps_find(m, sp);
	const struct rrange *at = range_find(&k->code, ip);
	uint64_t from = sp & ~(uint64_t)7, to;
	bool inner = !at || at->kind != RR_CLEAN; /* in the program's code: past the inner part */
	uint64_t *w;
	int ret = 0;

	if (!st)
		return -EFAULT;
	to = st->end - from > SCAN_MAX ? from + SCAN_MAX : st->end;
	w = malloc(to - from);
	if (!w)
		return -ENOMEM;
	if (rmem_read(pid, from, w, to - from)) {
		free(w);
		return -EFAULT;
	}
	for (size_t i = 0; i < (to - from) / 8 && !ret; i++) {
		bool clean = false;
		const struct rrange *r;

		/* the main thread's outermost frame: nothing above it is a frame */
		if (w[i] > k->root.lo && w[i] < k->root.hi && after_call(pid, w[i]))
			break;
		r = frame_of(pid, k, w[i], inner, &clean);
		if (r) {
			snprintf(why, len, "a frame in %s", r->what);
			ret = 1;
		}
		inner = inner && !clean;
	}
	free(w);
	return ret;
}
