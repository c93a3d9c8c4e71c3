// SPDX-License-Identifier: MIT
/*
 * User-space ELF objects. libdwfl opens the file and finds its symbol tables
 * (.symtab, .dynsym, MiniDebugInfo) and separate debug info through our
 * find_debuginfo callback, which searches build-id, .gnu_debuglink and
 * debuginfod only as the options allow. Lookups then run on our own sorted
 * tables, not on libdwfl's linear symbol search.
 */
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libgen.h>
#include <lzma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "sym/sym_internal.h"
#include "util/bidcache.h"
#include "util/elf_layout.h"
#include "util/log.h"

#define MAX_BUILD_ID 64

struct sym_obj {
	struct symbolizer *s;
	char *path;
	int err; /* why the object cannot be used, cached */
	Dwfl_Callbacks cb;
	char *debuginfo_path;
	Dwfl *dwfl;
	Dwfl_Module *mod;
	Dwarf_Addr bias; /* module address = file vaddr + bias */
	struct stat st;
	GElf_Phdr *loads;
	size_t nloads;
	struct symtab syms;
	bool syms_done;
	struct dw_index *dwx;
	bool dw_done;
	/*
	 * The build-id cache (docs/cache.md): lazy when loads, bias, symbols and the DWARF
	 * verdict came from it and libdwfl has not opened the file (fd kept for when it must);
	 * store when this object's entry is to be written once they are all known.
	 */
	char *bid;
	int fd;
	bool lazy, store;
	bool dw_none; /* from the cache: no DWARF (dw_known: the verdict is there at all) */
	bool dw_known;
};

static int cache_load(struct sym_obj *o);
static void cache_store(struct sym_obj *o);
static bool debug_file_appeared(struct sym_obj *o);

void sym_hex(const unsigned char *bits, size_t len, char *hex)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < len; i++) {
		hex[2 * i] = digits[bits[i] >> 4];
		hex[2 * i + 1] = digits[bits[i] & 0xf];
	}
	hex[2 * len] = '\0';
}

int elf_read_build_id(const char *path, char *hex, size_t hexlen)
{
	const void *bits;
	ssize_t len;
	Elf *elf = NULL;
	int fd, err = 0;

	elf_version(EV_CURRENT);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		err = -ENOEXEC;
		goto out;
	}
	len = dwelf_elf_gnu_build_id(elf, &bits);
	if (len <= 0) {
		err = len < 0 ? -ENOEXEC : -ENODATA;
		goto out;
	}
	if ((size_t)len * 2 + 1 > hexlen) {
		err = -ENOSPC;
		goto out;
	}
	sym_hex(bits, (size_t)len, hex);
out:
	elf_end(elf);
	close(fd);
	return err;
}

/*
 * libdwfl opens a gzip, bzip2, xz or zstd file by decompressing all of it into
 * memory first: a 5 KB bzip2 file becomes gigabytes. Objects a process maps
 * and debug files are plain ELF, so anything else is refused before libdwfl
 * sees it.
 */
static bool fd_is_elf(int fd)
{
	unsigned char m[SELFMAG];

	return pread(fd, m, sizeof(m), 0) == (ssize_t)sizeof(m) && !memcmp(m, ELFMAG, SELFMAG);
}

#define MINIDEBUG_MEMLIMIT (64u << 20) /* xz -9 needs 64 MiB of dictionary */

/* Every compressed section (SHF_COMPRESSED, or GNU .zdebug_*) plausible (elf_layout.h). */
static bool compressed_sections_sane(Elf *elf, const char *path)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx = 0;
	uint64_t claimed;
	GElf_Shdr sh;

	while ((scn = elf_nextscn(elf, scn))) {
		const char *name;
		int c = elf_scn_inflated_size(elf, scn, &claimed);

		if (c <= 0 || !gelf_getshdr(scn, &sh) || elf_inflate_plausible(claimed, sh.sh_size))
			continue; /* a header libelf cannot read, libdw cannot inflate either */
		name = elf_getshdrstrndx(elf, &shstrndx) ? NULL
							 : elf_strptr(elf, shstrndx, sh.sh_name);
		log_warn("'%s': section %s says it inflates from %" PRIu64 " to %" PRIu64
			 " bytes; its debug info is not used",
			 path, name ? name : "?", (uint64_t)sh.sh_size, claimed);
		return false;
	}
	return true;
}

/*
 * MiniDebugInfo (.gnu_debugdata, xz): libdwfl inflates it whole when the file
 * has no .symtab, and checks sizes only at the end. Decompress it here first,
 * discarding the output, and stop once it passes the ratio.
 */
