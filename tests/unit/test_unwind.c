// SPDX-License-Identifier: MIT
/*
 * Unwinder tests on real stacks: fixture programs (tests/fixtures/unwind)
 * are built with cc at run time, capture their registers and stack from a
 * known call chain and write them with their /proc/self/maps; the test
 * loads CFI tables for each mapping, unwinds and checks the symbolized chain.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "unwind/cfi.h"
#include "unwind/insn.h"
#include "unwind/unwind.h"

#define FIX_DIR TEST_SRC_DIR "/fixtures/unwind"
#define LIBC_PATH "/lib/x86_64-linux-gnu/libc.so.6"
#define MAX_MAPS 64
#define MAX_FRAMES 64
#define DUMP_MAGIC 0x31444e5755504d44ull

struct dump_header {
	uint64_t magic;
	uint64_t ip, sp, bp;
	uint64_t stack_len;
	uint64_t maps_len;
};

struct sym {
	uint64_t addr, size;
	char *name;
};

struct symtab {
	struct sym *syms;
	size_t n;
};

struct map {
	uint64_t lo, hi, off, bias;
	char path[PATH_MAX];
	struct cfi_table *t;
	struct symtab st;
};

struct dump {
	struct unwind_regs regs;
	uint8_t *stack;
	size_t len;
	struct map maps[MAX_MAPS];
	int n;
};

static char tmpdir[PATH_MAX / 4]; /* short: paths are built under it */
static bool fixtures_ok;
/* Set: the fixtures' tables are opened as the recorder opens them (on demand). */
static bool on_demand;

/* ---- fixture build and run -------------------------------------------- */

static int run_cmd(const char *fmt, ...)
{
	char cmd[4 * PATH_MAX];
	va_list ap;
	int rc;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	rc = system(cmd);
	if (rc == -1 || !WIFEXITED(rc))
		return -1;
	return WEXITSTATUS(rc);
}

static int make_tmpdir(void)
{
	const char *base = getenv("EPROF_TEST_TMP");

	if (base && *base) {
		if (run_cmd("mkdir -p '%s'", base))
			return -1;
		snprintf(tmpdir, sizeof(tmpdir), "%s/unwind-XXXXXX", base);
	} else {
		snprintf(tmpdir, sizeof(tmpdir), "/tmp/eprof-unwind-XXXXXX");
	}
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int build_fixtures(void **state)
{
	const char *T = tmpdir, *F = FIX_DIR;

	elf_version(EV_CURRENT);
	if (make_tmpdir())
		return 0;
	fixtures_ok =
		!run_cmd("cc -O2 -fomit-frame-pointer -fPIC -shared %s/unwfix.c -o %s/libunwfix.so",
			 F, T) &&
		!run_cmd("cc -O2 -fno-asynchronous-unwind-tables -fno-omit-frame-pointer -c "
			 "%s/fpmid.c -o %s/fpmid.o", F, T) &&
		!run_cmd("cc -O2 -fomit-frame-pointer %s/chain.c %s/capture.c %s/fpmid.o -L%s "
			 "-lunwfix -Wl,-rpath,%s -o %s/chain", F, F, T, T, T, T) &&
		/* CFI only in .debug_frame: what a -g build without unwind tables has. */
		!run_cmd("cc -O2 -g -fno-asynchronous-unwind-tables -fomit-frame-pointer "
			 "%s/chain.c %s/capture.c %s/fpmid.o -L%s -lunwfix -Wl,-rpath,%s "
			 "-o %s/chain_g", F, F, T, T, T, T) &&
		/* Split like a distribution package: stripped binary + .debug file. */
		!run_cmd("objcopy --only-keep-debug %s/chain_g %s/chain_dbg.debug && "
			 "objcopy --strip-debug %s/chain_g %s/chain_dbg", T, T, T, T);
	if (!fixtures_ok)
		fprintf(stderr, "unwind fixtures failed to build (is cc installed?)\n");
	return 0;
}

static int cleanup_fixtures(void **state)
{
	if (tmpdir[0] && !getenv("EPROF_KEEP_TMP"))
		run_cmd("rm -rf '%s'", tmpdir);
	return 0;
}

/* Runs a fixture mode; returns its exit status (77: could not sample). */
static int run_fixture(const char *exe, const char *mode, char *dump_path)
{
	snprintf(dump_path, PATH_MAX, "%s/dump.%s.%s", tmpdir, exe, mode);
	return run_cmd("%s/%s %s %s", tmpdir, exe, dump_path, mode);
}

/* ---- symbols: a tiny own lookup, independent of src/sym ---------------- */

static int cmp_sym(const void *a, const void *b)
{
	const struct sym *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static void add_syms(struct symtab *st, Elf *e, Elf_Scn *scn, const GElf_Shdr *sh)
{
	Elf_Data *d = elf_getdata(scn, NULL);
	size_t n = sh->sh_entsize ? sh->sh_size / sh->sh_entsize : 0;

	st->syms = calloc(n + 1, sizeof(*st->syms));
	assert_non_null(st->syms);
	for (size_t i = 0; d && i < n; i++) {
		GElf_Sym s;
		const char *name;
		int type;

		if (!gelf_getsym(d, (int)i, &s))
			continue;
		type = GELF_ST_TYPE(s.st_info);
		name = elf_strptr(e, sh->sh_link, s.st_name);
		if ((type != STT_FUNC && type != STT_GNU_IFUNC) || !s.st_value || !name)
			continue;
		st->syms[st->n].addr = s.st_value;
		st->syms[st->n].size = s.st_size;
		st->syms[st->n].name = strdup(name);
		st->n++;
	}
	qsort(st->syms, st->n, sizeof(*st->syms), cmp_sym);
}

static void load_syms_elf(struct symtab *st, Elf *e)
{
	Elf_Scn *scn = NULL, *dyn = NULL;
	GElf_Shdr sh, dsh;

	while ((scn = elf_nextscn(e, scn))) {
		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_SYMTAB) {
			add_syms(st, e, scn, &sh);
			return;
		}
		if (sh.sh_type == SHT_DYNSYM) {
			dyn = scn;
			dsh = sh;
		}
	}
	if (dyn)
		add_syms(st, e, dyn, &dsh);
}

/* /usr/lib/debug/.build-id/xx/yyy.debug for stripped system libraries. */
static bool debug_file(Elf *e, char *out, size_t size)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	while ((scn = elf_nextscn(e, scn))) {
		Elf_Data *d;
		GElf_Nhdr nh;
		size_t off = 0, noff, doff;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		d = elf_getdata(scn, NULL);
		while (d && (off = gelf_getnote(d, off, &nh, &noff, &doff)) > 0) {
			const uint8_t *id = (const uint8_t *)d->d_buf + doff;
			int len;

			if (nh.n_type != NT_GNU_BUILD_ID || nh.n_descsz < 2)
				continue;
			len = snprintf(out, size, "/usr/lib/debug/.build-id/%02x/", id[0]);
			for (size_t i = 1; i < nh.n_descsz; i++)
				len += snprintf(out + len, size - (size_t)len, "%02x", id[i]);
			snprintf(out + len, size - (size_t)len, ".debug");
			return access(out, R_OK) == 0;
		}
	}
	return false;
}

static void load_syms(struct symtab *st, Elf *e)
{
	char dbg[PATH_MAX];
	int fd;
	Elf *de;

	if (debug_file(e, dbg, sizeof(dbg)) && (fd = open(dbg, O_RDONLY)) >= 0) {
		de = elf_begin(fd, ELF_C_READ, NULL);
		if (de) {
			load_syms_elf(st, de);
			elf_end(de);
		}
		close(fd);
		if (st->n)
			return;
	}
	load_syms_elf(st, e);
}

static const char *sym_name(const struct symtab *st, uint64_t addr)
{
	size_t lo = 0, hi = st->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (st->syms[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return "?";
	lo--;
	if (st->syms[lo].size && addr >= st->syms[lo].addr + st->syms[lo].size)
		return "?";
	return st->syms[lo].name;
}

/* ---- dumps and mappings ------------------------------------------------- */

/* bias so that vaddr = address - bias, from the PT_LOAD the mapping holds. */
static uint64_t map_bias(Elf *e, const struct map *m)
{
	size_t n = 0;

	elf_getphdrnum(e, &n);
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (ph.p_offset + ph.p_filesz > m->off && ph.p_offset < m->off + (m->hi - m->lo))
			return m->lo - m->off - (ph.p_vaddr - ph.p_offset);
	}
	return m->lo - m->off;
}

static uint64_t own_vdso_size(void)
{
	char line[512];
	unsigned long lo = 0, hi = 0;
	FILE *f = fopen("/proc/self/maps", "r");

	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, "[vdso]"))
			sscanf(line, "%lx-%lx", &lo, &hi);
	if (f)
		fclose(f);
	return hi - lo;
}

