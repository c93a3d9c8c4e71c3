// SPDX-License-Identifier: MIT
/* Python frames: line tables, interpreter layouts, interleaving with native frames. */
#include "test_util.h"

#include <linux/types.h>

#include "eprof_abi.h"
#include "record/events.h"
#include "record/proc.h"
#include "record/python.h"
#include "analysis/pygil.h"
#include "output/report.h"
#include "util/sink.h"

static int hexval(char c)
{
	return c <= '9' ? c - '0' : c - 'a' + 10;
}

static size_t unhex(const char *hex, uint8_t *out, size_t max)
{
	size_t n = strlen(hex) / 2;

	assert_true(n <= max);
	for (size_t i = 0; i < n; i++)
		out[i] = hexval(hex[2 * i]) << 4 | hexval(hex[2 * i + 1]);
	return n;
}

/*
 * co_linetable of this function (first line 2) and its co_lines() as
 * printed by each pyenv interpreter:
 *   def sample(n):
 *       s = 0
 *       for i in range(n):
 *           if i % 3:
 *               s += i
 *           else:
 *               s -= 1
 *       return s
 */
struct lt_case {
	const char *version, *hex;
	int ranges[32][3]; /* start byte, end byte, line; ends with a 0, 0, 0 row */
};

static const struct lt_case lt_cases[] = {
	{ "3.11.7",
	  "8000d808098041dd0d12903189588c58f000040513f0000405138801d80b0c88718935f000030913d80c0d9"
	  "011894688418841e00c0d9011894688418841d80b0c8048",
	  {
	    { 0, 2, 2 }, { 2, 4, 3 }, { 4, 6, 3 }, { 6, 18, 4 }, { 18, 20, 4 },
	    { 20, 24, 4 }, { 24, 34, 4 }, { 34, 36, 4 }, { 36, 38, 4 }, { 38, 40, 4 },
	    { 40, 42, 5 }, { 42, 44, 5 }, { 44, 48, 5 }, { 48, 50, 5 }, { 50, 52, 6 },
	    { 52, 54, 6 }, { 54, 58, 6 }, { 58, 60, 6 }, { 60, 62, 6 }, { 62, 64, 8 },
	    { 64, 66, 8 }, { 66, 70, 8 }, { 70, 72, 8 }, { 72, 74, 8 }, { 74, 76, 9 },
	    { 76, 78, 9 },
	  } },
	{ "3.12.1",
	  "8000d808098041dc0d1290318b58f2000405138801d80b0c88718a35d80c0d901189468941e00c0d901189"
	  "468941f009040513f00a000c0d8048",
	  { { 0, 2, 2 },
	    { 2, 6, 3 },
	    { 6, 34, 4 },
	    { 34, 44, 5 },
	    { 44, 56, 6 },
	    { 56, 68, 8 },
	    { 68, 70, 4 },
	    { 70, 74, 9 } } },
	{ "3.13.0",
	  "8000d808098041dc0d1290318e588801d80b0c88718f35d80c0d89468a41e00c0d901189468a41f109000e"
	  "16f00a000c0d8048",
	  { { 0, 2, 2 },
	    { 2, 6, 3 },
	    { 6, 34, 4 },
	    { 34, 54, 5 },
	    { 54, 66, 6 },
	    { 66, 80, 8 },
	    { 80, 84, 4 },
	    { 84, 88, 9 } } },
};

