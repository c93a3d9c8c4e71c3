// SPDX-License-Identifier: MIT
/*
 * libeprof_mem.so's own stacks (--mem=1 through the channel): no uprobe, no stack copy.
 *
 * Unwinding: the thread's stack is read in place, by the rules of the recorder's unwinder
 * (src/unwind/unwind.c) with the recorder's CFI rows (src/unwind/cfi_build.c), built once
 * per loaded object from its .eh_frame in memory (PT_GNU_EH_FRAME) the first time one of
 * its pcs is met; a per-thread cache keeps the row of each return address. Every read is
 * checked against the thread's stack (sp to its top), so a bad rule cannot fault. Objects are found through a sorted
 * array (rebuilt by dl_iterate_phdr when _dl_find_object knows a pc the array does not); a
 * pc in no object (JIT code) ends the unwind, which is then marked truncated, as is one
 * that stopped for any reason before the outermost frame.
 *
 * Deduplication: a hash of the return addresses finds the stack in an open-addressing table
 * (memory from mmap); a new one is sent (EMEM_MSG_STACK) under the table's lock before its
 * slot is published, so any record naming the id is behind its definition on the socket.
 */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <linux/types.h>

#include "eprof_abi.h"
#include "unwind/cfi.h"
#include "unwind/dwarf_read.h"
#include "unwind/unwind.h"
#include "eprof_mem_proto.h"
#include "eprof_mem_recv.h"
#include "eprof_mem_stack.h"

#define TLS __thread __attribute__((tls_model("initial-exec")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

unsigned long emem_stk_trunc, emem_stk_sent, emem_stk_full, emem_stk_resets;

static void spin_lock(atomic_flag *l)
{
	while (atomic_flag_test_and_set_explicit(l, memory_order_acquire))
		sched_yield();
}

static void spin_unlock(atomic_flag *l)
{
	atomic_flag_clear_explicit(l, memory_order_release);
}

/* The library's own memory: zero pages, marked as eprof's (EPROF_MEM_OWN_MAP_OFF). */
void *emem_map_zero(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
		       (off_t)EPROF_MEM_OWN_MAP_OFF);

	return p == MAP_FAILED ? NULL : p;
}

static void *map_zero(size_t bytes)
{
	return emem_map_zero(bytes);
}


/* --- loaded objects ----------------------------------------------------------------------- */

struct eobj {
	uintptr_t lo, hi;	/* executable segments, run-time addresses */
	uintptr_t bias;		/* run-time minus ELF vaddr */
	uintptr_t ehf;		/* .eh_frame, run-time; 0: none */
	size_t ehf_len;		/* to the end of its segment */
	uint64_t text_lo, text_hi; /* ELF vaddrs of the executable segments */
	struct cfi_table *_Atomic t;
	atomic_bool tried;
};

struct objset {
	size_t n;
	struct eobj v[];
};

static struct objset *_Atomic objs; /* replaced whole, never freed (a reader may hold one) */
static atomic_flag obj_lock = ATOMIC_FLAG_INIT;

static struct eobj *obj_find(struct objset *s, uintptr_t pc)
{
	size_t lo = 0, hi = s ? s->n : 0;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (pc < s->v[mid].lo)
			hi = mid;
		else if (pc >= s->v[mid].hi)
			lo = mid + 1;
		else
			return &s->v[mid];
	}
	return NULL;
}

struct collect {
	struct objset *old, *n;
	size_t cap;
};