/* Loads one mapping's CFI; dbg[0] (the exe) gets dbg[1] as its separate debug file. */
static void load_map(struct map *m, const char *const *dbg)
{
	const void *vdso = (const void *)getauxval(AT_SYSINFO_EHDR);
	bool is_vdso = !strcmp(m->path, "[vdso]");
	int fd = -1, err = 0;
	char *copy = NULL;
	Elf *e;

	if (is_vdso) {
		/* Same kernel, same vDSO image as the fixture's. */
		size_t size = own_vdso_size();

		assert_non_null(vdso);
		m->t = cfi_table__load_mem(vdso, size, &err);
		copy = malloc(size);
		assert_non_null(copy);
		memcpy(copy, vdso, size);
		e = elf_memory(copy, size);
	} else {
		const char *debug = dbg[1] && !strcmp(m->path, dbg[0]) ? dbg[1] : NULL;

		if (on_demand && !debug)
			m->t = cfi_table__open(m->path, &err);
		else
			m->t = cfi_table__load(m->path, debug, &err);
		fd = open(m->path, O_RDONLY);
		e = fd >= 0 ? elf_begin(fd, ELF_C_READ, NULL) : NULL;
	}
	if (!m->t)
		fprintf(stderr, "no CFI for %s: %s\n", m->path, strerror(-err));
	if (e) {
		m->bias = map_bias(e, m);
		load_syms(&m->st, e);
		elf_end(e);
	}
	if (fd >= 0)
		close(fd);
	free(copy);
}

static void parse_maps(struct dump *d, char *text, const char *const *dbg)
{
	for (char *line = strtok(text, "\n"); line && d->n < MAX_MAPS; line = strtok(NULL, "\n")) {
		struct map *m = &d->maps[d->n];
		unsigned long lo, hi, off;
		char perms[8];
		int pos = 0;

		if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %n", &lo, &hi, perms, &off, &pos) < 4 ||
		    !pos || !strchr(perms, 'x'))
			continue;
		memset(m, 0, sizeof(*m));
		m->lo = lo;
		m->hi = hi;
		m->off = off;
		snprintf(m->path, sizeof(m->path), "%s", line + pos);
		/* Anonymous executable memory (JIT code) is kept: mapped, no CFI, no symbols. */
		if (m->path[0] == '[' && strcmp(m->path, "[vdso]"))
			continue;
		if (m->path[0])
			load_map(m, dbg);
		d->n++;
	}
}

static struct dump *load_dump(const char *path, const char *const *dbg)
{
	struct dump *d = calloc(1, sizeof(*d));
	struct dump_header h;
	char *maps;
	FILE *f = fopen(path, "rb");

	assert_non_null(d);
	assert_non_null(f);
	assert_int_equal(fread(&h, sizeof(h), 1, f), 1);
	assert_true(h.magic == DUMP_MAGIC);
	d->stack = malloc(h.stack_len + 1);
	maps = calloc(1, h.maps_len + 1);
	assert_non_null(d->stack);
	assert_non_null(maps);
	assert_int_equal(fread(d->stack, 1, h.stack_len, f), h.stack_len);
	assert_int_equal(fread(maps, 1, h.maps_len, f), h.maps_len);
	fclose(f);
	d->regs.ip = h.ip;
	d->regs.sp = h.sp;
	d->regs.bp = h.bp;
	d->len = h.stack_len;
	parse_maps(d, maps, dbg);
	free(maps);
	return d;
}

static void free_dump(struct dump *d)
{
	for (int i = 0; i < d->n; i++) {
		cfi_table__free(d->maps[i].t);
		for (size_t j = 0; j < d->maps[i].st.n; j++)
			free(d->maps[i].st.syms[j].name);
		free(d->maps[i].st.syms);
	}
	free(d->stack);
	free(d);
}

static struct map *map_of(struct dump *d, uint64_t pc)
{
	for (int i = 0; i < d->n; i++)
		if (pc >= d->maps[i].lo && pc < d->maps[i].hi)
			return &d->maps[i];
	return NULL;
}

static bool find(void *ctx, uint64_t pc, const struct cfi_table **t, uint64_t *bias)
{
	struct map *m = map_of(ctx, pc);

	if (!m)
		return false;
	*t = m->t;
	*bias = m->bias;
	return true;
}

static const struct unwind_map_ops ops = { .find = find };

/* Stack scanning's view of the dump's maps: a file mapping, other code, or a gap. */
static void span(void *ctx, uint64_t addr, struct unwind_span *out)
{
	struct dump *d = ctx;

	out->lo = 0;
	out->hi = UINT64_MAX;
	out->kind = UNWIND_SPAN_NONE;
	for (int i = 0; i < d->n; i++) {
		const struct map *m = &d->maps[i];

		if (addr >= m->lo && addr < m->hi) {
			out->lo = m->lo;
			out->hi = m->hi;
			out->kind = m->path[0] == '/' ? UNWIND_SPAN_FILE : UNWIND_SPAN_OTHER;
			return;
		}
		if (m->hi <= addr && m->hi > out->lo)
			out->lo = m->hi;
		if (m->lo > addr && m->lo < out->hi)
			out->hi = m->lo;
	}
}

/* The return addresses code_before was asked about, in order. */
static uint64_t code_reads_at[64];
static unsigned code_reads;

static bool code_before(void *ctx, uint64_t pc, uint8_t *buf, size_t len)
{
	struct map *m = map_of(ctx, pc);
	uint64_t off;
	bool ok;
	int fd;

	if (!m || m->path[0] != '/' || pc - m->lo + m->off < len)
		return false;
	off = pc - m->lo + m->off - len;
	fd = open(m->path, O_RDONLY);
	if (fd < 0)
		return false;
	ok = pread(fd, buf, len, (off_t)off) == (ssize_t)len;
	close(fd);
	if (code_reads < 64)
		code_reads_at[code_reads] = pc;
	code_reads++;
	return ok;
}

static const struct unwind_map_ops scan_ops = { .find = find, .span = span,
						.code_before = code_before };

/* Names the frames; return addresses are looked up at ra-1, inside the call. */
static int unwind_names(struct dump *d, const char **names, uint64_t *ips, enum unwind_stop *why)
{
	int n = unwind_stack(&ops, d, &d->regs, d->stack, d->len, ips, MAX_FRAMES, why);

	for (int i = 0; i < n; i++) {
		struct map *m = map_of(d, ips[i]);

		names[i] = m ? sym_name(&m->st, ips[i] - m->bias - (i ? 1 : 0)) : "?";
		fprintf(stderr, "  #%-2d %#14llx %-28s %s\n", i, (unsigned long long)ips[i],
			names[i], m ? m->path : "");
	}
	fprintf(stderr, "  stop: %d\n", *why);
	return n;
}

/* The chain must start with want[] and end at _start with UNWIND_END. */
static void check_chain(struct dump *d, const char *const *want, int nwant)
{
	const char *names[MAX_FRAMES];
	uint64_t ips[MAX_FRAMES];
	enum unwind_stop why;
	int n = unwind_names(d, names, ips, &why);

	assert_true(n >= nwant + 1);
	for (int i = 0; i < nwant; i++)
		assert_string_equal(names[i], want[i]);
	assert_string_equal(names[n - 1], "_start");
	assert_int_equal(why, UNWIND_END);
}

/* Runs exe in mode and loads its dump; debug names a separate debug file for exe. */
static struct dump *fixture_dump(const char *exe, const char *mode, const char *debug)
{
	char path[PATH_MAX], path2[PATH_MAX], exe_path[PATH_MAX], dbg_path[PATH_MAX];
	const char *dbg[2] = { exe_path, NULL };
	int rc;

