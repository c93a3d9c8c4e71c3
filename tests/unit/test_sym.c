// SPDX-License-Identifier: MIT
/*
 * Symbolizer tests. The fixture ELF files are compiled here, at run time,
 * with the system's cc: with and without DWARF, inlined code, C++, a
 * stripped binary with a .gnu_debuglink, a build-id debug tree and
 * MiniDebugInfo. Tests that need a missing tool say so and skip.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "sym/symbolize.h"
#include "sym/symbolizer.h"

static char tmp[PATH_MAX];
static bool have_cc, have_cxx, have_xz;

/* --- helpers ------------------------------------------------------------------------- */

static const char *path_of(const char *name)
{
	static char buf[8][PATH_MAX + 64];
	static int slot;
	char *p = buf[slot++ % 8];

	snprintf(p, PATH_MAX + 64, "%s/%s", tmp, name);
	return p;
}

__attribute__((format(printf, 1, 2))) static int sh(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return system(cmd);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_true(fputs(text, f) >= 0);
	assert_int_equal(fclose(f), 0);
}

/* Line number (1-based) of the first line of text that contains marker. */
static uint32_t line_of(const char *text, const char *marker)
{
	const char *hit = strstr(text, marker);
	uint32_t line = 1;

	assert_non_null(hit);
	for (const char *p = text; p < hit; p++)
		line += *p == '\n';
	return line;
}

static const char *base_name(const char *path)
{
	const char *slash = path ? strrchr(path, '/') : NULL;

	return slash ? slash + 1 : path;
}

/* Vaddr and size of a symbol, from .symtab or else .dynsym; match: exact name or prefix. */
static bool elf_sym(const char *path, const char *name, bool prefix, uint64_t *vaddr,
		    uint64_t *size)
{
	int fd = open(path, O_RDONLY);
	Elf *elf = fd >= 0 ? elf_begin(fd, ELF_C_READ, NULL) : NULL;
	bool found = false;

	for (int pass = 0; elf && pass < 2 && !found; pass++) {
		Elf_Scn *scn = NULL;
		GElf_Shdr sh;

		while (!found && (scn = elf_nextscn(elf, scn))) {
			Elf_Data *d;

			if (!gelf_getshdr(scn, &sh) ||
			    sh.sh_type != (pass ? SHT_DYNSYM : SHT_SYMTAB) || !sh.sh_entsize)
				continue;
			d = elf_getdata(scn, NULL);
			for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize && !found; i++) {
				GElf_Sym s;
				const char *n;

				if (!gelf_getsym(d, (int)i, &s) || s.st_shndx == SHN_UNDEF)
					continue;
				n = elf_strptr(elf, sh.sh_link, s.st_name);
				if (n &&
				    (prefix ? !strncmp(n, name, strlen(name)) : !strcmp(n, name))) {
					*vaddr = s.st_value;
					*size = s.st_size;
					found = true;
				}
			}
		}
	}
	if (elf)
		elf_end(elf);
	if (fd >= 0)
		close(fd);
	return found;
}

/* File offset of a vaddr through the PT_LOAD that holds it. */
static bool vaddr_to_off(const char *path, uint64_t vaddr, uint64_t *off)
{
	int fd = open(path, O_RDONLY);
	Elf *elf = fd >= 0 ? elf_begin(fd, ELF_C_READ, NULL) : NULL;
	size_t n = 0;
	bool found = false;

	if (elf && !elf_getphdrnum(elf, &n)) {
		for (size_t i = 0; i < n && !found; i++) {
			GElf_Phdr ph;

			if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD &&
			    vaddr >= ph.p_vaddr && vaddr < ph.p_vaddr + ph.p_filesz) {
				*off = vaddr - ph.p_vaddr + ph.p_offset;
				found = true;
			}
		}
	}
	if (elf)
		elf_end(elf);
	if (fd >= 0)
		close(fd);
	return found;
}

/* File offset and size of a function, read from (an unstripped copy) symfile. */
static void func_off(const char *symfile, const char *name, bool prefix, uint64_t *off,
		     uint64_t *size)
{
	uint64_t vaddr, sz;

	assert_true(elf_sym(symfile, name, prefix, &vaddr, &sz));
	assert_true(vaddr_to_off(symfile, vaddr, off));
	if (size)
		*size = sz;
}

static struct symbolizer *new_sym(bool lines, const char *debug_dir)
{
	struct symbolizer_opts o = {.want_lines = lines, .debug_dir = debug_dir};
	struct symbolizer *s = symbolizer__new(&o);

	assert_non_null(s);
	return s;
}

/* Resolves and checks the outermost (real) function's name. */
static void expect_name(struct symbolizer *s, const char *path, uint64_t off, const char *name)
{
	struct sym_result r;

	assert_int_equal(symbolizer__elf(s, path, NULL, off, &r), 0);
	assert_true(r.n >= 1);
	assert_string_equal(r.frames[r.n - 1].name, name);
	assert_false(r.frames[r.n - 1].inlined);
	sym_result__free(&r);
}

/* --- fixtures ------------------------------------------------------------------------- */

static const char c_src[] = "#include <stdio.h>\n"
			    "volatile int global_knob = 3;\n"
			    "__attribute__((noinline)) int ext_work(int x)\n"
			    "{\n"
			    "	return x + global_knob;\n"
			    "}\n"
			    "static inline __attribute__((always_inline)) int leaf_inl(int x)\n"
			    "{\n"
			    "	return ext_work(x) * 3; /* LEAF_LINE */\n"
			    "}\n"
			    "static inline __attribute__((always_inline)) int mid_inl(int x)\n"
			    "{\n"
			    "	return leaf_inl(x + 1) + 2; /* MID_LINE */\n"
			    "}\n"
			    "__attribute__((noinline)) int outer_fn(int x)\n"
			    "{\n"
			    "	volatile int v = x;\n"
			    "	return mid_inl(v) ^ global_knob; /* OUTER_LINE */\n"
			    "}\n"
			    "int main(int argc, char **argv)\n"
			    "{\n"
			    "	puts(argv[0]);\n"
			    "	return outer_fn(argc);\n"
			    "}\n";

