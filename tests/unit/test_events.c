// SPDX-License-Identifier: MIT
#include "test_util.h"

#include <linux/types.h>

#include "eprof_abi.h"
#include "record/events.h"
#include "record/proc.h"
#include "sym/symbolize.h"
#include "sym/symbolizer.h"
#include "unwind/unwind.h"

static char proc_root[PATH_MAX];

static void write_bytes(const char *path, const char *data, size_t len)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	fclose(f);
}

static void write_file(const char *path, const char *text)
{
	write_bytes(path, text, strlen(text));
}

/* A fake /proc with one process whose code maps /usr/bin/true at 0x400000. */
static int setup_proc(void **state)
{
	char dir[PATH_MAX + 32], path[PATH_MAX + 64];

	snprintf(proc_root, sizeof(proc_root), "%s", test_path("proc"));
	mkdir(proc_root, 0755);
	snprintf(dir, sizeof(dir), "%s/100", proc_root);
	mkdir(dir, 0755);
	snprintf(path, sizeof(path), "%s/maps", dir);
	write_file(path, "00400000-00500000 r-xp 00001000 08:01 1234   /usr/bin/true\n"
			 "00600000-00601000 rw-p 00000000 00:00 0 \n"
			 "7fff0000-7fff2000 r-xp 00000000 00:00 0   [vdso]\n");
	snprintf(path, sizeof(path), "%s/cmdline", dir);
	write_bytes(path, "true\0--version\0", 15);
	snprintf(path, sizeof(path), "%s/comm", dir);
	write_file(path, "true\n");
	snprintf(path, sizeof(path), "%s/stat", dir);
	write_file(path, "100 (tr ue) S 77 100 100 0 -1\n");
	return 0;
}

struct fixture {
	struct profile *p;
	struct proc_tracker *t;
	struct event_ctx c;
};

static void fx_init(struct fixture *fx)
{
	struct tracker_opts to = { .proc_root = proc_root };

	fx->p = profile__new();
	fx->t = proc_tracker__new(fx->p, &to);
	assert_non_null(fx->t);
	assert_int_equal(events_init(&fx->c, fx->p, fx->t, CG_FP), 0);
	fx->c.proc_root = proc_root;
}

static void fx_free(struct fixture *fx)
{
	proc_tracker__free(fx->t);
	profile__free(fx->p);
}

struct sample_ev {
	struct ev_sample s;
	__u64 ips[4];
};

static void make_sample(struct sample_ev *e, int kn, int un)
{
	memset(e, 0, sizeof(*e));
	e->s.h.kind = EV_SAMPLE;
	e->s.h.size = sizeof(e->s) + (kn + un) * 8;
	e->s.h.pid = 100;
	e->s.h.tid = 101;
	e->s.h.ts = 5000;
	e->s.h.flags = SAMPLE_F_USER_REGS;
	e->s.period = 1001001;
	e->s.cpu = 1;
	e->s.st.kstack_n = kn;
	e->s.st.ustack_n = un;
	memcpy(e->s.comm, "worker-thread", 14);
}