	if (!fixtures_ok)
		skip();
	rc = run_fixture(exe, mode, path);
	if (rc == 77) {
		fprintf(stderr, "skipped: fixture mode '%s' could not sample\n", mode);
		skip();
	}
	assert_int_equal(rc, 0);
	snprintf(path2, sizeof(path2), "%s/%s", tmpdir, exe);
	/* /proc/PID/maps names the file by its canonical path. */
	assert_non_null(realpath(path2, exe_path));
	if (debug) {
		snprintf(dbg_path, sizeof(dbg_path), "%s/%s", tmpdir, debug);
		dbg[1] = dbg_path;
	}
	return load_dump(path, dbg);
}

/* ---- real stacks --------------------------------------------------------- */

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static uint64_t sym_addr(const struct map *m, const char *name)
{
	for (size_t i = 0; i < m->st.n; i++)
		if (!strcmp(m->st.syms[i].name, name))
			return m->st.syms[i].addr;
	return 0;
}

/* The CFA rule at fn's call site: the fixture must exercise what it claims. */
static void expect_kind(struct dump *d, const char *fn, int kind)
{
	uint64_t ips[MAX_FRAMES];
	enum unwind_stop why;
	int n = unwind_stack(&ops, d, &d->regs, d->stack, d->len, ips, MAX_FRAMES, &why);

	for (int i = 1; i < n; i++) {
		struct map *m = map_of(d, ips[i]);
		const struct cfi_rule *r;

		if (!m || strcmp(sym_name(&m->st, ips[i] - 1 - m->bias), fn))
			continue;
		r = cfi_lookup(m->t, ips[i] - 1 - m->bias);
		assert_non_null(r);
		assert_int_equal(r->cfa, kind);
		return;
	}
	fail_msg("no frame of %s", fn);
}

static void test_chain(void **state)
{
	static const char *const want[] = { "c", "b", "a", "main" };
	struct dump *d = fixture_dump("chain", "chain", NULL);
	uint64_t ips[MAX_FRAMES];
	enum unwind_stop why;
	int n = 0, iters = 20000;
	double t0;

	check_chain(d, want, 4);
	expect_kind(d, "b", CFI_CFA_RBP);
	expect_kind(d, "a", CFI_CFA_DEREF_RBP);
	t0 = now_ns();
	for (int i = 0; i < iters; i++)
		n = unwind_stack(&ops, d, &d->regs, d->stack, d->len, ips, MAX_FRAMES, &why);
	/* Printed, not asserted: sanitizer builds are several times slower. */
	fprintf(stderr, "  timing: %.0f ns per unwind of %d frames\n", (now_ns() - t0) / iters, n);
	free_dump(d);
}

static void test_fp_fallback(void **state)
{
	static const char *const want[] = { "c_fp", "fp_mid", "a_fp", "main" };
	struct dump *d = fixture_dump("chain", "fp", NULL);
	struct map *m = map_of(d, d->regs.ip);
	const struct cfi_rule *r;
	uint64_t fp_mid = 0;

	/* The frame must really lack CFI, or this tests nothing. */
	assert_non_null(m);
	for (size_t i = 0; i < m->st.n; i++)
		if (!strcmp(m->st.syms[i].name, "fp_mid"))
			fp_mid = m->st.syms[i].addr;
	assert_true(fp_mid != 0);
	r = cfi_lookup(m->t, fp_mid + 1);
	assert_true(!r || r->cfa == CFI_CFA_NONE);
	check_chain(d, want, 4);
	free_dump(d);
}

/* x86-64 call forms before a return address, and bytes that are no call. */
static void test_call_decode(void **state)
{
	static const struct {
		uint8_t bytes[X86_CALL_MAX_LEN];
		size_t len;
		enum x86_call want;
	} cases[] = {
		{ { 0xe8, 0x10, 0x00, 0x00, 0x00 }, 5, X86_CALL_DIRECT },	/* call rel32 */
		{ { 0xff, 0xd0 }, 2, X86_CALL_INDIRECT },			/* call *%rax */
		{ { 0x41, 0xff, 0xd3 }, 3, X86_CALL_INDIRECT },		/* call *%r11 */
		{ { 0x3e, 0xff, 0xd0 }, 3, X86_CALL_INDIRECT },		/* notrack call *%rax */
		{ { 0xff, 0x10 }, 2, X86_CALL_INDIRECT },			/* call *(%rax) */
		{ { 0xff, 0x50, 0x08 }, 3, X86_CALL_INDIRECT },		/* call *0x8(%rax) */
		{ { 0xff, 0x54, 0x24, 0x08 }, 4, X86_CALL_INDIRECT },	/* call *0x8(%rsp) */
		{ { 0xff, 0x15, 1, 2, 3, 4 }, 6, X86_CALL_INDIRECT },	/* call *rel(%rip) */
		{ { 0xff, 0x14, 0x25, 1, 2, 3, 4 }, 7, X86_CALL_INDIRECT }, /* call *abs32 */
		{ { 0x41, 0xff, 0x94, 0x24, 1, 2, 3, 4 }, 8, X86_CALL_INDIRECT }, /* *d32(%r12) */
		{ { 0x90, 0x90, 0x90, 0xc3 }, 4, X86_CALL_NONE },		/* nop; ret */
		{ { 0xff, 0xe0 }, 2, X86_CALL_NONE },				/* jmp *%rax */
		{ { 0xff, 0x15, 1, 2, 3 }, 5, X86_CALL_NONE },		/* cut short */
		{ { 0x48, 0x83, 0xc4, 0x08 }, 4, X86_CALL_NONE },		/* add $8,%rsp */
		{ { 0xff }, 1, X86_CALL_NONE },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		uint8_t code[16];
		int32_t rel = 0;

		/* The bytes end right before the return address, after unrelated code. */
		memset(code, 0xcc, sizeof(code));
		memcpy(code + sizeof(code) - cases[i].len, cases[i].bytes, cases[i].len);
		assert_int_equal(x86_call_before(code, sizeof(code), &rel), cases[i].want);
		if (cases[i].want == X86_CALL_DIRECT)
			assert_int_equal(rel, 0x10);
	}
	/* Nothing read before the buffer: short buffers are fine. */
	assert_int_equal(x86_call_before((const uint8_t[]){ 0xff, 0xd0 }, 2, &(int32_t){ 0 }),
			 X86_CALL_INDIRECT);
	assert_int_equal(x86_call_before((const uint8_t[]){ 0xd0 }, 1, &(int32_t){ 0 }),
			 X86_CALL_NONE);
}

/*
 * Generated code without CFI between c_jit and jit_mid: plain DWARF stops
 * there; scanning finds jit_mid's return address and passes over the decoys in
 * the generated frame (a stale return address after a direct call, a stack
 * address). Returns the dump; names the chain into names.
 */
static struct dump *jit_scan(const char *mode, const char *mid, const char **names, int *nout)
{
	const char *const want[] = { "c_jit", "?", mid, "a_jit", "main" };
	struct dump *d = fixture_dump("chain", mode, NULL);
	uint64_t ips[MAX_FRAMES];
	uint8_t marks[MAX_FRAMES];
	struct unwind_result res;
	enum unwind_stop why;
	struct map *m;
	int n;

	n = unwind_stack(&ops, d, &d->regs, d->stack, d->len, ips, MAX_FRAMES, &why);
	assert_int_equal(n, 2);
	assert_int_equal(why, UNWIND_NO_CFI);
	m = map_of(d, ips[1]);
	assert_non_null(m);
	assert_null(m->t); /* the second frame really is in code without CFI */

	code_reads = 0;
	n = unwind_stack_scan(&scan_ops, d, &d->regs, d->stack, d->len, UNWIND_SCAN_WORDS, ips,
			      marks, MAX_FRAMES, &res);
	assert_true(n >= 8);
	for (int i = 0; i < n; i++) {
		m = map_of(d, ips[i]);
		names[i] = m ? sym_name(&m->st, ips[i] - m->bias - (i ? 1 : 0)) : "?";
		fprintf(stderr, "  #%-2d %#14llx %-28s %s%s\n", i, (unsigned long long)ips[i],
			names[i], m ? m->path : "", marks[i] & UNWIND_MARK_SCANNED ? " (scanned)" : "");
		assert_string_not_equal(names[i], "stale_ra");
		assert_string_not_equal(names[i], "ret_addr");
		assert_int_equal(marks[i], i == 2 ? UNWIND_MARK_SCANNED : 0);
	}
	for (int i = 0; i < 5; i++)
		assert_string_equal(names[i], want[i]);
	assert_string_equal(names[n - 1], "_start");
	assert_int_equal(res.why, UNWIND_END);
	assert_int_equal(res.scanned, 1);
	/* 3 pushes and 8 words of locals lie between the callee's frame and the return address. */
	assert_true(res.words >= 12 && res.words < 64);
	*nout = n;