static const char cxx_src[] =
    "namespace ns {\n"
    "template <typename T> struct Cls {\n"
    "	__attribute__((noinline, noclone)) int method(int a, const char *p) const\n"
    "	{\n"
    "		return a + (p ? *p : 0) + (int)sizeof(T); /* METHOD_LINE */\n"
    "	}\n"
    "};\n"
    "}\n"
    "namespace {\n"
    "__attribute__((noinline, noclone)) int anon_fn(int x) { return x * 7; }\n"
    "}\n"
    "__attribute__((noinline, noclone)) int ext(int x) { return x ^ 0x55; }\n"
    "static inline __attribute__((always_inline)) int sq(int x)\n"
    "{\n"
    "	return x * ext(x); /* SQ_LINE */\n"
    "}\n"
    "__attribute__((noinline)) int run(int n)\n"
    "{\n"
    "	auto f = [n](int y) __attribute__((noinline)) { return sq(y) + n; };\n"
    "	return f(n) + f(n + 1);\n"
    "}\n"
    "int main(int argc, char **argv)\n"
    "{\n"
    "	ns::Cls<int> c;\n"
    "	return c.method(argc, argv[0]) + anon_fn(argc) + run(argc);\n"
    "}\n";

/* The MiniDebugInfo recipe: function symbols only, xz-compressed into .gnu_debugdata. */
static int make_minidebuginfo(void)
{
	const char *p = path_of("mini"), *d = path_of("mini.dbg");

	return sh("set -e; cd '%s'; cp plain-g mini;"
		  "nm -D mini --format=posix --defined-only | awk '{print $1}' | sort > dyn.txt;"
		  "nm mini --format=posix --defined-only | awk '$2 ~ /[Tt]/ {print $1}' | sort"
		  " > funcs.txt;"
		  "comm -13 dyn.txt funcs.txt > keep.txt;"
		  "objcopy --only-keep-debug mini '%s';"
		  "objcopy -S --remove-section .gdb_index --remove-section .comment"
		  " --keep-symbols=keep.txt '%s';"
		  "strip --strip-all -R .comment mini; rm -f '%s.xz'; xz '%s';"
		  "objcopy --add-section .gnu_debugdata='%s.xz' mini",
		  tmp, d, d, d, d, d)
		   ? -1
		   : (access(p, R_OK) ? -1 : 0);
}

static int build_fixtures(void)
{
	int err = 0;

	write_file(path_of("fix.c"), c_src);
	/* Lazy binding keeps a classic .plt to name "puts@plt" in. */
	err |= sh("cd '%s' && cc -O2 -g -Wl,-z,lazy -Wl,--build-id -o plain-g fix.c", tmp);
	err |= sh("cd '%s' && cc -O2 -Wl,--build-id -o plain fix.c", tmp);
	err |= sh("cd '%s' && cc -O2 -g -no-pie -o nopie-g fix.c", tmp);
	/* Debug link next to the binary. */
	err |= sh("cd '%s' && cp plain-g linked && objcopy --only-keep-debug linked linked.debug &&"
		  " strip -s linked && objcopy --add-gnu-debuglink=linked.debug linked",
		  tmp);
	/* Debug link found under <debug_dir>/<dir of file>/. */
	err |=
	    sh("cd '%s' && mkdir -p dbglink%s && cp plain-g linked2 &&"
	       " objcopy --only-keep-debug linked2 dbglink%s/linked2.dbg &&"
	       " strip -s linked2 && objcopy --add-gnu-debuglink=dbglink%s/linked2.dbg linked2 &&"
	       " rm -f linked2.dbg",
	       tmp, tmp, tmp, tmp);
	/* Build-id tree: <debug_dir>/.build-id/xx/yyyy.debug, the binary fully stripped. */
	err |= sh("cd '%s' && cp plain-g byid && id=$(readelf -n byid | awk '/Build ID/{print $3}')"
		  " && mkdir -p dbg/.build-id/$(echo $id | cut -c1-2) &&"
		  " objcopy --only-keep-debug byid dbg/.build-id/$(echo $id | cut -c1-2)/"
		  "$(echo $id | cut -c3-).debug && strip -s byid",
		  tmp);
	/* zlib-compressed DWARF, and a copy whose .debug_str inflates 1000x: a decompression bomb. */
	err |= sh("cd '%s' && cc -O2 -g -gz=zlib -o plain-gz fix.c && cp plain-g bomb-gz &&"
		  " objcopy --dump-section .debug_str=str.bin bomb-gz &&"
		  " head -c 8388608 /dev/zero >> str.bin &&"
		  " objcopy --update-section .debug_str=str.bin bomb-gz &&"
		  " objcopy --compress-debug-sections=zlib bomb-gz",
		  tmp);
	/*
	 * A debug link that climbs out of the binary's directory: a link is a file
	 * name, so the debug file two levels up must not be found.
	 */
	err |= sh("cd '%s' && mkdir -p trav/a trav/b && cp linked trav/a/linked &&"
		  " cp linked.debug trav/b/lnk.dbg &&"
		  " perl -pi -e 's{linked[.]debug\\x00}{../b/lnk.dbg\\x00}' trav/a/linked &&"
		  " grep -qa '../b/lnk.dbg' trav/a/linked",
		  tmp);
	if (err)
		return -1;
	if (have_xz && make_minidebuginfo())
		return -1;
	/* MiniDebugInfo followed by 8 MiB of zeros: inflates thousands of times its size. */
	if (have_xz &&
	    sh("set -e; cd '%s'; xz -dc mini.dbg.xz > bomb.dbg; head -c 8388608 /dev/zero >> bomb.dbg;"
	       " rm -f bomb.dbg.xz; xz bomb.dbg; objcopy -R .gnu_debugdata mini mini-bomb;"
	       " objcopy --add-section .gnu_debugdata=bomb.dbg.xz mini-bomb",
	       tmp))
		return -1;
	if (have_cxx) {
		write_file(path_of("cxx.cc"), cxx_src);
		if (sh("cd '%s' && c++ -O2 -g -o cxx-g cxx.cc", tmp))
			return -1;
	}
	return 0;
}