static void test_addr2line(void **state)
{
	uint8_t lt[256];

	(void)state;
	for (size_t c = 0; c < sizeof(lt_cases) / sizeof(lt_cases[0]); c++) {
		const struct lt_case *k = &lt_cases[c];
		size_t n = unhex(k->hex, lt, sizeof(lt));
		int last = 0;

		for (int r = 0; k->ranges[r][1]; r++) {
			for (int b = k->ranges[r][0]; b < k->ranges[r][1]; b += 2) {
				int line = py_addr2line(lt, n, 2, b / 2);

				if (line != k->ranges[r][2])
					fail_msg("%s: unit %d: line %d, want %d", k->version,
						 b / 2, line, k->ranges[r][2]);
			}
			last = k->ranges[r][1];
		}
		/* Past the end, and a table cut short: no line, no crash. */
		assert_int_equal(py_addr2line(lt, n, 2, last / 2 + 10), -1);
		for (size_t cut = 0; cut < n; cut++)
			(void)py_addr2line(lt, cut, 2, last / 2 - 1);
		/* Negative offsets (prev_instr before the first instruction) count as the first. */
		assert_int_equal(py_addr2line(lt, n, 2, -1), 2);
	}
}

/* The first 584 bytes of _PyRuntime (its _Py_DebugOffsets) of pyenv's 3.13.0 on x86-64. */
static const char debug_313[] =
	"7864656275677079f0000d03000000000000000000000000b852040000000000600200000000000078020000"
	"0000000098f9020000000000681c000000000000601c000000000000b01c000000000000e81c000000000000"
	"e81d000000000000d81d000000000000e01d0000000000001000000000000000481e00000000000000000000"
	"00000000581e000000000000501e000000000000300100000000000000000000000000000800000000000000"
	"100000000000000048000000000000009800000000000000a000000000000000e80000000000000020000000"
	"0000000050000000000000000800000000000000000000000000000038000000000000004800000000000000"
	"4600000000000000d00000000000000070000000000000007800000000000000800000000000000088000000"
	"000000004400000000000000340000000000000060000000000000006800000000000000c800000000000000"
	"10000000000000000800000000000000a00100000000000018000000000000005800000000000000a8000000"
	"0000000020000000000000001800000000000000100000000000000028000000000000001800000000000000"
	"1000000000000000300000000000000020000000000000002800000000000000180000000000000010000000"
	"0000000020000000000000001000000000000000180000000000000028000000000000001000000000000000"
	"20000000000000004000000000000000200000000000000010000000000000002800000000000000f0000000"
	"00000000c800000000000000";

static void test_debug_offsets(void **state)
{
	uint8_t buf[PY_DEBUG_OFFSETS_SIZE + 64];
	struct py_layout dbg, table;
	size_t n;

	(void)state;
	n = unhex(debug_313, buf, sizeof(buf));
	assert_int_equal(n, PY_DEBUG_OFFSETS_SIZE);
	assert_int_equal(py_layout_from_debug(buf, n, &dbg), 0);
	assert_int_equal(dbg.version, 0x030d00f0);
	/* The built-in 3.13 table (derived from the headers) says the same as the runtime. */
	assert_int_equal(py_layout_for_version(0x030d00f0, &table), 0);
	assert_memory_equal(&dbg, &table, sizeof(dbg));
	assert_int_equal(dbg.bpf.ts_frame, 72);
	assert_int_equal(dbg.bpf.ts_cframe, PY_NONE);
	/* Not a debug-offsets block; too short; free-threaded. */
	assert_int_equal(py_layout_from_debug(buf, n - 8, &dbg), -EINVAL);
	buf[0] = 'X';
	assert_int_equal(py_layout_from_debug(buf, n, &dbg), -EINVAL);
	buf[0] = 'x';
	buf[16] = 1;
	assert_int_equal(py_layout_from_debug(buf, n, &dbg), -ENOTSUP);
}