	/* The word limit holds. */
	n = unwind_stack_scan(&scan_ops, d, &d->regs, d->stack, d->len, 8, ips, marks, MAX_FRAMES,
			      &res);
	assert_int_equal(n, 2);
	assert_int_equal(res.why, UNWIND_NO_CFI);
	assert_int_equal(res.words, 8);
	/* Scanning again to leave code_reads_at as the full scan had it. */
	code_reads = 0;
	unwind_stack_scan(&scan_ops, d, &d->regs, d->stack, d->len, UNWIND_SCAN_WORDS, ips, marks,
			  MAX_FRAMES, &res);
	return d;
}

/* jit_mid's CFA is rbp-based: its rbp comes from the generated code's save slot. */
static void test_jit_scan_rbp(void **state)
{
	const char *names[MAX_FRAMES];
	uint64_t ips[MAX_FRAMES];
	enum unwind_stop why;
	struct dump *d = jit_scan("jit", "jit_mid", names, &(int){ 0 });
	struct map *m = NULL;
	uint64_t ra = 0;

	(void)why;
	(void)ips;
	/* The accepted return address is the last code read: check the rule found there. */
	assert_true(code_reads >= 1 && code_reads <= 64);
	ra = code_reads_at[code_reads - 1];
	m = map_of(d, ra);
	assert_non_null(m);
	assert_string_equal(sym_name(&m->st, ra - 1 - m->bias), "jit_mid");
	assert_int_equal(cfi_lookup(m->t, ra - 1 - m->bias)->cfa, CFI_CFA_RBP);
	free_dump(d);
}

/*
 * A stale return address (left by an earlier direct call to a function with
 * CFI) placed where its CFI chain runs straight into the real caller's: only
 * the call check (the call targets a function with CFI, so it made some other
 * frame) tells it from the real one.
 */
static void test_jit_scan_stale(void **state)
{
	const char *names[MAX_FRAMES];
	uint64_t ips[MAX_FRAMES], stale = 0, real, *words;
	struct dump *d = jit_scan("jitrsp", "jit_mid_rsp", names, &(int){ 0 });
	size_t nw = d->len / 8, at_stale = 0, at_real = 0;
	const struct cfi_rule *r;
	struct unwind_result res;
	bool stale_checked = false;
	struct map *m;
	int n;

	n = unwind_stack_scan(&scan_ops, d, &d->regs, d->stack, d->len, UNWIND_SCAN_WORDS, ips,
			      NULL, MAX_FRAMES, &res);
	assert_true(n > 3);
	real = ips[2];
	words = (uint64_t *)(void *)d->stack;
	/* The generated frame holds the stale word (decoy1), below the real return address. */
	for (size_t i = 0; i < nw && !at_real; i++) {
		m = map_of(d, words[i]);
		if (!stale && m && m->path[0] == '/' &&
		    !strcmp(sym_name(&m->st, words[i] - 1 - m->bias), "stale_ra")) {
			stale = words[i];
			at_stale = i;
		}
		if (stale && words[i] == real)
			at_real = i;
	}
	assert_true(stale && at_real > at_stale);
	m = map_of(d, stale);
	r = cfi_lookup(m->t, stale - 1 - m->bias);
	assert_non_null(r);
	assert_int_equal(r->cfa, CFI_CFA_RSP);
	/* stale's return address lies at its slot + cfa_off: put it where that is the real one. */
	assert_true(r->cfa_off >= 8 && (r->cfa_off & 7) == 0 &&
		    (size_t)r->cfa_off / 8 <= at_real - at_stale);
	words[at_real - (size_t)r->cfa_off / 8] = stale;

	code_reads = 0;
	n = unwind_stack_scan(&scan_ops, d, &d->regs, d->stack, d->len, UNWIND_SCAN_WORDS, ips,
			      NULL, MAX_FRAMES, &res);
	assert_true(n > 3);
	assert_true(ips[2] == real);
	assert_int_equal(res.why, UNWIND_END);
	for (unsigned i = 0; i < code_reads && i < 64; i++)
		stale_checked |= code_reads_at[i] == stale;
	assert_true(stale_checked);
	free_dump(d);
}

/* Scanning changes nothing where CFI or frame pointers carry the unwind. */
static void test_scan_unneeded(void **state)
{
	static const char *const modes[] = { "chain", "fp", "plt", "signal" };

	for (size_t k = 0; k < sizeof(modes) / sizeof(*modes); k++) {
		struct dump *d = fixture_dump("chain", modes[k], NULL);
		uint64_t a[MAX_FRAMES], b[MAX_FRAMES];
		struct unwind_result res;
		enum unwind_stop why;
		int na, nb;

		na = unwind_stack(&ops, d, &d->regs, d->stack, d->len, a, MAX_FRAMES, &why);
		nb = unwind_stack_scan(&scan_ops, d, &d->regs, d->stack, d->len,
				       UNWIND_SCAN_WORDS, b, NULL, MAX_FRAMES, &res);
		assert_int_equal(na, nb);
		assert_memory_equal(a, b, (size_t)na * sizeof(*a));
		assert_int_equal(why, res.why);
		assert_int_equal(res.scanned, 0);
		free_dump(d);
	}
}

static void test_plt_call(void **state)
{
	static const char *const want[] = { "c_plt", "lib_inner", "lib_call", "a_plt", "main" };
	struct dump *d = fixture_dump("chain", "plt", NULL);

	check_chain(d, want, 5);
	free_dump(d);
}

static void test_signal_frame(void **state)
{
	static const char *const want[] = { "c_sig", "on_alarm" };
	struct dump *d = fixture_dump("chain", "signal", NULL);
	const char *names[MAX_FRAMES];
	uint64_t ips[MAX_FRAMES];
	enum unwind_stop why;
	struct map *m;
	int n, i;

	check_chain(d, want, 2);
	n = unwind_names(d, names, ips, &why);
	/* After the trampoline comes the interrupted function, then its callers. */
	for (i = 0; i < n && strcmp(names[i], "spin"); i++)
		;
	assert_true(i >= 3 && i + 1 < n);
	assert_string_equal(names[i + 1], "run_signal");
	/* The trampoline's address is no return address: name it without -1. */
	m = map_of(d, ips[i - 1]);
	assert_non_null(m);
	if (sym_addr(m, "__restore_rt"))
		assert_string_equal(sym_name(&m->st, ips[i - 1] - m->bias), "__restore_rt");
	else
		fprintf(stderr, "  (no libc symbols to name __restore_rt)\n");
	free_dump(d);
}

static void test_vdso_frame(void **state)
{
	static const char *const want[] = { "c_sig", "on_prof" };
	struct dump *d = fixture_dump("chain", "vdso", NULL);
	const char *names[MAX_FRAMES];
	uint64_t ips[MAX_FRAMES];
	enum unwind_stop why;
	bool in_vdso = false, spin = false;
	int n;

	check_chain(d, want, 2);
	n = unwind_names(d, names, ips, &why);
	for (int i = 0; i < n; i++) {
		struct map *m = map_of(d, ips[i]);

		in_vdso |= m && !strcmp(m->path, "[vdso]");
		spin |= in_vdso && !strcmp(names[i], "spin_vdso");
	}
	assert_true(in_vdso);
	assert_true(spin);
	free_dump(d);
}

static void test_debug_frame(void **state)
{
	static const char *const want[] = { "c", "b", "a", "main" };
	struct dump *d = fixture_dump("chain_dbg", "chain", NULL);
	const char *names[MAX_FRAMES];
	uint64_t ips[MAX_FRAMES];
	enum unwind_stop why;
	int n;

	/* Stripped, no debug file: the fixture's own frames are opaque. */
	n = unwind_names(d, names, ips, &why);
	assert_false(why == UNWIND_END && !strcmp(names[n - 1], "_start") && n > 4 &&
		     !strcmp(names[3], "main"));
	free_dump(d);
	/* The separate debug file (objcopy --only-keep-debug) supplies .debug_frame. */
	d = fixture_dump("chain_dbg", "chain", "chain_dbg.debug");
	check_chain(d, want, 4);
	free_dump(d);
	/* Unstripped: the file's own .debug_frame is used without being asked. */
	d = fixture_dump("chain_g", "chain", NULL);
	check_chain(d, want, 4);
	free_dump(d);
}