static bool minidebug_sane(Elf *elf, const char *path)
{
	lzma_stream z = LZMA_STREAM_INIT;
	Elf_Scn *scn = NULL, *mini = NULL;
	uint8_t *buf = NULL;
	size_t shstrndx;
	lzma_ret ret;
	GElf_Shdr sh;
	Elf_Data *d;
	bool ok;

	if (elf_getshdrstrndx(elf, &shstrndx))
		return true;
	while ((scn = elf_nextscn(elf, scn))) {
		const char *name;

		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_SYMTAB)
			return true; /* libdwfl uses .symtab and never opens .gnu_debugdata */
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!mini && name && !strcmp(name, ".gnu_debugdata"))
			mini = scn;
	}
	if (!mini || !(d = elf_rawdata(mini, NULL)) || !d->d_buf || !d->d_size)
		return true;
	buf = malloc(65536);
	if (!buf || lzma_stream_decoder(&z, MINIDEBUG_MEMLIMIT, 0) != LZMA_OK) {
		free(buf);
		return false;
	}
	z.next_in = d->d_buf;
	z.avail_in = d->d_size;
	do {
		z.next_out = buf;
		z.avail_out = 65536;
		ret = lzma_code(&z, LZMA_FINISH);
	} while (ret == LZMA_OK && elf_inflate_plausible(z.total_out, d->d_size));
	/* A stream that fails early fails the same way in libdwfl, after as little work. */
	ok = elf_inflate_plausible(z.total_out, d->d_size) && ret != LZMA_MEMLIMIT_ERROR &&
	     ret != LZMA_MEM_ERROR;
	if (!ok)
		log_warn("'%s': its MiniDebugInfo (.gnu_debugdata) inflates past %" PRIu64
			 " bytes from %zu; symbols not read",
			 path, (uint64_t)z.total_out, d->d_size);
	lzma_end(&z);
	free(buf);
	return ok;
}

/* --- finding separate debug info ------------------------------------------------ */

/* The build-id of an open candidate file, compared with want. */
static bool fd_has_build_id(int fd, const unsigned char *want, size_t len)
{
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	const void *bits;
	ssize_t n;
	bool ok;

	if (!elf)
		return false;
	n = dwelf_elf_gnu_build_id(elf, &bits);
	ok = n > 0 && (size_t)n == len && !memcmp(bits, want, len);
	elf_end(elf);
	return ok;
}

/* The CRC of the file's st_size bytes: a file that reads on past its size is not a debug file. */
static bool fd_crc_matches(int fd, off_t size, GElf_Word want)
{
	unsigned char buf[65536];
	uLong crc = crc32(0L, Z_NULL, 0);
	off_t off = 0;
	ssize_t n = 0;

	while (off < size) {
		size_t want = size - off < (off_t)sizeof(buf) ? (size_t)(size - off) : sizeof(buf);

		n = pread(fd, buf, want, off);
		if (n <= 0)
			break;
		crc = crc32(crc, buf, (uInt)n);
		off += n;
	}
	return off == size && n >= 0 && (GElf_Word)crc == want;
}

/*
 * A .gnu_debuglink target must match the main file: by build-id when both
 * have one (cheap), else by the CRC the link records.
 */
static bool debuglink_matches(struct sym_obj *o, int fd, off_t size, GElf_Word crc)
{
	const unsigned char *bits;
	GElf_Addr vaddr;
	int len = dwfl_module_build_id(o->mod, &bits, &vaddr);
	const void *cbits;
	Elf *elf;
	ssize_t clen = 0;

	if (len > 0) {
		elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
		if (elf)
			clen = dwelf_elf_gnu_build_id(elf, &cbits);
		if (clen > 0) {
			bool ok = clen == len && !memcmp(cbits, bits, (size_t)len);

			elf_end(elf);
			return ok;
		}
		elf_end(elf);
	}
	return fd_crc_matches(fd, size, crc);
}

/*
 * Opens a candidate unless it is the main file under another name, or not an
 * ELF file of some size (procfs files say size 0 and may read on forever).
 */
static int open_candidate(struct sym_obj *o, const char *name, off_t *size)
{
	struct stat st;
	Elf *elf;
	bool sane;
	int fd = open(name, O_RDONLY | O_CLOEXEC | O_NONBLOCK);

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(Elf64_Ehdr) ||
	    (st.st_ino == o->st.st_ino && st.st_dev == o->st.st_dev) || !fd_is_elf(fd)) {
		close(fd);
		return -1;
	}
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	sane = elf && compressed_sections_sane(elf, name);
	elf_end(elf);
	if (!sane) {
		close(fd);
		return -1;
	}
	*size = st.st_size;
	return fd;
}

