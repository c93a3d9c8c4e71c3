// SPDX-License-Identifier: MIT
/*
 * What the injector needs to know of the target's address space: its mappings, and the
 * addresses of dlopen & co and of two instruction sequences in its libc, read from the
 * dynamic sections of the loaded objects in the target's memory.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "inject_internal.h"

int rmaps_read(const char *proc_root, pid_t pid, struct rmaps *m)
{
	char path[96], line[4352];
	size_t cap = 0;
	FILE *fp;

	m->v = NULL;
	m->n = 0;
	snprintf(path, sizeof(path), "%s/%d/maps", proc_root ? proc_root : "/proc", (int)pid);
	fp = fopen(path, "re");
	if (!fp)
		return -errno;
	while (fgets(line, sizeof(line), fp)) {
		struct rmap r = {0};
		int pos = 0;

		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %4s %" SCNx64 " %*s %" SCNu64 " %n",
			   &r.start, &r.end, r.perms, &r.offset, &r.inode, &pos) < 5)
			continue;
		line[strcspn(line, "\n")] = '\0';
		r.path = strdup(pos ? line + pos : "");
		if (!r.path)
			goto nomem;
		if (m->n == cap) {
			struct rmap *v = realloc(m->v, (cap ? 2 * cap : 128) * sizeof(*v));

			if (!v) {
				free(r.path);
				goto nomem;
			}
			m->v = v;
			cap = cap ? 2 * cap : 128;
		}
		m->v[m->n++] = r;
	}
	fclose(fp);
	return m->n ? 0 : -ESRCH;
nomem:
	fclose(fp);
	rmaps_free(m);
	return -ENOMEM;
}

void rmaps_free(struct rmaps *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->v[i].path);
	free(m->v);
	m->v = NULL;
	m->n = 0;
}

const struct rmap *rmaps_find(const struct rmaps *m, uint64_t addr)
{
	for (size_t i = 0; i < m->n; i++)
		if (addr >= m->v[i].start && addr < m->v[i].end)
			return &m->v[i];
	return NULL;
}

static int mem_fallback(pid_t pid, uint64_t addr, void *buf, size_t len, bool wr)
{
	char path[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	fd = open(path, (wr ? O_RDWR : O_RDONLY) | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = wr ? pwrite(fd, buf, len, (off_t)addr) : pread(fd, buf, len, (off_t)addr);
	close(fd);
	return n == (ssize_t)len ? 0 : n < 0 ? -errno : -EIO;
}

int rmem_read(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec l = {buf, len}, r = {(void *)(uintptr_t)addr, len};
	ssize_t n = process_vm_readv(pid, &l, 1, &r, 1, 0);

	if (n == (ssize_t)len)
		return 0;
	if (n < 0 && errno != ENOSYS && errno != EPERM)
		return -errno;
	return mem_fallback(pid, addr, buf, len, false);
}

int rmem_write(pid_t pid, uint64_t addr, const void *buf, size_t len)
{
	struct iovec l = {(void *)buf, len}, r = {(void *)(uintptr_t)addr, len};
	ssize_t n = process_vm_writev(pid, &l, 1, &r, 1, 0);

	if (n == (ssize_t)len)
		return 0;
	/* EFAULT: a page without write permission (the stub's), which /proc/PID/mem writes */
	if (n < 0 && errno != ENOSYS && errno != EPERM && errno != EFAULT)
		return -errno;
	return mem_fallback(pid, addr, (void *)buf, len, true);
}

/* --- dynamic symbols, read from the loaded image ------------------------------------------ */

struct dynobj {
	uint64_t bias; /* load bias: runtime address = bias + p_vaddr */
	uint64_t symtab, strtab, strsz, gnu_hash, hash, versym;
};

/* The dynamic section of the object whose ELF header is mapped at base. */
static int dyn_open(pid_t pid, uint64_t base, struct dynobj *o)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph;
	uint64_t dyn = 0, lo = UINT64_MAX;

	memset(o, 0, sizeof(*o));
	if (rmem_read(pid, base, &eh, sizeof(eh)) || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(ph) || eh.e_phnum > 64)
		return -ENOEXEC;
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		if (rmem_read(pid, base + eh.e_phoff + i * sizeof(ph), &ph, sizeof(ph)))
			return -EFAULT;
		if (ph.p_type == PT_LOAD && ph.p_vaddr < lo)
			lo = ph.p_vaddr;
		else if (ph.p_type == PT_DYNAMIC)
			dyn = ph.p_vaddr;
	}
	if (!dyn || lo == UINT64_MAX)
		return -ENOENT;
	o->bias = base - (lo & ~(uint64_t)4095);
	for (uint64_t at = o->bias + dyn;; at += sizeof(Elf64_Dyn)) {
		Elf64_Dyn d;
		uint64_t v;

		if (rmem_read(pid, at, &d, sizeof(d)))
			return -EFAULT;
		if (d.d_tag == DT_NULL)
			break;
		/* ld.so adds the bias in place on x86-64; the vdso's are left relative */
		v = d.d_un.d_ptr < o->bias ? d.d_un.d_ptr + o->bias : d.d_un.d_ptr;
		switch (d.d_tag) {
		case DT_SYMTAB:
			o->symtab = v;
			break;
		case DT_STRTAB:
			o->strtab = v;
			break;
		case DT_STRSZ:
			o->strsz = d.d_un.d_val;
			break;
		case DT_GNU_HASH:
			o->gnu_hash = v;
			break;
		case DT_HASH:
			o->hash = v;
			break;
		case DT_VERSYM:
			o->versym = v;
			break;
		default:
			break;
		}
	}
	return o->symtab && o->strtab && (o->gnu_hash || o->hash) ? 0 : -ENOENT;
}