static void test_too_deep(void **state)
{
	struct dump *d = fixture_dump("chain", "chain", NULL);
	uint64_t ips[3];
	enum unwind_stop why;

	assert_int_equal(unwind_stack(&ops, d, &d->regs, d->stack, d->len, ips, 3, &why), 3);
	assert_int_equal(why, UNWIND_TOO_DEEP);
	/* A truncated snapshot stops with a read fault, not garbage. */
	assert_int_equal(unwind_stack(&ops, d, &d->regs, d->stack, 8, ips, 3, &why), 1);
	assert_int_equal(why, UNWIND_READ_FAULT);
	free_dump(d);
}

/* vaddr of the exe's .plt, to sample "inside" its stubs. */
static uint64_t plt_vaddr(const char *path)
{
	int fd = open(path, O_RDONLY);
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	uint64_t addr = 0;

	assert_non_null(e);
	assert_int_equal(elf_getshdrstrndx(e, &shstrndx), 0);
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;

		if (gelf_getshdr(scn, &sh) && !strcmp(elf_strptr(e, shstrndx, sh.sh_name), ".plt"))
			addr = sh.sh_addr;
	}
	elf_end(e);
	close(fd);
	return addr;
}

/* Samples in a PLT stub: the stub's CFA depends on how far it got (push). */
static void test_plt_stub(void **state)
{
	struct dump *d = fixture_dump("chain", "chain", NULL);
	struct map *m = map_of(d, d->regs.ip);
	uint64_t plt, ra, ips[4], stack[3];
	struct unwind_regs regs = { .sp = 0x7ffe0000, .bp = 0 };
	static const struct { unsigned int off, words; } cases[] = {
		{ 16, 0 },	/* entry 1: jmp *GOT */
		{ 16 + 6, 0 },	/* entry 1: push $index, not yet run */
		{ 16 + 11, 1 }, /* entry 1: jmp PLT0 */
		{ 0, 1 },	/* PLT0: push GOT[1] */
		{ 6, 2 },	/* PLT0: jmp *GOT[2] */
	};
	enum unwind_stop why;

	assert_non_null(m);
	plt = plt_vaddr(m->path);
	ra = m->bias + sym_addr(m, "main") + 8;
	assert_true(plt != 0 && ra != m->bias + 8);
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		int n;

		memset(stack, 0x11, sizeof(stack));
		stack[cases[i].words] = ra;
		regs.ip = m->bias + plt + cases[i].off;
		n = unwind_stack(&ops, d, &regs, (const uint8_t *)stack, sizeof(stack), ips, 2,
				 &why);
		assert_int_equal(n, 2);
		assert_true(ips[1] == ra);
	}
	free_dump(d);
}

/* ---- hand-made CFI: row semantics -------------------------------------- */

struct eh {
	uint8_t b[1024];
	size_t n;
};

static void put(struct eh *e, const void *p, size_t len)
{
	assert_true(e->n + len <= sizeof(e->b));
	if (len)
		memcpy(e->b + e->n, p, len);
	e->n += len;
}

static void put32(struct eh *e, uint32_t v)
{
	put(e, &v, 4);
}

/* CIE "zR", absolute udata4 pcs, CFA = rsp+8, RA at CFA-8. */
static void put_cie(struct eh *e)
{
	static const uint8_t body[] = { 0, 0, 0, 0, 1, 'z', 'R', 0, 1, 0x78, 16, 1, 0x03,
					0x0c, 7, 8, 0x90, 1 };

	put32(e, sizeof(body));
	put(e, body, sizeof(body));
}

static void put_fde(struct eh *e, uint32_t start, uint32_t len, const uint8_t *ops, size_t nops)
{
	uint32_t cie_ptr = (uint32_t)e->n + 4; /* CIE at offset 0 */

	put32(e, (uint32_t)(4 + 4 + 4 + 1 + nops));
	put32(e, cie_ptr);
	put32(e, start);
	put32(e, len);
	put(e, "", 1); /* augmentation data length 0 */
	put(e, ops, nops);
}

static struct cfi_table *build_eh(const struct eh *e)
{
	struct cfi_builder *b = cfi_builder__new(0x1000, 0x2000);
	struct cfi_table *t;
	int err = 0;

	assert_non_null(b);
	assert_int_equal(cfi_builder__add(b, e->b, e->n, 0x10000, true, 8), 0);
	t = cfi_builder__finish(b, &err);
	cfi_builder__free(b);
	assert_non_null(t);
	return t;
}

static void expect_row(const struct cfi_table *t, uint64_t pc, int cfa, int off, int rbp,
		       int rbp_off)
{
	const struct cfi_rule *r = cfi_lookup(t, pc);

	if (cfa < 0) {
		assert_true(!r || r->cfa == CFI_CFA_NONE);
		return;
	}
	assert_non_null(r);
	assert_int_equal(r->cfa, cfa);
	if (cfa == CFI_CFA_END || cfa == CFI_CFA_UNSUPPORTED)
		return;
	assert_int_equal(r->cfa_off, off);
	assert_int_equal(r->rbp, rbp);
	assert_int_equal(r->rbp_off, rbp_off);
}

static void test_rows(void **state)
{
	static const uint8_t prologue[] = {
		0x41, 0x0e, 16, 0x86, 2, /* push rbp: CFA rsp+16, rbp at CFA-16 */
		0x44, 0x0d, 6,		 /* mov rbp,rsp: CFA rbp+16 */
		0x50, 0x0a,		 /* remember_state */
		0x0c, 7, 8, 0xc6,	 /* epilogue: CFA rsp+8, rbp restored */
		0x41, 0x0b,		 /* restore_state after the ret */
	};
	static const uint8_t outermost[] = { 0x07, 16 };
	static const uint8_t plt[] = { 0x0f, 11, 0x77, 8, 0x80, 0, 0x3f, 0x1a, 0x3b, 0x2a, 0x33,
				       0x24, 0x22 };
	static const uint8_t bad[] = { 0x42, 0x3f };
	struct eh e = { .n = 0 };
	struct cfi_table *t;

	put_cie(&e);
	put_fde(&e, 0x1030, 0x10, NULL, 0); /* out of order on purpose */
	put_fde(&e, 0x1000, 0x20, prologue, sizeof(prologue));
	put_fde(&e, 0x1040, 0x10, NULL, 0); /* same rule as 0x1030: merged */
	put_fde(&e, 0x1050, 0x10, outermost, sizeof(outermost));
	put_fde(&e, 0x1060, 0x10, plt, sizeof(plt));
	put_fde(&e, 0x1070, 0x10, bad, sizeof(bad));
	put_fde(&e, 0x5000, 0x10, NULL, 0); /* outside the text range: dropped */
	put32(&e, 0);
	t = build_eh(&e);

	expect_row(t, 0xfff, -1, 0, 0, 0);
	expect_row(t, 0x1000, CFI_CFA_RSP, 8, CFI_RBP_SAME, 0);
	expect_row(t, 0x1001, CFI_CFA_RSP, 16, CFI_RBP_AT_CFA, -16);
	expect_row(t, 0x1004, CFI_CFA_RSP, 16, CFI_RBP_AT_CFA, -16);
	expect_row(t, 0x1005, CFI_CFA_RBP, 16, CFI_RBP_AT_CFA, -16);
	expect_row(t, 0x1015, CFI_CFA_RSP, 8, CFI_RBP_SAME, 0);
	expect_row(t, 0x1016, CFI_CFA_RBP, 16, CFI_RBP_AT_CFA, -16);
	expect_row(t, 0x101f, CFI_CFA_RBP, 16, CFI_RBP_AT_CFA, -16);
	expect_row(t, 0x1020, -1, 0, 0, 0); /* the gap between FDEs */
	expect_row(t, 0x102f, -1, 0, 0, 0);
	expect_row(t, 0x1030, CFI_CFA_RSP, 8, CFI_RBP_SAME, 0);
	expect_row(t, 0x1045, CFI_CFA_RSP, 8, CFI_RBP_SAME, 0);
	expect_row(t, 0x1050, CFI_CFA_END, 0, 0, 0);
	expect_row(t, 0x1060, CFI_CFA_PLT, 8, CFI_RBP_SAME, 11);
	expect_row(t, 0x1070, CFI_CFA_RSP, 8, CFI_RBP_SAME, 0);
	expect_row(t, 0x1072, CFI_CFA_UNSUPPORTED, 0, 0, 0);
	expect_row(t, 0x1080, -1, 0, 0, 0);
	expect_row(t, 0x5000, -1, 0, 0, 0);
	/* 5 rows for the prologue FDE + gap + 1 merged + END + PLT + 2 + end. */
	assert_int_equal(cfi_table__nrows(t), 12);
	cfi_table__free(t);
}