/* "/proc/123/root/usr/lib" -> "/usr/lib": the debug dir is laid out by host paths. */
static const char *strip_proc_root(const char *dir)
{
	const char *p;

	if (strncmp(dir, "/proc/", 6))
		return dir;
	p = dir + 6;
	while (*p >= '0' && *p <= '9')
		p++;
	if (p == dir + 6 || strncmp(p, "/root", 5) || (p[5] && p[5] != '/'))
		return dir;
	return p[5] ? p + 5 : "/";
}

static int try_debuglink_dir(struct sym_obj *o, const char *dir, const char *link, GElf_Word crc,
			     char **out)
{
	const char *dbg = symbolizer__debug_dir(o->s);
	char *cand[3] = {NULL, NULL, NULL};
	off_t size;
	int fd = -1;

	if (asprintf(&cand[0], "%s/%s", dir, link) < 0)
		cand[0] = NULL;
	if (asprintf(&cand[1], "%s/.debug/%s", dir, link) < 0)
		cand[1] = NULL;
	if (asprintf(&cand[2], "%s%s/%s", dbg, strip_proc_root(dir), link) < 0)
		cand[2] = NULL;
	for (int i = 0; i < 3 && fd < 0; i++) {
		if (!cand[i])
			continue;
		fd = open_candidate(o, cand[i], &size);
		if (fd >= 0 && !debuglink_matches(o, fd, size, crc)) {
			log_debug("debug link '%s' does not match '%s'", cand[i], o->path);
			close(fd);
			fd = -1;
		}
		if (fd >= 0) {
			*out = cand[i];
			cand[i] = NULL;
		}
	}
	for (int i = 0; i < 3; i++)
		free(cand[i]);
	return fd;
}

static int find_by_debuglink(struct sym_obj *o, const char *file, const char *link, GElf_Word crc,
			     char **out)
{
	char *copy, *real, *rcopy = NULL;
	int fd = -1;

	/* A debug link is a file name, never a path: "../../proc/..." must not be followed. */
	if (strchr(link, '/') || !strcmp(link, ".") || !strcmp(link, ".."))
		return -1;
	copy = strdup(file);
	real = realpath(file, NULL);
	if (!copy)
		goto out;
	fd = try_debuglink_dir(o, dirname(copy), link, crc, out);
	/* A symlinked file may have its debug info under the target's directory. */
	if (fd < 0 && real && strcmp(real, file)) {
		rcopy = strdup(real);
		if (rcopy)
			fd = try_debuglink_dir(o, dirname(rcopy), link, crc, out);
	}
out:
	free(copy);
	free(real);
	free(rcopy);
	return fd;
}

/* The dwz "alt" file named by the debug file, checked by its build-id. */
static int find_alt_by_name(struct sym_obj *o, const char *file, const char *alt,
			    const unsigned char *id, size_t id_len, char **out)
{
	const char *dbg = symbolizer__debug_dir(o->s), *std = "/usr/lib/debug/";
	char *cand[2] = {NULL, NULL}, *copy = strdup(file);
	off_t size;
	int fd = -1;

	if (!copy)
		return -1;
	if (alt[0] == '/') {
		cand[0] = strdup(alt);
		if (!strncmp(alt, std, strlen(std)) &&
		    asprintf(&cand[1], "%s/%s", dbg, alt + strlen(std)) < 0)
			cand[1] = NULL;
	} else if (asprintf(&cand[0], "%s/%s", dirname(copy), alt) < 0) {
		cand[0] = NULL;
	}
	for (int i = 1; i >= 0 && fd < 0; i--) {
		if (!cand[i])
			continue;
		fd = open_candidate(o, cand[i], &size);
		if (fd >= 0 && !fd_has_build_id(fd, id, id_len)) {
			close(fd);
			fd = -1;
		}
		if (fd >= 0) {
			*out = cand[i];
			cand[i] = NULL;
		}
	}
	free(cand[0]);
	free(cand[1]);
	free(copy);
	return fd;
}

/* The build-id being looked for: the alt file's (dwz) or the module's own. */
static int wanted_build_id(Dwfl_Module *mod, bool alt, const unsigned char **id,
			   const char **altname)
{
	Dwarf_Addr b;
	GElf_Addr vaddr;

	*altname = NULL;
	if (alt) {
		Dwarf *dw = dwfl_module_getdwarf(mod, &b);
		const void *bits = NULL;
		ssize_t n = dw ? dwelf_dwarf_gnu_debugaltlink(dw, altname, &bits) : -1;

		*id = bits;
		return n > 0 ? (int)n : -1;
	}
	return dwfl_module_build_id(mod, id, &vaddr);
}