static int group_setup(void **state)
{
	const char *base = getenv("EPROF_TEST_TMP");

	if (!base)
		base = "/tmp";
	mkdir(base, 0700);
	snprintf(tmp, sizeof(tmp), "%s/sym-XXXXXX", base);
	if (!mkdtemp(tmp))
		return -1;
	elf_version(EV_CURRENT);
	have_cc = !sh("command -v cc objcopy strip readelf nm >/dev/null 2>&1");
	have_cxx = have_cc && !sh("command -v c++ >/dev/null 2>&1");
	have_xz = have_cc && !sh("command -v xz comm awk >/dev/null 2>&1");
	if (have_cc && build_fixtures()) {
		fprintf(stderr, "test_sym: building the fixture binaries failed\n");
		return -1;
	}
	return 0;
}

static int group_teardown(void **state)
{
	sh("rm -rf '%s'", tmp);
	return 0;
}

#define NEED_CC()                                                                                  \
	do {                                                                                       \
		if (!have_cc) {                                                                    \
			fprintf(stderr, "skipped: no cc/binutils to build fixtures\n");            \
			skip();                                                                    \
		}                                                                                  \
	} while (0)

/* --- ELF tests --------------------------------------------------------------------------- */

static void test_names_without_dwarf(void **state)
{
	struct symbolizer *s;
	struct sym_result r;
	uint64_t off, size;

	NEED_CC();
	s = new_sym(true, NULL);
	func_off(path_of("plain"), "outer_fn", false, &off, &size);
	for (uint64_t i = 0; i < size; i += 3)
		expect_name(s, path_of("plain"), off + i, "outer_fn");
	assert_int_equal(symbolizer__elf(s, path_of("plain"), NULL, off, &r), 0);
	assert_int_equal(r.n, 1);
	assert_null(r.frames[0].file);
	assert_int_equal(r.frames[0].line, 0);
	sym_result__free(&r);
	func_off(path_of("plain"), "main", false, &off, NULL);
	expect_name(s, path_of("plain"), off, "main");
	/* ET_EXEC: offsets and vaddrs differ by the load address. */
	func_off(path_of("nopie-g"), "ext_work", false, &off, NULL);
	expect_name(s, path_of("nopie-g"), off + 1, "ext_work");
	symbolizer__free(s);
}

/* Finds an address in outer_fn where leaf_inl is inlined into mid_inl into outer_fn. */
static void test_inline_chain(void **state)
{
	struct symbolizer *s;
	struct sym_result r;
	uint64_t off, size;
	bool seen = false;

	NEED_CC();
	s = new_sym(true, NULL);
	func_off(path_of("plain-g"), "outer_fn", false, &off, &size);
	for (uint64_t i = 0; i < size && !seen; i++) {
		assert_int_equal(symbolizer__elf(s, path_of("plain-g"), NULL, off + i, &r), 0);
		assert_string_equal(r.frames[r.n - 1].name, "outer_fn");
		if (r.n == 3) {
			assert_string_equal(r.frames[0].name, "leaf_inl");
			assert_true(r.frames[0].inlined);
			assert_string_equal(base_name(r.frames[0].file), "fix.c");
			assert_int_equal(r.frames[0].line, line_of(c_src, "LEAF_LINE"));
			assert_string_equal(r.frames[1].name, "mid_inl");
			assert_true(r.frames[1].inlined);
			assert_int_equal(r.frames[1].line, line_of(c_src, "MID_LINE"));
			assert_string_equal(base_name(r.frames[1].file), "fix.c");
			assert_false(r.frames[2].inlined);
			assert_int_equal(r.frames[2].line, line_of(c_src, "OUTER_LINE"));
			seen = true;
		}
		sym_result__free(&r);
	}
	assert_true(seen);
	/* A plain statement: ext_work's body line. */
	func_off(path_of("plain-g"), "ext_work", false, &off, &size);
	assert_int_equal(symbolizer__elf(s, path_of("plain-g"), NULL, off, &r), 0);
	assert_int_equal(r.n, 1);
	assert_string_equal(base_name(r.frames[0].file), "fix.c");
	assert_in_range(r.frames[0].line, 3, 5);
	sym_result__free(&r);
	symbolizer__free(s);
}

static void test_plt(void **state)
{
	struct symbolizer *s;
	uint64_t vaddr, off;
	bool seen = false;
	char out[64] = "";
	FILE *f;

	NEED_CC();
	/* The PLT's address from readelf: .plt.sec when IBT stubs exist, else .plt. */
	snprintf(out, sizeof(out), "%s", path_of("plt.txt"));
	assert_int_equal(sh("readelf -SW '%s' | awk '$2 == \".plt\" || $2 == \".plt.sec\""
			    " {print $4}' | tail -1 > '%s'",
			    path_of("plain-g"), out),
			 0);
	f = fopen(out, "r");
	assert_non_null(f);
	assert_int_equal(fscanf(f, "%" SCNx64, &vaddr), 1);
	fclose(f);
	assert_true(vaddr_to_off(path_of("plain-g"), vaddr, &off));
	s = new_sym(false, NULL);
	for (uint64_t i = 0; i < 64 && !seen; i += 4) {
		struct sym_result r;

		if (symbolizer__elf(s, path_of("plain-g"), NULL, off + i, &r))
			continue;
		seen = !strcmp(r.frames[0].name, "puts@plt");
		sym_result__free(&r);
	}
	assert_true(seen);
	symbolizer__free(s);
}