/* CIE "zR" like put_cie, with the given initial instructions (padded with nops). */
static void put_cie_insns(struct eh *e, const uint8_t *insns, size_t n)
{
	static const uint8_t head[] = { 0, 0, 0, 0, 1, 'z', 'R', 0, 1, 0x78, 16, 1, 0x03 };
	size_t len = sizeof(head) + n, pad = (4 - len % 4) % 4;

	put32(e, (uint32_t)(len + pad));
	put(e, head, sizeof(head));
	put(e, insns, n);
	for (size_t i = 0; i < pad; i++)
		put(e, "", 1);
}

/*
 * A CIE's initial instructions run once for all its FDEs; a DW_CFA_restore
 * among them goes back to the defaults (rbp unchanged), and one in an FDE to
 * what the CIE left. A CIE with a location op is garbage: its FDEs are unknown.
 */
static void test_cie_state(void **state)
{
	static const uint8_t cie_ops[] = {
		0x0c, 6, 16, 0x86, 2, /* CFA rbp+16, rbp at CFA-16 (as in CUDA's libnvrtc) */
		0x0c, 7, 8, 0xc6,     /* CFA rsp+8, restore rbp: unchanged, not CFA-16 */
		0x90, 1,	      /* RA at CFA-8 */
	};
	static const uint8_t fde_ops[] = { 0x41, 0x0e, 16, 0x86, 2, 0x41, 0xc6 };
	static const uint8_t loc_in_cie[] = { 0x0c, 7, 8, 0x90, 1, 0x41, 0x0e, 16 };
	struct eh e = { .n = 0 };
	struct cfi_table *t;

	put_cie_insns(&e, cie_ops, sizeof(cie_ops));
	put_fde(&e, 0x1000, 0x10, NULL, 0);
	put_fde(&e, 0x1010, 0x10, fde_ops, sizeof(fde_ops));
	put_fde(&e, 0x1020, 0x10, NULL, 0);
	put32(&e, 0);
	t = build_eh(&e);
	expect_row(t, 0x1000, CFI_CFA_RSP, 8, CFI_RBP_SAME, 0);
	expect_row(t, 0x1011, CFI_CFA_RSP, 16, CFI_RBP_AT_CFA, -16);
	expect_row(t, 0x1012, CFI_CFA_RSP, 16, CFI_RBP_SAME, 0);
	expect_row(t, 0x1020, CFI_CFA_RSP, 8, CFI_RBP_SAME, 0);
	cfi_table__free(t);

	e.n = 0;
	put_cie_insns(&e, loc_in_cie, sizeof(loc_in_cie));
	put_fde(&e, 0x1000, 0x10, NULL, 0);
	put32(&e, 0);
	t = build_eh(&e);
	expect_row(t, 0x1000, CFI_CFA_UNSUPPORTED, 0, 0, 0);
	cfi_table__free(t);
}

static void put64(struct eh *e, uint64_t v)
{
	put(e, &v, 8);
}

/* .debug_frame: absolute CIE pointers, CIE version 4, a 64-bit DWARF FDE. */
static void test_debug_frame_rows(void **state)
{
	static const uint8_t cie[] = { 0xff, 0xff, 0xff, 0xff, 4, 0, 8, 0, 1, 0x78, 16,
				       0x0c, 7, 8, 0x90, 1 };
	static const uint8_t ops[] = { 0x42, 0x0e, 32 };
	struct cfi_builder *b = cfi_builder__new(0x1000, 0x2000);
	struct eh e = { .n = 0 };
	struct cfi_table *t;
	int err = 0;

	put32(&e, sizeof(cie));
	put(&e, cie, sizeof(cie));
	put32(&e, 4 + 8 + 8 + sizeof(ops));
	put32(&e, 0);
	put64(&e, 0x1100);
	put64(&e, 0x10);
	put(&e, ops, sizeof(ops));
	put32(&e, 0xffffffff);
	put64(&e, 8 + 8 + 8);
	put64(&e, 0);
	put64(&e, 0x1200);
	put64(&e, 0x20);
	assert_non_null(b);
	assert_int_equal(cfi_builder__add(b, e.b, e.n, 0, false, 8), 0);
	t = cfi_builder__finish(b, &err);
	cfi_builder__free(b);
	assert_non_null(t);
	expect_row(t, 0x1100, CFI_CFA_RSP, 8, CFI_RBP_SAME, 0);
	expect_row(t, 0x1102, CFI_CFA_RSP, 32, CFI_RBP_SAME, 0);
	expect_row(t, 0x1110, -1, 0, 0, 0);
	expect_row(t, 0x1210, CFI_CFA_RSP, 8, CFI_RBP_SAME, 0);
	expect_row(t, 0x1220, -1, 0, 0, 0);
	cfi_table__free(t);
}

/* ---- hostile input ------------------------------------------------------- */

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static uint8_t *read_file(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	long len;

	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	buf = malloc((size_t)len);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
	fclose(f);
	*size = (size_t)len;
	return buf;
}

static void eh_frame_extent(uint8_t *img, size_t size, size_t *off, size_t *len)
{
	Elf *e = elf_memory((char *)img, size);
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	assert_non_null(e);
	assert_int_equal(elf_getshdrstrndx(e, &shstrndx), 0);
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;

		if (gelf_getshdr(scn, &sh) &&
		    !strcmp(elf_strptr(e, shstrndx, sh.sh_name), ".eh_frame")) {
			*off = sh.sh_offset;
			*len = sh.sh_size;
		}
	}
	elf_end(e);
	assert_true(*len > 0);
}

/* Mutated .eh_frame bytes must give a table (or an error), never a crash. */
static void test_garbage_eh_frame(void **state)
{
	struct dump *d = fixture_dump("chain", "chain", NULL);
	struct map *m = map_of(d, d->regs.ip);
	struct cfi_table *orig = m->t;
	size_t size, off = 0, len = 0, loaded = 0;
	uint8_t *img = read_file(m->path, &size), *copy = malloc(size);
	uint64_t seed = 0x9e3779b97f4a7c15ull, ips[MAX_FRAMES];
	enum unwind_stop why;

	assert_non_null(copy);
	eh_frame_extent(img, size, &off, &len);
	for (int i = 0; i < 3000; i++) {
		int err = 0, flips = 1 + (int)(rnd(&seed) % 8);

		memcpy(copy, img, size);
		if (i % 50 == 49) {
			for (size_t j = 0; j < len; j++)
				copy[off + j] = (uint8_t)rnd(&seed);
		} else {
			for (int j = 0; j < flips; j++)
				copy[off + rnd(&seed) % len] = (uint8_t)rnd(&seed);
		}
		m->t = cfi_table__load_mem(copy, size, &err);
		if (!m->t)
			continue;
		loaded++;
		unwind_stack(&ops, d, &d->regs, d->stack, d->len, ips, MAX_FRAMES, &why);
		cfi_table__free(m->t);
	}
	fprintf(stderr, "  %zu of 3000 mutated images loaded\n", loaded);
	m->t = orig;
	free(copy);
	free(img);
	free_dump(d);
}

/* Mutated ELF headers (program/section headers, .eh_frame_hdr) too. */
static void test_garbage_elf(void **state)
{
	char path[PATH_MAX];
	size_t size, loaded = 0;
	uint8_t *img, *copy;
	uint64_t seed = 7;

	if (!fixtures_ok)
		skip();
	snprintf(path, sizeof(path), "%s/chain", tmpdir);
	img = read_file(path, &size);
	copy = malloc(size);
	assert_non_null(copy);
	for (int i = 0; i < 2000; i++) {
		struct cfi_table *t;
		int err = 0;

		memcpy(copy, img, size);
		for (int j = 0; j < 1 + i % 4; j++) {
			/* Headers sit in the first and last KiB of a small executable. */
			size_t at = rnd(&seed) % 2 ? rnd(&seed) % 1024 : size - 1 - rnd(&seed) % 2048;

			copy[at] = (uint8_t)rnd(&seed);
		}
		t = cfi_table__load_mem(copy, size, &err);
		loaded += t != NULL;
		for (int j = 0; t && j < 64; j++)
			(void)cfi_lookup(t, t->base - 8 + rnd(&seed) % (t->limit - t->base + 16));
		cfi_table__free(t);
	}
	fprintf(stderr, "  %zu of 2000 mutated ELF images loaded\n", loaded);
	free(copy);
	free(img);
}

