// SPDX-License-Identifier: MIT
#include "util/fdio.h"

#include <errno.h>
#include <unistd.h>

ssize_t fd_pread_upto(int fd, void *buf, size_t len, off_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done, off + (off_t)done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (!n)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

int fd_pread_full(int fd, void *buf, size_t len, off_t off)
{
	ssize_t n = fd_pread_upto(fd, buf, len, off);

	if (n < 0)
		return (int)n;
	return (size_t)n == len ? 0 : -ENODATA;
}

int fd_write_full(int fd, const void *buf, size_t len)
{
	const char *c = buf;

	while (len) {
		ssize_t n = write(fd, c, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (!n)
			return -EIO;
		c += n;
		len -= (size_t)n;
	}
	return 0;
}