static void test_sample_fp(void **state)
{
	struct fixture fx;
	struct sample_ev e;
	const struct stack_node *n;
	const struct location *l;

	fx_init(&fx);
	make_sample(&e, 2, 2);
	e.ips[0] = 0xffffffff81000010ULL; /* kernel leaf */
	e.ips[1] = 0xffffffff81000020ULL;
	e.ips[2] = 0x400100; /* user leaf */
	e.ips[3] = 0x400200; /* return address in the caller */
	assert_int_equal(events_handle(&fx.c, &e, e.s.h.size), 0);
	assert_int_equal(fx.p->samples.n, 1);
	assert_int_equal(fx.p->samples.v[0].weight, 1001001);
	assert_int_equal(fx.p->samples.v[0].tid, 101);

	/* Leaf node: the kernel leaf, exact address. */
	n = &fx.p->stacks.v[fx.p->samples.v[0].stack];
	assert_int_equal(n->depth, 4);
	l = &fx.p->locations.v[n->loc];
	assert_int_equal(fx.p->objects.v[l->object].kind, OBJ_KERNEL);
	assert_int_equal(l->addr, 0xffffffff81000010ULL);
	/* Kernel caller: return address - 1. */
	n = &fx.p->stacks.v[n->parent];
	assert_int_equal(fx.p->locations.v[n->loc].addr, 0xffffffff8100001fULL);
	/* User leaf: file offset = pc - start + pgoff. */
	n = &fx.p->stacks.v[n->parent];
	l = &fx.p->locations.v[n->loc];
	assert_int_equal(fx.p->objects.v[l->object].kind, OBJ_ELF);
	assert_string_equal(profile__str(fx.p, fx.p->objects.v[l->object].path), "/usr/bin/true");
	assert_int_equal(l->addr, 0x1100);
	n = &fx.p->stacks.v[n->parent];
	assert_int_equal(fx.p->locations.v[n->loc].addr, 0x11ff);
	assert_int_equal(n->parent, 0);

	/* Thread name from the sample, process info from /proc. */
	assert_string_equal(profile__str(fx.p, profile__thread(fx.p, 100, 101, false)->comm),
			    "worker-thread");
	assert_string_equal(profile__str(fx.p, profile__proc(fx.p, 100, false)->cmdline),
			    "true --version");
	assert_int_equal(profile__proc(fx.p, 100, false)->ppid, 77);
	/* The same stack again is the same node. */
	assert_int_equal(events_handle(&fx.c, &e, e.s.h.size), 0);
	assert_int_equal(fx.p->samples.v[1].stack, fx.p->samples.v[0].stack);
	fx_free(&fx);
}

static void test_sample_unmapped_and_vdso(void **state)
{
	struct fixture fx;
	struct sample_ev e;
	const struct location *l;

	fx_init(&fx);
	make_sample(&e, 0, 2);
	e.ips[0] = 0x7fff0100; /* vdso */
	e.ips[1] = 0x12345678; /* nowhere */
	assert_int_equal(events_handle(&fx.c, &e, e.s.h.size), 0);
	l = &fx.p->locations.v[fx.p->stacks.v[fx.p->samples.v[0].stack].loc];
	assert_int_equal(fx.p->objects.v[l->object].kind, OBJ_VDSO);
	assert_int_equal(l->addr, 0x100);
	assert_int_equal(fx.p->stats[STAT_UNMAPPED_ADDR], 1);
	fx_free(&fx);
}

static void test_truncated_and_malformed(void **state)
{
	struct fixture fx;
	struct sample_ev e;
	uint32_t node, root;

	fx_init(&fx);
	make_sample(&e, 0, 1);
	e.ips[0] = 0x400100;
	e.s.st.ustack_err = -14;
	assert_int_equal(events_handle(&fx.c, &e, e.s.h.size), 0);
	node = fx.p->samples.v[0].stack;
	root = fx.p->stacks.v[node].parent;
	assert_int_equal(fx.p->objects.v[fx.p->locations.v[fx.p->stacks.v[root].loc].object].kind,
			 OBJ_SPECIAL);
	assert_int_equal(fx.p->stats[STAT_USTACK_ERR], 1);

	/* Claims more ips than it carries: counted, never read. */
	make_sample(&e, 2, 2);
	e.s.h.size = sizeof(e.s) + 8;
	assert_int_equal(events_handle(&fx.c, &e, sizeof(e)), 0);
	e.s.h.size = 10;
	assert_int_equal(events_handle(&fx.c, &e, 10), 0);
	assert_int_equal(fx.p->stats[STAT_DECODE_ERR], 2);
	assert_int_equal(fx.p->samples.n, 1);
	fx_free(&fx);
}

static void exit_cb(void *arg, uint32_t pid, int32_t status)
{
	*(uint32_t *)arg = pid;
}

static void test_process_events(void **state)
{
	struct fixture fx;
	struct ev_fork f = { .h = { sizeof(f), EV_FORK, 0, 200, 200, 10 }, .ppid = 100 };
	struct ev_exit x = { .h = { sizeof(x), EV_EXIT, 0, 200, 200, 20 }, .exit_code = 3 << 8 };
	uint32_t exited = 0;

	fx_init(&fx);
	fx.c.on_exit = exit_cb;
	fx.c.arg = &exited;
	memcpy(f.comm, "child", 6);
	assert_int_equal(events_handle(&fx.c, &f, sizeof(f)), 0);
	assert_int_equal(profile__proc(fx.p, 200, false)->ppid, 100);
	assert_string_equal(profile__str(fx.p, profile__proc(fx.p, 200, false)->comm), "child");
	assert_int_equal(events_handle(&fx.c, &x, sizeof(x)), 0);
	assert_int_equal(profile__proc(fx.p, 200, false)->exit_ts, 20);
	assert_int_equal(profile__proc(fx.p, 200, false)->exit_code, 3 << 8);
	assert_int_equal(exited, 200);
	fx_free(&fx);
}