/* Random stack words and registers against real tables: bounded, no crash. */
static void test_garbage_stack(void **state)
{
	struct dump *d = fixture_dump("chain", "chain", NULL);
	uint64_t seed = 42, ips[MAX_FRAMES], words[512];
	enum unwind_stop why;

	for (int i = 0; i < 20000; i++) {
		struct unwind_regs regs;
		const struct map *m = &d->maps[rnd(&seed) % (uint64_t)d->n];
		int n;

		for (size_t j = 0; j < 512; j++) {
			/* Mostly plausible code and stack addresses, some noise. */
			uint64_t r = rnd(&seed);
			const struct map *mm = &d->maps[r % (uint64_t)d->n];

			words[j] = r % 3 == 0 ? mm->lo + (r >> 8) % (mm->hi - mm->lo)
			       : r % 3 == 1 ? 0x7ffe0000 + (r >> 8) % 8192 : r;
		}
		regs.ip = m->lo + rnd(&seed) % (m->hi - m->lo);
		regs.sp = 0x7ffe0000;
		regs.bp = 0x7ffe0000 + rnd(&seed) % 8192;
		n = unwind_stack(&ops, d, &regs, (const uint8_t *)words, sizeof(words), ips,
				 MAX_FRAMES, &why);
		assert_true(n >= 1 && n <= MAX_FRAMES);
	}
	free_dump(d);
}

static void test_load_errors(void **state)
{
	char path[PATH_MAX];
	int err = 0;
	FILE *f;

	assert_null(cfi_table__load("/nonexistent/eprof", NULL, &err));
	assert_int_equal(err, -ENOENT);
	if (!tmpdir[0])
		skip();
	snprintf(path, sizeof(path), "%s/not-elf", tmpdir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("#!/bin/sh\n", f);
	fclose(f);
	assert_null(cfi_table__load(path, NULL, &err));
	assert_int_equal(err, -ENOEXEC);
}

/* ---- on-demand tables (.eh_frame_hdr) ----------------------------------- */

#define EH_VADDR 0x10000ull
#define HDR_VADDR 0x20000ull

/* .eh_frame_hdr for FDEs at .eh_frame offsets fde_off[i] starting at start[i]. */
static size_t put_hdr(uint8_t *h, const uint32_t *start, const uint32_t *fde_off, size_t n)
{
	int32_t eh_rel = (int32_t)(EH_VADDR - (HDR_VADDR + 4));
	size_t len = 0;

	h[len++] = 1;
	h[len++] = 0x1b; /* pcrel sdata4 */
	h[len++] = 0x03; /* udata4 */
	h[len++] = 0x3b; /* datarel sdata4 */
	memcpy(h + len, &eh_rel, 4);
	len += 4;
	memcpy(h + len, &(uint32_t){ (uint32_t)n }, 4);
	len += 4;
	for (size_t i = 0; i < n; i++) {
		int32_t loc = (int32_t)(start[i] - HDR_VADDR);
		int32_t fde = (int32_t)(EH_VADDR + fde_off[i] - HDR_VADDR);

		memcpy(h + len, &loc, 4);
		memcpy(h + len + 4, &fde, 4);
		len += 8;
	}
	return len;
}

/* The .eh_frame bytes in a memfd, as the object file holding them would be. */
static struct cfi_table *lazy_eh(const struct eh *e, const uint8_t *hdr, size_t hdr_len,
				 int *err)
{
	int fd = memfd_create("eh", 0);
	struct cfi_lazy_src src = { .hdr = hdr, .hdr_size = hdr_len, .hdr_vaddr = HDR_VADDR,
				    .eh_vaddr = EH_VADDR, .eh_off = 0, .eh_size = e->n,
				    .text_lo = 0x1000, .text_hi = 0x2000, .addr_size = 8,
				    .own_fd = true };
	struct cfi_table *t;

	assert_true(fd >= 0);
	assert_int_equal(write(fd, e->b, e->n), (ssize_t)e->n);
	src.fd = fd;
	t = cfi_lazy__table(&src, err);
	if (!t)
		close(fd);
	return t;
}

static void same_rule(const struct cfi_table *a, const struct cfi_table *b, uint64_t pc)
{
	const struct cfi_rule *x = cfi_lookup(a, pc), *y = cfi_lookup(b, pc);
	bool xn = !x || x->cfa == CFI_CFA_NONE, yn = !y || y->cfa == CFI_CFA_NONE;

	if (xn != yn || (!xn && memcmp(x, y, sizeof(*x))))
		fail_msg("rules differ at 0x%llx", (unsigned long long)pc);
}

static void test_lazy_rows(void **state)
{
	static const uint8_t prologue[] = { 0x41, 0x0e, 16, 0x86, 2, 0x44, 0x0d, 6, 0x48, 0x0c,
					    7, 8 };
	static const uint8_t leaf[] = { 0x42, 0x0e, 24 };
	uint32_t start[2] = { 0x1000, 0x1020 }, off[2];
	struct cfi_table *whole, *t;
	uint8_t hdr[64];
	uint64_t lo, hi;
	size_t bytes0;
	struct eh e = { .n = 0 };
	int err = 0;

	put_cie(&e);
	off[0] = (uint32_t)e.n;
	put_fde(&e, 0x1000, 0x10, prologue, sizeof(prologue));
	off[1] = (uint32_t)e.n;
	put_fde(&e, 0x1020, 0x10, leaf, sizeof(leaf));
	put32(&e, 0);
	whole = build_eh(&e);
	t = lazy_eh(&e, hdr, put_hdr(hdr, start, off, 2), &err);
	assert_non_null(t);
	assert_true(cfi_table__on_demand(t));
	bytes0 = cfi_table__bytes(t);
	assert_int_equal(cfi_table__nrows(t), 0);
	/* Found: each row of both FDEs as the whole build has it. */
	for (uint64_t pc = 0xff0; pc < 0x1040; pc++)
		same_rule(whole, t, pc);
	expect_row(t, 0x1009, CFI_CFA_RBP, 16, CFI_RBP_AT_CFA, -16);
	expect_row(t, 0x1023, CFI_CFA_RSP, 24, CFI_RBP_SAME, 0);
	/* Before the first FDE, between the two, after the last, far away: none. */
	assert_null(cfi_lookup(t, 0xfff));
	assert_null(cfi_lookup(t, 0x1018));
	assert_null(cfi_lookup(t, 0x1030));
	assert_null(cfi_lookup(t, 0x7fffffffffffull));
	assert_true(cfi_table__func_range(t, 0x1025, &lo, &hi));
	assert_true(lo == 0x1020 && hi == 0x1030);
	assert_false(cfi_table__func_range(t, 0x1018, &lo, &hi));
	/* Two FDEs built, each once; their rows are in the table's size. */
	assert_int_equal(cfi_table__nrows(t), 4 + 2);
	assert_true(cfi_table__bytes(t) > bytes0);
	bytes0 = cfi_table__bytes(t);
	same_rule(whole, t, 0x1005);
	assert_int_equal(cfi_table__bytes(t), bytes0);
	cfi_table__free(t);
	cfi_table__free(whole);
}

/* Headers the recorder must not trust: refused (the whole build is used), or no rows. */
static void test_lazy_bad_hdr(void **state)
{
	static const uint8_t leaf[] = { 0x42, 0x0e, 24 };
	uint32_t start[3] = { 0x1000, 0x1020, 0x1040 }, off[3];
	struct cfi_table *t;
	uint8_t hdr[64];
	struct eh e = { .n = 0 };
	size_t len;
	int err = 0;

	put_cie(&e);
	for (int i = 0; i < 3; i++) {
		off[i] = (uint32_t)e.n;
		put_fde(&e, start[i], 0x10, leaf, sizeof(leaf));
	}
	/* Not sorted. */
	len = put_hdr(hdr, (const uint32_t[]){ 0x1000, 0x1040, 0x1020 }, off, 3);
	assert_null(lazy_eh(&e, hdr, len, &err));
	assert_int_equal(err, -EINVAL);
	/* An FDE address outside .eh_frame. */
	len = put_hdr(hdr, start, (const uint32_t[]){ off[0], off[1], (uint32_t)e.n + 64 }, 3);
	assert_null(lazy_eh(&e, hdr, len, &err));
	assert_int_equal(err, -EINVAL);
	/* More entries than the header holds; another version; another table encoding. */
	len = put_hdr(hdr, start, off, 3);
	assert_null(lazy_eh(&e, hdr, len - 1, &err));
	hdr[0] = 2;
	assert_null(lazy_eh(&e, hdr, len, &err));
	hdr[0] = 1;
	hdr[3] = 0x1b;
	assert_null(lazy_eh(&e, hdr, len, &err));
	assert_int_equal(err, -EINVAL);
	/* Sorted but lying: an entry names the CIE, another an FDE of another start. */
	len = put_hdr(hdr, start, (const uint32_t[]){ 0, off[2], off[2] }, 3);
	t = lazy_eh(&e, hdr, len, &err);
	assert_non_null(t);
	assert_null(cfi_lookup(t, 0x1004));
	assert_null(cfi_lookup(t, 0x1024));
	expect_row(t, 0x1044, CFI_CFA_RSP, 24, CFI_RBP_SAME, 0);
	cfi_table__free(t);
}

/* The PT_GNU_EH_FRAME segment's file offset and size. */
static bool eh_hdr_of(const char *path, uint64_t *off, uint64_t *size)
{
	int fd = open(path, O_RDONLY);
	Elf *e = fd >= 0 ? elf_begin(fd, ELF_C_READ, NULL) : NULL;
	size_t n = 0;
	bool found = false;

	if (e && !elf_getphdrnum(e, &n))
		for (size_t i = 0; i < n; i++) {
			GElf_Phdr ph;

			if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_GNU_EH_FRAME) {
				*off = ph.p_offset;
				*size = ph.p_filesz;
				found = true;
			}
		}
	if (e)
		elf_end(e);
	if (fd >= 0)
		close(fd);
	return found;
}