static int find_debuginfo_cb(Dwfl_Module *mod, void **userdata, const char *modname,
			     Dwarf_Addr base, const char *file, const char *link, GElf_Word crc,
			     char **out)
{
	struct sym_obj *o = *userdata;
	const unsigned char *id = NULL;
	const char *altname;
	Dwarf_Addr dwbias = (Dwarf_Addr)-1;
	bool alt;
	int fd, id_len;

	if (!o)
		return -1;
	/* libdwfl asks again, once the Dwarf is open, for a dwz alt file. */
	dwfl_module_info(mod, NULL, NULL, NULL, &dwbias, NULL, NULL, NULL);
	alt = dwbias != (Dwarf_Addr)-1;
	fd = dwfl_build_id_find_debuginfo(mod, userdata, modname, base, file, link, crc, out);
	if (fd >= 0)
		return fd;
	id_len = wanted_build_id(mod, alt, &id, &altname);
	if (alt && id_len > 0 && altname)
		fd = find_alt_by_name(o, file ? file : o->path, altname, id, (size_t)id_len, out);
	else if (!alt && link && *link)
		fd = find_by_debuglink(o, file ? file : o->path, link, crc, out);
	if (fd < 0 && id_len > 0) {
		fd = symbolizer__debuginfod(o->s, id, (size_t)id_len, out);
		if (fd < 0)
			fd = -1;
	}
	return fd;
}

static int no_find_elf(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
		       char **file_name, Elf **elfp)
{
	/* Every module is reported with its file: nothing to search for. */
	return -1;
}

/* --- opening ------------------------------------------------------------------------ */

static int read_loads(struct sym_obj *o)
{
	Elf *elf = dwfl_module_getelf(o->mod, &o->bias);
	size_t phnum;

	if (!elf || elf_getphdrnum(elf, &phnum))
		return -ENOEXEC;
	o->loads = calloc(phnum ? phnum : 1, sizeof(*o->loads));
	if (!o->loads)
		return -ENOMEM;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD && ph.p_filesz)
			o->loads[o->nloads++] = ph;
	}
	return o->nloads ? 0 : -ENOEXEC;
}

/* A build-id given by the caller that the file no longer has: the file was replaced. */
static int check_build_id(struct sym_obj *o, const char *want)
{
	const unsigned char *bits;
	char hex[2 * MAX_BUILD_ID + 1];
	GElf_Addr vaddr;
	int len;

	if (!want || !*want)
		return 0;
	len = dwfl_module_build_id(o->mod, &bits, &vaddr);
	if (len <= 0 || len > MAX_BUILD_ID)
		return 0; /* nothing to compare with: trust the path */
	sym_hex(bits, (size_t)len, hex);
	if (!strcasecmp(hex, want))
		return 0;
	log_warn("'%s' has build-id %s, expected %s: the file changed since it was mapped", o->path,
		 hex, want);
	return -ESTALE;
}

static int report(struct sym_obj *o, int fd)
{
	void **ud;

	o->cb.find_elf = no_find_elf;
	o->cb.find_debuginfo = find_debuginfo_cb;
	o->cb.section_address = dwfl_offline_section_address;
	o->cb.debuginfo_path = &o->debuginfo_path;
	o->dwfl = dwfl_begin(&o->cb);
	if (!o->dwfl) {
		close(fd);
		return -ENOMEM;
	}
	dwfl_report_begin(o->dwfl);
	/* base 0 with p_vaddr added: module addresses are the file's own vaddrs. */
	o->mod = dwfl_report_elf(o->dwfl, o->path, o->path, fd, 0, true);
	if (!o->mod) {
		log_debug("cannot read ELF '%s': %s", o->path, dwfl_errmsg(-1));
		close(fd);
		return -ENOEXEC;
	}
	dwfl_report_end(o->dwfl, NULL, NULL);
	dwfl_module_info(o->mod, &ud, NULL, NULL, NULL, NULL, NULL, NULL);
	*ud = o;
	return 0;
}