/*
 * The launched command runs eprof's code until its exec: on a busy machine it may first run
 * after the go (a sample in ret_from_fork with eprof's libc below it). Its samples count from
 * its exec on; an exec that never comes (lost in a full ring) stops the rule 2 s after the go.
 */
static void test_launched_command_counts_from_its_exec(void **state)
{
	struct fixture fx;
	struct sample_ev e;
	struct ev_exec x = { .h = { sizeof(x), EV_EXEC, 0, 100, 100, 3000 } };

	fx_init(&fx);
	fx.c.launch_pid = 100;
	make_sample(&e, 0, 1);
	e.ips[0] = 0x400100;
	e.s.h.ts = 1000; /* before the go */
	assert_int_equal(events_handle(&fx.c, &e, e.s.h.size), 0);
	fx.c.launch_go_ns = 2000;
	e.s.h.ts = 2500; /* after the go, before the exec */
	assert_int_equal(events_handle(&fx.c, &e, e.s.h.size), 0);
	assert_int_equal(fx.p->samples.n, 0);
	memcpy(x.comm, "true", 5);
	assert_int_equal(events_handle(&fx.c, &x, sizeof(x)), 0);
	assert_int_equal(fx.c.launch_exec_ns, 3000);
	e.s.h.ts = 3500;
	assert_int_equal(events_handle(&fx.c, &e, e.s.h.size), 0);
	assert_int_equal(fx.p->samples.n, 1);
	/* another process is never held back */
	e.s.h.pid = e.s.h.tid = 300;
	e.s.h.ts = 2500;
	assert_int_equal(events_handle(&fx.c, &e, e.s.h.size), 0);
	assert_int_equal(fx.p->samples.n, 2);
	/* no exec decoded: 2 s after the go the command's samples count again */
	fx.c.launch_exec_ns = 0;
	e.s.h.pid = e.s.h.tid = 100;
	e.s.h.ts = 2000 + EVENTS_LAUNCH_EXEC_WAIT_NS - 1;
	assert_int_equal(events_handle(&fx.c, &e, e.s.h.size), 0);
	assert_int_equal(fx.p->samples.n, 2);
	e.s.h.ts = 2000 + EVENTS_LAUNCH_EXEC_WAIT_NS;
	assert_int_equal(events_handle(&fx.c, &e, e.s.h.size), 0);
	assert_int_equal(fx.p->samples.n, 3);
	fx_free(&fx);
}

/*
 * Unwind tables stay within their budget: with a budget smaller than any table,
 * loading one drops the other once it has not been used for a while, and the
 * dropped one is built again when needed. Tables all in use (within 5 s) are kept
 * instead, the budget growing to them: dropping one would rebuild it at every use.
 * Uses this test process itself (its own binary and libc).
 */
#define S(n) ((uint64_t)(n) * 1000000000ULL)