/* .eh_frame of an object, from its .eh_frame_hdr. */
static void eh_frame_of(struct dl_phdr_info *info, struct eobj *o)
{
	const ElfW(Phdr) *hdr = NULL;
	struct dw_cursor c;
	uint64_t ehf;
	uint8_t enc;

	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_GNU_EH_FRAME)
			hdr = &info->dlpi_phdr[i];
	if (!hdr || hdr->p_memsz < 8)
		return;
	c = (struct dw_cursor){ .p = (const uint8_t *)(info->dlpi_addr + hdr->p_vaddr),
				.sec = (const uint8_t *)(info->dlpi_addr + hdr->p_vaddr),
				.sec_vaddr = hdr->p_vaddr, .data_base = hdr->p_vaddr };
	c.end = c.p + hdr->p_memsz;
	if (dw_u8(&c) != 1)
		return;
	enc = dw_u8(&c);
	dw_u8(&c);
	dw_u8(&c);
	ehf = dw_encoded(&c, enc, 8);
	if (c.err)
		return;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type == PT_LOAD && ehf >= ph->p_vaddr && ehf < ph->p_vaddr + ph->p_memsz) {
			o->ehf = info->dlpi_addr + ehf;
			o->ehf_len = ph->p_vaddr + ph->p_memsz - ehf;
			return;
		}
	}
}

static int collect_one(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct collect *c = arg;
	struct eobj o = { .lo = UINTPTR_MAX, .bias = info->dlpi_addr, .text_lo = UINT64_MAX };
	struct eobj *old;

	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		if (ph->p_vaddr < o.text_lo)
			o.text_lo = ph->p_vaddr;
		if (ph->p_vaddr + ph->p_memsz > o.text_hi)
			o.text_hi = ph->p_vaddr + ph->p_memsz;
	}
	if (o.text_lo >= o.text_hi)
		return 0;
	o.lo = info->dlpi_addr + o.text_lo;
	o.hi = info->dlpi_addr + o.text_hi;
	if (c->n->n == c->cap)
		return 1; /* the rest is looked up again later */
	old = obj_find(c->old, o.lo);
	if (old && old->lo == o.lo && old->hi == o.hi && old->bias == o.bias) {
		o.ehf = old->ehf;
		o.ehf_len = old->ehf_len;
		atomic_init(&o.t, atomic_load(&old->t));
		atomic_init(&o.tried, atomic_load(&old->tried));
	} else {
		eh_frame_of(info, &o);
	}
	c->n->v[c->n->n++] = o;
	return 0;
}

