// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kbtf.h"
#include "util/fdio.h"

#define BTF_MAGIC 0xeB9F
#define KBTF_MAX_STRS (64u << 20) /* vmlinux's is ~2 MB */

struct kbtf_header {
	uint16_t magic;
	uint8_t version, flags;
	uint32_t hdr_len;
	uint32_t type_off, type_len; /* from the end of the header */
	uint32_t str_off, str_len;
};

bool kbtf_strtab_has(const char *strs, size_t len, const char *name)
{
	size_t n = strlen(name) + 1; /* with its NUL: a whole string, not a prefix */
	const char *p = strs, *end = strs + len;

	if (n < 2)
		return false;
	while ((size_t)(end - p) >= n) {
		const char *hit = memmem(p, (size_t)(end - p), name, n);

		if (!hit)
			return false;
		if (hit == strs || hit[-1] == '\0') /* ...and not a suffix */
			return true;
		p = hit + 1;
	}
	return false;
}

int kbtf_has_names(const char *path, const char *const *names, size_t n, bool *found)
{
	struct kbtf_header h;
	char *strs = NULL;
	struct stat st;
	uint64_t start;
	int fd, err;

	for (size_t i = 0; i < n; i++)
		found[i] = false;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	err = fd_pread_full(fd, &h, sizeof(h), 0);
	if (err)
		goto out;
	start = (uint64_t)h.hdr_len + h.str_off;
	/* sysfs files have no size (0): only a real file's is checked against the table */
	if (h.magic != BTF_MAGIC || h.hdr_len < sizeof(h) || h.str_len > KBTF_MAX_STRS ||
	    fstat(fd, &st) || (st.st_size && start + h.str_len > (uint64_t)st.st_size)) {
		err = -EINVAL;
		goto out;
	}
	strs = malloc(h.str_len ? h.str_len : 1);
	if (!strs) {
		err = -ENOMEM;
		goto out;
	}
	err = fd_pread_full(fd, strs, h.str_len, (off_t)start);
	for (size_t i = 0; !err && i < n; i++)
		found[i] = kbtf_strtab_has(strs, h.str_len, names[i]);
out:
	free(strs);
	close(fd);
	return err;
}