/*
 * Symbol idx if it is name, defined, and of the default version (dlopen has a GLIBC_2.2.5
 * compat version beside the GLIBC_2.34 default); 1: a match, 0: not.
 */
static int sym_match(pid_t pid, const struct dynobj *o, uint32_t idx, const char *name,
		     uint64_t *addr, uint64_t *size)
{
	size_t len = strlen(name) + 1;
	char buf[64];
	Elf64_Sym s;
	uint16_t ver = 0;

	if (len > sizeof(buf) ||
	    rmem_read(pid, o->symtab + (uint64_t)idx * sizeof(s), &s, sizeof(s)))
		return 0;
	if (s.st_shndx == SHN_UNDEF || !s.st_value || s.st_name >= o->strsz ||
	    rmem_read(pid, o->strtab + s.st_name, buf, len) || memcmp(buf, name, len))
		return 0;
	if (o->versym && !rmem_read(pid, o->versym + 2ULL * idx, &ver, sizeof(ver)) &&
	    (ver & 0x8000))
		return 0; /* a hidden (non-default) version */
	*addr = o->bias + s.st_value;
	if (size)
		*size = s.st_size;
	return 1;
}

static uint32_t gnu_hash(const char *s)
{
	uint32_t h = 5381;

	for (; *s; s++)
		h = h * 33 + (unsigned char)*s;
	return h;
}

static uint32_t sysv_hash(const char *s)
{
	uint32_t h = 0, g;

	for (; *s; s++) {
		h = (h << 4) + (unsigned char)*s;
		g = h & 0xf0000000;
		if (g)
			h ^= g >> 24;
		h &= ~g;
	}
	return h;
}

static int lookup_gnu(pid_t pid, const struct dynobj *o, const char *name, uint64_t *addr,
		      uint64_t *size)
{
	uint32_t hdr[4], h = gnu_hash(name), idx, ch;
	uint64_t buckets, chains;

	if (rmem_read(pid, o->gnu_hash, hdr, sizeof(hdr)) || !hdr[0])
		return -ENOENT;
	buckets = o->gnu_hash + sizeof(hdr) + 8ULL * hdr[2];
	chains = buckets + 4ULL * hdr[0];
	if (rmem_read(pid, buckets + 4ULL * (h % hdr[0]), &idx, sizeof(idx)) || idx < hdr[1])
		return -ENOENT;
	for (unsigned n = 0; n < 100000; n++, idx++) {
		if (rmem_read(pid, chains + 4ULL * (idx - hdr[1]), &ch, sizeof(ch)))
			return -EFAULT;
		if ((ch | 1) == (h | 1) && sym_match(pid, o, idx, name, addr, size))
			return 0;
		if (ch & 1)
			break;
	}
	return -ENOENT;
}

static int lookup_sysv(pid_t pid, const struct dynobj *o, const char *name, uint64_t *addr,
		       uint64_t *size)
{
	uint32_t hdr[2], idx;

	if (rmem_read(pid, o->hash, hdr, sizeof(hdr)) || !hdr[0] ||
	    rmem_read(pid, o->hash + 8 + 4ULL * (sysv_hash(name) % hdr[0]), &idx, sizeof(idx)))
		return -ENOENT;
	for (unsigned n = 0; idx && idx < hdr[1] && n < 100000; n++) {
		if (sym_match(pid, o, idx, name, addr, size))
			return 0;
		if (rmem_read(pid, o->hash + 8 + 4ULL * hdr[0] + 4ULL * idx, &idx, sizeof(idx)))
			return -EFAULT;
	}
	return -ENOENT;
}

int rsym_range(pid_t pid, uint64_t base, const char *name, uint64_t *addr, uint64_t *size)
{
	struct dynobj o;
	int err = dyn_open(pid, base, &o);

	if (err)
		return err;
	return o.gnu_hash ? lookup_gnu(pid, &o, name, addr, size)
			  : lookup_sysv(pid, &o, name, addr, size);
}

int rsym_lookup(pid_t pid, uint64_t base, const char *name, uint64_t *addr)
{
	return rsym_range(pid, base, name, addr, NULL);
}

/* --- finding the objects and the two instruction sequences -------------------------------- */

static const char *base_name(const char *path)
{
	const char *b = strrchr(path, '/');

	return b ? b + 1 : path;
}

