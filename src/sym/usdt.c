// SPDX-License-Identifier: MIT
#include <ctype.h>
#include <errno.h>
#include <gelf.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <limits.h>

#if defined(__x86_64__)
#include <asm/ptrace.h>
#endif

#include "util/elf_layout.h"
#include "util/vec.h"
#include "usdt.h"

int elf_vaddr_to_off(int fd, uint64_t vaddr, uint64_t *off)
{
	struct elf_layout l;
	int err = elf_layout_read(fd, &l);

	if (err)
		return err;
	for (int i = 0; i < l.nsegs; i++) {
		if (vaddr >= l.segs[i].vaddr && vaddr < l.segs[i].vaddr + l.segs[i].filesz) {
			*off = vaddr - l.segs[i].vaddr + l.segs[i].off;
			return 0;
		}
	}
	return -ENOENT;
}

static Elf *elf_open_fd(int fd)
{
	Elf *elf;

	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (elf && elf_kind(elf) != ELF_K_ELF) {
		elf_end(elf);
		return NULL;
	}
	return elf;
}

/* The first section of type want, or NULL: a real ELF has one .symtab and one .dynsym. */
static Elf_Scn *first_scn(Elf *elf, Elf64_Word want, GElf_Shdr *sh)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(elf, scn)) != NULL)
		if (gelf_getshdr(scn, sh) && sh->sh_type == want)
			return scn;
	return NULL;
}

/* Calls fn on every defined function symbol of .symtab and .dynsym until it returns true. */
static int for_each_sym(int fd, int type, bool (*fn)(void *arg, const char *name, const GElf_Sym *s),
			void *arg)
{
	static const Elf64_Word types[] = { SHT_SYMTAB, SHT_DYNSYM };
	Elf *elf = elf_open_fd(fd);
	size_t symsz;

	if (!elf)
		return -EINVAL;
	symsz = gelf_fsize(elf, ELF_T_SYM, 1, EV_CURRENT);
	/*
	 * Only the first table of each type, and only the symbols libelf read: a
	 * hostile file's hundreds of headers naming one table, or an sh_entsize of
	 * 1, would otherwise make each lookup (one per USDT note) cost notes x
	 * tables x symbols.
	 */
	for (size_t t = 0; symsz && t < sizeof(types) / sizeof(types[0]); t++) {
		GElf_Shdr sh;
		Elf_Scn *scn = first_scn(elf, types[t], &sh);
		Elf_Data *d = scn ? elf_getdata(scn, NULL) : NULL;
		size_t n = d && d->d_type == ELF_T_SYM ? d->d_size / symsz : 0;

		for (size_t i = 0; i < n; i++) {
			GElf_Sym s;
			const char *name;

			if (!gelf_getsym(d, (int)i, &s) || GELF_ST_TYPE(s.st_info) != type ||
			    s.st_shndx == SHN_UNDEF || !s.st_value)
				continue;
			name = elf_strptr(elf, sh.sh_link, s.st_name);
			if (name && fn(arg, name, &s))
				goto out;
		}
	}
out:
	elf_end(elf);
	return 0;
}

static int for_each_func(int fd, bool (*fn)(void *arg, const char *name, const GElf_Sym *s),
			 void *arg)
{
	return for_each_sym(fd, STT_FUNC, fn, arg);
}

struct lookup {
	const char *want;
	uint64_t vaddr;
	bool found, global;
	char *buf;
	size_t len;
};

static bool match_name(void *arg, const char *name, const GElf_Sym *s)
{
	struct lookup *l = arg;
	bool global = GELF_ST_BIND(s->st_info) != STB_LOCAL;

	if (strcmp(name, l->want) || (l->found && (l->global || !global)))
		return false;
	l->vaddr = s->st_value;
	l->found = true;
	l->global = global;
	return global;
}

int elf_func_lookup(int fd, const char *sym, uint64_t *vaddr, uint64_t *off)
{
	struct lookup l = { .want = sym };
	int err = for_each_func(fd, match_name, &l);

	if (err)
		return err;
	if (!l.found)
		return -ENOENT;
	*vaddr = l.vaddr;
	return elf_vaddr_to_off(fd, l.vaddr, off);
}

int elf_object_lookup(int fd, const char *sym, uint64_t *vaddr)
{
	struct lookup l = { .want = sym };
	int err = for_each_sym(fd, STT_OBJECT, match_name, &l);

	if (err)
		return err;
	if (!l.found)
		return -ENOENT;
	*vaddr = l.vaddr;
	return 0;
}

