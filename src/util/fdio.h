/* SPDX-License-Identifier: MIT */
/* Whole reads and writes on a file descriptor: short counts and EINTR retried. */
#ifndef EPROF_FDIO_H
#define EPROF_FDIO_H

#include <stddef.h>
#include <sys/types.h>

/* len bytes at off: 0, -ENODATA when the file ends first, or -errno. */
int fd_pread_full(int fd, void *buf, size_t len, off_t off);
/* Up to len bytes at off, fewer only at the end of the file: the count, or -errno. */
ssize_t fd_pread_upto(int fd, void *buf, size_t len, off_t off);
/* All of buf: 0, or -errno (-EIO when write() returns 0). */
int fd_write_full(int fd, const void *buf, size_t len);

#endif