static void test_cfi_budget(void **state)
{
	struct tracker_opts to = { .proc_root = "/proc", .want_cfi = true, .cfi_budget = 1 };
	struct profile *p = profile__new();
	struct proc_tracker *t;
	const struct cfi_table *tab;
	uint64_t bias, ev, own = (uint64_t)(uintptr_t)&test_cfi_budget;
	uint64_t libc = (uint64_t)(uintptr_t)&fopen;
	uint32_t pid = getpid();
	size_t bytes, own_bytes;

	assert_non_null(p);
	t = proc_tracker__new(p, &to);
	assert_non_null(t);
	assert_int_equal(proc_tracker__scan(t, pid, 1), 0);
	assert_true(proc_tracker__find_cfi(t, pid, own, &tab, &bias, 10));
	assert_non_null(tab);
	proc_tracker__cfi_stats(t, &own_bytes, &ev);
	assert_true(own_bytes > 0);
	assert_int_equal(ev, 0);
	assert_true(proc_tracker__find_cfi(t, pid, libc, &tab, &bias, 10 + S(6)));
	assert_non_null(tab);
	proc_tracker__cfi_stats(t, &bytes, &ev);
	assert_int_equal(ev, 1); /* our binary's table went: unused for 6 s */
	assert_true(bytes > 0 && bytes != own_bytes);
	assert_true(proc_tracker__find_cfi(t, pid, own, &tab, &bias, 10 + S(12)));
	assert_non_null(tab); /* built again */
	proc_tracker__cfi_stats(t, &bytes, &ev);
	assert_int_equal(ev, 2);
	assert_int_equal(bytes, own_bytes);
	/* both in use within a second: both kept, over the budget, nothing rebuilt */
	assert_true(proc_tracker__find_cfi(t, pid, libc, &tab, &bias, 10 + S(12) + 1000));
	assert_true(proc_tracker__find_cfi(t, pid, own, &tab, &bias, 10 + S(12) + 2000));
	assert_true(proc_tracker__find_cfi(t, pid, libc, &tab, &bias, 10 + S(12) + 3000));
	proc_tracker__cfi_stats(t, &bytes, &ev);
	assert_int_equal(ev, 2); /* libc's built again, ours kept beside it */
	assert_true(bytes > own_bytes);
	proc_tracker__free(t);
	profile__free(p);
}

/* Rows an on-demand table builds after find_cfi gave it are in the budget from the next find. */
static void test_cfi_budget_on_demand(void **state)
{
	struct tracker_opts to = { .proc_root = "/proc", .want_cfi = true };
	struct profile *p = profile__new();
	uint64_t bias, ev, lo, hi, own = (uint64_t)(uintptr_t)&test_cfi_budget;
	const struct cfi_table *tab;
	struct proc_tracker *t;
	uint32_t pid = getpid();
	size_t b0, b1;

	assert_non_null(p);
	t = proc_tracker__new(p, &to);
	assert_non_null(t);
	assert_int_equal(proc_tracker__scan(t, pid, 1), 0);
	assert_true(proc_tracker__find_cfi(t, pid, own, &tab, &bias, 10));
	assert_non_null(tab);
	assert_true(cfi_table__on_demand(tab));
	proc_tracker__cfi_stats(t, &b0, &ev);
	assert_int_equal(b0, cfi_table__bytes(tab));
	/* What the unwinder's lookup does: builds this function's rows. */
	assert_true(cfi_table__func_range(tab, own - bias, &lo, &hi));
	assert_true(lo <= own - bias && own - bias < hi);
	assert_true(cfi_table__bytes(tab) > b0);
	assert_true(proc_tracker__find_cfi(t, pid, own, &tab, &bias, 20));
	proc_tracker__cfi_stats(t, &b1, &ev);
	assert_int_equal(b1, cfi_table__bytes(tab));
	assert_true(b1 > b0);
	assert_int_equal(ev, 0);
	proc_tracker__free(t);
	profile__free(p);
}

/* A process that is exiting reads as empty maps: the maps it had stay for its last events. */
static void test_exiting_process_keeps_maps(void **state)
{
	char dir[PATH_MAX + 32], path[PATH_MAX + 64];
	struct fixture fx;
	uint32_t loc = 0;
	const struct location *l;

	snprintf(dir, sizeof(dir), "%s/300", proc_root);
	mkdir(dir, 0755);
	snprintf(path, sizeof(path), "%s/maps", dir);
	write_file(path, "00400000-00500000 r-xp 00001000 08:01 1234   /usr/bin/true\n");
	fx_init(&fx);
	assert_int_equal(proc_tracker__scan(fx.t, 300, 1000), 0);
	write_file(path, ""); /* exit_mm() has run: the file reads empty */
	assert_int_equal(proc_tracker__scan(fx.t, 300, 2000), -ESRCH);
	assert_int_equal(proc_tracker__location(fx.t, 300, 0x400100, false, &loc, 1500), 0);
	l = &fx.p->locations.v[loc];
	assert_int_equal(fx.p->objects.v[l->object].kind, OBJ_ELF);
	assert_int_equal(l->addr, 0x1100);
	fx_free(&fx);
}