static void test_cxx_names(void **state)
{
	struct symbolizer *s;
	struct sym_result r;
	uint64_t off, size;
	bool seen = false;

	if (!have_cxx) {
		fprintf(stderr, "skipped: no c++ compiler\n");
		skip();
	}
	s = new_sym(true, NULL);
	func_off(path_of("cxx-g"), "_ZNK2ns3ClsIiE6method", true, &off, NULL);
	assert_int_equal(symbolizer__elf(s, path_of("cxx-g"), NULL, off, &r), 0);
	assert_string_equal(r.frames[r.n - 1].name, "ns::Cls<int>::method");
	assert_string_equal(base_name(r.frames[r.n - 1].file), "cxx.cc");
	sym_result__free(&r);
	func_off(path_of("cxx-g"), "_ZN12_GLOBAL__N_17anon_fn", true, &off, NULL);
	expect_name(s, path_of("cxx-g"), off, "(anonymous namespace)::anon_fn");
	/* GCC nests a lambda's DWARF inside its enclosing function. */
	func_off(path_of("cxx-g"), "_ZZ3runiENKUliE_clEi", true, &off, &size);
	for (uint64_t i = 0; i < size && !seen; i++) {
		assert_int_equal(symbolizer__elf(s, path_of("cxx-g"), NULL, off + i, &r), 0);
		assert_string_equal(r.frames[r.n - 1].name,
				    "run(int)::{lambda(int)#1}::operator()");
		if (r.n == 2) {
			assert_string_equal(r.frames[0].name, "sq");
			assert_true(r.frames[0].inlined);
			assert_int_equal(r.frames[0].line, line_of(cxx_src, "SQ_LINE"));
			seen = true;
		}
		sym_result__free(&r);
	}
	assert_true(seen);
	symbolizer__free(s);
}

static void test_debuglink(void **state)
{
	struct symbolizer *s;
	struct sym_result r;
	uint64_t off;
	const char *files[] = {"linked", "linked2"};

	NEED_CC();
	/* A debug dir without a .build-id tree: only the link can find the debug file. */
	s = new_sym(true, path_of("dbglink"));
	func_off(path_of("plain-g"), "outer_fn", false, &off, NULL);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(symbolizer__elf(s, path_of(files[i]), NULL, off, &r), 0);
		assert_string_equal(r.frames[r.n - 1].name, "outer_fn");
		assert_string_equal(base_name(r.frames[r.n - 1].file), "fix.c");
		assert_true(r.frames[r.n - 1].line > 0);
		sym_result__free(&r);
	}
	symbolizer__free(s);
	/* Without the debug file the stripped binary has no outer_fn at all. */
	s = new_sym(true, path_of("nowhere"));
	assert_int_equal(symbolizer__elf(s, path_of("byid"), NULL, off, &r), -ENOENT);
	symbolizer__free(s);
}

static void test_build_id_dir(void **state)
{
	struct symbolizer *s;
	struct sym_result r;
	char id[128], id2[128];
	uint64_t off;

	NEED_CC();
	assert_int_equal(elf_read_build_id(path_of("byid"), id, sizeof(id)), 0);
	assert_int_equal(elf_read_build_id(path_of("plain-g"), id2, sizeof(id2)), 0);
	assert_string_equal(id, id2);
	assert_int_equal(strspn(id, "0123456789abcdef"), strlen(id));
	assert_int_equal(elf_read_build_id(path_of("byid"), id2, 8), -ENOSPC);
	s = new_sym(true, path_of("dbg"));
	func_off(path_of("plain-g"), "outer_fn", false, &off, NULL);
	assert_int_equal(symbolizer__elf(s, path_of("byid"), id, off, &r), 0);
	assert_string_equal(r.frames[r.n - 1].name, "outer_fn");
	assert_string_equal(base_name(r.frames[0].file), "fix.c");
	sym_result__free(&r);
	/* A build-id the file does not have: the file changed since it was mapped. */
	assert_int_equal(symbolizer__elf(s, path_of("byid"), "00112233", off, &r), -ESTALE);
	symbolizer__free(s);
}

static void test_minidebuginfo(void **state)
{
	struct symbolizer *s;
	uint64_t off;

	NEED_CC();
	if (!have_xz) {
		fprintf(stderr, "skipped: no xz to build MiniDebugInfo\n");
		skip();
	}
	s = new_sym(false, path_of("nowhere"));
	func_off(path_of("plain-g"), "outer_fn", false, &off, NULL);
	expect_name(s, path_of("mini"), off + 2, "outer_fn");
	func_off(path_of("plain-g"), "ext_work", false, &off, NULL);
	expect_name(s, path_of("mini"), off, "ext_work");
	symbolizer__free(s);
}

/*
 * Compressed sections: zlib DWARF is read (lines and inline frames), a
 * section that claims to inflate 1000x is not, and the symbol table still names
 * the function. MiniDebugInfo that inflates far past its size gives no names.
 */
static void test_compressed_sections(void **state)
{
	struct symbolizer *s;
	struct sym_result r;
	uint64_t off;

	NEED_CC();
	s = new_sym(true, path_of("nowhere"));
	func_off(path_of("plain-gz"), "outer_fn", false, &off, NULL);
	assert_int_equal(symbolizer__elf(s, path_of("plain-gz"), NULL, off + 2, &r), 0);
	assert_string_equal(r.frames[r.n - 1].name, "outer_fn");
	assert_non_null(r.frames[r.n - 1].file);
	assert_string_equal(base_name(r.frames[r.n - 1].file), "fix.c");
	assert_true(r.frames[r.n - 1].line > 0);
	sym_result__free(&r);

	func_off(path_of("bomb-gz"), "outer_fn", false, &off, NULL);
	assert_int_equal(symbolizer__elf(s, path_of("bomb-gz"), NULL, off + 2, &r), 0);
	assert_int_equal(r.n, 1);
	assert_string_equal(r.frames[0].name, "outer_fn");
	assert_null(r.frames[0].file);
	assert_int_equal(r.frames[0].line, 0);
	sym_result__free(&r);
	symbolizer__free(s);

	if (!have_xz) {
		fprintf(stderr, "skipped: no xz to build MiniDebugInfo\n");
		skip();
	}
	s = new_sym(false, path_of("nowhere"));
	func_off(path_of("plain-g"), "outer_fn", false, &off, NULL);
	expect_name(s, path_of("mini"), off + 2, "outer_fn");
	assert_int_equal(symbolizer__elf(s, path_of("mini-bomb"), NULL, off + 2, &r), -ENOENT);
	symbolizer__free(s);
}