static int cmp_obj(const void *a, const void *b)
{
	const struct eobj *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* A new sorted array of the loaded objects (tables kept). Under obj_lock. */
static void rescan(void)
{
	struct collect c = { .old = atomic_load(&objs), .cap = 4096 };

	c.n = map_zero(sizeof(*c.n) + c.cap * sizeof(struct eobj));
	if (!c.n)
		return;
	dl_iterate_phdr(collect_one, &c);
	qsort(c.n->v, c.n->n, sizeof(c.n->v[0]), cmp_obj);
	atomic_store_explicit(&objs, c.n, memory_order_release);
}

/* The table of o, built the first time (the caller holds the thread's guard). */
static struct cfi_table *table_of(struct eobj *o)
{
	struct cfi_table *t = atomic_load_explicit(&o->t, memory_order_acquire);
	struct cfi_builder *b;
	int err = 0;

	if (likely(t) || atomic_load_explicit(&o->tried, memory_order_relaxed))
		return t;
	spin_lock(&obj_lock);
	t = atomic_load(&o->t);
	if (!t && !atomic_load(&o->tried) && o->ehf) {
		b = cfi_builder__new(o->text_lo, o->text_hi);
		if (b && !cfi_builder__add(b, (const uint8_t *)o->ehf, o->ehf_len,
					   o->ehf - o->bias, true, 8))
			t = cfi_builder__finish(b, &err);
		cfi_builder__free(b);
		atomic_store_explicit(&o->t, t, memory_order_release);
	}
	atomic_store(&o->tried, true);
	spin_unlock(&obj_lock);
	return t;
}

static bool find(void *ctx, uint64_t pc, const struct cfi_table **t, uint64_t *bias)
{
	struct objset *s = atomic_load_explicit(&objs, memory_order_acquire);
	struct eobj *o = obj_find(s, pc);

	(void)ctx;
	if (unlikely(!o)) {
		struct dl_find_object dlfo;

		if (_dl_find_object((void *)(uintptr_t)pc, &dlfo))
			return false; /* in no object: JIT code, or garbage */
		spin_lock(&obj_lock);
		if (atomic_load(&objs) == s)
			rescan();
		spin_unlock(&obj_lock);
		o = obj_find(atomic_load_explicit(&objs, memory_order_acquire), pc);
		if (!o)
			return false;
	}
	*t = table_of(o);
	*bias = o->bias;
	return true;
}

/* --- the thread's stack ------------------------------------------------------------------- */

static TLS uintptr_t stk_lo, stk_hi; /* 0, 0: not looked up yet; lo == hi: unknown */

static void stack_bounds(void)
{
	pthread_attr_t a;
	void *addr;
	size_t size;

	stk_lo = stk_hi = 1;
	if (pthread_getattr_np(pthread_self(), &a))
		return;
	if (!pthread_attr_getstack(&a, &addr, &size)) {
		stk_lo = (uintptr_t)addr;
		stk_hi = (uintptr_t)addr + size;
	}
	pthread_attr_destroy(&a);
}

/* --- Python frames ------------------------------------------------------------------------ */

/*
 * The interpreter's layout, from the recorder (EMEM_MSG_PYLAYOUT: the py_proc it hands its
 * BPF walker). The thread's state comes from PyGILState_GetThisThreadState(), which knows
 * a thread's state whether or not it holds the GIL; its frames are its own, so they are
 * read in place.
 */
static struct py_proc py;
static atomic_bool py_on;
static void *(*py_tstate)(void);

void emem_py_set(const struct py_proc *layout)
{
	if (atomic_load(&py_on) || !emem_py_layout_sane(layout))
		return;
	py_tstate = (void *(*)(void))dlsym(RTLD_DEFAULT, "PyGILState_GetThisThreadState");
	if (!py_tstate)
		return;
	py = *layout;
	atomic_store_explicit(&py_on, true, memory_order_release);
}

/*
 * The thread's interpreter frames, leaf first, as bpf/python.bpf.h's py_step() records them;
 * the reads at the layout's offsets are eprof_mem_recv.h's (checked by emem_py_layout_sane).
 */
static int py_walk(uint64_t *recs, int max, bool *more)
{
	uint64_t ts, frame;
	int n = 0;

	*more = false;
	if (!atomic_load_explicit(&py_on, memory_order_acquire))
		return 0;
	ts = (uintptr_t)py_tstate();
	if (!ts)
		return 0;
	frame = emem_py_top(&py, ts);
	for (int i = 0; frame && i < max + 16; i++) {
		struct emem_py_frame f;

		emem_py_frame_read(&py, (const uint8_t *)(uintptr_t)frame, &f);
		if (f.cstack) {
			if (n > 0)
				recs[2 * (n - 1)] |= 1; /* the first frame of its eval call */
			frame = f.prev;
			continue;
		}
		if (n >= max) {
			*more = true;
			break;
		}
		recs[2 * n] = f.code | f.entry;
		recs[2 * n + 1] = f.instr;
		n++;
		frame = f.prev;
	}
	return n;
}

/* --- the stack table ---------------------------------------------------------------------- */

#define STK_BITS 20		      /* slots: a million distinct stacks */
#define STK_ARENA (256ULL << 20)      /* their frames (reserved, touched as used) */

struct sslot {
	_Atomic uint64_t key; /* hash | 1 once published; 0: empty */
	uint32_t id;
	uint32_t n;	      /* words: native frames, then 2 per Python frame */
	uint32_t shape;	      /* native frames | Python frames << 16 | flags << 24 */
	uint64_t off;	      /* first word in the arena */
};

/* Ids never start again (a thread may still hold records with an old one): this many. */
#define STK_MAX_ID ((1u << 24) - 1)

static struct sslot *stab;
static uint64_t *arena;
static size_t arena_used, stab_count;
static uint32_t next_id = 1;
static atomic_flag stab_lock = ATOMIC_FLAG_INIT;
/*
 * Odd while the table is being emptied (stab_reset): a lookup that saw it change takes the
 * lock instead of trusting what it read.
 */
static _Atomic uint32_t stab_gen;

static bool stab_init(void)
{
	static atomic_flag once = ATOMIC_FLAG_INIT;
	static _Atomic bool ready;

	if (likely(atomic_load_explicit(&ready, memory_order_acquire)))
		return stab != NULL;
	spin_lock(&once);
	if (!atomic_load(&ready)) {
		stab = map_zero(sizeof(*stab) << STK_BITS);
		arena = map_zero(STK_ARENA);
		if (!stab || !arena)
			stab = NULL;
		atomic_store_explicit(&ready, true, memory_order_release);
	}
	spin_unlock(&once);
	return stab != NULL;
}

static uint64_t hash_ips(const uint64_t *ips, uint32_t n, uint32_t shape)
{
	uint64_t h = 0x9e3779b97f4a7c15ULL ^ n ^ (uint64_t)shape << 32;

	for (uint32_t i = 0; i < n; i++) {
		h ^= ips[i];
		h *= 0xff51afd7ed558ccdULL;
		h ^= h >> 32;
	}
	return h | 1;
}

static bool same(const struct sslot *s, const uint64_t *w, uint32_t n, uint32_t shape)
{
	return s->n == n && s->shape == shape && !memcmp(arena + s->off, w, n * sizeof(*w));
}

static void stab_reset(void)
{
	atomic_fetch_add_explicit(&stab_gen, 1, memory_order_acq_rel);
	madvise(stab, sizeof(*stab) << STK_BITS, MADV_DONTNEED); /* zero pages again */
	madvise(arena, STK_ARENA, MADV_DONTNEED);
	arena_used = 0;
	stab_count = 0;
	emem_stk_resets++;
	atomic_fetch_add_explicit(&stab_gen, 1, memory_order_acq_rel);
}

/* A new stack: sent, then published. 0 when the ids are used up (STK_MAX_ID). */
static unsigned intern(uint64_t h, const uint64_t *w, uint32_t n, uint32_t shape, uint64_t ns,
		       unsigned pid, unsigned tid)
{
	const size_t mask = ((size_t)1 << STK_BITS) - 1;
	uint32_t nat = shape & 0xffff, npy = (shape >> 16) & 0xff;
	unsigned id = 0;
	size_t j;

	spin_lock(&stab_lock);
	for (j = h & mask; atomic_load_explicit(&stab[j].key, memory_order_relaxed);
	     j = (j + 1) & mask)
		if (stab[j].key == h && same(&stab[j], w, n, shape)) {
			id = stab[j].id; /* another thread was first */
			goto out;
		}
	if (stab_count >= (mask >> 1) || (arena_used + n) * 8 > STK_ARENA) {
		/*
		 * Full (a big job meets hundreds of thousands of distinct stacks, Python's
		 * included): empty the table and go on with new ids; the stacks still in use
		 * are sent again as they come. The recorder keeps every id it was sent.
		 */
		if (next_id >= STK_MAX_ID) {
			emem_stk_full++;
			goto out;
		}
		stab_reset();
		j = h & mask;
	}
	{
		struct {
			struct emem_msg h;
			struct emem_stack s;
			uint64_t w[EMEM_STACK_MAX + 2 * EMEM_PY_MAX];
		} m;

		m.h = (struct emem_msg){ .magic = EMEM_MSG_MAGIC, .kind = EMEM_MSG_STACK,
					 .n = (unsigned short)nat, .pid = pid, .tid = tid };
		m.s = (struct emem_stack){ .id = next_id, .flags = (unsigned short)(shape >> 24),
					   .npy = (unsigned short)npy, .ns = ns };
		memcpy(m.w, w, n * sizeof(*w));
		if (!emem_chan_send(&m, sizeof(m.h) + sizeof(m.s) + n * sizeof(*w)))
			goto out;
	}
	memcpy(arena + arena_used, w, n * sizeof(*w));
	stab[j].id = id = next_id++;
	stab[j].n = n;
	stab[j].shape = shape;
	stab[j].off = arena_used;
	arena_used += n;
	stab_count++;
	emem_stk_sent++;
	atomic_store_explicit(&stab[j].key, h, memory_order_release);
out:
	spin_unlock(&stab_lock);
	return id;
}

/*
 * The per-thread rule cache: the CFI row of a return address, by address (direct-mapped),
 * so that a stack seen before costs a load and a compare per frame.
 */
#define RC_BITS 12

struct rcache {
	uint64_t pc;
	struct cfi_rule r; /* cfa CFI_CFA_NONE: no row (frame pointers) */
};

static TLS struct rcache *rc;

static struct cfi_rule rule_of(uint64_t pc)
{
	struct rcache *e = &rc[(pc ^ (pc >> RC_BITS)) & ((1u << RC_BITS) - 1)];
	struct cfi_rule none = { .cfa = CFI_CFA_NONE };
	const struct cfi_table *t = NULL;
	const struct cfi_rule *r;
	uint64_t bias = 0;

	if (likely(e->pc == pc))
		return e->r;
	if (!find(NULL, pc, &t, &bias))
		none.cfa = CFI_CFA_UNSUPPORTED; /* in no object: stop */
	else if (t && (r = cfi_lookup(t, pc - 1 - bias)))
		none = *r;
	e->pc = pc;
	e->r = none;
	return none;
}

/* A word of the stack between lo and hi. */
static inline bool rd(uint64_t lo, uint64_t hi, uint64_t addr, uint64_t *v)
{
	if (addr < lo || addr > hi - 8 || (addr & 7))
		return false;
	*v = *(const uint64_t *)(uintptr_t)addr;
	return true;
}

/*
 * Walks the stack from a return address: the rules of src/unwind/unwind.c (step()), read in
 * place, every read within the thread's stack; frame pointers where an object has no row.
 * Returns the frames and whether the outermost one was reached.
 */
static int walk(uint64_t pc, uint64_t sp, uint64_t bp, uint64_t *ips, int max, bool *end)
{
	const uint64_t hi = stk_hi;
	bool bp_ok = true;
	int n = 0;

	*end = false;
	while (n < max) {
		struct cfi_rule r;
		uint64_t cfa, ra, nbp = bp, off;

		ips[n++] = pc;
		r = rule_of(pc);
		off = (uint64_t)(int64_t)r.cfa_off;
		switch (r.cfa) {
		case CFI_CFA_END:
			*end = true;
			return n;
		case CFI_CFA_RSP:
			cfa = sp + off;
			break;
		case CFI_CFA_RBP:
			if (!bp_ok)
				return n;
			cfa = bp + off;
			break;
		case CFI_CFA_DEREF_RBP:
			if (!bp_ok || !rd(sp, hi, bp + off, &cfa))
				return n;
			break;
		case CFI_CFA_PLT:
			cfa = sp + off + ((pc & 15) >= (uint64_t)r.rbp_off ? 8 : 0);
			break;
		case CFI_CFA_NONE:
			/* No row: the frame-pointer record, if rbp looks like one. */
			if (!bp_ok || bp < sp || !rd(sp, hi, bp + 8, &ra) || !rd(sp, hi, bp, &nbp))
				return n;
			sp = bp + 16;
			bp = nbp;
			pc = ra;
			if (!pc)
				*end = true;
			if (!pc)
				return n;
			continue;
		default: /* signal frames, unsupported rules, no object: stop there */
			return n;
		}
		if (cfa < sp + 8 || !rd(sp, hi, cfa - 8, &ra))
			return n;
		switch (r.rbp) {
		case CFI_RBP_AT_CFA:
			if (cfa + (uint64_t)(int64_t)r.rbp_off >= sp) {
				if (!rd(sp, hi, cfa + (uint64_t)(int64_t)r.rbp_off, &nbp))
					return n;
				bp_ok = true;
			}
			break;
		case CFI_RBP_AT_SP:
			if (!rd(sp, hi, sp + (uint64_t)(int64_t)r.rbp_off, &nbp))
				return n;
			bp_ok = true;
			break;
		case CFI_RBP_AT_RBP:
			if (bp_ok && !rd(sp, hi, bp + (uint64_t)(int64_t)r.rbp_off, &nbp))
				return n;
			break;
		case CFI_RBP_UNDEF:
			bp_ok = false;
			break;
		}
		if (!ra) {
			*end = true;
			return n;
		}
		bp = nbp;
		sp = cfa;
		pc = ra;
	}
	return n;
}

/* The id of a stack: found without a lock, else interned (sent, then published). */
static unsigned stack_of(const uint64_t *w, uint32_t n, uint32_t shape, uint64_t ns, unsigned pid,
			 unsigned tid)
{
	const size_t mask = ((size_t)1 << STK_BITS) - 1;
	uint64_t h = hash_ips(w, n, shape);
	uint32_t gen = atomic_load_explicit(&stab_gen, memory_order_acquire);

	for (size_t j = h & mask; !(gen & 1); j = (j + 1) & mask) {
		uint64_t k = atomic_load_explicit(&stab[j].key, memory_order_acquire);
		unsigned id;

		if (!k)
			break;
		if (k != h || !same(&stab[j], w, n, shape))
			continue;
		id = stab[j].id;
		/* emptied meanwhile: what was read may be half old, half new */
		if (atomic_load_explicit(&stab_gen, memory_order_acquire) == gen && id)
			return id;
		break;
	}
	return intern(h, w, n, shape, ns, pid, tid);
}

unsigned emem_stack_id(uintptr_t ip, uintptr_t frame, uint64_t ns, unsigned pid, unsigned tid)
{
	uint64_t w[EMEM_STACK_MAX + 2 * EMEM_PY_MAX];
	uint64_t sp = frame + 16;
	bool end = false, more = false;
	uint32_t n, shape, flags = 0;
	int got, npy;

	if (unlikely(!stab_init()))
		return 0;
	if (unlikely(!stk_lo))
		stack_bounds();
	if (unlikely(!rc)) {
		rc = map_zero(sizeof(*rc) << RC_BITS);
		if (!rc)
			return 0;
	}
	if (likely(sp >= stk_lo && sp < stk_hi)) {
		got = walk(ip, sp, *(const uint64_t *)frame, w, EMEM_STACK_MAX, &end);
	} else {
		w[0] = ip; /* another stack (a coroutine's, a signal's): the leaf only */
		got = 1;
	}
	if (got <= 0)
		return 0;
	if (!end) {
		flags |= EMEM_STACK_TRUNC;
		emem_stk_trunc++;
	}
	npy = py_walk(w + got, EMEM_PY_MAX, &more);
	if (more)
		flags |= EMEM_STACK_PY_TRUNC;
	n = (uint32_t)got + 2 * (uint32_t)npy;
	shape = (uint32_t)got | (uint32_t)npy << 16 | flags << 24;
	return stack_of(w, n, shape, ns, pid, tid);
}

/* --- fork --------------------------------------------------------------------------------- */

void emem_stacks_prepare(void)
{
	spin_lock(&obj_lock);
	spin_lock(&stab_lock);
}

void emem_stacks_parent(void)
{
	spin_unlock(&stab_lock);
	spin_unlock(&obj_lock);
}

static void stacks_empty(void)
{
	if (stab) {
		madvise(stab, sizeof(*stab) << STK_BITS, MADV_DONTNEED);
		madvise(arena, STK_ARENA, MADV_DONTNEED);
	}
	arena_used = 0;
	stab_count = 0;
	next_id = 1;
}

/* The child's ids start again on its own connection: the table is emptied (zero pages). */
void emem_stacks_child(void)
{
	stacks_empty();
	spin_unlock(&stab_lock);
	spin_unlock(&obj_lock);
}

void emem_stacks_reset(void)
{
	spin_lock(&obj_lock);
	spin_lock(&stab_lock);
	stacks_empty();
	spin_unlock(&stab_lock);
	spin_unlock(&obj_lock);
}
