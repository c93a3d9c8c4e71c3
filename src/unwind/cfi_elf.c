// SPDX-License-Identifier: MIT
/*
 * Finds the CFI sections of an ELF file (or in-memory image such as the
 * vDSO) and hands their bytes to the table builder. libelf only locates
 * sections; the records themselves are parsed by cfi_build.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/elf_layout.h"
#include "cfi.h"
#include "dwarf_read.h"
#include "unwind.h"
#include "util/log.h"

/* The pcs an FDE may cover: the union of the executable PT_LOADs. */
static void text_range(Elf *e, uint64_t *lo, uint64_t *hi)
{
	size_t n = 0;

	*lo = UINT64_MAX;
	*hi = 0;
	if (elf_getphdrnum(e, &n))
		n = 0;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD || !(ph.p_flags & PF_X))
			continue;
		if (ph.p_vaddr + ph.p_memsz < ph.p_vaddr)
			continue;
		if (ph.p_vaddr < *lo)
			*lo = ph.p_vaddr;
		if (ph.p_vaddr + ph.p_memsz > *hi)
			*hi = ph.p_vaddr + ph.p_memsz;
	}
	if (*lo >= *hi) {
		/* No program headers (a relocatable object): trust the FDEs. */
		*lo = 0;
		*hi = UINT64_MAX;
	}
}

static Elf_Scn *find_section(Elf *e, const char *name, GElf_Shdr *sh)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	if (elf_getshdrstrndx(e, &shstrndx))
		return NULL;
	while ((scn = elf_nextscn(e, scn))) {
		const char *n;

		if (!gelf_getshdr(scn, sh))
			continue;
		n = elf_strptr(e, shstrndx, sh->sh_name);
		if (n && !strcmp(n, name))
			return sh->sh_type == SHT_NOBITS ? NULL : scn;
	}
	return NULL;
}

/*
 * Without section headers, PT_GNU_EH_FRAME (.eh_frame_hdr) still points at
 * .eh_frame; its size is unknown, so walk to the end of its segment: the
 * walker stops at the zero terminator.
 */
static int add_eh_frame_from_phdr(struct cfi_builder *b, Elf *e, unsigned int asz)
{
	size_t raw_size = 0, n = 0;
	const uint8_t *raw = (const uint8_t *)elf_rawfile(e, &raw_size);
	GElf_Phdr hdr = { 0 }, ph;
	struct dw_cursor c;
	uint64_t ehf;
	uint8_t enc;

	if (!raw || elf_getphdrnum(e, &n))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_GNU_EH_FRAME)
			hdr = ph;
	if (hdr.p_type != PT_GNU_EH_FRAME || hdr.p_offset > raw_size ||
	    hdr.p_filesz > raw_size - hdr.p_offset)
		return 0;
	c = (struct dw_cursor){ .p = raw + hdr.p_offset, .sec = raw + hdr.p_offset,
				.sec_vaddr = hdr.p_vaddr, .data_base = hdr.p_vaddr };
	c.end = c.p + hdr.p_filesz;
	if (dw_u8(&c) != 1)
		return 0;
	enc = dw_u8(&c);
	dw_u8(&c);
	dw_u8(&c);
	ehf = dw_encoded(&c, enc, asz);
	for (size_t i = 0; i < n && !c.err; i++) {
		uint64_t off;

		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD || ehf < ph.p_vaddr ||
		    ehf - ph.p_vaddr >= ph.p_filesz)
			continue;
		off = ph.p_offset + (ehf - ph.p_vaddr);
		if (ph.p_offset > raw_size || off >= raw_size)
			return 0;
		return cfi_builder__add(b, raw + off, raw_size - off, ehf, true, asz);
	}
	return 0;
}

static int add_eh_frame(struct cfi_builder *b, Elf *e, unsigned int asz)
{
	GElf_Shdr sh;
	Elf_Scn *scn = find_section(e, ".eh_frame", &sh);
	Elf_Data *d;

	if (!scn)
		return add_eh_frame_from_phdr(b, e, asz);
	d = elf_getdata(scn, NULL);
	if (!d || !d->d_buf || !d->d_size)
		return 0;
	return cfi_builder__add(b, d->d_buf, d->d_size, sh.sh_addr, true, asz);
}

/*
 * A compressed .debug_frame is inflated whole by libelf: its claimed size must
 * be plausible (the symbolizer's rule, so a file has its CFI and its DWARF
 * used or refused alike) and at most 256 MiB, checked before libelf allocates.
 */
#define CFI_INFLATED_MAX (256ull << 20)