/* A .gnu_debuglink naming "../b/lnk.dbg" is not followed out of the directory. */
static void test_debuglink_traversal(void **state)
{
	struct symbolizer *s;
	struct sym_result r;
	uint64_t off;

	NEED_CC();
	s = new_sym(true, path_of("nowhere"));
	func_off(path_of("plain-g"), "outer_fn", false, &off, NULL);
	/* The same stripped binary with its link intact finds its debug file... */
	expect_name(s, path_of("linked"), off, "outer_fn");
	/* ...but not through a link that is a path. */
	assert_int_equal(symbolizer__elf(s, path_of("trav/a/linked"), NULL, off, &r), -ENOENT);
	symbolizer__free(s);
}

/* A debuginfod server that refuses connections: the lookup fails quickly, cleanly. */
static void test_debuginfod_unreachable(void **state)
{
	struct symbolizer_opts o = {
	    .want_lines = true, .use_debuginfod = true, .debug_dir = path_of("nowhere")};
	struct symbolizer *s;
	struct sym_result r;
	uint64_t off;

	NEED_CC();
	setenv("DEBUGINFOD_URLS", "http://127.0.0.1:9", 1);
	setenv("DEBUGINFOD_CACHE_PATH", path_of("dbgd-cache"), 1);
	setenv("DEBUGINFOD_TIMEOUT", "2", 1);
	s = symbolizer__new(&o);
	assert_non_null(s);
	func_off(path_of("plain-g"), "outer_fn", false, &off, NULL);
	assert_int_equal(symbolizer__elf(s, path_of("byid"), NULL, off, &r), -ENOENT);
	/* Another address in the object: the failed search is not repeated. */
	func_off(path_of("plain-g"), "main", false, &off, NULL);
	if (!symbolizer__elf(s, path_of("byid"), NULL, off, &r))
		sym_result__free(&r);
	symbolizer__free(s);
	unsetenv("DEBUGINFOD_URLS");
	unsetenv("DEBUGINFOD_CACHE_PATH");
	unsetenv("DEBUGINFOD_TIMEOUT");
}

static void test_cache_repeat(void **state)
{
	struct symbolizer *s;
	struct sym_result a, b;
	uint64_t off, size;

	NEED_CC();
	s = new_sym(true, NULL);
	func_off(path_of("plain-g"), "outer_fn", false, &off, &size);
	for (uint64_t i = 0; i < size; i++) {
		assert_int_equal(symbolizer__elf(s, path_of("plain-g"), NULL, off + i, &a), 0);
		assert_int_equal(symbolizer__elf(s, path_of("plain-g"), NULL, off + i, &b), 0);
		assert_int_equal(a.n, b.n);
		for (uint32_t k = 0; k < a.n; k++) {
			assert_string_equal(a.frames[k].name, b.frames[k].name);
			assert_int_equal(a.frames[k].line, b.frames[k].line);
			assert_int_equal(a.frames[k].inlined, b.frames[k].inlined);
		}
		sym_result__free(&a);
		sym_result__free(&b);
	}
	/* An offset outside every segment. */
	assert_int_equal(symbolizer__elf(s, path_of("plain-g"), NULL, 1ULL << 40, &a), -ENOENT);
	symbolizer__free(s);
}

static void test_garbage_files(void **state)
{
	struct symbolizer *s = new_sym(true, NULL);
	struct sym_result r;
	char id[128];
	unsigned char junk[4096];
	FILE *f;

	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (unsigned char)(i * 7 + (i >> 3));
	f = fopen(path_of("junk"), "w");
	assert_non_null(f);
	assert_int_equal(fwrite(junk, 1, sizeof(junk), f), sizeof(junk));
	fclose(f);
	assert_true(symbolizer__elf(s, path_of("junk"), NULL, 0x10, &r) < 0);
	assert_int_equal(r.n, 0);
	assert_true(elf_read_build_id(path_of("junk"), id, sizeof(id)) < 0);
	assert_int_equal(symbolizer__elf(s, path_of("does-not-exist"), NULL, 0, &r), -ENOENT);
	assert_true(symbolizer__elf(s, tmp, NULL, 0, &r) < 0); /* a directory */
	assert_int_equal(symbolizer__elf(s, "", NULL, 0, &r), -EINVAL);
	if (have_cc) {
		/* Every truncation of a real ELF: an error or a name, never a crash. */
		for (int len = 0; len <= 6000; len += 97) {
			sh("head -c %d '%s' > '%s'", len, path_of("plain-g"), path_of("trunc"));
			for (uint64_t off = 0; off < 0x2000; off += 0x111) {
				if (!symbolizer__elf(s, path_of("trunc"), NULL, off, &r))
					sym_result__free(&r);
			}
			symbolizer__free(s); /* objects are cached by path: start afresh */
			s = new_sym(true, NULL);
		}
	}
	symbolizer__free(s);
}

/* --- kernel, perf maps, vDSO ------------------------------------------------------------ */

static const char kallsyms[] = "ffffffff81000000 T _stext\n"
			       "ffffffff81000100 T do_thing\n"
			       "ffffffff81000200 t helper\n"
			       "ffffffff81000300 D some_data\n"
			       "ffffffff81000400 T _etext\n"
			       "ffffffffc0001000 t mod_fn\t[mymod]\n"
			       "ffffffffc0001100 t other_fn\t[othermod]\n"
			       "ffffffffc0001200 r mod_rodata\t[othermod]\n";