/* A child already exiting when its fork is handled reads empty maps: it gets its parent's. */
static void test_fork_of_exiting_child(void **state)
{
	char dir[PATH_MAX + 32], path[PATH_MAX + 64];
	struct fixture fx;
	uint32_t loc = 0;
	const struct location *l;

	snprintf(dir, sizeof(dir), "%s/500", proc_root);
	mkdir(dir, 0755);
	snprintf(path, sizeof(path), "%s/maps", dir);
	write_file(path, "00400000-00500000 r-xp 00001000 08:01 1234   /usr/bin/true\n");
	snprintf(dir, sizeof(dir), "%s/501", proc_root);
	mkdir(dir, 0755);
	snprintf(path, sizeof(path), "%s/maps", dir);
	write_file(path, ""); /* exit_mm() has run */
	fx_init(&fx);
	assert_int_equal(proc_tracker__scan(fx.t, 500, 1000), 0);
	assert_int_equal(proc_tracker__fork(fx.t, 500, 501, 2000), 0);
	assert_int_equal(proc_tracker__location(fx.t, 501, 0x400100, false, &loc, 1500), 0);
	l = &fx.p->locations.v[loc];
	assert_int_equal(fx.p->objects.v[l->object].kind, OBJ_ELF);
	assert_int_equal(l->addr, 0x1100);
	assert_int_equal(fx.p->stats[STAT_UNMAPPED_ADDR], 0);
	fx_free(&fx);
	(void)state;
}

/* The frame names of the location of a sample's stack node at depth d (1 = root). */
static const struct frame *frame_at(const struct profile *p, uint32_t leaf, uint32_t depth,
				    const struct location **loc)
{
	const struct stack_node *n = &p->stacks.v[leaf];
	uint32_t nf;

	while (n->depth > depth)
		n = &p->stacks.v[n->parent];
	*loc = &p->locations.v[n->loc];
	return profile__loc_frames(p, n->loc, &nf);
}

/*
 * Anonymous executable memory (JIT code without a perf map): every address of
 * a mapping is one location, named after the module that calls into it, or
 * "[jit] anon@START" when no sample shows a caller.
 */
static void test_jit_mapping(void **state)
{
	char dir[PATH_MAX + 32], path[PATH_MAX + 64];
	const struct location *l1, *l2, *l3;
	const struct frame *f;
	struct symbolize_stats st;
	struct symbolizer *sym;
	struct fixture fx;
	struct sample_ev e;

	snprintf(dir, sizeof(dir), "%s/200", proc_root);
	mkdir(dir, 0755);
	snprintf(path, sizeof(path), "%s/maps", dir);
	write_file(path, "00400000-00500000 r-xp 00001000 08:01 1234   /usr/bin/true\n"
			 "7f0000000000-7f0000010000 r-xp 00000000 00:00 0 \n"
			 "7f0000020000-7f0000021000 rwxp 00000000 00:00 0   [anon:jit]\n");
	fx_init(&fx);
	make_sample(&e, 0, 2);
	e.s.h.pid = e.s.h.tid = 200;
	e.ips[0] = 0x7f0000000100; /* generated code ... */
	e.ips[1] = 0x400200;	   /* ... called from /usr/bin/true */
	assert_int_equal(events_handle(&fx.c, &e, e.s.h.size), 0);
	e.ips[0] = 0x7f000000ff00; /* elsewhere in the same mapping */
	assert_int_equal(events_handle(&fx.c, &e, e.s.h.size), 0);
	make_sample(&e, 0, 1);
	e.s.h.pid = e.s.h.tid = 200;
	e.ips[0] = 0x7f0000020010; /* another mapping, no caller seen */
	assert_int_equal(events_handle(&fx.c, &e, e.s.h.size), 0);
	assert_int_equal(fx.p->samples.n, 3);

	f = frame_at(fx.p, fx.p->samples.v[0].stack, 2, &l1);
	assert_int_equal(l1->addr, 0x7f0000000000);
	assert_non_null(f);
	assert_string_equal(profile__str(fx.p, f->name), "[jit] true");
	assert_int_equal(f->kind, FRAME_JIT);
	frame_at(fx.p, fx.p->samples.v[1].stack, 2, &l2);
	assert_ptr_equal(l1, l2); /* one location for the whole mapping */
	f = frame_at(fx.p, fx.p->samples.v[2].stack, 1, &l3);
	assert_int_equal(l3->addr, 0x7f0000020000);
	assert_null(f);

	sym = symbolizer__new(NULL);
	assert_non_null(sym);
	assert_int_equal(symbolize_profile(fx.p, sym, NULL, NULL, &st), 0);
	f = frame_at(fx.p, fx.p->samples.v[2].stack, 1, &l3);
	assert_non_null(f);
	assert_string_equal(profile__str(fx.p, f->name), "[jit] anon@0x7f0000020000");
	assert_int_equal(f->kind, FRAME_UNKNOWN);
	/* Named at record time: symbolization leaves it. */
	f = frame_at(fx.p, fx.p->samples.v[0].stack, 2, &l1);
	assert_string_equal(profile__str(fx.p, f->name), "[jit] true");
	symbolizer__free(sym);
	fx_free(&fx);
}