static bool match_addr(void *arg, const char *name, const GElf_Sym *s)
{
	struct lookup *l = arg;

	if (s->st_value != l->vaddr || !*name)
		return false;
	snprintf(l->buf, l->len, "%s", name);
	l->found = true;
	return true;
}

bool elf_func_at(int fd, uint64_t vaddr, char *buf, size_t len)
{
	struct lookup l = { .vaddr = vaddr, .buf = buf, .len = len };

	return !for_each_func(fd, match_addr, &l) && l.found;
}

static uint64_t read_addr(const uint8_t *p, bool is64)
{
	uint64_t v = 0;

	if (is64) {
		memcpy(&v, p, 8);
	} else {
		uint32_t v32;

		memcpy(&v32, p, 4);
		v = v32;
	}
	return v;
}

/* One stapsdt note: pc, base, semaphore (each an address), then provider, name, args. */
static int parse_note(const uint8_t *desc, size_t len, bool is64, uint64_t base_addr,
		      struct usdt_note *n)
{
	size_t asz = is64 ? 8 : 4, pos = 3 * asz;
	const char *strs[3];
	uint64_t note_base;

	if (len < pos + 3)
		return -EINVAL;
	memset(n, 0, sizeof(*n));
	n->pc = read_addr(desc, is64);
	note_base = read_addr(desc + asz, is64);
	n->sema = read_addr(desc + 2 * asz, is64);
	for (int i = 0; i < 3; i++) {
		const char *s = (const char *)desc + pos;
		size_t l = strnlen(s, len - pos);

		if (pos >= len || l == len - pos)
			return -EINVAL;
		strs[i] = s;
		pos += l + 1;
	}
	/* Prelinked files moved .stapsdt.base; the notes give the link-time one. */
	if (base_addr && note_base) {
		n->pc += base_addr - note_base;
		if (n->sema)
			n->sema += base_addr - note_base;
	}
	snprintf(n->provider, sizeof(n->provider), "%s", strs[0]);
	snprintf(n->name, sizeof(n->name), "%s", strs[1]);
	snprintf(n->args, sizeof(n->args), "%s", strs[2]);
	return 0;
}

static uint64_t section_addr(Elf *elf, const char *want)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;

	if (elf_getshdrstrndx(elf, &shstrndx))
		return 0;
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		const char *name;

		if (!gelf_getshdr(scn, &sh))
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (name && !strcmp(name, want))
			return sh.sh_addr;
	}
	return 0;
}

int usdt_notes_read(int fd, struct usdt_note **out)
{
	Elf *elf = elf_open_fd(fd);
	struct usdt_note *v = NULL;
	Elf_Scn *scn = NULL;
	uint64_t base;
	size_t cap = 0;
	int n = 0;
	bool is64;

	*out = NULL;
	if (!elf)
		return -EINVAL;
	is64 = gelf_getclass(elf) == ELFCLASS64;
	base = section_addr(elf, ".stapsdt.base");
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		GElf_Nhdr nh;
		size_t off = 0, name_off, desc_off;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		d = elf_getdata(scn, NULL);
		while (d && (off = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
			if (nh.n_type != 3 || nh.n_namesz != 8 ||
			    memcmp((char *)d->d_buf + name_off, "stapsdt", 8))
				continue;
			if (arr_grow(v, cap, (size_t)n + 1)) {
				free(v);
				elf_end(elf);
				return -ENOMEM;
			}

			if (parse_note((uint8_t *)d->d_buf + desc_off, nh.n_descsz, is64, base,
				       &v[n]))
				continue;
			n++;
		}
	}
	elf_end(elf);
	for (int i = 0; i < n; i++) {
		if (elf_vaddr_to_off(fd, v[i].pc, &v[i].pc_off))
			v[i].pc_off = 0;
		if (v[i].sema && elf_vaddr_to_off(fd, v[i].sema, &v[i].sema_off))
			v[i].sema_off = 0;
	}
	*out = v;
	return n;
}