static void expect_kernel(struct symbolizer *s, uint64_t addr, const char *name, const char *mod)
{
	struct sym_result r;

	assert_int_equal(symbolizer__kernel(s, addr, &r), 0);
	assert_int_equal(r.n, 1);
	assert_string_equal(r.frames[0].name, name);
	sym_result__free(&r);
	if (mod)
		assert_string_equal(symbolizer__kernel_module(s, addr), mod);
	else
		assert_null(symbolizer__kernel_module(s, addr));
}

static void test_kallsyms(void **state)
{
	struct symbolizer_opts o = {.kallsyms_path = path_of("kallsyms")};
	struct symbolizer *s;
	struct sym_result r;

	write_file(path_of("kallsyms"), kallsyms);
	s = symbolizer__new(&o);
	assert_non_null(s);
	expect_kernel(s, 0xffffffff81000150, "do_thing", NULL);
	expect_kernel(s, 0xffffffff81000100, "do_thing", NULL);
	expect_kernel(s, 0xffffffff81000350, "helper", NULL); /* data symbols are not text */
	expect_kernel(s, 0xffffffffc0001050, "mod_fn", "mymod");
	expect_kernel(s, 0xffffffffc0001250, "other_fn", "othermod");
	assert_int_equal(symbolizer__kernel(s, 0xffffffff80000000, &r), -ENOENT);
	symbolizer__free(s);

	/* What an unprivileged reader sees. */
	write_file(path_of("kallsyms0"), "0000000000000000 T _stext\n0000000000000000 t foo\n");
	o.kallsyms_path = path_of("kallsyms0");
	s = symbolizer__new(&o);
	assert_int_equal(symbolizer__kernel(s, 0xffffffff81000150, &r), -EACCES);
	assert_null(symbolizer__kernel_module(s, 0xffffffff81000150));
	symbolizer__free(s);
}

static void test_perfmap(void **state)
{
	struct symbolizer *s = new_sym(false, NULL);
	struct sym_result r;
	FILE *f;

	write_file(path_of("perf-123.map"), "7f0000001000 100 LazyCompile:~foo bar.js:1\n"
					    "7f0000001100 80 Interpreter stub\n"
					    "bogus line\n"
					    "7f0000002000 40 old name\n"
					    "7f0000002000 40 new name\n");
	assert_int_equal(symbolizer__perfmap(s, path_of("perf-123.map"), 0x7f0000001010, &r), 0);
	assert_string_equal(r.frames[0].name, "LazyCompile:~foo bar.js:1");
	sym_result__free(&r);
	assert_int_equal(symbolizer__perfmap(s, path_of("perf-123.map"), 0x7f000000117f, &r), 0);
	assert_string_equal(r.frames[0].name, "Interpreter stub");
	sym_result__free(&r);
	assert_int_equal(symbolizer__perfmap(s, path_of("perf-123.map"), 0x7f0000002001, &r), 0);
	assert_string_equal(r.frames[0].name, "new name");
	sym_result__free(&r);
	assert_int_equal(symbolizer__perfmap(s, path_of("perf-123.map"), 0x7f0000001180, &r),
			 -ENOENT);
	/* The JIT appends; the next lookup sees it. */
	f = fopen(path_of("perf-123.map"), "a");
	assert_non_null(f);
	fputs("7f0000003000 10 jitted later\n", f);
	fclose(f);
	assert_int_equal(symbolizer__perfmap(s, path_of("perf-123.map"), 0x7f0000003008, &r), 0);
	assert_string_equal(r.frames[0].name, "jitted later");
	sym_result__free(&r);
	assert_int_equal(symbolizer__perfmap(s, path_of("perf-999.map"), 0x1000, &r), -ENOENT);
	symbolizer__free(s);
}

/* jitdump records (perf's format): a LOAD names code, a MOVE moves it. */
static size_t jd_load(uint8_t *b, uint64_t addr, uint64_t size, const char *name)
{
	size_t nlen = strlen(name) + 1, len = 16 + 40 + nlen + 4; /* 4 bytes of "code" */
	uint32_t id = 0, len32 = (uint32_t)len, pid = 123;

	memset(b, 0, len);
	memcpy(b, &id, 4);
	memcpy(b + 4, &len32, 4);
	memcpy(b + 16, &pid, 4);
	memcpy(b + 16 + 8, &addr, 8);  /* vma */
	memcpy(b + 16 + 16, &addr, 8); /* code_addr */
	memcpy(b + 16 + 24, &size, 8);
	memcpy(b + 16 + 40, name, nlen);
	return len;
}

static size_t jd_move(uint8_t *b, uint64_t from, uint64_t to, uint64_t size)
{
	uint32_t id = 1, len = 16 + 48;

	memset(b, 0, len);
	memcpy(b, &id, 4);
	memcpy(b + 4, &len, 4);
	memcpy(b + 16 + 16, &from, 8);
	memcpy(b + 16 + 24, &to, 8);
	memcpy(b + 16 + 32, &size, 8);
	return len;
}

static void expect_jit(struct symbolizer *s, const char *path, uint64_t addr, const char *name)
{
	struct sym_result r;
	int err = symbolizer__perfmap(s, path, addr, &r);

	if (!name) {
		assert_int_equal(err, -ENOENT);
		return;
	}
	assert_int_equal(err, 0);
	assert_string_equal(r.frames[0].name, name);
	sym_result__free(&r);
}