static const char *tracker_path(void *ctx, uint32_t obj)
{
	return proc_tracker__object_path(ctx, obj);
}

/*
 * An address in no mapping of a process whose JIT writes a perf map (code the
 * JIT freed before the maps were read again, as V8 does): the perf map names it.
 */
static void test_unmapped_jit_code_named_by_perf_map(void **state)
{
	char dir[PATH_MAX + 32], path[PATH_MAX + 64], status[128];
	const struct location *l;
	const struct frame *f;
	struct symbolize_stats st;
	struct symbolizer *sym;
	struct fixture fx;
	struct sample_ev e;

	snprintf(dir, sizeof(dir), "%s/400", proc_root);
	mkdir(dir, 0755);
	snprintf(path, sizeof(path), "%s/maps", dir);
	write_file(path, "00400000-00500000 r-xp 00001000 08:01 1234   /usr/bin/true\n"
			 "7f0000000000-7f0000010000 r-xp 00000000 00:00 0 \n");
	snprintf(path, sizeof(path), "%s/root", dir);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/root/tmp", dir);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/root/tmp/perf-400.map", dir);
	write_file(path, "7f0000000100 80 live_fn\n7f0000200000 100 freed_fn\n");
	/* The perf map is read only as the file of the process's user (ours, here). */
	snprintf(path, sizeof(path), "%s/status", dir);
	snprintf(status, sizeof(status), "Uid:\t%u\t%u\t%u\t%u\nNSpid:\t400\n", getuid(),
		 geteuid(), getuid(), geteuid());
	write_file(path, status);
	fx_init(&fx);
	make_sample(&e, 0, 2);
	e.s.h.pid = e.s.h.tid = 400;
	e.ips[0] = 0x7f0000200010; /* in no mapping: its page was released */
	e.ips[1] = 0x400200;
	assert_int_equal(events_handle(&fx.c, &e, e.s.h.size), 0);
	e.ips[0] = 0x7f0000300000; /* in no mapping, and the perf map lists nothing there */
	assert_int_equal(events_handle(&fx.c, &e, e.s.h.size), 0);
	assert_int_equal(fx.p->stats[STAT_UNMAPPED_ADDR], 2);

	sym = symbolizer__new(NULL);
	assert_non_null(sym);
	assert_int_equal(symbolize_profile(fx.p, sym, tracker_path, fx.t, &st), 0);
	f = frame_at(fx.p, fx.p->samples.v[0].stack, 2, &l);
	assert_non_null(f);
	assert_string_equal(profile__str(fx.p, f->name), "freed_fn");
	assert_int_equal(f->kind, FRAME_JIT);
	f = frame_at(fx.p, fx.p->samples.v[1].stack, 2, &l);
	assert_non_null(f);
	assert_int_equal(f->kind, FRAME_UNKNOWN);
	assert_string_equal(profile__str(fx.p, f->name), "[unknown] [jit]+0x7f0000300000");
	symbolizer__free(sym);
	fx_free(&fx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sample_fp),
		cmocka_unit_test(test_sample_unmapped_and_vdso),
		cmocka_unit_test(test_truncated_and_malformed),
		cmocka_unit_test(test_process_events),
		cmocka_unit_test(test_launched_command_counts_from_its_exec),
		cmocka_unit_test(test_cfi_budget),
		cmocka_unit_test(test_cfi_budget_on_demand),
		cmocka_unit_test(test_exiting_process_keeps_maps),
		cmocka_unit_test(test_fork_of_exiting_child),
		cmocka_unit_test(test_jit_mapping),
		cmocka_unit_test(test_unmapped_jit_code_named_by_perf_map),
	};

	return cmocka_run_group_tests(tests, setup_proc, NULL);
}