static void test_version_tables(void **state)
{
	struct py_layout l;

	(void)state;
	assert_int_equal(py_layout_for_version(0x030b07f0, &l), 0);
	assert_int_equal(l.bpf.fr_is_entry, 68);
	assert_int_equal(l.bpf.owner_cstack, PY_NONE);
	assert_int_equal(py_layout_for_version(0x030c01f0, &l), 0);
	assert_int_equal(l.bpf.fr_is_entry, PY_NONE);
	assert_int_equal(l.bpf.owner_cstack, 3);
	assert_int_equal(l.version, 0x030c01f0);
	/* 3.10: PyFrameObject chain, every frame an eval call, threads by pthread_t */
	assert_int_equal(py_layout_for_version(0x030a0df0, &l), 0);
	assert_int_equal(l.bpf.pflags, PY_PF_ALL_ENTRY | PY_PF_TS_FSBASE);
	assert_int_equal(l.bpf.ts_cframe, PY_NONE);
	assert_true(l.bpf.fr_instr + 8 <= l.bpf.fr_read && l.bpf.fr_read < 128);
	assert_int_equal(l.co_qualname, l.co_name);
	assert_int_equal(py_layout_for_version(0x03090000, &l), -ENOTSUP);
	assert_int_equal(py_layout_for_version(0x030e0000, &l), -ENOTSUP);
}

/* ---- interleaving in events.c, with fake Python hooks ---- */

static char proc_root[PATH_MAX];