static int reg_offset(const char *name)
{
#if defined(__x86_64__)
	static const struct {
		const char *n[4]; /* 64, 32, 16, 8-bit names */
		int off;
	} regs[] = {
#define R(a, b, c, d, f) { { a, b, c, d }, offsetof(struct pt_regs, f) }
		R("rax", "eax", "ax", "al", rax), R("rbx", "ebx", "bx", "bl", rbx),
		R("rcx", "ecx", "cx", "cl", rcx), R("rdx", "edx", "dx", "dl", rdx),
		R("rsi", "esi", "si", "sil", rsi), R("rdi", "edi", "di", "dil", rdi),
		R("rbp", "ebp", "bp", "bpl", rbp), R("rsp", "esp", "sp", "spl", rsp),
		R("r8", "r8d", "r8w", "r8b", r8), R("r9", "r9d", "r9w", "r9b", r9),
		R("r10", "r10d", "r10w", "r10b", r10), R("r11", "r11d", "r11w", "r11b", r11),
		R("r12", "r12d", "r12w", "r12b", r12), R("r13", "r13d", "r13w", "r13b", r13),
		R("r14", "r14d", "r14w", "r14b", r14), R("r15", "r15d", "r15w", "r15b", r15),
		R("rip", "eip", "ip", "ip", rip),
#undef R
	};

	for (size_t i = 0; i < sizeof(regs) / sizeof(regs[0]); i++)
		for (int k = 0; k < 4; k++)
			if (!strcmp(name, regs[i].n[k]))
				return regs[i].off;
	return -1;
#elif defined(__aarch64__)
	int r;

	if (!strcmp(name, "sp"))
		return 31 * 8;
	if ((name[0] == 'x' || name[0] == 'w') && sscanf(name + 1, "%d", &r) == 1 && r >= 0 &&
	    r <= 30)
		return r * 8;
	return -1;
#else
	return -1;
#endif
}

/* "%rdi", "-20(%rbp)", "$5" (x86-64); "x0", "[x29, -12]", "[sp]", "5" (arm64). */
static int parse_loc(const char *s, struct usdt_arg *a)
{
	char reg[16];
	long long off = 0;
	int n = 0;

	a->reg_off = -1;
	if (*s == '$') {
		a->is_const = true;
		a->off = strtoll(s + 1, NULL, 0);
		return 0;
	}
	if (sscanf(s, "%%%15[a-z0-9]%n", reg, &n) == 1 && !s[n]) {
		a->reg_off = reg_offset(reg);
	} else if (sscanf(s, "%lli(%%%15[a-z0-9])%n", &off, reg, &n) == 2 && !s[n]) {
		a->deref = true;
		a->off = off;
		a->reg_off = reg_offset(reg);
	} else if (sscanf(s, "(%%%15[a-z0-9])%n", reg, &n) == 1 && !s[n]) {
		a->deref = true;
		a->reg_off = reg_offset(reg);
	} else if (sscanf(s, "[%15[a-z0-9], %lli]%n", reg, &off, &n) == 2 && !s[n]) {
		a->deref = true;
		a->off = off;
		a->reg_off = reg_offset(reg);
	} else if (sscanf(s, "[%15[a-z0-9]]%n", reg, &n) == 1 && !s[n]) {
		a->deref = true;
		a->reg_off = reg_offset(reg);
	} else if (sscanf(s, "%15[a-z0-9]%n", reg, &n) == 1 && !s[n] &&
		   isalpha((unsigned char)*s)) {
		a->reg_off = reg_offset(reg);
	} else if (isdigit((unsigned char)*s) || *s == '-') {
		a->is_const = true;
		a->off = strtoll(s, NULL, 0);
		return 0;
	} else {
		return -EINVAL;
	}
	return a->reg_off < 0 ? -EINVAL : 0;
}

int usdt_arg_parse(const char *args, int n, struct usdt_arg *out)
{
	const char *p = args;
	char tok[64];
	int len, size;

	memset(out, 0, sizeof(*out));
	out->reg_off = -1;
	for (int i = 0;; i++) {
		while (*p == ' ')
			p++;
		if (!*p)
			return -ENOENT;
		/* arm64 "[x29, -12]" holds a space: a token ends at a space outside brackets. */
		len = 0;
		for (int depth = 0; p[len] && (p[len] != ' ' || depth); len++)
			depth += (p[len] == '[') - (p[len] == ']');
		if (i == n)
			break;
		p += len;
	}
	if (len >= (int)sizeof(tok))
		return -EINVAL;
	memcpy(tok, p, len);
	tok[len] = '\0';
	if (sscanf(tok, "%d@%n", &size, &len) != 1 || tok[len] == '\0')
		return -EINVAL;
	/* An argument is 1, 2, 4 or 8 bytes, negative when signed: anything else is corrupt. */
	if (abs(size) != 1 && abs(size) != 2 && abs(size) != 4 && abs(size) != 8)
		return -EINVAL;
	out->size = size;
	return parse_loc(tok + len, out);
}