/* Every function of the object, every third byte: on-demand rules equal the whole table's. */
static void compare_object(const char *path, bool by_fd)
{
	int fd = by_fd ? open(path, O_RDONLY) : -1;
	struct cfi_table *whole = cfi_table__load(path, NULL, &(int){ 0 });
	struct cfi_table *t = by_fd ? cfi_table__open_fd(fd, path, &(int){ 0 })
				    : cfi_table__open(path, &(int){ 0 });
	uint64_t checked = 0, prev_end = 0;
	size_t nfn;

	assert_non_null(whole);
	assert_non_null(t);
	assert_true(cfi_table__on_demand(t));
	assert_false(cfi_table__on_demand(whole));
	nfn = whole->nfn;
	for (size_t i = 0; i < nfn; i++) {
		uint64_t lo = whole->fn_start[i], hi = whole->fn_end[i], tlo = 0, thi = 0;

		assert_true(cfi_table__func_range(t, lo + (hi - lo) / 2, &tlo, &thi));
		assert_true(tlo == lo && thi == hi);
		/* The gap before it (up to 64 bytes) has no rule in either. */
		for (uint64_t pc = lo > prev_end + 64 ? lo - 64 : prev_end; pc < lo; pc++)
			same_rule(whole, t, pc);
		for (uint64_t pc = lo; pc < hi; pc += 3, checked++)
			same_rule(whole, t, pc);
		same_rule(whole, t, hi - 1);
		prev_end = hi;
	}
	fprintf(stderr, "  %s: %llu functions, %llu pcs; %zu of %zu rows built, %zu of %zu bytes\n",
		path, (unsigned long long)nfn, (unsigned long long)checked, cfi_table__nrows(t),
		cfi_table__nrows(whole), cfi_table__bytes(t), cfi_table__bytes(whole));
	assert_true(nfn > 100);
	cfi_table__free(t);
	cfi_table__free(whole);
	if (by_fd) /* borrowed: still open */
		assert_int_equal(close(fd), 0);
}

static void test_lazy_real(void **state)
{
	compare_object("/proc/self/exe", true);
	compare_object(LIBC_PATH, false);
}

/* A copy of libc whose search table is out of order: opened whole, with the same rows. */
static void test_lazy_fallback(void **state)
{
	uint64_t off = 0, size = 0, lo, hi;
	struct cfi_table *t, *whole;
	char path[PATH_MAX];
	int32_t pair[4];
	int fd;

	if (!tmpdir[0] || !eh_hdr_of(LIBC_PATH, &off, &size))
		skip();
	snprintf(path, sizeof(path), "%s/libc-unsorted.so", tmpdir);
	assert_int_equal(run_cmd("cp %s %s", LIBC_PATH, path), 0);
	fd = open(path, O_RDWR);
	assert_true(fd >= 0 && size > 12 + 16);
	/* Swap the first two entries (12 bytes of header before the table). */
	assert_int_equal(pread(fd, pair, 16, (off_t)off + 12), 16);
	assert_int_equal(pwrite(fd, pair + 2, 8, (off_t)off + 12), 8);
	assert_int_equal(pwrite(fd, pair, 8, (off_t)off + 20), 8);
	close(fd);
	t = cfi_table__open(path, &(int){ 0 });
	whole = cfi_table__load(path, NULL, &(int){ 0 });
	assert_non_null(t);
	assert_non_null(whole);
	assert_false(cfi_table__on_demand(t));
	assert_int_equal(cfi_table__nrows(t), cfi_table__nrows(whole));
	assert_true(cfi_table__func_range(t, whole->fn_start[0], &lo, &hi));
	cfi_table__free(t);
	cfi_table__free(whole);
	/* An object whose CFI is in .debug_frame (gaps filled from it): whole too. */
	if (fixtures_ok) {
		snprintf(path, sizeof(path), "%s/chain_g", tmpdir);
		t = cfi_table__open(path, &(int){ 0 });
		assert_non_null(t);
		assert_false(cfi_table__on_demand(t));
		cfi_table__free(t);
	}
}

static int set_on_demand(void **state)
{
	on_demand = true;
	return 0;
}

static int clear_on_demand(void **state)
{
	on_demand = false;
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rows),
		cmocka_unit_test(test_cie_state),
		cmocka_unit_test(test_debug_frame_rows),
		cmocka_unit_test(test_load_errors),
		cmocka_unit_test(test_chain),
		cmocka_unit_test(test_fp_fallback),
		cmocka_unit_test(test_call_decode),
		cmocka_unit_test(test_jit_scan_rbp),
		cmocka_unit_test(test_jit_scan_stale),
		cmocka_unit_test(test_scan_unneeded),
		cmocka_unit_test(test_plt_call),
		cmocka_unit_test(test_plt_stub),
		cmocka_unit_test(test_signal_frame),
		cmocka_unit_test(test_vdso_frame),
		cmocka_unit_test(test_debug_frame),
		cmocka_unit_test(test_too_deep),
		cmocka_unit_test(test_garbage_eh_frame),
		cmocka_unit_test(test_garbage_elf),
		cmocka_unit_test(test_garbage_stack),
		cmocka_unit_test(test_lazy_rows),
		cmocka_unit_test(test_lazy_bad_hdr),
		cmocka_unit_test(test_lazy_real),
		cmocka_unit_test(test_lazy_fallback),
		/* The recorder's on-demand tables through the same fixtures. */
		cmocka_unit_test_setup_teardown(test_chain, set_on_demand, clear_on_demand),
		cmocka_unit_test_setup_teardown(test_jit_scan_rbp, set_on_demand, clear_on_demand),
		cmocka_unit_test_setup_teardown(test_jit_scan_stale, set_on_demand,
						clear_on_demand),
		cmocka_unit_test_setup_teardown(test_scan_unneeded, set_on_demand,
						clear_on_demand),
		cmocka_unit_test_setup_teardown(test_plt_stub, set_on_demand, clear_on_demand),
		cmocka_unit_test_setup_teardown(test_signal_frame, set_on_demand, clear_on_demand),
		cmocka_unit_test_setup_teardown(test_vdso_frame, set_on_demand, clear_on_demand),
	};

	return cmocka_run_group_tests(tests, build_fixtures, cleanup_fixtures);
}