static int setup_proc(void **state)
{
	char dir[PATH_MAX + 32], path[PATH_MAX + 64];
	FILE *f;

	(void)state;
	snprintf(proc_root, sizeof(proc_root), "%s", test_path("proc"));
	mkdir(proc_root, 0755);
	snprintf(dir, sizeof(dir), "%s/100", proc_root);
	mkdir(dir, 0755);
	snprintf(path, sizeof(path), "%s/maps", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("00400000-00500000 r-xp 00000000 08:01 1234   /usr/bin/true\n", f);
	fclose(f);
	return 0;
}

#define EVAL_LO 0x400300
#define EVAL_HI 0x400400

static const char *const py_names[] = { "f_leaf", "f_mid", "f_outer" };

static int fake_frames(void *arg, uint32_t pid, const struct py_frame_rec *r, uint32_t n,
		       uint32_t *locs, uint8_t *entry)
{
	struct profile *p = arg;

	assert_int_equal(pid, 100);
	for (uint32_t i = 0; i < n; i++) {
		int64_t l = profile__special(p, py_names[r[i].code >> 4]);

		assert_true(l > 0);
		locs[i] = l;
		entry[i] = r[i].code & 1;
	}
	return n;
}

static bool fake_is_eval(void *arg, uint32_t pid, uint64_t pc)
{
	(void)arg;
	(void)pid;
	return pc >= EVAL_LO && pc < EVAL_HI;
}

struct py_sample {
	struct ev_sample s;
	__u64 ips[6];
	struct py_frame_rec recs[3];
	struct py_trailer tr;
};

static void make(struct py_sample *e, const __u64 *ips, int nu)
{
	memset(e, 0, sizeof(*e));
	e->s.h.kind = EV_SAMPLE;
	e->s.h.pid = 100;
	e->s.h.tid = 100;
	e->s.h.ts = 1000;
	e->s.h.flags = SAMPLE_F_USER_REGS | SAMPLE_F_PYTHON;
	e->s.period = 1000000;
	e->s.st.ustack_n = nu;
	memcpy(e->ips, ips, nu * 8);
	/* f_leaf and f_mid run in the inner eval call, f_outer in the outer one. */
	e->recs[0].code = 0 << 4;
	e->recs[1].code = 1 << 4 | 1;
	e->recs[2].code = 2 << 4 | 1;
	e->tr.n = 3;
	e->tr.magic = PY_TRAILER_MAGIC;
	/* The records sit right after the ips: move them down when fewer ips are used. */
	memmove((char *)e->ips + nu * 8, e->recs, sizeof(e->recs) + sizeof(e->tr));
	e->s.h.size = sizeof(e->s) + nu * 8 + sizeof(e->recs) + sizeof(e->tr);
}

/* Names of the sample's stack, root first, as "a;b;c". */
static void stack_str(struct profile *p, uint32_t node, char *out, size_t len)
{
	const char *parts[64];
	int n = 0;

	while (node && n < 64) {
		const struct location *l = &p->locations.v[p->stacks.v[node].loc];

		/* ELF locations are file offsets: pc - 0x400000 (- 1 for return addresses). */
		parts[n++] = l->frame_n ? profile__str(p, p->frames.v[l->frame_first].name)
			     : l->addr == 0x6ff ? "main"
			     : l->addr == 0x4ff ? "c_call"
			     : l->addr == 0x100 ? "c_leaf"
						: "eval";
		node = p->stacks.v[node].parent;
	}
	out[0] = '\0';
	while (n-- > 0) {
		strncat(out, parts[n], len - strlen(out) - 1);
		if (n)
			strncat(out, ";", len - strlen(out) - 1);
	}
}

static void test_interleave(void **state)
{
	struct tracker_opts to = { .proc_root = proc_root };
	struct profile *p = profile__new();
	struct proc_tracker *t = proc_tracker__new(p, &to);
	struct event_ctx c;
	struct py_sample e;
	char s[512];
	/* Leaf first: a C leaf, the inner eval loop, a C function, the outer eval loop, main. */
	const __u64 ips[5] = { 0x400100, EVAL_LO + 0x10, 0x400500, EVAL_LO + 0x20, 0x400700 };
	const __u64 no_eval[2] = { 0x400100, 0x400700 };
	/* The same with one more eval call further out, whose frames the walk did not reach. */
	const __u64 ips6[6] = { 0x400100, EVAL_LO + 0x10, 0x400500, EVAL_LO + 0x20, EVAL_LO + 0x30,
				0x400700 };

	(void)state;
	assert_non_null(t);
	assert_int_equal(events_init(&c, p, t, CG_FP), 0);
	c.proc_root = proc_root;
	c.py_frames = fake_frames;
	c.py_is_eval = fake_is_eval;
	c.py_arg = p;

	make(&e, ips, 5);
	assert_int_equal(events_handle(&c, &e, e.s.h.size), 0);
	assert_int_equal(p->samples.n, 1);
	stack_str(p, p->samples.v[0].stack, s, sizeof(s));
	assert_string_equal(s, "main;f_outer;c_call;f_mid;f_leaf;c_leaf");

	/* No eval frame found natively (a stack cut short): Python frames go on the outer end. */
	make(&e, no_eval, 2);
	assert_int_equal(events_handle(&c, &e, e.s.h.size), 0);
	stack_str(p, p->samples.v[1].stack, s, sizeof(s));
	assert_string_equal(s, "f_outer;f_mid;f_leaf;main;c_leaf");

	/* The walk stopped at its limit: the outermost group says where frames are missing. */
	make(&e, ips6, 6);
	((struct py_trailer *)((char *)&e + e.s.h.size - 8))->n |= PY_TRAILER_TRUNC;
	assert_int_equal(events_handle(&c, &e, e.s.h.size), 0);
	stack_str(p, p->samples.v[2].stack, s, sizeof(s));
	assert_string_equal(s, "main;[python: truncated];f_outer;c_call;f_mid;f_leaf;c_leaf");

	/* Hooks off (--no-python): the native stack alone, eval frames kept. */
	c.py_frames = NULL;
	make(&e, ips, 5);
	assert_int_equal(events_handle(&c, &e, e.s.h.size), 0);
	stack_str(p, p->samples.v[3].stack, s, sizeof(s));
	assert_string_equal(s, "main;eval;c_call;eval;c_leaf");

	/* A bad trailer is a decode error, not a crash. */
	make(&e, ips, 5);
	((struct py_trailer *)((char *)&e + e.s.h.size - 8))->magic = 1;
	assert_int_equal(events_handle(&c, &e, e.s.h.size), 0);
	make(&e, ips, 5);
	((struct py_trailer *)((char *)&e + e.s.h.size - 8))->n = 60;
	assert_int_equal(events_handle(&c, &e, e.s.h.size), 0);
	assert_int_equal(p->stats[STAT_DECODE_ERR], 2);
	assert_int_equal(p->samples.n, 4);

	proc_tracker__free(t);
	profile__free(p);
}

/*
 * Any event with a stack carries Python frames the same way (STACK_F_PYTHON, records and
 * trailer after its stack part): an allocation here. Bits 8-15 of its flags belong to the
 * event kind, so the sample's GIL bits there mean nothing: no [GIL] root.
 */
static void test_interleave_event(void **state)
{
	struct tracker_opts to = { .proc_root = proc_root };
	struct profile *p = profile__new();
	struct proc_tracker *t = proc_tracker__new(p, &to);
	const __u64 ips[5] = { 0x400100, EVAL_LO + 0x10, 0x400500, EVAL_LO + 0x20, 0x400700 };
	struct {
		struct ev_mem_alloc a;
		__u64 ips[5];
		struct py_frame_rec recs[3];
		struct py_trailer tr;
	} e;
	struct event_ctx c;
	int64_t node;
	char s[512];

	(void)state;
	assert_non_null(t);
	assert_int_equal(events_init(&c, p, t, CG_FP), 0);
	c.proc_root = proc_root;
	c.py_frames = fake_frames;
	c.py_is_eval = fake_is_eval;
	c.py_arg = p;
	memset(&e, 0, sizeof(e));
	e.a.h.kind = EV_MEM_ALLOC;
	e.a.h.pid = e.a.h.tid = 100;
	e.a.h.flags = SAMPLE_F_USER_REGS | STACK_F_PYTHON | SAMPLE_F_PY_GIL_KNOWN | SAMPLE_F_PY_GIL;
	e.a.h.size = sizeof(e);
	e.a.st.ustack_n = 5;
	memcpy(e.ips, ips, sizeof(ips));
	e.recs[0].code = 0 << 4;
	e.recs[1].code = 1 << 4 | 1;
	e.recs[2].code = 2 << 4 | 1;
	e.tr.n = 3;
	e.tr.magic = PY_TRAILER_MAGIC;
	node = events_stack(&c, &e.a.h, &e.a.st, sizeof(e) - sizeof(e.a), 0);
	assert_true(node > 0);
	stack_str(p, node, s, sizeof(s));
	assert_string_equal(s, "main;f_outer;c_call;f_mid;f_leaf;c_leaf");

	/* Without the flag the same bytes are read as a stack only: the records are not ips. */
	e.a.h.flags &= ~STACK_F_PYTHON;
	node = events_stack(&c, &e.a.h, &e.a.st, sizeof(e) - sizeof(e.a), 0);
	stack_str(p, node, s, sizeof(s));
	assert_string_equal(s, "main;eval;c_call;eval;c_leaf");

	/* A trailer that does not fit what the event holds is an error, not a guess. */
	e.a.h.flags |= STACK_F_PYTHON;
	e.tr.n = 10;
	assert_int_equal(events_stack(&c, &e.a.h, &e.a.st, sizeof(e) - sizeof(e.a), 0), -EINVAL);
	e.tr.n = 3;
	e.tr.magic = 0;
	assert_int_equal(events_stack(&c, &e.a.h, &e.a.st, sizeof(e) - sizeof(e.a), 0), -EINVAL);

	proc_tracker__free(t);
	profile__free(p);
}

/*
 * A 3.10 co_linetable (PEP 626 pairs) and its co_lines() as printed by pyenv's 3.10.13:
 *   def sample(n):              (line 1)
 *       total = 0
 *       for i in range(n):
 *           if i % 3 == 0:
 *               total += i
 *           else:
 *
 *               total -= 1
 *       try:
 *           x = 1 / n
 *       except ZeroDivisionError:
 *           x = 0
 *       return total + x
 */
static void test_addr2line_310(void **state)
{
	static const struct {
		int start, end, line;
	} lines[] = { { 0, 4, 2 },   { 4, 16, 3 },  { 16, 28, 4 }, { 28, 38, 5 },
		      { 38, 48, 8 }, { 48, 50, 9 }, { 50, 60, 10 }, { 60, 68, 13 },
		      { 68, 80, 11 }, { 80, 86, 12 }, { 86, 94, 13 }, { 94, 96, 11 } };
	uint8_t lt[64];
	size_t n = unhex("04010c010c010a010a0302010a0108030cfe0601080102fe", lt, sizeof(lt));

	(void)state;
	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
		for (int a = lines[i].start; a < lines[i].end; a += 2)
			assert_int_equal(py310_addr2line(lt, n, 1, a), lines[i].line);
	assert_int_equal(py310_addr2line(lt, n, 1, 96), -1);  /* past the code */
	assert_int_equal(py310_addr2line(lt, n, 1, -2), 1);   /* not started: the def line */
	/* -128: an instruction with no line */
	lt[0] = 4, lt[1] = 0x80;
	assert_int_equal(py310_addr2line(lt, 2, 1, 2), -1);
}

/* --region py:FUNC: every [MODULE.]QUALNAME reading of FUNC, and the names refused. */
static void test_region_cands(void **state)
{
	struct py_rcand c[PY_RCAND_MAX];
	char longname[PY_RNAME + 8];

	(void)state;
	assert_int_equal(py_region_cands("main", 2, 7, c, PY_RCAND_MAX), 1);
	assert_string_equal(c[0].qual, "main");
	assert_int_equal(c[0].qual_len, 4);
	assert_int_equal(c[0].file_len, 0);
	assert_int_equal(c[0].spec, 2);
	assert_int_equal(c[0].pair, 7);

	assert_int_equal(py_region_cands("pkg.train.Trainer.step", 0, 1, c, PY_RCAND_MAX), 4);
	assert_string_equal(c[0].qual, "pkg.train.Trainer.step");
	assert_string_equal(c[0].file, "");
	assert_string_equal(c[1].qual, "train.Trainer.step");
	assert_string_equal(c[1].file, "pkg.py");
	assert_string_equal(c[2].qual, "Trainer.step");
	assert_string_equal(c[2].file, "pkg/train.py");
	assert_int_equal(c[2].file_len, strlen("pkg/train.py"));
	assert_int_equal(c[2].qual_len, strlen("Trainer.step"));
	assert_string_equal(c[3].qual, "step");
	assert_string_equal(c[3].file, "pkg/train/Trainer.py");
	/* BPF compares whole 64-byte blocks: the padding must be zero. */
	for (size_t i = c[3].qual_len; i < PY_RNAME; i++)
		assert_int_equal(c[3].qual[i], 0);

	assert_int_equal(py_region_cands("<lambda>", 0, 0, c, PY_RCAND_MAX), 1);
	assert_int_equal(py_region_cands("", 0, 0, c, PY_RCAND_MAX), -EINVAL);
	assert_int_equal(py_region_cands(".step", 0, 0, c, PY_RCAND_MAX), -EINVAL);
	assert_int_equal(py_region_cands("step.", 0, 0, c, PY_RCAND_MAX), -EINVAL);
	assert_int_equal(py_region_cands("a..b", 0, 0, c, PY_RCAND_MAX), -EINVAL);
	assert_int_equal(py_region_cands("a:b", 0, 0, c, PY_RCAND_MAX), -EINVAL);
	assert_int_equal(py_region_cands("a b", 0, 0, c, PY_RCAND_MAX), -EINVAL);
	assert_int_equal(py_region_cands("a.b.c", 0, 0, c, 2), -E2BIG);
	memset(longname, 'x', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	assert_int_equal(py_region_cands(longname, 0, 0, c, PY_RCAND_MAX), -E2BIG);
}

/* GIL markers at the root of Python samples: per-thread shares, filters, report sections. */
static void test_gil_stats(void **state)
{
	struct profile *p = profile__new();
	struct report_opts o = { 0 };
	struct sample_filter f = { .tid = 2 };
	struct py_gil_thread *t;
	int64_t g, ng, tr, leaf;
	uint32_t a[3], b[3], c[2];
	int64_t sa, sb, sc;
	struct sink *s;
	const char *txt;
	size_t n, len;

	(void)state;
	assert_non_null(p);
	g = profile__special(p, PY_GIL_HELD);
	ng = profile__special(p, PY_GIL_NOT_HELD);
	tr = profile__special(p, "[truncated]");
	leaf = profile__object(p, OBJ_ELF, "/bin/x", "", 0);
	leaf = leaf >= 0 ? profile__location(p, (uint32_t)leaf, 0x10) : leaf;
	assert_true(g >= 0 && ng >= 0 && tr >= 0 && leaf >= 0);
	a[0] = g, a[1] = leaf, a[2] = leaf;
	b[0] = ng, b[1] = tr, b[2] = leaf;
	c[0] = tr, c[1] = leaf;
	sa = profile__stack(p, a, 3);
	sb = profile__stack(p, b, 3);
	sc = profile__stack(p, c, 2);
	assert_true(sa > 0 && sb > 0 && sc > 0);
	for (int i = 0; i < 10; i++) {
		struct sample smp = { .ts = 100 + i, .pid = 7, .weight = 1000 };

		/* tid 1: 3 of 4 with the GIL; tid 2: never; tid 3: no marker (not Python). */
		smp.tid = i < 4 ? 1 : i < 6 ? 2 : 3;
		smp.stack = i < 3 ? sa : i < 6 ? sb : sc;
		assert_int_equal(profile__add_sample(p, &smp), 0);
	}
	assert_true(py_gil_marker(p, g) && py_gil_marker(p, ng) && !py_gil_marker(p, tr));
	assert_int_equal(py_gil_stats(p, NULL, &t, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(t[0].tid, 1);
	assert_int_equal(t[0].samples, 4);
	assert_int_equal(t[0].held, 3);
	assert_int_equal(t[1].tid, 2);
	assert_int_equal(t[1].samples, 2);
	assert_int_equal(t[1].held, 0);
	free(t);
	assert_int_equal(py_gil_stats(p, &f, &t, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(t[0].tid, 2);
	free(t);

	s = sink_mem();
	assert_int_equal(report_write(s, p, &o), 0);
	txt = sink_mem_data(s, &len);
	assert_non_null(strstr(txt, "GIL held"));
	assert_non_null(strstr(txt, "75.0%"));
	/*
	 * The marker is not a cut stack: the 3 samples under [GIL] are whole, the 3 with
	 * [truncated] under [no GIL] and the 4 starting at [truncated] are cut.
	 */
	assert_non_null(strstr(txt, "truncated stacks: 70.0%"));
	sink_close(s);
	o.json = true;
	s = sink_mem();
	assert_int_equal(report_write(s, p, &o), 0);
	txt = sink_mem_data(s, &len);
	assert_non_null(strstr(txt, "\"python_gil\": [\n    {\"pid\": 7, \"tid\": 1"));
	assert_non_null(strstr(txt, "\"samples\": 4, \"gil_held\": 3, \"gil_held_pct\": 75.00}"));
	sink_close(s);
	profile__free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_addr2line),
		cmocka_unit_test(test_debug_offsets),
		cmocka_unit_test(test_version_tables),
		cmocka_unit_test_setup(test_interleave, setup_proc),
		cmocka_unit_test_setup(test_interleave_event, setup_proc),
		cmocka_unit_test(test_region_cands),
		cmocka_unit_test(test_addr2line_310),
		cmocka_unit_test(test_gil_stats),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