static void test_jitdump(void **state)
{
	struct symbolizer *s = new_sym(false, NULL);
	static uint8_t b[4096];
	uint32_t hdr[10] = { 0x4a695444, 1, 40, 62, 0, 123 };
	size_t n = sizeof(hdr), cut;
	const char *path = path_of("jit-123.dump");
	uint32_t debug_info[4] = { 2, 16 + 8 };
	FILE *f;

	memcpy(b, hdr, sizeof(hdr));
	n += jd_load(b + n, 0x7f0000001000, 0x100, "LazyCompile:*foo bar.js:1");
	n += jd_load(b + n, 0x7f0000002000, 0x40, "old code");
	memcpy(b + n, debug_info, sizeof(debug_info)); /* a record of a kind not read */
	n += 16 + 8;
	n += jd_load(b + n, 0x7f0000002000, 0x40, "new code");
	n += jd_move(b + n, 0x7f0000001000, 0x7f0000005000, 0x100);
	cut = n;
	n += jd_load(b + n, 0x7f0000006000, 0x10, "being written");
	f = fopen(path, "wb");
	assert_non_null(f);
	/* The last record is still being written: half of it is in the file. */
	assert_int_equal(fwrite(b, 1, cut + (n - cut) / 2, f), cut + (n - cut) / 2);
	fclose(f);
	expect_jit(s, path, 0x7f0000001010, "LazyCompile:*foo bar.js:1");
	expect_jit(s, path, 0x7f0000002008, "new code");
	expect_jit(s, path, 0x7f00000050ff, "LazyCompile:*foo bar.js:1");
	expect_jit(s, path, 0x7f0000005100, NULL);
	expect_jit(s, path, 0x7f0000006004, NULL);
	/* The JIT finishes the record: the next miss reads it. */
	f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(b, 1, n, f), n);
	fclose(f);
	expect_jit(s, path, 0x7f0000006004, "being written");
	/* A header that claims more than the file holds is no jitdump. */
	hdr[2] = 4096;
	f = fopen(path_of("jit-124.dump"), "wb");
	assert_non_null(f);
	fwrite(hdr, 1, sizeof(hdr), f);
	fclose(f);
	{
		struct sym_result r;

		assert_int_equal(symbolizer__perfmap(s, path_of("jit-124.dump"), 0x7f0000001010,
						     &r), -EINVAL);
	}
	symbolizer__free(s);
}

static void test_vdso(void **state)
{
	struct symbolizer *s;
	bool seen = false;

	if (!getauxval(AT_SYSINFO_EHDR)) {
		fprintf(stderr, "skipped: no vDSO in this process\n");
		skip();
	}
	s = new_sym(true, NULL);
	for (uint64_t off = 0; off < 0x4000 && !seen; off += 4) {
		struct sym_result r;

		if (symbolizer__vdso(s, off, &r))
			continue;
		seen = strstr(r.frames[r.n - 1].name, "clock_gettime") != NULL;
		sym_result__free(&r);
	}
	assert_true(seen);
	symbolizer__free(s);
}

/* --- the real libc through its build-id debug file --------------------------------------- */

static bool libc_path(char *out, size_t len)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[PATH_MAX + 128];
	bool found = false;

	while (f && !found && fgets(line, sizeof(line), f)) {
		char *p = strchr(line, '/');

		if (p && strstr(p, "/libc.so.6")) {
			p[strcspn(p, "\n")] = '\0';
			snprintf(out, len, "%s", p);
			found = true;
		}
	}
	if (f)
		fclose(f);
	return found;
}

static void test_libc_debug(void **state)
{
	char libc[PATH_MAX], id[128], dbg[PATH_MAX + 200];
	uint64_t off, vaddr, size;
	struct symbolizer *s;
	struct sym_result r;

	if (!libc_path(libc, sizeof(libc)) || elf_read_build_id(libc, id, sizeof(id))) {
		fprintf(stderr, "skipped: no libc.so.6 with a build-id\n");
		skip();
	}
	snprintf(dbg, sizeof(dbg), "/usr/lib/debug/.build-id/%.2s/%s.debug", id, id + 2);
	if (access(dbg, R_OK)) {
		fprintf(stderr, "skipped: no libc debug file %s (install libc6-dbg)\n", dbg);
		skip();
	}
	s = new_sym(true, NULL);
	func_off(libc, "malloc", false, &off, NULL);
	assert_int_equal(symbolizer__elf(s, libc, id, off + 4, &r), 0);
	assert_string_equal(r.frames[r.n - 1].name, "malloc");
	assert_string_equal(base_name(r.frames[r.n - 1].file), "malloc.c");
	sym_result__free(&r);
	/* A local function that only the debug file's .symtab knows. */
	assert_true(elf_sym(dbg, "_int_malloc", false, &vaddr, &size));
	assert_true(vaddr_to_off(libc, vaddr, &off));
	assert_int_equal(symbolizer__elf(s, libc, id, off + 16, &r), 0);
	assert_string_equal(r.frames[r.n - 1].name, "_int_malloc");
	assert_true(r.frames[0].line > 0);
	sym_result__free(&r);
	symbolizer__free(s);
}

/* --- names ------------------------------------------------------------------------------- */