static int open_obj(struct sym_obj *o, int fd, const char *build_id)
{
	int err;

	if (fd < 0) {
		fd = open(o->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
		if (fd < 0)
			return -errno;
	}
	if (fstat(fd, &o->st) || !S_ISREG(o->st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	if (!fd_is_elf(fd)) {
		close(fd);
		return -ENOEXEC;
	}
	o->debuginfo_path = strdup(symbolizer__debug_dir(o->s));
	if (!o->debuginfo_path) {
		close(fd);
		return -ENOMEM;
	}
	err = report(o, fd);
	if (!err)
		err = read_loads(o);
	if (!err)
		err = check_build_id(o, build_id);
	return err;
}

/*
 * Opens an object once; a failure is kept in the object (sym_obj__err) so
 * that later lookups fail fast instead of reopening. fd, when >= 0, is taken.
 */
struct sym_obj *sym_obj__open(struct symbolizer *s, const char *path, int fd, const char *build_id)
{
	struct sym_obj *o = calloc(1, sizeof(*o));

	if (!o || !(o->path = strdup(path))) {
		free(o);
		if (fd >= 0)
			close(fd);
		errno = ENOMEM;
		return NULL;
	}
	o->s = s;
	o->fd = -1;
	symtab__init(&o->syms);
	if (build_id && *build_id && symbolizer__opts(s)->use_cache) {
		o->bid = strdup(build_id);
		if (o->bid && !cache_load(o)) {
			o->lazy = true;
			o->fd = fd;
			return o;
		}
		o->store = o->bid != NULL;
	}
	o->err = open_obj(o, fd, build_id);
	if (o->err && o->err != -ENOMEM)
		log_debug("cannot use '%s': %s", path, strerror(-o->err));
	if (o->err)
		o->store = false;
	return o;
}

/* A cached object that now needs libdwfl (its DWARF): opened as it would have been. */
static int open_lazy(struct sym_obj *o)
{
	int fd = o->fd;

	if (!o->lazy)
		return o->err;
	o->lazy = false;
	o->fd = -1;
	free(o->loads);
	o->loads = NULL;
	o->nloads = 0;
	o->err = open_obj(o, fd, o->bid);
	if (o->err && o->err != -ENOMEM)
		log_debug("cannot use '%s': %s", o->path, strerror(-o->err));
	return o->err;
}

void sym_obj__free(struct sym_obj *o)
{
	if (!o)
		return;
	dw_index__free(o->dwx);
	symtab__clear(&o->syms);
	if (o->fd >= 0)
		close(o->fd);
	free(o->bid);
	if (o->dwfl)
		dwfl_end(o->dwfl);
	free(o->loads);
	free(o->debuginfo_path);
	free(o->path);
	free(o);
}

int sym_obj__err(const struct sym_obj *o)
{
	return o->err;
}

/* --- symbols ------------------------------------------------------------------------ */

/* Lower is better among aliases: sized FUNC, global, fewer leading underscores. */
static uint8_t sym_rank(const GElf_Sym *sym, const char *name)
{
	int bind = GELF_ST_BIND(sym->st_info), under = 0;
	uint8_t rank = 0;

	if (GELF_ST_TYPE(sym->st_info) == STT_NOTYPE)
		rank += 32;
	if (!sym->st_size)
		rank += 16;
	rank += bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 4 : 8;
	while (name[under] == '_' && under < 3)
		under++;
	return rank + (uint8_t)under;
}

/* Section bounds of a symbol, in module addresses; false unless executable. */
static bool exec_section(Elf *elf, GElf_Word shndx, Dwarf_Addr bias, uint64_t *end)
{
	Elf_Scn *scn = elf ? elf_getscn(elf, shndx) : NULL;
	GElf_Shdr shdr;

	if (!scn || !gelf_getshdr(scn, &shdr) || !(shdr.sh_flags & SHF_EXECINSTR))
		return false;
	*end = shdr.sh_addr + shdr.sh_size + bias;
	return true;
}

static int add_sym(struct sym_obj *o, int i)
{
	GElf_Sym sym;
	GElf_Addr addr;
	GElf_Word shndx;
	Elf *elf = NULL;
	Dwarf_Addr bias = 0;
	uint64_t sec_end, end;
	const char *name;
	int type;

	name = dwfl_module_getsym_info(o->mod, i, &sym, &addr, &shndx, &elf, &bias);
	if (!name || !*name || shndx == SHN_UNDEF || shndx == SHN_ABS || shndx == (GElf_Word)-1)
		return 0;
	type = GELF_ST_TYPE(sym.st_info);
	if (type != STT_FUNC && type != STT_GNU_IFUNC && type != STT_NOTYPE)
		return 0;
	/* Untyped symbols are labels; mapping symbols ("$x") and locals (".L") are noise. */
	if (type == STT_NOTYPE && (name[0] == '$' || name[0] == '.'))
		return 0;
	if (!exec_section(elf, shndx, bias, &sec_end))
		return 0;
	if (sym.st_size) {
		end = addr + sym.st_size;
		return symtab__add(&o->syms, addr, end < addr ? UINT64_MAX : end, name,
				   strlen(name), 0, sym_rank(&sym, name), 0);
	}
	return symtab__add(&o->syms, addr, sec_end, name, strlen(name), SYMTAB_GUESSED,
			   sym_rank(&sym, name), 0);
}

/*
 * PLT stubs have no symbols; perf names them "callee@plt" from .rela.plt,
 * whose entries are in PLT slot order. x86-64 and arm64 layouts only.
 */
struct plt_layout {
	Elf_Scn *plt, *rela;
	uint64_t first, entsize; /* offset of slot 0 within the PLT section, slot size */
	uint32_t jump_slot;	 /* the relocation type of a PLT slot */
};

static Elf_Scn *find_scn(Elf *elf, size_t shstrndx, const char *want)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	while ((scn = elf_nextscn(elf, scn))) {
		const char *name;

		if (!gelf_getshdr(scn, &sh))
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (name && !strcmp(name, want))
			return scn;
	}
	return NULL;
}

static bool plt_layout(Elf *elf, struct plt_layout *l)
{
	GElf_Ehdr eh;
	size_t shstrndx;

	if (!gelf_getehdr(elf, &eh) || elf_getshdrstrndx(elf, &shstrndx))
		return false;
	if (eh.e_machine == EM_X86_64) {
		l->jump_slot = R_X86_64_JUMP_SLOT;
		l->entsize = 16;
		/* With IBT the callable stubs are in .plt.sec, slot 0 first. */
		l->plt = find_scn(elf, shstrndx, ".plt.sec");
		l->first = l->plt ? 0 : 16;
	} else if (eh.e_machine == EM_AARCH64) {
		l->jump_slot = R_AARCH64_JUMP_SLOT;
		l->entsize = 16;
		l->first = 32;
		l->plt = NULL;
	} else {
		return false;
	}
	if (!l->plt)
		l->plt = find_scn(elf, shstrndx, ".plt");
	l->rela = find_scn(elf, shstrndx, ".rela.plt");
	return l->plt && l->rela;
}

static int add_plt_syms(struct sym_obj *o)
{
	Dwarf_Addr bias;
	Elf *elf = dwfl_module_getelf(o->mod, &bias);
	struct plt_layout l;
	GElf_Shdr psh, rsh, dsh;
	Elf_Data *rd, *dd;
	Elf_Scn *dyn;
	char name[512];
	size_t relsz, nrel, nslots;
	int err = 0;

	if (!elf || !plt_layout(elf, &l) || !gelf_getshdr(l.plt, &psh) ||
	    !gelf_getshdr(l.rela, &rsh) || rsh.sh_type != SHT_RELA ||
	    !(dyn = elf_getscn(elf, rsh.sh_link)) || !gelf_getshdr(dyn, &dsh) ||
	    !(rd = elf_getdata(l.rela, NULL)) || rd->d_type != ELF_T_RELA ||
	    !(dd = elf_getdata(dyn, NULL)) || psh.sh_size < l.first)
		return 0;
	/*
	 * Count the relocations libelf actually read, not what the headers claim:
	 * a hostile header (a huge sh_size, an entsize of 1) must not make this a
	 * loop of 2^60 slots.
	 */
	relsz = gelf_fsize(elf, ELF_T_RELA, 1, EV_CURRENT);
	if (!relsz)
		return 0;
	nrel = rd->d_size / relsz;
	nslots = (psh.sh_size - l.first) / l.entsize;
	for (size_t i = 0; i < nrel && i < nslots && !err; i++) {
		uint64_t addr = psh.sh_addr + l.first + i * l.entsize + bias;
		const char *sname;
		GElf_Rela r;
		GElf_Sym sym;

		if (!gelf_getrela(rd, (int)i, &r) || GELF_R_TYPE(r.r_info) != l.jump_slot ||
		    !gelf_getsym(dd, (int)GELF_R_SYM(r.r_info), &sym))
			continue;
		sname = elf_strptr(elf, dsh.sh_link, sym.st_name);
		if (!sname || !*sname)
			continue;
		snprintf(name, sizeof(name), "%s@plt", sname);
		err = symtab__add(&o->syms, addr, addr + l.entsize, name, strlen(name), 0, 64, 0);
	}
	return err;
}

static int load_syms(struct sym_obj *o)
{
	Dwarf_Addr bias;
	Elf *elf = dwfl_module_getelf(o->mod, &bias);
	int n, err = 0;

	o->syms_done = true;
	if (!elf || !minidebug_sane(elf, o->path))
		return 0; /* no names from this file; lookups fall back to DWARF or fail */
	n = dwfl_module_getsymtab(o->mod);
	for (int i = 1; i < n && !err; i++)
		err = add_sym(o, i);
	if (!err)
		err = add_plt_syms(o);
	if (!err)
		err = symtab__finish(&o->syms);
	if (err)
		symtab__clear(&o->syms);
	return err;
}

/* --- the build-id cache ------------------------------------------------------------- */

/*
 * Entry "sym" (docs/cache.md): what sym_obj__resolve needs of an object without libdwfl:
 * its PT_LOADs and bias, its finished symbol table (ELF symbols and PLT stubs, sorted,
 * aliases dropped, guessed sizes set) and whether it has DWARF. Little-endian host layout:
 *   u32 flags, u32 nloads, u64 bias, u64 nents, u64 strs_len,
 *   nloads x { u64 p_offset, p_vaddr, p_filesz },
 *   nents x { u64 addr, end; u32 name, aux; u8 flags, rank; u8 pad[6] },
 *   strs_len bytes of names (NUL-terminated each).
 * Bump SYM_CACHE_VERSION when any of this, or what goes into the table, changes.
 */
#define SYM_CACHE_KIND "sym"
#define SYM_CACHE_VERSION 1
#define SYMC_DW_KNOWN 0x1 /* the DWARF verdict below was taken (want_lines) */
#define SYMC_DW_NONE 0x2  /* libdw found no DWARF for the object, nor a debug file */
#define SYMC_MAX_LOADS 64

struct symc_head {
	uint32_t flags, nloads;
	uint64_t bias, nents, strs_len;
};
struct symc_load {
	uint64_t off, vaddr, filesz;
};
struct symc_ent {
	uint64_t addr, end;
	uint32_t name, aux;
	uint8_t flags, rank, pad[6];
};

/*
 * A "no DWARF" verdict stays true only while no debug file for the build-id appeared
 * (a -dbg package installed since) and debuginfod is not to be asked.
 */
static bool debug_file_appeared(struct sym_obj *o)
{
	const char *urls = getenv("DEBUGINFOD_URLS");
	char path[PATH_MAX];
	struct stat st;

	if (symbolizer__opts(o->s)->use_debuginfod && urls && *urls)
		return true;
	if (!o->bid || strlen(o->bid) < 3)
		return true;
	snprintf(path, sizeof(path), "%s/.build-id/%.2s/%s.debug", symbolizer__debug_dir(o->s),
		 o->bid, o->bid + 2);
	return !stat(path, &st);
}

static int cache_load(struct sym_obj *o)
{
	const struct symc_load *ld;
	const struct symc_ent *ce;
	struct symc_head h;
	size_t len, need;
	void *data;
	char *p;
	int err = -EBADMSG;

	if (bidcache_get(SYM_CACHE_KIND, SYM_CACHE_VERSION, o->bid, &data, &len))
		return -ENOENT;
	p = data;
	if (len < sizeof(h))
		goto out;
	memcpy(&h, p, sizeof(h));
	if (h.nloads == 0 || h.nloads > SYMC_MAX_LOADS || h.nents > UINT32_MAX ||
	    h.strs_len > UINT32_MAX)
		goto out;
	need = sizeof(h) + h.nloads * sizeof(*ld) + h.nents * sizeof(*ce) + h.strs_len;
	if (need != len || (h.strs_len && p[len - 1] != '\0'))
		goto out;
	ld = (const void *)(p + sizeof(h));
	ce = (const void *)(p + sizeof(h) + h.nloads * sizeof(*ld));
	o->loads = calloc(h.nloads, sizeof(*o->loads));
	o->syms.ents = calloc(h.nents ? h.nents : 1, sizeof(*o->syms.ents));
	o->syms.strs = malloc(h.strs_len ? h.strs_len : 1);
	if (!o->loads || !o->syms.ents || !o->syms.strs) {
		err = -ENOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < h.nloads; i++) {
		struct symc_load l;

		memcpy(&l, &ld[i], sizeof(l));
		o->loads[i].p_type = PT_LOAD;
		o->loads[i].p_offset = l.off;
		o->loads[i].p_vaddr = l.vaddr;
		o->loads[i].p_filesz = l.filesz;
	}
	o->nloads = h.nloads;
	o->bias = h.bias;
	for (uint64_t i = 0; i < h.nents; i++) {
		struct symc_ent e;

		memcpy(&e, &ce[i], sizeof(e));
		/* a name inside the strings, addresses in order: symtab__find's assumptions */
		if (e.name >= h.strs_len || (i && e.addr < o->syms.ents[i - 1].addr))
			goto out;
		o->syms.ents[i] = (struct symtab_ent){ e.addr, e.end, e.name, e.aux, e.flags,
						       e.rank };
	}
	memcpy(o->syms.strs, p + len - h.strs_len, h.strs_len);
	o->syms.n = o->syms.cap = h.nents;
	o->syms.strs_len = o->syms.strs_cap = h.strs_len;
	o->syms_done = true;
	o->dw_known = h.flags & SYMC_DW_KNOWN;
	o->dw_none = h.flags & SYMC_DW_NONE;
	err = 0;
out:
	if (err) {
		if (err == -EBADMSG)
			log_debug("cache: entry of '%s' (%s) malformed: rebuilt", o->path, o->bid);
		free(o->loads);
		o->loads = NULL;
		o->nloads = 0;
		symtab__clear(&o->syms);
		o->syms_done = false;
	}
	free(data);
	return err;
}

static void cache_store(struct sym_obj *o)
{
	struct symc_head h = { .nloads = (uint32_t)o->nloads, .bias = o->bias,
			       .nents = o->syms.n, .strs_len = o->syms.strs_len };
	size_t len;
	char *buf, *p;

	if (!o->bid || !o->syms_done || !o->nloads || o->nloads > SYMC_MAX_LOADS)
		return;
	if (o->dw_done) {
		h.flags |= SYMC_DW_KNOWN;
		if (!o->dwx)
			h.flags |= SYMC_DW_NONE;
	}
	len = sizeof(h) + o->nloads * sizeof(struct symc_load) +
	      o->syms.n * sizeof(struct symc_ent) + o->syms.strs_len;
	buf = calloc(1, len);
	if (!buf)
		return;
	memcpy(buf, &h, sizeof(h));
	p = buf + sizeof(h);
	for (size_t i = 0; i < o->nloads; i++, p += sizeof(struct symc_load)) {
		struct symc_load l = { o->loads[i].p_offset, o->loads[i].p_vaddr,
				       o->loads[i].p_filesz };

		memcpy(p, &l, sizeof(l));
	}
	for (size_t i = 0; i < o->syms.n; i++, p += sizeof(struct symc_ent)) {
		const struct symtab_ent *e = &o->syms.ents[i];
		struct symc_ent c = { .addr = e->addr, .end = e->end, .name = e->name,
				      .aux = e->aux, .flags = e->flags, .rank = e->rank };

		memcpy(p, &c, sizeof(c));
	}
	if (o->syms.strs_len)
		memcpy(p, o->syms.strs, o->syms.strs_len);
	bidcache_put(SYM_CACHE_KIND, SYM_CACHE_VERSION, o->bid, buf, len);
	free(buf);
}

/* --- lookups ------------------------------------------------------------------------ */

static int off_to_addr(const struct sym_obj *o, uint64_t off, uint64_t *addr)
{
	for (size_t i = 0; i < o->nloads; i++) {
		const GElf_Phdr *ph = &o->loads[i];

		if (off >= ph->p_offset && off - ph->p_offset < ph->p_filesz) {
			*addr = off - ph->p_offset + ph->p_vaddr + o->bias;
			return 0;
		}
	}
	return -ENOENT;
}

static struct dw_index *get_dwarf(struct sym_obj *o)
{
	Dwarf_Addr dwbias;
	Dwarf *dw;
	Elf *elf;

	if (o->dw_done)
		return o->dwx;
	if (o->lazy && o->dw_known && o->dw_none && !debug_file_appeared(o)) {
		o->dw_done = true;
		return NULL;
	}
	if (open_lazy(o))
		return NULL;
	if (!o->dw_known)
		o->store = o->bid != NULL; /* the entry gets the verdict */
	o->dw_done = true;
	elf = dwfl_module_getelf(o->mod, &dwbias);
	if (!elf || !compressed_sections_sane(elf, o->path))
		return NULL;
	dw = dwfl_module_getdwarf(o->mod, &dwbias);
	if (!dw) {
		log_debug("no DWARF for '%s': %s", o->path, dwfl_errmsg(-1));
		return NULL;
	}
	o->dwx = dw_index__new(dw, dwbias);
	return o->dwx;
}

int sym_obj__resolve(struct sym_obj *o, uint64_t file_off, bool want_lines, struct sym_result *out)
{
	const struct symtab_ent *e;
	const char *name = NULL;
	struct dw_index *dwx;
	uint64_t addr;
	int err;

	if (o->err)
		return o->err;
	err = off_to_addr(o, file_off, &addr);
	if (err)
		return err;
	if (!o->syms_done) {
		err = load_syms(o);
		if (err)
			return err;
	}
	e = symtab__find(&o->syms, addr);
	if (e) {
		name = symtab__pretty(&o->syms, e);
		if (!name)
			return -ENOMEM;
	}
	dwx = want_lines ? get_dwarf(o) : NULL;
	if (o->store && (!want_lines || o->dw_done)) {
		o->store = false;
		cache_store(o);
	}
	if (dwx) {
		err = dw_index__resolve(dwx, addr, name, out);
		if (err != -ENOENT)
			return err;
	}
	if (!name)
		return -ENOENT;
	err = sym_result__alloc(out, 1);
	if (!err)
		err = sym_frame__set(&out->frames[0], name, NULL, 0, false);
	if (err) {
		sym_result__free(out);
		return err;
	}
	out->n = 1;
	return 0;
}