/*
 * Search-path components tried per library, and DT_NEEDED entries handled: far more than a
 * real DT_RUNPATH, LD_LIBRARY_PATH or binary has (a few, and tens), and they keep a hostile
 * file's thousands of entries times thousands of components from becoming millions of
 * access() calls.
 */
#define MAX_SEARCH_DIRS 64
#define MAX_NEEDED 1024

/* The first readable dirs[k]/lib into out, dirs being ':'-separated ($ORIGIN expanded). */
static bool find_in_dirs(const char *dirs, const char *origin, const char *lib, char *out,
			 size_t len)
{
	int tried = 0;
	size_t n;

	for (const char *d = dirs; *d && tried < MAX_SEARCH_DIRS; d += n + (d[n] == ':')) {
		n = strcspn(d, ":");
		if (!n) /* "a::b" */
			continue;
		tried++;
		if (n >= 7 && !strncmp(d, "$ORIGIN", 7))
			snprintf(out, len, "%s%.*s/%s", origin, (int)n - 7, d + 7, lib);
		else if (n >= 9 && !strncmp(d, "${ORIGIN}", 9))
			snprintf(out, len, "%s%.*s/%s", origin, (int)n - 9, d + 9, lib);
		else
			snprintf(out, len, "%.*s/%s", (int)n, d, lib);
		if (access(out, R_OK) == 0)
			return true;
	}
	return false;
}

/* Whether lib is among the n names of seen; if not, adds it (seen holds MAX_NEEDED). */
static bool seen_before(const char **seen, size_t *n, const char *lib)
{
	for (size_t i = 0; i < *n; i++)
		if (!strcmp(seen[i], lib))
			return true;
	if (*n < MAX_NEEDED)
		seen[(*n)++] = lib;
	return false;
}

int elf_needed_paths(int fd, const char *self_path, const char *ld_library_path,
		     void (*fn)(void *arg, const char *path), void *arg)
{
	static const char *const std_dirs =
#if defined(__x86_64__)
		"/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu:"
#elif defined(__aarch64__)
		"/lib/aarch64-linux-gnu:/usr/lib/aarch64-linux-gnu:"
#endif
		"/lib64:/usr/lib64:/lib:/usr/lib:/usr/local/lib";
	Elf *elf = elf_open_fd(fd);
	char origin[PATH_MAX], path[PATH_MAX + 256];
	const char *slash = strrchr(self_path, '/'), *rpath = NULL, *seen[MAX_NEEDED];
	size_t n = 0, nseen = 0, dynsz;
	Elf_Data *d = NULL;
	Elf_Scn *scn;
	GElf_Shdr sh;

	if (!elf)
		return -EINVAL;
	snprintf(origin, sizeof(origin), "%.*s", slash ? (int)(slash - self_path) : 1,
		 slash ? self_path : ".");
	scn = first_scn(elf, SHT_DYNAMIC, &sh);
	if (scn)
		d = elf_getdata(scn, NULL);
	/* The entries libelf read, not the count sh_size / sh_entsize claims. */
	dynsz = gelf_fsize(elf, ELF_T_DYN, 1, EV_CURRENT);
	if (d && d->d_type == ELF_T_DYN && dynsz)
		n = d->d_size / dynsz;
	for (size_t i = 0; i < n; i++) {
		GElf_Dyn dyn;

		if (gelf_getdyn(d, (int)i, &dyn) &&
		    (dyn.d_tag == DT_RUNPATH || dyn.d_tag == DT_RPATH))
			rpath = elf_strptr(elf, sh.sh_link, dyn.d_un.d_val);
	}
	for (size_t i = 0, needed = 0; i < n && needed < MAX_NEEDED; i++) {
		GElf_Dyn dyn;
		const char *lib;

		if (!gelf_getdyn(d, (int)i, &dyn) || dyn.d_tag != DT_NEEDED)
			continue;
		needed++;
		lib = elf_strptr(elf, sh.sh_link, dyn.d_un.d_val);
		/* Each name is looked up (and reported) once, however often it is listed. */
		if (!lib || strchr(lib, '/') || seen_before(seen, &nseen, lib))
			continue;
		if ((rpath && find_in_dirs(rpath, origin, lib, path, sizeof(path))) ||
		    (ld_library_path &&
		     find_in_dirs(ld_library_path, origin, lib, path, sizeof(path))) ||
		    find_in_dirs(std_dirs, origin, lib, path, sizeof(path)))
			fn(arg, path);
	}
	elf_end(elf);
	return 0;
}