static void test_strip_params(void **state)
{
	static const char *const cases[][2] = {
	    {"ns::Cls<int>::method(int, char*) const", "ns::Cls<int>::method"},
	    {"foo<void (*)(int)>(void (*)(int))", "foo<void (*)(int)>"},
	    {"Foo::operator()(int) const", "Foo::operator()"},
	    {"Foo::operator()() const &&", "Foo::operator()"},
	    {"Foo::operator()", "Foo::operator()"},
	    {"bool operator< <Foo>(Foo const&, Foo const&)", "operator< <Foo>"},
	    {"operator<(A const&, A const&)", "operator<"},
	    {"A::operator<<(int)", "A::operator<<"},
	    {"A::operator->() const", "A::operator->"},
	    {"A::operator>(A const&) const", "A::operator>"},
	    {"A::operator new(unsigned long)", "A::operator new"},
	    {"A::operator int() const", "A::operator int"},
	    {"(anonymous namespace)::f(int)", "(anonymous namespace)::f"},
	    {"void (anonymous namespace)::g<int>(int)", "(anonymous namespace)::g<int>"},
	    {"foo(int)::{lambda(int)#1}::operator()(int) const",
	     "foo(int)::{lambda(int)#1}::operator()"},
	    {"void (*foo<int>(int))(char)", "foo<int>"},
	    {"std::vector<int, std::allocator<int> > make<int>(unsigned long)", "make<int>"},
	    {"int const& std::max<int>(int const&, int const&)", "std::max<int>"},
	    {"foo(int) [clone .cold]", "foo [clone .cold]"},
	    {"foo[abi:cxx11](int)", "foo[abi:cxx11]"},
	    {"A::~A()", "A::~A"},
	    {"main", "main"},
	    {"", ""},
	    {"((((", "(((("},
	    {"))))", "))))"},
	    {"f(", "f("},
	    {")(", ")("},
	    {"<<<>(x)", "<<<>"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char buf[256];

		snprintf(buf, sizeof(buf), "%s", cases[i][0]);
		sym_strip_params(buf);
		if (strcmp(buf, cases[i][1]))
			fail_msg("strip '%s': got '%s', want '%s'", cases[i][0], buf, cases[i][1]);
	}
	sym_strip_params(NULL);
}

/*
 * A name whose substitutions nest `levels` deep: each level refers twice to
 * the one before, so the demangled text doubles per level (10 levels: 26 KB,
 * 14 levels: 416 KB).
 */
static void nested_name(char *out, size_t size, int levels)
{
	static const char digits[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
	size_t n = (size_t)snprintf(out, size, "_Z1f1A1BIS_S_E");

	for (int k = 0, last = 2; k < levels; k++, last++) {
		/* Substitution last is "S<last-1 in base 36>_"; below 37 one digit does. */
		n += (size_t)snprintf(out + n, size - n, "S0_IS%c_S%c_E", digits[last - 1],
				      digits[last - 1]);
	}
}

static void test_demangle(void **state)
{
	static const char *const cases[][2] = {
	    {"_ZNK2ns3ClsIiE6methodEiPKc", "ns::Cls<int>::method"},
	    {"_ZN12_GLOBAL__N_17anon_fnEi", "(anonymous namespace)::anon_fn"},
	    {"_Z3fooIiEvT_", "foo<int>"},
	    {"_ZZ4mainENKUliE_clEi", "main::{lambda(int)#1}::operator()"},
	    {"_Z3fooi.cold", "foo [clone .cold]"},
	    {"memcpy@GLIBC_2.14", "memcpy"},
	    {"memcpy@@GLIBC_2.14", "memcpy"},
	    {"foo@plt", "foo@plt"},
	    {"_Z3fooi@plt", "foo@plt"},
	    {"main", "main"},
	    {"@", "@"},
	    {"_Z", "_Z"},
	    {"_ZN4core3fmt5write17h0123456789abcdefE", "core::fmt::write"},
	    {"_ZN3std2rt10lang_start28_$u7b$$u7b$closure$u7d$$u7d$17h0123456789abcdefE",
	     "std::rt::lang_start::{{closure}}"},
	    {"_ZN4core3ptr42drop_in_place$LT$alloc..string..String$GT$17h0123456789abcdefE",
	     "core::ptr::drop_in_place<alloc::string::String>"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *d = sym_demangle(cases[i][0]);

		assert_non_null(d);
		if (strcmp(d, cases[i][1]))
			fail_msg("demangle '%s': got '%s', want '%s'", cases[i][0], d, cases[i][1]);
		free(d);
	}
	assert_null(sym_demangle(NULL));

	/* An exponential name: demangled while it stays small, left mangled past the cap. */
	{
		char name[256];
		char *d;

		nested_name(name, sizeof(name), 10);
		d = sym_demangle(name);
		assert_non_null(d);
		assert_string_equal(d, "f");
		free(d);
		nested_name(name, sizeof(name), 14);
		d = sym_demangle(name);
		assert_non_null(d);
		assert_string_equal(d, name);
		free(d);
	}
}

/* The kernel's [uprobes] page (uretprobe returns land there) is named, other anonymous code is
 * unknown. */
static void test_uprobes_page(void **state)
{
	struct profile *p = profile__new();
	struct symbolizer *s = new_sym(false, NULL);
	struct symbolize_stats st;
	int64_t up, anon, l1, l2;
	const struct frame *f;
	uint32_t n;

	(void)state;
	assert_non_null(p);
	up = profile__object(p, OBJ_ANON, "[uprobes]", "", 7);
	anon = profile__object(p, OBJ_ANON, "[anon]", "", 7);
	assert_true(up > 0 && anon > 0);
	l1 = profile__location(p, up, 0x7fffffffe00d);
	l2 = profile__location(p, anon, 0x7f0000001000);
	assert_true(l1 > 0 && l2 > 0);
	assert_int_equal(symbolize_profile(p, s, NULL, NULL, &st), 0);
	f = profile__loc_frames(p, l1, &n);
	assert_int_equal(n, 1);
	assert_string_equal(profile__str(p, f->name), "[uretprobe trampoline]");
	assert_string_equal(profile__str(p, f->module), "[uprobes]");
	assert_int_equal(f->kind, FRAME_SPECIAL);
	f = profile__loc_frames(p, l2, &n);
	assert_int_equal(f->kind, FRAME_UNKNOWN);
	symbolizer__free(s);
	profile__free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_strip_params),
	    cmocka_unit_test(test_demangle),
	    cmocka_unit_test(test_names_without_dwarf),
	    cmocka_unit_test(test_inline_chain),
	    cmocka_unit_test(test_plt),
	    cmocka_unit_test(test_cxx_names),
	    cmocka_unit_test(test_debuglink),
	    cmocka_unit_test(test_build_id_dir),
	    cmocka_unit_test(test_minidebuginfo),
	    cmocka_unit_test(test_compressed_sections),
	    cmocka_unit_test(test_debuglink_traversal),
	    cmocka_unit_test(test_debuginfod_unreachable),
	    cmocka_unit_test(test_cache_repeat),
	    cmocka_unit_test(test_garbage_files),
	    cmocka_unit_test(test_kallsyms),
	    cmocka_unit_test(test_perfmap),
	    cmocka_unit_test(test_jitdump),
	    cmocka_unit_test(test_vdso),
	    cmocka_unit_test(test_libc_debug),
	    cmocka_unit_test(test_uprobes_page),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