static bool inflate_ok(Elf *e, Elf_Scn *scn, const char *what, const char *path)
{
	Elf_Data *raw = elf_rawdata(scn, NULL);
	uint64_t claimed = 0;

	if (!raw || elf_scn_inflated_size(e, scn, &claimed) != 1)
		return false;
	if (claimed <= CFI_INFLATED_MAX && elf_inflate_plausible(claimed, raw->d_size))
		return true;
	log_warn("'%s': section %s says it inflates from %zu to %" PRIu64
		 " bytes; its CFI is not used",
		 path, what, raw->d_size, claimed);
	return false;
}

/* want: a debug file was asked for, so its lack of CFI is worth a word. */
static int add_debug_frame(struct cfi_builder *b, Elf *e, const char *path, bool want,
			   unsigned int asz)
{
	GElf_Shdr sh;
	Elf_Scn *scn = find_section(e, ".debug_frame", &sh);
	Elf_Data *d;

	if (scn && (sh.sh_flags & SHF_COMPRESSED) &&
	    (!inflate_ok(e, scn, ".debug_frame", path) || elf_compress(scn, 0, 0) < 0))
		scn = NULL;
	if (!scn) {
		scn = find_section(e, ".zdebug_frame", &sh);
		if (scn && (!inflate_ok(e, scn, ".zdebug_frame", path) ||
			    elf_compress_gnu(scn, 0, 0) < 0))
			scn = NULL;
	}
	if (!scn) {
		if (want)
			log_debug("no usable .debug_frame in '%s'", path);
		return 0;
	}
	d = elf_getdata(scn, NULL);
	if (!d || !d->d_buf || !d->d_size)
		return 0;
	return cfi_builder__add(b, d->d_buf, d->d_size, 0, false, asz);
}

static struct cfi_table *build(Elf *e, Elf *dbg, const char *path, const char *dbg_path, int *err)
{
	struct cfi_builder *b = NULL;
	struct cfi_table *t = NULL;
	uint64_t lo, hi;
	unsigned int asz;
	int rc;

	if (elf_kind(e) != ELF_K_ELF || (dbg && elf_kind(dbg) != ELF_K_ELF)) {
		*err = -ENOEXEC;
		return NULL;
	}
	asz = gelf_getclass(e) == ELFCLASS32 ? 4 : 8;
	text_range(e, &lo, &hi);
	b = cfi_builder__new(lo, hi);
	if (!b) {
		*err = -ENOMEM;
		return NULL;
	}
	rc = add_eh_frame(b, e, asz);
	/* An unstripped -g build without unwind tables has its CFI only here. */
	if (!rc)
		rc = add_debug_frame(b, e, path, false, asz);
	if (!rc && dbg)
		rc = add_debug_frame(b, dbg, dbg_path, true, asz);
	if (rc)
		*err = rc;
	else
		t = cfi_builder__finish(b, err);
	cfi_builder__free(b);
	if (t)
		log_debug("cfi: %zu rows for '%s'", t->n, path);
	return t;
}

static Elf *open_elf(const char *path, int *fd, int *err)
{
	Elf *e;

	*fd = open_regular(path);
	if (*fd < 0) {
		*err = -errno;
		return NULL;
	}
	e = elf_begin(*fd, ELF_C_READ_MMAP, NULL);
	if (!e) {
		*err = -ENOEXEC;
		close(*fd);
		*fd = -1;
	}
	return e;
}

struct cfi_table *cfi_table__load(const char *path, const char *debug_path, int *err)
{
	int fd = -1, dfd = -1, rc = 0;
	Elf *e, *dbg = NULL;
	struct cfi_table *t = NULL;

	elf_version(EV_CURRENT);
	e = open_elf(path, &fd, &rc);
	if (!e)
		goto out;
	if (debug_path) {
		dbg = open_elf(debug_path, &dfd, &rc);
		if (!dbg)
			goto out;
	}
	t = build(e, dbg, path, debug_path, &rc);
out:
	if (!t)
		log_debug("failed to load CFI of '%s': %s", path, strerror(-rc));
	if (dbg)
		elf_end(dbg);
	if (dfd >= 0)
		close(dfd);
	if (e)
		elf_end(e);
	if (fd >= 0)
		close(fd);
	if (err)
		*err = t ? 0 : rc;
	if (!t)
		errno = -rc;
	return t;
}

/*
 * The on-demand table of e, or NULL (*err = -EINVAL) when it needs the whole
 * build: no usable .eh_frame_hdr, no .eh_frame section, or a .debug_frame
 * whose rows fill .eh_frame's gaps (the whole build merges the two).
 */
static struct cfi_table *open_lazy(Elf *e, int fd, bool own_fd, int *err)
{
	size_t raw_size = 0, n = 0;
	const uint8_t *raw = (const uint8_t *)elf_rawfile(e, &raw_size);
	GElf_Phdr hdr = { 0 }, ph;
	struct cfi_lazy_src src;
	GElf_Shdr sh, dsh;

