// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/openat2.h>
#include <gelf.h>
#include <string.h>

#include "elf_layout.h"

int elf_layout_read(int fd, struct elf_layout *out)
{
	size_t nph = 0;
	GElf_Ehdr eh;
	Elf *elf;

	memset(out, 0, sizeof(*out));
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf)
		return -EINVAL;
	if (elf_kind(elf) != ELF_K_ELF || elf_getphdrnum(elf, &nph) || !gelf_getehdr(elf, &eh)) {
		elf_end(elf);
		return -EINVAL;
	}
	out->entry = eh.e_entry;
	for (size_t i = 0; i < nph && out->nsegs < ELF_LAYOUT_MAX_SEGS; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, i, &ph) || ph.p_type != PT_LOAD)
			continue;
		out->segs[out->nsegs].off = ph.p_offset;
		out->segs[out->nsegs].vaddr = ph.p_vaddr;
		out->segs[out->nsegs].filesz = ph.p_filesz;
		out->nsegs++;
	}
	elf_end(elf);
	return 0;
}

bool elf_layout_vaddr(const struct elf_layout *l, uint64_t off, uint64_t *vaddr)
{
	for (int i = 0; i < l->nsegs; i++) {
		if (off >= l->segs[i].off && off < l->segs[i].off + l->segs[i].filesz) {
			*vaddr = off - l->segs[i].off + l->segs[i].vaddr;
			return true;
		}
	}
	return false;
}

int open_regular(const char *path)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		errno = EINVAL;
		return -1;
	}
	/* Regular files ignore O_NONBLOCK; clear it anyway for the readers that follow. */
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	return fd;
}

/* Without openat2: one component at a time, none of them a symlink. */
static int open_walk(int rootfd, const char *path)
{
	char comp[NAME_MAX + 1];
	int dir = rootfd, fd;

	for (;;) {
		size_t n = strcspn(path, "/");

		if (!n || n > NAME_MAX || (n <= 2 && !strncmp(path, "..", n))) {
			fd = -1;
			errno = EINVAL;
			break;
		}
		memcpy(comp, path, n);
		comp[n] = '\0';
		path += n;
		while (*path == '/')
			path++;
		fd = openat(dir, comp,
			    (*path ? O_PATH | O_DIRECTORY : O_RDONLY | O_NONBLOCK) | O_NOFOLLOW |
				    O_CLOEXEC);
		if (dir != rootfd)
			close(dir);
		if (fd < 0 || !*path)
			break;
		dir = fd;
	}
	return fd;
}

int open_in_root(int rootfd, const char *path, bool nofollow)
{
	struct open_how how = { .flags = O_RDONLY | O_NONBLOCK | O_CLOEXEC,
				.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
	struct stat st;
	int fd;

	while (*path == '/')
		path++;
	if (nofollow) {
		how.flags |= O_NOFOLLOW;
		how.resolve |= RESOLVE_NO_SYMLINKS;
	}
	fd = (int)syscall(SYS_openat2, rootfd, path, &how, sizeof(how));
	if (fd < 0 && errno == ENOSYS)
		fd = nofollow ? open_walk(rootfd, path)
			      : openat(rootfd, path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		errno = EINVAL;
		return -1;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	return fd;
}

int elf_scn_inflated_size(Elf *elf, Elf_Scn *scn, uint64_t *claimed)
{
	size_t shstrndx;
	const char *name;
	Elf_Data *raw;
	GElf_Shdr sh;
	GElf_Chdr ch;

	if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
		return 0;
	if (sh.sh_flags & SHF_COMPRESSED) {
		if (!gelf_getchdr(scn, &ch))
			return -1;
		*claimed = ch.ch_size;
		return 1;
	}
	if (elf_getshdrstrndx(elf, &shstrndx) || !(name = elf_strptr(elf, shstrndx, sh.sh_name)) ||
	    strncmp(name, ".zdebug", 7))
		return 0;
	raw = elf_rawdata(scn, NULL);
	if (!raw || !raw->d_buf || raw->d_size < 12 || memcmp(raw->d_buf, "ZLIB", 4))
		return -1;
	*claimed = 0;
	for (int i = 4; i < 12; i++)
		*claimed = *claimed << 8 | ((const uint8_t *)raw->d_buf)[i];
	return 1;
}

bool elf_inflate_plausible(uint64_t claimed, uint64_t stored)
{
	return claimed <= stored * 64 + (1u << 20);
}