/* Where the first mapping (offset 0) of the object whose file name starts with prefix is. */
static const struct rmap *find_object(const struct rmaps *m, const char *prefix)
{
	for (size_t i = 0; i < m->n; i++) {
		const struct rmap *r = &m->v[i];

		if (r->offset == 0 && r->path[0] == '/' &&
		    !strncmp(base_name(r->path), prefix, strlen(prefix)))
			return r;
	}
	return NULL;
}

/* The two sequences in the executable mappings of the file mapped at obj. */
static void find_gadgets(pid_t pid, const struct rmaps *m, const struct rmap *obj, struct rsyms *s)
{
	static const unsigned char sys_ret[] = {0x0f, 0x05, 0xc3};
	/* glibc's __restore_rt: mov $15, %rax; syscall (or the 32-bit mov form) */
	static const unsigned char rt1[] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};
	static const unsigned char rt2[] = {0xb8, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};
	enum { CHUNK = 65536, OVER = 16 };
	unsigned char *buf = malloc(CHUNK + OVER);

	for (size_t i = 0; buf && i < m->n && (!s->sys_ret || !s->sigreturn); i++) {
		const struct rmap *r = &m->v[i];

		if (r->inode != obj->inode || strcmp(r->path, obj->path) || r->perms[2] != 'x')
			continue;
		for (uint64_t at = r->start; at < r->end && (!s->sys_ret || !s->sigreturn);
		     at += CHUNK) {
			size_t len = r->end - at < CHUNK + OVER ? r->end - at : CHUNK + OVER;
			void *p;

			if (rmem_read(pid, at, buf, len))
				break;
			if (!s->sys_ret && (p = memmem(buf, len, sys_ret, sizeof(sys_ret))))
				s->sys_ret = at + ((unsigned char *)p - buf);
			if (!s->sigreturn && ((p = memmem(buf, len, rt1, sizeof(rt1))) ||
					      (p = memmem(buf, len, rt2, sizeof(rt2)))))
				s->sigreturn = at + ((unsigned char *)p - buf);
		}
	}
	free(buf);
}

int rsyms_find(pid_t pid, const struct rmaps *m, struct rsyms *s, char *msg, size_t msglen)
{
	const struct rmap *libc = find_object(m, "libc.so"), *libdl = find_object(m, "libdl.so");
	const struct rmap *from = libc;

	memset(s, 0, sizeof(*s));
	if (!libc)
		libc = find_object(m, "libc-2.");
	if (!libc) {
		snprintf(msg, msglen, "%s",
			 find_object(m, "ld-musl") || find_object(m, "libc.musl")
			     ? "it runs on musl, not glibc: no dlopen eprof can call"
			     : "it maps no libc.so: a static binary has no dlopen");
		return -ENOENT;
	}
	from = libc;
	/* glibc 2.34+: everything in libc; before: libdl, else libc's internal forms */
	if (rsym_lookup(pid, libc->start, "dlopen", &s->dlopen)) {
		from = libdl;
		if (!libdl || rsym_lookup(pid, libdl->start, "dlopen", &s->dlopen)) {
			from = libc;
			s->dlopen = 0;
			rsym_lookup(pid, libc->start, "__libc_dlopen_mode", &s->dlopen);
			rsym_lookup(pid, libc->start, "__libc_dlsym", &s->dlsym);
			rsym_lookup(pid, libc->start, "__libc_dlclose", &s->dlclose);
		}
	}
	if (!s->dlsym) {
		rsym_lookup(pid, from->start, "dlsym", &s->dlsym);
		rsym_lookup(pid, from->start, "dlclose", &s->dlclose);
		rsym_lookup(pid, from->start, "dlerror", &s->dlerror);
	}
	snprintf(s->from, sizeof(s->from), "%s", from->path);
	if (!s->dlopen || !s->dlsym || !s->dlclose) {
		snprintf(msg, msglen, "no dlopen, dlsym and dlclose in %s", from->path);
		return -ENOENT;
	}
	rsym_lookup(pid, libc->start, "__errno_location", &s->errno_loc);
	/* glibc 2.34+: in libc; before, in libpthread when the program maps it */
	if (rsym_lookup(pid, libc->start, "pthread_create", &s->pthread_create) ||
	    rsym_lookup(pid, libc->start, "pthread_detach", &s->pthread_detach)) {
		const struct rmap *pt = find_object(m, "libpthread.so");

		s->pthread_create = s->pthread_detach = 0;
		if (pt && (rsym_lookup(pid, pt->start, "pthread_create", &s->pthread_create) ||
			   rsym_lookup(pid, pt->start, "pthread_detach", &s->pthread_detach)))
			s->pthread_create = s->pthread_detach = 0;
	}
	find_gadgets(pid, m, libc, s);
	if (!s->sys_ret || !s->sigreturn) {
		/* without either, a thread could not find its way back if eprof died */
		snprintf(msg, msglen, "no '%s' sequence in %s",
			 s->sys_ret ? "rt_sigreturn" : "syscall; ret", libc->path);
		return -ENOENT;
	}
	return 0;
}