	*err = -EINVAL;
	if (!raw || elf_kind(e) != ELF_K_ELF || elf_getphdrnum(e, &n) ||
	    !find_section(e, ".eh_frame", &sh) || find_section(e, ".debug_frame", &dsh) ||
	    find_section(e, ".zdebug_frame", &dsh))
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_GNU_EH_FRAME)
			hdr = ph;
	if (hdr.p_type != PT_GNU_EH_FRAME || hdr.p_offset > raw_size ||
	    hdr.p_filesz > raw_size - hdr.p_offset || sh.sh_offset > raw_size ||
	    sh.sh_size > raw_size - sh.sh_offset)
		return NULL;
	src = (struct cfi_lazy_src){ .hdr = raw + hdr.p_offset, .hdr_size = hdr.p_filesz,
				     .hdr_vaddr = hdr.p_vaddr, .eh_vaddr = sh.sh_addr,
				     .eh_off = sh.sh_offset, .eh_size = sh.sh_size,
				     .addr_size = gelf_getclass(e) == ELFCLASS32 ? 4 : 8,
				     .fd = fd, .own_fd = own_fd };
	text_range(e, &src.text_lo, &src.text_hi);
	return cfi_lazy__table(&src, err);
}

static struct cfi_table *open_fd(int fd, const char *name, bool own_fd, int *err)
{
	struct cfi_table *t = NULL;
	Elf *e;

	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!e) {
		*err = -ENOEXEC;
		goto out;
	}
	t = open_lazy(e, fd, own_fd, err);
	if (t)
		log_debug("cfi: %zu FDEs on demand for '%s'", cfi_lazy__n(t), name);
	else if (*err == -EINVAL)
		t = build(e, NULL, name, NULL, err);
	elf_end(e);
out:
	if (!t)
		log_debug("failed to load CFI of '%s': %s", name, strerror(-*err));
	return t;
}

struct cfi_table *cfi_table__open_fd(int fd, const char *name, int *err)
{
	int rc = 0;
	struct cfi_table *t = open_fd(fd, name, false, &rc);

	if (err)
		*err = t ? 0 : rc;
	if (!t)
		errno = -rc;
	return t;
}

struct cfi_table *cfi_table__open(const char *path, int *err)
{
	struct cfi_table *t = NULL;
	int fd = open_regular(path), rc = -errno;

	if (fd >= 0) {
		t = open_fd(fd, path, true, &rc);
		if (!cfi_table__on_demand(t))
			close(fd); /* else the table reads its FDEs through it */
	}
	if (err)
		*err = t ? 0 : rc;
	if (!t)
		errno = -rc;
	return t;
}

bool cfi_table__on_demand(const struct cfi_table *t)
{
	return t && t->lazy;
}

struct cfi_table *cfi_table__load_mem(const void *image, size_t size, int *err)
{
	struct cfi_table *t = NULL;
	Elf *e = NULL;
	void *copy;
	int rc = 0;

	elf_version(EV_CURRENT);
	/* libelf may convert in place; the vDSO is read-only, so work on a copy. */
	copy = malloc(size ? size : 1);
	if (!copy) {
		rc = -ENOMEM;
		goto out;
	}
	memcpy(copy, image, size);
	e = elf_memory(copy, size);
	if (!e) {
		rc = -ENOEXEC;
		goto out;
	}
	t = build(e, NULL, "[memory]", NULL, &rc);
out:
	if (e)
		elf_end(e);
	free(copy);
	if (err)
		*err = t ? 0 : rc;
	if (!t)
		errno = -rc;
	return t;
}

size_t cfi_table__bytes(const struct cfi_table *t)
{
	size_t nb;

	if (!t)
		return 0;
	if (t->lazy)
		return cfi_lazy__bytes(t);
	nb = t->limit > t->base ? (size_t)((t->limit - t->base - 1) >> t->shift) + 2 : 1;
	return sizeof(*t) + t->n * sizeof(*t->pcs) + (t->ridx ? t->n * sizeof(*t->ridx) : 0) +
	       t->nrules * sizeof(*t->rules) + nb * sizeof(*t->idx) +
	       t->nfn * 2 * sizeof(*t->fn_start);
}

bool cfi_table__func_range(const struct cfi_table *t, uint64_t vaddr, uint64_t *start,
			   uint64_t *end)
{
	size_t lo = 0, hi = t ? t->nfn : 0;

	if (t && t->lazy)
		return cfi_lazy__func_range(t, vaddr, start, end);
	/* Last function starting at or before vaddr. */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (t->fn_start[mid] <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo || vaddr >= t->fn_end[lo - 1])
		return false;
	*start = t->fn_start[lo - 1];
	*end = t->fn_end[lo - 1];
	return true;
}

size_t cfi_table__nrows(const struct cfi_table *t)
{
	if (t && t->lazy)
		return cfi_lazy__nrows(t);
	return t ? t->n : 0;
}
